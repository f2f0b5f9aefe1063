//! Symmetric allocation: [`alloc`] and the [`GlobalArray`] it returns.

use super::collective::{Collective, mismatch};
use super::memory::{ALLOC, AllocFailure};
use super::ptr::GlobalPtr;
use super::space::Space;
use crate::comm::symmetric::AREA_ALIGN;
use crate::error::{Error, ErrorKind, Locales};
use bytemuck::Pod;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// `n` elements of `T` on every locale, at the same offset of each
/// locale's heap segment, zeroed. Freed when every locale dropped its
/// handle.
///
/// A collective call ([`spmd`](super::spmd)): every locale calls `alloc`
/// in the same order with the same size, like `shmem_malloc`, and each
/// gets its own handle to the same block. It returns once every locale
/// has zeroed its part, so any locale may put into any part at once.
///
/// The heap is one stack of blocks for all locales (a bump allocator):
/// a freed block returns to the heap once every block allocated after it
/// was freed too.
///
/// # Errors
///
/// [`ErrorKind::HeapFull`] on every locale if the heap has no room: the
/// message says how many bytes were asked for, how many are left, and
/// that `CANTUS_HEAP_BYTES` or [`Builder::heap_bytes`](crate::Builder::heap_bytes)
/// raises the limit. [`ErrorKind::Locale`] on every locale if the
/// locales asked for different sizes, if it is called outside an SPMD
/// body (see [the rule](super#the-spmd-model)), or if another task of
/// this locale is in a collective; [`ErrorKind::NoRuntime`] if no
/// runtime runs.
pub fn alloc<T: Pod>(n: usize) -> Result<GlobalArray<T>, Error> {
    alloc_for("pgas::alloc", n)
}

/// [`alloc`] on behalf of `call` (`pgas::alloc`, `pgas::BlockArray::new`),
/// whose name its errors carry.
pub(crate) fn alloc_for<T: Pod>(call: &str, n: usize) -> Result<GlobalArray<T>, Error> {
    let c = Collective::enter(call)?;
    let s = c.space.clone();
    let align = align_of::<T>();
    if align > AREA_ALIGN {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!(
                "cantus::{call}: {} is aligned to {align} bytes; global memory \
                 is aligned to at most {AREA_ALIGN}",
                std::any::type_name::<T>()
            ),
        ));
    }
    let bytes = n.saturating_mul(size_of::<T>());
    let block = match s
        .memory
        .alloc([ALLOC, bytes as u64, align as u64], bytes, align)
    {
        Ok(block) => block,
        Err(AllocFailure::Mismatch(m)) => return Err(mismatch(call, m)),
        Err(AllocFailure::Full(full)) => {
            let total = s.heap_bytes();
            return Err(Error::new(
                ErrorKind::HeapFull,
                format!(
                    "cantus::{call}: the symmetric heap is full: asked for {bytes} bytes \
                     ({n} x {}) on each locale, but {} of its {total} bytes per locale are \
                     left; raise CANTUS_HEAP_BYTES or Builder::heap_bytes (now {total}), or \
                     free the global arrays allocated last",
                    std::any::type_name::<T>(),
                    full.left
                ),
            ));
        }
    };
    Ok(GlobalArray {
        space: s,
        data: block.data,
        header: block.header,
        len: n,
        _t: PhantomData,
    })
}

/// A symmetric allocation: `len` elements of `T` on every locale, at the
/// same offset; made by [`alloc`]. Each locale holds its own handle; the
/// block is freed when all of them were dropped.
pub struct GlobalArray<T> {
    space: Arc<Space>,
    /// Byte offset of the data in every segment.
    data: usize,
    /// Byte offset of the block's header in locale 0's segment.
    header: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> GlobalArray<T> {
    /// Elements on each locale.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether each locale's part is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A pointer to the first element of `locale`'s part.
    ///
    /// # Panics
    ///
    /// If `locale` is not a locale of the job.
    pub fn ptr(&self, locale: usize) -> GlobalPtr<T> {
        assert!(
            locale < self.space.locales,
            "cantus::pgas::GlobalArray::ptr: locale {locale} does not exist (the job has {})",
            Locales(self.space.locales)
        );
        GlobalPtr::new(locale, self.data, self.data + self.len * size_of::<T>())
    }

    /// The first element of this locale's part, in this process.
    fn base(&self) -> *mut T {
        // SAFETY: `data` lies within our segment (granted within
        // heap_bytes), so the result stays inside the mapping.
        unsafe {
            self.space
                .local_segment()
                .as_ptr()
                .add(self.data)
                .cast::<T>()
        }
    }

    /// This locale's part. Other locales may put into it meanwhile; order
    /// such writes with [`barrier`](super::barrier) or atomics, or the
    /// values seen are unspecified.
    pub fn local(&self) -> &[T] {
        // SAFETY: the part's `len` elements lie in our segment (granted
        // within heap_bytes), aligned for T (data is aligned to
        // align_of::<T>()), zeroed or written as T since: valid `T`s
        // (Pod). The mapping lives as long as `self.space`.
        unsafe { std::slice::from_raw_parts(self.base(), self.len) }
    }

    /// This locale's part, mutably (see [`local`](GlobalArray::local)).
    pub fn local_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `local`; `&mut self` makes this the only borrow
        // through this handle, and each locale's handle is its own.
        unsafe { std::slice::from_raw_parts_mut(self.base(), self.len) }
    }
}

impl<T> Drop for GlobalArray<T> {
    fn drop(&mut self) {
        self.space.memory.release(self.header);
    }
}

impl<T> fmt::Debug for GlobalArray<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GlobalArray<{}>({} per locale at byte {})",
            std::any::type_name::<T>(),
            self.len,
            self.data
        )
    }
}
