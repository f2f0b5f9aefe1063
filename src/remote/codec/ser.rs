//! The codec's serializer: a value to the bytes the module doc shows,
//! into an [`Output`].

use super::{Error, plain, varint_max};
use serde::Serialize;
use serde::ser;

/// Where encoded bytes go.
pub(crate) trait Output {
    /// The bytes so far, where small values (numbers, lengths, tags) are
    /// appended in place.
    fn bytes(&mut self) -> &mut Vec<u8>;

    /// Appends `data`: a string's bytes, a byte string, or a plain
    /// sequence's whole (which an output may name instead of copying:
    /// `encode.rs` pins a large `Bulk`'s).
    #[inline]
    fn extend(&mut self, data: &[u8]) {
        crate::copy::extend(self.bytes(), data);
    }
}

/// Encodes `value` at the end of `out`, and gives `out` back with the
/// number of writes the encoding took in a debug build (a value's bytes,
/// a string or a plain sequence: one write each; 0 in a release build).
/// `out` is owned while encoding, not behind a reference, so that the
/// writes of a long sequence keep the output's length in a register.
pub(crate) fn encode_with<T: Serialize + ?Sized, O: Output>(
    value: &T,
    out: O,
) -> Result<(O, usize), Error> {
    let mut encoder = Encoder { out, writes: 0 };
    value.serialize(&mut encoder)?;
    Ok((encoder.out, encoder.writes))
}

/// The serializer.
struct Encoder<O> {
    out: O,
    writes: usize,
}

impl<O: Output> Encoder<O> {
    /// Where the next small value goes (one write).
    #[inline]
    fn small(&mut self) -> &mut Vec<u8> {
        self.count();
        self.out.bytes()
    }

    /// Counts a write, in debug builds (for `encode.rs`'s hint, which
    /// only they print): a release build keeps no count in the loop of a
    /// long sequence.
    #[inline]
    fn count(&mut self) {
        if cfg!(debug_assertions) {
            self.writes += 1;
        }
    }

    /// Appends a value of a fixed size (a float's bytes).
    #[inline]
    fn fixed<const N: usize>(&mut self, bytes: [u8; N]) {
        let out = self.small();
        if out.capacity() - out.len() < N {
            grow(out, N);
        }
        let len = out.len();
        // SAFETY: the spare room is `N` bytes or more past `len` (checked
        // above, or made by `grow`); an array of bytes needs no
        // alignment; the new length covers only the bytes just written.
        unsafe {
            out.as_mut_ptr().add(len).cast::<[u8; N]>().write(bytes);
            out.set_len(len + N);
        }
    }

    #[inline]
    fn push(&mut self, byte: u8) {
        self.fixed([byte]);
    }

    #[inline]
    fn extend(&mut self, data: &[u8]) {
        self.count();
        self.out.extend(data);
    }

    #[inline]
    fn varint(&mut self, n: u64) {
        if n < 0x80 {
            self.push(n as u8);
            return;
        }
        let out = self.small();
        if out.capacity() - out.len() < varint_max(64) {
            grow(out, varint_max(64));
        }
        let len = out.len();
        let spare = out.spare_capacity_mut();
        let (mut n, mut i) = (n, 0);
        while n >= 0x80 {
            spare[i].write(n as u8 | 0x80);
            n >>= 7;
            i += 1;
        }
        spare[i].write(n as u8);
        // SAFETY: the loop wrote bytes `len..=len + i` (within the spare
        // room, at least 10 bytes, a u64's longest varint: checked above,
        // or made by `grow`); the new length covers only those.
        unsafe { out.set_len(len + i + 1) };
    }

    fn varint128(&mut self, mut n: u128) {
        let mut buf = [0u8; varint_max(128)];
        let mut i = 0;
        while n >= 0x80 {
            buf[i] = n as u8 | 0x80;
            n >>= 7;
            i += 1;
        }
        buf[i] = n as u8;
        self.small().extend_from_slice(&buf[..=i]);
    }

    #[inline]
    fn len(&mut self, len: usize) {
        self.varint(len as u64);
    }
}

/// Makes room for `n` more bytes: out of the line of a sequence's loop,
/// which then keeps its values in registers.
#[cold]
#[inline(never)]
fn grow(out: &mut Vec<u8>, n: usize) {
    out.reserve(n);
}

/// Zigzag: small magnitudes of either sign to small unsigned numbers.
#[inline]
pub(super) fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

impl<O: Output> ser::Serializer for &mut Encoder<O> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn is_human_readable(&self) -> bool {
        false
    }

    #[inline]
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.push(v as u8);
        Ok(())
    }

    #[inline]
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.push(v as u8);
        Ok(())
    }

    #[inline]
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.varint(zigzag(v.into()));
        Ok(())
    }

    #[inline]
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.varint(zigzag(v.into()));
        Ok(())
    }

    #[inline]
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.varint(zigzag(v));
        Ok(())
    }

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.varint128(((v << 1) ^ (v >> 127)) as u128);
        Ok(())
    }

    #[inline]
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.push(v);
        Ok(())
    }

    #[inline]
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.varint(v.into());
        Ok(())
    }

    #[inline]
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.varint(v.into());
        Ok(())
    }

    #[inline]
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.varint(v);
        Ok(())
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.varint128(v);
        Ok(())
    }

    #[inline]
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.fixed(v.to_le_bytes());
        Ok(())
    }

    #[inline]
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.fixed(v.to_le_bytes());
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        let mut buf = [0u8; 4];
        self.serialize_str(v.encode_utf8(&mut buf))
    }

    #[inline]
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.len(v.len());
        self.extend(v.as_bytes());
        Ok(())
    }

    #[inline]
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.len(v.len());
        self.extend(v);
        Ok(())
    }

    #[inline]
    fn serialize_none(self) -> Result<(), Error> {
        self.push(0);
        Ok(())
    }

    #[inline]
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        self.push(1);
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Ok(())
    }

    #[inline]
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
    ) -> Result<(), Error> {
        self.varint(index.into());
        Ok(())
    }

    #[inline]
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    #[inline]
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.varint(index.into());
        value.serialize(self)
    }

    #[inline]
    fn serialize_seq(self, len: Option<usize>) -> Result<Self, Error> {
        self.len(len.ok_or(Error::UnknownLength)?);
        Ok(self)
    }

    #[inline]
    fn serialize_tuple(self, _len: usize) -> Result<Self, Error> {
        Ok(self)
    }

    #[inline]
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self, Error> {
        Ok(self)
    }

    #[inline]
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self, Error> {
        self.varint(index.into());
        Ok(self)
    }

    #[inline]
    fn serialize_map(self, len: Option<usize>) -> Result<Self, Error> {
        self.len(len.ok_or(Error::UnknownLength)?);
        Ok(self)
    }

    #[inline]
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self, Error> {
        Ok(self)
    }

    #[inline]
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self, Error> {
        self.varint(index.into());
        Ok(self)
    }

    /// What serde's `Serialize` for `[T]` and `Vec<T>` calls: a slice or
    /// `Vec` of plain data goes as its bytes in one copy, one of wider
    /// integers as varints written in one loop (`plain.rs`); any other
    /// sequence element by element, its length checked against the
    /// iterator's promise.
    fn collect_seq<I>(self, iter: I) -> Result<(), Error>
    where
        I: IntoIterator,
        I::Item: Serialize,
    {
        if let Some((len, bytes)) = plain::seq_bytes(&iter) {
            self.len(len);
            self.extend(bytes);
            return Ok(());
        }
        if let Some(len) = plain::write_int_seq(&iter, self.out.bytes()) {
            // Still a write per element (and the length's) for the debug
            // hint: varints are not the array's memory (`Bulk` is).
            if cfg!(debug_assertions) {
                self.writes += len + 1;
            }
            return Ok(());
        }
        let iter = iter.into_iter();
        let len = match iter.size_hint() {
            (lo, Some(hi)) if lo == hi => lo,
            _ => return Err(Error::UnknownLength),
        };
        self.len(len);
        let mut count = 0;
        for item in iter {
            count += 1;
            if count > len {
                break;
            }
            item.serialize(&mut *self)?;
        }
        if count != len {
            return Err(Error::Custom(format!(
                "a sequence's iterator said {len} elements and gave {}",
                if count > len {
                    "more".to_string()
                } else {
                    count.to_string()
                }
            )));
        }
        Ok(())
    }
}

macro_rules! compound {
    ($trait:ident, $method:ident) => {
        impl<O: Output> ser::$trait for &mut Encoder<O> {
            type Ok = ();
            type Error = Error;

            #[inline]
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                value.serialize(&mut **self)
            }

            #[inline]
            fn end(self) -> Result<(), Error> {
                Ok(())
            }
        }
    };
    ($trait:ident, $method:ident, named) => {
        impl<O: Output> ser::$trait for &mut Encoder<O> {
            type Ok = ();
            type Error = Error;

            #[inline]
            fn $method<T: Serialize + ?Sized>(
                &mut self,
                _key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                value.serialize(&mut **self)
            }

            #[inline]
            fn end(self) -> Result<(), Error> {
                Ok(())
            }
        }
    };
}

compound!(SerializeSeq, serialize_element);
compound!(SerializeTuple, serialize_element);
compound!(SerializeTupleStruct, serialize_field);
compound!(SerializeTupleVariant, serialize_field);
compound!(SerializeStruct, serialize_field, named);
compound!(SerializeStructVariant, serialize_field, named);

impl<O: Output> ser::SerializeMap for &mut Encoder<O> {
    type Ok = ();
    type Error = Error;

    #[inline]
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        key.serialize(&mut **self)
    }

    #[inline]
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut **self)
    }

    #[inline]
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// A plain vector: its bytes, and growth by `crate::copy` (many pages at
/// once for a large append).
impl Output for Vec<u8> {
    #[inline]
    fn bytes(&mut self) -> &mut Vec<u8> {
        self
    }
}
