/* attention.c -- the attention cores of nn/attention.h. */
#include "nn/attention.h"

int nn_attention_init(nn_attention *a, int heads, double dropout) {
    if (heads < 1) return ag_error("nn_attention_init: heads = %d, expected >= 1", heads);
    a->heads = heads;
    return nn_dropout_init(&a->dropout, dropout);
}

ag_tensor *nn_attention_forward(const nn_attention *a, const nn_ctx *c, ag_tensor *q,
                                ag_tensor *k, ag_tensor *v, const int32_t *valid_lens,
                                int vl_ndim, ag_tensor **weights) {
    return ag_attention(c->tape, q, k, v, a->heads, valid_lens, vl_ndim, a->dropout.p,
                        c->training, c->rng, weights);
}

ag_tensor *nn_additive_scores_forward(const nn_linear *w_v, const nn_ctx *c, ag_tensor *q,
                                      ag_tensor *k) {
    if (!q) return NULL;
    ag_tensor *w = ag_reshape(c->tape, w_v->weight, AG_SHAPE(w_v->in));
    return ag_additive_scores(c->tape, q, k, w);
}
