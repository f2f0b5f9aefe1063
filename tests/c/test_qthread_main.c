/*
 * test_qthread_main.c - the Qthreads semantics its own tests rely on
 * (issue 30): the starting thread as the main task of shepherd 0 (and
 * running shepherd 0's tasks while it waits, yields or sleeps), forks
 * numbered from 2 as they ask, tasks forked to a shepherd run there, forked
 * tasks that migrate (and those that may not), blocking actions before
 * qthread_initialize, queue lengths that count waiting tasks, declared
 * (recursive) locks and trylock, qthread_fork_precond_simple and
 * qthread_flushsc.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <qthread/io.h>
#include <qthread/qloop.h>
#include <qthread/qthread.h>
#include <pthread.h>
#include <string.h>

#include "check.h"

#define SHEPHERDS 3

static int contains(const char *s, const char *part) { return strstr(s, part) != NULL; }

/* ---- ids: 2, 3, ... drawn at a forked task's first qthread_id call ---- */

static aligned_t my_id(void *arg)
{
    (void)arg;
    return qthread_id();
}

static aligned_t no_id(void *arg)
{
    (void)arg;
    return 7;
}

static void fork_ids(void)
{
    aligned_t r[8];
    for (int i = 0; i < 8; i++) CHECK_EQ(qthread_fork(my_id, NULL, &r[i]), QTHREAD_SUCCESS);
    for (int i = 0; i < 8; i++) qthread_readFF(NULL, &r[i]);
    /* distinct, from 2, and (nothing else asks meanwhile) eight in a row */
    aligned_t lo = r[0], hi = r[0];
    int distinct = 1;
    for (int i = 0; i < 8; i++) {
        if (r[i] < lo) lo = r[i];
        if (r[i] > hi) hi = r[i];
        for (int j = 0; j < i; j++) distinct &= r[i] != r[j];
    }
    CHECK(distinct);
    CHECK(lo >= 2);
    CHECK_EQ(hi - lo, 7);
    /* a task that never asks draws no id (as in Qthreads): the next one
     * to ask gets the next number */
    aligned_t a, b, c;
    qthread_fork(my_id, NULL, &a);
    qthread_readFF(NULL, &a);
    qthread_fork(no_id, NULL, &b);
    qthread_readFF(NULL, &b);
    qthread_fork(my_id, NULL, &c);
    qthread_readFF(NULL, &c);
    CHECK_EQ(b, 7);
    CHECK_EQ(c, a + 1);
    CHECK_EQ(qthread_id(), 1);
}

/* ---- the main task ---- */

static void main_task(void)
{
    CHECK_EQ(qthread_shep(), 0);
    CHECK_EQ(qthread_readstate(CURRENT_SHEPHERD), 0);
    CHECK_EQ(qthread_readstate(CURRENT_WORKER), 0);
    CHECK_EQ(qthread_readstate(CURRENT_TEAM), QTHREAD_DEFAULT_TEAM_ID);
    CHECK_EQ(qthread_readstate(PARENT_TEAM), QTHREAD_NON_TEAM_ID);
    /* main counts as running on shepherd 0 */
    CHECK(qthread_readstate(WORKER_OCCUPATION) >= 1);
    CHECK(qthread_readstate(BUSYNESS) >= 1);
    /* away from its shepherd inside a blocking action, back after */
    qt_begin_blocking_action();
    CHECK_EQ(qthread_shep(), NO_SHEPHERD);
    CHECK_EQ(qthread_id(), 1);
    qt_end_blocking_action();
    CHECK_EQ(qthread_shep(), 0);
}

/* ---- placement and migration ---- */

static aligned_t my_shep(void *arg)
{
    (void)arg;
    return qthread_shep();
}

struct move {
    qthread_shepherd_id_t to;
    qthread_shepherd_id_t before, after, after_yield;
    int rc;
    aligned_t id_before, id_after;
};

static aligned_t migrant(void *arg)
{
    struct move *m = arg;
    m->before = qthread_shep();
    m->id_before = qthread_id();
    unsigned char *tl = qthread_get_tasklocal(16);
    tl[0] = 77;
    m->rc = qthread_migrate_to(m->to);
    m->after = qthread_shep();
    m->id_after = qthread_id();
    /* blocks and yields where it is now, keeping its storage */
    qthread_yield();
    m->after_yield = qthread_shep();
    unsigned char *again = qthread_get_tasklocal(16);
    return again == tl && again[0] == 77;
}

static void loop_body_migrates(size_t start, size_t stop, void *arg)
{
    (void)stop;
    int *rc = arg;
    rc[start] = qthread_migrate_to((qthread_shepherd_id_t)((start + 1) % SHEPHERDS));
}

static void placement_and_migration(void)
{
    /* a task forked to a shepherd runs there, every time */
    int placed = 1;
    for (int round = 0; round < 20; round++) {
        aligned_t r[SHEPHERDS];
        for (int s = 0; s < SHEPHERDS; s++)
            CHECK_EQ(qthread_fork_to(my_shep, NULL, &r[s], (qthread_shepherd_id_t)s),
                     QTHREAD_SUCCESS);
        for (int s = 0; s < SHEPHERDS; s++) {
            qthread_readFF(NULL, &r[s]);
            placed &= r[s] == (aligned_t)s;
        }
    }
    CHECK(placed);

    /* a forked task moves to each other shepherd and goes on there */
    int moved = 1;
    for (int from = 0; from < SHEPHERDS; from++) {
        for (int to = 0; to < SHEPHERDS; to++) {
            struct move m = {.to = (qthread_shepherd_id_t)to};
            aligned_t ok;
            qthread_fork_to(migrant, &m, &ok, (qthread_shepherd_id_t)from);
            qthread_readFF(NULL, &ok);
            moved &= ok == 1 && m.rc == QTHREAD_SUCCESS && m.before == from && m.after == to &&
                     m.after_yield == to && m.id_before == m.id_after;
        }
    }
    CHECK(moved);

    /* a disabled shepherd: no task is forked to it, none moves there */
    CHECK_EQ(qthread_disable_shepherd(2), QTHREAD_SUCCESS);
    aligned_t r;
    qthread_fork_to(my_shep, NULL, &r, 2);
    qthread_readFF(NULL, &r);
    CHECK(r != 2);
    struct move m = {.to = 2};
    qthread_fork_to(migrant, &m, &r, 0);
    qthread_readFF(NULL, &r);
    CHECK(m.rc == QTHREAD_SUCCESS && m.after == 0);
    qthread_enable_shepherd(2);

    /* the main task, qt_loop bodies and a bad shepherd do not move */
    CHECK_EQ(qthread_migrate_to(1), QTHREAD_NOT_ALLOWED);
    CHECK(contains(cantus_last_error(), "outside a task"));
    int rc[4] = {0};
    qt_loop(0, 4, loop_body_migrates, rc);
    int refused = 1;
    for (int i = 0; i < 4; i++) refused &= rc[i] == QTHREAD_NOT_ALLOWED;
    CHECK(refused);
    m.to = SHEPHERDS + 1;
    qthread_fork(migrant, &m, &r);
    qthread_readFF(NULL, &r);
    CHECK_EQ(m.rc, QTHREAD_BADARGS);
}

/* ---- queues count waiting tasks ---- */

static qthread_queue_t queue;

static aligned_t joiner(void *arg)
{
    (void)arg;
    return qthread_queue_join(queue) == QTHREAD_SUCCESS;
}

static void queues(void)
{
    queue = qthread_queue_create(QTHREAD_QUEUE_MULTI_JOIN_LENGTH, 0);
    CHECK(queue != NULL);
    aligned_t r[10];
    for (int i = 0; i < 10; i++) qthread_fork(joiner, NULL, &r[i]);
    while (qthread_queue_length(queue) != 10) qthread_yield();
    /* every counted joiner waits: only main runs (a joiner counts itself
     * blocked before it enters the queue) */
    CHECK_EQ(qthread_readstate(WORKER_OCCUPATION), 1);
    CHECK_EQ(qthread_queue_release_one(queue), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_queue_length(queue), 9);
    CHECK_EQ(qthread_queue_release_all(queue), QTHREAD_SUCCESS);
    int joined = 0;
    for (int i = 0; i < 10; i++) {
        qthread_readFF(NULL, &r[i]);
        joined += (int)r[i];
    }
    CHECK_EQ(joined, 10);
    CHECK_EQ(qthread_queue_destroy(queue), QTHREAD_SUCCESS);
}

/* ---- declared locks ---- */

static aligned_t rlock;
static long counter;

static void twice_locked(size_t start, size_t stop, void *arg)
{
    (void)arg;
    for (size_t i = start; i < stop; i++) {
        qthread_lock(&rlock);
        qthread_lock(&rlock); /* recursive: counts */
        counter++;
        qthread_unlock(&rlock);
        qthread_unlock(&rlock);
    }
}

static aligned_t try_other(void *arg)
{
    (void)arg;
    int busy = qthread_trylock(&rlock) == QTHREAD_OPFAIL;
    int not_owner = qthread_unlock(&rlock) == QTHREAD_OPFAIL;
    return busy && not_owner;
}

static void locks(void)
{
    CHECK_EQ(qthread_lock_init(&rlock, true), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_lock_init(&rlock, true), QTHREAD_OPFAIL); /* declared already */
    counter = 0;
    qt_loop_balance(0, 4000, twice_locked, NULL);
    CHECK_EQ(counter, 4000);
    /* held by main: another task neither takes nor releases it */
    CHECK_EQ(qthread_trylock(&rlock), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_trylock(&rlock), QTHREAD_SUCCESS); /* again: counts */
    aligned_t ok;
    qthread_fork(try_other, NULL, &ok);
    qthread_readFF(NULL, &ok);
    CHECK_EQ(ok, 1);
    CHECK_EQ(qthread_unlock(&rlock), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_unlock(&rlock), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_lock_destroy(&rlock), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_lock_destroy(&rlock), QTHREAD_OPFAIL); /* not declared now */
    /* a plain address: not reentrant, trylock fails while held */
    aligned_t plain = 0;
    CHECK_EQ(qthread_trylock(&plain), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_trylock(&plain), QTHREAD_OPFAIL);
    CHECK_EQ(qthread_unlock(&plain), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_lock_init(NULL, false), QTHREAD_BADARGS);
}

/* ---- precond_simple, flushsc ---- */

static aligned_t done_count;
static aligned_t count_done(void *arg)
{
    (void)arg;
    return qthread_incr(&done_count, 1);
}

static void simple_forks(void)
{
    aligned_t gate = 0, r;
    qthread_empty(&gate);
    CHECK_EQ(qthread_fork_precond_simple(count_done, NULL, &r, 1, &gate), QTHREAD_SUCCESS);
    for (int i = 0; i < 100; i++)
        CHECK_EQ(qthread_fork_precond_simple(count_done, NULL, NULL, 0), QTHREAD_SUCCESS);
    qthread_flushsc();
    while (qthread_incr(&done_count, 0) != 100) qthread_yield();
    qthread_fill(&gate); /* now the gated one runs */
    qthread_readFF(NULL, &r);
    CHECK_EQ(done_count, 101);
}

/* ---- main runs shepherd 0: its waits run shepherd 0's tasks ---- */

static pthread_t main_thread;

/* 1 if the task runs on the thread that called qthread_initialize. */
static aligned_t on_main_thread(void *arg)
{
    (void)arg;
    return pthread_equal(pthread_self(), main_thread) ? 1 : 0;
}

static aligned_t hosted_gate;
static aligned_t hosted_flag;

/* Placed on shepherd 0: blocks until main fills the gate, then says
 * where it resumed. */
static aligned_t gated_on_zero(void *arg)
{
    (void)arg;
    int before = pthread_equal(pthread_self(), main_thread);
    qthread_readFF(NULL, &hosted_gate);
    return before && pthread_equal(pthread_self(), main_thread) ? 1 : 0;
}

static aligned_t raise_flag(void *arg)
{
    (void)arg;
    qthread_incr(&hosted_flag, 1);
    return pthread_equal(pthread_self(), main_thread) ? 1 : 0;
}

static int refused_elsewhere;

static void *finalize_elsewhere(void *arg)
{
    (void)arg;
    qthread_finalize(); /* refused: not the thread that started it */
    refused_elsewhere = contains(cantus_last_error(), "another thread");
    return NULL;
}

static void main_runs_shepherd_zero(void)
{
    main_thread = pthread_self();
    /* A task placed on shepherd 0 runs on main's thread, in main's wait
     * (a readFF of its result). */
    for (int i = 0; i < 100; i++) {
        aligned_t r = 7;
        CHECK_EQ(qthread_fork_to(on_main_thread, NULL, &r, 0), QTHREAD_SUCCESS);
        qthread_readFF(NULL, &r);
        CHECK_EQ(r, 1);
    }
    /* A task of shepherd 0 that blocks is woken and resumed there, on
     * main's thread, in main's next wait. */
    aligned_t g = 0;
    qthread_empty(&hosted_gate);
    CHECK_EQ(qthread_fork_to(gated_on_zero, NULL, &g, 0), QTHREAD_SUCCESS);
    qthread_yield(); /* it starts, and blocks on the gate */
    qthread_fill(&hosted_gate);
    qthread_readFF(NULL, &g);
    CHECK_EQ(g, 1);
    /* main's yield runs shepherd 0's ready tasks: a loop of yields sees
     * a task placed there run, on its own thread. */
    aligned_t y = 7;
    hosted_flag = 0;
    CHECK_EQ(qthread_fork_to(raise_flag, NULL, &y, 0), QTHREAD_SUCCESS);
    while (qthread_incr(&hosted_flag, 0) == 0) qthread_yield();
    qthread_readFF(NULL, &y);
    CHECK_EQ(y, 1);
    /* ... and so does its sleep. */
    aligned_t z = 7;
    hosted_flag = 0;
    CHECK_EQ(qthread_fork_to(raise_flag, NULL, &z, 0), QTHREAD_SUCCESS);
    CHECK_EQ(cantus_sleep_ns(20 * 1000 * 1000), CANTUS_OK);
    CHECK_EQ(qthread_incr(&hosted_flag, 0), 1);
    qthread_readFF(NULL, &z);
    CHECK_EQ(z, 1);
    /* Forks from main that nobody steals before main waits run on main's
     * thread too; whichever thread ran each, all are done. */
    aligned_t rets[64];
    for (int i = 0; i < 64; i++) CHECK_EQ(qthread_fork(on_main_thread, NULL, &rets[i]), QTHREAD_SUCCESS);
    for (int i = 0; i < 64; i++) {
        qthread_readFF(NULL, &rets[i]);
        CHECK(rets[i] == 0 || rets[i] == 1);
    }
    /* Only the thread that started the runtime may stop it: it runs
     * shepherd 0. Another thread's qthread_finalize is refused. */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, finalize_elsewhere, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(cantus_is_running(), 1);
    CHECK(refused_elsewhere);
}

int main(void)
{
    /* blocking actions balance before the runtime exists */
    CHECK_EQ(qthread_shep(), NO_SHEPHERD);
    qt_begin_blocking_action();
    qt_end_blocking_action();
    setenv("QT_NUM_SHEPHERDS", "3", 1);
    unsetenv("CANTUS_WORKERS");
    unsetenv("QTHREAD_HWPAR");
    unsetenv("QT_HWPAR");
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_num_shepherds(), SHEPHERDS);
    fork_ids();
    main_task();
    placement_and_migration();
    queues();
    locks();
    simple_forks();
    main_runs_shepherd_zero();
    qthread_finalize();
    CHECK_EQ(qthread_shep(), NO_SHEPHERD);
    CHECK_EQ(qthread_id(), QTHREAD_NON_TASK_ID);
    return DONE();
}
