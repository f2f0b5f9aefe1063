/*
 * test_qthread_api.c - the Qthreads-compatible subset: every declared
 * function, from tasks and from a pthread that is not a task, and misuse.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <pthread.h>
#include <qthread.h> /* the top-level header works too */
#include <qthread/qloop.h>
#include <qthread/sinc.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"

static int contains(const char *s, const char *part) { return strstr(s, part) != NULL; }

static aligned_t twice(void *arg) { return 2 * (aligned_t)(uintptr_t)arg; }

static void before_init(void)
{
    aligned_t w = 0, v;
    CHECK_EQ(qthread_fork(twice, NULL, &w), QTHREAD_NOT_ALLOWED);
    CHECK(contains(cantus_last_error(), "qthread_fork called with no runtime running"));
    CHECK_EQ(qthread_readFF(&v, &w), QTHREAD_NOT_ALLOWED);
    CHECK_EQ(qthread_writeF_const(&w, 1), QTHREAD_NOT_ALLOWED);
    CHECK_EQ(qthread_num_workers(), 0);
    CHECK_EQ(qthread_num_shepherds(), 0);
    CHECK_EQ(qthread_id(), QTHREAD_NON_TASK_ID);
    CHECK_EQ(qthread_shep(), NO_SHEPHERD);
    qthread_yield(); /* does nothing */
    qthread_finalize(); /* does nothing */
    CHECK(qt_sinc_create(0, NULL, NULL, 1) == NULL);
}

/* ---- fork, ids, yield ---- */
static aligned_t who(void *arg)
{
    aligned_t *out = arg;
    out[0] = qthread_id();
    out[1] = qthread_shep();
    qthread_yield();
    qthread_yield_near();
    qthread_finalize(); /* from a task: ignored */
    return 99;
}

static void forks(void)
{
    aligned_t ret = 0, info[2] = {0, 0};
    CHECK_EQ(qthread_fork(who, info, &ret), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(NULL, &ret), QTHREAD_SUCCESS);
    CHECK_EQ(ret, 99);
    CHECK(info[0] >= 2 && info[0] != QTHREAD_NULL_TASK_ID); /* 1 is main's */
    CHECK(info[1] < qthread_num_shepherds());
    CHECK_EQ(qthread_num_workers(), qthread_num_shepherds());

    aligned_t rets[8];
    for (int i = 0; i < 8; i++)
        CHECK_EQ(qthread_fork_to(twice, (void *)(uintptr_t)i, &rets[i],
                                 (qthread_shepherd_id_t)i),
                 QTHREAD_SUCCESS);
    aligned_t r2;
    CHECK_EQ(qthread_fork_to(twice, (void *)(uintptr_t)5, &r2, NO_SHEPHERD), QTHREAD_SUCCESS);
    int good = 1;
    for (int i = 0; i < 8; i++) {
        aligned_t v;
        qthread_readFF(&v, &rets[i]);
        good &= v == (aligned_t)(2 * i);
    }
    CHECK(good);
    qthread_readFF(NULL, &r2);
    CHECK_EQ(r2, 10);
    CHECK_EQ(qthread_fork(twice, (void *)1, NULL), QTHREAD_SUCCESS); /* no ret */

    /* the thread that started the runtime is Qthreads' main task: qthread
     * 1 on shepherd 0 (and worker 0) */
    CHECK_EQ(qthread_id(), 1);
    CHECK_EQ(qthread_shep(), 0);
    qthread_shepherd_id_t wshep = NO_SHEPHERD;
    CHECK_EQ(qthread_worker(&wshep), 0);
    CHECK_EQ(wshep, 0);

    /* misuse */
    CHECK_EQ(qthread_fork(NULL, NULL, &ret), QTHREAD_BADARGS);
    char buf[16] __attribute__((aligned(8)));
    CHECK_EQ(qthread_fork(twice, NULL, (aligned_t *)(buf + 1)), QTHREAD_BADARGS);
    CHECK(contains(cantus_last_error(), "not aligned"));
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS); /* again: no-op */
}

/* ---- FEB on aligned_t ---- */
static aligned_t box, reply;
static aligned_t echo(void *arg)
{
    (void)arg;
    aligned_t v;
    for (int i = 0; i < 500; i++) {
        qthread_readFE(&v, &box);
        qthread_writeEF_const(&reply, v * 3);
    }
    return 0;
}

static void febs(void)
{
    aligned_t w = 5, v = 0, src = 8;
    CHECK_EQ(qthread_feb_status(&w), 1); /* full by default */
    CHECK_EQ(qthread_readFE(&v, &w), QTHREAD_SUCCESS);
    CHECK_EQ(v, 5);
    CHECK_EQ(qthread_feb_status(&w), 0);
    CHECK_EQ(qthread_writeEF(&w, &src), QTHREAD_SUCCESS);
    CHECK_EQ(w, 8);
    CHECK_EQ(qthread_writeFF_const(&w, 9), QTHREAD_SUCCESS);
    src = 10;
    CHECK_EQ(qthread_writeFF(&w, &src), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(&v, &w), QTHREAD_SUCCESS);
    CHECK_EQ(v, 10);
    CHECK_EQ(qthread_empty(&w), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readXX(&v, &w), QTHREAD_SUCCESS);
    CHECK_EQ(v, 10);
    CHECK_EQ(qthread_writeF_const(&w, 11), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_feb_status(&w), 1);
    src = 12;
    CHECK_EQ(qthread_writeF(&w, &src), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_purge(&w), QTHREAD_SUCCESS);
    CHECK_EQ(w, 0);
    CHECK_EQ(qthread_feb_status(&w), 0);
    CHECK_EQ(qthread_fill(&w), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFE(NULL, &w), QTHREAD_SUCCESS); /* dest may be NULL */
    CHECK_EQ(qthread_writeEF_const(&w, 13), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readFF(&w, &w), QTHREAD_SUCCESS); /* dest == src */
    CHECK_EQ(w, 13);

    /* hand-off between this thread (not a task) and a task */
    qthread_empty(&box);
    qthread_empty(&reply);
    aligned_t done;
    CHECK_EQ(qthread_fork(echo, NULL, &done), QTHREAD_SUCCESS);
    int good = 1;
    for (aligned_t i = 0; i < 500; i++) {
        qthread_writeEF_const(&box, i);
        qthread_readFE(&v, &reply);
        good &= v == 3 * i;
    }
    CHECK(good);
    qthread_readFF(NULL, &done);
    qthread_fill(&box);
    qthread_fill(&reply);

    /* misuse */
    char buf[16] __attribute__((aligned(8)));
    aligned_t *odd = (aligned_t *)(buf + 2);
    CHECK_EQ(qthread_readFE(&v, odd), QTHREAD_BADARGS);
    CHECK_EQ(qthread_writeEF_const(odd, 1), QTHREAD_BADARGS);
    CHECK_EQ(qthread_fill(odd), QTHREAD_BADARGS);
    CHECK_EQ(qthread_feb_status(odd), QTHREAD_BADARGS);
    CHECK_EQ(qthread_readFF(&v, NULL), QTHREAD_BADARGS);
    CHECK_EQ(qthread_writeEF(&w, NULL), QTHREAD_BADARGS);
    CHECK(contains(cantus_last_error(), "`src` is NULL"));
}

/* ---- syncvar_t ---- */
static syncvar_t sv_static = SYNCVAR_STATIC_INITIALIZER;
static syncvar_t sv_empty = SYNCVAR_STATIC_EMPTY_INITIALIZER;
static syncvar_t sv_to = SYNCVAR_STATIC_INITIALIZE_TO(77);
static syncvar_t sv_chan = SYNCVAR_STATIC_EMPTY_INITIALIZER;

static aligned_t sv_producer(void *arg)
{
    (void)arg;
    for (uint64_t i = 1; i <= 200; i++)
        qthread_syncvar_writeEF_const(&sv_chan, i);
    return 0;
}

static void syncvars(void)
{
    uint64_t v = 0, src = 5;
    CHECK_EQ(qthread_syncvar_status(&sv_static), 1);
    CHECK_EQ(qthread_syncvar_status(&sv_empty), 0);
    CHECK_EQ(qthread_syncvar_readFF(&v, &sv_to), QTHREAD_SUCCESS);
    CHECK_EQ(v, 77);
    CHECK_EQ(qthread_syncvar_readFE(&v, &sv_static), QTHREAD_SUCCESS);
    CHECK_EQ(v, 0);
    CHECK_EQ(qthread_syncvar_status(&sv_static), 0);
    CHECK_EQ(sv_static.u.s.state, 2); /* empty, no waiters: Qthreads' encoding */
    CHECK_EQ(qthread_syncvar_writeEF(&sv_static, &src), QTHREAD_SUCCESS);
    CHECK_EQ(sv_static.u.s.data, 5);
    CHECK_EQ(sv_static.u.s.state, 0);
    CHECK_EQ(qthread_syncvar_writeF_const(&sv_static, 6), QTHREAD_SUCCESS);
    src = 7;
    CHECK_EQ(qthread_syncvar_writeF(&sv_static, &src), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_empty(&sv_static), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_status(&sv_static), 0);
    CHECK_EQ(qthread_syncvar_fill(&sv_static), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &sv_static), QTHREAD_SUCCESS);
    CHECK_EQ(v, 7);
    CHECK_EQ(qthread_syncvar_writeF_const(&sv_static, UINT64_MAX), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &sv_static), QTHREAD_SUCCESS);
    CHECK(v == (UINT64_MAX >> 4)); /* 60 bits, as in Qthreads */

    aligned_t done;
    CHECK_EQ(qthread_fork(sv_producer, NULL, &done), QTHREAD_SUCCESS);
    uint64_t sum = 0;
    for (int i = 0; i < 200; i++) {
        CHECK_EQ(qthread_syncvar_readFE(&v, &sv_chan), QTHREAD_SUCCESS);
        sum += v;
    }
    CHECK_EQ(sum, 200 * 201 / 2);
    qthread_readFF(NULL, &done);

    CHECK_EQ(qthread_syncvar_readFE(&v, NULL), QTHREAD_BADARGS);
    CHECK_EQ(qthread_syncvar_status(NULL), QTHREAD_BADARGS);
}

/* ---- sinc ---- */
static void add_u64(void *tgt, const void *src) { *(uint64_t *)tgt += *(const uint64_t *)src; }

struct sinc_arg {
    qt_sinc_t *sinc;
    uint64_t value;
};

static aligned_t submitter(void *arg)
{
    struct sinc_arg *a = arg;
    qt_sinc_submit(a->sinc, &a->value);
    return 0;
}

static void sincs(void)
{
    uint64_t zero = 0, result = 0;
    qt_sinc_t *s = qt_sinc_create(sizeof(uint64_t), &zero, add_u64, 100);
    CHECK(s != NULL);
    struct sinc_arg args[100];
    for (int i = 0; i < 100; i++) {
        args[i].sinc = s;
        args[i].value = (uint64_t)i;
        CHECK_EQ(qthread_fork(submitter, &args[i], NULL), QTHREAD_SUCCESS);
    }
    qt_sinc_wait(s, &result);
    CHECK_EQ(result, 99 * 100 / 2);

    /* reuse; expect more while waiting is allowed */
    qt_sinc_reset(s, 1);
    qt_sinc_expect(s, 2);
    uint64_t one = 1;
    qt_sinc_submit(s, &one);
    qt_sinc_submit(s, &one);
    qt_sinc_submit(s, &one);
    qt_sinc_wait(s, &result);
    CHECK_EQ(result, 3);
    qt_sinc_submit(s, &one); /* one too many: reported and ignored */
    CHECK(contains(cantus_last_error(), "more submissions than expected"));
    qt_sinc_destroy(s);

    /* a counting sinc on caller storage */
    qt_sinc_t local;
    qt_sinc_init(&local, 0, NULL, NULL, 0);
    qt_sinc_wait(&local, NULL); /* expects nothing: returns at once */
    qt_sinc_expect(&local, 1);
    qt_sinc_submit(&local, NULL);
    qt_sinc_wait(&local, NULL);
    qt_sinc_fini(&local);
    qt_sinc_submit(&local, NULL); /* after fini: reported, no crash */
    CHECK(contains(cantus_last_error(), "not initialised"));
    CHECK(qt_sinc_create(8, NULL, NULL, 1) == NULL); /* reduces, but no op */
    qt_sinc_wait(NULL, NULL);
    CHECK(contains(cantus_last_error(), "`sinc` is NULL"));
}

/* ---- loops ---- */
static uint64_t marks[1000];
static uint64_t calls;
static void mark(size_t start, size_t stop, void *arg)
{
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    for (size_t i = start; i < stop; i++)
        marks[i] += (uint64_t)(uintptr_t)arg;
}

static void loops(void)
{
    calls = 0;
    qt_loop(10, 1000, mark, (void *)1);
    CHECK_EQ(calls, 990);
    calls = 0;
    qt_loop_balance(0, 1000, mark, (void *)2);
    CHECK(calls >= 1 && calls <= qthread_num_shepherds());
    int good = 1;
    for (int i = 0; i < 1000; i++)
        good &= marks[i] == (i < 10 ? 2u : 3u);
    CHECK(good);
    qt_loop(5, 5, mark, NULL); /* empty */
    qt_loop_balance(7, 3, mark, NULL);
    calls = 0;
    qt_loop(0, 10, NULL, NULL); /* NULL func: reported, nothing runs */
    CHECK(contains(cantus_last_error(), "`func` is NULL"));
    CHECK_EQ(calls, 0);
}

/* ---- atomics ---- */
static aligned_t counter;
static void bump(size_t start, size_t stop, void *arg)
{
    (void)arg;
    for (size_t i = start; i < stop; i++)
        qthread_incr(&counter, 1);
}

static void atomics(void)
{
    aligned_t x = 5;
    CHECK_EQ(qthread_incr(&x, 3), 5); /* returns the value before */
    CHECK_EQ(x, 8);
    CHECK_EQ(qthread_cas(&x, 8, 1), 8);
    CHECK_EQ(x, 1);
    CHECK_EQ(qthread_cas(&x, 8, 2), 1); /* no swap */
    CHECK_EQ(x, 1);
    void *p = NULL, *q = &x;
    CHECK(qthread_cas_ptr(&p, NULL, q) == NULL);
    CHECK(p == q);
    counter = 0;
    qt_loop_balance(0, 10000, bump, NULL);
    CHECK_EQ(counter, 10000);
}

/* ---- a pthread that is not a task ---- */
static aligned_t handoff_word;
static void *outside(void *arg)
{
    (void)arg;
    int ok = 1;
    aligned_t r, v;
    ok &= qthread_fork(twice, (void *)21, &r) == QTHREAD_SUCCESS;
    ok &= qthread_readFF(&v, &r) == QTHREAD_SUCCESS && v == 42;
    ok &= qthread_readFE(&v, &handoff_word) == QTHREAD_SUCCESS && v == 7; /* blocks */
    ok &= qthread_id() == QTHREAD_NON_TASK_ID;
    qt_loop(0, 100, mark, NULL);
    return (void *)(uintptr_t)ok;
}

static aligned_t delayed_fill(void *arg)
{
    (void)arg;
    struct timespec ms = {0, 10000000};
    nanosleep(&ms, NULL);
    qthread_writeEF_const(&handoff_word, 7);
    return 0;
}

static void outside_threads(void)
{
    qthread_empty(&handoff_word);
    pthread_t t;
    pthread_create(&t, NULL, outside, NULL);
    aligned_t r;
    qthread_fork(delayed_fill, NULL, &r);
    void *ok;
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
    qthread_readFF(NULL, &r);
}

int main(void)
{
    before_init();
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    CHECK(qthread_num_workers() >= 1);
    forks();
    febs();
    syncvars();
    sincs();
    loops();
    atomics();
    outside_threads();
    qthread_finalize();
    qthread_finalize(); /* again: fine */
    CHECK_EQ(qthread_num_workers(), 0);
    return DONE();
}
