/* test_dist.c -- the process group of data-parallel training (zoo/app/dist.h) and the trainer
 * spread over it, without MPI: a transport over threads of this process, one thread per rank
 * (sums in rank order, through shared memory and a barrier), so that every build runs it. The
 * same code runs over Open MPI in the programs (ctest e2e_mpi).
 *
 * What it checks: the collectives (sums, maximum, rank 0's broadcast decision), the start check
 * (equal runs agree; a differing line is named once, on rank 0; a failed rank's status reaches
 * every rank), TG_DIST_CHECK catching a transport that gives ranks different bits, a group of
 * one, and the trainer: 2 ranks of 1 shard train the bits of 1 process with 2 shards; with no
 * learning (lr 0) 2 ranks of 2 shards and 3 ranks of 1 give the losses of 4 and 3 shards to the
 * bit and their gradient norms to rounding.
 *
 * The deadline (zoo_dist_set_timeout), over a second transport whose collectives are started and
 * polled as Open MPI's are: a rank that never comes ends the job with one message, from the
 * lowest rank that waited, naming the ranks that did not say they waited; a late rank within
 * the deadline changes nothing (the same bits); polled collectives and training give the
 * blocking transport's bits. No assertion is on time: the deadlines are short, and the notes
 * have three quarters of theirs to arrive. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tg_test.h"
#include "zoo/app/dist.h"
#include "zoo/app/trainer.h"
#include "zoo/models/transformer.h"

/* ---- a transport over threads ---- */

enum { MAX_RANKS = 4 };

static struct {
    int size;
    pthread_barrier_t bar;
    const void *slot[MAX_RANKS]; /* each rank's buffer of the current collective */
    int lie_rank;                /* >= 0: this rank's sums come out wrong by one bit */
} grp = {.lie_rank = -1};

static _Thread_local int my_rank; /* set by the rank's thread before zoo_dist_open */

static int t_init(void **ctx, int *rank, int *size, int *local) {
    *ctx = NULL;
    *rank = my_rank;
    *size = *local = grp.size;
    return 1;
}

/* Every rank publishes buf, every rank computes the whole result from all, then writes it. */
#define T_REDUCE(name, type, init, op)                                                             \
    static int name(void *ctx, type *buf, size_t n) {                                              \
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

static int t_sum_f32(void *ctx, float *buf, size_t n) {
    int rc = t_sum_f32_exact(ctx, buf, n);
    if (my_rank == grp.lie_rank && n) { /* a broken transport: one rank's first element off */
        uint32_t u;
        memcpy(&u, buf, sizeof u);
        u ^= 1;
        memcpy(buf, &u, sizeof u);
    }
    return rc;
}

static int t_bcast(void *ctx, void *buf, size_t bytes) {
    (void)ctx;
    grp.slot[my_rank] = buf;
    pthread_barrier_wait(&grp.bar);
    if (my_rank) memcpy(buf, grp.slot[0], bytes);
    pthread_barrier_wait(&grp.bar);
    return 0;
}

static int t_allgather(void *ctx, const void *mine, void *all, size_t bytes) {
    (void)ctx;
    grp.slot[my_rank] = mine;
    pthread_barrier_wait(&grp.bar);
    for (int r = 0; r < grp.size; r++) memcpy((char *)all + (size_t)r * bytes, grp.slot[r], bytes);
    pthread_barrier_wait(&grp.bar);
    return 0;
}

static void t_abort(void *ctx, int status) {
    (void)ctx;
    fprintf(stderr, "test_dist: abort(%d) called\n", status);
    abort();
}

static void t_finalize(void *ctx) { (void)ctx; }

static const zoo_dist_transport threads = {
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
static int nb_init(void **ctx, int *rank, int *size, int *local) {
    free(my_req.out);
    memset(&my_req, 0, sizeof my_req);
    return t_init(ctx, rank, size, local);
}

static size_t nb_out_bytes(zoo_dist_op op, size_t n) {
    switch (op) {
    case ZOO_DIST_SUM_F32:
    case ZOO_DIST_MAX_I32: return 4 * n;
    case ZOO_DIST_SUM_F64: return 8 * n;
    case ZOO_DIST_BCAST: return n;
    case ZOO_DIST_ALLGATHER: return (size_t)grp.size * n;
    }
    return 0;
}

static void nb_reset(void) {
    nb.arrived = nb.read = 0;
    nb.aborted = nb.status = 0;
    for (int r = 0; r < MAX_RANKS; r++) nb.noted[r] = -1, nb.polls[r] = 0;
}

static int nb_start(void *ctx, zoo_dist_op op, const void *mine, void *buf, size_t n, void **req) {
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
static void nb_compute(void) {
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

static int nb_test(void *ctx, void *req, zoo_dist_state *state) {
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

static int nb_note(void *ctx, int64_t seq) {
    (void)ctx;
    pthread_mutex_lock(&nb.mu);
    nb.noted[my_rank] = seq;
    pthread_mutex_unlock(&nb.mu);
    return 0;
}

static int nb_heard(void *ctx, int64_t *heard) {
    (void)ctx;
    pthread_mutex_lock(&nb.mu);
    for (int r = 0; r < grp.size; r++)
        if (r != my_rank) heard[r] = nb.noted[r];
    pthread_mutex_unlock(&nb.mu);
    return 0;
}

static void nb_abort(void *ctx, int status) {
    (void)ctx;
    pthread_mutex_lock(&nb.mu);
    if (!nb.aborted) nb.aborted = 1 + my_rank, nb.status = status;
    pthread_cond_broadcast(&nb.changed);
    pthread_mutex_unlock(&nb.mu);
    longjmp(*rank_jump, 1);
}

static const zoo_dist_transport polled = {
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
static const zoo_dist_transport polled_mute = {
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
static void nb_wait_for(int64_t polls) {
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

static void *rank_main(void *p) {
    my_rank = (int)(intptr_t)p;
    for (;;) {
        pthread_barrier_wait(&pool.start);
        if (my_rank < pool.size) pool.fn(my_rank, pool.arg);
        pthread_barrier_wait(&pool.done);
    }
    return NULL;
}

static void run_group(int size, rank_fn fn, void *arg) {
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

/* What a rank thread found, checked by the main thread afterwards (CUnit asserts are not
 * thread-safe). */
typedef struct seen {
    int rc[MAX_RANKS], calls[MAX_RANKS];
    bool report[MAX_RANKS];
    double value[MAX_RANKS];
    char err[MAX_RANKS][512];
    float f[MAX_RANKS][3];
    double d[MAX_RANKS];
    int32_t flags[MAX_RANKS][2];
} seen;

/* ---- collectives ---- */

/* The transport of the tests that run over either (collectives, the trainer). */
static const zoo_dist_transport *use = &threads;

static void collectives(int r, void *arg) {
    seen *s = arg;
    zoo_dist *d = zoo_dist_open(use);
    if (!d) return;
    float f[3] = {0.1f * (float)(r + 1), 1e8f, -1.0f};
    double x = r + 0.25;
    int32_t flags[2] = {r == 2, 0};
    s->rc[r] = zoo_dist_sum(d, f, 3) | zoo_dist_sum_f64(d, &x, 1) | zoo_dist_max(d, flags, 2);
    memcpy(s->f[r], f, sizeof f);
    s->d[r] = x;
    memcpy(s->flags[r], flags, sizeof flags);
    s->calls[r] = zoo_dist_rank(d) * 10 + zoo_dist_size(d);
    zoo_dist_close(d);
}

static void test_collectives(void) {
    seen s = {0};
    run_group(3, collectives, &s);
    float want0 = (0.1f + 0.2f) + 0.3f, want1 = (1e8f + 1e8f) + 1e8f;
    for (int r = 0; r < 3; r++) {
        CU_ASSERT_EQUAL(s.rc[r], 0);
        CU_ASSERT_EQUAL(s.calls[r], r * 10 + 3);
        CU_ASSERT_EQUAL(s.f[r][0], want0); /* the sum in rank order, the same bits everywhere */
        CU_ASSERT_EQUAL(s.f[r][1], want1);
        CU_ASSERT_EQUAL(s.f[r][2], -3.0f);
        CU_ASSERT_EQUAL(s.d[r], 3.75);
        CU_ASSERT_EQUAL(s.flags[r][0], 1); /* rank 2's flag reaches every rank */
        CU_ASSERT_EQUAL(s.flags[r][1], 0);
    }
}

/* ---- rank 0 decides ---- */

static int decide(void *ctx, double *out) {
    int *calls = ctx;
    (*calls)++;
    *out = 42.5;
    return 0;
}
static int refuse(void *ctx, double *out) {
    (void)ctx;
    (void)out;
    return ag_error("validation: the data is gone");
}

static void on_root(int r, void *arg) {
    seen *s = arg;
    zoo_dist *d = zoo_dist_open(&threads);
    if (!d) return;
    double v = -1;
    s->rc[r] = zoo_dist_on_root(d, decide, &s->calls[r], &v);
    s->value[r] = v;
    double w = 7;
    s->rc[r] |= 2 * (zoo_dist_on_root(d, refuse, NULL, &w) != -1);
    snprintf(s->err[r], sizeof s->err[r], "%s", ag_last_error());
    s->value[r] += w == 7 ? 0 : 1000; /* a failure leaves the value alone */
    zoo_dist_close(d);
}

static void test_on_root(void) {
    seen s = {0};
    run_group(2, on_root, &s);
    for (int r = 0; r < 2; r++) {
        CU_ASSERT_EQUAL(s.rc[r], 0);
        CU_ASSERT_EQUAL(s.value[r], 42.5);
    }
    CU_ASSERT_EQUAL(s.calls[0], 1); /* ran on rank 0 only */
    CU_ASSERT_EQUAL(s.calls[1], 0);
    CU_ASSERT_STRING_EQUAL(s.err[0], "validation: the data is gone");
    CU_ASSERT_PTR_NOT_NULL(strstr(s.err[1], "rank 0 failed"));
}

/* ---- the start check ---- */

static const char *start_text[MAX_RANKS];
static int start_status[MAX_RANKS];

static void start(int r, void *arg) {
    seen *s = arg;
    zoo_dist *d = zoo_dist_open(&threads);
    if (!d) return;
    s->rc[r] = zoo_dist_check_start(d, start_status[r], start_text[r], &s->report[r]);
    snprintf(s->err[r], sizeof s->err[r], "%s", ag_last_error());
    s->calls[r] = zoo_dist_started(d);
    zoo_dist_close(d);
}

static void test_check_start(void) {
    const char *a = "model transformer\n--hiddens 32\n--seed 0\n";
    const char *b = "model transformer\n--hiddens 32\n--seed 1\n";
    seen s = {0};
    start_text[0] = start_text[1] = start_text[2] = a; /* the same run */
    start_status[0] = start_status[1] = start_status[2] = 0;
    run_group(3, start, &s);
    for (int r = 0; r < 3; r++) {
        CU_ASSERT_EQUAL(s.rc[r], 0);
        CU_ASSERT_FALSE(s.report[r]);
        CU_ASSERT_EQUAL(s.calls[r], 1);
    }
    memset(&s, 0, sizeof s); /* rank 2 differs: one message, on rank 0, naming the line */
    start_text[2] = b;
    run_group(3, start, &s);
    for (int r = 0; r < 3; r++) CU_ASSERT_EQUAL(s.rc[r], 2);
    CU_ASSERT_TRUE(s.report[0]);
    CU_ASSERT_FALSE(s.report[1]);
    CU_ASSERT_FALSE(s.report[2]);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.err[0], "the ranks disagree: rank 2 runs --seed 1, rank 0 "
                                            "--seed 0; every rank must run the same command"));
    memset(&s, 0, sizeof s); /* rank 1 failed before (its status), rank 2 differs: the status */
    start_text[1] = NULL;
    start_status[1] = 1;
    run_group(3, start, &s);
    for (int r = 0; r < 3; r++) {
        CU_ASSERT_EQUAL(s.rc[r], 1);
        CU_ASSERT_FALSE(s.report[r]);
    }
}

/* ---- TG_DIST_CHECK ---- */

static void checked_sum(int r, void *arg) {
    seen *s = arg;
    zoo_dist *d = zoo_dist_open(&threads);
    if (!d) return;
    float f[2] = {1, 2};
    s->rc[r] = zoo_dist_sum(d, f, 2);
    snprintf(s->err[r], sizeof s->err[r], "%s", ag_last_error());
    zoo_dist_close(d);
}

static void test_check_env(void) {
    setenv("TG_DIST_CHECK", "1", 1);
    seen s = {0};
    run_group(2, checked_sum, &s); /* an honest transport passes */
    CU_ASSERT_EQUAL(s.rc[0], 0);
    CU_ASSERT_EQUAL(s.rc[1], 0);
    memset(&s, 0, sizeof s);
    grp.lie_rank = 1; /* a transport that gives rank 1 other bits */
    run_group(2, checked_sum, &s);
    grp.lie_rank = -1;
    unsetenv("TG_DIST_CHECK");
    for (int r = 0; r < 2; r++) { /* every rank fails, together */
        CU_ASSERT_EQUAL(s.rc[r], -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(s.err[r], "the sum on rank 1 differs from rank 0's"));
    }
}

/* ---- a group of one ---- */

static int count(void *ctx, double *out) {
    (*(int *)ctx)++;
    *out = 3;
    return 0;
}

static void test_alone(void) {
    zoo_dist *d = zoo_dist_open(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(zoo_dist_rank(d), 0);
    CU_ASSERT_EQUAL(zoo_dist_size(d), 1);
    CU_ASSERT_STRING_EQUAL(zoo_dist_name(d), "none");
    ag_real x[2] = {1.5, -2};
    CU_ASSERT_EQUAL(zoo_dist_sum(d, x, 2), 0);
    CU_ASSERT_EQUAL(x[0], 1.5); /* unchanged */
    int calls = 0;
    double v = 0;
    CU_ASSERT_EQUAL(zoo_dist_on_root(d, count, &calls, &v), 0);
    CU_ASSERT_EQUAL(calls, 1);
    CU_ASSERT_EQUAL(v, 3);
    CU_ASSERT_EQUAL(zoo_dist_hold_output(d), 0); /* nothing to hold */
    bool report = true;
    CU_ASSERT_EQUAL(zoo_dist_check_start(d, 1, NULL, &report), 1);
    CU_ASSERT_FALSE(report);
    zoo_dist_abort(d, 1); /* alone: returns */
    tg_stream s;
    FILE *f = tg_stream_open(&s);
    zoo_dist_write_held(d, f);  /* nothing was held */
    zoo_dist_report(d, f, 1.0); /* TG_DIST_TIMING unset: nothing */
    CU_ASSERT_STRING_EQUAL(tg_stream_text(&s), "");
    tg_stream_close(&s);
    zoo_dist_close(d);
    CU_ASSERT_EQUAL(zoo_dist_size(NULL), 1); /* NULL is a group of one too */
    CU_ASSERT_EQUAL(zoo_dist_sum(NULL, x, 2), 0);
}

/* ---- the library prints nothing: reports go to the FILE* the program passes ---- */

static void test_output_goes_to_the_caller(void) {
    setenv("TG_DIST_TIMING", "1", 1);
    zoo_dist *d = zoo_dist_open(NULL);
    unsetenv("TG_DIST_TIMING");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    ag_real x[3] = {1, 2, 3};
    CU_ASSERT_EQUAL(zoo_dist_sum(d, x, 3), 0); /* alone: not a sum of the group, not counted */
    tg_fd_capture err;
    tg_fd_capture_begin(&err, STDERR_FILENO);
    bool report = true;
    CU_ASSERT_EQUAL(zoo_dist_check_start(d, 0, "model x\n", &report), 0);
    tg_stream s;
    FILE *f = tg_stream_open(&s);
    zoo_dist_write_held(d, f);
    zoo_dist_report(d, f, 2.0);
    char *said = tg_fd_capture_end(&err);
    CU_ASSERT_STRING_EQUAL(said, ""); /* nothing on stderr */
    TG_HAS(tg_stream_text(&s),
           "dist: 1 rank (none), 1 on this machine; 0 gradient sums of 0 values",
           "of 2.00 s of training");
    free(said);
    tg_stream_close(&s);
    zoo_dist_close(d);
}

/* ---- the trainer over the group ---- */

static const char CORPUS[] = "go .\tva !\n"
                             "hi .\tsalut .\n"
                             "run !\tcours !\n"
                             "i lost .\tj'ai perdu .\n"
                             "he's calm .\til est calme .\n"
                             "i'm home .\tje suis chez moi .\n"
                             "we won .\tnous avons gagne .\n"
                             "be nice .\tsois gentil .\n";

static ds_fra *load(void) {
    ds_fra_options o = ds_fra_defaults();
    o.min_freq = 1;
    o.batch_size = 7; /* uneven rows per shard, a short last batch */
    o.seed = 3;
    ds_fra *d = NULL;
    if (ds_fra_load_mem(CORPUS, sizeof CORPUS - 1, "corpus", &o, &d))
        fprintf(stderr, "%s\n", ag_last_error());
    return d;
}

typedef struct train_job {
    const ds_fra *data;
    double lr;
    int shards, epochs;
    ag_real *values[MAX_RANKS]; /* malloc'd copies of each rank's values at the end */
    size_t n;
    double loss[MAX_RANKS], norm[MAX_RANKS];
    char *text[MAX_RANKS];
    int rc[MAX_RANKS];
} train_job;

/* One trainer, alone (d NULL) or as a rank of d: `epochs` epochs of the corpus. */
static int train(train_job *j, zoo_dist *d, int r) {
    zoo_transformer_cfg h = zoo_transformer_default_cfg;
    h.hiddens = 16;
    h.ffn_hiddens = 32;
    h.heads = 2;
    h.layers = 1;
    h.dropout = 0.2;
    const ds_fra *data = j->data;
    zoo_model *m =
        zoo_model_new(&zoo_transformer_kind, &h, ds_vocab_size(ds_fra_vocab(data, DS_SRC)),
                      ds_vocab_size(ds_fra_vocab(data, DS_TGT)), 5);
    zoo_trainer *tr = m ? zoo_trainer_new(m, j->lr, 1.0, 6) : NULL;
    ds_batches *it = NULL;
    int rc = !tr || zoo_trainer_set_dist(tr, d) || zoo_trainer_set_shards(tr, j->shards) ||
             ds_batches_new(data, DS_TRAIN, true, &it);
    zoo_train_opts o = {.epochs = j->epochs};
    if (!rc) rc = zoo_train(tr, data, it, &o);
    if (!rc) {
        j->n = nn_params_flat_size(tr->model->ps);
        j->values[r] = malloc(sizeof(ag_real) * j->n);
        memcpy(j->values[r], nn_params_values(tr->model->ps), sizeof(ag_real) * j->n);
        j->loss[r] = tr->hist[tr->n_hist - 1].loss;
        j->norm[r] = optim_last_grad_norm(tr->opt);
        j->text[r] = zoo_dist_run_text(tr, data, NULL);
    }
    ds_batches_free(it);
    zoo_trainer_free(tr);
    return rc;
}

static void train_rank(int r, void *arg) {
    train_job *j = arg;
    zoo_dist *d = zoo_dist_open(use);
    j->rc[r] = d ? train(j, d, r) : -1;
    zoo_dist_close(d);
}

static void free_job(train_job *j) {
    for (int r = 0; r < MAX_RANKS; r++) {
        free(j->values[r]);
        free(j->text[r]);
    }
}

/* 2 ranks x 1 shard = 1 process x 2 shards, to the bit (dropout on, learning on). */
static void test_trainer_parity(void) {
    ds_fra *data = load();
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    train_job one = {.data = data, .lr = 0.01, .shards = 2, .epochs = 3};
    train_job two = {.data = data, .lr = 0.01, .shards = 1, .epochs = 3};
    CU_ASSERT_EQUAL(train(&one, NULL, 0), 0);
    run_group(2, train_rank, &two);
    CU_ASSERT_EQUAL(two.rc[0], 0);
    CU_ASSERT_EQUAL(two.rc[1], 0);
    CU_ASSERT_EQUAL_FATAL(one.n, two.n);
    for (int r = 0; r < 2; r++) {
        CU_ASSERT_EQUAL(memcmp(one.values[0], two.values[r], sizeof(ag_real) * one.n), 0);
        CU_ASSERT_EQUAL(one.loss[0], two.loss[r]);
        CU_ASSERT_EQUAL(one.norm[0], two.norm[r]);
    }
    /* the run's text: the same on both ranks and alone (global shards 2), a hash of the values */
    CU_ASSERT_STRING_EQUAL(one.text[0], two.text[0]);
    CU_ASSERT_STRING_EQUAL(two.text[0], two.text[1]);
    CU_ASSERT_PTR_NOT_NULL(strstr(one.text[0], "\nshards (all ranks) 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(one.text[0], "\n--seed 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(one.text[0], "model values (XXH3) "));
    free_job(&one);
    free_job(&two);
    ds_fra_free(data);
}

/* With lr = 0 the parameters stay put, so every step sees the same values: N ranks x S shards
 * and one process with N x S shards take the same rows and dropout draws, hence the same losses
 * to the bit (sums of a few floats in double are exact), and gradients summed in another order:
 * the same norm to float rounding. */
static void test_trainer_global_shards(void) {
    ds_fra *data = load();
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    static const int cases[][2] = {{2, 2}, {3, 1}}; /* ranks, shards each */
    for (int k = 0; k < 2; k++) {
        int ranks = cases[k][0], shards = cases[k][1];
        train_job one = {.data = data, .lr = 0, .shards = ranks * shards, .epochs = 2};
        train_job group = {.data = data, .lr = 0, .shards = shards, .epochs = 2};
        CU_ASSERT_EQUAL(train(&one, NULL, 0), 0);
        run_group(ranks, train_rank, &group);
        for (int r = 0; r < ranks; r++) {
            CU_ASSERT_EQUAL(group.rc[r], 0);
            CU_ASSERT_EQUAL(group.loss[r], one.loss[0]);
            CU_ASSERT_DOUBLE_EQUAL(group.norm[r], one.norm[0], 1e-5 * one.norm[0]);
            CU_ASSERT_EQUAL(group.norm[r], group.norm[0]); /* the ranks agree to the bit */
        }
        CU_ASSERT(one.norm[0] > 0);
        free_job(&one);
        free_job(&group);
    }
    ds_fra_free(data);
}

/* ---- the deadline (zoo_dist_set_timeout) ---- */

/* A group where rank `stopped` never comes (it waits until the job ends) and rank `late` comes
 * after rank 0 has polled 50 times; the others sum at once. */
typedef struct stop_case {
    const zoo_dist_transport *t;
    int size, stopped, late;
    double timeout;
    int rc[MAX_RANKS], end[MAX_RANKS]; /* end: 0 returned, 1 ended the job, 2 ended by another */
    float f[MAX_RANKS][2];
} stop_case;

static void stop_rank(int r, void *arg) {
    stop_case *c = arg;
    zoo_dist *d = zoo_dist_open(c->t);
    if (!d) return;
    zoo_dist_set_timeout(d, c->timeout);
    jmp_buf jump;
    rank_jump = &jump;
    int end = setjmp(jump);
    if (!end && r == c->stopped) {
        nb_wait_for(0);
    } else if (!end) {
        if (r == c->late) nb_wait_for(50);
        float f[2] = {0.1f * (float)(r + 1), 1e8f};
        c->rc[r] = zoo_dist_sum(d, f, 2);
        memcpy(c->f[r], f, sizeof f);
    }
    c->end[r] = end;
    free(my_req.out); /* a collective the job's end left under way */
    my_req.out = NULL;
    zoo_dist_close(d);
}

/* Runs the case with the error handler captured; returns the number of messages. */
static int run_stop_case(stop_case *c) {
    nb_reset();
    tg_n_captured = 0;
    tg_captured[0] = '\0';
    ag_set_error_handler(tg_capture, NULL);
    run_group(c->size, stop_rank, c);
    ag_set_error_handler(NULL, NULL);
    return tg_n_captured;
}

static void test_deadline_names_the_stopped_rank(void) {
    stop_case c = {.t = &polled, .size = 2, .stopped = 1, .late = -1, .timeout = 0.25};
    CU_ASSERT_EQUAL(run_stop_case(&c), 1); /* one message */
    TG_CAPTURED_HAS("rank 1 did not answer within 0.25 s (--dist-timeout): ending the job");
    CU_ASSERT_EQUAL(nb.aborted, 1); /* rank 0 ended the job, status 1 */
    CU_ASSERT_EQUAL(nb.status, 1);
    CU_ASSERT_EQUAL(c.end[0], 1);
}

/* 3 ranks, rank 2 stopped: ranks 0 and 1 wait; rank 0, the lowest, names rank 2 alone (rank 1
 * said it waited) and rank 1 stays silent. Rank 0 stopped: rank 1 names it. (The deadline is
 * long enough for the notes, sent after a quarter of it, to arrive on a loaded machine.) */
static void test_deadline_one_message_of_the_lowest_waiting_rank(void) {
    stop_case c = {.t = &polled, .size = 3, .stopped = 2, .late = -1, .timeout = 2};
    CU_ASSERT_EQUAL(run_stop_case(&c), 1);
    TG_CAPTURED_HAS("rank 2 did not answer within 2 s (--dist-timeout): ending the job");
    CU_ASSERT_EQUAL(nb.aborted, 1);
    CU_ASSERT_EQUAL(c.end[0], 1);
    CU_ASSERT_EQUAL(c.end[1], 2); /* ended by rank 0's abort, without a word */
    stop_case c0 = {.t = &polled, .size = 3, .stopped = 0, .late = -1, .timeout = 2};
    CU_ASSERT_EQUAL(run_stop_case(&c0), 1);
    TG_CAPTURED_HAS("rank 0 did not answer within 2 s (--dist-timeout): ending the job");
    CU_ASSERT_EQUAL(nb.aborted, 2); /* by rank 1 */
    CU_ASSERT_EQUAL(c0.end[2], 2);
}

/* A transport without notes: the message names the ranks that did answer (this one). */
static void test_deadline_without_notes(void) {
    stop_case c = {.t = &polled_mute, .size = 2, .stopped = 0, .late = -1, .timeout = 0.25};
    CU_ASSERT_EQUAL(run_stop_case(&c), 1);
    TG_CAPTURED_HAS("a rank did not answer within 0.25 s (--dist-timeout) (rank 1 did): ending "
                    "the job");
    CU_ASSERT_EQUAL(nb.aborted, 2);
}

/* A rank that comes late, while rank 0 polls (no deadline, or one far off): the sums of the
 * blocking transport, to the bit, and no end. */
static void test_late_rank_within_the_deadline(void) {
    for (int k = 0; k < 2; k++) {
        stop_case c = {.t = &polled, .size = 3, .stopped = -1, .late = 2, .timeout = k ? 600 : 0};
        CU_ASSERT_EQUAL(run_stop_case(&c), 0);
        CU_ASSERT_EQUAL(nb.aborted, 0);
        CU_ASSERT(nb.polls[0] >= 50);
        for (int r = 0; r < 3; r++) {
            CU_ASSERT_EQUAL(c.rc[r], 0);
            CU_ASSERT_EQUAL(c.end[r], 0);
            CU_ASSERT_EQUAL(c.f[r][0], (0.1f + 0.2f) + 0.3f);
            CU_ASSERT_EQUAL(c.f[r][1], (1e8f + 1e8f) + 1e8f);
        }
    }
}

/* Started and polled, the collectives and the trainer give the blocking transport's bits. */
static void test_polled_collectives_and_trainer(void) {
    use = &polled;
    nb_reset();
    test_collectives();
    nb_reset();
    test_trainer_parity();
    use = &threads;
}

static void test_set_timeout(void) {
    zoo_dist *d = zoo_dist_open(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    TG_OK(zoo_dist_set_timeout(d, 0));
    TG_OK(zoo_dist_set_timeout(d, 300));
    TG_EXPECT_ERROR(zoo_dist_set_timeout(d, -1), "dist: a deadline of -1 s");
    TG_EXPECT_ERROR(zoo_dist_set_timeout(d, NAN), "a deadline of");
    TG_OK(zoo_dist_set_timeout(NULL, 5));
    ag_real x[1] = {2}; /* alone: no wait at all */
    TG_OK(zoo_dist_sum(d, x, 1));
    zoo_dist_close(d);
}

static CU_TestInfo tests[] = {
    {"sums, maximum: every rank the same bits", test_collectives},
    {"rank 0 decides, every rank gets it (and its failure)", test_on_root},
    {"the start check: agree, disagree once, a failed rank", test_check_start},
    {"TG_DIST_CHECK catches ranks given different bits", test_check_env},
    {"a group of one", test_alone},
    {"reports go to the caller's FILE*, nothing to stderr", test_output_goes_to_the_caller},
    {"2 ranks x 1 shard: the bits of 1 process x 2 shards", test_trainer_parity},
    {"N ranks x S shards: the losses of N x S shards", test_trainer_global_shards},
    {"the deadline: one message names the stopped rank", test_deadline_names_the_stopped_rank},
    {"the deadline: the lowest waiting rank speaks, once",
     test_deadline_one_message_of_the_lowest_waiting_rank},
    {"the deadline without notes: names who answered", test_deadline_without_notes},
    {"a late rank within the deadline: the same bits", test_late_rank_within_the_deadline},
    {"polled: the collectives' and the trainer's bits", test_polled_collectives_and_trainer},
    {"zoo_dist_set_timeout: 0 or more", test_set_timeout},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"dist", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return tg_test_run(suites); }
