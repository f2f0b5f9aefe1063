//! [`Bulk<T>`]: an array of plain data that travels between locales as
//! its bytes, in one copy each way of the encoding, never element by
//! element as serde moves a `Vec<T>`.
//!
//! A `Bulk<T>` is a `Vec<T>` (made from one and turned back into one
//! without a copy) whose `Serialize` writes the elements' bytes as one
//! byte string, and whose `Deserialize` copies such a string into a new,
//! aligned `Vec<T>`. So it is a field like any other of a remote call's
//! arguments or result, a Chant message (`chant::send_value`), or a
//! balanced piece of work, among other fields and nested in them.
//!
//! The bytes are in the machine's own order: every locale of a job runs
//! the same binary on one architecture.

use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// An array of plain data (`T: bytemuck::Pod`: integers, floats,
/// `#[repr(C)]` structs of them) that travels as its bytes: give a large
/// array in a remote call, a Chant message or a balanced piece this type
/// instead of `Vec<T>`, which serde encodes element by element.
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
/// Only plain data may be bulk: a type with pointers is refused.
///
/// ```compile_fail
/// let _ = cantus::Bulk::from(vec![String::from("no")]);
/// ```
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bulk<T: bytemuck::Pod> {
    items: Vec<T>,
}

impl<T: bytemuck::Pod> Bulk<T> {
    /// An empty array.
    pub const fn new() -> Bulk<T> {
        Bulk { items: Vec::new() }
    }

    /// The array `items`, without a copy.
    pub fn from_vec(items: Vec<T>) -> Bulk<T> {
        Bulk { items }
    }

    /// The elements, as a `Vec`, without a copy.
    pub fn into_vec(self) -> Vec<T> {
        self.items
    }

    /// The elements' bytes, as they travel.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.items)
    }
}

impl<T: bytemuck::Pod> Deref for Bulk<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items
    }
}

impl<T: bytemuck::Pod> DerefMut for Bulk<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.items
    }
}

impl<T: bytemuck::Pod> From<Vec<T>> for Bulk<T> {
    fn from(items: Vec<T>) -> Bulk<T> {
        Bulk { items }
    }
}

impl<T: bytemuck::Pod> From<&[T]> for Bulk<T> {
    fn from(items: &[T]) -> Bulk<T> {
        Bulk {
            items: items.to_vec(),
        }
    }
}

impl<T: bytemuck::Pod> From<Bulk<T>> for Vec<T> {
    fn from(bulk: Bulk<T>) -> Vec<T> {
        bulk.items
    }
}

impl<T: bytemuck::Pod> FromIterator<T> for Bulk<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Bulk<T> {
        Bulk {
            items: iter.into_iter().collect(),
        }
    }
}

impl<T: bytemuck::Pod> IntoIterator for Bulk<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl<T: bytemuck::Pod + fmt::Debug> fmt::Debug for Bulk<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Bulk").field(&self.items).finish()
    }
}

impl<T: bytemuck::Pod> Serialize for Bulk<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.as_bytes())
    }
}

impl<'de, T: bytemuck::Pod> Deserialize<'de> for Bulk<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bulk<T>, D::Error> {
        d.deserialize_bytes(BulkVisitor(PhantomData))
    }
}

/// Builds a [`Bulk`] from the byte string its `Serialize` wrote (or, from
/// a format with no byte strings, a sequence of bytes).
struct BulkVisitor<T>(PhantomData<T>);

impl<T: bytemuck::Pod> BulkVisitor<T> {
    /// `bytes` copied into a new, aligned `Vec<T>` (one copy), or an error
    /// if they are not a whole number of `T`s.
    fn copy<E: Error>(bytes: &[u8]) -> Result<Bulk<T>, E> {
        let size = std::mem::size_of::<T>();
        if size == 0 {
            return match bytes.len() {
                0 => Ok(Bulk::new()),
                n => Err(E::invalid_length(n, &"no bytes for zero-sized elements")),
            };
        }
        if bytes.len() % size != 0 {
            return Err(E::invalid_length(
                bytes.len(),
                &format!("a multiple of {size} bytes (the size of one element)").as_str(),
            ));
        }
        let n = bytes.len() / size;
        let mut items: Vec<T> = Vec::with_capacity(n);
        // SAFETY: the vector has room for `n` elements, `n * size ==
        // bytes.len()` bytes, which the copy fills (its spare room cannot
        // overlap the borrowed `bytes`); any bytes are a valid `T` (`Pod`),
        // so the new length covers initialized elements only. No fill with
        // zeros first: that would touch every byte twice.
        unsafe {
            crate::copy::copy_raw(bytes.as_ptr(), items.as_mut_ptr().cast::<u8>(), bytes.len());
            items.set_len(n);
        }
        Ok(Bulk { items })
    }
}

impl<'de, T: bytemuck::Pod> Visitor<'de> for BulkVisitor<T> {
    type Value = Bulk<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the bytes of an array of {}", std::any::type_name::<T>())
    }

    fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Bulk<T>, E> {
        Self::copy(bytes)
    }

    fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Bulk<T>, E> {
        Self::copy(&bytes)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bulk<T>, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(byte) = seq.next_element::<u8>()? {
            bytes.push(byte);
        }
        Self::copy(&bytes)
    }
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
        let bytes = postcard::to_allocvec(&value).unwrap();
        // The f64s are one byte string: their 8000 bytes, as they are in
        // memory, appear whole in the encoding.
        let raw = value.values.as_bytes();
        assert!(bytes.windows(raw.len()).any(|w| w == raw));
        let back: Nested = postcard::from_bytes(&bytes).unwrap();
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
        let empty: Bulk<f64> =
            postcard::from_bytes(&postcard::to_allocvec(&Bulk::<f64>::new()).unwrap()).unwrap();
        assert!(empty.is_empty());
        // Twelve bytes are not a whole number of f64s: refused, not cut.
        let ragged = postcard::to_allocvec(&Bulk::from(vec![1u8; 12])).unwrap();
        let err = postcard::from_bytes::<Bulk<f64>>(&ragged).unwrap_err();
        assert!(matches!(err, postcard::Error::SerdeDeCustom), "{err:?}");
        // Truncated input is an error too.
        let whole = postcard::to_allocvec(&Bulk::from(vec![1.5f64; 16])).unwrap();
        assert!(postcard::from_bytes::<Bulk<f64>>(&whole[..whole.len() - 1]).is_err());
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
