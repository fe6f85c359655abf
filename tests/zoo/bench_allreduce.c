/* bench_allreduce.c -- the time of the gradient sum of data-parallel training alone: MPI_Allreduce
 * (MPI_SUM, in place) of a float buffer of the book's Transformer (60,944 parameters, 0.24 MB)
 * and of the big one (d_model 256, FFN 1024, 8 heads, 3 + 3 layers, the whole file's
 * vocabularies: 17,241,024 parameters, 68.96 MB), as the trainer calls it (zoo_dist_sum over
 * Open MPI, docs/distributed.md). Run under mpirun:
 *   mpirun -np 2 build/tests/zoo/bench_allreduce [REPEATS [ELEMENTS ...]]
 * Rank 0 prints, for each size, the median and the minimum over REPEATS (default 20) sums, each
 * after a barrier, and checks that every rank received the same bits (a hash of the result
 * gathered from every rank). A plain MPI program: it measures the transport, not the trainer. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* FNV-1a over the result's bytes: enough to see whether two ranks hold the same bits. */
static uint64_t hash(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof *x; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    long def[] = {60944, 17241024};
    int nsizes = argc > 2 ? argc - 2 : 2;
    if (reps < 1) reps = 1;
    double *t = malloc(sizeof *t * (size_t)reps);
    uint64_t *hashes = malloc(sizeof *hashes * (size_t)size);
    if (!t || !hashes) MPI_Abort(MPI_COMM_WORLD, 1);
    if (!rank) printf("%d ranks, %d repeats\n", size, reps);
    for (int k = 0; k < nsizes; k++) {
        long n = argc > 2 ? atol(argv[2 + k]) : def[k];
        float *buf = malloc(sizeof *buf * (size_t)(n > 0 ? n : 1));
        if (n <= 0 || n > 1L << 30 || !buf) MPI_Abort(MPI_COMM_WORLD, 1);
        for (long i = 0; i < n; i++) buf[i] = (float)((i * 7919 + rank * 104729) % 10007) * 1e-4f;
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm */
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[r] = MPI_Wtime() - t0;
        }
        uint64_t h = hash(buf, (size_t)n);
        MPI_Allgather(&h, 1, MPI_UINT64_T, hashes, 1, MPI_UINT64_T, MPI_COMM_WORLD);
        int same = 1;
        for (int r = 1; r < size; r++) same &= hashes[r] == hashes[0];
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        if (!rank)
            printf("%ld floats (%.2f MB): median %.3f ms, min %.3f ms, %.2f GB/s of buffer; "
                   "every rank the same bits: %s\n",
                   n, n * 4e-6, 1e3 * t[reps / 2], 1e3 * t[0], n * 4e-9 / t[reps / 2],
                   same ? "yes" : "NO");
        free(buf);
    }
    free(t);
    free(hashes);
    MPI_Finalize();
    return 0;
}
