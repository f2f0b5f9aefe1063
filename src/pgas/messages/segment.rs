//! A locale's heap segment when no other process maps it: an anonymous
//! private mapping of this process, whose pages the kernel zeroes when
//! they are first touched (so a large segment costs address space, not
//! memory, as the shared region's does).

use crate::error::{Error, ErrorKind};
use std::ptr::NonNull;

/// `len` bytes of zeroed memory, page-aligned, unmapped on drop.
pub(crate) struct Segment {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the segment is a mapping of this process that `Segment` owns;
// the pointer is usable from any thread, and what is done through it is
// synchronized by its users (the protocols of `pgas/README.md`).
unsafe impl Send for Segment {}
// SAFETY: as for Send; `&Segment` only hands out the address.
unsafe impl Sync for Segment {}

impl Segment {
    /// Maps `len` bytes (`len > 0`).
    pub(crate) fn new(len: usize) -> Result<Segment, Error> {
        assert!(len > 0, "a heap segment has bytes");
        // SAFETY: an anonymous private mapping at an address of the
        // kernel's choice touches no existing memory; the result is
        // checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::new(
                ErrorKind::Os,
                format!(
                    "cantus::pgas: could not map a heap segment of {len} bytes: {}; lower \
                     CANTUS_HEAP_BYTES or Builder::heap_bytes",
                    std::io::Error::last_os_error()
                ),
            ));
        }
        Ok(Segment {
            base: NonNull::new(p.cast()).expect("mmap never returns null on success"),
            len,
        })
    }

    /// The first byte (page-aligned).
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base..base + len` is the mapping made in `new`, which
        // nothing uses any more (whoever reaches the segment holds the
        // memory that owns it).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_is_zeroed_and_aligned() {
        let s = Segment::new(1 << 20).unwrap();
        assert_eq!(s.base().as_ptr() as usize % 4096, 0);
        // SAFETY: the mapping is 1 MiB long, ours alone.
        let bytes = unsafe { std::slice::from_raw_parts_mut(s.base().as_ptr(), 1 << 20) };
        assert!(bytes.iter().step_by(4093).all(|&b| b == 0));
        bytes[12345] = 7;
        assert_eq!(bytes[12345], 7);
    }
}
