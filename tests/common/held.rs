//! [`Held`]: splittable work whose root piece keeps a piece in reserve
//! and does nothing else until some locale asks for work and takes it.
//! A test that asserts that work moved between locales wraps its work in
//! it: then the work moves whatever the schedule (without, locale 0 may
//! finish a small computation before another locale's first request
//! arrives, and the assertion would depend on timing).

use cantus::balance::Splittable;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub struct Held<W> {
    work: W,
    /// A piece split off and kept for the first split.
    spare: Option<Box<W>>,
    /// Whether this piece holds (the root, until its first split).
    hold: bool,
}

impl<W> Held<W> {
    /// `work`, held until its first split if the job has several locales.
    pub fn new(work: W) -> Held<W> {
        Held {
            work,
            spare: None,
            hold: cantus::num_locales() > 1,
        }
    }
}

impl<W: Splittable> Splittable for Held<W> {
    type Result = W::Result;

    fn run(&mut self, units: usize, result: &mut W::Result) -> bool {
        if !self.hold {
            return self.work.run(units, result);
        }
        if self.spare.is_none() {
            self.spare = self.work.split().map(Box::new);
        }
        if self.spare.is_some() {
            // Holding: a piece is ready for whoever asks first. A step
            // that does nothing lets the piece's loop poll for requests.
            std::thread::yield_now();
            return true;
        }
        // Not splittable yet: one unit at a time towards a state that is.
        // (Work that ends before it ever splits is too small to move.)
        self.work.run(1, result)
    }

    fn split(&mut self) -> Option<Held<W>> {
        let piece = match self.spare.take() {
            Some(spare) => *spare,
            None => self.work.split()?,
        };
        self.hold = false;
        Some(Held {
            work: piece,
            spare: None,
            hold: false,
        })
    }

    fn merge(into: &mut W::Result, other: W::Result) {
        W::merge(into, other)
    }
}
