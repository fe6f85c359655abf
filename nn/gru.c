/* gru.c -- the GRU cell (a fused kernel written on autograd/ag_op.h, and its composite of ag
 * primitives, the tested reference) and the multi-layer GRU built on it (math and layout in
 * nn/gru.h). */
#include <stdio.h>
#include <stdlib.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"
#include "nn/rnn.h"

_Static_assert(NN_GRU_MAX_LAYERS <= NN_RNN_MAX_LAYERS, "the driver holds every layer");

/* ---- the GRU cell, fused ----
 *
 * gi (B, 3H) = x W_ih^T + b_ih and gh (B, 3H) = h W_hh^T + b_hh hold the gates r, z, n in
 * that order along axis 1; h (B, H) is the previous state. Per element (b, j):
 *   r = sigmoid(gi_r + gh_r)     z = sigmoid(gi_z + gh_z)     n = tanh(gi_n + r gh_n)
 *   h' = n + z (h - n)
 * Backward, g = dh':
 *   dh += g z      dn = g (1 - z)      dz = g (h - n)
 *   a_n = dn (1 - n^2):    dgi_n += a_n     dgh_n += a_n r
 *   a_z = dz z (1 - z):    dgi_z += a_z     dgh_z += a_z
 *   a_r = a_n gh_n r (1 - r):  dgi_r += a_r     dgh_r += a_r
 * The forward keeps r, z, n; the backward first forms a = (a_r, a_z, a_n) for the whole batch,
 * then adds it into each input's gradient in its own loop (so gi, gh and h may be one tensor).
 */

typedef struct gru_saved {
    ag_real *rzn; /* (B, 3H): r, z, n */
    ag_real *a;   /* (B, 3H) scratch for the backward */
} gru_saved;

static void gru_cell_backward(ag_node *nd) {
    ag_tensor *gi = nd->in[0], *gh = nd->in[1], *h = nd->in[2], *y = nd->out;
    const gru_saved *s = nd->saved;
    const int B = h->shape[0], H = h->shape[1];
    for (int b = 0; b < B; b++) {
        const ag_real *restrict g = y->grad + (ptrdiff_t)b * H, *restrict hb =
                                                                    h->data + (ptrdiff_t)b * H;
        const ag_real *restrict r = s->rzn + (ptrdiff_t)b * 3 * H, *restrict z = r + H,
                                *restrict n = z + H;
        const ag_real *restrict ghn = gh->data + (ptrdiff_t)b * 3 * H + 2 * H;
        ag_real *restrict ar = s->a + (ptrdiff_t)b * 3 * H, *restrict az = ar + H,
                          *restrict an = az + H;
        for (int j = 0; j < H; j++) an[j] = g[j] * (1 - z[j]) * (1 - n[j] * n[j]);
        for (int j = 0; j < H; j++) az[j] = g[j] * (hb[j] - n[j]) * z[j] * (1 - z[j]);
        for (int j = 0; j < H; j++) ar[j] = an[j] * ghn[j] * r[j] * (1 - r[j]);
    }
    ptrdiff_t n3 = (ptrdiff_t)B * 3 * H;
    if (gi->grad) {
        ag_real *restrict d = gi->grad;
        const ag_real *restrict a = s->a;
        for (ptrdiff_t i = 0; i < n3; i++) d[i] += a[i];
    }
    if (gh->grad) {
        for (int b = 0; b < B; b++) {
            ag_real *restrict d = gh->grad + (ptrdiff_t)b * 3 * H;
            const ag_real *restrict a = s->a + (ptrdiff_t)b * 3 * H, *restrict r =
                                                                         s->rzn +
                                                                         (ptrdiff_t)b * 3 * H;
            for (int j = 0; j < 2 * H; j++) d[j] += a[j];
            for (int j = 2 * H; j < 3 * H; j++) d[j] += a[j] * r[j - 2 * H];
        }
    }
    if (h->grad) {
        for (int b = 0; b < B; b++) {
            ag_real *restrict d = h->grad + (ptrdiff_t)b * H;
            const ag_real *restrict g = y->grad + (ptrdiff_t)b * H, *restrict z =
                                                                        s->rzn +
                                                                        (ptrdiff_t)b * 3 * H + H;
            for (int j = 0; j < H; j++) d[j] += g[j] * z[j];
        }
    }
}
static const ag_op gru_cell_op = {"gru_cell", gru_cell_backward};

ag_tensor *nn_gru_cell_forward(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *h) {
    ag_tensor *in[3] = {gi, gh, h};
    if (!c || !nn_rnn_cell_check(c->tape, "gru_cell", in, 3, "state")) return NULL;
    ag_tape *t = c->tape;
    for (int i = 0; i < 3; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    gi = in[0], gh = in[1], h = in[2];
    const int B = h->shape[0], H = h->shape[1];
    ag_tensor *y = ag_op_out(t, AG_SHAPE(B, H), 3, in);
    gru_saved s = {NULL, NULL};
    s.rzn = y ? ag_tape_alloc(t, sizeof *s.rzn * (size_t)B * 3 * H) : NULL;
    if (!s.rzn || (y->requires_grad && !(s.a = ag_tape_alloc(t, sizeof *s.a * (size_t)B * 3 * H))))
        return NULL;
    for (int b = 0; b < B; b++) {
        const ag_real *restrict xi = gi->data + (ptrdiff_t)b * 3 * H, *restrict xh =
                                                                          gh->data +
                                                                          (ptrdiff_t)b * 3 * H;
        const ag_real *restrict hb = h->data + (ptrdiff_t)b * H;
        ag_real *restrict r = s.rzn + (ptrdiff_t)b * 3 * H, *restrict z = r + H,
                          *restrict n = z + H;
        ag_real *restrict yb = y->data + (ptrdiff_t)b * H;
        /* one loop per gate: each vectorizes (a single loop with three inlined
         * transcendentals does not) */
        for (int j = 0; j < H; j++) r[j] = ag_sigmoid1(xi[j] + xh[j]);
        for (int j = 0; j < H; j++) z[j] = ag_sigmoid1(xi[H + j] + xh[H + j]);
        for (int j = 0; j < H; j++) n[j] = ag_tanh1(xi[2 * H + j] + r[j] * xh[2 * H + j]);
        for (int j = 0; j < H; j++) yb[j] = n[j] + z[j] * (hb[j] - n[j]);
    }
    ag_node *nd = ag_op_record(t, &gru_cell_op, y, 3, in, sizeof s);
    if (nd) *(gru_saved *)nd->saved = s;
    return y;
}

/* The same from primitives: narrow the gates out of gi and gh, then sigmoid, tanh, mul, add. */
ag_tensor *nn_gru_cell_composite(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *h) {
    if (!c ||
        !nn_rnn_cell_check(c->tape, "gru_cell_composite", (ag_tensor *[]){gi, gh, h}, 3, "state"))
        return NULL;
    ag_tape *t = c->tape;
    const int H = h->shape[1];
    ag_tensor *r = ag_sigmoid(t, ag_add(t, ag_narrow(t, gi, 1, 0, H), ag_narrow(t, gh, 1, 0, H)));
    ag_tensor *z = ag_sigmoid(t, ag_add(t, ag_narrow(t, gi, 1, H, H), ag_narrow(t, gh, 1, H, H)));
    ag_tensor *n = ag_tanh(
        t, ag_add(t, ag_narrow(t, gi, 1, 2 * H, H), ag_mul(t, r, ag_narrow(t, gh, 1, 2 * H, H))));
    return ag_add(t, n, ag_mul(t, z, ag_sub(t, h, n)));
}

/* ---- the layers ---- */

int nn_gru_init_opts(nn_gru *g, nn_params *ps, const char *prefix, int input_size, int hidden,
                     int num_layers, double dropout, const nn_rnn_opts *opts) {
    if (!g)
        return nn_params_fail(ps, "nn_gru_init: layer is NULL (prefix '%s')",
                              prefix ? prefix : "(null)");
    const nn_rnn_opts o = opts ? *opts : (nn_rnn_opts){false, false};
    *g = (nn_gru){.input_size = input_size,
                  .hidden = hidden,
                  .num_layers = num_layers,
                  .dropout = dropout,
                  .batch_first = o.batch_first,
                  .bidirectional = o.bidirectional};
    return nn_rnn_init_layers(ps, "nn_gru_init", prefix, 3, input_size, hidden, num_layers,
                              NN_GRU_MAX_LAYERS, dropout, o.bidirectional, g->layer, g->reverse);
}

int nn_gru_init(nn_gru *g, nn_params *ps, const char *prefix, int input_size, int hidden,
                int num_layers, double dropout) {
    return nn_gru_init_opts(g, ps, prefix, input_size, hidden, num_layers, dropout, NULL);
}

/* One cell update of layer L: gi (B, 3H) = x W_ih^T + b_ih, already computed; h (B, H) the
 * layer's previous state; gh = h W_hh^T + b_hh here. Returns h' (B, H), or NULL when an op
 * failed. */
static ag_tensor *gru_cell(const nn_ctx *c, const nn_gru_layer *L, ag_tensor *gi, ag_tensor *h) {
    return nn_gru_cell_forward(c, gi, ag_linear(c->tape, h, L->weight_hh, L->bias_hh), h);
}

static int check_shape3(const nn_ctx *c, const ag_tensor *x, int d0, int d1, int d2,
                        const char *what, const char *expect) {
    char s[96];
    if (x->ndim == 3 && (d0 < 0 || x->shape[0] == d0) && (d1 < 0 || x->shape[1] == d1) &&
        x->shape[2] == d2 && x->shape[0] > 0 && x->shape[1] > 0)
        return 0;
    ag_report(c->tape, "%s has shape %s, expected %s", what,
              nn_shape_fmt(s, sizeof s, x->ndim, x->shape), expect);
    return -1;
}


/* The same as the driver's cell (nn/rnn.h): st = {h}. */
static int gru_rnn_cell(const nn_ctx *c, const nn_rnn_w *w, ag_tensor *gi, ag_tensor **st) {
    st[0] = nn_gru_cell_forward(c, gi, ag_linear(c->tape, st[0], w->weight_hh, w->bias_hh), st[0]);
    return st[0] ? 0 : -1;
}

/* nn_gru_forward_lengths, named fn in its messages. */
static ag_tensor *gru_run(const nn_gru *g, const nn_ctx *c, const char *fn, ag_tensor *x,
                          const int32_t *lengths, ag_tensor *h0, ag_tensor **state_out) {
    char ex[96], what[64];
    if (state_out) *state_out = NULL;
    if (!g || !c || !x) return NULL;
    const int D = g->bidirectional ? 2 : 1;
    snprintf(ex, sizeof ex, "(%s, input_size = %d)", g->batch_first ? "B, T" : "T, B",
             g->input_size);
    snprintf(what, sizeof what, "%s: x", fn);
    if (check_shape3(c, x, -1, -1, g->input_size, what, ex)) return NULL;
    if (h0) {
        const int B = x->shape[g->batch_first ? 0 : 1];
        snprintf(ex, sizeof ex, "(num_layers%s = %d, B = %d, hidden = %d)",
                 D == 2 ? " * 2 directions" : "", g->num_layers * D, B, g->hidden);
        snprintf(what, sizeof what, "%s: h0", fn);
        if (check_shape3(c, h0, g->num_layers * D, B, g->hidden, what, ex)) return NULL;
    }
    nn_rnn_spec s = {.fn = fn,
                     .hidden = g->hidden,
                     .num_layers = g->num_layers,
                     .dirs = D,
                     .gates = 3,
                     .nstate = 1,
                     .batch_first = g->batch_first,
                     .dropout = g->dropout,
                     .cell = gru_rnn_cell};
    for (int k = 0; k < g->num_layers; k++)
        for (int d = 0; d < D; d++) s.w[k * D + d] = d ? g->reverse[k] : g->layer[k];
    return nn_rnn_run(&s, c, x, lengths, (ag_tensor *[]){h0}, state_out);
}

ag_tensor *nn_gru_forward(const nn_gru *g, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                          ag_tensor **state_out) {
    return gru_run(g, c, "nn_gru_forward", x, NULL, h0, state_out);
}

ag_tensor *nn_gru_forward_lengths(const nn_gru *g, const nn_ctx *c, ag_tensor *x,
                                  const int32_t *lengths, ag_tensor *h0, ag_tensor **state_out) {
    return gru_run(g, c, "nn_gru_forward_lengths", x, lengths, h0, state_out);
}

ag_tensor *nn_gru_step(const nn_gru *g, const nn_ctx *c, ag_tensor *x, ag_tensor **h) {
    char s[96];
    if (!g || !c || !x || !h) return NULL;
    if (g->bidirectional) return ag_report(c->tape, "nn_gru_step: the GRU is bidirectional");
    if (x->ndim != 2 || x->shape[1] != g->input_size) {
        return ag_report(c->tape, "nn_gru_step: x has shape %s, expected (B, input_size = %d)",
                         nn_shape_fmt(s, sizeof s, x->ndim, x->shape), g->input_size);
    }
    const int B = x->shape[0], H = g->hidden;
    for (int k = 0; k < g->num_layers; k++) {
        if (!h[k]) return NULL;
        if (h[k]->ndim != 2 || h[k]->shape[0] != B || h[k]->shape[1] != H) {
            return ag_report(c->tape,
                             "nn_gru_step: h[%d] has shape %s, expected (B = %d, hidden = %d)", k,
                             nn_shape_fmt(s, sizeof s, h[k]->ndim, h[k]->shape), B, H);
        }
    }
    ag_tensor *nh[NN_GRU_MAX_LAYERS];
    ag_tensor *in = x;
    for (int k = 0; k < g->num_layers; k++) {
        const nn_gru_layer *L = &g->layer[k];
        if (k > 0) in = nn_rnn_between_layers(c, in, g->dropout, "nn_gru_step");
        ag_tensor *gi = ag_linear(c->tape, in, L->weight_ih, L->bias_ih); /* (B, 3H) */
        nh[k] = gru_cell(c, L, gi, h[k]);
        if (!nh[k]) return NULL;
        in = nh[k];
    }
    for (int k = 0; k < g->num_layers; k++) h[k] = nh[k];
    return h[g->num_layers - 1];
}

int nn_gru_state_split(const nn_gru *g, const nn_ctx *c, ag_tensor *state, ag_tensor **h) {
    char ex[96];
    if (!g || !c || !state || !h) return ag_error("nn_gru_state_split: NULL argument");
    if (g->bidirectional) {
        ag_report(c->tape, "nn_gru_state_split: the GRU is bidirectional (no step)");
        return -1;
    }
    snprintf(ex, sizeof ex, "(num_layers = %d, B, hidden = %d)", g->num_layers, g->hidden);
    if (check_shape3(c, state, g->num_layers, -1, g->hidden, "nn_gru_state_split: state", ex))
        return -1;
    const int B = state->shape[1];
    for (int k = 0; k < g->num_layers; k++) {
        h[k] = ag_reshape(c->tape, ag_narrow(c->tape, state, 0, k, 1), AG_SHAPE(B, g->hidden));
        if (!h[k]) return ag_error_context("nn_gru_state_split: op failed");
    }
    return 0;
}

ag_tensor *nn_gru_state_join(const nn_gru *g, const nn_ctx *c, ag_tensor *const *h) {
    ag_tensor *parts[NN_GRU_MAX_LAYERS];
    if (!g || !c || !h) return NULL;
    if (g->bidirectional)
        return ag_report(c->tape, "nn_gru_state_join: the GRU is bidirectional (no step)");
    for (int k = 0; k < g->num_layers; k++) {
        if (!h[k]) return NULL;
        if (h[k]->ndim != 2 || h[k]->shape[1] != g->hidden) {
            char s[96];
            return ag_report(c->tape,
                             "nn_gru_state_join: h[%d] has shape %s, expected (B, hidden = %d)", k,
                             nn_shape_fmt(s, sizeof s, h[k]->ndim, h[k]->shape), g->hidden);
        }
        parts[k] = ag_reshape(c->tape, h[k], AG_SHAPE(1, h[k]->shape[0], g->hidden));
        if (!parts[k]) return NULL;
    }
    return ag_concat(c->tape, g->num_layers, parts, 0); /* (num_layers, B, H) */
}
