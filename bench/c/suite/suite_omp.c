/*
 * suite_omp: the GNU OpenMP peer of `cantus-bench suite`.
 *
 * The same kernels, data, sizes and trial counts as bench/src/suite/, with
 * one `#pragma omp parallel for` per parallel loop (the OpenMP default
 * schedule, static in libgomp). Run as a child process of cantus-bench, so
 * OpenMP's spinning threads never share a process with cantus workers.
 *
 *   suite_omp lcals <kernel> <n> <trials> <reps>
 *   suite_omp stream <n> <ntimes> <reps>
 *   suite_omp gups <log2 table size> <reps>
 *
 * Output, one record a line on stdout:
 *   time <part> <seconds>     one per repetition (and per STREAM kernel)
 *   checksum <value>          LCALS: the outputs, summed in index order
 *   errors <count> <words>    RandomAccess: table words in error, of all
 * A failed verification prints `FAIL ...` on stderr and exits with 1.
 *
 * The data are defined by `uval` (the same function as `suite::uval` in
 * Rust), so both sides compute exactly the same values.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fail(const char *what)
{
    fprintf(stderr, "FAIL %s\n", what);
    exit(1);
}

/* A value in [0, 1) for element i of data array k (a 64-bit mix). */
static double uval(uint64_t i, uint64_t k)
{
    uint64_t h = i * 0x9E3779B97F4A7C15ULL + k * 0xD1B54A32D192ED03ULL;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

static double *array(size_t n)
{
    double *p = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
    if (!p)
        fail("out of memory");
    return p;
}

static double *filled(size_t n, uint64_t k, double scale, double offset)
{
    double *p = array(n);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * uval(i, k) + offset;
    return p;
}

static void poison(double *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
}

/* Weighted sum in index order; `base` offsets the weights per array. */
static double checksum(const double *p, size_t n, double base)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += p[i] * (base + (double)(i % 8) * 0.125);
    return s;
}

/* Largest |x - ref| / max(1, |ref|); NaN compares as an error. */
static int close_enough(const double *x, const double *ref, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs(x[i] - ref[i]);
        double m = fabs(ref[i]) > 1.0 ? fabs(ref[i]) : 1.0;
        if (!(d <= tol * m))
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- LCALS */

/* Kernel constants: the same as in bench/src/suite/lcals.rs. */
#define IFQ_A(i) (0.5 + uval(i, 1))
#define PRESSURE_CLS 0.7
#define PRESSURE_P_CUT 0.01
#define PRESSURE_PMIN (-0.05)
#define PRESSURE_EOSVMAX 0.9
#define ENERGY_RHO0 0.5
#define ENERGY_E_CUT 1e-4
#define ENERGY_EMIN (-0.5)
#define ENERGY_Q_CUT 1e-4
#define FIR_TAPS 16
static const double fir_coeff[FIR_TAPS] = {3.0,  -1.0, -1.0, -1.0, -1.0, 3.0,  -1.0, -1.0,
                                           -1.0, -1.0, 3.0,  -1.0, -1.0, -1.0, -1.0, 3.0};
#define TRAP_X0 0.0
#define TRAP_XP 0.5
#define TRAP_Y 0.5
#define TRAP_YP (-0.5)

static double trap_f(double x)
{
    double d = (x - TRAP_XP) * (x - TRAP_XP) + (TRAP_Y - TRAP_YP) * (TRAP_Y - TRAP_YP);
    return 1.0 / sqrt(d);
}

/* Every array a kernel may use; each kernel fills only those it reads. */
struct lcals {
    size_t n;
    double *in[15];
    double *out[3];
    double trap_total;
};

#define MULADDSUB(i)                                                                               \
    do {                                                                                           \
        o[0][i] = x[0][i] * x[1][i];                                                               \
        o[1][i] = x[0][i] + x[1][i];                                                               \
        o[2][i] = x[0][i] - x[1][i];                                                               \
    } while (0)

#define INIT3(i)                                                                                   \
    do {                                                                                           \
        double v = -x[0][i] - x[1][i];                                                             \
        o[0][i] = v;                                                                               \
        o[1][i] = v;                                                                               \
        o[2][i] = v;                                                                               \
    } while (0)

#define IF_QUAD(i)                                                                                 \
    do {                                                                                           \
        double a = x[0][i], b = x[1][i], c = x[2][i];                                              \
        double s = b * b - 4.0 * a * c;                                                            \
        if (s >= 0.0) {                                                                            \
            s = sqrt(s);                                                                           \
            o[1][i] = (-b + s) / (2.0 * a);                                                        \
            o[0][i] = (-b - s) / (2.0 * a);                                                        \
        } else {                                                                                   \
            o[1][i] = 0.0;                                                                         \
            o[0][i] = 0.0;                                                                         \
        }                                                                                          \
    } while (0)

#define FIR(i)                                                                                     \
    do {                                                                                           \
        double sum = 0.0;                                                                          \
        for (int j = 0; j < FIR_TAPS; j++)                                                         \
            sum += fir_coeff[j] * x[0][i + j];                                                     \
        o[0][i] = sum;                                                                             \
    } while (0)

/* PRESSURE_CALC: x = compression, e_old, vnewc; o = bvc, p_new. */
#define PRESSURE_1(i) o[0][i] = PRESSURE_CLS * (x[0][i] + 1.0)
#define PRESSURE_2(i)                                                                              \
    do {                                                                                           \
        double p = o[0][i] * x[1][i];                                                              \
        if (fabs(p) < PRESSURE_P_CUT)                                                              \
            p = 0.0;                                                                               \
        if (x[2][i] >= PRESSURE_EOSVMAX)                                                           \
            p = 0.0;                                                                               \
        if (p < PRESSURE_PMIN)                                                                     \
            p = PRESSURE_PMIN;                                                                     \
        o[1][i] = p;                                                                               \
    } while (0)

/* ENERGY_CALC: x = e_old, delvc, p_old, q_old, work, comp_half_step,
 * p_half_step, bvc, pbvc, ql_old, qq_old, vnewc, p_new; o = e_new, q_new. */
#define E_OLD x[0]
#define DELVC x[1]
#define P_OLD x[2]
#define Q_OLD x[3]
#define WORK x[4]
#define COMP_HALF x[5]
#define P_HALF x[6]
#define BVC x[7]
#define PBVC x[8]
#define QL_OLD x[9]
#define QQ_OLD x[10]
#define VNEWC x[11]
#define P_NEW x[12]
#define E_NEW o[0]
#define Q_NEW o[1]

static double energy_ssc(double s)
{
    return s <= 0.1111111e-36 ? 0.3333333e-18 : sqrt(s);
}

#define ENERGY_1(i)                                                                                \
    E_NEW[i] = E_OLD[i] - 0.5 * DELVC[i] * (P_OLD[i] + Q_OLD[i]) + 0.5 * WORK[i]
#define ENERGY_2(i)                                                                                \
    do {                                                                                           \
        if (DELVC[i] > 0.0) {                                                                      \
            Q_NEW[i] = 0.0;                                                                        \
        } else {                                                                                   \
            double vhalf = 1.0 / (1.0 + COMP_HALF[i]);                                             \
            double ssc = energy_ssc((PBVC[i] * E_NEW[i] + vhalf * vhalf * BVC[i] * P_HALF[i]) /    \
                                    ENERGY_RHO0);                                                  \
            Q_NEW[i] = ssc * QL_OLD[i] + QQ_OLD[i];                                                \
        }                                                                                          \
    } while (0)
#define ENERGY_3(i)                                                                                \
    E_NEW[i] = E_NEW[i] + 0.5 * DELVC[i] * (3.0 * (P_OLD[i] + Q_OLD[i]) -                          \
                                            4.0 * (P_HALF[i] + Q_NEW[i]))
#define ENERGY_4(i)                                                                                \
    do {                                                                                           \
        double e = E_NEW[i] + 0.5 * WORK[i];                                                       \
        if (fabs(e) < ENERGY_E_CUT)                                                                \
            e = 0.0;                                                                               \
        if (e < ENERGY_EMIN)                                                                       \
            e = ENERGY_EMIN;                                                                       \
        E_NEW[i] = e;                                                                              \
    } while (0)
#define ENERGY_5(i)                                                                                \
    do {                                                                                           \
        double q_tilde;                                                                            \
        if (DELVC[i] > 0.0) {                                                                      \
            q_tilde = 0.0;                                                                         \
        } else {                                                                                   \
            double ssc = energy_ssc(                                                               \
                (PBVC[i] * E_NEW[i] + VNEWC[i] * VNEWC[i] * BVC[i] * P_NEW[i]) / ENERGY_RHO0);     \
            q_tilde = ssc * QL_OLD[i] + QQ_OLD[i];                                                 \
        }                                                                                          \
        double e = E_NEW[i] - (7.0 * (P_OLD[i] + Q_OLD[i]) - 8.0 * (P_HALF[i] + Q_NEW[i]) +        \
                               (P_NEW[i] + q_tilde)) *                                             \
                                  DELVC[i] / 6.0;                                                  \
        if (fabs(e) < ENERGY_E_CUT)                                                                \
            e = 0.0;                                                                               \
        if (e < ENERGY_EMIN)                                                                       \
            e = ENERGY_EMIN;                                                                       \
        E_NEW[i] = e;                                                                              \
    } while (0)
#define ENERGY_6(i)                                                                                \
    do {                                                                                           \
        if (DELVC[i] <= 0.0) {                                                                     \
            double ssc = energy_ssc(                                                               \
                (PBVC[i] * E_NEW[i] + VNEWC[i] * VNEWC[i] * BVC[i] * P_NEW[i]) / ENERGY_RHO0);     \
            double q = ssc * QL_OLD[i] + QQ_OLD[i];                                                \
            if (fabs(q) < ENERGY_Q_CUT)                                                            \
                q = 0.0;                                                                           \
            Q_NEW[i] = q;                                                                          \
        }                                                                                          \
    } while (0)

enum kernel { K_MULADDSUB, K_INIT3, K_IF_QUAD, K_TRAP_INT, K_PRESSURE, K_ENERGY, K_FIR, K_NONE };
static const char *const kernel_names[] = {"muladdsub",     "init3",       "if_quad", "trap_int",
                                           "pressure_calc", "energy_calc", "fir"};
/* Input arrays and outputs per kernel. */
static const int kernel_inputs[] = {2, 2, 3, 0, 3, 13, 1};
static const int kernel_outputs[] = {3, 3, 2, 0, 2, 2, 1};

/* One trial: the kernel's parallel loops, one `omp parallel for` each. */
static void trial(enum kernel k, struct lcals *d)
{
    const long n = (long)d->n;
    double *const *x = d->in;
    double *const *o = d->out;
    switch (k) {
    case K_MULADDSUB:
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            MULADDSUB(i);
        break;
    case K_INIT3:
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            INIT3(i);
        break;
    case K_IF_QUAD:
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            IF_QUAD(i);
        break;
    case K_TRAP_INT: {
        const double h = 1.0 / (double)n;
        double sumx = 0.0;
#pragma omp parallel for reduction(+ : sumx)
        for (long i = 0; i < n; i++)
            sumx += trap_f(TRAP_X0 + (double)i * h);
        d->trap_total += sumx * h;
        break;
    }
    case K_PRESSURE:
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            PRESSURE_1(i);
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            PRESSURE_2(i);
        break;
    case K_ENERGY:
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            ENERGY_1(i);
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            ENERGY_2(i);
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            ENERGY_3(i);
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            ENERGY_4(i);
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            ENERGY_5(i);
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            ENERGY_6(i);
        break;
    case K_FIR:
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            FIR(i);
        break;
    case K_NONE:
        break;
    }
}

/* The same trial, serially, into `o` (for verification). */
static double serial(enum kernel k, double *const *x, double *const *o, size_t un)
{
    const long n = (long)un;
    switch (k) {
    case K_MULADDSUB:
        for (long i = 0; i < n; i++)
            MULADDSUB(i);
        break;
    case K_INIT3:
        for (long i = 0; i < n; i++)
            INIT3(i);
        break;
    case K_IF_QUAD:
        for (long i = 0; i < n; i++)
            IF_QUAD(i);
        break;
    case K_TRAP_INT: {
        const double h = 1.0 / (double)n;
        double sumx = 0.0;
        for (long i = 0; i < n; i++)
            sumx += trap_f(TRAP_X0 + (double)i * h);
        return sumx * h;
    }
    case K_PRESSURE:
        for (long i = 0; i < n; i++)
            PRESSURE_1(i);
        for (long i = 0; i < n; i++)
            PRESSURE_2(i);
        break;
    case K_ENERGY:
        for (long i = 0; i < n; i++)
            ENERGY_1(i);
        for (long i = 0; i < n; i++)
            ENERGY_2(i);
        for (long i = 0; i < n; i++)
            ENERGY_3(i);
        for (long i = 0; i < n; i++)
            ENERGY_4(i);
        for (long i = 0; i < n; i++)
            ENERGY_5(i);
        for (long i = 0; i < n; i++)
            ENERGY_6(i);
        break;
    case K_FIR:
        for (long i = 0; i < n; i++)
            FIR(i);
        break;
    case K_NONE:
        break;
    }
    return 0.0;
}

/* Fills input `j` of kernel `k` (the same definitions as lcals.rs). */
static double *lcals_input(enum kernel k, int j, size_t n)
{
    uint64_t key = (uint64_t)j + 1;
    switch (k) {
    case K_IF_QUAD:
        /* a in [0.5, 1.5), b in [-1, 1), c in [-0.1, 0.15). */
        if (j == 0)
            return filled(n, key, 1.0, 0.5);
        if (j == 1)
            return filled(n, key, 2.0, -1.0);
        return filled(n, key, 0.25, -0.1);
    case K_PRESSURE:
        /* compression, e_old in [-0.25, 0.75), vnewc. */
        if (j == 1)
            return filled(n, key, 1.0, -0.25);
        return filled(n, key, 1.0, 0.0);
    case K_ENERGY:
        /* delvc in [-0.5, 0.5), pbvc in [-0.3, 0.7), the rest in [0, 1). */
        if (j == 1)
            return filled(n, key, 1.0, -0.5);
        if (j == 8)
            return filled(n, key, 1.0, -0.3);
        return filled(n, key, 1.0, 0.0);
    case K_FIR:
        return filled(n + FIR_TAPS, key, 1.0, 0.0);
    default:
        return filled(n, key, 1.0, 0.0);
    }
}

static int run_lcals(const char *name, size_t n, long trials, int reps)
{
    enum kernel k = K_NONE;
    for (int j = 0; j < K_NONE; j++)
        if (strcmp(name, kernel_names[j]) == 0)
            k = (enum kernel)j;
    if (k == K_NONE || n == 0 || trials <= 0 || reps <= 0)
        fail("usage: suite_omp lcals <kernel> <n> <trials> <reps>");
    struct lcals d = {.n = n};
    for (int j = 0; j < kernel_inputs[k]; j++)
        d.in[j] = lcals_input(k, j, n);
    for (int j = 0; j < kernel_outputs[k]; j++) {
        d.out[j] = array(n);
        poison(d.out[j], n);
    }
    /* Warm-up: start the team and touch the data. */
    for (long t = 0; t < trials / 10 + 1; t++)
        trial(k, &d);
    d.trap_total = 0.0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (long t = 0; t < trials; t++)
            trial(k, &d);
        printf("time trials %.9f\n", now() - t0);
        fflush(stdout);
    }
    double *ref[3] = {0};
    for (int j = 0; j < kernel_outputs[k]; j++) {
        ref[j] = array(n);
        poison(ref[j], n);
    }
    double ref_trap = serial(k, d.in, ref, n);
    double sum = 0.0;
    if (k == K_TRAP_INT) {
        double mean = d.trap_total / ((double)trials * reps);
        if (!(fabs(mean - ref_trap) <= 1e-10 * fabs(ref_trap)))
            fail("trap_int: the parallel sum differs from the serial sum");
        sum = mean;
    }
    for (int j = 0; j < kernel_outputs[k]; j++) {
        if (!close_enough(d.out[j], ref[j], n, 1e-12))
            fail("lcals: the parallel output differs from the serial output");
        sum += checksum(d.out[j], n, 1.0 + j);
    }
    printf("checksum %.17g\n", sum);
    return 0;
}

/* --------------------------------------------------------------- STREAM */

#define STREAM_SCALAR 3.0

static int run_stream(size_t n, int ntimes, int reps)
{
    if (n == 0 || ntimes < 2 || reps <= 0)
        fail("usage: suite_omp stream <n> <ntimes >= 2> <reps>");
    double *a = array(n), *b = array(n), *c = array(n);
    const long ln = (long)n;
    static const char *const names[4] = {"copy", "scale", "add", "triad"};
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for
        for (long j = 0; j < ln; j++) {
            a[j] = 1.0;
            b[j] = 2.0;
            c[j] = 0.0;
        }
        double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
        for (int k = 0; k < ntimes; k++) {
            double t[5];
            t[0] = now();
#pragma omp parallel for
            for (long j = 0; j < ln; j++)
                c[j] = a[j];
            t[1] = now();
#pragma omp parallel for
            for (long j = 0; j < ln; j++)
                b[j] = STREAM_SCALAR * c[j];
            t[2] = now();
#pragma omp parallel for
            for (long j = 0; j < ln; j++)
                c[j] = a[j] + b[j];
            t[3] = now();
#pragma omp parallel for
            for (long j = 0; j < ln; j++)
                a[j] = b[j] + STREAM_SCALAR * c[j];
            t[4] = now();
            /* As STREAM: the first iteration is not counted. */
            for (int q = 0; k > 0 && q < 4; q++)
                if (t[q + 1] - t[q] < best[q])
                    best[q] = t[q + 1] - t[q];
        }
        double ea = 1.0, eb = 2.0, ec = 0.0;
        for (int k = 0; k < ntimes; k++) {
            ec = ea;
            eb = STREAM_SCALAR * ec;
            ec = ea + eb;
            ea = eb + STREAM_SCALAR * ec;
        }
        for (size_t j = 0; j < n; j++)
            if (!(fabs(a[j] - ea) <= 1e-13 * fabs(ea) && fabs(b[j] - eb) <= 1e-13 * fabs(eb) &&
                  fabs(c[j] - ec) <= 1e-13 * fabs(ec)))
                fail("stream: an array element differs from its expected value");
        for (int q = 0; q < 4; q++)
            printf("time %s %.9f\n", names[q], best[q]);
        fflush(stdout);
    }
    return 0;
}

/* -------------------------------------------------------- RandomAccess */

/* The HPCC update stream: ran <- ran * x in GF(2)[x] mod x^64 + x^2 + x + 1. */
#define GUPS_POLY 0x7ULL
#define GUPS_PERIOD 1317624576693539401LL

static uint64_t gups_next(uint64_t r)
{
    return (r << 1) ^ ((int64_t)r < 0 ? GUPS_POLY : 0);
}

/* a * b mod the polynomial, by Horner's rule over the bits of b. */
static uint64_t gups_mulmod(uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    for (int i = 63; i >= 0; i--) {
        r = gups_next(r);
        if ((b >> i) & 1)
            r ^= a;
    }
    return r;
}

/* The n-th element of the stream (the 0-th is 1): x^n by squaring. */
static uint64_t gups_starts(int64_t n)
{
    n %= GUPS_PERIOD;
    if (n < 0)
        n += GUPS_PERIOD;
    uint64_t r = 1, p = 2;
    while (n > 0) {
        if (n & 1)
            r = gups_mulmod(r, p);
        p = gups_mulmod(p, p);
        n >>= 1;
    }
    return r;
}

static void gups_update(uint64_t *t, uint64_t mask, uint64_t lo, uint64_t hi)
{
    uint64_t ran = gups_starts((int64_t)lo);
    for (uint64_t k = lo; k < hi; k++) {
        ran = gups_next(ran);
        /* A racy read-xor-write, HPCC's own statement: concurrent updates
         * of one word may be lost (gcc emits one non-atomic `xor` to
         * memory, as rustc does for the Rust side's relaxed load+store). */
        t[ran & mask] ^= ran;
    }
}

static int run_gups(int log2n, int reps)
{
    if (log2n < 4 || log2n > 40 || reps <= 0)
        fail("usage: suite_omp gups <log2 table size> <reps>");
    const uint64_t size = 1ULL << log2n, mask = size - 1, updates = 4 * size;
    uint64_t *t = aligned_alloc(64, size * sizeof(uint64_t));
    if (!t)
        fail("out of memory");
    const long blocks = omp_get_max_threads();
    for (int r = 0; r < reps; r++) {
#pragma omp parallel for
        for (long i = 0; i < (long)size; i++)
            t[i] = (uint64_t)i;
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (long b = 0; b < blocks; b++)
            gups_update(t, mask, updates * (uint64_t)b / (uint64_t)blocks,
                        updates * (uint64_t)(b + 1) / (uint64_t)blocks);
        printf("time update %.9f\n", now() - t0);
        /* HPCC's verification: undo the updates serially, count errors. */
        gups_update(t, mask, 0, updates);
        uint64_t errors = 0;
        for (uint64_t i = 0; i < size; i++)
            errors += t[i] != i;
        printf("errors %llu %llu\n", (unsigned long long)errors, (unsigned long long)size);
        fflush(stdout);
        if ((double)errors > 0.01 * (double)size)
            fail("gups: more than 1% of the table words are in error");
    }
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "lcals") == 0)
        return run_lcals(argv[2], strtoull(argv[3], 0, 10), strtol(argv[4], 0, 10),
                         atoi(argv[5]));
    if (argc >= 5 && strcmp(argv[1], "stream") == 0)
        return run_stream(strtoull(argv[2], 0, 10), atoi(argv[3]), atoi(argv[4]));
    if (argc >= 4 && strcmp(argv[1], "gups") == 0)
        return run_gups(atoi(argv[2]), atoi(argv[3]));
    fail("usage: suite_omp lcals <kernel> <n> <trials> <reps> | stream <n> <ntimes> <reps> | "
         "gups <log2 size> <reps>");
    return 2;
}
