//! A heap buffer of C bytes aligned for any C type (16 bytes, like
//! `malloc`): copied task arguments (`qthread_fork_copyargs`,
//! `qthread_spawn` with `arg_size > 0`) and sinc values.

/// One 16-byte, 16-aligned block.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Block([u8; 16]);

/// `len` bytes in 16-aligned storage.
pub(crate) struct AlignedBuf {
    blocks: Vec<Block>,
    len: usize,
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        AlignedBuf {
            blocks: self.blocks.clone(),
            len: self.len,
        }
    }

    /// Reuses `self`'s storage (no allocation for an equal length).
    fn clone_from(&mut self, source: &AlignedBuf) {
        self.blocks.clone_from(&source.blocks);
        self.len = source.len;
    }
}

impl AlignedBuf {
    /// A copy of the `len` bytes at `src`.
    ///
    /// # Safety
    /// `src` is valid for reads of `len` bytes (it may be dangling when
    /// `len` is 0).
    pub(crate) unsafe fn copy_of(src: *const u8, len: usize) -> AlignedBuf {
        let mut blocks = vec![Block([0; 16]); len.div_ceil(16)];
        if len > 0 {
            // SAFETY: `src` holds `len` readable bytes (contract); `blocks`
            // holds at least `len` bytes; a fresh Vec does not overlap it.
            unsafe {
                std::ptr::copy_nonoverlapping(src, blocks.as_mut_ptr().cast::<u8>(), len);
            }
        }
        AlignedBuf { blocks, len }
    }

    /// `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            blocks: vec![Block([0; 16]); len.div_ceil(16)],
            len,
        }
    }

    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.blocks.as_ptr().cast()
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.blocks.as_mut_ptr().cast()
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::AlignedBuf;

    #[test]
    fn copies_and_aligns() {
        let src: Vec<u8> = (0..37).collect();
        // SAFETY: src holds 37 bytes.
        let mut b = unsafe { AlignedBuf::copy_of(src.as_ptr(), src.len()) };
        assert_eq!(b.len(), 37);
        assert_eq!(b.as_mut_ptr() as usize % 16, 0);
        // SAFETY: b holds 37 bytes.
        let got = unsafe { std::slice::from_raw_parts(b.as_ptr(), 37) };
        assert_eq!(got, &src[..]);
        // SAFETY: a zero-length copy reads nothing.
        let e = unsafe { AlignedBuf::copy_of(std::ptr::null(), 0) };
        assert_eq!(e.len(), 0);
    }
}
