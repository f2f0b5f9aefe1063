/*
 * qthread/qthread.h - the Qthreads-compatible subset of cantus.
 *
 * An existing Qthreads program that uses only the names declared here
 * compiles and runs against cantus unchanged:
 *     cc prog.c $(pkg-config --cflags --libs cantus)
 * Names and semantics are those of Qthreads (see its man pages); cantus's
 * own differences are listed below and at each function.
 *
 * Model. A Qthreads shepherd is a cantus worker thread, with one worker
 * each: qthread_num_shepherds() == qthread_num_workers(). Tasks ("qthreads")
 * run on pooled stacks (CANTUS_STACK_SIZE, default 256 KiB; QTHREAD_STACK_SIZE
 * is honoured, raised to cantus's 16 KiB minimum) with a guard page.
 *
 * Headers: qthread/qthread.h (this one), qthread/sinc.h, qthread/qloop.h,
 * qthread/barrier.h, qthread/qtimer.h, qthread/qutil.h,
 * qthread/cacheline.h, qthread/io.h, qthread/hash.h,
 * qthread/dictionary.h, qthread/qarray.h, qthread/allpairs.h,
 * qthread/wavefront.h, qthread/qlfqueue.h, qthread/qswsrqueue.h,
 * qthread/qdqueue.h, qthread/qpool.h, qthread/qalloc.h,
 * qthread/qt_syscalls.h; for C++ also
 * qthread/qthread.hpp (this one and qthread/syncvar.hpp),
 * qthread/syncvar.hpp and qthread/qloop.hpp; <qthread.h> includes this
 * one.
 * Like Qthreads' qthread.h, this header includes <stdbool.h>, <stdint.h>,
 * <limits.h>, <errno.h> and <string.h> (programs may rely on them).
 *
 * Left out of Qthreads 1.23's public headers (not declared here, so using
 * them fails at compile time), each for its own reason:
 *  - qt_team_critical_section: Qthreads 1.23 declares it but defines it
 *    nowhere (a program calling it does not link against Qthreads), so
 *    there are no semantics to follow; qt_team_eureka is not in Qthreads
 *    1.23 at all.
 *  - qthread_spinlocks_init / qthread_spinlocks_destroy: likewise declared
 *    by Qthreads 1.23 and defined nowhere.
 *  - qthread_retloc (the calling task's return location) and
 *    qthread_call_method (runs f and stores its result by Qthreads'
 *    internal QTHREAD_RET_IS_* flags, which its headers do not export):
 *    cantus keeps a fork's return location in its scheduler's task record,
 *    not reachable from C, and has no such flags; not done.
 *  - qthread_reset_target_shep: resets Qthreads' round-robin choice of
 *    shepherd for unaimed forks; cantus has no such target (it places
 *    unaimed tasks by work-stealing).
 *  - qt_sinc_tmpdata (qthread/sinc.h): a pointer to the calling worker's
 *    partial value inside a reducing sinc; cantus's sinc keeps one
 *    shared, locked value instead, so there is no per-worker slot to
 *    hand out.
 *  - qthread/tls.h (qthread_key_create/delete, qthread_get/setspecific):
 *    Qthreads 1.23's implementation does not work (qthread_key_create
 *    takes the uninitialised *key as the new key, prints a debug line, and
 *    writes its key table past the task-local storage it asked for), so
 *    there are no working semantics to follow; task-local storage is
 *    qthread_get_tasklocal.
 *  - qthread/spr.h (spr_*): Qthreads' multi-process layer, which needs its
 *    network layer; cantus is one process.
 *  - qthread/logging.h (qtlog, qtlogargs): Qthreads' debug-log macros,
 *    tied to its build's logging switches.
 *  - qthread/omp_defines.h (omp_*): declarations only; Qthreads 1.23
 *    defines none of them.
 *  - qthread/common.h, qthread/macros.h: Qthreads' build configuration
 *    and helper macros (no functions); cantus's headers define what they
 *    need themselves.
 *  - qt_loop_future, qt_loop_balance_future (qthread/qloop.hpp): see
 *    that header.
 *  - qt_loop_step and qt_loop_step_queue_create (qthread/qloop.h),
 *    qt_get_barrier / qt_set_barrier and qt_global_barrier*
 *    (qthread/barrier.h): for the reasons given in those headers.
 *
 * Behaviours that differ from Qthreads:
 *  - The thread that started the runtime (qthread_initialize, qthread_init
 *    or cantus_init) answers as Qthreads' main task of shepherd 0 (id 1,
 *    qthread_shep() and qthread_worker() 0, NO_SHEPHERD inside a blocking
 *    action, task-local storage, counted running by readstate). After
 *    qthread_initialize with two shepherds or more it runs shepherd 0's
 *    worker, as in Qthreads: its forks go to shepherd 0's queue and its
 *    waits (readFF, sincs, barriers, locks, qthread_yield,
 *    cantus_sleep_ns, qthread_finalize) run shepherd 0's tasks on its
 *    thread; only it may call qthread_finalize. With one shepherd, or
 *    after cantus_init, it runs beside shepherd 0's worker, and its waits
 *    block the thread. It has no task stack (qthread_bos/tos NULL) and
 *    never migrates. Forked tasks are numbered 2, 3, ... at their first
 *    qthread_id call, as in Qthreads.
 *  - qthread_finalize waits for every task to finish (Qthreads tells the
 *    shepherds to stop at their next context switch), and is not called
 *    automatically at exit: call it, or the process exits with its tasks.
 *    Called from inside a task it is ignored, with a message on stderr.
 *  - Before qthread_initialize (or after qthread_finalize) every call
 *    except qthread_initialize, qthread_finalize, qthread_syncvar_status
 *    and the queries returns QTHREAD_NOT_ALLOWED (void functions print the
 *    reason on stderr and do nothing) instead of failing an assertion.
 *  - A task spawned with QTHREAD_SPAWN_RET_SINC_VOID submits to its sinc
 *    when its worker next starts a task of another sinc or stops to wait:
 *    the worker holds the submissions of a run of the same sinc's tasks
 *    and makes them with one decrement (src/ffi/README.md, "Sinc"). Only
 *    a sinc that expects fewer tasks than were spawned into it, one of
 *    which spins without yielding until the sinc's waiter goes on, could
 *    tell.
 *  - Misuse Qthreads leaves undefined is detected where cheap: a NULL or
 *    unaligned FEB address returns QTHREAD_BADARGS; cantus_last_error()
 *    (declared in <cantus.h>) tells why a call failed.
 *
 * Errors: QTHREAD_SUCCESS, or QTHREAD_BADARGS (NULL or unaligned pointer,
 * invalid QTHREAD_* / CANTUS_* variable), QTHREAD_NOT_ALLOWED (no runtime,
 * wrong context), QTHREAD_PTHREAD_ERROR (threads could not be started),
 * QTHREAD_THIRD_PARTY_ERROR (an internal cantus error).
 */
#ifndef QTHREAD_H_CANTUS
#define QTHREAD_H_CANTUS

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
/* As Qthreads' headers do: C99's restrict for C++, so that code shared
 * with C programs (and Qthreads' own test helpers) compiles as C++. */
#ifndef restrict
#ifdef __GNUC__
#define restrict __restrict
#else
#define restrict
#endif
#endif
extern "C" {
#endif

/* This is cantus's implementation of the Qthreads interface. */
#define QTHREAD_CANTUS 1

#define QTHREAD_SUCCESS 0
#define QTHREAD_BADARGS -1
#define QTHREAD_PTHREAD_ERROR -2
#define QTHREAD_NOT_ALLOWED -3
#define QTHREAD_MALLOC_ERROR ENOMEM
#define QTHREAD_THIRD_PARTY_ERROR -4
#define QTHREAD_TIMEOUT -5
#define QTHREAD_OVERFLOW EOVERFLOW
#define QTHREAD_OPFAIL -7

typedef uint64_t aligned_t;
typedef uint32_t haligned_t;
typedef int64_t saligned_t;

#define QTHREAD_ALIGNMENT_ALIGNED_T (sizeof(aligned_t))

typedef unsigned short qthread_shepherd_id_t;
typedef unsigned short qthread_worker_id_t;

#define NO_SHEPHERD ((qthread_shepherd_id_t)-1)
#define NO_WORKER ((qthread_worker_id_t)-1)

#define QTHREAD_NULL_TASK_ID UINT_MAX
#define QTHREAD_NON_TASK_ID 0
#define QTHREAD_DEFAULT_TEAM_ID 1
#define QTHREAD_NON_TEAM_ID 0
#define QTHREAD_NULL_TEAM_ID UINT_MAX

/* A task body; its result fills the fork's aligned_t *ret. */
typedef aligned_t (*qthread_f)(void *arg);

/*
 * syncvar_t: a full/empty variable in one 64-bit word, laid out as in
 * Qthreads (little-endian bit-fields): a lock bit (unused by cantus), 3
 * state bits (0 full, 1 full with waiters, 2 empty, 3 empty with waiters)
 * and 60 bits of data. Values written are truncated to 60 bits, as in
 * Qthreads. Waiters are queued in cantus's table, keyed by address.
 */
typedef struct _syncvar_s {
    union {
        uint64_t w;
        struct {
            unsigned lock : 1;
            unsigned state : 3;
            uint64_t data : 60;
        } s;
    } u;
} syncvar_t;

#define SYNCVAR_STATIC_INITIALIZER {{0}}
#define SYNCVAR_STATIC_EMPTY_INITIALIZER {.u.s = {.lock = 0, .state = 2, .data = 0}}
#define SYNCVAR_STATIC_INITIALIZE_TO(value) {.u.s = {.lock = 0, .state = 0, .data = (value)}}
#define SYNCVAR_STATIC_EMPTY_INITIALIZE_TO(value) {.u.s = {.lock = 0, .state = 2, .data = (value)}}
#define SYNCVAR_INITIALIZER ((syncvar_t)SYNCVAR_STATIC_INITIALIZER)
#define SYNCVAR_EMPTY_INITIALIZER ((syncvar_t)SYNCVAR_STATIC_EMPTY_INITIALIZER)
#define SYNCVAR_INITIALIZE_TO(value) ((syncvar_t)SYNCVAR_STATIC_INITIALIZE_TO(value))
#define SYNCVAR_EMPTY_INITIALIZE_TO(value) ((syncvar_t)SYNCVAR_STATIC_EMPTY_INITIALIZE_TO(value))

/*
 * INT64TOINT60(x) - a signed 64-bit integer as a syncvar_t's 60-bit value
 * (its low 60 bits, two's complement); INT60TOINT64(x) - back, with bit
 * 59 as the sign. Values in [-2^59, 2^59) survive the round trip.
 */
#define INT64TOINT60(x) ((uint64_t)(x) & (uint64_t)0x0FFFFFFFFFFFFFFFULL)
#define INT60TOINT64(x)                                                        \
    ((int64_t)((((uint64_t)(x) & (uint64_t)0x0FFFFFFFFFFFFFFFULL) ^            \
                (uint64_t)0x0800000000000000ULL) -                             \
               (uint64_t)0x0800000000000000ULL))

/* ---- startup and teardown --------------------------------------------- */

/*
 * qthread_initialize - start the runtime. Workers: QTHREAD_HWPAR, else
 * QTHREAD_NUM_SHEPHERDS x QTHREAD_NUM_WORKERS_PER_SHEPHERD (QT_ prefixes
 * work too), else the CPUs; CANTUS_* variables override. Also read:
 *   QTHREAD_STACK_SIZE   task stack bytes (at least cantus's minimum)
 *   QTHREAD_SPINCOUNT    idle-loop iterations before a worker sleeps
 *   QTHREAD_AFFINITY     yes/no: pin workers to CPUs
 *   QTHREAD_INFO         yes: print the shepherds and stack size (stderr)
 * and accepted, checked, without effect: QTHREAD_GUARD_PAGES (yes/no:
 * cantus always guards task stacks, so an overflow is caught),
 * QTHREAD_STEAL_RATIO (a count: cantus steals one task at a time),
 * QTHREAD_WORKER_UNIT (pu, core, socket, package, node, numanode,
 * l1cache, l2cache, l3cache, machine: cantus runs one worker per CPU of
 * its share). Yes/no settings take yes/no, true/false, on/off, 1/0. A
 * malformed value is QTHREAD_BADARGS naming the variable.
 * Contexts: an outside thread. Calling it while a runtime runs (also one
 *           started by cantus_init) does nothing and succeeds, as in Qthreads.
 * Returns:  QTHREAD_SUCCESS, QTHREAD_BADARGS (invalid variable),
 *           QTHREAD_PTHREAD_ERROR (threads could not be started).
 */
int qthread_initialize(void);

/*
 * qthread_init - the deprecated form of qthread_initialize: nshepherds
 * workers (0: chosen as by qthread_initialize), standing for
 * QTHREAD_NUM_SHEPHERDS (QTHREAD_HWPAR and CANTUS_WORKERS still take
 * precedence). Qthreads exports QTHREAD_NUM_SHEPHERDS to the environment;
 * cantus does not change the environment.
 * Contexts, returns: as qthread_initialize.
 */
int qthread_init(qthread_shepherd_id_t nshepherds);

/*
 * qthread_finalize - wait for every task, then stop the runtime. May be
 * called several times; does nothing if no runtime runs.
 * Contexts: an outside thread; from a task it is ignored (message on stderr).
 */
void qthread_finalize(void);

/* ---- tasks -------------------------------------------------------------- */

/*
 * qthread_fork - start f(arg) as a task. If ret is not NULL it is emptied
 * now, and when f returns its result is written to *ret and *ret filled:
 * qthread_readFF(NULL, ret) waits for the task.
 * Contexts: a task or an outside thread.
 * Returns:  QTHREAD_SUCCESS, QTHREAD_BADARGS (f NULL, ret unaligned),
 *           QTHREAD_NOT_ALLOWED (no runtime).
 * Undefined: *ret freed or reused before the task filled it; arg freed
 *           while the task uses it.
 */
int qthread_fork(qthread_f f, const void *arg, aligned_t *ret);

/*
 * qthread_fork_to - as qthread_fork, on shepherd `shepherd` (taken modulo
 * the number of shepherds, as in Qthreads; NO_SHEPHERD: anywhere). The
 * task waits in that shepherd's own queue, which no other shepherd steals
 * from, and runs there; a disabled shepherd's task goes to the others.
 * Contexts, returns, undefined: as qthread_fork.
 */
int qthread_fork_to(qthread_f f, const void *arg, aligned_t *ret,
                    qthread_shepherd_id_t shepherd);

/*
 * qthread_fork_syncvar - as qthread_fork, with the result in a syncvar_t
 * (emptied now; written, truncated to 60 bits, and filled when f returns:
 * qthread_syncvar_readFF(NULL, ret) waits for the task).
 * Contexts, returns, undefined: as qthread_fork (ret must be aligned).
 */
int qthread_fork_syncvar(qthread_f f, const void *arg, syncvar_t *ret);

/*
 * qthread_fork_copyargs - as qthread_fork, but the arg_size bytes at arg
 * are copied (at the fork, into memory aligned for any type, owned by the
 * task and freed when it returns) and f gets a pointer to the copy, so arg
 * may be reused at once. arg_size 0: arg is passed as is.
 * Returns:  as qthread_fork; QTHREAD_BADARGS also for arg NULL with
 *           arg_size > 0.
 * Cost:     the copy is one allocation per task (qthread_fork has none).
 */
int qthread_fork_copyargs(qthread_f f, const void *arg, size_t arg_size, aligned_t *ret);

/* qthread_fork_copyargs_to - qthread_fork_copyargs preferring shepherd shep
 * (as for qthread_fork_to). */
int qthread_fork_copyargs_to(qthread_f f, const void *arg, size_t arg_size, aligned_t *ret,
                             qthread_shepherd_id_t shep);

/* qthread_fork_syncvar_copyargs - qthread_fork_copyargs with a syncvar_t
 * result (see qthread_fork_syncvar). */
int qthread_fork_syncvar_copyargs(qthread_f f, const void *arg, size_t arg_size,
                                  syncvar_t *ret);

/* qthread_fork_net - qthread_fork with QTHREAD_SPAWN_NETWORK, which
 * changes nothing (as in Qthreads 1.23: see qthread_spawn). */
int qthread_fork_net(qthread_f f, const void *arg, aligned_t *ret);

/* qthread_fork_syncvar_to - qthread_fork_syncvar on shepherd shepherd (as
 * for qthread_fork_to: taken modulo the shepherd count). */
int qthread_fork_syncvar_to(qthread_f f, const void *arg, syncvar_t *ret,
                            qthread_shepherd_id_t shepherd);

/* qthread_fork_syncvar_copyargs_simple - qthread_fork_syncvar_copyargs
 * with QTHREAD_SPAWN_SIMPLE (an ordinary task on cantus, see
 * qthread_spawn). */
int qthread_fork_syncvar_copyargs_simple(qthread_f f, const void *arg, size_t arg_size,
                                         syncvar_t *ret);

/* qthread_fork_syncvar_copyargs_to - qthread_fork_syncvar_copyargs on
 * shepherd p, as qthread_fork_to (a macro over qthread_spawn, as in
 * Qthreads). */
#define qthread_fork_syncvar_copyargs_to(f, a, z, r, p) \
    qthread_spawn((f), (a), (z), (r), 0, NULL, (p), QTHREAD_SPAWN_RET_SYNCVAR_T)

/* qthread_spawn feature flags (Qthreads' values). */
#define QTHREAD_SPAWN_PARENT (1 << 0)         /* accepted; no effect         */
#define QTHREAD_SPAWN_SIMPLE (1 << 1)         /* accepted; tasks may block   */
#define QTHREAD_SPAWN_NEW_TEAM (1 << 2)       /* the task leads a new team   */
#define QTHREAD_SPAWN_NEW_SUBTEAM (1 << 3)    /* ... a subteam of the caller's */
#define QTHREAD_SPAWN_RET_SYNCVAR_T (1 << 4)  /* ret is a syncvar_t          */
#define QTHREAD_SPAWN_RET_SINC (1 << 5)       /* ret is a sinc; submit result */
#define QTHREAD_SPAWN_RET_SINC_VOID (1 << 6)  /* ret is a sinc; submit NULL  */
#define QTHREAD_SPAWN_PC_SYNCVAR_T (1 << 7)   /* preconds are syncvar_t *    */
#define QTHREAD_SPAWN_LOCAL_PRIORITY (1 << 9) /* accepted (a hint)           */
#define QTHREAD_SPAWN_NETWORK (1 << 10)       /* accepted; no effect         */

/*
 * qthread_spawn - the general fork; every qthread_fork* is a case of it.
 *  - arg, arg_size: arg_size 0 passes arg as is; otherwise f gets a copy
 *    of the arg_size bytes at arg (as qthread_fork_copyargs).
 *  - ret: NULL, or where the result goes, by feature_flag: an aligned_t
 *    (default; emptied now, written and filled when f returns), a
 *    syncvar_t (QTHREAD_SPAWN_RET_SYNCVAR_T; likewise), or a qt_sinc_t
 *    (QTHREAD_SPAWN_RET_SINC: qt_sinc_submit(ret, &result), so the sinc's
 *    values must be at most sizeof(aligned_t) bytes;
 *    QTHREAD_SPAWN_RET_SINC_VOID: qt_sinc_submit(ret, NULL)). The sinc
 *    must expect the submission (qt_sinc_expect).
 *  - npreconds, preconds: as in Qthreads, preconds is an array from
 *    malloc of npreconds + 1 pointers, preconds[0] holding npreconds (as
 *    a pointer-sized integer) and preconds[1..npreconds] the addresses of
 *    aligned_t words (syncvar_t with QTHREAD_SPAWN_PC_SYNCVAR_T). f runs
 *    only after each of them has been full (each is waited for with a
 *    readFF, in order; the value is not consumed). qthread_spawn takes the
 *    array over and frees it with free() before it returns, on success
 *    and on error - except when preconds[0] != npreconds (QTHREAD_BADARGS,
 *    array not touched further). With npreconds 0, preconds is ignored.
 *    cantus starts such a task at once and it waits for its preconditions
 *    as a suspended task (holding a stack); Qthreads keeps it unstarted.
 *  - target_shep: as qthread_fork_to (NO_SHEPHERD: anywhere).
 *  - feature_flag: 0 or the flags above. QTHREAD_SPAWN_SIMPLE is accepted
 *    (the task runs as an ordinary one, which may block);
 *    QTHREAD_SPAWN_LOCAL_PRIORITY is accepted as a hint;
 *    QTHREAD_SPAWN_NEW_TEAM / NEW_SUBTEAM make the task a new team's
 *    leader (see "teams" below; not both). QTHREAD_SPAWN_PARENT and
 *    QTHREAD_SPAWN_NETWORK are accepted and change nothing, as in
 *    Qthreads 1.23 (which never reads the first, and marks the task with
 *    the second without ever reading the mark). Unknown bits are refused.
 * Contexts: a task or an outside thread.
 * Returns:  QTHREAD_SUCCESS, QTHREAD_BADARGS (f NULL, arg NULL with
 *           arg_size > 0, ret or a precondition NULL/unaligned, ret not a
 *           live sinc, two QTHREAD_SPAWN_RET_* flags, bad preconds array),
 *           QTHREAD_NOT_ALLOWED (no runtime, an unknown flag bit).
 * Undefined: as qthread_fork, for ret and the precondition words too.
 */
int qthread_spawn(qthread_f f, const void *arg, size_t arg_size, void *ret,
                  size_t npreconds, void *preconds, qthread_shepherd_id_t target_shep,
                  unsigned int feature_flag);

/* (internal) qthread_fork_precond*: builds the precondition array. */
static inline int qthread_fork_precond_v_(qthread_f f, const void *arg, size_t arg_size,
                                          void *ret, qthread_shepherd_id_t shepherd,
                                          unsigned int flags, int npreconds, va_list ap)
{
    size_t n = npreconds < 0 ? (size_t)(-(long)npreconds) : (size_t)npreconds;
    aligned_t **pre = NULL;
    if (n > 0) {
        pre = (aligned_t **)malloc((n + 1) * sizeof(aligned_t *));
        if (pre == NULL)
            return QTHREAD_MALLOC_ERROR;
        pre[0] = (aligned_t *)(uintptr_t)n;
        if (npreconds < 0) {
            aligned_t **list = va_arg(ap, aligned_t **);
            if (list == NULL) {
                free(pre);
                return QTHREAD_BADARGS;
            }
            memcpy(pre + 1, list, n * sizeof(aligned_t *));
        } else {
            for (size_t i = 1; i <= n; i++)
                pre[i] = va_arg(ap, aligned_t *);
        }
    }
    return qthread_spawn(f, arg, arg_size, ret, n, pre, shepherd, flags);
}

/*
 * qthread_fork_precond - as qthread_fork, but f runs only after each of
 * the npreconds aligned_t words given after npreconds has been full (see
 * qthread_spawn). As in Qthreads, a negative npreconds means one argument
 * follows: an array of -npreconds aligned_t pointers.
 * qthread_fork_precond_to - the same, aimed at a shepherd.
 * qthread_fork_precond_simple - qthread_fork_precond with
 * QTHREAD_SPAWN_SIMPLE (an ordinary task on cantus, see qthread_spawn).
 * (Inline functions here, building the array and calling qthread_spawn.)
 * Returns:  as qthread_spawn; QTHREAD_MALLOC_ERROR if the array cannot be
 *           allocated.
 */
static inline int qthread_fork_precond(qthread_f f, const void *arg, aligned_t *ret,
                                       int npreconds, ...)
{
    va_list ap;
    va_start(ap, npreconds);
    int rc = qthread_fork_precond_v_(f, arg, 0, ret, NO_SHEPHERD, 0, npreconds, ap);
    va_end(ap);
    return rc;
}

static inline int qthread_fork_precond_simple(qthread_f f, const void *arg, aligned_t *ret,
                                              int npreconds, ...)
{
    va_list ap;
    va_start(ap, npreconds);
    int rc = qthread_fork_precond_v_(f, arg, 0, ret, NO_SHEPHERD, QTHREAD_SPAWN_SIMPLE, npreconds,
                                     ap);
    va_end(ap);
    return rc;
}

static inline int qthread_fork_precond_to(qthread_f f, const void *arg, aligned_t *ret,
                                          qthread_shepherd_id_t shepherd, int npreconds, ...)
{
    va_list ap;
    va_start(ap, npreconds);
    int rc = qthread_fork_precond_v_(f, arg, 0, ret, shepherd, 0, npreconds, ap);
    va_end(ap);
    return rc;
}

/*
 * qthread_fork_copyargs_precond - qthread_fork_syncvar_copyargs whose f
 * runs only after each of the npreconds aligned_t words given after
 * npreconds has been full (a negative npreconds: one argument follows, an
 * array of -npreconds aligned_t pointers), as in Qthreads. (Inline,
 * building the array and calling qthread_spawn.)
 * Returns:  as qthread_spawn; QTHREAD_MALLOC_ERROR if the array cannot be
 *           allocated.
 */
static inline int qthread_fork_copyargs_precond(qthread_f f, const void *arg, size_t arg_size,
                                                syncvar_t *ret, int npreconds, ...)
{
    va_list ap;
    va_start(ap, npreconds);
    int rc = qthread_fork_precond_v_(f, arg, arg_size, ret, NO_SHEPHERD,
                                     QTHREAD_SPAWN_RET_SYNCVAR_T, npreconds, ap);
    va_end(ap);
    return rc;
}

/*
 * qthread_yield - let other tasks run. Does nothing outside tasks or
 * before qthread_initialize, as in Qthreads.
 */
void qthread_yield_(int kind);
#define qthread_yield() qthread_yield_(0)
#define qthread_yield_near() qthread_yield_(1)

/*
 * qthread_flushsc - flush the caller's spawn cache. Qthreads may hold a
 * worker's new tasks in a cache until it flushes; cantus queues every
 * task at its fork, so there is never anything to flush: it returns at
 * once, in any context.
 */
void qthread_flushsc(void);

/* ---- queries ------------------------------------------------------------ */

/*
 * qthread_id - the calling task's id. As in Qthreads, a task made by
 * qthread_fork* / qthread_spawn is numbered at its first qthread_id call:
 * 2, 3, ... in the order of those calls (a task that never asks takes no
 * number; numbering starts again at 2 with each qthread_initialize, and
 * after 2^31 - 2 numbers); other tasks (qt_loop bodies, cantus_spawn,
 * Rust tasks) have ids from 2^31 to UINT_MAX-1, never a fork's while
 * fewer than 2^31 forked tasks live. 1 in the thread that started the
 * runtime (Qthreads' main task). QTHREAD_NON_TASK_ID (0) in other threads
 * and before qthread_initialize.
 */
unsigned qthread_id(void);

/* qthread_shep - the calling task's shepherd (its worker), NO_SHEPHERD
 * outside tasks. A started task stays on its shepherd. */
qthread_shepherd_id_t qthread_shep(void);

/* qthread_worker - the calling task's worker; each shepherd has one, so
 * it equals qthread_shep(). If shep is not NULL, *shep = qthread_shep().
 * NO_WORKER (and NO_SHEPHERD) outside tasks. */
qthread_worker_id_t qthread_worker(qthread_shepherd_id_t *shep);

/* qthread_worker_unique - the calling task's worker numbered across all
 * shepherds, from 1 as in Qthreads (one worker per shepherd here, so
 * qthread_shep() + 1). qthread_worker_local - its number within its
 * shepherd (always 0 here). Both set *shep = qthread_shep() if shep is not
 * NULL; outside tasks they return NO_WORKER and leave *shep alone. */
qthread_worker_id_t qthread_worker_unique(qthread_shepherd_id_t *shep);
qthread_worker_id_t qthread_worker_local(qthread_shepherd_id_t *shep);

/* qthread_num_shepherds - the shepherds scheduling work (as in Qthreads:
 * those not disabled by qthread_disable_shepherd); qthread_num_workers -
 * all the worker threads. 0 before qthread_initialize. */
qthread_shepherd_id_t qthread_num_shepherds(void);
qthread_worker_id_t qthread_num_workers(void);
/* qthread_num_workers_local - the workers of shepherd shep: 1 (each
 * shepherd has one; as in Qthreads, shep is not checked); 0 before
 * qthread_initialize. */
qthread_worker_id_t qthread_num_workers_local(qthread_shepherd_id_t shep);

/* qthread_readstate - the runtime's state, by selector (the selectors
 * and their order are Qthreads'). On cantus:
 *   STACK_SIZE             a task's stack size in bytes
 *   RUNTIME_DATA_SIZE      what the runtime keeps per task besides its
 *                          stack (the guard page and the queued record)
 *   BUSYNESS               tasks waiting on the calling task's worker,
 *                          plus 1; (size_t)-1 outside a task
 *   NODE_BUSYNESS          tasks waiting anywhere plus tasks running
 *   TOTAL_SHEPHERDS, TOTAL_WORKERS
 *                          the number of workers; 0 without a runtime
 *   ACTIVE_SHEPHERDS, ACTIVE_WORKERS
 *                          those not disabled (qthread_disable_shepherd);
 *                          0 without a runtime
 *   WORKER_OCCUPATION      workers running a task now
 *   CURRENT_SHEPHERD, CURRENT_UNIQUE_WORKER
 *                          the calling task's worker, NO_SHEPHERD outside
 *   CURRENT_WORKER         0 in a task (one worker per shepherd),
 *                          NO_WORKER outside
 *   CURRENT_TEAM, PARENT_TEAM
 *                          qt_team_id(), qt_team_parent_id()
 * Any other value: (size_t)-1, as Qthreads. */
enum introspective_state {
    STACK_SIZE,
    RUNTIME_DATA_SIZE,
    BUSYNESS,
    NODE_BUSYNESS,
    ACTIVE_SHEPHERDS,
    TOTAL_SHEPHERDS,
    ACTIVE_WORKERS,
    TOTAL_WORKERS,
    WORKER_OCCUPATION,
    CURRENT_SHEPHERD,
    CURRENT_WORKER,
    CURRENT_UNIQUE_WORKER,
    CURRENT_TEAM,
    PARENT_TEAM
};
size_t qthread_readstate(enum introspective_state type);

/* qthread_migrate_to - moves the calling task to `shepherd`, where it goes
 * on (it returns there). A task made by qthread_fork* / qthread_spawn
 * moves; the main task does not (as in Qthreads), nor do tasks of other
 * calls (qt_loop bodies, cantus_spawn: cantus tasks never move once
 * started). The task's own shepherd, NO_SHEPHERD or a disabled shepherd:
 * it stays where it is. As in Qthreads, the task continues on another
 * thread: C code must not keep a thread-local's address (a __thread
 * variable's, errno's) across the call.
 * Returns:  QTHREAD_SUCCESS; QTHREAD_NOT_ALLOWED outside such a task (with
 *           a message); QTHREAD_BADARGS for no such shepherd. */
int qthread_migrate_to(qthread_shepherd_id_t shepherd);

/* ---- shepherd control ---------------------------------------------------- */

/*
 * qthread_disable_shepherd - shepherd shep stops taking new work: tasks
 * queued on it (and forked there later) go to the enabled shepherds, and
 * it runs only the tasks it already started (cantus tasks never move once
 * started), as they wake. qthread_num_shepherds() and readstate(ACTIVE_*)
 * count it no more. Shepherd 0 cannot be disabled (as in Qthreads, so one
 * always runs). Disabling a disabled shepherd succeeds.
 * qthread_enable_shepherd - lets it take work again (prints the reason
 * on stderr for no such shepherd or no runtime).
 * Returns:  QTHREAD_SUCCESS, QTHREAD_BADARGS (no such shepherd),
 *           QTHREAD_NOT_ALLOWED (shepherd 0, no runtime).
 */
int qthread_disable_shepherd(qthread_shepherd_id_t shep);
void qthread_enable_shepherd(qthread_shepherd_id_t shep);

/* qthread_disable_worker / qthread_enable_worker - the same for worker
 * worker: Qthreads numbers it as worker worker / shepherds of shepherd
 * worker % shepherds, so with one worker per shepherd, worker w is
 * shepherd w's (w past the last shepherd: QTHREAD_BADARGS / a message). */
int qthread_disable_worker(qthread_worker_id_t worker);
void qthread_enable_worker(qthread_worker_id_t worker);

/*
 * qthread_shep_ok - whether the caller's shepherd takes work: 1 enabled,
 * 0 disabled; QTHREAD_PTHREAD_ERROR outside shepherds (as in Qthreads).
 * qthread_shep_next / qthread_shep_prev - step *shep to the next /
 * previous shepherd, wrapping around among all of them (disabled ones
 * included, as in Qthreads); the _local forms are the same (one process).
 * A NULL shep, a *shep that is no shepherd, or no runtime is reported on
 * stderr and in cantus_last_error(), *shep untouched.
 * qthread_distance - 0 for two shepherds (cantus knows no distances
 * between its workers; Qthreads also answers 0 without topology
 * information), QTHREAD_BADARGS for no such shepherd.
 * qthread_sorted_sheps, qthread_sorted_sheps_remote - the shepherds by
 * distance: NULL, Qthreads' answer for "all equidistant".
 */
int qthread_shep_ok(void);
void qthread_shep_next(qthread_shepherd_id_t *shep);
void qthread_shep_prev(qthread_shepherd_id_t *shep);
void qthread_shep_next_local(qthread_shepherd_id_t *shep);
void qthread_shep_prev_local(qthread_shepherd_id_t *shep);
int qthread_distance(qthread_shepherd_id_t src, qthread_shepherd_id_t dest);
const qthread_shepherd_id_t *qthread_sorted_sheps(void);
const qthread_shepherd_id_t *qthread_sorted_sheps_remote(qthread_shepherd_id_t src);

/* ---- teams ------------------------------------------------------------------
 *
 * Every task is in a team: the default team (id 1, parent 0), or the one
 * it was forked into with QTHREAD_SPAWN_NEW_TEAM (a new team, parent 0)
 * or QTHREAD_SPAWN_NEW_SUBTEAM (a new team whose parent is the forking
 * task's team). A task forked by any qthread_fork* / qthread_spawn joins
 * its forker's team. A new team's first task is its leader; as in
 * Qthreads, the leader's result is delivered (its ret filled) only when
 * every task of the team has finished, and every subteam's leader has
 * delivered: waiting for a leader waits for its whole team. Tasks of
 * qt_loop*, qt_sinc and cantus_* calls are in the default team.
 * qt_team_id - the calling task's team id (1 also in the thread that
 * started the runtime; 0, no team, in other threads).
 * qt_team_parent_id - its team's parent id (0 for the default team and
 * for QTHREAD_SPAWN_NEW_TEAM teams).
 * Team ids are 2 and up, distinct among live teams.
 */
unsigned int qt_team_id(void);
unsigned int qt_team_parent_id(void);

#define qthread_fork_new_team(f, a, r)                                         \
    qthread_spawn((f), (a), 0, (r), 0, NULL, NO_SHEPHERD, QTHREAD_SPAWN_NEW_TEAM)
#define qthread_fork_new_subteam(f, a, r)                                      \
    qthread_spawn((f), (a), 0, (r), 0, NULL, NO_SHEPHERD, QTHREAD_SPAWN_NEW_SUBTEAM)
#define qthread_fork_new_team_to(f, a, r, p)                                   \
    qthread_spawn((f), (a), 0, (r), 0, NULL, (p), QTHREAD_SPAWN_NEW_TEAM)
#define qthread_fork_syncvar_new_team(f, a, r)                                 \
    qthread_spawn((f), (a), 0, (r), 0, NULL, NO_SHEPHERD,                     \
                  QTHREAD_SPAWN_NEW_TEAM | QTHREAD_SPAWN_RET_SYNCVAR_T)
#define qthread_fork_syncvar_new_subteam(f, a, r)                              \
    qthread_spawn((f), (a), 0, (r), 0, NULL, NO_SHEPHERD,                     \
                  QTHREAD_SPAWN_NEW_SUBTEAM | QTHREAD_SPAWN_RET_SYNCVAR_T)
#define qthread_fork_copyargs_new_team(f, a, z, r)                             \
    qthread_spawn((f), (a), (z), (r), 0, NULL, NO_SHEPHERD, QTHREAD_SPAWN_NEW_TEAM)
#define qthread_fork_copyargs_new_subteam(f, a, z, r)                          \
    qthread_spawn((f), (a), (z), (r), 0, NULL, NO_SHEPHERD, QTHREAD_SPAWN_NEW_SUBTEAM)

/* ---- queues of waiting tasks ---------------------------------------------
 *
 * qthread_queue_create - a queue that tasks join to wait until another
 * task releases them. flags: any of the QTHREAD_QUEUE_* below (cantus's
 * queues are all synchronized and count their waiters, whatever the
 * flags); QTHREAD_QUEUE_CAPPED admits at most `length` waiters (length is
 * ignored otherwise). Returns NULL for unknown flags or a cap of 0.
 * qthread_queue_join - wait in q until released (a task suspends, an
 *   outside thread blocks); waiters are released oldest first. Returns
 *   QTHREAD_SUCCESS once released, QTHREAD_OPFAIL at once if a capped
 *   queue is full (Qthreads drops such a joiner).
 * qthread_queue_length - how many wait now (Qthreads counts only for
 *   MULTI_JOIN_LENGTH and CAPPED queues and says 0 for the others).
 * qthread_queue_release_one - release the oldest waiter; QTHREAD_OPFAIL
 *   if none waits (undefined in Qthreads).
 * qthread_queue_release_all - release every waiter (none is fine).
 * qthread_queue_destroy - free q; QTHREAD_NOT_ALLOWED (q kept) while tasks
 *   wait in it.
 * Returns:  QTHREAD_SUCCESS, or as above; QTHREAD_BADARGS for a NULL q,
 *           QTHREAD_NOT_ALLOWED for a join without a runtime.
 * Undefined: a handle used after qthread_queue_destroy succeeded.
 */
struct qthread_queue_s;
typedef struct qthread_queue_s *qthread_queue_t;

#define QTHREAD_QUEUE_NO_SYNCH (1 << 0)
#define QTHREAD_QUEUE_MULTI_JOIN (1 << 1)
#define QTHREAD_QUEUE_MULTI_JOIN_LENGTH (1 << 2)
#define QTHREAD_QUEUE_CAPPED (1 << 3)

qthread_queue_t qthread_queue_create(uint8_t flags, aligned_t length);
int qthread_queue_join(qthread_queue_t q);
aligned_t qthread_queue_length(qthread_queue_t q);
int qthread_queue_release_one(qthread_queue_t q);
int qthread_queue_release_all(qthread_queue_t q);
int qthread_queue_destroy(qthread_queue_t q);

/* ---- task-local storage and the task's stack ----------------------------- */

/*
 * qthread_get_tasklocal - the calling task's task-local storage: at least
 * size bytes, and at least QTHREAD_TASKLOCAL_SIZE (QT_ also; default 64,
 * raised to a pointer's size, as in Qthreads), aligned for any type,
 * zeroed when the task first asks, freed when the task ends. A request
 * larger than the storage so far moves it (contents kept, new bytes
 * zeroed): pointers from earlier calls are then stale, as in Qthreads.
 * Tasks run inline by a waiting join share their runner's storage.
 * Returns:  the storage; NULL outside a task (the thread that started
 *           the runtime is not a task on cantus), with cantus_last_error().
 * Cost:     one allocation at a task's first call; none for tasks that
 *           never call it.
 * qthread_size_tasklocal - the bytes the storage has (without growing
 * it): the default size until the task asks for more; 0 outside a task.
 */
void *qthread_get_tasklocal(unsigned int size);
unsigned qthread_size_tasklocal(void);

/*
 * qthread_bos, qthread_tos - the calling task's stack, named as in
 * Qthreads: tos ("top of stack", Qthreads' stack pointer) is its lowest
 * usable address (the guard page lies just below it; the stack grows
 * down towards it), bos ("bottom of stack") one past its highest, where
 * it starts; so bos - tos is the stack size (readstate(STACK_SIZE); the
 * larger root stack for a task that cantus_run or a join from an outside
 * thread runs). qthread_stackleft - the bytes between the caller's frame
 * and tos: what the task may still use before it overflows (an overflow
 * hits the guard page and stops the program with a message).
 * Outside a task (and in the main task, which runs on its thread's own
 * stack): NULL, NULL and 0.
 */
size_t qthread_stackleft(void);
void *qthread_bos(void);
void *qthread_tos(void);

/* ---- full/empty bits on aligned_t -----------------------------------------
 *
 * Any 8-byte-aligned aligned_t may be used; its full/empty state lives in
 * cantus's table, keyed by address, and is FULL until changed. A read's
 * dest may be NULL (the value is dropped) or equal to src (nothing is
 * copied).
 *   readFE   wait until full,  copy *src to *dest, empty src
 *   readFF   wait until full,  copy *src to *dest
 *   readXX   copy whatever the state
 *   writeEF  wait until empty, copy *src (or src) to *dest, fill dest
 *   writeFF  wait until full,  copy, leave full
 *   writeF   copy and fill, without waiting
 *   fill / empty / purge: set the state (purge also writes 0), no waiting
 * A state change completes waiting operations in queue order, handing the
 * value over directly (a filled word serves all waiting readFF/writeFF up
 * to the first readFE, which empties it and admits one writeEF, ...).
 * Contexts: a task or an outside thread (which blocks as a thread).
 * Returns:  QTHREAD_SUCCESS, QTHREAD_BADARGS (NULL or unaligned address,
 *           NULL src), QTHREAD_NOT_ALLOWED (no runtime).
 * Undefined: accessing the word other than through these calls while one
 *           of them may run on it; freeing or reusing its memory while
 *           anyone waits, or while it is empty (fill it first).
 */
int qthread_readFE(aligned_t *dest, const aligned_t *src);
int qthread_readFF(aligned_t *dest, const aligned_t *src);
int qthread_readXX(aligned_t *dest, const aligned_t *src);
int qthread_writeEF(aligned_t *dest, const aligned_t *src);
int qthread_writeEF_const(aligned_t *dest, aligned_t src);
int qthread_writeFF(aligned_t *dest, const aligned_t *src);
int qthread_writeFF_const(aligned_t *dest, aligned_t src);
int qthread_writeF(aligned_t *dest, const aligned_t *src);
int qthread_writeF_const(aligned_t *dest, aligned_t src);
int qthread_fill(const aligned_t *dest);
int qthread_empty(const aligned_t *dest);
int qthread_purge(aligned_t *dest);
/* purge_to: write *src (or src) to dest and empty it, in one step (a FEB
 * operation sees both or neither); like any emptying, admits a writeEF. */
int qthread_purge_to(aligned_t *dest, const aligned_t *src);
int qthread_purge_to_const(aligned_t *dest, aligned_t src);

/*
 * qthread_feb_status - 1 if addr is full, 0 if empty, or a negative error
 * (QTHREAD_BADARGS, QTHREAD_NOT_ALLOWED): test it with == 1.
 */
int qthread_feb_status(const aligned_t *addr);

/* ---- full/empty syncvar_t ------------------------------------------------
 * The same operations on syncvar_t (60-bit values, state in the word).
 * Contexts, returns and undefined behaviour as for aligned_t.
 * qthread_syncvar_status reads the word's state bits: 1 full, 0 empty,
 * QTHREAD_BADARGS for a NULL or unaligned pointer; it needs no runtime.
 */
int qthread_syncvar_readFE(uint64_t *dest, syncvar_t *src);
int qthread_syncvar_readFF(uint64_t *dest, syncvar_t *src);
int qthread_syncvar_writeEF(syncvar_t *dest, const uint64_t *src);
int qthread_syncvar_writeEF_const(syncvar_t *dest, uint64_t src);
int qthread_syncvar_writeF(syncvar_t *dest, const uint64_t *src);
int qthread_syncvar_writeF_const(syncvar_t *dest, uint64_t src);
int qthread_syncvar_fill(syncvar_t *dest);
int qthread_syncvar_empty(syncvar_t *dest);
int qthread_syncvar_status(syncvar_t *v);

/*
 * qthread_syncvar_incrF - add inc to the syncvar's value (modulo 2^60)
 * atomically, without waiting, and return the new value. As in Qthreads,
 * the state stays as it was, except that an empty syncvar on which
 * readers wait is filled (they complete, seeing the new value).
 * Contexts: a task or an outside thread.
 * Returns:  the new value; on error (a NULL or unaligned operand, no
 *           runtime) (uint64_t) of the negative error code, which no
 *           60-bit value equals.
 */
uint64_t qthread_syncvar_incrF(syncvar_t *operand, uint64_t inc);

/* ---- locks on addresses -------------------------------------------------
 *
 * qthread_lock - take the lock of address a, waiting (a task suspends, an
 * outside thread blocks) while another holder has it; waiters get it in
 * FIFO order, handed over by qthread_unlock. qthread_unlock - release it;
 * releasing an unlocked address succeeds (as in Qthreads). The lock is
 * not reentrant and not owned: any task or thread may release it.
 * The address is only a key: the word is not read or written, needs no
 * alignment, and the lock is separate from its full/empty state (recent
 * Qthreads implement these as readFE/fill on the word itself, so there a
 * locked word also reads as empty).
 * Contexts: a task or an outside thread.
 * qthread_trylock - take the lock if nobody holds it, else return
 * QTHREAD_OPFAIL at once.
 * qthread_lock_init - declare the lock of address a recursive (or not,
 * is_recursive false): a recursive lock taken again by its holder only
 * counts, and the holder's last qthread_unlock releases it; another
 * task's qthread_unlock of it is QTHREAD_OPFAIL. The holder is the task
 * (an outside thread: the thread), where Qthreads takes the worker.
 * QTHREAD_OPFAIL if a was declared already. qthread_lock_destroy - forget
 * the declaration (QTHREAD_OPFAIL if there was none); the address is a
 * plain lock again. Declare before locking, destroy after the last use.
 * Returns:  QTHREAD_SUCCESS, QTHREAD_BADARGS (a NULL), QTHREAD_NOT_ALLOWED
 *           (no runtime), QTHREAD_OPFAIL (above).
 * Undefined: freeing or reusing the memory of a locked address for
 *           another lock.
 */
int qthread_lock(const aligned_t *a);
int qthread_unlock(const aligned_t *a);
int qthread_trylock(const aligned_t *a);
int qthread_lock_init(const aligned_t *a, bool is_recursive);
int qthread_lock_destroy(aligned_t *a);

/*
 * qthread_spinlock_t - a lock the caller embeds, in Qthreads' layout (so C
 * code that embeds it, or initialises it statically with
 * QTHREAD_MUTEX_INITIALIZER / QTHREAD_RECURSIVE_MUTEX_INITIALIZER,
 * compiles unchanged); its fields are cantus's: lock.u is 0 free, 1 held;
 * state.s is QTHREAD_SPINLOCK_IS_NOT_RECURSIVE for a plain lock, and for a
 * recursive one QTHREAD_SPINLOCK_IS_RECURSIVE while free, the holder
 * while held (state.count its depth). Touch it only through the calls.
 * qthread_spinlock_init - make *a a free lock (recursive or not).
 * qthread_spinlock_destroy - nothing to release; QTHREAD_SUCCESS.
 * qthread_spinlock_lock - wait for the lock and take it; a recursive
 *   lock's holder only counts one more. The holder is the calling task (an
 *   outside thread: the thread), where Qthreads takes the worker. A waiter
 *   spins a little, then yields (its worker runs other tasks meanwhile).
 *   A plain lock taken again by its holder deadlocks, as in Qthreads.
 * qthread_spinlock_trylock - take it if that needs no wait. As in
 *   Qthreads, a plain lock answers 1 if taken and 0 if not; a recursive
 *   one QTHREAD_SUCCESS if taken (or counted) and QTHREAD_OPFAIL if not.
 * qthread_spinlock_unlock - release it (a recursive lock's holder counts
 *   one down and releases at 0). QTHREAD_OPFAIL for a recursive lock held
 *   by another (as in Qthreads) and for a plain lock that is not held
 *   (Qthreads leaves that undefined); QTHREAD_SUCCESS for a free recursive
 *   lock (nothing to do, as in Qthreads).
 * Contexts: anywhere; no runtime needed.
 * Returns:  as above; QTHREAD_OPFAIL for a NULL a (lock, trylock, unlock,
 *           as in Qthreads), QTHREAD_BADARGS for a NULL a (init).
 * Undefined: a lock not initialised, or copied or freed while held.
 */
#define QTHREAD_SPINLOCK_IS_RECURSIVE (-1)
#define QTHREAD_SPINLOCK_IS_NOT_RECURSIVE (-2)

typedef union qt_spin_trylock_s {
    aligned_t u;
    struct {
        haligned_t ticket;
        haligned_t users;
    } s;
} qt_spin_trylock_t;

typedef struct {
    int64_t s;
    int64_t count;
} qthread_spinlock_state_t;

typedef struct {
    qt_spin_trylock_t lock;
    qthread_spinlock_state_t state;
} qthread_spinlock_t;

#define QTHREAD_MUTEX_INITIALIZER \
    { {.s = {0, 0}}, {QTHREAD_SPINLOCK_IS_NOT_RECURSIVE, 0} }
#define QTHREAD_RECURSIVE_MUTEX_INITIALIZER \
    { {.s = {0, 0}}, {QTHREAD_SPINLOCK_IS_RECURSIVE, 0} }

int qthread_spinlock_init(qthread_spinlock_t *a, bool is_recursive);
int qthread_spinlock_destroy(qthread_spinlock_t *a);
int qthread_spinlock_lock(qthread_spinlock_t *a);
int qthread_spinlock_unlock(qthread_spinlock_t *a);
int qthread_spinlock_trylock(qthread_spinlock_t *a);

/* ---- atomics (compiler built-ins, as in Qthreads) ------------------------ */

/* qthread_incr - atomically add; returns the value before the addition. */
#define qthread_incr(ADDR, INCVAL) __sync_fetch_and_add((ADDR), (INCVAL))
/* qthread_cas - atomic compare-and-swap; returns the value before. */
#define qthread_cas(ADDR, OLDV, NEWV) __sync_val_compare_and_swap((ADDR), (OLDV), (NEWV))
#define qthread_cas_ptr(ADDR, OLDV, NEWV) \
    ((void *)__sync_val_compare_and_swap((ADDR), (OLDV), (NEWV)))
/* qthread_cas32, qthread_cas64 - qthread_cas on a 32-bit / 64-bit word. */
#define qthread_cas32(ADDR, OLDV, NEWV) __sync_val_compare_and_swap((ADDR), (OLDV), (NEWV))
#define qthread_cas64(ADDR, OLDV, NEWV) __sync_val_compare_and_swap((ADDR), (OLDV), (NEWV))
/* qthread_incr32, qthread_incr64 - qthread_incr on a 32-bit / 64-bit word
 * (inline, as in Qthreads): atomically add; return the value before. */
static inline uint32_t qthread_incr32(uint32_t *operand, uint32_t incr)
{
    return __sync_fetch_and_add(operand, incr);
}
static inline uint64_t qthread_incr64(uint64_t *operand, uint64_t incr)
{
    return __sync_fetch_and_add(operand, incr);
}
/* qthread_incr_xx - qthread_incr32 or qthread_incr64 on the length-byte
 * (4 or 8) word at addr (inline, as in Qthreads; another length traps). */
static inline int64_t qthread_incr_xx(void *addr, int64_t incr, size_t length)
{
    switch (length) {
    case 4:
        return (int64_t)qthread_incr32((uint32_t *)addr, (uint32_t)incr);
    case 8:
        return (int64_t)qthread_incr64((uint64_t *)addr, (uint64_t)incr);
    default:
        __builtin_trap();
    }
    return 0;
}
/* DBL64TODBL60(in, out) - store the double in into the 60-bit integer
 * lvalue out (a uint64_t, e.g. for a syncvar_t): its bits shifted right by
 * 4, losing the 4 lowest mantissa bits. DBL60TODBL64(in, out) - the
 * reverse: shifts the integer lvalue in left by 4 (modifying it) and
 * copies its bits into the double out. Macros, as in Qthreads. */
#define DBL64TODBL60(in, out)      \
    do {                           \
        memcpy(&(out), &(in), 8);  \
        (out) >>= 4;               \
    } while (0)
#define DBL60TODBL64(in, out)      \
    do {                           \
        (in) <<= 4;                \
        memcpy(&(out), &(in), 8);  \
    } while (0)

/*
 * qthread_fincr, qthread_dincr - atomically add incr to a float / double
 * (a compare-and-swap loop on its bits, a full barrier); return the value
 * before the addition. Functions in the library here (inline in Qthreads);
 * they need no runtime. A NULL or misaligned operand: nothing happens and
 * NaN is returned.
 */
float qthread_fincr(float *operand, float incr);
double qthread_dincr(double *operand, double incr);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_H_CANTUS */
