/*
 * qthread/io.h - blocking system calls in tasks, as Qthreads has them.
 *
 *     qt_begin_blocking_action();
 *     n = read(fd, buf, len);          (any call that blocks its thread)
 *     qt_end_blocking_action();
 *
 * qt_begin_blocking_action - the caller is about to block in a system
 *   call. A task forked through this C ABI (qthread_fork*, qthread_spawn,
 *   qt_loop*, cantus_spawn, cantus_coforall, cantus_call, task lists)
 *   leaves its shepherd for a blocking-call thread of the runtime and runs
 *   there until qt_end_blocking_action: its shepherd runs other tasks
 *   meanwhile, so the call may wait for something another task of the
 *   same shepherd is to do (on one shepherd too). Blocking-call threads
 *   are started as needed, up to CANTUS_MAX_THREADS less the workers, and
 *   reused; when none can be had, the call is made in place.
 *   Any other caller (an outside thread; a task that cantus does not run
 *   through a C body, such as an inline remote call) makes the call in
 *   place: its thread blocks in it.
 *   Either way, until the end the caller counts as outside activity (see
 *   cantus_outside_activity_begin in <cantus.h>): the deadlock detector
 *   does not fire while tasks wait for what the call will bring.
 * qt_end_blocking_action - the call is done: a task that left continues
 *   on its own shepherd (tasks never move between shepherds). Blocking
 *   actions nest: only the outermost end brings the task back. Without a
 *   begin it does nothing and prints the reason on stderr.
 *
 * Between the two calls a task that left runs on another OS thread, as an
 * outside thread does (full/empty waits block that thread), but as
 * itself: qthread_id() is its id, qthread_get_tasklocal its own storage
 * (which it may also grow there), and what it forks joins its team;
 * qthread_shep(), qthread_worker() and readstate answer NO_SHEPHERD /
 * NO_WORKER (it is on no shepherd meanwhile). errno goes with
 * the task both ways, so errno after qt_end_blocking_action is the system
 * call's. Thread-local variables (errno among them) read in the same C
 * function before the begin and again before the end may be the other
 * thread's (a compiler may keep their address): read them in between, or
 * in another function, as with Qthreads.
 * A task that returns inside a blocking action is brought back (with a
 * message on stderr), as if it had called qt_end_blocking_action.
 */
#ifndef QTHREAD_IO_H_CANTUS
#define QTHREAD_IO_H_CANTUS

#ifdef __cplusplus
extern "C" {
#endif

void qt_begin_blocking_action(void);
void qt_end_blocking_action(void);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_IO_H_CANTUS */
