/* The C MPI peer of examples/sample_sort.rs: the same keys (SplitMix64
 * of the index), split over the ranks the same way; each rank sorts its
 * keys, the ranks agree on splitters from 64 samples each
 * (MPI_Allgather), exchange counts (MPI_Alltoall) and keys
 * (MPI_Alltoallv, into a buffer allocated for the round, as the Rust
 * program's vectors are), and sort what they received.
 *
 *   mpicc -O3 -o sample_sort_mpi bench/c/sample_sort_mpi.c
 *   mpirun -np 2 ./sample_sort_mpi [N] [ROUNDS]
 *
 * Prints the slowest rank's time for the sort and for its MPI_Alltoallv
 * (medians of the rounds), after checking the runs as the Rust program
 * does. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES 64

static uint64_t key(uint64_t i) {
    uint64_t z = i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The first index of sorted keys[from..to) whose key is not below s. */
static long partition_point(const uint64_t *keys, long from, long to, uint64_t s) {
    while (from < to) {
        long mid = from + (to - from) / 2;
        if (keys[mid] < s) from = mid + 1; else to = mid;
    }
    return from;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 1;
    if (n == 0 || rounds <= 0) MPI_Abort(MPI_COMM_WORLD, 2);
    uint64_t lo = n * rank / ranks, hi = n * (rank + 1) / ranks;
    long mine = (long)(hi - lo);
    double *took = malloc(sizeof(double) * rounds), *exch = malloc(sizeof(double) * rounds);
    uint64_t *keys = malloc(sizeof(uint64_t) * (mine ? mine : 1));
    uint64_t samples[SAMPLES], *all = malloc(sizeof(uint64_t) * SAMPLES * ranks);
    int *scount = malloc(sizeof(int) * ranks), *sdispl = malloc(sizeof(int) * ranks);
    int *rcount = malloc(sizeof(int) * ranks), *rdispl = malloc(sizeof(int) * ranks);
    uint64_t *run = NULL;
    long got = 0;
    for (int r = 0; r < rounds; r++) {
        for (long i = 0; i < mine; i++) keys[i] = key(lo + i);
        free(run);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        qsort(keys, mine, sizeof(uint64_t), cmp_u64);
        for (int s = 0; s < SAMPLES; s++)
            samples[s] = mine ? keys[(long)s * mine / SAMPLES] : UINT64_MAX;
        MPI_Allgather(samples, SAMPLES, MPI_UINT64_T, all, SAMPLES, MPI_UINT64_T, MPI_COMM_WORLD);
        qsort(all, (size_t)SAMPLES * ranks, sizeof(uint64_t), cmp_u64);
        long from = 0;
        for (int l = 0; l < ranks; l++) {
            long to = l + 1 < ranks
                ? partition_point(keys, from, mine, all[(long)(l + 1) * SAMPLES * ranks / ranks])
                : mine;
            scount[l] = (int)(to - from);
            sdispl[l] = (int)from;
            from = to;
        }
        double t = MPI_Wtime();
        MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
        got = 0;
        for (int l = 0; l < ranks; l++) {
            rdispl[l] = (int)got;
            got += rcount[l];
        }
        run = malloc(sizeof(uint64_t) * (got ? got : 1));
        MPI_Alltoallv(keys, scount, sdispl, MPI_UINT64_T, run, rcount, rdispl, MPI_UINT64_T,
                      MPI_COMM_WORLD);
        exch[r] = MPI_Wtime() - t;
        qsort(run, got, sizeof(uint64_t), cmp_u64);
        took[r] = MPI_Wtime() - start;
    }
    /* Medians (sorted by the sort's time, as the Rust program does). */
    double pair[2 * 64];
    int kept = rounds < 64 ? rounds : 64;
    for (int r = 0; r < kept; r++) { pair[2 * r] = took[r]; pair[2 * r + 1] = exch[r]; }
    qsort(pair, kept, 2 * sizeof(double), cmp_double);
    double mt = pair[2 * (kept / 2)], me = pair[2 * (kept / 2) + 1], slow_t, slow_e;
    MPI_Reduce(&mt, &slow_t, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&me, &slow_e, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* Checks: sorted runs, in order across ranks, the same count and sum. */
    int sorted = 1;
    uint64_t sum = 0;
    for (long i = 0; i < got; i++) {
        if (i && run[i - 1] > run[i]) sorted = 0;
        sum += run[i];
    }
    uint64_t ends[2] = {got ? run[0] : UINT64_MAX, got ? run[got - 1] : 0};
    uint64_t *all_ends = malloc(sizeof(uint64_t) * 2 * ranks);
    MPI_Gather(ends, 2, MPI_UINT64_T, all_ends, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    uint64_t total_sum = 0, count = 0, g = (uint64_t)got;
    int all_sorted = 0;
    MPI_Reduce(&sum, &total_sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&g, &count, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sorted, &all_sorted, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        uint64_t want = 0;
        for (uint64_t i = 0; i < n; i++) want += key(i);
        uint64_t last = 0;
        int ordered = 1;
        for (int l = 0; l < ranks; l++) {
            if (all_ends[2 * l] == UINT64_MAX && all_ends[2 * l + 1] == 0) continue;
            if (all_ends[2 * l] < last) ordered = 0;
            last = all_ends[2 * l + 1];
        }
        if (!all_sorted || !ordered || count != n || total_sum != want) {
            fprintf(stderr, "sample_sort_mpi: wrong result\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        printf("sample_sort_mpi: %llu keys on %d ranks: %.2f ms (%.2f ms of it in "
               "MPI_Alltoall + MPI_Alltoallv), sorted across ranks and checked\n",
               (unsigned long long)n, ranks, slow_t * 1e3, slow_e * 1e3);
    }
    MPI_Finalize();
    return 0;
}
