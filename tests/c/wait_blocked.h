/* wait_blocked.h - for the C tests that need tasks to be waiting before
 * they go on: sleep_ms, and wait_blocked(n), which waits (up to ~5 s)
 * until at least n tasks are blocked (cantus_num_blocked). Include after
 * <cantus.h> and <time.h>, with _POSIX_C_SOURCE >= 199309L. */
#ifndef CANTUS_TEST_WAIT_BLOCKED_H
#define CANTUS_TEST_WAIT_BLOCKED_H

static inline void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Waits (up to ~5 s) until at least n tasks are blocked. */
static inline int wait_blocked(long n)
{
    for (int i = 0; i < 5000; i++) {
        if (cantus_num_blocked() >= n)
            return 1;
        sleep_ms(1);
    }
    return 0;
}

#endif
