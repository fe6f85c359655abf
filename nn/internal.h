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

/* Registers the four tensors of one direction of a recurrent layer n (suffix "" or "_reverse"),
 * with PyTorch's names and initialisation: weight_ih_l<n><suffix> (gates H, in) and
 * weight_hh_l<n><suffix> (gates H, H) Xavier uniform, bias_ih / bias_hh U(-1/sqrt(H), 1/sqrt(H))
 * (gates: 3 for the GRU, 4 for the LSTM). 0, or -1 (the store's sticky error). */
int nn_rnn_register(nn_params *ps, const char *prefix, int n, const char *suffix, int gates, int in,
                    int H, ag_tensor **w_ih, ag_tensor **w_hh, ag_tensor **b_ih, ag_tensor **b_hh);

/* The quantized Linear ops' common part (quant.c, quant_bf16.c), `op` naming the op in
 * messages: checks x (..., in) (not NULL: `weight` says whether the op's weight is), bias
 * (out,) or NULL, and that nothing is recorded; makes *x contiguous and returns y (..., out) on
 * t, uninitialised (the op writes every element), or NULL (reported). */
ag_tensor *nn_quant_op_begin(ag_tape *t, const char *op, ag_tensor **x, bool weight, int in,
                             int out, ag_tensor *bias);
/* True when the environment variable TG_QUANT_KERNEL is "portable", read at the first call
 * (the answer kept: the int8 and bf16 kernels' choices, nn_qkernel_auto and nn_bkernel_auto,
 * stay the same for the process, as ag_cpu_has's). */
bool nn_quant_portable_forced(void);

#endif
