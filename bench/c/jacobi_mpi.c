/* The C MPI peer of examples/jacobi.rs: the same N x N Jacobi stencil
 * (top edge held at 1, the others at 0, each cell replaced by the mean of
 * its four neighbours), split by rows over the ranks (block
 * ceil(N / ranks), as pgas::HaloGrid splits it), one ghost row above and
 * below each block exchanged every iteration with MPI_Sendrecv.
 *
 *   mpicc -O3 -o jacobi_mpi bench/c/jacobi_mpi.c
 *   mpirun -np 2 ./jacobi_mpi [N] [ITERATIONS] [exchange]
 *
 * With "exchange" last, the iterations only exchange ghost rows (no cell
 * is computed): the halo exchange's own cost.
 *
 * Prints the time per iteration of the slowest rank, the time per
 * iteration it spent in MPI_Sendrecv, and cell (1, N/2), which
 * examples/jacobi.rs prints too. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    long n = argc > 1 ? atol(argv[1]) : 1024;
    long iterations = argc > 2 ? atol(argv[2]) : 100;
    int compute = !(argc > 3 && strcmp(argv[3], "exchange") == 0);
    if (n <= 0 || iterations <= 0) {
        if (rank == 0) fprintf(stderr, "usage: jacobi_mpi [N] [ITERATIONS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long block = (n + ranks - 1) / ranks;
    long first = rank * block;
    long last = first + block < n ? first + block : n;
    long h = last > first ? last - first : 0;
    long s = n + 2; /* a row with its two boundary columns */
    double *old = calloc((size_t)(h + 2) * s, sizeof(double));
    double *new = calloc((size_t)(h + 2) * s, sizeof(double));
    if (!old || !new) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) {
        for (long j = 0; j < s; j++) old[j] = new[j] = 1.0;
    }
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank + 1 < ranks && last < n ? rank + 1 : MPI_PROC_NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime(), exchanging = 0.0;
    for (long it = 0; it < iterations; it++) {
        double t = MPI_Wtime();
        /* My first row up, the ghost row below me from down; my last row
         * down, the ghost row above me from up. */
        MPI_Sendrecv(old + s, (int)s, MPI_DOUBLE, up, 0, old + (h + 1) * s, (int)s,
                     MPI_DOUBLE, down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(old + h * s, (int)s, MPI_DOUBLE, down, 1, old, (int)s, MPI_DOUBLE, up,
                     1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        exchanging += MPI_Wtime() - t;
        for (long i = 1; i <= h && compute; i++) {
            const double *u = old + (i - 1) * s, *m = old + i * s, *d = old + (i + 1) * s;
            double *o = new + i * s;
            for (long j = 1; j <= n; j++) o[j] = 0.25 * (u[j] + d[j] + m[j - 1] + m[j + 1]);
        }
        double *tmp = old;
        old = new;
        new = tmp;
    }
    double took = (MPI_Wtime() - start) / iterations, slowest, exch;
    exchanging /= iterations;
    MPI_Reduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&exchanging, &exch, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* Cell (1, n / 2), near the hot edge (its owner is rank 0 unless
     * the first block has one row). */
    long r = n > 1 ? 1 : 0;
    double probe = 0.0;
    if (r >= first && r < last) {
        probe = old[(r - first + 1) * s + n / 2 + 1];
        if (rank != 0) MPI_Send(&probe, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    }
    if (rank == 0 && !compute) {
        printf("jacobi_mpi: %ld x %ld, %ld halo exchanges alone on %d ranks: %.2f us per "
               "exchange\n", n, n, iterations, ranks, slowest * 1e6);
    } else if (rank == 0) {
        if (!(r >= first && r < last))
            MPI_Recv(&probe, 1, MPI_DOUBLE, (int)(r / block), 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        printf("jacobi_mpi: %ld x %ld, %ld iterations on %d ranks: %.1f us per iteration "
               "(%.1f us of it in MPI_Sendrecv); cell (1, n/2) %.9e\n",
               n, n, iterations, ranks, slowest * 1e6, exch * 1e6, probe);
    }
    free(old);
    free(new);
    MPI_Finalize();
    return 0;
}
