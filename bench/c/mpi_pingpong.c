/* The MPI peer of `cantus-bench comm`, timed on rank 0:
 * - an 8-byte ping-pong between ranks 0 and 1 (MPI_Send/MPI_Recv):
 *   `rtt_us`, per round trip;
 * - pipelined requests and replies: windows of 64 8-byte requests
 *   (MPI_Irecv for each reply, then MPI_Isend) that rank 1 answers one by
 *   one with the value plus one (MPI_Recv, MPI_Send), rank 0 waiting for
 *   the window's replies: `request_reply_us`, per request and reply, the
 *   peer of `am_pipelined`;
 * - a pipelined stream of 8-byte messages from rank 0 to rank 1
 *   (MPI_Isend windows, rank 1 MPI_Recv): `pipelined_us`, per message,
 *   the peer of `am_stream`;
 * - ping-pongs of 1 B, 1 KiB, 64 KiB and 1 MiB messages (MPI_Send/Recv):
 *   `oneway_us_SIZE`, half the round trip, the peer of `chant_sizes`;
 * - streams of 1 KiB, 64 KiB, 1 MiB and 16 MiB messages from rank 0 to
 *   rank 1: windows of 64 MPI_Isend that rank 1 receives into 64
 *   MPI_Irecv posted before the window, then a 4-byte ack (osu_bw's
 *   scheme; at least 10 windows, 2 of 16 MiB when ROUNDS is under 1000):
 *   `stream_us_SIZE`, per message, the peer of `chant_stream`;
 * - the same streams received as a runtime that hands each message to its
 *   receiver must: each probed (MPI_Improbe), then received into a buffer
 *   of its own, up to OPEN_OWN being received at once, in order; the
 *   buffers come from a pool of OPEN_OWN + 1, allocated and written once
 *   and reused in turn, as a runtime recycles its receive buffers:
 *   `stream_own_us_SIZE`, per message (a figure to read `stream_us_SIZE`
 *   by: there every message of a window lands in the same buffer, which
 *   stays in cache); and the same with OPEN_OWN_MANY being received at
 *   once (a pool of OPEN_OWN_MANY + 1): `stream_own16_us_SIZE` (more
 *   rendezvous overlapping: the most a runtime that receives as it
 *   probes gets here);
 * - MPI_Barrier: `barrier_us`, per barrier (the peer of pgas's barrier).
 * Run as `mpirun -np 2 mpi_pingpong ROUNDS`; `mpi_pingpong ROUNDS barrier`
 * times MPI_Barrier alone, on any number of ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define WINDOW 64
/* Messages being received at once in the `stream_own` rows. */
#define OPEN_OWN 4
/* The same, many at once (`stream_own16_us_SIZE`). */
#define OPEN_OWN_MANY 16
/* The stream sizes, and the largest. */
#define STREAM_SIZES 4
#define STREAM_MAX (16 << 20)
static const int stream_sizes[STREAM_SIZES] = {1 << 10, 64 << 10, 1 << 20, STREAM_MAX};

/* Windows of a stream of `size`-byte messages: as many as make ROUNDS
 * messages of 1 KiB-equivalents, at least 10 (2 in a quick run, ROUNDS
 * under 1000, of the 16 MiB messages: each window moves 1 GiB). */
static long stream_windows(long rounds, int size) {
    long n = rounds / ((long)WINDOW * (1 + size / 1024));
    long least = rounds < 1000 && size >= STREAM_MAX ? 2 : 10;
    return n < least ? least : n;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 2 && strcmp(argv[2], "barrier") == 0) {
        long barriers = argc > 1 ? atol(argv[1]) : 10000;
        if (barriers <= 0) barriers = 10000;
        for (long i = 0; i < barriers / 10; i++) MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (long i = 0; i < barriers; i++) MPI_Barrier(MPI_COMM_WORLD);
        double barrier = (MPI_Wtime() - start) / (double)barriers;
        if (rank == 0) printf("barrier_us %.4f\n", barrier * 1e6);
        MPI_Finalize();
        return 0;
    }
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi_pingpong: run with exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    if (rounds <= 0) rounds = 100000;
    uint64_t v = 0;
    long warm = rounds / 10;
    double start = 0;
    for (long i = 0; i < warm + rounds; i++) {
        if (i == warm) start = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(&v, 1, MPI_UINT64_T, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_UINT64_T, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&v, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            v += 1;
            MPI_Send(&v, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD);
        }
    }
    double rtt = (MPI_Wtime() - start) / rounds;
    if (rank == 0 && v != (uint64_t)(warm + rounds)) {
        fprintf(stderr, "mpi_pingpong: got %llu, want %ld\n", (unsigned long long)v, warm + rounds);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Pipelined requests and replies. */
    uint64_t msgs[WINDOW];
    uint64_t replies[WINDOW];
    MPI_Request reqs[WINDOW];
    MPI_Request reply_reqs[WINDOW];
    long windows_rr = rounds / WINDOW;
    if (windows_rr < 1) windows_rr = 1;
    uint64_t sum_rr = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    for (long w = 0; w < windows_rr; w++) {
        if (rank == 0) {
            for (int k = 0; k < WINDOW; k++) {
                MPI_Irecv(&replies[k], 1, MPI_UINT64_T, 1, 3, MPI_COMM_WORLD, &reply_reqs[k]);
                msgs[k] = (uint64_t)(w * WINDOW + k);
                MPI_Isend(&msgs[k], 1, MPI_UINT64_T, 1, 3, MPI_COMM_WORLD, &reqs[k]);
            }
            MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
            MPI_Waitall(WINDOW, reply_reqs, MPI_STATUSES_IGNORE);
            for (int k = 0; k < WINDOW; k++) sum_rr += replies[k];
        } else {
            for (int k = 0; k < WINDOW; k++) {
                uint64_t m;
                MPI_Recv(&m, 1, MPI_UINT64_T, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                m += 1;
                MPI_Send(&m, 1, MPI_UINT64_T, 0, 3, MPI_COMM_WORLD);
            }
        }
    }
    double request_reply = (MPI_Wtime() - start) / (double)(windows_rr * WINDOW);
    uint64_t n_rr = (uint64_t)windows_rr * WINDOW;
    if (rank == 0 && sum_rr != n_rr * (n_rr + 1) / 2) {
        fprintf(stderr, "mpi_pingpong: request/reply sum %llu is wrong\n", (unsigned long long)sum_rr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Pipelined stream: windows of WINDOW sends, then a zero-byte ack. */
    long windows = rounds / WINDOW + 1;
    uint64_t sum = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    for (long w = 0; w < windows; w++) {
        if (rank == 0) {
            for (int k = 0; k < WINDOW; k++) {
                msgs[k] = (uint64_t)(w * WINDOW + k);
                MPI_Isend(&msgs[k], 1, MPI_UINT64_T, 1, 1, MPI_COMM_WORLD, &reqs[k]);
            }
            MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
        } else {
            for (int k = 0; k < WINDOW; k++) {
                uint64_t m;
                MPI_Recv(&m, 1, MPI_UINT64_T, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                sum += m;
            }
        }
    }
    if (rank == 1) MPI_Send(&sum, 1, MPI_UINT64_T, 0, 2, MPI_COMM_WORLD);
    else MPI_Recv(&sum, 1, MPI_UINT64_T, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double piped = (MPI_Wtime() - start) / (double)(windows * WINDOW);
    uint64_t n = (uint64_t)windows * WINDOW;
    if (rank == 0) {
        if (sum != n * (n - 1) / 2) {
            fprintf(stderr, "mpi_pingpong: pipelined sum %llu is wrong\n", (unsigned long long)sum);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        printf("rtt_us %.4f\nrequest_reply_us %.4f\npipelined_us %.4f\n", rtt * 1e6,
               request_reply * 1e6, piped * 1e6);
    }
    /* Ping-pongs of each size, bytes checked at the end. */
    static const int sizes[] = {1, 1 << 10, 64 << 10, 1 << 20};
    /* The largest message: the last of the stream sizes. */
    unsigned char *buf = malloc(STREAM_MAX);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int s = 0; s < 4; s++) {
        int size = sizes[s];
        long n_size = rounds / (1 + size / 1024);
        if (n_size < 20) n_size = 20;
        for (int i = 0; i < size; i++) buf[i] = (unsigned char)(i * 7 + s);
        MPI_Barrier(MPI_COMM_WORLD);
        start = MPI_Wtime();
        for (long i = 0; i < n_size; i++) {
            if (rank == 0) {
                MPI_Send(buf, size, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
                MPI_Recv(buf, size, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, size, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, size, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
            }
        }
        double oneway = (MPI_Wtime() - start) / (double)n_size / 2;
        for (int i = 0; i < size; i++) {
            if (buf[i] != (unsigned char)(i * 7 + s)) {
                fprintf(stderr, "mpi_pingpong: %d-byte message changed\n", size);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        if (rank == 0) printf("oneway_us_%d %.4f\n", size, oneway * 1e6);
    }
    /* Streams of each size, windows of WINDOW messages then an ack; the
     * last window's bytes checked. */
    for (int s = 0; s < STREAM_SIZES; s++) {
        int size = stream_sizes[s];
        long n_windows = stream_windows(rounds, size);
        for (int i = 0; i < size; i++) buf[i] = rank == 0 ? (unsigned char)(i * 5 + s) : 0;
        uint32_t ack = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long w = -1; w < n_windows; w++) {
            /* Window -1 warms up, untimed. */
            if (w == 0) start = MPI_Wtime();
            for (int k = 0; k < WINDOW; k++) {
                if (rank == 0)
                    MPI_Isend(buf, size, MPI_BYTE, 1, 6, MPI_COMM_WORLD, &reqs[k]);
                else
                    MPI_Irecv(buf, size, MPI_BYTE, 0, 6, MPI_COMM_WORLD, &reqs[k]);
            }
            MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
            if (rank == 0)
                MPI_Recv(&ack, 1, MPI_UINT32_T, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(&ack, 1, MPI_UINT32_T, 0, 7, MPI_COMM_WORLD);
        }
        double per = (MPI_Wtime() - start) / (double)(n_windows * WINDOW);
        for (int i = 0; i < size; i++) {
            if (buf[i] != (unsigned char)(i * 5 + s)) {
                fprintf(stderr, "mpi_pingpong: a %d-byte streamed message changed\n", size);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        if (rank == 0) printf("stream_us_%d %.4f\n", size, per * 1e6);
    }
    /* The same streams, each message into a buffer of its own, OPEN_OWN
     * and then OPEN_OWN_MANY being received at once. */
    for (int v = 0; v < 2 * STREAM_SIZES; v++) {
        int s = v % STREAM_SIZES;
        int open = v < STREAM_SIZES ? OPEN_OWN : OPEN_OWN_MANY;
        int size = stream_sizes[s];
        long n_windows = stream_windows(rounds, size);
        uint32_t ack = 0;
        int changed = 0;
        unsigned char *pool[OPEN_OWN_MANY + 1];
        for (int i = 0; i < open + 1; i++) {
            pool[i] = malloc(size);
            if (!pool[i]) MPI_Abort(MPI_COMM_WORLD, 1);
            memset(pool[i], 0, size);
        }
        long taken = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long w = -1; w < n_windows; w++) {
            if (w == 0) start = MPI_Wtime();
            if (rank == 0) {
                for (int i = 0; i < size; i++) buf[i] = (unsigned char)(i * 3 + w);
                for (int k = 0; k < WINDOW; k++)
                    MPI_Isend(buf, size, MPI_BYTE, 1, 8, MPI_COMM_WORLD, &reqs[k]);
                MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(&ack, 1, MPI_UINT32_T, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                continue;
            }
            unsigned char *own[WINDOW];
            int probed = 0, done = 0;
            while (done < WINDOW) {
                while (probed < WINDOW && probed - done < open) {
                    int flag = 0, count = 0;
                    MPI_Message m;
                    MPI_Status st;
                    MPI_Improbe(0, 8, MPI_COMM_WORLD, &flag, &m, &st);
                    if (!flag) break;
                    MPI_Get_count(&st, MPI_BYTE, &count);
                    if (count != size) changed = 1;
                    own[probed] = pool[(taken + probed) % (open + 1)];
                    MPI_Imrecv(own[probed], count, MPI_BYTE, &m, &reqs[probed]);
                    probed++;
                }
                if (done < probed) {
                    int flag = 0;
                    MPI_Test(&reqs[done], &flag, MPI_STATUS_IGNORE);
                    if (flag) {
                        /* The last byte checked: the message is there. */
                        if (own[done][size - 1] != (unsigned char)((size - 1) * 3 + w)) changed = 1;
                        done++;
                    }
                }
            }
            taken += WINDOW;
            MPI_Send(&ack, 1, MPI_UINT32_T, 0, 7, MPI_COMM_WORLD);
        }
        double per = (MPI_Wtime() - start) / (double)(n_windows * WINDOW);
        for (int i = 0; i < open + 1; i++) free(pool[i]);
        if (changed) {
            fprintf(stderr, "mpi_pingpong: a %d-byte message received into its own buffer changed\n", size);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == 0)
            printf(open == OPEN_OWN ? "stream_own_us_%d %.4f\n" : "stream_own16_us_%d %.4f\n", size,
                   per * 1e6);
    }
    free(buf);
    long barriers = rounds / 10 < 100 ? 100 : rounds / 10;
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    for (long i = 0; i < barriers; i++) MPI_Barrier(MPI_COMM_WORLD);
    double barrier = (MPI_Wtime() - start) / (double)barriers;
    if (rank == 0) printf("barrier_us %.4f\n", barrier * 1e6);
    MPI_Finalize();
    return 0;
}
