/*
 * qthread/sinc.h - Qthreads' sinc (a counting and reducing
 * synchronization object) on cantus. Names and semantics as in Qthreads:
 * a sinc expects a number of submissions; qt_sinc_wait blocks until all
 * have arrived, then copies out the reduction (by `op`, starting from the
 * initial value) of the values submitted. With sizeof_value 0 it only
 * counts (op and values are ignored).
 *
 * Contexts: a task or an outside thread (which blocks as a thread), after
 *           qthread_initialize. The functions return nothing, as in
 *           Qthreads: misuse (no runtime, a NULL or never-initialised
 *           sinc, more submissions than expected, a sinc with
 *           sizeof_value > 0 but no op or initial value) is reported on
 *           stderr and in cantus_last_error(), and the call does nothing
 *           (qt_sinc_create returns NULL).
 * Memory: a counting sinc (sizeof_value 0) lives entirely in the
 *           caller's qt_sinc_t (its count) and, while submissions are
 *           outstanding, an entry in cantus's FEB table: qt_sinc_init
 *           allocates nothing, so a program that never calls qt_sinc_fini
 *           on it (Qthreads' own test programs do that) leaks nothing. A
 *           reducing sinc (sizeof_value > 0) allocates its values, freed
 *           by qt_sinc_fini / qt_sinc_destroy (as in Qthreads).
 * Undefined: op blocking or calling cantus (it runs under the sinc's lock);
 *           destroying, re-initialising or reusing the memory of a sinc
 *           while submissions or waits are in progress (once qt_sinc_wait
 *           returned, the memory may be reused at once); copying a
 *           qt_sinc_t (its address is its identity).
 * Left out: qt_sinc_tmpdata (not declared): in Qthreads, a pointer to the
 *           calling worker's partial value inside a reducing sinc, which
 *           submissions on that worker combine into; cantus's reducing
 *           sinc keeps one shared value under its lock instead, so there
 *           is no per-worker slot to hand out.
 */
#ifndef QT_SINC_H_CANTUS
#define QT_SINC_H_CANTUS

#include <stdalign.h> /* as Qthreads' sinc.h */

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*qt_sinc_op_f)(void *tgt, const void *src);

/* 24 opaque bytes, as in Qthreads (qt_sinc_init uses the caller's). */
typedef union qt_opaque_sinc_s {
    uint8_t opaque_data[24];
    aligned_t align_;
} qt_sinc_t;

/* Initialise *sinc for `expect` submissions of sizeof_value bytes each
 * (sinc must be 8-byte aligned, as a qt_sinc_t is). */
void qt_sinc_init(qt_sinc_t *sinc, size_t sizeof_value, const void *initial_value,
                  qt_sinc_op_f op, size_t expect);
/* Allocate and initialise a sinc; NULL on error. */
qt_sinc_t *qt_sinc_create(size_t sizeof_value, const void *initial_value,
                          qt_sinc_op_f op, size_t expect);
/* Restore the initial value and expect `expect` submissions; refused
 * (message on stderr) while submissions are outstanding. */
void qt_sinc_reset(qt_sinc_t *sinc, size_t expect);
/* Free what qt_sinc_init allocated (nothing for a counting sinc) and mark
 * the sinc dead; refused (message on stderr) while anyone waits on it. */
void qt_sinc_fini(qt_sinc_t *sinc);
/* Free a sinc from qt_sinc_create; refused while anyone waits on it. */
void qt_sinc_destroy(qt_sinc_t *sinc);
/* Expect `count` more submissions (also while someone waits). */
void qt_sinc_expect(qt_sinc_t *sinc, size_t count);
/* Submit once; value (sizeof_value bytes) is reduced in if not NULL.
 * One submission more than expected is reported and ignored (if it races
 * with the last expected one, its value may already be reduced in). */
void qt_sinc_submit(qt_sinc_t *sinc, const void *value);
/* Wait for every expected submission; copy the result to target (if the
 * sinc reduces and target is not NULL). */
void qt_sinc_wait(qt_sinc_t *sinc, void *target);

#ifdef __cplusplus
}
#endif

#endif /* QT_SINC_H_CANTUS */
