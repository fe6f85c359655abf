/* test_pointwise.c -- the pointwise ops of autograd/ops_pointwise.c (float32 product): values
 * against numbers worked by hand or computed from PyTorch's formulas with Python's math module
 * (double precision; each comment says which), the gradient PyTorch gives at each kink (with a
 * seed of ones: y.sum().backward()), broadcasting, NaN, and bad input. The gradients at random
 * points are checked in float64 by test_gradcheck_toolkit.c.
 */
#include "autograd/ag_op.h"
#include "tests/autograd/op_values.h"
#include "tests/tg_test.h"

#include <math.h>
#include <string.h>

static void test_abs_log1p_pow_scalar(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(5), (const ag_real[]){-2, -0.5, 0, 0.5, 3}, true);
    ag_tensor *y = ag_abs(t, x);
    const double want_abs[5] = {2, 0.5, 0, 0.5, 3};
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(y->data[i], want_abs[i]);
    backward_sum(t, y);
    /* sgn(x): PyTorch's abs'(0) = 0 */
    const double g_abs[5] = {-1, -1, 0, 1, 1};
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(x->grad[i], g_abs[i]);
    ag_tape_reset(t);
    memset(x->grad, 0, 5 * sizeof *x->grad);
    /* log1p: Python's math.log1p; gradient 1 / (1 + x) */
    y = ag_log1p(t, x);
    const double want_l1p[5] = {NAN, -0.6931471805599453, 0, 0.4054651081081644,
                                1.3862943611198906};
    CU_ASSERT_TRUE(isnan(y->data[0])); /* log1p(-2): NaN, as PyTorch */
    for (int i = 1; i < 5; i++) NEAR(y->data[i], want_l1p[i]);
    backward_sum(t, y);
    NEAR(x->grad[1], 2);
    NEAR(x->grad[2], 1);
    NEAR(x->grad[4], 0.25);
    ag_tape_reset(t);
    memset(x->grad, 0, 5 * sizeof *x->grad);
    /* x^3 and its gradient 3 x^2, by hand */
    y = ag_pow_scalar(t, x, 3);
    const double want_p3[5] = {-8, -0.125, 0, 0.125, 27}, g_p3[5] = {12, 0.75, 0, 0.75, 27};
    for (int i = 0; i < 5; i++) NEAR(y->data[i], want_p3[i]);
    backward_sum(t, y);
    for (int i = 0; i < 5; i++) NEAR(x->grad[i], g_p3[i]);
    ag_tape_reset(t);
    memset(x->grad, 0, 5 * sizeof *x->grad);
    /* x^0 = 1 everywhere, 0^0 included; the gradient is 0 (PyTorch masks exponent == 0) */
    y = ag_pow_scalar(t, x, 0);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(y->data[i], 1);
    backward_sum(t, y);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(x->grad[i], 0);
    ag_tape_reset(t);
    /* x^0.5 of squares, by hand */
    ag_tensor *q = ag_tensor_from(t, AG_SHAPE(4), (const ag_real[]){0.25, 1, 2.25, 4});
    y = ag_pow_scalar(t, q, 0.5);
    for (int i = 0; i < 4; i++) NEAR(y->data[i], 0.5 * (i + 1));
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_pow_tensor(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *a = leaf(AG_SHAPE(5), (const ag_real[]){2, 3, 0.5, 0, 0}, true);
    ag_tensor *b = leaf(AG_SHAPE(5), (const ag_real[]){3, 0.5, -1, 0, 2}, true);
    ag_tensor *y = ag_pow(t, a, b);
    /* 2^3, sqrt 3, 0.5^-1, 0^0 = 1, 0^2 */
    const double want[5] = {8, 1.7320508075688772, 2, 1, 0};
    for (int i = 0; i < 5; i++) NEAR(y->data[i], want[i]);
    backward_sum(t, y);
    /* da = b a^(b-1), 0 where b = 0;  db = a^b log a, 0 where a = 0 and b >= 0 (PyTorch's
     * pow_backward_self / pow_backward_exponent); values from Python's math */
    const double ga[5] = {12, 0.2886751345948129, -4, 0, 0};
    const double gb[5] = {5.545177444479562, 1.902852301792692, -1.3862943611198906, 0, 0};
    for (int i = 0; i < 5; i++) {
        NEAR(a->grad[i], ga[i]);
        NEAR(b->grad[i], gb[i]);
    }
    ag_tape_reset(t);
    /* broadcasting: (2, 1) ^ (3,) -> (2, 3) */
    ag_tensor *c = ag_tensor_from(t, AG_SHAPE(2, 1), (const ag_real[]){2, 3});
    ag_tensor *e = ag_tensor_from(t, AG_SHAPE(3), (const ag_real[]){0, 1, 2});
    y = ag_pow(t, c, e);
    CU_ASSERT_EQUAL(y->ndim, 2);
    CU_ASSERT_EQUAL(y->shape[1], 3);
    const double wb[6] = {1, 2, 4, 1, 3, 9};
    for (int i = 0; i < 6; i++) NEAR(y->data[i], wb[i]);
    ag_tape_free(t);
    ag_leaf_free(a);
    ag_leaf_free(b);
}

static void test_clamp(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(6), (const ag_real[]){-2, -0.5, 0, 0.5, 1, 3}, true);
    ag_tensor *y = ag_clamp(t, x, -0.5, 1);
    const double want[6] = {-0.5, -0.5, 0, 0.5, 1, 1};
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(y->data[i], want[i]);
    backward_sum(t, y);
    /* PyTorch's clamp_backward: the gradient passes where min <= x <= max, x = -0.5 and x = 1
     * (on the bounds) included */
    const double g[6] = {0, 1, 1, 1, 1, 0};
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(x->grad[i], g[i]);
    ag_tape_reset(t);
    memset(x->grad, 0, 6 * sizeof *x->grad);
    /* min > max: max everywhere, no gradient (torch.clamp(x, 2, 1)) */
    y = ag_clamp(t, x, 2, 1);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(y->data[i], 1);
    backward_sum(t, y);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(x->grad[i], 0);
    ag_tape_reset(t);
    /* one-sided, and NaN passes through */
    ag_tensor *n = ag_tensor_from(t, AG_SHAPE(3), (const ag_real[]){-3, NAN, 5});
    y = ag_clamp(t, n, -1, INFINITY);
    CU_ASSERT_EQUAL(y->data[0], -1);
    CU_ASSERT_TRUE(isnan(y->data[1]));
    CU_ASSERT_EQUAL(y->data[2], 5);
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_maximum_minimum(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *a = leaf(AG_SHAPE(4), (const ag_real[]){1, 2, 3, NAN}, true);
    ag_tensor *b = leaf(AG_SHAPE(4), (const ag_real[]){3, 2, 1, 0}, true);
    ag_tensor *y = ag_maximum(t, a, b);
    CU_ASSERT_EQUAL(y->data[0], 3);
    CU_ASSERT_EQUAL(y->data[1], 2);
    CU_ASSERT_EQUAL(y->data[2], 3);
    CU_ASSERT_TRUE(isnan(y->data[3])); /* NaN propagates, as torch.maximum */
    backward_sum(t, y);
    /* derivatives.yaml: where(a == b, g / 2, g) masked to 0 where a < b (b: where a > b); the
     * tie at index 1 gives each a half; NaN compares false both ways, so both get g there */
    const double ga[4] = {0, 0.5, 1, 1}, gb[4] = {1, 0.5, 0, 1};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(a->grad[i], ga[i]);
        CU_ASSERT_EQUAL(b->grad[i], gb[i]);
    }
    ag_tape_reset(t);
    memset(a->grad, 0, 4 * sizeof *a->grad);
    memset(b->grad, 0, 4 * sizeof *b->grad);
    y = ag_minimum(t, a, b);
    CU_ASSERT_EQUAL(y->data[0], 1);
    CU_ASSERT_EQUAL(y->data[2], 1);
    CU_ASSERT_TRUE(isnan(y->data[3]));
    backward_sum(t, y);
    const double ma[4] = {1, 0.5, 0, 1}, mb[4] = {0, 0.5, 1, 1};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(a->grad[i], ma[i]);
        CU_ASSERT_EQUAL(b->grad[i], mb[i]);
    }
    ag_tape_reset(t);
    /* broadcasting (2, 1) with (3,): b's gradient sums over the broadcast rows */
    ag_tensor *c = leaf(AG_SHAPE(2, 1), (const ag_real[]){1, 2}, true);
    ag_tensor *d = leaf(AG_SHAPE(3), (const ag_real[]){0, 1, 5}, true);
    y = ag_maximum(t, c, d);
    const double w[6] = {1, 1, 5, 2, 2, 5};
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(y->data[i], w[i]);
    backward_sum(t, y);
    /* row 0: c wins, ties with d[1], loses to d[2]: 1 + 0.5; row 1: c wins twice */
    CU_ASSERT_EQUAL(c->grad[0], 1.5);
    CU_ASSERT_EQUAL(c->grad[1], 2);
    CU_ASSERT_EQUAL(d->grad[0], 0);
    CU_ASSERT_EQUAL(d->grad[1], 0.5);
    CU_ASSERT_EQUAL(d->grad[2], 2);
    ag_tape_free(t);
    ag_leaf_free(a);
    ag_leaf_free(b);
    ag_leaf_free(c);
    ag_leaf_free(d);
}

static void test_where_masked_fill(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *a = leaf(AG_SHAPE(2, 3), (const ag_real[]){1, 2, 3, 4, 5, 6}, true);
    ag_tensor *b = leaf(AG_SHAPE(3), (const ag_real[]){10, 20, 30}, true);
    ag_tensor *cond = ag_tensor_from(t, AG_SHAPE(2, 1), (const ag_real[]){1, 0});
    ag_tensor *y = ag_where(t, cond, a, b);
    const double w[6] = {1, 2, 3, 10, 20, 30};
    CU_ASSERT_EQUAL(y->ndim, 2);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(y->data[i], w[i]);
    backward_sum(t, y);
    const double ga[6] = {1, 1, 1, 0, 0, 0};
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(a->grad[i], ga[i]);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(b->grad[i], 1); /* one row took b */
    ag_tape_reset(t);
    memset(a->grad, 0, 6 * sizeof *a->grad);
    /* masked_fill: a mask (3,) over x (2, 3); -inf as in an attention mask */
    ag_tensor *m = ag_tensor_from(t, AG_SHAPE(3), (const ag_real[]){0, 1, 0});
    y = ag_masked_fill(t, a, m, -INFINITY);
    const double wf[6] = {1, -INFINITY, 3, 4, -INFINITY, 6};
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(y->data[i], wf[i]);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_masked_fill(t, a, m, -7), AG_ALL, false)), 0);
    const double gf[6] = {1, 0, 1, 1, 0, 1};
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(a->grad[i], gf[i]);
    ag_tape_free(t);
    ag_leaf_free(a);
    ag_leaf_free(b);
}

static void test_activations(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(5), (const ag_real[]){-2, -0.5, 0, 1, 25}, true);
    /* softplus, beta 1, threshold 20: log1p(exp(x)), x itself above the threshold; gradient
     * sigmoid(x), 1 above (Python's math.log1p, math.exp) */
    ag_tensor *y = ag_softplus(t, x, 1, 20);
    const double sp[4] = {0.1269280110429725, 0.4740769841801067, 0.6931471805599453,
                          1.3132616875182228};
    for (int i = 0; i < 4; i++) NEAR(y->data[i], sp[i]);
    CU_ASSERT_EQUAL(y->data[4], 25);
    backward_sum(t, y);
    const double gsp[5] = {0.11920292202211755, 0.3775406687981454, 0.5, 0.7310585786300049, 1};
    for (int i = 0; i < 5; i++) NEAR(x->grad[i], gsp[i]);
    ag_tape_reset(t);
    memset(x->grad, 0, 5 * sizeof *x->grad);
    /* beta 2, threshold 1: 0.5 (beta x = 1, not above) is log1p(e) / 2, 0.6 is itself */
    ag_tensor *h = ag_tensor_from(t, AG_SHAPE(2), (const ag_real[]){0.5, 0.6});
    y = ag_softplus(t, h, 2, 1);
    NEAR(y->data[0], 0.6566308437591114);
    NEAR(y->data[1], 0.6);
    /* silu: x sigmoid(x); gradient s (1 + x (1 - s)) (Python's math) */
    y = ag_silu(t, x);
    const double si[4] = {-0.2384058440442351, -0.1887703343990727, 0, 0.7310585786300049};
    for (int i = 0; i < 4; i++) NEAR(y->data[i], si[i]);
    NEAR(y->data[4], 25);
    backward_sum(t, y);
    const double gsi[4] = {-0.09078424878489547, 0.2600388126973482, 0.5, 0.9276705118714869};
    for (int i = 0; i < 4; i++) NEAR(x->grad[i], gsi[i]);
    ag_tape_reset(t);
    memset(x->grad, 0, 5 * sizeof *x->grad);
    /* leaky_relu 0.2, by hand; gradient at 0 is the slope (PyTorch: x > 0 ? g : g * slope) */
    y = ag_leaky_relu(t, x, 0.2);
    const double lr[5] = {-0.4, -0.1, 0, 1, 25}, glr[5] = {0.2, 0.2, 0.2, 1, 1};
    for (int i = 0; i < 5; i++) NEAR(y->data[i], lr[i]);
    backward_sum(t, y);
    for (int i = 0; i < 5; i++) NEAR(x->grad[i], glr[i]);
    ag_tape_reset(t);
    memset(x->grad, 0, 5 * sizeof *x->grad);
    /* elu alpha 1.5: alpha expm1(x) for x <= 0; gradient alpha exp(x) there, so alpha at 0
     * (PyTorch's elu_backward on the input) */
    y = ag_elu(t, x, 1.5);
    NEAR(y->data[0], -1.296997075145081);
    NEAR(y->data[1], 1.5 * -0.3934693402873666);
    CU_ASSERT_EQUAL(y->data[2], 0);
    CU_ASSERT_EQUAL(y->data[3], 1);
    backward_sum(t, y);
    NEAR(x->grad[0], 0.20300292485491905);
    NEAR(x->grad[1], 1.5 * 0.6065306597126334);
    NEAR(x->grad[2], 1.5);
    NEAR(x->grad[3], 1);
    ag_tape_free(t);
    ag_leaf_free(x);
}

/* Views in, and a recorded node per op: the same values as from contiguous inputs. */
static void test_views(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 3), (const ag_real[]){-1, 2, -3, 4, -5, 6});
    ag_tensor *v = ag_transpose(t, x, 0, 1), *c = ag_contiguous(t, v);
    ag_tensor *ys[2] = {ag_abs(t, v), ag_abs(t, c)};
    ag_tensor *zs[2] = {ag_maximum(t, v, ag_scale(t, c, -1)), ag_maximum(t, c, ag_neg(t, c))};
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(ag_get(ys[0], i), ag_get(ys[1], i));
        CU_ASSERT_EQUAL(ag_get(zs[0], i), ag_get(ys[1], i));
        CU_ASSERT_EQUAL(ag_get(zs[1], i), ag_get(ys[1], i));
    }
    ag_tape_free(t);
}

static void test_bad_input(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *a = ag_tensor_new(t, AG_SHAPE(2, 3)), *b = ag_tensor_new(t, AG_SHAPE(4));
    ag_tensor *m = ag_tensor_new(t, AG_SHAPE(2, 1)), *wide = ag_tensor_new(t, AG_SHAPE(3, 3));
    TG_EXPECT_NULL(ag_maximum(t, a, b), "maximum: shapes [2, 3] and [4] do not broadcast");
    TG_EXPECT_NULL(ag_pow(t, a, b), "pow: shapes [2, 3] and [4]");
    TG_EXPECT_NULL(ag_where(t, m, a, b), "where: shapes [2, 1], [2, 3] and [4] do not broadcast");
    TG_EXPECT_NULL(ag_masked_fill(t, b, a, 0), "masked_fill: shapes [2, 3], [] and [4]");
    /* the mask may broadcast to x, never x to the mask (the result has x's shape) */
    TG_EXPECT_NULL(ag_masked_fill(t, m, a, 0),
                   "masked_fill: mask [2, 3] does not broadcast to the shape of x [2, 1]");
    TG_EXPECT_NULL(ag_where(t, wide, a, a), "where", "[3, 3]", "[2, 3]");
    TG_EXPECT_NULL(ag_clamp(t, a, NAN, 1), "clamp: bound min is NaN (x [2, 3])");
    TG_EXPECT_NULL(ag_softplus(t, a, 0, 20), "softplus: beta = 0, threshold = 20 (x [2, 3])");
    /* NULL in: NULL out, no second message */
    tg_n_captured = 0;
    CU_ASSERT_PTR_NULL(ag_abs(t, NULL));
    CU_ASSERT_PTR_NULL(ag_clamp(t, NULL, 0, 1));
    CU_ASSERT_PTR_NULL(ag_where(t, m, NULL, a));
    CU_ASSERT_EQUAL(tg_n_captured, 0);
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static CU_TestInfo tests[] = {
    {"abs, log1p, pow_scalar: values and kinks", test_abs_log1p_pow_scalar},
    {"pow tensor^tensor: both gradients, broadcasting", test_pow_tensor},
    {"clamp: gradient at the bounds, min > max", test_clamp},
    {"maximum / minimum: ties split, NaN, broadcasting", test_maximum_minimum},
    {"where / masked_fill: broadcasting and gradients", test_where_masked_fill},
    {"softplus, silu, leaky_relu, elu", test_activations},
    {"views in", test_views},
    {"bad input names the op and the shapes", test_bad_input},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("pointwise", tests); }
