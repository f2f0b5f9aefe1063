/*
 * test_qthread_sched.c - scheduler control, queues and teams (issue 18):
 * qthread_disable_shepherd / enable_shepherd, qthread_queue_* (FIFO
 * release, lengths, caps, errors, an outside thread as a waiter), and
 * teams: qthread_fork_new_team / new_subteam and their syncvar, copyargs
 * and _to forms, qt_team_id / qt_team_parent_id, and the leader's result
 * delivered only when its whole team (and subteams) finished.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <qthread/qthread.h>
#include <qthread/sinc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static void nap_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits (up to 20 s) until *word reaches at least n; 1 if it did. */
static int wait_for(volatile aligned_t *word, aligned_t n)
{
    double end = now_s() + 20;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < n) {
        if (now_s() > end) return 0;
        nap_us(100);
    }
    return 1;
}

/* ---- shepherds ---- */

static aligned_t running;     /* spinners running now */
static aligned_t spin_target; /* how many must run at once */

/* Holds its worker until spin_target spinners run at once (so they run
 * on distinct shepherds); returns its shepherd, or 999 on a timeout. */
static aligned_t spinner(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&running, 1, __ATOMIC_ACQ_REL);
    double end = now_s() + 20;
    while (__atomic_load_n(&running, __ATOMIC_ACQUIRE) < spin_target)
        if (now_s() > end) return 999;
    return qthread_shep();
}

static void test_shepherds(void)
{
    CHECK_EQ(qthread_num_shepherds(), 3);
    CHECK_EQ(qthread_disable_shepherd(0), QTHREAD_NOT_ALLOWED);
    CHECK(strstr(cantus_last_error(), "shepherd 0") != NULL);
    CHECK_EQ(qthread_disable_shepherd(7), QTHREAD_BADARGS);
    CHECK_EQ(qthread_disable_shepherd(1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_disable_shepherd(1), QTHREAD_SUCCESS); /* again: fine */
    CHECK_EQ(qthread_num_shepherds(), 2);
    CHECK_EQ(qthread_num_workers(), 3);
    CHECK_EQ(qthread_readstate(ACTIVE_SHEPHERDS), 2);
    CHECK_EQ(qthread_readstate(ACTIVE_WORKERS), 2);
    CHECK_EQ(qthread_readstate(TOTAL_SHEPHERDS), 3);
    nap_us(20000); /* a worker sees the change at its next step */

    /* two spinners, one aimed at the disabled shepherd: both run, on the
     * enabled shepherds 0 and 2 */
    aligned_t r[3];
    running = 0;
    spin_target = 2;
    CHECK_EQ(qthread_fork_to(spinner, NULL, &r[0], 1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_fork(spinner, NULL, &r[1]), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &r[0]);
    qthread_readFF(NULL, &r[1]);
    CHECK(r[0] != 999 && r[1] != 999);
    CHECK(r[0] != 1 && r[1] != 1 && r[0] != r[1]);

    /* enabled again: three spinners need all three shepherds at once */
    qthread_enable_shepherd(1);
    CHECK_EQ(qthread_num_shepherds(), 3);
    running = 0;
    spin_target = 3;
    for (int i = 0; i < 3; i++) CHECK_EQ(qthread_fork(spinner, NULL, &r[i]), QTHREAD_SUCCESS);
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        qthread_readFF(NULL, &r[i]);
        if (r[i] < 3) seen[r[i]]++;
        else printf("spinner %d: %llu\n", i, (unsigned long long)r[i]);
    }
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
}

/* ---- queues ---- */

static qthread_queue_t queue;
static aligned_t released; /* joiners past the queue */
static aligned_t order[8];

static aligned_t joiner(void *arg)
{
    int rc = qthread_queue_join(queue);
    aligned_t k = __atomic_fetch_add(&released, 1, __ATOMIC_ACQ_REL);
    order[k] = (aligned_t)(uintptr_t)arg;
    return (aligned_t)rc;
}

static aligned_t release_main(void *arg)
{
    qthread_queue_t q = arg;
    double end = now_s() + 20;
    while (qthread_queue_length(q) < 1)
        if (now_s() > end) return 1;
        else qthread_yield();
    return (aligned_t)qthread_queue_release_one(q);
}

static void test_queues(void)
{
    CHECK(qthread_queue_create(0x80, 0) == NULL);
    CHECK(strstr(cantus_last_error(), "flags") != NULL);
    CHECK(qthread_queue_create(QTHREAD_QUEUE_CAPPED, 0) == NULL);
    CHECK_EQ(qthread_queue_join(NULL), QTHREAD_BADARGS);
    CHECK_EQ(qthread_queue_length(NULL), 0);

    queue = qthread_queue_create(QTHREAD_QUEUE_MULTI_JOIN_LENGTH, 0);
    CHECK(queue != NULL);
    CHECK_EQ(qthread_queue_length(queue), 0);
    CHECK_EQ(qthread_queue_release_one(queue), QTHREAD_OPFAIL); /* none waits */
    CHECK_EQ(qthread_queue_release_all(queue), QTHREAD_SUCCESS);

    /* five joiners, joined in a known order */
    aligned_t ret[5];
    for (aligned_t i = 0; i < 5; i++) {
        CHECK_EQ(qthread_fork(joiner, (void *)(uintptr_t)i, &ret[i]), QTHREAD_SUCCESS);
        double end = now_s() + 20;
        while (qthread_queue_length(queue) < i + 1 && now_s() < end) nap_us(100);
    }
    CHECK_EQ(qthread_queue_length(queue), 5);
    CHECK_EQ(qthread_queue_destroy(queue), QTHREAD_NOT_ALLOWED); /* kept */
    CHECK_EQ(released, 0);
    CHECK_EQ(qthread_queue_release_one(queue), QTHREAD_SUCCESS);
    CHECK(wait_for(&released, 1));
    CHECK_EQ(qthread_queue_release_one(queue), QTHREAD_SUCCESS);
    CHECK(wait_for(&released, 2));
    CHECK_EQ(order[0], 0); /* oldest first */
    CHECK_EQ(order[1], 1);
    CHECK_EQ(qthread_queue_length(queue), 3);
    nap_us(5000);
    CHECK_EQ(released, 2); /* the others still wait */
    CHECK_EQ(qthread_queue_release_all(queue), QTHREAD_SUCCESS);
    for (int i = 0; i < 5; i++) {
        qthread_readFF(NULL, &ret[i]);
        CHECK_EQ(ret[i], QTHREAD_SUCCESS);
    }
    CHECK_EQ(released, 5);
    CHECK_EQ(qthread_queue_length(queue), 0);

    /* an outside thread (main) waits; a task releases it */
    aligned_t rel;
    CHECK_EQ(qthread_fork(release_main, queue, &rel), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_queue_join(queue), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &rel);
    CHECK_EQ(rel, QTHREAD_SUCCESS);
    CHECK_EQ(qthread_queue_destroy(queue), QTHREAD_SUCCESS);

    /* a capped queue admits `length` waiters; a further join fails at once */
    queue = qthread_queue_create(QTHREAD_QUEUE_CAPPED, 2);
    released = 0;
    for (aligned_t i = 0; i < 2; i++) {
        CHECK_EQ(qthread_fork(joiner, (void *)(uintptr_t)i, &ret[i]), QTHREAD_SUCCESS);
        double end = now_s() + 20;
        while (qthread_queue_length(queue) < i + 1 && now_s() < end) nap_us(100);
    }
    CHECK_EQ(qthread_queue_join(queue), QTHREAD_OPFAIL);
    CHECK(strstr(cantus_last_error(), "capped") != NULL);
    CHECK_EQ(qthread_queue_release_all(queue), QTHREAD_SUCCESS);
    for (int i = 0; i < 2; i++) qthread_readFF(NULL, &ret[i]);
    CHECK_EQ(released, 2);
    CHECK_EQ(qthread_queue_destroy(queue), QTHREAD_SUCCESS);
}

/* ---- teams ---- */

#define MEMBERS 6
static aligned_t members_done, sub_done, wrong_team;
static unsigned leader_team, sub_team, sub_parent;

static aligned_t member(void *arg)
{
    unsigned team = (unsigned)(uintptr_t)arg;
    if (qt_team_id() != team || qthread_readstate(CURRENT_TEAM) != team)
        __atomic_add_fetch(&wrong_team, 1, __ATOMIC_ACQ_REL);
    nap_us(2000); /* finish well after the leader returned */
    __atomic_add_fetch(&members_done, 1, __ATOMIC_ACQ_REL);
    return 0;
}

static aligned_t sub_member(void *arg)
{
    (void)arg;
    if (qt_team_id() != sub_team || qt_team_parent_id() != leader_team)
        __atomic_add_fetch(&wrong_team, 1, __ATOMIC_ACQ_REL);
    nap_us(5000);
    __atomic_add_fetch(&sub_done, 1, __ATOMIC_ACQ_REL);
    return 0;
}

static aligned_t sub_leader(void *arg)
{
    (void)arg;
    sub_team = qt_team_id();
    sub_parent = qt_team_parent_id();
    for (int i = 0; i < 3; i++) qthread_fork(sub_member, NULL, NULL);
    return 5;
}

static aligned_t leader(void *arg)
{
    (void)arg;
    leader_team = qt_team_id();
    if (qt_team_parent_id() != 0 || qthread_readstate(PARENT_TEAM) != 0)
        __atomic_add_fetch(&wrong_team, 1, __ATOMIC_ACQ_REL);
    for (int i = 0; i < MEMBERS; i++)
        qthread_fork(member, (void *)(uintptr_t)leader_team, NULL); /* no ret */
    qthread_fork_new_subteam(sub_leader, NULL, NULL);
    return 42; /* delivered once the team and the subteam finished */
}

struct team_args {
    int a, b;
};

static aligned_t copy_leader(void *arg)
{
    const struct team_args *t = arg;
    return (aligned_t)(t->a + t->b + (qt_team_id() >= 2 ? 1000 : 0));
}

static aligned_t team_of(void *arg)
{
    (void)arg;
    return qt_team_id();
}

static void test_teams(void)
{
    CHECK_EQ(qt_team_id(), 1); /* the starter thread: default team */
    CHECK_EQ(qt_team_parent_id(), 0);
    aligned_t t1 = 0, t2 = 0;
    CHECK_EQ(qthread_fork(team_of, NULL, &t1), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &t1);
    CHECK_EQ(t1, 1); /* ordinary tasks: the default team */

    aligned_t ret;
    CHECK_EQ(qthread_fork_new_team(leader, NULL, &ret), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &ret);
    CHECK_EQ(ret, 42);
    CHECK_EQ(members_done, MEMBERS); /* the whole team had finished */
    CHECK_EQ(sub_done, 3);           /* and the subteam */
    CHECK_EQ(wrong_team, 0);
    CHECK(leader_team >= 2);
    CHECK(sub_team >= 2 && sub_team != leader_team);
    CHECK_EQ(sub_parent, leader_team);

    /* two new teams get distinct ids */
    CHECK_EQ(qthread_fork_new_team(team_of, NULL, &t1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_fork_new_team_to(team_of, NULL, &t2, 1), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &t1);
    qthread_readFF(NULL, &t2);
    CHECK(t1 >= 2 && t2 >= 2 && t1 != t2);

    /* a subteam of the default team has parent 1 */
    CHECK_EQ(qthread_fork_new_subteam(team_of, NULL, &t1), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &t1);
    CHECK(t1 >= 2);

    syncvar_t sv = SYNCVAR_STATIC_INITIALIZER;
    uint64_t v = 0;
    CHECK_EQ(qthread_fork_syncvar_new_team(team_of, NULL, &sv), QTHREAD_SUCCESS);
    qthread_syncvar_readFF(&v, &sv);
    CHECK(v >= 2);
    CHECK_EQ(qthread_fork_syncvar_new_subteam(team_of, NULL, &sv), QTHREAD_SUCCESS);
    qthread_syncvar_readFF(&v, &sv);
    CHECK(v >= 2);

    struct team_args args = {3, 4};
    CHECK_EQ(qthread_fork_copyargs_new_team(copy_leader, &args, sizeof args, &t1), 0);
    args.a = 100; /* the task has its copy */
    CHECK_EQ(qthread_fork_copyargs_new_subteam(copy_leader, &args, sizeof args, &t2), 0);
    qthread_readFF(NULL, &t1);
    qthread_readFF(NULL, &t2);
    CHECK_EQ(t1, 1007);
    CHECK_EQ(t2, 1104);

    CHECK_EQ(qthread_spawn(team_of, NULL, 0, &t1, 0, NULL, NO_SHEPHERD,
                           QTHREAD_SPAWN_NEW_TEAM | QTHREAD_SPAWN_NEW_SUBTEAM),
             QTHREAD_BADARGS);
    /* accepted, without effect (as in Qthreads 1.23): the caller's team */
    aligned_t mine = qt_team_id();
    CHECK_EQ(qthread_spawn(team_of, NULL, 0, &t1, 0, NULL, NO_SHEPHERD, QTHREAD_SPAWN_PARENT),
             QTHREAD_SUCCESS);
    qthread_readFF(NULL, &t1);
    CHECK_EQ(t1, mine);
}

/* Plain forks in a loop, from main (shepherd 0's hosted worker) and from
 * a forked task, into return words and into a sinc: each runs exactly
 * once and delivers its own result, whatever batches the other workers
 * steal them in (src/sched/deque/README.md, "Batch steals"). */
#define FORKS 50000
static aligned_t fork_rets[FORKS];
static aligned_t fork_runs[FORKS];

static aligned_t mark_fork(void *arg)
{
    size_t i = (size_t)arg;
    __atomic_fetch_add(&fork_runs[i], 1, __ATOMIC_RELAXED);
    return i + 1;
}

/* The number of forks that ran once and gave their result (FORKS: all). */
static aligned_t forks_each_once(void *how)
{
    memset(fork_runs, 0, sizeof fork_runs);
    if (how == NULL) {
        for (size_t i = 0; i < FORKS; i++)
            qthread_fork(mark_fork, (void *)i, &fork_rets[i]);
        for (size_t i = 0; i < FORKS; i++)
            qthread_readFF(NULL, &fork_rets[i]);
    } else {
        qt_sinc_t s;
        qt_sinc_init(&s, 0, NULL, NULL, FORKS);
        for (size_t i = 0; i < FORKS; i++) {
            fork_rets[i] = i + 1;
            qthread_spawn(mark_fork, (void *)i, 0, &s, 0, NULL, NO_SHEPHERD,
                          QTHREAD_SPAWN_RET_SINC_VOID);
        }
        qt_sinc_wait(&s, NULL);
        qt_sinc_fini(&s);
    }
    aligned_t good = 0;
    for (size_t i = 0; i < FORKS; i++)
        good += fork_runs[i] == 1 && fork_rets[i] == i + 1;
    return good;
}

static void test_fork_loops(void)
{
    static int sinc_mode;
    for (int mode = 0; mode < 2; mode++) {
        void *how = mode ? (void *)&sinc_mode : NULL;
        CHECK_EQ(forks_each_once(how), FORKS);
        aligned_t r;
        CHECK_EQ(qthread_fork(forks_each_once, how, &r), QTHREAD_SUCCESS);
        qthread_readFF(&r, &r);
        CHECK_EQ(r, FORKS);
    }
}

int main(void)
{
    setenv("QT_HWPAR", "3", 1);
    unsetenv("CANTUS_WORKERS"); /* it would override QT_HWPAR */
    CHECK_EQ(qthread_disable_shepherd(1), QTHREAD_NOT_ALLOWED); /* no runtime */
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    test_fork_loops();
    test_shepherds();
    test_queues();
    test_teams();
    qthread_finalize();
    return DONE();
}
