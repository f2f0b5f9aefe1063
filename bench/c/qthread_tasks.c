/*
 * qthread_tasks.c - the cost of a task through the Qthreads API, written
 * against <qthread/qthread.h> alone so the same file builds against
 * cantus's headers and library and against Qthreads' own (the peer).
 * scripts/bench-qthreads.sh builds it both ways and runs them in turn.
 *
 * Rows (ns per task, the best of RUNS runs):
 *   fork_readff      qthread_fork N tasks that return at once, then
 *                    qthread_readFF each return word (the Qthreads way to
 *                    spawn and join)
 *   fork_readff_one  fork one task, readFF its word, N times over (a
 *                    join that waits on every task)
 *   fork_sinc        N qthread_spawn with QTHREAD_SPAWN_RET_SINC_VOID
 *                    and one qt_sinc_wait (one end count for all)
 *   qt_loop          qt_loop over N empty iterations (a task per
 *                    iteration: Qthreads' qt_loop forks one each)
 *   fib_tasks        fib(FIB) with a task per call above the cutoff,
 *                    joined by readFF; per task made
 * Built with -DWITH_CANTUS it adds, from the same run,
 *   coforall         cantus_coforall over N empty tasks, per task
 *                    (issue 30's yardstick: fork_readff <= 2x this)
 *
 *     cc -O2 qthread_tasks.c -I<include> -L<lib> -lqthread -o qthread_tasks
 *     ./qthread_tasks [N]          (N: tasks per row, default 1000000)
 */
#define _POSIX_C_SOURCE 199309L
#include <qthread/qthread.h>
#include <qthread/qloop.h>
#include <qthread/sinc.h>
#ifdef WITH_CANTUS
#include <cantus.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RUNS 7
#define FIB 25
#define FIB_CUTOFF 2

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double best(double a, double b) { return a < b ? a : b; }

static aligned_t returns_one(void *arg) { (void)arg; return 1; }

static void empty_iteration(size_t start, size_t stop, void *arg)
{
    (void)start; (void)stop; (void)arg;
}


static aligned_t fib(void *arg)
{
    uintptr_t n = (uintptr_t)arg;
    if (n < FIB_CUTOFF) return n;
    aligned_t a, b;
    qthread_fork(fib, (void *)(n - 1), &a);
    qthread_fork(fib, (void *)(n - 2), &b);
    qthread_readFF(NULL, &a);
    qthread_readFF(NULL, &b);
    return a + b;
}

static uint64_t fib_calls(uint64_t n)
{
    return n < FIB_CUTOFF ? 0 : 2 + fib_calls(n - 1) + fib_calls(n - 2);
}

static uint64_t fib_serial(uint64_t n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

#ifdef WITH_CANTUS
static void nothing(size_t i, void *arg) { (void)i; (void)arg; }
#endif

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    if (n == 0) n = 1;
    if (qthread_initialize() != QTHREAD_SUCCESS) {
        fprintf(stderr, "qthread_tasks: qthread_initialize failed\n");
        return 2;
    }
    aligned_t *rets = malloc(sizeof(aligned_t) * n);
    if (!rets) return 2;
    double fork = 1e30, fork_one = 1e30, sinc = 1e30, loop = 1e30, fibt = 1e30;
#ifdef WITH_CANTUS
    double coforall = 1e30;
#endif
    for (int run = 0; run < RUNS; run++) {
        double t = now_ns();
        for (size_t i = 0; i < n; i++) qthread_fork(returns_one, NULL, &rets[i]);
        aligned_t sum = 0;
        for (size_t i = 0; i < n; i++) {
            qthread_readFF(NULL, &rets[i]);
            sum += rets[i];
        }
        fork = best(fork, (now_ns() - t) / n);
        if (sum != n) {
            fprintf(stderr, "qthread_tasks: fork_readff summed %lu of %zu\n", (unsigned long)sum, n);
            return 1;
        }

        size_t m = n / 10 ? n / 10 : 1;
        t = now_ns();
        for (size_t i = 0; i < m; i++) {
            qthread_fork(returns_one, NULL, &rets[0]);
            qthread_readFF(NULL, &rets[0]);
        }
        fork_one = best(fork_one, (now_ns() - t) / m);

        qt_sinc_t s;
        qt_sinc_init(&s, 0, NULL, NULL, n);
        t = now_ns();
        for (size_t i = 0; i < n; i++)
            qthread_spawn(returns_one, NULL, 0, &s, 0, NULL, NO_SHEPHERD, QTHREAD_SPAWN_RET_SINC_VOID);
        qt_sinc_wait(&s, NULL);
        sinc = best(sinc, (now_ns() - t) / n);
        qt_sinc_fini(&s);

        t = now_ns();
        qt_loop(0, n, empty_iteration, NULL);
        loop = best(loop, (now_ns() - t) / n);

        aligned_t r;
        t = now_ns();
        qthread_fork(fib, (void *)(uintptr_t)FIB, &r);
        qthread_readFF(NULL, &r);
        fibt = best(fibt, (now_ns() - t) / (double)(fib_calls(FIB) + 1));
        if (r != fib_serial(FIB)) {
            fprintf(stderr, "qthread_tasks: fib(%d) = %lu, not %lu\n", FIB, (unsigned long)r,
                    (unsigned long)fib_serial(FIB));
            return 1;
        }
#ifdef WITH_CANTUS
        t = now_ns();
        cantus_coforall(n, nothing, NULL);
        coforall = best(coforall, (now_ns() - t) / n);
#endif
    }
    printf("fork_readff %.1f ns\n", fork);
    printf("fork_readff_one %.1f ns\n", fork_one);
    printf("fork_sinc %.1f ns\n", sinc);
    printf("qt_loop %.1f ns\n", loop);
    printf("fib_tasks %.1f ns\n", fibt);
#ifdef WITH_CANTUS
    printf("coforall %.1f ns\n", coforall);
#endif
    printf("shepherds %d\n", (int)qthread_num_shepherds());
    free(rets);
    qthread_finalize();
    return 0;
}
