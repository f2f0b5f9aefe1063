/*
 * qthread/qloop.h - Qthreads' parallel loops on cantus: qt_loop and
 * qt_loop_balance (with their _simple, _sinc, _sv, _dc and _aligned
 * variants), qt_loopaccum_balance (and _sinc, _sv, _dc), qt_qsort and the
 * array reductions qt_{double,int,uint}_{sum,prod,max,min}; same names and
 * semantics as Qthreads. The loops return when every task they spawned
 * has returned; one cantus end count covers all of a loop's tasks.
 *
 * The _simple, _sinc, _sv, _dc and _aligned variants have the plain
 * call's meaning: Qthreads runs "simple" tasks (which may not block) or
 * waits with a sinc, syncvars, a done-count or aligned_t words; cantus
 * runs ordinary tasks (which may block) and waits with one end count for
 * all.
 *
 * Contexts: a task or an outside thread, after qthread_initialize. They
 *           return nothing, as in Qthreads: a NULL func or no runtime is
 *           reported on stderr and in cantus_last_error(), and nothing runs.
 * Loop queues (qt_loop_queue_*, below): a loop whose iterations worker
 * tasks, one per shepherd, pull in chunks from one shared counter.
 *
 * qt_accum_f and the accumulators qt_{dbl,int,uint}_{add,prod,max,min}_acc
 * (inline, as in Qthreads: *a = *a op *b on double, saligned_t, aligned_t;
 * integer add and prod wrap around where Qthreads' signed ones overflow)
 * are declared here for <qthread/qarray.h>'s qarray_iter_loopaccum.
 *
 * Left out: qt_loop_step, qt_loop_step_f, qt_loop_step_queue_create and
 *           qqloop_step_handle_t (Qthreads 1.23 declares them but defines
 *           neither function, so a program calling them does not link
 *           against Qthreads either, and there are no semantics to
 *           follow; no call takes a step handle).
 */
#ifndef QTHREAD_QLOOP_H_CANTUS
#define QTHREAD_QLOOP_H_CANTUS

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*qt_loop_f)(size_t startat, size_t stopat, void *arg);

/* Combines the partial result b into a (an accumulation step). */
typedef void (*qt_accum_f)(void *a, const void *b);

static inline void qt_dbl_add_acc(void *a, const void *b) { *(double *)a += *(const double *)b; }
static inline void qt_dbl_prod_acc(void *a, const void *b) { *(double *)a *= *(const double *)b; }
static inline void qt_dbl_max_acc(void *a, const void *b) { if (*(const double *)b > *(double *)a) *(double *)a = *(const double *)b; }
static inline void qt_dbl_min_acc(void *a, const void *b) { if (*(const double *)b < *(double *)a) *(double *)a = *(const double *)b; }
static inline void qt_int_add_acc(void *a, const void *b) { *(saligned_t *)a = (saligned_t)((aligned_t)*(saligned_t *)a + (aligned_t)*(const saligned_t *)b); }
static inline void qt_int_prod_acc(void *a, const void *b) { *(saligned_t *)a = (saligned_t)((aligned_t)*(saligned_t *)a * (aligned_t)*(const saligned_t *)b); }
static inline void qt_int_max_acc(void *a, const void *b) { if (*(const saligned_t *)b > *(saligned_t *)a) *(saligned_t *)a = *(const saligned_t *)b; }
static inline void qt_int_min_acc(void *a, const void *b) { if (*(const saligned_t *)b < *(saligned_t *)a) *(saligned_t *)a = *(const saligned_t *)b; }
static inline void qt_uint_add_acc(void *a, const void *b) { *(aligned_t *)a += *(const aligned_t *)b; }
static inline void qt_uint_prod_acc(void *a, const void *b) { *(aligned_t *)a *= *(const aligned_t *)b; }
static inline void qt_uint_max_acc(void *a, const void *b) { if (*(const aligned_t *)b > *(aligned_t *)a) *(aligned_t *)a = *(const aligned_t *)b; }
static inline void qt_uint_min_acc(void *a, const void *b) { if (*(const aligned_t *)b < *(aligned_t *)a) *(aligned_t *)a = *(const aligned_t *)b; }

/* One task per iteration: func(i, i + 1, argptr) for i in [start, stop). */
void qt_loop(size_t start, size_t stop, qt_loop_f func, void *argptr);

void qt_loop_simple(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_sinc(size_t start, size_t stop, qt_loop_f func, void *argptr);

/* One task per shepherd (at most one per iteration), [start, stop) split
 * into near-equal contiguous ranges: func(startat, stopat, argptr). */
void qt_loop_balance(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_balance_simple(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_balance_sinc(size_t start, size_t stop, qt_loop_f func, void *argptr);

/* The same calls; Qthreads differs only in how it waits (see above). */
void qt_loop_sv(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_dc(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_aligned(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_balance_sv(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_balance_dc(size_t start, size_t stop, qt_loop_f func, void *argptr);
void qt_loop_balance_aligned(size_t start, size_t stop, qt_loop_f func, void *argptr);

/* The body of a qt_loopaccum_balance part: iterations [startat, stopat),
 * its partial result written to the size bytes at ret. */
typedef void (*qt_loopr_f)(size_t startat, size_t stopat, void *arg, void *ret);

/*
 * qt_loopaccum_balance - one task per worker (as in Qthreads, one per
 * worker even when some parts are empty: func then gets startat ==
 * stopat) over near-equal contiguous parts of [start, stop), each calling
 * func(startat, stopat, argptr, ret). Part 0's ret is out; each other
 * part's is a buffer of size bytes (zeroed; Qthreads leaves it
 * uninitialised), so func must write its whole result. When all have
 * returned, acc(out, partial) for the parts 1, 2, ... in order.
 * qt_loopaccum_balance_sv, _dc - the same (Qthreads waits differently).
 * qt_loopaccum_balance_sinc - as in Qthreads (which reduces with a sinc
 * whose initial value is out's): every part, part 0 included, writes to a
 * buffer, and out (keeping its value from before the call) is accumulated
 * with each part's result in order.
 * Contexts: as qt_loop. A NULL func, acc or out, or no runtime, is
 *           reported on stderr and in cantus_last_error(); nothing runs.
 */
void qt_loopaccum_balance(size_t start, size_t stop, size_t size, void *out, qt_loopr_f func,
                          void *argptr, qt_accum_f acc);
void qt_loopaccum_balance_sinc(size_t start, size_t stop, size_t size, void *out,
                               qt_loopr_f func, void *argptr, qt_accum_f acc);
void qt_loopaccum_balance_sv(size_t start, size_t stop, size_t size, void *out,
                             qt_loopr_f func, void *argptr, qt_accum_f acc);
void qt_loopaccum_balance_dc(size_t start, size_t stop, size_t size, void *out,
                             qt_loopr_f func, void *argptr, qt_accum_f acc);

/*
 * qt_qsort - sort array[0 .. length) ascending, in place and in parallel
 * (one task per worker sorts a near-equal part; the parts are then
 * merged). Doubles are ordered as by <, with -0.0 before +0.0 and NaNs by
 * their bits (negative NaNs first, positive ones last).
 * Contexts: as qt_loop. A NULL (with length > 0) or unaligned array, or
 *           no runtime, is reported on stderr and in cantus_last_error();
 *           the array is left as it was.
 */
void qt_qsort(double *array, size_t length);

/*
 * qt_{double,int,uint}_{sum,prod,max,min} - reduce array[0 .. length) in
 * parallel: one task per shepherd over near-equal contiguous parts, then
 * the parts in order (so for a given number of shepherds a double result
 * is the same on every run). If checkfeb is non-zero, each element is
 * read with readFF (waiting until it is full; the array must then be
 * 8-byte aligned, checked); otherwise it is read plainly.
 * Integer sums and products wrap around (Qthreads: unsigned wraps, signed
 * overflow is undefined). max/min compare with > and <, as Qthreads (a
 * NaN element is kept only if it comes first in its part).
 * Length 0: sum 0, prod 1, max/min 0 (Qthreads reads array[0]).
 * Misuse (no runtime, array NULL with length > 0, unaligned array with
 * checkfeb) is reported on stderr and in cantus_last_error(), and the
 * result is that of length 0.
 * Undefined: writing the array (other than through FEB calls, with
 *           checkfeb) while the call runs.
 */
double qt_double_sum(double *array, size_t length, int checkfeb);
double qt_double_prod(double *array, size_t length, int checkfeb);
double qt_double_max(double *array, size_t length, int checkfeb);
double qt_double_min(double *array, size_t length, int checkfeb);
saligned_t qt_int_sum(saligned_t *array, size_t length, int checkfeb);
saligned_t qt_int_prod(saligned_t *array, size_t length, int checkfeb);
saligned_t qt_int_max(saligned_t *array, size_t length, int checkfeb);
saligned_t qt_int_min(saligned_t *array, size_t length, int checkfeb);
aligned_t qt_uint_sum(aligned_t *array, size_t length, int checkfeb);
aligned_t qt_uint_prod(aligned_t *array, size_t length, int checkfeb);
aligned_t qt_uint_max(aligned_t *array, size_t length, int checkfeb);
aligned_t qt_uint_min(aligned_t *array, size_t length, int checkfeb);

/*
 * Loop queues - self-scheduled loops. qt_loop_queue_create makes a loop
 * over [start, stop); qt_loop_queue_run starts one worker task per
 * shepherd (qt_loop_queue_run_there: one, on shepherd `shep`), each of
 * which claims chunks [startat, stopat) from a shared counter and calls
 * func(startat, stopat, argptr) on them until none are left; it returns
 * when every joined worker has finished (every iteration ran exactly
 * once), and frees the handle. The kinds choose the chunk sizes:
 *
 *   CHUNK     a fixed size: (stop - start) / shepherds / 10 (at least 1,
 *             as Qthreads), or what qt_loop_queue_setchunk sets.
 *   GUIDED    max(1, remaining / workers): big chunks first, small ones
 *             at the end.
 *   FACTORED  in batches: each batch is `workers` chunks of
 *             ceil(remaining / (2 * workers)), so a batch covers about
 *             half of what remains.
 *   TIMED     each worker times its chunks: the first is 1 iteration,
 *             the next ones what its measured time per iteration says
 *             takes about 20 us, at most remaining / (2 * workers) + 1.
 *
 * (`workers`: those joined to the loop so far.) qt_loop_queue_addworker
 * lets one more worker, on shepherd `shep`, join: before run, or while it
 * runs (from a loop body, say); none joins once every iteration is
 * claimed. The shepherd of a worker is where it is queued: an idle
 * shepherd may take it over before it starts (as qthread_fork_to).
 *
 * Contexts: a task or an outside thread, after qthread_initialize; run
 *           blocks the caller until the loop is done (a task suspends).
 * Misuse, reported on stderr and in cantus_last_error(): create without
 *           a runtime, with a NULL func or an unknown type (NULL);
 *           setchunk on a loop that is not CHUNK (Qthreads asserts) or a
 *           chunk of 0 (ignored); run_there or addworker with a shepherd
 *           that does not exist (nothing runs; run_there keeps the handle,
 *           as Qthreads).
 * Differs from Qthreads: `incr` is accepted and ignored (as Qthreads'
 *           chunking does: func gets contiguous ranges and applies any
 *           stride itself); GUIDED/FACTORED/TIMED sizes are cantus's own
 *           rules above (Qthreads' TIMED keeps a chunk size once chunks
 *           get faster than 0.75 us); a worker whose shepherd is disabled
 *           during the loop keeps claiming chunks (cantus tasks never
 *           move; Qthreads' worker leaves the loop).
 * Undefined: using a handle after run/run_there returned; a handle never
 *           run is never freed (as Qthreads).
 */
typedef struct qqloop_handle_s qqloop_handle_t;
typedef enum { CHUNK, GUIDED, FACTORED, TIMED } qt_loop_queue_type;

qqloop_handle_t *qt_loop_queue_create(qt_loop_queue_type type, size_t start, size_t stop,
                                      size_t incr, qt_loop_f func, void *argptr);
void qt_loop_queue_setchunk(qqloop_handle_t *l, size_t chunk);
void qt_loop_queue_run(qqloop_handle_t *loop);
void qt_loop_queue_run_there(qqloop_handle_t *loop, qthread_shepherd_id_t shep);
void qt_loop_queue_addworker(qqloop_handle_t *loop, qthread_shepherd_id_t shep);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_QLOOP_H_CANTUS */
