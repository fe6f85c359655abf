/* test_losses.c -- GELU and the losses against numbers computed from PyTorch's formulas (in
 * Python's math module, double precision), fused against composite, and the bad inputs
 * (float32 product; the gradients are checked in float64 by test_gradcheck.c). The elementwise
 * losses (L1, smooth L1, Huber, kl_div; gradients in test_gradcheck_toolkit.c) against values
 * worked by hand. */
#include "autograd/ag_op.h"
#include "tests/autograd/op_values.h"
#include "tests/tg_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void test_gelu(void) {
    ag_tape *t = ag_tape_new();
    const ag_real xs[7] = {-3, -1, -0.5, 0, 0.5, 1, 3};
    /* x * 0.5 * (1 + erf(x / sqrt 2)) */
    const double want[7] = {-0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0,
                            0.34573123063700656,  0.8413447460685429,   2.99595030590511};
    ag_tensor *y = ag_gelu(t, ag_tensor_from(t, AG_SHAPE(7), xs));
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (int i = 0; i < 7; i++) NEAR(y->data[i], want[i]);
    ag_tape_free(t);
}

static void test_mse(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(2, 3), (const ag_real[]){1, 2, 3, 4, 5, 6}, true);
    ag_tensor *y = leaf(AG_SHAPE(2, 3), (const ag_real[]){1.5, 2, 2, 4, 7, 6}, true);
    /* squares 0.25 0 1 0 4 0 */
    NEAR(ag_mse_loss(t, x, y, AG_REDUCE_SUM)->data[0], 5.25);
    ag_tensor *none = ag_mse_loss(t, x, y, AG_REDUCE_NONE);
    CU_ASSERT_EQUAL(none->ndim, 2);
    NEAR(none->data[4], 4);
    ag_tensor *l = ag_mse_loss(t, x, y, AG_REDUCE_MEAN);
    NEAR(l->data[0], 0.875);
    CU_ASSERT_EQUAL(l->ndim, 0);
    CU_ASSERT_EQUAL(ag_backward(t, l), 0);
    /* d/dx = 2 (x - y) / 6, d/dy = -d/dx: the target gets its gradient too */
    for (int i = 0; i < 6; i++) {
        NEAR(x->grad[i], 2 * (x->data[i] - y->data[i]) / 6);
        NEAR(y->grad[i], -2 * (x->data[i] - y->data[i]) / 6);
    }
    ag_tape_free(t);
    ag_leaf_free(x);
    ag_leaf_free(y);
}

static void test_bce_with_logits(void) {
    ag_tape *t = ag_tape_new();
    const ag_real xs[6] = {-2, -0.5, 0, 1.5, 30, -30}, ys[6] = {0, 1, 0.5, 1, 0, 1};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 3), xs),
              *y = ag_tensor_from(t, AG_SHAPE(2, 3), ys);
    /* max(x, 0) - x y + log1p(exp(-|x|)); |x| = 30 stays finite and exact */
    const double want[6] = {0.1269280110429725, 0.9740769841801067, 0.6931471805599453,
                            0.2014132779827524, 30.000000000000092, 30.000000000000092};
    ag_tensor *l = ag_bce_with_logits(t, x, y, NULL, AG_REDUCE_NONE);
    for (int i = 0; i < 6; i++) NEAR(l->data[i], want[i]);
    NEAR(ag_bce_with_logits(t, x, y, NULL, AG_REDUCE_MEAN)->data[0], 10.332594242294327);
    NEAR(ag_bce_with_logits(t, x, y, NULL, AG_REDUCE_SUM)->data[0], 61.99556545376596);
    /* pos_weight over the last axis: -(p y log sigmoid(x) + (1 - y) log sigmoid(-x)) */
    l = ag_bce_with_logits(t, x, y, (const ag_real[]){1, 2, 0.5}, AG_REDUCE_MEAN);
    NEAR(l->data[0], 7.966059273801005);
    ag_tape_free(t);
}

static void test_nll(void) {
    ag_tape *t = ag_tape_new();
    const ag_real lp[12] = {-1.2, -0.3, -2.5, -1.9, -0.7, -1.1, -1.4, -2.2, -3.0, -0.2, -1.6, -0.9};
    ag_tensor *x = leaf(AG_SHAPE(3, 4), lp, true);
    const int32_t labels[3] = {1, AG_IGNORE_INDEX, 3};
    const ag_real w[4] = {1, 2, 0.5, 3};
    /* PyTorch's weighted mean: (2 * 0.3 + 3 * 0.9) / (2 + 3) */
    ag_tensor *l = ag_nll_loss(t, x, labels, w, AG_IGNORE_INDEX, AG_REDUCE_MEAN);
    NEAR(l->data[0], 0.66);
    CU_ASSERT_EQUAL(ag_backward(t, l), 0);
    for (int i = 0; i < 12; i++) {
        double g = i == 1 ? -2.0 / 5 : i == 11 ? -3.0 / 5 : 0; /* -w[k] / D at the labels */
        NEAR(x->grad[i], g);
    }
    ag_tape_reset(t);
    /* NONE: per position, the ignored one 0; ignore_index may be a class */
    l = ag_nll_loss(t, x, (const int32_t[]){0, 2, 2}, NULL, 2, AG_REDUCE_NONE);
    CU_ASSERT_EQUAL(l->ndim, 1);
    CU_ASSERT_EQUAL(l->shape[0], 3);
    NEAR(l->data[0], 1.2);
    CU_ASSERT_EQUAL(l->data[1], 0);
    CU_ASSERT_EQUAL(l->data[2], 0);
    /* Every position ignored: mean is 0 / 0 = NaN, as PyTorch */
    l = ag_nll_loss(t, x, (const int32_t[]){2, 2, 2}, NULL, 2, AG_REDUCE_MEAN);
    CU_ASSERT_TRUE(isnan(l->data[0]));
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_cross_entropy(void) {
    ag_tape *t = ag_tape_new();
    const ag_real xs[6] = {1, 2, 3, 1, -1, 0.5};
    ag_tensor *x = leaf(AG_SHAPE(2, 3), xs, true);
    /* (1 - eps) nll + eps mean_c(-logp_c), eps = 0.1: PyTorch's label_smoothing */
    ag_tensor *l =
        ag_cross_entropy(t, x, (const int32_t[]){2, 0}, NULL, 0.1, AG_IGNORE_INDEX, AG_REDUCE_NONE);
    NEAR(l->data[0], 0.5076059644443804);
    NEAR(l->data[1], 0.638290252975324);
    l = ag_cross_entropy(t, x, (const int32_t[]){2, 0}, NULL, 0.1, AG_IGNORE_INDEX, AG_REDUCE_MEAN);
    NEAR(l->data[0], 0.5729481087098522);
    CU_ASSERT_EQUAL(ag_backward(t, l), 0);
    /* (softmax - (1 - eps) onehot - eps / C) / N */
    const double g[6] = {0.02834861991852355, 0.10569756886073216, -0.13404618877925578,
                         -0.1796181701828194, 0.02218112290761862, 0.15743704727520075};
    for (int i = 0; i < 6; i++) NEAR(x->grad[i], g[i]);
    ag_tape_reset(t);
    /* An ignored position counts in neither the sum nor the mean's denominator. */
    l = ag_cross_entropy(t, x, (const int32_t[]){2, AG_IGNORE_INDEX}, NULL, 0.1, AG_IGNORE_INDEX,
                         AG_REDUCE_MEAN);
    NEAR(l->data[0], 0.5076059644443804);
    /* Per-position weights: mean = sum w l / sum w. */
    l = ag_cross_entropy(t, x, (const int32_t[]){2, 0}, (const ag_real[]){3, 1}, 0.1,
                         AG_IGNORE_INDEX, AG_REDUCE_MEAN);
    NEAR(l->data[0], (3 * 0.5076059644443804 + 0.638290252975324) / 4);
    ag_tape_free(t);
    ag_leaf_free(x);
}

/* eps = 0: the fused kernel equals ag_softmax_ce and nll(log_softmax), on odd shapes. */
static void test_cross_entropy_vs_composite(void) {
    ag_tape *t = ag_tape_new();
    ag_rng rng;
    ag_rng_seed(&rng, 5);
    enum { R = 7, C = 300 }; /* C > one exp chunk */
    static ag_real xs[R * C];
    int32_t labels[R];
    for (int i = 0; i < R * C; i++) xs[i] = (ag_real)(3 * ag_rng_normal(&rng));
    for (int r = 0; r < R; r++) labels[r] = (int32_t)ag_rng_below(&rng, C);
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(R, C), xs);
    ag_tensor *a = ag_cross_entropy(t, x, labels, NULL, 0, AG_IGNORE_INDEX, AG_REDUCE_NONE);
    ag_tensor *b = ag_softmax_ce(t, x, labels, NULL);
    ag_tensor *c =
        ag_nll_loss(t, ag_log_softmax(t, x), labels, NULL, AG_IGNORE_INDEX, AG_REDUCE_NONE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    for (int r = 0; r < R; r++) {
        NEAR(a->data[r], b->data[r]);
        NEAR(a->data[r], c->data[r]);
    }
    /* smoothing eps: (1 - eps) nll + eps mean(-logp), composed from log_softmax and mean */
    ag_tensor *s = ag_cross_entropy(t, x, labels, NULL, 0.3, AG_IGNORE_INDEX, AG_REDUCE_SUM);
    ag_tensor *m = ag_mean(t, ag_neg(t, ag_log_softmax(t, x)), -1, false);
    double want = 0;
    for (int r = 0; r < R; r++) want += 0.7 * c->data[r] + 0.3 * m->data[r];
    CU_ASSERT_DOUBLE_EQUAL(s->data[0], want, 1e-4 * fabs(want));
    ag_tape_free(t);
}

static void test_bad_input(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 3)), *y = ag_tensor_new(t, AG_SHAPE(3, 2));
    CU_ASSERT_PTR_NULL(ag_mse_loss(t, x, y, AG_REDUCE_MEAN));
    TG_CAPTURED_HAS("mse_loss: input [2, 3] and target [3, 2] must have one shape");
    CU_ASSERT_PTR_NULL(ag_bce_with_logits(t, x, y, NULL, AG_REDUCE_SUM));
    TG_CAPTURED_HAS("bce_with_logits: input [2, 3] and target [3, 2]");
    CU_ASSERT_PTR_NULL(ag_mse_loss(t, x, x, (ag_reduction)7));
    TG_CAPTURED_HAS("mse_loss: reduction 7 is not");
    CU_ASSERT_PTR_NULL(
        ag_cross_entropy(t, x, (const int32_t[]){0, 3}, NULL, 0, AG_IGNORE_INDEX, AG_REDUCE_MEAN));
    TG_CAPTURED_HAS(
        "cross_entropy: label 3 at position 1 is outside [0, 3) (labels [2], logits [2, 3])");
    CU_ASSERT_PTR_NULL(
        ag_nll_loss(t, x, (const int32_t[]){-1, 0}, NULL, AG_IGNORE_INDEX, AG_REDUCE_SUM));
    TG_CAPTURED_HAS(
        "nll_loss: label -1 at position 0 is outside [0, 3) (labels [2], log-probabilities [2, "
        "3])");
    CU_ASSERT_PTR_NULL(ag_nll_loss(t, x, NULL, NULL, AG_IGNORE_INDEX, AG_REDUCE_SUM));
    TG_CAPTURED_HAS("nll_loss: no labels given for log-probabilities [2, 3]");
    CU_ASSERT_PTR_NULL(ag_cross_entropy(t, x, (const int32_t[]){0, 1}, NULL, 1.5, AG_IGNORE_INDEX,
                                        AG_REDUCE_MEAN));
    TG_CAPTURED_HAS("cross_entropy: label_smoothing = 1.5 for logits [2, 3], expected 0 to 1");
    ag_tensor *s = ag_tensor_new(t, 0, (const int[]){1});
    CU_ASSERT_PTR_NULL(
        ag_cross_entropy(t, s, (const int32_t[]){0}, NULL, 0, AG_IGNORE_INDEX, AG_REDUCE_MEAN));
    TG_CAPTURED_HAS("cross_entropy: logits must be (..., C) with C >= 1, got []");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* ---- elementwise losses (ops_loss_pointwise.c), values worked by hand ---- */

/* x - target = -0.5 0 1 0 -2 2.5: a zero difference, one on beta = 1 and one on 2 * 1 */
static const ag_real REG_X[6] = {1, 2, 3, 4, 5, 6}, REG_Y[6] = {1.5, 2, 2, 4, 7, 3.5};

static void test_l1(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(2, 3), REG_X, true), *y = leaf(AG_SHAPE(2, 3), REG_Y, true);
    ag_tensor *none = ag_l1_loss(t, x, y, AG_REDUCE_NONE);
    const double l[6] = {0.5, 0, 1, 0, 2, 2.5};
    CU_ASSERT_EQUAL(none->ndim, 2);
    for (int i = 0; i < 6; i++) NEAR(none->data[i], l[i]);
    NEAR(ag_l1_loss(t, x, y, AG_REDUCE_SUM)->data[0], 6);
    ag_tensor *m = ag_l1_loss(t, x, y, AG_REDUCE_MEAN);
    NEAR(m->data[0], 1);
    CU_ASSERT_EQUAL(ag_backward(t, m), 0);
    /* sgn(d) / 6; l1'(0) = 0 (PyTorch: (x - y).sgn()); the target gets the opposite */
    const double g[6] = {-1, 0, 1, 0, -1, 1};
    for (int i = 0; i < 6; i++) {
        NEAR(x->grad[i], g[i] / 6);
        NEAR(y->grad[i], -g[i] / 6);
    }
    ag_tape_free(t);
    ag_leaf_free(x);
    ag_leaf_free(y);
}

static void test_smooth_l1_huber(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(2, 3), REG_X, true), *y = ag_tensor_from(t, AG_SHAPE(2, 3), REG_Y);
    /* beta 1: 0.5 d^2 inside |d| < 1, |d| - 0.5 outside (|d| = 1 takes the outside form) */
    ag_tensor *l = ag_smooth_l1_loss(t, x, y, 1, AG_REDUCE_NONE);
    const double s1[6] = {0.125, 0, 0.5, 0, 1.5, 2};
    for (int i = 0; i < 6; i++) NEAR(l->data[i], s1[i]);
    ag_tensor *s = ag_smooth_l1_loss(t, x, y, 1, AG_REDUCE_SUM);
    NEAR(s->data[0], 4.125);
    CU_ASSERT_EQUAL(ag_backward(t, s), 0);
    /* PyTorch's smooth_l1_backward: d / beta inside, sgn(d) outside: d = 1 gives 1 either way */
    const double g1[6] = {-0.5, 0, 1, 0, -1, 1};
    for (int i = 0; i < 6; i++) NEAR(x->grad[i], g1[i]);
    ag_tape_reset(t);
    memset(x->grad, 0, 6 * sizeof *x->grad);
    y = ag_tensor_from(t, AG_SHAPE(2, 3), REG_Y);
    /* beta 2: d^2 / 4 inside, |d| - 1 outside; beta 0 is l1 (PyTorch falls back to l1_loss) */
    NEAR(ag_smooth_l1_loss(t, x, y, 2, AG_REDUCE_SUM)->data[0], 2.8125);
    NEAR(ag_smooth_l1_loss(t, x, y, 0, AG_REDUCE_MEAN)->data[0], 1);
    /* huber delta 1 equals smooth_l1 beta 1; delta 2: 0.5 d^2 inside, 2 (|d| - 1) outside */
    l = ag_huber_loss(t, x, y, 1, AG_REDUCE_NONE);
    for (int i = 0; i < 6; i++) NEAR(l->data[i], s1[i]);
    l = ag_huber_loss(t, x, y, 2, AG_REDUCE_NONE);
    const double h2[6] = {0.125, 0, 0.5, 0, 2, 3};
    for (int i = 0; i < 6; i++) NEAR(l->data[i], h2[i]);
    ag_tensor *h = ag_huber_loss(t, x, y, 2, AG_REDUCE_MEAN);
    NEAR(h->data[0], 5.625 / 6);
    CU_ASSERT_EQUAL(ag_backward(t, h), 0);
    /* huber_loss_backward: d inside, delta sgn(d) outside (d = -2: the join, -2 both ways) */
    const double gh[6] = {-0.5, 0, 1, 0, -2, 2};
    for (int i = 0; i < 6; i++) NEAR(x->grad[i], gh[i] / 6);
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_kl_div(void) {
    ag_tape *t = ag_tape_new();
    /* rows of distributions: p = (0.5, 0.5, 0) against q = (0.25, 0.25, 0.5): KL = ln 2 (the
     * 0 log 0 term is 0); p = q = (0.2, 0.3, 0.5): KL = 0 */
    ag_tensor *p = leaf(AG_SHAPE(2, 3), (const ag_real[]){0.5, 0.5, 0, 0.2, 0.3, 0.5}, true);
    ag_tensor *q = leaf(AG_SHAPE(2, 3), (const ag_real[]){0.25, 0.25, 0.5, 0.2, 0.3, 0.5}, true);
    ag_tensor *lq = ag_log(t, q);
    ag_tensor *l = ag_kl_div(t, lq, p, AG_REDUCE_NONE, false);
    const double ln2 = 0.6931471805599453;
    const double per[6] = {ln2 / 2, ln2 / 2, 0, 0, 0, 0};
    for (int i = 0; i < 6; i++) NEAR(l->data[i], per[i]);
    NEAR(ag_kl_div(t, lq, p, AG_REDUCE_SUM, false)->data[0], ln2);
    NEAR(ag_kl_div(t, lq, p, AG_REDUCE_MEAN, false)->data[0], ln2 / 6); /* PyTorch's 'mean' */
    ag_tensor *b = ag_kl_div(t, lq, p, AG_REDUCE_BATCHMEAN, false);
    NEAR(b->data[0], ln2 / 2); /* the KL per row: over the batch size 2 */
    CU_ASSERT_EQUAL(ag_backward(t, b), 0);
    /* d/dinput = -p / 2, through log: -p / (2 q); d/dtarget = (log p + 1 - log q) / 2, 0 where
     * p = 0 (PyTorch's kl_div_target_backward mask) */
    const double gq[6] = {-1, -1, 0, -0.5, -0.5, -0.5};
    for (int i = 0; i < 6; i++) NEAR(q->grad[i], gq[i]);
    const double gp[6] = {1.6931471805599454 / 2, 1.6931471805599454 / 2, 0, 0.5, 0.5, 0.5};
    for (int i = 0; i < 6; i++) NEAR(p->grad[i], gp[i]);
    ag_tape_free(t);
    ag_leaf_free(p);
    ag_leaf_free(q);
}

static void test_kl_div_log_target(void) {
    ag_tape *t = ag_tape_new();
    /* p = (0.5, 0.25, 0.25), q = (0.25, 0.5, 0.25): KL = 0.5 ln 2 - 0.25 ln 2 = 0.25 ln 2 */
    ag_tensor *p = leaf(AG_SHAPE(1, 3), (const ag_real[]){0.5, 0.25, 0.25}, true);
    ag_tensor *q = ag_tensor_from(t, AG_SHAPE(1, 3), (const ag_real[]){0.25, 0.5, 0.25});
    ag_tensor *l = ag_kl_div(t, ag_log(t, q), ag_log(t, p), AG_REDUCE_BATCHMEAN, true);
    NEAR(l->data[0], 0.17328679513998632);
    /* the same as with probabilities */
    NEAR(ag_kl_div(t, ag_log(t, q), p, AG_REDUCE_BATCHMEAN, false)->data[0], 0.17328679513998632);
    CU_ASSERT_EQUAL(ag_backward(t, l), 0);
    /* d/d(log p) = p (log p - log q + 1), and through log: (log p - log q + 1) */
    const double g[3] = {1.6931471805599454, 0.30685281944005466, 1};
    for (int i = 0; i < 3; i++) NEAR(p->grad[i], g[i]);
    ag_tape_reset(t);
    /* a scalar: batchmean divides by 1 */
    ag_tensor *s = ag_tensor_from(t, 0, (const int[]){1}, (const ag_real[]){-1});
    ag_tensor *st = ag_tensor_from(t, 0, (const int[]){1}, (const ag_real[]){0.5});
    NEAR(ag_kl_div(t, s, st, AG_REDUCE_BATCHMEAN, false)->data[0], 0.5 * (-0.6931471805599453 + 1));
    ag_tape_free(t);
    ag_leaf_free(p);
}

static void test_bad_input_pointwise(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 3)), *y = ag_tensor_new(t, AG_SHAPE(3, 2));
    TG_EXPECT_NULL(ag_l1_loss(t, x, y, AG_REDUCE_MEAN),
                   "l1_loss: input [2, 3] and target [3, 2] must have one shape");
    TG_EXPECT_NULL(ag_kl_div(t, x, y, AG_REDUCE_BATCHMEAN, false), "kl_div: input [2, 3]");
    TG_EXPECT_NULL(ag_mse_loss(t, x, x, AG_REDUCE_BATCHMEAN),
                   "mse_loss: reduction AG_REDUCE_BATCHMEAN is kl_div's only");
    TG_EXPECT_NULL(ag_huber_loss(t, x, x, 1, (ag_reduction)9), "huber_loss: reduction 9 is not");
    TG_EXPECT_NULL(ag_smooth_l1_loss(t, x, x, -1, AG_REDUCE_SUM),
                   "smooth_l1_loss: beta = -1 for input [2, 3], expected finite and >= 0");
    TG_EXPECT_NULL(ag_huber_loss(t, x, x, 0, AG_REDUCE_SUM),
                   "huber_loss: delta = 0 for input [2, 3], expected finite and > 0");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static CU_TestInfo tests[] = {
    {"gelu, exact erf form", test_gelu},
    {"mse: reductions, the target's gradient", test_mse},
    {"bce with logits: stable form, pos_weight", test_bce_with_logits},
    {"nll: class weights, ignore_index, weighted mean", test_nll},
    {"cross-entropy with label smoothing", test_cross_entropy},
    {"cross-entropy against composites", test_cross_entropy_vs_composite},
    {"bad input names the op and the shapes", test_bad_input},
    {"l1: reductions, gradient 0 at d = 0", test_l1},
    {"smooth l1 and huber: the joins, beta 0", test_smooth_l1_huber},
    {"kl_div: 0 log 0, batchmean, the target's gradient", test_kl_div},
    {"kl_div with log targets, a scalar", test_kl_div_log_target},
    {"elementwise losses: bad input", test_bad_input_pointwise},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("losses", tests); }
