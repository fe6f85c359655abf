/* nn/attention.h -- attention cores: scaled dot-product attention over packed heads, and
 * additive (Bahdanau) scores. Parameter-free cores: the projections around them are nn_linear
 * layers of the model (the zoo's MultiHeadAttention and AdditiveAttention compose them).
 *
 * Masks. valid_lens NULL: no mask; vl_ndim 1, shape (B,): one length per batch row; vl_ndim 2,
 * shape (B, Tq): one per query. Keys at positions >= the valid length get the score -1e6 before
 * the softmax, so a row of valid length 0 is uniform (masked softmax, as d2l). Lengths are
 * copied.
 *
 * Each forward returns a tensor on c->tape, or NULL after an error (reported through ag's
 * handler: op name and shapes). Each runs a fused kernel (one recorded op, nn/attention.c,
 * written on autograd/ag_op.h) and has, beside it, the same computation composed of ag_
 * primitives (the _composite functions, same signature): the tested reference (values,
 * gradients and dropout draws agree; tests/nn/test_fused.c), and a fallback to read.
 */
#ifndef TG_NN_ATTENTION_H
#define TG_NN_ATTENTION_H

#include "layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- scaled dot-product attention, multi-head ------------------------------------------- */

typedef struct nn_attention {
    int heads;          /* >= 1 */
    nn_dropout dropout; /* on the attention weights, training only */
} nn_attention;

/* No parameters. Returns 0, or -1 (ag_last_error) for heads < 1 or p outside [0, 1). */
int nn_attention_init(nn_attention *a, int heads, double dropout);

/* q (B, Tq, H), k (B, Tk, H), v (B, Tk, Hv); heads divides H and Hv, and head h reads
 * features [h H/heads, (h+1) H/heads) of q and k, [h Hv/heads, (h+1) Hv/heads) of v:
 *   W[b heads + h] = masked_softmax(q_h k_h^T / sqrt(H / heads))        (B heads, Tq, Tk)
 *   out[b, :, head h's features] = dropout(W[b heads + h]) v_h             -> (B, Tq, Hv)
 * The valid lengths are given per batch row b ((B,) or (B, Tq)); every head of b uses them.
 * The dropout (training only) is nn_dropout_forward's on W (B heads, Tq, Tk): the same rng
 * state drops the same elements. heads = 1 is plain scaled dot-product attention. weights:
 * NULL, or receives W before dropout (on the tape, no gradient), e.g. for plots. The fused
 * kernel reads and writes the heads in place. NULL (reported) on bad shapes, heads or vl_ndim
 * (0, 1 or 2), or training with dropout and no c->rng. */
ag_tensor *nn_attention_forward(const nn_attention *a, const nn_ctx *c, ag_tensor *q, ag_tensor *k,
                                ag_tensor *v, const int32_t *valid_lens, int vl_ndim,
                                ag_tensor **weights);
/* The same from primitives: q, k, v split into heads (reshape (B, T, heads, d), permute to
 * (B, heads, T, d), reshape (B heads, T, d)), the lengths repeated for every head, then
 * W = ag_masked_softmax(ag_matmul(q_s, k_s^T) / sqrt(d)), out = merge(ag_matmul(dropout(W),
 * v_s)). *weights receives W (part of the graph here). */
ag_tensor *nn_attention_composite(const nn_attention *a, const nn_ctx *c, ag_tensor *q,
                                  ag_tensor *k, ag_tensor *v, const int32_t *valid_lens,
                                  int vl_ndim, ag_tensor **weights);

/* ---- additive scores: w . tanh(q + k) ----------------------------------------------------- */

/* q (B, Tq, H), k (B, Tk, H), w_v a Linear(H -> 1) without bias, weight w (1, H) ->
 * scores (B, Tq, Tk),
 *   s[b][i][j] = sum_h w[h] tanh(q[b][i][h] + k[b][j][h])
 * (d2l's w_v(tanh(W_q q + W_k k)) after the projections, Bahdanau's scores). The fused kernel
 * never forms the (B, Tq, Tk, H) sum as a tensor. NULL (reported) on other shapes, or a w_v
 * with a bias or more than one output. */
ag_tensor *nn_additive_scores_forward(const nn_linear *w_v, const nn_ctx *c, ag_tensor *q,
                                      ag_tensor *k);
/* The same from primitives: ag_tanh of the broadcast sum q (B, Tq, 1, H) + k (B, 1, Tk, H),
 * then ag_linear by w -> (B, Tq, Tk, 1), reshaped to (B, Tq, Tk). */
ag_tensor *nn_additive_scores_composite(const nn_linear *w_v, const nn_ctx *c, ag_tensor *q,
                                        ag_tensor *k);

#ifdef __cplusplus
}
#endif

#endif
