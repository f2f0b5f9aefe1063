/*
 * qthread/allpairs.h - Qthreads' all-pairs pattern on cantus: distfunc on
 * every pair (element i of array1, element j of array2), in parallel.
 * Same names and semantics as Qthreads.
 *
 * qt_allpairs: distfunc(&array1[i], &array2[j]) for every i, j, once each.
 * qt_allpairs_output: distfunc(&array1[i], &array2[j], out) with out =
 *   (char *)output[i] + j * outsize (output: one row pointer per element
 *   of array1, each row holding array2->count results of outsize bytes);
 *   out is NULL for every pair if output is NULL.
 * The work is cut into blocks of (a segment of array1, or a part of one
 * when there are fewer blocks than shepherds) x (a segment of array2);
 * each block is a task, forked to the owner of its array1 segment or of
 * its array2 segment, alternately; the call returns when all are done.
 * Differs: Qthreads feeds the blocks through a distributed queue to one
 * worker task per shepherd and picks between the two owners at random;
 * the pairs computed are the same.
 *
 * Contexts: a task or an outside thread, after qthread_initialize.
 * Misuse (no runtime, a NULL array or distfunc) is reported on stderr
 * and in cantus_last_error(), and nothing runs.
 * Undefined: distfunc writing the arrays; two pairs' calls sharing
 * output bytes.
 */
#ifndef QTHREAD_ALLPAIRS_H_CANTUS
#define QTHREAD_ALLPAIRS_H_CANTUS

#include "qarray.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*dist_f)(const void *unit1, const void *unit2);
typedef void (*dist_out_f)(const void *unit1, const void *unit2, void *outstore);

void qt_allpairs(const qarray *array1, const qarray *array2, dist_f distfunc);
void qt_allpairs_output(const qarray *array1, const qarray *array2, dist_out_f distfunc,
                        void **output, size_t outsize);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_ALLPAIRS_H_CANTUS */
