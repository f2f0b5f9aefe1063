/*
 * test_qthread_more.c - the Qthreads functions once left out of
 * qthread.h: the syncvar forks' _to/_simple/precond forms, fork_net,
 * incr32/64/_xx, disable/enable_worker, num_workers_local,
 * DBL64TODBL60/DBL60TODBL64, worker_unique/local, syncvar_incrF,
 * qthread_spinlock_*, qtimer_wtime/res, the qt_loop _sv/_dc/_aligned
 * variants, qt_loopaccum_balance*, qt_qsort, qt_barrier_dump, and the
 * system calls of qthread/qt_syscalls.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_num_blocked */
#include <pthread.h>
#include <qthread/barrier.h>
#include <qthread/qloop.h>
#include <qthread/qthread.h>
#include <qthread/qt_syscalls.h>
#include <qthread/qtimer.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "wait_blocked.h"

/* ---- forks ---------------------------------------------------------- */

static aligned_t plus_one(void *arg) { return (aligned_t)(uintptr_t)arg + 1; }

static aligned_t my_shep(void *arg)
{
    (void)arg;
    return qthread_shep();
}

struct pair {
    aligned_t a, b;
};

/* Sums a copied pair, then clobbers the copy (the caller's is unchanged). */
static aligned_t sum_pair(void *arg)
{
    struct pair *p = (struct pair *)arg;
    aligned_t s = p->a + p->b;
    p->a = p->b = 0;
    return s;
}

static void forks(void)
{
    uint64_t v = 0;
    syncvar_t r = SYNCVAR_INITIALIZER;
    CHECK_EQ(qthread_fork_syncvar_to(plus_one, (void *)41, &r, 1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &r), QTHREAD_SUCCESS);
    CHECK_EQ(v, 42);
    /* each shepherd in turn, and one past the last (taken modulo) */
    for (qthread_shepherd_id_t s = 0; s <= qthread_num_shepherds(); s++) {
        syncvar_t rs = SYNCVAR_INITIALIZER;
        CHECK_EQ(qthread_fork_syncvar_to(my_shep, NULL, &rs, s), QTHREAD_SUCCESS);
        CHECK_EQ(qthread_syncvar_readFF(&v, &rs), QTHREAD_SUCCESS);
        CHECK_EQ(v, s % qthread_num_shepherds());
    }
    CHECK_EQ(qthread_fork_syncvar_to(NULL, NULL, &r, 0), QTHREAD_BADARGS);

    aligned_t rn = 0;
    CHECK_EQ(qthread_fork_net(plus_one, (void *)99, &rn), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(&rn, &rn), QTHREAD_SUCCESS);
    CHECK_EQ(rn, 100);
    CHECK_EQ(qthread_fork_net(NULL, NULL, &rn), QTHREAD_BADARGS);

    struct pair p = {20, 22};
    CHECK_EQ(qthread_fork_syncvar_copyargs_simple(sum_pair, &p, sizeof p, &r), QTHREAD_SUCCESS);
    p.a = 1000; /* the task has its own copy */
    CHECK_EQ(qthread_syncvar_readFF(&v, &r), QTHREAD_SUCCESS);
    CHECK_EQ(v, 42);
    p.a = 20;
    CHECK_EQ(qthread_fork_syncvar_copyargs_simple(sum_pair, NULL, 8, &r), QTHREAD_BADARGS);

    CHECK_EQ(qthread_fork_syncvar_copyargs_to(sum_pair, &p, sizeof p, &r, 1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &r), QTHREAD_SUCCESS);
    CHECK_EQ(v, 42);
    CHECK_EQ(p.a, 20);

    /* copyargs_precond: waits for its (aligned_t) preconditions */
    aligned_t g1 = 0, g2 = 0;
    CHECK_EQ(qthread_empty(&g1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_empty(&g2), QTHREAD_SUCCESS);
    syncvar_t rp = SYNCVAR_INITIALIZER;
    CHECK_EQ(qthread_fork_copyargs_precond(sum_pair, &p, sizeof p, &rp, 2, &g1, &g2),
             QTHREAD_SUCCESS);
    p.b = 0; /* copied at the fork */
    CHECK(wait_blocked(1));
    sleep_ms(20);
    CHECK_EQ(qthread_syncvar_status(&rp), 0); /* still waiting */
    CHECK_EQ(qthread_writeF_const(&g1, 1), QTHREAD_SUCCESS);
    sleep_ms(20);
    CHECK_EQ(qthread_syncvar_status(&rp), 0);
    CHECK_EQ(qthread_writeF_const(&g2, 2), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &rp), QTHREAD_SUCCESS);
    CHECK_EQ(v, 42);
    /* the array form, and none at all */
    aligned_t *list[2] = {&g1, &g2};
    CHECK_EQ(qthread_fork_copyargs_precond(plus_one, (void *)6, 0, &rp, -2, list),
             QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &rp), QTHREAD_SUCCESS);
    CHECK_EQ(v, 7);
    CHECK_EQ(qthread_fork_copyargs_precond(plus_one, (void *)8, 0, &rp, 0), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &rp), QTHREAD_SUCCESS);
    CHECK_EQ(v, 9);
}

/* ---- atomics and the 60-bit double macros ---------------------------- */

static uint32_t c32;
static uint64_t c64;

static aligned_t add_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        qthread_incr32(&c32, 1);
        qthread_incr64(&c64, 3);
    }
    return 0;
}

static void atomics(void)
{
    uint32_t x32 = 5;
    uint64_t x64 = UINT64_C(1) << 40;
    CHECK_EQ(qthread_incr32(&x32, 3), 5);
    CHECK_EQ(x32, 8);
    CHECK_EQ(qthread_incr32(&x32, (uint32_t)-8), 8);
    CHECK_EQ(x32, 0);
    CHECK(qthread_incr64(&x64, 1) == UINT64_C(1) << 40);
    CHECK(x64 == (UINT64_C(1) << 40) + 1);
    CHECK_EQ(qthread_incr_xx(&x32, 7, 4), 0);
    CHECK_EQ(x32, 7);
    CHECK_EQ(qthread_incr_xx(&x32, -8, 4), 7);
    CHECK(x32 == UINT32_MAX);
    CHECK(qthread_incr_xx(&x32, 1, 4) == (int64_t)UINT32_MAX); /* zero-extended */
    CHECK(qthread_incr_xx(&x64, 10, 8) == (int64_t)((UINT64_C(1) << 40) + 1));
    CHECK(x64 == (UINT64_C(1) << 40) + 11);

    aligned_t rets[8];
    for (int i = 0; i < 8; i++)
        CHECK_EQ(qthread_fork(add_many, NULL, &rets[i]), QTHREAD_SUCCESS);
    for (int i = 0; i < 8; i++)
        CHECK_EQ(qthread_readFF(NULL, &rets[i]), QTHREAD_SUCCESS);
    CHECK_EQ(c32, 8000);
    CHECK_EQ(c64, 24000);

    /* DBL64TODBL60 drops the 4 lowest mantissa bits, so values with few
     * mantissa bits survive exactly; the result fits a syncvar_t. */
    double in = 3.25, out = 0;
    uint64_t i60 = 0;
    DBL64TODBL60(in, i60);
    CHECK(i60 < (UINT64_C(1) << 60));
    syncvar_t sv = SYNCVAR_INITIALIZER;
    CHECK_EQ(qthread_syncvar_writeF_const(&sv, i60), QTHREAD_SUCCESS);
    uint64_t back = 0;
    CHECK_EQ(qthread_syncvar_readFF(&back, &sv), QTHREAD_SUCCESS);
    DBL60TODBL64(back, out);
    CHECK(out == 3.25);
    in = -1e100;
    DBL64TODBL60(in, i60);
    DBL60TODBL64(i60, out);
    CHECK(out < -0.9999999e100 && out > -1.0000001e100);
}

/* ---- workers ---------------------------------------------------------- */

static aligned_t worker_ids(void *arg)
{
    (void)arg;
    qthread_shepherd_id_t s1 = 999, s2 = 999;
    qthread_worker_id_t u = qthread_worker_unique(&s1);
    qthread_worker_id_t l = qthread_worker_local(&s2);
    int ok = s1 == qthread_shep() && s2 == qthread_shep() && u == qthread_shep() + 1 &&
             l == 0 && qthread_worker_unique(NULL) == u && qthread_worker_local(NULL) == 0;
    return ok;
}

static aligned_t shep_ok_task(void *arg)
{
    (void)arg;
    return (aligned_t)qthread_shep_ok();
}

static void *outside(void *arg)
{
    qthread_shepherd_id_t s = 7;
    int *ok = (int *)arg;
    *ok = qthread_worker_unique(&s) == NO_WORKER && qthread_worker_local(&s) == NO_WORKER &&
          s == 7 && qthread_shep_ok() == QTHREAD_PTHREAD_ERROR;
    return NULL;
}

static void workers(void)
{
    aligned_t rets[12];
    for (int i = 0; i < 12; i++)
        CHECK_EQ(qthread_fork_to(worker_ids, NULL, &rets[i], (qthread_shepherd_id_t)(i % 3)),
                 QTHREAD_SUCCESS);
    for (int i = 0; i < 12; i++) {
        aligned_t v = 0;
        CHECK_EQ(qthread_readFF(&v, &rets[i]), QTHREAD_SUCCESS);
        CHECK_EQ(v, 1);
    }
    /* main is shepherd 0's worker 0: unique id 1, as in Qthreads */
    qthread_shepherd_id_t s = 5;
    CHECK_EQ(qthread_worker_unique(&s), 1);
    CHECK_EQ(s, 0);
    CHECK_EQ(qthread_worker_local(NULL), 0);
    /* worker control: worker w is shepherd w's only worker */
    CHECK_EQ(qthread_num_workers_local(0), 1);
    CHECK_EQ(qthread_num_workers_local(2), 1);
    CHECK_EQ(qthread_disable_worker(0), QTHREAD_NOT_ALLOWED);
    CHECK_EQ(qthread_disable_worker(99), QTHREAD_BADARGS);
    CHECK_EQ(qthread_disable_worker(2), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_num_shepherds(), 2);
    aligned_t r2 = 0;
    CHECK_EQ(qthread_fork_to(my_shep, NULL, &r2, 2), QTHREAD_SUCCESS); /* goes elsewhere */
    CHECK_EQ(qthread_readFF(&r2, &r2), QTHREAD_SUCCESS);
    CHECK(r2 != 2);
    qthread_enable_worker(2);
    CHECK_EQ(qthread_num_shepherds(), 3);

    /* shepherd queries */
    CHECK_EQ(qthread_shep_ok(), 1); /* main: shepherd 0 */
    qthread_shepherd_id_t sh = 2;
    qthread_shep_next(&sh);
    CHECK_EQ(sh, 0);
    qthread_shep_prev(&sh);
    CHECK_EQ(sh, 2);
    qthread_shep_prev_local(&sh);
    CHECK_EQ(sh, 1);
    qthread_shep_next_local(&sh);
    CHECK_EQ(sh, 2);
    sh = 9;
    qthread_shep_next(&sh); /* no such shepherd: untouched */
    CHECK_EQ(sh, 9);
    qthread_shep_next(NULL);
    CHECK_EQ(qthread_distance(0, 2), 0);
    CHECK_EQ(qthread_distance(1, 1), 0);
    CHECK_EQ(qthread_distance(0, 3), QTHREAD_BADARGS);
    CHECK(qthread_sorted_sheps() == NULL);
    CHECK(qthread_sorted_sheps_remote(1) == NULL);
    CHECK_EQ(qthread_disable_shepherd(1), QTHREAD_SUCCESS);
    aligned_t okr[2];
    CHECK_EQ(qthread_fork_to(shep_ok_task, NULL, &okr[0], 2), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(&okr[0], &okr[0]), QTHREAD_SUCCESS);
    CHECK_EQ(okr[0], 1);
    qthread_enable_shepherd(1);
    pthread_t t;
    int ok = 0;
    CHECK_EQ(pthread_create(&t, NULL, outside, &ok), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(ok);
}

/* ---- syncvar_incrF ---------------------------------------------------- */

static syncvar_t counter = SYNCVAR_STATIC_INITIALIZER;

static aligned_t incr_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 500; i++)
        qthread_syncvar_incrF(&counter, 2);
    return 0;
}

static syncvar_t gate = SYNCVAR_STATIC_EMPTY_INITIALIZER;

static aligned_t read_gate(void *arg)
{
    (void)arg;
    uint64_t v = 0;
    qthread_syncvar_readFF(&v, &gate);
    return v;
}

static void incrF(void)
{
    /* full: adds, stays full, returns the new value */
    syncvar_t a = SYNCVAR_STATIC_INITIALIZE_TO(10);
    CHECK_EQ(qthread_syncvar_incrF(&a, 5), 15);
    CHECK_EQ(qthread_syncvar_status(&a), 1);
    uint64_t v = 0;
    CHECK_EQ(qthread_syncvar_readFF(&v, &a), QTHREAD_SUCCESS);
    CHECK_EQ(v, 15);
    /* modulo 2^60 */
    CHECK_EQ(qthread_syncvar_writeF_const(&a, (UINT64_C(1) << 60) - 1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_incrF(&a, 3), 2);
    /* empty, nobody waiting: adds, stays empty (as in Qthreads) */
    syncvar_t e = SYNCVAR_STATIC_EMPTY_INITIALIZE_TO(7);
    CHECK_EQ(qthread_syncvar_incrF(&e, 1), 8);
    CHECK_EQ(qthread_syncvar_status(&e), 0);
    CHECK_EQ(qthread_syncvar_writeEF_const(&e, 100), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_incrF(&e, 1), 101);
    /* empty with waiting readers: filled, and they see the new value */
    aligned_t r1 = 0, r2 = 0;
    long blocked = cantus_num_blocked();
    CHECK_EQ(qthread_fork(read_gate, NULL, &r1), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_fork(read_gate, NULL, &r2), QTHREAD_SUCCESS);
    CHECK(wait_blocked(blocked + 2));
    CHECK_EQ(qthread_syncvar_incrF(&gate, 33), 33);
    CHECK_EQ(qthread_readFF(&v, &r1), QTHREAD_SUCCESS);
    CHECK_EQ(v, 33);
    CHECK_EQ(qthread_readFF(&v, &r2), QTHREAD_SUCCESS);
    CHECK_EQ(v, 33);
    CHECK_EQ(qthread_syncvar_status(&gate), 1);
    /* 16 tasks adding at once lose nothing */
    aligned_t rets[16];
    for (int i = 0; i < 16; i++)
        CHECK_EQ(qthread_fork(incr_many, NULL, &rets[i]), QTHREAD_SUCCESS);
    for (int i = 0; i < 16; i++)
        CHECK_EQ(qthread_readFF(NULL, &rets[i]), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &counter), QTHREAD_SUCCESS);
    CHECK_EQ(v, 16 * 500 * 2);
    /* errors: (uint64_t) of the code */
    CHECK(qthread_syncvar_incrF(NULL, 1) == (uint64_t)(int64_t)QTHREAD_BADARGS);
    CHECK(qthread_syncvar_incrF((syncvar_t *)((char *)&a + 1), 1) ==
          (uint64_t)(int64_t)QTHREAD_BADARGS);
}

/* ---- spinlocks -------------------------------------------------------- */

static qthread_spinlock_t plain = QTHREAD_MUTEX_INITIALIZER;
static qthread_spinlock_t rec = QTHREAD_RECURSIVE_MUTEX_INITIALIZER;
static long unguarded; /* updated non-atomically under the lock */
static long inside;    /* how many tasks are in the critical section */
static int overlap;

static void critical(void)
{
    if (__sync_fetch_and_add(&inside, 1) != 0)
        overlap = 1;
    long v = unguarded;
    if ((v & 7) == 0)
        qthread_yield(); /* let others try while it is held */
    unguarded = v + 1;
    __sync_fetch_and_sub(&inside, 1);
}

static aligned_t plain_locker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        if (i % 2) {
            while (qthread_spinlock_trylock(&plain) != 1)
                qthread_yield();
        } else if (qthread_spinlock_lock(&plain) != QTHREAD_SUCCESS) {
            return 0;
        }
        critical();
        if (qthread_spinlock_unlock(&plain) != QTHREAD_SUCCESS)
            return 0;
    }
    return 1;
}

static aligned_t rec_locker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        if (qthread_spinlock_lock(&rec) != QTHREAD_SUCCESS)
            return 0;
        if (qthread_spinlock_lock(&rec) != QTHREAD_SUCCESS) /* again: counted */
            return 0;
        if (qthread_spinlock_trylock(&rec) != QTHREAD_SUCCESS) /* counted too */
            return 0;
        critical();
        for (int k = 0; k < 3; k++)
            if (qthread_spinlock_unlock(&rec) != QTHREAD_SUCCESS)
                return 0;
    }
    return 1;
}

static aligned_t try_other(void *arg)
{
    qthread_spinlock_t *l = (qthread_spinlock_t *)arg;
    /* held by main: a recursive trylock fails, unlock by a non-holder too */
    return qthread_spinlock_trylock(l) == QTHREAD_OPFAIL &&
           qthread_spinlock_unlock(l) == QTHREAD_OPFAIL;
}

static aligned_t try_plain(void *arg)
{
    return (aligned_t)qthread_spinlock_trylock((qthread_spinlock_t *)arg);
}

static void spinlocks(void)
{
    CHECK(sizeof(qthread_spinlock_t) == 24);
    qthread_spinlock_t l;
    CHECK_EQ(qthread_spinlock_init(&l, false), QTHREAD_SUCCESS);
    CHECK_EQ(l.state.s, QTHREAD_SPINLOCK_IS_NOT_RECURSIVE);
    /* plain trylock answers 1 / 0, as in Qthreads */
    CHECK_EQ(qthread_spinlock_trylock(&l), 1);
    CHECK_EQ(qthread_spinlock_trylock(&l), 0);
    aligned_t r = 0;
    CHECK_EQ(qthread_fork(try_plain, &l, &r), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(&r, &r), QTHREAD_SUCCESS);
    CHECK_EQ(r, 0);
    CHECK_EQ(qthread_spinlock_unlock(&l), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_spinlock_unlock(&l), QTHREAD_OPFAIL); /* not held */
    CHECK_EQ(qthread_fork(try_plain, &l, &r), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(&r, &r), QTHREAD_SUCCESS);
    CHECK_EQ(r, 1); /* the task took it ... */
    CHECK_EQ(qthread_spinlock_unlock(&l), QTHREAD_SUCCESS); /* ... a plain lock has no owner */
    CHECK_EQ(qthread_spinlock_destroy(&l), QTHREAD_SUCCESS);

    CHECK_EQ(qthread_spinlock_init(&l, true), QTHREAD_SUCCESS);
    CHECK_EQ(l.state.s, QTHREAD_SPINLOCK_IS_RECURSIVE);
    CHECK_EQ(qthread_spinlock_unlock(&l), QTHREAD_SUCCESS); /* free: nothing to do */
    CHECK_EQ(qthread_spinlock_lock(&l), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_spinlock_trylock(&l), QTHREAD_SUCCESS);
    CHECK_EQ(l.state.count, 2);
    CHECK_EQ(qthread_fork(try_other, &l, &r), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(&r, &r), QTHREAD_SUCCESS);
    CHECK_EQ(r, 1);
    CHECK_EQ(qthread_spinlock_unlock(&l), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_spinlock_unlock(&l), QTHREAD_SUCCESS);
    CHECK_EQ(l.state.count, 0);
    CHECK_EQ(l.state.s, QTHREAD_SPINLOCK_IS_RECURSIVE);
    CHECK_EQ(qthread_fork(try_plain, &l, &r), QTHREAD_SUCCESS); /* free again */
    CHECK_EQ(qthread_readFF(&r, &r), QTHREAD_SUCCESS);
    CHECK_EQ(r, QTHREAD_SUCCESS);
    CHECK_EQ(qthread_spinlock_destroy(&l), QTHREAD_SUCCESS);

    CHECK_EQ(qthread_spinlock_lock(NULL), QTHREAD_OPFAIL);
    CHECK_EQ(qthread_spinlock_trylock(NULL), QTHREAD_OPFAIL);
    CHECK_EQ(qthread_spinlock_unlock(NULL), QTHREAD_OPFAIL);
    CHECK_EQ(qthread_spinlock_init(NULL, false), QTHREAD_BADARGS);

    /* 16 tasks through each lock: no overlap, no lost update */
    aligned_t rets[16];
    for (int i = 0; i < 16; i++)
        CHECK_EQ(qthread_fork(plain_locker, NULL, &rets[i]), QTHREAD_SUCCESS);
    for (int i = 0; i < 16; i++) {
        aligned_t v = 0;
        CHECK_EQ(qthread_readFF(&v, &rets[i]), QTHREAD_SUCCESS);
        CHECK_EQ(v, 1);
    }
    CHECK_EQ(unguarded, 16 * 200);
    CHECK(!overlap);
    unguarded = 0;
    for (int i = 0; i < 16; i++)
        CHECK_EQ(qthread_fork(rec_locker, NULL, &rets[i]), QTHREAD_SUCCESS);
    /* main takes part too, as an outside owner */
    CHECK_EQ(rec_locker(NULL), 1);
    for (int i = 0; i < 16; i++) {
        aligned_t v = 0;
        CHECK_EQ(qthread_readFF(&v, &rets[i]), QTHREAD_SUCCESS);
        CHECK_EQ(v, 1);
    }
    CHECK_EQ(unguarded, 17 * 200);
    CHECK(!overlap);
    CHECK_EQ(rec.state.count, 0);
}

/* ---- qtimer ----------------------------------------------------------- */

static void timers(void)
{
    double res = qtimer_res();
    CHECK(res > 0 && res <= 0.001);
    double t0 = qtimer_wtime();
    sleep_ms(20);
    double t1 = qtimer_wtime();
    CHECK(t1 - t0 >= 0.019 && t1 - t0 < 5.0);
    /* the same clock as qtimer_t */
    qtimer_t q = qtimer_create();
    double a = qtimer_wtime();
    qtimer_start(q);
    sleep_ms(10);
    qtimer_stop(q);
    double b = qtimer_wtime();
    CHECK(qtimer_secs(q) <= b - a);
    CHECK(qtimer_secs(q) >= 0.009);
    qtimer_destroy(q);
}

/* ---- loops ------------------------------------------------------------ */

static aligned_t hits[100];

static void mark(size_t lo, size_t hi, void *arg)
{
    for (size_t i = lo; i < hi; i++)
        qthread_incr(&hits[i], (aligned_t)(uintptr_t)arg);
}

/* Sums i*i over [lo, hi), plus the offset at arg, into *ret (a uint64). */
static void squares(size_t lo, size_t hi, void *arg, void *ret)
{
    uint64_t s = *(uint64_t *)arg;
    for (size_t i = lo; i < hi; i++)
        s += (uint64_t)i * i;
    *(uint64_t *)ret = s;
}

static size_t parts_seen;

/* Records the parts (each writes its bounds as lo * 1000 + hi). */
static void bounds(size_t lo, size_t hi, void *arg, void *ret)
{
    (void)arg;
    qthread_incr(&parts_seen, 1);
    *(uint64_t *)ret = (uint64_t)(hi - lo);
}

static void loops(void)
{
    void (*each[6])(size_t, size_t, qt_loop_f, void *) = {
        qt_loop_sv, qt_loop_dc, qt_loop_aligned,
        qt_loop_balance_sv, qt_loop_balance_dc, qt_loop_balance_aligned};
    for (int k = 0; k < 6; k++)
        each[k](10, 90, mark, (void *)(uintptr_t)(k + 1));
    int ok = 1;
    for (size_t i = 0; i < 100; i++)
        ok &= hits[i] == ((i >= 10 && i < 90) ? 21u : 0u);
    CHECK(ok);
    qt_loop_sv(5, 5, mark, (void *)1); /* empty: nothing runs */
    qt_loop_balance_dc(7, 3, mark, (void *)1);
    CHECK_EQ(hits[5], 0);

    void (*accs[3])(size_t, size_t, size_t, void *, qt_loopr_f, void *, qt_accum_f) = {
        qt_loopaccum_balance, qt_loopaccum_balance_sv, qt_loopaccum_balance_dc};
    uint64_t expect = 0;
    for (uint64_t i = 3; i < 1000; i++)
        expect += i * i;
    for (int k = 0; k < 3; k++) {
        uint64_t out = 12345, zero = 0;
        accs[k](3, 1000, sizeof out, &out, squares, &zero, qt_uint_add_acc);
        CHECK(out == expect);
        /* the offset is added once per part: one part per worker */
        uint64_t off = 1;
        accs[k](3, 1000, sizeof out, &out, squares, &off, qt_uint_add_acc);
        CHECK(out == expect + (uint64_t)qthread_num_workers());
    }
    /* _sinc keeps out's value from before, as Qthreads' sinc does */
    uint64_t out = 100, zero = 0;
    qt_loopaccum_balance_sinc(3, 1000, sizeof out, &out, squares, &zero, qt_uint_add_acc);
    CHECK(out == expect + 100);
    /* fewer iterations than workers: one part per worker all the same */
    parts_seen = 0;
    out = 0;
    qt_loopaccum_balance(0, 2, sizeof out, &out, bounds, NULL, qt_uint_add_acc);
    CHECK_EQ(parts_seen, qthread_num_workers());
    CHECK_EQ(out, 2);
    /* NULL func: nothing runs, out untouched */
    out = 77;
    qt_loopaccum_balance(0, 10, sizeof out, &out, NULL, NULL, qt_uint_add_acc);
    CHECK_EQ(out, 77);
    CHECK(strstr(cantus_last_error(), "qt_loopaccum_balance") != NULL);

    /* qt_qsort */
    enum { N = 10007 };
    static double a[N];
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        a[i] = (double)(int64_t)(x % 2000001) - 1000000.0 + 0.5 * (double)(x & 1);
    }
    a[17] = -0.0;
    a[18] = 0.0;
    double sum_before = 0, sum_after = 0;
    for (int i = 0; i < N; i++)
        sum_before += a[i];
    qt_qsort(a, N);
    int sorted = 1;
    for (int i = 1; i < N; i++)
        sorted &= a[i - 1] <= a[i];
    CHECK(sorted);
    for (int i = 0; i < N; i++)
        sum_after += a[i];
    CHECK(sum_before == sum_after || (sum_before - sum_after < 1e-3 && sum_after - sum_before < 1e-3));
    double small[3] = {3, 1, 2};
    qt_qsort(small, 3);
    CHECK(small[0] == 1 && small[1] == 2 && small[2] == 3);
    qt_qsort(NULL, 0); /* nothing to do */
    double one = 5;
    qt_qsort(&one, 1);
    CHECK(one == 5);
}

/* ---- qthread/qt_syscalls.h -------------------------------------------- */

static int pipe_fds[2];
static aligned_t reader_started;

/* Waits for the pipe (qt_poll, 10 s at most) and reads "ping" from it
 * (qt_read). Forked to shepherd 0, whose own queue no other shepherd
 * steals from, before the writer is forked there too: the writer runs only
 * if the reader's blocking call left shepherd 0 free. */
static aligned_t pipe_reader(void *arg)
{
    (void)arg;
    qthread_writeF_const(&reader_started, 1);
    struct pollfd p = {pipe_fds[0], POLLIN, 0};
    if (qt_poll(&p, 1, 10000) != 1)
        return 1; /* timed out: the writer never ran */
    char buf[4];
    if (qt_read(pipe_fds[0], buf, 4) != 4)
        return 2;
    return memcmp(buf, "ping", 4) == 0 ? 0 : 3;
}

static aligned_t pipe_writer(void *arg)
{
    (void)arg;
    return qt_write(pipe_fds[1], "ping", 4) == 4 ? 0 : 1;
}

/* errno comes back with the task from its blocking call. */
static aligned_t bad_read(void *arg)
{
    (void)arg;
    char c;
    ssize_t r = qt_read(-1, &c, 1);
    return r == -1 && errno == EBADF ? 0 : 1;
}

static int listener;

static aligned_t acceptor(void *arg)
{
    (void)arg;
    int s = qt_accept(listener, NULL, NULL);
    if (s < 0)
        return 1;
    char c = 0;
    ssize_t n = qt_read(s, &c, 1);
    close(s);
    return n == 1 && c == 'x' ? 0 : 2;
}

static void syscalls(void)
{
    /* A blocking call leaves its shepherd to other tasks. */
    CHECK_EQ(pipe(pipe_fds), 0);
    aligned_t rr = 0, wr = 0;
    qthread_empty(&reader_started);
    CHECK_EQ(qthread_fork_to(pipe_reader, NULL, &rr, 0), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &reader_started);
    CHECK_EQ(qthread_fork_to(pipe_writer, NULL, &wr, 0), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &wr);
    qthread_readFF(NULL, &rr);
    CHECK_EQ(wr, 0);
    CHECK_EQ(rr, 0);

    /* errno, in a task and in main (made in place). */
    aligned_t br = 1;
    CHECK_EQ(qthread_fork(bad_read, NULL, &br), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &br);
    CHECK_EQ(br, 0);
    char c;
    errno = 0;
    CHECK_EQ(qt_read(-1, &c, 1), -1);
    CHECK_EQ(errno, EBADF);

    /* qt_select: readable once written. */
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(pipe_fds[0], &rd);
    struct timeval none = {0, 0};
    CHECK_EQ(qt_select(pipe_fds[0] + 1, &rd, NULL, NULL, &none), 0);
    CHECK_EQ(qt_write(pipe_fds[1], "z", 1), 1);
    FD_ZERO(&rd);
    FD_SET(pipe_fds[0], &rd);
    struct timeval wait = {5, 0};
    CHECK_EQ(qt_select(pipe_fds[0] + 1, &rd, NULL, NULL, &wait), 1);
    CHECK(FD_ISSET(pipe_fds[0], &rd));
    CHECK_EQ(qt_read(pipe_fds[0], &c, 1), 1);
    CHECK_EQ(c, 'z');
    close(pipe_fds[0]);
    close(pipe_fds[1]);

    /* qt_pwrite / qt_pread at offsets of a file. */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        int fd = fileno(f);
        CHECK_EQ(qt_pwrite(fd, "abcdef", 6, 10), 6);
        char got[4] = {0};
        CHECK_EQ(qt_pread(fd, got, 3, 12), 3);
        CHECK(memcmp(got, "cde", 3) == 0);
        CHECK_EQ(qt_pread(fd, got, 3, 100), 0); /* past the end */
        fclose(f);
    }

    /* qt_accept / qt_connect over loopback. */
    listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in at;
    memset(&at, 0, sizeof at);
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    CHECK(listener >= 0);
    CHECK_EQ(bind(listener, (struct sockaddr *)&at, sizeof at), 0);
    CHECK_EQ(listen(listener, 1), 0);
    CHECK_EQ(getsockname(listener, (struct sockaddr *)&at, &len), 0);
    aligned_t ar = 1;
    CHECK_EQ(qthread_fork(acceptor, NULL, &ar), QTHREAD_SUCCESS);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(qt_connect(s, (struct sockaddr *)&at, sizeof at), 0);
    CHECK_EQ(qt_write(s, "x", 1), 1);
    qthread_readFF(NULL, &ar);
    CHECK_EQ(ar, 0);
    close(s);
    close(listener);

    /* qt_system and qt_wait4: the status of the child. */
    int status = qt_system("exit 3");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    pid_t child = fork();
    if (child == 0)
        _exit(7);
    CHECK(child > 0);
    int st = 0;
    struct rusage ru;
    CHECK_EQ(qt_wait4(child, &st, 0, &ru), child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
    CHECK_EQ(qt_wait4(child, &st, WNOHANG, NULL), -1); /* reaped */
    CHECK_EQ(errno, ECHILD);
}

/* ---- qt_barrier_dump -------------------------------------------------- */

static void barrier_dump(void)
{
    qt_barrier_t *b = qt_barrier_create(4, REGION_BARRIER);
    CHECK(b != NULL);
    char path[] = "/tmp/cantus_dump_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    qt_barrier_dump(b, BOTHLOCKS);
    qt_barrier_dump(b, UPLOCK);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char buf[256] = {0};
    CHECK(pread(fd, buf, sizeof buf - 1, 0) > 0);
    close(fd);
    unlink(path);
    CHECK(strstr(buf, "size 4, entered 0") != NULL);
    qt_barrier_dump(NULL, BOTHLOCKS);
    CHECK(strstr(cantus_last_error(), "qt_barrier_dump") != NULL);
    qt_barrier_dump(b, (qt_barrier_dtype)7);
    CHECK(strstr(cantus_last_error(), "dt = 7") != NULL);
    qt_barrier_destroy(b);
}

int main(void)
{
    /* no runtime yet */
    syncvar_t a = SYNCVAR_STATIC_INITIALIZE_TO(1);
    CHECK(qthread_syncvar_incrF(&a, 1) == (uint64_t)(int64_t)QTHREAD_NOT_ALLOWED);
    CHECK(qtimer_wtime() > 0);
    CHECK_EQ(qthread_num_workers_local(0), 0);
    unsetenv("CANTUS_WORKERS");
    unsetenv("QTHREAD_HWPAR");
    unsetenv("QT_HWPAR");
    CHECK_EQ(qthread_init(3), QTHREAD_SUCCESS);
    forks();
    atomics();
    workers();
    incrF();
    spinlocks();
    timers();
    loops();
    barrier_dump();
    syscalls();
    qthread_finalize();
    return DONE();
}
