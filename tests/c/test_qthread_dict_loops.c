/*
 * test_qthread_dict_loops.c - <qthread/hash.h>, <qthread/dictionary.h>
 * and the loop queues of <qthread/qloop.h>: hash values (deterministic,
 * spread, seeded), the dictionary's put / put_if_absent / get / delete
 * with equal-hash chains, cleanup calls, iterators (every entry once,
 * end, equality, copies, deletion while iterating), concurrent puts,
 * put_if_absent races and deletes from many tasks; every loop-queue kind
 * running every index exactly once (with offsets, empty loops, setchunk,
 * run_there, addworker before and during a run, a run from inside a
 * task), and the misuse each call reports.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <qthread/dictionary.h>
#include <qthread/hash.h>
#include <qthread/qloop.h>
#include <qthread/qthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ---- hash.h ---- */

static void hashes(void)
{
    CHECK(qt_hash64(42) == qt_hash64(42));
    int distinct = 1;
    for (uint64_t k = 0; k < 1000 && distinct; k++)
        for (uint64_t j = k + 1; j < k + 8; j++)
            if (qt_hash64(k) == qt_hash64(j)) distinct = 0;
    CHECK(distinct);
    CHECK(qt_hash64(0) != 0 || qt_hash64(1) != 1); /* mixed, not the identity */
    /* neighbouring keys differ in many bits */
    CHECK(__builtin_popcountll(qt_hash64(1000) ^ qt_hash64(1001)) > 8);

    char a[] = "hello, dictionary", b[] = "hello, dictionary", c[] = "hello, dictionarz";
    CHECK(qt_hash_bytes(a, strlen(a), GOLDEN_RATIO) == qt_hash_bytes(b, strlen(b), GOLDEN_RATIO));
    CHECK(qt_hash_bytes(a, strlen(a), GOLDEN_RATIO) != qt_hash_bytes(c, strlen(c), GOLDEN_RATIO));
    CHECK(qt_hash_bytes(a, strlen(a), 1) != qt_hash_bytes(a, strlen(a), 2));
    CHECK(qt_hash_bytes(a, 5, 0) != qt_hash_bytes(a, 6, 0));
    CHECK(qt_hash_bytes(NULL, 0, 7) == qt_hash_bytes(a, 0, 7)); /* no bytes read */
    /* misuse: NULL with bytes > 0 gives the state, reported */
    CHECK(qt_hash_bytes(NULL, 3, 99) == 99);
    CHECK(strstr(cantus_last_error(), "key_ptr") != NULL);
}

/* ---- dictionary.h ---- */

static int str_eq(void *a, void *b) { return strcmp(a, b) == 0; }
static int str_hash(void *s) { return (int)qt_hash_bytes(s, strlen(s), GOLDEN_RATIO); }

static aligned_t cleanups, cleanups_with_value;
static void count_cleanup(void *key, void *value)
{
    (void)key;
    qthread_incr(&cleanups, 1);
    if (value) qthread_incr(&cleanups_with_value, 1);
}

/* integer keys (never 0) as pointers */
#define K(i) ((void *)(uintptr_t)(i))
static int int_eq(void *a, void *b) { return a == b; }
static int int_hash(void *k) { return (int)qt_hash64((uint64_t)(uintptr_t)k); }
static int mod4_hash(void *k) { return (int)((uintptr_t)k % 4); } /* long chains */

static void dictionary_basics(void)
{
    char k1[] = "k1", k2[] = "k2", k2b[] = "k2", k3[] = "k3";
    char v1[] = "v1", v2[] = "v2", nv2[] = "newv2", other[] = "other";
    cleanups = cleanups_with_value = 0;
    qt_dictionary *d = qt_dictionary_create(str_eq, str_hash, count_cleanup);
    CHECK(d != NULL);
    CHECK(qt_dictionary_get(d, k1) == NULL);
    CHECK(qt_dictionary_put(d, k1, v1) == v1);
    CHECK(qt_dictionary_put(d, k2, v2) == v2);
    CHECK(qt_dictionary_get(d, "k1") == v1); /* found by equality, not address */
    CHECK(qt_dictionary_get(d, "k2") == v2);
    CHECK(qt_dictionary_get(d, "k3") == NULL);
    /* put replaces, returns the new value; the entry keeps its first key */
    CHECK(qt_dictionary_put(d, k2b, nv2) == nv2);
    CHECK(qt_dictionary_get(d, k2) == nv2);
    /* put_if_absent keeps the present value and returns it */
    CHECK(qt_dictionary_put_if_absent(d, k2, other) == nv2);
    CHECK(qt_dictionary_get(d, k2) == nv2);
    CHECK(qt_dictionary_put_if_absent(d, k3, other) == other);
    CHECK(qt_dictionary_get(d, k3) == other);
    CHECK_EQ(cleanups, 0);

    int n = 0, saw_k2_first_key = 0;
    qt_dictionary_iterator *it = qt_dictionary_iterator_create(d);
    CHECK(it != NULL && it != ERROR);
    CHECK(qt_dictionary_iterator_get(it) == NULL); /* before the first */
    list_entry *e;
    while ((e = qt_dictionary_iterator_next(it)) != NULL) {
        CHECK(e != ERROR);
        CHECK(qt_dictionary_iterator_get(it) == e);
        CHECK(qt_dictionary_get(d, e->key) == e->value);
        CHECK_EQ(e->hashed_key, (uint64_t)(int64_t)str_hash(e->key));
        if (e->key == k2) saw_k2_first_key = 1;
        n++;
    }
    CHECK_EQ(n, 3);
    CHECK(saw_k2_first_key);
    qt_dictionary_iterator *end = qt_dictionary_end(d);
    CHECK(qt_dictionary_iterator_equals(it, end));
    CHECK(qt_dictionary_iterator_get(end) == NULL);
    CHECK(qt_dictionary_iterator_next(end) == NULL); /* stays at the end */
    CHECK(qt_dictionary_iterator_next(it) == NULL);
    qt_dictionary_iterator_destroy(it);
    qt_dictionary_iterator_destroy(end);

    /* delete: the value back, cleanup(key, NULL) */
    CHECK(qt_dictionary_delete(d, "k2") == nv2);
    CHECK_EQ(cleanups, 1);
    CHECK_EQ(cleanups_with_value, 0);
    CHECK(qt_dictionary_get(d, k2) == NULL);
    CHECK(qt_dictionary_delete(d, k2) == NULL);
    CHECK_EQ(cleanups, 1);
    /* destroy: cleanup(key, value) for the two left */
    qt_dictionary_destroy(d);
    CHECK_EQ(cleanups, 3);
    CHECK_EQ(cleanups_with_value, 2);
}

static void dictionary_chains_and_iterators(void)
{
    enum { N = 1000 };
    static char seen[N + 1];
    qt_dictionary *d = qt_dictionary_create(int_eq, mod4_hash, NULL);
    for (uintptr_t i = 1; i <= N; i++) CHECK(qt_dictionary_put(d, K(i), K(i * 10)) == K(i * 10));
    for (uintptr_t i = 1; i <= N; i++)
        if (qt_dictionary_get(d, K(i)) != K(i * 10)) CHECK(!"get in a chain");
    /* delete from chain heads, middles and tails */
    for (uintptr_t i = 3; i <= N; i += 3) CHECK(qt_dictionary_delete(d, K(i)) == K(i * 10));
    size_t left = 0;
    for (uintptr_t i = 1; i <= N; i++) {
        void *v = qt_dictionary_get(d, K(i));
        if (i % 3 == 0) CHECK(v == NULL);
        else {
            CHECK(v == K(i * 10));
            left++;
        }
    }
    /* the iterator visits every entry exactly once; copies and equality */
    memset(seen, 0, sizeof seen);
    qt_dictionary_iterator *it = qt_dictionary_iterator_create(d);
    qt_dictionary_iterator *it2 = qt_dictionary_iterator_create(d);
    CHECK(qt_dictionary_iterator_equals(it, it2));
    size_t visits = 0;
    list_entry *e;
    while ((e = qt_dictionary_iterator_next(it)) != NULL) {
        uintptr_t k = (uintptr_t)e->key;
        CHECK(k >= 1 && k <= N && k % 3 != 0);
        if (k >= 1 && k <= N) seen[k]++;
        visits++;
        if (visits == 10) {
            qt_dictionary_iterator *c = qt_dictionary_iterator_copy(it);
            CHECK(qt_dictionary_iterator_equals(c, it));
            CHECK(qt_dictionary_iterator_get(c) == e);
            qt_dictionary_iterator_next(c);
            CHECK(!qt_dictionary_iterator_equals(c, it));
            qt_dictionary_iterator_destroy(c);
        }
    }
    CHECK_EQ(visits, left);
    int once = 1;
    for (uintptr_t i = 1; i <= N; i++)
        if (seen[i] != (i % 3 != 0)) once = 0;
    CHECK(once);
    qt_dictionary_iterator_next(it2);
    CHECK(!qt_dictionary_iterator_equals(it, it2));
    qt_dictionary_iterator_destroy(it);
    qt_dictionary_iterator_destroy(it2);
    qt_dictionary_destroy(d);

    /* distinct hashes: deleting the entry an iterator stands on, then
     * going on, still visits every entry once */
    d = qt_dictionary_create(int_eq, int_hash, NULL);
    for (uintptr_t i = 1; i <= N; i++) qt_dictionary_put(d, K(i), K(i));
    memset(seen, 0, sizeof seen);
    it = qt_dictionary_iterator_create(d);
    visits = 0;
    while ((e = qt_dictionary_iterator_next(it)) != NULL) {
        uintptr_t k = (uintptr_t)e->key;
        if (k >= 1 && k <= N) seen[k]++;
        visits++;
        CHECK(qt_dictionary_delete(d, K(k)) == K(k)); /* e is freed now */
    }
    CHECK_EQ(visits, N);
    once = 1;
    for (uintptr_t i = 1; i <= N; i++)
        if (seen[i] != 1) once = 0;
    CHECK(once);
    qt_dictionary_iterator_destroy(it);
    /* empty: the first next is the end */
    it = qt_dictionary_iterator_create(d);
    CHECK(qt_dictionary_iterator_next(it) == NULL);
    qt_dictionary_iterator_destroy(it);
    qt_dictionary_destroy(d);
}

#define TASKS 16
#define PER 2000
#define SHARED 200
static qt_dictionary *shared_dict;
static void *winner[SHARED + 1];

static aligned_t putter(void *arg)
{
    uintptr_t t = (uintptr_t)arg; /* 1..TASKS */
    aligned_t bad = 0;
    for (uintptr_t i = 0; i < PER; i++) {
        uintptr_t k = 1000000 + t * PER + i; /* this task's own keys */
        if (qt_dictionary_put(shared_dict, K(k), K(k + 1)) != K(k + 1)) bad++;
        /* everyone races for the shared keys 1..SHARED */
        uintptr_t s = 1 + (i * 7 + t) % SHARED;
        void *got = qt_dictionary_put_if_absent(shared_dict, K(s), K(t));
        if ((uintptr_t)got < 1 || (uintptr_t)got > TASKS) bad++;
        if (qt_dictionary_get(shared_dict, K(s)) != got) bad++; /* never replaced */
    }
    /* delete every other own key */
    for (uintptr_t i = 0; i < PER; i += 2) {
        uintptr_t k = 1000000 + t * PER + i;
        if (qt_dictionary_delete(shared_dict, K(k)) != K(k + 1)) bad++;
    }
    return bad;
}

static void dictionary_concurrent(void)
{
    shared_dict = qt_dictionary_create(int_eq, int_hash, NULL);
    aligned_t ret[TASKS];
    for (uintptr_t t = 0; t < TASKS; t++)
        CHECK_EQ(qthread_fork(putter, (void *)(t + 1), &ret[t]), QTHREAD_SUCCESS);
    aligned_t bad = 0;
    for (int t = 0; t < TASKS; t++) {
        qthread_readFF(NULL, &ret[t]);
        bad += ret[t];
    }
    CHECK_EQ(bad, 0);
    /* every own odd key present with its value, every even one gone */
    size_t wrong = 0;
    for (uintptr_t t = 1; t <= TASKS; t++)
        for (uintptr_t i = 0; i < PER; i++) {
            uintptr_t k = 1000000 + t * PER + i;
            void *v = qt_dictionary_get(shared_dict, K(k));
            if (v != (i % 2 ? K(k + 1) : NULL)) wrong++;
        }
    CHECK_EQ(wrong, 0);
    for (uintptr_t s = 1; s <= SHARED; s++) {
        winner[s] = qt_dictionary_get(shared_dict, K(s));
        CHECK((uintptr_t)winner[s] >= 1 && (uintptr_t)winner[s] <= TASKS);
    }
    size_t n = 0;
    qt_dictionary_iterator *it = qt_dictionary_iterator_create(shared_dict);
    while (qt_dictionary_iterator_next(it) != NULL) n++;
    CHECK_EQ(n, TASKS * PER / 2 + SHARED);
    qt_dictionary_iterator_destroy(it);
    qt_dictionary_destroy(shared_dict);
}

static void dictionary_misuse(void)
{
    CHECK(qt_dictionary_create(NULL, str_hash, NULL) == NULL);
    CHECK(strstr(cantus_last_error(), "eq") != NULL);
    CHECK(qt_dictionary_create(str_eq, NULL, NULL) == NULL);
    CHECK(qt_dictionary_put(NULL, "k", "v") == NULL);
    CHECK(strstr(cantus_last_error(), "dict") != NULL);
    CHECK(qt_dictionary_put_if_absent(NULL, "k", "v") == NULL);
    CHECK(qt_dictionary_get(NULL, "k") == NULL);
    CHECK(qt_dictionary_delete(NULL, "k") == NULL);
    CHECK(qt_dictionary_iterator_create(NULL) == ERROR);
    CHECK(qt_dictionary_iterator_next(NULL) == ERROR);
    CHECK(qt_dictionary_iterator_get(NULL) == ERROR);
    CHECK(qt_dictionary_iterator_next(ERROR) == ERROR);
    CHECK(qt_dictionary_end(NULL) == NULL);
    CHECK(qt_dictionary_iterator_copy(NULL) == NULL);
    CHECK(qt_dictionary_iterator_equals(NULL, NULL) == 1);
    qt_dictionary *d = qt_dictionary_create(str_eq, str_hash, NULL);
    qt_dictionary_iterator *it = qt_dictionary_iterator_create(d);
    CHECK(qt_dictionary_iterator_equals(it, NULL) == 0);
    qt_dictionary_iterator_destroy(it);
    qt_dictionary_iterator_destroy(NULL); /* nothing */
    qt_dictionary_destroy(d);
    qt_dictionary_destroy(NULL); /* nothing */
}

/* ---- loop queues ---- */

#define LN 100003 /* odd, not a multiple of the shepherds */
static aligned_t *hits;
static aligned_t chunks, biggest, out_of_range;
static qqloop_handle_t *adding_to; /* the loop the body adds a worker to */
static aligned_t added;

static void count_body(size_t startat, size_t stopat, void *arg)
{
    size_t stop = (size_t)(uintptr_t)arg;
    if (startat >= stopat || stopat > stop) qthread_incr(&out_of_range, 1);
    for (size_t i = startat; i < stopat && i < stop; i++) qthread_incr(&hits[i], 1);
    qthread_incr(&chunks, 1);
    aligned_t size = stopat - startat, b = biggest;
    while (size > b && qthread_cas(&biggest, b, size) != b) b = biggest;
    if (adding_to && qthread_cas(&added, 0, 1) == 0)
        qt_loop_queue_addworker(adding_to, (qthread_shepherd_id_t)(qthread_num_shepherds() - 1));
}

static void reset(void)
{
    memset(hits, 0, LN * sizeof *hits);
    chunks = biggest = out_of_range = 0;
}

/* every index in [start, stop) ran once, none outside */
static int each_once(size_t start, size_t stop)
{
    for (size_t i = 0; i < LN; i++)
        if (hits[i] != (i >= start && i < stop)) return 0;
    return out_of_range == 0;
}

static qqloop_handle_t *make(qt_loop_queue_type type, size_t start, size_t stop)
{
    return qt_loop_queue_create(type, start, stop, 1, count_body, (void *)(uintptr_t)stop);
}

static void kinds(void)
{
    size_t sheps = qthread_num_shepherds();
    const qt_loop_queue_type all[] = {CHUNK, GUIDED, FACTORED, TIMED};
    for (int k = 0; k < 4; k++) {
        reset();
        qqloop_handle_t *l = make(all[k], 0, LN);
        CHECK(l != NULL);
        qt_loop_queue_run(l);
        CHECK(each_once(0, LN));
        CHECK(chunks > 1);
        /* with an offset */
        reset();
        qt_loop_queue_run(make(all[k], 17, LN - 5));
        CHECK(each_once(17, LN - 5));
        /* empty and reversed ranges run nothing */
        reset();
        qt_loop_queue_run(make(all[k], 50, 50));
        qt_loop_queue_run(make(all[k], 60, 50));
        CHECK_EQ(chunks, 0);
        /* one iteration */
        reset();
        qt_loop_queue_run(make(all[k], 9, 10));
        CHECK(each_once(9, 10));
        CHECK_EQ(chunks, 1);
    }
    /* the default CHUNK size: n / shepherds / 10 */
    reset();
    qt_loop_queue_run(make(CHUNK, 0, LN));
    CHECK_EQ(biggest, LN / sheps / 10);
    /* setchunk: all chunks 1000 but the last */
    reset();
    qqloop_handle_t *l = make(CHUNK, 0, LN);
    qt_loop_queue_setchunk(l, 1000);
    qt_loop_queue_run(l);
    CHECK(each_once(0, LN));
    CHECK_EQ(chunks, (LN + 999) / 1000);
    CHECK_EQ(biggest, 1000);
    /* GUIDED: no chunk above n / shepherds; FACTORED: none above n / 2p */
    reset();
    qt_loop_queue_run(make(GUIDED, 0, LN));
    CHECK(biggest <= LN / sheps);
    CHECK(chunks >= sheps);
    reset();
    qt_loop_queue_run(make(FACTORED, 0, LN));
    CHECK(biggest <= (LN + 2 * sheps - 1) / (2 * sheps));
    CHECK(chunks >= 2 * sheps);
    /* TIMED: the first chunks are small, the cap is n / 2p + 1 */
    reset();
    qt_loop_queue_run(make(TIMED, 0, LN));
    CHECK(biggest <= LN / (2 * sheps) + 1);
    CHECK(chunks >= sheps + 1);
}

static void run_there_and_addworker(void)
{
    size_t sheps = qthread_num_shepherds();
    /* run_there: one worker, on the last shepherd */
    reset();
    qt_loop_queue_run_there(make(GUIDED, 0, LN), (qthread_shepherd_id_t)(sheps - 1));
    CHECK(each_once(0, LN));
    /* a shepherd that does not exist: reported, the handle stays usable */
    reset();
    qqloop_handle_t *l = make(FACTORED, 0, LN);
    qt_loop_queue_run_there(l, 9999);
    CHECK(strstr(cantus_last_error(), "shepherd 9999") != NULL);
    CHECK_EQ(chunks, 0);
    qt_loop_queue_run(l);
    CHECK(each_once(0, LN));
    /* addworker before run */
    reset();
    l = make(CHUNK, 0, LN);
    qt_loop_queue_setchunk(l, 100);
    qt_loop_queue_addworker(l, 0);
    qt_loop_queue_addworker(l, 9999); /* reported, nothing joins */
    CHECK(strstr(cantus_last_error(), "shepherd 9999") != NULL);
    qt_loop_queue_run_there(l, 0);
    CHECK(each_once(0, LN));
    /* addworker from a loop body, while it runs */
    for (int k = 0; k < 4; k++) {
        const qt_loop_queue_type all[] = {CHUNK, GUIDED, FACTORED, TIMED};
        reset();
        added = 0;
        l = make(all[k], 0, LN);
        adding_to = l;
        qt_loop_queue_run_there(l, 0);
        adding_to = NULL;
        CHECK_EQ(added, 1);
        CHECK(each_once(0, LN));
    }
}

static aligned_t loop_in_task(void *arg)
{
    qt_loop_queue_type type = (qt_loop_queue_type)(uintptr_t)arg;
    qt_loop_queue_run(make(type, 0, LN));
    return each_once(0, LN);
}

static void from_a_task(void)
{
    const qt_loop_queue_type all[] = {CHUNK, GUIDED, FACTORED, TIMED};
    for (int k = 0; k < 4; k++) {
        reset();
        aligned_t ok = 0;
        qthread_fork(loop_in_task, (void *)(uintptr_t)all[k], &ok);
        qthread_readFF(NULL, &ok);
        CHECK_EQ(ok, 1);
    }
}

static void loop_misuse(void)
{
    CHECK(qt_loop_queue_create(CHUNK, 0, 10, 1, NULL, NULL) == NULL);
    CHECK(strstr(cantus_last_error(), "func") != NULL);
    CHECK(qt_loop_queue_create((qt_loop_queue_type)7, 0, 10, 1, count_body, NULL) == NULL);
    CHECK(strstr(cantus_last_error(), "unknown type 7") != NULL);
    qt_loop_queue_run(NULL);
    CHECK(strstr(cantus_last_error(), "loop") != NULL);
    qt_loop_queue_run_there(NULL, 0);
    qt_loop_queue_addworker(NULL, 0);
    qt_loop_queue_setchunk(NULL, 5);
    /* setchunk: only CHUNK loops, never 0 (ignored, reported) */
    reset();
    qqloop_handle_t *l = make(GUIDED, 0, LN);
    qt_loop_queue_setchunk(l, 10);
    CHECK(strstr(cantus_last_error(), "only CHUNK") != NULL);
    qt_loop_queue_run(l);
    CHECK(each_once(0, LN));
    reset();
    l = make(CHUNK, 0, 1000);
    qt_loop_queue_setchunk(l, 0);
    CHECK(strstr(cantus_last_error(), "chunk of 0") != NULL);
    qt_loop_queue_run(l);
    CHECK(each_once(0, 1000));
}

int main(void)
{
    unsetenv("CANTUS_WORKERS");
    unsetenv("QTHREAD_HWPAR");
    unsetenv("QT_HWPAR");
    setenv("QTHREAD_NUM_SHEPHERDS", "4", 1);
    hashes(); /* needs no runtime */
    /* no runtime: the dictionary and loop queues are refused */
    CHECK(qt_dictionary_create(str_eq, str_hash, NULL) == NULL);
    CHECK(strstr(cantus_last_error(), "no runtime") != NULL);
    CHECK(qt_loop_queue_create(CHUNK, 0, 10, 1, count_body, NULL) == NULL);
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    CHECK_EQ(qthread_num_shepherds(), 4);
    hits = malloc(LN * sizeof *hits);
    dictionary_basics();
    dictionary_chains_and_iterators();
    dictionary_concurrent();
    dictionary_misuse();
    kinds();
    run_there_and_addworker();
    from_a_task();
    loop_misuse();
    free(hits);
    qthread_finalize();
    return DONE();
}
