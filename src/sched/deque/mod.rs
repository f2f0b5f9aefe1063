//! A Chase-Lev work-stealing deque of small `Copy` elements: the owner
//! pushes and pops at the bottom (newest first), thieves steal at the top
//! (oldest first). Written for the scheduler's queued tasks (four words,
//! `sched::new_task::Queued`) and other elements of a few machine words.
//!
//! The algorithm is Chase and Lev's ("Dynamic Circular Work-Stealing
//! Deque", SPAA 2005) with the C11 memory orderings of Lê, Pop, Cohen and
//! Zappa Nardelli ("Correct and Efficient Work-Stealing for Weak Memory
//! Models", PPoPP 2013, figure 1: the fence-based version). `README.md`
//! beside this file states the invariants, each ordering and why it is
//! needed, why every slot is a row of atomic words, and how long buffers
//! live. `loom_tests.rs` model-checks it.
//!
//! Each element is stored as `size_of::<T>() / size_of::<usize>()` atomic
//! words, written and read one word at a time with relaxed atomic stores
//! and loads: no stack temporary, no wide load of narrow stores, and a
//! thief that races with the owner's write reads stale words instead of
//! committing a data race. The thief only turns the words into a `T` once
//! its CAS on `top` proved them to be the element it claimed.

// The benchmark (`bench/src/deque.rs`) reaches it through the hidden
// `cantus::__bench::deque` (which loom builds leave out).
#![cfg_attr(loom, allow(unreachable_pub))]

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::{MaybeUninit, align_of, size_of};
use std::ops::Deref;
use std::ptr;

// The primitives, from loom under `--cfg loom` and from std otherwise (the
// crate's `crate::loom` shim has no `fence`, `AtomicIsize` or `AtomicPtr`,
// and this file must also compile inside the benchmark crate, which has no
// such shim: so the switch is made here, for this module only).
#[cfg(loom)]
use loom::sync::{
    Arc,
    atomic::{AtomicIsize, AtomicPtr, Ordering, fence},
};
#[cfg(not(loom))]
use std::sync::{
    Arc,
    atomic::{AtomicIsize, AtomicPtr, Ordering, fence},
};

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

/// Capacity of a new deque, in elements. Buffers double when full.
pub(crate) const DEFAULT_CAPACITY: usize = 64;

/// A type the deque can hold.
///
/// Its size must be a positive multiple of a machine word and its
/// alignment at least a word's; both are checked at compile time when a
/// deque of the type is used.
///
/// # Safety
///
/// Every byte of every value of the type must be initialized: no padding,
/// no `MaybeUninit` or union fields that may be uninitialized. Each value
/// is copied word by word into atomic words, and an atomic store of an
/// uninitialized word is undefined behaviour. (Pointers are copied as
/// pointers, so they keep their provenance.)
pub unsafe trait Element: Copy + Send {}

// SAFETY: a usize has no padding and no uninitialized bytes.
unsafe impl Element for usize {}
// SAFETY: an array of usize has no padding and no uninitialized bytes.
unsafe impl<const N: usize> Element for [usize; N] {}

/// The number of words of an element; fails to compile for a type whose
/// size is not a positive multiple of a word or whose alignment is less
/// than a word's.
struct Words<T>(PhantomData<T>);

impl<T> Words<T> {
    const N: usize = {
        assert!(
            size_of::<T>() > 0
                && size_of::<T>() / size_of::<usize>() * size_of::<usize>() == size_of::<T>(),
            "a deque element's size must be a positive multiple of a word"
        );
        assert!(
            align_of::<T>() >= align_of::<usize>(),
            "a deque element must be at least word-aligned"
        );
        size_of::<T>() / size_of::<usize>()
    };
}

/// One word of a slot. A pointer, not a `usize`, so that a pointer stored
/// in an element keeps its provenance through the deque.
type Word = AtomicPtr<()>;

/// Copies `value` into the `Words::<T>::N` words at `slot`.
///
/// # Safety
/// `slot` points to that many words of a live buffer.
#[inline(always)]
unsafe fn write_slot<T: Element>(slot: *const Word, value: &T) {
    let src = (value as *const T).cast::<*mut ()>();
    for i in 0..Words::<T>::N {
        // SAFETY: `src` is word-aligned (Words checks T's alignment) and
        // word `i` lies within `value`; every byte of it is initialized
        // (Element's contract), so reading it as a pointer is sound. The
        // slot has at least N words (caller's contract).
        unsafe { (*slot.add(i)).store(src.add(i).read(), Ordering::Relaxed) }
    }
}

/// Reads the `Words::<T>::N` words at `slot`. The result is a `T` only if
/// no write to the slot raced with the read; callers establish that before
/// `assume_init`.
///
/// # Safety
/// `slot` points to that many words of a live buffer.
#[inline(always)]
unsafe fn read_slot<T: Element>(slot: *const Word) -> MaybeUninit<T> {
    let mut value = MaybeUninit::<T>::uninit();
    let dst = value.as_mut_ptr().cast::<*mut ()>();
    for i in 0..Words::<T>::N {
        // SAFETY: the slot has N words (caller's contract); word `i` of
        // `value` is in bounds and word-aligned (Words checks T's layout).
        unsafe { dst.add(i).write((*slot.add(i)).load(Ordering::Relaxed)) }
    }
    value
}

/// A circular array of `capacity * words` atomic words. Element index `i`
/// (a position in the deque, never reduced) lives at slot `i & mask`.
struct Buffer {
    words: Box<[Word]>,
    mask: usize,
    /// The buffer this one replaced, kept (with its own predecessors)
    /// until the deque is dropped, because a thief may still read it.
    prev: *mut Buffer,
}

impl Buffer {
    /// A buffer of `capacity` (a power of two) elements of `words` words.
    fn alloc(capacity: usize, words: usize, prev: *mut Buffer) -> *mut Buffer {
        debug_assert!(capacity.is_power_of_two());
        let words = (0..capacity * words)
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect();
        Box::into_raw(Box::new(Buffer {
            words,
            mask: capacity - 1,
            prev,
        }))
    }

    /// The first word of the slot of element index `i`.
    #[inline(always)]
    fn slot(&self, i: isize, words: usize) -> *const Word {
        // In bounds: (i & mask) < capacity, and the buffer has capacity *
        // words words; `wrapping_add` keeps this a safe function anyway.
        self.words
            .as_ptr()
            .wrapping_add((i as usize & self.mask) * words)
    }
}

/// Keeps a value on cache lines of its own.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What the thieves read: `top` and the current buffer, on one line.
struct Front {
    /// Index of the oldest element. Only ever increased, and only by a
    /// successful CAS (a thief's steal, or the owner's pop of the last
    /// element).
    top: AtomicIsize,
    /// The current buffer; replaced by the owner only, when it grows.
    buffer: AtomicPtr<Buffer>,
}

/// The state shared by the owner and the thieves.
struct Inner<T> {
    /// Index one past the newest element. Written by the owner only.
    bottom: Padded<AtomicIsize>,
    front: Padded<Front>,
    _elements: PhantomData<T>,
}

// SAFETY: the deque only moves copies of elements from one thread to
// another (push on the owner's thread, steal on a thief's), which
// `T: Send` allows; no reference to an element is ever shared. Everything
// else is atomics and buffers that are never freed before `Inner` is.
unsafe impl<T: Element> Send for Inner<T> {}
// SAFETY: as above.
unsafe impl<T: Element> Sync for Inner<T> {}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Elements are Copy: nothing to drop but the buffers.
        let mut p = self.front.buffer.load(Ordering::Relaxed);
        while !p.is_null() {
            // SAFETY: every buffer in the chain came from Box::into_raw in
            // Buffer::alloc and is linked exactly once (as the current
            // buffer or as a successor's `prev`); we are the last holder
            // of the deque, so no thief can read it any more.
            let b = unsafe { Box::from_raw(p) };
            p = b.prev;
        }
    }
}

/// The result of a steal.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steal<T> {
    /// The deque looked empty.
    Empty,
    /// Took the oldest element.
    Success(T),
    /// Lost a race with another thief or the owner: try again.
    Retry,
}

// The scheduler matches on `Steal`; tests and the benchmark use these.
#[allow(dead_code)]
impl<T> Steal<T> {
    /// The stolen element, if any.
    #[inline]
    pub fn success(self) -> Option<T> {
        match self {
            Steal::Success(v) => Some(v),
            _ => None,
        }
    }

    /// Whether the deque looked empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        matches!(self, Steal::Empty)
    }

    /// Whether the steal lost a race and should be retried.
    #[inline]
    pub fn is_retry(&self) -> bool {
        matches!(self, Steal::Retry)
    }
}

/// The owner's end of a deque: push and pop, newest first. `Send` (it may
/// be created on one thread and used on another) but not `Sync`: one
/// thread at a time owns the bottom.
pub struct Worker<T: Element> {
    inner: Arc<Inner<T>>,
    /// The current buffer's first word and mask, cached (only the owner
    /// replaces the buffer).
    words: Cell<*const Word>,
    mask: Cell<usize>,
    /// A value `top` had at some point, read with Acquire (or written by
    /// our own CAS). `top` only grows, so it is a lower bound: pushes
    /// that fit below `bound + capacity` need not read `top`, and a pop
    /// that finds `bottom <= bound` knows the deque is empty.
    top_bound: Cell<isize>,
}

// SAFETY: the cached pointer points into a buffer owned by `inner`, which
// any thread may use; moving the owner handle moves the owner role with
// it (the handle is not Sync, so there is still one owner at a time).
unsafe impl<T: Element> Send for Worker<T> {}

/// A thief's handle: steals the oldest element. Any number of clones, on
/// any threads.
pub struct Stealer<T: Element> {
    inner: Arc<Inner<T>>,
}

impl<T: Element> Clone for Stealer<T> {
    fn clone(&self) -> Self {
        Stealer {
            inner: self.inner.clone(),
        }
    }
}

impl<T: Element> Default for Worker<T> {
    fn default() -> Self {
        Worker::new()
    }
}

impl<T: Element> Worker<T> {
    /// An empty deque of [`DEFAULT_CAPACITY`] elements (it grows).
    pub fn new() -> Worker<T> {
        Worker::with_capacity(DEFAULT_CAPACITY)
    }

    /// An empty deque with room for `capacity` elements (rounded up to a
    /// power of two, at least 1) before it grows.
    pub fn with_capacity(capacity: usize) -> Worker<T> {
        let capacity = capacity.max(1).next_power_of_two();
        let buffer = Buffer::alloc(capacity, Words::<T>::N, ptr::null_mut());
        let inner = Arc::new(Inner {
            bottom: Padded(AtomicIsize::new(0)),
            front: Padded(Front {
                top: AtomicIsize::new(0),
                buffer: AtomicPtr::new(buffer),
            }),
            _elements: PhantomData,
        });
        // SAFETY: just allocated, owned by `inner`.
        let words = unsafe { (*buffer).words.as_ptr() };
        Worker {
            inner,
            words: Cell::new(words),
            mask: Cell::new(capacity - 1),
            top_bound: Cell::new(0),
        }
    }

    /// A thief's handle to this deque.
    pub fn stealer(&self) -> Stealer<T> {
        Stealer {
            inner: self.inner.clone(),
        }
    }

    /// The first word of element index `i`'s slot in the current buffer.
    #[inline(always)]
    fn slot(&self, i: isize) -> *const Word {
        self.words
            .get()
            .wrapping_add((i as usize & self.mask.get()) * Words::<T>::N)
    }

    /// Pushes `value` at the bottom.
    #[inline]
    pub fn push(&self, value: T) {
        let inner = &*self.inner;
        // Only the owner writes `bottom`: a relaxed load reads our own
        // latest store.
        let b = inner.bottom.load(Ordering::Relaxed);
        let capacity = self.mask.get() as isize + 1;
        if b.wrapping_sub(self.top_bound.get()) >= capacity {
            // Full by the bound: read `top` itself. Acquire: a thief read
            // the slot we are about to reuse before its CAS advanced
            // `top`, and that read must happen before our write (see the
            // README, "slot reuse").
            let t = inner.front.top.load(Ordering::Acquire);
            self.top_bound.set(t);
            if b.wrapping_sub(t) >= capacity {
                self.grow(b, t);
            }
        }
        // SAFETY: the slot is in the current buffer, which `inner` owns;
        // its previous element (index b - capacity) was taken (the check
        // above), and no thief reads index b before it sees our store of
        // b + 1 below.
        unsafe { write_slot(self.slot(b), &value) };
        // Release (as a fence, as in the paper): a thief that reads the
        // new bottom (Acquire) sees the element's words.
        fence(Ordering::Release);
        inner.bottom.store(b.wrapping_add(1), Ordering::Relaxed);
    }

    /// Pops the newest element.
    #[inline]
    pub fn pop(&self) -> Option<T> {
        let inner = &*self.inner;
        let b = inner.bottom.load(Ordering::Relaxed);
        if b.wrapping_sub(self.top_bound.get()) <= 0 {
            // Empty: top >= top_bound >= bottom, and only we add elements.
            return None;
        }
        let b = b.wrapping_sub(1);
        inner.bottom.store(b, Ordering::Relaxed);
        // SeqCst fence: either a thief's fence comes after ours and it sees
        // the lowered bottom, or its CAS on top (which it did before
        // reading our slot) is visible to our load of top below. Either
        // way we and a thief never both take element b without the CAS.
        fence(Ordering::SeqCst);
        // Acquire (the paper has relaxed): the value refreshes top_bound,
        // which push relies on when it reuses slots.
        let t = inner.front.top.load(Ordering::Acquire);
        self.top_bound.set(t);
        let len = b.wrapping_sub(t);
        if len < 0 {
            // Empty: restore bottom to top.
            inner.bottom.store(b.wrapping_add(1), Ordering::Relaxed);
            return None;
        }
        // SAFETY: index b is in the current buffer, written by our push;
        // only the owner writes slots, so nothing races with this read.
        let value = unsafe { read_slot::<T>(self.slot(b)) };
        if len == 0 {
            // The last element: thieves may be after it too. Whoever
            // advances top from t takes it.
            let won = inner
                .front
                .top
                .compare_exchange(t, t.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok();
            // Either way the deque is now empty at top = t + 1.
            inner.bottom.store(b.wrapping_add(1), Ordering::Relaxed);
            if !won {
                return None;
            }
            self.top_bound.set(t.wrapping_add(1));
        }
        // SAFETY: we own index b (no thief can take it: len > 0, or we won
        // the CAS), and its words were written by our own push.
        Some(unsafe { value.assume_init() })
    }

    /// Pops the newest element if `pred` accepts it; otherwise leaves the
    /// deque as it was (the element goes back to the bottom).
    #[inline]
    pub fn pop_if(&self, pred: impl FnOnce(&T) -> bool) -> Option<T> {
        let v = self.pop()?;
        if pred(&v) {
            Some(v)
        } else {
            self.push(v);
            None
        }
    }

    /// Whether the deque is empty (exact for the owner, up to concurrent
    /// steals).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of elements (up to concurrent steals).
    #[inline]
    pub fn len(&self) -> usize {
        let b = self.inner.bottom.load(Ordering::Relaxed);
        let t = self.inner.front.top.load(Ordering::Relaxed);
        b.wrapping_sub(t).max(0) as usize
    }

    /// Whether fewer than `n` elements are queued, reading `top` only
    /// when the owner's bound on it cannot tell (the bound only grows
    /// stale upwards: elements stolen since it was read still count).
    /// A hosted worker's forks ask this on every fork; reading `top`
    /// each time took its cache line from the thief that keeps writing
    /// it.
    #[inline]
    pub fn fewer_than(&self, n: usize) -> bool {
        let b = self.inner.bottom.load(Ordering::Relaxed);
        if (b.wrapping_sub(self.top_bound.get()).max(0) as usize) < n {
            return true;
        }
        // Acquire: as every read of top that refreshes the bound (push
        // relies on it when it reuses slots).
        let t = self.inner.front.top.load(Ordering::Acquire);
        self.top_bound.set(t);
        (b.wrapping_sub(t).max(0) as usize) < n
    }

    /// The capacity of the current buffer, in elements.
    #[allow(dead_code)] // tests check growth with it
    pub fn capacity(&self) -> usize {
        self.mask.get() + 1
    }

    /// Doubles the buffer, copying elements `t..b`. The old buffer is kept
    /// (a thief may be reading it) until the deque is dropped.
    #[cold]
    #[inline(never)]
    fn grow(&self, b: isize, t: isize) {
        let inner = &*self.inner;
        let words = Words::<T>::N;
        let old = inner.front.buffer.load(Ordering::Relaxed);
        // SAFETY: the current buffer is live (owned by `inner`).
        let old_ref = unsafe { &*old };
        let capacity = (old_ref.mask + 1)
            .checked_mul(2)
            .expect("deque capacity overflow");
        let new = Buffer::alloc(capacity, words, old);
        // SAFETY: just allocated; not yet visible to anyone else.
        let new_ref = unsafe { &*new };
        let mut i = t;
        while i != b {
            let (from, to) = (old_ref.slot(i, words), new_ref.slot(i, words));
            for w in 0..words {
                // SAFETY: both slots have `words` words within their
                // buffers; only the owner writes slots.
                unsafe {
                    (*to.add(w)).store((*from.add(w)).load(Ordering::Relaxed), Ordering::Relaxed)
                };
            }
            i = i.wrapping_add(1);
        }
        // Release: a thief that loads the new buffer (Acquire) sees the
        // copied words, even if the bottom it read is older.
        inner.front.buffer.store(new, Ordering::Release);
        self.words.set(new_ref.words.as_ptr());
        self.mask.set(capacity - 1);
    }
}

impl<T: Element> Stealer<T> {
    /// Steals the oldest element.
    #[inline]
    pub fn steal(&self) -> Steal<T> {
        let inner = &*self.inner;
        let t = inner.front.top.load(Ordering::Acquire);
        // SeqCst fence: pairs with the one in pop (see there).
        fence(Ordering::SeqCst);
        // Acquire: pairs with push's release fence, so the words of every
        // index below b are visible, and so is the buffer they are in.
        let b = inner.bottom.load(Ordering::Acquire);
        if b.wrapping_sub(t) <= 0 {
            return Steal::Empty;
        }
        match self.take(t) {
            Some(v) => Steal::Success(v),
            // Someone else took index t.
            None => Steal::Retry,
        }
    }

    /// Steps 2 and 3 of a steal (README): reads element `t` and takes it
    /// if `top` is still `t`. The caller read `bottom > t` after its
    /// SeqCst fence (step 1).
    #[inline(always)]
    fn take(&self, t: isize) -> Option<T> {
        let inner = &*self.inner;
        // Acquire (the paper's consume), after the caller's `bottom` load:
        // the buffer's copied words, and an element pushed after a growth
        // is only in the new buffer.
        let buffer = inner.front.buffer.load(Ordering::Acquire);
        // SAFETY: buffers are freed only with `inner`, which our Arc keeps
        // alive; the slot lies within the buffer. The read may race with
        // the owner reusing the slot; it is made of atomic loads, so that
        // is no data race, and the value is kept only if the CAS below
        // shows no reuse happened.
        let value = unsafe { read_slot::<T>((*buffer).slot(t, Words::<T>::N)) };
        inner
            .front
            .top
            .compare_exchange(t, t.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed)
            .ok()?;
        // SAFETY: we took index t. The owner reuses its slot only after it
        // saw top > t, i.e. after our CAS, and our read happened before
        // the CAS; the words we read are those of element t's push.
        Some(unsafe { value.assume_init() })
    }

    /// Steals up to half of the elements (rounded up), at most `max`, onto
    /// `dest` (the thief's own deque), oldest first, so that `dest`'s
    /// thieves take the older ones and its owner pops the newest first.
    /// The batch goes on only while `more` accepts what it took: an
    /// element it refuses is the last taken. Returns how many were taken
    /// (0: the deque looked empty, or the first steal lost its race).
    ///
    /// The elements are taken one at a time, each by a steal's own fence,
    /// `bottom` load and CAS (README, "Batch steals"): one CAS moving `top`
    /// by `n` could take an element that the owner pops meanwhile without
    /// a CAS (its pop sees `top` below the element). The batch costs the
    /// thief one transfer of `top`'s line, where `n` separate steals cost
    /// `n`, each contended by the other thieves.
    ///
    /// `dest` must not be this deque's own `Worker` (a worker never steals
    /// from itself).
    pub fn steal_into(&self, dest: &Worker<T>, max: usize, more: impl Fn(&T) -> bool) -> usize {
        debug_assert!(
            !Arc::ptr_eq(&self.inner, &dest.inner),
            "a deque's owner steals from itself"
        );
        let inner = &*self.inner;
        let mut t = inner.front.top.load(Ordering::Acquire);
        fence(Ordering::SeqCst);
        let mut b = inner.bottom.load(Ordering::Acquire);
        let len = b.wrapping_sub(t);
        if len <= 0 {
            return 0;
        }
        let want = (len as usize).div_ceil(2).min(max);
        let mut taken = 0;
        while taken < want {
            if taken > 0 {
                // Every element after the first is a steal of its own
                // (see `steal`): our last CAS wrote `top = t`, so it plays
                // the part of the Acquire load of `top`.
                fence(Ordering::SeqCst);
                b = inner.bottom.load(Ordering::Acquire);
                if b.wrapping_sub(t) <= 0 {
                    break;
                }
            }
            // The buffer is loaded after each `bottom` load (in `take`).
            let Some(value) = self.take(t) else {
                break;
            };
            t = t.wrapping_add(1);
            taken += 1;
            let go_on = more(&value);
            dest.push(value);
            if !go_on {
                break;
            }
        }
        taken
    }

    /// Whether the deque looked empty: the same reads as a steal, so a
    /// `false` after an element was pushed is as reliable as a steal.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of elements, as a steal would see it.
    #[inline]
    pub fn len(&self) -> usize {
        let t = self.inner.front.top.load(Ordering::Acquire);
        fence(Ordering::SeqCst);
        let b = self.inner.bottom.load(Ordering::Acquire);
        b.wrapping_sub(t).max(0) as usize
    }
}
