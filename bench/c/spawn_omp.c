/*
 * The task-spawn micro-benchmark of seed 002 ("Performance Optimizations",
 * Chapel 1.15), GNU OpenMP variant:
 *
 *     for (i = 0; i < trials; i++)
 *         #pragma omp parallel for
 *         for (j = 0; j < threads; j++) { body(j); }
 *
 * The body is empty, or a fixed chain of WORK_ITERS multiply-adds (the
 * same chain as `work` in bench/src/micro.rs) so that every thread really
 * takes part. cantus-bench runs this as a separate process, so OpenMP's
 * spinning threads never share the process with cantus workers.
 *
 * usage: spawn_omp THREADS TRIALS REPS WORK_ITERS BUDGET_MS
 * prints one line per repetition: nanoseconds per trial. A repetition
 * stops early, after a multiple of 64 trials, once it has run BUDGET_MS
 * (so that an oversubscribed machine, where spinning OpenMP threads are
 * very slow, cannot stall the benchmark); cantus obeys the same rule.
 * Set OMP_WAIT_POLICY (active, passive) in the environment to choose how
 * idle threads wait.
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/*
 * A dependent chain of multiply-adds (Knuth's MMIX LCG constants). The
 * empty asm hides x from the optimizer at every step, so no compiler can
 * fold several steps into one; work() in micro.rs does the same.
 */
static uint64_t work(uint64_t x, long iters)
{
    for (long k = 0; k < iters; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Runs up to `trials` trials, stopping early after a multiple of 64 once
 * `budget_ns` have passed; returns the number of trials run. */
static long trials_loop(int threads, long trials, long iters, double budget_ns)
{
    double t0 = now_ns();
    for (long i = 0; i < trials; i++) {
#pragma omp parallel for num_threads(threads)
        for (int j = 0; j < threads; j++) {
            if (iters > 0) {
                uint64_t x = work((uint64_t)j, iters);
                /* Keep x without storing it to shared memory. */
                __asm__ volatile("" : : "r"(x));
            }
        }
        if ((i & 63) == 63 && now_ns() - t0 > budget_ns)
            return i + 1;
    }
    return trials;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: spawn_omp THREADS TRIALS REPS WORK_ITERS BUDGET_MS\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    long trials = atol(argv[2]);
    int reps = atoi(argv[3]);
    long iters = atol(argv[4]);
    double budget_ns = atof(argv[5]) * 1e6;
    if (threads < 1 || trials < 1 || reps < 1 || iters < 0 || !(budget_ns > 0)) {
        fprintf(stderr, "spawn_omp: bad arguments\n");
        return 2;
    }
    /* Warm up: start the team and fault in its stacks. */
    trials_loop(threads, trials / 10 + 1, iters, budget_ns / 10);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        long done = trials_loop(threads, trials, iters, budget_ns);
        double t1 = now_ns();
        printf("%.3f\n", (t1 - t0) / (double)done);
    }
    return 0;
}
