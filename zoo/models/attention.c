/* attention.c -- DotProductAttention, AdditiveAttention, MultiHeadAttention (d2l 11.3, 11.5). */
#include "zoo/models/attention.h"


int zoo_dot_attention_init(zoo_dot_attention *a, double dropout) {
    a->weights = NULL;
    return nn_dropout_init(&a->dropout, dropout);
}

/* weights = masked_softmax(scores); out = dropout(weights) v. */
static ag_tensor *attend(zoo_dot_attention *a, const nn_ctx *c, ag_tensor *scores,
                         ag_tensor *v, const int32_t *valid_lens, int vl_ndim) {
    a->weights = ag_masked_softmax(c->tape, scores, valid_lens, vl_ndim);
    return ag_matmul(c->tape, nn_dropout_forward(&a->dropout, c, a->weights), v);
}

ag_tensor *zoo_dot_attention_forward(zoo_dot_attention *a, const nn_ctx *c, ag_tensor *q,
                                     ag_tensor *k, ag_tensor *v, const int32_t *valid_lens,
                                     int vl_ndim) {
    return ag_attention(c->tape, q, k, v, 1, valid_lens, vl_ndim, a->dropout.p, c->training,
                        c->rng, &a->weights);
}

int zoo_additive_attention_init(zoo_additive_attention *a, nn_params *ps, const char *prefix,
                                int key_size, int query_size, int hiddens, double dropout) {
    char p[NN_NAME_MAX];
    if (nn_linear_init(&a->W_k, ps, nn_join(p, sizeof p, prefix, "W_k"), key_size, hiddens, false) ||
        nn_linear_init(&a->W_q, ps, nn_join(p, sizeof p, prefix, "W_q"), query_size, hiddens, false) ||
        nn_linear_init(&a->w_v, ps, nn_join(p, sizeof p, prefix, "w_v"), hiddens, 1, false))
        return -1;
    return zoo_dot_attention_init(&a->base, dropout);
}

ag_tensor *zoo_additive_attention_forward(zoo_additive_attention *a, const nn_ctx *c,
                                          ag_tensor *q, ag_tensor *k, ag_tensor *v,
                                          const int32_t *valid_lens, int vl_ndim) {
    ag_tape *t = c->tape;
    ag_tensor *qp = nn_linear_forward(&a->W_q, c, q), *kp = nn_linear_forward(&a->W_k, c, k);
    if (!qp || !kp) return NULL;
    /* w_v tanh(qp[b, i] + kp[b, j]) for every (i, j), fused (the (B, Tq, Tk, H) features are
     * never a tensor) */
    ag_tensor *w = ag_reshape(t, a->w_v.weight, AG_SHAPE(qp->shape[2]));
    return attend(&a->base, c, ag_additive_scores(t, qp, kp, w), v, valid_lens, vl_ndim);
}

int zoo_mha_init(zoo_mha *m, nn_params *ps, const char *prefix, int key_size, int query_size,
                 int value_size, int hiddens, int heads, double dropout, bool bias) {
    if (heads < 1 || hiddens % heads)
        return nn_params_fail(ps, "%s: hiddens %d is not a multiple of heads %d", prefix,
                              hiddens, heads);
    char p[NN_NAME_MAX];
    m->heads = heads;
    m->hiddens = hiddens;
    if (nn_linear_init(&m->W_q, ps, nn_join(p, sizeof p, prefix, "W_q"), query_size, hiddens, bias) ||
        nn_linear_init(&m->W_k, ps, nn_join(p, sizeof p, prefix, "W_k"), key_size, hiddens, bias) ||
        nn_linear_init(&m->W_v, ps, nn_join(p, sizeof p, prefix, "W_v"), value_size, hiddens, bias) ||
        nn_linear_init(&m->W_o, ps, nn_join(p, sizeof p, prefix, "W_o"), hiddens, hiddens, bias))
        return -1;
    return zoo_dot_attention_init(&m->attention, dropout);
}

/* The projections, then ag_attention (split into heads, scaled dot-product attention per head,
 * merge: one fused op that reads and writes the heads in place), then W_o. */
ag_tensor *zoo_mha_forward(zoo_mha *m, const nn_ctx *c, ag_tensor *queries, ag_tensor *keys,
                           ag_tensor *values, const int32_t *valid_lens, int vl_ndim) {
    ag_tensor *q = nn_linear_forward(&m->W_q, c, queries);
    ag_tensor *k = nn_linear_forward(&m->W_k, c, keys);
    ag_tensor *v = nn_linear_forward(&m->W_v, c, values);
    ag_tensor *out = ag_attention(c->tape, q, k, v, m->heads, valid_lens, vl_ndim,
                                  m->attention.dropout.p, c->training, c->rng, &m->attention.weights);
    return nn_linear_forward(&m->W_o, c, out);
}
