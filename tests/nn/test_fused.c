/* test_fused.c -- the fused kernels of the nn layers against their composites of ag primitives:
 * scaled dot-product attention over heads, additive scores, LayerNorm, LayerNorm of a residual
 * sum (AddNorm) and the GRU cell. Same inputs, same dropout stream: the same values, the same
 * gradients and the same dropout draws; then each kernel's bad inputs, and the attention's
 * threads. Built twice from this file (CMakeLists.txt): against nn64 (float64, where the
 * gradients are compared) and against nn (float32, the product); the tolerances hold in both.
 * Central differences: tests/nn/test_nn_gradcheck.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/tg_test.h"


static double arr_diff(const ag_real *a, const ag_real *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Fills leaves (and the projection) with N(0, scale^2) draws from r. */
static void fill(ag_tensor *const *xs, int n, ag_rng *r, double scale) {
    for (int l = 0; l < n; l++)
        for (ptrdiff_t i = 0; i < xs[l]->numel; i++)
            xs[l]->data[i] = (ag_real)(scale * ag_rng_normal(r));
}

/* loss = <y, proj>, a fixed random projection, then backward. */
static void backward_projected(ag_tape *t, ag_tensor *y, ag_tensor *proj) {
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, y, proj), AG_ALL, false)), 0);
}

/* Copies the gradients of leaves xs[0..n) one after the other into g, and frees the leaves. */
static void take_grads(ag_tensor *const *xs, int n, ag_real *g) {
    for (int l = 0; l < n; l++) {
        memcpy(g, xs[l]->grad, sizeof *g * (size_t)xs[l]->numel);
        g += xs[l]->numel;
        ag_leaf_free(xs[l]);
    }
}

/* ---- scaled dot-product attention over heads ---- */

enum { AB = 3, ATQ = 4, ATK = 5, AHEADS = 2, AH = 6, AHV = 4 };

typedef struct attn_run {
    ag_real out[AB * ATQ * AHV], w[AB * AHEADS * ATQ * ATK];
    ag_real gq[AB * ATQ * AH], gk[AB * ATK * AH], gv[AB * ATK * AHV];
} attn_run;

/* One forward and backward (loss = <out, fixed random projection>) of the fused kernel or of
 * the composite, in training, on the same inputs and dropout stream. */
static void attn_once(bool fused, const int32_t *lens, int vl_ndim, double p, attn_run *res) {
    ag_tape *t = ag_tape_new();
    ag_rng data, drop;
    ag_rng_seed(&data, 31);
    ag_rng_seed(&drop, 5);
    ag_tensor *q = ag_leaf_new(AG_SHAPE(AB, ATQ, AH), true),
              *k = ag_leaf_new(AG_SHAPE(AB, ATK, AH), true);
    ag_tensor *v = ag_leaf_new(AG_SHAPE(AB, ATK, AHV), true),
              *proj = ag_tensor_new(t, AG_SHAPE(AB, ATQ, AHV));
    ag_tensor *xs[4] = {q, k, v, proj};
    fill(xs, 4, &data, 1);
    nn_attention a = {.heads = AHEADS, .dropout = {p}};
    nn_ctx c = {.tape = t, .training = true, .rng = &drop};
    ag_tensor *w;
    ag_tensor *out =
        (fused ? nn_attention_forward : nn_attention_composite)(&a, &c, q, k, v, lens, vl_ndim, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->ndim, 3);
    CU_ASSERT_EQUAL(w->shape[0], AB * AHEADS);
    backward_projected(t, out, proj);
    for (ptrdiff_t i = 0; i < out->numel; i++) res->out[i] = ag_get(out, i);
    for (ptrdiff_t i = 0; i < w->numel; i++) res->w[i] = ag_get(w, i);
    memcpy(res->gq, q->grad, sizeof res->gq);
    memcpy(res->gk, k->grad, sizeof res->gk);
    memcpy(res->gv, v->grad, sizeof res->gv);
    for (int l = 0; l < 3; l++) ag_leaf_free(xs[l]);
    ag_tape_free(t);
}

static void test_attention_vs_composite(void) {
    static const int32_t lens1[AB] = {5, 2, 0},
                         lens2[AB * ATQ] = {1, 2, 3, 4, 5, 5, 0, 1, 3, 3, 3, 3};
    const struct {
        const int32_t *lens;
        int vl;
        double p;
    } cases[] = {{NULL, 0, 0}, {lens1, 1, 0}, {lens2, 2, 0}, {lens1, 1, 0.4}, {lens2, 2, 0.5}};
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
                    for (int j = 2; j < ATK; j++)
                        CU_ASSERT_EQUAL(f.w[(((1 * AHEADS + h) * ATQ) + i) * ATK + j], 0);
            /* row b = 2 has none: uniform */
            CU_ASSERT_DOUBLE_EQUAL(f.w[(2 * AHEADS * ATQ) * ATK], 1.0 / ATK, 1e-7);
        }
        if (cases[c].p > 0) { /* dropout really dropped something: the output differs without it */
            attn_run nod;
            attn_once(true, cases[c].lens, cases[c].vl, 0, &nod);
            CU_ASSERT_TRUE(arr_diff(f.out, nod.out, sizeof f.out / sizeof *f.out) > 1e-3);
        }
    }
    /* eval mode and the errors */
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 1);
    nn_ctx eval = {.tape = t}, train = {.tape = t, .training = true, .rng = &r};
    ag_tensor *q = ag_tensor_new(t, AG_SHAPE(2, 3, 4)), *k = ag_tensor_new(t, AG_SHAPE(2, 5, 4));
    ag_tensor *v = ag_tensor_new(t, AG_SHAPE(2, 5, 6)), *w;
    nn_attention a2 = {.heads = 2, .dropout = {0.5}}, a3 = {.heads = 3},
                 bad_p = {.heads = 2, .dropout = {1.5}};
    CU_ASSERT_PTR_NOT_NULL(
        nn_attention_forward(&a2, &eval, q, k, v, NULL, 0, &w)); /* no rng needed */
    CU_ASSERT_PTR_NULL(
        nn_attention_forward(&a2, &eval, q, k, ag_tensor_new(t, AG_SHAPE(2, 4, 6)), NULL, 0, NULL));
    TG_CAPTURED_HAS("attention", "[2, 3, 4]", "[2, 4, 6]");
    CU_ASSERT_PTR_NULL(nn_attention_forward(&a3, &eval, q, k, v, NULL, 0, NULL));
    TG_CAPTURED_HAS("attention", "3 heads", "[2, 5, 6]");
    CU_ASSERT_PTR_NULL(nn_attention_forward(&a2, &eval, q, k, v, NULL, 3, NULL));
    TG_CAPTURED_HAS("attention", "3 dimensions");
    CU_ASSERT_PTR_NULL(nn_attention_forward(&bad_p, &train, q, k, v, NULL, 0, &w));
    TG_CAPTURED_HAS("attention", "1.5");
    CU_ASSERT_PTR_NULL(w);
    train.rng = NULL;
    CU_ASSERT_PTR_NULL(nn_attention_forward(&a2, &train, q, k, v, NULL, 0, NULL));
    TG_CAPTURED_HAS("attention", "RNG");
    CU_ASSERT_PTR_NULL(nn_attention_composite(&a3, &eval, q, k, v, NULL, 0, &w));
    TG_CAPTURED_HAS("attention_composite", "3 heads", "[2, 5, 6]");
    CU_ASSERT_PTR_NULL(w);
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* ---- the GRU cell ---- */

static void gru_once(bool fused, ag_real *out, ag_real *grads) {
    enum { B = 5, H = 7 };
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 77);
    ag_tensor *gi = ag_leaf_new(AG_SHAPE(B, 3 * H), true),
              *gh = ag_leaf_new(AG_SHAPE(B, 3 * H), true);
    ag_tensor *h = ag_leaf_new(AG_SHAPE(B, H), true), *proj = ag_tensor_new(t, AG_SHAPE(B, H));
    ag_tensor *xs[4] = {gi, gh, h, proj};
    fill(xs, 4, &r, 2);
    nn_ctx c = {.tape = t};
    ag_tensor *y = (fused ? nn_gru_cell_forward : nn_gru_cell_composite)(&c, gi, gh, h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    backward_projected(t, y, proj);
    memcpy(out, y->data, sizeof *out * B * H);
    take_grads(xs, 3, grads);
    ag_tape_free(t);
}

static void test_gru_cell_vs_composite(void) {
    enum { NY = 5 * 7, NG = 2 * 5 * 21 + 5 * 7 };
    ag_real yf[NY], yc[NY], gf[NG], gc[NG];
    gru_once(true, yf, gf);
    gru_once(false, yc, gc);
    CU_ASSERT_TRUE(arr_diff(yf, yc, NY) < 1e-6);
    CU_ASSERT_TRUE(arr_diff(gf, gc, NG) < 1e-5);
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *gi = ag_tensor_new(t, AG_SHAPE(2, 12)), *h = ag_tensor_new(t, AG_SHAPE(2, 3));
    CU_ASSERT_PTR_NULL(nn_gru_cell_forward(&c, gi, gi, h));
    TG_CAPTURED_HAS("gru_cell", "[2, 12]", "[2, 3]");
    CU_ASSERT_PTR_NULL(nn_gru_cell_composite(&c, gi, gi, h));
    TG_CAPTURED_HAS("gru_cell_composite", "[2, 12]", "[2, 3]");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* ---- additive scores ---- */

/* The fused additive scores against add (broadcast) + tanh + linear, values and gradients. */
static void test_additive_scores_vs_composite(void) {
    enum { B = 3, Tq = 2, Tk = 5, H = 6 };
    ag_real ys[2][B * Tq * Tk], gs[2][B * Tq * H + B * Tk * H + H];
    for (int fused = 0; fused < 2; fused++) {
        ag_tape *t = ag_tape_new();
        ag_rng r;
        ag_rng_seed(&r, 8);
        ag_tensor *q = ag_leaf_new(AG_SHAPE(B, Tq, H), true),
                  *k = ag_leaf_new(AG_SHAPE(B, Tk, H), true);
        ag_tensor *w = ag_leaf_new(AG_SHAPE(1, H), true),
                  *proj = ag_tensor_new(t, AG_SHAPE(B, Tq, Tk));
        ag_tensor *xs[4] = {q, k, w, proj};
        fill(xs, 4, &r, 1);
        nn_linear w_v = {.weight = w, .in = H, .out = 1};
        nn_ctx c = {.tape = t};
        ag_tensor *y =
            (fused ? nn_additive_scores_forward : nn_additive_scores_composite)(&w_v, &c, q, k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        backward_projected(t, y, proj);
        memcpy(ys[fused], y->data, sizeof ys[fused]);
        take_grads(xs, 3, gs[fused]);
        ag_tape_free(t);
    }
    CU_ASSERT_TRUE(arr_diff(ys[0], ys[1], B * Tq * Tk) < 1e-5);
    CU_ASSERT_TRUE(arr_diff(gs[0], gs[1], sizeof gs[0] / sizeof gs[0][0]) < 1e-5);
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *q = ag_tensor_new(t, AG_SHAPE(2, 1, 4)), *k = ag_tensor_new(t, AG_SHAPE(2, 3, 4));
    nn_linear w5 = {.weight = ag_tensor_new(t, AG_SHAPE(1, 5)), .in = 5, .out = 1};
    CU_ASSERT_PTR_NULL(nn_additive_scores_forward(&w5, &c, q, k));
    TG_CAPTURED_HAS("additive_scores", "[2, 1, 4]", "[5]");
    /* w_v must be a Linear(H -> 1) without bias */
    nn_linear biased = {.weight = ag_tensor_new(t, AG_SHAPE(1, 4)),
                        .bias = ag_tensor_new(t, AG_SHAPE(1)),
                        .in = 4,
                        .out = 1};
    CU_ASSERT_PTR_NULL(nn_additive_scores_forward(&biased, &c, q, k));
    TG_CAPTURED_HAS("additive_scores", "with bias");
    CU_ASSERT_PTR_NULL(nn_additive_scores_composite(&biased, &c, q, k));
    TG_CAPTURED_HAS("additive_scores", "with bias");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* ---- LayerNorm of a residual sum ---- */

/* ---- LayerNorm ---- */

/* LayerNorm fused against its composite (nn_layer_norm_composite): the spec's literal, then
 * values and gradients (x, gamma, beta) over one and two trailing axes, with and without the
 * affine part; then bad input. */
static void test_layer_norm_vs_composite(void) {
    enum { N = 3 * 4 * 5 };
    ag_tape *t = ag_tape_new();
    nn_ctx c0 = {.tape = t};
    /* docs/spec.md: [[1,2],[2,3]] -> [[-1,1],[-1,1]] to 4 decimals, both ways */
    nn_layer_norm plain = {.ndim = 1, .shape = {2}, .eps = 1e-5};
    ag_tensor *lit = ag_tensor_from(t, AG_SHAPE(2, 2), (const ag_real[]){1, 2, 2, 3});
    const ag_real want[] = {-1, 1, -1, 1};
    ag_tensor *lf = nn_layer_norm_forward(&plain, &c0, lit),
              *lc = nn_layer_norm_composite(&plain, &c0, lit);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lc);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_DOUBLE_EQUAL(lf->data[i], want[i], 5e-5);
        CU_ASSERT_DOUBLE_EQUAL(lc->data[i], want[i], 5e-5);
    }
    ag_tape_free(t);
    for (int variant = 0; variant < 3; variant++) { /* (4, 5) affine, (5) affine, (5) plain */
        const int nd = variant == 0 ? 2 : 1;
        const bool affine = variant < 2;
        ag_real ys[2][N], gs[2][N + 2 * 20];
        for (int fused = 0; fused < 2; fused++) {
            ag_tape *tt = ag_tape_new();
            ag_rng r;
            ag_rng_seed(&r, 15);
            ag_tensor *x = ag_leaf_new(AG_SHAPE(3, 4, 5), true);
            ag_tensor *gm =
                nd == 2 ? ag_leaf_new(AG_SHAPE(4, 5), true) : ag_leaf_new(AG_SHAPE(5), true);
            ag_tensor *bt =
                nd == 2 ? ag_leaf_new(AG_SHAPE(4, 5), true) : ag_leaf_new(AG_SHAPE(5), true);
            ag_tensor *proj = ag_tensor_new(tt, AG_SHAPE(3, 4, 5));
            ag_tensor *xs[4] = {x, gm, bt, proj};
            fill(xs, 4, &r, 1);
            nn_layer_norm ln = {.weight = affine ? gm : NULL,
                                .bias = affine ? bt : NULL,
                                .ndim = nd,
                                .shape = {nd == 2 ? 4 : 5, 5},
                                .eps = 1e-5};
            nn_ctx c = {.tape = tt};
            ag_tensor *out = (fused ? nn_layer_norm_forward : nn_layer_norm_composite)(&ln, &c, x);
            CU_ASSERT_PTR_NOT_NULL_FATAL(out);
            backward_projected(tt, out, proj);
            memcpy(ys[fused], out->data, sizeof ys[fused]);
            take_grads(xs, 3, gs[fused]);
            ag_tape_free(tt);
        }
        const size_t ng = N + (size_t)2 * (nd == 2 ? 20 : 5);
        CU_ASSERT_TRUE(arr_diff(ys[0], ys[1], N) < 1e-5);
        CU_ASSERT_TRUE(arr_diff(gs[0], gs[1], ng) < 1e-4);
        if (!affine) /* no weight, no bias: their leaves got no gradient */
            CU_ASSERT_TRUE(arr_diff(gs[0] + N, gs[1] + N, ng - N) == 0);
    }
    ag_set_error_handler(tg_capture, NULL);
    t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *a = ag_tensor_new(t, AG_SHAPE(2, 3));
    nn_layer_norm bad = {
        .weight = ag_tensor_new(t, AG_SHAPE(2)), .ndim = 1, .shape = {2}, .eps = 1e-5};
    CU_ASSERT_PTR_NULL(nn_layer_norm_forward(&bad, &c, a));
    TG_CAPTURED_HAS("layer_norm", "[2]", "[2, 3]");
    CU_ASSERT_PTR_NULL(nn_layer_norm_composite(&bad, &c, a));
    TG_CAPTURED_HAS("layer_norm_composite", "[2]", "[2, 3]");
    nn_layer_norm deep = {.ndim = 3, .shape = {1, 2, 3}, .eps = 1e-5};
    CU_ASSERT_PTR_NULL(nn_layer_norm_forward(&deep, &c, a));
    TG_CAPTURED_HAS("layer_norm", "last 3 axes", "[2, 3]");
    CU_ASSERT_PTR_NULL(nn_layer_norm_composite(&deep, &c, a));
    TG_CAPTURED_HAS("layer_norm_composite", "last 3 axes", "[2, 3]");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* AddNorm fused against nn_layer_norm_composite(ag_add(nn_dropout_forward(y), x)): the same
 * dropout draws, the same values and gradients (x, y, gamma, beta), with and without dropout,
 * in training and in eval. */
static void test_add_layer_norm_vs_composite(void) {
    enum { N = 4 * 3 * 6, D = 6 };
    const struct {
        double p;
        bool training;
    } cases[] = {{0, true}, {0.3, true}, {0.3, false}};
    ag_real eval_out[N] = {0}, nodrop_out[N] = {0};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ag_real ys[2][N], gs[2][2 * N + 2 * D];
        for (int fused = 0; fused < 2; fused++) {
            ag_tape *t = ag_tape_new();
            ag_rng r, dr;
            ag_rng_seed(&r, 21);
            ag_rng_seed(&dr, 4);
            ag_tensor *x = ag_leaf_new(AG_SHAPE(4, 3, D), true),
                      *y = ag_leaf_new(AG_SHAPE(4, 3, D), true);
            ag_tensor *gm = ag_leaf_new(AG_SHAPE(D), true), *bt = ag_leaf_new(AG_SHAPE(D), true);
            ag_tensor *proj = ag_tensor_new(t, AG_SHAPE(4, 3, D));
            ag_tensor *xs[5] = {x, y, gm, bt, proj};
            fill(xs, 5, &r, 1);
            nn_layer_norm ln = {.weight = gm, .bias = bt, .ndim = 1, .shape = {D}, .eps = 1e-5};
            nn_dropout drop = {cases[k].p};
            nn_ctx c = {.tape = t, .training = cases[k].training, .rng = &dr};
            ag_tensor *out = (fused ? nn_layer_norm_add_forward
                                    : nn_layer_norm_add_composite)(&ln, &drop, &c, x, y);
            CU_ASSERT_PTR_NOT_NULL_FATAL(out);
            backward_projected(t, out, proj);
            memcpy(ys[fused], out->data, sizeof ys[fused]);
            take_grads(xs, 4, gs[fused]);
            ag_tape_free(t);
        }
        CU_ASSERT_TRUE(arr_diff(ys[0], ys[1], N) < 1e-5);
        CU_ASSERT_TRUE(arr_diff(gs[0], gs[1], sizeof gs[0] / sizeof gs[0][0]) < 1e-4);
        if (cases[k].p == 0) memcpy(nodrop_out, ys[1], sizeof nodrop_out);
        if (!cases[k].training) memcpy(eval_out, ys[1], sizeof eval_out);
        if (cases[k].p > 0 && cases[k].training) /* dropout really dropped something */
            CU_ASSERT_TRUE(arr_diff(ys[1], nodrop_out, N) > 1e-3);
    }
    CU_ASSERT_TRUE(arr_diff(eval_out, nodrop_out, N) == 0); /* eval: no dropout */
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx eval = {.tape = t}, train = {.tape = t, .training = true};
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 3)), *y = ag_tensor_new(t, AG_SHAPE(3, 2));
    nn_layer_norm ln = {.ndim = 1, .shape = {3}, .eps = 1e-5};
    nn_dropout none = {0}, half = {0.5};
    CU_ASSERT_PTR_NULL(nn_layer_norm_add_forward(&ln, &none, &eval, x, y));
    TG_CAPTURED_HAS("add_layer_norm", "[2, 3]", "[3, 2]");
    CU_ASSERT_PTR_NULL(nn_layer_norm_add_composite(&ln, &none, &eval, x, y));
    TG_CAPTURED_HAS("add_layer_norm_composite", "[2, 3]", "[3, 2]");
    CU_ASSERT_PTR_NULL(nn_layer_norm_add_forward(&ln, &half, &train, x, x));
    TG_CAPTURED_HAS("add_layer_norm", "RNG");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

/* ---- threads ---- */

/* The fused attention's 256 (batch row, head) pairs at the Transformer's sizes, forward and
 * backward with dropout: two threads give one thread's bits. */
static void run_attention_pairs(ag_real *out, ag_real *grads) {
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 99);
    ag_tensor *hq = ag_leaf_new(AG_SHAPE(64, 10, 32), true),
              *hv = ag_leaf_new(AG_SHAPE(64, 10, 32), true);
    ag_tensor *leaves[2] = {hq, hv};
    fill(leaves, 2, &r, 1);
    static int32_t lens[64];
    for (int i = 0; i < 64; i++) lens[i] = 1 + i % 10;
    nn_attention a = {.heads = 4, .dropout = {0.1}};
    nn_ctx c = {.tape = t, .training = true, .rng = &r};
    ag_tensor *mha = nn_attention_forward(&a, &c, hq, hq, hv, lens, 1, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mha);
    CU_ASSERT_EQUAL(ag_backward(t, ag_sum(t, ag_mul(t, mha, mha), AG_ALL, false)), 0);
    memcpy(out, mha->data, sizeof *out * (size_t)mha->numel);
    take_grads(leaves, 2, grads);
    ag_tape_free(t);
}

static void test_attention_threads_same_bits(void) {
    enum { NOUT = 64 * 10 * 32, NGRAD = 2 * 64 * 320 };
    static ag_real o1[NOUT], o2[NOUT], g1[NGRAD], g2[NGRAD];
    run_attention_pairs(o1, g1);
    CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
    run_attention_pairs(o2, g2);
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    CU_ASSERT_EQUAL(memcmp(o1, o2, sizeof o1), 0);
    CU_ASSERT_EQUAL(memcmp(g1, g2, sizeof g1), 0);
}

/* ---- one query per row (a decoder step) ---- */

/* The attention of B rows with one query each over keys and values narrowed from caches of
 * TCAP positions (a decoder's self-attention: rows TCAP * H apart) or whole (cross-attention),
 * with or without lengths: without recording (the kernel for one query per row) and with
 * (the general kernel, on contiguous copies) it must give the same bits. */
static void one_query_case(int heads, int H, int Hv, int Tk, bool narrowed, bool masked) {
    enum { B = 7, TCAP = 20 };
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 1000 + heads * 31 + Tk);
    ag_tensor *q = ag_leaf_new(AG_SHAPE(B, 1, H), true),
              *kc = ag_leaf_new(AG_SHAPE(B, narrowed ? TCAP : Tk, H), false),
              *vc = ag_leaf_new(AG_SHAPE(B, narrowed ? TCAP : Tk, Hv), false);
    ag_tensor *xs[3] = {q, kc, vc};
    fill(xs, 3, &r, 1);
    int32_t lens[B];
    for (int b = 0; b < B; b++) lens[b] = b % (Tk + 1); /* 0 (uniform) .. Tk */
    nn_attention a = {.heads = heads};
    nn_ctx c = {.tape = t, .training = false};
    ag_tensor *res[2], *w[2];
    for (int rec = 0; rec < 2; rec++) {
        bool prev = ag_tape_set_recording(t, rec == 1);
        ag_tensor *k = narrowed ? ag_narrow(t, kc, 1, 0, Tk) : kc,
                  *v = narrowed ? ag_narrow(t, vc, 1, 0, Tk) : vc;
        res[rec] = nn_attention_forward(&a, &c, q, k, v, masked ? lens : NULL, masked, &w[rec]);
        ag_tape_set_recording(t, prev);
        CU_ASSERT_PTR_NOT_NULL_FATAL(res[rec]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w[rec]);
    }
    CU_ASSERT_EQUAL(res[0]->requires_grad, false);
    CU_ASSERT_EQUAL(res[1]->requires_grad, true);
    bool same = memcmp(res[0]->data, res[1]->data, sizeof(ag_real) * (size_t)B * Hv) == 0 &&
                memcmp(w[0]->data, w[1]->data, sizeof(ag_real) * (size_t)B * heads * Tk) == 0;
    CU_ASSERT(same);
    if (!same)
        fprintf(stderr,
                "\n  one query: heads %d, H %d, Hv %d, Tk %d, narrowed %d, masked %d differ\n",
                heads, H, Hv, Tk, narrowed, masked);
    for (int l = 0; l < 3; l++) ag_leaf_free(xs[l]);
    ag_tape_free(t);
}

static void test_attention_one_query_same_bits(void) {
    static const int cfg[][4] = {/* heads, H, Hv, Tk */
                                 {8, 256, 256, 10}, {8, 256, 256, 1}, {8, 256, 256, 16},
                                 {4, 64, 32, 5},    {1, 32, 48, 7},   {2, 6, 4, 3},
                                 {1, 128, 128, 4}, /* 128 features a head: ag_gemm's BLIS */
                                 {8, 256, 256, 17} /* more keys than the one-query kernel's */};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++)
        for (int narrowed = 0; narrowed < 2; narrowed++)
            for (int masked = 0; masked < 2; masked++)
                one_query_case(cfg[i][0], cfg[i][1], cfg[i][2], cfg[i][3], narrowed, masked);
}

/* ---- Linear from packed weights (nn_packs) ---- */

/* Recording off with a pack set: the same bits as without, the weight packed once and shared;
 * recording on (the weight wants its gradient): the pack set is left alone, the op recorded. */
static void test_linear_packed_weights(void) {
    nn_params *ps = nn_params_new();
    nn_linear l;
    CU_ASSERT_EQUAL_FATAL(nn_linear_init(&l, ps, "lin", 300, 270, true), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 7), 0);
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 3);
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 130, 300));
    fill(&x, 1, &r, 1);
    nn_packs *packs = nn_packs_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(packs);
    nn_ctx plain = {.tape = t}, packed = {.tape = t, .packs = packs};
    bool prev = ag_tape_set_recording(t, false);
    ag_tensor *y1 = nn_linear_forward(&l, &plain, x), *y2 = nn_linear_forward(&l, &packed, x),
              *y3 = nn_linear_forward(&l, &packed, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y3);
    CU_ASSERT_EQUAL(memcmp(y1->data, y2->data, sizeof(ag_real) * (size_t)y1->numel), 0);
    CU_ASSERT_EQUAL(memcmp(y1->data, y3->data, sizeof(ag_real) * (size_t)y1->numel), 0);
    const ag_packed_b *wt = nn_packs_get(packs, l.weight);
    CU_ASSERT_PTR_NOT_NULL(wt);
    CU_ASSERT_PTR_EQUAL(wt, nn_packs_get(packs, l.weight)); /* packed once */
    ag_tape_set_recording(t, true);
    ag_tensor *y4 = nn_linear_forward(&l, &packed, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y4);
    CU_ASSERT_TRUE(y4->requires_grad);
    CU_ASSERT_EQUAL(memcmp(y1->data, y4->data, sizeof(ag_real) * (size_t)y1->numel), 0);
    ag_tape_set_recording(t, prev);
    nn_packs_free(packs);
    ag_tape_free(t);
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"fused attention against the composite; errors", test_attention_vs_composite},
    {"fused GRU cell against the composite; errors", test_gru_cell_vs_composite},
    {"fused LayerNorm against the composite; spec literal; errors", test_layer_norm_vs_composite},
    {"fused AddNorm against the composite; errors", test_add_layer_norm_vs_composite},
    {"fused additive scores against the composite; errors", test_additive_scores_vs_composite},
    {"fused attention: two threads give one thread's bits", test_attention_threads_same_bits},
    {"attention of one query per row: the general kernel's bits",
     test_attention_one_query_same_bits},
    {"Linear from weights packed once: the same bits", test_linear_packed_weights},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("nn_fused", tests); }
