//! `qpool` (`qthread/qpool.h`): Qthreads' memory pool of fixed-size
//! items. Items are carved from chunks of about 16 KiB obtained from the
//! system allocator with the pool's alignment, and are never returned to
//! the system before `qpool_destroy` (which frees every chunk, items
//! still out included, as Qthreads).
//!
//! Free items live on free lists: one cache per shepherd (worker) that
//! ran when the pool was made, and a shared list. A task allocates from
//! and frees to its shepherd's cache (its lock is uncontended unless a
//! blocked-call thread runs the shepherd's task), moving items between
//! the cache and the shared list in batches; outside threads use the
//! shared list. A pool needs no runtime (without one, every call uses the
//! shared list).

use crate::ffi::error::{self, Fail, boundary_void};
use crossbeam_utils::CachePadded;
use std::alloc::Layout;
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

use super::boundary_ptr;

/// Bytes per chunk (at least 16 items a chunk).
const CHUNK_BYTES: usize = 16 << 10;
/// Items moved at once between a shepherd's cache and the shared list.
const BATCH: usize = 32;
/// The alignment of an item when the caller asks for 0: `malloc`'s.
const DEFAULT_ALIGN: usize = 16;

/// A pool of fixed-size items (`qpool` points at one).
pub struct Qpool {
    /// Bytes per item: the item size rounded up to the alignment.
    slot: usize,
    /// The layout of every chunk.
    chunk: Layout,
    /// The chunks, as addresses, for `qpool_destroy`.
    chunks: Mutex<Vec<usize>>,
    /// Free items no cache holds.
    shared: Mutex<Vec<usize>>,
    /// A free-item cache per shepherd.
    caches: Box<[CachePadded<Mutex<Vec<usize>>>]>,
}

/// Locks `m`; the lists hold plain addresses, consistent even if a
/// holder panicked (pushes and pops only).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Qpool {
    /// Moves up to `n` items from the shared list into `to`, carving a
    /// new chunk first if the shared list is empty; false if the system
    /// allocator refused a chunk.
    fn refill(&self, to: &mut Vec<usize>, n: usize) -> bool {
        let mut shared = lock(&self.shared);
        if shared.is_empty() {
            // SAFETY: the chunk layout has a non-zero size (at least 16
            // slots of at least 1 byte).
            let base = unsafe { std::alloc::alloc(self.chunk) };
            if base.is_null() {
                return false;
            }
            lock(&self.chunks).push(base as usize);
            let count = self.chunk.size() / self.slot;
            shared.extend((0..count).rev().map(|i| base as usize + i * self.slot));
        }
        let keep = shared.len().saturating_sub(n);
        to.extend(shared.drain(keep..));
        true
    }

    /// The caller's shepherd's cache, if it is a task of one.
    fn cache(&self) -> Option<&Mutex<Vec<usize>>> {
        let w = crate::query::current_worker()?;
        self.caches.get(w).map(|c| &**c)
    }

    /// A free item, or `None` if memory ran out.
    fn alloc(&self) -> Option<usize> {
        match self.cache() {
            Some(cache) => {
                let mut c = lock(cache);
                if c.is_empty() && !self.refill(&mut c, BATCH) {
                    return None;
                }
                c.pop()
            }
            None => {
                let mut one = Vec::with_capacity(1);
                self.refill(&mut one, 1).then(|| one.pop()).flatten()
            }
        }
    }

    /// Returns `item` to the free lists.
    fn free(&self, item: usize) {
        match self.cache() {
            Some(cache) => {
                let mut c = lock(cache);
                c.push(item);
                if c.len() > 2 * BATCH {
                    let keep = c.len() - BATCH;
                    lock(&self.shared).extend(c.drain(keep..));
                }
            }
            None => lock(&self.shared).push(item),
        }
    }
}

impl Drop for Qpool {
    fn drop(&mut self) {
        for &c in lock(&self.chunks).iter() {
            // SAFETY: each chunk was allocated in `refill` with this
            // layout and is freed once, here.
            unsafe { std::alloc::dealloc(c as *mut u8, self.chunk) };
        }
    }
}

/// qpool_create_aligned: a pool of items of `item_size` bytes, each
/// aligned to `alignment` (a power of two; 0 for 16, `malloc`'s). NULL
/// for a size of 0 or an alignment that is not a power of two.
#[unsafe(no_mangle)]
pub extern "C" fn qpool_create_aligned(item_size: usize, alignment: usize) -> *mut Qpool {
    let call = "qpool_create_aligned";
    boundary_ptr(call, || create(call, item_size, alignment))
}

/// qpool_create: a pool of items of `item_size` bytes, aligned to 16.
#[unsafe(no_mangle)]
pub extern "C" fn qpool_create(item_size: usize) -> *mut Qpool {
    let call = "qpool_create";
    boundary_ptr(call, || create(call, item_size, 0))
}

/// The pool both constructors make.
fn create(call: &str, item_size: usize, alignment: usize) -> Result<*mut Qpool, Fail> {
    let align = if alignment == 0 {
        DEFAULT_ALIGN
    } else {
        alignment
    };
    if item_size == 0 || !align.is_power_of_two() {
        return Err(Fail::new(
            error::EINVAL,
            format!(
                "{call}: item size {item_size} and alignment {alignment} \
                 (a size > 0 and a power of two, or 0, are needed)"
            ),
        ));
    }
    let too_big = || {
        Fail::new(
            error::EINVAL,
            format!("{call}: item size {item_size} too large"),
        )
    };
    let slot = item_size
        .checked_next_multiple_of(align)
        .ok_or_else(too_big)?;
    let per_chunk = (CHUNK_BYTES / slot).max(16);
    let size = slot.checked_mul(per_chunk).ok_or_else(too_big)?;
    let chunk = Layout::from_size_align(size, align).map_err(|_| too_big())?;
    let workers = crate::query::workers().unwrap_or(0);
    Ok(Box::into_raw(Box::new(Qpool {
        slot,
        chunk,
        chunks: Mutex::new(Vec::new()),
        shared: Mutex::new(Vec::new()),
        caches: (0..workers)
            .map(|_| CachePadded::new(Mutex::new(Vec::new())))
            .collect(),
    })))
}

/// qpool_alloc: an item of `pool` (not zeroed); NULL if memory ran out
/// or `pool` is NULL (with `cantus_last_error`).
///
/// # Safety
/// `pool` is NULL or a live pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qpool_alloc(pool: *mut Qpool) -> *mut c_void {
    let call = "qpool_alloc";
    boundary_ptr(call, || {
        // SAFETY: per the contract.
        let pool = unsafe { super::handle(call, pool, "pool")? };
        pool.alloc()
            .map(|a| a as *mut c_void)
            .ok_or_else(|| Fail::new(error::EOS, format!("{call}: out of memory")))
    })
}

/// qpool_free: returns `mem`, an item of `pool`, to it. A NULL `pool` or
/// `mem`, or a `mem` not aligned as the pool's items, is reported on
/// stderr and in `cantus_last_error` and ignored.
///
/// # Safety
/// `pool` is NULL or a live pool; `mem` is NULL or an item `qpool_alloc`
/// returned from this pool and not freed since.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qpool_free(pool: *mut Qpool, mem: *mut c_void) {
    let call = "qpool_free";
    boundary_void(call, || {
        // SAFETY: per the contract.
        let pool = unsafe { super::handle(call, pool, "pool")? };
        if mem.is_null() {
            return Err(Fail::null(call, "mem"));
        }
        if (mem as usize) % pool.chunk.align() != 0 {
            return Err(Fail::new(
                error::EINVAL,
                format!("{call}: {mem:p} is not an item of this pool (misaligned)"),
            ));
        }
        pool.free(mem as usize);
        Ok(())
    })
}

/// qpool_destroy: frees `pool` and all its memory, items not yet freed
/// included. A NULL `pool` is reported and ignored.
///
/// # Safety
/// `pool` is NULL or a live pool; neither it nor its items are used
/// during or after this call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qpool_destroy(pool: *mut Qpool) {
    let call = "qpool_destroy";
    boundary_void(call, || {
        // SAFETY: per the contract.
        unsafe { super::handle(call, pool, "pool")? };
        // SAFETY: made by Box::into_raw in create; the caller uses it no
        // more.
        drop(unsafe { Box::from_raw(pool) });
        Ok(())
    })
}
