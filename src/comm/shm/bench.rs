//! The raw-transport peer of `cantus-bench comm`: an 8-byte frame
//! ping-pong over two of the transport's rings in a shared region, between
//! two threads pinned to different CPUs, with no active-message layer,
//! no scheduler and no wake-ups (both sides spin). The floor under the
//! active-message round trip on the same memory.

use super::region::{Layout, Region};
use super::ring::{self, Consumer, Producer};
use crate::error::Error;
use std::time::{Duration, Instant};

const RING_BYTES: usize = 4096;

/// Spins until a frame arrives; returns its first 8 bytes.
fn await_frame(c: &mut Consumer) -> u64 {
    loop {
        if let Some(f) = c.try_peek().expect("a ring no one else writes") {
            let mut w = [0u8; 8];
            w.copy_from_slice(&f.payload()[..8]);
            f.release();
            return u64::from_le_bytes(w);
        }
        std::hint::spin_loop();
    }
}

fn send(p: &mut Producer, v: u64) {
    while p.try_send(0, &v.to_le_bytes()).is_err() {
        std::hint::spin_loop();
    }
}

/// Time of `rounds` round trips of an 8-byte frame between two threads on
/// CPUs `cpus.0` and `cpus.1`, after `rounds / 10` to warm up.
pub fn raw_ring_round_trip(rounds: u64, cpus: (usize, usize)) -> Result<Duration, Error> {
    let mut layout = Layout::new();
    let there = layout.carve(ring::footprint(RING_BYTES), ring::ALIGN)?;
    let back = layout.carve(ring::footprint(RING_BYTES), ring::ALIGN)?;
    let region = Region::create(layout.len())?;
    let (a, b) = (region.ptr(there), region.ptr(back));
    // SAFETY: both areas were carved for rings of RING_BYTES in the fresh
    // region; each ring gets exactly one producer and one consumer below,
    // and the region outlives both threads (scoped).
    let (mut to, mut from, mut echo_in, mut echo_out) = unsafe {
        ring::init(a, RING_BYTES)?;
        ring::init(b, RING_BYTES)?;
        (
            Producer::attach(a, RING_BYTES)?,
            Consumer::attach(b, RING_BYTES)?,
            Consumer::attach(a, RING_BYTES)?,
            Producer::attach(b, RING_BYTES)?,
        )
    };
    let warm = rounds / 10;
    let took = std::thread::scope(|s| {
        s.spawn(move || {
            crate::sched::worker::pin_to(cpus.1);
            for _ in 0..warm + rounds {
                let v = await_frame(&mut echo_in);
                send(&mut echo_out, v + 1);
            }
        });
        crate::sched::worker::pin_to(cpus.0);
        let mut v = 0;
        for _ in 0..warm {
            send(&mut to, v);
            v = await_frame(&mut from);
        }
        let start = Instant::now();
        for _ in 0..rounds {
            send(&mut to, v);
            v = await_frame(&mut from);
        }
        let took = start.elapsed();
        assert_eq!(v, warm + rounds, "every round trip added one");
        took
    });
    drop(region);
    Ok(took)
}
