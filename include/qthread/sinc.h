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
 * Undefined: op blocking or calling cantus (it runs under the sinc's lock);
 *           destroying a sinc while submissions or waits are in progress.
 * Left out: qt_sinc_tmpdata.
 */
#ifndef QT_SINC_H_CANTUS
#define QT_SINC_H_CANTUS

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

/* Initialise *sinc for `expect` submissions of sizeof_value bytes each. */
void qt_sinc_init(qt_sinc_t *sinc, size_t sizeof_value, const void *initial_value,
                  qt_sinc_op_f op, size_t expect);
/* Allocate and initialise a sinc; NULL on error. */
qt_sinc_t *qt_sinc_create(size_t sizeof_value, const void *initial_value,
                          qt_sinc_op_f op, size_t expect);
/* Restore the initial value and expect `expect` submissions; refused
 * (message on stderr) while submissions are outstanding. */
void qt_sinc_reset(qt_sinc_t *sinc, size_t expect);
/* Free what qt_sinc_init allocated. */
void qt_sinc_fini(qt_sinc_t *sinc);
/* Free a sinc from qt_sinc_create. */
void qt_sinc_destroy(qt_sinc_t *sinc);
/* Expect `count` more submissions (also while someone waits). */
void qt_sinc_expect(qt_sinc_t *sinc, size_t count);
/* Submit once; value (sizeof_value bytes) is reduced in if not NULL. */
void qt_sinc_submit(qt_sinc_t *sinc, const void *value);
/* Wait for every expected submission; copy the result to target (if the
 * sinc reduces and target is not NULL). */
void qt_sinc_wait(qt_sinc_t *sinc, void *target);

#ifdef __cplusplus
}
#endif

#endif /* QT_SINC_H_CANTUS */
