/* nn/linear_ce.h -- an output layer and its cross-entropy in one op, over row chunks.
 *
 * A classifier's last Linear (H -> V) feeds a (label-smoothed) softmax cross-entropy. Composed
 * of primitives, the logits (rows x V) are a tensor, and so are their gradient and the loss's
 * own buffers; with a large V (a translator's target vocabulary) they are most of a training
 * step's memory. nn_linear_ce_forward computes the same weighted loss in chunks of rows, so
 * only one chunk's logits exist at a time, and computes the gradients of x, W and b chunk by
 * chunk in the same pass when the tape wants them: its backward only scales them by the
 * upstream gradient and adds them. Rows of weight 0 (padding) or labelled ignore_index are
 * skipped: their logits are never computed. Beside it, nn_linear_ce_composite is the same loss
 * from nn_linear_forward and ag_cross_entropy, the tested reference.
 */
#ifndef TG_NN_LINEAR_CE_H
#define TG_NN_LINEAR_CE_H

#include "layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default chunk of nn_linear_ce_forward (chunk_rows = 0): this many rows, fewer when V is
 * so large that a chunk's logits would pass NN_LINEAR_CE_CHUNK_ELEMS elements (never below 16
 * rows). Measured in docs/benchmarks.md (section "The big Transformer"). */
#define NN_LINEAR_CE_CHUNK_ROWS 256
#define NN_LINEAR_CE_CHUNK_ELEMS (16 << 20)

/* x (..., H) through the layer l (weight (V, H), bias (V) or none) and a cross-entropy against
 * one label per row of x (rows = numel / H), weighted per row, summed:
 *
 *   z_r  = x_r W^T + b                                              (V) logits of row r
 *   CE_r = lse(z_r) - (1 - eps) z_r[k_r] - eps mean_c z_r[c]        PyTorch's label smoothing
 *   loss = sum_r w_r CE_r         (rows with k_r == ignore_index or w_r == 0 left out)
 *
 * labels: rows values in [0, V) or ignore_index (AG_IGNORE_INDEX: none); weights: rows values,
 * or NULL for ones (both copied as needed; the caller keeps ownership). eps = label_smoothing
 * in [0, 1]. E.g. a masked per-position mean, d2l's MaskedSoftmaxCELoss summed over the batch:
 * w = mask / T. chunk_rows: rows per chunk, 0 for the default (see above).
 *
 * Returns a scalar tensor on c->tape; with the tape recording and x, W or b requiring a
 * gradient, its backward adds g dloss/dx, g dloss/dW, g dloss/db (g the upstream gradient).
 * NULL (reported through ag's handler: the op and the shapes) for shapes that do not fit,
 * a label outside [0, V) other than ignore_index, missing labels, eps outside [0, 1] or
 * chunk_rows < 0; NULL without a message for a NULL input. A skipped row contributes exactly 0,
 * even where its logits would not be finite. The loss is summed in row order in double and the
 * threads only share out independent outputs (rows of each product, columns of db): the same
 * bits for any number of threads. Another chunk_rows gives the same values up to rounding (dW
 * and db are summed over the chunks, and products of other sizes may round differently). */
ag_tensor *nn_linear_ce_forward(const nn_linear *l, const nn_ctx *c, ag_tensor *x,
                                const int32_t *labels, const ag_real *weights,
                                double label_smoothing, int32_t ignore_index, int chunk_rows);

/* The same from primitives: ag_sum(ag_cross_entropy(nn_linear_forward(l, c, x), labels,
 * weights, label_smoothing, ignore_index, AG_REDUCE_NONE), AG_ALL) (chunk_rows is ignored). The
 * whole logits exist as a tensor; rows of weight 0 are computed (and give 0 when finite). */
ag_tensor *nn_linear_ce_composite(const nn_linear *l, const nn_ctx *c, ag_tensor *x,
                                  const int32_t *labels, const ag_real *weights,
                                  double label_smoothing, int32_t ignore_index, int chunk_rows);

#ifdef __cplusplus
}
#endif

#endif
