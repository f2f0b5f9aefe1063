//! Encoding calls and messages (serde, the codec in `codec/`) for sending.
//!
//! **Reused buffers.** A call's arguments are encoded, sent (copied into
//! the transport) and dropped before the call returns, so the buffer they
//! were encoded into serves the next call of the thread, with no
//! allocation and no page faults once it is large enough.
//!
//! **Gathering.** An encoding for sending is an [`Encoding`]: bytes, and
//! between them *pinned* arrays: each large [`Bulk`](super::Bulk) (of
//! [`PIN_MIN`](super::bulk::PIN_MIN) bytes or more) met while encoding is
//! not copied into the bytes but named, with a reference count that keeps
//! its elements where they are, unchanged, until the encoding is dropped;
//! the transport then copies the frame's parts ([`Encoding::with_parts`])
//! once, straight to where it sends them from. The `Bulk` offers itself
//! ([`offer`]) just before serde hands its bytes to the encoder, which
//! recognizes them by address and length; it also writes a padding
//! ([`PAD_PROBE`]) that the encoder cuts to the length placing the
//! array's first byte at a multiple of 64 from the frame's start, so that
//! the receiver can keep it in place, aligned (`bulk.rs`).
//!
//! **Staging.** A frame sent as soon as it is encoded (a call's
//! arguments, a result, a Chant message by value) is encoded for its
//! destination ([`encode_for`], [`Encoding::stage_for`]). Where the codec
//! then hands over a large plain array ([`STAGE_MIN`] bytes or more: a
//! `Vec<f64>`'s bytes, a string's; not a `Bulk`, which is pinned), and no
//! array was pinned before it, the encoder asks the destination's
//! transport for room for the whole frame (`Transport::stage`: on shared
//! memory, a rendezvous block reserved for it, `comm/shm/README.md`,
//! rule S) and writes the bytes so far and the array straight into it,
//! at the place they take in the frame; later large arrays go there too,
//! the room made longer. The rest of the encoding (after the last staged
//! array) stays in the bytes, and the transport copies it, and the
//! frame's header, around the staged part when the frame is sent: the
//! array is copied once, from the value into the memory it is sent from,
//! instead of into a buffer and from there. An encoding whose room cannot
//! take its end is moved back into its bytes (one copy more, as before);
//! one dropped unsent gives its room back. The encoder does not hold the
//! room's lock while it runs (a `Serialize` may send, or wait), and other
//! frames go meanwhile as ever: the transport numbers the staged block
//! when it is sent.
//!
//! In debug builds, an encoding of 64 KiB or more that the codec wrote
//! in small pieces (a large `Vec<u32>` or `Vec<[f64; 3]>`, which serde
//! moves element by element; a `Vec` of `u8`, `i8`, `f32` or `f64` goes
//! in one piece) prints a hint, once per type, naming
//! [`Bulk`](super::Bulk), which moves such an array as its bytes.

use super::bulk::{PIN_ALIGN, PIN_MIN};
use super::codec::{self, Output};
use crate::comm::transport::{Lent, Staged};
use serde::Serialize;
use std::cell::Cell;
use std::sync::Mutex;

/// The largest buffer a thread keeps for the next encoding; a larger one
/// is freed after use.
const KEEP_AT_MOST: usize = 16 << 20;

thread_local! {
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
    /// Whether an encoding for sending runs on this thread (a `Bulk` then
    /// offers to be pinned).
    static GATHERING: Cell<bool> = const { Cell::new(false) };
    /// The `Bulk` whose bytes serde is about to hand to the encoder.
    static OFFERED: Cell<Option<Pin>> = const { Cell::new(None) };
}

/// The padding a pinned `Bulk` writes before its bytes: the encoder cuts
/// it to the length that aligns them (its one-byte length, 63, is
/// rewritten in place), others keep it whole (harmless: the reader skips
/// padding).
pub(crate) static PAD_PROBE: [u8; PIN_ALIGN - 1] = [0; PIN_ALIGN - 1];

/// The least plain array (a `Vec<f64>`'s bytes, a string's) written
/// straight into the room the transport reserves for its frame: where
/// the frame is surely larger than a ring frame (64 KiB by default), once
/// the bytes around it are counted.
const STAGE_MIN: usize = 32 << 10;

/// The room reserved after a staged array, for the bytes that follow it
/// (made longer, if they need more, when the encoding ends).
const STAGE_TAIL: usize = 4 << 10;

/// A large array's bytes, named by an encoding instead of copied into it:
/// valid and unchanged while the pin lives (it holds the array).
pub(crate) struct Pin {
    ptr: *const u8,
    len: usize,
    keep: Box<dyn PinKeep>,
}

/// What a [`Pin`] holds to keep its bytes (a `Bulk`'s elements).
pub(crate) trait PinKeep: Send + Sync {
    /// The frame the bytes lie in, lent by the transport, if this is the
    /// only holder of the bytes and of that frame (a `Bulk` received in
    /// place, of which no clone and no other `Bulk` of its frame is
    /// left); else itself, unchanged.
    fn into_lent(self: Box<Self>) -> Result<Lent, Box<dyn PinKeep>>;
}

/// A lent frame as a pin's keep (one [`Encoding::take_lent_pin`] took and
/// gives back).
struct KeepLent(Lent);

impl PinKeep for KeepLent {
    fn into_lent(self: Box<Self>) -> Result<Lent, Box<dyn PinKeep>> {
        Ok(self.0)
    }
}

// SAFETY: a `Pin` reads its bytes only through `bytes()`, which `keep`
// keeps valid and unchanged on any thread; `keep` is `Send + Sync`.
unsafe impl Send for Pin {}
// SAFETY: as for `Send`: `&Pin` reads only.
unsafe impl Sync for Pin {}

impl Pin {
    /// Names `bytes`, which `keep` holds valid and unchanged while it
    /// lives (what the caller promises: `Bulk::pin`, a reference count on
    /// elements that a change through any `Bulk` copies first).
    pub(crate) fn new(bytes: &[u8], keep: impl PinKeep + 'static) -> Pin {
        Pin {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            keep: Box::new(keep),
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `Pin::new`'s caller's promise: the bytes stay valid and
        // unchanged while `keep` (held here) lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Whether an encoding for sending runs on this thread.
pub(crate) fn gathering() -> bool {
    GATHERING.with(Cell::get)
}

/// Offers `pin` to the encoding running on this thread, for the bytes
/// serde hands it next; withdrawn (if not taken) when the guard drops.
pub(crate) fn offer(pin: Pin) -> Offered {
    OFFERED.with(|o| o.set(Some(pin)));
    Offered(())
}

/// Withdraws an offered pin the encoder did not take.
pub(crate) struct Offered(());

impl Drop for Offered {
    fn drop(&mut self) {
        drop(OFFERED.with(Cell::take));
    }
}

/// An encoding: bytes, with pinned arrays between them, and maybe a
/// first part staged: written straight into the room the transport
/// reserved for the frame (*Staging* in the module doc).
pub(crate) struct Encoding {
    /// The bytes (after the staged part, if any).
    pub(crate) bytes: Vec<u8>,
    /// Each pinned array, after `bytes[..at]` (in order).
    pins: Vec<(usize, Pin)>,
    /// The pinned arrays' bytes, in all.
    pinned: usize,
    /// The locale the encoding goes to, whose transport may stage it
    /// (`None`: never staged).
    stage_to: Option<usize>,
    /// The room reserved for the frame, holding the encoding's first
    /// `staged_len` bytes from its byte `staged_at` (where the encoding
    /// starts in the frame).
    staged: Option<Staged>,
    staged_at: usize,
    staged_len: usize,
}

impl Encoding {
    /// An empty encoding.
    pub(crate) const fn new() -> Encoding {
        Encoding {
            bytes: Vec::new(),
            pins: Vec::new(),
            pinned: 0,
            stage_to: None,
            staged: None,
            staged_at: 0,
            staged_len: 0,
        }
    }

    /// The bytes of the encoding, in all.
    pub(crate) fn len(&self) -> usize {
        self.staged_len + self.bytes.len() + self.pinned
    }

    /// Empties it, keeping the bytes' buffer (a staged part's room goes
    /// back to its transport), and forgets where it was to go.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.pins.clear();
        self.pinned = 0;
        self.stage_to = None;
        self.staged = None;
        self.staged_len = 0;
    }

    /// Lets the next encoding into this one (empty) write its large plain
    /// arrays straight into room `dest`'s transport reserves for the
    /// frame (*Staging* in the module doc): for an encoding sent to
    /// `dest`, as one frame, right after it is made.
    pub(crate) fn stage_for(&mut self, dest: usize) {
        self.stage_to = Some(dest);
    }

    /// The staged part: the encoding's first bytes, where they lie in the
    /// room reserved for the frame.
    fn staged_part(&self) -> Option<&[u8]> {
        let room = self.staged.as_ref()?;
        // SAFETY: the room is `room.len()` bytes at `room.as_mut_ptr()`,
        // reserved for this encoding while `staged` holds it and written
        // by its encoder from `staged_at` on, `staged_len` bytes, inside
        // the room (`Gather::stage`, `encode_into`); nothing writes them
        // while `&self` is borrowed.
        Some(unsafe {
            std::slice::from_raw_parts(room.as_mut_ptr().add(self.staged_at), self.staged_len)
        })
    }

    /// Moves the staged part back into the bytes, and gives the room
    /// back (the frame will not be sent from it).
    fn unstage(&mut self) {
        let Some(part) = self.staged_part() else {
            return;
        };
        let mut bytes = Vec::with_capacity(part.len() + self.bytes.len());
        crate::copy::extend(&mut bytes, part);
        crate::copy::extend(&mut bytes, &self.bytes);
        let moved = self.staged_len;
        for (at, _) in &mut self.pins {
            *at += moved;
        }
        self.bytes = bytes;
        self.staged = None;
        self.staged_len = 0;
    }

    /// Takes the one pinned array of the encoding, if it has exactly one
    /// and that one lies in a frame the transport lent which nothing else
    /// holds (`PinKeep::into_lent`): that frame, where the array lies in
    /// it, and where the array goes in the encoding (after `bytes[..at]`).
    /// [`put_back`](Self::put_back) undoes it.
    pub(crate) fn take_lent_pin(&mut self) -> Option<(Lent, std::ops::Range<usize>, usize)> {
        if self.pins.len() != 1 || self.staged.is_some() {
            return None;
        }
        let (at, pin) = self.pins.pop()?;
        let Pin { ptr, len, keep } = pin;
        match keep.into_lent() {
            Ok(lent) => {
                self.pinned = 0;
                let start = (ptr as usize).wrapping_sub(lent.as_ptr() as usize);
                debug_assert!(start.checked_add(len).is_some_and(|end| end <= lent.len()));
                Some((lent, start..start + len, at))
            }
            Err(keep) => {
                self.pins.push((at, Pin { ptr, len, keep }));
                None
            }
        }
    }

    /// Puts back what [`take_lent_pin`](Self::take_lent_pin) took: the
    /// array `lent[array]`, pinned after `bytes[..at]`.
    pub(crate) fn put_back(&mut self, lent: Lent, array: std::ops::Range<usize>, at: usize) {
        // The bytes lie where the frame does, wherever the `Lent` moves;
        // it keeps them valid and, held alone here, unchanged.
        let pin = Pin {
            ptr: lent[array.clone()].as_ptr(),
            len: array.len(),
            keep: Box::new(KeepLent(lent)),
        };
        self.pinned = pin.len;
        self.pins.push((at, pin));
    }

    /// Calls `f` with `prefix` and then the encoding's parts, in order (no
    /// empty ones): a frame to send, copied nowhere else first.
    pub(crate) fn with_parts<R>(&self, prefix: &[&[u8]], f: impl FnOnce(&[&[u8]]) -> R) -> R {
        let staged = self.staged_part();
        if self.pins.is_empty() {
            // The usual case: one part after the prefix (or two, the
            // staged part first).
            return match staged {
                None => with_head(prefix, &[&self.bytes], f),
                Some(part) if self.bytes.is_empty() => with_head(prefix, &[part], f),
                Some(part) => with_head(prefix, &[part, &self.bytes], f),
            };
        }
        let mut parts: Vec<&[u8]> = Vec::with_capacity(prefix.len() + 2 * self.pins.len() + 2);
        parts.extend_from_slice(prefix);
        parts.extend(staged);
        let mut from = 0;
        for (at, pin) in &self.pins {
            if *at > from {
                parts.push(&self.bytes[from..*at]);
            }
            parts.push(pin.bytes());
            from = *at;
        }
        if self.bytes.len() > from {
            parts.push(&self.bytes[from..]);
        }
        f(&parts)
    }
}

/// Calls `f` with the parts of `head` and then those of `rest`, as one
/// frame's list: on the stack for a few parts (no allocation per
/// message), else in a vector.
pub(crate) fn with_head<R>(head: &[&[u8]], rest: &[&[u8]], f: impl FnOnce(&[&[u8]]) -> R) -> R {
    const ON_STACK: usize = 6;
    let n = head.len() + rest.len();
    if n <= ON_STACK {
        let mut parts: [&[u8]; ON_STACK] = [&[]; ON_STACK];
        parts[..head.len()].copy_from_slice(head);
        parts[head.len()..n].copy_from_slice(rest);
        return f(&parts[..n]);
    }
    let mut parts = Vec::with_capacity(n);
    parts.extend_from_slice(head);
    parts.extend_from_slice(rest);
    f(&parts)
}

impl Default for Encoding {
    fn default() -> Encoding {
        Encoding::new()
    }
}

/// The codec's output appended to an [`Encoding`], pinning what `Bulk`s
/// offer. `at` is where the encoding starts in its frame (after the
/// header), for the padding.
struct Gather<'a> {
    /// The bytes, owned while encoding (a field of the output, not behind
    /// a reference: the per-element writes of a long sequence stay fast).
    bytes: Vec<u8>,
    /// The encoding's pins and their length in all (written rarely).
    pins: &'a mut Vec<(usize, Pin)>,
    pinned: &'a mut usize,
    at: usize,
    /// Where the encoding goes, while staging may still be tried.
    stage_to: Option<usize>,
    /// The encoding's staged room and the bytes written in it (from `at`).
    staged: &'a mut Option<Staged>,
    staged_len: &'a mut usize,
}

impl Gather<'_> {
    /// A write that may be a pinned array's padding or its bytes.
    #[cold]
    fn large_or_probe(&mut self, data: &[u8]) {
        if std::ptr::eq(data, &PAD_PROBE[..]) {
            let offered = OFFERED.with(|o| {
                let pin = o.take();
                let len = pin.as_ref().map(|p| p.len);
                o.set(pin);
                len
            });
            // The probe's one-byte length (63) was the last byte written.
            let from = self.at + *self.staged_len + self.bytes.len() + *self.pinned;
            if let (Some(len), Some(last)) = (offered, self.bytes.last_mut())
                && *last == PAD_PROBE.len() as u8
            {
                // The array's first byte lies past the padding and its
                // own length.
                let from = from + codec::varint_len(len);
                let pad = (PIN_ALIGN - from % PIN_ALIGN) % PIN_ALIGN;
                *last = pad as u8;
                self.bytes.extend_from_slice(&PAD_PROBE[..pad]);
                return;
            }
        } else if data.len() >= PIN_MIN {
            let pin = OFFERED.with(Cell::take);
            match pin {
                Some(pin) if std::ptr::eq(pin.bytes(), data) => {
                    *self.pinned += pin.len;
                    self.pins.push((self.bytes.len(), pin));
                    return;
                }
                other => OFFERED.with(|o| o.set(other)),
            }
            if data.len() >= STAGE_MIN && self.stage(data) {
                return;
            }
        }
        crate::copy::extend(&mut self.bytes, data);
    }

    /// Writes the bytes so far and then `data`, a large plain array's,
    /// straight into the room the transport reserves for the frame (the
    /// encoding's staged part: *Staging* in the module doc), reserving it
    /// or making it longer first; false (nothing written) where the
    /// encoding is not staged (no destination, a pinned array before
    /// this one, no room).
    fn stage(&mut self, data: &[u8]) -> bool {
        let Some(dest) = self.stage_to else {
            return false;
        };
        if !self.pins.is_empty() {
            // A pin's place is in the bytes after the staged part.
            return false;
        }
        let from = self.at + *self.staged_len;
        let need = from + self.bytes.len() + data.len();
        let reserved = match self.staged.as_mut() {
            Some(r) => r.len() >= need || r.resize(need + STAGE_TAIL) || r.resize(need),
            None => {
                *self.staged = super::engine().and_then(|e| e.stage(dest, need, need + STAGE_TAIL));
                self.staged.is_some()
            }
        };
        if !reserved {
            // Not tried again for this encoding.
            self.stage_to = None;
            return false;
        }
        let base = self.staged.as_ref().expect("reserved").as_mut_ptr();
        let head = self.bytes.len();
        // SAFETY: the room is at least `need` bytes at `base` (reserved
        // or resized just now), this encoding's alone until it is sent or
        // dropped; `from + head + data.len() == need`. Neither source lies
        // in it: the bytes' buffer is this process's heap, and the
        // value's memory, wherever it lies (the heap, or shared memory: a
        // frame lent to this locale, a block of ours returned and still
        // held, a segment), is not the free space of our area the room
        // was just made of.
        unsafe {
            crate::copy::copy_raw(self.bytes.as_ptr(), base.add(from), head);
            crate::copy::copy_raw(data.as_ptr(), base.add(from + head), data.len());
        }
        *self.staged_len += head + data.len();
        self.bytes.clear();
        true
    }
}

impl Output for Gather<'_> {
    #[inline]
    fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    #[inline]
    fn extend(&mut self, data: &[u8]) {
        if data.len() >= PIN_MIN || data.len() == PAD_PROBE.len() {
            self.large_or_probe(data);
        } else {
            self.bytes.extend_from_slice(data);
        }
    }
}

/// Encodes `value` at the end of `out`, pinning large
/// `Bulk`s; `at` is where `out` starts in its frame (on an error, `out`
/// is left empty).
pub(crate) fn encode_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Encoding,
    at: usize,
) -> Result<(), codec::Error> {
    let start = out.len();
    // Staged only from an empty encoding's first byte.
    let stage_to = out.stage_to.take().filter(|_| start == 0);
    out.staged_at = at;
    // Gathering; the state of an encoding this one runs inside (a
    // `Serialize` that sends) is put back after. No pin is offered now,
    // nor when this one ends: a `Bulk` offers one only for the bytes it
    // hands to the serializer next, which takes it or (`Offered`'s drop)
    // withdraws it, with no other code between, so no encoding's offer is
    // ever left for another to find.
    let encoded = super::with_local(&GATHERING, true, || {
        codec::encode_with(
            value,
            Gather {
                bytes: std::mem::take(&mut out.bytes),
                pins: &mut out.pins,
                pinned: &mut out.pinned,
                at,
                stage_to,
                staged: &mut out.staged,
                staged_len: &mut out.staged_len,
            },
        )
    });
    let (bytes, writes) = match encoded {
        Ok((g, writes)) => (g.bytes, writes),
        Err(e) => {
            out.clear();
            return Err(e);
        }
    };
    out.bytes = bytes;
    let end = at + out.len();
    if let Some(room) = out.staged.as_mut() {
        // The room takes the whole frame, or the encoding goes unstaged.
        if room.len() < end && !room.resize(end) {
            out.unstage();
        }
    }
    let len = out.len() - start;
    hint_if_piecemeal::<T>(len, writes);
    Ok(())
}

/// An encoding in this thread's reused buffer; the buffer goes back to
/// its thread when this is dropped.
pub(crate) struct Encoded(Encoding);

impl std::ops::Deref for Encoded {
    type Target = Encoding;
    fn deref(&self) -> &Encoding {
        &self.0
    }
}

impl std::ops::DerefMut for Encoded {
    fn deref_mut(&mut self) -> &mut Encoding {
        &mut self.0
    }
}

impl Drop for Encoded {
    fn drop(&mut self) {
        self.0.pins.clear();
        let mut buf = std::mem::take(&mut self.0.bytes);
        if buf.capacity() > KEEP_AT_MOST {
            return;
        }
        buf.clear();
        // Keep the larger of this buffer and one another encoding (of a
        // task that ran while this one's owner waited) may have put back.
        // `try_with`: at thread exit the spare may be gone; then just free.
        let _ = SPARE.try_with(|spare| {
            let other = spare.take();
            spare.set(if other.capacity() > buf.capacity() {
                other
            } else {
                buf
            });
        });
    }
}

/// Encodes `value` for sending to `dest`, into this thread's reused
/// buffer, pinning large `Bulk`s; `at` is where it starts in its frame
/// (after the header). For a frame sent as soon as it is made: its large
/// plain arrays may be written straight into the room `dest`'s transport
/// reserves for it (*Staging* in the module doc).
pub(crate) fn encode_for<T: Serialize + ?Sized>(
    value: &T,
    at: usize,
    dest: usize,
) -> Result<Encoded, codec::Error> {
    encode_to(value, at, Some(dest))
}

/// [`encode_for`] with no destination: never staged.
#[cfg(test)]
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T, at: usize) -> Result<Encoded, codec::Error> {
    encode_to(value, at, None)
}

fn encode_to<T: Serialize + ?Sized>(
    value: &T,
    at: usize,
    dest: Option<usize>,
) -> Result<Encoded, codec::Error> {
    let bytes = SPARE.try_with(Cell::take).unwrap_or_default();
    let mut out = Encoded(Encoding {
        bytes,
        stage_to: dest,
        ..Encoding::default()
    });
    encode_into(value, &mut out.0, at)?;
    Ok(out)
}

/// Encodes `value` into a new vector, whole (what a balanced piece or
/// result keeps until it is sent).
pub(crate) fn encode_to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, codec::Error> {
    let (out, writes) = codec::encode_with(value, Vec::new())?;
    hint_if_piecemeal::<T>(out.len(), writes);
    Ok(out)
}

/// The least encoded size worth a hint.
const HINT_BYTES: usize = 64 << 10;

/// Writes of this many bytes or fewer on average, over [`HINT_BYTES`]
/// or more, mean a large part went element by element (the codec writes a
/// byte string or a plain sequence in one piece, and a lone `f64` in one
/// of 8 bytes).
const HINT_PIECE_BYTES: usize = 16;

/// Whether an encoding of `len` bytes in `writes` writes went piece by
/// piece.
fn piecemeal(len: usize, writes: usize) -> bool {
    len >= HINT_BYTES && writes > len / HINT_PIECE_BYTES
}

/// In debug builds, the hint for an encoding of `T` that went piece by
/// piece, once per type.
fn hint_if_piecemeal<T: ?Sized>(len: usize, writes: usize) {
    if cfg!(debug_assertions) && piecemeal(len, writes) {
        static HINTED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
        let name = std::any::type_name::<T>();
        let mut hinted = HINTED.lock().unwrap_or_else(|e| e.into_inner());
        if !hinted.contains(&name) {
            hinted.push(name);
            eprintln!(
                "cantus: hint: `{name}` encoded to {len} bytes in {writes} writes: serde moves a \
                 Vec element by element (all but Vec<u8>, Vec<i8>, Vec<f32> and Vec<f64>, which \
                 go as their bytes); an array of plain data (Vec<u32>, Vec<[f64; 3]>, ...) as a \
                 cantus::Bulk<T> field travels as its bytes, many times faster (shown once per \
                 type, in debug builds)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::Bulk;

    /// The encoding's parts, joined.
    fn joined(e: &Encoding) -> Vec<u8> {
        e.with_parts(&[], |parts| parts.concat())
    }

    #[test]
    fn encodes_as_postcard_does_and_reuses_the_buffer() {
        let value = (7u64, "seven", vec![1u32, 2, 3]);
        let a = encode(&value, 0).unwrap();
        assert_eq!(joined(&a), postcard::to_allocvec(&value).unwrap());
        let big = encode(&vec![9u8; 100_000], 0).unwrap();
        let at = big.bytes.as_ptr();
        drop(a);
        drop(big);
        // The larger buffer was kept and serves the next encoding.
        let again = encode(&vec![8u8; 50_000], 0).unwrap();
        assert_eq!(again.bytes.as_ptr(), at);
        assert_eq!(
            joined(&again),
            postcard::to_allocvec(&vec![8u8; 50_000]).unwrap()
        );
    }

    #[test]
    fn a_large_bulk_is_pinned_aligned_and_a_small_one_copied() {
        let big: Bulk<f64> = (0..10_000).map(f64::from).collect();
        let small: Bulk<f64> = (0..10).map(f64::from).collect();
        for at in [0, 1, 24, 28, 63, 64, 100] {
            let value = (3u8, small.clone(), "between", big.clone(), 9u16);
            let e = encode(&value, at).unwrap();
            assert_eq!(e.pins.len(), 1, "only the large one is pinned");
            let (pos, pin) = &e.pins[0];
            assert!(
                std::ptr::eq(pin.bytes(), big.as_bytes()),
                "named, not copied"
            );
            assert_eq!((at + pos) % PIN_ALIGN, 0, "aligned in its frame (at {at})");
            assert_eq!(e.len(), e.bytes.len() + big.as_bytes().len());
            // It decodes as the value it was.
            let whole = joined(&e);
            let back: (u8, Bulk<f64>, String, Bulk<f64>, u16) =
                postcard::from_bytes(&whole).unwrap();
            assert_eq!(
                back,
                (3, small.clone(), "between".to_string(), big.clone(), 9)
            );
        }
        // Outside an encoding for sending, nothing is pinned or padded.
        assert!(!gathering());
        let plain = postcard::to_allocvec(&big).unwrap();
        assert_eq!(plain.len(), 1 + 3 + big.as_bytes().len());
    }

    #[test]
    fn a_pinned_bulk_keeps_its_bytes_while_the_encoding_lives() {
        let mut bulk: Bulk<u32> = (0..4096).collect();
        let e = encode(&(1u8, bulk.clone()), 24).unwrap();
        // A change while the encoding names the bytes copies them first.
        bulk[0] = 77;
        let back: (u8, Bulk<u32>) = postcard::from_bytes(&joined(&e)).unwrap();
        assert_eq!(back.1[0], 0, "the encoding still has the bytes it named");
        assert_eq!(bulk[0], 77);
        drop(e);
        // With the encoding gone, a change is in place again.
        let at = bulk.as_ptr();
        bulk[1] = 78;
        assert_eq!(bulk.as_ptr(), at);
    }

    #[test]
    fn a_large_vec_of_varints_is_piecemeal_and_plain_vecs_and_bulks_are_not() {
        fn count<T: Serialize + ?Sized>(value: &T) -> (usize, usize) {
            let (out, writes) = codec::encode_with(value, Vec::new()).unwrap();
            (out.len(), writes)
        }
        // The codec counts writes in debug builds only (release builds
        // print no hint).
        for (len, writes) in [
            count(&vec![1u32; 1 << 20]),
            count(&vec![[1.5f64; 2]; 1 << 16]),
        ] {
            assert_eq!(
                piecemeal(len, writes),
                cfg!(debug_assertions),
                "{len} bytes in {writes} writes"
            );
        }
        let vec_f64 = vec![1.5f64; 1 << 17];
        for (len, writes) in [
            count(&vec![1u8; 1 << 20]),
            count(&vec_f64),
            count(&crate::remote::Bulk::from(vec_f64.clone())),
        ] {
            assert!(!piecemeal(len, writes), "{len} bytes in {writes} writes");
        }
        // Small encodings never hint, however they were written.
        assert!(!piecemeal(1000, 1000));
    }

    #[test]
    fn varint_lengths() {
        for (n, len) in [
            (0, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (1 << 20, 3),
        ] {
            assert_eq!(codec::varint_len(n), len, "{n}");
            let buf = postcard::to_allocvec(&n).unwrap();
            assert_eq!(buf.len(), len, "{n} as postcard writes it");
        }
    }
}
