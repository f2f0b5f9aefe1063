/*
 * test_qutil.c - <qthread/qutil.h>: the sums, products, maxima and minima
 * of double, aligned_t and saligned_t arrays against loops on this thread
 * (with and without checkfeb, and from a task), the parallel sorts
 * (sorted, a permutation, the merge sort stable), length 0, and the
 * misuse that is reported (NULL array, an unaligned array with checkfeb).
 */
#define _POSIX_C_SOURCE 200809L
#include <cantus.h> /* cantus_last_error */
#include <qthread/qthread.h>
#include <qthread/qutil.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N 100003 /* odd, and not a multiple of the shepherds */

static unsigned long long rng = 88172645463325252ULL;
static unsigned long long next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double absd(double x) { return x < 0 ? -x : x; }
static int near(double a, double b) { return absd(a - b) <= 1e-9 * (absd(a) + absd(b) + 1.0); }

static void reductions(void)
{
    double *d = malloc(N * sizeof *d);
    aligned_t *u = malloc(N * sizeof *u);
    saligned_t *s = malloc(N * sizeof *s);
    double dsum = 0, dmul = 1, dmax = -1e300, dmin = 1e300;
    aligned_t usum = 0, umul = 1, umax = 0, umin = (aligned_t)-1;
    saligned_t ssum = 0, smul = 1, smax = INT64_MIN, smin = INT64_MAX;
    for (size_t i = 0; i < N; i++) {
        d[i] = (double)(next() % 2000) / 1000.0 + 0.5; /* products stay finite */
        u[i] = next();
        s[i] = (saligned_t)next();
    }
    for (size_t i = 0; i < N; i++) {
        dsum += d[i];
        if (i < 1000) dmul *= d[i];
        if (d[i] > dmax) dmax = d[i];
        if (d[i] < dmin) dmin = d[i];
        usum += u[i];
        umul *= u[i];
        if (u[i] > umax) umax = u[i];
        if (u[i] < umin) umin = u[i];
        ssum = (saligned_t)((aligned_t)ssum + (aligned_t)s[i]); /* wraps, as documented */
        smul = (saligned_t)((aligned_t)smul * (aligned_t)s[i]);
        if (s[i] > smax) smax = s[i];
        if (s[i] < smin) smin = s[i];
    }
    CHECK(near(qutil_double_sum(d, N, 0), dsum));
    CHECK(near(qutil_double_mult(d, 1000, 0), dmul));
    CHECK(qutil_double_max(d, N, 0) == dmax);
    CHECK(qutil_double_min(d, N, 0) == dmin);
    CHECK(qutil_uint_sum(u, N, 0) == usum);
    CHECK(qutil_uint_mult(u, N, 0) == umul);
    CHECK(qutil_uint_max(u, N, 0) == umax);
    CHECK(qutil_uint_min(u, N, 0) == umin);
    CHECK(qutil_int_sum(s, N, 0) == ssum);
    CHECK(qutil_int_mult(s, N, 0) == smul);
    CHECK(qutil_int_max(s, N, 0) == smax);
    CHECK(qutil_int_min(s, N, 0) == smin);
    /* checkfeb: every word is full (the default), read with readFF */
    CHECK(qutil_uint_sum(u, N, 1) == usum);
    CHECK(qutil_int_min(s, N, 1) == smin);
    CHECK(near(qutil_double_sum(d, N, 1), dsum));
    /* length 0 */
    CHECK(qutil_double_sum(d, 0, 0) == 0.0);
    CHECK(qutil_double_mult(d, 0, 0) == 1.0);
    CHECK_EQ(qutil_uint_mult(u, 0, 0), 1);
    CHECK_EQ(qutil_int_max(s, 0, 0), 0);
    /* misuse: reported, the result of length 0 */
    CHECK(qutil_double_sum(NULL, 5, 0) == 0.0);
    CHECK(strstr(cantus_last_error(), "qutil_double_sum") != NULL);
    CHECK_EQ(qutil_uint_sum((const aligned_t *)((char *)u + 1), 4, 1), 0);
    CHECK(strstr(cantus_last_error(), "qutil_uint_sum") != NULL);
    free(d);
    free(u);
    free(s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_aligned(const void *a, const void *b)
{
    aligned_t x = *(const aligned_t *)a, y = *(const aligned_t *)b;
    return (x > y) - (x < y);
}

static void sorts(void)
{
    size_t sizes[] = {0, 1, 2, 17, 4096, 4097, N};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        double *d = malloc((n + 1) * sizeof *d), *e = malloc((n + 1) * sizeof *e);
        double *m = malloc((n + 1) * sizeof *m);
        aligned_t *u = malloc((n + 1) * sizeof *u), *w = malloc((n + 1) * sizeof *w);
        for (size_t i = 0; i < n; i++) {
            d[i] = (double)(next() % 1000) - 500.0; /* many equal keys */
            u[i] = next();
        }
        memcpy(e, d, n * sizeof *d);
        memcpy(m, d, n * sizeof *d);
        memcpy(w, u, n * sizeof *u);
        qsort(e, n, sizeof *e, cmp_double);
        qsort(w, n, sizeof *w, cmp_aligned);
        qutil_qsort(d, n);
        qutil_mergesort(m, n);
        qutil_aligned_qsort(u, n);
        CHECK(n == 0 || memcmp(d, e, n * sizeof *d) == 0);
        CHECK(n == 0 || memcmp(m, e, n * sizeof *m) == 0);
        CHECK(n == 0 || memcmp(u, w, n * sizeof *u) == 0);
        free(d);
        free(e);
        free(m);
        free(u);
        free(w);
    }
    qutil_qsort(NULL, 3);
    CHECK(strstr(cantus_last_error(), "qutil_qsort") != NULL);
}

/* The same calls from a task (they fork and wait from inside it). */
static aligned_t in_task(void *arg)
{
    (void)arg;
    aligned_t v[1000];
    for (int i = 0; i < 1000; i++) v[i] = (aligned_t)(1000 - i);
    qutil_aligned_qsort(v, 1000);
    int sorted = 1;
    for (int i = 0; i < 1000; i++) sorted &= v[i] == (aligned_t)(i + 1);
    return sorted && qutil_uint_sum(v, 1000, 0) == 500500;
}

int main(void)
{
    CHECK_EQ(qthread_initialize(), QTHREAD_SUCCESS);
    reductions();
    sorts();
    aligned_t ret = 0;
    CHECK_EQ(qthread_fork(in_task, NULL, &ret), QTHREAD_SUCCESS);
    qthread_readFF(NULL, &ret);
    CHECK_EQ(ret, 1);
    qthread_finalize();
    return DONE();
}
