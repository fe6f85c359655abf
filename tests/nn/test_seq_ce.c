/* test_seq_ce.c -- d2l's masked sequence loss (nn/loss.h: nn_seq_ce_loss and its variants)
 * against the trainer's former composite, written out here from ag primitives (linear, masked
 * softmax_ce or cross_entropy, mean over T, scale to T_div, sum): the same bits below the
 * threshold, the same value and gradients up to rounding above it (the fused op, fewer nodes);
 * exact values with masks, lengths outside [0, T], T_div and label smoothing; bad input named
 * with its shapes. Built twice (CMakeLists.txt): against nn64 (float64, with the central
 * differences of the fused and the composite kernel, label gradcheck) and against nn (float32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/tg_test.h"

#ifdef TG_DOUBLE
#define TOL 1e-11
#else
#define TOL 2e-5
#endif


/* max |a - b| / max(1, max |b|) */
static double rel_diff(const ag_real *a, const ag_real *b, ptrdiff_t n) {
    double m = 0, s = 1;
    for (ptrdiff_t i = 0; i < n; i++) s = fmax(s, fabs((double)b[i]));
    for (ptrdiff_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m / s;
}

/* ---- one batch, three ways ---- */

typedef struct seq_batch {
    int B, T, H, V;
    ag_tensor *h, *W, *b; /* leaves: (B, T, H), (V, H), (V) */
    int32_t *tgt, *len;
} seq_batch;

static void batch_new(seq_batch *s, int B, int T, int H, int V, uint64_t seed) {
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    *s = (seq_batch){.B = B, .T = T, .H = H, .V = V};
    s->h = ag_leaf_new(AG_SHAPE(B, T, H), true);
    s->W = ag_leaf_new(AG_SHAPE(V, H), true);
    s->b = ag_leaf_new(AG_SHAPE(V), true);
    ag_tensor *xs[3] = {s->h, s->W, s->b};
    for (int k = 0; k < 3; k++)
        for (ptrdiff_t i = 0; i < xs[k]->numel; i++)
            xs[k]->data[i] = (ag_real)((k == 1 ? 0.5 : 1) * ag_rng_normal(&rng));
    s->tgt = malloc(sizeof *s->tgt * (size_t)B * T);
    s->len = malloc(sizeof *s->len * (size_t)B);
    for (int i = 0; i < B * T; i++) s->tgt[i] = (int32_t)(ag_rng_next(&rng) % (uint64_t)V);
    for (int b = 0; b < B; b++) s->len[b] = b == 0 ? T : b == 1 ? 0 : (b * 3) % (T + 1);
}

static void batch_free(seq_batch *s) {
    ag_leaf_free(s->h);
    ag_leaf_free(s->W);
    ag_leaf_free(s->b);
    free(s->tgt);
    free(s->len);
}

enum { OLD, NEW, FUSED, COMPOSITE };

/* The trainer's former composite (zoo_masked_ce_smoothed, scale, sum), from primitives. */
static ag_tensor *old_composite(ag_tape *t, const seq_batch *s, int T_div, double eps) {
    ag_tensor *z = ag_linear(t, s->h, s->W, s->b);
    ag_real *mask = ag_tape_alloc(t, sizeof *mask * (size_t)s->B * s->T);
    for (int b = 0; b < s->B; b++)
        for (int i = 0; i < s->T; i++) mask[b * s->T + i] = i < s->len[b] ? 1 : 0;
    ag_tensor *per =
        eps == 0 ? ag_softmax_ce(t, z, s->tgt, mask)
                 : ag_cross_entropy(t, z, s->tgt, mask, eps, AG_IGNORE_INDEX, AG_REDUCE_NONE);
    ag_tensor *l = ag_mean(t, per, 1, false);
    if (T_div != s->T) l = ag_scale(t, l, (double)s->T / T_div);
    return ag_sum(t, l, AG_ALL, false);
}

typedef struct seq_run {
    double loss;
    size_t nodes;
    ag_real *g; /* h, W, b gradients one after the other */
} seq_run;

static void run(const seq_batch *s, int how, int T_div, double eps, seq_run *out) {
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    nn_linear l = {.weight = s->W, .bias = s->b, .in = s->H, .out = s->V};
    ag_tensor *y = how == OLD   ? old_composite(t, s, T_div, eps)
                   : how == NEW ? nn_seq_ce_loss(&l, &c, s->h, s->tgt, s->len, T_div, eps)
                   : how == FUSED
                       ? nn_seq_ce_loss_fused(&l, &c, s->h, s->tgt, s->len, T_div, eps)
                       : nn_seq_ce_loss_composite(&l, &c, s->h, s->tgt, s->len, T_div, eps);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(y->numel, 1);
    out->loss = y->data[0];
    CU_ASSERT_EQUAL(ag_backward(t, y), 0);
    out->nodes = ag_tape_stats_get(t).nodes;
    ag_tensor *xs[3] = {s->h, s->W, s->b};
    ag_real *g = out->g;
    for (int k = 0; k < 3; k++) {
        memcpy(g, xs[k]->grad, sizeof *g * (size_t)xs[k]->numel);
        memset(xs[k]->grad, 0, sizeof *g * (size_t)xs[k]->numel);
        g += xs[k]->numel;
    }
    ag_tape_free(t);
}

static ptrdiff_t n_grads(const seq_batch *s) { return s->h->numel + s->W->numel + s->b->numel; }

/* Below the threshold nn_seq_ce_loss is the former composite to the bit, for eps 0 and 0.1,
 * T_div = T and 2 T; its explicit composite too. */
static void test_below_threshold_same_bits(void) {
    seq_batch s;
    batch_new(&s, 5, 6, 4, 9, 3);
    CU_ASSERT((double)s.B * s.T * s.V < NN_SEQ_CE_FUSED_MIN_LOGITS);
    const ptrdiff_t n = n_grads(&s);
    seq_run r[4];
    for (int k = 0; k < 4; k++) r[k].g = malloc(sizeof(ag_real) * (size_t)n);
    for (int e = 0; e < 2; e++)
        for (int d = 0; d < 2; d++) {
            const double eps = e ? 0.1 : 0;
            const int T_div = d ? 2 * s.T : s.T;
            for (int how = OLD; how <= COMPOSITE; how++) run(&s, how, T_div, eps, &r[how]);
            CU_ASSERT(r[OLD].loss > 0);
            CU_ASSERT_EQUAL(r[NEW].loss, r[OLD].loss);
            CU_ASSERT_EQUAL(r[COMPOSITE].loss, r[OLD].loss);
            CU_ASSERT_EQUAL(memcmp(r[NEW].g, r[OLD].g, sizeof(ag_real) * (size_t)n), 0);
            CU_ASSERT_EQUAL(memcmp(r[COMPOSITE].g, r[OLD].g, sizeof(ag_real) * (size_t)n), 0);
            /* the fused kernel: the same up to rounding, fewer nodes */
            CU_ASSERT(fabs(r[FUSED].loss - r[OLD].loss) <= TOL * fmax(1, r[OLD].loss));
            CU_ASSERT(rel_diff(r[FUSED].g, r[OLD].g, n) <= TOL);
            CU_ASSERT(r[FUSED].nodes < r[OLD].nodes);
        }
    for (int k = 0; k < 4; k++) free(r[k].g);
    batch_free(&s);
}

/* B T V = 2^20 exactly: nn_seq_ce_loss runs the fused op (its bits, fewer nodes), the same as
 * the former composite up to rounding; one class fewer (B T V just below): the composite's
 * bits. */
static void test_threshold(void) {
    for (int below = 0; below < 2; below++) {
        seq_batch s;
        batch_new(&s, 4, 8, 3, below ? 32767 : 32768, 5);
        CU_ASSERT_EQUAL((double)s.B * s.T * s.V >= NN_SEQ_CE_FUSED_MIN_LOGITS, !below);
        const ptrdiff_t n = n_grads(&s);
        seq_run r[4];
        const int hows[3] = {OLD, NEW, FUSED};
        for (int k = 0; k < 4; k++) r[k].g = malloc(sizeof(ag_real) * (size_t)n);
        for (int k = 0; k < 3; k++) run(&s, hows[k], s.T, 0.1, &r[hows[k]]);
        const int same = below ? OLD : FUSED;
        CU_ASSERT_EQUAL(r[NEW].loss, r[same].loss);
        CU_ASSERT_EQUAL(memcmp(r[NEW].g, r[same].g, sizeof(ag_real) * (size_t)n), 0);
        CU_ASSERT_EQUAL(r[NEW].nodes, r[same].nodes);
        CU_ASSERT(fabs(r[NEW].loss - r[OLD].loss) <= TOL * fmax(1, r[OLD].loss));
        CU_ASSERT(rel_diff(r[NEW].g, r[OLD].g, n) <= TOL);
        for (int k = 0; k < 4; k++) free(r[k].g);
        batch_free(&s);
    }
}

/* Logits (2, 3, 4): zeros but one 1 (row 0, t 0, class 0), so every CE is log 4 except that
 * position's. Per-sequence means over T = 3, masks from the lengths (a length above T counts
 * every position, a negative one none), the objective with T_div, label smoothing. */
static void test_masks_values(void) {
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *z = ag_tensor_new(t, AG_SHAPE(2, 3, 4));
    z->data[0] = 1;
    const int32_t tgt[6] = {0, 2, 3, 1, 1, 1}, len[2] = {2, 0};
    const double ce0 = log(exp(1.0) + 3) - 1, l4 = log(4.0);
    ag_tensor *l = nn_masked_ce(&c, z, tgt, len, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_EQUAL(l->ndim, 1);
    CU_ASSERT_EQUAL(l->shape[0], 2);
    CU_ASSERT_DOUBLE_EQUAL(l->data[0], (ce0 + l4) / 3, 1e-6);
    CU_ASSERT_EQUAL(l->data[1], 0);
    const int32_t wide[2] = {7, -2}; /* every position; none */
    l = nn_masked_ce(&c, z, tgt, wide, 0);
    CU_ASSERT_DOUBLE_EQUAL(l->data[0], (ce0 + 2 * l4) / 3, 1e-6);
    CU_ASSERT_EQUAL(l->data[1], 0);
    /* the objective: the sum, over T_div */
    ag_tensor *L = nn_seq_ce_loss_logits(&c, z, tgt, len, 3, 0);
    CU_ASSERT_DOUBLE_EQUAL(L->data[0], (ce0 + l4) / 3, 1e-6);
    L = nn_seq_ce_loss_logits(&c, z, tgt, len, 5, 0);
    CU_ASSERT_DOUBLE_EQUAL(L->data[0], (ce0 + l4) / 5, 1e-6);
    /* eps: CE = lse - (1 - eps) z_k - eps mean(z); position (0, 0) has lse = log(e + 3),
     * z_k = 1, mean 1/4; the others lse = log 4 and zeros */
    const double eps = 0.2, ce0s = log(exp(1.0) + 3) - (1 - eps) - eps / 4;
    L = nn_seq_ce_loss_logits(&c, z, tgt, len, 3, eps);
    CU_ASSERT_DOUBLE_EQUAL(L->data[0], (ce0s + l4) / 3, 1e-6);
    /* the class of the bumped logit is not the label: CE = lse - 0 - eps / 4 */
    const int32_t tgt2[6] = {1, 2, 3, 1, 1, 1};
    L = nn_seq_ce_loss_logits(&c, z, tgt2, len, 3, eps);
    CU_ASSERT_DOUBLE_EQUAL(L->data[0], (log(exp(1.0) + 3) - eps / 4 + l4) / 3, 1e-6);
    ag_tape_free(t);
    /* the same masks through features and the output layer, fused and composite */
    ag_tensor *W = ag_leaf_new(AG_SHAPE(4, 2), true), *h = ag_leaf_new(AG_SHAPE(2, 3, 2), true);
    nn_linear out = {.weight = W, .in = 2, .out = 4}; /* W = 0: logits 0, CE = log 4 */
    for (int how = 0; how < 3; how++) {
        t = ag_tape_new();
        c.tape = t;
        ag_tensor *y = (how == 0   ? nn_seq_ce_loss
                        : how == 1 ? nn_seq_ce_loss_fused
                                   : nn_seq_ce_loss_composite)(&out, &c, h, tgt, wide, 4, 0.3);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_DOUBLE_EQUAL(y->data[0], 3 * l4 / 4, 1e-6); /* row 0 only, over T_div 4 */
        ag_tape_free(t);
    }
    ag_leaf_free(W);
    ag_leaf_free(h);
}

static void test_bad_input(void) {
    ag_tensor *W = ag_leaf_new(AG_SHAPE(5, 3), true);
    nn_linear out = {.weight = W, .in = 3, .out = 5};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *h = ag_tensor_new(t, AG_SHAPE(2, 2, 3)), *h2 = ag_tensor_new(t, AG_SHAPE(4, 3)),
              *h4 = ag_tensor_new(t, AG_SHAPE(2, 2, 4)), *z = ag_tensor_new(t, AG_SHAPE(2, 2, 5));
    const int32_t tgt[4] = {0, 4, 1, 2}, bad[4] = {0, 9, 1, 2}, len[2] = {2, 1};
    ag_tensor *(*const kernels[3])(const nn_linear *, const nn_ctx *, ag_tensor *, const int32_t *,
                                   const int32_t *, int, double) = {
        nn_seq_ce_loss, nn_seq_ce_loss_fused, nn_seq_ce_loss_composite};
    ag_set_error_handler(tg_capture, NULL);
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h2, tgt, len, 2, 0));
        TG_CAPTURED_HAS("seq_ce_loss: features [4, 3] are not 3-D");
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h4, tgt, len, 2, 0));
        TG_CAPTURED_HAS("seq_ce_loss: features [2, 2, 4] do not fit", "(B, T, 3)");
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h, NULL, len, 2, 0));
        TG_CAPTURED_HAS("no targets given", "[2, 2, 3]");
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h, tgt, NULL, 2, 0));
        TG_CAPTURED_HAS("no target lengths given", "[2, 2, 3]");
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h, tgt, len, 0, 0));
        TG_CAPTURED_HAS("T_div = 0", "[2, 2, 3]");
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h, tgt, len, 2, 1.5));
        TG_CAPTURED_HAS("label_smoothing = 1.5");
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h, tgt, len, 2, NAN));
        TG_CAPTURED_HAS("label_smoothing = nan");
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, h, bad, len, 2, 0.1));
        TG_CAPTURED_HAS("label 9 at position 1", "[0, 5)");
        /* a NULL input: NULL, no message */
        tg_n_captured = 0;
        CU_ASSERT_PTR_NULL(kernels[k](&out, &c, NULL, tgt, len, 2, 0));
        CU_ASSERT_PTR_NULL(kernels[k](NULL, &c, h, tgt, len, 2, 0));
        CU_ASSERT_EQUAL(tg_n_captured, 0);
    }
    CU_ASSERT_PTR_NULL(nn_seq_ce_loss_logits(&c, h2, tgt, len, 2, 0));
    TG_CAPTURED_HAS("seq_ce_loss: logits [4, 3] are not 3-D (B, T, V)");
    CU_ASSERT_PTR_NULL(nn_seq_ce_loss_logits(&c, z, tgt, len, -1, 0));
    TG_CAPTURED_HAS("T_div = -1", "logits [2, 2, 5]");
    CU_ASSERT_PTR_NULL(nn_masked_ce(&c, h2, tgt, len, 0));
    TG_CAPTURED_HAS("masked_ce: logits [4, 3] are not 3-D");
    CU_ASSERT_PTR_NULL(nn_masked_ce(&c, z, tgt, NULL, 0));
    TG_CAPTURED_HAS("masked_ce: no target lengths given for logits [2, 2, 5]");
    CU_ASSERT_PTR_NULL(nn_masked_ce(&c, z, tgt, len, -0.5));
    TG_CAPTURED_HAS("cross_entropy: label_smoothing = -0.5 for logits [2, 2, 5]");
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
    ag_leaf_free(W);
}

/* ---- central differences (float64) ---- */

#ifdef TG_DOUBLE
typedef struct gc_user {
    bool composite;
    double eps;
    int T_div;
} gc_user;

static const int32_t GC_TGT[12] = {3, 0, 6, 2, 2, 5, 1, 4, 0, 6, 3, 1}, GC_LEN[3] = {4, 1, 0};

static ag_tensor *f_seq(ag_tape *t, ag_tensor *const *x, void *u) {
    const gc_user *g = u;
    nn_ctx c = {.tape = t};
    nn_linear l = {.weight = x[1], .bias = x[2], .in = x[1]->shape[1], .out = x[1]->shape[0]};
    return (g->composite ? nn_seq_ce_loss_composite
                         : nn_seq_ce_loss_fused)(&l, &c, x[0], GC_TGT, GC_LEN, g->T_div, g->eps);
}

static void test_gradcheck(void) {
    static const struct {
        const char *name;
        gc_user u;
    } rows[] = {
        {"seq_ce_loss, lengths 4, 1, 0, T_div = T", {false, 0, 4}},
        {"seq_ce_loss, eps 0.1, T_div = 2 T", {false, 0.1, 8}},
    };
    static const gc_shape in[3] = {{3, {3, 4, 5}}, {2, {7, 5}}, {1, {7}}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        gc_user u = rows[i].u;
        gc_expect_variants(rows[i].name, f_seq, 3, in, 200 + i, &u, &u.composite);
    }
}
#endif

static CU_TestInfo tests[] = {
    {"below the threshold: the former composite's bits", test_below_threshold_same_bits},
    {"at the threshold: fused; one class fewer: composite", test_threshold},
    {"masks, lengths, T_div, label smoothing: exact values", test_masks_values},
    {"bad input names the op and the shapes", test_bad_input},
#ifdef TG_DOUBLE
    {"fused and composite against central differences", test_gradcheck},
#endif
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("seq_ce", tests,
                   "nn: d2l's masked sequence loss, fused and composite (float64, "
                   "tests/nn/test_seq_ce.c)");
}
