/*
 * chapel_shim.c - a language runtime's tasking layer on cantus's Qthreads
 * interface, in the sequence Chapel's Qthreads shim (tasks-qthreads.c)
 * follows, running a small Chapel-like program on it:
 *
 *  1. The environment first: shepherds, stack size, task-local size
 *     (raised to the shim's per-task state, as Chapel does), spin count.
 *  2. qthread_initialize from a helper pthread, which then forks the
 *     program's main task with a copied argument bundle and waits for an
 *     exit word that the main task fills.
 *  3. Sync variables built as Chapel builds them: a lock (qthread_lock)
 *     around a full bit, and two signal words that waiters readFE and
 *     signalers fill.
 *  4. Tasks forked with copied bundles (begin, coforall) keep their state
 *     (serial flag, task index, a running count) in task-local storage,
 *     which must survive yields and waits and be zero in a new task.
 *  5. readstate(STACK_SIZE) for the shim's stack queries, and a
 *     qtimer-based sleep (yield until the time has passed).
 *
 *     cc chapel_shim.c $(pkg-config --cflags --libs cantus) -lpthread
 *     ./a.out [items]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <qthread/qthread.h>
#include <qthread/qtimer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHIM_STACK (256 * 1024)
#define COFORALL_TASKS 16

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) {
        printf("FAILED: %s\n", what);
        failures++;
    }
}

/* ---- the shim's per-task state, in task-local storage ---- */

typedef struct {
    int serial;        /* Chapel's serial state, inherited from the spawner */
    int64_t index;     /* which task of a coforall */
    int64_t counted;   /* work done so far, kept across waits */
    int64_t spare[5];  /* room, as a real shim keeps more */
} shim_tls_t;

static shim_tls_t *tls(void)
{
    return (shim_tls_t *)qthread_get_tasklocal(sizeof(shim_tls_t));
}

/* ---- sync variables, as Chapel's shim builds them ---- */

typedef struct {
    aligned_t lock;         /* qthread_lock'ed address */
    volatile int is_full;   /* the sync variable's state, under the lock */
    aligned_t signal_full;  /* readFE'd by waiters for full, filled on fill */
    aligned_t signal_empty; /* likewise for empty */
    int64_t value;
} shim_sync_t;

static void sync_init(shim_sync_t *s)
{
    s->is_full = 0;
    s->value = 0;
    qthread_empty(&s->signal_full);
    qthread_empty(&s->signal_empty);
}

static void sync_wait_full_and_lock(shim_sync_t *s)
{
    qthread_lock(&s->lock);
    while (!s->is_full) {
        qthread_unlock(&s->lock);
        qthread_readFE(NULL, &s->signal_full);
        qthread_lock(&s->lock);
    }
}

static void sync_wait_empty_and_lock(shim_sync_t *s)
{
    qthread_lock(&s->lock);
    while (s->is_full) {
        qthread_unlock(&s->lock);
        qthread_readFE(NULL, &s->signal_empty);
        qthread_lock(&s->lock);
    }
}

static void sync_mark_full_and_unlock(shim_sync_t *s)
{
    qthread_fill(&s->signal_full);
    s->is_full = 1;
    qthread_unlock(&s->lock);
}

static void sync_mark_empty_and_unlock(shim_sync_t *s)
{
    qthread_fill(&s->signal_empty);
    s->is_full = 0;
    qthread_unlock(&s->lock);
}

/* writeEF and readFE of a Chapel sync int */
static void sync_write(shim_sync_t *s, int64_t v)
{
    sync_wait_empty_and_lock(s);
    s->value = v;
    sync_mark_full_and_unlock(s);
}

static int64_t sync_read(shim_sync_t *s)
{
    sync_wait_full_and_lock(s);
    int64_t v = s->value;
    sync_mark_empty_and_unlock(s);
    return v;
}

/* ---- forking with copied bundles (Chapel's chpl_task_addTask) ---- */

typedef struct {
    void (*body)(void *);
    int serial;    /* the spawner's serial state */
    int64_t index; /* coforall index */
    char arg[64];  /* the body's own argument, copied with the bundle */
} bundle_t;

static int zeroed_tls = 1;

static aligned_t wrapper(void *arg)
{
    bundle_t *b = arg; /* the task's own copy */
    shim_tls_t *t = tls();
    if (t == NULL || t->serial != 0 || t->index != 0 || t->counted != 0) zeroed_tls = 0;
    t->serial = b->serial;
    t->index = b->index;
    b->body(b->arg);
    return 0;
}

static void begin(void (*body)(void *), const void *arg, size_t size, int64_t index)
{
    bundle_t b = {body, tls() ? tls()->serial : 0, index, {0}};
    if (size > sizeof b.arg) abort();
    memcpy(b.arg, arg, size);
    if (qthread_fork_copyargs(wrapper, &b, sizeof b, NULL) != QTHREAD_SUCCESS) abort();
    /* b is reused at once: the task has its copy */
}

/* ---- a qtimer-based sleep (chpl_task_sleep) ---- */

static void shim_sleep(double secs)
{
    qtimer_t t = qtimer_create();
    qtimer_start(t);
    do {
        qthread_yield();
        qtimer_stop(t);
    } while (qtimer_secs(t) < secs);
    qtimer_destroy(t);
}

/* ---- the Chapel-like program ---- */

static int64_t items = 2000;

struct producer_arg {
    shim_sync_t *channel;
};

static void producer(void *arg)
{
    struct producer_arg *p = arg;
    for (int64_t i = 1; i <= items; i++) {
        sync_write(p->channel, i);
        tls()->counted++; /* kept across each wait */
    }
    expect(tls()->counted == items, "a producer's task-local count survived its waits");
}

struct part_arg {
    shim_sync_t *done; /* coforall's end count, a sync variable */
    int64_t *sums;
};

static void coforall_body(void *arg)
{
    struct part_arg *p = arg;
    int64_t me = tls()->index, sum = 0;
    for (int64_t i = me; i <= items; i += COFORALL_TASKS) {
        sum += i;
        tls()->counted++;
        if (i % 97 == 0) qthread_yield();
    }
    expect(tls()->index == me, "a coforall task's index survived its yields");
    p->sums[me] = sum;
    /* coforall's end: decrement the count held in a sync variable */
    int64_t left = sync_read(p->done) - 1;
    sync_write(p->done, left);
}

static aligned_t exit_word; /* the main task fills it when the program ends */

struct main_arg {
    int64_t items;
};

static void chapel_main(void *arg)
{
    const struct main_arg *m = arg;
    items = m->items;
    expect(qthread_readstate(STACK_SIZE) == SHIM_STACK, "readstate(STACK_SIZE) is QT_STACK_SIZE");
    expect(qthread_size_tasklocal() >= sizeof(shim_tls_t), "task-local storage holds the state");

    /* begin producer; main consumes through a sync variable */
    shim_sync_t channel;
    sync_init(&channel);
    struct producer_arg pa = {&channel};
    begin(producer, &pa, sizeof pa, 0);
    int64_t sum = 0;
    for (int64_t i = 0; i < items; i++) sum += sync_read(&channel);
    int ok = sum == items * (items + 1) / 2;
    printf("sync channel: %lld items, sum %lld %s\n", (long long)items, (long long)sum,
           ok ? "(correct)" : "(WRONG)");
    expect(ok, "the channel's sum");

    /* coforall i in 0..#16 with an end count in a sync variable */
    shim_sync_t done;
    sync_init(&done);
    sync_write(&done, COFORALL_TASKS);
    int64_t sums[COFORALL_TASKS] = {0};
    struct part_arg part = {&done, sums};
    for (int64_t i = 0; i < COFORALL_TASKS; i++) begin(coforall_body, &part, sizeof part, i);
    for (;;) {
        int64_t left = sync_read(&done);
        sync_write(&done, left);
        if (left == 0) break;
        shim_sleep(0.0005);
    }
    int64_t total = 0;
    for (int i = 0; i < COFORALL_TASKS; i++) total += sums[i];
    ok = total == items * (items + 1) / 2;
    printf("coforall: %d tasks, total %lld %s\n", COFORALL_TASKS, (long long)total,
           ok ? "(correct)" : "(WRONG)");
    expect(ok, "the coforall's total");

    /* a qtimer-based sleep really sleeps */
    qtimer_t t = qtimer_create();
    qtimer_start(t);
    shim_sleep(0.02);
    qtimer_stop(t);
    expect(qtimer_secs(t) >= 0.02, "the qtimer sleep lasted its time");
    qtimer_destroy(t);

    expect(zeroed_tls, "every new task's task-local state started zeroed");
    qthread_fill(&exit_word); /* the program ends */
}

/* The helper pthread: initializes, runs main, waits for the exit word. */
static void *helper(void *arg)
{
    if (qthread_initialize() != QTHREAD_SUCCESS) {
        printf("FAILED: qthread_initialize\n");
        failures++;
        return NULL;
    }
    qthread_empty(&exit_word);
    struct main_arg m = {*(int64_t *)arg};
    bundle_t b = {chapel_main, 0, 0, {0}};
    memcpy(b.arg, &m, sizeof m);
    if (qthread_fork_copyargs(wrapper, &b, sizeof b, NULL) != QTHREAD_SUCCESS) abort();
    qthread_readFF(NULL, &exit_word);
    qthread_finalize();
    return NULL;
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 2000;
    if (n < 1) n = 2000;
    /* 1: the environment, before initializing (Chapel's setupTasklocalStorage
     * raises QT_TASKLOCAL_SIZE to its state's size) */
    setenv("QT_HWPAR", "2", 0);
    char size[32];
    snprintf(size, sizeof size, "%d", SHIM_STACK);
    setenv("QT_STACK_SIZE", size, 1);
    const char *tl = getenv("QT_TASKLOCAL_SIZE");
    if (tl == NULL || (size_t)atol(tl) < sizeof(shim_tls_t)) {
        snprintf(size, sizeof size, "%zu", sizeof(shim_tls_t));
        setenv("QT_TASKLOCAL_SIZE", size, 1);
    }
    setenv("QT_SPINCOUNT", "300", 0);
    setenv("QT_AFFINITY", "no", 0);
    /* 2: the runtime on a helper thread */
    pthread_t h;
    if (pthread_create(&h, NULL, helper, &n) != 0) return 2;
    pthread_join(h, NULL);
    printf("%s\n", failures == 0 ? "chapel shim: all checks passed (correct)"
                                 : "chapel shim: FAILED");
    return failures == 0 ? 0 : 1;
}
