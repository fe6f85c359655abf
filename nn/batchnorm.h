/* batchnorm.h -- BatchNorm1d with PyTorch's semantics (docs/spec.md 7).
 *
 * Input x (N, C) or (N, C, L); statistics per channel c over the M = N L values x[:, c(, :)]:
 *   training:  mean_c = mean(x_c),  var_c = mean((x_c - mean_c)^2)      (biased)
 *              y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c
 *              and the running statistics are updated, in the forward, as PyTorch does:
 *                running_mean = (1 - momentum) running_mean + momentum mean_c
 *                running_var  = (1 - momentum) running_var  + momentum var_c M / (M - 1)
 *                                                                   (the UNBIASED variance)
 *                num_batches_tracked += 1
 *              (M must be > 1, as in PyTorch.)
 *   eval:      y = (x - running_mean_c) / sqrt(running_var_c + eps) * weight_c + bias_c; the
 *              running statistics are left alone.
 * So a forward with c->training MUTATES the layer's buffers (even with the tape's recording
 * off): run evaluation passes in eval mode (nn_eval_begin, nn/base.h).
 *
 * Parameters (trainable): prefix.weight (C) init 1, prefix.bias (C) init 0. Buffers
 * (nn_params_add_buffer: not trained, no gradient, saved with the model): prefix.running_mean
 * (C) init 0, prefix.running_var (C) init 1, prefix.num_batches_tracked (a scalar, shape [])
 * init 0. PyTorch's num_batches_tracked is an int64; here it is a buffer of the store's float
 * type (exact up to 2^24 batches in float32), which checkpoints write as I64, as PyTorch does
 * (nn_ckpt_add_params, nn/io/checkpoint.h; loading takes I64 or a float dtype).
 *
 * The forward is one op (nn/batchnorm.c) with its backward in both modes (in training the
 * gradient flows through the batch statistics; in eval they are constants).
 * nn_batch_norm1d_composite computes the same from ag primitives (ag_mean over the batch (and
 * length) axes, ag_sub, ag_mul, ag_add_scalar, ag_sqrt, ag_div, ag_add; the running statistics
 * updated from its mean and variance by the same formulas): the tested reference.
 *
 * Usage:
 *     nn_batch_norm1d bn;
 *     nn_batch_norm1d_init(&bn, ps, "bn1", 16, NN_BATCH_NORM_EPS, NN_BATCH_NORM_MOMENTUM);
 *     ag_tensor *y = nn_batch_norm1d_forward(&bn, &c, x);     // x (N, 16) or (N, 16, L)
 */
#ifndef TG_NN_BATCHNORM_H
#define TG_NN_BATCHNORM_H

#include "base.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's defaults. */
#define NN_BATCH_NORM_EPS 1e-5
#define NN_BATCH_NORM_MOMENTUM 0.1

typedef struct nn_batch_norm1d {
    ag_tensor *weight, *bias;       /* (C) gamma and beta, trainable */
    ag_tensor *running_mean;        /* (C) buffer */
    ag_tensor *running_var;         /* (C) buffer */
    ag_tensor *num_batches_tracked; /* () buffer: a scalar */
    int num_features;               /* C */
    double eps, momentum;
} nn_batch_norm1d;

/* Registers prefix.weight, prefix.bias (parameters), then prefix.running_mean,
 * prefix.running_var, prefix.num_batches_tracked (buffers): PyTorch's state_dict order.
 * num_features > 0, eps > 0, 0 <= momentum <= 1. Returns 0 or -1 (ag_last_error). */
int nn_batch_norm1d_init(nn_batch_norm1d *bn, nn_params *ps, const char *prefix, int num_features,
                         double eps, double momentum);

/* x (N, C) or (N, C, L) -> the same shape (math above). NULL (reported) when x has another
 * number of channels or dimensions (the message names both shapes), when training with
 * N L = 1 value per channel, or when the store is not finalized. */
ag_tensor *nn_batch_norm1d_forward(const nn_batch_norm1d *bn, const nn_ctx *c, ag_tensor *x);
/* The same, composed of ag primitives (the reference of the fused op): the same values,
 * gradients and running statistics up to rounding, the same errors ("batch_norm1d_composite"). */
ag_tensor *nn_batch_norm1d_composite(const nn_batch_norm1d *bn, const nn_ctx *c, ag_tensor *x);

#ifdef __cplusplus
}
#endif

#endif
