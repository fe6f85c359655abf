/* gru.h -- multi-layer GRU with PyTorch's semantics and weight layout (docs/spec.md 4).
 *
 * Layer k (input size in_k = input_size for k = 0, else hidden), gates in the order r, z, n:
 *     weight_ih_l{k} (3H, in_k)  = [W_ir; W_iz; W_in]     bias_ih_l{k} (3H) = [b_ir; b_iz; b_in]
 *     weight_hh_l{k} (3H, H)     = [W_hr; W_hz; W_hn]     bias_hh_l{k} (3H) = [b_hr; b_hz; b_hn]
 *     r  = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
 *     z  = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
 *     n  = tanh(W_in x + b_in + r * (W_hn h + b_hn))
 *     h' = (1 - z) * n + z * h      (computed as n + z * (h - n), like PyTorch's CPU kernel)
 * Layer k > 0 reads layer k-1's output, through dropout(p) in training (none after the last
 * layer); the states returned are the outputs before dropout, as PyTorch.
 * Init as d2l: weights Xavier-uniform, biases U(-1/sqrt(H), 1/sqrt(H)).
 *
 * Options (nn_gru_init_opts, nn/rnn.h), PyTorch's flags, as the LSTM's (nn/lstm.h):
 *   batch_first: x (B, T, input_size), output (B, T, D H); the state still (num_layers D, B, H).
 *   bidirectional (D = 2): layer k also has weight_ih_l{k}_reverse (3H, in_k) ...
 *     bias_hh_l{k}_reverse, registered after the layer's forward four (PyTorch's state_dict
 *     order); in_k is D H for k > 0. Output [h_fwd, h_rev] on the last axis; h_n row k D + d.
 *   valid lengths (nn_gru_forward_lengths): outputs at t >= lengths[b] are 0, h_n is the state
 *     at step lengths[b] - 1, the reverse direction starts at step lengths[b] - 1;
 *     1 <= lengths[b] <= T (a 0 refused, as pack_padded_sequence refuses it).
 * Bits: no options and no lengths record exactly nn_gru_forward's ops of before (the zoo's
 * bits); batch_first = time-major on the transposed input; lengths all T = no lengths; the
 * reverse direction = a forward direction with its weights over each valid part reversed.
 *
 * Usage:
 *     nn_gru rnn;
 *     nn_gru_init(&rnn, ps, "encoder.rnn", 32, 32, 2, 0.1);
 *     ag_tensor *state;                                       // (2, B, 32)
 *     ag_tensor *out = nn_gru_forward(&rnn, &c, x, NULL, &state);   // x (T, B, 32)
 */
#ifndef TG_NN_GRU_H
#define TG_NN_GRU_H

#include "base.h"
#include "params.h"
#include "rnn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NN_GRU_MAX_LAYERS 8

/* One direction of layer k (nn_rnn_w, rnn.h): weight_ih (3H, in_k), weight_hh (3H, H),
 * bias_ih and bias_hh (3H). */
typedef nn_rnn_w nn_gru_layer;

typedef struct nn_gru {
    int input_size, hidden, num_layers;
    double dropout; /* between layers, training only */
    nn_gru_layer layer[NN_GRU_MAX_LAYERS];
    bool batch_first, bidirectional;         /* nn_rnn_opts; false from nn_gru_init */
    nn_gru_layer reverse[NN_GRU_MAX_LAYERS]; /* bidirectional: the ..._reverse weights */
} nn_gru;

/* ---- the cell ----
 * One GRU update from precomputed gate inputs: gi (B, 3H) = x W_ih^T + b_ih and
 * gh (B, 3H) = h W_hh^T + b_hh, gates r, z, n in that order along axis 1, h (B, H):
 *   r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r gh_n)
 *   returns h' = n + z (h - n), (B, H).
 * NULL (reported: shapes named) on other shapes. No parameters; nn_gru runs it at every step.
 * nn_gru_cell_forward is the fused kernel (one recorded op, nn/gru.c); nn_gru_cell_composite
 * the same from ag primitives (narrow, add, sigmoid, tanh, mul, sub): the tested reference. */
ag_tensor *nn_gru_cell_forward(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *h);
ag_tensor *nn_gru_cell_composite(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *h);

/* ---- the layer ---- */

/* Registers prefix.weight_ih_l{k}, prefix.weight_hh_l{k}, prefix.bias_ih_l{k},
 * prefix.bias_hh_l{k} for k = 0 .. num_layers-1 (PyTorch's order). input_size, hidden > 0,
 * 1 <= num_layers <= NN_GRU_MAX_LAYERS, 0 <= dropout < 1. Returns 0 or -1 (ag_last_error). */
int nn_gru_init(nn_gru *g, nn_params *ps, const char *prefix, int input_size, int hidden,
                int num_layers, double dropout);
/* nn_gru_init with options (NULL: none, nn_gru_init itself): bidirectional registers, per layer
 * k, the forward four, then prefix.weight_ih_l{k}_reverse, prefix.weight_hh_l{k}_reverse,
 * prefix.bias_ih_l{k}_reverse, prefix.bias_hh_l{k}_reverse (PyTorch's names and order; layer
 * k > 0's weight_ih are (3H, 2H)). Returns 0 or -1 (ag_last_error). */
int nn_gru_init_opts(nn_gru *g, nn_params *ps, const char *prefix, int input_size, int hidden,
                     int num_layers, double dropout, const nn_rnn_opts *opts);

/* The whole sequence: x (T, B, input_size); h0 (num_layers, B, H) or NULL for zeros.
 * Returns the last layer's outputs (T, B, H), and in *state_out (when not NULL) the final
 * state (num_layers, B, H). All results are owned by the tape. Returns NULL (and *state_out
 * NULL) if an input is NULL, an op failed, or x / h0 have the wrong shape (ag_last_error).
 * The input projections of all T steps are one ag_linear per layer. */
ag_tensor *nn_gru_forward(const nn_gru *g, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                          ag_tensor **state_out);
/* The same with the layer's options and per-sequence valid lengths: x (T, B, input_size), or
 * (B, T, input_size) when batch_first; lengths (B values in [1, T], copied) or NULL (all T);
 * h0 (num_layers D, B, H) or NULL. Returns the output (T, B, D H) or (B, T, D H), zero at
 * t >= lengths[b], and *state_out (num_layers D, B, H), each sequence's state at its last
 * valid step. NULL on error (a length outside [1, T] reported). nn_gru_forward(g, ...) is
 * nn_gru_forward_lengths(g, c, x, NULL, ...): it too follows the layer's options. */
ag_tensor *nn_gru_forward_lengths(const nn_gru *g, const nn_ctx *c, ag_tensor *x,
                                  const int32_t *lengths, ag_tensor *h0, ag_tensor **state_out);

/* One time step through all layers, for decoders that feed each output back (one direction
 * only: a bidirectional GRU is refused by the step and the two state helpers):
 * x (B, input_size); h[k] (B, H) for k < num_layers is layer k's state, replaced in place by
 * the new state (the old tensors stay valid on the tape). Returns the last layer's new state
 * h[num_layers-1] (B, H), or NULL on error (then h is left unchanged). A sequence of steps
 * computes what nn_gru_forward computes, up to the dropout masks drawn. */
ag_tensor *nn_gru_step(const nn_gru *g, const nn_ctx *c, ag_tensor *x, ag_tensor **h);

/* Splits a state (num_layers, B, H) into h[k] (B, H) views for nn_gru_step. Returns 0, or -1
 * on a NULL input, a failed op or a wrong shape (ag_last_error). */
int nn_gru_state_split(const nn_gru *g, const nn_ctx *c, ag_tensor *state, ag_tensor **h);
/* Stacks h[0 .. num_layers-1] (B, H) back into (num_layers, B, H); NULL on error. */
ag_tensor *nn_gru_state_join(const nn_gru *g, const nn_ctx *c, ag_tensor *const *h);

#ifdef __cplusplus
}
#endif

#endif
