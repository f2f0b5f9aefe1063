/*
 * qthread/qtimer.h - Qthreads' interval timer on cantus (the monotonic
 * clock). Names and semantics as in Qthreads. Needs no runtime; a timer
 * is used by one thread at a time.
 *
 *     qtimer_t t = qtimer_create();
 *     qtimer_start(t); work(); qtimer_stop(t);
 *     printf("%f s\n", qtimer_secs(t));
 *     qtimer_destroy(t);
 *
 * Misuse (a NULL timer; qtimer_secs before a start and a stop after it,
 * which Qthreads leaves undefined) is reported on stderr and in
 * cantus_last_error(); qtimer_secs then returns 0.0.
 * qtimer_fastrand: a cheap pseudo-random number (xorshift64* per thread,
 * seeded from the clock; Qthreads hashes the clock). Not for cryptography.
 */
#ifndef QTHREAD_QTIMER_H_CANTUS
#define QTHREAD_QTIMER_H_CANTUS

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qtimer_s *qtimer_t;

unsigned long qtimer_fastrand(void);

/* A new timer, not started; NULL if out of memory. */
qtimer_t qtimer_create(void);
/* Record the start time (forgetting an earlier stop). */
void qtimer_start(qtimer_t timer);
/* Record the stop time. */
void qtimer_stop(qtimer_t timer);
/* Seconds from the start to the stop. */
double qtimer_secs(qtimer_t timer);
/* Free the timer (NULL: nothing). */
void qtimer_destroy(qtimer_t timer);

/* The monotonic clock's time in seconds, from an arbitrary origin (as in
 * Qthreads): the difference of two calls is the time between them. */
double qtimer_wtime(void);
/* The monotonic clock's resolution in seconds (clock_getres). */
double qtimer_res(void);

#ifdef __cplusplus
}
#endif

#endif /* QTHREAD_QTIMER_H_CANTUS */
