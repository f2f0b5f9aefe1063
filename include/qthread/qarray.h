/*
 * qthread/qarray.h - Qthreads' distributed array on cantus: count
 * elements of unit_size bytes, stored in segments, each segment owned by
 * a shepherd (a cantus worker) as the distribution says; loops over a
 * range run one task per owning shepherd, forked to it. Same names,
 * struct layout and semantics as Qthreads.
 *
 * Layout. The elements live in one page-aligned block at base_ptr (never
 * moved, zero-filled at creation): segment s starts at base_ptr + s *
 * segment_bytes and holds segment_size elements, back to back (so
 * qarray_elem / qarray_elem_nomigrate, inline here, are plain address
 * arithmetic). segment_bytes is 16 pages by default, seg_pages pages if
 * given, raised to a multiple of the page size that holds one element if
 * an element is bigger. Without `tight`, unit_size is rounded up to a
 * multiple of 8. Differs: Qthreads keeps a DIST array's owners in the
 * last bytes of each segment (so its segment_size is one less there);
 * cantus keeps them beside the struct, so every distribution has the
 * same segment_size.
 *
 * Distributions (qarray_create_configured's d; dist_type afterwards):
 *   FIXED_HASH   (dist_type FIXED_HASH): segment s on shepherd s % N.
 *   FIXED_FIELDS (FIXED_FIELDS): contiguous runs of segments, the first
 *                (segments % N) shepherds one segment more
 *                (dist_specific.stripes: segs_per_shep, extras).
 *   ALL_LOCAL, ALL_SAME (ALL_SAME): every segment on the caller's shepherd
 *                (shepherd 0 from outside a task: the main thread has none
 *                on cantus); ALL_RAND: a random shepherd; ALL_LEAST: the
 *                shepherd owning the fewest segments of live qarrays.
 *                dist_specific.dist_shep is the owner.
 *   DIST_STRIPES, DIST_FIELDS, DIST_RAND, DIST, DIST_LEAST (DIST): each
 *                segment has its own owner, initially as FIXED_HASH, as
 *                FIXED_FIELDS, random, random, or the least loaded
 *                shepherd at each segment; qarray_set_shepof moves one.
 *   N is the number of shepherds when the array is created.
 *   An unknown d is refused (NULL); Qthreads treats it as FIXED_HASH.
 *
 * Loops: qarray_iter calls func(element address) for each index of
 * [startat, stopat); qarray_iter_loop / _constloop call func(lo, hi, a,
 * arg) on pieces of the range, each piece inside one segment (so its
 * elements are contiguous in memory); qarray_iter_loopaccum also hands
 * each piece a result buffer of retsize bytes and combines the pieces'
 * results with acc into *ret, overwriting it (pieces of one shepherd in
 * index order, then the shepherds in order; an empty range leaves *ret
 * alone). Each runs one task per shepherd owning a segment of the range,
 * forked to that shepherd (a hint: a task not yet started may be stolen),
 * doing that shepherd's pieces in index order; the call returns when all
 * are done. qarray_iter_loop_nb forks one task that runs
 * qarray_iter_loop and fills *ret (emptied first, if not NULL) when done.
 * Differs: Qthreads hands ALL_SAME and FIXED_FIELDS loops a shepherd's
 * whole run of segments in one call, though padding may separate
 * segments in memory; cantus never crosses a segment.
 *
 * qarray_shepof: the owner of an index (NO_SHEPHERD if out of range).
 * qarray_set_shepof: ALL_SAME: every segment moves to shep; DIST: the
 * segment holding index i moves; FIXED_*: nothing (as Qthreads).
 * qarray_dist_like: gives mod the owners of ref, index for index (same
 * count and unit_size): mod ALL_SAME needs ref ALL_SAME; mod DIST takes,
 * for each of its segments, the owner of ref's element at its first
 * index (any ref distribution; Qthreads refuses a FIXED_* ref); a
 * FIXED_* mod cannot change (refused).
 * qarray_elem_migrate: the element's address, without moving the
 * caller: cantus tasks never move once started (Qthreads migrates the
 * calling task to the owner first).
 *
 * Contexts: a task or an outside thread, after qthread_initialize.
 * Misuse (no runtime, NULL array or func, count or unit_size 0, sizes
 * that overflow, stopat > count or startat > stopat, a shepherd that
 * does not exist, an unknown distribution) is reported on stderr and in
 * cantus_last_error(), and the call does nothing (creation returns NULL).
 * Undefined: using an array after qarray_destroy, or destroying it (or
 * moving its segments) while a loop over it runs; loop functions that
 * touch elements outside their piece concurrently with other pieces.
 */
#ifndef QTHREAD_QARRAY_H_CANTUS
#define QTHREAD_QARRAY_H_CANTUS

#include <stddef.h>
#include <stdint.h>

#include "qloop.h"
#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FIXED_HASH = 0,
    FIXED_FIELDS,
    ALL_SAME,
    DIST,
    DIST_STRIPES,
    DIST_FIELDS,
    DIST_RAND,
    DIST_LEAST,
    ALL_LOCAL,
    ALL_RAND,
    ALL_LEAST
} distribution_t;

typedef struct qarray_s {
    size_t unit_size;     /* bytes per element */
    size_t count;         /* elements */
    size_t segment_size;  /* elements per segment */
    size_t segment_bytes; /* bytes from one segment to the next */
    char *base_ptr;       /* the first segment */
    distribution_t dist_type;
    union {
        qthread_shepherd_id_t dist_shep; /* ALL_SAME: the owner */
        struct {
            size_t segs_per_shep; /* FIXED_FIELDS */
            size_t extras;
        } stripes;
    } dist_specific;
} qarray;

typedef void (*qa_loop_f)(size_t startat, size_t stopat, qarray *array, void *arg);
typedef void (*qa_loopr_f)(size_t startat, size_t stopat, qarray *array, void *arg,
                           void *ret);
typedef void (*qa_cloop_f)(size_t startat, size_t stopat, const qarray *array, void *arg);

qarray *qarray_create(size_t count, size_t unit_size);
qarray *qarray_create_tight(size_t count, size_t unit_size);
qarray *qarray_create_configured(size_t count, size_t unit_size, distribution_t d, char tight,
                                 int seg_pages);
void qarray_destroy(qarray *a);

void qarray_iter(qarray *a, size_t startat, size_t stopat, qthread_f func);
void qarray_iter_loop(qarray *a, size_t startat, size_t stopat, qa_loop_f func, void *arg);
void qarray_iter_loop_nb(qarray *a, size_t startat, size_t stopat, qa_loop_f func, void *arg,
                         aligned_t *ret);
void qarray_iter_constloop(const qarray *a, size_t startat, size_t stopat, qa_cloop_f func,
                           void *arg);
void qarray_iter_loopaccum(qarray *a, size_t startat, size_t stopat, qa_loopr_f func, void *arg,
                           void *ret, size_t retsize, qt_accum_f acc);

void qarray_set_shepof(qarray *a, size_t i, qthread_shepherd_id_t shep);
qthread_shepherd_id_t qarray_shepof(const qarray *a, size_t index);
void qarray_dist_like(const qarray *ref, qarray *mod);

void *qarray_elem_migrate(const qarray *a, size_t index);

/* The address of element index (NULL if a is NULL or index >= count;
 * Qthreads answers index == count with the address past the end). */
static inline void *qarray_elem_nomigrate(const qarray *a, size_t index)
{
    size_t seg;
    if (a == NULL || index >= a->count) {
        return NULL;
    }
    seg = index / a->segment_size;
    return a->base_ptr + seg * a->segment_bytes + (index - seg * a->segment_size) * a->unit_size;
}

#define qarray_elem(a, i) qarray_elem_nomigrate((a), (i))

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_QARRAY_H_CANTUS */
