//! Task stacks: `mmap`'d once, with a guard page set once when the stack is
//! made (never an `mprotect` per spawn), then pooled and reused.

use corosensei::stack::valgrind::ValgrindStackRegistration;
use corosensei::stack::{Stack, StackPointer};
use std::io;
use std::mem::ManuallyDrop;
use std::ptr;

/// One task stack: `[guard page | usable stack]`, growing down from `base`.
pub(crate) struct TaskStack {
    /// Lowest address of the mapping (the guard page starts here).
    mapping: usize,
    mapping_len: usize,
    guard_len: usize,
    valgrind: ManuallyDrop<ValgrindStackRegistration>,
}

// SAFETY: a TaskStack owns its mapping exclusively; moving that ownership to
// another thread is sound (nothing in it is tied to the creating thread).
unsafe impl Send for TaskStack {}

impl TaskStack {
    /// Maps a stack of `size` usable bytes (a multiple of the page size)
    /// below one inaccessible guard page.
    pub(crate) fn new(size: usize, page: usize) -> io::Result<TaskStack> {
        let guard_len = page;
        let mapping_len = size + guard_len;
        // SAFETY: anonymous private mapping with no address hint; the result
        // is checked before use.
        let mapping = unsafe {
            libc::mmap(
                ptr::null_mut(),
                mapping_len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = TaskStack {
            mapping: mapping as usize,
            mapping_len,
            guard_len,
            // SAFETY: registration only informs valgrind of the range; the
            // range is the mapping we just made and own.
            valgrind: ManuallyDrop::new(ValgrindStackRegistration::new(
                mapping.cast(),
                mapping_len,
            )),
        };
        // SAFETY: the range lies inside the mapping made above; the guard page
        // (lowest page) stays PROT_NONE.
        let rc = unsafe {
            libc::mprotect(
                (stack.mapping + guard_len) as *mut libc::c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The guard page's address range `[lo, hi)`.
    pub(crate) fn guard(&self) -> (usize, usize) {
        (self.mapping, self.mapping + self.guard_len)
    }

    /// Usable bytes.
    pub(crate) fn size(&self) -> usize {
        self.mapping_len - self.guard_len
    }

    /// Bytes of this stack currently resident in memory (its high-water
    /// mark, since touched stack pages stay resident until unmapped).
    pub(crate) fn resident_bytes(&self, page: usize) -> usize {
        let pages = self.size() / page;
        let mut vec = vec![0u8; pages];
        // SAFETY: the range is the usable part of our mapping (page
        // aligned); `vec` has one byte per page as mincore requires.
        let rc = unsafe {
            libc::mincore(
                (self.mapping + self.guard_len) as *mut libc::c_void,
                self.size(),
                vec.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return 0;
        }
        vec.iter().filter(|b| **b & 1 != 0).count() * page
    }
}

// SAFETY: base/limit describe a mapping we own for the lifetime of the
// TaskStack, readable and writable between limit and base, with a guard page
// directly below `limit`, as corosensei's `Stack` contract requires.
unsafe impl Stack for TaskStack {
    fn base(&self) -> StackPointer {
        StackPointer::new(self.mapping + self.mapping_len).expect("mapping is never at address 0")
    }

    fn limit(&self) -> StackPointer {
        StackPointer::new(self.mapping + self.guard_len).expect("mapping is never at address 0")
    }
}

impl Drop for TaskStack {
    fn drop(&mut self) {
        // SAFETY: deregistered exactly once, before the range is unmapped.
        unsafe { ManuallyDrop::drop(&mut self.valgrind) };
        // SAFETY: we own the whole mapping and nothing runs on it any more
        // (a stack is dropped only when its coroutine has finished).
        unsafe { libc::munmap(self.mapping as *mut libc::c_void, self.mapping_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_page_is_below_the_usable_range() {
        let page = crate::config::page_size();
        let s = TaskStack::new(16 * page, page).unwrap();
        let (lo, hi) = s.guard();
        assert_eq!(hi - lo, page);
        assert_eq!(s.limit().get(), hi);
        assert_eq!(s.base().get() - s.limit().get(), 16 * page);
        assert_eq!(
            s.resident_bytes(page),
            0,
            "an untouched stack uses no memory"
        );
        // Touch the top page: it becomes resident.
        // SAFETY: base-1 lies in the usable, writable range.
        unsafe { ptr::write_volatile((s.base().get() - 1) as *mut u8, 1) };
        assert_eq!(s.resident_bytes(page), page);
    }
}
