/*
 * test_qthread_tasklocal.c - task-local storage and stack queries
 * (issue 18): qthread_get_tasklocal / qthread_size_tasklocal sized by
 * QT_TASKLOCAL_SIZE, zeroed per task, kept across blocking, grown with
 * its contents, freed with the task; qthread_bos / tos / stackleft
 * consistent with the stack size and the guard page.
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <qthread/qthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define TASKS 64
#define DEFAULT_TL 96 /* QT_TASKLOCAL_SIZE below */

static aligned_t gate; /* emptied by main; tasks wait on it */

struct tl_result {
    int zeroed, kept, grown, sized, aligned;
};

static aligned_t tasklocal_task(void *arg)
{
    struct tl_result *r = arg;
    unsigned char *tl = qthread_get_tasklocal(16);
    r->sized = tl != NULL && qthread_size_tasklocal() == DEFAULT_TL;
    r->aligned = tl != NULL && ((uintptr_t)tl % 16) == 0;
    int zero = 1;
    for (int i = 0; i < DEFAULT_TL; i++) zero &= tl[i] == 0;
    r->zeroed = zero;
    /* this task's mark, then block: other tasks run on this worker and
     * use their own storage meanwhile */
    unsigned mark = qthread_id();
    for (int i = 0; i < DEFAULT_TL; i++) tl[i] = (unsigned char)(mark + i);
    qthread_readFF(NULL, &gate);
    qthread_yield();
    unsigned char *again = qthread_get_tasklocal(DEFAULT_TL);
    int kept = again == tl;
    for (int i = 0; i < DEFAULT_TL; i++) kept &= again[i] == (unsigned char)(mark + i);
    r->kept = kept;
    /* a larger request: the contents move with it, the rest is zero */
    unsigned char *big = qthread_get_tasklocal(4096);
    int grown = big != NULL && qthread_size_tasklocal() == 4096;
    for (int i = 0; i < DEFAULT_TL; i++) grown &= big[i] == (unsigned char)(mark + i);
    for (int i = DEFAULT_TL; i < 4096; i++) grown &= big[i] == 0;
    /* a smaller request afterwards returns the same storage */
    grown &= qthread_get_tasklocal(8) == big && qthread_size_tasklocal() == 4096;
    r->grown = grown;
    return 0;
}

struct stack_result {
    int in_range, size, deeper, ok_top;
};

static size_t deeper_left(int depth)
{
    volatile char pad[512];
    pad[0] = (char)depth;
    if (depth == 0) return qthread_stackleft() + (size_t)pad[0];
    return deeper_left(depth - 1);
}

static aligned_t stack_task(void *arg)
{
    struct stack_result *r = arg;
    char here;
    /* As in Qthreads: tos the lowest address, bos where the stack starts */
    uintptr_t tos = (uintptr_t)qthread_tos(), bos = (uintptr_t)qthread_bos();
    size_t left = qthread_stackleft();
    r->in_range = tos < (uintptr_t)&here && (uintptr_t)&here < bos;
    r->size = bos - tos == qthread_readstate(STACK_SIZE);
    /* stackleft is measured down to tos: near this frame's distance */
    r->ok_top = left > 0 && left < bos - tos && left <= (uintptr_t)&here - tos + 4096 &&
                left + 4096 >= (uintptr_t)&here - tos;
    /* 16 frames of 512+ bytes deeper: at least 8 KiB less left */
    r->deeper = deeper_left(16) + 8192 <= left;
    return 0;
}

int main(void)
{
    setenv("QT_HWPAR", "2", 1);
    setenv("QT_TASKLOCAL_SIZE", "96", 1);
    setenv("QTHREAD_STACK_SIZE", "131072", 1);

    /* no runtime, no task */
    CHECK(qthread_get_tasklocal(8) == NULL);
    CHECK_EQ(qthread_size_tasklocal(), 0);
    CHECK(qthread_bos() == NULL && qthread_tos() == NULL);
    CHECK_EQ(qthread_stackleft(), 0);

    setenv("QT_TASKLOCAL_SIZE", "many", 1);
    CHECK_EQ(qthread_initialize(), QTHREAD_BADARGS);
    CHECK(strstr(cantus_last_error(), "TASKLOCAL_SIZE") != NULL);
    setenv("QT_TASKLOCAL_SIZE", "96", 1);
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);

    /* the thread that started the runtime is Qthreads' main task: it has
     * task-local storage (zeroed, default size, grown with its contents),
     * but runs on its own thread's stack (no bos/tos) */
    CHECK_EQ(qthread_size_tasklocal(), DEFAULT_TL);
    unsigned char *mine = qthread_get_tasklocal(8);
    CHECK(mine != NULL);
    int main_zeroed = 1;
    for (int i = 0; i < DEFAULT_TL; i++) main_zeroed &= mine[i] == 0;
    CHECK(main_zeroed);
    mine[0] = 42;
    mine[DEFAULT_TL - 1] = 43;
    CHECK(qthread_get_tasklocal(8) == mine);
    unsigned char *big = qthread_get_tasklocal(4096);
    CHECK(big != NULL && big[0] == 42 && big[DEFAULT_TL - 1] == 43 && big[4095] == 0);
    CHECK(qthread_size_tasklocal() >= 4096);
    CHECK(qthread_bos() == NULL && qthread_tos() == NULL);
    CHECK_EQ(qthread_stackleft(), 0);

    qthread_empty(&gate);
    static struct tl_result tl[TASKS];
    aligned_t done[TASKS];
    for (int i = 0; i < TASKS; i++)
        CHECK_EQ(qthread_fork(tasklocal_task, &tl[i], &done[i]), QTHREAD_SUCCESS);
    qthread_fill(&gate); /* all run at once, interleaved */
    for (int i = 0; i < TASKS; i++) qthread_readFF(NULL, &done[i]);
    int zeroed = 0, kept = 0, grown = 0, sized = 0, aligned = 0;
    for (int i = 0; i < TASKS; i++) {
        zeroed += tl[i].zeroed;
        kept += tl[i].kept;
        grown += tl[i].grown;
        sized += tl[i].sized;
        aligned += tl[i].aligned;
    }
    CHECK_EQ(zeroed, TASKS);
    CHECK_EQ(kept, TASKS);
    CHECK_EQ(grown, TASKS);
    CHECK_EQ(sized, TASKS);
    CHECK_EQ(aligned, TASKS);

    struct stack_result st[4];
    for (int i = 0; i < 4; i++) CHECK_EQ(qthread_fork(stack_task, &st[i], &done[i]), 0);
    for (int i = 0; i < 4; i++) {
        qthread_readFF(NULL, &done[i]);
        CHECK(st[i].in_range);
        CHECK(st[i].size);
        CHECK(st[i].ok_top);
        CHECK(st[i].deeper);
    }
    /* each task's storage is its own, not main's */
    CHECK(qthread_get_tasklocal(8) == big);
    qthread_finalize();
    /* after qthread_finalize there is no main task any more */
    CHECK(qthread_get_tasklocal(8) == NULL);
    CHECK_EQ(qthread_size_tasklocal(), 0);
    return DONE();
}
