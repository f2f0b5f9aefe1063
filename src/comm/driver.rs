//! The transport as the scheduler's driver: whichever worker polls the
//! driver polls the transport, and hands each frame to the layer that
//! knows what frames mean (the active-message engine, `remote/`), through
//! [`Dispatch`]. The last idle worker sleeps in the transport's `park`.

use super::transport::{Arrival, Nets, Transport};
use crate::sched::driver::{Driver, DriverContext};
use crate::sched::outside_wait::StuckSample;
use std::sync::Arc;
use std::time::Duration;

/// Frames handled per poll at most: a poll is bounded work between two
/// tasks of a busy worker.
pub(crate) const POLL_BUDGET: usize = 64;

/// What frames mean: implemented by the layer above the transport.
pub(crate) trait Dispatch: Send + Sync + 'static {
    /// Handles one frame, inside a poll (so it must not block; work that
    /// may block goes to a task through `cx.spawn`).
    fn deliver(&self, frame: Arrival<'_>, cx: &DriverContext<'_>);

    /// Called at the start of every poll, before frames are taken: a
    /// chance to retry sends that found no room earlier.
    fn before_poll(&self) {}

    /// Whether frames wait for `before_poll` to send them (cheap: a
    /// load). Part of the driver's `ready`, so that a worker polls for
    /// them even when nothing arrived.
    fn sends_waiting(&self) -> bool {
        false
    }

    /// Which networks a poll may drain now: `Nets::Replies` while the
    /// layer holds as many unfinished requests as it allows (flow
    /// control: requests stay in the transport and their senders wait).
    fn accepting(&self) -> Nets {
        Nets::Both
    }

    /// Work the layer holds that will still become runtime work (the
    /// `Driver::in_flight` contract).
    fn in_flight(&self) -> u64;

    /// Frames delivered so far that made no runtime work (control
    /// traffic), a count that only grows: a poll does not count them as
    /// handled (`Driver::poll`).
    fn control_frames(&self) -> u64 {
        0
    }

    /// One wave of the job-wide deadlock check (`Driver::job_stuck_sample`).
    fn job_stuck_sample(&self) -> StuckSample {
        None
    }

    /// The other locales' waiters (`Driver::job_waiters`).
    fn job_waiters(&self) -> Vec<(usize, Vec<String>)> {
        Vec::new()
    }
}

/// A transport and a dispatcher, as a [`Driver`].
pub(crate) struct CommDriver {
    transport: Arc<dyn Transport>,
    dispatch: Arc<dyn Dispatch>,
}

impl CommDriver {
    pub(crate) fn new(transport: Arc<dyn Transport>, dispatch: Arc<dyn Dispatch>) -> CommDriver {
        CommDriver {
            transport,
            dispatch,
        }
    }
}

/// One poll of `transport` on `nets`, frames handed to `dispatch`. Called
/// under the driver's poll token (by [`CommDriver::poll`], or by a sender
/// that found no room, through `sched::driver::poll_with`).
pub(crate) fn poll_transport(
    transport: &dyn Transport,
    dispatch: &dyn Dispatch,
    nets: Nets,
    cx: &DriverContext<'_>,
) -> usize {
    dispatch.before_poll();
    let nets = match (nets, dispatch.accepting()) {
        (Nets::Both, Nets::Both) => Nets::Both,
        _ => Nets::Replies,
    };
    // Only the poll token's holder delivers, so the difference is this
    // poll's control frames.
    let control_before = dispatch.control_frames();
    match transport.poll(nets, POLL_BUDGET, &mut |frame| dispatch.deliver(frame, cx)) {
        Ok(n) => n.saturating_sub((dispatch.control_frames() - control_before) as usize),
        Err(e) => {
            // A corrupt ring: the job cannot go on, and continuing would
            // read garbage. Say which locale and why, then stop.
            eprintln!("{e}");
            std::process::abort();
        }
    }
}

impl Driver for CommDriver {
    fn poll(&self, cx: &DriverContext<'_>) -> usize {
        poll_transport(&*self.transport, &*self.dispatch, Nets::Both, cx)
    }

    fn ready(&self) -> bool {
        self.transport.ready() || self.dispatch.sends_waiting()
    }

    fn in_flight(&self) -> u64 {
        self.dispatch.in_flight()
    }

    /// Other locales may always send: a locale cannot see whether the
    /// others are busy, so in a job of several locales the deadlock check
    /// asks the job-wide waves ([`job_stuck_sample`](Driver::job_stuck_sample)).
    fn others_may_send(&self) -> bool {
        self.transport.locales() > 1
    }

    fn job_stuck_sample(&self) -> StuckSample {
        self.dispatch.job_stuck_sample()
    }

    fn job_waiters(&self) -> Vec<(usize, Vec<String>)> {
        self.dispatch.job_waiters()
    }

    fn progress_thread(&self) -> bool {
        self.transport.has_progress_thread()
    }

    fn can_park(&self) -> bool {
        true
    }

    fn park(&self, timeout: Option<Duration>) {
        self.transport.park(timeout)
    }

    fn unpark(&self) {
        self.transport.unpark()
    }
}
