/*
 * fib.c - Fibonacci with a qthread forked for every call (no cut-off), in
 * plain Qthreads style: it compiles unchanged against Qthreads or cantus.
 * Each task forks its two halves and waits for their return words with
 * qthread_readFF. Checks the answer against a serial computation.
 *
 *     cc fib.c $(pkg-config --cflags --libs cantus) -o fib && ./fib 25
 */
#include <qthread/qthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static aligned_t fib(void *arg)
{
    aligned_t n = (aligned_t)(uintptr_t)arg;
    if (n < 2)
        return n;
    aligned_t a, b;
    if (qthread_fork(fib, (void *)(uintptr_t)(n - 1), &a) != QTHREAD_SUCCESS ||
        qthread_fork(fib, (void *)(uintptr_t)(n - 2), &b) != QTHREAD_SUCCESS) {
        fprintf(stderr, "fib: qthread_fork failed\n");
        abort();
    }
    qthread_readFF(NULL, &a);
    qthread_readFF(NULL, &b);
    return a + b;
}

static aligned_t fib_serial(aligned_t n)
{
    return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2);
}

int main(int argc, char **argv)
{
    aligned_t n = argc > 1 ? (aligned_t)strtoul(argv[1], NULL, 10) : 20;
    int rc = qthread_initialize();
    if (rc != QTHREAD_SUCCESS) {
        fprintf(stderr, "fib: qthread_initialize failed: %d\n", rc);
        return 2;
    }
    aligned_t result;
    rc = qthread_fork(fib, (void *)(uintptr_t)n, &result);
    if (rc != QTHREAD_SUCCESS) {
        fprintf(stderr, "fib: qthread_fork failed: %d\n", rc);
        return 2;
    }
    qthread_readFF(&result, &result);
    aligned_t expect = fib_serial(n);
    printf("fib(%lu) = %lu on %u shepherds (%s)\n", (unsigned long)n,
           (unsigned long)result, (unsigned)qthread_num_shepherds(),
           result == expect ? "correct" : "WRONG");
    qthread_finalize();
    return result == expect ? 0 : 1;
}
