//! Creating tasks from C (seed 000, section 3): singleton tasks, task
//! lists, bulk spawn with one end count, and running a function as a task
//! and waiting for it. A task is a C function pointer and its `void *`
//! argument: two words, stored in the task's inline payload, so spawning
//! allocates nothing.

use super::Code;
use super::error::{Fail, OK, boundary, record};
use super::lifecycle::require_runtime;
use crate::sched::WorkerLocal;
use std::ffi::c_void;

/// `cantus_task_fn`: the body of a task.
pub type CantusTaskFn = Option<unsafe extern "C" fn(arg: *mut c_void)>;
/// `cantus_index_fn`: the body of one task of a bulk spawn.
pub type CantusIndexFn = Option<unsafe extern "C" fn(index: usize, arg: *mut c_void)>;

/// A C argument pointer handed to a task on another thread. The C caller
/// owns what it points at and promises (per the header) that the task may
/// use it.
#[derive(Clone, Copy)]
pub(crate) struct Arg(pub(crate) *mut c_void);

// SAFETY: the pointer is only passed back to the caller's own function; the
// header makes the caller responsible for its use from another thread.
unsafe impl Send for Arg {}
// SAFETY: as above: cantus never dereferences it.
unsafe impl Sync for Arg {}

impl Arg {
    /// The pointer. (A method, so closures capture the whole `Arg`, not
    /// its non-`Send` field.)
    #[inline]
    pub(crate) fn get(self) -> *mut c_void {
        self.0
    }
}

/// cantus_spawn: starts `f(arg)` as a detached task.
///
/// # Safety
/// `f` must be safe to call with `arg` on any worker thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_spawn(f: CantusTaskFn, arg: *mut c_void) -> Code {
    boundary("cantus_spawn", || {
        let f = f.ok_or_else(|| Fail::null("cantus_spawn", "fn"))?;
        require_runtime("cantus_spawn")?;
        let arg = Arg(arg);
        // SAFETY: the caller promises f(arg) may run on a worker.
        crate::par::try_begin(move || crate::sched::body_may_go_away(|| unsafe { f(arg.get()) }))
            .map_err(|_| Fail::no_runtime("cantus_spawn"))?;
        Ok(OK)
    })
}

/// cantus_coforall: runs `f(i, arg)` for i in 0..n, each as a task, and
/// waits for all (one end count for the n tasks).
///
/// # Safety
/// `f` must be safe to call with `arg` concurrently on any worker thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_coforall(n: usize, f: CantusIndexFn, arg: *mut c_void) -> Code {
    boundary("cantus_coforall", || {
        let f = f.ok_or_else(|| Fail::null("cantus_coforall", "fn"))?;
        require_runtime("cantus_coforall")?;
        let arg = Arg(arg);
        crate::par::coforall(n, move |i| {
            // SAFETY: the caller promises the function may run concurrently
            // with its argument on any worker.
            crate::sched::body_may_go_away(|| unsafe { f(i, arg.get()) })
        });
        Ok(OK)
    })
}

/// cantus_call: runs `f(arg)` as a task and waits for it.
///
/// # Safety
/// `f` must be safe to call with `arg` on a worker thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_call(f: CantusTaskFn, arg: *mut c_void) -> Code {
    boundary("cantus_call", || {
        let f = f.ok_or_else(|| Fail::null("cantus_call", "fn"))?;
        require_runtime("cantus_call")?;
        let arg = Arg(arg);
        // SAFETY: the caller promises f(arg) may run on a worker.
        let body = move || crate::sched::body_may_go_away(|| unsafe { f(arg.get()) });
        if WorkerLocal::current().is_some_and(|l| l.in_task()) {
            body();
        } else {
            crate::par::on_worker("cantus_call", body);
        }
        Ok(OK)
    })
}

/// `cantus_task_list_t`: tasks added one by one, executed together.
pub struct CantusTaskList {
    tasks: Vec<(unsafe extern "C" fn(*mut c_void), Arg)>,
}

/// cantus_task_list_create: a new, empty task list (NULL if out of memory).
#[unsafe(no_mangle)]
pub extern "C" fn cantus_task_list_create() -> *mut CantusTaskList {
    let made =
        std::panic::catch_unwind(|| Box::into_raw(Box::new(CantusTaskList { tasks: Vec::new() })));
    made.unwrap_or_else(|_| {
        record(Fail::new(
            super::error::EOS,
            "cantus_task_list_create: out of memory",
        ));
        std::ptr::null_mut()
    })
}

/// cantus_task_list_add: appends `f(arg)` to the list.
///
/// # Safety
/// `list` is NULL or came from `cantus_task_list_create` and is not
/// destroyed; no other thread uses it during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_task_list_add(
    list: *mut CantusTaskList,
    f: CantusTaskFn,
    arg: *mut c_void,
) -> Code {
    boundary("cantus_task_list_add", || {
        // SAFETY: per the contract, list is NULL or a live, unshared list.
        let list =
            unsafe { list.as_mut() }.ok_or_else(|| Fail::null("cantus_task_list_add", "list"))?;
        let f = f.ok_or_else(|| Fail::null("cantus_task_list_add", "fn"))?;
        list.tasks.push((f, Arg(arg)));
        Ok(OK)
    })
}

/// cantus_task_list_execute: runs every task of the list concurrently,
/// waits for all, and empties the list.
///
/// # Safety
/// As for `cantus_task_list_add`; each task's function must be safe to
/// call with its argument on any worker thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_task_list_execute(list: *mut CantusTaskList) -> Code {
    boundary("cantus_task_list_execute", || {
        // SAFETY: per the contract, list is NULL or a live, unshared list.
        let list = unsafe { list.as_mut() }
            .ok_or_else(|| Fail::null("cantus_task_list_execute", "list"))?;
        require_runtime("cantus_task_list_execute")?;
        let tasks = std::mem::take(&mut list.tasks);
        let tasks = &tasks;
        crate::par::coforall(tasks.len(), |i| {
            // SAFETY: the caller promises the function may run concurrently
            // with its argument on any worker.
            crate::sched::body_may_go_away(|| unsafe { (tasks[i].0)(tasks[i].1.get()) })
        });
        Ok(OK)
    })
}

/// cantus_task_list_size: tasks in the list, or a negative error code.
///
/// # Safety
/// As for `cantus_task_list_add`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_task_list_size(list: *const CantusTaskList) -> i64 {
    boundary("cantus_task_list_size", || {
        // SAFETY: per the contract, list is NULL or a live list.
        let list =
            unsafe { list.as_ref() }.ok_or_else(|| Fail::null("cantus_task_list_size", "list"))?;
        Ok(list.tasks.len() as i64)
    })
}

/// cantus_task_list_destroy: frees the list (tasks not executed are dropped).
///
/// # Safety
/// `list` is NULL or came from `cantus_task_list_create` and is destroyed
/// once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cantus_task_list_destroy(list: *mut CantusTaskList) {
    if !list.is_null() {
        // SAFETY: per the contract, list came from Box::into_raw and is
        // freed once.
        drop(unsafe { Box::from_raw(list) });
    }
}

/// Checks an argument that must be non-null.
pub(crate) fn non_null<T>(call: &str, name: &str, p: *const T) -> Result<(), Fail> {
    if p.is_null() {
        Err(Fail::null(call, name))
    } else {
        Ok(())
    }
}
