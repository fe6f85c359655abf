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
 * (h, c), each (num_layers, B, H), zeros unless given.
 * Init as the GRU (d2l): weights Xavier-uniform, biases U(-1/sqrt(H), 1/sqrt(H)).
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

#ifdef __cplusplus
extern "C" {
#endif

#define NN_LSTM_MAX_LAYERS 8

typedef struct nn_lstm_layer {
    ag_tensor *weight_ih; /* (4H, in_k) */
    ag_tensor *weight_hh; /* (4H, H) */
    ag_tensor *bias_ih;   /* (4H) */
    ag_tensor *bias_hh;   /* (4H) */
} nn_lstm_layer;

typedef struct nn_lstm {
    int input_size, hidden, num_layers;
    double dropout; /* between layers, training only */
    nn_lstm_layer layer[NN_LSTM_MAX_LAYERS];
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

/* The whole sequence: x (T, B, input_size); the initial state h0 and c0, each
 * (num_layers, B, H), both given or both NULL (zeros): one without the other (e.g. a GRU's
 * one-tensor state) is refused, as a wrong shape is, with a message naming both shapes.
 * Returns the last layer's outputs (T, B, H), and the final state in *h_out and *c_out (each
 * (num_layers, B, H); either pointer may be NULL). All results are owned by the tape. Returns
 * NULL (and the outputs NULL) if an input is NULL, an op failed or a shape is wrong
 * (reported). The input projections of all T steps are one ag_linear per layer. */
ag_tensor *nn_lstm_forward(const nn_lstm *l, const nn_ctx *c, ag_tensor *x, ag_tensor *h0,
                           ag_tensor *c0, ag_tensor **h_out, ag_tensor **c_out);

/* One time step through all layers, for decoders that feed each output back:
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
