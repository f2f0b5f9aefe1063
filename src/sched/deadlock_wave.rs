//! The job-wide deadlock check's arithmetic: what one locale answers to a
//! deadlock wave (busy, stuck or quiescent; the program messages it sent
//! and received; a progress count) and the verdict on a wave. Locale 0
//! runs the waves (`remote/engine/deadlock.rs`); `sleep/README.md`, "Deadlock
//! detection across locales", states the protocol and why no report can
//! be false. The loom model below checks the counters' orderings.

use super::idle::IdleWatch;
use super::outside_wait::StuckSample;

/// What a locale is doing, as one wave sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocaleState {
    /// A worker is out of its idle loop, work is queued, a task sleeps on
    /// a timer, an outside thread declared activity, or a frame waits to
    /// be sent: the locale may still make progress on its own.
    Busy = 0,
    /// Every worker idle and nothing queued, but a task or an outside
    /// thread is blocked, or a reply or a remote message is awaited: only
    /// another locale could let it go on.
    Stuck = 1,
    /// Every worker idle, nothing queued, nothing blocked or awaited.
    Quiescent = 2,
}

/// One locale's answer to a deadlock wave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) state: LocaleState,
    /// Program messages (requests, replies, Chant messages) sent and
    /// received so far; control frames are not counted.
    pub(crate) sent: u64,
    pub(crate) received: u64,
    /// Grows whenever the locale did anything: idle-loop entries, wake-ups
    /// of blocked outside threads, tasks injected from outside, program
    /// frames handled by polls. Only meaningful when not `Busy`.
    pub(crate) progress: u64,
}

/// What a locale looks like besides its idle workers: read by
/// [`answer`] after the idle word.
pub(crate) struct Look {
    /// No queued work, no sleeping task, no declared outside activity,
    /// no frame waiting to be sent.
    pub(crate) quiet: bool,
    /// Something blocked or awaited (see [`LocaleState::Stuck`]).
    pub(crate) outstanding: bool,
    pub(crate) sent: u64,
    pub(crate) received: u64,
    /// Progress counted outside the idle watch (added to its entries).
    pub(crate) progress: u64,
}

impl Answer {
    /// A busy answer (its counts are never compared).
    pub(crate) fn busy() -> Answer {
        Answer {
            state: LocaleState::Busy,
            sent: 0,
            received: 0,
            progress: 0,
        }
    }

    /// The answer as four words (the `DeadlockReply` payload).
    pub(crate) fn words(&self) -> [u64; 4] {
        [self.state as u64, self.sent, self.received, self.progress]
    }

    /// An answer from its four words; `None` for an unknown state.
    pub(crate) fn from_words(w: [u64; 4]) -> Option<Answer> {
        let state = match w[0] {
            0 => LocaleState::Busy,
            1 => LocaleState::Stuck,
            2 => LocaleState::Quiescent,
            _ => return None,
        };
        Some(Answer {
            state,
            sent: w[1],
            received: w[2],
            progress: w[3],
        })
    }
}

/// Samples one locale. The idle word is read first, with its RMW
/// (`idle.rs`): everything a worker did before it last entered its idle
/// loop (a send and its count, a push) is then visible to the reads in
/// `look`. Called under the locale's poll token where it has a driver, so
/// no poll delivers a frame while `look` reads.
pub(crate) fn answer(idle: &IdleWatch, look: impl FnOnce() -> Look) -> Answer {
    let Some(entries) = idle.all_idle() else {
        return Answer::busy();
    };
    let l = look();
    if !l.quiet {
        return Answer::busy();
    }
    Answer {
        state: if l.outstanding {
            LocaleState::Stuck
        } else {
            LocaleState::Quiescent
        },
        sent: l.sent,
        received: l.received,
        progress: entries.wrapping_add(l.progress),
    }
}

/// The verdict on one wave, every locale's answer: `Some` (the totals of
/// progress, sent and received) when no locale is busy, at least one is
/// stuck, and as many program messages were received as sent. Two equal
/// `Some` verdicts from consecutive waves are a deadlock: every counter is
/// monotonic, so equal totals mean no locale's counter moved between its
/// two answers.
pub(crate) fn judge(answers: &[Answer]) -> StuckSample {
    if answers.iter().any(|a| a.state == LocaleState::Busy)
        || !answers.iter().any(|a| a.state == LocaleState::Stuck)
    {
        return None;
    }
    let total = |f: fn(&Answer) -> u64| answers.iter().map(f).fold(0, u64::wrapping_add);
    let (sent, received) = (total(|a| a.sent), total(|a| a.received));
    (sent == received).then(|| (total(|a| a.progress), sent, received))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn a(state: LocaleState, sent: u64, received: u64, progress: u64) -> Answer {
        Answer {
            state,
            sent,
            received,
            progress,
        }
    }

    #[test]
    fn a_busy_locale_or_a_message_in_flight_is_never_a_deadlock() {
        use LocaleState::*;
        let stuck = a(Stuck, 3, 2, 10);
        let idle = a(Quiescent, 2, 3, 7);
        assert_eq!(judge(&[stuck, idle]), Some((17, 5, 5)));
        assert_eq!(judge(&[stuck, Answer::busy()]), None, "a busy locale");
        assert_eq!(
            judge(&[stuck, a(Quiescent, 2, 2, 7)]),
            None,
            "a message sent and not yet received is in flight"
        );
        assert_eq!(
            judge(&[a(Quiescent, 1, 1, 1), a(Quiescent, 1, 1, 1)]),
            None,
            "nothing stuck: the job is over, not deadlocked"
        );
    }

    #[test]
    fn answers_round_trip_as_words_and_bad_states_are_refused() {
        let x = a(LocaleState::Stuck, 4, 5, 6);
        assert_eq!(Answer::from_words(x.words()), Some(x));
        assert_eq!(Answer::from_words([7, 0, 0, 0]), None);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::{Answer, IdleWatch, LocaleState, Look, answer, judge};
    use crate::loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use crate::loom::sync::{Arc, Mutex};
    use crate::loom::thread;

    /// One locale of the model: one worker's idle watch, the poll token,
    /// the message counters, a task queued by a poll, and whether
    /// something is awaited.
    struct Locale {
        idle: IdleWatch,
        token: Mutex<()>,
        queued: AtomicBool,
        sent: AtomicU64,
        received: AtomicU64,
        outstanding: bool,
    }

    impl Locale {
        fn new(outstanding: bool) -> Locale {
            Locale {
                idle: IdleWatch::new(1),
                token: Mutex::new(()),
                queued: AtomicBool::new(false),
                sent: AtomicU64::new(0),
                received: AtomicU64::new(0),
                outstanding,
            }
        }

        /// The probe's answer, taken under the poll token as the engine
        /// takes it.
        fn sample(&self) -> Answer {
            let _token = self.token.lock().unwrap();
            answer(&self.idle, || Look {
                quiet: !self.queued.load(Ordering::Relaxed),
                outstanding: self.outstanding,
                sent: self.sent.load(Ordering::Relaxed),
                received: self.received.load(Ordering::Relaxed),
                progress: 0,
            })
        }
    }

    /// Locale A runs a task that sends B a request (counted as the
    /// transport takes it, then published in the ring), then waits for a
    /// reply that never comes (A stays stuck). B's worker, idle, polls
    /// once: if the frame is there it takes it (counted, and the handler
    /// task queued, under the token), then leaves its idle loop, takes
    /// the task, runs it and comes back. Locale
    /// 0's checker runs two waves meanwhile. If the two verdicts agree
    /// (the checker would report a deadlock), nothing may happen after
    /// them: the answers once everything settled equal the second wave's,
    /// and no message is in flight.
    #[test]
    fn loom_agreeing_waves_mean_nothing_moves_afterwards() {
        let mut b = loom::model::Builder::new();
        if b.preemption_bound.is_none() {
            b.preemption_bound = Some(3);
        }
        b.check(|| {
            let a = Arc::new(Locale::new(true));
            let b = Arc::new(Locale::new(false));
            b.idle.enter(0);
            let ring = Arc::new(AtomicBool::new(false));
            let (a2, ring2) = (a.clone(), ring.clone());
            let task_a = thread::spawn(move || {
                a2.sent.fetch_add(1, Ordering::Relaxed);
                ring2.store(true, Ordering::Release);
                a2.idle.enter(0);
            });
            let (b2, ring3) = (b.clone(), ring.clone());
            let worker_b = thread::spawn(move || {
                let took = {
                    let _token = b2.token.lock().unwrap();
                    let took = ring3.load(Ordering::Acquire);
                    if took {
                        b2.received.fetch_add(1, Ordering::Relaxed);
                        b2.queued.store(true, Ordering::Relaxed);
                    }
                    took
                };
                if took {
                    b2.idle.leave();
                    // Acquire: pairs with the token's release (as a
                    // deque's steal pairs with its push).
                    assert!(b2.queued.swap(false, Ordering::Acquire));
                    b2.idle.enter(0);
                }
            });
            let wave = || judge(&[a.sample(), b.sample()]);
            let first = wave();
            let second = wave();
            task_a.join().unwrap();
            worker_b.join().unwrap();
            if first.is_some() && first == second {
                let settled = [a.sample(), b.sample()];
                assert_eq!(
                    judge(&settled),
                    second,
                    "two agreeing waves, yet a locale moved after them"
                );
                assert_eq!(settled[0].state, LocaleState::Stuck);
            }
        });
    }
}
