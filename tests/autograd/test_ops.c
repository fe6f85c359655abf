/* test_ops.c -- forward values, fused-vs-composite, masks, errors and tape lifetimes (float32).
 */
#include "autograd/ag_op.h"
#include "tests/tg_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- capturing the error handler ---- */

static char captured[512];
static int n_captured;
static void capture(const char *msg, void *user) {
    (void)user;
    snprintf(captured, sizeof captured, "%s", msg);
    n_captured++;
}
static void expect_error(const char *a, const char *b, const char *c) {
    CU_ASSERT_PTR_NOT_NULL(strstr(captured, a));
    if (b) CU_ASSERT_PTR_NOT_NULL(strstr(captured, b));
    if (c) CU_ASSERT_PTR_NOT_NULL(strstr(captured, c));
    if (!strstr(captured, a) || (b && !strstr(captured, b)) || (c && !strstr(captured, c)))
        fprintf(stderr, "\n  unexpected message: %s\n", captured);
}

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
                    ptrdiff_t ia = (a->ndim == 3 ? i * a->stride[0] : 0) + m * a->stride[la - 1] + k * a->stride[la];
                    ptrdiff_t ib = (b->ndim == 3 ? i * b->stride[0] : 0) + k * b->stride[lb - 1] + n * b->stride[lb];
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
    int sizes[][3] = {{7, 13, 5}, {1, 9, 1}, {6, 10, 8}, {4, 9, 12}, {5, 7, 16}, {3, 5, 20},
                      {2, 64, 8}, {33, 47, 29}, {65, 31, 3}};
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
    ag_tensor *q = ag_permute(t, x, (const int[]){0, 2, 1, 3}), *k = ag_permute(t, z, (const int[]){0, 2, 1, 3});
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
                        ref += (double)x->data[((b * T + i) * h + j) * d + e] * z->data[((b * S + s2) * h + j) * d + e];
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
    ag_tensor *r = ag_reshape(t, p, AG_SHAPE(-1, 6)); /* a copy, then a view */
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
    ag_tensor *ri = ag_repeat_interleave(t, ag_tensor_from(t, AG_SHAPE(2, 2), (const ag_real[]){1, 2, 3, 4}), 2, 0);
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
    CU_ASSERT_TRUE(max_diff(ag_masked_softmax(t, x, (const int32_t[]){4, 4, 4, 4}, 2), plain) < 1e-7);
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

/* ---- fused attention against its composite (d2l's MultiHeadAttention core) ---- */

enum { AB = 3, ATQ = 4, ATK = 5, AHEADS = 2, AH = 6, AHV = 4 };

/* (B, T, heads d) -> (B heads, T, d), d2l's transpose_qkv; and back (transpose_output). */
static ag_tensor *split_heads(ag_tape *t, ag_tensor *x) {
    int B = x->shape[0], T = x->shape[1], H = x->shape[2];
    ag_tensor *y = ag_permute(t, ag_reshape(t, x, AG_SHAPE(B, T, AHEADS, H / AHEADS)), (const int[]){0, 2, 1, 3});
    return ag_reshape(t, y, AG_SHAPE(B * AHEADS, T, H / AHEADS));
}
static ag_tensor *merge_heads(ag_tape *t, ag_tensor *x) {
    int T = x->shape[1], d = x->shape[2];
    ag_tensor *y = ag_permute(t, ag_reshape(t, x, AG_SHAPE(AB, AHEADS, T, d)), (const int[]){0, 2, 1, 3});
    return ag_reshape(t, y, AG_SHAPE(AB, T, AHEADS * d));
}

typedef struct attn_run {
    ag_real out[AB * ATQ * AHV], w[AB * AHEADS * ATQ * ATK];
    ag_real gq[AB * ATQ * AH], gk[AB * ATK * AH], gv[AB * ATK * AHV];
} attn_run;

/* One forward and backward (loss = <out, fixed random projection>) of the fused op or of the
 * composite, on the same inputs and dropout stream. */
static void attn_once(bool fused, const int32_t *lens, int vl_ndim, double p, attn_run *res) {
    ag_tape *t = ag_tape_new();
    ag_rng data, drop;
    ag_rng_seed(&data, 31);
    ag_rng_seed(&drop, 5);
    ag_tensor *q = ag_leaf_new(AG_SHAPE(AB, ATQ, AH), true), *k = ag_leaf_new(AG_SHAPE(AB, ATK, AH), true);
    ag_tensor *v = ag_leaf_new(AG_SHAPE(AB, ATK, AHV), true), *proj = ag_tensor_new(t, AG_SHAPE(AB, ATQ, AHV));
    ag_tensor *xs[4] = {q, k, v, proj};
    for (int l = 0; l < 4; l++)
        for (ptrdiff_t i = 0; i < xs[l]->numel; i++) xs[l]->data[i] = (ag_real)ag_rng_normal(&data);
    ag_tensor *out, *w;
    if (fused) {
        out = ag_attention(t, q, k, v, AHEADS, lens, vl_ndim, p, true, &drop, &w);
    } else {
        int32_t rl[AB * AHEADS * ATQ]; /* d2l repeats the lengths for every head */
        int per = vl_ndim == 2 ? ATQ : 1;
        for (int b = 0; b < AB; b++)
            for (int h = 0; h < AHEADS; h++)
                for (int i = 0; i < per; i++) rl[(b * AHEADS + h) * per + i] = lens ? lens[b * per + i] : 0;
        ag_tensor *s = ag_scale(t, ag_matmul(t, split_heads(t, q), ag_transpose(t, split_heads(t, k), 1, 2)),
                                1 / sqrt(AH / AHEADS));
        w = ag_masked_softmax(t, s, lens ? rl : NULL, lens ? vl_ndim : 0);
        out = merge_heads(t, ag_matmul(t, ag_dropout(t, w, p, true, &drop), split_heads(t, v)));
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_EQUAL(w->ndim, 3);
    CU_ASSERT_EQUAL(w->shape[0], AB * AHEADS);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, out, proj), AG_ALL, false)), 0);
    for (ptrdiff_t i = 0; i < out->numel; i++) res->out[i] = ag_get(out, i);
    for (ptrdiff_t i = 0; i < w->numel; i++) res->w[i] = ag_get(w, i);
    memcpy(res->gq, q->grad, sizeof res->gq);
    memcpy(res->gk, k->grad, sizeof res->gk);
    memcpy(res->gv, v->grad, sizeof res->gv);
    for (int l = 0; l < 3; l++) ag_leaf_free(xs[l]);
    ag_tape_free(t);
}

static double arr_diff(const ag_real *a, const ag_real *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_attention_vs_composite(void) {
    static const int32_t lens1[AB] = {5, 2, 0}, lens2[AB * ATQ] = {1, 2, 3, 4, 5, 5, 0, 1, 3, 3, 3, 3};
    const struct { const int32_t *lens; int vl; double p; } cases[] = {
        {NULL, 0, 0}, {lens1, 1, 0}, {lens2, 2, 0}, {lens1, 1, 0.4}, {lens2, 2, 0.5}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        attn_run f, m;
        attn_once(true, cases[c].lens, cases[c].vl, cases[c].p, &f);
        attn_once(false, cases[c].lens, cases[c].vl, cases[c].p, &m);
        CU_ASSERT_TRUE(arr_diff(f.w, m.w, sizeof f.w / sizeof *f.w) < 1e-6);
        CU_ASSERT_TRUE(arr_diff(f.out, m.out, sizeof f.out / sizeof *f.out) < 1e-5);
        CU_ASSERT_TRUE(arr_diff(f.gq, m.gq, sizeof f.gq / sizeof *f.gq) < 1e-5);
        CU_ASSERT_TRUE(arr_diff(f.gk, m.gk, sizeof f.gk / sizeof *f.gk) < 1e-5);
        CU_ASSERT_TRUE(arr_diff(f.gv, m.gv, sizeof f.gv / sizeof *f.gv) < 1e-5);
        if (cases[c].vl == 1) { /* row b = 1 has 2 valid keys: weights on keys 2.. are 0 */
            for (int h = 0; h < AHEADS; h++)
                for (int i = 0; i < ATQ; i++)
                    for (int j = 2; j < ATK; j++) CU_ASSERT_EQUAL(f.w[(((1 * AHEADS + h) * ATQ) + i) * ATK + j], 0);
            /* row b = 2 has none: uniform, as d2l */
            CU_ASSERT_DOUBLE_EQUAL(f.w[(2 * AHEADS * ATQ) * ATK], 1.0 / ATK, 1e-7);
        }
        if (cases[c].p > 0) { /* dropout really dropped something: the output differs without it */
            attn_run nod;
            attn_once(true, cases[c].lens, cases[c].vl, 0, &nod);
            CU_ASSERT_TRUE(arr_diff(f.out, nod.out, sizeof f.out / sizeof *f.out) > 1e-3);
        }
    }
    /* eval mode and the errors */
    ag_set_error_handler(capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *q = ag_tensor_new(t, AG_SHAPE(2, 3, 4)), *k = ag_tensor_new(t, AG_SHAPE(2, 5, 4));
    ag_tensor *v = ag_tensor_new(t, AG_SHAPE(2, 5, 6)), *w;
    CU_ASSERT_PTR_NOT_NULL(ag_attention(t, q, k, v, 2, NULL, 0, 0.5, false, NULL, &w));
    CU_ASSERT_PTR_NULL(ag_attention(t, q, k, ag_tensor_new(t, AG_SHAPE(2, 4, 6)), 2, NULL, 0, 0, false, NULL, NULL));
    expect_error("attention", "[2, 3, 4]", "[2, 4, 6]");
    CU_ASSERT_PTR_NULL(ag_attention(t, q, k, v, 3, NULL, 0, 0, false, NULL, NULL));
    expect_error("attention", "3 heads", "[2, 5, 6]");
    CU_ASSERT_PTR_NULL(ag_attention(t, q, k, v, 2, NULL, 3, 0, false, NULL, NULL));
    expect_error("attention", "3 dimensions", NULL);
    CU_ASSERT_PTR_NULL(ag_attention(t, q, k, v, 2, NULL, 0, 1.5, false, NULL, &w));
    expect_error("attention", "1.5", NULL);
    CU_ASSERT_PTR_NULL(w);
    CU_ASSERT_PTR_NULL(ag_attention(t, q, k, v, 2, NULL, 0, 0.5, true, NULL, NULL));
    expect_error("attention", "RNG", NULL);
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* ---- the fused GRU cell against its composite ---- */

static void gru_once(bool fused, ag_real *out, ag_real *grads) {
    enum { B = 5, H = 7 };
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 77);
    ag_tensor *gi = ag_leaf_new(AG_SHAPE(B, 3 * H), true), *gh = ag_leaf_new(AG_SHAPE(B, 3 * H), true);
    ag_tensor *h = ag_leaf_new(AG_SHAPE(B, H), true), *proj = ag_tensor_new(t, AG_SHAPE(B, H));
    ag_tensor *xs[4] = {gi, gh, h, proj};
    for (int l = 0; l < 4; l++)
        for (ptrdiff_t i = 0; i < xs[l]->numel; i++) xs[l]->data[i] = (ag_real)(2 * ag_rng_normal(&r));
    ag_tensor *y;
    if (fused) {
        y = ag_gru_cell(t, gi, gh, h);
    } else {
        ag_tensor *rg = ag_sigmoid(t, ag_add(t, ag_narrow(t, gi, 1, 0, H), ag_narrow(t, gh, 1, 0, H)));
        ag_tensor *z = ag_sigmoid(t, ag_add(t, ag_narrow(t, gi, 1, H, H), ag_narrow(t, gh, 1, H, H)));
        ag_tensor *n = ag_tanh(t, ag_add(t, ag_narrow(t, gi, 1, 2 * H, H),
                                         ag_mul(t, rg, ag_narrow(t, gh, 1, 2 * H, H))));
        y = ag_add(t, n, ag_mul(t, z, ag_sub(t, h, n)));
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, proj), AG_ALL, false)), 0);
    memcpy(out, y->data, sizeof *out * B * H);
    for (int l = 0; l < 3; l++) {
        memcpy(grads, xs[l]->grad, sizeof *grads * (size_t)xs[l]->numel);
        grads += xs[l]->numel;
        ag_leaf_free(xs[l]);
    }
    ag_tape_free(t);
}

/* The fused additive scores against add (broadcast) + tanh + linear, values and gradients. */
static void test_additive_scores_vs_composite(void) {
    enum { B = 3, Tq = 2, Tk = 5, H = 6 };
    ag_real ys[2][B * Tq * Tk], gs[2][B * Tq * H + B * Tk * H + H];
    for (int fused = 0; fused < 2; fused++) {
        ag_tape *t = ag_tape_new();
        ag_rng r;
        ag_rng_seed(&r, 8);
        ag_tensor *q = ag_leaf_new(AG_SHAPE(B, Tq, H), true), *k = ag_leaf_new(AG_SHAPE(B, Tk, H), true);
        ag_tensor *w = ag_leaf_new(AG_SHAPE(H), true), *proj = ag_tensor_new(t, AG_SHAPE(B, Tq, Tk));
        ag_tensor *xs[4] = {q, k, w, proj};
        for (int l = 0; l < 4; l++)
            for (ptrdiff_t i = 0; i < xs[l]->numel; i++) xs[l]->data[i] = (ag_real)ag_rng_normal(&r);
        ag_tensor *y;
        if (fused) {
            y = ag_additive_scores(t, q, k, w);
        } else {
            ag_tensor *f = ag_tanh(t, ag_add(t, ag_reshape(t, q, AG_SHAPE(B, Tq, 1, H)),
                                             ag_reshape(t, k, AG_SHAPE(B, 1, Tk, H))));
            y = ag_reshape(t, ag_linear(t, f, ag_reshape(t, w, AG_SHAPE(1, H)), NULL), AG_SHAPE(B, Tq, Tk));
        }
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, proj), AG_ALL, false)), 0);
        memcpy(ys[fused], y->data, sizeof ys[fused]);
        ag_real *g = gs[fused];
        for (int l = 0; l < 3; l++) {
            memcpy(g, xs[l]->grad, sizeof *g * (size_t)xs[l]->numel);
            g += xs[l]->numel;
            ag_leaf_free(xs[l]);
        }
        ag_tape_free(t);
    }
    CU_ASSERT_TRUE(arr_diff(ys[0], ys[1], B * Tq * Tk) < 1e-5);
    CU_ASSERT_TRUE(arr_diff(gs[0], gs[1], sizeof gs[0] / sizeof gs[0][0]) < 1e-5);
    ag_set_error_handler(capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *q = ag_tensor_new(t, AG_SHAPE(2, 1, 4)), *k = ag_tensor_new(t, AG_SHAPE(2, 3, 4));
    CU_ASSERT_PTR_NULL(ag_additive_scores(t, q, k, ag_tensor_new(t, AG_SHAPE(5))));
    expect_error("additive_scores", "[2, 1, 4]", "[5]");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* AddNorm fused against ag_layer_norm(ag_add(ag_dropout(y), x)): the same dropout draws, the
 * same values and gradients (x, y, gamma, beta), with and without dropout. */
static void test_add_layer_norm_vs_composite(void) {
    enum { N = 4 * 3 * 6, D = 6 };
    for (int drop = 0; drop < 2; drop++) {
        ag_real ys[2][N], gs[2][2 * N + 2 * D];
        for (int fused = 0; fused < 2; fused++) {
            ag_tape *t = ag_tape_new();
            ag_rng r, dr;
            ag_rng_seed(&r, 21);
            ag_rng_seed(&dr, 4);
            ag_tensor *x = ag_leaf_new(AG_SHAPE(4, 3, D), true), *y = ag_leaf_new(AG_SHAPE(4, 3, D), true);
            ag_tensor *gm = ag_leaf_new(AG_SHAPE(D), true), *bt = ag_leaf_new(AG_SHAPE(D), true);
            ag_tensor *proj = ag_tensor_new(t, AG_SHAPE(4, 3, D));
            ag_tensor *xs[5] = {x, y, gm, bt, proj};
            for (int l = 0; l < 5; l++)
                for (ptrdiff_t i = 0; i < xs[l]->numel; i++) xs[l]->data[i] = (ag_real)ag_rng_normal(&r);
            double p = drop ? 0.3 : 0;
            ag_tensor *out = fused ? ag_add_layer_norm(t, x, y, p, true, &dr, 1, gm, bt, 1e-5)
                                   : ag_layer_norm(t, ag_add(t, ag_dropout(t, y, p, true, &dr), x), 1, gm, bt, 1e-5);
            CU_ASSERT_PTR_NOT_NULL_FATAL(out);
            CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, out, proj), AG_ALL, false)), 0);
            memcpy(ys[fused], out->data, sizeof ys[fused]);
            ag_real *g = gs[fused];
            for (int l = 0; l < 4; l++) {
                memcpy(g, xs[l]->grad, sizeof *g * (size_t)xs[l]->numel);
                g += xs[l]->numel;
                ag_leaf_free(xs[l]);
            }
            ag_tape_free(t);
        }
        CU_ASSERT_TRUE(arr_diff(ys[0], ys[1], N) < 1e-5);
        CU_ASSERT_TRUE(arr_diff(gs[0], gs[1], sizeof gs[0] / sizeof gs[0][0]) < 1e-4);
    }
    ag_set_error_handler(capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 3)), *y = ag_tensor_new(t, AG_SHAPE(3, 2));
    CU_ASSERT_PTR_NULL(ag_add_layer_norm(t, x, y, 0, false, NULL, 1, NULL, NULL, 1e-5));
    expect_error("add_layer_norm", "[2, 3]", "[3, 2]");
    CU_ASSERT_PTR_NULL(ag_add_layer_norm(t, x, x, 0.5, true, NULL, 1, NULL, NULL, 1e-5));
    expect_error("add_layer_norm", "RNG", NULL);
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static void test_gru_cell_vs_composite(void) {
    enum { NY = 5 * 7, NG = 2 * 5 * 21 + 5 * 7 };
    ag_real yf[NY], yc[NY], gf[NG], gc[NG];
    gru_once(true, yf, gf);
    gru_once(false, yc, gc);
    CU_ASSERT_TRUE(arr_diff(yf, yc, NY) < 1e-6);
    CU_ASSERT_TRUE(arr_diff(gf, gc, NG) < 1e-5);
    ag_set_error_handler(capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *gi = ag_tensor_new(t, AG_SHAPE(2, 12)), *h = ag_tensor_new(t, AG_SHAPE(2, 3));
    CU_ASSERT_PTR_NULL(ag_gru_cell(t, gi, gi, h));
    expect_error("gru_cell", "[2, 12]", "[2, 3]");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* ---- layer norm ---- */

static void test_layer_norm(void) {
    ag_tape *t = ag_tape_new();
    /* SPEC.md: [[1,2],[2,3]] -> [[-1,1],[-1,1]] to 4 decimals */
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 2), (const ag_real[]){1, 2, 2, 3});
    ag_tensor *y = ag_layer_norm(t, x, 1, NULL, NULL, 1e-5);
    const ag_real want[] = {-1, 1, -1, 1};
    for (int i = 0; i < 4; i++) CU_ASSERT_DOUBLE_EQUAL(y->data[i], want[i], 5e-5);
    /* fused against its composite over two trailing axes, affine included */
    ag_rng_seed(&rng, 15);
    ag_tensor *a = randn(t, AG_SHAPE(3, 4, 5)), *g = randn(t, AG_SHAPE(4, 5)), *b = randn(t, AG_SHAPE(4, 5));
    ag_tensor *fused = ag_layer_norm(t, a, 2, g, b, 1e-5);
    ag_tensor *flat = ag_reshape(t, a, AG_SHAPE(3, 20));
    ag_tensor *mu = ag_mean(t, flat, 1, true);
    ag_tensor *c = ag_sub(t, flat, mu);
    ag_tensor *var = ag_mean(t, ag_mul(t, c, c), 1, true);
    ag_tensor *xh = ag_div(t, c, ag_sqrt(t, ag_add_scalar(t, var, 1e-5)));
    ag_tensor *comp = ag_add(t, ag_mul(t, ag_reshape(t, xh, AG_SHAPE(3, 4, 5)), g), b);
    CU_ASSERT_TRUE(max_diff(fused, comp) < 1e-5);
    ag_tape_free(t);
}

/* ---- dropout ---- */

static void test_dropout(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(100, 100));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = 1;
    ag_rng r1, r2;
    ag_rng_seed(&r1, 5);
    CU_ASSERT_PTR_EQUAL(ag_dropout(t, x, 0.5, false, &r1), x); /* eval: identity */
    CU_ASSERT_PTR_EQUAL(ag_dropout(t, x, 0, true, &r1), x);
    ag_rng_seed(&r1, 5);
    ag_rng_seed(&r2, 5);
    ag_tensor *a = ag_dropout(t, x, 0.1, true, &r1), *b = ag_dropout(t, x, 0.1, true, &r2);
    CU_ASSERT_EQUAL(memcmp(a->data, b->data, (size_t)a->numel * sizeof(ag_real)), 0);
    int zeros = 0;
    for (ptrdiff_t i = 0; i < a->numel; i++) {
        if (a->data[i] == 0) zeros++;
        else CU_ASSERT_DOUBLE_EQUAL(a->data[i], 1 / 0.9, 1e-6);
    }
    CU_ASSERT_TRUE(zeros > 850 && zeros < 1150); /* 1000 expected, sd 30 */
    ag_tensor *all = ag_dropout(t, x, 1, true, &r1);
    CU_ASSERT_EQUAL(all->data[0], 0);
    /* p = 0.5 over 10^4 elements: half dropped, neighbours independent (a quarter of the
     * adjacent pairs both dropped), and two calls draw different masks */
    ag_tensor *h1 = ag_dropout(t, x, 0.5, true, &r1), *h2 = ag_dropout(t, x, 0.5, true, &r1);
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
    ag_set_error_handler(capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_tensor *a = ag_tensor_new(t, AG_SHAPE(2, 3)), *b = ag_tensor_new(t, AG_SHAPE(4));
    CU_ASSERT_PTR_NULL(ag_add(t, a, b));
    expect_error("add", "[2, 3]", "[4]");
    CU_ASSERT_TRUE(ag_tape_failed(t));
    CU_ASSERT_PTR_NULL(ag_matmul(t, a, ag_tensor_new(t, AG_SHAPE(2, 5))));
    expect_error("matmul", "[2, 3]", "[2, 5]");
    CU_ASSERT_PTR_NULL(ag_matmul(t, ag_tensor_new(t, AG_SHAPE(2, 2, 3)), ag_tensor_new(t, AG_SHAPE(3, 3, 4))));
    expect_error("matmul", "batch", NULL);
    CU_ASSERT_PTR_NULL(ag_matmul(t, ag_tensor_new(t, AG_SHAPE(2, 2, 2, 3)), ag_tensor_new(t, AG_SHAPE(2, 3, 4))));
    expect_error("matmul", "batch dimensions differ", "[2, 2, 2, 3]");
    CU_ASSERT_PTR_NULL(ag_linear(t, a, ag_tensor_new(t, AG_SHAPE(5, 4)), NULL));
    expect_error("linear", "[2, 3]", "[5, 4]");
    CU_ASSERT_PTR_NULL(ag_sum(t, a, 2, false));
    expect_error("sum", "axis 2", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_transpose(t, a, 0, -3));
    expect_error("transpose", "axis -3", NULL);
    CU_ASSERT_PTR_NULL(ag_reshape(t, a, AG_SHAPE(4, 2)));
    expect_error("reshape", "[2, 3]", "[4, 2]");
    CU_ASSERT_PTR_NULL(ag_narrow(t, a, 1, 2, 2));
    expect_error("narrow", "[2, 4)", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_concat(t, 2, (ag_tensor *[]){a, ag_tensor_new(t, AG_SHAPE(3, 3))}, 1));
    expect_error("concat", "[3, 3]", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_permute(t, a, (const int[]){0, 0}));
    expect_error("permute", "[0, 0]", NULL);
    CU_ASSERT_PTR_NULL(ag_gather_rows(t, a, (const int32_t[]){0, 2}, AG_SHAPE(2)));
    expect_error("gather_rows", "id 2", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_softmax_ce(t, a, (const int32_t[]){1, 3}, NULL));
    expect_error("softmax_ce", "label 3", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_masked_softmax(t, a, NULL, 0));
    expect_error("masked_softmax", "3-D", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_layer_norm(t, a, 1, ag_tensor_new(t, AG_SHAPE(2)), NULL, 1e-5));
    expect_error("layer_norm", "[2]", "[2, 3]");
    CU_ASSERT_PTR_NULL(ag_dropout(t, a, 1.5, true, NULL));
    expect_error("dropout", "1.5", NULL);
    CU_ASSERT_PTR_NULL(ag_tensor_new(t, AG_SHAPE(2, -1)));
    expect_error("tensor_new", "negative", NULL);
    /* NULL propagates silently: one message for one mistake */
    int before = n_captured;
    CU_ASSERT_PTR_NULL(ag_relu(t, ag_exp(t, ag_add(t, NULL, a))));
    CU_ASSERT_EQUAL(n_captured, before);
    CU_ASSERT_EQUAL(ag_backward(t, NULL), -1);
    expect_error("backward", "NULL", NULL);
    ag_tape_reset(t);
    CU_ASSERT_FALSE(ag_tape_failed(t));
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static void test_tape_misuse_is_reported(void) {
    ag_set_error_handler(capture, NULL);
    ag_tape *t = ag_tape_new(), *other = ag_tape_new();
    ag_tensor *w = ag_leaf_new(AG_SHAPE(2), true);
    ag_tensor *loss = ag_sum(t, ag_mul(t, w, w), AG_ALL, false);
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    CU_ASSERT_EQUAL(ag_backward(t, loss), -1);
    expect_error("backward", "already", NULL);
    /* a tensor of an earlier step */
    ag_tensor *old = ag_mul(t, w, w);
    ag_tape_reset(t);
    CU_ASSERT_PTR_NULL(ag_exp(t, old));
    expect_error("exp", "earlier step", NULL);
    /* tensors of two tapes */
    ag_tensor *a = ag_mul(t, w, w), *b = ag_mul(other, w, w);
    CU_ASSERT_PTR_NULL(ag_add(t, a, b));
    expect_error("add", "another tape", NULL);
    /* non-scalar root, and a root that tracks nothing */
    CU_ASSERT_EQUAL(ag_backward(t, a), -1);
    expect_error("backward", "scalar", "[2]");
    ag_tensor *c = ag_sum(t, ag_tensor_new(t, AG_SHAPE(2)), AG_ALL, false);
    CU_ASSERT_EQUAL(ag_backward(t, c), -1);
    expect_error("backward", "does not require", NULL);
    ag_tape_free(t);
    ag_tape_free(other);
    ag_leaf_free(w);
    ag_set_error_handler(NULL, NULL);
}

static void test_no_grad_and_nan_tripwire(void) {
    ag_set_error_handler(capture, NULL);
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
    n_captured = 0;
    ag_tensor *l = ag_log(t, w); /* log(-1) = NaN: reported, naming the op */
    CU_ASSERT_PTR_NOT_NULL(l);
    CU_ASSERT_EQUAL(n_captured, 1);
    expect_error("log", "NaN", NULL);
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
        for (int l = 0; l < 4; l++) h = ag_tanh(t, ag_matmul(t, h, w)); /* ~10 MB per step */
        ag_backward(t, ag_sum(t, h, AG_ALL, false));
        ag_tape_stats s = ag_tape_stats_get(t);
        CU_ASSERT_TRUE(s.nodes >= 9);
        CU_ASSERT_TRUE(s.bytes_used > 8u << 20);
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
    if (worst_t > 4 || worst_s > 4) fprintf(stderr, "\n  tanh %d ulp, sigmoid %d ulp\n", worst_t, worst_s);
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

/* Every parallel path at the Transformer's sizes (BLIS rows, 256 batched products, 640 x 201
 * softmax and cross-entropy rows, the fused attention's 256 pairs), forward and backward: two threads give one thread's bits. */
static void run_parallel_paths(ag_real *out, ag_real *grads) {
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 99);
    ag_tensor *x = ag_leaf_new(AG_SHAPE(640, 32), true), *w = ag_leaf_new(AG_SHAPE(201, 32), true);
    ag_tensor *q = ag_leaf_new(AG_SHAPE(256, 10, 8), true), *k = ag_leaf_new(AG_SHAPE(256, 10, 8), true);
    ag_tensor *hq = ag_leaf_new(AG_SHAPE(64, 10, 32), true), *hv = ag_leaf_new(AG_SHAPE(64, 10, 32), true);
    ag_tensor *leaves[6] = {x, w, q, k, hq, hv};
    for (int l = 0; l < 6; l++)
        for (ptrdiff_t i = 0; i < leaves[l]->numel; i++) leaves[l]->data[i] = (ag_real)ag_rng_normal(&r);
    static int32_t labels[640];
    for (int i = 0; i < 640; i++) labels[i] = i % 201;
    ag_tensor *logits = ag_linear(t, x, w, NULL);
    ag_tensor *ce = ag_sum(t, ag_softmax_ce(t, logits, labels, NULL), AG_ALL, false);
    ag_tensor *att = ag_softmax(t, ag_matmul(t, q, ag_transpose(t, k, 1, 2)));
    static int32_t lens[64];
    for (int i = 0; i < 64; i++) lens[i] = 1 + i % 10;
    ag_tensor *mha = ag_attention(t, hq, hq, hv, 4, lens, 1, 0.1, true, &r, NULL);
    ag_tensor *loss = ag_add(t, ag_add(t, ce, ag_sum(t, ag_mul(t, att, att), AG_ALL, false)),
                             ag_sum(t, ag_mul(t, mha, mha), AG_ALL, false));
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    memcpy(out, logits->data, sizeof(ag_real) * 640 * 201);
    size_t at = 0;
    for (int l = 0; l < 6; l++) {
        memcpy(grads + at, leaves[l]->grad, sizeof(ag_real) * (size_t)leaves[l]->numel);
        at += (size_t)leaves[l]->numel;
        ag_leaf_free(leaves[l]);
    }
    ag_tape_free(t);
}

static void test_threads_same_bits(void) {
    enum { NOUT = 640 * 201, NGRAD = 640 * 32 + 201 * 32 + 2 * 256 * 80 + 2 * 64 * 320 };
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
    {"layer norm: literal and composite", test_layer_norm},
    {"dropout", test_dropout},
    {"fused attention against the composite", test_attention_vs_composite},
    {"fused GRU cell against the composite", test_gru_cell_vs_composite},
    {"fused AddNorm against the composite", test_add_layer_norm_vs_composite},
    {"fused additive scores against the composite", test_additive_scores_vs_composite},
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
