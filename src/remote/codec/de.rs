//! The codec's deserializer: the bytes the module doc shows back to a
//! value, borrowing strings and byte strings from the input where the
//! type can keep them.

use super::{Error, plain, varint_max};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

/// Decodes a `T` from the front of `bytes` (bytes after it are ignored).
pub(crate) fn from_bytes<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
    T::deserialize(&mut Decoder { input: bytes })
}

/// The deserializer: the input not yet read.
struct Decoder<'de> {
    input: &'de [u8],
}

impl<'de> Decoder<'de> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        if n > self.input.len() {
            return Err(Error::End);
        }
        let (head, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(head)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, Error> {
        let (&b, rest) = self.input.split_first().ok_or(Error::End)?;
        self.input = rest;
        Ok(b)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let bytes = self.take(N)?;
        Ok(bytes.try_into().expect("take gave N bytes"))
    }

    /// A varint of a type of `bits` bits (at most 64).
    #[inline]
    fn varint(&mut self, bits: u32) -> Result<u64, Error> {
        read_varint(&mut self.input, bits)
    }

    fn varint128(&mut self) -> Result<u128, Error> {
        let mut n = 0u128;
        for i in 0..varint_max(128) {
            let b = self.byte()?;
            n |= u128::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                // The last of 19 bytes carries 2 bits (7 * 18 = 126).
                if i == varint_max(128) - 1 && b > 0x03 {
                    return Err(Error::BadVarint);
                }
                return Ok(n);
            }
        }
        Err(Error::BadVarint)
    }

    #[inline]
    fn len(&mut self) -> Result<usize, Error> {
        let n = self.varint(usize::BITS)?;
        usize::try_from(n).map_err(|_| Error::BadVarint)
    }
}

/// A varint of a type of `bits` bits (at most 64) from the front of
/// `input`, which moves past it: the decoder's reading of every integer,
/// and of the integer sequences `plain.rs` reads in one loop.
#[inline]
pub(super) fn read_varint(input: &mut &[u8], bits: u32) -> Result<u64, Error> {
    let (&first, rest) = input.split_first().ok_or(Error::End)?;
    *input = rest;
    if first < 0x80 {
        return Ok(first.into());
    }
    let mut n = u64::from(first & 0x7f);
    for i in 1..varint_max(bits) {
        let (&b, rest) = input.split_first().ok_or(Error::End)?;
        *input = rest;
        n |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return fits(n, bits, i, b);
        }
    }
    Err(Error::BadVarint)
}

/// `n`, whose last byte `last` was byte `i`, if its bits fit `bits`.
#[inline]
fn fits(n: u64, bits: u32, i: usize, last: u8) -> Result<u64, Error> {
    let used = 7 * i as u32;
    if used + 7 > bits && u32::from(last) >> (bits - used) != 0 {
        return Err(Error::BadVarint);
    }
    Ok(n)
}

/// Undoes the serializer's zigzag.
#[inline]
pub(super) fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = Error;

    fn is_human_readable(&self) -> bool {
        false
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::NotSelfDescribing("deserialize_any"))
    }

    #[inline]
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.byte()? {
            0 => visitor.visit_bool(false),
            1 => visitor.visit_bool(true),
            b => Err(Error::BadBool(b)),
        }
    }

    #[inline]
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i8(self.byte()? as i8)
    }

    #[inline]
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i16(unzigzag(self.varint(16)?) as i16)
    }

    #[inline]
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i32(unzigzag(self.varint(32)?) as i32)
    }

    #[inline]
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(unzigzag(self.varint(64)?))
    }

    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let n = self.varint128()?;
        visitor.visit_i128(((n >> 1) as i128) ^ -((n & 1) as i128))
    }

    #[inline]
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u8(self.byte()?)
    }

    #[inline]
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u16(self.varint(16)? as u16)
    }

    #[inline]
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u32(self.varint(32)? as u32)
    }

    #[inline]
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(self.varint(64)?)
    }

    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u128(self.varint128()?)
    }

    #[inline]
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f32(f32::from_le_bytes(self.array()?))
    }

    #[inline]
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(f64::from_le_bytes(self.array()?))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.len()?;
        if len > 4 {
            return Err(Error::BadChar);
        }
        let s = std::str::from_utf8(self.take(len)?).map_err(|_| Error::BadChar)?;
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => visitor.visit_char(c),
            _ => Err(Error::BadChar),
        }
    }

    #[inline]
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.len()?;
        let s = std::str::from_utf8(self.take(len)?).map_err(|_| Error::BadUtf8)?;
        visitor.visit_borrowed_str(s)
    }

    #[inline]
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    #[inline]
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.len()?;
        visitor.visit_borrowed_bytes(self.take(len)?)
    }

    #[inline]
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    #[inline]
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.byte()? {
            0 => visitor.visit_none(),
            1 => visitor.visit_some(self),
            b => Err(Error::BadOption(b)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    #[inline]
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    /// A sequence: serde's own `Vec` of plain data in one copy
    /// (`plain.rs`), anything else element by element.
    #[inline]
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.len()?;
        if let Some(vec) = plain::decode_vec::<V>(len, &mut self.input) {
            return vec;
        }
        visitor.visit_seq(Elements {
            de: self,
            left: len,
        })
    }

    #[inline]
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements {
            de: self,
            left: len,
        })
    }

    #[inline]
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }

    #[inline]
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.len()?;
        visitor.visit_map(Elements {
            de: self,
            left: len,
        })
    }

    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(fields.len(), visitor)
    }

    #[inline]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_enum(self)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::NotSelfDescribing("deserialize_identifier"))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::NotSelfDescribing("deserialize_ignored_any"))
    }
}

/// A sequence's, tuple's or map's elements, `left` still to read.
struct Elements<'a, 'de> {
    de: &'a mut Decoder<'de>,
    left: usize,
}

impl<'de> Elements<'_, 'de> {
    /// The next element (or map key), if any is left.
    #[inline]
    fn next<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.next(seed)
    }

    /// The length, where the input could hold it (each element takes a
    /// byte or more but for a few types), so that a bad length does not
    /// size an allocation.
    #[inline]
    fn size_hint(&self) -> Option<usize> {
        (self.left <= self.de.input.len()).then_some(self.left)
    }
}

impl<'de> de::MapAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        self.next(seed)
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(&mut *self.de)
    }

    #[inline]
    fn size_hint(&self) -> Option<usize> {
        (self.left <= self.de.input.len()).then_some(self.left)
    }
}

impl<'de> de::EnumAccess<'de> for &mut Decoder<'de> {
    type Error = Error;
    type Variant = Self;

    #[inline]
    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let index = self.varint(32)? as u32;
        let value = seed.deserialize(index.into_deserializer())?;
        Ok((value, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Decoder<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }

    #[inline]
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }

    #[inline]
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self, len, visitor)
    }

    #[inline]
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self, fields.len(), visitor)
    }
}
