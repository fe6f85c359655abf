/* test_rnn.c -- the LSTM's and GRU's options and valid lengths (nn/rnn.h): the sequence ops
 * (mask, reverse, last) on hand-made values; PyTorch's names, shapes and order of the
 * bidirectional weights; values against a naive loop written from PyTorch's equations and
 * pack_padded_sequence's semantics (bidirectional, 2 layers, lengths, a given state); the exact
 * equivalences the headers claim, bit for bit: batch-first = time-major on the transposed input,
 * the reverse direction = a forward direction over each valid part reversed, lengths all T = no
 * lengths, outputs past a length are +0, h_n at step len - 1, NaN padding never read; the
 * refusals (length 0 as pack_padded_sequence, a bidirectional step). Built twice: against nn64
 * (float64) and nn (float32, the product). The central-difference checks (float64):
 * test_rnn_gradcheck.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/gc_harness.h"
#include "tests/nn/rnn_test.h"
#include "tests/tg_test.h"

#ifdef TG_DOUBLE
#define TOL 1e-10
#else
#define TOL 5e-5
#endif

/* ---- a model of either kind (model_init, fwd: rnn_test.h) ---- */

/* Layer k, direction d's four tensors. */
static nn_rnn_w weights(const model *m, int k, int d) {
    if (m->lstm) {
        const nn_lstm_layer *L = d ? &m->l.reverse[k] : &m->l.layer[k];
        return (nn_rnn_w){L->weight_ih, L->weight_hh, L->bias_ih, L->bias_hh};
    }
    const nn_gru_layer *L = d ? &m->g.reverse[k] : &m->g.layer[k];
    return (nn_rnn_w){L->weight_ih, L->weight_hh, L->bias_ih, L->bias_hh};
}

static ag_tensor *randn(ag_tape *t, ag_rng *r, int ndim, const int *shape) {
    ag_tensor *x = ag_tensor_new(t, ndim, shape);
    for (ptrdiff_t i = 0; x && i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(r);
    return x;
}

static bool same_bits(const ag_tensor *a, const ag_tensor *b) {
    return a && b && a->numel == b->numel &&
           memcmp(a->data, b->data, sizeof *a->data * (size_t)a->numel) == 0;
}

/* ---- the sequence ops ---- */

static void test_seq_ops(void) {
    ag_tape *t = ag_tape_new();
    /* x (T 3, B 2, F 1): x[t, b] = 10 t + b */
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(3, 2, 1), (ag_real[]){0, 1, 10, 11, 20, 21});
    const int32_t len[2] = {2, 3};
    const ag_real mask[] = {0, 1, 10, 11, 0, 21}, rev[] = {10, 21, 0, 11, 20, 1},
                  flip[] = {20, 21, 10, 11, 0, 1}, last[] = {10, 21};
    ag_tensor *y = nn_seq_mask(t, x, len), *r = nn_seq_reverse(t, x, len),
              *f = nn_seq_reverse(t, x, NULL), *l = nn_seq_last(t, x, len);
    CU_ASSERT_TRUE_FATAL(y && r && f && l);
    CU_ASSERT_TRUE(l->ndim == 2 && l->shape[0] == 2 && l->shape[1] == 1);
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(ag_get(y, i), mask[i]);
        CU_ASSERT_EQUAL(ag_get(r, i), rev[i]);
        CU_ASSERT_EQUAL(ag_get(f, i), flip[i]);
    }
    CU_ASSERT_FALSE(signbit(ag_get(y, 4))); /* +0, not -0 */
    for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(ag_get(l, i), last[i]);
    CU_ASSERT_TRUE(same_bits(nn_seq_reverse(t, r, len), x)); /* its own inverse */
    /* refusals: a length 0 (pack_padded_sequence's rule), > T, x not 3-D */
    ag_set_error_handler(tg_capture, NULL);
    TG_EXPECT_NULL(nn_seq_mask(t, x, (int32_t[]){0, 3}), "seq_mask", "lengths[0] = 0",
                   "expected 1 to T = 3");
    TG_EXPECT_NULL(nn_seq_last(t, x, (int32_t[]){1, 4}), "seq_last", "lengths[1] = 4");
    TG_EXPECT_NULL(nn_seq_reverse(t, ag_tensor_new(t, AG_SHAPE(3, 2)), NULL), "seq_reverse",
                   "[3, 2]", "(T, B, F)");
    TG_EXPECT_NULL(nn_seq_mask(t, x, NULL), "seq_mask", "lengths is NULL");
    CU_ASSERT_PTR_NULL(nn_seq_mask(t, NULL, len)); /* NULL in: NULL */
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
}

/* ---- names, shapes ---- */

static void test_names_and_shapes(void) {
    enum { E = 3, H = 4, NL = 2, T = 5, B = 2 };
    for (int kind = 0; kind < 2; kind++) {
        model m;
        model_init(&m, kind == 0, E, H, NL, 0, true, true, 1);
        const int G = kind == 0 ? 4 : 3;
        static const char *names[] = {
            "rnn.weight_ih_l0",         "rnn.weight_hh_l0",         "rnn.bias_ih_l0",
            "rnn.bias_hh_l0",           "rnn.weight_ih_l0_reverse", "rnn.weight_hh_l0_reverse",
            "rnn.bias_ih_l0_reverse",   "rnn.bias_hh_l0_reverse",   "rnn.weight_ih_l1",
            "rnn.weight_hh_l1",         "rnn.bias_ih_l1",           "rnn.bias_hh_l1",
            "rnn.weight_ih_l1_reverse", "rnn.weight_hh_l1_reverse", "rnn.bias_ih_l1_reverse",
            "rnn.bias_hh_l1_reverse"};
        const int cols[] = {E, H, 0, 0, E, H, 0, 0, 2 * H, H, 0, 0, 2 * H, H, 0, 0};
        CU_ASSERT_EQUAL_FATAL(nn_params_count(m.ps), 16);
        for (int i = 0; i < 16; i++) {
            const ag_tensor *p = nn_params_at(m.ps, (size_t)i);
            CU_ASSERT_STRING_EQUAL(p->name, names[i]);
            CU_ASSERT_EQUAL(p->shape[0], G * H);
            CU_ASSERT_EQUAL(p->ndim, cols[i] ? 2 : 1);
            if (cols[i]) CU_ASSERT_EQUAL(p->shape[1], cols[i]);
        }
        ag_tape *t = ag_tape_new();
        ag_rng r;
        ag_rng_seed(&r, 2);
        nn_ctx c = {.tape = t};
        ag_tensor *hn, *cn,
            *out = fwd(&m, &c, randn(t, &r, AG_SHAPE(B, T, E)), (int32_t[]){5, 2}, NULL, NULL, &hn,
                       &cn);
        CU_ASSERT_TRUE_FATAL(out != NULL);
        CU_ASSERT_TRUE(out->ndim == 3 && out->shape[0] == B && out->shape[1] == T &&
                       out->shape[2] == 2 * H);
        CU_ASSERT_TRUE(hn->ndim == 3 && hn->shape[0] == 2 * NL && hn->shape[1] == B);
        CU_ASSERT_TRUE(kind == 0 ? cn && cn->shape[0] == 2 * NL : cn == NULL);
        ag_tape_free(t);
        nn_params_free(m.ps);
    }
}

/* ---- a naive reference: PyTorch's equations, packed-sequence semantics, in double ---- */

enum { MT = 8, MB = 4, MW = 16 }; /* bounds of the naive loop: T, B, width */

/* One direction of one layer over seq (T, B, in): out (T, B, H) (0 past a length), the final
 * h, c of each sequence (B, H), from h0, c0 (B, H). */
static void naive_dir(bool lstm, nn_rnn_w w, int in, int H, int T, int B, const int32_t *len,
                      bool rev, double seq[MT][MB][2 * MW], const double *h0, const double *c0,
                      double out[MT][MB][MW], double *hn, double *cn) {
    const int G = lstm ? 4 : 3;
    for (int b = 0; b < B; b++) {
        double h[MW], c[MW], gi[4 * MW], gh[4 * MW];
        for (int j = 0; j < H; j++) h[j] = h0[b * H + j], c[j] = c0 ? c0[b * H + j] : 0;
        for (int s = 0; s < T; s++)
            for (int j = 0; j < H; j++) out[s][b][j] = 0;
        for (int s = 0; s < len[b]; s++) {
            const int tt = rev ? len[b] - 1 - s : s;
            for (int r = 0; r < G * H; r++) {
                gi[r] = ag_get(w.bias_ih, r), gh[r] = ag_get(w.bias_hh, r);
                for (int j = 0; j < in; j++)
                    gi[r] += ag_get(w.weight_ih, r * in + j) * seq[tt][b][j];
                for (int j = 0; j < H; j++) gh[r] += ag_get(w.weight_hh, r * H + j) * h[j];
            }
            for (int j = 0; j < H; j++) {
                if (lstm) {
                    double ig = 1 / (1 + exp(-gi[j] - gh[j])),
                           fg = 1 / (1 + exp(-gi[H + j] - gh[H + j])),
                           gg = tanh(gi[2 * H + j] + gh[2 * H + j]),
                           og = 1 / (1 + exp(-gi[3 * H + j] - gh[3 * H + j]));
                    c[j] = fg * c[j] + ig * gg;
                    h[j] = og * tanh(c[j]);
                } else {
                    double rg = 1 / (1 + exp(-gi[j] - gh[j])),
                           zg = 1 / (1 + exp(-gi[H + j] - gh[H + j])),
                           ng = tanh(gi[2 * H + j] + rg * gh[2 * H + j]);
                    h[j] = (1 - zg) * ng + zg * h[j];
                }
                out[tt][b][j] = h[j];
            }
        }
        for (int j = 0; j < H; j++) hn[b * H + j] = h[j], cn[b * H + j] = c[j];
    }
}

/* The whole model, time-major x (T, B, in): out (T, B, D H), hn, cn (NL D, B, H). */
static void naive_model(const model *m, const ag_tensor *x, const int32_t *len, const ag_tensor *h0,
                        const ag_tensor *c0, double *out, double *hn, double *cn) {
    const int NL = m->lstm ? m->l.num_layers : m->g.num_layers,
              H = m->lstm ? m->l.hidden : m->g.hidden,
              D = (m->lstm ? m->l.bidirectional : m->g.bidirectional) ? 2 : 1;
    const int T = x->shape[0], B = x->shape[1];
    static double seq[MT][MB][2 * MW], o[MT][MB][MW];
    double z[MB * MW] = {0}, s0[MB * MW], sc[MB * MW];
    int in = x->shape[2];
    CU_ASSERT_TRUE_FATAL(T <= MT && B <= MB && H <= MW && in <= 2 * MW);
    for (int s = 0; s < T; s++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < in; j++) seq[s][b][j] = ag_get(x, ((ptrdiff_t)s * B + b) * in + j);
    static double next[MT][MB][2 * MW];
    for (int k = 0; k < NL; k++) {
        for (int d = 0; d < D; d++) {
            const int row = k * D + d;
            for (int i = 0; i < B * H; i++) {
                s0[i] = h0 ? ag_get(h0, (ptrdiff_t)row * B * H + i) : 0;
                sc[i] = c0 ? ag_get(c0, (ptrdiff_t)row * B * H + i) : 0;
            }
            naive_dir(m->lstm, weights(m, k, d), in, H, T, B, len, d == 1, seq, h0 ? s0 : z,
                      c0 ? sc : z, o, hn + row * B * H, cn + row * B * H);
            for (int s = 0; s < T; s++)
                for (int b = 0; b < B; b++)
                    for (int j = 0; j < H; j++) next[s][b][d * H + j] = o[s][b][j];
        }
        in = D * H;
        memcpy(seq, next, sizeof seq);
    }
    for (int s = 0; s < T; s++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < in; j++) out[((ptrdiff_t)s * B + b) * in + j] = seq[s][b][j];
}

/* Bidirectional, 2 layers, lengths in any order (one full, one 1), from zeros and from a given
 * state, against the naive loop. */
static void test_values_against_naive(void) {
    enum { T = 6, B = 4, E = 3, H = 5, NL = 2, D = 2 };
    const int32_t len[B] = {4, 6, 1, 3};
    for (int kind = 0; kind < 2; kind++)
        for (int given = 0; given < 2; given++) {
            model m;
            model_init(&m, kind == 0, E, H, NL, 0.2, false, true, 11);
            ag_tape *t = ag_tape_new();
            ag_rng r;
            ag_rng_seed(&r, 4);
            nn_ctx c = {.tape = t}; /* eval */
            ag_tensor *x = randn(t, &r, AG_SHAPE(T, B, E));
            ag_tensor *h0 = given ? randn(t, &r, AG_SHAPE(NL * D, B, H)) : NULL;
            ag_tensor *c0 = given && kind == 0 ? randn(t, &r, AG_SHAPE(NL * D, B, H)) : NULL;
            ag_tensor *hn, *cn, *out = fwd(&m, &c, x, len, h0, c0, &hn, &cn);
            CU_ASSERT_TRUE_FATAL(out != NULL);
            static double ro[T * B * D * H], rh[NL * D * B * H], rc[NL * D * B * H];
            naive_model(&m, x, len, h0, c0, ro, rh, rc);
            CU_ASSERT_TRUE(gc_max_diff(out, ro) < TOL);
            CU_ASSERT_TRUE(gc_max_diff(hn, rh) < TOL);
            if (kind == 0) CU_ASSERT_TRUE(gc_max_diff(cn, rc) < TOL);
            ag_tape_free(t);
            nn_params_free(m.ps);
        }
}

/* ---- exact equivalences ---- */

/* The same weights under other options (the struct copied: the tensors are shared). */
static model with_opts(const model *m, bool bf, bool bi) {
    model v = *m;
    if (v.lstm) v.l.batch_first = bf, v.l.bidirectional = bi;
    else v.g.batch_first = bf, v.g.bidirectional = bi;
    return v;
}

/* batch-first on x (B, T, E) = time-major on its transpose; lengths all T = no lengths;
 * outputs past a length are +0; h_n at len - 1 (forward half: out[len-1]; reverse half:
 * out[0]); NaN in the padding changes no bit. Bidirectional, 2 layers. */
static void test_bits_layout_and_lengths(void) {
    enum { T = 5, B = 3, E = 4, H = 3, NL = 2, D = 2 };
    const int32_t len[B] = {2, 5, 3}, full[B] = {T, T, T};
    for (int kind = 0; kind < 2; kind++) {
        model bf;
        model_init(&bf, kind == 0, E, H, NL, 0, true, true, 5);
        const model tm = with_opts(&bf, false, true);
        ag_tape *t = ag_tape_new();
        ag_rng r;
        ag_rng_seed(&r, 6);
        nn_ctx c = {.tape = t};
        ag_tensor *x = randn(t, &r, AG_SHAPE(B, T, E));
        ag_tensor *xt = ag_contiguous(t, ag_transpose(t, x, 0, 1)), *hb, *cb, *ht, *ct;
        ag_tensor *ob = fwd(&bf, &c, x, len, NULL, NULL, &hb, &cb);
        ag_tensor *ot = fwd(&tm, &c, xt, len, NULL, NULL, &ht, &ct);
        CU_ASSERT_TRUE_FATAL(ob && ot);
        CU_ASSERT_TRUE(same_bits(ag_contiguous(t, ag_transpose(t, ob, 0, 1)), ot));
        CU_ASSERT_TRUE(same_bits(hb, ht));
        if (kind == 0) CU_ASSERT_TRUE(same_bits(cb, ct));
        /* past the lengths: +0; h_n of the top layer: forward at len - 1, reverse at 0 */
        for (int b = 0; b < B; b++)
            for (int s = 0; s < T; s++)
                for (int j = 0; j < D * H; j++) {
                    ag_real v = ag_get(ot, ((ptrdiff_t)s * B + b) * D * H + j);
                    if (s >= len[b]) CU_ASSERT_TRUE(v == 0 && !signbit(v));
                    if (j < H && s == len[b] - 1)
                        CU_ASSERT_EQUAL(v, ag_get(ht, ((ptrdiff_t)2 * B + b) * H + j));
                    if (j >= H && s == 0)
                        CU_ASSERT_EQUAL(v, ag_get(ht, ((ptrdiff_t)3 * B + b) * H + j - H));
                }
        /* NaN padding: the same bits */
        ag_tensor *xn = ag_contiguous(t, xt), *hn2, *cn2;
        for (int b = 0; b < B; b++)
            for (int s = len[b]; s < T; s++)
                for (int j = 0; j < E; j++) xn->data[((ptrdiff_t)s * B + b) * E + j] = NAN;
        CU_ASSERT_TRUE(same_bits(fwd(&tm, &c, xn, len, NULL, NULL, &hn2, &cn2), ot));
        CU_ASSERT_TRUE(same_bits(hn2, ht));
        /* lengths all T = no lengths */
        ag_tensor *hl, *cl, *hs, *cs;
        ag_tensor *ol = fwd(&tm, &c, xt, full, NULL, NULL, &hl, &cl);
        ag_tensor *os = fwd(&tm, &c, xt, NULL, NULL, NULL, &hs, &cs);
        CU_ASSERT_TRUE(same_bits(ol, os));
        CU_ASSERT_TRUE(same_bits(hl, hs));
        if (kind == 0) CU_ASSERT_TRUE(same_bits(cl, cs));
        ag_tape_free(t);
        nn_params_free(bf.ps);
    }
}

/* The reverse direction of a one-layer bidirectional layer = a one-direction layer with the
 * reverse weights over each sequence's valid part reversed (bits); its forward half = the
 * one-direction layer with the forward weights (bits). */
static void test_bits_reverse_direction(void) {
    enum { T = 6, B = 3, E = 2, H = 4 };
    const int32_t len[B] = {6, 2, 4};
    for (int kind = 0; kind < 2; kind++) {
        model bi;
        model_init(&bi, kind == 0, E, H, 1, 0, false, true, 8);
        model fw = with_opts(&bi, false, false), rv = fw;
        if (rv.lstm) rv.l.layer[0] = bi.l.reverse[0];
        else rv.g.layer[0] = bi.g.reverse[0];
        ag_tape *t = ag_tape_new();
        ag_rng r;
        ag_rng_seed(&r, 9);
        nn_ctx c = {.tape = t};
        ag_tensor *x = randn(t, &r, AG_SHAPE(T, B, E)), *xr = ag_tensor_new(t, AG_SHAPE(T, B, E));
        for (int b = 0; b < B; b++)
            for (int s = 0; s < len[b]; s++)
                for (int j = 0; j < E; j++)
                    xr->data[((ptrdiff_t)s * B + b) * E + j] =
                        x->data[((ptrdiff_t)(len[b] - 1 - s) * B + b) * E + j];
        ag_tensor *hb, *cb, *hf, *cf, *hr, *cr;
        ag_tensor *ob = fwd(&bi, &c, x, len, NULL, NULL, &hb, &cb);
        ag_tensor *of = fwd(&fw, &c, x, len, NULL, NULL, &hf, &cf);
        ag_tensor *orv = fwd(&rv, &c, xr, len, NULL, NULL, &hr, &cr);
        CU_ASSERT_TRUE_FATAL(ob && of && orv);
        bool fwd_same = true, rev_same = true;
        for (int b = 0; b < B; b++)
            for (int s = 0; s < len[b]; s++)
                for (int j = 0; j < H; j++) {
                    ag_real vb = ag_get(ob, ((ptrdiff_t)s * B + b) * 2 * H + j),
                            vr = ag_get(ob, ((ptrdiff_t)s * B + b) * 2 * H + H + j);
                    fwd_same &= vb == ag_get(of, ((ptrdiff_t)s * B + b) * H + j);
                    rev_same &= vr == ag_get(orv, ((ptrdiff_t)(len[b] - 1 - s) * B + b) * H + j);
                }
        CU_ASSERT_TRUE(fwd_same);
        CU_ASSERT_TRUE(rev_same);
        /* h_n rows: 0 the forward direction, 1 the reverse */
        CU_ASSERT_EQUAL(memcmp(hb->data, hf->data, sizeof *hf->data * B * H), 0);
        CU_ASSERT_EQUAL(memcmp(hb->data + B * H, hr->data, sizeof *hr->data * B * H), 0);
        if (kind == 0)
            CU_ASSERT_EQUAL(memcmp(cb->data + B * H, cr->data, sizeof *cr->data * B * H), 0);
        ag_tape_free(t);
        nn_params_free(bi.ps);
    }
}

/* Each sequence alone (B = 1, T = its length, no lengths) gives its row of the batch (within
 * rounding: a GEMM's bits may depend on the matrix sizes). */
static void test_each_sequence_alone(void) {
    enum { T = 5, B = 3, E = 3, H = 4, NL = 2, D = 2 };
    const int32_t len[B] = {3, 5, 1};
    for (int kind = 0; kind < 2; kind++) {
        model m;
        model_init(&m, kind == 0, E, H, NL, 0, false, true, 12);
        ag_tape *t = ag_tape_new();
        ag_rng r;
        ag_rng_seed(&r, 13);
        nn_ctx c = {.tape = t};
        ag_tensor *x = randn(t, &r, AG_SHAPE(T, B, E)), *hn, *cn;
        ag_tensor *out = fwd(&m, &c, x, len, NULL, NULL, &hn, &cn);
        CU_ASSERT_TRUE_FATAL(out != NULL);
        double err = 0;
        for (int b = 0; b < B; b++) {
            ag_tensor *xb = ag_tensor_new(t, AG_SHAPE(len[b], 1, E)), *h1, *c1;
            for (int s = 0; s < len[b]; s++)
                for (int j = 0; j < E; j++)
                    xb->data[s * E + j] = x->data[((ptrdiff_t)s * B + b) * E + j];
            ag_tensor *o1 = fwd(&m, &c, xb, NULL, NULL, NULL, &h1, &c1);
            CU_ASSERT_TRUE_FATAL(o1 != NULL);
            for (int s = 0; s < len[b]; s++)
                for (int j = 0; j < D * H; j++)
                    err = fmax(err, fabs(ag_get(o1, s * D * H + j) -
                                         ag_get(out, ((ptrdiff_t)s * B + b) * D * H + j)));
            for (int row = 0; row < NL * D; row++)
                for (int j = 0; j < H; j++) {
                    err = fmax(err, fabs(ag_get(h1, row * H + j) -
                                         ag_get(hn, ((ptrdiff_t)row * B + b) * H + j)));
                    if (kind == 0)
                        err = fmax(err, fabs(ag_get(c1, row * H + j) -
                                             ag_get(cn, ((ptrdiff_t)row * B + b) * H + j)));
                }
        }
        CU_ASSERT_TRUE(err < TOL);
        ag_tape_free(t);
        nn_params_free(m.ps);
    }
}

/* ---- refusals ---- */

static void test_bad_inputs(void) {
    enum { T = 4, B = 2, E = 3, H = 2 };
    model l, g;
    model_init(&l, true, E, H, 2, 0, true, true, 1);
    model_init(&g, false, E, H, 1, 0, false, true, 1);
    ag_set_error_handler(tg_capture, NULL);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_tensor *xb = ag_tensor_new(t, AG_SHAPE(B, T, E)), *xt = ag_tensor_new(t, AG_SHAPE(T, B, E));
    ag_tensor *hn = xb, *cn = xb;
    TG_EXPECT_NULL(nn_lstm_forward_lengths(&l.l, &c, xb, (int32_t[]){0, 4}, NULL, NULL, &hn, &cn),
                   "nn_lstm_forward_lengths", "lengths[0] = 0", "pack_padded_sequence");
    CU_ASSERT_TRUE(hn == NULL && cn == NULL);
    TG_EXPECT_NULL(nn_gru_forward_lengths(&g.g, &c, xt, (int32_t[]){4, 5}, NULL, NULL),
                   "nn_gru_forward_lengths", "lengths[1] = 5", "T = 4");
    /* batch-first shapes named; the state (num_layers * 2, B, H) */
    TG_EXPECT_NULL(
        nn_lstm_forward(&l.l, &c, ag_tensor_new(t, AG_SHAPE(B, T, 5)), NULL, NULL, NULL, NULL),
        "nn_lstm_forward", "[2, 4, 5]", "(B, T, input_size = 3)");
    ag_tensor *h2 = ag_tensor_new(t, AG_SHAPE(2, B, H));
    TG_EXPECT_NULL(nn_lstm_forward(&l.l, &c, xb, h2, h2, NULL, NULL), "h0 [2, 2, 2]",
                   "[4, 2, 2] (num_layers * 2 directions, B, hidden)");
    TG_EXPECT_NULL(nn_gru_forward(&g.g, &c, xt, ag_tensor_new(t, AG_SHAPE(1, B, H)), NULL),
                   "nn_gru_forward: h0", "[1, 2, 2]", "num_layers * 2 directions = 2");
    /* no step for a bidirectional layer */
    ag_tensor *parts[2] = {ag_tensor_new(t, AG_SHAPE(B, H)), ag_tensor_new(t, AG_SHAPE(B, H))};
    TG_EXPECT_NULL(nn_lstm_step(&l.l, &c, ag_tensor_new(t, AG_SHAPE(B, E)), parts, parts),
                   "nn_lstm_step", "bidirectional");
    TG_EXPECT_NULL(nn_gru_step(&g.g, &c, ag_tensor_new(t, AG_SHAPE(B, E)), parts), "nn_gru_step",
                   "bidirectional");
    TG_EXPECT_ERROR(nn_gru_state_split(&g.g, &c, h2, parts), "nn_gru_state_split", "bidirectional");
    TG_EXPECT_NULL(nn_lstm_state_join(&l.l, &c, parts), "nn_lstm_state_join", "bidirectional");
    /* the cells' inputs: gates (B, 4H) or (B, 3H) against the state (B, H) */
    ag_tensor *g4 = ag_tensor_new(t, AG_SHAPE(B, 4 * H)),
              *g3 = ag_tensor_new(t, AG_SHAPE(B, 3 * H));
    ag_tensor *hs = ag_tensor_new(t, AG_SHAPE(B, H)), *hc = hs;
    TG_EXPECT_ERROR(nn_lstm_cell_forward(&c, g4, g3, hs, &hs, &hc),
                    "lstm_cell: gates [2, 8] and "
                    "[2, 6] with cell state [2, 2]; expected (B, 4H), (B, 4H), (B, H)");
    TG_EXPECT_NULL(nn_gru_cell_composite(&c, g3, g3, ag_tensor_new(t, AG_SHAPE(B, 3))),
                   "gru_cell_composite: gates [2, 6] and [2, 6] with state [2, 3]; expected "
                   "(B, 3H), (B, 3H), (B, H)");
    /* dropout between layers, in training, needs an rng */
    model d;
    model_init(&d, false, E, H, 2, 0.5, false, false, 1);
    nn_ctx ct = {.tape = t, .training = true};
    TG_EXPECT_NULL(nn_gru_forward(&d.g, &ct, xt, NULL, NULL), "nn_gru_forward: training with "
                                                              "dropout 0.5 needs nn_ctx.rng");
    ag_tape_free(t);
    nn_params_free(d.ps);
    /* the layers' arguments, each refused with the prefix named */
    nn_params *ps = nn_params_new();
    nn_lstm lb;
    nn_gru gb;
    TG_EXPECT_ERROR(nn_lstm_init(&lb, ps, "enc", 0, 4, 1, 0), "nn_lstm_init 'enc': input_size = 0, "
                                                              "hidden = 4, expected > 0");
    nn_params_free(ps);
    ps = nn_params_new();
    TG_EXPECT_ERROR(nn_gru_init(&gb, ps, "dec", 3, 4, 9, 0), "nn_gru_init 'dec': num_layers = 9, "
                                                             "expected 1 to 8");
    nn_params_free(ps);
    ps = nn_params_new();
    TG_EXPECT_ERROR(nn_lstm_init(&lb, ps, NULL, 3, 4, 1, 1.0), "nn_lstm_init '(null)': dropout = "
                                                               "1, expected 0 <= p < 1");
    nn_params_free(ps);
    ag_set_error_handler(NULL, NULL);
    nn_params_free(l.ps);
    nn_params_free(g.ps);
}

static CU_TestInfo tests[] = {
    {"sequence ops: mask, reverse, last; refusals", test_seq_ops},
    {"bidirectional names, shapes, order (PyTorch's)", test_names_and_shapes},
    {"values against a naive loop (bidirectional, 2 layers, lengths)", test_values_against_naive},
    {"bits: batch-first, lengths all T, +0 past len, h_n at len-1, NaN padding",
     test_bits_layout_and_lengths},
    {"bits: reverse direction = forward over the reversed valid part", test_bits_reverse_direction},
    {"each sequence alone gives its row of the batch", test_each_sequence_alone},
    {"bad inputs refused (length 0, bidirectional step)", test_bad_inputs},
    CU_TEST_INFO_NULL,
};

int main(void) {
    return gc_main("nn_rnn", tests,
                   "nn: LSTM and GRU options and valid lengths (float64, tests/nn/test_rnn.c)");
}
