/* test_linear_ce.c -- the output layer with its cross-entropy over row chunks
 * (nn_linear_ce_forward) against its composite (nn_linear_forward + ag_cross_entropy + sum):
 * values and gradients over chunk sizes, label smoothing, weights with zeros, ignored labels,
 * leading dims and strided inputs; exact values of a small case; all rows skipped; evaluation
 * without a tape; the same bits for any number of threads; bad input. Built twice from this
 * file (CMakeLists.txt): against nn64 (float64, with the central-difference checks of both
 * forms, printed as a table for `ctest -L gradcheck`) and against nn (float32, the product). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/tg_test.h"

#ifdef TG_DOUBLE
#define TOL 1e-11
#else
#define TOL 2e-5
#endif


/* max |a - b| / max(1, |b|) */
static double rel_diff(const ag_real *a, const ag_real *b, ptrdiff_t n) {
    double m = 0;
    for (ptrdiff_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]) / fmax(1, fabs((double)b[i])));
    return m;
}

/* ---- one case: fused and composite on the same inputs ---- */

typedef struct lce_case {
    const char *name;
    int R, H, V;   /* rows, features, classes */
    int T;         /* > 0: x is (R / T, T, H) */
    bool bias;     /* the layer has a bias */
    bool strided;  /* x a transposed view of a (H, R) leaf */
    bool zero_w;   /* some weights 0 (NULL weights otherwise) */
    bool ignore;   /* some labels AG_IGNORE_INDEX */
    double eps;    /* label smoothing */
    int chunk;     /* chunk_rows */
    bool frozen_w; /* the weight requires no gradient */
} lce_case;

typedef struct lce_run {
    double loss;
    ag_real g[3][4096]; /* gradients of x, W, b */
} lce_run;

static lce_run run_a, run_b;

/* Builds the case's inputs from seed, runs the fused op (or the composite) with a backward
 * seeded by 1.5, and keeps the loss and the gradients. */
static int run_case(const lce_case *k, bool composite, lce_run *out) {
    ag_rng rng;
    ag_rng_seed(&rng, 77);
    /* strided: x is the transpose of a (H, R) leaf, or in (B, T, H) of a (T, B, H) leaf */
    ag_tensor *xl = !k->strided ? ag_leaf_new(AG_SHAPE(k->R, k->H), true)
                    : k->T > 0  ? ag_leaf_new(AG_SHAPE(k->T, k->R / k->T, k->H), true)
                                : ag_leaf_new(AG_SHAPE(k->H, k->R), true);
    ag_tensor *W = ag_leaf_new(AG_SHAPE(k->V, k->H), !k->frozen_w);
    ag_tensor *b = k->bias ? ag_leaf_new(AG_SHAPE(k->V), true) : NULL;
    for (ptrdiff_t i = 0; i < xl->numel; i++) xl->data[i] = (ag_real)ag_rng_normal(&rng);
    for (ptrdiff_t i = 0; i < W->numel; i++) W->data[i] = (ag_real)(0.5 * ag_rng_normal(&rng));
    if (b)
        for (ptrdiff_t i = 0; i < b->numel; i++) b->data[i] = (ag_real)ag_rng_normal(&rng);
    int32_t labels[512];
    ag_real w[512];
    for (int r = 0; r < k->R; r++) {
        labels[r] = (int32_t)(ag_rng_next(&rng) % (uint64_t)k->V);
        w[r] = (ag_real)(0.25 + ag_rng_uniform(&rng));
        if (k->zero_w && r % 3 == 1) w[r] = 0;
        if (k->ignore && r % 4 == 2) labels[r] = AG_IGNORE_INDEX;
    }
    nn_linear l = {.weight = W, .bias = b, .in = k->H, .out = k->V};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *x = k->strided ? ag_transpose(t, xl, 0, 1) : xl;
    if (k->T > 0 && !k->strided) x = ag_reshape(t, x, AG_SHAPE(k->R / k->T, k->T, k->H));
    ag_tensor *y = (composite ? nn_linear_ce_composite : nn_linear_ce_forward)(
        &l, &c, x, labels, k->zero_w ? w : NULL, k->eps, AG_IGNORE_INDEX, k->chunk);
    int rc = -1;
    if (y && y->ndim == 0 && y->numel == 1) {
        out->loss = y->data[0];
        const ag_real seed = 1.5;
        rc = ag_backward_seed(t, y, &seed);
        memset(out->g, 0, sizeof out->g);
        memcpy(out->g[0], xl->grad, sizeof(ag_real) * (size_t)xl->numel);
        if (!k->frozen_w) memcpy(out->g[1], W->grad, sizeof(ag_real) * (size_t)W->numel);
        if (b) memcpy(out->g[2], b->grad, sizeof(ag_real) * (size_t)b->numel);
    }
    ag_tape_free(t);
    ag_leaf_free(xl);
    ag_leaf_free(W);
    if (b) ag_leaf_free(b);
    return rc;
}

static const lce_case cases[] = {
    {"plain, one chunk", 6, 5, 7, 0, true, false, false, false, 0, 0, false},
    {"chunks of 1", 6, 5, 7, 0, true, false, false, false, 0, 1, false},
    {"chunks of 4 (a short last one), weights with zeros", 11, 5, 9, 0, true, false, true, false, 0,
     4, false},
    {"eps 0.1, ignored labels, no bias", 12, 4, 6, 0, false, false, false, true, 0.1, 5, false},
    {"(B, T, H), eps 0.3, weights with zeros, ignored labels", 12, 3, 8, 4, true, false, true, true,
     0.3, 5, false},
    {"strided x, chunks of 2", 7, 4, 5, 0, true, true, false, false, 0.2, 2, false},
    {"strided x in (B, T, H), frozen weight", 8, 3, 10, 2, true, true, true, false, 0, 3, true},
    {"eps 1", 5, 3, 4, 0, true, false, false, false, 1, 2, false},
    {"many rows, default chunk", 300, 8, 50, 0, true, false, true, true, 0.1, 0, false},
};

static void test_fused_matches_composite(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const lce_case *k = &cases[i];
        CU_ASSERT_EQUAL_FATAL(run_case(k, false, &run_a), 0);
        CU_ASSERT_EQUAL_FATAL(run_case(k, true, &run_b), 0);
        double dl = fabs(run_a.loss - run_b.loss) / fmax(1, fabs(run_b.loss));
        double dx = rel_diff(run_a.g[0], run_b.g[0], 4096);
        double dw = rel_diff(run_a.g[1], run_b.g[1], 4096);
        double db = rel_diff(run_a.g[2], run_b.g[2], 4096);
        if (dl > TOL || dx > TOL || dw > TOL || db > TOL)
            fprintf(stderr, "\n  %s: loss %g vs %g, diffs %g %g %g %g\n", k->name, run_a.loss,
                    run_b.loss, dl, dx, dw, db);
        CU_ASSERT_TRUE(dl <= TOL && dx <= TOL && dw <= TOL && db <= TOL);
        CU_ASSERT_TRUE(run_b.loss != 0);
    }
}

/* x = 0: the logits are the bias; with bias (0, 1, 2) and label 2, eps 0:
 * CE = log(1 + e + e^2) - 2; weights 0.5 and 2 on two identical rows; a third row ignored. */
static void test_exact_values(void) {
    ag_tensor *W = ag_leaf_new(AG_SHAPE(3, 2), true), *b = ag_leaf_new(AG_SHAPE(3), true);
    for (int i = 0; i < 6; i++) W->data[i] = (ag_real)(0.1 * i);
    for (int i = 0; i < 3; i++) b->data[i] = (ag_real)i;
    nn_linear l = {.weight = W, .bias = b, .in = 2, .out = 3};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(3, 2)); /* zeros */
    const int32_t labels[3] = {2, 2, 0};
    const ag_real w[3] = {0.5, 2, 0};
    ag_tensor *y = nn_linear_ce_forward(&l, &c, x, labels, w, 0, AG_IGNORE_INDEX, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    double ce = log(1 + exp(1.0) + exp(2.0)) - 2;
    CU_ASSERT_DOUBLE_EQUAL(y->data[0], 2.5 * ce, 1e-6);
    CU_ASSERT_EQUAL(ag_backward(t, y), 0);
    /* db = sum_r w_r (softmax - onehot): 2.5 (p0, p1, p2 - 1) */
    double s = 1 + exp(1.0) + exp(2.0);
    CU_ASSERT_DOUBLE_EQUAL(b->grad[0], 2.5 / s, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(b->grad[1], 2.5 * exp(1.0) / s, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(b->grad[2], 2.5 * (exp(2.0) / s - 1), 1e-6);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(W->grad[i], 0); /* x = 0 */
    /* eps 0.5: CE = lse - 0.5 z_k - 0.5 mean(z) = log(s) - 1 - 0.5 */
    ag_tensor *y2 = nn_linear_ce_forward(&l, &c, x, labels, NULL, 0.5, 0, 2); /* row 2 ignored */
    CU_ASSERT_DOUBLE_EQUAL(y2->data[0], 2 * (log(s) - 1.5), 1e-6);
    ag_tape_free(t);
    ag_leaf_free(W);
    ag_leaf_free(b);
}

/* The row's maximum found wherever it is (the first class, inside the 16-lane blocks, in the
 * tail after them), and the smoothing's mean over all 37 classes: x = 0, so the logits are the
 * bias, 0 but for 500 at class p; a missed maximum would overflow exp (e^500). */
static void test_row_max_anywhere(void) {
    enum { V = 37 };
    ag_tensor *W = ag_leaf_new(AG_SHAPE(V, 2), true), *b = ag_leaf_new(AG_SHAPE(V), true);
    nn_linear l = {.weight = W, .bias = b, .in = 2, .out = V};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    const int where[] = {0, 5, 16, 31, 32, 36};
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        const int p = where[i];
        ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 2)); /* zeros */
        for (int v = 0; v < V; v++) b->data[v] = v == p ? 500 : 0;
        const int32_t labels[2] = {p, (p + 1) % V}; /* CE ~ 0, CE ~ 500 */
        ag_tensor *y = nn_linear_ce_forward(&l, &c, x, labels, NULL, 0, AG_IGNORE_INDEX, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_DOUBLE_EQUAL(y->data[0], 500, 1e-3);
        /* eps 0.5 on label p: lse - 0.5 z_p - 0.5 mean(z) = 250 - 250 / 37 */
        ag_tensor *y2 = nn_linear_ce_forward(&l, &c, x, labels, NULL, 0.5, AG_IGNORE_INDEX, 2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
        CU_ASSERT_DOUBLE_EQUAL(y2->data[0], 250 - 250.0 / V + 500 - 0.5 * 500.0 / V, 1e-3);
        ag_tape_reset(t);
    }
    ag_tape_free(t);
    ag_leaf_free(W);
    ag_leaf_free(b);
}

/* Every row skipped (weights 0, or every label ignored): the loss is exactly 0 and so are the
 * gradients; a row of weight 0 with an infinite input still gives 0. */
static void test_all_rows_skipped(void) {
    ag_tensor *W = ag_leaf_new(AG_SHAPE(4, 3), true), *b = ag_leaf_new(AG_SHAPE(4), true);
    ag_tensor *x = ag_leaf_new(AG_SHAPE(2, 3), true);
    for (int i = 0; i < 12; i++) W->data[i] = (ag_real)(0.1 * i - 0.3);
    for (int i = 0; i < 6; i++) x->data[i] = (ag_real)(i - 2);
    x->data[0] = (ag_real)INFINITY;
    nn_linear l = {.weight = W, .bias = b, .in = 3, .out = 4};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    const int32_t labels[2] = {1, 3}, ignored[2] = {AG_IGNORE_INDEX, AG_IGNORE_INDEX};
    const ag_real zero[2] = {0, 0};
    ag_tensor *y1 = nn_linear_ce_forward(&l, &c, x, labels, zero, 0.1, AG_IGNORE_INDEX, 0);
    ag_tensor *y2 = nn_linear_ce_forward(&l, &c, x, ignored, NULL, 0, AG_IGNORE_INDEX, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    CU_ASSERT_EQUAL(y1->data[0], 0);
    CU_ASSERT_EQUAL(y2->data[0], 0);
    CU_ASSERT_EQUAL(ag_backward(t, ag_add(t, y1, y2)), 0);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(W->grad[i], 0);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(x->grad[i], 0);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(b->grad[i], 0);
    ag_tape_free(t);
    ag_leaf_free(W);
    ag_leaf_free(b);
    ag_leaf_free(x);
}

/* With the tape not recording: the same loss, no node, no gradient. */
static void test_eval_same_loss(void) {
    ag_rng rng;
    ag_rng_seed(&rng, 5);
    ag_tensor *W = ag_leaf_new(AG_SHAPE(40, 6), true), *x = ag_leaf_new(AG_SHAPE(30, 6), true);
    for (ptrdiff_t i = 0; i < W->numel; i++) W->data[i] = (ag_real)ag_rng_normal(&rng);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(&rng);
    int32_t labels[30];
    for (int r = 0; r < 30; r++) labels[r] = (r * 7) % 40;
    nn_linear l = {.weight = W, .in = 6, .out = 40};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *y = nn_linear_ce_forward(&l, &c, x, labels, NULL, 0.2, AG_IGNORE_INDEX, 7);
    nn_eval_saved e = nn_eval_begin(&c);
    size_t nodes = ag_tape_stats_get(t).nodes;
    ag_tensor *ye = nn_linear_ce_forward(&l, &c, x, labels, NULL, 0.2, AG_IGNORE_INDEX, 7);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).nodes, nodes);
    nn_eval_end(&c, e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ye);
    CU_ASSERT_FALSE(ye->requires_grad);
    CU_ASSERT_EQUAL(y->data[0], ye->data[0]);
    ag_tape_free(t);
    ag_leaf_free(W);
    ag_leaf_free(x);
}

/* Big enough for the products, the softmax rows and db's columns to be split between two
 * threads: the same bits on 1 and 2 threads, and run after run. */
static void test_threads_same_bits(void) {
    enum { R = 300, H = 24, V = 3000 };
    ag_rng rng;
    ag_rng_seed(&rng, 9);
    ag_tensor *W = ag_leaf_new(AG_SHAPE(V, H), true), *b = ag_leaf_new(AG_SHAPE(V), true);
    ag_tensor *x = ag_leaf_new(AG_SHAPE(R, H), true);
    for (ptrdiff_t i = 0; i < W->numel; i++) W->data[i] = (ag_real)(0.3 * ag_rng_normal(&rng));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(&rng);
    static int32_t labels[R];
    static ag_real w[R];
    for (int r = 0; r < R; r++) {
        labels[r] = (int32_t)(ag_rng_next(&rng) % V);
        w[r] = r % 5 == 4 ? 0 : (ag_real)0.1;
    }
    nn_linear l = {.weight = W, .bias = b, .in = H, .out = V};
    static ag_real g[3][2][V * H];
    double loss[3];
    for (int run = 0; run < 3; run++) {
        CU_ASSERT_EQUAL(ag_set_threads(run == 1 ? 2 : 1), 0);
        ag_tape *t = ag_tape_new();
        nn_ctx c = {.tape = t};
        ag_tensor *y = nn_linear_ce_forward(&l, &c, x, labels, w, 0.1, AG_IGNORE_INDEX, 128);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_EQUAL(ag_backward(t, y), 0);
        loss[run] = y->data[0];
        memcpy(g[run][0], W->grad, sizeof(ag_real) * V * H);
        memcpy(g[run][1], x->grad, sizeof(ag_real) * R * H);
        memset(W->grad, 0, sizeof(ag_real) * V * H);
        memset(x->grad, 0, sizeof(ag_real) * R * H);
        ag_tape_free(t);
    }
    ag_set_threads(1);
    CU_ASSERT_EQUAL(loss[0], loss[1]);
    CU_ASSERT_EQUAL(loss[0], loss[2]);
    for (int run = 1; run < 3; run++) {
        CU_ASSERT_EQUAL(memcmp(g[0][0], g[run][0], sizeof(ag_real) * V * H), 0);
        CU_ASSERT_EQUAL(memcmp(g[0][1], g[run][1], sizeof(ag_real) * R * H), 0);
    }
    ag_leaf_free(W);
    ag_leaf_free(b);
    ag_leaf_free(x);
}

static void test_bad_input(void) {
    ag_tensor *W = ag_leaf_new(AG_SHAPE(5, 3), true), *b = ag_leaf_new(AG_SHAPE(4), true);
    ag_tensor *x = ag_leaf_new(AG_SHAPE(2, 3), true), *x4 = ag_leaf_new(AG_SHAPE(2, 4), true);
    nn_linear l = {.weight = W, .in = 3, .out = 5},
              lb = {.weight = W, .bias = b, .in = 3, .out = 5};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    const int32_t ok[2] = {0, 4}, bad[2] = {1, 5}, neg[2] = {-1, 0};
    ag_set_error_handler(tg_capture, NULL);
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x4, ok, NULL, 0, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("linear_ce", "[2, 4]", "[5, 3]");
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&lb, &c, x, ok, NULL, 0, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("linear_ce: bias", "[4]", "[5, 3]");
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x, bad, NULL, 0, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("label 5 at position 1", "[0, 5)", "[2, 3]");
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x, neg, NULL, 0, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("label -1 at position 0", "[0, 5)");
    /* -1 as ignore_index: accepted */
    CU_ASSERT_PTR_NOT_NULL(nn_linear_ce_forward(&l, &c, x, neg, NULL, 0, -1, 0));
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x, NULL, NULL, 0, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("linear_ce: no labels", "[2, 3]");
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x, ok, NULL, -0.1, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("label_smoothing = -0.1", "[2, 3]");
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x, ok, NULL, 1.5, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("label_smoothing = 1.5");
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x, ok, NULL, NAN, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("label_smoothing = nan");
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, x, ok, NULL, 0, AG_IGNORE_INDEX, -2));
    TG_CAPTURED_HAS("chunk_rows = -2");
    nn_linear l1 = {.weight = b, .in = 3, .out = 4}; /* a 1-D weight */
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l1, &c, x, ok, NULL, 0, AG_IGNORE_INDEX, 0));
    TG_CAPTURED_HAS("linear_ce", "[2, 3]", "weight [4]");
    /* a NULL input: NULL, no second message */
    tg_n_captured = 0;
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(&l, &c, NULL, ok, NULL, 0, AG_IGNORE_INDEX, 0));
    CU_ASSERT_PTR_NULL(nn_linear_ce_forward(NULL, &c, x, ok, NULL, 0, AG_IGNORE_INDEX, 0));
    CU_ASSERT_EQUAL(tg_n_captured, 0);
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
    ag_leaf_free(W);
    ag_leaf_free(b);
    ag_leaf_free(x);
    ag_leaf_free(x4);
}

/* ---- central differences (float64) ---- */

#ifdef TG_DOUBLE
typedef struct gc_user {
    bool composite;
    const int32_t *labels;
    const ag_real *w;
    double eps;
    int chunk;
    bool twice;   /* x feeds two losses (different labels) on one tape */
    bool strided; /* x given transposed (H, R): read as its transpose */
} gc_user;

static ag_tensor *f_lce(ag_tape *t, ag_tensor *const *x, void *u) {
    const gc_user *g = u;
    nn_ctx c = {.tape = t};
    nn_linear l = {.weight = x[1], .bias = x[2], .in = x[1]->shape[1], .out = x[1]->shape[0]};
    ag_tensor *in = g->strided ? ag_transpose(t, x[0], 0, 1) : x[0];
    ag_tensor *y = (g->composite ? nn_linear_ce_composite : nn_linear_ce_forward)(
        &l, &c, in, g->labels, g->w, g->eps, AG_IGNORE_INDEX, g->chunk);
    if (!g->twice) return y;
    ag_tensor *y2 = (g->composite ? nn_linear_ce_composite : nn_linear_ce_forward)(
        &l, &c, in, g->labels + 1, NULL, g->eps, AG_IGNORE_INDEX, g->chunk);
    return ag_add(t, y, y2);
}

static void test_gradcheck(void) {
    static const int32_t labels[9] = {3, 0, AG_IGNORE_INDEX, 6, 2, 2, 5, 1, 4};
    static const ag_real w[8] = {0.5, 1.5, 1, 0, 2, 0.25, 1, 0.75};
    static const struct {
        const char *name;
        int R, H, V;
        gc_user u;
    } rows[] = {
        {"linear_ce, eps 0, chunks of 3", 8, 5, 7, {false, labels, NULL, 0, 3, false, false}},
        {"linear_ce, eps 0.2, weights with a 0, ignored label, chunks of 2",
         8,
         4,
         7,
         {false, labels, w, 0.2, 2, false, false}},
        {"linear_ce, strided x, eps 0.1, one chunk",
         7,
         3,
         7,
         {false, labels, w, 0.1, 0, false, true}},
        {"linear_ce, x in two losses, chunks of 5",
         8,
         4,
         7,
         {false, labels, NULL, 0.3, 5, true, false}},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        gc_user u = rows[i].u;
        int R = rows[i].R, H = rows[i].H, V = rows[i].V;
        const gc_shape in[3] = {
            u.strided ? (gc_shape){2, {H, R}} : (gc_shape){2, {R, H}}, {2, {V, H}}, {1, {V}}};
        gc_expect_variants(rows[i].name, f_lce, 3, in, 100 + i, &u, &u.composite);
    }
}
#endif

static CU_TestInfo tests[] = {
    {"fused equals composite: values and gradients", test_fused_matches_composite},
    {"exact values of a small case", test_exact_values},
    {"the row's maximum wherever it is; the smoothing's mean", test_row_max_anywhere},
    {"every row skipped: 0, no gradient", test_all_rows_skipped},
    {"evaluation: the same loss, nothing recorded", test_eval_same_loss},
    {"the same bits on 1 and 2 threads", test_threads_same_bits},
    {"bad input names the op and the shapes", test_bad_input},
#ifdef TG_DOUBLE
    {"fused and composite against central differences", test_gradcheck},
#endif
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("linear_ce", tests,
                   "nn: the output layer with its cross-entropy, fused and composite (float64, "
                   "tests/nn/test_linear_ce.c)");
}
