/*
 * sinc_no_fini.c - N init/submit/wait cycles of a counting sinc (sizeof_value
 * 0) on the stack, never calling qt_sinc_fini, as Qthreads' own test
 * programs do. The resident set must not grow by 16 MiB or more (before
 * the fix, every qt_sinc_init allocated: 10^6 cycles grew it by ~125 MiB).
 * Usage: sinc_no_fini [cycles]   (default 1000000)
 */
#define _POSIX_C_SOURCE 200809L
#include <qthread/qthread.h>
#include <qthread/sinc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* Resident set size in bytes, from /proc/self/statm (pages). */
static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = -1;
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static aligned_t submit_one(void *arg)
{
    qt_sinc_submit((qt_sinc_t *)arg, NULL);
    return 0;
}

/* One cycle: a fresh sinc in this frame, never finalised. Every 16th
 * cycle the submissions come from two forked tasks (the waiter may
 * block); the others submit from this thread. */
static int cycle(long i)
{
    qt_sinc_t s;
    if (i % 16 == 0) {
        qt_sinc_init(&s, 0, NULL, NULL, 2);
        if (qthread_fork(submit_one, &s, NULL) != QTHREAD_SUCCESS ||
            qthread_fork(submit_one, &s, NULL) != QTHREAD_SUCCESS)
            return 0;
    } else {
        qt_sinc_init(&s, 0, NULL, NULL, 1);
        qt_sinc_submit(&s, NULL);
    }
    qt_sinc_wait(&s, NULL);
    return 1;
}

int main(int argc, char **argv)
{
    long cycles = argc > 1 ? atol(argv[1]) : 1000000;
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    int ok = 1;
    for (long i = 0; i < 10000; i++) /* warm up: stacks, table, pools */
        ok &= cycle(i);
    long before = rss_bytes();
    CHECK(before > 0);
    for (long i = 0; i < cycles; i++)
        ok &= cycle(i);
    long after = rss_bytes();
    CHECK(ok);
    long growth = after - before;
    printf("%ld cycles without qt_sinc_fini: RSS %ld KiB -> %ld KiB (%+ld KiB)\n", cycles,
           before / 1024, after / 1024, growth / 1024);
    CHECK(growth < 16L * 1024 * 1024);
    qthread_finalize();
    return DONE();
}
