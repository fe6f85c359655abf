/* test_layers.c -- every layer in float64 (links nn64): gradient checks through the whole
 * layer with its parameters as gradcheck inputs (ag_gradcheck: central differences through a
 * fixed random projection of the output), plus values against hand computations: LayerNorm on
 * docs/spec.md's literal, one GRU step worked out by hand, dropout's statistics, and the GRU's
 * step function against its sequence forward. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/tg_test.h"

#ifndef TG_DOUBLE
#error "the gradient checks run in float64: link nn64"
#endif

/* A leaf with N(0, 1) values that requires a gradient (freed by the caller). */
static ag_tensor *rand_leaf(int ndim, const int *shape, uint64_t seed) {
    ag_tensor *x = ag_leaf_new(ndim, shape, true);
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = ag_rng_normal(&r);
    return x;
}

/* Runs ag_gradcheck on every element and checks that each parameter input got a non-zero
 * analytic gradient (so the parameters were really part of the check). */
static void check(const char *name, ag_gradcheck_fn fn, int n, ag_tensor *const *in, void *u,
                  bool kinks) {
    ag_gradcheck_opts o = {.skip_kinks = kinks};
    ag_gradcheck_result r = gc_expect(name, fn, n, in, u, &o);
    ptrdiff_t total = 0;
    for (int i = 0; i < n; i++) {
        total += in[i]->numel;
        double g = 0;
        for (ptrdiff_t k = 0; k < in[i]->numel; k++) g += fabs(in[i]->grad[k]);
        if (!(g > 0))
            fprintf(stderr, "\n%s: input %d (%s) got no gradient\n", name, i,
                    in[i]->name ? in[i]->name : "x");
        CU_ASSERT_TRUE(g > 0);
    }
    CU_ASSERT_EQUAL(r.checked + r.skipped, total);
}

/* ---- Linear, Embedding, LayerNorm, Dropout, ReLU ------------------------------------------ */

static ag_tensor *f_linear(ag_tape *t, ag_tensor *const *in, void *u) {
    nn_ctx c = {.tape = t};
    return nn_linear_forward(u, &c, in[0]);
}

static void test_linear(void) {
    nn_params *ps = nn_params_new();
    nn_linear a, b;
    nn_linear_init(&a, ps, "a", 4, 5, true);
    nn_linear_init(&b, ps, "b", 3, 2, false);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 11), 0);
    ag_tensor *x = rand_leaf(AG_SHAPE(2, 3, 4), 1); /* leading dims (2, 3) */
    check("linear (2,3,4) -> 5", f_linear, 3, (ag_tensor *[]){x, a.weight, a.bias}, &a, false);
    ag_tensor *y = rand_leaf(AG_SHAPE(7, 3), 2);
    check("linear no bias", f_linear, 2, (ag_tensor *[]){y, b.weight}, &b, false);
    /* Value: y = x W^T + b on one row. */
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *out = nn_linear_forward(&a, &c, x);
    CU_ASSERT_EQUAL_FATAL(out->ndim, 3);
    CU_ASSERT_EQUAL(out->shape[2], 5);
    for (int o = 0; o < 5; o++) {
        double s = a.bias->data[o];
        for (int i = 0; i < 4; i++) s += x->data[i] * a.weight->data[o * 4 + i];
        CU_ASSERT_DOUBLE_EQUAL(ag_get(out, o), s, 1e-12);
    }
    CU_ASSERT_PTR_NULL(nn_linear_forward(&a, &c, NULL));
    ag_tape_free(t);
    ag_leaf_free(x);
    ag_leaf_free(y);
    nn_params_free(ps);
}

typedef struct emb_case {
    nn_embedding e;
    int32_t ids[6];
} emb_case;

static ag_tensor *f_embedding(ag_tape *t, ag_tensor *const *in, void *u) {
    (void)in;
    emb_case *k = u;
    nn_ctx c = {.tape = t};
    /* Scaled by a fixed input-independent factor so the output is not the table itself. */
    return ag_tanh(t, nn_embedding_forward(&k->e, &c, k->ids, AG_SHAPE(2, 3)));
}

static void test_embedding(void) {
    nn_params *ps = nn_params_new();
    emb_case k = {.ids = {4, 0, 4, 2, 1, 0}}; /* repeated ids: gradients accumulate */
    nn_embedding_init(&k.e, ps, "emb", 5, 4);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 3), 0);
    ag_gradcheck_opts o = {0};
    ag_gradcheck_result r =
        tg_gradcheck("embedding", f_embedding, 1, (ag_tensor *[]){k.e.weight}, &k, &o);
    if (!r.ok) fprintf(stderr, "\n%s\n", r.msg);
    CU_ASSERT_TRUE(r.ok);
    CU_ASSERT_EQUAL(r.checked, 20);
    for (int d = 0; d < 4; d++) CU_ASSERT_EQUAL(k.e.weight->grad[3 * 4 + d], 0); /* id 3 unused */
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *out = nn_embedding_forward(&k.e, &c, k.ids, AG_SHAPE(2, 3));
    CU_ASSERT_EQUAL_FATAL(out->ndim, 3);
    CU_ASSERT_EQUAL(out->shape[2], 4);
    for (int d = 0; d < 4; d++)
        CU_ASSERT_EQUAL(ag_get(out, 3 * 4 + d), k.e.weight->data[2 * 4 + d]);
    ag_set_error_handler(tg_capture, NULL);
    int32_t bad[1] = {5};
    CU_ASSERT_PTR_NULL(nn_embedding_forward(&k.e, &c, bad, AG_SHAPE(1)));
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* Weight tying: head(emb(ids)) with head's weight the embedding table. */
typedef struct tied_case {
    nn_embedding e;
    nn_linear head;
    int32_t ids[6];
} tied_case;

static ag_tensor *f_tied(ag_tape *t, ag_tensor *const *in, void *u) {
    (void)in;
    tied_case *k = u;
    nn_ctx c = {.tape = t};
    return nn_linear_forward(&k->head, &c,
                             ag_tanh(t, nn_embedding_forward(&k->e, &c, k->ids, AG_SHAPE(2, 3))));
}

static void test_linear_tied(void) {
    nn_params *ps = nn_params_new();
    tied_case k = {.ids = {4, 0, 4, 2, 1, 0}};
    nn_embedding_init(&k.e, ps, "emb", 5, 4);
    CU_ASSERT_EQUAL_FATAL(nn_linear_init_tied(&k.head, ps, "head", k.e.weight, true), 0);
    CU_ASSERT_PTR_EQUAL(k.head.weight, k.e.weight);
    CU_ASSERT_EQUAL(k.head.in, 4);
    CU_ASSERT_EQUAL(k.head.out, 5);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
    /* the store: the table once, and the head's bias */
    CU_ASSERT_EQUAL(nn_params_count(ps), 2);
    CU_ASSERT_PTR_NOT_NULL(nn_params_find(ps, "head.bias"));
    CU_ASSERT_PTR_NULL(nn_params_find(ps, "head.weight"));
    /* the table's gradient: both uses summed (row 3 only through the head) */
    check("linear tied to an embedding", f_tied, 2, (ag_tensor *[]){k.e.weight, k.head.bias}, &k,
          false);
    /* bad weights */
    ag_set_error_handler(tg_capture, NULL);
    nn_params *bad = nn_params_new();
    nn_linear l;
    CU_ASSERT_EQUAL(nn_linear_init_tied(&l, bad, "l", k.head.bias, true), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "2-D"));
    CU_ASSERT_EQUAL(nn_linear_init_tied(&l, bad, "l", NULL, true), -1);
    CU_ASSERT_NOT_EQUAL(nn_params_finalize(bad, 1), 0);
    ag_set_error_handler(NULL, NULL);
    nn_params_free(bad);
    nn_params_free(ps);
}

static ag_tensor *f_layer_norm(ag_tape *t, ag_tensor *const *in, void *u) {
    nn_ctx c = {.tape = t};
    return nn_layer_norm_forward(u, &c, in[0]);
}

static void test_layer_norm(void) {
    nn_params *ps = nn_params_new();
    nn_layer_norm l1, l2;
    nn_layer_norm_init(&l1, ps, "l1", 1, (const int[]){4}, NN_LAYER_NORM_EPS);
    nn_layer_norm_init(&l2, ps, "l2", 2, (const int[]){3, 4}, NN_LAYER_NORM_EPS);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
    /* Non-trivial affine parameters so that their gradients are generic. */
    ag_rng r;
    ag_rng_seed(&r, 9);
    ag_tensor *ps_[] = {l1.weight, l1.bias, l2.weight, l2.bias};
    for (int i = 0; i < 4; i++)
        for (ptrdiff_t k = 0; k < ps_[i]->numel; k++) ps_[i]->data[k] = 1 + 0.5 * ag_rng_normal(&r);
    ag_tensor *x = rand_leaf(AG_SHAPE(3, 4), 4);
    check("layer_norm over (4)", f_layer_norm, 3, (ag_tensor *[]){x, l1.weight, l1.bias}, &l1,
          false);
    ag_tensor *y = rand_leaf(AG_SHAPE(2, 3, 4), 6);
    check("layer_norm over (3, 4)", f_layer_norm, 3, (ag_tensor *[]){y, l2.weight, l2.bias}, &l2,
          false);
    ag_leaf_free(x);
    ag_leaf_free(y);
    nn_params_free(ps);

    /* docs/spec.md 3: LayerNorm(2) at init maps [[1, 2], [2, 3]] to [[-1, 1], [-1, 1]] (4 decimals). */
    ps = nn_params_new();
    nn_layer_norm ln;
    nn_layer_norm_init(&ln, ps, "ln", 1, (const int[]){2}, NN_LAYER_NORM_EPS);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *out = nn_layer_norm_forward(
        &ln, &c, ag_tensor_from(t, AG_SHAPE(2, 2), (const ag_real[]){1, 2, 2, 3}));
    const double want[] = {-1, 1, -1, 1};
    for (int i = 0; i < 4; i++) CU_ASSERT_DOUBLE_EQUAL(ag_get(out, i), want[i], 0.5e-4);
    ag_tape_free(t);
    nn_params_free(ps);
}

static ag_tensor *f_dropout(ag_tape *t, ag_tensor *const *in, void *u) {
    ag_rng r;
    ag_rng_seed(&r, 77); /* reseeded: the same mask at every call */
    nn_ctx c = {.tape = t, .training = true, .rng = &r};
    return nn_dropout_forward(u, &c, in[0]);
}

static ag_tensor *f_relu(ag_tape *t, ag_tensor *const *in, void *u) {
    (void)u;
    nn_ctx c = {.tape = t};
    return nn_relu(&c, in[0]);
}

static void test_dropout_relu(void) {
    nn_dropout d;
    CU_ASSERT_EQUAL(nn_dropout_init(&d, 0.4), 0);
    ag_tensor *x = rand_leaf(AG_SHAPE(5, 6), 8);
    check("dropout p=0.4 (training)", f_dropout, 1, (ag_tensor *[]){x}, &d, false);
    check("relu", f_relu, 1, (ag_tensor *[]){x}, NULL, true);
    /* Statistics: about p of the elements zeroed, the rest scaled by 1 / (1 - p). */
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 5);
    nn_ctx c = {.tape = t, .training = true, .rng = &r};
    ag_real ones[4000];
    for (int i = 0; i < 4000; i++) ones[i] = 1;
    ag_tensor *in = ag_tensor_from(t, AG_SHAPE(4000), ones);
    ag_tensor *out = nn_dropout_forward(&d, &c, in);
    int zeros = 0, scaled = 0;
    for (int i = 0; i < 4000; i++) {
        double v = ag_get(out, i);
        zeros += v == 0;
        scaled += fabs(v - 1 / 0.6) < 1e-12;
    }
    CU_ASSERT_EQUAL(zeros + scaled, 4000);
    CU_ASSERT_DOUBLE_EQUAL(zeros / 4000.0, 0.4, 0.04);
    /* Eval, or p = 0: the identity (the same tensor). */
    c.training = false;
    CU_ASSERT_PTR_EQUAL(nn_dropout_forward(&d, &c, in), in);
    nn_dropout d0;
    nn_dropout_init(&d0, 0);
    c.training = true;
    CU_ASSERT_PTR_EQUAL(nn_dropout_forward(&d0, &c, in), in);
    /* Training without an rng is an error, not a crash. */
    c.rng = NULL;
    TG_EXPECT_NULL(nn_dropout_forward(&d, &c, in), "needs nn_ctx.rng");
    CU_ASSERT_PTR_NULL(nn_relu(&c, NULL));
    ag_tape_free(t);
    ag_leaf_free(x);
}

/* ---- GRU ------------------------------------------------------------------------------- */

typedef struct gru_case {
    nn_gru g;
    bool training;
    bool use_step; /* build the sequence with nn_gru_step instead of nn_gru_forward */
} gru_case;

/* in[0] = x (T, B, in), in[1] = h0 (L, B, H); returns concat(output, state) on axis 0. */
static ag_tensor *f_gru(ag_tape *t, ag_tensor *const *in, void *u) {
    gru_case *k = u;
    ag_rng r;
    ag_rng_seed(&r, 1234); /* reseeded: the same dropout masks at every call */
    nn_ctx c = {.tape = t, .training = k->training, .rng = &r};
    ag_tensor *state, *out;
    if (!k->use_step) {
        out = nn_gru_forward(&k->g, &c, in[0], in[1], &state);
    } else {
        ag_tensor *h[NN_GRU_MAX_LAYERS], *outs[8];
        const int T = in[0]->shape[0], B = in[0]->shape[1];
        if (nn_gru_state_split(&k->g, &c, in[1], h)) return NULL;
        for (int s = 0; s < T; s++) {
            ag_tensor *xs =
                ag_reshape(t, ag_narrow(t, in[0], 0, s, 1), AG_SHAPE(B, k->g.input_size));
            outs[s] = ag_reshape(t, nn_gru_step(&k->g, &c, xs, h), AG_SHAPE(1, B, k->g.hidden));
        }
        out = ag_concat(t, T, outs, 0);
        state = nn_gru_state_join(&k->g, &c, h);
    }
    return ag_concat(t, 2, (ag_tensor *[]){out, state}, 0);
}

/* A finalized store (seed) holding one GRU "rnn" (nn_gru_init's arguments). */
static nn_params *gru_model(nn_gru *g, int in, int hidden, int layers, double dropout,
                            uint64_t seed) {
    nn_params *ps = nn_params_new();
    nn_gru_init(g, ps, "rnn", in, hidden, layers, dropout);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, seed), 0);
    return ps;
}

static void test_gru_gradcheck(void) {
    gru_case k = {0};
    nn_params *ps = gru_model(&k.g, 3, 4, 2, 0.3, 21);
    ag_tensor *x = rand_leaf(AG_SHAPE(3, 2, 3), 31);  /* T = 3, B = 2, in = 3 */
    ag_tensor *h0 = rand_leaf(AG_SHAPE(2, 2, 4), 32); /* L = 2, B = 2, H = 4 */
    ag_tensor *in[2 + 8] = {x, h0};
    for (int i = 0; i < 8; i++) in[2 + i] = nn_params_at(ps, (size_t)i);
    check("gru 2 layers, 3 steps, eval", f_gru, 10, in, &k, false);
    k.training = true; /* dropout 0.3 between the layers, reseeded masks */
    check("gru 2 layers, 3 steps, training dropout", f_gru, 10, in, &k, false);
    k.training = false;
    k.use_step = true;
    check("gru step function, 3 steps", f_gru, 10, in, &k, false);
    ag_leaf_free(x);
    ag_leaf_free(h0);
    nn_params_free(ps);
}

/* One step, one layer, in = 1, H = 2, B = 1, worked out by hand:
 *   x = 1, h = [0.5, -0.5]
 *   weight_ih = [0.1 0.2 | 0.3 0.4 | 0.5 0.6]^T (rows r0 r1 | z0 z1 | n0 n1), bias_ih = [0 0 0 0 0.1 0.1]
 *   weight_hh = diag blocks: r: 0.1 I, z: 0.2 I, n: 0.3 I,  bias_hh = [0 0 0 0 0.2 -0.2]
 *   gi = W_ih x + b_ih = [0.1 0.2 | 0.3 0.4 | 0.6 0.7]
 *   gh = W_hh h + b_hh = [0.05 -0.05 | 0.1 -0.1 | 0.15+0.2 = 0.35  -0.15-0.2 = -0.35]
 *   r  = sigmoid([0.15, 0.15])           = [0.5374298453437496, 0.5374298453437496]
 *   z  = sigmoid([0.4, 0.3])             = [0.598687660112452, 0.574442516811659]
 *   n  = tanh([0.6 + r0 0.35, 0.7 - r1 0.35]) = tanh([0.78810044587, 0.51190955413])
 *      = [0.6573315969717184, 0.47142391759100244]
 *   h' = (1 - z) n + z h                 = [0.563139111318965, -0.08660328252101465]
 * (b_hn sits inside r * (...): with b_hn added outside, h' would differ.) */
static void test_gru_hand_value(void) {
    nn_gru g;
    nn_params *ps = gru_model(&g, 1, 2, 1, 0, 1);
    const double wih[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    const double bih[6] = {0, 0, 0, 0, 0.1, 0.1}, bhh[6] = {0, 0, 0, 0, 0.2, -0.2};
    const double diag[3] = {0.1, 0.2, 0.3};
    for (int i = 0; i < 6; i++) {
        g.layer[0].weight_ih->data[i] = wih[i];
        g.layer[0].bias_ih->data[i] = bih[i];
        g.layer[0].bias_hh->data[i] = bhh[i];
        for (int j = 0; j < 2; j++)
            g.layer[0].weight_hh->data[i * 2 + j] = (i % 2 == j) ? diag[i / 2] : 0;
    }
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *h[1] = {ag_tensor_from(t, AG_SHAPE(1, 2), (const ag_real[]){0.5, -0.5})};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(1, 1), (const ag_real[]){1});
    ag_tensor *out = nn_gru_step(&g, &c, x, h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_EQUAL(out, h[0]);
    CU_ASSERT_DOUBLE_EQUAL(ag_get(out, 0), 0.563139111318965, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(ag_get(out, 1), -0.08660328252101465, 1e-12);
    /* The same through the sequence forward (T = 1) with h0. */
    ag_tensor *state;
    ag_tensor *seq =
        nn_gru_forward(&g, &c, ag_tensor_from(t, AG_SHAPE(1, 1, 1), (const ag_real[]){1}),
                       ag_tensor_from(t, AG_SHAPE(1, 1, 2), (const ag_real[]){0.5, -0.5}), &state);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seq);
    CU_ASSERT_DOUBLE_EQUAL(ag_get(seq, 0), 0.563139111318965, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(ag_get(state, 1), -0.08660328252101465, 1e-12);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* The step function over T steps equals the sequence forward (eval), zero initial state. */
static void test_gru_step_matches_forward(void) {
    nn_gru g;
    nn_params *ps = gru_model(&g, 5, 6, 3, 0.5, 8);
    ag_tensor *x = rand_leaf(AG_SHAPE(4, 3, 5), 2);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = false};
    ag_tensor *state;
    ag_tensor *seq = nn_gru_forward(&g, &c, x, NULL, &state);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seq);
    CU_ASSERT_EQUAL(seq->shape[0], 4);
    CU_ASSERT_EQUAL(seq->shape[1], 3);
    CU_ASSERT_EQUAL(seq->shape[2], 6);
    CU_ASSERT_EQUAL(state->shape[0], 3);
    ag_tensor *h[3];
    for (int k = 0; k < 3; k++) h[k] = ag_tensor_new(t, AG_SHAPE(3, 6));
    for (int s = 0; s < 4; s++) {
        ag_tensor *xs = ag_reshape(t, ag_narrow(t, x, 0, s, 1), AG_SHAPE(3, 5));
        ag_tensor *o = nn_gru_step(&g, &c, xs, h);
        for (int i = 0; i < 18; i++)
            CU_ASSERT_DOUBLE_EQUAL(ag_get(o, i), ag_get(seq, s * 18 + i), 1e-12);
    }
    ag_tensor *joined = nn_gru_state_join(&g, &c, h);
    for (int i = 0; i < 54; i++) CU_ASSERT_DOUBLE_EQUAL(ag_get(joined, i), ag_get(state, i), 1e-12);
    /* In training, the last layer's output is not dropped out, the middle ones are. */
    ag_rng r;
    ag_rng_seed(&r, 3);
    c.training = true;
    c.rng = &r;
    ag_tensor *st2;
    ag_tensor *seq2 = nn_gru_forward(&g, &c, x, NULL, &st2);
    CU_ASSERT_PTR_NOT_NULL(seq2);
    bool differs = false;
    for (int i = 0; i < 72; i++) differs |= ag_get(seq2, i) != ag_get(seq, i);
    CU_ASSERT_TRUE(differs);

    /* Shape errors: NULL and a message, no crash. */
    c.training = false;
    TG_EXPECT_NULL(nn_gru_forward(&g, &c, ag_tensor_new(t, AG_SHAPE(4, 5)), NULL, &state),
                   "expected (T, B, input_size = 5)");
    CU_ASSERT_PTR_NULL(state);
    TG_EXPECT_NULL(nn_gru_forward(&g, &c, x, ag_tensor_new(t, AG_SHAPE(2, 3, 6)), NULL),
                   "h0 has shape [2, 3, 6], expected (num_layers = 3, B = 3, hidden = 6)");
    TG_EXPECT_NULL(nn_gru_step(&g, &c, ag_tensor_new(t, AG_SHAPE(3, 4)), h),
                   "nn_gru_step: x has shape [3, 4]");
    ag_tensor *saved = h[0];
    h[1] = ag_tensor_new(t, AG_SHAPE(2, 6));
    TG_EXPECT_NULL(nn_gru_step(&g, &c, ag_tensor_new(t, AG_SHAPE(3, 5)), h),
                   "h[1] has shape [2, 6]");
    CU_ASSERT_PTR_EQUAL(h[0], saved); /* unchanged on error */
    CU_ASSERT_PTR_NULL(nn_gru_forward(&g, &c, NULL, NULL, NULL));
    c.training = true;
    c.rng = NULL;
    TG_EXPECT_NULL(nn_gru_forward(&g, &c, x, NULL, NULL), "needs nn_ctx.rng");
    ag_tape_free(t);
    ag_leaf_free(x);
    nn_params_free(ps);
}

/* A small composite (embedding -> GRU -> layer norm -> linear): every parameter at once. */
typedef struct tiny_s2s {
    nn_embedding emb;
    nn_gru rnn;
    nn_layer_norm ln;
    nn_linear out;
} tiny_s2s;

static ag_tensor *f_tiny(ag_tape *t, ag_tensor *const *in, void *u) {
    (void)in;
    tiny_s2s *m = u;
    nn_ctx c = {.tape = t};
    static const int32_t ids[6] = {1, 3, 0, 2, 2, 4}; /* (T = 3, B = 2) */
    ag_tensor *h = nn_gru_forward(
        &m->rnn, &c, nn_embedding_forward(&m->emb, &c, ids, AG_SHAPE(3, 2)), NULL, NULL);
    return nn_linear_forward(&m->out, &c, nn_layer_norm_forward(&m->ln, &c, h));
}

static void test_composite(void) {
    nn_params *ps = nn_params_new();
    tiny_s2s m;
    nn_embedding_init(&m.emb, ps, "emb", 5, 3);
    nn_gru_init(&m.rnn, ps, "rnn", 3, 4, 1, 0);
    nn_layer_norm_init(&m.ln, ps, "ln", 1, (const int[]){4}, NN_LAYER_NORM_EPS);
    nn_linear_init(&m.out, ps, "out", 4, 5, true);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 2), 0);
    ag_tensor *in[16];
    int n = (int)nn_params_count(ps);
    for (int i = 0; i < n; i++) in[i] = nn_params_at(ps, (size_t)i);
    check("embedding -> gru -> layer_norm -> linear", f_tiny, n, in, &m, false);
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"linear: gradcheck (3-D input, no bias) and value", test_linear},
    {"embedding: gradcheck with repeated ids", test_embedding},
    {"linear tied to an embedding: gradcheck, one table in the store", test_linear_tied},
    {"layer_norm: gradcheck (1 and 2 dims), spec literal", test_layer_norm},
    {"dropout and relu: gradcheck, statistics, eval", test_dropout_relu},
    {"gru: gradcheck 2 layers x 3 steps (eval, dropout, step)", test_gru_gradcheck},
    {"gru: one step against a hand computation", test_gru_hand_value},
    {"gru: step function equals forward; shape errors", test_gru_step_matches_forward},
    {"composite model gradcheck", test_composite},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("nn_layers", tests,
                   "nn: layers with their parameters (float64, tests/nn/test_layers.c)");
}
