/* test_lstm.c -- the LSTM (nn/lstm.h): the fused cell against its composite (values and
 * gradients), the multi-layer layer against a naive loop written from PyTorch's equations and
 * layout, docs/spec.md 7's shapes, step-by-step against the whole sequence, dropout determinism,
 * and the refusal of bad inputs (a GRU's one-tensor state among them). Built twice
 * (CMakeLists.txt): against nn64 (float64, which adds the central-difference checks of the
 * fused cell, the composite and the whole layer) and against nn (float32, the product). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/tg_test.h"

#ifdef TG_DOUBLE
#define TOL 1e-10
#else
#define TOL 2e-5
#endif

/* ---- helpers ---- */


static double tensor_diff(const ag_tensor *a, const ag_tensor *b) {
    if (!a || !b || a->numel != b->numel) return INFINITY;
    double m = 0;
    for (ptrdiff_t i = 0; i < a->numel; i++) m = fmax(m, fabs((double)ag_get(a, i) - ag_get(b, i)));
    return m;
}

static bool same_shape3(const ag_tensor *x, int d0, int d1, int d2) {
    return x && x->ndim == 3 && x->shape[0] == d0 && x->shape[1] == d1 && x->shape[2] == d2;
}

/* A tape tensor of N(0, scale^2) draws. */
static ag_tensor *randn(ag_tape *t, ag_rng *r, double scale, int ndim, const int *shape) {
    ag_tensor *x = ag_tensor_new(t, ndim, shape);
    for (ptrdiff_t i = 0; x && i < x->numel; i++) x->data[i] = (ag_real)(scale * ag_rng_normal(r));
    return x;
}

/* A finalized store holding one LSTM. */
static nn_params *lstm_model(nn_lstm *l, int in, int H, int layers, double dropout, uint64_t seed) {
    nn_params *ps = nn_params_new();
    CU_ASSERT_EQUAL(nn_lstm_init(l, ps, "rnn", in, H, layers, dropout), 0);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, seed), 0);
    return ps;
}

/* ---- the cell: fused against composite ---- */

enum { CB = 5, CH = 7 };

/* One forward and backward (loss = <h', P> + <c', Q>, fixed random P, Q) of the fused cell or
 * of the composite: h' and c' into out, the gradients of gi, gh, c_prev into grads. */
static void cell_once(bool fused, ag_real *out, ag_real *grads) {
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 77);
    ag_tensor *in[3] = {ag_leaf_new(AG_SHAPE(CB, 4 * CH), true),
                        ag_leaf_new(AG_SHAPE(CB, 4 * CH), true),
                        ag_leaf_new(AG_SHAPE(CB, CH), true)};
    for (int k = 0; k < 3; k++)
        for (ptrdiff_t i = 0; i < in[k]->numel; i++)
            in[k]->data[i] = (ag_real)(2 * ag_rng_normal(&r));
    ag_tensor *p = randn(t, &r, 1, AG_SHAPE(CB, CH)), *q = randn(t, &r, 1, AG_SHAPE(CB, CH));
    nn_ctx c = {.tape = t};
    ag_tensor *h, *cn;
    int rc =
        (fused ? nn_lstm_cell_forward : nn_lstm_cell_composite)(&c, in[0], in[1], in[2], &h, &cn);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_TRUE(h->ndim == 2 && h->shape[0] == CB && h->shape[1] == CH);
    CU_ASSERT_TRUE(cn->ndim == 2 && cn->shape[0] == CB && cn->shape[1] == CH);
    ag_tensor *loss = ag_add(t, ag_sum(t, ag_mul(t, h, p), AG_ALL, false),
                             ag_sum(t, ag_mul(t, cn, q), AG_ALL, false));
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    for (ptrdiff_t i = 0; i < CB * CH; i++) out[i] = ag_get(h, i), out[CB * CH + i] = ag_get(cn, i);
    for (int k = 0; k < 3; k++) {
        memcpy(grads, in[k]->grad, sizeof *grads * (size_t)in[k]->numel);
        grads += in[k]->numel;
        ag_leaf_free(in[k]);
    }
    ag_tape_free(t);
}

static void test_cell_vs_composite(void) {
    enum { NY = 2 * CB * CH, NG = 2 * CB * 4 * CH + CB * CH };
    ag_real yf[NY], yc[NY], gf[NG], gc[NG];
    cell_once(true, yf, gf);
    cell_once(false, yc, gc);
    double dy = 0, dg = 0;
    for (int i = 0; i < NY; i++) dy = fmax(dy, fabs((double)yf[i] - yc[i]));
    for (int i = 0; i < NG; i++) dg = fmax(dg, fabs((double)gf[i] - gc[i]));
    CU_ASSERT_TRUE(dy < 1e-6);
    CU_ASSERT_TRUE(dg < 1e-5);
    /* one hand-checked element: all gate inputs 0 -> i = f = o = 1/2, g = 0: c' = c / 2 */
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *z = ag_tensor_new(t, AG_SHAPE(1, 4)),
              *cp = ag_tensor_from(t, AG_SHAPE(1, 1), (ag_real[]){2});
    ag_tensor *h, *cn;
    CU_ASSERT_EQUAL_FATAL(nn_lstm_cell_forward(&c, z, z, cp, &h, &cn), 0);
    CU_ASSERT_DOUBLE_EQUAL(ag_get(cn, 0), 1.0, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(ag_get(h, 0), 0.5 * tanh(1.0), 1e-6);
    /* shapes refused, naming the op and the shapes */
    ag_set_error_handler(tg_capture, NULL);
    ag_tensor *gi = ag_tensor_new(t, AG_SHAPE(2, 12)), *c4 = ag_tensor_new(t, AG_SHAPE(2, 4));
    h = cn = gi;
    CU_ASSERT_EQUAL(nn_lstm_cell_forward(&c, gi, gi, c4, &h, &cn), -1);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NULL(cn);
    TG_CAPTURED_HAS("lstm_cell", "[2, 12]", "[2, 4]");
    CU_ASSERT_EQUAL(nn_lstm_cell_composite(&c, gi, gi, c4, &h, &cn), -1);
    TG_CAPTURED_HAS("lstm_cell_composite", "[2, 12]", "[2, 4]");
    CU_ASSERT_EQUAL(nn_lstm_cell_forward(&c, gi, NULL, c4, &h, &cn), -1); /* NULL in: -1 */
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
}

/* ---- the layer ---- */

static double sigm(double v) { return 1 / (1 + exp(-v)); }

/* A naive LSTM straight from PyTorch's equations and layout (rows i, f, g, o of the weights),
 * in double, eval: x (T, B, in), h0 and c0 (NL, B, H) -> out (T, B, H), hT and cT (NL, B, H). */
static void naive_lstm(const nn_lstm *l, const ag_tensor *x, const ag_tensor *h0,
                       const ag_tensor *c0, double *out, double *hT, double *cT) {
    enum { MAXN = 64 };
    const int T = x->shape[0], B = x->shape[1], H = l->hidden;
    double seq[16][4][MAXN], nxt[16][4][MAXN]; /* (T, B, width) per layer */
    CU_ASSERT_TRUE_FATAL(T <= 16 && B <= 4 && H <= MAXN && l->input_size <= MAXN);
    for (int s = 0; s < T; s++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < l->input_size; j++)
                seq[s][b][j] = ag_get(x, ((ptrdiff_t)s * B + b) * l->input_size + j);
    for (int k = 0; k < l->num_layers; k++) {
        const nn_lstm_layer *L = &l->layer[k];
        const int in = k == 0 ? l->input_size : H;
        for (int b = 0; b < B; b++) {
            double h[MAXN], c[MAXN], a[4 * MAXN];
            for (int j = 0; j < H; j++) {
                h[j] = ag_get(h0, ((ptrdiff_t)k * B + b) * H + j);
                c[j] = ag_get(c0, ((ptrdiff_t)k * B + b) * H + j);
            }
            for (int s = 0; s < T; s++) {
                for (int r = 0; r < 4 * H; r++) {
                    a[r] = L->bias_ih->data[r] + L->bias_hh->data[r];
                    for (int j = 0; j < in; j++)
                        a[r] += L->weight_ih->data[r * in + j] * seq[s][b][j];
                    for (int j = 0; j < H; j++) a[r] += L->weight_hh->data[r * H + j] * h[j];
                }
                for (int j = 0; j < H; j++) {
                    double ig = sigm(a[j]), fg = sigm(a[H + j]), gg = tanh(a[2 * H + j]),
                           og = sigm(a[3 * H + j]);
                    c[j] = fg * c[j] + ig * gg;
                    h[j] = og * tanh(c[j]);
                    nxt[s][b][j] = h[j];
                }
            }
            for (int j = 0; j < H; j++) {
                hT[((ptrdiff_t)k * B + b) * H + j] = h[j];
                cT[((ptrdiff_t)k * B + b) * H + j] = c[j];
            }
        }
        memcpy(seq, nxt, sizeof seq);
    }
    for (int s = 0; s < T; s++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++) out[((ptrdiff_t)s * B + b) * H + j] = seq[s][b][j];
}

/* docs/spec.md 7's check (embed 8, H 16, 2 layers, X (4, 7) -> outputs (7, 4, 16), state two
 * (2, 4, 16)), the parameter names and shapes, and the values against the naive loop, from
 * zeros and from a given state. */
static void test_layer_shapes_and_values(void) {
    enum { T = 7, B = 4, E = 8, H = 16, NL = 2 };
    nn_lstm l;
    nn_params *ps = lstm_model(&l, E, H, NL, 0.1, 42);
    const char *names[] = {"rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                           "rnn.bias_hh_l0",   "rnn.weight_ih_l1", "rnn.weight_hh_l1",
                           "rnn.bias_ih_l1",   "rnn.bias_hh_l1"};
    const int rows[] = {4 * H, 4 * H, 4 * H, 4 * H, 4 * H, 4 * H, 4 * H, 4 * H},
              cols[] = {E, H, 0, 0, H, H, 0, 0};
    CU_ASSERT_EQUAL(nn_params_count(ps), 8);
    for (int i = 0; i < 8; i++) {
        const ag_tensor *p = nn_params_at(ps, (size_t)i);
        CU_ASSERT_STRING_EQUAL(p->name, names[i]);
        CU_ASSERT_EQUAL(p->shape[0], rows[i]);
        CU_ASSERT_EQUAL(p->ndim, cols[i] ? 2 : 1);
        if (cols[i]) CU_ASSERT_EQUAL(p->shape[1], cols[i]);
    }
    /* biases U(-1/sqrt(H), 1/sqrt(H)) */
    for (int i = 0; i < 4 * H; i++) CU_ASSERT_TRUE(fabs(l.layer[1].bias_hh->data[i]) <= 0.25);
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 3);
    nn_ctx c = {.tape = t}; /* eval: dropout is off */
    ag_tensor *x = randn(t, &r, 1, AG_SHAPE(T, B, E));
    ag_tensor *h, *cs;
    ag_tensor *out = nn_lstm_forward(&l, &c, x, NULL, NULL, &h, &cs);
    CU_ASSERT_TRUE_FATAL(out != NULL);
    CU_ASSERT_TRUE(same_shape3(out, T, B, H));
    CU_ASSERT_TRUE(same_shape3(h, NL, B, H));
    CU_ASSERT_TRUE(same_shape3(cs, NL, B, H));
    static double ro[T * B * H], rh[NL * B * H], rc[NL * B * H];
    ag_tensor *z = ag_tensor_new(t, AG_SHAPE(NL, B, H));
    naive_lstm(&l, x, z, z, ro, rh, rc);
    CU_ASSERT_TRUE(gc_max_diff(out, ro) < TOL);
    CU_ASSERT_TRUE(gc_max_diff(h, rh) < TOL);
    CU_ASSERT_TRUE(gc_max_diff(cs, rc) < TOL);
    /* the last output is the top layer's final h */
    for (int i = 0; i < B * H; i++)
        CU_ASSERT_EQUAL(ag_get(out, (T - 1) * B * H + i), ag_get(h, B * H + i));
    /* from a given state; the outputs pointers may be NULL */
    ag_tensor *h0 = randn(t, &r, 1, AG_SHAPE(NL, B, H)), *c0 = randn(t, &r, 1, AG_SHAPE(NL, B, H));
    naive_lstm(&l, x, h0, c0, ro, rh, rc);
    out = nn_lstm_forward(&l, &c, x, h0, c0, NULL, &cs);
    CU_ASSERT_TRUE_FATAL(out != NULL);
    CU_ASSERT_TRUE(gc_max_diff(out, ro) < TOL);
    CU_ASSERT_TRUE(gc_max_diff(cs, rc) < TOL);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* Steps one at a time (state split, step, join) compute what the whole sequence computes. */
static void test_step_equals_sequence(void) {
    enum { T = 5, B = 3, E = 4, H = 6, NL = 3 };
    nn_lstm l;
    nn_params *ps = lstm_model(&l, E, H, NL, 0.3, 9);
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 5);
    nn_ctx c = {.tape = t};
    ag_tensor *x = randn(t, &r, 1, AG_SHAPE(T, B, E));
    ag_tensor *h0 = randn(t, &r, 1, AG_SHAPE(NL, B, H)), *c0 = randn(t, &r, 1, AG_SHAPE(NL, B, H));
    ag_tensor *hT, *cT;
    ag_tensor *out = nn_lstm_forward(&l, &c, x, h0, c0, &hT, &cT);
    CU_ASSERT_TRUE_FATAL(out != NULL);
    ag_tensor *h[NN_LSTM_MAX_LAYERS], *cs[NN_LSTM_MAX_LAYERS];
    CU_ASSERT_EQUAL_FATAL(nn_lstm_state_split(&l, &c, h0, h), 0);
    CU_ASSERT_EQUAL_FATAL(nn_lstm_state_split(&l, &c, c0, cs), 0);
    for (int s = 0; s < T; s++) {
        ag_tensor *xs = ag_reshape(t, ag_narrow(t, x, 0, s, 1), AG_SHAPE(B, E));
        ag_tensor *y = nn_lstm_step(&l, &c, xs, h, cs);
        CU_ASSERT_TRUE_FATAL(y != NULL);
        CU_ASSERT_PTR_EQUAL(y, h[NL - 1]);
        CU_ASSERT_TRUE(tensor_diff(y, ag_reshape(t, ag_narrow(t, out, 0, s, 1), AG_SHAPE(B, H))) <
                       TOL);
    }
    CU_ASSERT_TRUE(tensor_diff(nn_lstm_state_join(&l, &c, h), hT) < TOL);
    CU_ASSERT_TRUE(tensor_diff(nn_lstm_state_join(&l, &c, cs), cT) < TOL);
    ag_tape_free(t);
    nn_params_free(ps);
}

/* One training forward with dropout from an rng seeded with `seed`: output and final states
 * copied into buf (T B H + 2 NL B H values). */
enum { DT = 4, DB = 3, DE = 5, DH = 8, DNL = 3, DN = DT * DB * DH + 2 * DNL * DB * DH };
static void dropout_run(const nn_lstm *l, bool training, uint64_t seed, ag_real *buf) {
    ag_tape *t = ag_tape_new();
    ag_rng data, drop;
    ag_rng_seed(&data, 1);
    ag_rng_seed(&drop, seed);
    nn_ctx c = {.tape = t, .training = training, .rng = &drop};
    ag_tensor *h, *cs;
    ag_tensor *out =
        nn_lstm_forward(l, &c, randn(t, &data, 1, AG_SHAPE(DT, DB, DE)), NULL, NULL, &h, &cs);
    CU_ASSERT_TRUE_FATAL(out != NULL);
    memcpy(buf, out->data, sizeof *buf * (size_t)out->numel);
    memcpy(buf + out->numel, h->data, sizeof *buf * (size_t)h->numel);
    memcpy(buf + out->numel + h->numel, cs->data, sizeof *buf * (size_t)cs->numel);
    ag_tape_free(t);
}

/* Same seed, same bits; another seed, other masks; eval and a one-layer LSTM do not drop. */
static void test_dropout(void) {
    static ag_real a[DN], b[DN], e[DN], one_t[DN], one_e[DN];
    nn_lstm l, l1;
    nn_params *ps = lstm_model(&l, DE, DH, DNL, 0.5, 4);
    dropout_run(&l, true, 7, a);
    dropout_run(&l, true, 7, b);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    dropout_run(&l, true, 8, b);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* the first layer's state is taken before any dropout: the same for every seed */
    CU_ASSERT_EQUAL(memcmp(a + DT * DB * DH, b + DT * DB * DH, sizeof *a * DB * DH), 0);
    CU_ASSERT_NOT_EQUAL(
        memcmp(a + DT * DB * DH + DB * DH, b + DT * DB * DH + DB * DH, sizeof *a * DB * DH), 0);
    dropout_run(&l, false, 7, e);
    CU_ASSERT_NOT_EQUAL(memcmp(a, e, sizeof a), 0);
    nn_lstm l0 = l; /* the same weights without dropout, in training: eval's values */
    l0.dropout = 0;
    dropout_run(&l0, true, 7, b);
    CU_ASSERT_EQUAL(memcmp(b, e, sizeof b), 0);
    /* no dropout after the last layer */
    nn_params *ps1 = lstm_model(&l1, DE, DH, 1, 0.5, 4);
    dropout_run(&l1, true, 7, one_t);
    dropout_run(&l1, false, 7, one_e);
    CU_ASSERT_EQUAL(memcmp(one_t, one_e, sizeof *one_t * (DT * DB * DH + 2 * DB * DH)), 0);
    /* training with dropout needs an rng */
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    CU_ASSERT_PTR_NULL(
        nn_lstm_forward(&l, &c, ag_tensor_new(t, AG_SHAPE(DT, DB, DE)), NULL, NULL, NULL, NULL));
    TG_CAPTURED_HAS("nn_lstm_forward", "rng");
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
    nn_params_free(ps1);
    nn_params_free(ps);
}

/* Bad inputs are refused with a message naming the function and the shapes. */
static void test_bad_inputs(void) {
    enum { T = 7, B = 4, E = 8, H = 16, NL = 2 };
    nn_lstm l;
    nn_gru g;
    nn_params *ps = nn_params_new();
    CU_ASSERT_EQUAL(nn_lstm_init(&l, ps, "lstm", E, H, NL, 0), 0);
    CU_ASSERT_EQUAL(nn_gru_init(&g, ps, "gru", E, H, NL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 1), 0);
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(T, B, E)), *gru_state, *h, *cs;
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_gru_forward(&g, &c, x, NULL, &gru_state));
    /* a GRU's state, one tensor */
    h = cs = x;
    CU_ASSERT_PTR_NULL(nn_lstm_forward(&l, &c, x, gru_state, NULL, &h, &cs));
    TG_CAPTURED_HAS("nn_lstm_forward", "h0 [2, 4, 16] and c0 (none)", "[2, 4, 16]");
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NULL(cs);
    CU_ASSERT_PTR_NULL(nn_lstm_forward(&l, &c, x, NULL, gru_state, NULL, NULL));
    TG_CAPTURED_HAS("nn_lstm_forward", "h0 (none) and c0 [2, 4, 16]");
    /* wrong shapes */
    ag_tensor *c1 = ag_tensor_new(t, AG_SHAPE(1, B, H)), *h2 = ag_tensor_new(t, AG_SHAPE(B, H));
    CU_ASSERT_PTR_NULL(nn_lstm_forward(&l, &c, x, gru_state, c1, NULL, NULL));
    TG_CAPTURED_HAS("nn_lstm_forward", "c0 [1, 4, 16]",
                    "expected two tensors (h0, c0) of shape [2, 4, 16]");
    CU_ASSERT_PTR_NULL(nn_lstm_forward(&l, &c, x, h2, h2, NULL, NULL));
    TG_CAPTURED_HAS("nn_lstm_forward", "h0 [4, 16] and c0 [4, 16]", "[2, 4, 16]");
    CU_ASSERT_PTR_NULL(
        nn_lstm_forward(&l, &c, ag_tensor_new(t, AG_SHAPE(T, B, 5)), NULL, NULL, NULL, NULL));
    TG_CAPTURED_HAS("nn_lstm_forward", "[7, 4, 5]", "input_size = 8");
    CU_ASSERT_PTR_NULL(nn_lstm_forward(&l, &c, NULL, NULL, NULL, NULL, NULL)); /* NULL in: NULL */
    /* the step and the state helpers */
    ag_tensor *hs[NL], *css[NL], *xb = ag_tensor_new(t, AG_SHAPE(B, E));
    CU_ASSERT_EQUAL_FATAL(nn_lstm_state_split(&l, &c, gru_state, hs), 0);
    CU_ASSERT_PTR_NULL(nn_lstm_step(&l, &c, xb, hs, NULL));
    TG_CAPTURED_HAS("nn_lstm_step", "cs is NULL");
    css[0] = hs[0];
    css[1] = ag_tensor_new(t, AG_SHAPE(B, H + 1));
    ag_tensor *keep = hs[0];
    CU_ASSERT_PTR_NULL(nn_lstm_step(&l, &c, xb, hs, css));
    TG_CAPTURED_HAS("nn_lstm_step", "cs[1] has shape [4, 17]", "[4, 16]");
    CU_ASSERT_PTR_EQUAL(hs[0], keep); /* unchanged on error */
    CU_ASSERT_PTR_NULL(nn_lstm_step(&l, &c, ag_tensor_new(t, AG_SHAPE(B + 1, E)), hs, hs));
    TG_CAPTURED_HAS("nn_lstm_step", "h[0] has shape [4, 16]", "[5, 16]");
    CU_ASSERT_EQUAL(nn_lstm_state_split(&l, &c, c1, hs), -1);
    TG_CAPTURED_HAS("nn_lstm_state_split", "[1, 4, 16]", "num_layers = 2");
    CU_ASSERT_PTR_NULL(nn_lstm_state_join(&l, &c, css));
    TG_CAPTURED_HAS("nn_lstm_state_join", "[4, 17]");
    ag_tape_free(t);
    /* registration */
    nn_lstm bad;
    TG_EXPECT_ERROR(nn_lstm_init(&bad, NULL, "x", E, H, NN_LSTM_MAX_LAYERS + 1, 0),
                    "num_layers = 9");
    TG_EXPECT_ERROR(nn_lstm_init(&bad, NULL, "x", E, H, 1, 1.0), "dropout = 1");
    TG_EXPECT_ERROR(nn_lstm_init(&bad, NULL, "x", 0, H, 1, 0), "input_size = 0");
    ag_set_error_handler(NULL, NULL);
    nn_params_free(ps);
}

/* ---- central differences (float64) ---- */
#ifdef TG_DOUBLE

#define X0 x[0]
#define X1 x[1]
#define X2 x[2]
/* The cell under test: the fused one, or its composite when *(const bool *)u. */
#define CELL(u) (*(const bool *)(u) ? nn_lstm_cell_composite : nn_lstm_cell_forward)

/* [h'; c'] (2B, H) */
static ag_tensor *both(ag_tape *t, ag_tensor *h, ag_tensor *cn) {
    return ag_concat(t, 2, (ag_tensor *[]){h, cn}, 0);
}
static ag_tensor *f_cell(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    ag_tensor *h, *cn;
    CELL(u)(&c, X0, X1, X2, &h, &cn);
    return h ? both(t, h, cn) : NULL;
}
/* gi and gh one tensor (its gradient gathers both), c_prev a strided view. */
static ag_tensor *f_cell_shared(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    ag_tensor *h, *cn;
    CELL(u)(&c, X0, X0, ag_transpose(t, X1, 0, 1), &h, &cn);
    return h ? both(t, h, cn) : NULL;
}
/* Two steps: the first's h (four times, as gh) and c feed the second, and h is also an output:
 * gradients from both halves of the fused result, through its views. */
static ag_tensor *f_cell_two_steps(ag_tape *t, ag_tensor *const *x, void *u) {
    nn_ctx c = {.tape = t};
    ag_tensor *h1, *c1, *h2, *c2;
    CELL(u)(&c, X0, X1, X2, &h1, &c1);
    ag_tensor *gh = h1 ? ag_concat(t, 4, (ag_tensor *[]){h1, h1, h1, h1}, 1) : NULL;
    CELL(u)(&c, X1, gh, c1, &h2, &c2);
    return h2 ? ag_concat(t, 3, (ag_tensor *[]){h1, h2, c2}, 0) : NULL;
}

static const struct {
    const char *name;
    ag_gradcheck_fn fn;
    int n_in;
    gc_shape in[3];
} cell_cases[] = {
    {"lstm_cell", f_cell, 3, {{2, {3, 16}}, {2, {3, 16}}, {2, {3, 4}}}},
    {"lstm_cell, gi = gh, strided c_prev", f_cell_shared, 2, {{2, {2, 12}}, {2, {3, 2}}}},
    {"lstm_cell, two steps", f_cell_two_steps, 3, {{2, {2, 12}}, {2, {2, 12}}, {2, {2, 3}}}},
};

/* After gc_expect: some elements checked, no kink skipped. */
static void report(ag_gradcheck_result r) {
    CU_ASSERT_TRUE(r.checked > 0);
    CU_ASSERT_EQUAL(r.skipped, 0);
}

static void test_gradcheck_cell(void) {
    static const bool variants[2] = {false, true};
    for (size_t k = 0; k < sizeof cell_cases / sizeof *cell_cases; k++)
        for (int v = 0; v < 2; v++) {
            ag_rng rng;
            ag_rng_seed(&rng, 100 + k);
            ag_tensor *in[3] = {NULL, NULL, NULL};
            gc_leaves(in, cell_cases[k].n_in, cell_cases[k].in, &rng);
            char name[128];
            report(gc_expect(gc_variant(name, sizeof name, cell_cases[k].name, v), cell_cases[k].fn,
                             cell_cases[k].n_in, in, (void *)&variants[v], NULL));
            gc_free(in, 3);
        }
}

/* The whole layer: x, h0, c0 and every parameter checked; [out; h_T; c_T] (T + 2 NL, B, H). */
typedef struct layer_case {
    const nn_lstm *l;
    bool training;
} layer_case;
static ag_tensor *f_layer(ag_tape *t, ag_tensor *const *x, void *u) {
    const layer_case *k = u;
    ag_rng rng;
    nn_ctx c = gc_masks_ctx(t, k->training, &rng);
    ag_tensor *h, *cs, *out = nn_lstm_forward(k->l, &c, X0, X1, X2, &h, &cs);
    return out ? ag_concat(t, 3, (ag_tensor *[]){out, h, cs}, 0) : NULL;
}

static void test_gradcheck_layer(void) {
    enum { T = 3, B = 2, E = 3, H = 4, NL = 2 };
    const double dropouts[2] = {0, 0.3};
    for (int d = 0; d < 2; d++) {
        nn_lstm l;
        nn_params *ps = lstm_model(&l, E, H, NL, dropouts[d], 23);
        ag_tensor *in[3 + 4 * NL] = {ag_leaf_new(AG_SHAPE(T, B, E), true),
                                     ag_leaf_new(AG_SHAPE(NL, B, H), true),
                                     ag_leaf_new(AG_SHAPE(NL, B, H), true)};
        ag_rng rng;
        ag_rng_seed(&rng, 31);
        gc_fill(in, 3, &rng);
        for (size_t i = 0; i < nn_params_count(ps); i++) in[3 + i] = nn_params_at(ps, i);
        layer_case k = {&l, dropouts[d] > 0};
        report(gc_expect(d ? "lstm layer, 2 layers, dropout 0.3 in training"
                           : "lstm layer, 2 layers, no dropout",
                         f_layer, 3 + 4 * NL, in, &k, NULL));
        gc_free(in, 3);
        nn_params_free(ps);
    }
}
#endif

static CU_TestInfo tests[] = {
    {"fused cell against its composite; cell errors", test_cell_vs_composite},
    {"spec section 7 shapes, names, values against a naive loop", test_layer_shapes_and_values},
    {"step by step equals the whole sequence", test_step_equals_sequence},
    {"dropout: same seed same bits, between layers only", test_dropout},
    {"bad inputs refused (a GRU state among them)", test_bad_inputs},
#ifdef TG_DOUBLE
    {"gradcheck: fused cell and composite", test_gradcheck_cell},
    {"gradcheck: the whole layer", test_gradcheck_layer},
#endif
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("nn_lstm", tests, "nn: LSTM cell and layer (float64, tests/nn/test_lstm.c)");
}
