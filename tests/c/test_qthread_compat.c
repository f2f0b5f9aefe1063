/*
 * test_qthread_compat.c - the Qthreads functions beyond the basic subset:
 * qthread_init, copyargs/syncvar forks, qthread_spawn (return kinds,
 * preconditions, flags), qthread_fork_precond*, per-address locks,
 * purge_to, qthread_worker, ids (main is 1), cas32/64, fincr/dincr, the
 * qt_loop variants, the array reductions, qtimer, qt_barrier and the
 * INT60 macros. Includes no system header that Qthreads' qthread.h
 * provides (bool, memcpy), to check that ours provides them too.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error, cantus_num_blocked */
#include <pthread.h>
#include <qthread/barrier.h>
#include <qthread/qloop.h>
#include <qthread/qthread.h>
#include <qthread/qtimer.h>
#include <qthread/sinc.h>
#include <time.h>

#include "check.h"
#include "wait_blocked.h"

static int contains(const char *s, const char *part) { return strstr(s, part) != NULL; }

/* ---- startup, ids, workers ---- */
static aligned_t ids_task(void *arg)
{
    aligned_t *out = arg;
    qthread_shepherd_id_t shep = 12345;
    out[0] = qthread_id();
    out[1] = qthread_worker(&shep);
    out[2] = shep;
    out[3] = qthread_shep();
    out[4] = qthread_worker(NULL);
    return 0;
}

static void *ids_pthread(void *arg)
{
    (void)arg;
    qthread_shepherd_id_t shep = 0;
    int ok = qthread_id() == QTHREAD_NON_TASK_ID;
    ok &= qthread_worker(&shep) == NO_WORKER && shep == NO_SHEPHERD;
    return (void *)(uintptr_t)ok;
}

static void ids(void)
{
    CHECK_EQ(qthread_id(), 1); /* the thread that started the runtime */
    qthread_shepherd_id_t shep = NO_SHEPHERD; /* Qthreads' main: shepherd 0 */
    CHECK_EQ(qthread_worker(&shep), 0);
    CHECK_EQ(shep, 0);
    aligned_t out[5] = {0}, ret;
    CHECK_EQ(qthread_fork(ids_task, out, &ret), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &ret);
    CHECK(out[0] >= 2 && out[0] != QTHREAD_NULL_TASK_ID);
    CHECK(out[1] < qthread_num_workers());
    CHECK_EQ(out[1], out[2]);
    CHECK_EQ(out[1], out[3]);
    CHECK_EQ(out[1], out[4]);
    pthread_t t;
    void *ok;
    pthread_create(&t, NULL, ids_pthread, NULL);
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
}

/* ---- copyargs and syncvar forks ---- */
struct payload {
    int a;
    double b;
    char s[24];
};

static aligned_t check_payload(void *arg)
{
    struct payload *p = arg;
    /* The copy is the task's own, aligned for any type. */
    return (aligned_t)(p->a + (int)p->b + (int)strlen(p->s) + ((uintptr_t)arg % 16 == 0 ? 1000 : 0));
}

static aligned_t index_twice(void *arg) { return 2 * *(const aligned_t *)arg; }
static aligned_t big_result(void *arg)
{
    (void)arg;
    return UINT64_MAX;
}
static aligned_t pointer_as_is(void *arg) { return (aligned_t)(uintptr_t)arg; }

static void copyargs(void)
{
    struct payload p = {40, 2.0, "hello"};
    aligned_t r;
    CHECK_EQ(qthread_fork_copyargs(check_payload, &p, sizeof p, &r), QTHREAD_SUCCESS);
    /* The caller's copy may change at once. */
    p.a = -1000000;
    memcpy(p.s, "changed, longer text", 21);
    qthread_readFF(NULL, &r);
    CHECK_EQ(r, 40 + 2 + 5 + 1000);

    /* Many tasks, each with its own copy of a loop variable. */
    aligned_t rets[200];
    for (aligned_t i = 0; i < 200; i++)
        CHECK_EQ(qthread_fork_copyargs(index_twice, &i, sizeof i, &rets[i]), QTHREAD_SUCCESS);
    int good = 1;
    for (aligned_t i = 0; i < 200; i++) {
        aligned_t v;
        qthread_readFF(&v, &rets[i]);
        good &= v == 2 * i;
    }
    CHECK(good);

    /* arg_size 0: the pointer is passed as is. */
    CHECK_EQ(qthread_fork_copyargs(pointer_as_is, (void *)&p, 0, &r), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &r);
    CHECK(r == (aligned_t)(uintptr_t)&p);

    /* syncvar results */
    syncvar_t sv = SYNCVAR_STATIC_INITIALIZER;
    uint64_t v = 0;
    aligned_t seven = 7;
    CHECK_EQ(qthread_fork_syncvar_copyargs(index_twice, &seven, sizeof seven, &sv),
             QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &sv), QTHREAD_SUCCESS);
    CHECK_EQ(v, 14);
    CHECK_EQ(qthread_fork_syncvar(big_result, NULL, &sv), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFF(&v, &sv), QTHREAD_SUCCESS);
    CHECK(v == (UINT64_MAX >> 4)); /* 60 bits */
    CHECK_EQ(qthread_fork_syncvar(pointer_as_is, (void *)8, &sv), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_syncvar_readFE(&v, &sv), QTHREAD_SUCCESS);
    CHECK_EQ(v, 8);
    CHECK_EQ(qthread_syncvar_status(&sv), 0);

    /* misuse */
    CHECK_EQ(qthread_fork_copyargs(check_payload, NULL, 8, &r), QTHREAD_BADARGS);
    CHECK(contains(cantus_last_error(), "`arg` is NULL"));
    CHECK_EQ(qthread_fork_copyargs(NULL, &p, sizeof p, &r), QTHREAD_BADARGS);
    CHECK_EQ(qthread_fork_syncvar(big_result, NULL, NULL), QTHREAD_SUCCESS); /* no ret */
    char buf[16] __attribute__((aligned(8)));
    CHECK_EQ(qthread_fork_syncvar(big_result, NULL, (syncvar_t *)(buf + 4)), QTHREAD_BADARGS);
}

/* ---- qthread_spawn ---- */
static void add_aligned(void *tgt, const void *src)
{
    *(aligned_t *)tgt += *(const aligned_t *)src;
}

static aligned_t ran;
static aligned_t mark_ran(void *arg)
{
    qthread_incr(&ran, 1);
    return (aligned_t)(uintptr_t)arg;
}

static aligned_t **precond_array(size_t n, aligned_t *a, aligned_t *b)
{
    aligned_t **pre = malloc((n + 1) * sizeof *pre);
    pre[0] = (aligned_t *)(uintptr_t)n;
    pre[1] = a;
    if (n > 1)
        pre[2] = b;
    return pre;
}

static void spawns(void)
{
    aligned_t r;
    syncvar_t sv = SYNCVAR_STATIC_INITIALIZER;
    uint64_t v;

    /* plain, to a shepherd, with the accepted hints */
    CHECK_EQ(qthread_spawn(mark_ran, (void *)3, 0, &r, 0, NULL, NO_SHEPHERD, 0), QTHREAD_SUCCESS);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 3);
    CHECK_EQ(qthread_spawn(mark_ran, (void *)4, 0, &r, 0, NULL, 1,
                           QTHREAD_SPAWN_SIMPLE | QTHREAD_SPAWN_LOCAL_PRIORITY),
             QTHREAD_SUCCESS);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 4);
    CHECK_EQ(qthread_spawn(mark_ran, (void *)5, 0, &sv, 0, NULL, NO_SHEPHERD,
                           QTHREAD_SPAWN_RET_SYNCVAR_T),
             QTHREAD_SUCCESS);
    qthread_syncvar_readFF(&v, &sv);
    CHECK_EQ(v, 5);

    /* results into a reducing sinc, and a counting one */
    aligned_t zero = 0, sum = 0;
    qt_sinc_t *s = qt_sinc_create(sizeof(aligned_t), &zero, add_aligned, 100);
    for (uintptr_t i = 0; i < 100; i++)
        CHECK_EQ(qthread_spawn(mark_ran, (void *)i, 0, s, 0, NULL, NO_SHEPHERD,
                               QTHREAD_SPAWN_RET_SINC),
                 QTHREAD_SUCCESS);
    qt_sinc_wait(s, &sum);
    CHECK_EQ(sum, 99 * 100 / 2);
    qt_sinc_destroy(s);
    qt_sinc_t counting;
    qt_sinc_init(&counting, 0, NULL, NULL, 50);
    ran = 0;
    for (int i = 0; i < 50; i++)
        CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &counting, 0, NULL, NO_SHEPHERD,
                               QTHREAD_SPAWN_RET_SINC_VOID),
                 QTHREAD_SUCCESS);
    qt_sinc_wait(&counting, NULL);
    CHECK_EQ(ran, 50);

    /* preconditions: the task runs only once both words are full */
    aligned_t a = 0, b = 0;
    qthread_empty(&a);
    qthread_empty(&b);
    ran = 0;
    struct payload p = {1, 2.0, "abc"};
    CHECK_EQ(qthread_spawn(check_payload, &p, sizeof p, &r, 2, precond_array(2, &a, &b),
                           NO_SHEPHERD, 0),
             QTHREAD_SUCCESS);
    p.a = 100; /* copied at the spawn */
    sleep_ms(20);
    CHECK_EQ(qthread_feb_status(&r), 0);
    qthread_writeF_const(&a, 1);
    sleep_ms(20);
    CHECK_EQ(qthread_feb_status(&r), 0);
    qthread_writeF_const(&b, 2);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 1 + 2 + 3 + 1000);
    CHECK_EQ(qthread_feb_status(&a), 1); /* preconditions are read, not consumed */

    /* syncvar preconditions */
    syncvar_t pa = SYNCVAR_STATIC_EMPTY_INITIALIZER;
    CHECK_EQ(qthread_spawn(mark_ran, (void *)9, 0, &r, 1,
                           precond_array(1, (aligned_t *)(void *)&pa, NULL), NO_SHEPHERD,
                           QTHREAD_SPAWN_PC_SYNCVAR_T),
             QTHREAD_SUCCESS);
    sleep_ms(10);
    CHECK_EQ(qthread_feb_status(&r), 0);
    qthread_syncvar_fill(&pa);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 9);

    /* QTHREAD_SPAWN_PARENT and QTHREAD_SPAWN_NETWORK are accepted and
     * change nothing (as in Qthreads 1.23, which never reads them) */
    CHECK_EQ(qthread_spawn(mark_ran, (void *)31, 0, &r, 0, NULL, NO_SHEPHERD,
                           QTHREAD_SPAWN_PARENT | QTHREAD_SPAWN_NETWORK),
             QTHREAD_SUCCESS);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 31);
    /* refused flags and bad arguments */
    CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &r, 0, NULL, NO_SHEPHERD, 1u << 8),
             QTHREAD_NOT_ALLOWED);
    CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &r, 0, NULL, NO_SHEPHERD,
                           QTHREAD_SPAWN_RET_SINC | QTHREAD_SPAWN_RET_SYNCVAR_T),
             QTHREAD_BADARGS);
    qt_sinc_t dead;
    memset(&dead, 0, sizeof dead);
    CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &dead, 0, NULL, NO_SHEPHERD,
                           QTHREAD_SPAWN_RET_SINC),
             QTHREAD_BADARGS);
    CHECK(contains(cantus_last_error(), "not initialised"));
    aligned_t **bad = precond_array(2, &a, &b);
    CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &r, 3, bad, NO_SHEPHERD, 0), QTHREAD_BADARGS);
    CHECK(contains(cantus_last_error(), "preconds[0]"));
    free(bad); /* not taken over on that error */
    CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &r, 1, precond_array(1, NULL, NULL), NO_SHEPHERD, 0),
             QTHREAD_BADARGS); /* taken over and freed (ASan would see a leak or double free) */
    CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &r, 2, NULL, NO_SHEPHERD, 0), QTHREAD_BADARGS);
}

/* ---- qthread_fork_precond ---- */
static void preconds(void)
{
    aligned_t a = 0, b = 0, c = 0, r;
    uint64_t v;
    qthread_empty(&a);
    qthread_empty(&b);
    CHECK_EQ(qthread_fork_precond(mark_ran, (void *)11, &r, 2, &a, &b), QTHREAD_SUCCESS);
    sleep_ms(10);
    CHECK_EQ(qthread_feb_status(&r), 0);
    qthread_fill(&b);
    qthread_fill(&a);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 11);

    qthread_empty(&c);
    CHECK_EQ(qthread_fork_precond_to(mark_ran, (void *)12, &r, 1, 1, &c), QTHREAD_SUCCESS);
    sleep_ms(5);
    CHECK_EQ(qthread_feb_status(&r), 0);
    qthread_writeEF_const(&c, 3);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 12);

    /* no preconditions; and Qthreads' array form (negative count) */
    CHECK_EQ(qthread_fork_precond(mark_ran, (void *)13, &r, 0), QTHREAD_SUCCESS);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 13);
    aligned_t *list[2] = {&a, &b};
    qthread_empty(&a);
    CHECK_EQ(qthread_fork_precond(mark_ran, (void *)14, &r, -2, list), QTHREAD_SUCCESS);
    sleep_ms(5);
    CHECK_EQ(qthread_feb_status(&r), 0);
    qthread_fill(&a);
    qthread_readFF(&v, &r);
    CHECK_EQ(v, 14);
}

/* ---- locks ---- */
static aligned_t lock_word = 5;
static uint64_t unprotected;
static void locked_bumps(size_t start, size_t stop, void *arg)
{
    (void)arg;
    for (size_t i = start; i < stop; i++) {
        qthread_lock(&lock_word);
        uint64_t x = unprotected; /* a plain read-modify-write under the lock */
        if (i % 64 == 0)
            qthread_yield();
        unprotected = x + 1;
        qthread_unlock(&lock_word);
    }
}

static aligned_t lock_then_mark(void *arg)
{
    qthread_lock(arg);
    qthread_incr(&ran, 1);
    qthread_unlock(arg);
    return 0;
}

static void locks(void)
{
    unprotected = 0;
    qt_loop(0, 4000, locked_bumps, NULL);
    CHECK_EQ(unprotected, 4000);
    /* separate from the FEB state and the value */
    CHECK_EQ(qthread_lock(&lock_word), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_feb_status(&lock_word), 1);
    CHECK_EQ(lock_word, 5);
    /* a task waits for the lock this thread holds */
    ran = 0;
    aligned_t r;
    qthread_fork(lock_then_mark, &lock_word, &r);
    sleep_ms(20);
    CHECK_EQ(ran, 0);
    CHECK_EQ(qthread_unlock(&lock_word), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &r);
    CHECK_EQ(ran, 1);
    CHECK_EQ(qthread_unlock(&lock_word), QTHREAD_SUCCESS); /* unlocked: fine */
    char buf[16];
    CHECK_EQ(qthread_lock((aligned_t *)(void *)(buf + 3)), QTHREAD_SUCCESS); /* a key only */
    CHECK_EQ(qthread_unlock((aligned_t *)(void *)(buf + 3)), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_lock(NULL), QTHREAD_BADARGS);
}

/* ---- purge_to ---- */
static aligned_t purged;
static aligned_t write_after_purge(void *arg)
{
    (void)arg;
    qthread_writeEF_const(&purged, 77); /* waits: purged is full */
    return 0;
}

static void purge_to(void)
{
    aligned_t w = 1, src = 42, v;
    CHECK_EQ(qthread_purge_to(&w, &src), QTHREAD_SUCCESS);
    CHECK_EQ(w, 42);
    CHECK_EQ(qthread_feb_status(&w), 0);
    CHECK_EQ(qthread_purge_to_const(&w, 43), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_readXX(&v, &w), QTHREAD_SUCCESS);
    CHECK_EQ(v, 43);
    qthread_fill(&w);
    /* emptying admits a waiting writeEF */
    purged = 0;
    aligned_t r;
    qthread_fork(write_after_purge, NULL, &r);
    CHECK(wait_blocked(1));
    CHECK_EQ(qthread_purge_to_const(&purged, 9), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &r);
    CHECK_EQ(qthread_readFF(&v, &purged), QTHREAD_SUCCESS);
    CHECK_EQ(v, 77);
    CHECK_EQ(qthread_purge_to(&w, NULL), QTHREAD_BADARGS);
}

/* ---- atomics ---- */
static float fsum;
static double dsum;
static void float_bumps(size_t start, size_t stop, void *arg)
{
    (void)arg;
    for (size_t i = start; i < stop; i++) {
        qthread_fincr(&fsum, 1.0f);
        qthread_dincr(&dsum, 0.5);
    }
}

static void atomics(void)
{
    uint32_t x = 5;
    CHECK_EQ(qthread_cas32(&x, 5u, 7u), 5);
    CHECK_EQ(x, 7);
    CHECK_EQ(qthread_cas32(&x, 5u, 9u), 7);
    CHECK_EQ(x, 7);
    uint64_t y = 1;
    CHECK_EQ(qthread_cas64(&y, 1u, 2u), 1);
    CHECK_EQ(y, 2);
    float f = 1.5f;
    CHECK(qthread_fincr(&f, 2.0f) == 1.5f);
    CHECK(f == 3.5f);
    double d = 10.0;
    CHECK(qthread_dincr(&d, -0.25) == 10.0);
    CHECK(d == 9.75);
    fsum = 0;
    dsum = 0;
    qt_loop_balance(0, 10000, float_bumps, NULL);
    CHECK(fsum == 10000.0f);
    CHECK(dsum == 5000.0);
}

/* ---- loop variants ---- */
static uint64_t marks[600];
static aligned_t calls;
static void mark(size_t start, size_t stop, void *arg)
{
    qthread_incr(&calls, 1);
    for (size_t i = start; i < stop; i++)
        marks[i] += (uint64_t)(uintptr_t)arg;
}

static void loops(void)
{
    memset(marks, 0, sizeof marks);
    calls = 0;
    qt_loop_simple(0, 100, mark, (void *)1);
    CHECK_EQ(calls, 100);
    calls = 0;
    qt_loop_sinc(100, 200, mark, (void *)1);
    CHECK_EQ(calls, 100);
    calls = 0;
    qt_loop_balance_simple(200, 400, mark, (void *)1);
    CHECK(calls >= 1 && calls <= qthread_num_shepherds());
    calls = 0;
    qt_loop_balance_sinc(400, 600, mark, (void *)1);
    CHECK(calls >= 1 && calls <= qthread_num_shepherds());
    int good = 1;
    for (int i = 0; i < 600; i++)
        good &= marks[i] == 1;
    CHECK(good);
    qt_loop_sinc(0, 10, NULL, NULL);
    CHECK(contains(cantus_last_error(), "qt_loop_sinc: `func` is NULL"));
    qt_loop_balance_simple(5, 5, mark, NULL); /* empty */
}

/* ---- reductions ---- */
static aligned_t late[64];
static aligned_t fill_late(void *arg)
{
    (void)arg;
    sleep_ms(10);
    for (int i = 0; i < 64; i += 2)
        qthread_writeF_const(&late[i], (aligned_t)i);
    return 0;
}

static void reductions(void)
{
    enum { N = 1000 };
    static aligned_t u[N];
    static saligned_t s[N];
    static double x[N];
    for (int i = 0; i < N; i++) {
        u[i] = (aligned_t)(i + 1);
        s[i] = (saligned_t)(i % 2 ? -i : i);
        x[i] = 0.5 * i;
    }
    CHECK_EQ(qt_uint_sum(u, N, 0), N * (N + 1) / 2);
    CHECK_EQ(qt_uint_max(u, N, 0), N);
    CHECK_EQ(qt_uint_min(u, N, 0), 1);
    CHECK_EQ(qt_uint_prod(u, 20, 0), 2432902008176640000ULL); /* 20! */
    CHECK_EQ(qt_int_sum(s, N, 0), -(N / 2)); /* 0-1+2-3... */
    CHECK_EQ(qt_int_max(s, N, 0), N - 2);
    CHECK_EQ(qt_int_min(s, N, 0), -(N - 1));
    saligned_t neg[3] = {-2, 3, -4};
    CHECK_EQ(qt_int_prod(neg, 3, 0), 24);
    CHECK(qt_double_sum(x, N, 0) == 0.5 * (N - 1) * N / 2);
    CHECK(qt_double_max(x, N, 0) == 0.5 * (N - 1));
    CHECK(qt_double_min(x, N, 0) == 0.0);
    double halves[4] = {0.5, 0.5, 4.0, -2.0};
    CHECK(qt_double_prod(halves, 4, 0) == -2.0);
    /* empty arrays */
    CHECK_EQ(qt_uint_sum(u, 0, 0), 0);
    CHECK_EQ(qt_int_prod(s, 0, 0), 1);
    CHECK(qt_double_prod(x, 0, 0) == 1.0);
    CHECK_EQ(qt_uint_max(NULL, 0, 0), 0);
    /* checkfeb: waits for the empty elements to be filled */
    for (int i = 0; i < 64; i++) {
        late[i] = (aligned_t)i;
        if (i % 2 == 0)
            qthread_empty(&late[i]);
    }
    aligned_t r;
    qthread_fork(fill_late, NULL, &r);
    CHECK_EQ(qt_uint_sum(late, 64, 1), 63 * 64 / 2);
    qthread_readFF(NULL, &r);
    CHECK_EQ(qt_uint_max(u, N, 1), N); /* all full: no waiting */
    /* misuse */
    CHECK_EQ(qt_uint_sum(NULL, 5, 0), 0);
    CHECK(contains(cantus_last_error(), "qt_uint_sum: `array` is NULL"));
    char buf[32] __attribute__((aligned(8)));
    memset(buf, 0, sizeof buf);
    CHECK(qt_double_sum((double *)(void *)(buf + 4), 2, 1) == 0.0);
    CHECK(contains(cantus_last_error(), "not aligned"));
}

/* ---- qtimer ---- */
static void timers(void)
{
    qtimer_t t = qtimer_create();
    CHECK(t != NULL);
    qtimer_start(t);
    sleep_ms(20);
    qtimer_stop(t);
    double secs = qtimer_secs(t);
    CHECK(secs >= 0.015 && secs < 5.0);
    qtimer_start(t); /* restart: forgets the stop */
    CHECK(qtimer_secs(t) == 0.0);
    CHECK(contains(cantus_last_error(), "not started and then stopped"));
    qtimer_stop(t);
    CHECK(qtimer_secs(t) >= 0.0);
    qtimer_destroy(t);
    qtimer_destroy(NULL);
    CHECK(qtimer_secs(NULL) == 0.0);
}

/* ---- barrier ---- */
enum { ROUNDS = 200, PARTIES = 8 };
static qt_barrier_t *bar;
static aligned_t arrivals[ROUNDS];
static aligned_t barrier_errors;

static aligned_t barrier_party(void *arg)
{
    size_t id = (size_t)(uintptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        qthread_incr(&arrivals[r], 1);
        if (id % 2)
            qt_barrier_enter(bar);
        else
            qt_barrier_enter_id(bar, id);
        /* everyone of this round has arrived */
        if (__atomic_load_n(&arrivals[r], __ATOMIC_RELAXED) != PARTIES + 1)
            qthread_incr(&barrier_errors, 1);
        if (r % 16 == 0)
            qthread_yield();
    }
    return 0;
}

static aligned_t enter_once(void *arg)
{
    qt_barrier_enter(arg);
    qthread_incr(&ran, 1);
    return 0;
}

/* RET_SINC_VOID submissions that a worker holds while it runs more of the
 * same sinc's tasks (sched/worker/deferred.rs): they must all arrive, and
 * arrive before the worker waits or runs anything else. */
static qt_sinc_t held_a, held_b;
static aligned_t held_word;

static aligned_t wait_for_a(void *arg)
{
    (void)arg;
    qt_sinc_wait(&held_a, NULL);
    return 0;
}

static aligned_t read_held_word(void *arg)
{
    (void)arg;
    qthread_readFF(NULL, &held_word);
    qthread_incr(&ran, 1);
    return 0;
}

static void held_submissions(void)
{
    /* two sincs' tasks interleaved: each switch of sinc makes the held ones */
    qt_sinc_init(&held_a, 0, NULL, NULL, 500);
    qt_sinc_init(&held_b, 0, NULL, NULL, 500);
    ran = 0;
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, i % 2 ? &held_a : &held_b, 0, NULL,
                               NO_SHEPHERD, QTHREAD_SPAWN_RET_SINC_VOID),
                 QTHREAD_SUCCESS);
    qt_sinc_wait(&held_a, NULL);
    qt_sinc_wait(&held_b, NULL);
    CHECK_EQ(ran, 1000);

    /* on one shepherd: B's task waits for A, whose task's submission its
     * worker holds until it goes idle (a hang if never made) */
    for (int order = 0; order < 2; order++) {
        qt_sinc_reset(&held_a, 1);
        qt_sinc_reset(&held_b, 1);
        ran = 0;
        /* order 0: B's task first; order 1: A's first */
        qthread_f fs[2] = {wait_for_a, mark_ran};
        qt_sinc_t *ss[2] = {&held_b, &held_a};
        for (int k = 0; k < 2; k++)
            CHECK_EQ(qthread_spawn(fs[k ^ order], NULL, 0, ss[k ^ order], 0, NULL, 1,
                                   QTHREAD_SPAWN_RET_SINC_VOID),
                     QTHREAD_SUCCESS);
        qt_sinc_wait(&held_b, NULL);
        CHECK_EQ(ran, 1);
    }

    /* a task of the sinc blocks while its worker holds another's
     * submission: the sinc completes once the word is filled */
    qt_sinc_reset(&held_a, 3);
    qthread_empty(&held_word);
    ran = 0;
    for (int i = 0; i < 3; i++)
        CHECK_EQ(qthread_spawn(i == 1 ? read_held_word : mark_ran, NULL, 0, &held_a, 0, NULL, 1,
                               QTHREAD_SPAWN_RET_SINC_VOID),
                 QTHREAD_SUCCESS);
    sleep_ms(20);
    CHECK_EQ(ran, 2);
    qthread_writeF_const(&held_word, 1);
    qt_sinc_wait(&held_a, NULL);
    CHECK_EQ(ran, 3);
    qt_sinc_fini(&held_a);
    qt_sinc_fini(&held_b);
}

static void barriers(void)
{
    /* PARTIES tasks (more than the workers) and this thread, ROUNDS rounds;
     * the tasks are started with qthread_spawn into a counting sinc */
    bar = qt_barrier_create(PARTIES + 1, REGION_BARRIER);
    CHECK(bar != NULL);
    qt_sinc_t done;
    qt_sinc_init(&done, 0, NULL, NULL, PARTIES);
    for (uintptr_t i = 0; i < PARTIES; i++)
        CHECK_EQ(qthread_spawn(barrier_party, (void *)i, 0, &done, 0, NULL, NO_SHEPHERD,
                               QTHREAD_SPAWN_RET_SINC_VOID),
                 QTHREAD_SUCCESS);
    int good = 1;
    for (int r = 0; r < ROUNDS; r++) {
        qthread_incr(&arrivals[r], 1);
        qt_barrier_enter(bar);
        good &= __atomic_load_n(&arrivals[r], __ATOMIC_RELAXED) == PARTIES + 1;
    }
    qt_sinc_wait(&done, NULL);
    CHECK(good);
    CHECK_EQ(barrier_errors, 0);
    qt_barrier_destroy(bar);

    /* resize releases those waiting; destroy is refused while anyone waits */
    qt_barrier_t *b = qt_barrier_create(3, LOOP_BARRIER);
    ran = 0;
    aligned_t r1, r2;
    long blocked = cantus_num_blocked();
    qthread_fork(enter_once, b, &r1);
    qthread_fork(enter_once, b, &r2);
    CHECK(wait_blocked(blocked + 2));
    CHECK_EQ(ran, 0);
    qt_barrier_destroy(b);
    CHECK(contains(cantus_last_error(), "wait in the barrier"));
    qt_barrier_resize(b, 2);
    qthread_readFF(NULL, &r1);
    qthread_readFF(NULL, &r2);
    CHECK_EQ(ran, 2);
    qt_barrier_enter_id(b, 2); /* id not below the size: refused */
    CHECK(contains(cantus_last_error(), "not below"));
    qt_barrier_destroy(b);
    CHECK(qt_barrier_create(0, REGION_BARRIER) == NULL);
    CHECK(qt_barrier_create(2, (qt_barrier_btype)7) == NULL);
    qt_barrier_enter(NULL);
    CHECK(contains(cantus_last_error(), "`b` is NULL"));
}

/* ---- INT60 macros, bool from qthread.h ---- */
static void int60(void)
{
    bool ok = true; /* bool without <stdbool.h>: qthread.h provides it */
    CHECK(ok);
    CHECK_EQ(INT60TOINT64(INT64TOINT60(-5)), -5);
    CHECK_EQ(INT60TOINT64(INT64TOINT60(123456789)), 123456789);
    CHECK(INT64TOINT60(-1) == 0x0FFFFFFFFFFFFFFFULL);
    int64_t top = ((int64_t)1 << 59) - 1, bottom = -((int64_t)1 << 59);
    CHECK(INT60TOINT64(INT64TOINT60(top)) == top);
    CHECK(INT60TOINT64(INT64TOINT60(bottom)) == bottom);
    syncvar_t sv = SYNCVAR_STATIC_INITIALIZER;
    uint64_t v;
    qthread_syncvar_writeF_const(&sv, INT64TOINT60(-42));
    qthread_syncvar_readFF(&v, &sv);
    CHECK_EQ(INT60TOINT64(v), -42);
}

static void before_init(void)
{
    CHECK_EQ(qthread_id(), QTHREAD_NON_TASK_ID);
    CHECK_EQ(qthread_lock(&lock_word), QTHREAD_NOT_ALLOWED);
    aligned_t r;
    CHECK_EQ(qthread_spawn(mark_ran, NULL, 0, &r, 0, NULL, NO_SHEPHERD, 0), QTHREAD_NOT_ALLOWED);
    CHECK(qt_barrier_create(2, REGION_BARRIER) == NULL);
    aligned_t one = 1;
    CHECK_EQ(qt_uint_sum(&one, 1, 0), 0);
    /* timers and float atomics need no runtime */
    float f = 0;
    CHECK(qthread_fincr(&f, 1.0f) == 0.0f);
    qtimer_t t = qtimer_create();
    CHECK(t != NULL);
    qtimer_destroy(t);
}

int main(void)
{
    before_init();
    /* qthread_init's count applies unless the environment sets one */
    unsetenv("CANTUS_WORKERS");
    unsetenv("QTHREAD_HWPAR");
    unsetenv("QT_HWPAR");
    CHECK_EQ(qthread_init(3), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_num_shepherds(), 3);
    CHECK_EQ(qthread_init(5), QTHREAD_SUCCESS); /* running: a no-op */
    CHECK_EQ(qthread_num_shepherds(), 3);
    ids();
    copyargs();
    spawns();
    preconds();
    locks();
    purge_to();
    atomics();
    loops();
    reductions();
    timers();
    barriers();
    held_submissions();
    int60();
    qthread_finalize();
    CHECK_EQ(qthread_id(), QTHREAD_NON_TASK_ID);
    return DONE();
}
