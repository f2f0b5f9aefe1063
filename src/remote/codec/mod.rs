//! The codec: serde's data model to bytes and back, for remote calls'
//! arguments and results, Chant's typed messages, balanced pieces and
//! start-up hellos.
//!
//! **The format** is postcard 1.x's, byte for byte (the tests check it
//! against postcard): it is compact, not self-describing, and both ends
//! are the same binary.
//!
//! | serde type | bytes |
//! |---|---|
//! | `bool` | one byte, 0 or 1 |
//! | `u8`, `i8` | one byte |
//! | `u16` ... `u128`, `usize` | LEB128 varint (7 bits a byte, low first) |
//! | `i16` ... `i128`, `isize` | zigzag, then varint |
//! | `f32`, `f64` | little-endian IEEE 754 |
//! | `char` | as a `str` of its UTF-8 |
//! | `str`, bytes | varint length, then the bytes |
//! | `Option` | 0 (`None`), or 1 and the value |
//! | unit, unit struct | nothing |
//! | newtype struct | its field |
//! | seq, map | varint length, then the elements (keys and values) |
//! | tuple, tuple struct, struct | the fields, in order |
//! | enum variant | varint `u32` index, then its fields |
//!
//! **Plain sequences in one copy** (`plain.rs`). serde hands a sequence
//! to its serializer one element at a time, and `Vec`'s deserializer
//! pushes one at a time: a 1 MiB `Vec<f64>` was 131,072 writes and as
//! many pushes, at a twentieth of memory's speed. For element types whose
//! encoding *is* their memory on a little-endian machine (`u8`, `i8`,
//! `f32`, `f64`), the bytes above are the slice's bytes, so the codec
//! moves them in one copy each way: the serializer recognizes a slice or
//! a `Vec` of them in `collect_seq` (what serde's `Serialize` for `[T]`
//! and `Vec<T>` call), and the deserializer recognizes serde's own
//! visitor of `Vec<T>` in `deserialize_seq`. A slice or `Vec` of wider
//! integers (`u16` ... `u64`, `i16` ... `i64`, whose elements are
//! varints) is recognized the same way and goes through one loop each
//! way, varint by varint. Anything else (a user's visitor, a collection
//! that is not a slice) goes element by element, to the same bytes.
//! [`Bulk`](super::Bulk) remains the type for arrays of any plain type,
//! and the one a receiver can keep in place.
//!
//! **Bad input** is an [`Error`] saying what was wrong, never a panic or
//! an allocation the input's length does not cover; bytes left over
//! after the value are ignored (postcard's rule: a frame's padding).

mod de;
mod plain;
mod ser;

pub(crate) use de::from_bytes;
pub(crate) use ser::{Output, encode_with};

use std::fmt;

/// Why a value did not encode or decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Error {
    /// The bytes ended inside a value.
    End,
    /// A varint longer than its type allows, or with bits past its width.
    BadVarint,
    /// A `bool` byte other than 0 or 1.
    BadBool(u8),
    /// An `Option` tag other than 0 or 1.
    BadOption(u8),
    /// A `char` that is not one UTF-8 character of at most 4 bytes.
    BadChar,
    /// A string that is not UTF-8.
    BadUtf8,
    /// A sequence or map whose length serde did not give before its
    /// elements (the format writes the length first).
    UnknownLength,
    /// A call the format cannot answer (it does not describe itself):
    /// `deserialize_any`, `deserialize_identifier`,
    /// `deserialize_ignored_any`.
    NotSelfDescribing(&'static str),
    /// A type's own `Serialize` or `Deserialize` refused the value.
    Custom(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::End => write!(f, "the bytes end inside a value"),
            Error::BadVarint => write!(f, "a varint too long for its type"),
            Error::BadBool(b) => write!(f, "a bool's byte is {b}, not 0 or 1"),
            Error::BadOption(b) => write!(f, "an Option's tag is {b}, not 0 or 1"),
            Error::BadChar => write!(f, "a char is not one UTF-8 character"),
            Error::BadUtf8 => write!(f, "a string is not UTF-8"),
            Error::UnknownLength => write!(
                f,
                "a sequence or map of unknown length (the format writes the length first)"
            ),
            Error::NotSelfDescribing(call) => write!(
                f,
                "{call} is not supported: the format does not describe itself (both ends must \
                 name the type)"
            ),
            Error::Custom(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {}

impl serde::ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error::Custom(msg.to_string())
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error::Custom(msg.to_string())
    }
}

/// A varint's largest length, for a type of `bits` bits (7 bits a
/// byte).
const fn varint_max(bits: u32) -> usize {
    bits.div_ceil(7) as usize
}

/// The length of `n` as a varint.
pub(crate) fn varint_len(n: usize) -> usize {
    (usize::BITS - (n | 1).leading_zeros()).div_ceil(7) as usize
}

/// For `cargo fuzz` (`fuzz/fuzz_targets/codec_values.rs`) and the tests:
/// decoding `bytes` as values of many shapes never panics nor allocates
/// past what the bytes could hold, and what decodes encodes to bytes
/// that decode to a value encoding to the same bytes again.
pub(crate) fn fuzz_values(bytes: &[u8]) {
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    #[derive(Serialize, Deserialize)]
    enum Shape {
        Empty,
        Dot(u16),
        Named { at: i64, name: String },
    }
    type Value = (
        (bool, Option<u32>, char, i128, u128),
        Vec<f64>,
        Vec<u8>,
        Vec<Shape>,
        BTreeMap<i32, String>,
        Vec<Vec<f32>>,
        (Vec<i8>, Box<[f64]>, [u64; 2]),
    );
    fn check<T: Serialize + for<'de> Deserialize<'de>>(bytes: &[u8]) {
        if let Ok(value) = from_bytes::<T>(bytes) {
            let (again, _) = encode_with(&value, Vec::new()).expect("a decoded value encodes");
            let back: T = from_bytes(&again).expect("its encoding decodes");
            let (third, _) = encode_with(&back, Vec::new()).expect("and encodes again");
            assert_eq!(again, third, "the encoding of a decoded value is stable");
        }
    }
    check::<Value>(bytes);
    check::<Vec<f64>>(bytes);
    check::<(String, Vec<u8>)>(bytes);
    check::<Option<Vec<Shape>>>(bytes);
    check::<(Vec<u32>, Vec<i64>, Vec<u16>)>(bytes);
}

#[cfg(test)]
mod tests;
