/*
 * qthread/qpool.h - Qthreads' memory pool on cantus: items of one size,
 * carved from chunks of about 16 KiB and recycled through free lists (a
 * cache per shepherd, a shared list between them). Names and semantics
 * as in Qthreads: qpool_alloc returns an item (not zeroed), qpool_free
 * gives it back, qpool_destroy frees all the pool's memory, items not
 * freed included. The alignment is a power of two, 0 meaning 16 (malloc's).
 *
 * Contexts: anywhere (tasks, outside threads; no runtime is needed: a
 *           pool made before qthread_initialize, or used outside tasks,
 *           uses only the shared list).
 * Errors:   qpool_create* return NULL for a size of 0 or an alignment that
 *           is not a power of two; qpool_alloc NULL for a NULL pool or no
 *           memory; qpool_free/qpool_destroy report a NULL pool or item or
 *           a misaligned item on stderr and in cantus_last_error(), and do
 *           nothing.
 * Undefined: freeing an item twice or into another pool; using a pool or
 *           its items after qpool_destroy.
 */
#ifndef QTHREAD_QPOOL_H_CANTUS
#define QTHREAD_QPOOL_H_CANTUS

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qt_mpool_s qpool;

/* An item of the pool; NULL on error. */
void *qpool_alloc(qpool *pool);
/* Give an item back to the pool. */
void qpool_free(qpool *pool, void *mem);
/* A pool of items of item_size bytes, 16-byte aligned; NULL on error. */
qpool *qpool_create(size_t item_size);
/* A pool of items of item_size bytes aligned to `alignment`. */
qpool *qpool_create_aligned(size_t item_size, size_t alignment);
/* Free the pool and all its items. */
void qpool_destroy(qpool *pool);

#ifdef __cplusplus
}
#endif

#endif
