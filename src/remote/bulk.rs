//! [`Bulk<T>`]: an array of plain data that travels between locales as
//! its bytes, never element by element as serde moves a `Vec<T>` of most
//! types (the codec moves a `Vec` of `u8`, `i8`, `f32` or `f64` as its
//! bytes, but with a copy more each way than a `Bulk`), and in
//! as few copies as the transport allows: one each way for a large array
//! on shared memory.
//!
//! A `Bulk<T>` is a `Vec<T>` (made from one and turned back into one
//! without a copy) whose `Serialize` writes the elements' bytes as one
//! byte string, so it is a field like any other of a remote call's
//! arguments or result, a Chant message (`chant::send_value`), or a
//! balanced piece of work, among other fields and nested in them. Two
//! things make a large one cheap (`remote/README.md`, "Bulk arrays"):
//!
//! - **Sent from where it lies.** While a call or a reply is encoded for
//!   sending (`encode.rs`, "Gathering"), a `Bulk` of [`PIN_MIN`] bytes or
//!   more is not copied into the encoding: the encoding names it, and the
//!   transport copies it once, straight into the ring, the rendezvous
//!   block or MPI's buffer. The encoding holds a reference count on the
//!   elements meanwhile, so they can be neither freed nor changed (a
//!   `Bulk` changed while shared copies itself first), whatever the
//!   program does during the send. Its bytes are placed, by padding, at a
//!   multiple of 64 bytes from the frame's start.
//! - **Received in place.** A `Bulk` decoded from a frame the transport
//!   lent (a rendezvous block, MPI's receive buffer) keeps its elements
//!   where they arrived, if they are aligned for `T` (the padding sees to
//!   it), instead of copying them: it holds the frame until it is
//!   dropped, and may change its elements there (a frame that came whole:
//!   up to a rendezvous block on shared memory, 1 GiB over MPI to another
//!   node; a larger one comes in fragments, copied together). A `Bulk`
//!   that holds up a rendezvous area makes its sender's later large
//!   frames go in ring pieces (`comm/shm/README.md`, rule L): keep such
//!   an array long, and [`into_vec`](Bulk::into_vec) it.
//! - **Answered in place.** A remote call that returns such an array
//!   (changed in place or not), with no clone of it left, sends its reply
//!   in the request's own block on shared memory, and so does a Chant
//!   task that gives it up to `chant::send_value` for a task of the
//!   locale it came from: the array is not copied back at all
//!   (`comm/shm/README.md`, rule R).
//!
//! The bytes are in the machine's own order: every locale of a job runs
//! the same binary on one architecture.

use crate::comm::transport::Lent;
use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeTuple, Serializer};
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

/// The least array, in bytes, that is sent from where it lies (pinned,
/// not copied into the encoding) and received in place: below it, a copy
/// costs less than the extra piece of the frame and the reference count.
pub(crate) const PIN_MIN: usize = 4096;

/// Pinned bytes start this far apart from the frame's start (a cache line,
/// and aligned for any plain type).
pub(crate) const PIN_ALIGN: usize = 64;

/// An array of plain data (`T: bytemuck::Pod`: integers, floats,
/// `#[repr(C)]` structs of them) that travels as its bytes: give a large
/// array in a remote call, a Chant message or a balanced piece this type
/// instead of `Vec<T>`, which serde encodes element by element (but for
/// `u8`, `i8`, `f32` and `f64`, whose `Vec`s the codec copies whole; a
/// `Bulk` still saves a copy each way and may be received in place).
///
/// ```
/// use cantus::Bulk;
/// use serde::{Deserialize, Serialize};
///
/// /// Scales a block of a vector on another locale, and sends it back.
/// #[derive(Serialize, Deserialize)]
/// struct Scale {
///     by: f64,
///     block: Bulk<f64>,
/// }
///
/// impl cantus::Remote for Scale {
///     type Output = Bulk<f64>;
///     fn run(mut self) -> Bulk<f64> {
///         self.block.iter_mut().for_each(|x| *x *= self.by);
///         self.block
///     }
/// }
/// cantus::remote!(Scale);
///
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let block = Bulk::from(vec![1.0, 2.0, 3.0]);
/// let back = rt
///     .block_on(|| cantus::on(cantus::here(), Scale { by: 2.0, block }).join())
///     .unwrap();
/// assert_eq!(back.into_vec(), [2.0, 4.0, 6.0]);
/// ```
///
/// Cloning a `Bulk` shares its elements; the first change to one of the
/// clones copies them (as `Arc::make_mut`).
///
/// Only plain data may be bulk: a type with pointers is refused.
///
/// ```compile_fail
/// let _ = cantus::Bulk::from(vec![String::from("no")]);
/// ```
pub struct Bulk<T: bytemuck::Pod> {
    data: Arc<Data<T>>,
}

/// Where a [`Bulk`]'s elements lie.
enum Data<T> {
    /// In a vector of this process.
    Own(Vec<T>),
    /// In a frame the transport lent: `len` elements at `ptr`, aligned,
    /// inside `frame`, which no other `Data` covers (see [`adopt`]).
    Lent {
        /// Held (never read through): keeps the frame lent.
        #[allow(dead_code)]
        frame: Arc<Lent>,
        ptr: NonNull<T>,
        len: usize,
    },
}

// SAFETY: a `Data` owns its elements as a `Vec<T>` does: its own vector,
// or a range of a lent frame that no other `Data` covers (the frame itself
// is `Send + Sync`, and is handed back from whichever thread drops the
// last reference). So it may move between threads where `T` may.
unsafe impl<T: Send> Send for Data<T> {}
// SAFETY: as for `Send`: `&Data` gives only `&[T]`.
unsafe impl<T: Sync> Sync for Data<T> {}

impl<T: bytemuck::Pod> Data<T> {
    fn as_slice(&self) -> &[T] {
        match self {
            Data::Own(v) => v,
            // SAFETY: `len` elements at `ptr` lie in `frame` (checked by
            // `adopt`), aligned for `T`, valid while `frame` is held (here);
            // any bytes are a valid `T` (`Pod`).
            Data::Lent { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T: bytemuck::Pod> Bulk<T> {
    /// An empty array.
    pub fn new() -> Bulk<T> {
        Bulk::from_vec(Vec::new())
    }

    /// The array `items`, without a copy.
    pub fn from_vec(items: Vec<T>) -> Bulk<T> {
        Bulk {
            data: Arc::new(Data::Own(items)),
        }
    }

    /// The elements, as a `Vec`: without a copy if they are in a vector of
    /// this process and not shared with a clone; else copied into a new
    /// one (an array received in place, [`is_in_place`](Self::is_in_place),
    /// which this lets go).
    pub fn into_vec(self) -> Vec<T> {
        match Arc::try_unwrap(self.data) {
            Ok(Data::Own(v)) => v,
            Ok(data) => copy_to_vec(data.as_slice()),
            Err(shared) => copy_to_vec(shared.as_slice()),
        }
    }

    /// The elements' bytes, as they travel.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self.data.as_slice())
    }

    /// Whether the elements lie where the transport received them (a large
    /// array decoded from a frame lent by the transport, without a copy).
    /// Such an array holds that memory until dropped or turned into a
    /// `Vec`.
    pub fn is_in_place(&self) -> bool {
        matches!(*self.data, Data::Lent { .. })
    }

    /// A reference count on the elements, which keeps their bytes where
    /// they are and unchanged while it lives (a change through another
    /// `Bulk` copies them first).
    fn pin(&self) -> crate::remote::encode::Pin {
        crate::remote::encode::Pin::new(self.as_bytes(), Keep(self.data.clone()))
    }
}

/// What a [`Pin`](crate::remote::encode::Pin) holds: the elements.
struct Keep<T>(Arc<Data<T>>);

impl<T: bytemuck::Pod> crate::remote::encode::PinKeep for Keep<T> {
    fn into_lent(mut self: Box<Self>) -> Result<Lent, Box<dyn crate::remote::encode::PinKeep>> {
        // `get_mut` answers only for a sole holder (no other `Arc`, no
        // `Weak`), and no other can appear meanwhile: nobody else holds one
        // to clone from.
        let sole = match Arc::get_mut(&mut self.0) {
            Some(Data::Lent { frame, .. }) => Arc::get_mut(frame).is_some(),
            _ => false,
        };
        if !sole {
            return Err(self);
        }
        match Arc::try_unwrap(self.0) {
            Ok(Data::Lent { frame, .. }) => match Arc::try_unwrap(frame) {
                Ok(lent) => Ok(lent),
                Err(_) => unreachable!("the frame's sole holder, checked above"),
            },
            _ => unreachable!("the elements' sole holder, lent, checked above"),
        }
    }
}

// SAFETY: a `Keep` is only held, never read through, and dropped from
// whichever thread: it frees a vector of plain data (no drop glue beyond
// the allocation) or hands a lent frame back, both from any thread.
unsafe impl<T> Send for Keep<T> {}
// SAFETY: as for `Send`: nothing is reached through a `&Keep`.
unsafe impl<T> Sync for Keep<T> {}

/// `items` copied into a new vector (one copy, no fill with zeros first).
fn copy_to_vec<T: bytemuck::Pod>(items: &[T]) -> Vec<T> {
    vec_from_bytes(bytemuck::cast_slice(items))
}

/// The `T`s whose bytes are `bytes` (any alignment; a whole number of
/// non-zero-sized `T`s), copied once into a new, aligned vector (no fill
/// with zeros first).
fn vec_from_bytes<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / std::mem::size_of::<T>();
    debug_assert_eq!(n * std::mem::size_of::<T>(), bytes.len());
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: the vector has room for `n` elements, `n * size_of::<T>()
    // == bytes.len()` bytes, which the copy fills (its spare room cannot
    // overlap `bytes`, a shared borrow); any bytes are a valid `T` (`Pod`),
    // so the new length covers written elements only.
    unsafe {
        crate::copy::copy_raw(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len());
        v.set_len(n);
    }
    v
}

impl<T: bytemuck::Pod> Default for Bulk<T> {
    fn default() -> Bulk<T> {
        Bulk::new()
    }
}

impl<T: bytemuck::Pod> Clone for Bulk<T> {
    /// Shares the elements (the first change to either copies them).
    fn clone(&self) -> Bulk<T> {
        Bulk {
            data: self.data.clone(),
        }
    }
}

impl<T: bytemuck::Pod> Deref for Bulk<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data.as_slice()
    }
}

impl<T: bytemuck::Pod> DerefMut for Bulk<T> {
    /// The elements, to change: where they are if this `Bulk` alone holds
    /// them, else copied first into a vector of its own.
    fn deref_mut(&mut self) -> &mut [T] {
        if Arc::get_mut(&mut self.data).is_none() {
            self.data = Arc::new(Data::Own(copy_to_vec(self.data.as_slice())));
        }
        match Arc::get_mut(&mut self.data).expect("held by this Bulk alone") {
            Data::Own(v) => v,
            // SAFETY: this `Bulk` alone holds the `Data` (`get_mut`), whose
            // range of the frame no other `Data` covers and nothing else
            // reads (the frame's decoding is over: `adopt`); `ptr` was made
            // from the frame's writable pointer (`Lent::as_mut_ptr`), and
            // the frame is valid while held (here). The transport neither
            // reads nor writes a lent frame's bytes until it is handed back.
            Data::Lent { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T: bytemuck::Pod + PartialEq> PartialEq for Bulk<T> {
    fn eq(&self, other: &Bulk<T>) -> bool {
        **self == **other
    }
}

impl<T: bytemuck::Pod + Eq> Eq for Bulk<T> {}

impl<T: bytemuck::Pod + PartialOrd> PartialOrd for Bulk<T> {
    fn partial_cmp(&self, other: &Bulk<T>) -> Option<std::cmp::Ordering> {
        (**self).partial_cmp(&**other)
    }
}

impl<T: bytemuck::Pod + Ord> Ord for Bulk<T> {
    fn cmp(&self, other: &Bulk<T>) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl<T: bytemuck::Pod + std::hash::Hash> std::hash::Hash for Bulk<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl<T: bytemuck::Pod> From<Vec<T>> for Bulk<T> {
    fn from(items: Vec<T>) -> Bulk<T> {
        Bulk::from_vec(items)
    }
}

impl<T: bytemuck::Pod> From<&[T]> for Bulk<T> {
    fn from(items: &[T]) -> Bulk<T> {
        Bulk::from_vec(items.to_vec())
    }
}

impl<T: bytemuck::Pod> From<Bulk<T>> for Vec<T> {
    fn from(bulk: Bulk<T>) -> Vec<T> {
        bulk.into_vec()
    }
}

impl<T: bytemuck::Pod> FromIterator<T> for Bulk<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Bulk<T> {
        Bulk::from_vec(iter.into_iter().collect())
    }
}

impl<T: bytemuck::Pod> IntoIterator for Bulk<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<T: bytemuck::Pod + fmt::Debug> fmt::Debug for Bulk<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Bulk").field(&&**self).finish()
    }
}

/// The wire form: two byte strings, padding (ignored; a few zero bytes
/// that place the elements at a multiple of 64 bytes from the frame's
/// start, when the array is pinned), then the elements' bytes.
impl<T: bytemuck::Pod> Serialize for Bulk<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.as_bytes();
        let mut t = s.serialize_tuple(2)?;
        // While a send's encoding gathers, a large array is pinned: the
        // encoding names it instead of copying it, and sizes the padding.
        let _offered = (bytes.len() >= PIN_MIN && crate::remote::encode::gathering())
            .then(|| crate::remote::encode::offer(self.pin()));
        let pad: &[u8] = if _offered.is_some() {
            &crate::remote::encode::PAD_PROBE
        } else {
            &[]
        };
        t.serialize_element(&ByteString(pad))?;
        t.serialize_element(&ByteString(bytes))?;
        t.end()
    }
}

/// Bytes serialized as one byte string.
struct ByteString<'a>(&'a [u8]);

impl Serialize for ByteString<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl<'de, T: bytemuck::Pod> Deserialize<'de> for Bulk<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bulk<T>, D::Error> {
        d.deserialize_tuple(2, BulkVisitor(PhantomData))
    }
}

/// Builds a [`Bulk`] from its wire form.
struct BulkVisitor<T>(PhantomData<T>);

impl<'de, T: bytemuck::Pod> Visitor<'de> for BulkVisitor<T> {
    type Value = Bulk<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "padding and the bytes of an array of {}",
            std::any::type_name::<T>()
        )
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bulk<T>, A::Error> {
        let missing = || A::Error::invalid_length(0, &"padding, then the elements' bytes");
        let _pad: Chunk<'de> = seq.next_element()?.ok_or_else(missing)?;
        let bytes: Chunk<'de> = seq.next_element()?.ok_or_else(missing)?;
        let size = std::mem::size_of::<T>();
        let len = bytes.as_slice().len();
        if size == 0 {
            return match len {
                0 => Ok(Bulk::new()),
                n => Err(A::Error::invalid_length(
                    n,
                    &"no bytes for zero-sized elements",
                )),
            };
        }
        if len % size != 0 {
            return Err(A::Error::invalid_length(
                len,
                &format!("a multiple of {size} bytes (the size of one element)").as_str(),
            ));
        }
        if let Chunk::Borrowed(b) = bytes
            && let Some(data) = adopt::<T>(b)
        {
            return Ok(Bulk {
                data: Arc::new(data),
            });
        }
        Ok(Bulk::from_vec(vec_from_bytes(bytes.as_slice())))
    }
}

/// One byte string of the wire form: borrowed from the input where the
/// format lends it, else a copy.
enum Chunk<'de> {
    Borrowed(&'de [u8]),
    Owned(Vec<u8>),
}

impl Chunk<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Chunk::Borrowed(b) => b,
            Chunk::Owned(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for Chunk<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Chunk<'de>, D::Error> {
        d.deserialize_bytes(ChunkVisitor)
    }
}

struct ChunkVisitor;

impl<'de> Visitor<'de> for ChunkVisitor {
    type Value = Chunk<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_borrowed_bytes<E: Error>(self, b: &'de [u8]) -> Result<Chunk<'de>, E> {
        Ok(Chunk::Borrowed(b))
    }

    fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<Chunk<'de>, E> {
        Ok(Chunk::Owned(b.to_vec()))
    }

    fn visit_byte_buf<E: Error>(self, b: Vec<u8>) -> Result<Chunk<'de>, E> {
        Ok(Chunk::Owned(b))
    }

    /// A format with no byte strings (JSON): a sequence of bytes.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Chunk<'de>, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(byte) = seq.next_element::<u8>()? {
            bytes.push(byte);
        }
        Ok(Chunk::Owned(bytes))
    }
}

// ---- receiving in place ----

/// The lent frame a decoding may adopt bytes of ([`decode_in_place`]).
struct InPlace {
    frame: Arc<Lent>,
    /// The frame's bytes: `start..end` (addresses).
    start: usize,
    end: usize,
    /// Adopted ranges only grow past this (so no two overlap, whatever a
    /// `Deserialize` decodes twice).
    next: Cell<usize>,
}

thread_local! {
    /// The frame the decoding running on this thread may adopt from.
    static IN_PLACE: Cell<*const InPlace> = const { Cell::new(std::ptr::null()) };
}

/// Runs `decode` on the bytes of `frame` from `offset` on, letting the
/// [`Bulk`]s it decodes keep their elements in the frame (each holds it;
/// the frame goes back to the transport when the last is dropped).
pub(crate) fn decode_in_place<R>(frame: Lent, offset: usize, decode: impl FnOnce(&[u8]) -> R) -> R {
    if frame.len() - offset < PIN_MIN {
        // No array in it is large enough to keep its bytes in place
        // (`adopt`): read it, and the frame goes back, with no shared
        // handle made (small calls' hot path).
        return decode(&frame[offset..]);
    }
    let frame = Arc::new(frame);
    let bytes = &frame[offset..];
    let cx = InPlace {
        frame: frame.clone(),
        start: bytes.as_ptr() as usize,
        end: bytes.as_ptr() as usize + bytes.len(),
        next: Cell::new(0),
    };
    // The decoding this one runs inside is put back after.
    super::with_local(&IN_PLACE, &cx, || decode(bytes))
}

/// `bytes` as a range of the frame being decoded in place, if they lie in
/// it past every range adopted before, are a large array's, and are
/// aligned for `T`.
fn adopt<T: bytemuck::Pod>(bytes: &[u8]) -> Option<Data<T>> {
    let cx = IN_PLACE.with(Cell::get);
    if cx.is_null() || bytes.len() < PIN_MIN {
        return None;
    }
    // SAFETY: a non-null pointer is the `InPlace` of the `decode_in_place`
    // running on this thread, below us on the stack (it restores the
    // previous pointer before its `InPlace` goes).
    let cx = unsafe { &*cx };
    let (at, end) = (
        bytes.as_ptr() as usize,
        bytes.as_ptr() as usize + bytes.len(),
    );
    if at < cx.start.max(cx.next.get())
        || end > cx.end
        || at % std::mem::align_of::<T>() != 0
        || bytes.len() % std::mem::size_of::<T>() != 0
    {
        return None;
    }
    cx.next.set(end);
    // The elements' pointer, made from the frame's writable one (not from
    // the shared borrow `bytes`), so a `Bulk` alone may change them.
    let base = cx.frame.as_mut_ptr();
    // SAFETY: `at` lies in the frame (checked), so the offset stays within
    // the frame's bytes.
    let ptr = unsafe { base.add(at - cx.frame.as_ptr() as usize) };
    Some(Data::Lent {
        frame: cx.frame.clone(),
        ptr: NonNull::new(ptr.cast::<T>()).expect("a frame's bytes are never at null"),
        len: bytes.len() / std::mem::size_of::<T>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Particle {
        x: f64,
        y: f64,
        id: u32,
        kind: u32,
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Nested {
        name: String,
        values: Bulk<f64>,
        inner: (u8, Bulk<Particle>, Vec<Bulk<u16>>),
    }

    #[test]
    fn travels_as_its_bytes_nested_among_other_fields() {
        let value = Nested {
            name: "halo".into(),
            values: (0..1000).map(|i| i as f64 * 0.5).collect(),
            inner: (
                7,
                Bulk::from(vec![
                    Particle {
                        x: 1.0,
                        y: -2.0,
                        id: 3,
                        kind: 4
                    };
                    3
                ]),
                vec![Bulk::from(vec![1u16, 2, 3]), Bulk::new()],
            ),
        };
        let bytes = crate::remote::encode::encode_to_vec(&value).unwrap();
        // The f64s are one byte string: their 8000 bytes, as they are in
        // memory, appear whole in the encoding.
        let raw = value.values.as_bytes();
        assert!(bytes.windows(raw.len()).any(|w| w == raw));
        let back: Nested = crate::remote::codec::from_bytes(&bytes).unwrap();
        assert_eq!(back, value);
        // Decoded elements are aligned for their type, wherever the bytes
        // sat in the message.
        assert_eq!(
            back.inner.1.as_ptr() as usize % std::mem::align_of::<Particle>(),
            0
        );
    }

    #[test]
    fn a_vec_goes_in_and_out_without_a_copy() {
        let v: Vec<u64> = (0..100).collect();
        let at = v.as_ptr();
        let bulk = Bulk::from(v);
        assert_eq!(bulk.as_ptr(), at);
        assert_eq!(bulk[99], 99);
        let back = bulk.into_vec();
        assert_eq!(back.as_ptr(), at);
    }

    #[test]
    fn empty_and_ragged_byte_strings() {
        let empty: Bulk<f64> = crate::remote::codec::from_bytes(
            &crate::remote::encode::encode_to_vec(&Bulk::<f64>::new()).unwrap(),
        )
        .unwrap();
        assert!(empty.is_empty());
        // Twelve bytes are not a whole number of f64s: refused, not cut.
        let ragged = crate::remote::encode::encode_to_vec(&Bulk::from(vec![1u8; 12])).unwrap();
        let err = crate::remote::codec::from_bytes::<Bulk<f64>>(&ragged).unwrap_err();
        assert!(
            matches!(err, crate::remote::codec::Error::Custom(_)),
            "{err:?}"
        );
        // Truncated input is an error too.
        let whole = crate::remote::encode::encode_to_vec(&Bulk::from(vec![1.5f64; 16])).unwrap();
        assert!(crate::remote::codec::from_bytes::<Bulk<f64>>(&whole[..whole.len() - 1]).is_err());
    }

    #[test]
    fn a_format_without_byte_strings_reads_a_sequence_of_bytes() {
        // serde's test of `visit_seq`: a JSON array of the bytes.
        let bulk = Bulk::from(vec![258u16, 3]);
        let json = serde_json::to_string(&bulk).unwrap();
        let back: Bulk<u16> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, bulk);
    }
}
