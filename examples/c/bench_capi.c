/*
 * bench_capi.c - costs through the C ABI, to set next to the Rust API's:
 *   capi_spawn_join   spawn a task that does nothing and wait for it:
 *                     cantus_coforall over N empty tasks, per task
 *   capi_fork_readff  qthread_fork + qthread_readFF on its return word, per task
 *   capi_fork_sinc    qthread_spawn with QTHREAD_SPAWN_RET_SINC_VOID, one
 *                     qt_sinc_wait for all of them, per task
 *   capi_qt_loop      qt_loop over empty iterations, per iteration
 *   capi_feb_handoff  one value handed from one task to another through a
 *                     full/empty word (write_ef / read_fe ping-pong), per
 *                     hand-off
 *   capi_sync_handoff the same through a cantus_sync_t
 * Prints "<name> <ns> ns" lines (the best of 5 runs).
 *
 *     cc -O2 bench_capi.c $(pkg-config --cflags --libs cantus) -o bench_capi
 */
#define _POSIX_C_SOURCE 199309L
#include <cantus.h>
#include <qthread/qloop.h>
#include <qthread/qthread.h>
#include <qthread/sinc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void nothing(size_t i, void *arg) { (void)i; (void)arg; }

static aligned_t nothing_q(void *arg) { (void)arg; return 1; }

/* Hand-offs per run: HANDOFFS, or n / 10 for a smaller n (a test's quick
 * run: between spinning tasks on a loaded machine one hand-off can take
 * a scheduler tick). */
#define HANDOFFS 100000
static int handoffs = HANDOFFS;
static uint64_t ping, pong;
static cantus_sync_t sping, spong;

static void ponger(size_t i, void *arg)
{
    (void)arg;
    uint64_t v;
    for (int k = 0; k < handoffs; k++) {
        if (i == 0) {
            cantus_feb_write_ef(&ping, k);
            cantus_feb_read_fe(&pong, &v);
        } else {
            cantus_feb_read_fe(&ping, &v);
            cantus_feb_write_ef(&pong, v);
        }
    }
}

static void sync_ponger(size_t i, void *arg)
{
    (void)arg;
    uint64_t v;
    for (int k = 0; k < handoffs; k++) {
        if (i == 0) {
            cantus_sync_write_ef(&sping, k);
            cantus_sync_read_fe(&spong, &v);
        } else {
            cantus_sync_read_fe(&sping, &v);
            cantus_sync_write_ef(&spong, v);
        }
    }
}

struct forks { size_t n; aligned_t *rets; };

static void fork_all(void *arg)
{
    struct forks *f = arg;
    for (size_t i = 0; i < f->n; i++)
        qthread_fork(nothing_q, NULL, &f->rets[i]);
    for (size_t i = 0; i < f->n; i++)
        qthread_readFF(NULL, &f->rets[i]);
}

/* The sinc path: every task submits to one sinc on its return. */
static void fork_sinc(void *arg)
{
    struct forks *f = arg;
    qt_sinc_t s;
    qt_sinc_init(&s, 0, NULL, NULL, f->n);
    for (size_t i = 0; i < f->n; i++)
        qthread_spawn(nothing_q, NULL, 0, &s, 0, NULL, NO_SHEPHERD, QTHREAD_SPAWN_RET_SINC_VOID);
    qt_sinc_wait(&s, NULL);
    qt_sinc_fini(&s);
}

static void empty_iteration(size_t start, size_t stop, void *arg)
{
    (void)start; (void)stop; (void)arg;
}

static void loop_all(void *arg)
{
    struct forks *f = arg;
    qt_loop(0, f->n, empty_iteration, NULL);
}

static double best(double a, double b) { return a < b ? a : b; }

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    if (n / 10 < HANDOFFS) handoffs = (int)(n / 10) > 0 ? (int)(n / 10) : 1;
    if (cantus_init(NULL) != CANTUS_OK) {
        fprintf(stderr, "bench_capi: %s\n", cantus_last_error());
        return 2;
    }
    double spawn = 1e30, fork = 1e30, sinc = 1e30, loop = 1e30, handoff = 1e30, shandoff = 1e30;
    aligned_t *rets = malloc(sizeof(aligned_t) * (n / 10));
    for (int run = 0; run < 5; run++) {
        double t = now_ns();
        cantus_coforall(n, nothing, NULL);
        spawn = best(spawn, (now_ns() - t) / n);

        struct forks f = {n / 10, rets};
        t = now_ns();
        cantus_call(fork_all, &f);
        fork = best(fork, (now_ns() - t) / f.n);

        t = now_ns();
        cantus_call(fork_sinc, &f);
        sinc = best(sinc, (now_ns() - t) / f.n);

        t = now_ns();
        cantus_call(loop_all, &f);
        loop = best(loop, (now_ns() - t) / f.n);

        cantus_feb_empty(&ping);
        cantus_feb_empty(&pong);
        t = now_ns();
        cantus_coforall(2, ponger, NULL);
        handoff = best(handoff, (now_ns() - t) / (2.0 * handoffs));
        cantus_feb_fill(&ping);
        cantus_feb_fill(&pong);

        cantus_sync_init(&sping);
        cantus_sync_init(&spong);
        t = now_ns();
        cantus_coforall(2, sync_ponger, NULL);
        shandoff = best(shandoff, (now_ns() - t) / (2.0 * handoffs));
    }
    printf("capi_spawn_join %.1f ns\n", spawn);
    printf("capi_fork_readff %.1f ns\n", fork);
    printf("capi_fork_sinc %.1f ns\n", sinc);
    printf("capi_qt_loop %.1f ns\n", loop);
    printf("capi_feb_handoff %.1f ns\n", handoff);
    printf("capi_sync_handoff %.1f ns\n", shandoff);
    printf("workers %lld\n", (long long)cantus_num_workers());
    free(rets);
    cantus_finalize();
    return 0;
}
