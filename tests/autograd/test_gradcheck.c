/* test_gradcheck.c -- every op against central differences, in float64 (links ag64).
 * (The fused kernels of the nn layers and their composites: tests/nn/test_nn_gradcheck.c.)
 *
 * One row of the table per case: the function, its inputs' shapes, and the checker's knobs.
 * Odd, non-square shapes throughout; broadcasting, views, BLIS-sized and small products, and
 * inputs used twice. A second suite checks the checker: a softmax with a wrong backward that a
 * plain sum would pass is caught through the random projection, and the message names it.
 */
#include "tests/autograd/gc_table.h"

#include <string.h>

FN(f_add, ag_add(t, X0, X1))
FN(f_sub, ag_sub(t, X0, X1))
FN(f_mul, ag_mul(t, X0, X1))
FN(f_div, ag_div(t, X0, X1))
FN(f_square, ag_mul(t, X0, X0))
FN(f_add_scalar, ag_add_scalar(t, X0, 2.5))
FN(f_scale, ag_scale(t, X0, -1.75))
FN(f_neg, ag_neg(t, X0))
FN(f_exp, ag_exp(t, X0))
FN(f_log, ag_log(t, X0))
FN(f_sqrt, ag_sqrt(t, X0))
FN(f_tanh, ag_tanh(t, X0))
FN(f_sigmoid, ag_sigmoid(t, X0))
FN(f_relu, ag_relu(t, X0))
FN(f_matmul, ag_matmul(t, X0, X1))
FN(f_matmul_ta, ag_matmul(t, ag_transpose(t, X0, -1, -2), X1))
FN(f_matmul_tb, ag_matmul(t, X0, ag_transpose(t, X1, -1, -2)))
FN(f_matmul_self, ag_matmul(t, X0, ag_transpose(t, X0, 0, 1)))
FN(f_matmul_heads, ag_matmul(t, ag_permute(t, X0, (const int[]){0, 2, 1, 3}),
                             ag_transpose(t, ag_permute(t, X1, (const int[]){0, 2, 1, 3}), -1, -2)))
FN(f_matmul_4d_shared, ag_matmul(t, ag_permute(t, X0, (const int[]){0, 2, 1, 3}), X1))
FN(f_linear, ag_linear(t, X0, X1, X2))
FN(f_linear_nobias, ag_linear(t, X0, X1, NULL))
FN(f_linear_view, ag_linear(t, ag_transpose(t, X0, 0, 1), X1, X2))
FN(f_reshape, ag_reshape(t, X0, AG_SHAPE(3, -1)))
FN(f_reshape_mul, ag_mul(t, ag_reshape(t, X0, AG_SHAPE(3, 4)), X1))
FN(f_reshape_view, ag_reshape(t, ag_transpose(t, X0, 0, 1), AG_SHAPE(-1)))
FN(f_permute, ag_permute(t, X0, (const int[]){2, 0, 1}))
FN(f_permute_exp, ag_exp(t, ag_permute(t, X0, (const int[]){1, 2, 0})))
FN(f_transpose_contig, ag_contiguous(t, ag_transpose(t, X0, 0, 2)))
FN(f_narrow, ag_tanh(t, ag_narrow(t, X0, 1, 1, 3)))
FN(f_narrow_twice, ag_mul(t, ag_narrow(t, X0, 0, 0, 2), ag_narrow(t, X0, 0, 1, 2)))
FN(f_concat1, ag_concat(t, 3, (ag_tensor *[]){X0, X1, X2}, 1))
FN(f_concat0, ag_concat(t, 2, (ag_tensor *[]){X0, X1}, 0))
FN(f_concat_twice, ag_concat(t, 2, (ag_tensor *[]){X0, X0}, -1))
FN(f_concat_views, ag_concat(t, 2, (ag_tensor *[]){ag_transpose(t, X0, 0, 1), X1}, 0))
FN(f_repeat0, ag_repeat_interleave(t, X0, 3, 0))
FN(f_repeat1, ag_repeat_interleave(t, X0, 2, -1))
FN(f_gather, ag_gather_rows(t, X0, (const int32_t[]){0, 2, 2, 4, 1, 0}, AG_SHAPE(2, 3)))
FN(f_sum_all, ag_sum(t, X0, AG_ALL, false))
FN(f_sum_axis, ag_sum(t, X0, 1, true))
FN(f_mean_all, ag_mean(t, X0, AG_ALL, true))
FN(f_mean_axis, ag_mean(t, X0, 0, false))
FN(f_max_axis, ag_max(t, X0, -1, false))
FN(f_max_all, ag_max(t, X0, AG_ALL, false))
FN(f_softmax, ag_softmax(t, X0))
FN(f_log_softmax, ag_log_softmax(t, X0))
FN(f_masked_none, ag_masked_softmax(t, X0, NULL, 0))
FN(f_masked_1d, ag_masked_softmax(t, X0, (const int32_t[]){2, 0}, 1))
FN(f_masked_2d, ag_masked_softmax(t, X0, (const int32_t[]){1, 4, 3, 2, 9, 0}, 2))
FN(f_softmax_ce,
   ag_softmax_ce(t, X0, (const int32_t[]){0, 4, 2, 1, 3, 3}, (const ag_real[]){1, 1, 0, 1, 0.5, 0}))
FN(f_softmax_ce_plain, ag_softmax_ce(t, X0, (const int32_t[]){2, 0, 1}, NULL))
FN(f_gelu, ag_gelu(t, X0))
FN(f_gelu_view, ag_gelu(t, ag_transpose(t, X0, 0, 1)))
FN(f_mse_mean, ag_mse_loss(t, X0, X1, AG_REDUCE_MEAN))
FN(f_mse_sum_view, ag_mse_loss(t, ag_transpose(t, X0, 0, 1), X1, AG_REDUCE_SUM))
FN(f_mse_none, ag_mse_loss(t, X0, X1, AG_REDUCE_NONE))
FN(f_mse_twice, ag_mse_loss(t, X0, ag_tanh(t, X0), AG_REDUCE_MEAN))
FN(f_bce_mean, ag_bce_with_logits(t, X0, ag_sigmoid(t, X1), NULL, AG_REDUCE_MEAN))
FN(f_bce_pos_weight,
   ag_bce_with_logits(t, X0, ag_sigmoid(t, X1), (const ag_real[]){0.5, 2, 3}, AG_REDUCE_NONE))
FN(f_bce_sum_view,
   ag_bce_with_logits(t, ag_transpose(t, X0, 0, 1), ag_sigmoid(t, X1), NULL, AG_REDUCE_SUM))
FN(f_nll_weighted, ag_nll_loss(t, X0, (const int32_t[]){1, 4, AG_IGNORE_INDEX, 0},
                               (const ag_real[]){0.5, 1, 2, 1, 3}, AG_IGNORE_INDEX, AG_REDUCE_MEAN))
FN(f_nll_ignore_none,
   ag_nll_loss(t, X0, (const int32_t[]){0, 2, 3, 2, 1, 3}, NULL, 2, AG_REDUCE_NONE))
FN(f_nll_log_softmax, ag_nll_loss(t, ag_log_softmax(t, X0), (const int32_t[]){2, 0, 1}, NULL,
                                  AG_IGNORE_INDEX, AG_REDUCE_SUM))
FN(f_ce_smooth, ag_cross_entropy(t, X0, (const int32_t[]){0, 4, 2, 1, 3, 3},
                                 (const ag_real[]){1, 0.5, 1, 2, 1, 1}, 0.1, 3, AG_REDUCE_MEAN))
FN(f_ce_smooth_none_view,
   ag_cross_entropy(t, ag_transpose(t, X0, 0, 1), (const int32_t[]){2, 0, 1, 1}, NULL, 0.25,
                    AG_IGNORE_INDEX, AG_REDUCE_NONE))
FN(f_ce_sum_twice, ag_add(t,
                          ag_cross_entropy(t, X0, (const int32_t[]){2, 0, 1}, NULL, 0.2,
                                           AG_IGNORE_INDEX, AG_REDUCE_SUM),
                          ag_sum(t, ag_mul(t, X0, X0), AG_ALL, false)))

static ag_tensor *f_dropout(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    ag_rng rng;
    ag_rng_seed(&rng, 7); /* reseeded every call: the same mask each evaluation */
    return ag_dropout(t, X0, 0.3, &rng);
}

/* A two-layer net with a loss: linear, tanh, linear, softmax cross-entropy, mean. */
static ag_tensor *f_mlp(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    ag_tensor *h = ag_tanh(t, ag_linear(t, X0, X1, NULL));
    ag_tensor *z = ag_matmul(t, h, ag_transpose(t, X2, 0, 1));
    return ag_mean(t, ag_softmax_ce(t, z, (const int32_t[]){1, 0, 2, 1}, NULL), AG_ALL, false);
}

/* Attention-shaped: softmax(q k^T / 2 masked) v with batched transposed products. */
static ag_tensor *f_attention(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    ag_tensor *s = ag_scale(t, ag_matmul(t, X0, ag_transpose(t, X1, 1, 2)), 0.5);
    ag_tensor *w = ag_masked_softmax(t, s, (const int32_t[]){3, 1}, 1);
    return ag_matmul(t, w, X2);
}

static const gc_case cases[] = {
    {"add", f_add, 2, {S2(3, 4), S2(3, 4)}, NORMAL, DEFAULTS},
    {"add broadcast trailing", f_add, 2, {S3(2, 3, 5), S1(5)}, NORMAL, DEFAULTS},
    {"add broadcast both", f_add, 2, {S3(2, 1, 4), S2(3, 1)}, NORMAL, DEFAULTS},
    {"sub broadcast", f_sub, 2, {S2(3, 4), S2(3, 1)}, NORMAL, DEFAULTS},
    {"mul broadcast middle", f_mul, 2, {S3(2, 3, 4), S3(1, 3, 1)}, NORMAL, DEFAULTS},
    {"mul input used twice", f_square, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"div broadcast", f_div, 2, {S2(3, 4), S1(4)}, POSITIVE, DEFAULTS},
    {"add_scalar", f_add_scalar, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"scale", f_scale, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"neg", f_neg, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"exp", f_exp, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"log", f_log, 1, {S2(3, 5)}, POSITIVE, DEFAULTS},
    {"sqrt", f_sqrt, 1, {S2(3, 5)}, POSITIVE, DEFAULTS},
    {"tanh", f_tanh, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"sigmoid", f_sigmoid, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"relu", f_relu, 1, {S2(4, 5)}, NORMAL, KINKS},
    {"matmul 2-D", f_matmul, 2, {S2(3, 5), S2(5, 4)}, NORMAL, DEFAULTS},
    {"matmul batched", f_matmul, 2, {S3(2, 3, 5), S3(2, 5, 4)}, NORMAL, DEFAULTS},
    {"matmul 3-D by shared 2-D", f_matmul, 2, {S3(2, 3, 5), S2(5, 4)}, NORMAL, DEFAULTS},
    {"matmul shared 2-D by 3-D", f_matmul, 2, {S2(3, 5), S3(2, 5, 4)}, NORMAL, DEFAULTS},
    {"matmul a transposed", f_matmul_ta, 2, {S2(5, 3), S2(5, 4)}, NORMAL, DEFAULTS},
    {"matmul b transposed batched", f_matmul_tb, 2, {S3(2, 3, 5), S3(2, 4, 5)}, NORMAL, DEFAULTS},
    {"matmul BLIS-sized", f_matmul, 2, {S2(21, 33), S2(33, 17)}, NORMAL, {.max_elems = 60}},
    {"matmul BLIS-sized b transposed",
     f_matmul_tb,
     2,
     {S3(2, 19, 31), S3(2, 23, 31)},
     NORMAL,
     {.max_elems = 60}},
    {"matmul x by x^T (used twice)", f_matmul_self, 1, {S2(4, 3)}, NORMAL, DEFAULTS},
    {"matmul 4-D permuted views (heads)",
     f_matmul_heads,
     2,
     {S4(2, 3, 2, 4), S4(2, 5, 2, 4)},
     NORMAL,
     DEFAULTS},
    {"matmul 4-D by shared 2-D",
     f_matmul_4d_shared,
     2,
     {S4(2, 3, 2, 4), S2(4, 3)},
     NORMAL,
     DEFAULTS},
    {"linear", f_linear, 3, {S3(2, 3, 5), S2(4, 5), S1(4)}, NORMAL, DEFAULTS},
    {"linear no bias", f_linear_nobias, 2, {S2(3, 5), S2(4, 5)}, NORMAL, DEFAULTS},
    {"linear on a view", f_linear_view, 3, {S2(5, 3), S2(2, 5), S1(2)}, NORMAL, DEFAULTS},
    {"linear BLIS-sized", f_linear, 3, {S2(37, 29), S2(19, 29), S1(19)}, NORMAL, {.max_elems = 60}},
    {"reshape (a view as the output)", f_reshape, 1, {S2(2, 6)}, NORMAL, DEFAULTS},
    {"reshape then mul", f_reshape_mul, 2, {S2(2, 6), S2(3, 4)}, NORMAL, DEFAULTS},
    {"reshape of a transposed view", f_reshape_view, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"permute (a strided output)", f_permute, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"permute then exp", f_permute_exp, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"transpose then contiguous", f_transpose_contig, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"narrow then tanh", f_narrow, 1, {S2(4, 5)}, NORMAL, DEFAULTS},
    {"two overlapping narrows", f_narrow_twice, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"concat axis 1", f_concat1, 3, {S3(2, 1, 3), S3(2, 3, 3), S3(2, 2, 3)}, NORMAL, DEFAULTS},
    {"concat axis 0", f_concat0, 2, {S2(2, 3), S2(1, 3)}, NORMAL, DEFAULTS},
    {"concat input used twice", f_concat_twice, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"concat of a view", f_concat_views, 2, {S2(3, 2), S2(1, 3)}, NORMAL, DEFAULTS},
    {"repeat_interleave axis 0", f_repeat0, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"repeat_interleave last axis", f_repeat1, 1, {S3(2, 3, 2)}, NORMAL, DEFAULTS},
    {"gather_rows (repeated ids)", f_gather, 1, {S2(5, 3)}, NORMAL, DEFAULTS},
    {"sum all", f_sum_all, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"sum axis keepdim", f_sum_axis, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"mean all keepdim", f_mean_all, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"mean axis 0", f_mean_axis, 1, {S3(3, 2, 4)}, NORMAL, DEFAULTS},
    {"max last axis", f_max_axis, 1, {S3(2, 3, 5)}, NORMAL, KINKS},
    {"max all", f_max_all, 1, {S2(3, 4)}, NORMAL, KINKS},
    {"softmax", f_softmax, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"log_softmax", f_log_softmax, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"masked_softmax unmasked", f_masked_none, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"masked_softmax lens (B,) incl. 0", f_masked_1d, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"masked_softmax lens (B,Tq)", f_masked_2d, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"dropout (training)", f_dropout, 1, {S2(4, 6)}, NORMAL, DEFAULTS},
    {"softmax_ce weighted", f_softmax_ce, 1, {S3(2, 3, 5)}, NORMAL, DEFAULTS},
    {"softmax_ce unweighted", f_softmax_ce_plain, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"gelu", f_gelu, 1, {S2(4, 5)}, NORMAL, DEFAULTS},
    {"gelu of a transposed view", f_gelu_view, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"mse_loss mean", f_mse_mean, 2, {S2(3, 5), S2(3, 5)}, NORMAL, DEFAULTS},
    {"mse_loss sum, input a view", f_mse_sum_view, 2, {S2(4, 3), S2(3, 4)}, NORMAL, DEFAULTS},
    {"mse_loss none", f_mse_none, 2, {S3(2, 3, 2), S3(2, 3, 2)}, NORMAL, DEFAULTS},
    {"mse_loss input used twice", f_mse_twice, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"bce_with_logits mean", f_bce_mean, 2, {S2(4, 3), S2(4, 3)}, NORMAL, DEFAULTS},
    {"bce_with_logits pos_weight none",
     f_bce_pos_weight,
     2,
     {S3(2, 2, 3), S3(2, 2, 3)},
     NORMAL,
     DEFAULTS},
    {"bce_with_logits sum, input a view",
     f_bce_sum_view,
     2,
     {S2(5, 3), S2(3, 5)},
     NORMAL,
     DEFAULTS},
    {"nll_loss class weights, ignored", f_nll_weighted, 1, {S2(4, 5)}, NORMAL, DEFAULTS},
    {"nll_loss ignore_index a class, none", f_nll_ignore_none, 1, {S3(2, 3, 4)}, NORMAL, DEFAULTS},
    {"nll_loss of log_softmax", f_nll_log_softmax, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"cross_entropy smoothing, weights, ignored", f_ce_smooth, 1, {S3(2, 3, 5)}, NORMAL, DEFAULTS},
    {"cross_entropy smoothing none, a view",
     f_ce_smooth_none_view,
     1,
     {S2(3, 4)},
     NORMAL,
     DEFAULTS},
    {"cross_entropy sum, input used twice", f_ce_sum_twice, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"mlp with loss", f_mlp, 3, {S2(4, 5), S2(6, 5), S2(3, 6)}, NORMAL, DEFAULTS},
    {"attention", f_attention, 3, {S3(2, 2, 3), S3(2, 4, 3), S3(2, 4, 5)}, NORMAL, DEFAULTS},
};

static void test_every_op(void) { gc_table_run(cases, sizeof cases / sizeof *cases, 1234); }

/* ---- the checker itself ---- */

/* A softmax whose backward adds nothing. Checked through a plain sum, the true gradient is 0
 * as well (every row of a softmax sums to one), so the bug passes; checked through the random
 * projection it is caught. */
static void silent_backward(ag_node *n) { (void)n; }
static const ag_op silent_softmax_op = {"silent_softmax", silent_backward};

static ag_tensor *f_silent_softmax(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    ag_tensor *y = ag_softmax(t, ag_scale(t, x[0], 1.0)); /* a correct forward ... */
    ag_tensor *z = ag_op_out(t, y->ndim, y->shape, 1, &x[0]);
    memcpy(z->data, y->data, (size_t)y->numel * sizeof(ag_real));
    ag_op_record(t, &silent_softmax_op, z, 1, &x[0], 0); /* ... recorded with no gradient */
    return z;
}

static ag_tensor *f_silent_softmax_summed(ag_tape *t, ag_tensor *const *x, void *u) {
    return ag_sum(t, f_silent_softmax(t, x, u), AG_ALL, false);
}

static void test_projection_catches_what_a_sum_misses(void) {
    ag_tensor *x = ag_leaf_new(AG_SHAPE(3, 4), true);
    x->name = "logits";
    ag_rng rng;
    ag_rng_seed(&rng, 3);
    gc_table_fill(x, NORMAL, &rng);
    ag_tensor *in[1] = {x};
    /* Through a plain sum the wrong backward looks right: d sum(softmax)/dx = 0 = silence. */
    ag_gradcheck_result plain =
        ag_gradcheck("silent softmax, summed", f_silent_softmax_summed, 1, in, NULL, NULL);
    CU_ASSERT_TRUE(plain.ok);
    /* Through the random projection it is caught, and the message says where. */
    ag_gradcheck_result r = ag_gradcheck("silent softmax", f_silent_softmax, 1, in, NULL, NULL);
    CU_ASSERT_FALSE(r.ok);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.msg, "silent softmax"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.msg, "input 0 (logits) element 0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.msg, "numeric"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.msg, "analytic 0"));
    ag_leaf_free(x);
}

static void test_max_elems_and_kinks(void) {
    ag_tensor *x = ag_leaf_new(AG_SHAPE(10, 10), true);
    for (int i = 0; i < 100; i++) x->data[i] = (i % 3) - 1.0; /* a third exactly at the kink */
    ag_tensor *in[1] = {x};
    ag_gradcheck_opts o = {.max_elems = 30};
    ag_gradcheck_result r = ag_gradcheck("relu at its kink", f_relu, 1, in, NULL, &o);
    CU_ASSERT_FALSE(r.ok); /* the central difference at 0 is 0.5: not a gradient */
    o.skip_kinks = true;
    r = ag_gradcheck("relu at its kink, skipped", f_relu, 1, in, NULL, &o);
    CU_ASSERT_TRUE(r.ok);
    CU_ASSERT_EQUAL(r.checked + r.skipped, 30);
    CU_ASSERT_TRUE(r.skipped >= 9);
    ag_leaf_free(x);
}

static CU_TestInfo gc_tests[] = {
    {"every op against central differences", test_every_op},
    {"projection catches what a plain sum misses", test_projection_catches_what_a_sum_misses},
    {"element cap and kink skipping", test_max_elems_and_kinks},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_table_main("gradcheck", gc_tests,
                         "autograd: every op (float64, tests/autograd/test_gradcheck.c)");
}
