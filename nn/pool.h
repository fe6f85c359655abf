/* pool.h -- MaxPool1d/2d and AvgPool1d/2d with PyTorch's semantics (no parameters: functions).
 *
 * 2-D: x (N, C, H, W), a window of KH x KW moved by (SH, SW) over x with PH (PW) rows (columns)
 * of padding on each side, -> (N, C, OH, OW):
 *   OH = floor((H + 2 PH - KH) / SH) + 1,   OW likewise          (PyTorch's ceil_mode=False)
 *   window (i, j) covers rows i SH - PH .. i SH - PH + KH - 1, columns likewise;
 *   max: y = the largest input value in the window (padding never wins: it is -inf); its
 *        gradient goes to the FIRST largest element in row-major order of the window, as
 *        PyTorch (and a NaN in the window is the maximum, the last one seen, as PyTorch);
 *   avg: y = (sum of the input values in the window) / (KH KW): the padding counts as zeros in
 *        the divisor (PyTorch's default count_include_pad=True); the gradient spreads evenly.
 * 1-D: x (N, C, L), the same with no height: -> (N, C, OL).
 * stride 0 means stride = kernel (PyTorch's default stride=None). Requires kernel >= 1,
 * stride >= 0, 0 <= padding <= kernel / 2 (as PyTorch) and an output of at least 1 x 1.
 *
 * Each is one op on autograd/ag_op.h (nn/pool.c); the max pool keeps the index of each
 * window's maximum for its backward. nn_pool2d_composite computes the same from ag primitives
 * (the input padded by ag_concat with -inf (max) or 0 (avg), one strided view per window offset,
 * concatenated along a last axis, then ag_max or ag_mean over it): the tested reference.
 *
 * Every function returns a tensor on c->tape, or NULL (reported, naming the op, the input's
 * shape, kernel, stride and padding) for a bad input or window.
 */
#ifndef TG_NN_POOL_H
#define TG_NN_POOL_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nn_pool_kind { NN_POOL_MAX, NN_POOL_AVG } nn_pool_kind;

/* Square windows: x (N, C, H, W) -> (N, C, OH, OW). */
ag_tensor *nn_max_pool2d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding);
ag_tensor *nn_avg_pool2d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding);
/* x (N, C, L) -> (N, C, OL). */
ag_tensor *nn_max_pool1d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding);
ag_tensor *nn_avg_pool1d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding);

/* Any window: kernel, stride and padding as (height, width); stride NULL is the kernel,
 * padding NULL is 0. x (N, C, H, W). */
ag_tensor *nn_pool2d(const nn_ctx *c, ag_tensor *x, nn_pool_kind kind, const int kernel[2],
                     const int stride[2], const int padding[2]);
/* The same from ag primitives (the reference of the fused ops): the same values and gradients
 * (the max's tie rule included; not its NaN rule), the same errors ("max_pool2d_composite"). */
ag_tensor *nn_pool2d_composite(const nn_ctx *c, ag_tensor *x, nn_pool_kind kind,
                               const int kernel[2], const int stride[2], const int padding[2]);

#ifdef __cplusplus
}
#endif

#endif
