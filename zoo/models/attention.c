/* attention.c -- DotProductAttention, AdditiveAttention, MultiHeadAttention (d2l 11.3, 11.5). */
#include "zoo/models/attention.h"

int zoo_dot_attention_init(zoo_dot_attention *a, double dropout) {
    return nn_attention_init(&a->core, 1, dropout);
}

ag_tensor *zoo_dot_attention_forward(const zoo_dot_attention *a, const nn_ctx *c, ag_tensor *q,
                                     ag_tensor *k, ag_tensor *v, const int32_t *valid_lens,
                                     int vl_ndim, ag_tensor **weights) {
    return nn_attention_forward(&a->core, c, q, k, v, valid_lens, vl_ndim, weights);
}

int zoo_additive_attention_init(zoo_additive_attention *a, nn_params *ps, const char *prefix,
                                int key_size, int query_size, int hiddens, double dropout) {
    char p[NN_NAME_MAX];
    if (nn_linear_init(&a->W_k, ps, nn_join(p, sizeof p, prefix, "W_k"), key_size, hiddens,
                       false) ||
        nn_linear_init(&a->W_q, ps, nn_join(p, sizeof p, prefix, "W_q"), query_size, hiddens,
                       false) ||
        nn_linear_init(&a->w_v, ps, nn_join(p, sizeof p, prefix, "w_v"), hiddens, 1, false))
        return -1;
    return nn_dropout_init(&a->dropout, dropout);
}

ag_tensor *zoo_additive_attention_keys(const zoo_additive_attention *a, const nn_ctx *c,
                                       ag_tensor *k) {
    return nn_linear_forward(&a->W_k, c, k);
}

ag_tensor *zoo_additive_attention_attend(const zoo_additive_attention *a, const nn_ctx *c,
                                         ag_tensor *q, ag_tensor *keys, ag_tensor *v,
                                         const int32_t *valid_lens, int vl_ndim,
                                         ag_tensor **weights) {
    if (weights) *weights = NULL;
    ag_tensor *scores =
        nn_additive_scores_forward(&a->w_v, c, nn_linear_forward(&a->W_q, c, q), keys);
    ag_tensor *w = ag_masked_softmax(c->tape, scores, valid_lens, vl_ndim);
    if (w && weights) *weights = w;
    return ag_matmul(c->tape, nn_dropout_forward(&a->dropout, c, w), v);
}

ag_tensor *zoo_additive_attention_forward(const zoo_additive_attention *a, const nn_ctx *c,
                                          ag_tensor *q, ag_tensor *k, ag_tensor *v,
                                          const int32_t *valid_lens, int vl_ndim,
                                          ag_tensor **weights) {
    return zoo_additive_attention_attend(a, c, q, zoo_additive_attention_keys(a, c, k), v,
                                         valid_lens, vl_ndim, weights);
}

int zoo_mha_init(zoo_mha *m, nn_params *ps, const char *prefix, int key_size, int query_size,
                 int value_size, int hiddens, int heads, double dropout, bool bias) {
    if (heads < 1 || hiddens % heads)
        return nn_params_fail(ps, "%s: hiddens %d is not a multiple of heads %d", prefix, hiddens,
                              heads);
    char p[NN_NAME_MAX];
    m->heads = heads;
    m->hiddens = hiddens;
    if (nn_linear_init(&m->W_q, ps, nn_join(p, sizeof p, prefix, "W_q"), query_size, hiddens,
                       bias) ||
        nn_linear_init(&m->W_k, ps, nn_join(p, sizeof p, prefix, "W_k"), key_size, hiddens, bias) ||
        nn_linear_init(&m->W_v, ps, nn_join(p, sizeof p, prefix, "W_v"), value_size, hiddens,
                       bias) ||
        nn_linear_init(&m->W_o, ps, nn_join(p, sizeof p, prefix, "W_o"), hiddens, hiddens, bias))
        return -1;
    return nn_attention_init(&m->attention, heads, dropout);
}

/* The projections, then the attention core (split into heads, scaled dot-product attention per
 * head, merge: one fused op that reads and writes the heads in place), then W_o. */
ag_tensor *zoo_mha_forward(const zoo_mha *m, const nn_ctx *c, ag_tensor *queries, ag_tensor *keys,
                           ag_tensor *values, const int32_t *valid_lens, int vl_ndim,
                           ag_tensor **weights) {
    ag_tensor *q = nn_linear_forward(&m->W_q, c, queries);
    ag_tensor *k = nn_linear_forward(&m->W_k, c, keys);
    ag_tensor *v = nn_linear_forward(&m->W_v, c, values);
    ag_tensor *out = nn_attention_forward(&m->attention, c, q, k, v, valid_lens, vl_ndim, weights);
    return nn_linear_forward(&m->W_o, c, out);
}

int zoo_mha_cache_append(const zoo_mha *m, const nn_ctx *c, nn_kv_cache *kv, ag_tensor *keys,
                         ag_tensor *values) {
    if (!m || !c || !keys || !values) return -1;
    ag_tensor *k = nn_linear_forward(&m->W_k, c, keys);
    ag_tensor *v = nn_linear_forward(&m->W_v, c, values);
    return nn_kv_cache_append(kv, c->tape, k, v);
}

ag_tensor *zoo_mha_cache_attend(const zoo_mha *m, const nn_ctx *c, nn_kv_cache *kv,
                                ag_tensor *queries, const int32_t *valid_lens, int vl_ndim,
                                ag_tensor **weights) {
    if (weights) *weights = NULL;
    if (!m || !c || !kv || !queries) return NULL;
    ag_tensor *q = nn_linear_forward(&m->W_q, c, queries);
    ag_tensor *k = nn_kv_cache_keys(kv, c->tape), *v = nn_kv_cache_values(kv, c->tape);
    ag_tensor *out = nn_attention_forward(&m->attention, c, q, k, v, valid_lens, vl_ndim, weights);
    return nn_linear_forward(&m->W_o, c, out);
}

ag_tensor *zoo_mha_step(const zoo_mha *m, const nn_ctx *c, nn_kv_cache *kv, ag_tensor *x,
                        ag_tensor **weights) {
    if (weights) *weights = NULL;
    if (!x || zoo_mha_cache_append(m, c, kv, x, x)) return NULL;
    return zoo_mha_cache_attend(m, c, kv, x, NULL, 0, weights);
}
