/* test_batchnorm.c -- BatchNorm1d (nn/batchnorm.h), its running statistics kept as buffers of
 * the parameter store, and the eval switch (nn_eval_begin / nn_eval_end, nn/base.h): the seeds'
 * example against LayerNorm, the running statistics after one and two steps against hand-computed
 * values, eval on the running statistics, (N, C, L) inputs against a naive loop, refused inputs,
 * an optimizer step that leaves the buffers alone; the fused op against its composite of ag
 * primitives (values, gradients of input, weight and bias, running mean, variance and count, in
 * training and eval); in float64 (nn64) also the central differences of both in training and
 * in eval. Built twice (CMakeLists.txt): against optim64 and optim. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "optim/optim.h"
#include "tests/gc_harness.h"
#include "tests/tg_test.h"

#ifdef TG_DOUBLE
#define TOL 1e-12
#else
#define TOL 1e-5
#endif


/* A finalized store holding one BatchNorm1d(C) with PyTorch's defaults, prefixed "bn". */
static nn_params *bn_model(nn_batch_norm1d *bn, int C) {
    nn_params *ps = nn_params_new();
    CU_ASSERT_EQUAL(
        nn_batch_norm1d_init(bn, ps, "bn", C, NN_BATCH_NORM_EPS, NN_BATCH_NORM_MOMENTUM), 0);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 1), 0);
    return ps;
}

static void expect_values(const ag_tensor *y, const double *want, double tol) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (ptrdiff_t i = 0; i < y->numel; i++) {
        CU_ASSERT_DOUBLE_EQUAL(ag_get(y, i), want[i], tol);
        if (fabs(ag_get(y, i) - want[i]) > tol)
            fprintf(stderr, "\n  element %td: %.9g, expected %.9g\n", i, (double)ag_get(y, i),
                    want[i]);
    }
}

/* X = [[1, 2], [2, 3]]: LayerNorm(2) [[-1, 1], [-1, 1]], BatchNorm1d(2) in training
 * [[-1, -1], [1, 1]] (to 4 decimals); the running statistics after one and two steps; eval. */
static void test_seeds_example(void) {
    nn_params *ps = nn_params_new();
    nn_layer_norm ln;
    nn_batch_norm1d bn;
    CU_ASSERT_EQUAL(nn_layer_norm_init(&ln, ps, "ln", 1, (const int[]){2}, NN_LAYER_NORM_EPS), 0);
    CU_ASSERT_EQUAL(
        nn_batch_norm1d_init(&bn, ps, "bn", 2, NN_BATCH_NORM_EPS, NN_BATCH_NORM_MOMENTUM), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 2), (const ag_real[]){1, 2, 2, 3});
    expect_values(nn_layer_norm_forward(&ln, &c, x), (const double[]){-1, 1, -1, 1}, 5e-5);
    expect_values(nn_batch_norm1d_forward(&bn, &c, x), (const double[]){-1, -1, 1, 1}, 5e-5);
    /* step 1: batch means (1.5, 2.5), unbiased variances (0.5, 0.5) */
    expect_values(bn.running_mean, (const double[]){0.15, 0.25}, TOL);
    expect_values(bn.running_var, (const double[]){0.95, 0.95}, TOL);
    CU_ASSERT_EQUAL(bn.num_batches_tracked->ndim, 0);
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 1);
    /* step 2, the same batch (with recording off: the statistics still move in training) */
    ag_tape_set_recording(t, false);
    CU_ASSERT_PTR_NOT_NULL(nn_batch_norm1d_forward(&bn, &c, x));
    ag_tape_set_recording(t, true);
    expect_values(bn.running_mean, (const double[]){0.285, 0.475}, TOL);
    expect_values(bn.running_var, (const double[]){0.905, 0.905}, TOL);
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 2);
    /* eval: the running statistics, left alone */
    c.training = false;
    const double s = 1 / sqrt(0.905 + 1e-5);
    expect_values(
        nn_batch_norm1d_forward(&bn, &c, x),
        (const double[]){(1 - 0.285) * s, (2 - 0.475) * s, (2 - 0.285) * s, (3 - 0.475) * s}, 1e-6);
    expect_values(bn.running_mean, (const double[]){0.285, 0.475}, TOL);
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 2);
    /* the affine part applies in both modes */
    bn.weight->data[1] = 2, bn.bias->data[1] = -1;
    c.training = true;
    expect_values(nn_batch_norm1d_forward(&bn, &c, x), (const double[]){-1, -3, 1, 1}, 1e-4);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* (N, C, L): statistics over N and L, against a naive loop; eval after one step. */
static void test_ncl(void) {
    enum { N = 3, C = 2, L = 4 };
    nn_batch_norm1d bn;
    nn_params *ps = bn_model(&bn, C);
    bn.weight->data[0] = 0.5, bn.bias->data[1] = 0.25;
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 2);
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(N, C, L));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)(3 * ag_rng_normal(&r) + 1);
    double mean[C] = {0}, var[C] = {0}, want[N * C * L], want_eval[N * C * L];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++)
            for (int l = 0; l < L; l++) mean[k] += x->data[(n * C + k) * L + l] / (N * L);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++)
            for (int l = 0; l < L; l++)
                var[k] += pow(x->data[(n * C + k) * L + l] - mean[k], 2) / (N * L);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++)
            for (int l = 0; l < L; l++) {
                int i = (n * C + k) * L + l;
                double rm = 0.1 * mean[k], rv = 0.9 + 0.1 * var[k] * N * L / (N * L - 1);
                want[i] = (x->data[i] - mean[k]) / sqrt(var[k] + 1e-5) * bn.weight->data[k] +
                          bn.bias->data[k];
                want_eval[i] =
                    (x->data[i] - rm) / sqrt(rv + 1e-5) * bn.weight->data[k] + bn.bias->data[k];
            }
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *y = nn_batch_norm1d_forward(&bn, &c, x);
    expect_values(y, want, 1e-5);
    CU_ASSERT_TRUE(y->ndim == 3 && y->shape[0] == N && y->shape[1] == C && y->shape[2] == L);
    expect_values(bn.running_mean, (const double[]){0.1 * mean[0], 0.1 * mean[1]}, 1e-6);
    c.training = false;
    expect_values(nn_batch_norm1d_forward(&bn, &c, x), want_eval, 1e-5);
    /* a strided input: the same values */
    c.training = true;
    ag_tensor *xt = ag_transpose(t, ag_contiguous(t, ag_transpose(t, x, 0, 2)), 0, 2);
    CU_ASSERT_FALSE(ag_is_contiguous(xt));
    expect_values(nn_batch_norm1d_forward(&bn, &c, xt), want, 1e-5);
    ag_tape_free(t);
    nn_params_free(ps);
}

typedef ag_tensor *bn_forward(const nn_batch_norm1d *, const nn_ctx *, ag_tensor *);

/* In training, fwd (the op or its composite, named op) refuses an input of 2 channels and a batch
 * of one value per channel (no variance to train with), naming itself, and counts no batch. */
static void expect_refused(bn_forward *fwd, const char *op, const nn_batch_norm1d *bn, ag_tape *t) {
    nn_ctx c = {.tape = t, .training = true};
    CU_ASSERT_PTR_NULL(fwd(bn, &c, ag_tensor_new(t, AG_SHAPE(4, 2))));
    TG_CAPTURED_HAS(op, "input [4, 2]", "weight [3]");
    CU_ASSERT_PTR_NULL(fwd(bn, &c, ag_tensor_new(t, AG_SHAPE(1, 3))));
    TG_CAPTURED_HAS(op, "more than 1 value per channel", "[1, 3]");
    CU_ASSERT_EQUAL(bn->num_batches_tracked->data[0], 0);
}

static void test_errors(void) {
    nn_batch_norm1d bn;
    nn_params *ps = bn_model(&bn, 3);
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    expect_refused(nn_batch_norm1d_forward, "batch_norm1d", &bn, t);
    nn_ctx c = {.tape = t, .training = true};
    CU_ASSERT_PTR_NULL(nn_batch_norm1d_forward(&bn, &c, ag_tensor_new(t, AG_SHAPE(4, 2, 3))));
    TG_CAPTURED_HAS("batch_norm1d", "input [4, 2, 3]", "weight [3]");
    CU_ASSERT_PTR_NULL(nn_batch_norm1d_forward(&bn, &c, ag_tensor_new(t, AG_SHAPE(3))));
    TG_CAPTURED_HAS("batch_norm1d", "input [3]", "(N, C) or (N, C, L)");
    c.training = false; /* eval takes one value per channel */
    CU_ASSERT_PTR_NOT_NULL(nn_batch_norm1d_forward(&bn, &c, ag_tensor_new(t, AG_SHAPE(1, 3))));
    CU_ASSERT_PTR_NULL(nn_batch_norm1d_forward(&bn, &c, NULL));
    ag_tape_free(t);
    nn_batch_norm1d b2;
    TG_EXPECT_ERROR(nn_batch_norm1d_init(&b2, NULL, "x", 0, 1e-5, 0.1), "num_features = 0");
    TG_EXPECT_ERROR(nn_batch_norm1d_init(&b2, NULL, "x", 2, 1e-5, 1.5), "momentum = 1.5");
    ag_set_error_handler(NULL, NULL);
    nn_params_free(ps);
}

/* The buffers in the store: names in PyTorch's state_dict order, outside the parameters and
 * the flat buffers; an optimizer step (and its saved state) leaves them alone. */
static void test_buffers_and_optimizer(void) {
    nn_params *ps = nn_params_new();
    nn_linear fc;
    nn_batch_norm1d bn;
    CU_ASSERT_EQUAL(nn_linear_init(&fc, ps, "fc", 3, 4, true), 0);
    CU_ASSERT_EQUAL(
        nn_batch_norm1d_init(&bn, ps, "bn", 4, NN_BATCH_NORM_EPS, NN_BATCH_NORM_MOMENTUM), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
    const char *all[] = {"fc.weight",
                         "fc.bias",
                         "bn.weight",
                         "bn.bias",
                         "bn.running_mean",
                         "bn.running_var",
                         "bn.num_batches_tracked"};
    CU_ASSERT_EQUAL(nn_params_count(ps), 4);
    CU_ASSERT_EQUAL(nn_params_tensor_count(ps), 7);
    for (size_t i = 0; i < 7; i++) {
        const ag_tensor *p = nn_params_tensor_at(ps, i);
        CU_ASSERT_STRING_EQUAL(p->name, all[i]);
        CU_ASSERT_EQUAL(p->requires_grad, i < 4);
        CU_ASSERT_EQUAL(p->grad == NULL, i >= 4);
        if (i < 4) CU_ASSERT_PTR_EQUAL(p, nn_params_at(ps, i));
    }
    CU_ASSERT_PTR_EQUAL(nn_params_find(ps, "bn.running_var"), bn.running_var);
    CU_ASSERT_EQUAL(nn_params_numel(ps), 12 + 4 + 4 + 4);
    const ag_real *v = nn_params_values(ps);
    for (size_t i = 4; i < 7; i++) { /* outside the flat range the optimizers walk */
        const ag_real *d = nn_params_tensor_at(ps, i)->data;
        CU_ASSERT_TRUE(d < v || d >= v + nn_params_flat_size(ps));
    }
    optim *o = optim_new(ps, optim_adam(0.1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 9);
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(5, 3));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(&r);
    ag_tensor *y = nn_batch_norm1d_forward(&bn, &c, nn_linear_forward(&fc, &c, x));
    ag_tensor *loss = ag_sum(t, ag_mul(t, y, ag_tanh(t, y)), AG_ALL, false);
    CU_ASSERT_EQUAL_FATAL(ag_backward(t, loss), 0);
    ag_real rm[4], rv[4], w0 = bn.weight->data[0];
    memcpy(rm, bn.running_mean->data, sizeof rm);
    memcpy(rv, bn.running_var->data, sizeof rv);
    CU_ASSERT_NOT_EQUAL(rm[0], 0); /* the forward moved them */
    CU_ASSERT_EQUAL(optim_step(o), 0);
    CU_ASSERT_NOT_EQUAL(bn.weight->data[0], w0); /* the step moved the parameters ... */
    CU_ASSERT_EQUAL(memcmp(rm, bn.running_mean->data, sizeof rm), 0); /* ... not the buffers */
    CU_ASSERT_EQUAL(memcmp(rv, bn.running_var->data, sizeof rv), 0);
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 1);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(optim_save_state(o, ck), 0); /* state for the 4 parameters only */
    CU_ASSERT_EQUAL(nn_ckpt_count(ck), 2 * 4);
    CU_ASSERT_PTR_NULL(nn_ckpt_find(ck, "optim.adam.m.bn.running_mean"));
    nn_ckpt_free(ck);
    /* reinit resets the buffers as finalize did */
    CU_ASSERT_EQUAL(nn_params_reinit(ps, 5), 0);
    CU_ASSERT_EQUAL(bn.running_mean->data[0], 0);
    CU_ASSERT_EQUAL(bn.running_var->data[0], 1);
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 0);
    ag_tape_free(t);
    optim_free(o);
    nn_params_free(ps);
}

/* nn_eval_begin turns training and recording off, nn_eval_end restores both; pairs nest. */
static void test_eval_switch(void) {
    nn_batch_norm1d bn;
    nn_params *ps = bn_model(&bn, 2);
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 3);
    nn_ctx c = {.tape = t, .training = true, .rng = &r};
    nn_dropout drop = {0.5};
    ag_tensor *w = ag_leaf_new(AG_SHAPE(4, 2), true);
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(4, 2), (const ag_real[]){1, 2, 3, 4, 5, 6, 7, 8});
    size_t n0 = ag_tape_stats_get(t).nodes;
    nn_eval_saved e = nn_eval_begin(&c);
    CU_ASSERT_FALSE(c.training);
    ag_tensor *y = nn_batch_norm1d_forward(&bn, &c, ag_mul(t, x, w));
    CU_ASSERT_PTR_NOT_NULL(y);
    CU_ASSERT_FALSE(y->requires_grad);
    CU_ASSERT_PTR_EQUAL(nn_dropout_forward(&drop, &c, y), y); /* dropout is the identity */
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 0);      /* statistics untouched */
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).nodes, n0);          /* nothing recorded */
    nn_eval_saved inner = nn_eval_begin(&c);                  /* nested: still eval after */
    nn_eval_end(&c, inner);
    CU_ASSERT_FALSE(c.training);
    CU_ASSERT_FALSE(ag_mul(t, x, w)->requires_grad);
    nn_eval_end(&c, e);
    CU_ASSERT_TRUE(c.training);
    y = ag_mul(t, x, w);
    CU_ASSERT_TRUE(y->requires_grad);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).nodes, n0 + 1);
    CU_ASSERT_PTR_NOT_NULL(nn_batch_norm1d_forward(&bn, &c, y));
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 1);
    /* from eval with recording off, the pair restores exactly that */
    c.training = false;
    ag_tape_set_recording(t, false);
    e = nn_eval_begin(&c);
    nn_eval_end(&c, e);
    CU_ASSERT_FALSE(c.training);
    CU_ASSERT_FALSE(ag_tape_set_recording(t, true));
    /* no tape: only the flag */
    nn_ctx bare = {.training = true};
    e = nn_eval_begin(&bare);
    CU_ASSERT_FALSE(bare.training);
    nn_eval_end(&bare, e);
    CU_ASSERT_TRUE(bare.training);
    ag_leaf_free(w);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* ---- the fused op against its composite ---- */

typedef struct bn_run {
    ag_real y[64], g[64 + 2 * 8], rm[8], rv[8], nbt;
} bn_run;

/* One BatchNorm1d of hand-made leaves (weight, bias random; running statistics away from their
 * initial values), fused or composite: a forward with a backward through a fixed projection,
 * then (training) a second forward, so that the running statistics move twice. */
static void bn_once(bool composite, bool training, bool strided, int nd, const int *d,
                    bn_run *out) {
    const int C = d[1];
    ag_rng r;
    ag_rng_seed(&r, 61);
    ag_tensor *xl = strided ? ag_leaf_new(AG_SHAPE(d[1], d[0]), true) : ag_leaf_new(nd, d, true);
    ag_tensor *w = ag_leaf_new(AG_SHAPE(C), true), *b = ag_leaf_new(AG_SHAPE(C), true);
    ag_tensor *rm = ag_leaf_new(AG_SHAPE(C), false), *rv = ag_leaf_new(AG_SHAPE(C), false);
    ag_tensor *nbt = ag_leaf_new(AG_SHAPE(1), false);
    for (ptrdiff_t i = 0; i < xl->numel; i++) xl->data[i] = (ag_real)(2 * ag_rng_normal(&r) + 1);
    for (int k = 0; k < C; k++) {
        w->data[k] = (ag_real)(1 + 0.5 * ag_rng_normal(&r));
        b->data[k] = (ag_real)ag_rng_normal(&r);
        rm->data[k] = (ag_real)(0.3 * ag_rng_normal(&r));
        rv->data[k] = (ag_real)(0.5 + ag_rng_uniform(&r));
    }
    nbt->data[0] = 3;
    nn_batch_norm1d bn = {.weight = w,
                          .bias = b,
                          .running_mean = rm,
                          .running_var = rv,
                          .num_batches_tracked = nbt,
                          .num_features = C,
                          .eps = 1e-5,
                          .momentum = 0.1};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = training};
    ag_tensor *x = strided ? ag_transpose(t, xl, 0, 1) : xl;
    ag_tensor *y = (composite ? nn_batch_norm1d_composite : nn_batch_norm1d_forward)(&bn, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL_FATAL(y->numel, x->numel);
    ag_tensor *proj = ag_tensor_new(t, y->ndim, y->shape);
    for (ptrdiff_t i = 0; i < proj->numel; i++) proj->data[i] = (ag_real)ag_rng_normal(&r);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, proj), AG_ALL, false)), 0);
    memset(out, 0, sizeof *out);
    memcpy(out->y, y->data, sizeof *out->y * (size_t)y->numel);
    memcpy(out->g, xl->grad, sizeof *out->g * (size_t)xl->numel);
    memcpy(out->g + xl->numel, w->grad, sizeof *out->g * (size_t)C);
    memcpy(out->g + xl->numel + C, b->grad, sizeof *out->g * (size_t)C);
    if (training)
        CU_ASSERT_PTR_NOT_NULL(
            (composite ? nn_batch_norm1d_composite : nn_batch_norm1d_forward)(&bn, &c, x));
    memcpy(out->rm, rm->data, sizeof *out->rm * (size_t)C);
    memcpy(out->rv, rv->data, sizeof *out->rv * (size_t)C);
    out->nbt = nbt->data[0];
    ag_tape_free(t);
    ag_tensor *leaves[6] = {xl, w, b, rm, rv, nbt};
    for (int k = 0; k < 6; k++) ag_leaf_free(leaves[k]);
}

static double max_abs_diff(const ag_real *a, const ag_real *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Values, the gradients of input, weight and bias, running mean, variance and count: the fused
 * op and its composite agree, in training (two steps) and in eval, on (N, C), (N, C, L) and a
 * strided input. */
static void test_fused_vs_composite(void) {
    static const struct {
        int nd, d[3];
        bool strided;
    } shapes[] = {{2, {5, 3}, false}, {3, {3, 2, 4}, false}, {2, {4, 6}, true}};
    static bn_run f, k;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int training = 0; training < 2; training++) {
            const int nd = shapes[i].nd, *d = shapes[i].d, C = d[1];
            const size_t n = (size_t)d[0] * d[1] * (nd == 3 ? d[2] : 1);
            bn_once(false, training, shapes[i].strided, nd, d, &f);
            bn_once(true, training, shapes[i].strided, nd, d, &k);
            double dy = max_abs_diff(f.y, k.y, n), dg = max_abs_diff(f.g, k.g, n + 2 * C),
                   dm = max_abs_diff(f.rm, k.rm, C), dv = max_abs_diff(f.rv, k.rv, C);
            if (!(dy <= 10 * TOL && dg <= 100 * TOL && dm <= TOL && dv <= TOL))
                fprintf(stderr, "\n  shape %zu, training %d: y %g, grads %g, mean %g, var %g\n", i,
                        training, dy, dg, dm, dv);
            CU_ASSERT(dy <= 10 * TOL);
            CU_ASSERT(dg <= 100 * TOL);
            CU_ASSERT(dm <= TOL);
            CU_ASSERT(dv <= TOL);
            CU_ASSERT_EQUAL(f.nbt, training ? 5 : 3);
            CU_ASSERT_EQUAL(k.nbt, f.nbt);
            if (!training) { /* eval leaves the statistics alone */
                bn_run start;
                bn_once(false, false, shapes[i].strided, nd, d, &start);
                CU_ASSERT_EQUAL(memcmp(k.rm, start.rm, sizeof(ag_real) * (size_t)C), 0);
            }
            CU_ASSERT(max_abs_diff(k.g + n, (ag_real[8]){0}, (size_t)C) > 0); /* dweight */
        }
    /* the composite refuses what the op refuses, naming itself */
    nn_batch_norm1d bn;
    nn_params *ps = bn_model(&bn, 3);
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    expect_refused(nn_batch_norm1d_composite, "batch_norm1d_composite", &bn, t);
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
    nn_params_free(ps);
}

/* ---- central differences (float64) ---- */
#ifdef TG_DOUBLE

/* x, weight, bias; running statistics from the user pointer (NULL: training). */
typedef struct bn_case {
    bool training, strided, composite;
} bn_case;
static ag_tensor *f_bn(ag_tape *t, ag_tensor *const *x, void *u) {
    const bn_case *k = u;
    static ag_real rm[8] = {0.3, -0.2, 0.1, 0.5, 0, 0, 0, 0},
                   rv[8] = {0.5, 2, 1.5, 0.7, 1, 1, 1, 1}, nbt[1];
    ag_tensor *in = k->strided ? ag_transpose(t, x[0], 0, 1) : x[0];
    ag_tensor mean, var, count;
    ag_leaf_init(&mean, rm, NULL, AG_SHAPE(in->shape[1]));
    ag_leaf_init(&var, rv, NULL, AG_SHAPE(in->shape[1]));
    ag_leaf_init(&count, nbt, NULL, 0, (const int[1]){0}); /* a scalar (shape not read) */
    nn_batch_norm1d bn = {.weight = x[1],
                          .bias = x[2],
                          .running_mean = &mean,
                          .running_var = &var,
                          .num_batches_tracked = &count,
                          .num_features = in->shape[1],
                          .eps = 1e-5,
                          .momentum = 0}; /* the statistics stay put across evaluations */
    nn_ctx c = {.tape = t, .training = k->training};
    return (k->composite ? nn_batch_norm1d_composite : nn_batch_norm1d_forward)(&bn, &c, in);
}

static void test_gradcheck(void) {
    static const struct {
        const char *name;
        bn_case k;
        int nd, d[3], C;
    } cases[] = {
        {"batch_norm1d training (N, C)", {true, false, false}, 2, {5, 3}, 3},
        {"batch_norm1d training (N, C, L)", {true, false, false}, 3, {3, 2, 4}, 2},
        {"batch_norm1d training, strided (N, C)", {true, true, false}, 2, {4, 6}, 4},
        {"batch_norm1d eval (N, C, L)", {false, false, false}, 3, {2, 4, 3}, 4},
        {"batch_norm1d training (N, C) (composite)", {true, false, true}, 2, {5, 3}, 3},
        {"batch_norm1d training (N, C, L) (composite)", {true, false, true}, 3, {3, 2, 4}, 2},
        {"batch_norm1d training, strided (N, C) (composite)", {true, true, true}, 2, {4, 6}, 4},
        {"batch_norm1d eval (N, C, L) (composite)", {false, false, true}, 3, {2, 4, 3}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ag_rng r;
        ag_rng_seed(&r, 40 + i);
        ag_tensor *in[3] = {ag_leaf_new(cases[i].nd, cases[i].d, true),
                            ag_leaf_new(AG_SHAPE(cases[i].C), true),
                            ag_leaf_new(AG_SHAPE(cases[i].C), true)};
        for (int k = 0; k < 3; k++)
            for (ptrdiff_t e = 0; e < in[k]->numel; e++)
                in[k]->data[e] = ag_rng_normal(&r) + (k == 1);
        ag_gradcheck_result res = gc_expect(cases[i].name, f_bn, 3, in, (void *)&cases[i].k, NULL);
        CU_ASSERT_EQUAL(res.checked, (int)(in[0]->numel + 2 * cases[i].C));
        gc_free(in, 3);
    }
}
#endif

static CU_TestInfo tests[] = {
    {"seeds' example: LayerNorm vs BatchNorm, running statistics, eval", test_seeds_example},
    {"(N, C, L) input, strided input", test_ncl},
    {"bad inputs refused", test_errors},
    {"fused against composite: values, gradients, running statistics", test_fused_vs_composite},
    {"buffers in the store; an optimizer step leaves them alone", test_buffers_and_optimizer},
    {"eval switch: no tape, no dropout, restored", test_eval_switch},
#ifdef TG_DOUBLE
    {"gradcheck: training and eval", test_gradcheck},
#endif
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("nn_batchnorm", tests, "nn: BatchNorm1d (float64, tests/nn/test_batchnorm.c)");
}
