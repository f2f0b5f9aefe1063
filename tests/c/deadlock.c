/*
 * deadlock.c - the main thread waits on a full/empty word.
 *   ./deadlock        nobody will ever fill it: cantus must report the
 *                     deadlock and abort, not hang.
 *   ./deadlock main   the same after qthread_initialize, where main runs
 *                     shepherd 0 (its wait runs shepherd 0's loop), with a
 *                     task of shepherd 0 blocked too: the report lists
 *                     main and that task.
 *   ./deadlock busy   a pthread fills it after a pause longer than the
 *                     deadlock grace period, having declared itself busy
 *                     with cantus_outside_activity_begin: no report.
 * Run with CANTUS_DEADLOCK_MS=200.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h>
#include <stdlib.h>
#include <pthread.h>
#include <qthread/qthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t word;

static void *late_filler(void *arg)
{
    (void)arg;
    cantus_outside_activity_begin(); /* busy until the word is filled */
    struct timespec pause = {0, 600000000}; /* 3x the grace period */
    nanosleep(&pause, NULL);
    cantus_feb_write_ef(&word, 7);
    cantus_outside_activity_end();
    return NULL;
}

static aligned_t never;

static aligned_t waits_forever(void *arg)
{
    (void)arg;
    qthread_readFF(NULL, &never);
    return 0;
}

int main(int argc, char **argv)
{
    int busy = argc > 1 && strcmp(argv[1], "busy") == 0;
    if (argc > 1 && strcmp(argv[1], "main") == 0) {
        setenv("QT_NUM_SHEPHERDS", "2", 1);
        if (qthread_initialize() != QTHREAD_SUCCESS)
            return 2;
        qthread_empty(&never);
        aligned_t r;
        qthread_fork_to(waits_forever, NULL, &r, 0);
        qthread_yield(); /* it starts on shepherd 0, here, and blocks */
        qthread_readFF(NULL, &r); /* nobody fills either */
        return 1;
    }
    if (cantus_init(NULL) != CANTUS_OK)
        return 2;
    cantus_feb_empty(&word);
    pthread_t t;
    if (busy)
        pthread_create(&t, NULL, late_filler, NULL);
    uint64_t v = 0;
    cantus_feb_read_fe(&word, &v); /* blocks: the workers sit idle meanwhile */
    if (busy)
        pthread_join(t, NULL);
    printf("read %llu\n", (unsigned long long)v);
    cantus_finalize();
    return v == 7 ? 0 : 1;
}
