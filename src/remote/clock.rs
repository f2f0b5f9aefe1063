//! Aligning the clocks of a traced job's locales (`trace/README.md`,
//! "Clocks"): locale 0 asks each other locale for its clock a few times,
//! keeps the sample with the shortest round trip, and tells the locale
//! the offset that puts its trace on locale 0's clock, with its error
//! bound (half that round trip).

use super::Remote;
use serde::{Deserialize, Serialize};

/// A locale's machine (a hash of its host name) and clock now (the
/// trace's `CLOCK_MONOTONIC` nanoseconds).
#[derive(Serialize, Deserialize)]
pub(crate) struct ClockNow;

impl Remote for ClockNow {
    type Output = (u64, u64);
    const INLINE: bool = true;
    fn run(self) -> (u64, u64) {
        (host(), crate::trace::now())
    }
}

/// A hash of this machine's host name: locales on one machine read one
/// clock and need no offset.
fn host() -> u64 {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return 0;
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    // The same FNV-1a that names remote handlers.
    super::handlers::id_of(&String::from_utf8_lossy(&buf[..n]))
}

/// Sets the locale's trace clock offset and its error bound.
#[derive(Serialize, Deserialize)]
pub(crate) struct SetClockOffset {
    offset_ns: i64,
    error_ns: u64,
}

impl Remote for SetClockOffset {
    type Output = ();
    const INLINE: bool = true;
    fn run(self) {
        crate::trace::set_clock_offset(self.offset_ns, self.error_ns);
    }
}

crate::remote!(ClockNow, SetClockOffset);

/// Samples per locale.
const SAMPLES: usize = 16;

/// Locale 0: measures every other locale's clock against its own and
/// sets their offsets (from an outside thread, once the job is up).
pub(crate) fn align_trace_clocks() {
    for l in 1..super::num_locales() {
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..SAMPLES {
            let t0 = crate::trace::now();
            let Ok((their_host, remote)) = super::on(l, ClockNow).join() else {
                return;
            };
            if their_host == host() {
                break; // one machine, one clock: offset 0, exact
            }
            let t1 = crate::trace::now();
            let rtt = t1 - t0;
            let mid = t0 + rtt / 2;
            let offset = mid as i64 - remote as i64;
            if best.is_none_or(|(r, _)| rtt < r) {
                best = Some((rtt, offset));
            }
        }
        if let Some((rtt, offset)) = best {
            let _ = super::on(
                l,
                SetClockOffset {
                    offset_ns: offset,
                    error_ns: rtt.div_ceil(2),
                },
            )
            .join();
        }
    }
}
