//! Encoding calls and messages (postcard, serde) into a buffer each
//! thread reuses: a call's arguments are encoded, sent (copied into the
//! transport) and dropped before the call returns, so the same memory
//! serves the next call, with no allocation and no page faults once it is
//! large enough.

use postcard::ser_flavors::Flavor;
use serde::Serialize;
use std::cell::Cell;
use std::ops::Deref;

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
    postcard::serialize_with_flavor(value, Append(out))
}

/// postcard's output appended to a buffer the caller owns.
struct Append<'a>(&'a mut Vec<u8>);

impl Flavor for Append<'_> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// postcard's output into a `Vec` taken from the thread's spare.
struct Reused(Vec<u8>);

impl Flavor for Reused {
    type Output = Vec<u8>;

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}

/// Encodes `value` with postcard into this thread's reused buffer.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Encoded, postcard::Error> {
    let buf = SPARE.try_with(Cell::take).unwrap_or_default();
    postcard::serialize_with_flavor(value, Reused(buf)).map(Encoded)
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
}
