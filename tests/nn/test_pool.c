/* test_pool.c -- MaxPool1d/2d and AvgPool1d/2d (nn/pool.h): exact values of small cases (the
 * max's gradient to the first maximum, padding that never wins, NaN, count_include_pad); the
 * fused ops and their composite of ag primitives against direct loops over many windows;
 * backward accumulates; bad input; in float64 (nn64) the central differences of both. Built
 * twice (CMakeLists.txt): against nn64 and nn. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/tg_test.h"

#ifdef TG_DOUBLE
#define TOL 1e-12
#else
#define TOL 1e-6
#endif

typedef struct pcfg {
    int N, C, H, W, KH, KW, SH, SW, PH, PW; /* SH, SW 0: the kernel */
    bool one_d;
} pcfg;

static int sh(const pcfg *k) { return k->SH ? k->SH : k->KH; }
static int sw(const pcfg *k) { return k->SW ? k->SW : k->KW; }
static int out_h(const pcfg *k) { return (k->H + 2 * k->PH - k->KH) / sh(k) + 1; }
static int out_w(const pcfg *k) { return (k->W + 2 * k->PW - k->KW) / sw(k) + 1; }

/* Direct loops (double): y, and dx (assigned) from dy. max: the first strict maximum. */
static void ref_pool(const pcfg *k, bool max, const double *x, double *y, const double *dy,
                     double *dx) {
    const int OH = out_h(k), OW = out_w(k);
    memset(dx, 0, sizeof *dx * (size_t)k->N * k->C * k->H * k->W);
    for (int pl = 0; pl < k->N * k->C; pl++)
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++) {
                double best = -INFINITY, sum = 0;
                int arg = -1;
                for (int p = 0; p < k->KH; p++)
                    for (int q = 0; q < k->KW; q++) {
                        int h = i * sh(k) - k->PH + p, w = j * sw(k) - k->PW + q;
                        if (h < 0 || h >= k->H || w < 0 || w >= k->W) continue;
                        double v = x[(pl * k->H + h) * k->W + w];
                        sum += v;
                        if (v > best) best = v, arg = (pl * k->H + h) * k->W + w;
                    }
                const int o = (pl * OH + i) * OW + j;
                y[o] = max ? best : sum / (k->KH * k->KW);
                if (max) {
                    dx[arg] += dy[o];
                    continue;
                }
                for (int p = 0; p < k->KH; p++)
                    for (int q = 0; q < k->KW; q++) {
                        int h = i * sh(k) - k->PH + p, w = j * sw(k) - k->PW + q;
                        if (h >= 0 && h < k->H && w >= 0 && w < k->W)
                            dx[(pl * k->H + h) * k->W + w] += dy[o] / (k->KH * k->KW);
                    }
            }
}

static ag_tensor *run_pool(const pcfg *k, bool max, bool composite, const nn_ctx *c, ag_tensor *x) {
    const nn_pool_kind kind = max ? NN_POOL_MAX : NN_POOL_AVG;
    if (composite) {
        /* the composite is 2-D: a 1-D input is viewed as (N, C, 1, L) */
        ag_tensor *x4 = k->one_d ? ag_reshape(c->tape, x, AG_SHAPE(k->N, k->C, 1, k->W)) : x;
        ag_tensor *y =
            nn_pool2d_composite(c, x4, kind, (const int[]){k->KH, k->KW},
                                (const int[]){k->SH, k->SW}, (const int[]){k->PH, k->PW});
        return k->one_d && y ? ag_reshape(c->tape, y, AG_SHAPE(k->N, k->C, out_w(k))) : y;
    }
    if (k->one_d) return (max ? nn_max_pool1d : nn_avg_pool1d)(c, x, k->KW, k->SW, k->PW);
    if (k->KH == k->KW && k->SH == k->SW && k->PH == k->PW)
        return (max ? nn_max_pool2d : nn_avg_pool2d)(c, x, k->KH, k->SH, k->PH);
    return nn_pool2d(c, x, kind, (const int[]){k->KH, k->KW}, (const int[]){k->SH, k->SW},
                     (const int[]){k->PH, k->PW});
}

static ag_tensor *make_x(const pcfg *k, uint64_t seed) {
    ag_rng r;
    ag_rng_seed(&r, seed);
    ag_tensor *x = k->one_d ? ag_leaf_new(AG_SHAPE(k->N, k->C, k->W), true)
                            : ag_leaf_new(AG_SHAPE(k->N, k->C, k->H, k->W), true);
    for (ptrdiff_t e = 0; e < x->numel; e++) x->data[e] = (ag_real)ag_rng_normal(&r);
    return x;
}

/* N, C, H, W, KH, KW, SH, SW, PH, PW, one_d */
static const pcfg cases[] = {
    {1, 1, 4, 4, 2, 2, 0, 0, 0, 0, false}, {2, 3, 7, 6, 3, 3, 2, 2, 1, 1, false},
    {2, 2, 5, 9, 2, 3, 1, 2, 1, 1, false}, {1, 4, 8, 7, 3, 3, 1, 1, 1, 1, false},
    {3, 2, 9, 9, 4, 2, 3, 1, 2, 0, false}, {2, 3, 5, 5, 5, 5, 1, 1, 2, 2, false},
    {2, 3, 1, 11, 1, 3, 1, 2, 0, 1, true}, {1, 2, 1, 7, 1, 2, 1, 0, 0, 1, true},
    {3, 1, 1, 6, 1, 4, 1, 1, 0, 2, true},
};
enum { N_CASES = sizeof cases / sizeof *cases };

static double rel_diff(const ag_real *a, const double *b, ptrdiff_t n) {
    double m = 0;
    for (ptrdiff_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]) / (1 + fabs(b[i])));
    return m;
}

static void test_against_loops(void) {
    for (int i = 0; i < N_CASES; i++)
        for (int v = 0; v < 4; v++) {
            const bool max = v & 1, composite = v & 2;
            const pcfg *k = &cases[i];
            ag_tensor *x = make_x(k, 10 + (uint64_t)i);
            ag_tape *t = ag_tape_new();
            nn_ctx c = {.tape = t, .training = true};
            ag_tensor *y = run_pool(k, max, composite, &c, x);
            CU_ASSERT_PTR_NOT_NULL_FATAL(y);
            CU_ASSERT_EQUAL(y->numel, (ptrdiff_t)k->N * k->C * out_h(k) * out_w(k));
            CU_ASSERT_EQUAL(y->ndim, k->one_d ? 3 : 4);
            ag_tensor *R = ag_tensor_new(t, y->ndim, y->shape);
            ag_rng r;
            ag_rng_seed(&r, 3);
            for (ptrdiff_t e = 0; e < R->numel; e++) R->data[e] = (ag_real)ag_rng_normal(&r);
            CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, R), AG_ALL, false)), 0);
            double *xd = malloc(sizeof *xd * (size_t)x->numel),
                   *dx = malloc(sizeof *dx * (size_t)x->numel);
            double *yr = malloc(sizeof *yr * (size_t)y->numel),
                   *Rd = malloc(sizeof *Rd * (size_t)y->numel);
            for (ptrdiff_t e = 0; e < x->numel; e++) xd[e] = x->data[e];
            for (ptrdiff_t e = 0; e < y->numel; e++) Rd[e] = R->data[e];
            ref_pool(k, max, xd, yr, Rd, dx);
            double ey = rel_diff(y->data, yr, y->numel), ex = rel_diff(x->grad, dx, x->numel);
            if (!(ey <= 10 * TOL && ex <= 10 * TOL))
                fprintf(stderr, "\n  case %d %s%s: y %g, dx %g\n", i, max ? "max" : "avg",
                        composite ? " composite" : "", ey, ex);
            CU_ASSERT(ey <= 10 * TOL && ex <= 10 * TOL);
            free(xd), free(dx), free(yr), free(Rd);
            ag_tape_free(t);
            ag_leaf_free(x);
        }
}

static void expect_values(const ag_real *got, const double *want, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) {
        CU_ASSERT_DOUBLE_EQUAL(got[i], want[i], 1e-6);
        if (fabs(got[i] - want[i]) > 1e-6)
            fprintf(stderr, "\n  element %td: %.9g, expected %.9g\n", i, (double)got[i], want[i]);
    }
}

/* 1..16 (4 x 4): max [[6, 8], [14, 16]], avg [[3.5, 5.5], [11.5, 13.5]]; ones (3 x 3), avg 3x3
 * stride 1 padding 1: corners 4/9, edges 6/9, centre 1 (count_include_pad); ties: the gradient
 * goes to the first element of each window; a padded window of negatives is not 0; NaN wins;
 * 1-D. Each also through the composite (2-D cases). */
static void test_exact(void) {
    ag_tensor *x = ag_leaf_new(AG_SHAPE(1, 1, 4, 4), true);
    for (int i = 0; i < 16; i++) x->data[i] = (ag_real)(i + 1);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    const int k2[2] = {2, 2}, k3[2] = {3, 3}, s1[2] = {1, 1}, p1[2] = {1, 1};
    for (int comp = 0; comp < 2; comp++) {
        ag_tensor *(*pool)(const nn_ctx *, ag_tensor *, nn_pool_kind, const int *, const int *,
                           const int *) = comp ? nn_pool2d_composite : nn_pool2d;
        ag_tensor *y = pool(&c, x, NN_POOL_MAX, k2, NULL, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        expect_values(y->data, (const double[]){6, 8, 14, 16}, 4);
        CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, y, AG_ALL, false)), 0);
        expect_values(x->grad, (const double[]){0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1},
                      16);
        memset(x->grad, 0, sizeof *x->grad * 16);
        ag_tape_reset(t);
        expect_values(pool(&c, x, NN_POOL_AVG, k2, NULL, NULL)->data,
                      (const double[]){3.5, 5.5, 11.5, 13.5}, 4);
        ag_tensor *ones = ag_tensor_new(t, AG_SHAPE(1, 1, 3, 3));
        for (int i = 0; i < 9; i++) ones->data[i] = 1;
        expect_values(
            pool(&c, ones, NN_POOL_AVG, k3, s1, p1)->data,
            (const double[]){4. / 9, 6. / 9, 4. / 9, 6. / 9, 1, 6. / 9, 4. / 9, 6. / 9, 4. / 9}, 9);
        /* ties: all equal, windows 2x2 stride 2 -> the first element of each */
        ag_tensor *z = ag_leaf_new(AG_SHAPE(1, 1, 2, 4), true);
        ag_tensor *yz = pool(&c, z, NN_POOL_MAX, k2, NULL, NULL);
        CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, yz, AG_ALL, false)), 0);
        expect_values(z->grad, (const double[]){1, 0, 1, 0, 0, 0, 0, 0}, 8);
        ag_leaf_free(z);
        ag_tape_reset(t);
        /* padding never wins: all -5, 3x3 windows with padding 1 */
        ag_tensor *neg = ag_tensor_new(t, AG_SHAPE(1, 1, 2, 2));
        for (int i = 0; i < 4; i++) neg->data[i] = -5;
        expect_values(pool(&c, neg, NN_POOL_MAX, k3, s1, p1)->data,
                      (const double[]){-5, -5, -5, -5}, 4);
        ag_tape_reset(t);
    }
    /* NaN in a window is its maximum (the fused op, as PyTorch) */
    ag_tensor *nan = ag_tensor_from(t, AG_SHAPE(1, 1, 2, 2), (const ag_real[]){1, NAN, 3, 2});
    ag_tensor *yn = nn_max_pool2d(&c, nan, 2, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(yn);
    CU_ASSERT_TRUE(isnan(yn->data[0]));
    /* 1-D: [1, 3, 2, 5, 4]: kernel 2 -> [3, 5]; kernel 3 stride 2 padding 1 -> [3, 5, 5];
     * avg kernel 2 stride 1 -> [2, 2.5, 3.5, 4.5] */
    ag_tensor *x1 = ag_tensor_from(t, AG_SHAPE(1, 1, 5), (const ag_real[]){1, 3, 2, 5, 4});
    expect_values(nn_max_pool1d(&c, x1, 2, 0, 0)->data, (const double[]){3, 5}, 2);
    expect_values(nn_max_pool1d(&c, x1, 3, 2, 1)->data, (const double[]){3, 5, 5}, 3);
    expect_values(nn_avg_pool1d(&c, x1, 2, 1, 0)->data, (const double[]){2, 2.5, 3.5, 4.5}, 4);
    ag_tape_free(t);
    ag_leaf_free(x);
}

/* A second backward doubles the gradient; recording off: no node, no gradient. */
static void test_accumulation(void) {
    for (int max = 0; max < 2; max++) {
        const pcfg *k = &cases[1];
        ag_tensor *x = make_x(k, 4);
        ag_tape *t = ag_tape_new();
        nn_ctx c = {.tape = t, .training = true};
        ag_real *g1 = malloc(sizeof *g1 * (size_t)x->numel);
        for (int round = 0; round < 2; round++) {
            ag_tensor *y = run_pool(k, max, false, &c, x);
            CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, y), AG_ALL, false)), 0);
            if (round == 0) memcpy(g1, x->grad, sizeof *g1 * (size_t)x->numel);
            ag_tape_reset(t);
        }
        for (ptrdiff_t i = 0; i < x->numel; i++) /* up to rounding: terms added one by one */
            CU_ASSERT(fabs(x->grad[i] - 2 * g1[i]) <= 10 * TOL * (1 + fabs(g1[i])));
        ag_tape_set_recording(t, false);
        ag_tensor *y = run_pool(k, max, false, &c, x);
        CU_ASSERT_FALSE(y->requires_grad);
        CU_ASSERT_EQUAL(ag_tape_stats_get(t).nodes, 0);
        free(g1);
        ag_tape_free(t);
        ag_leaf_free(x);
    }
}

static void test_errors(void) {
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *x4 = ag_tensor_new(t, AG_SHAPE(2, 3, 4, 4)),
              *x3 = ag_tensor_new(t, AG_SHAPE(2, 3, 4));
    TG_EXPECT_NULL(nn_max_pool2d(&c, x3, 2, 0, 0), "max_pool2d", "input [2, 3, 4]", "(N, C, H, W)");
    TG_CAPTURED_HAS("max_pool2d", "[2, 3, 4]");
    TG_EXPECT_NULL(nn_avg_pool1d(&c, x4, 2, 0, 0), "avg_pool1d", "input [2, 3, 4, 4]", "(N, C, L)");
    TG_EXPECT_NULL(nn_max_pool2d(&c, x4, 3, 1, 2), "max_pool2d", "[2, 3, 4, 4]", "padding 2x2",
                   "padding <= kernel / 2");
    TG_EXPECT_NULL(nn_avg_pool2d(&c, x4, 0, 1, 0), "avg_pool2d", "kernel 0x0");
    TG_EXPECT_NULL(nn_max_pool2d(&c, x4, 5, 1, 0), "max_pool2d", "[2, 3, 4, 4] is smaller",
                   "kernel 5x5");
    TG_EXPECT_NULL(nn_pool2d_composite(&c, x4, NN_POOL_MAX, (const int[]){2, 7}, NULL, NULL),
                   "max_pool2d_composite", "kernel 2x7");
    TG_EXPECT_NULL(nn_max_pool1d(&c, x3, 2, -1, 0), "max_pool1d", "stride -1");
    CU_ASSERT_PTR_NULL(nn_max_pool2d(&c, NULL, 2, 0, 0));
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

#ifdef TG_DOUBLE
typedef struct gc_case {
    const pcfg *k;
    bool max, composite;
} gc_case;

static ag_tensor *f_pool(ag_tape *t, ag_tensor *const *in, void *u) {
    const gc_case *g = u;
    nn_ctx c = {.tape = t, .training = true};
    return run_pool(g->k, g->max, g->composite, &c, in[0]);
}

static void test_gradcheck(void) {
    static const int picks[] = {1, 2, 4, 6, 8};
    for (int i = 0; i < (int)(sizeof picks / sizeof *picks); i++)
        for (int v = 0; v < 4; v++) {
            const pcfg *k = &cases[picks[i]];
            gc_case g = {k, v & 1, v & 2};
            ag_tensor *x = make_x(k, 50 + (uint64_t)i);
            char name[96];
            snprintf(name, sizeof name, "%s_pool%dd k %dx%d s %dx%d p %dx%d%s",
                     g.max ? "max" : "avg", k->one_d ? 1 : 2, k->KH, k->KW, sh(k), sw(k), k->PH,
                     k->PW, g.composite ? " (composite)" : "");
            ag_gradcheck_result r = tg_gradcheck(name, f_pool, 1, &x, &g, NULL);
            if (!r.ok) fprintf(stderr, "\n  %s\n", r.msg);
            CU_ASSERT_TRUE(r.ok);
            CU_ASSERT_EQUAL(r.checked, (int)x->numel);
            ag_leaf_free(x);
        }
}
#endif

static CU_TestInfo tests[] = {
    {"exact values: max, avg, ties, padding, NaN, 1-D", test_exact},
    {"fused and composite against direct loops", test_against_loops},
    {"backward accumulates; inference records nothing", test_accumulation},
    {"bad input names the op and the shapes", test_errors},
#ifdef TG_DOUBLE
    {"gradcheck: fused and composite", test_gradcheck},
#endif
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("nn_pool", tests, "nn: MaxPool and AvgPool (float64, tests/nn/test_pool.c)");
}
