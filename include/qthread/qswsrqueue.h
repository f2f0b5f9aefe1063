/*
 * qthread/qswsrqueue.h - Qthreads' single-writer single-reader queue on
 * cantus: a bounded FIFO of non-NULL pointers. Names and semantics as in
 * Qthreads, except:
 *   - capacity: the queue holds exactly `elements` elements (Qthreads
 *     rounds the ring up to whole cache lines and keeps one slot empty);
 *     qswsrqueue_create(0) is NULL (Qthreads makes a queue of 7).
 *   - it is crossbeam's ArrayQueue, correct for any number of writers
 *     and readers, so a second writer or reader is not undefined (it is
 *     in Qthreads).
 * The _blocking calls wait by yielding: a task to its worker's other
 * tasks, an outside thread its CPU.
 *
 * Contexts: anywhere (tasks, outside threads; no runtime is needed).
 * Errors:   qswsrqueue_enqueue on a full queue is QTHREAD_OPFAIL (nothing
 *           recorded); a NULL queue or element is QTHREAD_BADARGS (NULL
 *           from the dequeues, QTHREAD_BADARGS from qswsrqueue_empty), the
 *           reason in cantus_last_error().
 * Undefined: using a destroyed queue; destroying it while others use it.
 */
#ifndef QTHREAD_QSWSRQUEUE_H_CANTUS
#define QTHREAD_QSWSRQUEUE_H_CANTUS

#include <stddef.h>

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qswsrqueue_s qswsrqueue_t;

/* A new, empty queue for up to `elements` elements; NULL on error. */
qswsrqueue_t *qswsrqueue_create(size_t elements);
/* Free the queue. */
int qswsrqueue_destroy(qswsrqueue_t *q);
/* Append elem (non-NULL) if there is room, else QTHREAD_OPFAIL. */
int qswsrqueue_enqueue(qswsrqueue_t *q, void *elem);
/* Append elem (non-NULL), waiting while the queue is full. */
int qswsrqueue_enqueue_blocking(qswsrqueue_t *q, void *elem);
/* Remove the oldest element; NULL if the queue is empty. */
void *qswsrqueue_dequeue(qswsrqueue_t *q);
/* Remove the oldest element, waiting while the queue is empty. */
void *qswsrqueue_dequeue_blocking(qswsrqueue_t *q);
/* 1 if the queue is empty, 0 otherwise. */
int qswsrqueue_empty(qswsrqueue_t *q);

#ifdef __cplusplus
}
#endif

#endif
