/*
 * test_qthread_state.c - what a Chapel-style shim asks of the runtime's
 * state (issue 18): qthread_readstate with every selector of Qthreads'
 * enum introspective_state, outside and inside tasks, after the
 * environment set the shepherds and the stack size; qthread_cacheline;
 * qtimer_fastrand; qthread_fork_copyargs_to (the bundle copied, run on
 * the shepherd); qthread_migrate_to (a forked task moves; main does not).
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <qthread/cacheline.h>
#include <qthread/qthread.h>
#include <qthread/qtimer.h>
#include <stdlib.h>

#include "check.h"

#define UNKNOWN ((size_t)-1)

static aligned_t in_task(void *arg)
{
    (void)arg;
    size_t shep = qthread_shep();
    int ok = 1;
    ok &= qthread_readstate(CURRENT_SHEPHERD) == shep;
    ok &= qthread_readstate(CURRENT_UNIQUE_WORKER) == shep;
    ok &= qthread_readstate(CURRENT_WORKER) == 0;
    ok &= qthread_readstate(BUSYNESS) >= 1 && qthread_readstate(BUSYNESS) != UNKNOWN;
    ok &= qthread_readstate(NODE_BUSYNESS) >= 1; /* this task runs */
    ok &= qthread_readstate(WORKER_OCCUPATION) >= 1;
    ok &= qthread_readstate(CURRENT_TEAM) == 1;
    ok &= qthread_readstate(PARENT_TEAM) == 0;
    return (aligned_t)ok;
}

/* An argument bundle, copied at the fork. */
struct bundle {
    int a[5];
    double x;
};

static aligned_t bundle_sum(void *arg)
{
    const struct bundle *b = arg;
    int s = 0;
    for (int i = 0; i < 5; i++) s += b->a[i];
    return (aligned_t)(s + (int)b->x);
}

static aligned_t migrate(void *arg)
{
    (void)arg;
    qthread_shepherd_id_t here = qthread_shep();
    qthread_shepherd_id_t other = (qthread_shepherd_id_t)((here + 1) % qthread_num_shepherds());
    int ok = qthread_migrate_to(here) == QTHREAD_SUCCESS;
    ok &= qthread_shep() == here; /* it stayed */
    ok &= qthread_migrate_to(other) == QTHREAD_SUCCESS;
    ok &= qthread_shep() == other; /* it moved, and goes on there */
    ok &= qthread_migrate_to(100) == QTHREAD_BADARGS;
    return (aligned_t)ok;
}

int main(void)
{
    /* What a shim writes before qthread_initialize; a malformed value is
     * refused, naming the variable, and nothing starts. */
    const char *bad[][2] = {{"QT_SPINCOUNT", "lots"},      {"QTHREAD_AFFINITY", "maybe"},
                            {"QT_GUARD_PAGES", "2"},       {"QT_STEAL_RATIO", "-1"},
                            {"QTHREAD_WORKER_UNIT", "cpu"}, {"QT_INFO", "loud"}};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        CHECK_EQ(qthread_initialize(), QTHREAD_BADARGS);
        CHECK(strstr(cantus_last_error(), bad[i][0] + (bad[i][0][2] == '_' ? 3 : 8)) != NULL);
        CHECK_EQ(qthread_num_shepherds(), 0);
        unsetenv(bad[i][0]);
    }
    setenv("QT_HWPAR", "2", 1);
    setenv("QTHREAD_STACK_SIZE", "262144", 1);
    setenv("QT_SPINCOUNT", "0", 1);
    setenv("QTHREAD_AFFINITY", "no", 1);
    setenv("QT_GUARD_PAGES", "yes", 1);
    setenv("QT_STEAL_RATIO", "8", 1);
    setenv("QTHREAD_WORKER_UNIT", "core", 1);
    setenv("QT_INFO", "0", 1);
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);

    CHECK_EQ(qthread_readstate(TOTAL_SHEPHERDS), 2);
    CHECK_EQ(qthread_readstate(ACTIVE_SHEPHERDS), qthread_num_shepherds());
    CHECK_EQ(qthread_readstate(TOTAL_WORKERS), qthread_num_workers());
    CHECK_EQ(qthread_readstate(ACTIVE_WORKERS), 2);
    CHECK_EQ(qthread_readstate(STACK_SIZE), 262144);
    CHECK(qthread_readstate(RUNTIME_DATA_SIZE) > 0);
    /* in the main task: shepherd 0's, counted busy there */
    CHECK_EQ(qthread_readstate(CURRENT_SHEPHERD), 0);
    CHECK_EQ(qthread_readstate(CURRENT_WORKER), 0);
    CHECK(qthread_readstate(BUSYNESS) >= 1 && qthread_readstate(BUSYNESS) != UNKNOWN);
    CHECK_EQ(qthread_readstate(CURRENT_TEAM), 1);
    CHECK_EQ(qthread_readstate(PARENT_TEAM), 0);
    CHECK(qthread_readstate((enum introspective_state)99) == UNKNOWN);
    /* inside tasks */
    aligned_t ret[8];
    for (int i = 0; i < 8; i++) CHECK_EQ(qthread_fork(in_task, NULL, &ret[i]), QTHREAD_SUCCESS);
    for (int i = 0; i < 8; i++) {
        qthread_readFF(NULL, &ret[i]);
        CHECK_EQ(ret[i], 1);
    }

    /* copied bundles: the caller's is overwritten at once */
    struct bundle b = {{1, 2, 3, 4, 5}, 10.0};
    aligned_t sums[4];
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(qthread_fork_copyargs_to(bundle_sum, &b, sizeof b, &sums[i],
                                          (qthread_shepherd_id_t)i),
                 QTHREAD_SUCCESS);
        b.a[0] += 100; /* the task has its own copy */
    }
    for (int i = 0; i < 4; i++) {
        qthread_readFF(NULL, &sums[i]);
        CHECK_EQ(sums[i], 25 + 100 * i);
    }
    CHECK_EQ(qthread_fork_copyargs_to(bundle_sum, NULL, sizeof b, &sums[0], 0), QTHREAD_BADARGS);

    aligned_t moved = 0;
    CHECK_EQ(qthread_fork(migrate, NULL, &moved), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &moved);
    CHECK_EQ(moved, 1);
    CHECK_EQ(qthread_migrate_to(0), QTHREAD_NOT_ALLOWED); /* main does not move */

    int line = qthread_cacheline();
    CHECK(line >= 16 && line <= 1024 && (line & (line - 1)) == 0);

    unsigned long first = qtimer_fastrand(), differ = 0;
    for (int i = 0; i < 1000; i++) differ += qtimer_fastrand() != first;
    CHECK(differ >= 999);

    qthread_finalize();
    /* no runtime */
    CHECK_EQ(qthread_readstate(TOTAL_SHEPHERDS), 0);
    return DONE();
}
