/* test_dist.c -- the process group of data-parallel training (zoo/app/dist.h) and the trainer
 * spread over it, without MPI: transports over threads of this process, one thread per rank
 * (tests/zoo/dist_threads.h), so that every build runs it. The same code runs over Open MPI in
 * the programs (ctest e2e_mpi); the deadline of the collectives: test_dist_deadline.c.
 *
 * What it checks: the collectives (sums, maximum, rank 0's broadcast decision), the start check
 * (equal runs agree; a differing line is named once, on rank 0; a failed rank's status reaches
 * every rank), TG_DIST_CHECK catching a transport that gives ranks different bits, a group of
 * one, and the trainer: 2 ranks of 1 shard train the bits of 1 process with 2 shards; with no
 * learning (lr 0) 2 ranks of 2 shards and 3 ranks of 1 give the losses of 4 and 3 shards to the
 * bit and their gradient norms to rounding. Collectives started and polled (as over Open MPI)
 * give the blocking transport's bits, alone and in training. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tg_test.h"
#include "tests/zoo/dist_threads.h"
#include "tests/zoo/zoo_test.h"
#include "zoo/app/dist.h"
#include "zoo/app/trainer.h"
#include "zoo/models/transformer.h"

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

/* ---- the trainer over the group (the corpus of zoo_test.h) ---- */

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
    ds_fra *data = zt_corpus(7); /* uneven rows per shard, a short last batch */
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
    ds_fra *data = zt_corpus(7); /* uneven rows per shard, a short last batch */
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

/* Started and polled, the collectives and the trainer give the blocking transport's bits. */
static void test_polled_collectives_and_trainer(void) {
    use = &polled;
    nb_reset();
    test_collectives();
    nb_reset();
    test_trainer_parity();
    use = &threads;
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
    {"polled: the collectives' and the trainer's bits", test_polled_collectives_and_trainer},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"dist", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return tg_test_run(suites); }
