/* gru.c -- multi-layer GRU as a composition of ag ops (math and layout in nn/gru.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/internal.h"

int nn_gru_init(nn_gru *g, nn_params *ps, const char *prefix, int input_size, int hidden,
                int num_layers, double dropout)
{
    const char *p = prefix ? prefix : "(null)";
    if (!g) return nn_params_fail(ps, "nn_gru_init: layer is NULL (prefix '%s')", p);
    *g = (nn_gru){.input_size = input_size, .hidden = hidden, .num_layers = num_layers,
                  .dropout = dropout};
    if (input_size <= 0 || hidden <= 0)
        return nn_params_fail(ps, "nn_gru_init '%s': input_size = %d, hidden = %d, expected > 0",
                              p, input_size, hidden);
    if (num_layers < 1 || num_layers > NN_GRU_MAX_LAYERS)
        return nn_params_fail(ps, "nn_gru_init '%s': num_layers = %d, expected 1 to %d", p,
                              num_layers, NN_GRU_MAX_LAYERS);
    if (!(dropout >= 0 && dropout < 1))
        return nn_params_fail(ps, "nn_gru_init '%s': dropout = %g, expected 0 <= p < 1", p,
                              dropout);
    const int H = hidden;
    const double k = 1.0 / sqrt((double)H);
    char name[32];
    for (int l = 0; l < num_layers; l++) {
        nn_gru_layer *L = &g->layer[l];
        int in = l == 0 ? input_size : H;
        snprintf(name, sizeof name, "weight_ih_l%d", l);
        L->weight_ih = nn_params_add(ps, prefix, name, AG_SHAPE(3 * H, in),
                                     nn_init_xavier_uniform());
        snprintf(name, sizeof name, "weight_hh_l%d", l);
        L->weight_hh = nn_params_add(ps, prefix, name, AG_SHAPE(3 * H, H),
                                     nn_init_xavier_uniform());
        snprintf(name, sizeof name, "bias_ih_l%d", l);
        L->bias_ih = nn_params_add(ps, prefix, name, AG_SHAPE(3 * H), nn_init_uniform(-k, k));
        snprintf(name, sizeof name, "bias_hh_l%d", l);
        L->bias_hh = nn_params_add(ps, prefix, name, AG_SHAPE(3 * H), nn_init_uniform(-k, k));
        if (!L->weight_ih || !L->weight_hh || !L->bias_ih || !L->bias_hh) return -1;
    }
    return 0;
}

/* One cell update of layer L.
 *   gi (B, 3H) = x W_ih^T + b_ih, already computed (rows r, z, n along axis 1)
 *   h  (B, H)  the layer's previous state
 *   gh (B, 3H) = h W_hh^T + b_hh
 *   r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n)
 *   h' = n + z * (h - n)  ( = (1 - z) * n + z * h ): the fused ag_gru_cell
 * Returns h' (B, H), or NULL when an op failed. */
static ag_tensor *gru_cell(ag_tape *t, const nn_gru_layer *L, ag_tensor *gi, ag_tensor *h)
{
    return ag_gru_cell(t, gi, ag_linear(t, h, L->weight_hh, L->bias_hh), h);
}

/* Dropout between layers: training only; needs an rng when p > 0. */
static ag_tensor *between_layers(const nn_gru *g, const nn_ctx *c, ag_tensor *x, const char *fn)
{
    if (!x || !c->training || g->dropout == 0) return x;
    if (!c->rng)
        return ag_report(c->tape, "%s: training with dropout %g needs nn_ctx.rng (it is NULL)", fn,
                                g->dropout);
    return ag_dropout(c->tape, x, g->dropout, true, c->rng);
}

static int check_shape3(const nn_ctx *c, const ag_tensor *x, int d0, int d1, int d2,
                        const char *what, const char *expect)
{
    char s[96];
    if (x->ndim == 3 && (d0 < 0 || x->shape[0] == d0) && (d1 < 0 || x->shape[1] == d1) &&
        x->shape[2] == d2 && x->shape[0] > 0 && x->shape[1] > 0)
        return 0;
    ag_report(c->tape, "%s has shape %s, expected %s", what,
                     nn_shape_fmt(s, sizeof s, x->ndim, x->shape), expect);
    return -1;
}

ag_tensor *nn_gru_forward(const nn_gru *g, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                          ag_tensor **state_out)
{
    char ex[96];
    if (state_out) *state_out = NULL;
    if (!g || !c || !x) return NULL;
    snprintf(ex, sizeof ex, "(T, B, input_size = %d)", g->input_size);
    if (check_shape3(c, x, -1, -1, g->input_size, "nn_gru_forward: x", ex)) return NULL;
    ag_tape *t = c->tape;
    const int T = x->shape[0], B = x->shape[1], H = g->hidden, NL = g->num_layers;
    if (h0) {
        snprintf(ex, sizeof ex, "(num_layers = %d, B = %d, hidden = %d)", NL, B, H);
        if (check_shape3(c, h0, NL, B, H, "nn_gru_forward: h0", ex)) return NULL;
    }
    ag_tensor **outs = ag_tape_alloc(t, (size_t)T * sizeof *outs); /* lives with the step */
    if (!outs) return NULL;
    ag_tensor *final_h[NN_GRU_MAX_LAYERS];
    ag_tensor *in = x, *out = NULL;
    for (int k = 0; k < NL && in; k++) {
        const nn_gru_layer *L = &g->layer[k];
        if (k > 0) in = between_layers(g, c, in, "nn_gru_forward");
        /* All T input projections at once: (T, B, in_k) -> gi_all (T, B, 3H). */
        ag_tensor *gi_all = ag_linear(t, in, L->weight_ih, L->bias_ih);
        ag_tensor *h = h0 ? ag_reshape(t, ag_narrow(t, h0, 0, k, 1), AG_SHAPE(B, H))
                          : ag_tensor_new(t, AG_SHAPE(B, H));
        for (int s = 0; s < T && h; s++) {
            ag_tensor *gi = ag_reshape(t, ag_narrow(t, gi_all, 0, s, 1), AG_SHAPE(B, 3 * H));
            h = gru_cell(t, L, gi, h);
            outs[s] = ag_reshape(t, h, AG_SHAPE(1, B, H));
            if (!outs[s]) h = NULL;
        }
        final_h[k] = h;
        out = h ? ag_concat(t, T, outs, 0) : NULL;  /* (T, B, H) */
        in = out;
    }
    if (!out) return NULL;
    if (state_out) {
        *state_out = nn_gru_state_join(g, c, final_h);
        if (!*state_out) return NULL;
    }
    return out;
}

ag_tensor *nn_gru_step(const nn_gru *g, const nn_ctx *c, ag_tensor *x, ag_tensor **h)
{
    char s[96];
    if (!g || !c || !x || !h) return NULL;
    if (x->ndim != 2 || x->shape[1] != g->input_size) {
        return ag_report(c->tape, "nn_gru_step: x has shape %s, expected (B, input_size = %d)",
                                nn_shape_fmt(s, sizeof s, x->ndim, x->shape), g->input_size);
    }
    const int B = x->shape[0], H = g->hidden;
    for (int k = 0; k < g->num_layers; k++) {
        if (!h[k]) return NULL;
        if (h[k]->ndim != 2 || h[k]->shape[0] != B || h[k]->shape[1] != H) {
            return ag_report(c->tape, "nn_gru_step: h[%d] has shape %s, expected (B = %d, hidden = %d)",
                                    k, nn_shape_fmt(s, sizeof s, h[k]->ndim, h[k]->shape), B, H);
        }
    }
    ag_tensor *nh[NN_GRU_MAX_LAYERS];
    ag_tensor *in = x;
    for (int k = 0; k < g->num_layers; k++) {
        const nn_gru_layer *L = &g->layer[k];
        if (k > 0) in = between_layers(g, c, in, "nn_gru_step");
        ag_tensor *gi = ag_linear(c->tape, in, L->weight_ih, L->bias_ih);  /* (B, 3H) */
        nh[k] = gru_cell(c->tape, L, gi, h[k]);
        if (!nh[k]) return NULL;
        in = nh[k];
    }
    for (int k = 0; k < g->num_layers; k++) h[k] = nh[k];
    return h[g->num_layers - 1];
}

int nn_gru_state_split(const nn_gru *g, const nn_ctx *c, ag_tensor *state, ag_tensor **h)
{
    char ex[96];
    if (!g || !c || !state || !h) return ag_error("nn_gru_state_split: NULL argument");
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

ag_tensor *nn_gru_state_join(const nn_gru *g, const nn_ctx *c, ag_tensor *const *h)
{
    ag_tensor *parts[NN_GRU_MAX_LAYERS];
    if (!g || !c || !h) return NULL;
    for (int k = 0; k < g->num_layers; k++) {
        if (!h[k]) return NULL;
        if (h[k]->ndim != 2 || h[k]->shape[1] != g->hidden) {
            char s[96];
            return ag_report(c->tape, "nn_gru_state_join: h[%d] has shape %s, expected (B, hidden = %d)",
                                    k, nn_shape_fmt(s, sizeof s, h[k]->ndim, h[k]->shape), g->hidden);
        }
        parts[k] = ag_reshape(c->tape, h[k], AG_SHAPE(1, h[k]->shape[0], g->hidden));
        if (!parts[k]) return NULL;
    }
    return ag_concat(c->tape, g->num_layers, parts, 0);  /* (num_layers, B, H) */
}
