/* rnn.c -- the sequence ops of per-sequence valid lengths (nn_seq_mask, a fused op on
 * autograd/ag_op.h; nn_seq_reverse and nn_seq_last, row gathers) and the driver of nn's LSTM
 * and GRU over a whole sequence: batch-first, bidirectional, lengths (semantics in nn/rnn.h). */
#include <math.h>
#include <stdio.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"
#include "nn/rnn.h"

int nn_seq_check_lengths(ag_tape *t, const char *fn, const int32_t *lengths, int B, int T) {
    if (!lengths) {
        ag_report(t, "%s: lengths is NULL", fn);
        return -1;
    }
    for (int b = 0; b < B; b++) {
        if (lengths[b] < 1 || lengths[b] > T) {
            ag_report(t,
                      "%s: lengths[%d] = %d, expected 1 to T = %d (PyTorch's "
                      "pack_padded_sequence refuses 0)",
                      fn, b, (int)lengths[b], T);
            return -1;
        }
    }
    return 0;
}

/* x usable and (T, B, F), T, B, F > 0, and the lengths in [1, T] (unless NULL and
 * may_be_null); false after reporting. */
static bool seq_check(ag_tape *t, const char *op, ag_tensor *x, const int32_t *lengths,
                      bool may_be_null) {
    if (!ag_op_check(t, op, 1, &x)) return false;
    if (x->ndim != 3 || x->numel == 0) {
        char s[64];
        ag_report(t, "%s: x has shape %s, expected (T, B, F), none 0", op,
                  ag_shape_str(x, s, sizeof s));
        return false;
    }
    if (!lengths && may_be_null) return true;
    return nn_seq_check_lengths(t, op, lengths, x->shape[1], x->shape[0]) == 0;
}

/* ---- nn_seq_mask, fused ----
 * x (T, B, F), lengths (B): y[t, b, f] = t < len[b] ? x[t, b, f] : 0 (a select, not a product:
 * a NaN in the padding does not pass, and no -0 appears). Backward: dx[t, b, f] += dy[t, b, f]
 * for t < len[b]. saved: the lengths. */
typedef struct seq_mask_saved {
    const int32_t *len; /* (B), on the tape */
} seq_mask_saved;

static void seq_mask_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    if (!x->grad) return;
    const seq_mask_saved *s = nd->saved;
    const int T = x->shape[0], B = x->shape[1], F = x->shape[2];
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            if (t >= s->len[b]) continue;
            const ptrdiff_t o = ((ptrdiff_t)t * B + b) * F;
            ag_real *restrict dx = x->grad + o;
            const ag_real *restrict dy = y->grad + o;
            for (int f = 0; f < F; f++) dx[f] += dy[f];
        }
}
static const ag_op seq_mask_op = {"seq_mask", seq_mask_backward};

ag_tensor *nn_seq_mask(ag_tape *t, ag_tensor *x, const int32_t *lengths) {
    if (!seq_check(t, "seq_mask", x, lengths, false)) return NULL;
    if (!(x = ag_op_contig(t, x))) return NULL;
    const int T = x->shape[0], B = x->shape[1], F = x->shape[2];
    ag_tensor *y = ag_op_out(t, AG_SHAPE(T, B, F), 1, &x);
    int32_t *len = y ? ag_tape_alloc(t, sizeof *len * (size_t)B) : NULL;
    if (!len) return NULL;
    memcpy(len, lengths, sizeof *len * (size_t)B);
    for (int s = 0; s < T; s++)
        for (int b = 0; b < B; b++) {
            const ptrdiff_t o = ((ptrdiff_t)s * B + b) * F;
            if (s < len[b]) memcpy(y->data + o, x->data + o, sizeof *y->data * (size_t)F);
            else memset(y->data + o, 0, sizeof *y->data * (size_t)F);
        }
    ag_node *nd = ag_op_record(t, &seq_mask_op, y, 1, &x, sizeof(seq_mask_saved));
    if (nd) ((seq_mask_saved *)nd->saved)->len = len;
    return y;
}

/* ---- nn_seq_reverse and nn_seq_last: row gathers of x seen as (T B, F) ---- */

ag_tensor *nn_seq_reverse(ag_tape *t, ag_tensor *x, const int32_t *lengths) {
    if (!seq_check(t, "seq_reverse", x, lengths, true)) return NULL;
    const int T = x->shape[0], B = x->shape[1], F = x->shape[2];
    int32_t *ids = ag_tape_alloc(t, sizeof *ids * (size_t)T * B);
    ag_tensor *rows = ag_reshape(t, x, AG_SHAPE(T * B, F));
    if (!ids || !rows) return NULL;
    for (int s = 0; s < T; s++)
        for (int b = 0; b < B; b++) {
            const int len = lengths ? lengths[b] : T;
            ids[s * B + b] = (s < len ? len - 1 - s : s) * B + b;
        }
    return ag_gather_rows(t, rows, ids, AG_SHAPE(T, B));
}

ag_tensor *nn_seq_last(ag_tape *t, ag_tensor *x, const int32_t *lengths) {
    if (!seq_check(t, "seq_last", x, lengths, false)) return NULL;
    const int T = x->shape[0], B = x->shape[1], F = x->shape[2];
    int32_t *ids = ag_tape_alloc(t, sizeof *ids * (size_t)B);
    ag_tensor *rows = ag_reshape(t, x, AG_SHAPE(T * B, F));
    if (!ids || !rows) return NULL;
    for (int b = 0; b < B; b++) ids[b] = (lengths[b] - 1) * B + b;
    return ag_gather_rows(t, rows, ids, AG_SHAPE(B));
}

/* ---- the driver ---- */

ag_tensor *nn_rnn_between_layers(const nn_ctx *c, ag_tensor *x, double p, const char *fn) {
    if (!x || !c->training || p == 0) return x;
    if (!c->rng)
        return ag_report(c->tape, "%s: training with dropout %g needs nn_ctx.rng (it is NULL)", fn,
                         p);
    return ag_dropout(c->tape, x, p, c->rng);
}

/* Slice idx of a state (NL D, B, H) as (B, H), or zeros when state is NULL. */
static ag_tensor *slice_state(ag_tape *t, ag_tensor *state, int idx, int B, int H) {
    return state ? ag_reshape(t, ag_narrow(t, state, 0, idx, 1), AG_SHAPE(B, H))
                 : ag_tensor_new(t, AG_SHAPE(B, H));
}

/* Scratch of one run: a (1, B, H) view per step for h and for c. */
typedef struct rnn_scratch {
    ag_tensor **outs, **couts;
} rnn_scratch;

/* Direction idx = k dirs + d of layer k over src (T, B, in) -- already reversed per sequence
 * when d = 1 -- from slice idx of s0: its outputs (T, B, H) (steps past a length hold what the
 * recurrence computed on the zero padding: the caller masks them) into *out, its final states
 * into fin[j][idx] (the state at each sequence's step lengths[b] - 1, or at T - 1 without
 * lengths). Returns 0 or -1. */
static int run_direction(const nn_rnn_spec *s, const nn_ctx *c, int idx, ag_tensor *src,
                         const int32_t *lengths, ag_tensor *const *s0, const rnn_scratch *sc,
                         ag_tensor **out, ag_tensor *(*fin)[2 * NN_RNN_MAX_LAYERS]) {
    ag_tape *t = c->tape;
    const int T = src->shape[0], B = src->shape[1], H = s->hidden, G = s->gates;
    const nn_rnn_w *w = &s->w[idx];
    const bool keep_c = lengths && s->nstate == 2;
    /* All T input projections at once: (T, B, in) -> gi_all (T, B, G H). */
    ag_tensor *gi_all = ag_linear(t, src, w->weight_ih, w->bias_ih);
    ag_tensor *st[2] = {NULL, NULL};
    for (int j = 0; j < s->nstate; j++) st[j] = slice_state(t, s0 ? s0[j] : NULL, idx, B, H);
    for (int k = 0; k < T; k++) {
        ag_tensor *gi = ag_reshape(t, ag_narrow(t, gi_all, 0, k, 1), AG_SHAPE(B, G * H));
        if (s->cell(c, w, gi, st)) return -1;
        sc->outs[k] = ag_reshape(t, st[0], AG_SHAPE(1, B, H));
        if (!sc->outs[k]) return -1;
        if (keep_c && !(sc->couts[k] = ag_reshape(t, st[1], AG_SHAPE(1, B, H)))) return -1;
    }
    if (!(*out = ag_concat(t, T, sc->outs, 0))) return -1; /* (T, B, H) */
    if (!lengths) {
        for (int j = 0; j < s->nstate; j++) fin[j][idx] = st[j];
        return 0;
    }
    fin[0][idx] = nn_seq_last(t, *out, lengths);
    if (keep_c) fin[1][idx] = nn_seq_last(t, ag_concat(t, T, sc->couts, 0), lengths);
    for (int j = 0; j < s->nstate; j++)
        if (!fin[j][idx]) return -1;
    return 0;
}

/* Stacks n states (B, H) into (n, B, H). */
static ag_tensor *join_states(ag_tape *t, int n, ag_tensor *const *parts) {
    ag_tensor *p3[2 * NN_RNN_MAX_LAYERS];
    for (int k = 0; k < n; k++) {
        const int B = parts[k]->shape[0], H = parts[k]->shape[1];
        if (!(p3[k] = ag_reshape(t, parts[k], AG_SHAPE(1, B, H)))) return NULL;
    }
    return ag_concat(t, n, p3, 0);
}

/* Layer k (both directions) over in (T, B, in_k): its output (T, B, dirs H), masked past the
 * lengths; NULL on failure. */
static ag_tensor *run_layer(const nn_rnn_spec *s, const nn_ctx *c, int k, ag_tensor *in,
                            const int32_t *lengths, ag_tensor *const *s0, const rnn_scratch *sc,
                            ag_tensor *(*fin)[2 * NN_RNN_MAX_LAYERS]) {
    ag_tape *t = c->tape;
    ag_tensor *o[2] = {NULL, NULL};
    for (int d = 0; d < s->dirs; d++) {
        /* the reverse direction: the forward recurrence over each sequence's valid part
         * reversed, its outputs reversed back to their time steps */
        ag_tensor *src = d ? nn_seq_reverse(t, in, lengths) : in;
        if (!src || run_direction(s, c, k * s->dirs + d, src, lengths, s0, sc, &o[d], fin))
            return NULL;
        if (d && !(o[d] = nn_seq_reverse(t, o[d], lengths))) return NULL;
        if (lengths && !(o[d] = nn_seq_mask(t, o[d], lengths))) return NULL;
    }
    return s->dirs == 1 ? o[0] : ag_concat(t, 2, o, 2); /* [h_fwd, h_rev] */
}

ag_tensor *nn_rnn_run(const nn_rnn_spec *s, const nn_ctx *c, ag_tensor *x, const int32_t *lengths,
                      ag_tensor *const *s0, ag_tensor **s_out) {
    ag_tape *t = c->tape;
    const int ND = s->num_layers * s->dirs;
    ag_tensor *in = s->batch_first ? ag_contiguous(t, ag_transpose(t, x, 0, 1)) : x;
    if (!in) return NULL;
    const int T = in->shape[0], B = in->shape[1];
    if (lengths) {
        if (nn_seq_check_lengths(t, s->fn, lengths, B, T)) return NULL;
        in = nn_seq_mask(t, in, lengths); /* the padding is never read, even a NaN */
    }
    rnn_scratch sc = {ag_tape_alloc(t, (size_t)T * sizeof(ag_tensor *)), NULL};
    if (lengths && s->nstate == 2) sc.couts = ag_tape_alloc(t, (size_t)T * sizeof(ag_tensor *));
    if (!sc.outs || (lengths && s->nstate == 2 && !sc.couts)) return NULL;
    ag_tensor *fin[2][2 * NN_RNN_MAX_LAYERS];
    for (int k = 0; k < s->num_layers && in; k++) {
        if (k > 0) in = nn_rnn_between_layers(c, in, s->dropout, s->fn);
        if (in) in = run_layer(s, c, k, in, lengths, s0, &sc, fin);
    }
    if (!in) return NULL;
    for (int j = 0; s_out && j < s->nstate; j++)
        if (!(s_out[j] = join_states(t, ND, fin[j]))) return NULL;
    return s->batch_first ? ag_contiguous(t, ag_transpose(t, in, 0, 1)) : in;
}

/* The four tensors of one direction of layer n (suffix "" or "_reverse"): 0 or -1. */
static int register_direction(nn_params *ps, const char *prefix, int n, const char *suffix,
                              int gates, int in, int H, nn_rnn_w *w) {
    const double k = 1.0 / sqrt((double)H);
    char name[48];
    snprintf(name, sizeof name, "weight_ih_l%d%s", n, suffix);
    w->weight_ih =
        nn_params_add(ps, prefix, name, AG_SHAPE(gates * H, in), nn_init_xavier_uniform());
    snprintf(name, sizeof name, "weight_hh_l%d%s", n, suffix);
    w->weight_hh =
        nn_params_add(ps, prefix, name, AG_SHAPE(gates * H, H), nn_init_xavier_uniform());
    snprintf(name, sizeof name, "bias_ih_l%d%s", n, suffix);
    w->bias_ih = nn_params_add(ps, prefix, name, AG_SHAPE(gates * H), nn_init_uniform(-k, k));
    snprintf(name, sizeof name, "bias_hh_l%d%s", n, suffix);
    w->bias_hh = nn_params_add(ps, prefix, name, AG_SHAPE(gates * H), nn_init_uniform(-k, k));
    return w->weight_ih && w->weight_hh && w->bias_ih && w->bias_hh ? 0 : -1;
}

int nn_rnn_init_layers(nn_params *ps, const char *fn, const char *prefix, int gates, int input_size,
                       int hidden, int num_layers, int max_layers, double dropout,
                       bool bidirectional, nn_rnn_w *layer, nn_rnn_w *reverse) {
    const char *p = prefix ? prefix : "(null)";
    if (input_size <= 0 || hidden <= 0)
        return nn_params_fail(ps, "%s '%s': input_size = %d, hidden = %d, expected > 0", fn, p,
                              input_size, hidden);
    if (num_layers < 1 || num_layers > max_layers)
        return nn_params_fail(ps, "%s '%s': num_layers = %d, expected 1 to %d", fn, p, num_layers,
                              max_layers);
    if (!(dropout >= 0 && dropout < 1))
        return nn_params_fail(ps, "%s '%s': dropout = %g, expected 0 <= p < 1", fn, p, dropout);
    const int H = hidden, D = bidirectional ? 2 : 1;
    for (int n = 0; n < num_layers; n++) {
        const int in = n == 0 ? input_size : D * H;
        if (register_direction(ps, prefix, n, "", gates, in, H, &layer[n]) ||
            (D == 2 && register_direction(ps, prefix, n, "_reverse", gates, in, H, &reverse[n])))
            return -1;
    }
    return 0;
}

bool nn_rnn_cell_check(ag_tape *t, const char *op, ag_tensor *const *in, int gates,
                       const char *state) {
    if (!ag_op_check(t, op, 3, in)) return false;
    const ag_tensor *gi = in[0], *gh = in[1], *st = in[2];
    if (st->ndim != 2 || gi->ndim != 2 || gh->ndim != 2 || gi->shape[0] != st->shape[0] ||
        gh->shape[0] != st->shape[0] || gi->shape[1] != gates * st->shape[1] ||
        gh->shape[1] != gates * st->shape[1]) {
        char si[64], sg[64], ss[64];
        ag_report(t, "%s: gates %s and %s with %s %s; expected (B, %dH), (B, %dH), (B, H)", op,
                  ag_shape_str(gi, si, sizeof si), ag_shape_str(gh, sg, sizeof sg), state,
                  ag_shape_str(st, ss, sizeof ss), gates, gates);
        return false;
    }
    return true;
}
