/*
 * trace_main.c - a traced Qthreads program (run with CANTUS_TRACE): main
 * runs shepherd 0, so worker 0's lane shows main as task 1, stopping for
 * each wait (in which the task it forked to shepherd 0 runs) and running
 * again after it, to the end.
 */
#define _POSIX_C_SOURCE 200809L
#include <qthread/qthread.h>
#include <stdio.h>
#include <stdlib.h>

static aligned_t plus_one(void *arg) { return (aligned_t)(uintptr_t)arg + 1; }

int main(void)
{
    setenv("QT_NUM_SHEPHERDS", "2", 1);
    if (qthread_initialize() != QTHREAD_SUCCESS) return 2;
    aligned_t sum = 0;
    for (uintptr_t i = 0; i < 3; i++) {
        aligned_t r;
        if (qthread_fork_to(plus_one, (void *)i, &r, 0) != QTHREAD_SUCCESS) return 3;
        qthread_readFF(&r, &r);
        sum += r;
    }
    qthread_finalize();
    printf("sum %lu\n", (unsigned long)sum);
    return sum == 6 ? 0 : 1;
}
