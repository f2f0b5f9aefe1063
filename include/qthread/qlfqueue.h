/*
 * qthread/qlfqueue.h - Qthreads' lock-free queue on cantus: an unbounded
 * FIFO of non-NULL pointers for any number of producers and consumers.
 * Names and semantics as in Qthreads. Qthreads builds it as a
 * Michael-Scott list with hazard pointers; cantus uses crossbeam's
 * SegQueue (lock-free too): FIFO order per producer, each element
 * dequeued once, no call blocks.
 *
 * Contexts: anywhere (tasks, outside threads; no runtime is needed).
 * Errors:   QTHREAD_BADARGS for a NULL queue or element (NULL is what an
 *           empty queue's dequeue returns); qlfqueue_empty(NULL) is
 *           QTHREAD_BADARGS (as Qthreads), qlfqueue_dequeue(NULL) NULL;
 *           the reason in cantus_last_error().
 * Undefined: using a destroyed queue; destroying it while others use it.
 *           Elements left in a destroyed queue are the caller's pointers
 *           (not freed).
 */
#ifndef QTHREAD_QLFQUEUE_H_CANTUS
#define QTHREAD_QLFQUEUE_H_CANTUS

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qlfqueue_s qlfqueue_t;

/* A new, empty queue; NULL on error. */
qlfqueue_t *qlfqueue_create(void);
/* Free the queue. */
int qlfqueue_destroy(qlfqueue_t *q);
/* Append elem (non-NULL). */
int qlfqueue_enqueue(qlfqueue_t *q, void *elem);
/* Remove the oldest element; NULL if the queue is empty. */
void *qlfqueue_dequeue(qlfqueue_t *q);
/* 1 if the queue is empty, 0 otherwise. */
int qlfqueue_empty(qlfqueue_t *q);

#ifdef __cplusplus
}
#endif

#endif
