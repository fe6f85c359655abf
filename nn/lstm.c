/* lstm.c -- the LSTM cell (a fused kernel written on autograd/ag_op.h, and its composite of ag
 * primitives, the tested reference) and the multi-layer LSTM built on it (math and layout in
 * nn/lstm.h). */
#include <stdio.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"
#include "nn/rnn.h"

_Static_assert(NN_LSTM_MAX_LAYERS <= NN_RNN_MAX_LAYERS, "the driver holds every layer");

/* ---- the LSTM cell, fused ----
 *
 * gi (B, 4H) = x W_ih^T + b_ih and gh (B, 4H) = h W_hh^T + b_hh hold the gates i, f, g, o in
 * that order along axis 1; cp (B, H) is the previous cell state. Per element (b, j):
 *   i = sigmoid(gi_i + gh_i)   f = sigmoid(gi_f + gh_f)   g = tanh(gi_g + gh_g)
 *   o = sigmoid(gi_o + gh_o)   c' = f cp + i g            h' = o tanh(c')
 * One result y (2, B, H): y[0] = h', y[1] = c' (the caller gets two (B, H) views of it).
 * Backward, gh' = dy[0], gc' = dy[1], tc = tanh(c'):
 *   dc = gc' + gh' o (1 - tc^2)        (the cell state's total gradient)
 *   a_i = dc g i (1 - i)     a_f = dc cp f (1 - f)     a_g = dc i (1 - g^2)
 *   a_o = gh' tc o (1 - o)
 *   dgi += a     dgh += a     (a = (a_i, a_f, a_g, a_o), (B, 4H))
 *   dcp += dc f
 * The forward keeps the activations i, f, g, o and tc; the backward first forms a and dc for
 * the whole batch, then adds them into each input's gradient in its own loop (so gi, gh and cp
 * may share memory).
 */

typedef struct lstm_saved {
    ag_real *act; /* (B, 4H): i, f, g, o */
    ag_real *tc;  /* (B, H): tanh(c') */
    ag_real *a;   /* (B, 4H) scratch for the backward: d loss / d gate pre-activations */
    ag_real *dc;  /* (B, H) scratch for the backward: d loss / d c' */
} lstm_saved;

static void lstm_cell_backward(ag_node *nd) {
    ag_tensor *gi = nd->in[0], *gh = nd->in[1], *cp = nd->in[2], *y = nd->out;
    const lstm_saved *s = nd->saved;
    const int B = cp->shape[0], H = cp->shape[1];
    for (int b = 0; b < B; b++) {
        const ag_real *restrict gH = y->grad + (ptrdiff_t)b * H;
        const ag_real *restrict gC = y->grad + (ptrdiff_t)(B + b) * H;
        const ag_real *restrict c0 = cp->data + (ptrdiff_t)b * H;
        const ag_real *restrict tc = s->tc + (ptrdiff_t)b * H;
        const ag_real *restrict i = s->act + (ptrdiff_t)b * 4 * H, *restrict f = i + H,
                                *restrict g = f + H, *restrict o = g + H;
        ag_real *restrict ai = s->a + (ptrdiff_t)b * 4 * H, *restrict af = ai + H,
                          *restrict ag = af + H, *restrict ao = ag + H,
                          *restrict dc = s->dc + (ptrdiff_t)b * H;
        for (int j = 0; j < H; j++) dc[j] = gC[j] + gH[j] * o[j] * (1 - tc[j] * tc[j]);
        for (int j = 0; j < H; j++) ai[j] = dc[j] * g[j] * i[j] * (1 - i[j]);
        for (int j = 0; j < H; j++) af[j] = dc[j] * c0[j] * f[j] * (1 - f[j]);
        for (int j = 0; j < H; j++) ag[j] = dc[j] * i[j] * (1 - g[j] * g[j]);
        for (int j = 0; j < H; j++) ao[j] = gH[j] * tc[j] * o[j] * (1 - o[j]);
    }
    const ptrdiff_t n4 = (ptrdiff_t)B * 4 * H;
    const ag_real *restrict a = s->a;
    if (gi->grad) {
        ag_real *restrict d = gi->grad;
        for (ptrdiff_t k = 0; k < n4; k++) d[k] += a[k];
    }
    if (gh->grad) {
        ag_real *restrict d = gh->grad;
        for (ptrdiff_t k = 0; k < n4; k++) d[k] += a[k];
    }
    if (cp->grad) {
        for (int b = 0; b < B; b++) {
            ag_real *restrict d = cp->grad + (ptrdiff_t)b * H;
            const ag_real *restrict dc = s->dc + (ptrdiff_t)b * H;
            const ag_real *restrict f = s->act + (ptrdiff_t)b * 4 * H + H;
            for (int j = 0; j < H; j++) d[j] += dc[j] * f[j];
        }
    }
}
static const ag_op lstm_cell_op = {"lstm_cell", lstm_cell_backward};

/* Writes h and cn to the outputs that are not NULL -- both NULL when either is -- and returns
 * 0, or -1 for NULL. */
static int cell_outputs(ag_tensor *h, ag_tensor *cn, ag_tensor **h_new, ag_tensor **c_new) {
    if (!h || !cn) h = cn = NULL;
    if (h_new) *h_new = h;
    if (c_new) *c_new = cn;
    return h ? 0 : -1;
}

int nn_lstm_cell_forward(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *c_prev,
                         ag_tensor **h_new, ag_tensor **c_new) {
    ag_tensor *in[3] = {gi, gh, c_prev};
    cell_outputs(NULL, NULL, h_new, c_new);
    if (!c || !nn_rnn_cell_check(c->tape, "lstm_cell", in, 4, "cell state")) return -1;
    ag_tape *t = c->tape;
    for (int k = 0; k < 3; k++)
        if (!(in[k] = ag_op_contig(t, in[k]))) return -1;
    gi = in[0], gh = in[1], c_prev = in[2];
    const int B = c_prev->shape[0], H = c_prev->shape[1];
    const size_t bh = (size_t)B * H;
    ag_tensor *y = ag_op_out(t, AG_SHAPE(2, B, H), 3, in);
    lstm_saved s = {NULL, NULL, NULL, NULL};
    s.act = y ? ag_tape_alloc(t, sizeof(ag_real) * 5 * bh) : NULL; /* act, then tc */
    if (!s.act) return -1;
    s.tc = s.act + 4 * bh;
    if (y->requires_grad) {
        if (!(s.a = ag_tape_alloc(t, sizeof(ag_real) * 5 * bh))) return -1;
        s.dc = s.a + 4 * bh;
    }
    for (int b = 0; b < B; b++) {
        const ag_real *restrict xi = gi->data + (ptrdiff_t)b * 4 * H;
        const ag_real *restrict xh = gh->data + (ptrdiff_t)b * 4 * H;
        const ag_real *restrict c0 = c_prev->data + (ptrdiff_t)b * H;
        ag_real *restrict i = s.act + (ptrdiff_t)b * 4 * H, *restrict f = i + H,
                          *restrict g = f + H, *restrict o = g + H,
                          *restrict tc = s.tc + (ptrdiff_t)b * H;
        ag_real *restrict hb = y->data + (ptrdiff_t)b * H;
        ag_real *restrict cb = y->data + (ptrdiff_t)(B + b) * H;
        /* one loop per transcendental: each vectorizes (a single loop with several inlined
         * ones does not); i and f are adjacent, one sigmoid loop over 2H */
        for (int j = 0; j < 2 * H; j++) i[j] = ag_sigmoid1(xi[j] + xh[j]);
        for (int j = 0; j < H; j++) g[j] = ag_tanh1(xi[2 * H + j] + xh[2 * H + j]);
        for (int j = 0; j < H; j++) o[j] = ag_sigmoid1(xi[3 * H + j] + xh[3 * H + j]);
        for (int j = 0; j < H; j++) cb[j] = f[j] * c0[j] + i[j] * g[j];
        for (int j = 0; j < H; j++) tc[j] = ag_tanh1(cb[j]);
        for (int j = 0; j < H; j++) hb[j] = o[j] * tc[j];
    }
    ag_node *nd = ag_op_record(t, &lstm_cell_op, y, 3, in, sizeof s);
    if (nd) *(lstm_saved *)nd->saved = s;
    const ptrdiff_t st[2] = {H, 1};
    return cell_outputs(ag_op_view(t, y, AG_SHAPE(B, H), st, 0),
                        ag_op_view(t, y, AG_SHAPE(B, H), st, (ptrdiff_t)bh), h_new, c_new);
}

/* The same from primitives: narrow the gates out of gi and gh, then sigmoid, tanh, mul, add. */
int nn_lstm_cell_composite(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *c_prev,
                           ag_tensor **h_new, ag_tensor **c_new) {
    cell_outputs(NULL, NULL, h_new, c_new);
    if (!c || !nn_rnn_cell_check(c->tape, "lstm_cell_composite", (ag_tensor *[]){gi, gh, c_prev}, 4,
                                 "cell state"))
        return -1;
    ag_tape *t = c->tape;
    const int H = c_prev->shape[1];
    ag_tensor *pre[4]; /* gate pre-activations i, f, g, o */
    for (int k = 0; k < 4; k++)
        pre[k] = ag_add(t, ag_narrow(t, gi, 1, k * H, H), ag_narrow(t, gh, 1, k * H, H));
    ag_tensor *i = ag_sigmoid(t, pre[0]), *f = ag_sigmoid(t, pre[1]), *g = ag_tanh(t, pre[2]);
    ag_tensor *o = ag_sigmoid(t, pre[3]);
    ag_tensor *cn = ag_add(t, ag_mul(t, f, c_prev), ag_mul(t, i, g));
    return cell_outputs(ag_mul(t, o, ag_tanh(t, cn)), cn, h_new, c_new);
}

/* ---- the layers ---- */

int nn_lstm_init_opts(nn_lstm *l, nn_params *ps, const char *prefix, int input_size, int hidden,
                      int num_layers, double dropout, const nn_rnn_opts *opts) {
    if (!l)
        return nn_params_fail(ps, "nn_lstm_init: layer is NULL (prefix '%s')",
                              prefix ? prefix : "(null)");
    const nn_rnn_opts o = opts ? *opts : (nn_rnn_opts){false, false};
    *l = (nn_lstm){.input_size = input_size,
                   .hidden = hidden,
                   .num_layers = num_layers,
                   .dropout = dropout,
                   .batch_first = o.batch_first,
                   .bidirectional = o.bidirectional};
    return nn_rnn_init_layers(ps, "nn_lstm_init", prefix, 4, input_size, hidden, num_layers,
                              NN_LSTM_MAX_LAYERS, dropout, o.bidirectional, l->layer, l->reverse);
}

int nn_lstm_init(nn_lstm *l, nn_params *ps, const char *prefix, int input_size, int hidden,
                 int num_layers, double dropout) {
    return nn_lstm_init_opts(l, ps, prefix, input_size, hidden, num_layers, dropout, NULL);
}

/* One cell update of layer L: gi (B, 4H) = x W_ih^T + b_ih, already computed; *h, *cs (B, H)
 * the layer's state, replaced by the new one (NULL when an op failed). */
static void lstm_cell(const nn_ctx *c, const nn_lstm_layer *L, ag_tensor *gi, ag_tensor **h,
                      ag_tensor **cs) {
    ag_tensor *gh = *h ? ag_linear(c->tape, *h, L->weight_hh, L->bias_hh) : NULL;
    nn_lstm_cell_forward(c, gi, gh, *cs, h, cs);
}

/* The same as the driver's cell (nn/rnn.h): st = {h, c}. */
static int lstm_rnn_cell(const nn_ctx *c, const nn_rnn_w *w, ag_tensor *gi, ag_tensor **st) {
    ag_tensor *gh = st[0] ? ag_linear(c->tape, st[0], w->weight_hh, w->bias_hh) : NULL;
    return nn_lstm_cell_forward(c, gi, gh, st[1], &st[0], &st[1]);
}

/* "[2, 4, 16]" for x, "(none)" for NULL. */
static const char *shape_or_none(const ag_tensor *x, char *buf, size_t len) {
    return x ? nn_shape_fmt(buf, len, x->ndim, x->shape) : "(none)";
}

/* Is x (d0, d1, d2) (a negative d: any size > 0)? */
static bool is_shape3(const ag_tensor *x, int d0, int d1, int d2) {
    return x->ndim == 3 && x->shape[0] > 0 && x->shape[1] > 0 && x->shape[2] == d2 &&
           (d0 < 0 || x->shape[0] == d0) && (d1 < 0 || x->shape[1] == d1);
}

/* The initial state: both NULL, or both (NL D, B, H). Reports otherwise. */
static bool state_ok(const nn_lstm *l, const nn_ctx *c, const char *fn, ag_tensor *h0,
                     ag_tensor *c0, int B) {
    const int D = l->bidirectional ? 2 : 1, ND = l->num_layers * D, H = l->hidden;
    if (!h0 && !c0) return true;
    if (h0 && c0 && is_shape3(h0, ND, B, H) && is_shape3(c0, ND, B, H)) return true;
    char sh[96], sc[96];
    ag_report(c->tape,
              "%s: state h0 %s and c0 %s; expected two tensors (h0, c0) of shape "
              "[%d, %d, %d] (num_layers%s, B, hidden), or neither",
              fn, shape_or_none(h0, sh, sizeof sh), shape_or_none(c0, sc, sizeof sc), ND, B, H,
              D == 2 ? " * 2 directions" : "");
    return false;
}

/* Layer k's slice of a state (NL, B, H) as (B, H), or zeros when state is NULL. */
static ag_tensor *layer_state(ag_tape *t, ag_tensor *state, int k, int B, int H) {
    return state ? ag_reshape(t, ag_narrow(t, state, 0, k, 1), AG_SHAPE(B, H))
                 : ag_tensor_new(t, AG_SHAPE(B, H));
}

/* nn_lstm_forward_lengths, named fn in its messages. */
static ag_tensor *lstm_run(const nn_lstm *l, const nn_ctx *c, const char *fn, ag_tensor *x,
                           const int32_t *lengths, ag_tensor *h0, ag_tensor *c0, ag_tensor **h_out,
                           ag_tensor **c_out) {
    if (h_out) *h_out = NULL;
    if (c_out) *c_out = NULL;
    if (!l || !c || !x) return NULL;
    if (!is_shape3(x, -1, -1, l->input_size)) {
        char s[96];
        return ag_report(c->tape, "%s: x has shape %s, expected (%s, input_size = %d)", fn,
                         nn_shape_fmt(s, sizeof s, x->ndim, x->shape),
                         l->batch_first ? "B, T" : "T, B", l->input_size);
    }
    if (!state_ok(l, c, fn, h0, c0, x->shape[l->batch_first ? 0 : 1])) return NULL;
    nn_rnn_spec s = {.fn = fn,
                     .hidden = l->hidden,
                     .num_layers = l->num_layers,
                     .dirs = l->bidirectional ? 2 : 1,
                     .gates = 4,
                     .nstate = 2,
                     .batch_first = l->batch_first,
                     .dropout = l->dropout,
                     .cell = lstm_rnn_cell};
    for (int k = 0; k < l->num_layers; k++)
        for (int d = 0; d < s.dirs; d++) s.w[k * s.dirs + d] = d ? l->reverse[k] : l->layer[k];
    ag_tensor *st[2] = {NULL, NULL};
    ag_tensor *out =
        nn_rnn_run(&s, c, x, lengths, (ag_tensor *[]){h0, c0}, h_out || c_out ? st : NULL);
    if (!out) return NULL;
    if (h_out) *h_out = st[0];
    if (c_out) *c_out = st[1];
    return out;
}

ag_tensor *nn_lstm_forward(const nn_lstm *l, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                           ag_tensor *c0, ag_tensor **h_out, ag_tensor **c_out) {
    return lstm_run(l, c, "nn_lstm_forward", x, NULL, h0, c0, h_out, c_out);
}

ag_tensor *nn_lstm_forward_lengths(const nn_lstm *l, const nn_ctx *c, ag_tensor *x,
                                   const int32_t *lengths, ag_tensor *h0, ag_tensor *c0,
                                   ag_tensor **h_out, ag_tensor **c_out) {
    return lstm_run(l, c, "nn_lstm_forward_lengths", x, lengths, h0, c0, h_out, c_out);
}

/* Are parts[0 .. NL-1] each (B, H) (B < 0: parts[0]'s batch size)? NULL parts: false
 * silently; wrong shapes: false after reporting. */
static bool parts_ok(const nn_lstm *l, const nn_ctx *c, const char *fn, const char *what,
                     ag_tensor *const *parts, int B) {
    for (int k = 0; k < l->num_layers; k++)
        if (!parts[k]) return false;
    if (B < 0) B = parts[0]->ndim == 2 ? parts[0]->shape[0] : 0;
    for (int k = 0; k < l->num_layers; k++) {
        const ag_tensor *p = parts[k];
        if (p->ndim != 2 || B <= 0 || p->shape[0] != B || p->shape[1] != l->hidden) {
            char s[96];
            ag_report(c->tape, "%s: %s[%d] has shape %s, expected [%d, %d] (B, hidden)", fn, what,
                      k, nn_shape_fmt(s, sizeof s, p->ndim, p->shape), B, l->hidden);
            return false;
        }
    }
    return true;
}

ag_tensor *nn_lstm_step(const nn_lstm *l, const nn_ctx *c, ag_tensor *x, ag_tensor **h,
                        ag_tensor **cs) {
    static const char fn[] = "nn_lstm_step";
    if (!l || !c || !x) return NULL;
    if (l->bidirectional) return ag_report(c->tape, "%s: the LSTM is bidirectional", fn);
    if (!h || !cs)
        return ag_report(c->tape, "%s: %s is NULL: an LSTM's state is two arrays (h, cs)", fn,
                         h ? "cs" : "h");
    if (x->ndim != 2 || x->shape[1] != l->input_size || x->shape[0] <= 0) {
        char s[96];
        return ag_report(c->tape, "%s: x has shape %s, expected (B, input_size = %d)", fn,
                         nn_shape_fmt(s, sizeof s, x->ndim, x->shape), l->input_size);
    }
    const int B = x->shape[0];
    if (!parts_ok(l, c, fn, "h", h, B) || !parts_ok(l, c, fn, "cs", cs, B)) return NULL;
    ag_tensor *nh[NN_LSTM_MAX_LAYERS], *nc[NN_LSTM_MAX_LAYERS];
    ag_tensor *in = x;
    for (int k = 0; k < l->num_layers; k++) {
        const nn_lstm_layer *L = &l->layer[k];
        if (k > 0) in = nn_rnn_between_layers(c, in, l->dropout, fn);
        ag_tensor *gi = ag_linear(c->tape, in, L->weight_ih, L->bias_ih); /* (B, 4H) */
        nh[k] = h[k], nc[k] = cs[k];
        lstm_cell(c, L, gi, &nh[k], &nc[k]);
        if (!nh[k]) return NULL;
        in = nh[k];
    }
    for (int k = 0; k < l->num_layers; k++) h[k] = nh[k], cs[k] = nc[k];
    return h[l->num_layers - 1];
}

int nn_lstm_state_split(const nn_lstm *l, const nn_ctx *c, ag_tensor *state, ag_tensor **parts) {
    if (!l || !c || !state || !parts) return ag_error("nn_lstm_state_split: NULL argument");
    if (l->bidirectional) {
        ag_report(c->tape, "nn_lstm_state_split: the LSTM is bidirectional (no step)");
        return -1;
    }
    if (!is_shape3(state, l->num_layers, -1, l->hidden)) {
        char s[96];
        ag_report(c->tape,
                  "nn_lstm_state_split: state has shape %s, expected (num_layers = %d, "
                  "B, hidden = %d)",
                  nn_shape_fmt(s, sizeof s, state->ndim, state->shape), l->num_layers, l->hidden);
        return -1;
    }
    for (int k = 0; k < l->num_layers; k++) {
        parts[k] = layer_state(c->tape, state, k, state->shape[1], l->hidden);
        if (!parts[k]) return ag_error_context("nn_lstm_state_split: op failed");
    }
    return 0;
}

ag_tensor *nn_lstm_state_join(const nn_lstm *l, const nn_ctx *c, ag_tensor *const *parts) {
    ag_tensor *p3[NN_LSTM_MAX_LAYERS];
    if (!l || !c || !parts) return NULL;
    if (l->bidirectional)
        return ag_report(c->tape, "nn_lstm_state_join: the LSTM is bidirectional (no step)");
    if (!parts_ok(l, c, "nn_lstm_state_join", "parts", parts, -1)) return NULL;
    for (int k = 0; k < l->num_layers; k++)
        if (!(p3[k] = ag_reshape(c->tape, parts[k], AG_SHAPE(1, parts[k]->shape[0], l->hidden))))
            return NULL;
    return ag_concat(c->tape, l->num_layers, p3, 0); /* (num_layers, B, H) */
}
