/* tests/zoo/dist_threads.h -- transports of zoo_dist (zoo/app/dist.h) over threads of the test
 * process, one thread per rank, and the pool that runs a group on them (run_group), for
 * test_dist.c and test_dist_deadline.c: `threads` blocks (sums in rank order, through shared
 * memory and a barrier; lie_rank makes one rank's sums wrong by a bit), `polled` starts and
 * tests its collectives as Open MPI's transport does, with note and heard, and `polled_mute`
 * is polled without notes. Everything is static: each test program has its own group. */
#ifndef TG_TESTS_ZOO_DIST_THREADS_H
#define TG_TESTS_ZOO_DIST_THREADS_H

#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoo/app/dist.h"

/* ---- a transport over threads ---- */

enum { MAX_RANKS = 4 };

static struct {
    int size;
    pthread_barrier_t bar;
    const void *slot[MAX_RANKS]; /* each rank's buffer of the current collective */
    int lie_rank;                /* >= 0: this rank's sums come out wrong by one bit */
} grp = {.lie_rank = -1};

static _Thread_local int my_rank; /* set by the rank's thread before zoo_dist_open */

static inline int t_init(void **ctx, int *rank, int *size, int *local) {
    *ctx = NULL;
    *rank = my_rank;
    *size = *local = grp.size;
    return 1;
}

/* Every rank publishes buf, every rank computes the whole result from all, then writes it. */
#define T_REDUCE(name, type, init, op)                                                             \
    static inline int name(void *ctx, type *buf, size_t n) {                                       \
        (void)ctx;                                                                                 \
        type *out = malloc(sizeof *out * (n ? n : 1));                                             \
        grp.slot[my_rank] = buf;                                                                   \
        pthread_barrier_wait(&grp.bar);                                                            \
        for (size_t i = 0; i < n; i++) {                                                           \
            type acc = init;                                                                       \
            for (int r = 0; r < grp.size; r++) {                                                   \
                type v = ((const type *)grp.slot[r])[i];                                           \
                acc = r == 0 ? v : op;                                                             \
            }                                                                                      \
            out[i] = acc;                                                                          \
        }                                                                                          \
        pthread_barrier_wait(&grp.bar);                                                            \
        memcpy(buf, out, sizeof *out *n);                                                          \
        free(out);                                                                                 \
        return 0;                                                                                  \
    }
T_REDUCE(t_sum_f64, double, 0, acc + v)
T_REDUCE(t_max_i32, int32_t, 0, acc > v ? acc : v)
T_REDUCE(t_sum_f32_exact, float, 0, acc + v)

static inline int t_sum_f32(void *ctx, float *buf, size_t n) {
    int rc = t_sum_f32_exact(ctx, buf, n);
    if (my_rank == grp.lie_rank && n) { /* a broken transport: one rank's first element off */
        uint32_t u;
        memcpy(&u, buf, sizeof u);
        u ^= 1;
        memcpy(buf, &u, sizeof u);
    }
    return rc;
}

static inline int t_bcast(void *ctx, void *buf, size_t bytes) {
    (void)ctx;
    grp.slot[my_rank] = buf;
    pthread_barrier_wait(&grp.bar);
    if (my_rank) memcpy(buf, grp.slot[0], bytes);
    pthread_barrier_wait(&grp.bar);
    return 0;
}

static inline int t_allgather(void *ctx, const void *mine, void *all, size_t bytes) {
    (void)ctx;
    grp.slot[my_rank] = mine;
    pthread_barrier_wait(&grp.bar);
    for (int r = 0; r < grp.size; r++) memcpy((char *)all + (size_t)r * bytes, grp.slot[r], bytes);
    pthread_barrier_wait(&grp.bar);
    return 0;
}

static inline void t_abort(void *ctx, int status) {
    (void)ctx;
    fprintf(stderr, "test_dist: abort(%d) called\n", status);
    abort();
}

static inline void t_finalize(void *ctx) { (void)ctx; }

static const zoo_dist_transport threads __attribute__((unused)) = {
    .name = "threads",
    .init = t_init,
    .sum_f32 = t_sum_f32,
    .sum_f64 = t_sum_f64,
    .max_i32 = t_max_i32,
    .bcast = t_bcast,
    .allgather = t_allgather,
    .abort = t_abort,
    .finalize = t_finalize,
};

/* ---- the same, started and tested (start, test, note, heard): what zoo_dist polls ----
 * A collective is complete for the group when every rank has started it (`arrived` reaches
 * size x its number) and every rank has read the others' buffers (`read`); each rank writes its
 * result only then. A rank that never starts it is a stopped rank; abort ends the test's job:
 * the aborting rank's thread and every rank's next test jump back to the rank's function. */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t changed;
    int64_t arrived, read;    /* starts and reads of every rank, since nb_reset */
    int64_t noted[MAX_RANKS]; /* the last seq each rank noted (-1: none) */
    int64_t polls[MAX_RANKS]; /* tests each rank made */
    int aborted, status;      /* abort was called (by rank aborted - 1), with status */
} nb = {.mu = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static _Thread_local struct {
    zoo_dist_op op;
    void *buf;
    size_t n;
    int64_t gen; /* collectives this rank has started, this one included */
    bool read;   /* this rank has read the others' buffers into out */
    char *out;   /* its result, until every rank has read (malloc'd) */
} my_req;
static _Thread_local jmp_buf *rank_jump; /* where this rank's thread ends its job */

/* Joins the group with nothing under way (my_req is this thread's, from an earlier group). */
static inline int nb_init(void **ctx, int *rank, int *size, int *local) {
    free(my_req.out);
    memset(&my_req, 0, sizeof my_req);
    return t_init(ctx, rank, size, local);
}

static inline size_t nb_out_bytes(zoo_dist_op op, size_t n) {
    switch (op) {
    case ZOO_DIST_SUM_F32:
    case ZOO_DIST_MAX_I32: return 4 * n;
    case ZOO_DIST_SUM_F64: return 8 * n;
    case ZOO_DIST_BCAST: return n;
    case ZOO_DIST_ALLGATHER: return (size_t)grp.size * n;
    }
    return 0;
}

static inline void nb_reset(void) {
    nb.arrived = nb.read = 0;
    nb.aborted = nb.status = 0;
    for (int r = 0; r < MAX_RANKS; r++) nb.noted[r] = -1, nb.polls[r] = 0;
}

static inline int nb_start(void *ctx, zoo_dist_op op, const void *mine, void *buf, size_t n,
                           void **req) {
    (void)ctx;
    free(my_req.out);
    if (!(my_req.out = malloc(nb_out_bytes(op, n) + 1))) return ag_error("out of memory");
    pthread_mutex_lock(&nb.mu);
    my_req.op = op, my_req.buf = buf, my_req.n = n, my_req.read = false;
    grp.slot[my_rank] = op == ZOO_DIST_ALLGATHER ? mine : buf;
    my_req.gen++;
    nb.arrived++;
    pthread_cond_broadcast(&nb.changed);
    pthread_mutex_unlock(&nb.mu);
    *req = &my_req;
    return 0;
}

/* The result of my_req from every rank's slot, in rank order. */
static inline void nb_compute(void) {
    size_t n = my_req.n;
    for (int r = 0; r < grp.size; r++) {
        const void *s = grp.slot[r];
        for (size_t i = 0; i < n; i++) {
            switch (my_req.op) {
            case ZOO_DIST_SUM_F32:
                ((float *)my_req.out)[i] =
                    r ? ((float *)my_req.out)[i] + ((const float *)s)[i] : ((const float *)s)[i];
                break;
            case ZOO_DIST_SUM_F64:
                ((double *)my_req.out)[i] =
                    r ? ((double *)my_req.out)[i] + ((const double *)s)[i] : ((const double *)s)[i];
                break;
            case ZOO_DIST_MAX_I32: {
                int32_t *o = (int32_t *)my_req.out, v = ((const int32_t *)s)[i];
                o[i] = r && o[i] > v ? o[i] : v;
                break;
            }
            case ZOO_DIST_BCAST:
                if (!r) my_req.out[i] = ((const char *)s)[i];
                break;
            case ZOO_DIST_ALLGATHER: my_req.out[(size_t)r * n + i] = ((const char *)s)[i]; break;
            }
        }
    }
}

static inline int nb_test(void *ctx, void *req, zoo_dist_state *state) {
    (void)ctx, (void)req;
    pthread_mutex_lock(&nb.mu);
    if (nb.aborted) { /* the job was ended by another rank: this one is gone too */
        pthread_mutex_unlock(&nb.mu);
        longjmp(*rank_jump, 2);
    }
    nb.polls[my_rank]++;
    pthread_cond_broadcast(&nb.changed);
    int64_t all = grp.size * my_req.gen;
    *state = ZOO_DIST_WAITING;
    if (nb.arrived >= all) {
        if (!my_req.read) {
            nb_compute();
            my_req.read = true;
            nb.read++;
        }
        *state = nb.read >= all ? ZOO_DIST_DONE : ZOO_DIST_MOVING;
    }
    pthread_mutex_unlock(&nb.mu);
    if (*state == ZOO_DIST_DONE) {
        memcpy(my_req.buf, my_req.out, nb_out_bytes(my_req.op, my_req.n));
        free(my_req.out);
        my_req.out = NULL;
    }
    return 0;
}

static inline int nb_note(void *ctx, int64_t seq) {
    (void)ctx;
    pthread_mutex_lock(&nb.mu);
    nb.noted[my_rank] = seq;
    pthread_mutex_unlock(&nb.mu);
    return 0;
}

static inline int nb_heard(void *ctx, int64_t *heard) {
    (void)ctx;
    pthread_mutex_lock(&nb.mu);
    for (int r = 0; r < grp.size; r++)
        if (r != my_rank) heard[r] = nb.noted[r];
    pthread_mutex_unlock(&nb.mu);
    return 0;
}

static inline void nb_abort(void *ctx, int status) {
    (void)ctx;
    pthread_mutex_lock(&nb.mu);
    if (!nb.aborted) nb.aborted = 1 + my_rank, nb.status = status;
    pthread_cond_broadcast(&nb.changed);
    pthread_mutex_unlock(&nb.mu);
    longjmp(*rank_jump, 1);
}

static const zoo_dist_transport polled __attribute__((unused)) = {
    .name = "threads, polled",
    .init = nb_init,
    .sum_f32 = t_sum_f32,
    .sum_f64 = t_sum_f64,
    .max_i32 = t_max_i32,
    .bcast = t_bcast,
    .allgather = t_allgather,
    .abort = nb_abort,
    .finalize = t_finalize,
    .start = nb_start,
    .test = nb_test,
    .note = nb_note,
    .heard = nb_heard,
};

/* The same without note and heard: the ranks cannot tell who is late. */
static const zoo_dist_transport polled_mute __attribute__((unused)) = {
    .name = "threads, polled, no notes",
    .init = nb_init,
    .sum_f32 = t_sum_f32,
    .sum_f64 = t_sum_f64,
    .max_i32 = t_max_i32,
    .bcast = t_bcast,
    .allgather = t_allgather,
    .abort = nb_abort,
    .finalize = t_finalize,
    .start = nb_start,
    .test = nb_test,
};

/* Blocks the calling rank until abort was called (a stopped rank), or until rank 0 has polled
 * `polls` times (a late rank). */
static inline void nb_wait_for(int64_t polls) {
    pthread_mutex_lock(&nb.mu);
    while (!nb.aborted && (polls <= 0 || nb.polls[0] < polls))
        pthread_cond_wait(&nb.changed, &nb.mu);
    pthread_mutex_unlock(&nb.mu);
}

/* Runs fn(rank, arg) on `size` threads, one per rank: rank 0 on the calling thread, the others
 * on threads started once and kept for the whole program (a thread that computes keeps a scratch
 * buffer of the engine until it ends, and these never end). */
typedef void (*rank_fn)(int rank, void *arg);

static struct {
    pthread_t th[MAX_RANKS];
    pthread_barrier_t start, done;
    int size;
    rank_fn fn;
    void *arg;
} pool;

static inline void *rank_main(void *p) {
    my_rank = (int)(intptr_t)p;
    for (;;) {
        pthread_barrier_wait(&pool.start);
        if (my_rank < pool.size) pool.fn(my_rank, pool.arg);
        pthread_barrier_wait(&pool.done);
    }
    return NULL;
}

static inline void run_group(int size, rank_fn fn, void *arg) {
    if (!pool.th[1]) {
        pthread_barrier_init(&pool.start, NULL, MAX_RANKS);
        pthread_barrier_init(&pool.done, NULL, MAX_RANKS);
        for (int r = 1; r < MAX_RANKS; r++)
            pthread_create(&pool.th[r], NULL, rank_main, (void *)(intptr_t)r);
    }
    grp.size = pool.size = size;
    pool.fn = fn;
    pool.arg = arg;
    pthread_barrier_init(&grp.bar, NULL, (unsigned)size);
    pthread_barrier_wait(&pool.start);
    my_rank = 0;
    fn(0, arg);
    pthread_barrier_wait(&pool.done);
    pthread_barrier_destroy(&grp.bar);
}

#endif
