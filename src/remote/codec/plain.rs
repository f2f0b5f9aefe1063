//! Sequences of plain data moved in one copy (the codec's module doc,
//! "Plain sequences in one copy").
//!
//! serde has no specialization: its `Serialize` for `[T]` and `Vec<T>`
//! calls the serializer's `collect_seq` with the slice or the vector as
//! an iterator, and its `Deserialize` for `Vec<T>` calls
//! `deserialize_seq` with a visitor that pushes each element. Both are
//! generic calls the codec receives, so it asks what type it was given:
//! `typeid::of` names a type that may hold lifetimes (lifetimes erased,
//! which do not change a type's layout), and the types asked about are
//! few and fixed.
//!
//! - **Encoding.** `collect_seq::<I>` where `I` is `&[T]` or `&Vec<T>` of
//!   a [`Plain`] `T`: the length, then the slice's bytes.
//! - **Decoding.** `deserialize_seq::<V>` where `V` is serde's own
//!   visitor of `Vec<T>` (its type learned once by handing `Vec<T>`'s
//!   `Deserialize` a probe that records the visitor it is given) and
//!   `V::Value` is `Vec<T>`: a vector of the length, filled by one copy.
//!   A visitor of the user's own, even one that makes a `Vec<f64>`, is
//!   left to read element by element, as it may read them otherwise.
//!
//! Both produce exactly the bytes and the value of the element-by-element
//! path, which the tests compare.
//!
//! **Integer sequences** (`u16` ... `u64`, `i16` ... `i64`, and `usize`
//! and `isize` where they are 64 bits) are varints in the format, so they
//! cannot move as their memory. The same two recognitions still take them
//! out of serde's per-element calls: the encoder makes room for the
//! longest encoding once and writes every varint in one loop
//! ([`IntSlice::write`]); the decoder fills a vector made once, reading
//! each varint with the decoder's own rule and failing with the same
//! error at the same element ([`read_varints`]). Measured against serde's
//! loops (`bench/examples/varints.rs`, `Vec<u32>`): encoding 15-20%
//! faster where a branch predicts the varints' lengths, decoding 5-15%;
//! the `transfer_*.codec_vec_u32` rows 1.4x. Reading 8 bytes at a time to
//! find a varint's end was slower on such lengths (each varint's place
//! waits for the one before it) and was left out. A varint's cost is the
//! format's; `Bulk` moves an integer array at memory speed.

use super::de::{read_varint, unzigzag};
use super::ser::zigzag;
use super::{Error, varint_max};
use serde::Deserialize;
use serde::de::{self, Visitor};
use std::any::TypeId;
use std::fmt;
use std::sync::OnceLock;

/// An element type whose encoding is its memory, on a little-endian
/// machine (`f32` and `f64` as their IEEE 754 bytes, low first; `u8` and
/// `i8` as themselves). Other integers are varints in the format.
pub(super) trait Plain: bytemuck::Pod + for<'de> Deserialize<'de> {
    /// Its place in [`vec_visitors`].
    const INDEX: usize;
}

impl Plain for u8 {
    const INDEX: usize = 0;
}
impl Plain for i8 {
    const INDEX: usize = 1;
}
impl Plain for f32 {
    const INDEX: usize = 2;
}
impl Plain for f64 {
    const INDEX: usize = 3;
}

/// An integer element type, a varint in the format (zigzag first where
/// signed): what [`write_int_seq`] writes for it and [`decode_vec`]
/// reads back.
pub(super) trait Varint: Copy + 'static + for<'de> Deserialize<'de> {
    /// Its place in [`vec_visitors`].
    const INDEX: usize;
    /// The width its decoder checks a varint against: that of the serde
    /// call its `Deserialize` makes (`usize` and `isize` make the 64-bit
    /// ones).
    const BITS: u32;
    /// The number the format writes for it.
    fn to_wire(self) -> u64;
    /// The element a varint of at most `BITS` bits stands for.
    fn from_wire(n: u64) -> Self;
}

/// `type = index, bits, |x| its number, |n| the element;` for each type.
macro_rules! varint_elements {
    ($($t:ty = $index:expr, $bits:expr, |$x:ident| $to:expr, |$n:ident| $from:expr;)*) => {$(
        impl Varint for $t {
            const INDEX: usize = $index;
            const BITS: u32 = $bits;
            #[inline]
            fn to_wire(self) -> u64 {
                let $x = self;
                $to
            }
            #[inline]
            fn from_wire($n: u64) -> Self {
                $from
            }
        }
    )*};
}

varint_elements! {
    u16 = 4, 16, |x| x.into(), |n| n as u16;
    u32 = 5, 32, |x| x.into(), |n| n as u32;
    u64 = 6, 64, |x| x, |n| n;
    i16 = 7, 16, |x| zigzag(x.into()), |n| unzigzag(n) as i16;
    i32 = 8, 32, |x| zigzag(x.into()), |n| unzigzag(n) as i32;
    i64 = 9, 64, |x| zigzag(x), |n| unzigzag(n);
}
// serde writes and reads them as `u64` and `i64`: the same varints where
// they are 64 bits wide.
#[cfg(target_pointer_width = "64")]
varint_elements! {
    usize = 10, 64, |x| x as u64, |n| n as usize;
    isize = 11, 64, |x| zigzag(x as i64), |n| unzigzag(n) as isize;
}

/// How many element types [`vec_visitors`] knows: the [`Plain`] ones,
/// then the [`Varint`] ones.
const KINDS: usize = 12;

/// If `iter` (what `collect_seq` was given) is a slice or a `&Vec` of a
/// [`Varint`] type: writes its length and its elements' varints to `out`
/// and returns its length.
#[inline]
pub(super) fn write_int_seq<I>(iter: &I, out: &mut Vec<u8>) -> Option<usize> {
    /// The same for one `T`.
    fn write<T: Varint, I>(iter: &I, out: &mut Vec<u8>) -> Option<usize> {
        let s = typed_slice::<T, I>(iter)?;
        write_varints(&[s.len() as u64], out);
        write_varints(s, out);
        Some(s.len())
    }
    // A comparison of type ids each, constants once monomorphized.
    let found = write::<u16, I>(iter, out);
    let found = found.or_else(|| write::<u32, I>(iter, out));
    let found = found.or_else(|| write::<u64, I>(iter, out));
    let found = found.or_else(|| write::<i16, I>(iter, out));
    let found = found.or_else(|| write::<i32, I>(iter, out));
    let found = found.or_else(|| write::<i64, I>(iter, out));
    #[cfg(target_pointer_width = "64")]
    let found = found
        .or_else(|| write::<usize, I>(iter, out))
        .or_else(|| write::<isize, I>(iter, out));
    found
}

/// Appends the varints of `s`'s elements to `out`: room for the longest
/// encoding made once, then one loop of byte writes.
fn write_varints<T: Varint>(s: &[T], out: &mut Vec<u8>) {
    // At most 10 bytes an element (a u64's longest varint).
    let most = s
        .len()
        .checked_mul(varint_max(64))
        .expect("a slice's varints fit in memory");
    out.reserve(most);
    let len = out.len();
    let spare = &mut out.spare_capacity_mut()[..most];
    let mut at = 0;
    for &x in s {
        let mut n = x.to_wire();
        while n >= 0x80 {
            spare[at].write(n as u8 | 0x80);
            n >>= 7;
            at += 1;
        }
        spare[at].write(n as u8);
        at += 1;
    }
    // SAFETY: the loop wrote bytes `len..len + at`, each element's varint
    // at most 10 bytes, so all within the `most` bytes of spare room
    // reserved above (the slicing checks it too); the new length covers
    // only those.
    unsafe { out.set_len(len + at) };
}

/// The vector of `len` [`Varint`]s at the front of `input`, read in one
/// loop (and `input` moved past them), or the error the element-by-element
/// path meets first: `End` where the input ends inside them, `BadVarint`
/// for a varint too long for `T` or with bits past its width.
fn read_varints<T: Varint>(len: usize, input: &mut &[u8]) -> Result<Vec<T>, Error> {
    let mut rest: &[u8] = input;
    // Every varint takes a byte or more: no more elements than bytes, so
    // a length the input cannot hold allocates no more than the input.
    let room = len.min(rest.len());
    let mut vec = Vec::<T>::with_capacity(room);
    let mut filled = 0;
    for slot in &mut vec.spare_capacity_mut()[..room] {
        // The decoder's own reading, with its errors.
        slot.write(T::from_wire(read_varint(&mut rest, T::BITS)?));
        filled += 1;
    }
    // SAFETY: the loop wrote the first `filled` elements (all `room` of
    // them, as it returns on any error).
    unsafe { vec.set_len(filled) };
    if len > room {
        // `room` elements took every byte: the next one has none.
        return Err(Error::End);
    }
    *input = rest;
    Ok(vec)
}

/// Whether this machine lays plain elements out as the format does.
const LITTLE_ENDIAN: bool = cfg!(target_endian = "little");

/// If `iter` (what `collect_seq` was given) is a slice or a `&Vec` of a
/// [`Plain`] type: its length and its bytes.
#[inline]
pub(super) fn seq_bytes<I>(iter: &I) -> Option<(usize, &[u8])> {
    if !LITTLE_ENDIAN {
        return None;
    }
    slice_of::<u8, I>(iter)
        .or_else(|| slice_of::<i8, I>(iter))
        .or_else(|| slice_of::<f32, I>(iter))
        .or_else(|| slice_of::<f64, I>(iter))
}

#[inline]
fn slice_of<T: Plain, I>(iter: &I) -> Option<(usize, &[u8])> {
    let slice = typed_slice::<T, I>(iter)?;
    Some((slice.len(), bytemuck::cast_slice(slice)))
}

/// If `iter` is a `&[T]` or a `&Vec<T>`: that slice.
#[inline]
fn typed_slice<T: 'static, I>(iter: &I) -> Option<&[T]> {
    let id = typeid::of::<I>();
    let slice: &[T] = if id == typeid::of::<&[T]>() {
        // SAFETY: `I`'s type id, lifetimes erased, is `&[T]`'s, and `T`
        // has no lifetimes, so `I` is `&'a [T]` for some `'a`: the read
        // copies a reference of that very type out of `iter`. `'a`
        // outlives `iter`, so the result may live as long as `iter`'s
        // borrow, which the signature gives it.
        unsafe { *(iter as *const I).cast::<&[T]>() }
    } else if id == typeid::of::<&Vec<T>>() {
        // SAFETY: as above, with `I` = `&'a Vec<T>`.
        unsafe { *(iter as *const I).cast::<&Vec<T>>() }
    } else {
        return None;
    };
    Some(slice)
}

/// If `V` is serde's visitor of `Vec<T>` for a [`Plain`] `T`: the vector
/// of `len` elements whose bytes start `input`, decoded in one copy (and
/// `input` moved past them), or `Error::End` if `input` is shorter. For a
/// [`Varint`] `T`: the vector read in one loop ([`read_varints`]), or the
/// error reading element by element meets first. `None` for any other
/// visitor.
#[inline]
pub(super) fn decode_vec<'de, V: Visitor<'de>>(
    len: usize,
    input: &mut &'de [u8],
) -> Option<Result<V::Value, Error>> {
    let value = typeid::of::<V::Value>();
    if value == TypeId::of::<Vec<u32>>() {
        return varints_of::<u32, V>(len, input);
    } else if value == TypeId::of::<Vec<u64>>() {
        return varints_of::<u64, V>(len, input);
    } else if value == TypeId::of::<Vec<i32>>() {
        return varints_of::<i32, V>(len, input);
    } else if value == TypeId::of::<Vec<i64>>() {
        return varints_of::<i64, V>(len, input);
    } else if value == TypeId::of::<Vec<u16>>() {
        return varints_of::<u16, V>(len, input);
    } else if value == TypeId::of::<Vec<i16>>() {
        return varints_of::<i16, V>(len, input);
    }
    #[cfg(target_pointer_width = "64")]
    if value == TypeId::of::<Vec<usize>>() {
        return varints_of::<usize, V>(len, input);
    } else if value == TypeId::of::<Vec<isize>>() {
        return varints_of::<isize, V>(len, input);
    }
    if !LITTLE_ENDIAN {
        return None;
    }
    if value == TypeId::of::<Vec<u8>>() {
        vec_of::<u8, V>(len, input)
    } else if value == TypeId::of::<Vec<i8>>() {
        vec_of::<i8, V>(len, input)
    } else if value == TypeId::of::<Vec<f32>>() {
        vec_of::<f32, V>(len, input)
    } else if value == TypeId::of::<Vec<f64>>() {
        vec_of::<f64, V>(len, input)
    } else {
        None
    }
}

/// [`decode_vec`] for one `T`, where `V::Value` is `Vec<T>`.
fn vec_of<'de, T: Plain, V: Visitor<'de>>(
    len: usize,
    input: &mut &'de [u8],
) -> Option<Result<V::Value, Error>> {
    if !is_vec_visitor::<V>(T::INDEX) {
        return None;
    }
    let Some(n) = len
        .checked_mul(size_of::<T>())
        .filter(|&n| n <= input.len())
    else {
        return Some(Err(Error::End));
    };
    let (bytes, rest) = input.split_at(n);
    *input = rest;
    let mut vec = Vec::<T>::with_capacity(len);
    // SAFETY: `vec` has room for `len` elements, `n` bytes; `bytes` is
    // `n` readable bytes of the input, which cannot overlap the new
    // allocation. Every bit pattern is a valid `T` (`Pod`), so after the
    // copy the first `len` elements are initialized.
    unsafe {
        crate::copy::copy_raw(bytes.as_ptr(), vec.as_mut_ptr().cast::<u8>(), n);
        vec.set_len(len);
    }
    Some(Ok(value_of::<T, V>(vec)))
}

/// [`decode_vec`] for one [`Varint`] `T`, where `V::Value` is `Vec<T>`.
fn varints_of<'de, T: Varint, V: Visitor<'de>>(
    len: usize,
    input: &mut &'de [u8],
) -> Option<Result<V::Value, Error>> {
    is_vec_visitor::<V>(T::INDEX).then(|| read_varints::<T>(len, input).map(value_of::<T, V>))
}

/// Whether `V` is serde's visitor of `Vec<T>` for the element type at
/// `index` in [`vec_visitors`].
fn is_vec_visitor<'de, V: Visitor<'de>>(index: usize) -> bool {
    vec_visitors()[index] == Some(typeid::of::<V>())
}

/// `vec` as the visitor's value, where [`decode_vec`] found that value's
/// type to be `Vec<T>`.
fn value_of<'de, T: 'static, V: Visitor<'de>>(vec: Vec<T>) -> V::Value {
    #[cfg(test)]
    WHOLE_DECODES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let vec = std::mem::ManuallyDrop::new(vec);
    // SAFETY: `decode_vec` calls this only where `V::Value`'s type id,
    // lifetimes erased, is `Vec<T>`'s; `Vec<T>` has no lifetimes
    // (`T: 'static`), so `V::Value` is `Vec<T>` and the copy moves the
    // vector (the original is never dropped: `ManuallyDrop`).
    unsafe { std::mem::transmute_copy::<Vec<T>, V::Value>(&vec) }
}

/// Vectors decoded in one copy or one loop, for the tests to see the path
/// taken.
#[cfg(test)]
pub(super) static WHOLE_DECODES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The type of serde's visitor of `Vec<T>`, for each [`Plain`] and
/// [`Varint`] `T` in `INDEX` order (`None` where `Vec<T>`'s `Deserialize`
/// did not call `deserialize_seq`, or the type is not one here: then that
/// type goes element by element).
fn vec_visitors() -> &'static [Option<TypeId>; KINDS] {
    static VISITORS: OnceLock<[Option<TypeId>; KINDS]> = OnceLock::new();
    VISITORS.get_or_init(|| {
        let mut all = [None; KINDS];
        all[u8::INDEX] = visitor_of::<u8>();
        all[i8::INDEX] = visitor_of::<i8>();
        all[f32::INDEX] = visitor_of::<f32>();
        all[f64::INDEX] = visitor_of::<f64>();
        all[<u16 as Varint>::INDEX] = visitor_of::<u16>();
        all[<u32 as Varint>::INDEX] = visitor_of::<u32>();
        all[<u64 as Varint>::INDEX] = visitor_of::<u64>();
        all[<i16 as Varint>::INDEX] = visitor_of::<i16>();
        all[<i32 as Varint>::INDEX] = visitor_of::<i32>();
        all[<i64 as Varint>::INDEX] = visitor_of::<i64>();
        #[cfg(target_pointer_width = "64")]
        {
            all[<usize as Varint>::INDEX] = visitor_of::<usize>();
            all[<isize as Varint>::INDEX] = visitor_of::<isize>();
        }
        all
    })
}

/// The visitor `Vec<T>`'s `Deserialize` hands `deserialize_seq`.
fn visitor_of<T: for<'de> Deserialize<'de>>() -> Option<TypeId> {
    match Vec::<T>::deserialize(Probe) {
        Err(Found(id)) => id,
        Ok(_) => None,
    }
}

/// A deserializer that answers every call with an error naming the
/// visitor `deserialize_seq` was given.
struct Probe;

#[derive(Debug)]
struct Found(Option<TypeId>);

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the codec's probe of a visitor")
    }
}

impl std::error::Error for Found {}

impl de::Error for Found {
    fn custom<T: fmt::Display>(_: T) -> Found {
        Found(None)
    }
}

impl<'de> de::Deserializer<'de> for Probe {
    type Error = Found;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
        Err(Found(None))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
        Err(Found(Some(typeid::of::<V>())))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_s_vec_visitor_is_found_for_every_plain_type() {
        let ids = vec_visitors();
        let known = if cfg!(target_pointer_width = "64") {
            KINDS
        } else {
            KINDS - 2
        };
        assert!(
            ids[..known].iter().all(Option::is_some),
            "Vec<T>'s Deserialize calls deserialize_seq: {ids:?}"
        );
        // As many different visitors.
        for i in 0..known {
            for j in 0..i {
                assert_ne!(ids[i], ids[j]);
            }
        }
    }

    #[test]
    fn only_slices_and_vecs_of_plain_types_are_seen_as_bytes() {
        let v = vec![1.5f64, -2.0];
        let by_ref = &v;
        let (len, bytes) = seq_bytes(&by_ref).expect("&Vec<f64>");
        assert_eq!(len, 2);
        assert_eq!(
            bytes,
            [1.5f64.to_le_bytes(), (-2.0f64).to_le_bytes()].concat()
        );
        let s: &[u8] = b"abc";
        assert_eq!(seq_bytes(&s), Some((3, &b"abc"[..])));
        assert!(seq_bytes(&&vec![1u32, 2]).is_none(), "u32s are varints");
        let ints = |iter: &dyn Fn(&mut Vec<u8>) -> Option<usize>| {
            let mut out = vec![9];
            iter(&mut out).map(|len| (len, out))
        };
        assert_eq!(
            ints(&|out| write_int_seq(&&vec![1u32, 300], out)),
            Some((2, vec![9, 2, 1, 0xac, 0x02])),
            "after what was there: the length, then the varints"
        );
        assert_eq!(
            ints(&|out| write_int_seq(&&[-1i64][..], out)),
            Some((1, vec![9, 1, 1]))
        );
        assert_eq!(
            ints(&|out| write_int_seq(&&v, out)),
            None,
            "f64s are their bytes"
        );
        assert_eq!(
            ints(&|out| write_int_seq(&&vec![1u8], out)),
            None,
            "u8s are their bytes"
        );
        assert_eq!(
            ints(&|out| write_int_seq(&[1u32].iter(), out)),
            None,
            "an iterator is not a slice"
        );
        assert_eq!(
            ints(&|out| write_int_seq(&&[1u32; 3], out)),
            None,
            "an array is a tuple"
        );
        assert!(seq_bytes(&v.iter()).is_none(), "an iterator is not a slice");
        assert!(seq_bytes(&&[1.0f64; 3]).is_none(), "an array is a tuple");
    }
}
