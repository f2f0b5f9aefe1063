/*
 * qthread/qloop.h - Qthreads' parallel loops on cantus: qt_loop and
 * qt_loop_balance (with their _simple and _sinc variants) and the array
 * reductions qt_{double,int,uint}_{sum,prod,max,min}; same names and
 * semantics as Qthreads. The loops return when every task they spawned
 * has returned; one cantus end count covers all of a loop's tasks.
 *
 * The _simple and _sinc variants have the same meaning: Qthreads runs
 * "simple" tasks (which may not block) or waits with a sinc; cantus runs
 * ordinary tasks (which may block) and waits with one end count for all.
 *
 * Contexts: a task or an outside thread, after qthread_initialize. They
 *           return nothing, as in Qthreads: a NULL func or no runtime is
 *           reported on stderr and in cantus_last_error(), and nothing runs.
 * qt_accum_f and the accumulators qt_{dbl,int,uint}_{add,prod,max,min}_acc
 * (inline, as in Qthreads: *a = *a op *b on double, saligned_t, aligned_t;
 * integer add and prod wrap around where Qthreads' signed ones overflow)
 * are declared here for <qthread/qarray.h>'s qarray_iter_loopaccum.
 *
 * Left out: the other qt_loop* variants (qt_loop_step, _sv, _dc, _aligned),
 *           qt_loopaccum_*, the loop queues and qt_qsort (not declared).
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

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_QLOOP_H_CANTUS */
