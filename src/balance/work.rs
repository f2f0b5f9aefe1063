//! Splittable work: what a balanced computation is made of, and the
//! link-time table of work types (as `remote/handlers.rs` keeps the table of
//! remote calls), so that a locale that receives stolen work of a type
//! knows how to run it.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Work that runs a bounded amount at a time, gives part of what is left
/// away when asked, and folds what it finds into a result: GLB's
/// process / split / merge (Saraswat et al., PPoPP 2011), with Tascell's
/// lazy splitting (seed 001): no piece exists until someone asks for one.
///
/// A computation starts from one value ([`balance::run`](crate::balance::run));
/// the runtime calls [`run`](Self::run) again and again, and between two
/// calls, when a worker of this locale or another locale is idle, asks
/// [`split`](Self::split) for a piece to hand over. A piece that goes to
/// another locale travels encoded (serde), only then. Each piece's result
/// starts as `Result::default()` and all of them are folded together with
/// [`merge`](Self::merge), in no particular order (so `merge` must be
/// associative and commutative, and `default` its identity).
///
/// Register the type with [`splittable!`](crate::splittable).
///
/// ```
/// use serde::{Deserialize, Serialize};
///
/// /// Counts the calls of the naive Fibonacci recursion below `n`s:
/// /// a stack of the subproblems still to do.
/// #[derive(Serialize, Deserialize)]
/// struct Fib(Vec<u32>);
///
/// impl cantus::balance::Splittable for Fib {
///     type Result = u64;
///     fn run(&mut self, units: usize, sum: &mut u64) -> bool {
///         for _ in 0..units {
///             match self.0.pop() {
///                 Some(n) if n < 2 => *sum += n as u64,
///                 Some(n) => self.0.extend([n - 2, n - 1]),
///                 None => return false,
///             }
///         }
///         !self.0.is_empty()
///     }
///     fn split(&mut self) -> Option<Fib> {
///         // Every other subproblem, from the oldest (the largest).
///         cantus::balance::split_stack(&mut self.0).map(Fib)
///     }
///     fn merge(sum: &mut u64, other: u64) {
///         *sum += other;
///     }
/// }
/// cantus::splittable!(Fib);
///
/// let fib = cantus::run(|| cantus::balance::run(Fib(vec![20]))).unwrap().unwrap();
/// assert_eq!(fib, 6765);
/// ```
///
/// A type that is not registered cannot be balanced:
///
/// ```compile_fail
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize)]
/// struct Nothing;
/// impl cantus::balance::Splittable for Nothing {
///     type Result = ();
///     fn run(&mut self, _: usize, _: &mut ()) -> bool { false }
///     fn split(&mut self) -> Option<Nothing> { None }
///     fn merge(_: &mut (), _: ()) {}
/// }
/// let _ = cantus::run(|| cantus::balance::run(Nothing));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not splittable work: it does not implement `cantus::balance::Splittable`",
    label = "not splittable work",
    note = "implement `cantus::balance::Splittable` for a serde type and register it with \
            `cantus::splittable!`"
)]
pub trait Splittable: Serialize + DeserializeOwned + Send + 'static {
    /// What the work finds (a count, a sum, a best solution).
    type Result: Serialize + DeserializeOwned + Default + Send + 'static;

    /// Does at most about `units` units of work (a unit is what the type
    /// says: a node, a call, a row), folding what it finds into `result`.
    /// Returns whether work remains. A call should take microseconds, not
    /// seconds: requests from idle workers are answered between calls.
    fn run(&mut self, units: usize, result: &mut Self::Result) -> bool;

    /// Gives away part of the work that is left (best: about half, and
    /// the largest pieces), or `None` if it cannot be split now. Only
    /// called between two calls of `run` that returned `true`.
    fn split(&mut self) -> Option<Self>;
    /// Like [`split`](Self::split), knowing where the piece goes: `to` is
    /// the thief's locale ([`here`](crate::here) when the piece becomes a
    /// task of an idle worker of this locale). Work whose data lies on
    /// particular locales gives a thief what lies on the thief's locale,
    /// so that a piece runs where its data is (owner computes; the blocked
    /// LU of `cantus-programs` gives a locale the blocks it owns). By
    /// default, [`split`](Self::split).
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    ///
    /// /// Sums items each of which lies on locale `item % locales`.
    /// #[derive(Serialize, Deserialize)]
    /// struct Owned { items: Vec<u64>, locales: u64 }
    ///
    /// impl cantus::balance::Splittable for Owned {
    ///     type Result = u64;
    ///     fn run(&mut self, units: usize, sum: &mut u64) -> bool {
    ///         for _ in 0..units {
    ///             let Some(x) = self.items.pop() else { break };
    ///             *sum += x;
    ///         }
    ///         !self.items.is_empty()
    ///     }
    ///     fn split(&mut self) -> Option<Owned> {
    ///         let half = self.items.len() / 2;
    ///         let items: Vec<u64> = self.items.drain(..half).collect();
    ///         (half > 0).then(|| Owned { items, locales: self.locales })
    ///     }
    ///     fn split_for(&mut self, to: usize) -> Option<Owned> {
    ///         // Another locale's thief gets the items that lie there
    ///         // (if some stay here).
    ///         let (theirs, mine): (Vec<u64>, Vec<u64>) =
    ///             self.items.iter().partition(|&&x| x % self.locales == to as u64);
    ///         if to == cantus::here() || theirs.is_empty() || mine.is_empty() {
    ///             return self.split();
    ///         }
    ///         self.items = mine;
    ///         Some(Owned { items: theirs, locales: self.locales })
    ///     }
    ///     fn merge(sum: &mut u64, other: u64) {
    ///         *sum += other;
    ///     }
    /// }
    /// cantus::splittable!(Owned);
    ///
    /// let work = Owned { items: (0..10_000).collect(), locales: 2 };
    /// let sum = cantus::run(|| cantus::balance::run(work)).unwrap();
    /// assert_eq!(sum.unwrap(), 49_995_000);
    /// ```
    fn split_for(&mut self, to: usize) -> Option<Self> {
        let _ = to;
        self.split()
    }

    /// Folds `other` into `into`.
    fn merge(into: &mut Self::Result, other: Self::Result);
}

/// Splits a depth-first stack of pending work (the oldest entries at the
/// bottom, the newest on top): gives away every other entry, from the
/// bottom, and keeps the rest in order; `None` if fewer than two wait.
///
/// A stack grows by a level's children at a time, so each level's
/// siblings are shared about evenly and both halves keep some of the
/// largest (oldest) entries. Giving away the bottom half instead hands
/// the thief nearly everything in a tree whose sizes fall by level (a
/// Fibonacci recursion: one entry a level), and the two sides then steal
/// it back and forth.
///
/// ```
/// let mut stack = vec![10, 9, 8, 7, 6];
/// assert_eq!(cantus::balance::split_stack(&mut stack), Some(vec![10, 8, 6]));
/// assert_eq!(stack, vec![9, 7]);
/// assert_eq!(cantus::balance::split_stack(&mut vec![1]), None);
/// ```
pub fn split_stack<T>(stack: &mut Vec<T>) -> Option<Vec<T>> {
    if stack.len() < 2 {
        return None;
    }
    let mut given = Vec::with_capacity(stack.len().div_ceil(2));
    let mut kept = Vec::with_capacity(stack.len() / 2 + 1);
    for (i, x) in stack.drain(..).enumerate() {
        if i % 2 == 0 {
            given.push(x);
        } else {
            kept.push(x);
        }
    }
    *stack = kept;
    Some(given)
}

/// A registered work type (implemented by
/// [`splittable!`](crate::splittable)): its name, and an id that is a
/// hash of the name, the same on every locale of the job.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is splittable work that is not registered",
    label = "not registered",
    note = "register it with `cantus::splittable!({Self})` at module level"
)]
pub trait RegisteredWork: Splittable {
    /// The module where the type was registered, and the type as written.
    const NAME: &'static str;
    /// FNV-1a of the name.
    const ID: u64 = crate::remote::handlers::id_of(Self::NAME);
}

/// Registers splittable work types: `cantus::splittable!(Fib, Queens);`.
/// Each must implement [`Splittable`]; use it once per type, at module
/// level (every locale runs the same binary, so every locale has the same
/// table).
#[macro_export]
macro_rules! splittable {
    ($($t:ty),+ $(,)?) => {
        $(
            impl $crate::balance::RegisteredWork for $t {
                const NAME: &'static str = concat!(module_path!(), "::", stringify!($t));
            }
            $crate::__private::inventory::submit! {
                $crate::balance::WorkType::of::<$t>()
            }
        )+
    };
}

/// A work type in the link-time table: how a locale that hears of a
/// computation of this type for the first time builds its state for it.
#[doc(hidden)]
pub struct WorkType {
    pub(crate) name: &'static str,
    pub(crate) id: u64,
    pub(crate) create:
        fn(super::computation::Setup) -> std::sync::Arc<dyn super::computation::Computation>,
}

impl WorkType {
    /// The entry of `W`.
    pub const fn of<W: RegisteredWork>() -> WorkType {
        WorkType {
            name: W::NAME,
            id: W::ID,
            create: super::computation::create::<W>,
        }
    }
}

inventory::collect!(WorkType);

/// The entry of the work type `id`, if this binary registered one.
pub(crate) fn lookup(id: u64) -> Option<&'static WorkType> {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static TABLE: OnceLock<HashMap<u64, &'static WorkType>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let mut t = HashMap::new();
            for w in inventory::iter::<WorkType> {
                if let Some(other) = t.insert(w.id, w) {
                    panic!(
                        "cantus: the work types {} and {} have the same id; rename one",
                        other.name, w.name
                    );
                }
            }
            t
        })
        .get(&id)
        .copied()
}
