//! Non-blocking one-sided operations: what a put or get that returned at
//! once still owes, and [`quiet`], which settles every put this locale
//! left outstanding (OpenSHMEM's `put_nbi` and `shmem_quiet`; UPC++'s
//! `rput` with its future).
//!
//! Where the target segment is mapped (every segment with shared memory,
//! the node's with MPI) an operation is a copy made before it returns:
//! its [`Completion`] is complete from the start. Otherwise (over
//! messages) the bytes were framed into remote calls before it returned,
//! so the source may be reused at once, and the calls' acknowledgements
//! are what the completion waits for. `README.md` beside this file,
//! "Non-blocking and signalling operations", states the ordering.

use crate::error::{Error, ErrorKind};
use crate::remote::RemoteHandle;
use bytemuck::Pod;
use std::sync::{Arc, Mutex};

/// The remote calls of one put (its pieces), each acknowledged once the
/// owner copied its bytes (and, for the last piece of a signalling put,
/// applied the signal).
pub(crate) struct InFlight {
    pub(crate) calls: Vec<RemoteHandle<()>>,
    /// The keys of the landings the put's bytes went to (`(locale, key)`,
    /// `remote::send_claimed`), freed once every call answered (a put
    /// dropped unanswered keeps its keys: reused early, one could name
    /// bytes still waiting for their claim).
    pub(crate) claimed: Vec<(usize, u32)>,
}

impl InFlight {
    pub(crate) fn new(calls: Vec<RemoteHandle<()>>) -> InFlight {
        InFlight {
            calls,
            claimed: Vec::new(),
        }
    }

    /// Waits for every piece; the first failure, once all answered.
    pub(crate) fn finish(self) -> Result<(), Error> {
        let r = self
            .calls
            .into_iter()
            .map(|c| c.join_with(|_| ()))
            .fold(Ok(()), Result::and);
        for (locale, key) in self.claimed {
            crate::remote::release_claim_key(locale, key);
        }
        r
    }
}

/// The remote calls of one get: `(byte offset in the destination, bytes,
/// call)` per piece, whose reply is that piece.
pub(crate) struct Gets {
    pub(crate) locale: usize,
    pub(crate) pieces: Vec<(usize, usize, RemoteHandle<()>)>,
}

impl Gets {
    /// Waits for every piece and copies each into `dst`; the first
    /// failure (a call that failed, or a reply of the wrong length),
    /// once all answered.
    pub(crate) fn finish(self, dst: &mut [u8]) -> Result<(), Error> {
        let locale = self.locale;
        let mut result = Ok(());
        for (at, n, call) in self.pieces {
            let got = call.join_with(|bytes| {
                if bytes.len() == n {
                    crate::copy::copy(&mut dst[at..at + n], bytes);
                    Ok(())
                } else {
                    Err(Error::new(
                        ErrorKind::Locale,
                        format!(
                            "cantus::pgas: locale {locale} answered a get of {n} bytes with {}",
                            bytes.len()
                        ),
                    ))
                }
            });
            result = result.and(got.and_then(|r| r));
        }
        result
    }
}

/// Where one outstanding put stands.
enum State {
    /// Its calls are in flight, waited for by nobody yet.
    Sent(InFlight),
    /// A task waits for its calls (then it becomes `Done`).
    Finishing,
    /// Every call answered: the result.
    Done(Result<(), Error>),
}

/// One outstanding put, shared by its [`Completion`] and this locale's
/// list for [`quiet`].
struct Op {
    state: Mutex<State>,
}

impl Op {
    /// Waits until every call of the put answered and returns its
    /// result, whoever waits first (a second waiter waits for the
    /// first, running other tasks meanwhile).
    fn finish(&self) -> Result<(), Error> {
        let sent = {
            let mut s = self.state.lock().unwrap();
            match std::mem::replace(&mut *s, State::Finishing) {
                State::Sent(calls) => Some(calls),
                State::Finishing => None,
                State::Done(r) => {
                    *s = State::Done(r.clone());
                    return r;
                }
            }
        };
        if let Some(calls) = sent {
            // The lock is not held while the calls are waited for: the
            // wait may switch tasks, and another task may look.
            let r = calls.finish();
            *self.state.lock().unwrap() = State::Done(r.clone());
            return r;
        }
        let mut result = None;
        super::memory::wait_until(
            || match &*self.state.lock().unwrap() {
                State::Done(r) => {
                    result = Some(r.clone());
                    true
                }
                _ => false,
            },
            crate::remote::poll_once,
        );
        result.expect("wait_until returns once done")
    }

    fn is_done(&self) -> bool {
        matches!(*self.state.lock().unwrap(), State::Done(_))
    }

    /// Whether the put completed without an error, finishing it first if
    /// every call already answered (so that this never waits).
    fn settled_ok(&self) -> bool {
        let answered = match &*self.state.lock().unwrap() {
            State::Sent(put) => put.calls.iter().all(RemoteHandle::is_answered),
            State::Finishing => false,
            State::Done(r) => return r.is_ok(),
        };
        answered && self.finish().is_ok()
    }
}

/// This locale's puts that returned before they completed, for
/// [`quiet`]; as it grows (at 64, 128, ... entries) those that completed
/// without an error are settled and dropped, so a program that never
/// calls `quiet` keeps only its puts still in flight (and failed ones).
static OUTSTANDING: Mutex<Vec<Arc<Op>>> = Mutex::new(Vec::new());

/// The runtime stopped: forgets what it left outstanding (its replies
/// can no longer come).
pub(crate) fn forget_outstanding() {
    OUTSTANDING.lock().unwrap().clear();
}

/// Completion of a non-blocking put ([`GlobalPtr::put_nb`],
/// [`GlobalPtr::put_signal`]): when it was made the source had been read
/// (reuse it at once); [`wait`](Completion::wait) returns once the bytes
/// are in the target's memory.
///
/// Dropping it without waiting is allowed: the put still completes, and
/// [`quiet`] waits for it (and reports its failure).
///
/// [`GlobalPtr::put_nb`]: super::GlobalPtr::put_nb
/// [`GlobalPtr::put_signal`]: super::GlobalPtr::put_signal
#[must_use = "a put completes anyway; wait() (or pgas::quiet()) says when, and whether it failed"]
pub struct Completion {
    /// `None`: complete when it was made (a copy into mapped memory).
    op: Option<Arc<Op>>,
}

impl Completion {
    /// A put that completed before it returned.
    pub(crate) fn done() -> Completion {
        Completion { op: None }
    }

    /// A put whose `calls` are in flight: registered for [`quiet`].
    pub(crate) fn sent(calls: InFlight) -> Completion {
        let op = Arc::new(Op {
            state: Mutex::new(State::Sent(calls)),
        });
        let mut list = OUTSTANDING.lock().unwrap();
        if list.len() >= 64 && list.len().is_power_of_two() {
            // Puts whose calls all answered are settled here, without
            // waiting; a failed one stays for `quiet` to report.
            list.retain(|op| !op.settled_ok());
        }
        list.push(op.clone());
        Completion { op: Some(op) }
    }

    /// Whether the bytes are known to be at the target (`false` may be
    /// stale: it does not poll).
    pub fn is_complete(&self) -> bool {
        self.op.as_ref().is_none_or(|op| op.is_done())
    }

    /// Waits until the bytes are in the target's memory (and, for
    /// [`put_signal`](super::GlobalPtr::put_signal), the signal applied):
    /// a task runs others meanwhile.
    ///
    /// # Errors
    ///
    /// The error of a remote call that carried part of the put (its
    /// owner is gone, or refused an offset outside its segment).
    pub fn wait(self) -> Result<(), Error> {
        self.op.map_or(Ok(()), |op| op.finish())
    }
}

/// Waits until every put this locale started without waiting
/// ([`GlobalPtr::put_nb`], [`GlobalPtr::put_signal`], by any of its
/// tasks) is in its target's memory: OpenSHMEM's `shmem_quiet`. Puts
/// started while it waits may be left for the next `quiet`. Cheap when
/// nothing is outstanding (always with shared memory, where every put
/// completes before it returns).
///
/// # Errors
///
/// The first failure among the puts it completed (each also stays with
/// its [`Completion`]).
///
/// [`GlobalPtr::put_nb`]: super::GlobalPtr::put_nb
/// [`GlobalPtr::put_signal`]: super::GlobalPtr::put_signal
pub fn quiet() -> Result<(), Error> {
    let ops = std::mem::take(&mut *OUTSTANDING.lock().unwrap());
    ops.iter().map(|op| op.finish()).fold(Ok(()), Result::and)
}

/// A get that returned before its data came ([`GlobalPtr::get_nb`]):
/// [`wait`](GetHandle::wait) gives the elements.
///
/// [`GlobalPtr::get_nb`]: super::GlobalPtr::get_nb
#[must_use = "the data of a get is in its handle: wait() for it"]
pub struct GetHandle<T> {
    state: GetState<T>,
}

enum GetState<T> {
    /// Read before it returned (a mapped segment).
    Ready(Vec<T>),
    /// `n` elements in flight.
    Pending(usize, Gets),
}

impl<T: Pod> GetHandle<T> {
    pub(crate) fn ready(data: Vec<T>) -> GetHandle<T> {
        GetHandle {
            state: GetState::Ready(data),
        }
    }

    pub(crate) fn pending(n: usize, gets: Gets) -> GetHandle<T> {
        GetHandle {
            state: GetState::Pending(n, gets),
        }
    }

    /// Waits for the elements (a task runs others meanwhile).
    ///
    /// # Errors
    ///
    /// The error of a remote call that fetched part of them (the owner
    /// is gone).
    pub fn wait(self) -> Result<Vec<T>, Error> {
        match self.state {
            GetState::Ready(v) => Ok(v),
            GetState::Pending(n, gets) => {
                let mut v = vec![T::zeroed(); n];
                gets.finish(bytemuck::cast_slice_mut(&mut v))?;
                Ok(v)
            }
        }
    }
}

/// What a signalling put does to its signal word once its bytes are in
/// place ([`GlobalPtr::put_signal`](super::GlobalPtr::put_signal)):
/// OpenSHMEM's `SHMEM_SIGNAL_SET` and `SHMEM_SIGNAL_ADD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Stores the value (Release).
    Set(u64),
    /// Adds the value, wrapping (AcqRel): several producers can each
    /// add one, and the consumer waits for the sum.
    Add(u64),
}

impl Signal {
    pub(crate) fn op(self) -> super::memory::AtomicOp {
        match self {
            Signal::Set(v) => super::memory::AtomicOp::Store(v),
            Signal::Add(v) => super::memory::AtomicOp::FetchAdd(v),
        }
    }
}
