/* dist_mpi.c -- the zoo_dist transport over MPI (zoo/app/dist_mpi_internal.h), or its stub. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/dist_mpi_internal.h"

#include <stdlib.h>
#include <string.h>

/* The launcher's size of the job, from its environment (0: not started by a launcher). */
static int launched_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v) > 0 ? atoi(v) : 1;
    }
    return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 1 : 0;
}

#ifdef TG_MPI

#include <limits.h>
#include <mpi.h>

/* MPI counts are ints: large buffers go in pieces. */
#define PIECE ((size_t)1 << 30)

static int mpi_init(void **ctx, int *rank, int *size, int *local_size) {
    *ctx = NULL;
    if (!launched_size()) return 0;
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return ag_error("MPI_Init_thread failed");
    MPI_Comm node;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
    return 1;
}

static int allreduce(void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op) {
    for (size_t i = 0; i < n; i += PIECE) {
        size_t k = n - i < PIECE ? n - i : PIECE;
        if (MPI_Allreduce(MPI_IN_PLACE, (char *)buf + i * elem, (int)k, type, op, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
            return ag_error("MPI_Allreduce failed");
    }
    return 0;
}

static int mpi_sum_f32(void *ctx, float *buf, size_t n) {
    (void)ctx;
    return allreduce(buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM);
}

static int mpi_sum_f64(void *ctx, double *buf, size_t n) {
    (void)ctx;
    return allreduce(buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM);
}

static int mpi_max_i32(void *ctx, int32_t *buf, size_t n) {
    (void)ctx;
    return allreduce(buf, n, sizeof *buf, MPI_INT32_T, MPI_MAX);
}

static int mpi_bcast(void *ctx, void *buf, size_t bytes) {
    (void)ctx;
    for (size_t i = 0; i < bytes; i += PIECE) {
        size_t k = bytes - i < PIECE ? bytes - i : PIECE;
        if (MPI_Bcast((char *)buf + i, (int)k, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            return ag_error("MPI_Bcast failed");
    }
    return 0;
}

static int mpi_allgather(void *ctx, const void *mine, void *all, size_t bytes) {
    (void)ctx;
    if (bytes > INT_MAX) return ag_error("dist: an all-gather of %zu bytes per rank", bytes);
    if (MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        return ag_error("MPI_Allgather failed");
    return 0;
}

static void mpi_abort(void *ctx, int status) {
    (void)ctx;
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status); /* not reached */
}

static void mpi_finalize(void *ctx) {
    (void)ctx;
    MPI_Finalize();
}

#if defined(OMPI_MAJOR_VERSION)
#define STR2(x) #x
#define STR(x) STR2(x)
#define MPI_NAME                                                                                   \
    "Open MPI " STR(OMPI_MAJOR_VERSION) "." STR(OMPI_MINOR_VERSION) "." STR(OMPI_RELEASE_VERSION)
#else
#define MPI_NAME "MPI"
#endif

static const zoo_dist_transport mpi = {
    .name = MPI_NAME,
    .init = mpi_init,
    .sum_f32 = mpi_sum_f32,
    .sum_f64 = mpi_sum_f64,
    .max_i32 = mpi_max_i32,
    .bcast = mpi_bcast,
    .allgather = mpi_allgather,
    .abort = mpi_abort,
    .finalize = mpi_finalize,
};

#else /* no MPI: a process alone, and a refusal of a launch of several */

static int stub_init(void **ctx, int *rank, int *size, int *local_size) {
    (void)ctx, (void)rank, (void)size, (void)local_size;
    int n = launched_size();
    if (n > 1)
        return ag_error("started as one of %d processes, but this program was built without MPI "
                        "(install libopenmpi-dev and rebuild: docs/distributed.md); run it "
                        "without mpirun",
                        n);
    return 0;
}

static const zoo_dist_transport mpi = {.name = "none (built without MPI)", .init = stub_init};

#endif

const zoo_dist_transport *zoo_dist_mpi(void) { return &mpi; }
