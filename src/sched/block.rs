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
