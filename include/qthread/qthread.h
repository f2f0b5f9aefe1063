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
 * Left out (not declared here, so using them fails at compile time):
 * everything of Qthreads not declared in qthread/qthread.h, qthread/sinc.h
 * and qthread/qloop.h - among them qthread_init (deprecated),
 * qthread_spawn, qthread_fork_precond*, qthread_fork_syncvar*,
 * qthread_fork_copyargs*, qthread_migrate_to, qthread_lock/unlock,
 * spinlocks, teams, qthread_readstate, task-local storage,
 * qthread_syncvar_incrF, the other qt_loop variants and qt_sinc_tmpdata.
 *
 * Behaviours that differ from Qthreads:
 *  - The thread that calls qthread_initialize does not become a qthread:
 *    it stays an outside thread (it may fork and use FEBs, blocking as a
 *    thread). There, qthread_shep() returns NO_SHEPHERD and qthread_id()
 *    returns QTHREAD_NON_TASK_ID, where Qthreads would say shepherd 0.
 *  - qthread_finalize waits for every task to finish (Qthreads tells the
 *    shepherds to stop at their next context switch), and is not called
 *    automatically at exit: call it, or the process exits with its tasks.
 *    Called from inside a task it is ignored, with a message on stderr.
 *  - Before qthread_initialize (or after qthread_finalize) every call
 *    except qthread_initialize, qthread_finalize, qthread_syncvar_status
 *    and the queries returns QTHREAD_NOT_ALLOWED (void functions print the
 *    reason on stderr and do nothing) instead of failing an assertion.
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
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
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

/* ---- startup and teardown --------------------------------------------- */

/*
 * qthread_initialize - start the runtime. Workers: QTHREAD_HWPAR, else
 * QTHREAD_NUM_SHEPHERDS x QTHREAD_NUM_WORKERS_PER_SHEPHERD (QT_ prefixes
 * work too), else the CPUs; CANTUS_* variables override.
 * Contexts: an outside thread. Calling it while a runtime runs (also one
 *           started by cantus_init) does nothing and succeeds, as in Qthreads.
 * Returns:  QTHREAD_SUCCESS, QTHREAD_BADARGS (invalid variable),
 *           QTHREAD_PTHREAD_ERROR (threads could not be started).
 */
int qthread_initialize(void);

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
 * qthread_fork_to - as qthread_fork, aimed at shepherd `shepherd` (taken
 * modulo the number of shepherds, as in Qthreads; NO_SHEPHERD: anywhere).
 * cantus queues the task on the caller's worker if that is the target,
 * otherwise on the shared queue that idle workers take from first; like
 * any unstarted task it may be stolen, so the target is a placement hint
 * and the task may run on another shepherd.
 * Contexts, returns, undefined: as qthread_fork.
 */
int qthread_fork_to(qthread_f f, const void *arg, aligned_t *ret,
                    qthread_shepherd_id_t shepherd);

/*
 * qthread_yield - let other tasks run. Does nothing outside tasks or
 * before qthread_initialize, as in Qthreads.
 */
void qthread_yield_(int kind);
#define qthread_yield() qthread_yield_(0)
#define qthread_yield_near() qthread_yield_(1)

/* ---- queries ------------------------------------------------------------ */

/*
 * qthread_id - the calling task's id, in 1 .. UINT_MAX-1 (ids wrap after
 * UINT_MAX-1 tasks). QTHREAD_NON_TASK_ID (0) outside tasks and before
 * qthread_initialize.
 */
unsigned qthread_id(void);

/* qthread_shep - the calling task's shepherd (its worker), NO_SHEPHERD
 * outside tasks. A started task stays on its shepherd. */
qthread_shepherd_id_t qthread_shep(void);

/* qthread_num_shepherds, qthread_num_workers - the number of workers; 0
 * before qthread_initialize. */
qthread_shepherd_id_t qthread_num_shepherds(void);
qthread_worker_id_t qthread_num_workers(void);

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

/* ---- atomics (compiler built-ins, as in Qthreads) ------------------------ */

/* qthread_incr - atomically add; returns the value before the addition. */
#define qthread_incr(ADDR, INCVAL) __sync_fetch_and_add((ADDR), (INCVAL))
/* qthread_cas - atomic compare-and-swap; returns the value before. */
#define qthread_cas(ADDR, OLDV, NEWV) __sync_val_compare_and_swap((ADDR), (OLDV), (NEWV))
#define qthread_cas_ptr(ADDR, OLDV, NEWV) \
    ((void *)__sync_val_compare_and_swap((ADDR), (OLDV), (NEWV)))

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_H_CANTUS */
