/* zoo/models/attention.h -- d2l's attention modules (d2l 11.3 and 11.5), composed of nn layers:
 * DotProductAttention, AdditiveAttention, MultiHeadAttention.
 *
 * Shapes: batch B, queries Tq, keys Tk. Valid lengths mask the keys as d2l's masked_softmax:
 * valid_lens NULL (no mask), vl_ndim 1 with shape (B,) (one length per batch row) or vl_ndim 2
 * with shape (B, Tq) (one per query); masked scores become -1e6 before the softmax.
 *
 * The modules are stateless in forward: a forward changes nothing in the module. The attention
 * weights go where the caller asks (weights: NULL, or a pointer that receives a tensor on the
 * forward's tape, before dropout). Dropout applies to the weights in training only. Each init
 * registers parameters (if any) in ps under prefix with PyTorch's names and returns 0, or -1
 * with ag_last_error(); each forward returns a tensor on c->tape or NULL after an error.
 */
#ifndef TG_ZOO_ATTENTION_H
#define TG_ZOO_ATTENTION_H

#include "../../nn/kv_cache.h"
#include "../../nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a model's forward puts its attention weights, for the heatmaps: each array has one
 * entry per attention layer and receives tensors on the forward's tape; a NULL array (or a NULL
 * trace) records nothing. Encoding fills enc_self; a decoding step fills dec_self and
 * dec_cross with that step's weights, rows b * heads + h. */
typedef struct zoo_attn_trace {
    ag_tensor **enc_self;  /* (B heads, Ts, Ts) */
    ag_tensor **dec_self;  /* (B heads, 1, keys so far) */
    ag_tensor **dec_cross; /* (B heads, 1, Ts) */
} zoo_attn_trace;

/* ---- scaled dot-product: softmax(Q K^T / sqrt(d)) V ------------------------------------- */

typedef struct zoo_dot_attention {
    nn_attention core; /* one head */
} zoo_dot_attention;

int zoo_dot_attention_init(zoo_dot_attention *a, double dropout);
/* q (B, Tq, d), k (B, Tk, d), v (B, Tk, dv) -> (B, Tq, dv); *weights (B, Tq, Tk). */
ag_tensor *zoo_dot_attention_forward(const zoo_dot_attention *a, const nn_ctx *c, ag_tensor *q,
                                     ag_tensor *k, ag_tensor *v, const int32_t *valid_lens,
                                     int vl_ndim, ag_tensor **weights);

/* ---- additive (Bahdanau): w_v tanh(W_q q + W_k k) ---------------------------------------- */

typedef struct zoo_additive_attention {
    nn_linear W_k, W_q, w_v; /* (H x key_size), (H x query_size), (1 x H), no bias */
    nn_dropout dropout;      /* on the weights */
} zoo_additive_attention;

/* Registers prefix.W_k.weight, prefix.W_q.weight, prefix.w_v.weight (d2l's order). */
int zoo_additive_attention_init(zoo_additive_attention *a, nn_params *ps, const char *prefix,
                                int key_size, int query_size, int hiddens, double dropout);
/* q (B, Tq, query_size), k (B, Tk, key_size), v (B, Tk, dv) -> (B, Tq, dv); *weights
 * (B, Tq, Tk). The same as zoo_additive_attention_attend(a, c, q, keys(a, c, k), v, ...). */
ag_tensor *zoo_additive_attention_forward(const zoo_additive_attention *a, const nn_ctx *c,
                                          ag_tensor *q, ag_tensor *k, ag_tensor *v,
                                          const int32_t *valid_lens, int vl_ndim,
                                          ag_tensor **weights);
/* The key half of the features, W_k k (B, Tk, H): independent of the queries, so a decoder
 * that attends to the same keys at every step computes it once. */
ag_tensor *zoo_additive_attention_keys(const zoo_additive_attention *a, const nn_ctx *c,
                                       ag_tensor *k);
/* The rest, from projected keys (B, Tk, H): scores w_v tanh(W_q q + keys) (one fused op,
 * nn_additive_scores_forward), masked softmax, dropout, product with v. */
ag_tensor *zoo_additive_attention_attend(const zoo_additive_attention *a, const nn_ctx *c,
                                         ag_tensor *q, ag_tensor *keys, ag_tensor *v,
                                         const int32_t *valid_lens, int vl_ndim,
                                         ag_tensor **weights);

/* ---- multi-head ------------------------------------------------------------------------- */

typedef struct zoo_mha {
    nn_linear W_q, W_k, W_v, W_o;
    nn_attention attention; /* heads */
    int heads, hiddens;
} zoo_mha;

/* Registers prefix.W_q, W_k, W_v (hiddens x size) and W_o (hiddens x hiddens), .weight (and
 * .bias when bias). hiddens must be a multiple of heads. */
int zoo_mha_init(zoo_mha *m, nn_params *ps, const char *prefix, int key_size, int query_size,
                 int value_size, int hiddens, int heads, double dropout, bool bias);
/* queries (B, Tq, query_size), keys (B, Tk, key_size), values (B, Tk, value_size)
 * -> (B, Tq, hiddens): project; split into heads (head h: features [h H/heads, (h+1) H/heads)),
 * dot-product attention per head with row b's valid lengths for each of its heads, merge (d2l's
 * transpose_qkv, DotProductAttention, transpose_output: nn_attention_forward, one fused op);
 * W_o. *weights: (B * heads, Tq, Tk), row b * heads + h. */
ag_tensor *zoo_mha_forward(const zoo_mha *m, const nn_ctx *c, ag_tensor *queries, ag_tensor *keys,
                           ag_tensor *values, const int32_t *valid_lens, int vl_ndim,
                           ag_tensor **weights);
/* ---- multi-head, one position at a time (inference) ---------------------------------------
 * A decoder keeps the keys and values it attends to in an nn_kv_cache (nn/kv_cache.h) of
 * width hiddens, filled through the layer's own projections: kv then holds W_k K and W_v V for
 * the K, V appended so far. Inference only (the cache refuses what records a gradient). */

/* Appends W_k keys and W_v values to kv: keys (B, T, key_size), values (B, T, value_size),
 * kv->rows == B; e.g. a cross-attention's cache filled once from the encoder outputs. Returns 0
 * or -1 (reported). The projections stay on c->tape: a caller rewinds them once appended. */
int zoo_mha_cache_append(const zoo_mha *m, const nn_ctx *c, nn_kv_cache *kv, ag_tensor *keys,
                         ag_tensor *values);
/* queries (B, Tq, query_size) attending to the positions of kv -> (B, Tq, hiddens): W_o of the
 * attention of W_q queries over the cache's keys and values, masked as zoo_mha_forward. Equals
 * zoo_mha_forward(queries, K, V, ...) when kv holds W_k K, W_v V. *weights (B heads, Tq, len). */
ag_tensor *zoo_mha_cache_attend(const zoo_mha *m, const nn_ctx *c, nn_kv_cache *kv,
                                ag_tensor *queries, const int32_t *valid_lens, int vl_ndim,
                                ag_tensor **weights);
/* One self-attention step: x (B, 1, size) is the query, key and value of the next position:
 * appends W_k x and W_v x to kv, then attends x's query over all of kv (no mask: no later
 * position is in it). The same as zoo_mha_forward's output at that position in the causal pass
 * over the prefix. NULL after an error (kv unchanged when the append failed). */
ag_tensor *zoo_mha_step(const zoo_mha *m, const nn_ctx *c, nn_kv_cache *kv, ag_tensor *x,
                        ag_tensor **weights);

#ifdef __cplusplus
}
#endif

#endif
