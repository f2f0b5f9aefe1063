/*
 * cantus.h - the C interface of cantus: lightweight user-level tasks with
 * full/empty synchronization, usable as the tasking layer of a language
 * runtime (the interface of "The Chapel Tasking Layer Over Qthreads",
 * section 3: startup and teardown, singleton tasks, task lists, bulk
 * spawn, synchronization variables, task control and queries).
 *
 * Build and link:  cc prog.c $(pkg-config --cflags --libs cantus)
 * (after scripts/install-c.sh; see the README); a fully static program:
 *     cc prog.c $(pkg-config --cflags --libs --static cantus) -static
 * The Qthreads-compatible subset is in <qthread/qthread.h>,
 * <qthread/sinc.h>, <qthread/qloop.h>, <qthread/barrier.h> and
 * <qthread/qtimer.h>.
 *
 * This header is checked against the library by tests/c_abi.rs: every
 * function declared here is exported by libcantus with the same
 * parameter and return types, and every exported function is declared.
 *
 * Rules every function follows (each function's comment adds its own):
 *
 *  - Contexts. "A task" is code running inside a cantus task. "An outside
 *    thread" is any other thread (the main thread, a pthread, a
 *    communication progress thread); outside threads may spawn tasks and
 *    use full/empty variables, and when they wait they block as threads
 *    (spin briefly, then sleep) while the workers keep running tasks.
 *    "Before startup" means no runtime is running (before cantus_init or
 *    after cantus_finalize). Every function that needs a runtime returns
 *    CANTUS_ENORUNTIME before startup, whatever its other arguments: no
 *    tasking call is allowed outside the runtime's life (section 4.1).
 *  - Errors. Functions return CANTUS_OK (0) or a negative CANTUS_E* code;
 *    queries return a count (>= 0) or a negative code. After a failure,
 *    cantus_last_error() on the same thread explains it. Misuse that can be
 *    detected (NULL pointers, unaligned words, wrong context) is reported
 *    this way, never by crashing.
 *  - Blocking. A call that waits (read_fe, write_ef, ...) suspends only the
 *    calling task; its worker runs other tasks meanwhile. If every task and
 *    thread ends up waiting with no way out, cantus reports the deadlock on
 *    stderr and aborts (CANTUS_DEADLOCK_MS, default 1000 ms).
 *  - Undefined: using memory after it is freed or while it is being
 *    initialised or destroyed; calling tasking functions concurrently with
 *    cantus_init or cantus_finalize from another thread; task functions
 *    that leave by longjmp or a C++ exception; running off a task's stack
 *    (detected: the guard page aborts with a message naming the task).
 */
#ifndef CANTUS_H
#define CANTUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CANTUS_VERSION "0.1.0"

/* Error codes (all negative; CANTUS_OK is 0). */
#define CANTUS_OK 0
#define CANTUS_ENORUNTIME (-1) /* no runtime is running: call cantus_init first */
#define CANTUS_EALREADY (-2)   /* a runtime is already running in this process */
#define CANTUS_EINVAL (-3)     /* invalid argument (a NULL pointer, a bad value) */
#define CANTUS_EALIGN (-4)     /* full/empty address not aligned to 8 bytes */
#define CANTUS_ECONTEXT (-5)   /* not allowed from the calling context */
#define CANTUS_ECONFIG (-6)    /* invalid configuration (argument or CANTUS_* variable) */
#define CANTUS_ETHREADS (-7)   /* more threads than CANTUS_MAX_THREADS allows */
#define CANTUS_EOS (-8)        /* the operating system refused a thread or memory */
#define CANTUS_EBUSY (-9)      /* tasks or threads still wait on the variable */
#define CANTUS_ENOTSUP (-10)   /* behaviour cantus leaves out */
#define CANTUS_EPANIC (-11)    /* internal error in cantus (a bug; please report) */

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

/*
 * cantus_strerror - a static, one-line description of an error code.
 * Contexts: any, also before startup.
 * Returns:  a string that lives as long as the program; for unknown codes,
 *           "unknown cantus error code".
 */
const char *cantus_strerror(int code);

/*
 * cantus_last_error - why the calling thread's last failed cantus call
 * failed, naming the call and what to do (for example "cantus_spawn called
 * with no runtime running: call cantus_init() ... first").
 * Contexts: any, also before startup.
 * Returns:  the message, or "" if no call failed yet on this thread. Valid
 *           until the next failed call on this thread. Tasks share their
 *           worker's thread: read it right after the failed call, before
 *           anything that may block or yield.
 */
const char *cantus_last_error(void);

/* ------------------------------------------------------------------------
 * Startup and teardown
 * ------------------------------------------------------------------------ */

/* Settings for cantus_init; zero fields take the defaults. CANTUS_*
 * environment variables override these unless ignore_environment is set. */
typedef struct cantus_config {
    size_t workers;         /* worker threads; 0: CANTUS_WORKERS or the CPUs */
    size_t stack_size;      /* task stack bytes; 0: CANTUS_STACK_SIZE or 256 KiB */
    long deadlock_ms;       /* deadlock grace period; < 0: default, 0: off */
    int ignore_environment; /* non-zero: ignore CANTUS_* variables */
} cantus_config_t;

#define CANTUS_CONFIG_DEFAULT {0, 0, -1, 0}

/*
 * cantus_init - start the runtime: worker threads and their task queues.
 * One runtime runs per process at a time.
 * Contexts: an outside thread, before startup.
 * Params:   config may be NULL (all defaults).
 * Returns:  CANTUS_OK, or
 *           CANTUS_EALREADY  a runtime is already running (also from a task);
 *           CANTUS_ECONFIG   a setting or CANTUS_* variable is invalid;
 *           CANTUS_ETHREADS  workers exceed CANTUS_MAX_THREADS (checked
 *                            before any thread starts);
 *           CANTUS_EOS       a worker thread could not be created.
 * Undefined: config pointing at unreadable memory.
 */
int cantus_init(const cantus_config_t *config);

/*
 * cantus_finalize - wait for every task (detached ones included), then
 * stop the workers. cantus_init may be called again afterwards.
 * Contexts: an outside thread (any, not only the one that called
 *           cantus_init).
 * Returns:  CANTUS_OK, or
 *           CANTUS_ECONTEXT    called from a task (it would wait for itself);
 *           CANTUS_ENORUNTIME  no runtime started by cantus_init (or
 *                              qthread_initialize) is running.
 * Undefined: outside threads still using full/empty variables that tasks
 *           wait on (finalize would wait forever; the deadlock detector
 *           reports it).
 */
int cantus_finalize(void);

/*
 * cantus_is_running - whether a runtime is running.
 * Contexts: any, also before startup.
 * Returns:  1 if a runtime is running, 0 if not.
 */
int cantus_is_running(void);

/*
 * cantus_outside_activity_begin, cantus_outside_activity_end - declare that
 * the calling outside thread is busy (in I/O, or waiting for messages) and
 * may still fill a full/empty variable that tasks wait on. While any such
 * declaration is open, the deadlock detector does not fire even when every
 * worker is idle. Use it in a communication progress thread. Declarations
 * nest; each begin needs one end on the same thread.
 * Contexts: an outside thread (a task gets CANTUS_ECONTEXT).
 * Returns:  CANTUS_OK, or
 *           CANTUS_ENORUNTIME  (begin) no runtime is running;
 *           CANTUS_ECONTEXT    begin from a task, or end with no open
 *                              declaration on this thread.
 * Undefined: a thread that exits with a declaration open (the detector
 *           then never fires); ending a declaration after its runtime
 *           stopped is harmless.
 */
int cantus_outside_activity_begin(void);
int cantus_outside_activity_end(void);

/* ------------------------------------------------------------------------
 * Tasks
 * ------------------------------------------------------------------------ */

typedef void (*cantus_task_fn)(void *arg);
typedef void (*cantus_index_fn)(size_t index, void *arg);

/*
 * cantus_spawn - start fn(arg) as a detached task (Chapel's begin).
 * Spawning allocates nothing: the function and argument are stored in the
 * task itself. cantus_finalize waits for it.
 * Contexts: a task or an outside thread.
 * Returns:  CANTUS_OK, or
 *           CANTUS_EINVAL      fn is NULL;
 *           CANTUS_ENORUNTIME  no runtime is running.
 * Undefined: arg pointing at memory that is freed before the task is done
 *           with it.
 */
int cantus_spawn(cantus_task_fn fn, void *arg);

/*
 * cantus_coforall - bulk spawn: run fn(i, arg) for every i in [0, n), each
 * as its own task, and return when all have returned. One end count
 * covers the n tasks, and they are spawned lazily (a task splits its range
 * in half each time it runs), so spawning allocates nothing. The tasks may
 * block on each other.
 * Contexts: a task or an outside thread (which blocks until done).
 * Returns:  CANTUS_OK (also for n == 0), or
 *           CANTUS_EINVAL      fn is NULL;
 *           CANTUS_ENORUNTIME  no runtime is running.
 */
int cantus_coforall(size_t n, cantus_index_fn fn, void *arg);

/*
 * cantus_call - run fn(arg) as a task and wait for it to return (the way
 * to run a program's main body inside the runtime). From a task, calls
 * fn(arg) directly.
 * Contexts: a task or an outside thread (which blocks until done).
 * Returns:  CANTUS_OK, or CANTUS_EINVAL (fn is NULL), CANTUS_ENORUNTIME.
 */
int cantus_call(cantus_task_fn fn, void *arg);

/* A list of tasks built one by one, then executed together (Chapel's
 * cobegin and coforall lowering). Opaque; used by one thread at a time. */
typedef struct cantus_task_list cantus_task_list_t;

/*
 * cantus_task_list_create - a new, empty task list.
 * Contexts: any, also before startup.
 * Returns:  the list, or NULL if memory ran out.
 */
cantus_task_list_t *cantus_task_list_create(void);

/*
 * cantus_task_list_add - append the task fn(arg) to the list (it does not
 * start until cantus_task_list_execute).
 * Contexts: any, also before startup.
 * Returns:  CANTUS_OK, or CANTUS_EINVAL (list or fn is NULL).
 * Undefined: a list already destroyed; two threads using one list at once.
 */
int cantus_task_list_add(cantus_task_list_t *list, cantus_task_fn fn, void *arg);

/*
 * cantus_task_list_execute - start every task of the list concurrently
 * with one end count, wait until all have returned, and empty the list
 * (it can be filled and executed again).
 * Contexts: a task or an outside thread (which blocks until done).
 * Returns:  CANTUS_OK (also for an empty list), or
 *           CANTUS_EINVAL      list is NULL;
 *           CANTUS_ENORUNTIME  no runtime is running (the list is kept).
 * Undefined: as for cantus_task_list_add.
 */
int cantus_task_list_execute(cantus_task_list_t *list);

/*
 * cantus_task_list_size - the number of tasks added and not yet executed.
 * Contexts: any, also before startup.
 * Returns:  the count, or CANTUS_EINVAL (list is NULL).
 */
int64_t cantus_task_list_size(const cantus_task_list_t *list);

/*
 * cantus_task_list_destroy - free the list; tasks never executed are
 * dropped. NULL is ignored.
 * Contexts: any, also before startup.
 * Undefined: destroying a list twice or while another thread uses it.
 */
void cantus_task_list_destroy(cantus_task_list_t *list);

/* ------------------------------------------------------------------------
 * Full/empty synchronization
 *
 * Operation names follow Chapel and Qthreads: the first letter is the
 * state waited for (F full, E empty, X none), the second the state left.
 *   read_fe   wait until full,  read,  leave empty
 *   read_ff   wait until full,  read,  leave full
 *   read_xx   read whatever the state, leave it as it is
 *   write_ef  wait until empty, write, leave full
 *   write_ff  wait until full,  write, leave full
 *   write_xf  write whatever the state, leave full
 *   reset     write 0, leave empty
 *   is_full   1 if full, 0 if empty (may change at once)
 * A state change completes waiting operations in the order they queued:
 * filling completes the queued read_ff and write_ff up to and including
 * the first read_fe, which empties again and so admits the first waiting
 * write_ef, and so on. A woken waiter never has to try again.
 * ------------------------------------------------------------------------ */

/* cantus_sync_t: a full/empty variable holding a 64-bit value. State and
 * waiters live in the variable. All-zero bytes (CANTUS_SYNC_INITIALIZER, or
 * static storage) are an empty variable holding 0. Do not copy one while in
 * use: its identity is its address. */
typedef union cantus_sync {
    unsigned char opaque[48];
    uint64_t align_; /* 8-byte alignment */
} cantus_sync_t;

#define CANTUS_SYNC_INITIALIZER {{0}}

/*
 * cantus_sync_init - make *sync an empty variable holding 0.
 * Contexts: any, also before startup.
 * Returns:  CANTUS_OK, or CANTUS_EINVAL (sync is NULL), CANTUS_EALIGN.
 * Undefined: initialising a variable that tasks or threads are using.
 */
int cantus_sync_init(cantus_sync_t *sync);

/*
 * cantus_sync_destroy - check that the variable can be freed: nobody waits
 * on it. Frees nothing (the storage is the caller's).
 * Contexts: any, also before startup.
 * Returns:  CANTUS_OK, or CANTUS_EBUSY (tasks or threads still wait on it;
 *           freeing it now would be undefined), CANTUS_EINVAL, CANTUS_EALIGN.
 */
int cantus_sync_destroy(cantus_sync_t *sync);

/*
 * cantus_sync_read_fe, cantus_sync_read_ff, cantus_sync_read_xx - read the
 * value into *out (see the table above).
 * Contexts: a task or an outside thread.
 * Params:   out may be NULL for read_fe and read_ff (the value is dropped);
 *           read_xx needs it.
 * Returns:  CANTUS_OK, or CANTUS_EINVAL (sync NULL; out NULL for read_xx),
 *           CANTUS_EALIGN (sync not 8-byte aligned), CANTUS_ENORUNTIME.
 * Undefined: sync not pointing at a cantus_sync_t; freeing it while the
 *           call waits.
 */
int cantus_sync_read_fe(cantus_sync_t *sync, uint64_t *out);
int cantus_sync_read_ff(cantus_sync_t *sync, uint64_t *out);
int cantus_sync_read_xx(cantus_sync_t *sync, uint64_t *out);

/*
 * cantus_sync_write_ef, cantus_sync_write_ff, cantus_sync_write_xf - write
 * value (see the table above).
 * Contexts: a task or an outside thread.
 * Returns:  CANTUS_OK, or CANTUS_EINVAL, CANTUS_EALIGN, CANTUS_ENORUNTIME.
 * Undefined: as for the reads.
 */
int cantus_sync_write_ef(cantus_sync_t *sync, uint64_t value);
int cantus_sync_write_ff(cantus_sync_t *sync, uint64_t value);
int cantus_sync_write_xf(cantus_sync_t *sync, uint64_t value);

/*
 * cantus_sync_reset - write 0 and leave the variable empty (waiting
 * write_ef calls then complete in turn).
 * Contexts: a task or an outside thread.
 * Returns:  CANTUS_OK, or CANTUS_EINVAL, CANTUS_EALIGN, CANTUS_ENORUNTIME.
 */
int cantus_sync_reset(cantus_sync_t *sync);

/*
 * cantus_sync_is_full - whether the variable is full right now.
 * Contexts: a task or an outside thread.
 * Returns:  1 (full), 0 (empty), or CANTUS_EINVAL, CANTUS_EALIGN,
 *           CANTUS_ENORUNTIME.
 */
int cantus_sync_is_full(const cantus_sync_t *sync);

/*
 * Full/empty operations on any 64-bit word the caller owns.
 *
 * All 64 bits of the word are data: the full/empty state and the queue of
 * waiters live in a table inside cantus, keyed by the word's address. A
 * word the table has never seen is FULL (as in Qthreads); a word that is
 * full with nobody waiting takes no room in the table.
 *
 * Contexts: a task or an outside thread.
 * Params:   word must be 8-byte aligned. out may be NULL for read_fe and
 *           read_ff (the value is dropped); read_xx needs it.
 * Returns:  CANTUS_OK (is_full: 1 or 0), or
 *           CANTUS_EINVAL      word is NULL (or out, for read_xx);
 *           CANTUS_EALIGN      word is not 8-byte aligned;
 *           CANTUS_ENORUNTIME  no runtime is running.
 * Undefined: reading or writing the word other than through these calls
 *           while a full/empty call on it may run; freeing or reusing the
 *           memory while anyone waits on it; leaving a word empty and then
 *           reusing its memory for another word (the table still says
 *           empty: fill or write it first).
 *
 * cantus_feb_fill and cantus_feb_empty set the state without touching the
 * value (Qthreads' fill and empty).
 */
int cantus_feb_read_fe(uint64_t *word, uint64_t *out);
int cantus_feb_read_ff(const uint64_t *word, uint64_t *out);
int cantus_feb_read_xx(const uint64_t *word, uint64_t *out);
int cantus_feb_write_ef(uint64_t *word, uint64_t value);
int cantus_feb_write_ff(uint64_t *word, uint64_t value);
int cantus_feb_write_xf(uint64_t *word, uint64_t value);
int cantus_feb_reset(uint64_t *word);
int cantus_feb_fill(uint64_t *word);
int cantus_feb_empty(uint64_t *word);
int cantus_feb_is_full(const uint64_t *word);

/* ------------------------------------------------------------------------
 * Task control
 * ------------------------------------------------------------------------ */

/*
 * cantus_yield - let other tasks run, then continue. In an outside thread,
 * yields the OS thread.
 * Contexts: a task or an outside thread.
 * Returns:  CANTUS_OK, or CANTUS_ENORUNTIME.
 */
int cantus_yield(void);

/*
 * cantus_sleep_ns - sleep for ns nanoseconds. In a task only the task
 * sleeps (its worker runs other tasks); in an outside thread the thread
 * sleeps.
 * Contexts: a task or an outside thread.
 * Returns:  CANTUS_OK, or CANTUS_ENORUNTIME.
 */
int cantus_sleep_ns(uint64_t ns);

/* ------------------------------------------------------------------------
 * Queries
 *
 * Counts are summed from per-worker counters without stopping the workers,
 * so while tasks run they are approximate.
 * ------------------------------------------------------------------------ */

typedef struct cantus_counts {
    uint64_t workers;                 /* worker threads */
    uint64_t running;                 /* tasks running now */
    uint64_t queued;                  /* tasks spawned and not started */
    uint64_t blocked;                 /* tasks waiting (full/empty, lists, joins) */
    uint64_t sleeping;                /* tasks in cantus_sleep_ns */
    uint64_t blocked_outside_threads; /* outside threads waiting in cantus */
    uint64_t idle_workers;            /* workers with nothing to do */
} cantus_counts_t;

/*
 * cantus_counts - every count in one snapshot.
 * Contexts: a task or an outside thread.
 * Returns:  CANTUS_OK, or CANTUS_EINVAL (out is NULL), CANTUS_ENORUNTIME.
 */
int cantus_counts(cantus_counts_t *out);

/*
 * cantus_num_workers, cantus_num_running, cantus_num_queued,
 * cantus_num_blocked, cantus_num_idle_workers - one count each.
 * Contexts: a task or an outside thread.
 * Returns:  the count (>= 0), or CANTUS_ENORUNTIME.
 */
int64_t cantus_num_workers(void);
int64_t cantus_num_running(void);
int64_t cantus_num_queued(void);
int64_t cantus_num_blocked(void);
int64_t cantus_num_idle_workers(void);

/*
 * cantus_task_id - the calling task's id: > 0 and unique within the
 * runtime's life.
 * Contexts: a task or an outside thread.
 * Returns:  the id; 0 in an outside thread; or CANTUS_ENORUNTIME.
 */
int64_t cantus_task_id(void);

/*
 * cantus_worker_id - the index (0 .. workers-1) of the worker running the
 * calling task. A task never changes worker once started.
 * Contexts: a task; an outside thread gets CANTUS_ECONTEXT.
 * Returns:  the index, or CANTUS_ECONTEXT, CANTUS_ENORUNTIME.
 */
int64_t cantus_worker_id(void);

#ifdef __cplusplus
}
#endif

#endif /* CANTUS_H */
