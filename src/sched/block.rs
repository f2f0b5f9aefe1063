//! Why a task or an outside thread is blocked: the scheduler's own
//! bookkeeping (counters per kind, deadlock reports). The variables that
//! block (`sync/`) name their kind when they block.

/// Why a task or thread is blocked, for queries and deadlock reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKind {
    /// A `SyncVar` read waiting for full.
    SyncRead = 0,
    /// A `SyncVar` write waiting for empty or full.
    SyncWrite = 1,
    /// A `SingleVar` read.
    SingleRead = 2,
    /// A task group, scope, join or coforall waiting for its tasks.
    GroupWait = 3,
}

/// Number of [`BlockKind`]s.
pub(crate) const BLOCK_KINDS: usize = 4;

impl BlockKind {
    pub(crate) const ALL: [BlockKind; BLOCK_KINDS] = [
        BlockKind::SyncRead,
        BlockKind::SyncWrite,
        BlockKind::SingleRead,
        BlockKind::GroupWait,
    ];

    pub(crate) fn describe(self) -> &'static str {
        match self {
            BlockKind::SyncRead => {
                "reading a SyncVar (readFE/readFF), or from C a full/empty word, syncvar, sinc, barrier or qthread_lock"
            }
            BlockKind::SyncWrite => {
                "writing a SyncVar (writeEF/writeFF), or from C a full/empty word or syncvar"
            }
            BlockKind::SingleRead => "reading a SingleVar",
            BlockKind::GroupWait => "waiting for a task group, scope, join or coforall",
        }
    }
}

/// Waits whose variable does not say what they wait for: a remote call's
/// reply slot is a `SyncVar<()>` inside the engine, and a deadlock report
/// that said "reading a SyncVar" there would send its reader looking for
/// a variable of theirs. Such a wait names itself here, by the variable's
/// address, while it lasts; the reports print the name instead. Only
/// waits that block register (after their spinning and polling): a lock
/// and a push where a futex and a context switch follow anyway, and no
/// allocation (the text is made only when a report asks: a blocked
/// round trip allocates nothing, `tests/remote_call_allocations.rs`).
static PURPOSES: std::sync::Mutex<Vec<(usize, Purpose)>> = std::sync::Mutex::new(Vec::new());

/// What a wait is for: `describe(name, n)` says it, when a report asks.
#[derive(Clone, Copy)]
pub(crate) struct Purpose {
    pub(crate) describe: fn(&str, usize) -> String,
    pub(crate) name: &'static str,
    pub(crate) n: usize,
}

/// While alive, the wait on the variable at `addr` is described by its
/// [`Purpose`] (for example "waiting for the reply of remote call X from
/// locale 2").
pub(crate) struct WaitPurpose {
    addr: usize,
}

impl WaitPurpose {
    pub(crate) fn name(addr: usize, purpose: Purpose) -> WaitPurpose {
        purposes().push((addr, purpose));
        WaitPurpose { addr }
    }
}

impl Drop for WaitPurpose {
    fn drop(&mut self) {
        let mut p = purposes();
        if let Some(i) = p.iter().rposition(|(a, _)| *a == self.addr) {
            p.swap_remove(i);
        }
    }
}

fn purposes() -> std::sync::MutexGuard<'static, Vec<(usize, Purpose)>> {
    PURPOSES.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a task or thread blocked as `kind` on the variable at `addr`
/// waits for, as a deadlock report says it: its purpose if it named one,
/// else its kind and the variable's address.
pub(crate) fn describe_wait(kind: BlockKind, addr: usize) -> String {
    let named = purposes()
        .iter()
        .rev()
        .find(|(a, _)| *a == addr)
        .map(|(_, p)| *p);
    match named {
        Some(p) => (p.describe)(p.name, p.n),
        None => format!("{} at {addr:#x}", kind.describe()),
    }
}
