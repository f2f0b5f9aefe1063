/*
 * test_qthread_ds.c - the Qthreads data structures: <qthread/qlfqueue.h>
 * (FIFO order, per-producer order under concurrent producers, NULL
 * elements), <qthread/qswsrqueue.h> (the exact capacity, QTHREAD_OPFAIL
 * when full, the blocking calls through a queue of 4), <qthread/qdqueue.h>
 * (FIFO within a part, enqueue_there and stealing from another part, no
 * runtime at create, concurrent producers and consumers on every
 * shepherd), <qthread/qpool.h> (alignment, distinct items, reuse, tasks)
 * and <qthread/qalloc.h> (static and dynamic maps: every item, distinct
 * blocks, misuse refused, a map's contents and allocations surviving a
 * cleanup and reload at the same address), with every error case.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <qthread/qalloc.h>
#include <qthread/qdqueue.h>
#include <qthread/qlfqueue.h>
#include <qthread/qpool.h>
#include <qthread/qswsrqueue.h>
#include <qthread/qthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define P(x) ((void *)(uintptr_t)(x))
#define U(p) ((uintptr_t)(p))

/* ---- qlfqueue ---- */

#define PRODUCERS 8
#define PER_PRODUCER 2000

static aligned_t lf_producer(void *arg)
{
    qlfqueue_t *q = arg;
    static aligned_t next_id;
    uintptr_t me = qthread_incr(&next_id, 1) + 1; /* 1.. */
    for (uintptr_t i = 1; i <= PER_PRODUCER; i++) {
        if (qlfqueue_enqueue(q, P(me << 32 | i)) != QTHREAD_SUCCESS) return 1;
    }
    return 0;
}

static void lfqueue(void)
{
    qlfqueue_t *q = qlfqueue_create();
    CHECK(q != NULL);
    CHECK_EQ(qlfqueue_empty(q), 1);
    CHECK(qlfqueue_dequeue(q) == NULL);
    CHECK_EQ(qlfqueue_enqueue(q, NULL), QTHREAD_BADARGS);
    CHECK(strstr(cantus_last_error(), "elem") != NULL);
    CHECK_EQ(qlfqueue_enqueue(NULL, P(1)), QTHREAD_BADARGS);
    CHECK(qlfqueue_dequeue(NULL) == NULL);
    CHECK_EQ(qlfqueue_empty(NULL), QTHREAD_BADARGS);
    CHECK_EQ(qlfqueue_destroy(NULL), QTHREAD_BADARGS);
    for (uintptr_t i = 1; i <= 1000; i++) CHECK_EQ(qlfqueue_enqueue(q, P(i)), QTHREAD_SUCCESS);
    CHECK_EQ(qlfqueue_empty(q), 0);
    int in_order = 1;
    for (uintptr_t i = 1; i <= 1000; i++) in_order &= qlfqueue_dequeue(q) == P(i);
    CHECK(in_order);
    CHECK_EQ(qlfqueue_empty(q), 1);

    /* Concurrent producers; one consumer sees each producer's order. */
    aligned_t rets[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        CHECK_EQ(qthread_fork(lf_producer, q, &rets[p]), QTHREAD_SUCCESS);
    }
    uintptr_t last[PRODUCERS + 1] = {0};
    size_t got = 0;
    int ordered = 1;
    while (got < PRODUCERS * PER_PRODUCER) {
        void *e = qlfqueue_dequeue(q);
        if (e == NULL) continue;
        uintptr_t who = U(e) >> 32, i = U(e) & 0xffffffffu;
        if (who < 1 || who > PRODUCERS || i != last[who] + 1) ordered = 0;
        else last[who] = i;
        got++;
    }
    for (int p = 0; p < PRODUCERS; p++) {
        qthread_readFF(NULL, &rets[p]);
        CHECK_EQ(rets[p], 0);
    }
    CHECK(ordered);
    CHECK_EQ(qlfqueue_empty(q), 1);
    CHECK_EQ(qlfqueue_destroy(q), QTHREAD_SUCCESS);
}

/* ---- qswsrqueue ---- */

#define SWSR_N 10000

static aligned_t swsr_writer(void *arg)
{
    for (uintptr_t i = 1; i <= SWSR_N; i++) {
        if (qswsrqueue_enqueue_blocking(arg, P(i)) != QTHREAD_SUCCESS) return 1;
    }
    return 0;
}

static void swsrqueue(void)
{
    CHECK(qswsrqueue_create(0) == NULL);
    qswsrqueue_t *q = qswsrqueue_create(4);
    CHECK(q != NULL);
    CHECK_EQ(qswsrqueue_empty(q), 1);
    CHECK(qswsrqueue_dequeue(q) == NULL);
    for (uintptr_t i = 1; i <= 4; i++) CHECK_EQ(qswsrqueue_enqueue(q, P(i)), QTHREAD_SUCCESS);
    CHECK_EQ(qswsrqueue_enqueue(q, P(5)), QTHREAD_OPFAIL); /* exactly 4 fit */
    CHECK_EQ(qswsrqueue_empty(q), 0);
    for (uintptr_t i = 1; i <= 4; i++) CHECK(qswsrqueue_dequeue(q) == P(i));
    CHECK(qswsrqueue_dequeue(q) == NULL);
    CHECK_EQ(qswsrqueue_empty(q), 1);
    CHECK_EQ(qswsrqueue_enqueue(q, NULL), QTHREAD_BADARGS);
    CHECK_EQ(qswsrqueue_enqueue_blocking(q, NULL), QTHREAD_BADARGS);
    CHECK_EQ(qswsrqueue_enqueue(NULL, P(1)), QTHREAD_BADARGS);
    CHECK_EQ(qswsrqueue_enqueue_blocking(NULL, P(1)), QTHREAD_BADARGS);
    CHECK(qswsrqueue_dequeue(NULL) == NULL);
    CHECK(qswsrqueue_dequeue_blocking(NULL) == NULL);
    CHECK_EQ(qswsrqueue_empty(NULL), QTHREAD_BADARGS);
    CHECK_EQ(qswsrqueue_destroy(NULL), QTHREAD_BADARGS);

    /* A writer task through 4 slots, this thread the blocking reader. */
    aligned_t ret;
    CHECK_EQ(qthread_fork(swsr_writer, q, &ret), QTHREAD_SUCCESS);
    int in_order = 1;
    for (uintptr_t i = 1; i <= SWSR_N; i++) in_order &= qswsrqueue_dequeue_blocking(q) == P(i);
    qthread_readFF(NULL, &ret);
    CHECK_EQ(ret, 0);
    CHECK(in_order);
    CHECK_EQ(qswsrqueue_empty(q), 1);
    CHECK_EQ(qswsrqueue_destroy(q), QTHREAD_SUCCESS);
}

/* ---- qdqueue ---- */

#define DQ_TASKS 16
#define DQ_PER 1000

static aligned_t dq_sum;
static aligned_t dq_count;

static aligned_t dq_producer(void *arg)
{
    for (uintptr_t i = 1; i <= DQ_PER; i++) {
        if (qdqueue_enqueue(arg, P(i)) != QTHREAD_SUCCESS) return 1;
    }
    return 0;
}

static aligned_t dq_consumer(void *arg)
{
    for (int i = 0; i < DQ_PER; i++) {
        void *e;
        while ((e = qdqueue_dequeue(arg)) == NULL) qthread_yield();
        qthread_incr(&dq_sum, U(e));
        qthread_incr(&dq_count, 1);
    }
    return 0;
}

static void dqueue(void)
{
    qdqueue_t *q = qdqueue_create();
    CHECK(q != NULL);
    CHECK_EQ(qdqueue_empty(q), 1);
    CHECK(qdqueue_dequeue(q) == NULL);
    /* This thread's part is shepherd 0's: FIFO. */
    for (uintptr_t i = 1; i <= 1000; i++) CHECK_EQ(qdqueue_enqueue(q, P(i)), QTHREAD_SUCCESS);
    int in_order = 1;
    for (uintptr_t i = 1; i <= 1000; i++) in_order &= qdqueue_dequeue(q) == P(i);
    CHECK(in_order);
    CHECK_EQ(qdqueue_empty(q), 1);
    /* Another shepherd's part (with a backlog: it advertises): stolen
     * in its FIFO order. */
    qthread_shepherd_id_t n = qthread_num_shepherds();
    qthread_shepherd_id_t other = n > 1 ? 1 : 0;
    for (uintptr_t i = 1; i <= 3; i++) {
        CHECK_EQ(qdqueue_enqueue_there(q, P(100 + i), other), QTHREAD_SUCCESS);
    }
    CHECK_EQ(qdqueue_empty(q), 0);
    for (uintptr_t i = 1; i <= 3; i++) CHECK(qdqueue_dequeue(q) == P(100 + i));
    CHECK(qdqueue_dequeue(q) == NULL);
    CHECK_EQ(qdqueue_empty(q), 1);
    /* Errors. */
    CHECK_EQ(qdqueue_enqueue_there(q, P(1), n), QTHREAD_BADARGS);
    CHECK(strstr(cantus_last_error(), "out of range") != NULL);
    CHECK_EQ(qdqueue_enqueue_there(q, NULL, 0), QTHREAD_BADARGS);
    CHECK_EQ(qdqueue_enqueue_there(NULL, P(1), 0), QTHREAD_BADARGS);
    CHECK_EQ(qdqueue_enqueue(q, NULL), QTHREAD_BADARGS);
    CHECK_EQ(qdqueue_enqueue(NULL, P(1)), QTHREAD_BADARGS);
    CHECK(qdqueue_dequeue(NULL) == NULL);
    CHECK_EQ(qdqueue_empty(NULL), QTHREAD_BADARGS);
    CHECK_EQ(qdqueue_destroy(NULL), QTHREAD_BADARGS);
    CHECK_EQ(qdqueue_empty(q), 1);

    /* Producers and consumers on every shepherd: every element once. */
    aligned_t rets[2 * DQ_TASKS];
    for (int t = 0; t < DQ_TASKS; t++) {
        CHECK_EQ(qthread_fork_to(dq_consumer, q, &rets[t], (qthread_shepherd_id_t)(t % n)),
                 QTHREAD_SUCCESS);
        CHECK_EQ(qthread_fork_to(dq_producer, q, &rets[DQ_TASKS + t],
                                 (qthread_shepherd_id_t)((t + 1) % n)),
                 QTHREAD_SUCCESS);
    }
    for (int t = 0; t < 2 * DQ_TASKS; t++) {
        qthread_readFF(NULL, &rets[t]);
        CHECK_EQ(rets[t], 0);
    }
    CHECK_EQ(dq_count, DQ_TASKS * DQ_PER);
    CHECK_EQ(dq_sum, (aligned_t)DQ_TASKS * DQ_PER * (DQ_PER + 1) / 2);
    CHECK_EQ(qdqueue_empty(q), 1);
    CHECK(qdqueue_dequeue(q) == NULL);
    CHECK_EQ(qdqueue_destroy(q), QTHREAD_SUCCESS);
}

/* ---- qpool ---- */

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = U(*(void *const *)a), y = U(*(void *const *)b);
    return x < y ? -1 : x > y;
}

static aligned_t pool_task(void *arg)
{
    aligned_t *item[5];
    aligned_t me = qthread_id();
    for (int i = 0; i < 5; i++) {
        if ((item[i] = qpool_alloc(arg)) == NULL) return 1;
        item[i][0] = me * 8 + (aligned_t)i;
    }
    qthread_yield(); /* others run, and allocate, meanwhile */
    for (int i = 0; i < 5; i++) {
        if (item[i][0] != me * 8 + (aligned_t)i) return 2;
        qpool_free(arg, item[i]);
    }
    return 0;
}

#define POOL_N 1000

static void pool(void)
{
    CHECK(qpool_create(0) == NULL);
    CHECK(qpool_create_aligned(24, 3) == NULL);
    CHECK(strstr(cantus_last_error(), "power of two") != NULL);
    CHECK(qpool_alloc(NULL) == NULL);
    qpool_destroy(NULL); /* reported, nothing done */
    CHECK(strstr(cantus_last_error(), "pool") != NULL);

    qpool *p = qpool_create_aligned(24, 64);
    CHECK(p != NULL);
    void **items = malloc(POOL_N * sizeof *items);
    int aligned = 1, ok = 1;
    for (int i = 0; i < POOL_N; i++) {
        items[i] = qpool_alloc(p);
        ok &= items[i] != NULL;
        aligned &= U(items[i]) % 64 == 0;
        memset(items[i], i & 0xff, 24);
    }
    CHECK(ok);
    CHECK(aligned);
    for (int i = 0; i < POOL_N; i++) {
        unsigned char *b = items[i];
        ok &= b[0] == (i & 0xff) && b[23] == (i & 0xff);
    }
    CHECK(ok); /* no item overlaps another */
    qpool_free(p, (char *)items[0] + 8); /* misaligned: refused */
    CHECK(strstr(cantus_last_error(), "not an item") != NULL);
    qpool_free(p, NULL);
    CHECK(strstr(cantus_last_error(), "mem") != NULL);
    qpool_free(NULL, items[0]);
    for (int i = 0; i < POOL_N; i++) qpool_free(p, items[i]);
    /* Freed items are reused. */
    qsort(items, POOL_N, sizeof *items, cmp_ptr);
    int reused = 1;
    for (int i = 0; i < POOL_N; i++) {
        void *again = qpool_alloc(p);
        reused &= bsearch(&again, items, POOL_N, sizeof *items, cmp_ptr) != NULL;
    }
    CHECK(reused);
    qpool_destroy(p); /* frees the items still out too */
    free(items);

    qpool *q = qpool_create(sizeof(aligned_t));
    CHECK(q != NULL);
    aligned_t rets[64];
    for (int t = 0; t < 64; t++) CHECK_EQ(qthread_fork(pool_task, q, &rets[t]), QTHREAD_SUCCESS);
    for (int t = 0; t < 64; t++) {
        qthread_readFF(NULL, &rets[t]);
        CHECK_EQ(rets[t], 0);
    }
    void *one = qpool_alloc(q);
    CHECK(one != NULL && U(one) % 16 == 0);
    qpool_destroy(q);
}

/* ---- qalloc ---- */

static void tmpname(char *buf, const char *kind)
{
    strcpy(buf, "/tmp/cantus_qalloc_");
    strcat(buf, kind);
    strcat(buf, "XXXXXX");
    int fd = mkstemp(buf);
    CHECK(fd >= 0);
    close(fd);
}

static void qalloc(void)
{
    char stat[64], dyn[64], junk[64];
    tmpname(stat, "stat");
    tmpname(dyn, "dyn");
    tmpname(junk, "junk");
    FILE *f = fopen(junk, "w");
    fputs("not a map", f);
    fclose(f);

    CHECK(qalloc_makestatmap(1 << 16, NULL, NULL, 8, 1) == NULL);
    CHECK(qalloc_makestatmap(1 << 16, NULL, stat, 0, 1) == NULL);
    CHECK(qalloc_makestatmap(1 << 16, NULL, stat, 8, 0) == NULL);
    CHECK(qalloc_makestatmap(0, NULL, stat, 8, 1) == NULL);
    CHECK(qalloc_loadmap(junk) == NULL);
    CHECK(strstr(cantus_last_error(), "not a qalloc map") != NULL);
    CHECK(qalloc_loadmap("/nonexistent/dir/map") == NULL);

    /* A static map of 13-byte items (16 with the rounding), 2 streams. */
    mapinfo_t *sm = qalloc_makestatmap(1 << 16, NULL, stat, 13, 2);
    CHECK(sm != NULL);
    if (sm == NULL) return;
    size_t cap = (1 << 16) / 16;
    char **all = malloc(cap * sizeof *all);
    size_t n = 0;
    int aligned = 1;
    while (n < cap && (all[n] = qalloc_statmalloc(sm)) != NULL) {
        aligned &= U(all[n]) % 8 == 0;
        memset(all[n], 'a' + (int)(n % 26), 16);
        n++;
    }
    CHECK(n > cap - 16 && n < cap); /* all but the header's room */
    CHECK(aligned);
    CHECK(qalloc_statmalloc(sm) == NULL); /* full */
    qsort(all, n, sizeof *all, cmp_ptr);
    int apart = 1;
    for (size_t i = 1; i < n; i++) apart &= U(all[i]) - U(all[i - 1]) >= 16;
    CHECK(apart);
    /* Free one, get it back; misuse refused. */
    char *x = all[n / 2];
    qalloc_statfree(x, sm);
    CHECK(qalloc_malloc(sm, 999) == x); /* size ignored for static maps */
    qalloc_statfree(x + 4, sm);
    CHECK(strstr(cantus_last_error(), "not an item") != NULL);
    qalloc_statfree(NULL, sm);
    qalloc_statfree(x, NULL);
    CHECK(qalloc_dynmalloc((dynmapinfo_t *)sm, 8) == NULL); /* wrong kind */
    CHECK(strstr(cantus_last_error(), "other kind") != NULL);
    for (size_t i = 0; i < n; i++) {
        if (i != n / 2) qalloc_free(all[i], sm);
    }
    strcpy(x, "persistent");

    /* A dynamic map. */
    dynmapinfo_t *dm = qalloc_makedynmap(1 << 20, NULL, dyn, 3);
    CHECK(dm != NULL);
    if (dm == NULL) return;
    char *blocks[64];
    int ok = 1;
    for (int i = 0; i < 64; i++) {
        size_t size = 1 + (size_t)i * 37;
        blocks[i] = qalloc_dynmalloc(dm, size);
        ok &= blocks[i] != NULL && U(blocks[i]) % 16 == 0;
        if (blocks[i]) memset(blocks[i], i, size);
    }
    CHECK(ok);
    for (int i = 0; i < 64; i++) {
        size_t size = 1 + (size_t)i * 37;
        ok &= blocks[i][0] == (char)i && blocks[i][size - 1] == (char)i;
    }
    CHECK(ok); /* no block overlaps another */
    CHECK(qalloc_dynmalloc(dm, 2 << 20) == NULL); /* larger than the map */
    CHECK(qalloc_statmalloc((mapinfo_t *)dm) == NULL);
    char *zero = qalloc_dynmalloc(dm, 0);
    CHECK(zero != NULL);
    qalloc_dynfree(zero, dm);
    qalloc_dynfree(zero, dm); /* double free: refused */
    CHECK(strstr(cantus_last_error(), "not a live block") != NULL);
    qalloc_dynfree(blocks[3] + 1, dm);
    CHECK(strstr(cantus_last_error(), "not a live block") != NULL);
    for (int i = 1; i < 64; i++) qalloc_free(blocks[i], dm);
    char *big = qalloc_malloc(dm, 500000); /* the freed space is reusable */
    CHECK(big != NULL);
    memset(big, 0x55, 500000);
    /* A pointer stored in the map, to data in the other map. */
    char **link = (char **)blocks[0];
    *link = x;
    qalloc_checkpoint();

    /* Remade or loaded against the wrong size, kind, item size: refused. */
    CHECK(qalloc_makestatmap(1 << 15, NULL, junk, 8, 1) == NULL);
    qalloc_cleanup();
    CHECK(qalloc_statmalloc(sm) == NULL); /* handles are gone */
    CHECK(strstr(cantus_last_error(), "not a loaded map") != NULL);
    CHECK(qalloc_makestatmap(1 << 17, NULL, stat, 13, 2) == NULL);
    CHECK(qalloc_makestatmap(1 << 16, NULL, stat, 32, 2) == NULL);
    CHECK(qalloc_makedynmap(1 << 16, NULL, stat, 2) == NULL);

    /* Reloaded at the same address, contents and allocations kept. */
    void *dm2 = qalloc_loadmap(dyn);
    mapinfo_t *sm2 = qalloc_makestatmap(1 << 16, NULL, stat, 13, 2);
    CHECK(dm2 != NULL && sm2 != NULL);
    if (dm2 == NULL || sm2 == NULL) return;
    CHECK(qalloc_loadmap(stat) == NULL); /* loaded already */
    CHECK(*link == x);
    CHECK(strcmp(*link, "persistent") == 0);
    CHECK((unsigned char)big[499999] == 0x55);
    size_t again = 0;
    int kept = 1;
    char *s;
    while ((s = qalloc_statmalloc(sm2)) != NULL) {
        kept &= s != x;
        again++;
    }
    CHECK_EQ(again, n - 1); /* every item but the live one */
    CHECK(kept);
    char *b = qalloc_dynmalloc(dm2, 64);
    CHECK(b != NULL && b != blocks[0] && (b + 64 <= big || b >= big + 500000));
    qalloc_cleanup();
    CHECK_EQ(unlink(stat), 0);
    CHECK_EQ(unlink(dyn), 0);
    CHECK_EQ(unlink(junk), 0);
    free(all);
}

int main(void)
{
    /* No runtime: qdqueue_create refuses; the others work. */
    CHECK(qdqueue_create() == NULL);
    qlfqueue_t *early = qlfqueue_create();
    CHECK_EQ(qlfqueue_enqueue(early, P(7)), QTHREAD_SUCCESS);
    CHECK(qlfqueue_dequeue(early) == P(7));
    CHECK_EQ(qlfqueue_destroy(early), QTHREAD_SUCCESS);
    qpool *early_pool = qpool_create(8);
    void *item = qpool_alloc(early_pool);
    CHECK(item != NULL);
    qpool_free(early_pool, item);
    CHECK(qpool_alloc(early_pool) == item);
    qpool_destroy(early_pool);
    qalloc();

    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    lfqueue();
    swsrqueue();
    dqueue();
    pool();
    qthread_finalize();
    return DONE();
}
