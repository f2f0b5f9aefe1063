//! The deadlock report: when every worker has been idle for the grace
//! period with tasks or outside threads blocked on cantus variables and
//! nothing can wake them, say who waits on what, then abort rather than
//! hang.

use super::registry::Registry;
use crate::sync::wait::BlockKind;
use std::fmt::Write;
use std::time::Duration;

pub(crate) fn report(reg: &Registry, after: Duration) -> ! {
    let mut msg = String::new();
    let tasks = reg.blocked_tasks();
    let threads = reg.outside_blocked();
    let _ = writeln!(
        msg,
        "cantus: deadlock: no task can make progress. {tasks} task(s) and {threads} outside thread(s) are blocked:"
    );
    for kind in BlockKind::ALL {
        let t = reg.blocked_tasks_of(kind as usize);
        if t > 0 {
            let _ = writeln!(msg, "  {t} task(s) {}", kind.describe());
        }
        let o = reg.outside.blocked[kind as usize].load(std::sync::atomic::Ordering::SeqCst);
        if o > 0 {
            let _ = writeln!(msg, "  {o} outside thread(s) {}", kind.describe());
        }
    }
    let _ = writeln!(
        msg,
        "Every worker sat idle for {} ms with nothing queued (CANTUS_DEADLOCK_MS sets this; 0 turns detection off). \
         Aborting instead of hanging.",
        after.as_millis()
    );
    eprint!("{msg}");
    std::process::abort();
}
