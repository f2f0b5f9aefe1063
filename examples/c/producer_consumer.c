/*
 * producer_consumer.c - a bounded buffer of full/empty words, with the
 * cantus C API. Producers (tasks, and one plain pthread that is not a
 * task) write items into the ring with cantus_feb_write_ef; consumer tasks
 * take them out with cantus_feb_read_fe. A slot's full/empty bit is the
 * only synchronization: a producer waits while its slot is full, a
 * consumer while it is empty. Each consumer reports its sum through a
 * cantus_sync_t; main checks the total.
 *
 *     cc producer_consumer.c $(pkg-config --cflags --libs cantus) -lpthread
 */
#include <cantus.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 8
#define TASK_PRODUCERS 2
#define PRODUCERS (TASK_PRODUCERS + 1) /* + one pthread */
#define CONSUMERS 3
#define ITEMS 3000 /* per producer; a multiple of CONSUMERS */

static uint64_t ring[SLOTS];          /* full/empty words, all data */
static uint64_t put_ticket, take_ticket;
static cantus_sync_t sums[CONSUMERS]; /* each consumer's total */

static void check(int rc, const char *what)
{
    if (rc != CANTUS_OK) {
        fprintf(stderr, "%s failed: %s (%s)\n", what, cantus_strerror(rc), cantus_last_error());
        exit(1);
    }
}

static void produce(uint64_t first)
{
    for (uint64_t i = 0; i < ITEMS; i++) {
        uint64_t t = __atomic_fetch_add(&put_ticket, 1, __ATOMIC_RELAXED);
        check(cantus_feb_write_ef(&ring[t % SLOTS], first + i), "cantus_feb_write_ef");
    }
}

static void producer_task(void *arg) { produce((uint64_t)(uintptr_t)arg); }

static void *producer_thread(void *arg)
{
    produce((uint64_t)(uintptr_t)arg); /* an outside thread: blocks as a thread */
    return NULL;
}

static void consumer_task(void *arg)
{
    size_t me = (size_t)(uintptr_t)arg;
    uint64_t sum = 0;
    for (int i = 0; i < PRODUCERS * ITEMS / CONSUMERS; i++) {
        uint64_t t = __atomic_fetch_add(&take_ticket, 1, __ATOMIC_RELAXED), v;
        check(cantus_feb_read_fe(&ring[t % SLOTS], &v), "cantus_feb_read_fe");
        sum += v;
    }
    check(cantus_sync_write_ef(&sums[me], sum), "cantus_sync_write_ef");
}

int main(void)
{
    check(cantus_init(NULL), "cantus_init");
    for (int s = 0; s < SLOTS; s++)
        check(cantus_feb_empty(&ring[s]), "cantus_feb_empty"); /* words start full */
    for (int c = 0; c < CONSUMERS; c++) {
        check(cantus_sync_init(&sums[c]), "cantus_sync_init");
        check(cantus_spawn(consumer_task, (void *)(uintptr_t)c), "cantus_spawn");
    }
    for (int p = 0; p < TASK_PRODUCERS; p++)
        check(cantus_spawn(producer_task, (void *)(uintptr_t)(p * ITEMS)), "cantus_spawn");
    pthread_t thread;
    pthread_create(&thread, NULL, producer_thread, (void *)(uintptr_t)(TASK_PRODUCERS * ITEMS));

    uint64_t total = 0;
    for (int c = 0; c < CONSUMERS; c++) {
        uint64_t s;
        check(cantus_sync_read_fe(&sums[c], &s), "cantus_sync_read_fe"); /* main waits here */
        total += s;
    }
    pthread_join(thread, NULL);
    uint64_t n = (uint64_t)PRODUCERS * ITEMS, expect = n * (n - 1) / 2;
    printf("producer_consumer: %d producers, %d consumers, %llu items through %d slots, sum %llu (%s)\n",
           PRODUCERS, CONSUMERS, (unsigned long long)n, SLOTS, (unsigned long long)total,
           total == expect ? "correct" : "WRONG");
    for (int s = 0; s < SLOTS; s++)
        check(cantus_feb_fill(&ring[s]), "cantus_feb_fill"); /* leave no table entries */
    check(cantus_finalize(), "cantus_finalize");
    return total == expect ? 0 : 1;
}
