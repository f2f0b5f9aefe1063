//! `GlobalPtr<T>`: a typed place in some locale's heap segment, named by
//! (locale, offset) and the bounds of its allocation, never by an
//! address. On a segment this process maps (every locale's, with shared
//! memory; its own, over messages) puts and gets are copies and atomics
//! act on the memory directly; on another, they go through the
//! installed memory (`memory.rs`), which returns once they are done.

use super::memory::{Answers, AtomicOp, Memory, wait_promptly};
use super::nonblocking::{Completion, GetHandle, InFlight, Signal};
use super::space::{Space, space, with_space};
use crate::error::{Error, ErrorKind, Locales};
use bytemuck::Pod;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// A pointer into global memory: element `i` of an allocation on locale
/// `l`. It is plain data (`Copy`, serializable): pass it in remote calls
/// or through global memory. Every access checks it against its
/// allocation and its locale's heap segment, so a stale or forged
/// pointer can reach only the symmetric heap, never other memory.
///
/// Get one from [`GlobalArray::ptr`](super::GlobalArray::ptr) or
/// [`BlockArray::ptr`](super::BlockArray::ptr); move it with
/// [`add`](GlobalPtr::add).
///
/// `put` and `get` are plain copies (in shared memory, or by the owning
/// locale when locales share no memory: then a `put` returns once the
/// owner acknowledged it): a put and a get (or two puts) of the same
/// element by different locales, not ordered by a
/// [`barrier`](super::barrier) or an atomic, race and the values read are
/// unspecified. The atomics on `GlobalPtr<u64>` order them: a `store` or
/// RMW releases the caller's earlier puts to whoever `load`s or RMWs the
/// value later (Release/Acquire).
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct GlobalPtr<T> {
    locale: u32,
    /// Bytes from the start of the segment.
    offset: u64,
    /// The allocation: `start..end` bytes of the segment.
    start: u64,
    end: u64,
    #[serde(skip)]
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalPtr<T> {}

impl<T> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.locale, self.offset, self.start, self.end)
            == (other.locale, other.offset, other.start, other.end)
    }
}
impl<T> Eq for GlobalPtr<T> {}

impl<T> fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GlobalPtr<{}>(locale {}, byte {} of {}..{})",
            std::any::type_name::<T>(),
            self.locale,
            self.offset,
            self.start,
            self.end
        )
    }
}

impl<T: Pod> GlobalPtr<T> {
    /// The first element of the allocation `start..end` (bytes) on
    /// `locale`.
    pub(crate) fn new(locale: usize, start: usize, end: usize) -> GlobalPtr<T> {
        GlobalPtr {
            locale: locale as u32,
            offset: start as u64,
            start: start as u64,
            end: end as u64,
            _t: PhantomData,
        }
    }

    /// The locale whose memory this points into.
    pub fn locale(&self) -> usize {
        self.locale as usize
    }

    /// The pointer `i` elements further. Going past the allocation is
    /// allowed here; accessing there is an error.
    #[must_use]
    #[allow(clippy::should_implement_trait)] // named as raw pointers' `add`
    pub fn add(self, i: usize) -> GlobalPtr<T> {
        let step = (i as u64).saturating_mul(size_of::<T>() as u64);
        GlobalPtr {
            offset: self.offset.saturating_add(step),
            ..self
        }
    }

    /// The same element of `locale`'s part of the allocation. Every
    /// global allocation is symmetric ([`alloc`](crate::pgas::alloc):
    /// each locale's part at the same offsets), so a pointer into one
    /// locale's part names the same place in any other's, as an
    /// OpenSHMEM symmetric address does with a PE number. A locale that
    /// is not in the job is an error when the pointer is used.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    ///
    /// /// Each locale names the third element of locale 0's part.
    /// #[derive(Clone, Serialize, Deserialize)]
    /// struct Third;
    ///
    /// impl cantus::Remote for Third {
    ///     type Output = bool;
    ///     fn run(self) -> bool {
    ///         let a = cantus::pgas::alloc::<u64>(4).unwrap();
    ///         let mine = a.ptr(cantus::here()).add(2);
    ///         mine.on(0) == a.ptr(0).add(2) && mine.on(0).remaining() == 2
    ///     }
    /// }
    /// cantus::remote!(Third);
    ///
    /// let all = cantus::run(|| cantus::pgas::spmd(Third)).unwrap().unwrap();
    /// assert!(all.iter().all(|&same| same));
    /// ```
    #[must_use]
    pub fn on(self, locale: usize) -> GlobalPtr<T> {
        GlobalPtr {
            locale: u32::try_from(locale).unwrap_or(u32::MAX),
            ..self
        }
    }

    /// Elements from here to the end of the allocation (0 if past it).
    pub fn remaining(&self) -> usize {
        match size_of::<T>() {
            0 => 0,
            size => (self.end.saturating_sub(self.offset) / size as u64) as usize,
        }
    }

    /// Where `n` elements from here are, after checking them against
    /// the allocation, the segment and the job.
    fn locate(&self, s: &Space, n: usize, what: &str) -> Result<Place, Error> {
        let size = size_of::<T>() as u64;
        let elem = |b: u64| b.saturating_sub(self.start) / size.max(1);
        let out = |why: String| {
            Err(Error::new(
                ErrorKind::OutOfBounds,
                format!("cantus::pgas: {what} {why}"),
            ))
        };
        if self.locale() >= s.locales {
            return out(format!(
                "on locale {} but the job has {}",
                self.locale,
                Locales(s.locales)
            ));
        }
        let bytes = (n as u64).saturating_mul(size);
        let end = self.offset.saturating_add(bytes);
        if self.offset < self.start || end > self.end {
            return out(format!(
                "of {n} element(s) at element {} of a {}-element allocation on locale {} \
                 runs outside it",
                if self.offset < self.start {
                    "before 0".to_string()
                } else {
                    elem(self.offset).to_string()
                },
                elem(self.end),
                self.locale
            ));
        }
        if self.end > s.heap_bytes() as u64 {
            return out(format!(
                "at byte {} of locale {}'s heap segment runs outside it ({} bytes): the \
                 pointer does not come from this job",
                self.offset,
                self.locale,
                s.heap_bytes()
            ));
        }
        Ok(match s.mapped(self.locale()) {
            // SAFETY: offset + bytes <= end <= heap_bytes (checked above),
            // so the address lies within the locale's segment.
            Some(base) => Place::Mapped(unsafe { base.as_ptr().add(self.offset as usize) }),
            None => Place::Remote(self.locale(), self.offset as usize),
        })
    }

    /// Copies `src` to global memory starting here. Checks the whole
    /// range first: on error nothing is written.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::OutOfBounds`] if the elements run outside the
    /// allocation (or the pointer names no locale of this job);
    /// [`ErrorKind::NoRuntime`] if no runtime runs; where locales share no
    /// memory, the error of the remote call to the owner if it failed (the
    /// owner is gone).
    pub fn put(&self, src: &[T]) -> Result<(), Error> {
        self.access(src.len(), "a put", "pgas::GlobalPtr::put", |at| match at {
            Target::Mapped(dst) => {
                // SAFETY: `locate` checked `dst` for the bytes of `src`.
                unsafe { copy_in(src, dst) };
                Ok(())
            }
            Target::Remote(memory, locale, offset) => {
                put_calls(memory, locale, offset, src)?.finish()
            }
        })
    }

    /// Copies global memory starting here into `dst`. Checks the whole
    /// range first: on error `dst` is left as it was.
    ///
    /// # Errors
    ///
    /// As [`put`](GlobalPtr::put).
    pub fn get(&self, dst: &mut [T]) -> Result<(), Error> {
        self.access(dst.len(), "a get", "pgas::GlobalPtr::get", |at| match at {
            Target::Mapped(src) => {
                // SAFETY: `locate` checked `src` for the bytes of `dst`.
                unsafe { copy_out(src, dst) };
                Ok(())
            }
            Target::Remote(memory, locale, offset) => {
                memory.get_into(locale, offset, bytemuck::cast_slice_mut(dst))
            }
        })
    }

    /// Starts a put of `src` here and returns once `src` may be reused;
    /// the [`Completion`] says when the bytes are in the target's memory
    /// ([`quiet`](super::quiet) waits for every such put of this
    /// locale). Where the target segment is mapped (shared memory) the
    /// copy is made before it returns; over messages the bytes travel
    /// in remote calls it does not wait for. Puts of one task to one
    /// locale land in the order made (`README.md`, "Non-blocking and
    /// signalling operations").
    ///
    /// # Errors
    ///
    /// As [`put`](GlobalPtr::put), checked before anything is sent.
    pub fn put_nb(&self, src: &[T]) -> Result<Completion, Error> {
        self.access(
            src.len(),
            "a put",
            "pgas::GlobalPtr::put_nb",
            |at| match at {
                Target::Mapped(dst) => {
                    // SAFETY: `locate` checked `dst` for the bytes of `src`.
                    unsafe { copy_in(src, dst) };
                    Ok(Completion::done())
                }
                Target::Remote(memory, locale, offset) => {
                    put_calls(memory, locale, offset, src).map(Completion::sent)
                }
            },
        )
    }

    /// Puts `src` here and then applies `signal` to the word `word` (on
    /// the same locale), so that a consumer there waiting on `word`
    /// ([`GlobalPtr::wait_until`]) sees the bytes once it sees the
    /// signal: OpenSHMEM's `put_signal_nbi`, UPC++'s `rput` with remote
    /// completion. Returns once `src` may be reused, without a barrier
    /// or a round trip; the [`Completion`] (or [`quiet`](super::quiet))
    /// says when the signal was applied.
    ///
    /// ```
    /// use cantus::pgas::{self, Signal};
    ///
    /// cantus::remote_fn! {
    ///     /// Each locale hands its right neighbour a row, signalled.
    ///     fn pass_row(len: usize) -> f64 {
    ///         let (me, n) = (cantus::here(), cantus::num_locales());
    ///         let rows = pgas::alloc::<f64>(len).unwrap();
    ///         let flags = pgas::alloc::<u64>(1).unwrap();
    ///         let right = (me + 1) % n;
    ///         let row = vec![me as f64; len];
    ///         rows.ptr(right)
    ///             .put_signal(&row, flags.ptr(right), Signal::Add(1))
    ///             .unwrap()
    ///             .wait()
    ///             .unwrap();
    ///         flags.ptr(me).wait_until(|v| v == 1).unwrap();
    ///         let sum = rows.local().iter().sum();
    ///         pgas::barrier(); // nobody frees `rows` while a put may come
    ///         sum
    ///     }
    /// }
    ///
    /// let sums = cantus::run(|| pgas::spmd(pass_row(100)).unwrap()).unwrap();
    /// let n = sums.len();
    /// for (me, sum) in sums.into_iter().enumerate() {
    ///     assert_eq!(sum, 100.0 * ((me + n - 1) % n) as f64);
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`put`](GlobalPtr::put) for either place (checked before
    /// anything is written); [`ErrorKind::OutOfBounds`] if `word` is on
    /// another locale than the data or not 8-byte aligned.
    pub fn put_signal(
        &self,
        src: &[T],
        word: GlobalPtr<u64>,
        signal: Signal,
    ) -> Result<Completion, Error> {
        self.put_signal_as(src, word, signal, Answers::Wanted)
    }

    /// [`put_signal`](GlobalPtr::put_signal) with no remote completion
    /// where the segment is not mapped: the pieces go as calls nobody
    /// answers, and the returned [`Completion`] is complete at once. For
    /// a caller whose consumer's signal is all it waits for, and that
    /// knows by other means when the target's bytes may be written again
    /// (`halo.rs`: each neighbour's next data comes only after it copied
    /// these out). A call the target refuses is reported on its standard
    /// error only.
    pub(crate) fn put_signal_unacknowledged(
        &self,
        src: &[T],
        word: GlobalPtr<u64>,
        signal: Signal,
    ) -> Result<Completion, Error> {
        self.put_signal_as(src, word, signal, Answers::Unwanted)
    }

    fn put_signal_as(
        &self,
        src: &[T],
        word: GlobalPtr<u64>,
        signal: Signal,
        answers: Answers,
    ) -> Result<Completion, Error> {
        let call = "pgas::GlobalPtr::put_signal";
        let op = signal.op();
        if word.locale != self.locale || word.offset % 8 != 0 {
            return Err(Error::new(
                ErrorKind::OutOfBounds,
                format!(
                    "cantus::pgas: a put_signal's signal word must be an 8-byte aligned word on \
                     the locale of its data: the data is on locale {}, the word at byte {} of \
                     locale {}",
                    self.locale, word.offset, word.locale
                ),
            ));
        }
        let remote = with_space(call, |s| -> Result<Option<(usize, usize, usize)>, Error> {
            let w = word.locate(s, 1, "a put_signal's signal word")?;
            match (self.locate(s, src.len(), "a put_signal")?, w) {
                (Place::Mapped(dst), Place::Mapped(w)) => {
                    // SAFETY: `locate` checked `dst` for the bytes of `src`.
                    unsafe { copy_in(src, dst) };
                    // SAFETY: in bounds (`locate`) and aligned (checked
                    // above) in a mapping that lives while the space does
                    // (we hold its lock); any bits are a valid AtomicU64.
                    // The operation is Release or AcqRel: it releases the
                    // copy above to an Acquire load that sees it.
                    let _ = op.apply(unsafe { &*w.cast::<AtomicU64>() });
                    Ok(None)
                }
                (Place::Remote(locale, offset), Place::Remote(_, w)) => {
                    Ok(Some((locale, offset, w)))
                }
                _ => unreachable!("one locale's segment is mapped or not"),
            }
        })??;
        match remote {
            None => Ok(Completion::done()),
            Some((locale, offset, w)) => space(call)?
                .memory
                .put_nb(
                    locale,
                    offset,
                    bytemuck::cast_slice(src),
                    Some((w, op)),
                    answers,
                )
                .map(Completion::sent),
        }
    }

    /// Whether this process maps the place: a [`get`](GlobalPtr::get) or
    /// [`put`](GlobalPtr::put) there is then a copy by the calling
    /// thread, done when it returns. `false` where they travel as
    /// messages to its locale (another node, or the message memory):
    /// the case where starting gets early with
    /// [`get_nb`](GlobalPtr::get_nb) hides their round trips. `false`
    /// too for a place outside the job, or with no global address space.
    pub fn is_mapped(&self) -> bool {
        with_space("pgas::GlobalPtr::is_mapped", |s| {
            matches!(self.locate(s, 0, "a query"), Ok(Place::Mapped(_)))
        })
        .unwrap_or(false)
    }

    /// The address of `n` elements from here in this process, where it
    /// maps them ([`is_mapped`](GlobalPtr::is_mapped)); `None` where gets
    /// and puts there travel as messages (another node, or the message
    /// memory). Loads and stores through it reach the global memory
    /// directly, with no copy: OpenSHMEM's `shmem_ptr`, UPC++'s
    /// `global_ptr::local()`.
    ///
    /// The address stays valid while the job runs (no mapping moves), and
    /// names these elements while their allocation lives. Reading or
    /// writing through it is `unsafe`, and sound only if the caller
    /// keeps the rules that [`get`](GlobalPtr::get) and
    /// [`put`](GlobalPtr::put) keep for it:
    ///
    /// - no put, get, atomic or store of any task of any locale touches
    ///   the same elements at the same time, unless all of them only read;
    /// - what another task or locale wrote there is ordered before the
    ///   access (a [`barrier`](crate::pgas::barrier), a completed put's
    ///   wait, the end of a balanced computation, a message sent after the
    ///   write and received before the access).
    ///
    /// `examples/lu` updates the blocks that this process maps in place,
    /// each block written by one piece alone in a step.
    ///
    /// # Errors
    ///
    /// As [`get`](GlobalPtr::get) of `n` elements (outside the
    /// allocation, a locale that is not in the job, no global address
    /// space), and a place not aligned for `T` (a forged pointer).
    pub fn mapped_ptr(&self, n: usize) -> Result<Option<*mut T>, Error> {
        with_space("pgas::GlobalPtr::mapped_ptr", |s| {
            match self.locate(s, n, "a direct access")? {
                Place::Mapped(p) if p.align_offset(align_of::<T>()) != 0 => Err(Error::new(
                    ErrorKind::OutOfBounds,
                    format!(
                        "cantus::pgas: a direct access at byte {} of locale {} is not aligned \
                         for {}: the pointer does not come from this job",
                        self.offset,
                        self.locale,
                        std::any::type_name::<T>()
                    ),
                )),
                Place::Mapped(p) => Ok(Some(p.cast::<T>())),
                Place::Remote(..) => Ok(None),
            }
        })?
    }

    /// Starts a get of `n` elements from here; the [`GetHandle`] gives
    /// them. Where the segment is mapped they were copied before it
    /// returned; over messages the calls fetching them are in flight, so
    /// several gets overlap.
    ///
    /// # Errors
    ///
    /// As [`get`](GlobalPtr::get), checked before anything is sent.
    pub fn get_nb(&self, n: usize) -> Result<GetHandle<T>, Error> {
        self.access(n, "a get", "pgas::GlobalPtr::get_nb", |at| match at {
            Target::Mapped(src) => {
                let mut v = vec![T::zeroed(); n];
                // SAFETY: `locate` checked `src` for `n` elements.
                unsafe { copy_out(src, &mut v) };
                Ok(GetHandle::ready(v))
            }
            Target::Remote(memory, locale, offset) => memory
                .get_nb(locale, offset, n * size_of::<T>())
                .map(|gets| GetHandle::pending(n, gets)),
        })
    }

    /// Checks `n` elements from here (`locate`) and runs `op` where they
    /// are: under the space's read lock if this process maps them (a copy
    /// or an atomic instruction never waits), else outside it, through
    /// the memory (which may wait for replies), holding a reference to
    /// the space instead.
    fn access<R>(
        &self,
        n: usize,
        what: &str,
        call: &str,
        op: impl FnOnce(Target<'_>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let mut op = Some(op);
        let mut elsewhere = None;
        let done = with_space(call, |s| match self.locate(s, n, what)? {
            Place::Mapped(p) => op.take().map(|op| op(Target::Mapped(p))).transpose(),
            Place::Remote(locale, offset) => {
                elsewhere = Some((locale, offset));
                Ok(None)
            }
        })??;
        match (done, elsewhere, op) {
            (Some(r), _, _) => Ok(r),
            (None, Some((locale, offset)), Some(op)) => {
                op(Target::Remote(&*space(call)?.memory, locale, offset))
            }
            _ => unreachable!("locate gives a mapped address or a locale's offset"),
        }
    }

    /// The element here (a one-element [`get`](GlobalPtr::get)).
    ///
    /// # Errors
    ///
    /// As [`get`](GlobalPtr::get).
    pub fn read(&self) -> Result<T, Error> {
        let mut v = [T::zeroed()];
        self.get(&mut v)?;
        Ok(v[0])
    }

    /// Writes the element here (a one-element [`put`](GlobalPtr::put)).
    ///
    /// # Errors
    ///
    /// As [`put`](GlobalPtr::put).
    pub fn write(&self, value: T) -> Result<(), Error> {
        self.put(&[value])
    }
}

/// Copies `src` to `dst`, in a mapping of global memory.
///
/// # Safety
///
/// `dst` is valid for `size_of_val(src)` bytes (`locate` checked them).
/// It cannot overlap `src`, a Rust slice outside the mapping... unless
/// `src` was borrowed from global memory itself: `move_raw` allows the
/// The answered calls of a put of `src` to `offset` of `locale`'s
/// segment, which this process does not map.
fn put_calls<T: Pod>(
    memory: &dyn Memory,
    locale: usize,
    offset: usize,
    src: &[T],
) -> Result<InFlight, Error> {
    memory.put_nb(
        locale,
        offset,
        bytemuck::cast_slice(src),
        None,
        Answers::Wanted,
    )
}

/// overlap (a `ptr::copy` where they overlap).
unsafe fn copy_in<T: Pod>(src: &[T], dst: *mut u8) {
    // SAFETY: as the caller promises.
    unsafe { crate::copy::move_raw(src.as_ptr().cast::<u8>(), dst, size_of_val(src)) }
}

/// Copies from `src`, in a mapping of global memory, into `dst`.
///
/// # Safety
///
/// `src` is valid for the bytes of `dst` (`locate` checked them); `dst`
/// is a unique borrow, and any bytes are a valid `T` (Pod). `move_raw`
/// allows `dst` to lie in global memory.
unsafe fn copy_out<T: Pod>(src: *const u8, dst: &mut [T]) {
    // SAFETY: as the caller promises.
    unsafe { crate::copy::move_raw(src, dst.as_mut_ptr().cast::<u8>(), size_of_val(dst)) }
}

/// Where a range of global memory is.
#[derive(Clone, Copy)]
enum Place {
    /// At this address of a mapping of this process.
    Mapped(*mut u8),
    /// At this offset of a locale's segment that this process does not
    /// map.
    Remote(usize, usize),
}

/// Where an access goes: an address of a mapping of this process, or
/// the memory that reaches the segment `(locale, offset)` lies in.
enum Target<'a> {
    Mapped(*mut u8),
    Remote(&'a dyn Memory, usize, usize),
}

/// Remote atomics: operations on the 64-bit word, as atomic as between
/// threads, from any locale (on a segment this process maps, atomic
/// instructions on it; on another, the same instructions run by its
/// owner, `README.md`, "Two memories"). Read-modify-writes are `AcqRel`,
/// loads `Acquire`, stores `Release`: a locale's puts before a `store` or
/// RMW are visible to a locale whose `load` or RMW sees that value (or a
/// later one in its modification order).
impl GlobalPtr<u64> {
    fn atomic(&self, what: &str, op: AtomicOp) -> Result<Result<u64, u64>, Error> {
        // Segments are aligned to a page in every process, so the offset
        // tells the alignment.
        if self.offset % align_of::<AtomicU64>() as u64 != 0 {
            // As `locate` would, first: a pointer outside its allocation
            // is out of bounds whatever its alignment.
            with_space("pgas::GlobalPtr atomics", |s| {
                self.locate(s, 1, what).map(drop)
            })??;
            return Err(Error::new(
                ErrorKind::OutOfBounds,
                format!(
                    "cantus::pgas: {what} at byte {} is not 8-byte aligned",
                    self.offset
                ),
            ));
        }
        self.access(1, what, "pgas::GlobalPtr atomics", |at| match at {
            // SAFETY: `p` is in bounds (checked by `locate`) and aligned
            // (checked above), in a mapping that lives while the space
            // does (we hold its lock). Any bits are a valid AtomicU64.
            // Other locales may access the word non-atomically with put or
            // get: that is the race `GlobalPtr`'s docs describe.
            Target::Mapped(p) => Ok(op.apply(unsafe { &*p.cast::<AtomicU64>() })),
            Target::Remote(memory, locale, offset) => memory.atomic(locale, offset, op),
        })
    }

    /// Waits until `until` holds for the word's value and returns that
    /// value (read with Acquire: what a [`put_signal`](GlobalPtr::put_signal)
    /// or a store released is visible). The word must be on this locale:
    /// a signal is waited for where it lands (OpenSHMEM's
    /// `shmem_wait_until`). A task spins for 20 µs polling the transport,
    /// then polls and yields (to other tasks and threads) until 10 ms,
    /// then sleeps for growing pauses (up to 200 µs): a neighbour's
    /// signal that comes a little later is never waited for by a nap.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::OutOfBounds`] if the word is outside its allocation,
    /// not 8-byte aligned, or on another locale;
    /// [`ErrorKind::NoRuntime`] if no runtime runs.
    pub fn wait_until(&self, mut until: impl FnMut(u64) -> bool) -> Result<u64, Error> {
        let s = space("pgas::GlobalPtr::wait_until")?;
        let place = self.locate(&s, 1, "a wait_until")?;
        let p = match place {
            Place::Mapped(p) if self.locale() == s.here && self.offset % 8 == 0 => p,
            _ => {
                return Err(Error::new(
                    ErrorKind::OutOfBounds,
                    format!(
                        "cantus::pgas: wait_until waits on an 8-byte aligned word of its own \
                         locale; this word is at byte {} of locale {}, and this is locale {}",
                        self.offset, self.locale, s.here
                    ),
                ));
            }
        };
        // SAFETY: in bounds (`locate`) and aligned (checked) in this
        // locale's segment, mapped while `s` lives (held here); any bits
        // are a valid AtomicU64; other locales write it atomically
        // (signals, atomics) or race as `GlobalPtr` documents.
        let word = unsafe { &*p.cast::<AtomicU64>() };
        // Acquire: pairs with the Release (or AcqRel) of the signal or
        // store whose value it reads, so the bytes put before it are seen.
        let mut seen = word.load(Ordering::Acquire);
        if until(seen) {
            return Ok(seen);
        }
        wait_promptly(
            || {
                seen = word.load(Ordering::Acquire);
                until(seen)
            },
            crate::remote::poll_once,
        );
        Ok(seen)
    }

    /// Adds `v` (wrapping) and returns the previous value.
    ///
    /// # Errors
    ///
    /// As [`put`](GlobalPtr::put), or a word that is not 8-byte aligned.
    pub fn fetch_add(&self, v: u64) -> Result<u64, Error> {
        self.atomic("a fetch_add", AtomicOp::FetchAdd(v))
            .map(|r| r.expect("only compare_exchange fails"))
    }

    /// Stores `new` if the word holds `current`: `Ok(current)` if it did,
    /// `Err(actual)` if not (the outer `Result` is the access's).
    ///
    /// # Errors
    ///
    /// As [`fetch_add`](GlobalPtr::fetch_add).
    pub fn compare_exchange(&self, current: u64, new: u64) -> Result<Result<u64, u64>, Error> {
        self.atomic(
            "a compare_exchange",
            AtomicOp::CompareExchange(current, new),
        )
    }

    /// Stores `v` and returns the previous value.
    ///
    /// # Errors
    ///
    /// As [`fetch_add`](GlobalPtr::fetch_add).
    pub fn swap(&self, v: u64) -> Result<u64, Error> {
        self.atomic("a swap", AtomicOp::Swap(v))
            .map(|r| r.expect("only compare_exchange fails"))
    }

    /// Loads the word (Acquire).
    ///
    /// # Errors
    ///
    /// As [`fetch_add`](GlobalPtr::fetch_add).
    pub fn load(&self) -> Result<u64, Error> {
        self.atomic("a load", AtomicOp::Load)
            .map(|r| r.expect("only compare_exchange fails"))
    }

    /// Stores `v` (Release).
    ///
    /// # Errors
    ///
    /// As [`fetch_add`](GlobalPtr::fetch_add).
    pub fn store(&self, v: u64) -> Result<(), Error> {
        self.atomic("a store", AtomicOp::Store(v)).map(drop)
    }
}
