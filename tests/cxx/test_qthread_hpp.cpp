/*
 * test_qthread_hpp.cpp - the C++ headers: <qthread/qloop.hpp>'s loops
 * over function objects (every index once, each form), and
 * <qthread/qthread.hpp>'s syncvar class (values, states, a hand-off
 * between tasks).
 */
#include <qthread/qthread.hpp>
#include <qthread/qloop.hpp>

#include <atomic>
#include <cstdio>
#include <vector>

static int passed = 0, failed = 0;
#define CHECK(c)                                                                      \
    do {                                                                              \
        if (c) {                                                                      \
            passed++;                                                                 \
        } else {                                                                      \
            failed++;                                                                 \
            std::printf("not ok: %s:%d: %s\n", __FILE__, __LINE__, #c);               \
        }                                                                             \
    } while (0)

/* Counts each index it is called on; operator() is not const, as the
 * header allows. */
struct Visit {
    explicit Visit(std::vector<std::atomic<int>> *s) : seen(s) {}
    std::vector<std::atomic<int>> *seen;
    void operator()(size_t start, size_t stop)
    {
        for (size_t i = start; i < stop; i++) (*seen)[i]++;
    }
};

static bool each_once(std::vector<std::atomic<int>> &seen, size_t from, size_t to)
{
    bool ok = true;
    for (size_t i = 0; i < seen.size(); i++) {
        ok &= seen[i].load() == ((i >= from && i < to) ? 1 : 0);
        seen[i] = 0;
    }
    return ok;
}

static syncvar handoff;

static aligned_t consumer(void *)
{
    return handoff.readFE(); /* waits for the producer's writeEF */
}

/* qt_loopaccum_balance's object: the sum of i over a piece. */
struct SumIdx {
    typedef unsigned long long acctype;
    static const acctype identity = 0;
    static void accumulate(void *a, const void *b)
    {
        *(acctype *)a += *(const acctype *)b;
    }
    acctype operator()(size_t lo, size_t hi) const
    {
        acctype s = 0;
        for (size_t i = lo; i < hi; i++)
            s += i;
        return s;
    }
};

int main()
{
    CHECK(qthread_initialize() == QTHREAD_SUCCESS);
    std::vector<std::atomic<int>> seen(1000);
    Visit v(&seen);
    qt_loop(10, 990, v);
    CHECK(each_once(seen, 10, 990));
    qt_loop_simple(0, 1000, v);
    CHECK(each_once(seen, 0, 1000));
    qt_loop_sinc(5, 6, v);
    CHECK(each_once(seen, 5, 6));
    qt_loop_balance(0, 1000, v);
    CHECK(each_once(seen, 0, 1000));
    qt_loop_balance_simple(100, 900, v);
    CHECK(each_once(seen, 100, 900));
    qt_loop_balance_sinc(0, 0, v);
    CHECK(each_once(seen, 0, 0));
    SumIdx sum;
    CHECK(qt_loopaccum_balance(0, 1000, sum) == 999ull * 1000 / 2);
    CHECK(qt_loopaccum_balance(10, 11, sum) == 10);

    syncvar full(42);
    CHECK(full.status() == 1 && full.read() == 42);
    CHECK(full.readFF() == 42);
    uint64_t x = 0;
    CHECK(full.readFE(&x) == QTHREAD_SUCCESS && x == 42);
    CHECK(full.status() == 0);
    CHECK(full.writeEF(7) == QTHREAD_SUCCESS && full.readFF() == 7);
    CHECK(full.empty() == QTHREAD_SUCCESS && full.status() == 0);
    CHECK(full.writeF(9) == QTHREAD_SUCCESS && full.status() == 1 && full.readFF() == 9);
    syncvar cut(~0ull); /* 60 bits kept */
    CHECK(cut.read() == (~0ull >> 4));

    CHECK(handoff.empty() == QTHREAD_SUCCESS);
    aligned_t got = 0;
    CHECK(qthread_fork(consumer, nullptr, &got) == QTHREAD_SUCCESS);
    CHECK(handoff.writeEF(123) == QTHREAD_SUCCESS);
    qthread_readFF(nullptr, &got);
    CHECK(got == 123);
    CHECK(handoff.status() == 0); /* the consumer emptied it */

    qthread_finalize();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
