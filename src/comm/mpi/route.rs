//! The routing transport of an MPI job whose node shares memory: frames
//! to a rank of this node go through the node's shared-memory rings
//! (`comm/shm/transport.rs`), frames to any other rank through MPI
//! (`transport.rs`), chosen per destination (GASNet's neighbourhood
//! rule). `README.md` beside this file, "Ranks of one node", states why
//! the two keep the `Transport` contract together.
//!
//! - **Order** per (source, destination, network) holds: a pair of
//!   locales always uses the same path, and each path keeps order.
//! - **Polls** look at the rings first (loads, no lock), then MPI (a pass
//!   inline), alternating which goes first when a poll's budget is
//!   spent, so neither starves the other.
//! - **Parking**: the last idle worker sleeps on this locale's doorbell
//!   in the node's region, which the node's ranks ring after they commit
//!   a frame; MPI arrivals ring it too (`Shared::node`, set to
//!   [`ShmTransport::wake_own_if_sleeping`]); inline, it naps between
//!   passes as it would over MPI alone.
//! - Where the node is the whole job, MPI carries nothing: polls and
//!   parks do not look at it.

use super::transport::{MpiTransport, NodeHooks};
use crate::comm::shm::transport::ShmTransport;
use crate::comm::transport::{
    Arrival, Landing, LandingKey, Lent, Nets, Network, SendError, Transport,
};
use crate::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// No member index: the locale is on another node.
const ELSEWHERE: usize = usize::MAX;

/// This locale's end of the routing transport.
pub(crate) struct RoutingTransport {
    shm: Arc<ShmTransport>,
    mpi: Arc<MpiTransport>,
    /// Each locale's index among the node's members, or [`ELSEWHERE`].
    member: Vec<usize>,
    /// The node's members' locales, by index.
    members: Vec<usize>,
    /// Whether any locale is on another node (else MPI carries nothing).
    others: bool,
    /// The smaller of the two transports' largest frames.
    max_frame: usize,
    /// Whether the next poll looks at MPI first (one poller at a time:
    /// the `Transport` contract).
    mpi_first: AtomicBool,
}

impl RoutingTransport {
    /// Routes between `shm`, the node's rings (member `i` is locale
    /// `members[i]`), and `mpi`, every rank. Sets MPI's wake-up of a
    /// parked worker to this locale's doorbell.
    pub(super) fn new(
        shm: Arc<ShmTransport>,
        mpi: Arc<MpiTransport>,
        members: Vec<usize>,
    ) -> RoutingTransport {
        let locales = mpi.locales();
        let mut member = vec![ELSEWHERE; locales];
        for (i, &l) in members.iter().enumerate() {
            member[l] = i;
        }
        debug_assert_eq!(members[shm.here()], mpi.here());
        let (woken, looked_at) = (shm.clone(), shm.clone());
        let _ = mpi.shared.node.set(NodeHooks {
            wake: Box::new(move || woken.wake_own_if_sleeping()),
            ready: Box::new(move || looked_at.ready()),
        });
        RoutingTransport {
            max_frame: shm.max_frame().min(mpi.max_frame()),
            others: members.len() < locales,
            shm,
            mpi,
            member,
            members,
            mpi_first: AtomicBool::new(false),
        }
    }

    /// The node's region, and its members' locales (member `i` is locale
    /// `members[i]`).
    pub(super) fn node(&self) -> (&Arc<ShmTransport>, &[usize]) {
        (&self.shm, &self.members)
    }

    fn poll_shm(
        &self,
        nets: Nets,
        budget: usize,
        deliver: &mut dyn FnMut(Arrival<'_>),
    ) -> Result<usize, Error> {
        self.shm.poll(nets, budget, &mut |a| {
            deliver(Arrival {
                src: self.members[a.src],
                net: a.net,
                bytes: a.bytes,
                lent: a.lent,
                lendable: a.lendable,
            })
        })
    }

    /// Polls the rings and MPI, the one that did not get the whole
    /// budget last time first.
    fn poll_both(
        &self,
        nets: Nets,
        budget: usize,
        deliver: &mut dyn FnMut(Arrival<'_>),
    ) -> Result<usize, Error> {
        let mpi_first = self.mpi_first.load(Ordering::Relaxed);
        let mut handled = if mpi_first {
            self.mpi.poll(nets, budget, deliver)?
        } else {
            self.poll_shm(nets, budget, deliver)?
        };
        if handled < budget {
            handled += if mpi_first {
                self.poll_shm(nets, budget - handled, deliver)?
            } else {
                self.mpi.poll(nets, budget - handled, deliver)?
            };
        } else {
            // The budget went to one side: the other goes first next time.
            self.mpi_first.store(!mpi_first, Ordering::Relaxed);
        }
        Ok(handled)
    }
}

impl RoutingTransport {
    /// `locale`'s index among this node's members, if it is another rank
    /// of this node (its frames go through the node's rings, and its
    /// segment is mapped here); `None` for another node, this locale, or
    /// no such locale (MPI's side then answers, or names the error).
    fn on_this_node(&self, locale: usize) -> Option<usize> {
        match self.member.get(locale) {
            Some(&i) if i != ELSEWHERE && locale != self.here() => Some(i),
            _ => None,
        }
    }
}

impl Transport for RoutingTransport {
    fn here(&self) -> usize {
        self.mpi.here()
    }

    fn locales(&self) -> usize {
        self.mpi.locales()
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn max_frame_to(&self, dest: usize) -> usize {
        match self.on_this_node(dest) {
            Some(_) => self.shm.max_frame(),
            None => self.mpi.max_frame_to(dest),
        }
    }

    fn eager_frame(&self) -> usize {
        self.shm.eager_frame().min(self.mpi.eager_frame())
    }

    fn try_send(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        match self.on_this_node(dest) {
            Some(i) => self.shm.try_send(i, net, parts),
            // Another node, or no such locale (MPI's error names it).
            None => self.mpi.try_send(dest, net, parts),
        }
    }

    fn try_send_held(&self, dest: usize, net: Network, parts: &[&[u8]]) -> Result<(), SendError> {
        match self.on_this_node(dest) {
            Some(i) => self.shm.try_send(i, net, parts),
            None => self.mpi.try_send_held(dest, net, parts),
        }
    }

    fn flush(&self) {
        self.mpi.flush();
    }

    fn try_send_returning(
        &self,
        dest: usize,
        net: Network,
        head: &[&[u8]],
        lent: Lent,
        array: std::ops::Range<usize>,
        tail: &[&[u8]],
    ) -> Result<(), Lent> {
        // Only the node's blocks go back where they came from; MPI's
        // buffers are this rank's own.
        match self.on_this_node(dest) {
            Some(i) => self.shm.try_send_returning(i, net, head, lent, array, tail),
            None => Err(lent),
        }
    }

    fn sends_borrowed(&self, dest: usize, len: usize) -> bool {
        self.on_this_node(dest).is_none() && self.mpi.sends_borrowed(dest, len)
    }

    fn stage(
        &self,
        dest: usize,
        need: usize,
        want: usize,
    ) -> Option<crate::comm::transport::Staged> {
        // The node's rendezvous blocks only; MPI sends from where a frame
        // lies.
        self.shm.stage(self.on_this_node(dest)?, need, want)
    }

    unsafe fn expect_landing(&self, src: usize, place: *mut u8, len: usize) -> Option<Landing> {
        if self.on_this_node(src).is_some() {
            // The node's ranks map each other's segments: no landing.
            return None;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { self.mpi.expect_landing(src, place, len) }
    }

    fn withdraw_landing(&self, landing: &Landing) {
        self.mpi.withdraw_landing(landing);
    }

    fn claim_key(&self, dest: usize) -> Option<u32> {
        if self.on_this_node(dest).is_some() {
            return None;
        }
        self.mpi.claim_key(dest)
    }

    fn release_claim_key(&self, dest: usize, key: u32) {
        self.mpi.release_claim_key(dest, key);
    }

    unsafe fn claim_landing(
        &self,
        src: usize,
        key: u32,
        place: *mut u8,
        len: usize,
    ) -> Option<Landing> {
        if self.on_this_node(src).is_some() {
            return None;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { self.mpi.claim_landing(src, key, place, len) }
    }

    fn refuse_landing(&self, src: usize, key: u32) {
        self.mpi.refuse_landing(src, key);
    }

    unsafe fn try_send_landing(
        &self,
        dest: usize,
        key: LandingKey,
        parts: &[&[u8]],
    ) -> Result<Arc<std::sync::atomic::AtomicBool>, SendError> {
        // SAFETY: the caller's contract, passed on (a landing is expected
        // only from another node: `expect_landing`).
        unsafe { self.mpi.try_send_landing(dest, key, parts) }
    }

    unsafe fn try_send_borrowed(
        &self,
        dest: usize,
        net: Network,
        parts: &[&[u8]],
    ) -> Result<Option<Arc<std::sync::atomic::AtomicBool>>, SendError> {
        match self.on_this_node(dest) {
            Some(i) => self.shm.try_send(i, net, parts).map(|()| None),
            // SAFETY: the caller's contract, passed on.
            None => unsafe { self.mpi.try_send_borrowed(dest, net, parts) },
        }
    }

    fn poll(
        &self,
        nets: Nets,
        budget: usize,
        deliver: &mut dyn FnMut(Arrival<'_>),
    ) -> Result<usize, Error> {
        let handled = if self.others {
            self.poll_both(nets, budget, deliver)?
        } else {
            self.poll_shm(nets, budget, deliver)?
        };
        if handled > 0 {
            // A sign of life for the inline helper, which hands frames on
            // only when no one has for a while (counted only when frames
            // moved: an empty poll makes no read-modify-write).
            self.mpi.shared.node_polls.fetch_add(1, Ordering::Relaxed);
        }
        Ok(handled)
    }

    fn ready(&self) -> bool {
        // The rings first: two loads each; MPI's (inline, a pass) only if
        // they hold nothing.
        self.shm.ready() || (self.others && self.mpi.ready())
    }

    fn has_progress_thread(&self) -> bool {
        self.others && self.mpi.has_progress_thread()
    }

    fn expect_arrivals(&self, on: bool) {
        self.mpi.expect_arrivals(on);
    }

    fn attach_poller(&self, poller: crate::sched::driver::DriverPoller) {
        self.mpi.attach_poller(poller);
    }

    fn frames_taken(&self) -> u64 {
        self.shm.frames_taken() + self.mpi.frames_taken()
    }

    fn park(&self, timeout: Option<Duration>) {
        if !self.others {
            self.shm.park_until(timeout, &|| false);
            return;
        }
        // Sleep on the node's doorbell: the node's ranks ring it for their
        // frames, MPI's arrivals (`Shared::wake_parked`) for theirs.
        let mpi = &self.mpi.shared;
        self.mpi
            .park_on(timeout, &|| self.shm.ready(), &mut |t, _| {
                self.shm.park_until(t, &|| mpi.has_arrivals())
            });
    }

    fn unpark(&self) {
        self.shm.unpark();
    }
}
