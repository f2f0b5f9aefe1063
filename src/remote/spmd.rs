//! SPMD groups: the hooks by which `pgas` (a layer above) learns which
//! remote calls are SPMD bodies, and `coforall_locales`, a call on every
//! locale.

use super::*;

/// How `pgas` learns which remote calls are SPMD bodies: `pgas` uses
/// this layer, so this layer reaches it only through these hooks,
/// installed once per process (`pgas::attach`, from `runtime.rs`).
pub(crate) struct SpmdHooks {
    /// Before [`coforall_locales`] (or `pgas::spmd`) starts handler `id`
    /// on every locale: begins an SPMD group, or says why not (one runs
    /// already; no runtime).
    pub(crate) begin: fn(u64) -> Result<(), Error>,
    /// Once every body of the group `begin` began has ended: ends it, and
    /// returns the locale whose body panicked first, if one did.
    pub(crate) end: fn() -> Option<usize>,
    /// Handler `id` is about to run as a task here: whether it is this
    /// locale's body of the running group (then `leave` follows).
    pub(crate) enter: fn(u64) -> bool,
    /// The body `enter` accepted ended; `panicked`: by a panic.
    pub(crate) leave: fn(bool),
}

static SPMD_HOOKS: OnceLock<SpmdHooks> = OnceLock::new();

/// Installs the SPMD hooks (the first call wins; later ones are the same).
pub(crate) fn set_spmd_hooks(hooks: SpmdHooks) {
    let _ = SPMD_HOOKS.set(hooks);
}

/// Runs handler `id`'s body `f` as the handler task does, catching a
/// panic; the SPMD hooks learn when it starts and ends if it is an SPMD
/// body.
pub(crate) fn run_handler<T>(id: u64, f: impl FnOnce() -> T) -> std::thread::Result<T> {
    let hooks = SPMD_HOOKS.get().filter(|h| (h.enter)(id));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    if let Some(h) = hooks {
        (h.leave)(r.is_err());
    }
    r
}

/// Runs `make(l)` on every locale `l` at once and returns the results in
/// locale order; the first failure (a panic there) is returned as the
/// error once all have finished.
///
/// The calls are an SPMD group, as with [`pgas::spmd`](crate::pgas::spmd):
/// they may call collectives, and if one panics, the error returned is
/// its own (not that of a locale whose collective it left waiting). A
/// `coforall_locales` started while a group runs (from inside a body, or
/// beside it) runs plain calls, which may not call collectives.
///
/// Panics if no runtime runs.
#[track_caller]
pub fn coforall_locales<R: RegisteredCall>(
    make: impl Fn(usize) -> R,
) -> Result<Vec<R::Output>, Error> {
    if engine().is_none() {
        require_runtime("coforall_locales", 0);
    }
    let calls: Vec<R> = (0..num_locales()).map(make).collect();
    let began = SPMD_HOOKS.get().is_some_and(|h| (h.begin)(R::ID).is_ok());
    run_calls(calls, began)
}

/// Runs an SPMD group: `calls[l]` on every locale `l`; an error, and
/// nothing run, if no group could begin (`pgas::spmd`).
pub(crate) fn spmd_group<R: RegisteredCall>(calls: Vec<R>) -> Result<Vec<R::Output>, Error> {
    let hooks = SPMD_HOOKS
        .get()
        .ok_or_else(|| Error::no_runtime("pgas::spmd"))?;
    (hooks.begin)(R::ID)?;
    run_calls(calls, true)
}

/// Starts `calls[l]` on locale `l`, joins them all, and (if `group`:
/// they are an SPMD group that began) ends the group. The error returned
/// is the body's that panicked first in a group, else the first in
/// locale order.
fn run_calls<R: RegisteredCall>(calls: Vec<R>, group: bool) -> Result<Vec<R::Output>, Error> {
    /// Ends the group even if starting or joining a call panics.
    struct End(Option<&'static SpmdHooks>);
    impl Drop for End {
        fn drop(&mut self) {
            if let Some(h) = self.0 {
                (h.end)();
            }
        }
    }
    let mut end = End(if group { SPMD_HOOKS.get() } else { None });
    let handles: Vec<_> = calls
        .into_iter()
        .enumerate()
        .map(|(l, call)| on(l, call))
        .collect();
    let mut results: Vec<Result<R::Output, Error>> =
        handles.into_iter().map(RemoteHandle::join).collect();
    let first_panic = end.0.take().and_then(|h| (h.end)());
    if let Some(l) = first_panic.filter(|&l| results.get(l).is_some_and(Result::is_err)) {
        return Err(results.swap_remove(l).err().expect("checked above"));
    }
    results.into_iter().collect()
}
