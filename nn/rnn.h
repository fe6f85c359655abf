/* rnn.h -- what nn's LSTM and GRU share: the options of the recurrent layers (batch-first
 * layout, bidirectional), per-sequence valid lengths and the three sequence ops that carry
 * them, and the one driver that runs a multi-layer, one- or two-direction recurrence over a
 * whole sequence (nn_lstm_forward_lengths and nn_gru_forward_lengths call it).
 *
 * Lengths are what PyTorch's pack_padded_sequence(x, lengths, enforce_sorted=False) takes:
 * one int32 per sequence b, 1 <= lengths[b] <= T, in any order. Sequence b's valid steps are
 * t < lengths[b]; the rest is padding whose values are never read (x's padding is zeroed before
 * the first layer, so even a NaN there changes nothing). A length 0 is refused, as
 * pack_padded_sequence refuses it ("Length of all samples has to be greater than 0"). */
#ifndef TG_NN_RNN_H
#define TG_NN_RNN_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The options of nn_lstm_init_opts / nn_gru_init_opts, PyTorch's constructor flags:
 *   batch_first    x is (B, T, input_size) and the output (B, T, D hidden) (the states stay
 *                  (num_layers D, B, hidden), as in PyTorch);
 *   bidirectional  D = 2: a second set of weights (..._l{k}_reverse) runs each sequence from
 *                  its last valid step back to step 0; the output concatenates the forward and
 *                  the reverse hidden states on the last axis, [h_fwd, h_rev].
 * A zeroed struct (or a NULL pointer) is the plain time-major, one-direction layer. */
typedef struct nn_rnn_opts {
    bool batch_first;
    bool bidirectional;
} nn_rnn_opts;

/* ---- the sequence ops (x (T, B, F), lengths (B) as above, both time-major) ----
 * Each returns a new tensor on the tape (or NULL after reporting: a NULL input, x not 3-D,
 * a length outside [1, T]); lengths are copied. */

/* y[t, b, :] = x[t, b, :] for t < lengths[b], else 0 (what pad_packed_sequence gives).
 * Backward: dx[t, b, :] += dy[t, b, :] on the valid steps. One fused op (nn/rnn.c). */
ag_tensor *nn_seq_mask(ag_tape *t, ag_tensor *x, const int32_t *lengths);
/* Each sequence's valid part reversed in time, padding left in place:
 *   y[t, b, :] = x[lengths[b] - 1 - t, b, :] for t < lengths[b], else x[t, b, :];
 * lengths NULL: every length T (a flip of the time axis). A permutation, its own inverse
 * (ag_gather_rows, whose backward scatters the gradient back). */
ag_tensor *nn_seq_reverse(ag_tape *t, ag_tensor *x, const int32_t *lengths);
/* y[b, :] = x[lengths[b] - 1, b, :], (B, F): each sequence's last valid step (ag_gather_rows). */
ag_tensor *nn_seq_last(ag_tape *t, ag_tensor *x, const int32_t *lengths);

/* 0 when lengths (B values) all lie in [1, T]; else -1 after reporting
 * "fn: lengths[b] = v, expected 1 to T (PyTorch's pack_padded_sequence refuses 0)". */
int nn_seq_check_lengths(ag_tape *t, const char *fn, const int32_t *lengths, int B, int T);

/* ---- the driver (for nn/lstm.c and nn/gru.c) ---- */

#define NN_RNN_MAX_LAYERS 8

/* One direction of one layer: the four tensors of PyTorch's layout. */
typedef struct nn_rnn_w {
    ag_tensor *weight_ih, *weight_hh, *bias_ih, *bias_hh;
} nn_rnn_w;

/* One step of a cell: gi (B, G H) = x W_ih^T + b_ih of this step; st[0 .. nstate-1] (B, H) the
 * state (h, or h and c), replaced by the new state. Returns 0, or -1 when an op failed. */
typedef int (*nn_rnn_cell_fn)(const nn_ctx *c, const nn_rnn_w *w, ag_tensor *gi, ag_tensor **st);

typedef struct nn_rnn_spec {
    const char *fn; /* the caller's name, for messages */
    int hidden, num_layers, dirs, gates, nstate;
    bool batch_first;
    double dropout;                    /* between layers, training only */
    nn_rnn_w w[2 * NN_RNN_MAX_LAYERS]; /* layer k, direction d: w[k dirs + d] */
    nn_rnn_cell_fn cell;
} nn_rnn_spec;

/* Runs the layers over x ((T, B, in) or batch-first (B, T, in), shapes already checked by the
 * caller) from s0[j] (each (num_layers dirs, B, H), or NULL for zeros; j < nstate), with
 * lengths (B values, checked here) or NULL (every length T). Returns the output (T, B, dirs H)
 * or (B, T, dirs H), and the final states in s_out[j] (num_layers dirs, B, H) when s_out is
 * not NULL; all on the tape. NULL on failure (reported). Without lengths, one direction and
 * time-major it records exactly the ops the layers recorded before the options existed (the
 * same bits, the same dropout draws). */
ag_tensor *nn_rnn_run(const nn_rnn_spec *s, const nn_ctx *c, ag_tensor *x, const int32_t *lengths,
                      ag_tensor *const *s0, ag_tensor **s_out);

#ifdef __cplusplus
}
#endif

#endif
