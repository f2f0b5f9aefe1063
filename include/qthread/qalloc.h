/*
 * qthread/qalloc.h - Qthreads' persistent allocator on cantus: a map is a
 * file mapped into memory (mmap, MAP_SHARED) that holds its own allocator
 * state, so blocks allocated in it, and their contents, outlive the
 * program: qalloc_checkpoint writes the maps to their files, and a later
 * run loads a file again (qalloc_loadmap, or a make*map call on the
 * existing file) with its blocks as they were. Static maps hold items of
 * one size (a free list per stream); dynamic maps hold blocks of any size
 * (runs of 64-byte granules, a 16-byte header each). Names and semantics
 * as in Qthreads, except:
 *   - failures return NULL (the reason in cantus_last_error()) where
 *     Qthreads prints and aborts: a file of another size, kind or item
 *     size than asked, a file that is not a map, a map whose address is
 *     taken, an OS error.
 *   - a map is loaded at the address where it was made (recorded in the
 *     file, so pointers stored in it stay valid), never elsewhere; a
 *     non-NULL addr must be that address (for a new file: where to make
 *     it, page-aligned). The same file cannot be loaded twice at once.
 *   - the file format is cantus's own (not Qthreads'), and the locks are
 *     the process's (Qthreads keeps pthread mutexes in the file): one
 *     process at a time uses a map.
 *   - a stream is chosen by the caller's shepherd in a task, else by a
 *     number given to each thread (Qthreads: pthread_self() % streams);
 *     an existing file keeps the streams it was made with.
 *   - the frees check the block (a pointer that is not a block of the
 *     map, a dynamic block freed twice) and report misuse on stderr and
 *     in cantus_last_error() instead of corrupting the map; a static item
 *     freed twice is not detected (undefined, as in Qthreads).
 * Static items are 8-byte aligned (their size rounded up to 8; Qthreads
 * 4); dynamic blocks 16-byte aligned. After qalloc_cleanup every map
 * handle and block is invalid: a call with an old handle is refused
 * (NULL, or reported) unless a map loaded since got the same handle
 * (undefined). A static free list found overwritten (a freed item
 * written to) is dropped, its items lost, rather than followed.
 *
 * Contexts: anywhere; no runtime is needed (as in Qthreads).
 */
#ifndef QTHREAD_QALLOC_H_CANTUS
#define QTHREAD_QALLOC_H_CANTUS

#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#include <sys/types.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mapinfo_s mapinfo_t;
typedef struct dynmapinfo_s dynmapinfo_t;

/* Load the static map in `filename`, or make one of filesize bytes for
 * items of itemsize bytes with `streams` free lists if the file is new or
 * empty. NULL on error. */
void *qalloc_makestatmap(off_t filesize, void *addr, const char *filename,
                         size_t itemsize, size_t streams);
/* As qalloc_makestatmap for a dynamic map. */
void *qalloc_makedynmap(off_t filesize, void *addr, const char *filename,
                        size_t streams);
/* Load an existing map of either kind as its header describes it. */
void *qalloc_loadmap(const char *filename);
/* Write every loaded map to its file. */
void qalloc_checkpoint(void);
/* Checkpoint, then unmap every loaded map. */
void qalloc_cleanup(void);

/* An item of a static map; NULL if it is full. */
void *qalloc_statmalloc(mapinfo_t *map);
/* A block of at least size bytes of a dynamic map; NULL if none is free. */
void *qalloc_dynmalloc(dynmapinfo_t *map, size_t size);
/* qalloc_statmalloc (size ignored) or qalloc_dynmalloc, by map's kind. */
void *qalloc_malloc(void *map, size_t size);

/* Give a static item back to its map. */
void qalloc_statfree(void *block, mapinfo_t *map);
/* Give a dynamic block back to its map. */
void qalloc_dynfree(void *block, dynmapinfo_t *map);
/* qalloc_statfree or qalloc_dynfree, by map's kind. */
void qalloc_free(void *block, void *map);

#ifdef __cplusplus
}
#endif

#endif
