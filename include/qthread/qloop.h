/*
 * qthread/qloop.h - Qthreads' parallel loops on cantus: qt_loop and
 * qt_loop_balance, same names and semantics as Qthreads. Both return when
 * every task they spawned has returned; one cantus end count covers all
 * of a loop's tasks.
 *
 * Contexts: a task or an outside thread, after qthread_initialize. They
 *           return nothing, as in Qthreads: a NULL func or no runtime is
 *           reported on stderr and in cantus_last_error(), and nothing runs.
 * Left out: every other qt_loop* / qt_loopaccum* function, the loop queues
 *           and the qt_*_sum/prod/max/min helpers (not declared).
 */
#ifndef QTHREAD_QLOOP_H_CANTUS
#define QTHREAD_QLOOP_H_CANTUS

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*qt_loop_f)(size_t startat, size_t stopat, void *arg);

/* One task per iteration: func(i, i + 1, argptr) for i in [start, stop). */
void qt_loop(size_t start, size_t stop, qt_loop_f func, void *argptr);

/* One task per shepherd (at most one per iteration), [start, stop) split
 * into near-equal contiguous ranges: func(startat, stopat, argptr). */
void qt_loop_balance(size_t start, size_t stop, qt_loop_f func, void *argptr);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_QLOOP_H_CANTUS */
