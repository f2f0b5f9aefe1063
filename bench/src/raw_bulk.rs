//! The raw shared-memory peer of `transfer_bulk_arg_*`: the bulk round
//! trip's data flow by two spinning threads of this process, pinned to
//! two CPUs, with no runtime between them, so that the row can be read
//! against what the machine's caches allow for that flow.
//!
//! A cantus bulk round trip (`on(1, NegateBulk(v.into())).join()
//! .into_vec()`, on shared memory) moves the array four times: the caller
//! copies it into a rendezvous block, the callee negates it in place
//! there, copies the result into a block of its own for the reply, and
//! the caller copies that into a new vector. Two of those passes read
//! what the other core wrote, and two write lines the other core holds;
//! on a machine whose cores share no cache below the last level, each
//! such pass runs at the speed of the cores' coherence traffic, not of a
//! `memcpy` within one core. [`round_trip`] does the same four passes
//! between two threads ([`Flow::ReplyCopied`]), and, for the floor of a
//! design that answers in the request's own block, three
//! ([`Flow::ReplyInPlace`]: the callee negates in place and the caller
//! copies the result out of the same block).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The data flow of one round trip.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Flow {
    /// As cantus's: argument block, negation in place, reply block.
    ReplyCopied,
    /// The reply left in the argument's block (one copy fewer).
    ReplyInPlace,
}

/// Whose turn it is (the caller's, the callee's), or that the callee
/// stops.
const CALLER: u32 = 0;
const CALLEE: u32 = 1;
const STOP: u32 = 2;

/// Pins the calling thread to `cpu` (best effort: a machine with fewer
/// CPUs runs the peer unpinned, as it runs the locales).
fn pin_to(cpu: usize) {
    // SAFETY: `set` is a zeroed `cpu_set_t` owned here, written only by
    // `CPU_SET` within its size, and passed by pointer with that size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Time of a round trip of a `size`-byte array of `f64`s by `flow`,
/// timed as the cantus row times its calls (`super::comm`'s
/// `round_trip_f64`, which this calls on the caller's thread): the
/// argument cloned outside the time, the result checked after it.
pub(crate) fn round_trip(size: usize, rounds: u64, flow: Flow) -> Duration {
    let n = size / 8;
    // The two blocks of shared memory: each thread holds one only in its
    // turn (the locks are never contended; the turn word orders them).
    let there = Mutex::new(vec![0f64; n]);
    let back = Mutex::new(vec![0f64; n]);
    let turn = AtomicU32::new(CALLER);
    let wait_for = |who: u32| {
        while turn.load(Ordering::Acquire) != who {
            std::hint::spin_loop();
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            pin_to(1);
            loop {
                while turn.load(Ordering::Acquire) == CALLER {
                    std::hint::spin_loop();
                }
                if turn.load(Ordering::Acquire) == STOP {
                    return;
                }
                let mut arg = there.lock().expect("not poisoned");
                arg.iter_mut().for_each(|x| *x = -*x);
                if flow == Flow::ReplyCopied {
                    back.lock().expect("not poisoned").copy_from_slice(&arg);
                }
                drop(arg);
                turn.store(CALLER, Ordering::Release);
            }
        });
        let caller = s.spawn(|| {
            pin_to(0);
            super::comm::round_trip_f64(size, rounds, |v| {
                there.lock().expect("not poisoned").copy_from_slice(&v);
                drop(v);
                turn.store(CALLEE, Ordering::Release);
                wait_for(CALLER);
                let reply = match flow {
                    Flow::ReplyCopied => &back,
                    Flow::ReplyInPlace => &there,
                };
                reply.lock().expect("not poisoned").to_vec()
            })
        });
        let took = caller.join().expect("the caller ran");
        turn.store(STOP, Ordering::Release);
        took
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_flows_negate_and_return_the_array() {
        // `round_trip_f64` asserts the result came back negated.
        for flow in [Flow::ReplyCopied, Flow::ReplyInPlace] {
            assert!(round_trip(64 << 10, 20, flow) > Duration::ZERO);
        }
    }
}
