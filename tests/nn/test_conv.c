/* test_conv.c -- Conv1d and Conv2d (nn/conv.h): exact values and gradients of small
 * hand-computed cases; the fused op (im2col + GEMM) and its composite of ag primitives against
 * a plain direct-loop convolution and its backward, over many shapes (stride, padding, dilation,
 * groups, odd sizes, batch 1, several chunks); backward accumulates; the same bits with 2
 * threads; strided input; no tape when not recording; PyTorch's initialisation drawn from the
 * store's RNG; bad input naming the layer and the shapes; in float64 (nn64) the central
 * differences of both. Built twice (CMakeLists.txt): against nn64 and nn. */
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

/* One convolution: 2-D when !one_d (1-D: H = KH = SH = DH = 1, PH = 0). */
typedef struct cfg {
    int N, C, H, W, O, KH, KW, SH, SW, PH, PW, DH, DW, G;
    bool bias, one_d;
} cfg;

static int out_h(const cfg *k) { return (k->H + 2 * k->PH - k->DH * (k->KH - 1) - 1) / k->SH + 1; }
static int out_w(const cfg *k) { return (k->W + 2 * k->PW - k->DW * (k->KW - 1) - 1) / k->SW + 1; }

/* ---- the direct loops (double) ----
 * y[n, o, i, j] = b[o] + sum_{c, p, q} w[o, c, p, q] x[n, g Cg + c, i SH - PH + p DH, j SW - PW
 * + q DW] (0 outside x); backward from dy: dx, dw, db (assigned). */
static void ref_conv(const cfg *k, const double *x, const double *w, const double *b, double *y,
                     const double *dy, double *dx, double *dw, double *db) {
    const int OH = out_h(k), OW = out_w(k), Cg = k->C / k->G, Og = k->O / k->G;
    if (dy) {
        memset(dx, 0, sizeof *dx * (size_t)k->N * k->C * k->H * k->W);
        memset(dw, 0, sizeof *dw * (size_t)k->O * Cg * k->KH * k->KW);
        memset(db, 0, sizeof *db * (size_t)k->O);
    }
    for (int n = 0; n < k->N; n++)
        for (int o = 0; o < k->O; o++)
            for (int i = 0; i < OH; i++)
                for (int j = 0; j < OW; j++) {
                    const int yi = ((n * k->O + o) * OH + i) * OW + j;
                    double acc = b ? b[o] : 0;
                    if (dy && b) db[o] += dy[yi];
                    for (int c = 0; c < Cg; c++)
                        for (int p = 0; p < k->KH; p++)
                            for (int q = 0; q < k->KW; q++) {
                                int ih = i * k->SH - k->PH + p * k->DH;
                                int iw = j * k->SW - k->PW + q * k->DW;
                                if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W) continue;
                                int ci = o / Og * Cg + c;
                                int xi = ((n * k->C + ci) * k->H + ih) * k->W + iw;
                                int wi = ((o * Cg + c) * k->KH + p) * k->KW + q;
                                acc += w[wi] * x[xi];
                                if (dy) {
                                    dx[xi] += w[wi] * dy[yi];
                                    dw[wi] += x[xi] * dy[yi];
                                }
                            }
                    if (y) y[yi] = acc;
                }
}

/* The layer of a cfg, over caller-made leaves (2-D, or 1-D in *l1). */
static void make_layers(const cfg *k, ag_tensor *w, ag_tensor *b, nn_conv2d *l2, nn_conv1d *l1) {
    *l2 = (nn_conv2d){
        w, b, k->C, k->O, k->G, {k->KH, k->KW}, {k->SH, k->SW}, {k->PH, k->PW}, {k->DH, k->DW}};
    *l1 = (nn_conv1d){w, b, k->C, k->O, k->G, k->KW, k->SW, k->PW, k->DW};
}

static ag_tensor *run_conv(const cfg *k, bool composite, const nn_ctx *c, ag_tensor *x,
                           ag_tensor *w, ag_tensor *b) {
    nn_conv2d l2;
    nn_conv1d l1;
    make_layers(k, w, b, &l2, &l1);
    if (k->one_d) return (composite ? nn_conv1d_composite : nn_conv1d_forward)(&l1, c, x);
    return (composite ? nn_conv2d_composite : nn_conv2d_forward)(&l2, c, x);
}

/* Leaves x, w, b of a cfg (b NULL without bias) filled from a seed. */
static void make_leaves(const cfg *k, uint64_t seed, ag_tensor **x, ag_tensor **w, ag_tensor **b) {
    ag_rng r;
    ag_rng_seed(&r, seed);
    *x = k->one_d ? ag_leaf_new(AG_SHAPE(k->N, k->C, k->W), true)
                  : ag_leaf_new(AG_SHAPE(k->N, k->C, k->H, k->W), true);
    *w = k->one_d ? ag_leaf_new(AG_SHAPE(k->O, k->C / k->G, k->KW), true)
                  : ag_leaf_new(AG_SHAPE(k->O, k->C / k->G, k->KH, k->KW), true);
    *b = k->bias ? ag_leaf_new(AG_SHAPE(k->O), true) : NULL;
    ag_tensor *all[3] = {*x, *w, *b};
    for (int i = 0; i < 3; i++)
        for (ptrdiff_t e = 0; all[i] && e < all[i]->numel; e++)
            all[i]->data[e] = (ag_real)ag_rng_normal(&r);
}

static double *to_double(const ag_real *v, ptrdiff_t n) {
    double *d = malloc(sizeof *d * (size_t)(n ? n : 1));
    for (ptrdiff_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

/* max |a - b| / (1 + |b|) */
static double rel_diff(const ag_real *a, const double *b, ptrdiff_t n) {
    double m = 0;
    for (ptrdiff_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]) / (1 + fabs(b[i])));
    return m;
}

/* Forward, then backward of sum(y R) (R fixed), fused or composite, against the direct loops. */
static void check_against_loops(const cfg *k, bool composite, int index) {
    ag_tensor *x, *w, *b;
    make_leaves(k, 100 + (uint64_t)index, &x, &w, &b);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *y = run_conv(k, composite, &c, x, w, b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    const int OH = k->one_d ? 1 : out_h(k), OW = out_w(k);
    CU_ASSERT_EQUAL(y->ndim, k->one_d ? 3 : 4);
    CU_ASSERT_EQUAL(y->shape[0], k->N);
    CU_ASSERT_EQUAL(y->shape[1], k->O);
    CU_ASSERT_EQUAL(y->shape[y->ndim - 1], OW);
    CU_ASSERT_EQUAL(y->numel, (ptrdiff_t)k->N * k->O * OH * OW);
    ag_tensor *R = ag_tensor_new(t, y->ndim, y->shape);
    ag_rng r;
    ag_rng_seed(&r, 7);
    for (ptrdiff_t i = 0; i < R->numel; i++) R->data[i] = (ag_real)ag_rng_normal(&r);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, R), AG_ALL, false)), 0);
    double *xd = to_double(x->data, x->numel), *wd = to_double(w->data, w->numel);
    double *bd = b ? to_double(b->data, b->numel) : NULL, *Rd = to_double(R->data, R->numel);
    double *yr = malloc(sizeof *yr * (size_t)y->numel), *dx = malloc(sizeof *dx * (size_t)x->numel);
    double *dw = malloc(sizeof *dw * (size_t)w->numel), *db = malloc(sizeof *db * (size_t)k->O);
    ref_conv(k, xd, wd, bd, yr, Rd, dx, dw, db);
    double ey = rel_diff(y->data, yr, y->numel), ex = rel_diff(x->grad, dx, x->numel);
    double ew = rel_diff(w->grad, dw, w->numel), eb = b ? rel_diff(b->grad, db, k->O) : 0;
    /* sums of up to C/G KH KW (values) and N OH OW (weight gradient) products */
    const double tol = TOL * (10 + sqrt((double)k->N * OH * OW));
    if (!(ey <= tol && ex <= tol && ew <= tol && eb <= tol))
        fprintf(stderr, "\n  case %d (%s): y %g, dx %g, dw %g, db %g (tol %g)\n", index,
                composite ? "composite" : "fused", ey, ex, ew, eb, tol);
    CU_ASSERT(ey <= tol && ex <= tol && ew <= tol && eb <= tol);
    free(xd), free(wd), free(bd), free(Rd), free(yr), free(dx), free(dw), free(db);
    ag_tape_free(t);
    ag_leaf_free(x), ag_leaf_free(w), ag_leaf_free(b);
}

/* N, C, H, W, O, KH, KW, SH, SW, PH, PW, DH, DW, G, bias, one_d */
static const cfg cases[] = {
    {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1, true, false},    /* batch 1, one channel */
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    /* "same" padding */
    {2, 4, 9, 8, 6, 3, 2, 2, 1, 1, 0, 1, 1, 1, true, false},    /* rectangular everything */
    {3, 4, 10, 11, 4, 3, 3, 2, 2, 2, 2, 2, 2, 2, true, false},  /* stride, dilation, groups */
    {2, 6, 5, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6, true, false},    /* depthwise */
    {1, 2, 4, 4, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false},   /* 1x1, no bias */
    {2, 3, 8, 8, 4, 5, 5, 3, 3, 2, 2, 1, 1, 1, true, false},    /* kernel 5, stride 3 */
    {1, 4, 6, 5, 8, 2, 3, 1, 2, 0, 1, 2, 1, 4, true, false},    /* dilated height, groups 4 */
    {3, 5, 7, 9, 10, 4, 3, 2, 3, 1, 1, 1, 2, 5, false, false},  /* odd sizes */
    {1, 1, 2, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false},    /* kernel larger than x */
    {2, 3, 1, 9, 2, 1, 3, 1, 1, 0, 1, 1, 1, 1, true, false},    /* height 1 */
    {9, 16, 32, 32, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false}, /* two chunks, the last short */
    {2, 3, 1, 10, 4, 1, 3, 1, 1, 0, 0, 1, 1, 1, true, true},    /* Conv1d */
    {1, 4, 1, 9, 6, 1, 3, 1, 2, 0, 1, 1, 2, 2, true, true},     /* Conv1d s, p, d, groups */
    {3, 2, 1, 5, 2, 1, 5, 1, 1, 0, 2, 1, 1, 1, false, true},    /* Conv1d kernel = length */
    {2, 4, 1, 7, 4, 1, 3, 1, 3, 0, 1, 1, 1, 4, true, true},     /* Conv1d depthwise, stride 3 */
};
enum { N_CASES = sizeof cases / sizeof *cases };

static void test_against_loops(void) {
    for (int i = 0; i < N_CASES; i++) {
        check_against_loops(&cases[i], false, i);
        check_against_loops(&cases[i], true, i);
    }
}

static void expect_values(const ag_real *got, const double *want, ptrdiff_t n, double tol) {
    for (ptrdiff_t i = 0; i < n; i++) {
        CU_ASSERT_DOUBLE_EQUAL(got[i], want[i], tol);
        if (fabs(got[i] - want[i]) > tol)
            fprintf(stderr, "\n  element %td: %.9g, expected %.9g\n", i, (double)got[i], want[i]);
    }
}

/* x = 1..9 (1, 1, 3, 3), w = [[1, 2], [3, 4]], b = 0.5: y = [[37.5, 47.5], [67.5, 77.5]];
 * the gradients of sum(y); then padding 1 and stride 2; Conv1d with dilation 2, padding 2. */
static void test_exact(void) {
    ag_tensor *x = ag_leaf_new(AG_SHAPE(1, 1, 3, 3), true);
    ag_tensor *w = ag_leaf_new(AG_SHAPE(1, 1, 2, 2), true), *b = ag_leaf_new(AG_SHAPE(1), true);
    for (int i = 0; i < 9; i++) x->data[i] = (ag_real)(i + 1);
    for (int i = 0; i < 4; i++) w->data[i] = (ag_real)(i + 1);
    b->data[0] = 0.5;
    for (int composite = 0; composite < 2; composite++) {
        cfg k = {1, 1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1, true, false};
        ag_tape *t = ag_tape_new();
        nn_ctx c = {.tape = t, .training = true};
        ag_tensor *y = run_conv(&k, composite, &c, x, w, b);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        expect_values(y->data, (const double[]){37.5, 47.5, 67.5, 77.5}, 4, 0);
        CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, y, AG_ALL, false)), 0);
        expect_values(w->grad, (const double[]){12, 16, 24, 28}, 4, 0);
        expect_values(b->grad, (const double[]){4}, 1, 0);
        expect_values(x->grad, (const double[]){1, 3, 2, 4, 10, 6, 3, 7, 4}, 9, 0);
        memset(x->grad, 0, sizeof *x->grad * 9);
        memset(w->grad, 0, sizeof *w->grad * 4);
        b->grad[0] = 0;
        ag_tape_reset(t);
        k.PH = k.PW = 1, k.SH = k.SW = 2;
        expect_values(run_conv(&k, composite, &c, x, w, b)->data,
                      (const double[]){4.5, 18.5, 36.5, 77.5}, 4, 0);
        ag_tape_reset(t);
        /* Conv1d: x = 1..5, w = [1, 0, -1], dilation 2, padding 2, no bias */
        cfg k1 = {1, 1, 1, 5, 1, 1, 3, 1, 1, 0, 2, 1, 2, 1, false, true};
        ag_tensor *x1 = ag_tensor_from(t, AG_SHAPE(1, 1, 5), (const ag_real[]){1, 2, 3, 4, 5});
        ag_tensor w1;
        ag_real wv[3] = {1, 0, -1};
        ag_leaf_init(&w1, wv, NULL, AG_SHAPE(1, 1, 3));
        ag_tensor *y1 = run_conv(&k1, composite, &c, x1, &w1, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
        CU_ASSERT_TRUE(y1->ndim == 3 && y1->shape[2] == 5);
        expect_values(y1->data, (const double[]){-3, -4, -4, 2, 3}, 5, 0);
        ag_tape_free(t);
    }
    ag_leaf_free(x), ag_leaf_free(w), ag_leaf_free(b);
}

/* One fused forward and backward of case `i` with `threads` threads: y and the gradients. */
static void run_bits(int i, int threads, ag_real **out, ptrdiff_t *n) {
    ag_set_threads(threads);
    ag_tensor *x, *w, *b;
    make_leaves(&cases[i], 5, &x, &w, &b);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *y = run_conv(&cases[i], false, &c, x, w, b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, y), AG_ALL, false)), 0);
    *n = y->numel + x->numel + w->numel + b->numel;
    ag_real *o = *out = malloc(sizeof *o * (size_t)*n);
    memcpy(o, y->data, sizeof *o * (size_t)y->numel), o += y->numel;
    memcpy(o, x->grad, sizeof *o * (size_t)x->numel), o += x->numel;
    memcpy(o, w->grad, sizeof *o * (size_t)w->numel), o += w->numel;
    memcpy(o, b->grad, sizeof *o * (size_t)b->numel);
    ag_tape_free(t);
    ag_leaf_free(x), ag_leaf_free(w), ag_leaf_free(b);
    ag_set_threads(1);
}

static bool close(double a, double b) { return fabs(a - b) <= 10 * TOL * (1 + fabs(b)); }

/* The same bits with 2 threads; a second backward doubles the gradients (they accumulate). */
static void test_threads_and_accumulation(void) {
    ag_real *a, *b2;
    ptrdiff_t na, nb;
    run_bits(11, 1, &a, &na);
    run_bits(11, 2, &b2, &nb);
    CU_ASSERT_EQUAL_FATAL(na, nb);
    CU_ASSERT_EQUAL(memcmp(a, b2, sizeof *a * (size_t)na), 0);
    free(a), free(b2);
    const cfg *k = &cases[3];
    ag_tensor *x, *w, *b;
    make_leaves(k, 9, &x, &w, &b);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    ag_real *g1 = NULL;
    for (int round = 0; round < 2; round++) {
        ag_tensor *y = run_conv(k, false, &c, x, w, b);
        CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, y), AG_ALL, false)), 0);
        if (round == 0) {
            g1 = malloc(sizeof *g1 * (size_t)(x->numel + w->numel + b->numel));
            memcpy(g1, x->grad, sizeof *g1 * (size_t)x->numel);
            memcpy(g1 + x->numel, w->grad, sizeof *g1 * (size_t)w->numel);
            memcpy(g1 + x->numel + w->numel, b->grad, sizeof *g1 * (size_t)b->numel);
        }
        ag_tape_reset(t);
    }
    /* 2 g up to rounding: the second pass adds its terms one by one into the first's */
    for (ptrdiff_t i = 0; i < x->numel; i++) CU_ASSERT(close(x->grad[i], 2 * g1[i]));
    for (ptrdiff_t i = 0; i < w->numel; i++) CU_ASSERT(close(w->grad[i], 2 * g1[x->numel + i]));
    for (ptrdiff_t i = 0; i < b->numel; i++)
        CU_ASSERT(close(b->grad[i], 2 * g1[x->numel + w->numel + i]));
    free(g1);
    ag_tape_free(t);
    ag_leaf_free(x), ag_leaf_free(w), ag_leaf_free(b);
}

/* A strided (transposed) input gives the values of its contiguous copy; with recording off
 * nothing is recorded, the result tracks no gradient and the scratch is given back. */
static void test_strided_and_inference(void) {
    const cfg *k = &cases[2];
    ag_tensor *x, *w, *b;
    make_leaves(k, 11, &x, &w, &b);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *y = run_conv(k, false, &c, x, w, b);
    ag_tensor *xt = ag_transpose(t, ag_contiguous(t, ag_transpose(t, x, 2, 3)), 2, 3);
    CU_ASSERT_FALSE(ag_is_contiguous(xt));
    ag_tensor *y2 = run_conv(k, false, &c, xt, w, b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    CU_ASSERT_EQUAL(memcmp(y->data, y2->data, sizeof *y->data * (size_t)y->numel), 0);
    ag_tape_reset(t);
    ag_tape_set_recording(t, false);
    size_t used0 = ag_tape_stats_get(t).bytes_used;
    ag_tensor *y3 = run_conv(k, false, &c, x, w, b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y3);
    CU_ASSERT_FALSE(y3->requires_grad);
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).nodes, 0);
    /* the output and its header only: the scratch (24 x 70 + 70 x 6 values) went back */
    CU_ASSERT(ag_tape_stats_get(t).bytes_used - used0 < sizeof(ag_real) * (size_t)y3->numel + 1024);
    ag_tape_free(t);
    ag_leaf_free(x), ag_leaf_free(w), ag_leaf_free(b);
}

/* Names, shapes, defaults, PyTorch's bounds drawn from the store's RNG in registration order. */
static void test_init(void) {
    nn_params *ps = nn_params_new();
    nn_conv2d c2;
    nn_conv1d c1;
    CU_ASSERT_EQUAL(nn_conv2d_init(&c2, ps, "net.conv1", 6, 8, 3, 5,
                                   &(nn_conv2d_opts){.stride = {2, 1}, .groups = 2}),
                    0);
    CU_ASSERT_EQUAL(nn_conv1d_init(&c1, ps, "net.conv2", 4, 2, 3, NULL), 0);
    nn_conv1d nb;
    CU_ASSERT_EQUAL(nn_conv1d_init(&nb, ps, "net.conv3", 2, 2, 1, &(nn_conv1d_opts){.no_bias = 1}),
                    0);
    CU_ASSERT_PTR_NULL(nb.bias);
    CU_ASSERT_EQUAL(c2.stride[0], 2);
    CU_ASSERT_EQUAL(c2.stride[1], 1);
    CU_ASSERT_EQUAL(c2.dilation[0], 1);
    CU_ASSERT_EQUAL(c2.padding[1], 0);
    CU_ASSERT_EQUAL(c1.groups, 1);
    CU_ASSERT_EQUAL(c1.stride, 1);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 3), 0);
    CU_ASSERT_EQUAL(nn_params_count(ps), 5);
    CU_ASSERT_STRING_EQUAL(c2.weight->name, "net.conv1.weight");
    CU_ASSERT_STRING_EQUAL(c2.bias->name, "net.conv1.bias");
    CU_ASSERT_STRING_EQUAL(c1.weight->name, "net.conv2.weight");
    CU_ASSERT_TRUE(c2.weight->ndim == 4 && c2.weight->shape[0] == 8 && c2.weight->shape[1] == 3 &&
                   c2.weight->shape[2] == 3 && c2.weight->shape[3] == 5);
    CU_ASSERT_TRUE(c1.weight->ndim == 3 && c1.weight->shape[0] == 2 && c1.weight->shape[1] == 4 &&
                   c1.weight->shape[2] == 3);
    /* the same draws as U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from ag_rng seeded 3, in order */
    ag_rng r;
    ag_rng_seed(&r, 3);
    const double k2 = 1 / sqrt(3.0 * 15), k1 = 1 / sqrt(4.0 * 3);
    ag_tensor *ps_order[4] = {c2.weight, c2.bias, c1.weight, c1.bias};
    const double bound[4] = {k2, k2, k1, k1};
    for (int i = 0; i < 4; i++) {
        ag_tensor *p = ps_order[i];
        ag_real *want = malloc(sizeof *want * (size_t)p->numel);
        CU_ASSERT_EQUAL(
            nn_init_fill(nn_init_uniform(-bound[i], bound[i]), want, p->ndim, p->shape, &r), 0);
        CU_ASSERT_EQUAL(memcmp(want, p->data, sizeof *want * (size_t)p->numel), 0);
        double m = 0;
        for (ptrdiff_t e = 0; e < p->numel; e++) m = fmax(m, fabs(p->data[e]));
        CU_ASSERT(m <= bound[i] && m > 0.3 * bound[i]);
        free(want);
    }
    nn_params_free(ps);
}

static void test_errors(void) {
    nn_params *ps = nn_params_new();
    nn_conv2d l;
    nn_conv1d l1;
    CU_ASSERT_EQUAL(nn_conv2d_init(&l, ps, "conv1", 3, 8, 3, 3, NULL), 0);
    CU_ASSERT_EQUAL(nn_conv1d_init(&l1, ps, "enc.conv", 2, 4, 5, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    TG_EXPECT_NULL(nn_conv2d_forward(&l, &c, ag_tensor_new(t, AG_SHAPE(2, 5, 8, 8))),
                   "conv2d 'conv1'", "input [2, 5, 8, 8]", "weight [8, 3, 3, 3]", "(N, 3, H, W)");
    TG_CAPTURED_HAS("conv2d 'conv1'", "[2, 5, 8, 8]");
    TG_EXPECT_NULL(nn_conv2d_forward(&l, &c, ag_tensor_new(t, AG_SHAPE(3, 8, 8))), "conv2d 'conv1'",
                   "input [3, 8, 8]");
    TG_EXPECT_NULL(nn_conv2d_composite(&l, &c, ag_tensor_new(t, AG_SHAPE(1, 3, 2, 8))),
                   "conv2d_composite 'conv1'", "input [1, 3, 2, 8] is too small", "kernel 3x3");
    TG_EXPECT_NULL(nn_conv1d_forward(&l1, &c, ag_tensor_new(t, AG_SHAPE(1, 2, 4))),
                   "conv1d 'enc.conv'", "[1, 2, 4] is too small", "kernel 5", "weight [4, 2, 5]");
    TG_EXPECT_NULL(nn_conv1d_forward(&l1, &c, ag_tensor_new(t, AG_SHAPE(1, 2, 4, 4))),
                   "conv1d 'enc.conv'", "(N, 2, L)");
    CU_ASSERT_PTR_NULL(nn_conv1d_forward(&l1, &c, NULL)); /* NULL in, NULL out */
    /* a struct filled by hand that does not match its weight, or is invalid */
    nn_conv2d bad = l;
    bad.kernel[1] = 5;
    TG_EXPECT_NULL(nn_conv2d_forward(&bad, &c, ag_tensor_new(t, AG_SHAPE(1, 3, 8, 8))),
                   "conv2d 'conv1'", "weight [8, 3, 3, 3]", "expected weight [8, 3, 3, 5]");
    bad = l;
    bad.groups = 2;
    TG_EXPECT_NULL(nn_conv2d_forward(&bad, &c, ag_tensor_new(t, AG_SHAPE(1, 3, 8, 8))),
                   "conv2d 'conv1'", "groups = 2");
    bad = l;
    bad.stride[0] = 0;
    TG_EXPECT_NULL(nn_conv2d_forward(&bad, &c, ag_tensor_new(t, AG_SHAPE(1, 3, 8, 8))),
                   "stride 0x1");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
    /* registration errors name the layer; the store then refuses to finalize */
    nn_params *p2 = nn_params_new();
    TG_EXPECT_ERROR(nn_conv2d_init(&l, p2, "c", 6, 8, 3, 3, &(nn_conv2d_opts){.groups = 4}),
                    "nn_conv2d_init 'c'", "groups = 4");
    TG_EXPECT_ERROR(nn_conv1d_init(&l1, p2, "d", 2, 2, 0, NULL), "nn_conv1d_init 'd'", "kernel 0");
    TG_EXPECT_ERROR(nn_conv1d_init(&l1, p2, "e", 2, 2, 3, &(nn_conv1d_opts){.padding = -1}),
                    "nn_conv1d_init 'e'", "padding -1");
    CU_ASSERT_EQUAL(nn_params_finalize(p2, 1), -1);
    nn_params_free(p2);
    nn_params_free(ps);
}

/* ---- central differences (float64) ---- */
#ifdef TG_DOUBLE
typedef struct gc_case {
    const cfg *k;
    bool composite;
} gc_case;

static ag_tensor *f_conv(ag_tape *t, ag_tensor *const *in, void *u) {
    const gc_case *g = u;
    nn_ctx c = {.tape = t, .training = true};
    return run_conv(g->k, g->composite, &c, in[0], in[1], g->k->bias ? in[2] : NULL);
}

static void test_gradcheck(void) {
    static const int picks[] = {1, 3, 4, 8, 9, 13, 15};
    static const char *names[] = {"conv2d same padding",
                                  "conv2d stride, dilation, groups 2",
                                  "conv2d depthwise",
                                  "conv2d odd sizes, groups 5, no bias",
                                  "conv2d kernel larger than the input",
                                  "conv1d s, p, d, groups",
                                  "conv1d depthwise, stride 3"};
    for (int i = 0; i < (int)(sizeof picks / sizeof *picks); i++)
        for (int composite = 0; composite < 2; composite++) {
            const cfg *k = &cases[picks[i]];
            ag_tensor *x, *w, *b;
            make_leaves(k, 40 + (uint64_t)i, &x, &w, &b);
            ag_tensor *in[3] = {x, w, b};
            gc_case g = {k, composite};
            char name[96];
            snprintf(name, sizeof name, "%s%s", names[i], composite ? " (composite)" : "");
            ag_gradcheck_result r = tg_gradcheck(name, f_conv, b ? 3 : 2, in, &g, NULL);
            if (!r.ok) fprintf(stderr, "\n  %s\n", r.msg);
            CU_ASSERT_TRUE(r.ok);
            CU_ASSERT_EQUAL(r.checked, (int)(x->numel + w->numel + (b ? b->numel : 0)));
            ag_leaf_free(x), ag_leaf_free(w), ag_leaf_free(b);
        }
}
#endif

static CU_TestInfo tests[] = {
    {"exact values and gradients of small cases", test_exact},
    {"fused and composite against direct loops, many shapes", test_against_loops},
    {"same bits with 2 threads; backward accumulates", test_threads_and_accumulation},
    {"strided input; inference records nothing", test_strided_and_inference},
    {"init: names, shapes, PyTorch's bounds from the store's RNG", test_init},
    {"bad input names the layer and the shapes", test_errors},
#ifdef TG_DOUBLE
    {"gradcheck: fused and composite", test_gradcheck},
#endif
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("nn_conv", tests, "nn: Conv1d and Conv2d (float64, tests/nn/test_conv.c)");
}
