/* internal.h -- helpers shared by the nn/ sources; not part of the public API. */
#ifndef TG_NN_INTERNAL_H
#define TG_NN_INTERNAL_H

#include <stddef.h>

#include "nn/nn.h"

/* Checks that init is valid for a parameter of this shape; on failure writes a message that
 * names the parameter into msg and returns -1. */
int nn_init_check(nn_init init, const char *pname, int ndim, const int *shape, char *msg,
                  size_t msglen);

/* Writes "[2, 3]" for (ndim, shape) into buf (always NUL-terminated); returns buf. */
char *nn_shape_fmt(char *buf, size_t len, int ndim, const int *shape);

/* nn_gru_init_opts's and nn_lstm_init_opts's checks and registrations, fn naming the caller.
 * Checks input_size and hidden > 0, 1 <= num_layers <= max_layers, 0 <= dropout < 1 (else -1
 * after nn_params_fail: "fn 'prefix': num_layers = 9, expected 1 to 8"). Then registers, for
 * each layer n and direction (suffix "", and "_reverse" when bidirectional), PyTorch's tensors
 * in its order: weight_ih_l<n><suffix> (gates H, in_n) and weight_hh_l<n><suffix> (gates H, H)
 * Xavier uniform, bias_ih / bias_hh (gates H) U(-1/sqrt(H), 1/sqrt(H)); in_0 = input_size, else
 * dirs H; gates 3 for the GRU, 4 for the LSTM. They land in layer[n] and reverse[n]. 0, or -1
 * (the store's sticky error). */
int nn_rnn_init_layers(nn_params *ps, const char *fn, const char *prefix, int gates, int input_size,
                       int hidden, int num_layers, int max_layers, double dropout,
                       bool bidirectional, nn_rnn_w *layer, nn_rnn_w *reverse);

/* Dropout p between two recurrent layers: x itself when not training, p = 0 or x is NULL; else
 * ag_dropout with c->rng, or NULL after reporting "fn: training with dropout p needs
 * nn_ctx.rng" when c->rng is NULL. */
ag_tensor *nn_rnn_between_layers(const nn_ctx *c, ag_tensor *x, double p, const char *fn);

/* The fused cells' input check (op "gru_cell" or "lstm_cell"): in = {gi, gh, s}, usable
 * (ag_op_check), gi and gh (B, gates H), s (B, H), `state` naming s in the message ("state",
 * "cell state"). True, or false after reporting all three shapes. */
bool nn_rnn_cell_check(ag_tape *t, const char *op, ag_tensor *const *in, int gates,
                       const char *state);

/* The quantized Linear ops' common part (quant.c, quant_bf16.c), `op` naming the op in
 * messages: checks x (..., in) (not NULL: `weight` says whether the op's weight is), bias
 * (out,) or NULL, and that nothing is recorded; makes *x contiguous and returns y (..., out) on
 * t, uninitialised (the op writes every element), or NULL (reported). */
ag_tensor *nn_quant_op_begin(ag_tape *t, const char *op, ag_tensor **x, bool weight, int in,
                             int out, ag_tensor *bias);
/* The int8 kernel the environment variable TG_QUANT_KERNEL names ("portable", "avx2",
 * "avx512-vnni", "amx": nn_qkernel_name), or NN_QK_AUTO (unset, another value), read at the
 * first call (the answer kept: the int8 and bf16 kernels' choices, nn_qkernel_auto and
 * nn_bkernel_auto, stay the same for the process, as ag_cpu_has's). "portable" forces the bf16
 * one's too. */
nn_qkernel nn_quant_forced(void);

#endif
