/* nn/loss.h -- the losses of an output layer: the output Linear fused with its cross-entropy
 * over row chunks, and d2l's masked sequence loss, which picks that fused op or the composite.
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
 *
 * The sequence loss (below) is what a seq2seq trainer minimises: it takes the decoder's
 * features and the output layer, and decides itself whether the logits are worth making.
 * Labels and label smoothing are checked in one place for every kernel here and in autograd
 * (ag_op_check_labels, autograd/ag_op.h).
 */
#ifndef TG_NN_LOSS_H
#define TG_NN_LOSS_H

#include "layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default chunk of nn_linear_ce_forward (chunk_rows = 0): this many rows, fewer when V is
 * so large that a chunk's logits would pass NN_LINEAR_CE_CHUNK_ELEMS elements (32 MiB of float32;
 * never below 16 rows). Each chunk's products pack the whole weight again: larger chunks pack it
 * less often, for more memory (docs/benchmarks.md, "The output layer's chunk"). */
#define NN_LINEAR_CE_CHUNK_ROWS 1024
#define NN_LINEAR_CE_CHUNK_ELEMS (8 << 20)

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

/* ---- d2l's masked sequence loss -------------------------------------------------------------
 *
 * Targets tgt (B, T) with valid lengths tgt_len (B): position (b, s) is valid when s < tgt_len[b]
 * (d2l's sequence_mask; a length <= 0 masks the whole row, >= T none of it). With CE_bs the
 * (label-smoothed, eps in [0, 1], PyTorch's definition) cross-entropy of logits z_bs against
 * tgt[b, s]:
 *   per-sequence loss  l_b = sum_{s valid} CE_bs / T          d2l's MaskedSoftmaxCELoss
 *   objective          L   = sum_b sum_{s valid} CE_bs / T_div
 * T_div >= 1 is the number of positions a sequence's mean runs over: T as d2l; a token batch
 * cut to T of num_steps positions passes num_steps, the objective of the uncut batch.
 *
 * Logits of this many elements (B T V) or more run fused (nn_seq_ce_loss): 2^20 = 1,048,576,
 * 16 times a shard's 32 x 10 x 201 in the book's runs, which keep the composite's bits; with
 * the whole corpus's 17,851 target words a shard of 59 rows or more fuses. The fused op is not
 * slower below it either (docs/benchmarks.md): the threshold is there for the bits of the
 * book's runs. */
#define NN_SEQ_CE_FUSED_MIN_LOGITS (1 << 20)

/* Per-sequence loss l_b of logits (B, T, V): a (B,) tensor on c->tape. eps = 0 runs
 * ag_softmax_ce with the valid-position mask as weights, eps > 0 ag_cross_entropy (NONE), then
 * ag_mean over T. NULL (reported, naming the shapes) when logits is not 3-D, or tgt or tgt_len
 * is NULL, or a label or eps is out of range (ag_op_check_labels); NULL without a message for a
 * NULL input. */
ag_tensor *nn_masked_ce(const nn_ctx *c, ag_tensor *logits, const int32_t *tgt,
                        const int32_t *tgt_len, double eps);

/* The objective L of features h (B, T, H) through the output layer out (H -> V): a scalar on
 * c->tape. Picks the kernel: B T V >= NN_SEQ_CE_FUSED_MIN_LOGITS runs nn_seq_ce_loss_fused
 * (no (B, T, V) logits), smaller sizes nn_seq_ce_loss_composite. The two give the same value
 * and gradients up to rounding. NULL (reported, naming the shapes) when h is not (B, T, out->in),
 * tgt or tgt_len is NULL, T_div < 1, or a label or eps is out of range; NULL without a message
 * for a NULL input. */
ag_tensor *nn_seq_ce_loss(const nn_linear *out, const nn_ctx *c, ag_tensor *h, const int32_t *tgt,
                          const int32_t *tgt_len, int T_div, double eps);
/* The fused kernel: nn_linear_ce_forward(out, c, h, tgt, w, eps, AG_IGNORE_INDEX, 0) with
 * weights w_bs = [s valid] / T_div (the padded rows skipped). */
ag_tensor *nn_seq_ce_loss_fused(const nn_linear *out, const nn_ctx *c, ag_tensor *h,
                                const int32_t *tgt, const int32_t *tgt_len, int T_div, double eps);
/* The composite: nn_seq_ce_loss_logits(c, nn_linear_forward(out, c, h), ...), d2l's order of
 * operations (the bits of the book's runs). */
ag_tensor *nn_seq_ce_loss_composite(const nn_linear *out, const nn_ctx *c, ag_tensor *h,
                                    const int32_t *tgt, const int32_t *tgt_len, int T_div,
                                    double eps);
/* The objective L of logits (B, T, V), for a model that has no features to fuse from:
 * ag_sum of nn_masked_ce, each l_b scaled by T / T_div first when T_div != T. */
ag_tensor *nn_seq_ce_loss_logits(const nn_ctx *c, ag_tensor *logits, const int32_t *tgt,
                                 const int32_t *tgt_len, int T_div, double eps);

#ifdef __cplusplus
}
#endif

#endif
