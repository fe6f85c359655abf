/* conv.h -- Conv1d and Conv2d with PyTorch's semantics, layouts and default initialisation.
 *
 * Conv2d: x (N, C, H, W), weight (O, C/G, KH, KW), bias (O) or none, G groups (G divides C and
 * O; the C/G input channels of group g feed its O/G output channels):
 *
 *   y[n, o, i, j] = b[o] + sum_{c < C/G, p < KH, q < KW}
 *                   w[o, c, p, q] xp[n, g C/G + c, i SH + p DH, j SW + q DW],   g = o / (O/G)
 *
 * xp being x with PH (PW) zeros added above and below (left and right). Output (N, O, OH, OW),
 *   OH = floor((H + 2 PH - DH (KH - 1) - 1) / SH) + 1,   OW likewise (both must be >= 1).
 * Conv1d is the same with no height: x (N, C, L), weight (O, C/G, K) -> (N, O, OL).
 *
 * The forward is one op written in nn/conv.c on autograd/ag_op.h: im2col (the receptive fields
 * of a chunk of samples laid out as the columns of a matrix) and one GEMM per group (ag_gemm);
 * the backward runs the two transposed GEMMs (weight: += with beta = 1; input: into the column
 * matrix, then added back into the input's gradient by col2im) and sums the bias gradient.
 * nn_conv2d_composite computes the same from ag primitives: the zero padding by ag_concat, one
 * strided view (ag_op_view) of the padded input per kernel offset (p, q) and group, one
 * ag_matmul each, summed with ag_add (no im2col): the tested reference (tests/nn/test_conv.c).
 *
 * Parameters (nn_params_add, under the layer's prefix as nn_linear): prefix.weight and, with a
 * bias, prefix.bias, both drawn from the store's RNG in that order as PyTorch initialises them:
 * weight kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)) and bias
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C/G KH KW.
 *
 * Usage:
 *     nn_conv2d conv;
 *     nn_conv2d_init(&conv, ps, "conv1", 3, 16, 3, 3, &(nn_conv2d_opts){.padding = {1, 1}});
 *     ag_tensor *y = nn_conv2d_forward(&conv, &c, x);            // x (N, 3, H, W) -> (N, 16, H, W)
 *
 * Pooling is in nn/pool.h.
 */
#ifndef TG_NN_CONV_H
#define TG_NN_CONV_H

#include "base.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Conv2d ------------------------------------------------------------------------------ */

/* The options of nn_conv2d_init; a zeroed struct (or NULL) is PyTorch's defaults. Index 0 is
 * the height, 1 the width. */
typedef struct nn_conv2d_opts {
    int stride[2];   /* >= 1; 0 means 1 */
    int padding[2];  /* zeros added on each side, >= 0 */
    int dilation[2]; /* >= 1; 0 means 1 */
    int groups;      /* divides in and out; 0 means 1 */
    bool no_bias;    /* PyTorch's bias=False */
} nn_conv2d_opts;

typedef struct nn_conv2d {
    ag_tensor *weight; /* (out, in / groups, kernel[0], kernel[1]) */
    ag_tensor *bias;   /* (out), or NULL */
    int in, out, groups;
    int kernel[2], stride[2], padding[2], dilation[2]; /* (height, width) */
} nn_conv2d;

/* Registers prefix.weight and (unless opts->no_bias) prefix.bias. in, out, kh, kw > 0; the
 * options as above. Returns 0, or -1 (ag_last_error names the layer; the store then refuses to
 * finalize). */
int nn_conv2d_init(nn_conv2d *l, nn_params *ps, const char *prefix, int in, int out, int kh, int kw,
                   const nn_conv2d_opts *opts);
/* x (N, in, H, W) -> (N, out, OH, OW) (math above). NULL (reported, naming the layer and the
 * shapes) when x is not 4-D with `in` channels, when the output would be empty, or when a
 * struct filled by hand is inconsistent (weight or bias shape, stride, padding, dilation,
 * groups). The result is on c->tape. */
ag_tensor *nn_conv2d_forward(const nn_conv2d *l, const nn_ctx *c, ag_tensor *x);
/* The same from ag primitives (the reference of the fused op): same values and gradients up
 * to rounding, same errors ("conv2d_composite"). */
ag_tensor *nn_conv2d_composite(const nn_conv2d *l, const nn_ctx *c, ag_tensor *x);

/* ---- Conv1d ------------------------------------------------------------------------------ */

/* The options of nn_conv1d_init; a zeroed struct (or NULL) is PyTorch's defaults. */
typedef struct nn_conv1d_opts {
    int stride;   /* >= 1; 0 means 1 */
    int padding;  /* zeros added on each side, >= 0 */
    int dilation; /* >= 1; 0 means 1 */
    int groups;   /* divides in and out; 0 means 1 */
    bool no_bias; /* PyTorch's bias=False */
} nn_conv1d_opts;

typedef struct nn_conv1d {
    ag_tensor *weight; /* (out, in / groups, kernel) */
    ag_tensor *bias;   /* (out), or NULL */
    int in, out, groups;
    int kernel, stride, padding, dilation;
} nn_conv1d;

/* As nn_conv2d_init, with one kernel size k > 0: prefix.weight (out, in / groups, k). */
int nn_conv1d_init(nn_conv1d *l, nn_params *ps, const char *prefix, int in, int out, int k,
                   const nn_conv1d_opts *opts);
/* x (N, in, L) -> (N, out, OL); the same op as Conv2d with a height of 1, the same errors
 * ("conv1d"). */
ag_tensor *nn_conv1d_forward(const nn_conv1d *l, const nn_ctx *c, ag_tensor *x);
/* The same from ag primitives (Conv2d's composite on x viewed as (N, in, 1, L)). */
ag_tensor *nn_conv1d_composite(const nn_conv1d *l, const nn_ctx *c, ag_tensor *x);

#ifdef __cplusplus
}
#endif

#endif
