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
#include <stdbool.h>

/* MPI counts are ints: large buffers go in pieces. */
#define PIECE ((size_t)1 << 30)

/* The transport's state. The notes of the ranks that wait (note, heard) travel on a communicator
 * of their own, so that they never match anything else. */
typedef struct mpi_ctx {
    MPI_Comm notes; /* a duplicate of MPI_COMM_WORLD */
    int rank, size;
    int64_t *heard;   /* [size]: the largest seq each rank noted (-1: none) */
    int64_t *sent;    /* [size]: the note under way to each rank (its send's buffer) */
    MPI_Request *out; /* [size]: that send (MPI_REQUEST_NULL: none) */
} mpi_ctx;

static void free_ctx(mpi_ctx *c) {
    if (!c) return;
    free(c->heard);
    free(c->sent);
    free(c->out);
    free(c);
}

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
    mpi_ctx *c = calloc(1, sizeof *c);
    size_t k = (size_t)*size;
    if (!c || !(c->heard = malloc(k * sizeof *c->heard)) ||
        !(c->sent = calloc(k, sizeof *c->sent)) || !(c->out = malloc(k * sizeof *c->out))) {
        free_ctx(c);
        return ag_error("dist: out of memory");
    }
    c->rank = *rank;
    c->size = *size;
    for (size_t r = 0; r < k; r++) c->heard[r] = -1, c->out[r] = MPI_REQUEST_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->notes);
    *ctx = c;
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

/* ---- started collectives: a barrier, then the data ----
 * The barrier tells when every rank has arrived (test says MOVING only then; the data may move
 * before). Sums are in place, as MPI_Iallreduce does them: Open MPI's (libnbc) reduces to rank 0
 * along a binomial tree and sends the result back, so every rank has the same bits; with 2 ranks
 * they are a + b, the bits of the blocking MPI_Allreduce. */
typedef struct mpi_req {
    int n;        /* requests: the barrier's, then each piece's */
    bool arrived; /* the barrier is complete */
    MPI_Request r[];
} mpi_req;

static const struct {
    MPI_Datatype type;
    MPI_Op op;
    size_t size;
} REDUCE[] = {[ZOO_DIST_SUM_F32] = {MPI_FLOAT, MPI_SUM, sizeof(float)},
              [ZOO_DIST_SUM_F64] = {MPI_DOUBLE, MPI_SUM, sizeof(double)},
              [ZOO_DIST_MAX_I32] = {MPI_INT32_T, MPI_MAX, sizeof(int32_t)}};

static int mpi_start(void *ctx, zoo_dist_op op, const void *mine, void *buf, size_t n, void **req) {
    (void)ctx;
    if (op == ZOO_DIST_ALLGATHER && n > INT_MAX)
        return ag_error("dist: an all-gather of %zu bytes per rank", n);
    size_t pieces = op == ZOO_DIST_ALLGATHER ? 1 : (n + PIECE - 1) / PIECE;
    mpi_req *q = malloc(sizeof *q + (1 + pieces) * sizeof(MPI_Request));
    if (!q) return ag_error("dist: out of memory");
    q->n = 1 + (int)pieces;
    q->arrived = false;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &q->r[0]);
    for (size_t i = 0, p = 1; p < (size_t)q->n && rc == MPI_SUCCESS; i += PIECE, p++) {
        int k = (int)(n - i < PIECE ? n - i : PIECE);
        if (op == ZOO_DIST_ALLGATHER)
            rc = MPI_Iallgather(mine, k, MPI_BYTE, buf, k, MPI_BYTE, MPI_COMM_WORLD, &q->r[p]);
        else if (op == ZOO_DIST_BCAST)
            rc = MPI_Ibcast((char *)buf + i, k, MPI_BYTE, 0, MPI_COMM_WORLD, &q->r[p]);
        else
            rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + i * REDUCE[op].size, k, REDUCE[op].type,
                                REDUCE[op].op, MPI_COMM_WORLD, &q->r[p]);
    }
    if (rc != MPI_SUCCESS) { /* not reached: MPI's errors end the job */
        free(q);
        return ag_error("dist: starting a collective failed");
    }
    *req = q;
    return 0;
}

static int mpi_test(void *ctx, void *req, zoo_dist_state *state) {
    (void)ctx;
    mpi_req *q = req;
    int done = 0;
    if (!q->arrived && MPI_Test(&q->r[0], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
        q->arrived = true;
    if (MPI_Testall(q->n - 1, q->r + 1, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return ag_error("dist: testing a collective failed");
    *state = !q->arrived ? ZOO_DIST_WAITING : done ? ZOO_DIST_DONE : ZOO_DIST_MOVING;
    if (*state == ZOO_DIST_DONE) free(q);
    return 0;
}

/* ---- who waits: a note to every other rank, received when asked ---- */

/* Receives the notes that came (they wait in MPI's queue until then), keeping each rank's
 * largest. */
static void receive_notes(mpi_ctx *c) {
    for (int any = 1; any;) {
        MPI_Status st;
        int64_t seq = -1;
        MPI_Iprobe(MPI_ANY_SOURCE, 0, c->notes, &any, &st);
        if (any) MPI_Recv(&seq, 1, MPI_INT64_T, st.MPI_SOURCE, 0, c->notes, MPI_STATUS_IGNORE);
        if (any && seq > c->heard[st.MPI_SOURCE]) c->heard[st.MPI_SOURCE] = seq;
    }
}

static int mpi_note(void *ctx, int64_t seq) {
    mpi_ctx *c = ctx;
    receive_notes(c); /* so that notes of long runs do not pile up */
    for (int r = 0; r < c->size; r++) {
        int idle = 1;
        if (r == c->rank) continue;
        if (c->out[r] != MPI_REQUEST_NULL) MPI_Test(&c->out[r], &idle, MPI_STATUS_IGNORE);
        if (!idle) continue; /* the last note to r has not left: r does not listen */
        c->sent[r] = seq;
        MPI_Isend(&c->sent[r], 1, MPI_INT64_T, r, 0, c->notes, &c->out[r]);
    }
    return 0;
}

static int mpi_heard(void *ctx, int64_t *heard) {
    mpi_ctx *c = ctx;
    receive_notes(c);
    for (int r = 0; r < c->size; r++)
        if (r != c->rank) heard[r] = c->heard[r];
    return 0;
}

static void mpi_abort(void *ctx, int status) {
    (void)ctx;
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status); /* not reached */
}

static void mpi_finalize(void *ctx) {
    mpi_ctx *c = ctx;
    receive_notes(c);
    MPI_Waitall(c->size, c->out, MPI_STATUSES_IGNORE);
    MPI_Comm_free(&c->notes);
    free_ctx(c);
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
    .start = mpi_start,
    .test = mpi_test,
    .note = mpi_note,
    .heard = mpi_heard,
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
