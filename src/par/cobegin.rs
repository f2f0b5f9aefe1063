//! `cobegin` (a fixed list of tasks, run concurrently, waited for) and
//! [`TaskList`] (a list built at run time, executed with one end count).

use std::cell::UnsafeCell;

/// Runs each expression as a task and waits for all of them (Chapel's
/// `cobegin`). Expressions may borrow from the enclosing scope; a panic in
/// any reaches the caller. Two expressions become a [`join`](crate::join)
/// and their values are returned as a pair; with more, values are dropped.
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let (mut a, mut b, mut c) = (0, 0, 0);
/// rt.block_on(|| cantus::cobegin!(a = 1, b = 2, c = 3));
/// assert_eq!(a + b + c, 6);
/// ```
#[macro_export]
macro_rules! cobegin {
    ($a:expr, $b:expr $(,)?) => {
        $crate::join(|| $a, || $b)
    };
    ($first:expr $(, $rest:expr)+ $(,)?) => {
        $crate::scope(|__cantus_scope| {
            $( __cantus_scope.spawn(|| { let _ = $rest; }); )+
            let _ = $first;
        })
    };
}

/// A list of tasks built at run time and executed together: every task is
/// spawned with one end-count update, and `execute` returns when all are
/// done.
///
/// ```
/// let rt = cantus::Runtime::builder().workers(2).build().unwrap();
/// let mut out = vec![0; 4];
/// rt.block_on(|| {
///     let mut list = cantus::TaskList::new();
///     for (i, slot) in out.iter_mut().enumerate() {
///         list.add(move || *slot = i * i);
///     }
///     list.execute();
/// });
/// assert_eq!(out, [0, 1, 4, 9]);
/// ```
// (Task lists as in seed 000.)
#[derive(Default)]
pub struct TaskList<'a> {
    tasks: Vec<BoxedTask<'a>>,
}

type BoxedTask<'a> = Box<dyn FnOnce() + Send + 'a>;

struct Slots<'a>(Vec<UnsafeCell<Option<BoxedTask<'a>>>>);

// SAFETY: each slot is taken by exactly one coforall index (index i takes
// slot i), so no two threads touch the same cell; the closures are Send.
unsafe impl Sync for Slots<'_> {}

impl<'a> Slots<'a> {
    /// # Safety
    /// Each index is taken by one caller only.
    unsafe fn take(&self, i: usize) -> Option<BoxedTask<'a>> {
        // SAFETY: per the contract, no other reference to slot i exists.
        unsafe { (*self.0[i].get()).take() }
    }
}

impl<'a> TaskList<'a> {
    /// An empty list.
    pub fn new() -> TaskList<'a> {
        TaskList { tasks: Vec::new() }
    }

    /// Adds a task (boxed: one allocation per task).
    pub fn add<F>(&mut self, f: F)
    where
        F: FnOnce() + Send + 'a,
    {
        self.tasks.push(Box::new(f));
    }

    /// Number of tasks in the list.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Runs every task concurrently and waits for all of them. Panics if
    /// called outside tasks with no runtime running.
    #[track_caller]
    pub fn execute(self) {
        let slots = Slots(
            self.tasks
                .into_iter()
                .map(|t| UnsafeCell::new(Some(t)))
                .collect(),
        );
        let slots = &slots;
        crate::par::coforall(slots.0.len(), |i| {
            // SAFETY: index i is the only user of slot i (see Slots).
            let task = unsafe { slots.take(i) };
            if let Some(t) = task {
                t();
            }
        });
    }
}
