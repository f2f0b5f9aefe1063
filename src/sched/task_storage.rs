//! Per-task storage: what belongs to the running task, made at its first
//! request and freed when the task ends: bytes, which the C ABI hands out
//! as Qthreads' task-local storage (`qthread_get_tasklocal`), a value
//! the layer that spawned the task attaches to it (the C ABI's team), and
//! a *label*, a number that layer gives the task (the C ABI's Qthreads
//! id, drawn at the task's first `qthread_id` call).
//!
//! A worker keeps the running task's storage in one word, a pointer
//! (`WorkerLocal::storage`): `run_task` clears it before a task runs and
//! frees what the task made when it returns; a task that blocks takes
//! its word with it across the switch (`suspend_current`), as it does
//! its id. A task that makes no request costs two stores and a branch.
//! A label alone needs no storage: the word holds it in place of the
//! pointer (marked by its second bit), so labelling every task allocates
//! nothing; storage made later takes the label over.
//! The word's lowest bit marks a task whose body may leave its worker
//! for a blocking call (`worker/blocking_call.rs`); while it is away, the
//! blocking-call thread holds the word (and the task reaches its storage
//! there), and it goes home with the task.
//! Tasks that a waiting `join` or scope runs inline belong to the task
//! that runs them, and share its storage.

use super::WorkerLocal;
use std::alloc::{self, Layout};
use std::any::Any;
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::Arc;

/// Alignment of the storage: enough for any C type (`max_align_t`).
const ALIGN: usize = 16;

/// One task's storage.
#[derive(Default)]
pub(crate) struct TaskStorage {
    bytes: Option<Bytes>,
    attached: Option<Arc<dyn Any + Send + Sync>>,
    /// The task's label, 0 for none (see [`set_label`]).
    label: u64,
}

/// Task-local bytes: `len` of them, zeroed when made, aligned for any C
/// type.
struct Bytes {
    bytes: NonNull<u8>,
    len: usize,
}

impl Bytes {
    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len.max(1), ALIGN).expect("task storage size fits a layout")
    }

    fn new(len: usize) -> Bytes {
        let layout = Self::layout(len);
        // SAFETY: the layout has a nonzero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let bytes = NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Bytes { bytes, len }
    }

    /// Grows to `len` bytes, keeping the contents and zeroing the rest
    /// (the bytes may move).
    fn grow(&mut self, len: usize) {
        if len <= self.len {
            return;
        }
        let new = Self::layout(len);
        // SAFETY: `bytes` was allocated with `layout(self.len)` (by `new`
        // or an earlier `grow`); the new size is nonzero and fits a layout.
        let p = unsafe { alloc::realloc(self.bytes.as_ptr(), Self::layout(self.len), new.size()) };
        let p = NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(new));
        // SAFETY: `p` holds `len` bytes, of which the first `self.len` are
        // the old contents; the rest is ours to zero.
        unsafe { p.as_ptr().add(self.len).write_bytes(0, len - self.len) };
        self.bytes = p;
        self.len = len;
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout, and dropped once.
        unsafe { alloc::dealloc(self.bytes.as_ptr(), Self::layout(self.len)) };
    }
}

/// The mark a task word carries in its lowest bit: the task's body may
/// leave its worker in a blocking action (`worker/blocking_call.rs`). The storage
/// is a `Box` (aligned to 8), so the bit is free.
const MAY_GO_AWAY: usize = 1;

/// The mark of a task word that holds a label in place of a pointer
/// (the label in the bits above [`LABEL_SHIFT`]): its second bit, free in
/// a pointer to a `Box<TaskStorage>` (aligned to 8).
const INLINE_LABEL: usize = 2;
/// Where an inline label starts in a task word.
const LABEL_SHIFT: u32 = 3;
/// The largest label a task word holds in place (larger ones make the
/// storage).
const MAX_INLINE_LABEL: u64 = (usize::MAX >> LABEL_SHIFT) as u64;

/// The storage a task word points at (null: none, or only a label).
#[inline]
fn storage_of(word: *mut TaskStorage) -> *mut TaskStorage {
    if word.addr() & INLINE_LABEL != 0 {
        return std::ptr::null_mut();
    }
    word.map_addr(|a| a & !MAY_GO_AWAY)
}

/// A task word holding `label` in place, with the may-go-away mark of
/// `word`.
#[inline]
fn inline_label(label: u64, word: *mut TaskStorage) -> *mut TaskStorage {
    debug_assert!(label <= MAX_INLINE_LABEL);
    std::ptr::without_provenance_mut::<TaskStorage>(
        (label as usize) << LABEL_SHIFT | INLINE_LABEL | (word.addr() & MAY_GO_AWAY),
    )
}

/// The label a task word holds in place, if it does.
#[inline]
fn label_in(word: *mut TaskStorage) -> Option<u64> {
    (word.addr() & INLINE_LABEL != 0).then(|| (word.addr() >> LABEL_SHIFT) as u64)
}

/// Whether a task word carries the may-go-away mark.
#[inline]
pub(crate) fn may_go_away(word: *mut TaskStorage) -> bool {
    word.addr() & MAY_GO_AWAY != 0
}

/// A task word with the may-go-away mark set or cleared.
#[inline]
pub(crate) fn with_may_go_away(word: *mut TaskStorage, on: bool) -> *mut TaskStorage {
    word.map_addr(|a| {
        if on {
            a | MAY_GO_AWAY
        } else {
            a & !MAY_GO_AWAY
        }
    })
}

/// The running task's storage word: its worker's, or, while the task is
/// away in a blocking call, the blocking-call thread's copy
/// (`worker/blocking_call.rs`). `None` outside a task.
fn word() -> Option<&'static Cell<*mut TaskStorage>> {
    match WorkerLocal::current() {
        Some(l) if l.in_task() => Some(&l.storage),
        Some(_) => None,
        None => super::worker::blocking_call::away_task().map(|(_, w)| w),
    }
}

/// The running task's storage, made if it has none yet; `None` outside
/// a task.
fn current() -> Option<&'static mut TaskStorage> {
    let cell = word()?;
    let word = cell.get();
    let mut p = storage_of(word);
    if p.is_null() {
        p = Box::into_raw(Box::new(TaskStorage {
            label: label_in(word).unwrap_or(0),
            ..TaskStorage::default()
        }));
        cell.set(with_may_go_away(p, may_go_away(word)));
    }
    // SAFETY: a non-null pointer in the task word is the running task's
    // storage (see the module comment), alive until the task ends; only
    // the thread that runs the task touches it, and callers keep the
    // reference within one call that does not switch tasks.
    Some(unsafe { &mut *p })
}

/// The running task's storage if it has some (never makes it).
fn existing() -> Option<&'static TaskStorage> {
    // SAFETY: as in `current`.
    unsafe { storage_of(word()?.get()).as_ref() }
}

/// The running task's bytes, grown to at least `len` (contents kept, new
/// bytes zeroed; they may move when they grow): their address and size.
/// `None` outside a task.
pub(crate) fn bytes(len: usize) -> Option<(*mut u8, usize)> {
    let s = current()?;
    let b = match &mut s.bytes {
        Some(b) => {
            b.grow(len);
            b
        }
        none => none.insert(Bytes::new(len)),
    };
    Some((b.bytes.as_ptr(), b.len))
}

/// The size of the running task's bytes: `Some(0)` if it made none yet,
/// `None` outside a task.
pub(crate) fn bytes_len() -> Option<usize> {
    word()?;
    Some(
        existing()
            .and_then(|s| s.bytes.as_ref())
            .map_or(0, |b| b.len),
    )
}

/// Attaches `value` to the running task (replacing what was attached);
/// `false` outside a task.
pub(crate) fn attach(value: Arc<dyn Any + Send + Sync>) -> bool {
    match current() {
        Some(s) => {
            s.attached = Some(value);
            true
        }
        None => false,
    }
}

/// What is attached to the running task, if anything.
pub(crate) fn attached() -> Option<Arc<dyn Any + Send + Sync>> {
    existing()?.attached.clone()
}

/// Gives the running task the label `label` (replacing one it had; 0
/// takes it away), without allocating when it has no storage; `false`
/// outside a task.
pub(crate) fn set_label(label: u64) -> bool {
    let Some(cell) = word() else {
        return false;
    };
    let word = cell.get();
    let p = storage_of(word);
    if !p.is_null() {
        // SAFETY: as in `current`: the running task's storage.
        unsafe { (*p).label = label };
    } else if label == 0 {
        cell.set(with_may_go_away(std::ptr::null_mut(), may_go_away(word)));
    } else if label <= MAX_INLINE_LABEL {
        cell.set(inline_label(label, word));
    } else if let Some(s) = current() {
        s.label = label;
    }
    true
}

/// The running task's label, if it was given one. Never inlined (as
/// [`set_label`]).
#[inline(never)]
pub(crate) fn label() -> Option<u64> {
    let word = word()?.get();
    if let Some(l) = label_in(word) {
        return Some(l);
    }
    // SAFETY: as in `current`.
    let l = unsafe { storage_of(word).as_ref() }.map_or(0, |s| s.label);
    (l != 0).then_some(l)
}

/// Frees a task's storage when the task has ended (`run_task`), given
/// its task word.
#[inline]
pub(crate) fn release(word: *mut TaskStorage) {
    let p = storage_of(word);
    if !p.is_null() {
        // SAFETY: made by `Box::into_raw` in `current` for the task that
        // just ended; nothing refers to it any more.
        drop(unsafe { Box::from_raw(p) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_lives_in_the_word_until_storage_takes_it_over() {
        let empty: *mut TaskStorage = std::ptr::null_mut();
        for away in [false, true] {
            let w = inline_label(12345, with_may_go_away(empty, away));
            assert_eq!(label_in(w), Some(12345));
            assert_eq!(may_go_away(w), away);
            // No storage behind a label: nothing to free.
            assert!(storage_of(w).is_null());
            release(w);
            let marked = with_may_go_away(w, !away);
            assert_eq!(label_in(marked), Some(12345));
            assert_eq!(may_go_away(marked), !away);
        }
        assert_eq!(label_in(empty), None);
        let boxed = Box::into_raw(Box::<TaskStorage>::default());
        assert_eq!(label_in(boxed), None);
        assert_eq!(storage_of(with_may_go_away(boxed, true)), boxed);
        release(boxed);
        let top = inline_label(MAX_INLINE_LABEL, empty);
        assert_eq!(label_in(top), Some(MAX_INLINE_LABEL));
    }

    #[test]
    fn storage_is_zeroed_and_keeps_its_contents_when_it_grows() {
        let mut s = super::Bytes::new(24);
        // SAFETY: 24 bytes are ours.
        let b = unsafe { std::slice::from_raw_parts_mut(s.bytes.as_ptr(), 24) };
        assert!(b.iter().all(|&x| x == 0));
        b.copy_from_slice(&[7u8; 24]);
        assert_eq!(s.bytes.as_ptr() as usize % super::ALIGN, 0);
        s.grow(4096);
        // SAFETY: now 4096 bytes are ours.
        let b = unsafe { std::slice::from_raw_parts(s.bytes.as_ptr(), 4096) };
        assert!(b[..24].iter().all(|&x| x == 7));
        assert!(b[24..].iter().all(|&x| x == 0));
        assert_eq!(s.bytes.as_ptr() as usize % super::ALIGN, 0);
        s.grow(100); // never shrinks
        assert_eq!(s.len, 4096);
    }
}
