/* test_reduce_index.c -- logsumexp, max_dim / min_dim / amax / amin, var / std (ops_minmax.c,
 * ops_stats.c) and stack, index_select, gather (ops_index.c), float32 product: values worked by
 * hand, from PyTorch's documentation examples, or from its formulas in Python's math module
 * (each comment says which), where the gradient goes at ties (seed of ones: y.sum().backward()),
 * shapes with keepdim, infinities and NaN, and bad input. Gradients at random points: float64,
 * test_gradcheck_toolkit.c.
 */
#include "autograd/ag_op.h"
#include "tests/autograd/op_values.h"
#include "tests/tg_test.h"

#include <math.h>
#include <string.h>

static void test_logsumexp(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(2, 3), (const ag_real[]){1, 2, 3, -1, 0, 1}, true);
    /* log(e^1 + e^2 + e^3) and the row shifted by -2 (Python's math) */
    ag_tensor *y = ag_logsumexp(t, x, -1, false);
    CU_ASSERT_EQUAL(y->ndim, 1);
    NEAR(y->data[0], 3.4076059644443806);
    NEAR(y->data[1], 1.4076059644443804);
    backward_sum(t, y);
    /* the gradient is the softmax of each row */
    const double sm[3] = {0.09003057317038043, 0.24472847105479759, 0.6652409557748217};
    for (int i = 0; i < 6; i++) NEAR(x->grad[i], sm[i % 3]);
    ag_tape_reset(t);
    zero_grad(x);
    /* axis 0 keepdim: log(e^a + e^(a-2)) = a + log(1 + e^-2) */
    y = ag_logsumexp(t, x, 0, true);
    CU_ASSERT_EQUAL(y->ndim, 2);
    CU_ASSERT_EQUAL(y->shape[0], 1);
    for (int j = 0; j < 3; j++) NEAR(y->data[j], 1.1269280110429727 + j);
    /* every axis */
    y = ag_logsumexp(t, x, AG_ALL, false);
    CU_ASSERT_EQUAL(y->ndim, 0);
    NEAR(y->data[0], 3.534533975487353);
    ag_tape_reset(t);
    /* infinities, as PyTorch: an all -inf row gives -inf, a +inf gives +inf, -inf terms drop */
    ag_tensor *inf = ag_tensor_from(
        t, AG_SHAPE(3, 2), (const ag_real[]){-INFINITY, -INFINITY, INFINITY, 1, -INFINITY, 0});
    y = ag_logsumexp(t, inf, 1, false);
    CU_ASSERT_TRUE(isinf(y->data[0]) && y->data[0] < 0);
    CU_ASSERT_TRUE(isinf(y->data[1]) && y->data[1] > 0);
    CU_ASSERT_EQUAL(y->data[2], 0);
    /* a large row does not overflow: 1000 + log 2 */
    ag_tensor *big = ag_tensor_from(t, AG_SHAPE(2), (const ag_real[]){1000, 1000});
    NEAR(ag_logsumexp(t, big, 0, false)->data[0], 1000.6931471805599);
    /* an empty axis: log 0 = -inf (torch.logsumexp of an empty dim) */
    y = ag_logsumexp(t, ag_tensor_new(t, AG_SHAPE(2, 0)), 1, false);
    CU_ASSERT_EQUAL(y->numel, 2);
    CU_ASSERT_TRUE(isinf(y->data[0]) && y->data[0] < 0);
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_max_min(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(2, 4), (const ag_real[]){1, 3, 3, 2, 4, 4, 4, 0}, true);
    int32_t idx[2] = {-1, -1};
    /* torch.max(x, 1): values and the first index of each maximum; the gradient goes to that
     * index only */
    ag_tensor *y = ag_max_dim(t, x, 1, false, idx, 2);
    CU_ASSERT_EQUAL(y->data[0], 3);
    CU_ASSERT_EQUAL(y->data[1], 4);
    CU_ASSERT_EQUAL(idx[0], 1);
    CU_ASSERT_EQUAL(idx[1], 0);
    backward_sum(t, y);
    const double g_max[8] = {0, 1, 0, 0, 1, 0, 0, 0};
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(x->grad[i], g_max[i]);
    ag_tape_reset(t);
    zero_grad(x);
    /* torch.amax(x, 1): the same values, the gradient split evenly between the ties */
    y = ag_amax(t, x, 1, true);
    CU_ASSERT_EQUAL(y->ndim, 2);
    CU_ASSERT_EQUAL(y->shape[1], 1);
    backward_sum(t, y);
    const double g_amax[8] = {0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0};
    for (int i = 0; i < 8; i++) NEAR(x->grad[i], g_amax[i]);
    ag_tape_reset(t);
    zero_grad(x);
    /* torch.min(x, 0), keepdim: columns (1, 4) (3, 4) (3, 4) (2, 0) */
    int32_t mi[4];
    y = ag_min_dim(t, x, 0, true, mi, 4);
    CU_ASSERT_EQUAL(y->ndim, 2);
    const double w_min[4] = {1, 3, 3, 0};
    const int32_t w_mi[4] = {0, 0, 0, 1};
    for (int j = 0; j < 4; j++) {
        CU_ASSERT_EQUAL(y->data[j], w_min[j]);
        CU_ASSERT_EQUAL(mi[j], w_mi[j]);
    }
    /* torch.amin over everything: 0, its gradient to the one minimum */
    y = ag_amin(t, x, AG_ALL, false);
    CU_ASSERT_EQUAL(y->ndim, 0);
    CU_ASSERT_EQUAL(y->data[0], 0);
    backward_sum(t, y);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(x->grad[i], i == 7 ? 1 : 0);
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_max_min_nan(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = leaf(AG_SHAPE(2, 4), (const ag_real[]){5, NAN, 5, NAN, -1, 2, -1, 0}, true);
    int32_t idx[2];
    /* a NaN is the maximum and the minimum; its index is the first NaN's (as ag_argmax) */
    ag_tensor *y = ag_max_dim(t, x, 1, false, idx, 2);
    CU_ASSERT_TRUE(isnan(y->data[0]));
    CU_ASSERT_EQUAL(idx[0], 1);
    CU_ASSERT_EQUAL(y->data[1], 2);
    CU_ASSERT_EQUAL(idx[1], 1);
    y = ag_min_dim(t, x, 1, false, idx, 2);
    CU_ASSERT_TRUE(isnan(y->data[0]));
    CU_ASSERT_EQUAL(idx[0], 1);
    CU_ASSERT_EQUAL(y->data[1], -1);
    CU_ASSERT_EQUAL(idx[1], 0); /* the first of the tied minima */
    /* amin: row 0's NaN result gives its whole row a NaN gradient (torch.amin's
     * grad / count(x == y) * (x == y), count 0: torch 1.13 gives [nan, nan, nan, nan]; the even
     * split between NaNs is torch.min(x)'s rule, not amin's); row 1's ties share */
    y = ag_amin(t, x, 1, false);
    backward_sum(t, y);
    for (int i = 0; i < 4; i++) CU_ASSERT_TRUE(isnan(x->grad[i]));
    const double g[4] = {0.5, 0, 0.5, 0};
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(x->grad[4 + i], g[i]);
    /* amax over AG_ALL: the NaN result makes every gradient NaN (torch.amax(x).backward()) */
    zero_grad(x);
    ag_tape_reset(t);
    backward_sum(t, ag_amax(t, x, AG_ALL, false));
    for (int i = 0; i < 8; i++) CU_ASSERT_TRUE(isnan(x->grad[i]));
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_var_std(void) {
    ag_tape *t = ag_tape_new();
    /* PyTorch's documentation example of torch.var / torch.std (dim 1, unbiased): 1.0631, 0.5590,
     * 1.4893, 0.8258 and 1.0311, 0.7477, 1.2204, 0.9087 (to 4 places; the digits from Python's
     * statistics.variance / stdev) */
    const ag_real doc[16] = {0.2035,  1.2959, 1.8101,  -0.4644, 1.5027, -0.3270, 0.5905, 0.6538,
                             -1.5745, 1.3330, -0.5596, -0.6548, 0.1264, -0.5080, 1.6420, 0.1992};
    ag_tensor *a = ag_tensor_from(t, AG_SHAPE(4, 4), doc);
    ag_tensor *v = ag_var(t, a, 1, 1, true);
    CU_ASSERT_EQUAL(v->ndim, 2);
    CU_ASSERT_EQUAL(v->shape[1], 1);
    const double dv[4] = {1.0630833091666667, 0.5590269933333333, 1.4893144158333333,
                          0.8257591866666666};
    const double ds[4] = {1.0311, 0.7477, 1.2204, 0.9087};
    ag_tensor *s = ag_std(t, a, 1, 1, false);
    for (int i = 0; i < 4; i++) {
        NEAR(v->data[i], dv[i]);
        CU_ASSERT_DOUBLE_EQUAL(s->data[i], ds[i], 5e-5);
    }
    ag_tape_reset(t);
    /* by hand: row 0 = 1 2 3 4 (mean 2.5, squares 5), row 1 constant */
    ag_tensor *x = leaf(AG_SHAPE(2, 4), (const ag_real[]){1, 2, 3, 4, 2, 2, 2, 2}, true);
    v = ag_var(t, x, 1, 1, false);
    NEAR(v->data[0], 5.0 / 3);
    CU_ASSERT_EQUAL(v->data[1], 0);
    NEAR(ag_var(t, x, 1, 0, false)->data[0], 1.25); /* biased: 5 / 4 */
    NEAR(ag_var(t, x, 1, 2, false)->data[0], 2.5);  /* correction 2: 5 / 2 */
    /* every axis: mean 2.25, squares 5.5 */
    NEAR(ag_var(t, x, AG_ALL, 0, false)->data[0], 0.6875);
    NEAR(ag_var(t, x, AG_ALL, 1, false)->data[0], 5.5 / 7);
    /* axis 0 keepdim: (a - b)^2 / 2 per column */
    ag_tensor *c = ag_var(t, x, 0, 1, true);
    CU_ASSERT_EQUAL(c->shape[0], 1);
    const double wc[4] = {0.5, 0, 0.5, 2};
    for (int j = 0; j < 4; j++) NEAR(c->data[j], wc[j]);
    backward_sum(t, v);
    /* d var / dx = 2 (x - mean) / 3; 0 on the constant row */
    const double gv[8] = {-1, -1.0 / 3, 1.0 / 3, 1, 0, 0, 0, 0};
    for (int i = 0; i < 8; i++) NEAR(x->grad[i], gv[i]);
    ag_tape_reset(t);
    zero_grad(x);
    /* std: (x - mean) / (3 std), std = sqrt(5/3); the constant row (std = 0) gets 0, not NaN
     * (PyTorch's std_backward masks it) */
    s = ag_std(t, x, 1, 1, false);
    NEAR(s->data[0], 1.2909944487358056);
    CU_ASSERT_EQUAL(s->data[1], 0);
    backward_sum(t, s);
    const double gs[8] = {-0.3872983346207417,
                          -0.12909944487358055,
                          0.12909944487358055,
                          0.3872983346207417,
                          0,
                          0,
                          0,
                          0};
    for (int i = 0; i < 8; i++) NEAR(x->grad[i], gs[i]);
    ag_tape_reset(t);
    /* one element, unbiased: 0 / 0 = NaN, as PyTorch */
    CU_ASSERT_TRUE(isnan(ag_var(t, ag_tensor_new(t, AG_SHAPE(3, 1)), 1, 1, false)->data[0]));
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_stack(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *a = leaf(AG_SHAPE(2, 3), (const ag_real[]){1, 2, 3, 4, 5, 6}, true);
    ag_tensor *b = leaf(AG_SHAPE(2, 3), (const ag_real[]){7, 8, 9, 10, 11, 12}, true);
    ag_tensor *ab[2] = {a, b};
    ag_tensor *y = ag_stack(t, 2, ab, 0); /* (2, 2, 3): a then b */
    CU_ASSERT_EQUAL(y->ndim, 3);
    CU_ASSERT_EQUAL(y->shape[0], 2);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(ag_get(y, i), i + 1);
    y = ag_stack(t, 2, ab, 1); /* (2, 2, 3): row r of a, then row r of b */
    const double w1[12] = {1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12};
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(ag_get(y, i), w1[i]);
    y = ag_stack(t, 2, ab, -1); /* (2, 3, 2): pairs */
    CU_ASSERT_EQUAL(y->shape[2], 2);
    const double w2[12] = {1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12};
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(ag_get(y, i), w2[i]);
    ag_tensor *w = ag_tensor_from(t, AG_SHAPE(2, 3, 2),
                                  (const ag_real[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    backward_sum(t, ag_mul(t, y, w));
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(a->grad[i], 2 * i + 1);
        CU_ASSERT_EQUAL(b->grad[i], 2 * i + 2);
    }
    ag_tape_free(t);
    ag_leaf_free(a);
    ag_leaf_free(b);
}

static void test_index_select_gather(void) {
    ag_tape *t = ag_tape_new();
    ag_real v[12];
    for (int i = 0; i < 12; i++) v[i] = (ag_real)i;
    ag_tensor *x = leaf(AG_SHAPE(3, 4), v, true);
    /* columns 3, 0, 3 of [[0..3], [4..7], [8..11]] */
    ag_tensor *y = ag_index_select(t, x, 1, (const int32_t[]){3, 0, 3}, 3);
    CU_ASSERT_EQUAL(y->shape[0], 3);
    CU_ASSERT_EQUAL(y->shape[1], 3);
    const double w[9] = {3, 0, 3, 7, 4, 7, 11, 8, 11};
    for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(y->data[i], w[i]);
    backward_sum(t, y);
    /* scatter-add: column 3 was picked twice */
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(x->grad[i], i % 4 == 3 ? 2 : i % 4 == 0 ? 1 : 0);
    ag_tape_reset(t);
    zero_grad(x);
    /* rows 2, 2 along axis 0 */
    y = ag_index_select(t, x, 0, (const int32_t[]){2, 2}, 2);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(y->data[i], 8 + i % 4);
    /* torch.gather's documentation example: gather([[1, 2], [3, 4]], 1, [[0, 0], [1, 0]])
     * = [[1, 1], [4, 3]] */
    ag_tensor *d = ag_tensor_from(t, AG_SHAPE(2, 2), (const ag_real[]){1, 2, 3, 4});
    y = ag_gather(t, d, 1, (const int32_t[]){0, 0, 1, 0}, AG_SHAPE(2, 2));
    const double wd[4] = {1, 1, 4, 3};
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(y->data[i], wd[i]);
    /* axis 0, an index smaller than x: y[i][j] = x[index[i][j]][j] */
    y = ag_gather(t, x, 0, (const int32_t[]){2, 0, 1, 2, 0, 0, 0, 0}, AG_SHAPE(2, 4));
    const double wg[8] = {8, 1, 6, 11, 0, 1, 2, 3};
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(y->data[i], wg[i]);
    backward_sum(t, y);
    const double gg[12] = {1, 2, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1};
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(x->grad[i], gg[i]);
    ag_tape_free(t);
    ag_leaf_free(x);
}

static void test_bad_input(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(3, 4)), *z = ag_tensor_new(t, AG_SHAPE(4, 3));
    int32_t idx[2];
    TG_EXPECT_NULL(ag_logsumexp(t, x, 2, false), "logsumexp: axis 2 out of range for shape [3, 4]");
    TG_EXPECT_NULL(ag_var(t, x, -3, 1, false), "var: axis -3 out of range for shape [3, 4]");
    TG_EXPECT_NULL(ag_std(t, x, 0, NAN, false), "std: correction nan is not finite (x [3, 4])");
    TG_EXPECT_NULL(ag_max_dim(t, x, AG_ALL, false, NULL, 0),
                   "max_dim: needs one axis, not AG_ALL, for [3, 4] (amax reduces every axis)");
    TG_EXPECT_NULL(ag_min_dim(t, x, 1, false, idx, 2),
                   "min_dim: the indices buffer holds 2 values, 3 needed for [3, 4]");
    TG_EXPECT_NULL(ag_amax(t, ag_tensor_new(t, AG_SHAPE(2, 0)), 1, false),
                   "amax: reducing an empty axis of [2, 0]");
    TG_EXPECT_NULL(ag_stack(t, 2, (ag_tensor *[]){x, z}, 0),
                   "stack: input 1 has shape [4, 3], input 0 has [3, 4] (all must be equal)");
    TG_EXPECT_NULL(ag_stack(t, 2, (ag_tensor *[]){x, x}, 3),
                   "stack: axis 3 out of range for shape [3, 4]");
    TG_EXPECT_NULL(ag_stack(t, 0, NULL, 0), "stack: no inputs");
    TG_EXPECT_NULL(ag_index_select(t, x, 1, (const int32_t[]){0, 4}, 2),
                   "index_select: index 4 at position 1 of index [2] is outside [0, 4) (axis 1 of "
                   "x [3, 4])");
    TG_EXPECT_NULL(ag_index_select(t, x, 0, (const int32_t[]){-1}, 1),
                   "index_select: index -1 at position 0");
    TG_EXPECT_NULL(ag_gather(t, x, 0, (const int32_t[]){0, 1}, AG_SHAPE(2)),
                   "gather: index [2] must have the rank of x [3, 4] and no larger dimension but "
                   "along axis 0");
    TG_EXPECT_NULL(ag_gather(t, x, 0, (const int32_t[]){0, 0, 0, 0, 0}, AG_SHAPE(1, 5)),
                   "gather: index [1, 5] must have the rank of x [3, 4]");
    TG_EXPECT_NULL(ag_gather(t, x, 1, (const int32_t[]){0, 3, 4, 1}, AG_SHAPE(2, 2)),
                   "gather: index 4 at position 2 of index [2, 2] is outside [0, 4) (axis 1 of x "
                   "[3, 4])");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static CU_TestInfo tests[] = {
    {"logsumexp: values, softmax gradient, infinities", test_logsumexp},
    {"max/min with indices vs amax/amin: where ties send the gradient", test_max_min},
    {"max/min with NaN", test_max_min_nan},
    {"var / std: PyTorch's example, corrections, std at 0", test_var_std},
    {"stack along every axis", test_stack},
    {"index_select and gather: values, scatter-add", test_index_select_gather},
    {"bad input names the op and the shapes", test_bad_input},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("reductions and indexing", tests); }
