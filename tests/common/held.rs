//! [`Held`]: splittable work that cannot end before a piece of it has
//! run on another locale. A test that asserts that work moved between
//! locales wraps its work in it: then the work moves whatever the
//! schedule (without, locale 0 may finish a small computation, or hand
//! all of it to its own idle workers, before another locale's first
//! request arrives, and the assertion would depend on timing).
//!
//! How: every piece on the locale that started the computation holds
//! until a piece has run elsewhere: it keeps a piece split off in reserve
//! and does nothing else (each step returns at once, so the piece's loop
//! polls and answers requests between steps, and a split hands the
//! reserve out). Work is only ever divided there, never done, except one
//! unit at a time while it cannot be split at all (a single node). The
//! first piece that runs on another locale tells the starting one
//! ([`Arrived`]), and every piece there goes on normally from then.

use cantus::balance::Splittable;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// The last computation (its token) a piece of which arrived elsewhere,
/// on the locale that held it.
static ARRIVED: AtomicU64 = AtomicU64::new(0);

/// Tokens of held computations, on the locale that starts them.
static NEXT: AtomicU64 = AtomicU64::new(0);

#[derive(Serialize, Deserialize)]
pub struct Held<W> {
    work: W,
    /// A piece split off and kept for the next split.
    spare: Option<Box<W>>,
    hold: Hold,
}

impl<W> Held<W> {
    /// `work`, held until a piece of it ran on another locale, if the job
    /// has several.
    pub fn new(work: W) -> Held<W> {
        Held {
            work,
            spare: None,
            hold: Hold::new(),
        }
    }
}

/// The hold of one computation, carried by each of its pieces: whether
/// a piece must hold while on the starting locale, until a piece has run
/// on another (false once that happened, or on a job of one locale).
/// [`Held`] holds any work with it; work that splits on its own terms
/// (by `split_for`, say) can carry one itself.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub struct Hold {
    /// Whether pieces still hold.
    on: bool,
    /// The root's locale and the computation's token.
    origin: usize,
    token: u64,
    /// Whether this piece already told the origin it arrived.
    told: bool,
}

impl Hold {
    /// A new computation's hold, started here.
    pub fn new() -> Hold {
        Hold {
            on: cantus::num_locales() > 1,
            origin: cantus::here(),
            token: NEXT.fetch_add(1, Ordering::Relaxed) + 1,
            told: false,
        }
    }

    /// The locale the computation started on.
    pub fn origin(&self) -> usize {
        self.origin
    }

    /// Whether the piece carrying it must hold now. The first call on
    /// another locale tells the origin that a piece arrived there.
    pub fn holding(&mut self) -> bool {
        let here = cantus::here();
        if !self.told && here != self.origin {
            self.told = true;
            cantus::begin_on(self.origin, Arrived(self.token)).expect("the origin is there");
        }
        if self.on && (here != self.origin || ARRIVED.load(Ordering::Acquire) >= self.token) {
            self.on = false;
        }
        self.on
    }
}

/// Tells a held computation's locale that one of its pieces runs on
/// another.
#[derive(Serialize, Deserialize)]
pub struct Arrived(u64);

impl cantus::Remote for Arrived {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        ARRIVED.fetch_max(self.0, Ordering::Release);
    }
}

cantus::remote!(Arrived);

impl<W: Splittable> Splittable for Held<W> {
    type Result = W::Result;

    fn run(&mut self, units: usize, result: &mut W::Result) -> bool {
        if !self.hold.holding() {
            // The reserve, if any, is the root's work too: it runs once
            // the rest is done (or leaves at the next split).
            if self.work.run(units, result) {
                return true;
            }
            return match self.spare.take() {
                Some(spare) => {
                    self.work = *spare;
                    true
                }
                None => false,
            };
        }
        if self.spare.is_none() {
            self.spare = self.work.split().map(Box::new);
        }
        if self.spare.is_some() {
            // Holding: a piece is ready for whoever asks (here or not).
            std::thread::yield_now();
            return true;
        }
        // Not splittable yet: one unit at a time towards a state that is.
        self.work.run(1, result)
    }

    fn split(&mut self) -> Option<Held<W>> {
        let piece = match self.spare.take() {
            Some(spare) => *spare,
            None => self.work.split()?,
        };
        Some(Held {
            work: piece,
            spare: None,
            hold: self.hold,
        })
    }

    fn merge(into: &mut W::Result, other: W::Result) {
        W::merge(into, other)
    }
}
