/*
 * test_qthread_io.c - blocking system calls in tasks (issue 18):
 * qt_begin_blocking_action / qt_end_blocking_action on ONE shepherd. A
 * task waiting in poll(2) on a pipe leaves its shepherd, so the task
 * that writes the pipe runs; the task comes back to its shepherd with
 * errno; actions nest; qt_loop bodies overlap their calls; a task that
 * returns inside an action is brought back; outside threads act in place.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <qthread/io.h>
#include <qthread/qloop.h>
#include <qthread/qthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static int fds[2];

struct reader {
    int got;      /* bytes read, or -1 on a 10 s timeout */
    int same;     /* back on its shepherd, as the same task */
    int away_ok;  /* inside: no shepherd, but its own id */
    int errno_ok; /* errno from the call survives the end */
    int tls_ok;   /* its task-local storage, inside and back */
};

static aligned_t reader(void *arg)
{
    struct reader *r = arg;
    qthread_shepherd_id_t shep = qthread_shep();
    unsigned id = qthread_id();
    char buf[16];
    unsigned char *tl = qthread_get_tasklocal(8);
    tl[0] = 42;
    qt_begin_blocking_action();
    r->away_ok = qthread_shep() == NO_SHEPHERD && qthread_id() == id;
    /* the task's storage is reachable away, and may grow there */
    unsigned char *away_tl = qthread_get_tasklocal(8);
    int tls = away_tl == tl && away_tl[0] == 42;
    unsigned char *big = qthread_get_tasklocal(1024);
    tls = tls && big != NULL && big[0] == 42 && qthread_size_tasklocal() == 1024;
    big[1023] = 7;
    struct pollfd p = {fds[0], POLLIN, 0};
    int ready = poll(&p, 1, 10000);
    r->got = ready == 1 ? (int)read(fds[0], buf, sizeof buf) : -1;
    errno = 0;
    ssize_t bad = read(-1, buf, 1); /* fails: EBADF */
    qt_end_blocking_action();
    r->errno_ok = bad == -1 && errno == EBADF;
    r->same = qthread_shep() == shep && qthread_id() == id;
    unsigned char *home_tl = qthread_get_tasklocal(8);
    r->tls_ok = tls && home_tl[0] == 42 && home_tl[1023] == 7 &&
                qthread_size_tasklocal() == 1024;
    return 0;
}

static aligned_t writer(void *arg)
{
    (void)arg;
    return (aligned_t)write(fds[1], "hello", 5);
}

static aligned_t nested(void *arg)
{
    (void)arg;
    qthread_shepherd_id_t shep = qthread_shep();
    qt_begin_blocking_action();
    qt_begin_blocking_action();
    qt_end_blocking_action();
    int still_away = qthread_shep() == NO_SHEPHERD; /* inner end: still out */
    qt_end_blocking_action();
    return (aligned_t)(still_away && qthread_shep() == shep);
}

static aligned_t forgetful(void *arg)
{
    (void)arg;
    qt_begin_blocking_action();
    return 17; /* returns inside the action: cantus brings it back */
}

static aligned_t inflight, most;

static void napping_body(size_t start, size_t stop, void *arg)
{
    (void)start;
    (void)stop;
    (void)arg;
    qt_begin_blocking_action();
    aligned_t now = __atomic_add_fetch(&inflight, 1, __ATOMIC_ACQ_REL);
    aligned_t m = __atomic_load_n(&most, __ATOMIC_ACQUIRE);
    while (now > m && !__atomic_compare_exchange_n(&most, &m, now, 0, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_ACQUIRE)) {
    }
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    __atomic_sub_fetch(&inflight, 1, __ATOMIC_ACQ_REL);
    qt_end_blocking_action();
}

int main(void)
{
    setenv("QT_HWPAR", "1", 1);
    unsetenv("CANTUS_WORKERS"); /* one shepherd is the point */
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_num_shepherds(), 1);
    CHECK_EQ(pipe(fds), 0);

    /* the reader first, then the writer, on the one shepherd */
    struct reader r = {0, 0, 0, 0, 0};
    aligned_t rr, wr;
    CHECK_EQ(qthread_fork(reader, &r, &rr), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_fork(writer, NULL, &wr), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &rr);
    qthread_readFF(NULL, &wr);
    CHECK_EQ(wr, 5);
    CHECK_EQ(r.got, 5); /* -1: timed out, the writer never ran */
    CHECK(r.same);
    CHECK(r.away_ok);
    CHECK(r.errno_ok);
    CHECK(r.tls_ok);

    aligned_t n;
    CHECK_EQ(qthread_fork(nested, NULL, &n), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &n);
    CHECK_EQ(n, 1);

    /* qt_loop bodies: their calls overlap although one shepherd runs them */
    qt_loop(0, 6, napping_body, NULL);
    CHECK(most >= 2);
    CHECK_EQ(inflight, 0);

    /* a task that forgets the end is brought back; the shepherd goes on */
    aligned_t f;
    CHECK_EQ(qthread_fork(forgetful, NULL, &f), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &f);
    CHECK_EQ(f, 17);
    CHECK_EQ(qthread_fork(writer, NULL, &wr), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &wr);
    CHECK_EQ(wr, 5);

    /* an outside thread acts in place; an end without a begin is ignored */
    qt_begin_blocking_action();
    char buf[8];
    CHECK_EQ(read(fds[0], buf, sizeof buf), 5);
    qt_end_blocking_action();
    qt_end_blocking_action(); /* prints why on stderr */

    qthread_finalize();
    close(fds[0]);
    close(fds[1]);
    return DONE();
}
