/*
 * qthread/barrier.h - Qthreads' barrier on cantus: a reusable barrier for
 * a fixed number of participants (tasks or outside threads). Names and
 * semantics as in Qthreads: qt_barrier_enter returns in each participant
 * once all max_threads participants of the round have entered; the
 * barrier is then ready for the next round.
 *
 * Waiting suspends only the waiting task (its worker runs other tasks);
 * an outside thread blocks as a thread. So a barrier may have more
 * participants than there are shepherds. The last participant to enter
 * releases the others and goes on without waiting. REGION_BARRIER and
 * LOOP_BARRIER behave the same.
 *
 * Contexts: a task or an outside thread, after qthread_initialize. The
 *           functions return nothing, as in Qthreads: misuse (no runtime,
 *           a NULL barrier, a size of 0, an id not below the size) is
 *           reported on stderr and in cantus_last_error(), and the call
 *           does nothing (qt_barrier_create returns NULL).
 * Undefined: more participants in a round than the size (the extra one
 *           counts for the next round); using a destroyed barrier.
 * Left out (not declared): qt_get_barrier / qt_set_barrier (a barrier
 *           pointer in each Qthreads task's record, which Qthreads leaves
 *           unset in new tasks; cantus's tasks have no such field), and
 *           qt_global_barrier* (not in Qthreads' installed headers: its
 *           internal qt_barrier.h declares them, for its own use).
 */
#ifndef QTHREAD_BARRIER_H_CANTUS
#define QTHREAD_BARRIER_H_CANTUS

#include "qthread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { REGION_BARRIER, LOOP_BARRIER } qt_barrier_btype;
typedef enum { UPLOCK, DOWNLOCK, BOTHLOCKS } qt_barrier_dtype;
typedef struct qt_barrier_s qt_barrier_t;

/* A barrier for max_threads participants per round; NULL on error. */
qt_barrier_t *qt_barrier_create(size_t max_threads, qt_barrier_btype type);
/* Enter the barrier and wait for the round to fill. */
void qt_barrier_enter(qt_barrier_t *b);
/* As qt_barrier_enter; id (the participant's number, below the size) is
 * checked and otherwise unused (Qthreads' log barrier places by it). */
void qt_barrier_enter_id(qt_barrier_t *b, size_t id);
/* Set the number of participants per round; if that many already wait,
 * they are released. */
void qt_barrier_resize(qt_barrier_t *b, size_t size);
/* Free the barrier; refused (message on stderr) while anyone waits in it. */
void qt_barrier_destroy(qt_barrier_t *b);
/* Debugging: print the barrier's state on stdout (one line: its size and
 * how many entered the current round, read without the lock). Qthreads
 * prints its log barrier's lock words, selected by dt; cantus's barrier
 * has none, so every dt prints the same line. A NULL b or another dt is
 * reported on stderr and in cantus_last_error(). */
void qt_barrier_dump(qt_barrier_t *b, qt_barrier_dtype dt);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_BARRIER_H_CANTUS */
