/* lstm.h -- multi-layer LSTM with PyTorch's semantics and weight layout (docs/spec.md 7).
 *
 * Layer k (input size in_k = input_size for k = 0, else hidden), gates in the order i, f, g, o:
 *     weight_ih_l{k} (4H, in_k) = [W_ii; W_if; W_ig; W_io]   bias_ih_l{k} (4H) = [b_ii; ...; b_io]
 *     weight_hh_l{k} (4H, H)    = [W_hi; W_hf; W_hg; W_ho]   bias_hh_l{k} (4H) = [b_hi; ...; b_ho]
 *     i  = sigmoid(W_ii x + b_ii + W_hi h + b_hi)
 *     f  = sigmoid(W_if x + b_if + W_hf h + b_hf)
 *     g  = tanh(W_ig x + b_ig + W_hg h + b_hg)
 *     o  = sigmoid(W_io x + b_io + W_ho h + b_ho)
 *     c' = f * c + i * g
 *     h' = o * tanh(c')
 * Layer k > 0 reads layer k-1's output h, through dropout(p) in training (none after the last
 * layer); the states returned are taken before dropout, as PyTorch. The state is two tensors
 * (h, c), each (num_layers D, B, H), zeros unless given.
 * Init as the GRU (d2l): weights Xavier-uniform, biases U(-1/sqrt(H), 1/sqrt(H)).
 *
 * Options (nn_lstm_init_opts, nn/rnn.h), PyTorch's flags:
 *   batch_first: x (B, T, input_size), output (B, T, D H); states still (num_layers D, B, H).
 *   bidirectional (D = 2): layer k also has weight_ih_l{k}_reverse (4H, in_k) ...
 *     bias_hh_l{k}_reverse, registered after the layer's forward four (PyTorch's state_dict
 *     order); in_k is D H for k > 0 (layer k reads [h_fwd, h_rev] of layer k-1). The reverse direction runs each
 *     sequence from its last valid step back to 0. Output [h_fwd, h_rev] on the last axis;
 *     states h_n, c_n (num_layers D, B, H), row k D + d (PyTorch's order).
 *   valid lengths (nn_lstm_forward_lengths; PyTorch's pack_padded_sequence, then
 *     pad_packed_sequence(total_length = T)): outputs at t >= lengths[b] are 0, h_n and c_n are
 *     the state at step lengths[b] - 1, the reverse direction starts at step lengths[b] - 1.
 *     1 <= lengths[b] <= T: a 0 is refused, as pack_padded_sequence refuses it.
 * Bits: a zeroed nn_rnn_opts without lengths records exactly nn_lstm_forward's ops of before
 * (the zoo's bits). batch_first gives the bits of time-major on the transposed input; lengths
 * all T give the bits of no lengths; the reverse direction gives the bits of a forward
 * direction with its weights run over each sequence's valid part reversed.
 *
 * Usage:
 *     nn_lstm rnn;
 *     nn_lstm_init(&rnn, ps, "encoder.rnn", 8, 16, 2, 0.1);
 *     ag_tensor *h, *cs;                                               // each (2, B, 16)
 *     ag_tensor *out = nn_lstm_forward(&rnn, &c, x, NULL, NULL, &h, &cs);   // x (T, B, 8)
 */
#ifndef TG_NN_LSTM_H
#define TG_NN_LSTM_H

#include "base.h"
#include "params.h"
#include "rnn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NN_LSTM_MAX_LAYERS 8

/* One direction of layer k (nn_rnn_w, rnn.h): weight_ih (4H, in_k), weight_hh (4H, H),
 * bias_ih and bias_hh (4H). */
typedef nn_rnn_w nn_lstm_layer;

typedef struct nn_lstm {
    int input_size, hidden, num_layers;
    double dropout; /* between layers, training only */
    nn_lstm_layer layer[NN_LSTM_MAX_LAYERS];
    bool batch_first, bidirectional;           /* nn_rnn_opts; false from nn_lstm_init */
    nn_lstm_layer reverse[NN_LSTM_MAX_LAYERS]; /* bidirectional: the ..._reverse weights */
} nn_lstm;

/* ---- the cell ----
 * One LSTM update from precomputed gate inputs: gi (B, 4H) = x W_ih^T + b_ih and
 * gh (B, 4H) = h W_hh^T + b_hh, gates i, f, g, o in that order along axis 1; c_prev (B, H):
 *   i = sigmoid(gi_i + gh_i), f = sigmoid(gi_f + gh_f), g = tanh(gi_g + gh_g),
 *   o = sigmoid(gi_o + gh_o);   *c_new = f c_prev + i g,   *h_new = o tanh(*c_new)   (B, H).
 * Returns 0, or -1 with *h_new = *c_new = NULL on a NULL input, a failed op or other shapes
 * (reported: the op and the three shapes named). No parameters; nn_lstm runs it at every step.
 * nn_lstm_cell_forward is the fused kernel (one recorded op, nn/lstm.c; h_new and c_new are
 * two views of its one (2, B, H) result); nn_lstm_cell_composite the same from ag primitives
 * (narrow, add, sigmoid, tanh, mul): the tested reference. */
int nn_lstm_cell_forward(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *c_prev,
                         ag_tensor **h_new, ag_tensor **c_new);
int nn_lstm_cell_composite(const nn_ctx *c, ag_tensor *gi, ag_tensor *gh, ag_tensor *c_prev,
                           ag_tensor **h_new, ag_tensor **c_new);

/* ---- the layer ---- */

/* Registers prefix.weight_ih_l{k}, prefix.weight_hh_l{k}, prefix.bias_ih_l{k},
 * prefix.bias_hh_l{k} for k = 0 .. num_layers-1 (PyTorch's order). input_size, hidden > 0,
 * 1 <= num_layers <= NN_LSTM_MAX_LAYERS, 0 <= dropout < 1. Returns 0 or -1 (ag_last_error). */
int nn_lstm_init(nn_lstm *l, nn_params *ps, const char *prefix, int input_size, int hidden,
                 int num_layers, double dropout);
/* nn_lstm_init with options (NULL: none, nn_lstm_init itself): bidirectional registers, per
 * layer k, the forward four, then prefix.weight_ih_l{k}_reverse, prefix.weight_hh_l{k}_reverse,
 * prefix.bias_ih_l{k}_reverse, prefix.bias_hh_l{k}_reverse (PyTorch's names and order; layer
 * k > 0's weight_ih are (4H, 2H)). Returns 0 or -1 (ag_last_error). */
int nn_lstm_init_opts(nn_lstm *l, nn_params *ps, const char *prefix, int input_size, int hidden,
                      int num_layers, double dropout, const nn_rnn_opts *opts);

/* The whole sequence: x (T, B, input_size); the initial state h0 and c0, each
 * (num_layers, B, H), both given or both NULL (zeros): one without the other (e.g. a GRU's
 * one-tensor state) is refused, as a wrong shape is, with a message naming both shapes.
 * Returns the last layer's outputs (T, B, H), and the final state in *h_out and *c_out (each
 * (num_layers, B, H); either pointer may be NULL). All results are owned by the tape. Returns
 * NULL (and the outputs NULL) if an input is NULL, an op failed or a shape is wrong
 * (reported). The input projections of all T steps are one ag_linear per layer. */
ag_tensor *nn_lstm_forward(const nn_lstm *l, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                           ag_tensor *c0, ag_tensor **h_out, ag_tensor **c_out);
/* The same with the layer's options and per-sequence valid lengths: x (T, B, input_size), or
 * (B, T, input_size) when batch_first; lengths (B values in [1, T], copied) or NULL (all T);
 * h0, c0 (num_layers D, B, H), both or neither. Returns the output (T, B, D H) or (B, T, D H),
 * zero at t >= lengths[b]; *h_out, *c_out (num_layers D, B, H), each sequence's state at its
 * last valid step. NULL on error, as nn_lstm_forward (a length outside [1, T] reported).
 * nn_lstm_forward(l, ...) is nn_lstm_forward_lengths(l, c, x, NULL, ...): it too follows the
 * options the layer was made with. */
ag_tensor *nn_lstm_forward_lengths(const nn_lstm *l, const nn_ctx *c, ag_tensor *x,
                                   const int32_t *lengths, ag_tensor *h0, ag_tensor *c0,
                                   ag_tensor **h_out, ag_tensor **c_out);

/* One time step through all layers, for decoders that feed each output back (one direction
 * only: a bidirectional LSTM is refused by the step and the two state helpers; batch_first
 * does not matter here, there is no time axis):
 * x (B, input_size); h[k] and cs[k] (B, H) for k < num_layers are layer k's state, replaced in
 * place by the new state (the old tensors stay valid on the tape). Returns the last layer's
 * new h[num_layers-1] (B, H), or NULL on error (then h and cs are left unchanged). A sequence
 * of steps computes what nn_lstm_forward computes, up to the dropout masks drawn. */
ag_tensor *nn_lstm_step(const nn_lstm *l, const nn_ctx *c, ag_tensor *x, ag_tensor **h,
                        ag_tensor **cs);

/* Splits one state tensor (num_layers, B, H) -- h or c alike -- into parts[k] (B, H) views for
 * nn_lstm_step. Returns 0, or -1 on a NULL input, a failed op or a wrong shape (reported). */
int nn_lstm_state_split(const nn_lstm *l, const nn_ctx *c, ag_tensor *state, ag_tensor **parts);
/* Stacks parts[0 .. num_layers-1] (B, H) back into (num_layers, B, H); NULL on error. */
ag_tensor *nn_lstm_state_join(const nn_lstm *l, const nn_ctx *c, ag_tensor *const *parts);

#ifdef __cplusplus
}
#endif

#endif
