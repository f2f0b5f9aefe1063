/*
 * qthread/qdqueue.h - Qthreads' distributed queue on cantus: a FIFO part
 * per shepherd. A task enqueues into its shepherd's part (or shepherd
 * `there`'s) and dequeues from its own part first; when that is empty it
 * takes from parts that advertised a backlog (a part that grows while
 * already holding elements advertises to its neighbours, once until one
 * answers), then from any other part, nearest first. Names and semantics
 * as in Qthreads, except:
 *   - distance: cantus has no shepherd distances (qthread_distance is
 *     left out), so a part's neighbours are the previous and the next
 *     shepherd's, and "nearest first" is shepherd-id order on a ring.
 *   - qdqueue_empty looks at every part (Qthreads looks at the caller's
 *     part and at parts busy with their own elements only), so it is 1
 *     only if the whole queue was empty as it looked.
 * Order is FIFO within a part; across parts there is none. Outside
 * threads (not a task, e.g. main) use shepherd 0's part, as Qthreads'
 * main thread runs on shepherd 0.
 *
 * Contexts: qdqueue_create needs a running runtime (a part per shepherd
 *           it has then); the other calls work anywhere.
 * Errors:   QTHREAD_BADARGS for a NULL queue or element or a shepherd out
 *           of range; qdqueue_empty(NULL) is QTHREAD_BADARGS (Qthreads:
 *           0), qdqueue_dequeue(NULL) NULL; the reason in
 *           cantus_last_error().
 * Undefined: using a destroyed queue; destroying it while others use it.
 */
#ifndef QTHREAD_QDQUEUE_H_CANTUS
#define QTHREAD_QDQUEUE_H_CANTUS

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qdqueue_s qdqueue_t;

/* A new, empty queue with a part per shepherd; NULL on error. */
qdqueue_t *qdqueue_create(void);
/* Free the queue. */
int qdqueue_destroy(qdqueue_t *q);
/* Add elem (non-NULL) to the caller's shepherd's part. */
int qdqueue_enqueue(qdqueue_t *q, void *elem);
/* Add elem (non-NULL) to shepherd `there`'s part. */
int qdqueue_enqueue_there(qdqueue_t *q, void *elem, qthread_shepherd_id_t there);
/* Remove an element (the caller's part first); NULL if all are empty. */
void *qdqueue_dequeue(qdqueue_t *q);
/* 1 if every part is empty, 0 otherwise. */
int qdqueue_empty(qdqueue_t *q);

#ifdef __cplusplus
}
#endif

#endif
