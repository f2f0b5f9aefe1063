/* check.h - a tiny test harness for the C tests: CHECK(cond) prints
 * "ok" or "not ok" lines with the condition, and DONE() prints the totals
 * ("N passed, N failed") and returns the exit code. */
#ifndef CANTUS_TEST_CHECK_H
#define CANTUS_TEST_CHECK_H

#include <stdio.h>

static int checks_passed, checks_failed;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            checks_passed++;                                                   \
        } else {                                                               \
            checks_failed++;                                                   \
            printf("not ok: %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
            fflush(stdout);                                                    \
        }                                                                      \
    } while (0)

#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ == b_) {                                                        \
            checks_passed++;                                                   \
        } else {                                                               \
            checks_failed++;                                                   \
            printf("not ok: %s:%d: %s == %s (%lld != %lld)\n", __FILE__,        \
                   __LINE__, #a, #b, a_, b_);                                  \
            fflush(stdout);                                                    \
        }                                                                      \
    } while (0)

#define DONE()                                                                 \
    (printf("%d passed, %d failed\n", checks_passed, checks_failed),           \
     checks_failed == 0 ? 0 : 1)

#endif
