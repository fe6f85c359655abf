/* test_gradcheck_toolkit.c -- the model writer's ops against central differences, in float64
 * (links ag64), as tests/autograd/test_gradcheck.c does for the first ops: the pointwise ops
 * (ops_pointwise.c), max/min/amax/amin (ops_minmax.c), logsumexp/var/std (ops_stats.c), stack,
 * index_select, gather (ops_index.c) and the elementwise losses in every reduction mode
 * (ops_loss_pointwise.c). Odd shapes, broadcasting, views and inputs used twice throughout.
 * Conditions, masks and indices are constants built inside the function.
 */
#include "tests/autograd/gc_table.h"

#include <math.h>
#define CONST(...) ag_tensor_from(t, __VA_ARGS__)
#define TR(x) ag_transpose(t, x, 0, 1)

/* ---- pointwise ---- */
FN(f_abs, ag_abs(t, X0))
FN(f_abs_view, ag_abs(t, TR(X0)))
FN(f_log1p, ag_log1p(t, X0))
FN(f_pow3, ag_pow_scalar(t, X0, 3))
FN(f_pow_half, ag_pow_scalar(t, X0, 0.5))
FN(f_pow_neg, ag_pow_scalar(t, X0, -1.5))
FN(f_pow0, ag_pow_scalar(t, X0, 0))
FN(f_pow, ag_pow(t, X0, X1))
FN(f_pow_self, ag_pow(t, X0, X0))
FN(f_clamp, ag_clamp(t, X0, -0.5, 0.8))
FN(f_clamp_min, ag_clamp(t, X0, -0.3, INFINITY))
FN(f_clamp_max_view, ag_clamp(t, TR(X0), -INFINITY, 0.2))
FN(f_maximum, ag_maximum(t, X0, X1))
FN(f_minimum, ag_minimum(t, X0, X1))
FN(f_maximum_self, ag_maximum(t, X0, X0)) /* a tie everywhere: halves that add up to 1 */
FN(f_minimum_view, ag_minimum(t, TR(X0), X1))
FN(f_where, ag_where(t, CONST(AG_SHAPE(3, 1), (const ag_real[]){1, 0, 1}), X0, X1))
FN(f_where_full, ag_where(t, CONST(AG_SHAPE(2, 3), (const ag_real[]){0, 1, 1, 0, 0, 1}), X0, X0))
FN(f_where_view, ag_where(t, CONST(AG_SHAPE(4), (const ag_real[]){1, 0, 0, 1}), TR(X0), X1))
FN(f_masked_fill, ag_masked_fill(t, X0, CONST(AG_SHAPE(1, 4), (const ag_real[]){0, 1, 0, 1}), -2))
FN(f_masked_fill_view,
   ag_masked_fill(t, TR(X0), CONST(AG_SHAPE(3, 1), (const ag_real[]){1, 0, 0}), -5))
FN(f_softplus, ag_softplus(t, X0, 1, 20))
FN(f_softplus_beta, ag_softplus(t, X0, 2, 1)) /* beta x > 1: x itself */
FN(f_silu, ag_silu(t, X0))
FN(f_silu_view, ag_silu(t, TR(X0)))
FN(f_leaky_relu, ag_leaky_relu(t, X0, 0.1))
FN(f_elu, ag_elu(t, X0, 1.3))

/* ---- reductions ---- */
FN(f_lse_last, ag_logsumexp(t, X0, -1, false))
FN(f_lse_axis0_keep, ag_logsumexp(t, X0, 0, true))
FN(f_lse_middle, ag_logsumexp(t, X0, 1, false))
FN(f_lse_all, ag_logsumexp(t, X0, AG_ALL, false))
FN(f_lse_view, ag_logsumexp(t, TR(X0), 1, true))
FN(f_max_dim, ag_max_dim(t, X0, 1, false, NULL, 0))
FN(f_max_dim_keep, ag_max_dim(t, X0, -1, true, NULL, 0))
FN(f_min_dim, ag_min_dim(t, X0, 0, false, NULL, 0))
FN(f_amax, ag_amax(t, X0, 1, false))
FN(f_amax_all, ag_amax(t, X0, AG_ALL, true))
FN(f_amin, ag_amin(t, X0, -1, true))
FN(f_amin_all, ag_amin(t, X0, AG_ALL, false))
FN(f_var, ag_var(t, X0, 1, 1, false))
FN(f_var_biased_all, ag_var(t, X0, AG_ALL, 0, false))
FN(f_var_keep_c2, ag_var(t, X0, 0, 2, true))
FN(f_var_view, ag_var(t, TR(X0), -1, 1, false))
FN(f_std, ag_std(t, X0, -1, 1, false))
FN(f_std_all_keep, ag_std(t, X0, AG_ALL, 0, true))
FN(f_std_axis0, ag_std(t, X0, 0, 1, true))

/* ---- stack, index_select, gather ---- */
FN(f_stack0, ag_stack(t, 3, (ag_tensor *[]){X0, X1, X2}, 0))
FN(f_stack_last, ag_stack(t, 2, (ag_tensor *[]){X0, X1}, -1))
FN(f_stack_views, ag_stack(t, 2, (ag_tensor *[]){TR(X0), X1}, 1))
FN(f_stack_twice, ag_stack(t, 2, (ag_tensor *[]){X0, X0}, 1))
FN(f_isel0, ag_index_select(t, X0, 0, (const int32_t[]){3, 0, 3, 1}, 4))
FN(f_isel_mid, ag_index_select(t, X0, 1, (const int32_t[]){2, 2, 0}, 3))
FN(f_isel_view, ag_index_select(t, TR(X0), -1, (const int32_t[]){1, 0, 1, 3, 1}, 5))
FN(f_gather0, ag_gather(t, X0, 0, (const int32_t[]){2, 0, 1, 2, 2, 2}, AG_SHAPE(2, 3)))
FN(f_gather1, ag_gather(t, X0, 1, (const int32_t[]){3, 3, 0, 1, 2, 0, 0, 0}, AG_SHAPE(2, 4)))
FN(f_gather_3d, ag_gather(t, X0, 2, (const int32_t[]){1, 0, 1, 1, 0, 2, 2, 2}, AG_SHAPE(2, 2, 2)))
FN(f_gather_view, ag_gather(t, TR(X0), 0, (const int32_t[]){0, 4, 4, 1, 3, 2}, AG_SHAPE(2, 3)))

/* ---- losses ---- */
FN(f_l1_mean, ag_l1_loss(t, X0, X1, AG_REDUCE_MEAN))
FN(f_l1_sum_view, ag_l1_loss(t, TR(X0), X1, AG_REDUCE_SUM))
FN(f_l1_none, ag_l1_loss(t, X0, X1, AG_REDUCE_NONE))
FN(f_sl1_mean, ag_smooth_l1_loss(t, X0, X1, 1, AG_REDUCE_MEAN))
FN(f_sl1_sum, ag_smooth_l1_loss(t, X0, X1, 0.5, AG_REDUCE_SUM))
FN(f_sl1_none_beta0, ag_smooth_l1_loss(t, X0, X1, 0, AG_REDUCE_NONE))
FN(f_sl1_twice, ag_smooth_l1_loss(t, X0, ag_tanh(t, X0), 0.3, AG_REDUCE_MEAN))
FN(f_huber_mean, ag_huber_loss(t, X0, X1, 1, AG_REDUCE_MEAN))
FN(f_huber_sum_view, ag_huber_loss(t, TR(X0), X1, 0.7, AG_REDUCE_SUM))
FN(f_huber_none, ag_huber_loss(t, X0, X1, 0.4, AG_REDUCE_NONE))
/* kl_div: input log_softmax(X0); target softmax(X1) (probabilities) or log_softmax(X1). */
#define KL(red, logt)                                                                              \
    ag_kl_div(t, ag_log_softmax(t, X0), logt ? ag_log_softmax(t, X1) : ag_softmax(t, X1), red, logt)
FN(f_kl_mean, KL(AG_REDUCE_MEAN, false))
FN(f_kl_sum, KL(AG_REDUCE_SUM, false))
FN(f_kl_none, KL(AG_REDUCE_NONE, false))
FN(f_kl_batchmean, KL(AG_REDUCE_BATCHMEAN, false))
FN(f_kl_log_mean, KL(AG_REDUCE_MEAN, true))
FN(f_kl_log_sum, KL(AG_REDUCE_SUM, true))
FN(f_kl_log_none, KL(AG_REDUCE_NONE, true))
FN(f_kl_log_batchmean, KL(AG_REDUCE_BATCHMEAN, true))
FN(f_kl_raw, ag_kl_div(t, X0, X1, AG_REDUCE_BATCHMEAN, false)) /* target POSITIVE, unnormalised */

static const gc_case cases[] = {
    {"abs", f_abs, 1, {S2(3, 5)}, NORMAL, KINKS},
    {"abs of a transposed view", f_abs_view, 1, {S2(4, 3)}, NORMAL, KINKS},
    {"log1p", f_log1p, 1, {S2(3, 4)}, POSITIVE, DEFAULTS},
    {"pow_scalar 3", f_pow3, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"pow_scalar 0.5", f_pow_half, 1, {S2(3, 4)}, POSITIVE, DEFAULTS},
    {"pow_scalar -1.5", f_pow_neg, 1, {S2(2, 5)}, POSITIVE, DEFAULTS},
    {"pow_scalar 0 (gradient 0)", f_pow0, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"pow broadcast", f_pow, 2, {S2(3, 4), S1(4)}, POSITIVE, DEFAULTS},
    {"pow same shape", f_pow, 2, {S3(2, 3, 2), S3(2, 3, 2)}, POSITIVE, DEFAULTS},
    {"pow x^x (input used twice)", f_pow_self, 1, {S2(3, 3)}, POSITIVE, DEFAULTS},
    {"clamp [-0.5, 0.8]", f_clamp, 1, {S2(4, 5)}, NORMAL, KINKS},
    {"clamp min only", f_clamp_min, 1, {S2(4, 5)}, NORMAL, KINKS},
    {"clamp max only, a view", f_clamp_max_view, 1, {S2(5, 4)}, NORMAL, KINKS},
    {"maximum broadcast", f_maximum, 2, {S3(2, 3, 4), S2(3, 1)}, NORMAL, KINKS},
    {"minimum broadcast", f_minimum, 2, {S2(3, 4), S1(4)}, NORMAL, KINKS},
    {"maximum(x, x): ties split in halves", f_maximum_self, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"minimum of a view", f_minimum_view, 2, {S2(4, 3), S2(3, 4)}, NORMAL, KINKS},
    {"where broadcast cond [3, 1], b [4]", f_where, 2, {S2(3, 4), S1(4)}, NORMAL, DEFAULTS},
    {"where a = b (input used twice)", f_where_full, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"where of a view", f_where_view, 2, {S2(4, 3), S2(3, 4)}, NORMAL, DEFAULTS},
    {"masked_fill mask [1, 4]", f_masked_fill, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"masked_fill of a view", f_masked_fill_view, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"softplus", f_softplus, 1, {S2(4, 5)}, NORMAL, DEFAULTS},
    {"softplus beta 2, threshold 1", f_softplus_beta, 1, {S2(4, 5)}, NORMAL, KINKS},
    {"silu", f_silu, 1, {S2(4, 5)}, NORMAL, DEFAULTS},
    {"silu of a view", f_silu_view, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"leaky_relu 0.1", f_leaky_relu, 1, {S2(4, 5)}, NORMAL, KINKS},
    {"elu 1.3", f_elu, 1, {S2(4, 5)}, NORMAL, KINKS},
    {"logsumexp last axis", f_lse_last, 1, {S3(2, 3, 5)}, NORMAL, DEFAULTS},
    {"logsumexp axis 0 keepdim", f_lse_axis0_keep, 1, {S2(4, 3)}, NORMAL, DEFAULTS},
    {"logsumexp middle axis", f_lse_middle, 1, {S3(2, 4, 3)}, NORMAL, DEFAULTS},
    {"logsumexp all", f_lse_all, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"logsumexp of a view keepdim", f_lse_view, 1, {S2(4, 3)}, NORMAL, DEFAULTS},
    {"max_dim axis 1", f_max_dim, 1, {S3(2, 4, 3)}, NORMAL, KINKS},
    {"max_dim last axis keepdim", f_max_dim_keep, 1, {S2(3, 5)}, NORMAL, KINKS},
    {"min_dim axis 0", f_min_dim, 1, {S2(4, 3)}, NORMAL, KINKS},
    {"amax axis 1", f_amax, 1, {S3(2, 4, 3)}, NORMAL, KINKS},
    {"amax all keepdim", f_amax_all, 1, {S2(3, 4)}, NORMAL, KINKS},
    {"amin last axis keepdim", f_amin, 1, {S2(3, 5)}, NORMAL, KINKS},
    {"amin all", f_amin_all, 1, {S3(2, 2, 3)}, NORMAL, KINKS},
    {"var axis 1 unbiased", f_var, 1, {S3(2, 4, 3)}, NORMAL, DEFAULTS},
    {"var all biased", f_var_biased_all, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"var axis 0 keepdim correction 2", f_var_keep_c2, 1, {S2(5, 3)}, NORMAL, DEFAULTS},
    {"var of a view", f_var_view, 1, {S2(4, 3)}, NORMAL, DEFAULTS},
    {"std last axis unbiased", f_std, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"std all biased keepdim", f_std_all_keep, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"std axis 0 keepdim", f_std_axis0, 1, {S3(4, 2, 3)}, NORMAL, DEFAULTS},
    {"stack axis 0", f_stack0, 3, {S2(2, 3), S2(2, 3), S2(2, 3)}, NORMAL, DEFAULTS},
    {"stack last axis", f_stack_last, 2, {S2(3, 2), S2(3, 2)}, NORMAL, DEFAULTS},
    {"stack of a view, axis 1", f_stack_views, 2, {S2(4, 3), S2(3, 4)}, NORMAL, DEFAULTS},
    {"stack input used twice", f_stack_twice, 1, {S2(2, 3)}, NORMAL, DEFAULTS},
    {"index_select axis 0, repeats", f_isel0, 1, {S2(4, 3)}, NORMAL, DEFAULTS},
    {"index_select middle axis", f_isel_mid, 1, {S3(2, 3, 2)}, NORMAL, DEFAULTS},
    {"index_select of a view", f_isel_view, 1, {S2(4, 3)}, NORMAL, DEFAULTS},
    {"gather axis 0", f_gather0, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"gather axis 1, repeats", f_gather1, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"gather last axis of 3-D", f_gather_3d, 1, {S3(2, 3, 3)}, NORMAL, DEFAULTS},
    {"gather of a view", f_gather_view, 1, {S2(3, 5)}, NORMAL, DEFAULTS},
    {"l1_loss mean", f_l1_mean, 2, {S2(3, 4), S2(3, 4)}, NORMAL, KINKS},
    {"l1_loss sum, input a view", f_l1_sum_view, 2, {S2(4, 3), S2(3, 4)}, NORMAL, KINKS},
    {"l1_loss none", f_l1_none, 2, {S3(2, 3, 2), S3(2, 3, 2)}, NORMAL, KINKS},
    {"smooth_l1_loss beta 1 mean", f_sl1_mean, 2, {S2(4, 5), S2(4, 5)}, NORMAL, DEFAULTS},
    {"smooth_l1_loss beta 0.5 sum", f_sl1_sum, 2, {S2(4, 5), S2(4, 5)}, NORMAL, DEFAULTS},
    {"smooth_l1_loss beta 0 (l1) none", f_sl1_none_beta0, 2, {S2(3, 4), S2(3, 4)}, NORMAL, KINKS},
    {"smooth_l1_loss input used twice", f_sl1_twice, 1, {S2(3, 4)}, NORMAL, DEFAULTS},
    {"huber_loss delta 1 mean", f_huber_mean, 2, {S2(4, 5), S2(4, 5)}, NORMAL, DEFAULTS},
    {"huber_loss delta 0.7 sum, a view",
     f_huber_sum_view,
     2,
     {S2(5, 4), S2(4, 5)},
     NORMAL,
     DEFAULTS},
    {"huber_loss delta 0.4 none", f_huber_none, 2, {S2(3, 4), S2(3, 4)}, NORMAL, DEFAULTS},
    {"kl_div mean", f_kl_mean, 2, {S2(3, 4), S2(3, 4)}, NORMAL, DEFAULTS},
    {"kl_div sum", f_kl_sum, 2, {S2(3, 4), S2(3, 4)}, NORMAL, DEFAULTS},
    {"kl_div none", f_kl_none, 2, {S3(2, 2, 3), S3(2, 2, 3)}, NORMAL, DEFAULTS},
    {"kl_div batchmean", f_kl_batchmean, 2, {S2(3, 4), S2(3, 4)}, NORMAL, DEFAULTS},
    {"kl_div log_target mean", f_kl_log_mean, 2, {S2(3, 4), S2(3, 4)}, NORMAL, DEFAULTS},
    {"kl_div log_target sum", f_kl_log_sum, 2, {S2(3, 4), S2(3, 4)}, NORMAL, DEFAULTS},
    {"kl_div log_target none", f_kl_log_none, 2, {S2(2, 5), S2(2, 5)}, NORMAL, DEFAULTS},
    {"kl_div log_target batchmean",
     f_kl_log_batchmean,
     2,
     {S3(2, 2, 3), S3(2, 2, 3)},
     NORMAL,
     DEFAULTS},
    {"kl_div batchmean, raw positive target",
     f_kl_raw,
     2,
     {S2(3, 4), S2(3, 4)},
     POSITIVE,
     DEFAULTS},
};

static void test_every_op(void) { gc_table_run(cases, sizeof cases / sizeof *cases, 4321); }

/* A target that requires no gradient (a constant leaf) gets none, and the input's is right. */
static void test_const_target(void) {
    ag_tensor *x = ag_leaf_new(AG_SHAPE(3, 4), true), *y = ag_leaf_new(AG_SHAPE(3, 4), false);
    ag_rng rng;
    ag_rng_seed(&rng, 9);
    gc_table_fill(x, NORMAL, &rng);
    gc_table_fill(y, POSITIVE, &rng);
    ag_tensor *in[2] = {x, y};
    ag_gradcheck_result r =
        tg_gradcheck("kl_div batchmean, constant target", f_kl_raw, 2, in, NULL, NULL);
    CU_ASSERT_TRUE(r.ok);
    CU_ASSERT_PTR_NULL(y->grad);
    r = tg_gradcheck("huber_loss, constant target", f_huber_mean, 2, in, NULL, NULL);
    CU_ASSERT_TRUE(r.ok);
    CU_ASSERT_PTR_NULL(y->grad);
    ag_leaf_free(x);
    ag_leaf_free(y);
}

static CU_TestInfo gc_tests[] = {
    {"every new op against central differences", test_every_op},
    {"constant targets", test_const_target},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_table_main(
        "gradcheck toolkit", gc_tests,
        "autograd: the model writer's ops (float64, tests/autograd/test_gradcheck_toolkit.c)");
}
