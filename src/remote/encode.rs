//! Encoding calls and messages (postcard, serde) into a buffer each
//! thread reuses: a call's arguments are encoded, sent (copied into the
//! transport) and dropped before the call returns, so the same memory
//! serves the next call, with no allocation and no page faults once it is
//! large enough.
//!
//! In debug builds, an encoding of 64 KiB or more that postcard wrote in
//! small pieces (a large `Vec<u8>` or `Vec<f64>`, which serde moves
//! element by element) prints a hint, once per type, naming
//! [`Bulk`](super::Bulk), which moves such an array as its bytes.

use postcard::ser_flavors::Flavor;
use serde::Serialize;
use std::cell::Cell;
use std::ops::Deref;
use std::sync::Mutex;

/// The largest buffer a thread keeps for the next encoding; a larger one
/// is freed after use.
const KEEP_AT_MOST: usize = 16 << 20;

thread_local! {
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Bytes encoded into a reused buffer; the buffer goes back to its thread
/// when this is dropped.
pub(crate) struct Encoded(Vec<u8>);

impl Deref for Encoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Encoded {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.0);
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

/// Encodes `value` with postcard at the end of `out` (a buffer its owner
/// reuses; on an error, what was written of `value` stays there).
pub(crate) fn encode_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), postcard::Error> {
    let start = out.len();
    let writes = postcard::serialize_with_flavor(value, Append { out, writes: 0 })?;
    let len = out.len() - start;
    hint_if_piecemeal::<T>(len, writes);
    Ok(())
}

/// postcard's output appended to a buffer the caller owns; counts the
/// writes (for the hint).
struct Append<'a> {
    out: &'a mut Vec<u8>,
    writes: usize,
}

impl Flavor for Append<'_> {
    type Output = usize;

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.writes += 1;
        crate::copy::extend(self.out, data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.writes += 1;
        self.out.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<usize> {
        Ok(self.writes)
    }
}

/// postcard's output into a `Vec` taken from the thread's spare; counts
/// the writes (for the hint).
struct Reused {
    out: Vec<u8>,
    writes: usize,
}

impl Flavor for Reused {
    type Output = (Vec<u8>, usize);

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.writes += 1;
        crate::copy::extend(&mut self.out, data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.writes += 1;
        self.out.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<(Vec<u8>, usize)> {
        Ok((self.out, self.writes))
    }
}

/// Encodes `value` with postcard into this thread's reused buffer.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Encoded, postcard::Error> {
    let buf = SPARE.try_with(Cell::take).unwrap_or_default();
    let (out, writes) = postcard::serialize_with_flavor(
        value,
        Reused {
            out: buf,
            writes: 0,
        },
    )?;
    hint_if_piecemeal::<T>(out.len(), writes);
    Ok(Encoded(out))
}

/// Encodes `value` with postcard into a new vector (what a balanced
/// piece or result keeps until it is sent).
pub(crate) fn encode_to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

/// The least encoded size worth a hint.
const HINT_BYTES: usize = 64 << 10;

/// Writes of this many bytes or fewer on average, over [`HINT_BYTES`]
/// or more, mean a large part went element by element (postcard writes a
/// byte string in one piece, and an `f64` in one of 8 bytes).
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
                 Vec of plain data (Vec<u8>, Vec<f64>, ...) element by element; as a \
                 cantus::Bulk<T> field it travels as its bytes, many times faster (shown once \
                 per type, in debug builds)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_postcard_does_and_reuses_the_buffer() {
        let value = (7u64, "seven", vec![1u32, 2, 3]);
        let a = encode(&value).unwrap();
        assert_eq!(&*a, &postcard::to_allocvec(&value).unwrap()[..]);
        let big = encode(&vec![9u8; 100_000]).unwrap();
        let at = big.as_ptr();
        drop(a);
        drop(big);
        // The larger buffer was kept and serves the next encoding.
        let again = encode(&vec![8u8; 50_000]).unwrap();
        assert_eq!(again.as_ptr(), at);
        assert_eq!(
            again.len(),
            postcard::to_allocvec(&vec![8u8; 50_000]).unwrap().len()
        );
    }

    #[test]
    fn a_large_vec_of_plain_data_is_piecemeal_and_a_bulk_is_not() {
        let count = |value: &dyn Fn(&mut Vec<u8>) -> usize| {
            let mut out = Vec::new();
            let writes = value(&mut out);
            (out.len(), writes)
        };
        let vec_u8 = vec![1u8; 1 << 20];
        let (len, writes) = count(&|out| {
            postcard::serialize_with_flavor(&vec_u8, Append { out, writes: 0 }).unwrap()
        });
        assert!(piecemeal(len, writes), "{len} bytes in {writes} writes");
        let vec_f64 = vec![1.5f64; 1 << 17];
        let (len, writes) = count(&|out| {
            postcard::serialize_with_flavor(&vec_f64, Append { out, writes: 0 }).unwrap()
        });
        assert!(piecemeal(len, writes), "{len} bytes in {writes} writes");
        let bulk = crate::remote::Bulk::from(vec_f64.clone());
        let (len, writes) = count(&|out| {
            postcard::serialize_with_flavor(&bulk, Append { out, writes: 0 }).unwrap()
        });
        assert!(!piecemeal(len, writes), "{len} bytes in {writes} writes");
        // Small encodings never hint, however they were written.
        assert!(!piecemeal(1000, 1000));
    }
}
