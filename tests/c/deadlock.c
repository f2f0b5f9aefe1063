/*
 * deadlock.c - the main thread waits on a full/empty word.
 *   ./deadlock        nobody will ever fill it: cantus must report the
 *                     deadlock and abort, not hang.
 *   ./deadlock busy   a pthread fills it after a pause longer than the
 *                     deadlock grace period, having declared itself busy
 *                     with cantus_outside_activity_begin: no report.
 * Run with CANTUS_DEADLOCK_MS=200.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h>
#include <pthread.h>
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

int main(int argc, char **argv)
{
    int busy = argc > 1 && strcmp(argv[1], "busy") == 0;
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
