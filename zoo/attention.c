/* attention.c -- DotProductAttention, AdditiveAttention, MultiHeadAttention (d2l 11.3, 11.5). */
#include "zoo/attention.h"

#include <math.h>

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
    if (!q || !k || !v) return NULL;
    ag_tape *t = c->tape;
    int nd = q->ndim, Tq = q->shape[nd - 2], Tk = k->shape[k->ndim - 2];
    double scale = 1 / sqrt((double)q->shape[nd - 1]);
    ag_tensor *scores = ag_scale(t, ag_matmul(t, q, ag_transpose(t, k, -1, -2)), scale);
    if (nd == 3) return attend(a, c, scores, v, valid_lens, vl_ndim);
    /* 4-D (B, h, T, d) heads: the softmax sees (B * h, Tq, Tk), the product the 4-D views */
    a->weights = ag_masked_softmax(t, ag_reshape(t, scores, AG_SHAPE(-1, Tq, Tk)), valid_lens, vl_ndim);
    ag_tensor *w = nn_dropout_forward(&a->dropout, c, a->weights);
    return ag_matmul(t, ag_reshape(t, w, AG_SHAPE(q->shape[0], q->shape[1], Tq, Tk)), v);
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
    int B = qp->shape[0], Tq = qp->shape[1], Tk = kp->shape[1], H = qp->shape[2];
    /* (B, Tq, 1, H) + (B, 1, Tk, H) -> (B, Tq, Tk, H) */
    ag_tensor *f = ag_tanh(t, ag_add(t, ag_reshape(t, qp, AG_SHAPE(B, Tq, 1, H)),
                                     ag_reshape(t, kp, AG_SHAPE(B, 1, Tk, H))));
    ag_tensor *scores = ag_reshape(t, nn_linear_forward(&a->w_v, c, f), AG_SHAPE(B, Tq, Tk));
    return attend(&a->base, c, scores, v, valid_lens, vl_ndim);
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

/* (B, T, H) -> (B, T, h, H/h) -> (B, h, T, H/h): two views, no copy (the batched products read
 * each head through its strides). */
static ag_tensor *split_heads(ag_tape *t, ag_tensor *x, int h) {
    if (!x) return NULL;
    int B = x->shape[0], T = x->shape[1], H = x->shape[2];
    return ag_permute(t, ag_reshape(t, x, AG_SHAPE(B, T, h, H / h)), (const int[]){0, 2, 1, 3});
}

/* (B, h, T, d) -> (B, T, h, d) -> (B, T, h*d): one copy, into the layout W_o reads. */
static ag_tensor *merge_heads(ag_tape *t, ag_tensor *x) {
    if (!x) return NULL;
    int B = x->shape[0], h = x->shape[1], T = x->shape[2], d = x->shape[3];
    return ag_reshape(t, ag_permute(t, x, (const int[]){0, 2, 1, 3}), AG_SHAPE(B, T, h * d));
}

/* valid lengths of row b repeated for each of its h heads (torch.repeat_interleave, axis 0). */
static const int32_t *repeat_lens(ag_tape *t, const int32_t *vl, int vl_ndim, int B, int Tq, int h) {
    if (!vl || vl_ndim == 0) return NULL;
    int per_row = vl_ndim == 2 ? Tq : 1;
    int32_t *r = ag_tape_alloc(t, sizeof *r * (size_t)B * h * per_row);
    if (!r) return NULL;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < h; k++)
            for (int q = 0; q < per_row; q++) r[((size_t)b * h + k) * per_row + q] = vl[(size_t)b * per_row + q];
    return r;
}

ag_tensor *zoo_mha_forward(zoo_mha *m, const nn_ctx *c, ag_tensor *queries, ag_tensor *keys,
                           ag_tensor *values, const int32_t *valid_lens, int vl_ndim) {
    ag_tape *t = c->tape;
    int h = m->heads;
    ag_tensor *q = split_heads(t, nn_linear_forward(&m->W_q, c, queries), h);
    ag_tensor *k = split_heads(t, nn_linear_forward(&m->W_k, c, keys), h);
    ag_tensor *v = split_heads(t, nn_linear_forward(&m->W_v, c, values), h);
    if (!q || !k || !v) return NULL;
    const int32_t *lens = repeat_lens(t, valid_lens, vl_ndim, queries->shape[0], queries->shape[1], h);
    if (valid_lens && vl_ndim && !lens) return NULL;
    ag_tensor *out = zoo_dot_attention_forward(&m->attention, c, q, k, v, lens, vl_ndim);
    return nn_linear_forward(&m->W_o, c, merge_heads(t, out));
}
