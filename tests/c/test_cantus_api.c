/*
 * test_cantus_api.c - every function of cantus.h, from tasks and from
 * plain pthreads that are not tasks, and what misuse returns.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"

static int contains(const char *s, const char *part) { return strstr(s, part) != NULL; }

/* ---- before startup ---- */
static void before_startup(void)
{
    uint64_t w = 0, v;
    cantus_sync_t s = CANTUS_SYNC_INITIALIZER;
    CHECK_EQ(cantus_is_running(), 0);
    CHECK_EQ(cantus_spawn((cantus_task_fn)0x1, NULL), CANTUS_ENORUNTIME);
    CHECK(contains(cantus_last_error(), "cantus_spawn called with no runtime running"));
    CHECK(contains(cantus_last_error(), "cantus_init()"));
    CHECK_EQ(cantus_feb_read_ff(&w, &v), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_feb_write_xf(&w, 1), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_sync_write_ef(&s, 1), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_yield(), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_sleep_ns(1), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_num_workers(), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_task_id(), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_coforall(3, (cantus_index_fn)0x1, NULL), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_finalize(), CANTUS_ENORUNTIME);
    CHECK(contains(cantus_last_error(), "cantus_finalize"));
    CHECK_EQ(cantus_outside_activity_begin(), CANTUS_ENORUNTIME);
    /* allowed before startup */
    cantus_task_list_t *list = cantus_task_list_create();
    CHECK(list != NULL);
    CHECK_EQ(cantus_task_list_add(list, (cantus_task_fn)0x1, NULL), CANTUS_OK);
    CHECK_EQ(cantus_task_list_size(list), 1);
    CHECK_EQ(cantus_task_list_execute(list), CANTUS_ENORUNTIME);
    CHECK_EQ(cantus_task_list_size(list), 1); /* kept */
    cantus_task_list_destroy(list);          /* never executed: dropped */
    CHECK_EQ(cantus_sync_init(&s), CANTUS_OK);
    CHECK_EQ(cantus_sync_destroy(&s), CANTUS_OK);
    CHECK(contains(cantus_strerror(CANTUS_EALIGN), "aligned"));
    CHECK(contains(cantus_strerror(12345), "unknown"));
    /* a bad configuration is refused before anything starts */
    cantus_config_t bad = CANTUS_CONFIG_DEFAULT;
    bad.stack_size = 100;
    bad.ignore_environment = 1;
    CHECK_EQ(cantus_init(&bad), CANTUS_ECONFIG);
    CHECK(contains(cantus_last_error(), "stack size"));
    CHECK_EQ(cantus_is_running(), 0);
}

/* ---- tasks ---- */
static uint64_t hits;
static void hit(void *arg) { __atomic_fetch_add(&hits, (uint64_t)(uintptr_t)arg, __ATOMIC_RELAXED); }
static void hit_index(size_t i, void *arg)
{
    uint64_t *slots = arg;
    slots[i] = i * i;
}

static uint64_t task_observed_id, task_observed_worker;
static void observe(void *arg)
{
    (void)arg;
    task_observed_id = (uint64_t)cantus_task_id();
    task_observed_worker = (uint64_t)cantus_worker_id();
    CHECK_EQ(cantus_yield(), CANTUS_OK);
    CHECK_EQ(cantus_sleep_ns(100000), CANTUS_OK);
    cantus_counts_t c;
    CHECK_EQ(cantus_counts(&c), CANTUS_OK);
    CHECK(c.running >= 1);
    CHECK_EQ(cantus_finalize(), CANTUS_ECONTEXT); /* would wait for itself */
    CHECK(contains(cantus_last_error(), "inside a task"));
    CHECK_EQ(cantus_init(NULL), CANTUS_EALREADY);
    CHECK_EQ(cantus_outside_activity_begin(), CANTUS_ECONTEXT);
}

static void nested_lists(void *arg)
{
    (void)arg;
    cantus_task_list_t *l = cantus_task_list_create();
    for (int i = 0; i < 10; i++)
        CHECK_EQ(cantus_task_list_add(l, hit, (void *)(uintptr_t)1), CANTUS_OK);
    CHECK_EQ(cantus_task_list_execute(l), CANTUS_OK);
    cantus_task_list_destroy(l);
}

static void tasks(void)
{
    hits = 0;
    for (int i = 0; i < 100; i++)
        CHECK_EQ(cantus_spawn(hit, (void *)(uintptr_t)1), CANTUS_OK);

    uint64_t slots[1000];
    memset(slots, 0xff, sizeof slots);
    CHECK_EQ(cantus_coforall(1000, hit_index, slots), CANTUS_OK);
    int good = 1;
    for (size_t i = 0; i < 1000; i++)
        good &= slots[i] == i * i;
    CHECK(good);
    CHECK_EQ(cantus_coforall(0, hit_index, NULL), CANTUS_OK);

    cantus_task_list_t *list = cantus_task_list_create();
    CHECK(list != NULL);
    for (int i = 0; i < 50; i++)
        CHECK_EQ(cantus_task_list_add(list, hit, (void *)(uintptr_t)1000), CANTUS_OK);
    CHECK_EQ(cantus_task_list_size(list), 50);
    CHECK_EQ(cantus_task_list_execute(list), CANTUS_OK);
    CHECK_EQ(cantus_task_list_size(list), 0);
    CHECK_EQ(cantus_task_list_execute(list), CANTUS_OK); /* empty: fine */
    cantus_task_list_destroy(list);
    cantus_task_list_destroy(NULL);

    CHECK_EQ(cantus_call(nested_lists, NULL), CANTUS_OK);
    CHECK_EQ(cantus_call(observe, NULL), CANTUS_OK);
    CHECK(task_observed_id > 0);
    CHECK(task_observed_worker < (uint64_t)cantus_num_workers());

    /* outside a task */
    CHECK_EQ(cantus_task_id(), 0);
    CHECK_EQ(cantus_worker_id(), CANTUS_ECONTEXT);
    CHECK_EQ(cantus_yield(), CANTUS_OK);
    CHECK_EQ(cantus_sleep_ns(1000), CANTUS_OK);

    /* misuse */
    CHECK_EQ(cantus_spawn(NULL, NULL), CANTUS_EINVAL);
    CHECK(contains(cantus_last_error(), "`fn` is NULL"));
    CHECK_EQ(cantus_coforall(5, NULL, NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_call(NULL, NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_task_list_add(NULL, hit, NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_task_list_execute(NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_task_list_size(NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_counts(NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_init(NULL), CANTUS_EALREADY);

    cantus_counts_t c;
    CHECK_EQ(cantus_counts(&c), CANTUS_OK);
    CHECK_EQ(c.workers, cantus_num_workers());
    CHECK(cantus_num_running() >= 0 && cantus_num_queued() >= 0);
    CHECK(cantus_num_blocked() >= 0 && cantus_num_idle_workers() >= 0);
    CHECK(cantus_num_idle_workers() <= cantus_num_workers());
}

/* ---- full/empty ---- */
static uint64_t word_a, word_b;
static cantus_sync_t sync_a = CANTUS_SYNC_INITIALIZER;

static void echo_task(void *arg)
{
    (void)arg;
    uint64_t v;
    for (int i = 0; i < 1000; i++) {
        cantus_feb_read_fe(&word_a, &v);
        cantus_feb_write_ef(&word_b, v + 1);
    }
}

static void sync_writer(void *arg)
{
    for (uint64_t i = 1; i <= 100; i++)
        cantus_sync_write_ef(&sync_a, i * (uint64_t)(uintptr_t)arg);
}

static uint64_t ff_seen[4];
static void ff_reader(size_t i, void *arg)
{
    (void)arg;
    cantus_feb_read_ff(&word_a, &ff_seen[i]);
}

static void feb(void)
{
    uint64_t v = 0, w = 7;
    /* words start full; all 64 bits are data */
    CHECK_EQ(cantus_feb_is_full(&w), 1);
    CHECK_EQ(cantus_feb_read_ff(&w, &v), CANTUS_OK);
    CHECK_EQ(v, 7);
    CHECK_EQ(cantus_feb_read_fe(&w, &v), CANTUS_OK);
    CHECK_EQ(cantus_feb_is_full(&w), 0);
    CHECK_EQ(cantus_feb_write_ef(&w, UINT64_MAX), CANTUS_OK);
    CHECK_EQ(cantus_feb_read_xx(&w, &v), CANTUS_OK);
    CHECK(v == UINT64_MAX);
    CHECK_EQ(cantus_feb_write_ff(&w, 9), CANTUS_OK);
    CHECK_EQ(w, 9);
    CHECK_EQ(cantus_feb_reset(&w), CANTUS_OK);
    CHECK_EQ(w, 0);
    CHECK_EQ(cantus_feb_is_full(&w), 0);
    CHECK_EQ(cantus_feb_write_xf(&w, 5), CANTUS_OK);
    CHECK_EQ(cantus_feb_is_full(&w), 1);
    CHECK_EQ(cantus_feb_empty(&w), CANTUS_OK);
    CHECK_EQ(cantus_feb_read_xx(&w, &v), CANTUS_OK);
    CHECK_EQ(v, 5); /* empty keeps the value */
    CHECK_EQ(cantus_feb_fill(&w), CANTUS_OK);
    CHECK_EQ(cantus_feb_read_fe(&w, NULL), CANTUS_OK); /* out may be NULL */
    CHECK_EQ(cantus_feb_fill(&w), CANTUS_OK);

    /* hand-off between the main thread (not a task) and a task */
    cantus_feb_empty(&word_a);
    cantus_feb_empty(&word_b);
    CHECK_EQ(cantus_spawn(echo_task, NULL), CANTUS_OK);
    int good = 1;
    for (uint64_t i = 0; i < 1000; i++) {
        cantus_feb_write_ef(&word_a, i);
        cantus_feb_read_fe(&word_b, &v);
        good &= v == i + 1;
    }
    CHECK(good);

    CHECK_EQ(cantus_feb_is_full(&word_a), 0);
    CHECK_EQ(cantus_feb_is_full(&word_b), 0);
    CHECK_EQ(cantus_feb_fill(&word_b), CANTUS_OK);

    /* cantus_sync_t: static initializer is empty */
    CHECK_EQ(cantus_sync_is_full(&sync_a), 0);
    CHECK_EQ(cantus_spawn(sync_writer, (void *)(uintptr_t)3), CANTUS_OK);
    uint64_t sum = 0;
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(cantus_sync_read_fe(&sync_a, &v), CANTUS_OK);
        sum += v;
    }
    CHECK_EQ(sum, 3 * 5050);
    CHECK_EQ(cantus_sync_write_xf(&sync_a, 11), CANTUS_OK);
    CHECK_EQ(cantus_sync_read_ff(&sync_a, &v), CANTUS_OK);
    CHECK_EQ(v, 11);
    CHECK_EQ(cantus_sync_write_ff(&sync_a, 12), CANTUS_OK);
    CHECK_EQ(cantus_sync_read_xx(&sync_a, &v), CANTUS_OK);
    CHECK_EQ(v, 12);
    CHECK_EQ(cantus_sync_is_full(&sync_a), 1);
    CHECK_EQ(cantus_sync_reset(&sync_a), CANTUS_OK);
    CHECK_EQ(cantus_sync_is_full(&sync_a), 0);
    CHECK_EQ(cantus_sync_read_xx(&sync_a, &v), CANTUS_OK);
    CHECK_EQ(v, 0);
    CHECK_EQ(cantus_sync_destroy(&sync_a), CANTUS_OK);

    /* misuse */
    char buf[24] __attribute__((aligned(8)));
    uint64_t *odd = (uint64_t *)(buf + 4);
    CHECK_EQ(cantus_feb_read_fe(odd, &v), CANTUS_EALIGN);
    CHECK(contains(cantus_last_error(), "not aligned to 8 bytes"));
    CHECK_EQ(cantus_feb_write_ef(odd, 1), CANTUS_EALIGN);
    CHECK_EQ(cantus_feb_is_full(odd), CANTUS_EALIGN);
    CHECK_EQ(cantus_feb_read_fe(NULL, &v), CANTUS_EINVAL);
    CHECK_EQ(cantus_feb_read_xx(&w, NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_feb_fill(NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_sync_read_fe(NULL, &v), CANTUS_EINVAL);
    CHECK_EQ(cantus_sync_read_xx(&sync_a, NULL), CANTUS_EINVAL);
    CHECK_EQ(cantus_sync_init((cantus_sync_t *)(buf + 4)), CANTUS_EALIGN);
    CHECK_EQ(cantus_sync_is_full(NULL), CANTUS_EINVAL);
}

/* readFF waiters: every reader sees the value the filler wrote */
static void ff_main(void *arg)
{
    (void)arg;
    CHECK_EQ(cantus_coforall(4, ff_reader, NULL), CANTUS_OK);
}

static void *ff_filler(void *arg)
{
    (void)arg;
    CHECK_EQ(cantus_outside_activity_begin(), CANTUS_OK); /* busy: no deadlock report */
    CHECK_EQ(cantus_outside_activity_begin(), CANTUS_OK); /* nests */
    CHECK_EQ(cantus_outside_activity_end(), CANTUS_OK);
    struct timespec ms20 = {0, 20000000};
    nanosleep(&ms20, NULL); /* let the readers queue up */
    cantus_feb_write_xf(&word_a, 4242);
    CHECK_EQ(cantus_outside_activity_end(), CANTUS_OK);
    CHECK_EQ(cantus_outside_activity_end(), CANTUS_ECONTEXT); /* none open */
    return NULL;
}

static void ff_waiters(void)
{
    cantus_feb_empty(&word_a);
    pthread_t t;
    pthread_create(&t, NULL, ff_filler, NULL);
    CHECK_EQ(cantus_call(ff_main, NULL), CANTUS_OK);
    pthread_join(t, NULL);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(ff_seen[i], 4242);
}

/* ---- destroying a variable somebody waits on ---- */
static cantus_sync_t busy_var = CANTUS_SYNC_INITIALIZER;
static void busy_reader(void *arg)
{
    (void)arg;
    uint64_t v;
    cantus_sync_read_fe(&busy_var, &v);
}

static void destroy_busy(void)
{
    CHECK_EQ(cantus_spawn(busy_reader, NULL), CANTUS_OK);
    int rc = CANTUS_OK;
    for (int i = 0; i < 2000 && rc == CANTUS_OK; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        rc = cantus_sync_destroy(&busy_var);
    }
    CHECK_EQ(rc, CANTUS_EBUSY);
    CHECK(contains(cantus_last_error(), "still wait"));
    CHECK(cantus_num_blocked() >= 1);
    CHECK_EQ(cantus_sync_write_ef(&busy_var, 1), CANTUS_OK); /* releases it */
    rc = CANTUS_EBUSY;
    for (int i = 0; i < 2000 && rc != CANTUS_OK; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        rc = cantus_sync_destroy(&busy_var);
    }
    CHECK_EQ(rc, CANTUS_OK);
}

/* ---- a pthread that is not a task ---- */
static cantus_sync_t from_thread = CANTUS_SYNC_INITIALIZER;
static uint64_t thread_word;
static void waits_for_thread(void *arg)
{
    uint64_t v;
    cantus_feb_read_fe(&thread_word, &v); /* a task waits for the pthread */
    cantus_sync_write_ef(&from_thread, v * 2);
    (void)arg;
}

static void *outside(void *arg)
{
    (void)arg;
    uint64_t v = 0;
    int ok = 1;
    ok &= cantus_is_running() == 1;
    ok &= cantus_task_id() == 0;
    ok &= cantus_worker_id() == CANTUS_ECONTEXT;
    ok &= cantus_spawn(waits_for_thread, NULL) == CANTUS_OK;
    ok &= cantus_feb_write_ef(&thread_word, 21) == CANTUS_OK;
    ok &= cantus_sync_read_fe(&from_thread, &v) == CANTUS_OK; /* blocks as a thread */
    ok &= v == 42;
    uint64_t slots[64];
    ok &= cantus_coforall(64, hit_index, slots) == CANTUS_OK;
    ok &= slots[63] == 63 * 63;
    return (void *)(uintptr_t)ok;
}

static void outside_threads(void)
{
    pthread_t t;
    cantus_feb_empty(&thread_word);
    pthread_create(&t, NULL, outside, NULL);
    void *ok;
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
}

int main(void)
{
    before_startup();
    cantus_config_t cfg = CANTUS_CONFIG_DEFAULT;
    cfg.workers = 2;
    cfg.ignore_environment = 1; /* CANTUS_WORKERS would override workers */
    CHECK_EQ(cantus_init(&cfg), CANTUS_OK);
    CHECK_EQ(cantus_is_running(), 1);
    CHECK_EQ(cantus_num_workers(), 2);
    tasks();
    feb();
    ff_waiters();
    destroy_busy();
    outside_threads();
    CHECK_EQ(cantus_finalize(), CANTUS_OK);
    CHECK_EQ(hits, 100 + 50 * 1000 + 10);
    CHECK_EQ(cantus_is_running(), 0);
    CHECK_EQ(cantus_finalize(), CANTUS_ENORUNTIME);
    /* the runtime can be started again */
    CHECK_EQ(cantus_init(&cfg), CANTUS_OK);
    CHECK_EQ(cantus_coforall(10, hit_index, (uint64_t[10]){0}), CANTUS_OK);
    CHECK_EQ(cantus_finalize(), CANTUS_OK);
    return DONE();
}
