/* test_ops.c -- forward values, fused-vs-composite, masks, errors and tape lifetimes (float32).
 * The fused kernels of the nn layers (attention, AddNorm, GRU cell, additive scores) are tested
 * against their composites in tests/nn/test_fused.c.
 */
#include "autograd/ag_op.h"
#include "tests/tg_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static ag_rng rng;
static ag_tensor *randn(ag_tape *t, int nd, const int *shape) {
    ag_tensor *x = ag_tensor_new(t, nd, shape);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(&rng);
    return x;
}
static double max_diff(const ag_tensor *a, const ag_tensor *b) {
    double m = 0;
    for (ptrdiff_t i = 0; i < a->numel; i++) m = fmax(m, fabs((double)ag_get(a, i) - ag_get(b, i)));
    return a->numel == b->numel ? m : INFINITY;
}

/* ---- matmul against a triple loop ---- */

/* y (B, M, N) = a (B or 1, M, K) b (B or 1, K, N), read through any strides, in double. */
static void naive_matmul(const ag_tensor *a, const ag_tensor *b, double *y) {
    int la = a->ndim - 1, lb = b->ndim - 1;
    int M = a->shape[la - 1], K = a->shape[la], N = b->shape[lb];
    int B = a->ndim == 3 ? a->shape[0] : b->ndim == 3 ? b->shape[0] : 1;
    for (int i = 0; i < B; i++)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double s = 0;
                for (int k = 0; k < K; k++) {
                    ptrdiff_t ia = (a->ndim == 3 ? i * a->stride[0] : 0) + m * a->stride[la - 1] +
                                   k * a->stride[la];
                    ptrdiff_t ib = (b->ndim == 3 ? i * b->stride[0] : 0) + k * b->stride[lb - 1] +
                                   n * b->stride[lb];
                    s += (double)a->data[ia] * b->data[ib];
                }
                y[((ptrdiff_t)i * M + m) * N + n] = s;
            }
}

static void check_matmul(ag_tape *t, ag_tensor *a, ag_tensor *b, const char *what) {
    ag_tensor *y = ag_matmul(t, a, b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    static double ref[1 << 16];
    CU_ASSERT_FATAL(y->numel <= (1 << 16));
    naive_matmul(a, b, ref);
    double err = 0;
    for (ptrdiff_t i = 0; i < y->numel; i++) err = fmax(err, fabs(y->data[i] - ref[i]));
    if (err > 1e-4) fprintf(stderr, "\n  matmul %s: max error %g\n", what, err);
    CU_ASSERT_TRUE(err <= 1e-4);
}

static void test_matmul_vs_naive(void) {
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 11);
    /* small (engine loop: column blocks of 8 and 16, exact and ragged, read in place or
     * packed) and large (BLIS) products, odd non-square shapes */
    int sizes[][3] = {{7, 13, 5}, {1, 9, 1},  {6, 10, 8},   {4, 9, 12}, {5, 7, 16},
                      {3, 5, 20}, {2, 64, 8}, {33, 47, 29}, {65, 31, 3}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int M = sizes[s][0], K = sizes[s][1], N = sizes[s][2];
        ag_tensor *a = randn(t, AG_SHAPE(M, K)), *b = randn(t, AG_SHAPE(K, N));
        ag_tensor *at = randn(t, AG_SHAPE(K, M)), *bt = randn(t, AG_SHAPE(N, K));
        check_matmul(t, a, b, "2-D");
        check_matmul(t, ag_transpose(t, at, 0, 1), b, "a transposed");
        check_matmul(t, a, ag_transpose(t, bt, 0, 1), "b transposed");
        check_matmul(t, ag_transpose(t, at, 0, 1), ag_transpose(t, bt, 0, 1), "both transposed");
        ag_tensor *a3 = randn(t, AG_SHAPE(3, M, K)), *b3 = randn(t, AG_SHAPE(3, K, N));
        check_matmul(t, a3, b3, "batched");
        check_matmul(t, a3, b, "batched by shared (folded)");
        check_matmul(t, a, b3, "shared by batched");
        check_matmul(t, a3, ag_transpose(t, randn(t, AG_SHAPE(3, N, K)), 1, 2), "batched b^T");
        /* a batch whose rows do not continue from batch to batch: no folding */
        ag_tensor *mbk = randn(t, AG_SHAPE(M, 3, K));
        check_matmul(t, ag_permute(t, mbk, (const int[]){1, 0, 2}), b, "permuted batch by shared");
    }
    ag_tape_free(t);
}

/* 4-D: heads as permuted views, checked element by element against a quadruple loop. */
static void test_matmul_4d_views(void) {
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 17);
    int B = 3, T = 7, h = 2, d = 5, S = 6;
    ag_tensor *x = randn(t, AG_SHAPE(B, T, h, d)), *z = randn(t, AG_SHAPE(B, S, h, d));
    ag_tensor *q = ag_permute(t, x, (const int[]){0, 2, 1, 3}),
              *k = ag_permute(t, z, (const int[]){0, 2, 1, 3});
    ag_tensor *y = ag_matmul(t, q, ag_transpose(t, k, -1, -2)); /* (B, h, T, S) */
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(y->ndim, 4);
    CU_ASSERT_EQUAL(y->shape[3], S);
    double err = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < h; j++)
            for (int i = 0; i < T; i++)
                for (int s2 = 0; s2 < S; s2++) {
                    double ref = 0;
                    for (int e = 0; e < d; e++)
                        ref += (double)x->data[((b * T + i) * h + j) * d + e] *
                               z->data[((b * S + s2) * h + j) * d + e];
                    err = fmax(err, fabs(ref - y->data[((b * h + j) * T + i) * S + s2]));
                }
    CU_ASSERT_TRUE(err < 1e-5);
    ag_tape_free(t);
}

static void test_linear_vs_composite(void) {
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 12);
    ag_tensor *x = randn(t, AG_SHAPE(2, 7, 37)), *w = randn(t, AG_SHAPE(19, 37));
    ag_tensor *b = randn(t, AG_SHAPE(19));
    ag_tensor *fused = ag_linear(t, x, w, b);
    ag_tensor *comp = ag_add(t, ag_matmul(t, x, ag_transpose(t, w, 0, 1)), b);
    CU_ASSERT_EQUAL(fused->ndim, 3);
    CU_ASSERT_EQUAL(fused->shape[2], 19);
    CU_ASSERT_TRUE(max_diff(fused, comp) < 1e-4);
    ag_tape_free(t);
}

static void test_broadcast_values(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *a = ag_tensor_from(t, AG_SHAPE(2, 1, 3), (const ag_real[]){1, 2, 3, 4, 5, 6});
    ag_tensor *b = ag_tensor_from(t, AG_SHAPE(2, 1), (const ag_real[]){10, 20});
    ag_tensor *y = ag_mul(t, a, b); /* (2, 2, 3) */
    const ag_real want[] = {10, 20, 30, 20, 40, 60, 40, 50, 60, 80, 100, 120};
    CU_ASSERT_EQUAL(y->ndim, 3);
    CU_ASSERT_EQUAL(y->shape[0], 2);
    CU_ASSERT_EQUAL(y->shape[1], 2);
    CU_ASSERT_EQUAL(y->shape[2], 3);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(y->data[i], want[i]);
    ag_tensor *d = ag_div(t, ag_sub(t, a, b), ag_tensor_from(t, AG_SHAPE(1), (const ag_real[]){2}));
    CU_ASSERT_EQUAL(d->data[0], (1 - 10) / 2.0f);
    CU_ASSERT_EQUAL(d->data[11], (6 - 20) / 2.0f);
    ag_tape_free(t);
}

static void test_shapes_and_views(void) {
    ag_tape *t = ag_tape_new();
    ag_real v[24];
    for (int i = 0; i < 24; i++) v[i] = (ag_real)i;
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 3, 4), v);
    ag_tensor *p = ag_permute(t, x, (const int[]){2, 0, 1}); /* (4, 2, 3) view */
    CU_ASSERT_EQUAL(p->data, x->data);
    CU_ASSERT_FALSE(ag_is_contiguous(p));
    CU_ASSERT_EQUAL(ag_get(p, 1 * 6 + 1 * 3 + 2), 21); /* p[1,1,2] = x[1,2,1] */
    ag_tensor *r = ag_reshape(t, p, AG_SHAPE(-1, 6));  /* a copy, then a view */
    CU_ASSERT_EQUAL(r->shape[0], 4);
    CU_ASSERT_TRUE(ag_is_contiguous(r));
    CU_ASSERT_EQUAL(r->data[1], 4); /* p[0,0,1] = x[0,1,0] */
    ag_tensor *n = ag_narrow(t, x, 2, 1, 2);
    CU_ASSERT_EQUAL(n->data, x->data + 1);
    CU_ASSERT_EQUAL(ag_get(n, 3), 6); /* n[0,1,1] = x[0,1,2] */
    ag_tensor *c = ag_concat(t, 2, (ag_tensor *[]){n, ag_narrow(t, x, 2, 0, 1)}, 2);
    CU_ASSERT_EQUAL(c->shape[2], 3);
    CU_ASSERT_EQUAL(c->data[0], 1);
    CU_ASSERT_EQUAL(c->data[2], 0);
    ag_tensor *ri = ag_repeat_interleave(
        t, ag_tensor_from(t, AG_SHAPE(2, 2), (const ag_real[]){1, 2, 3, 4}), 2, 0);
    const ag_real want[] = {1, 2, 1, 2, 3, 4, 3, 4};
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(ri->data[i], want[i]);
    ag_tensor *m = ag_max(t, x, 1, false);
    CU_ASSERT_EQUAL(m->shape[1], 4);
    CU_ASSERT_EQUAL(m->data[5], 21);
    ag_tensor *s = ag_sum(t, x, AG_ALL, false);
    CU_ASSERT_EQUAL(s->ndim, 0);
    CU_ASSERT_EQUAL(s->data[0], 276);
    ag_tensor *mean = ag_mean(t, x, -1, true);
    CU_ASSERT_EQUAL(mean->ndim, 3);
    CU_ASSERT_EQUAL(mean->data[5], 21.5f);
    ag_tape_free(t);
}

/* A view shares its base's gradient: backward through views lands in the right elements. */
static void test_view_gradients_reach_the_base(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *w = ag_leaf_new(AG_SHAPE(3, 4), true);
    for (int i = 0; i < 12; i++) w->data[i] = (ag_real)i;
    ag_tensor *col = ag_narrow(t, ag_transpose(t, w, 0, 1), 0, 2, 1); /* w[:, 2] as (1, 3) */
    ag_tensor *loss = ag_sum(t, ag_mul(t, col, col), AG_ALL, false);  /* sum w[i,2]^2 */
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(w->grad[i], i % 4 == 2 ? 2 * w->data[i] : 0);
    ag_tape_free(t);
    ag_leaf_free(w);
}

static void test_gather_rows(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *tab = ag_leaf_new(AG_SHAPE(4, 2), true);
    for (int i = 0; i < 8; i++) tab->data[i] = (ag_real)i;
    ag_tensor *y = ag_gather_rows(t, tab, (const int32_t[]){3, 0, 3}, AG_SHAPE(3));
    CU_ASSERT_EQUAL(y->shape[0], 3);
    CU_ASSERT_EQUAL(y->shape[1], 2);
    CU_ASSERT_EQUAL(y->data[0], 6);
    CU_ASSERT_EQUAL(y->data[3], 1);
    ag_backward(t, ag_sum(t, y, AG_ALL, false));
    const ag_real want[] = {1, 1, 0, 0, 0, 0, 2, 2}; /* row 3 gathered twice */
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(tab->grad[i], want[i]);
    ag_tape_free(t);
    ag_leaf_free(tab);
}

/* ---- softmax family ---- */

static void test_masked_softmax_semantics(void) {
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 13);
    ag_tensor *x = randn(t, AG_SHAPE(2, 2, 4));
    /* lengths (B,): row 0 sees 2 keys, row 1 none (uniform, as d2l's -1e6 makes it) */
    ag_tensor *y = ag_masked_softmax(t, x, (const int32_t[]){2, 0}, 1);
    for (int q = 0; q < 2; q++) {
        const ag_real *r0 = y->data + q * 4, *r1 = y->data + 8 + q * 4;
        CU_ASSERT_DOUBLE_EQUAL(r0[0] + r0[1], 1, 1e-6);
        CU_ASSERT_EQUAL(r0[2], 0);
        CU_ASSERT_EQUAL(r0[3], 0);
        for (int k = 0; k < 4; k++) CU_ASSERT_DOUBLE_EQUAL(r1[k], 0.25, 1e-7);
    }
    /* lengths (B, Tq), one per query, longer than Tk meaning all */
    ag_tensor *z = ag_masked_softmax(t, x, (const int32_t[]){1, 3, 9, 4}, 2);
    CU_ASSERT_DOUBLE_EQUAL(z->data[0], 1, 1e-7);
    CU_ASSERT_EQUAL(z->data[4 + 3], 0);
    CU_ASSERT_TRUE(z->data[4 + 2] > 0);
    ag_tensor *plain = ag_softmax(t, x);
    CU_ASSERT_TRUE(max_diff(ag_masked_softmax(t, x, (const int32_t[]){4, 4, 4, 4}, 2), plain) <
                   1e-7);
    CU_ASSERT_TRUE(max_diff(ag_masked_softmax(t, x, NULL, 0), plain) == 0);
    /* max-subtracted: huge scores do not overflow */
    ag_tensor *big = ag_tensor_from(t, AG_SHAPE(1, 1, 2), (const ag_real[]){1000, 999});
    ag_tensor *sb = ag_softmax(t, big);
    CU_ASSERT_DOUBLE_EQUAL(sb->data[0], 1 / (1 + exp(-1.0)), 1e-6);
    ag_tape_free(t);
}

static void test_softmax_ce_vs_composite(void) {
    ag_tape *t = ag_tape_new();
    ag_rng_seed(&rng, 14);
    ag_tensor *z = randn(t, AG_SHAPE(2, 3, 7));
    const int32_t labels[] = {0, 6, 3, 2, 2, 5};
    const ag_real w[] = {1, 1, 0, 1, 0.5f, 1};
    ag_tensor *fused = ag_softmax_ce(t, z, labels, w);
    ag_tensor *lsm = ag_log_softmax(t, z);
    CU_ASSERT_EQUAL(fused->ndim, 2);
    for (int r = 0; r < 6; r++)
        CU_ASSERT_DOUBLE_EQUAL(fused->data[r], -w[r] * lsm->data[r * 7 + labels[r]], 1e-5);
    /* log_softmax against log(softmax) */
    CU_ASSERT_TRUE(max_diff(lsm, ag_log(t, ag_softmax(t, z))) < 1e-5);
    ag_tape_free(t);
}

/* ---- dropout ---- */

static void test_dropout(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(100, 100));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = 1;
    ag_rng r1, r2;
    ag_rng_seed(&r1, 5);
    /* p = 0: the identity. (Eval mode is the layer's decision: nn_dropout_forward returns x
     * itself when not training, tests/nn/test_layers.c.) */
    CU_ASSERT_PTR_EQUAL(ag_dropout(t, x, 0, &r1), x);
    ag_rng_seed(&r1, 5);
    ag_rng_seed(&r2, 5);
    ag_tensor *a = ag_dropout(t, x, 0.1, &r1), *b = ag_dropout(t, x, 0.1, &r2);
    CU_ASSERT_EQUAL(memcmp(a->data, b->data, (size_t)a->numel * sizeof(ag_real)), 0);
    int zeros = 0;
    for (ptrdiff_t i = 0; i < a->numel; i++) {
        if (a->data[i] == 0) zeros++;
        else CU_ASSERT_DOUBLE_EQUAL(a->data[i], 1 / 0.9, 1e-6);
    }
    CU_ASSERT_TRUE(zeros > 850 && zeros < 1150); /* 1000 expected, sd 30 */
    ag_tensor *all = ag_dropout(t, x, 1, &r1);
    CU_ASSERT_EQUAL(all->data[0], 0);
    /* p = 0.5 over 10^4 elements: half dropped, neighbours independent (a quarter of the
     * adjacent pairs both dropped), and two calls draw different masks */
    ag_tensor *h1 = ag_dropout(t, x, 0.5, &r1), *h2 = ag_dropout(t, x, 0.5, &r1);
    int dropped = 0, both = 0, same = 0;
    for (ptrdiff_t i = 0; i < h1->numel; i++) {
        dropped += h1->data[i] == 0;
        if (i + 1 < h1->numel) both += h1->data[i] == 0 && h1->data[i + 1] == 0;
        same += (h1->data[i] == 0) == (h2->data[i] == 0);
    }
    CU_ASSERT_TRUE(dropped > 4800 && dropped < 5200); /* sd 50 */
    CU_ASSERT_TRUE(both > 2350 && both < 2650);       /* 2500, sd ~43 */
    CU_ASSERT_TRUE(same > 4800 && same < 5200);       /* independent masks agree half the time */
    ag_tape_free(t);
}

/* ---- errors ---- */

static void test_errors_name_op_and_shapes(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *a = ag_tensor_new(t, AG_SHAPE(2, 3)), *b = ag_tensor_new(t, AG_SHAPE(4));
    CU_ASSERT_PTR_NULL(ag_add(t, a, b));
    TG_CAPTURED_HAS("add", "[2, 3]", "[4]");
    CU_ASSERT_TRUE(ag_tape_failed(t));
    CU_ASSERT_PTR_NULL(ag_matmul(t, a, ag_tensor_new(t, AG_SHAPE(2, 5))));
    TG_CAPTURED_HAS("matmul", "[2, 3]", "[2, 5]");
    CU_ASSERT_PTR_NULL(
        ag_matmul(t, ag_tensor_new(t, AG_SHAPE(2, 2, 3)), ag_tensor_new(t, AG_SHAPE(3, 3, 4))));
    TG_CAPTURED_HAS("matmul", "batch");
    CU_ASSERT_PTR_NULL(
        ag_matmul(t, ag_tensor_new(t, AG_SHAPE(2, 2, 2, 3)), ag_tensor_new(t, AG_SHAPE(2, 3, 4))));
    TG_CAPTURED_HAS("matmul", "batch dimensions differ", "[2, 2, 2, 3]");
    CU_ASSERT_PTR_NULL(ag_linear(t, a, ag_tensor_new(t, AG_SHAPE(5, 4)), NULL));
    TG_CAPTURED_HAS("linear", "[2, 3]", "[5, 4]");
    CU_ASSERT_PTR_NULL(ag_sum(t, a, 2, false));
    TG_CAPTURED_HAS("sum", "axis 2", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_transpose(t, a, 0, -3));
    TG_CAPTURED_HAS("transpose", "axis -3");
    CU_ASSERT_PTR_NULL(ag_reshape(t, a, AG_SHAPE(4, 2)));
    TG_CAPTURED_HAS("reshape", "[2, 3]", "[4, 2]");
    CU_ASSERT_PTR_NULL(ag_narrow(t, a, 1, 2, 2));
    TG_CAPTURED_HAS("narrow", "[2, 4)", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_concat(t, 2, (ag_tensor *[]){a, ag_tensor_new(t, AG_SHAPE(3, 3))}, 1));
    TG_CAPTURED_HAS("concat", "[3, 3]", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_permute(t, a, (const int[]){0, 0}));
    TG_CAPTURED_HAS("permute", "[0, 0]");
    CU_ASSERT_PTR_NULL(ag_gather_rows(t, a, (const int32_t[]){0, 2}, AG_SHAPE(2)));
    TG_CAPTURED_HAS("gather_rows", "id 2", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_softmax_ce(t, a, (const int32_t[]){1, 3}, NULL));
    TG_CAPTURED_HAS("softmax_ce", "label 3", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_masked_softmax(t, a, NULL, 0));
    TG_CAPTURED_HAS("masked_softmax", "3-D", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_dropout(t, a, 1.5, NULL));
    TG_CAPTURED_HAS("dropout", "1.5");
    CU_ASSERT_PTR_NULL(ag_dropout(t, a, 0.5, NULL));
    TG_CAPTURED_HAS("dropout", "RNG");
    CU_ASSERT_PTR_NULL(ag_tensor_new(t, AG_SHAPE(2, -1)));
    TG_CAPTURED_HAS("tensor_new", "negative");
    /* NULL propagates silently: one message for one mistake */
    int before = tg_n_captured;
    CU_ASSERT_PTR_NULL(ag_relu(t, ag_exp(t, ag_add(t, NULL, a))));
    CU_ASSERT_EQUAL(tg_n_captured, before);
    CU_ASSERT_EQUAL(ag_backward(t, NULL), -1);
    TG_CAPTURED_HAS("backward", "NULL");
    ag_tape_reset(t);
    CU_ASSERT_FALSE(ag_tape_failed(t));
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static void test_tape_misuse_is_reported(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new(), *other = ag_tape_new();
    ag_tensor *w = ag_leaf_new(AG_SHAPE(2), true);
    ag_tensor *loss = ag_sum(t, ag_mul(t, w, w), AG_ALL, false);
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    CU_ASSERT_EQUAL(ag_backward(t, loss), -1);
    TG_CAPTURED_HAS("backward", "already");
    /* a tensor of an earlier step */
    ag_tensor *old = ag_mul(t, w, w);
    ag_tape_reset(t);
    CU_ASSERT_PTR_NULL(ag_exp(t, old));
    TG_CAPTURED_HAS("exp", "earlier step");
    /* tensors of two tapes */
    ag_tensor *a = ag_mul(t, w, w), *b = ag_mul(other, w, w);
    CU_ASSERT_PTR_NULL(ag_add(t, a, b));
    TG_CAPTURED_HAS("add", "another tape");
    /* non-scalar root, and a root that tracks nothing */
    CU_ASSERT_EQUAL(ag_backward(t, a), -1);
    TG_CAPTURED_HAS("backward", "scalar", "[2]");
    ag_tensor *c = ag_sum(t, ag_tensor_new(t, AG_SHAPE(2)), AG_ALL, false);
    CU_ASSERT_EQUAL(ag_backward(t, c), -1);
    TG_CAPTURED_HAS("backward", "does not require");
    ag_tape_free(t);
    ag_tape_free(other);
    ag_leaf_free(w);
    ag_set_error_handler(NULL, NULL);
}

static void test_no_grad_and_nan_tripwire(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *w = ag_leaf_new(AG_SHAPE(3), true);
    CU_ASSERT_TRUE(ag_tape_set_recording(t, false));
    ag_tensor *y = ag_exp(t, ag_transpose(t, ag_reshape(t, w, AG_SHAPE(1, 3)), 0, 1));
    CU_ASSERT_FALSE(y->requires_grad);
    CU_ASSERT_PTR_NULL(y->grad);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).nodes, 0);
    ag_tape_set_recording(t, true);
    ag_tape_set_nan_check(t, true);
    w->data[1] = -1;
    tg_n_captured = 0;
    ag_tensor *l = ag_log(t, w); /* log(-1) = NaN: reported, naming the op */
    CU_ASSERT_PTR_NOT_NULL(l);
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    TG_CAPTURED_HAS("log", "NaN");
    ag_tape_free(t);
    ag_leaf_free(w);
    ag_set_error_handler(NULL, NULL);
}

/* ---- memory ---- */

static void test_arena_steady_state(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *w = ag_leaf_new(AG_SHAPE(256, 256), true);
    size_t mallocs_after_warmup = 0;
    for (int step = 0; step < 6; step++) {
        ag_tensor *x = ag_tensor_new(t, AG_SHAPE(512, 256));
        ag_tensor *h = x;
        for (int l = 0; l < 4; l++) h = ag_tanh(t, ag_matmul(t, h, w)); /* 8 x 512 KiB data */
        ag_backward(t, ag_sum(t, h, AG_ALL, false));
        ag_tape_stats s = ag_tape_stats_get(t);
        CU_ASSERT_TRUE(s.nodes >= 9);
        CU_ASSERT_TRUE(s.bytes_used > 4u << 20);
        /* the backward reuses two gradient buffers of 512 KiB (and one for the scalar) */
        CU_ASSERT_EQUAL(s.grad_bytes, 2 * 512 * 256 * sizeof(ag_real) + 64);
        ag_tape_reset(t);
        s = ag_tape_stats_get(t);
        CU_ASSERT_EQUAL(s.bytes_used, 0);
        CU_ASSERT_EQUAL(s.chunks, 1); /* coalesced */
        CU_ASSERT_TRUE(s.capacity >= s.high_water);
        if (step == 1) mallocs_after_warmup = s.mallocs;
        if (step > 1) CU_ASSERT_EQUAL(s.mallocs, mallocs_after_warmup); /* no malloc */
    }
    ag_tape_free(t);
    ag_leaf_free(w);
}

/* The vectorized exp against libm's expf: within 2 ulp over the whole normal range, and the
 * special values kept. */
static void test_vexp_against_libm(void) {
    enum { N = 1 << 20 };
    static ag_real x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (ag_real)(-87.3 + (88.7 + 87.3) * i / (N - 1));
    ag_vexp(x, y, N);
    int worst = 0;
    for (int i = 0; i < N; i++) {
        float ref = expf(x[i]);
        int32_t a, b;
        memcpy(&a, &ref, 4);
        memcpy(&b, &y[i], 4);
        int ulp = a > b ? a - b : b - a;
        if (ulp > worst) worst = ulp;
    }
    if (worst > 2) fprintf(stderr, "\n  vexp: %d ulp from expf\n", worst);
    CU_ASSERT_TRUE(worst <= 2);
    /* tanh and sigmoid over [-20, 20] (through the ops, as the models call them) */
    ag_tape *t = ag_tape_new();
    ag_tensor *xs = ag_tensor_new(t, AG_SHAPE(1 << 18));
    for (int i = 0; i < (1 << 18); i++) xs->data[i] = (ag_real)(-20.0 + 40.0 * i / ((1 << 18) - 1));
    ag_tensor *th = ag_tanh(t, xs), *sg = ag_sigmoid(t, xs);
    int worst_t = 0, worst_s = 0;
    for (int i = 0; i < (1 << 18); i++) {
        float rt = tanhf(xs->data[i]), rs = 1.0f / (1.0f + expf(-xs->data[i]));
        int32_t a, b, c, d;
        memcpy(&a, &rt, 4);
        memcpy(&b, &th->data[i], 4);
        memcpy(&c, &rs, 4);
        memcpy(&d, &sg->data[i], 4);
        int ut = (a > b ? a - b : b - a), us = (c > d ? c - d : d - c);
        if (ut > worst_t) worst_t = ut;
        if (us > worst_s) worst_s = us;
    }
    if (worst_t > 4 || worst_s > 4)
        fprintf(stderr, "\n  tanh %d ulp, sigmoid %d ulp\n", worst_t, worst_s);
    CU_ASSERT_TRUE(worst_t <= 4);
    CU_ASSERT_TRUE(worst_s <= 4);
    ag_tensor *sp = ag_tensor_from(t, AG_SHAPE(4), (const ag_real[]){NAN, INFINITY, -INFINITY, 0});
    ag_tensor *tsp = ag_tanh(t, sp), *ssp = ag_sigmoid(t, sp);
    CU_ASSERT_TRUE(isnan(tsp->data[0]) && isnan(ssp->data[0]));
    CU_ASSERT_EQUAL(tsp->data[1], 1);
    CU_ASSERT_EQUAL(tsp->data[2], -1);
    CU_ASSERT_EQUAL(tsp->data[3], 0);
    CU_ASSERT_EQUAL(ssp->data[1], 1);
    CU_ASSERT_EQUAL(ssp->data[2], 0);
    CU_ASSERT_EQUAL(ssp->data[3], 0.5f);
    ag_tape_free(t);
    const ag_real sx[6] = {NAN, INFINITY, -INFINITY, 100, -100, 0};
    ag_real sy[6];
    ag_vexp(sx, sy, 6);
    CU_ASSERT_TRUE(isnan(sy[0]));
    CU_ASSERT_TRUE(isinf(sy[1]) && sy[1] > 0);
    CU_ASSERT_EQUAL(sy[2], 0);
    CU_ASSERT_TRUE(isinf(sy[3]));
    CU_ASSERT_EQUAL(sy[4], 0);
    CU_ASSERT_EQUAL(sy[5], 1);
}

/* Every parallel path of the engine at the Transformer's sizes (BLIS rows, 256 batched
 * products, 640 x 201 softmax and cross-entropy rows), forward and backward: two threads give
 * one thread's bits. (The fused attention's pairs: tests/nn/test_fused.c.) */
static void run_parallel_paths(ag_real *out, ag_real *grads) {
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 99);
    ag_tensor *x = ag_leaf_new(AG_SHAPE(640, 32), true), *w = ag_leaf_new(AG_SHAPE(201, 32), true);
    ag_tensor *q = ag_leaf_new(AG_SHAPE(256, 10, 8), true),
              *k = ag_leaf_new(AG_SHAPE(256, 10, 8), true);
    ag_tensor *leaves[4] = {x, w, q, k};
    for (int l = 0; l < 4; l++)
        for (ptrdiff_t i = 0; i < leaves[l]->numel; i++)
            leaves[l]->data[i] = (ag_real)ag_rng_normal(&r);
    static int32_t labels[640];
    for (int i = 0; i < 640; i++) labels[i] = i % 201;
    ag_tensor *logits = ag_linear(t, x, w, NULL);
    ag_tensor *ce = ag_sum(t, ag_softmax_ce(t, logits, labels, NULL), AG_ALL, false);
    ag_tensor *att = ag_softmax(t, ag_matmul(t, q, ag_transpose(t, k, 1, 2)));
    ag_tensor *loss = ag_add(t, ce, ag_sum(t, ag_mul(t, att, att), AG_ALL, false));
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    memcpy(out, logits->data, sizeof(ag_real) * 640 * 201);
    size_t at = 0;
    for (int l = 0; l < 4; l++) {
        memcpy(grads + at, leaves[l]->grad, sizeof(ag_real) * (size_t)leaves[l]->numel);
        at += (size_t)leaves[l]->numel;
        ag_leaf_free(leaves[l]);
    }
    ag_tape_free(t);
}

static void test_threads_same_bits(void) {
    enum { NOUT = 640 * 201, NGRAD = 640 * 32 + 201 * 32 + 2 * 256 * 80 };
    static ag_real o1[NOUT], o2[NOUT], g1[NGRAD], g2[NGRAD];
    run_parallel_paths(o1, g1);
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    run_parallel_paths(o2, g2);
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    CU_ASSERT_EQUAL(memcmp(o1, o2, sizeof o1), 0);
    CU_ASSERT_EQUAL(memcmp(g1, g2, sizeof g1), 0);
}

static void test_rng(void) {
    ag_rng a, b;
    ag_rng_seed(&a, 42);
    ag_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) CU_ASSERT_EQUAL(ag_rng_next(&a), ag_rng_next(&b));
    double s = 0, s2 = 0;
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) {
        double z = ag_rng_normal(&a);
        s += z;
        s2 += z * z;
        uint32_t k = ag_rng_below(&a, 7);
        CU_ASSERT_FATAL(k < 7);
        counts[k]++;
    }
    CU_ASSERT_DOUBLE_EQUAL(s / 70000, 0, 0.02);
    CU_ASSERT_DOUBLE_EQUAL(s2 / 70000, 1, 0.03);
    for (int k = 0; k < 7; k++) CU_ASSERT_TRUE(counts[k] > 9400 && counts[k] < 10600);
}

static CU_TestInfo op_tests[] = {
    {"matmul against a triple loop", test_matmul_vs_naive},
    {"matmul over 4-D permuted views", test_matmul_4d_views},
    {"fused linear against matmul + add", test_linear_vs_composite},
    {"broadcasting values", test_broadcast_values},
    {"shape ops and views", test_shapes_and_views},
    {"view gradients reach the base", test_view_gradients_reach_the_base},
    {"gather rows and its scatter-add", test_gather_rows},
    {"masked softmax as d2l", test_masked_softmax_semantics},
    {"fused softmax cross-entropy against composite", test_softmax_ce_vs_composite},
    {"dropout", test_dropout},
    CU_TEST_INFO_NULL,
};
static CU_TestInfo tape_tests[] = {
    {"errors name the op and the shapes", test_errors_name_op_and_shapes},
    {"tape misuse is reported", test_tape_misuse_is_reported},
    {"no-grad mode and the NaN tripwire", test_no_grad_and_nan_tripwire},
    {"arena: O(1) reset, no malloc in steady state", test_arena_steady_state},
    {"vectorized exp, tanh, sigmoid against libm", test_vexp_against_libm},
    {"two threads give one thread's bits", test_threads_same_bits},
    {"rng", test_rng},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {
    {"ops", NULL, NULL, NULL, NULL, op_tests},
    {"tape", NULL, NULL, NULL, NULL, tape_tests},
    CU_SUITE_INFO_NULL,
};

int main(void) { return tg_test_run(suites); }
