/*
 * qthread/qutil.h - Qthreads' array utilities on cantus: sums, products,
 * maxima and minima of arrays of double, aligned_t and saligned_t, and
 * parallel sorts; same names and signatures as Qthreads.
 *
 * qutil_{double,uint,int}_{sum,mult,max,min}: the reductions of
 *   <qthread/qloop.h> under Qthreads' qutil names ("mult" is qt_*_prod):
 *   one task per shepherd over near-equal contiguous parts, the parts
 *   combined in order; checkfeb non-zero reads each element with readFF
 *   (the array must then be 8-byte aligned, checked). Length 0: sum 0,
 *   mult 1, max/min 0 (Qthreads reads array[0]). Integer sums and
 *   products wrap around.
 * qutil_qsort, qutil_aligned_qsort: sort ascending in place, in parallel
 *   on cantus tasks (quicksort around the median, halves as joined
 *   tasks, small parts sorted on one task). Not stable. Doubles are
 *   ordered by IEEE total order (-0.0 before +0.0, NaNs of positive sign
 *   last, of negative sign first); Qthreads compares with < and leaves
 *   NaNs' places undefined.
 * qutil_mergesort: the same, stable (merge sort of joined halves).
 *
 * Contexts: a task or an outside thread, after qthread_initialize.
 * Misuse (no runtime, array NULL with length > 0, unaligned array with
 * checkfeb) is reported on stderr and in cantus_last_error(); the result
 * is that of length 0, and a sort leaves the array as it was.
 * Undefined: writing the array (other than through FEB calls, with
 *           checkfeb) while the call runs.
 */
#ifndef QTHREAD_QUTIL_H_CANTUS
#define QTHREAD_QUTIL_H_CANTUS

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

double qutil_double_sum(const double *array, size_t length, int checkfeb);
double qutil_double_mult(const double *array, size_t length, int checkfeb);
double qutil_double_max(const double *array, size_t length, int checkfeb);
double qutil_double_min(const double *array, size_t length, int checkfeb);

aligned_t qutil_uint_sum(const aligned_t *array, size_t length, int checkfeb);
aligned_t qutil_uint_mult(const aligned_t *array, size_t length, int checkfeb);
aligned_t qutil_uint_max(const aligned_t *array, size_t length, int checkfeb);
aligned_t qutil_uint_min(const aligned_t *array, size_t length, int checkfeb);

saligned_t qutil_int_sum(const saligned_t *array, size_t length, int checkfeb);
saligned_t qutil_int_mult(const saligned_t *array, size_t length, int checkfeb);
saligned_t qutil_int_max(const saligned_t *array, size_t length, int checkfeb);
saligned_t qutil_int_min(const saligned_t *array, size_t length, int checkfeb);

void qutil_mergesort(double *array, size_t length);
void qutil_qsort(double *array, size_t length);
void qutil_aligned_qsort(aligned_t *array, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_QUTIL_H_CANTUS */
