/* zoo/attention.h -- d2l's attention scorers and multi-head attention (SPEC.md section 2).
 *
 * Shapes: batch B, queries Tq, keys Tk. Valid lengths mask the keys as d2l's masked_softmax:
 * valid_lens NULL (no mask), vl_ndim 1 with shape (B,) (one length per batch row) or vl_ndim 2
 * with shape (B, Tq) (one per query); masked scores become -1e6 before the softmax.
 *
 * Every module keeps the attention weights of its last forward in `weights` (a tensor on that
 * forward's tape: read it before the tape is reset). Dropout applies to the weights in
 * training only. Each init registers parameters (if any) in ps under prefix with PyTorch's
 * names and returns 0, or -1 with ag_last_error(); each forward returns a tensor on c->tape or
 * NULL after an op reported an error.
 */
#ifndef TG_ZOO_ATTENTION_H
#define TG_ZOO_ATTENTION_H

#include "nn/nn.h"

/* ---- scaled dot-product: softmax(Q K^T / sqrt(d)) V ------------------------------------- */

typedef struct zoo_dot_attention {
    nn_dropout dropout;
    ag_tensor *weights;  /* (B, Tq, Tk) of the last forward */
} zoo_dot_attention;

int zoo_dot_attention_init(zoo_dot_attention *a, double dropout);
/* q (B, Tq, d), k (B, Tk, d), v (B, Tk, dv) -> (B, Tq, dv): ag_attention with one head. */
ag_tensor *zoo_dot_attention_forward(zoo_dot_attention *a, const nn_ctx *c, ag_tensor *q,
                                     ag_tensor *k, ag_tensor *v, const int32_t *valid_lens,
                                     int vl_ndim);

/* ---- additive (Bahdanau): w_v tanh(W_q q + W_k k) ---------------------------------------- */

typedef struct zoo_additive_attention {
    nn_linear W_k, W_q, w_v;  /* (H x key_size), (H x query_size), (1 x H), no bias */
    zoo_dot_attention base;   /* its dropout and kept weights */
} zoo_additive_attention;

/* Registers prefix.W_k.weight, prefix.W_q.weight, prefix.w_v.weight (d2l's order). */
int zoo_additive_attention_init(zoo_additive_attention *a, nn_params *ps, const char *prefix,
                                int key_size, int query_size, int hiddens, double dropout);
/* q (B, Tq, query_size), k (B, Tk, key_size), v (B, Tk, dv) -> (B, Tq, dv). The scores
 * w_v tanh(W_q q[b,i] + W_k k[b,j]) for every (i, j) are one fused op, ag_additive_scores. */
ag_tensor *zoo_additive_attention_forward(zoo_additive_attention *a, const nn_ctx *c,
                                          ag_tensor *q, ag_tensor *k, ag_tensor *v,
                                          const int32_t *valid_lens, int vl_ndim);

/* ---- multi-head ------------------------------------------------------------------------- */

typedef struct zoo_mha {
    nn_linear W_q, W_k, W_v, W_o;
    zoo_dot_attention attention;  /* weights: (B * heads, Tq, Tk), row b*heads + h */
    int heads, hiddens;
} zoo_mha;

/* Registers prefix.W_q, W_k, W_v (hiddens x size) and W_o (hiddens x hiddens), .weight (and
 * .bias when bias). hiddens must be a multiple of heads. */
int zoo_mha_init(zoo_mha *m, nn_params *ps, const char *prefix, int key_size, int query_size,
                 int value_size, int hiddens, int heads, double dropout, bool bias);
/* queries (B, Tq, query_size), keys (B, Tk, key_size), values (B, Tk, value_size)
 * -> (B, Tq, hiddens): project; split into heads (head h: features [h H/heads, (h+1) H/heads)),
 * dot-product attention per head with row b's valid lengths for each of its heads, merge (d2l's
 * transpose_qkv, DotProductAttention, transpose_output: one fused op, ag_attention); W_o. */
ag_tensor *zoo_mha_forward(zoo_mha *m, const nn_ctx *c, ag_tensor *queries, ag_tensor *keys,
                           ag_tensor *values, const int32_t *valid_lens, int vl_ndim);

#endif
