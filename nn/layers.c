/* layers.c -- Linear, Embedding, Dropout, ReLU (thin layers over ag ops); LayerNorm and its
 * residual form, with their fused kernels and composites, are in layer_norm.c. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"
#include "nn/quant.h"

/* ---- Linear ------------------------------------------------------------------------------ */

/* prefix.bias (l->out), PyTorch's U(-1/sqrt(in), 1/sqrt(in)). 0 or -1. */
static int add_bias(nn_linear *l, nn_params *ps, const char *prefix) {
    double k = 1.0 / sqrt((double)l->in);
    l->bias = nn_params_add(ps, prefix, "bias", AG_SHAPE(l->out), nn_init_uniform(-k, k));
    return l->bias ? 0 : -1;
}

int nn_linear_init(nn_linear *l, nn_params *ps, const char *prefix, int in, int out, bool bias) {
    if (!l)
        return nn_params_fail(ps, "nn_linear_init: layer is NULL (prefix '%s')",
                              prefix ? prefix : "(null)");
    *l = (nn_linear){.in = in, .out = out};
    if (in <= 0 || out <= 0)
        return nn_params_fail(ps, "nn_linear_init '%s': in = %d, out = %d, expected > 0",
                              prefix ? prefix : "(null)", in, out);
    /* d2l: weight Xavier-uniform; bias keeps PyTorch's U(-1/sqrt(in), 1/sqrt(in)). */
    l->weight = nn_params_add(ps, prefix, "weight", AG_SHAPE(out, in), nn_init_xavier_uniform());
    if (!l->weight) return -1;
    return bias ? add_bias(l, ps, prefix) : 0;
}

int nn_linear_init_tied(nn_linear *l, nn_params *ps, const char *prefix, ag_tensor *weight,
                        bool bias) {
    if (!l || !weight || weight->ndim != 2)
        return nn_params_fail(ps, "nn_linear_init_tied '%s': %s", prefix ? prefix : "(null)",
                              !l ? "layer is NULL" : "the weight must be a 2-D parameter");
    *l = (nn_linear){.weight = weight, .in = weight->shape[1], .out = weight->shape[0]};
    return bias ? add_bias(l, ps, prefix) : 0;
}

/* x (..., in) -> y (..., out) = x W^T + b, W (out, in), b (out). */
ag_tensor *nn_linear_forward(const nn_linear *l, const nn_ctx *c, ag_tensor *x) {
    if (!l || !c || !x) return NULL;
    ag_tensor *in[3] = {x, l->weight, l->bias};
    const nn_qweight *qw = NULL;
    const nn_bweight *bw = NULL;
    if (c->packs && !ag_op_wants_grad(c->tape, l->bias ? 3 : 2, in) &&
        nn_packs_quantized(c->packs, l->weight, &qw, &bw))
        return ag_report(c->tape, "nn_linear_forward: %s", ag_last_error());
    if (qw) return nn_qlinear_forward(c->tape, x, qw, l->bias);
    if (bw) return nn_blinear_forward(c->tape, x, bw, l->bias);
    if (c->packs && x->ndim >= 1 && x->shape[x->ndim - 1] == l->in &&
        ag_gemm_packs((int)(x->numel / l->in), l->out, l->in) &&
        !ag_op_wants_grad(c->tape, l->bias ? 3 : 2, in)) {
        const ag_packed_b *wt = nn_packs_get(c->packs, l->weight);
        return wt ? ag_linear_packed(c->tape, x, wt, l->bias) : NULL;
    }
    return ag_linear(c->tape, x, l->weight, l->bias);
}

/* ---- packed weights ---- */

/* Per weight w[i]: its float packing packed[i] or its int8 or bf16 form quant[i] / bf[i] (made
 * at first use), or neither (kept float, keep[i]). */
struct nn_packs {
    pthread_mutex_t mu;
    int n, cap;
    const ag_tensor **w;
    ag_packed_b **packed;
    nn_qweight **quant;
    nn_bweight **bf;
    bool *keep;
    nn_quant mode;
};

nn_packs *nn_packs_new(void) {
    nn_packs *p = calloc(1, sizeof *p);
    if (!p) {
        ag_error("nn_packs_new: out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void nn_packs_free(nn_packs *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        ag_packed_b_free(p->packed[i]);
        nn_qweight_free(p->quant[i]);
        nn_bweight_free(p->bf[i]);
    }
    free(p->w);
    free(p->packed);
    free(p->quant);
    free(p->bf);
    free(p->keep);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* The entry of w (a new, empty one when absent), or -1 (reported) when out of memory. Under
 * p->mu. */
static int entry(nn_packs *p, const ag_tensor *w) {
    for (int i = 0; i < p->n; i++)
        if (p->w[i] == w) return i;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        const ag_tensor **nw = realloc(p->w, sizeof *nw * (size_t)cap);
        if (nw) p->w = nw;
        ag_packed_b **np = nw ? realloc(p->packed, sizeof *np * (size_t)cap) : NULL;
        if (np) p->packed = np;
        nn_qweight **nq = np ? realloc(p->quant, sizeof *nq * (size_t)cap) : NULL;
        if (nq) p->quant = nq;
        nn_bweight **nb = nq ? realloc(p->bf, sizeof *nb * (size_t)cap) : NULL;
        if (nb) p->bf = nb;
        bool *nk = nb ? realloc(p->keep, sizeof *nk * (size_t)cap) : NULL;
        if (!nk) return ag_error("nn_packs: out of memory");
        p->keep = nk;
        p->cap = cap;
    }
    p->w[p->n] = w;
    p->packed[p->n] = NULL;
    p->quant[p->n] = NULL;
    p->bf[p->n] = NULL;
    p->keep[p->n] = false;
    return p->n++;
}

const ag_packed_b *nn_packs_get(nn_packs *p, const ag_tensor *w) {
    pthread_mutex_lock(&p->mu);
    int i = entry(p, w);
    /* W (out, in) row-major read as W^T (in x out): rows 1 apart, columns `in` apart */
    if (i >= 0 && !p->packed[i])
        p->packed[i] = ag_pack_b(w->shape[1], w->shape[0], w->data, w->stride[1], w->stride[0]);
    ag_packed_b *pb = i >= 0 ? p->packed[i] : NULL;
    pthread_mutex_unlock(&p->mu);
    return pb;
}

void nn_packs_set_quant(nn_packs *p, nn_quant mode) { p->mode = mode; }

int nn_packs_keep_float(nn_packs *p, const ag_tensor *w) {
    pthread_mutex_lock(&p->mu);
    int i = entry(p, w);
    if (i >= 0) p->keep[i] = true;
    pthread_mutex_unlock(&p->mu);
    return i >= 0 ? 0 : -1;
}

int nn_packs_quantized(nn_packs *p, const ag_tensor *w, const nn_qweight **q,
                       const nn_bweight **b) {
    *q = NULL;
    *b = NULL;
    if (p->mode == NN_QUANT_NONE || w->ndim != 2) return 0;
    pthread_mutex_lock(&p->mu);
    int i = entry(p, w), rc = i < 0 ? -1 : 0;
    if (!rc && !p->keep[i]) {
        const int out = w->shape[0], in = w->shape[1];
        if (p->mode == NN_QUANT_INT8 && !p->quant[i])
            p->quant[i] = nn_qweight_new(w->data, out, in, w->stride[0]);
        if (p->mode == NN_QUANT_BF16 && !p->bf[i])
            p->bf[i] = nn_bweight_new(w->data, out, in, w->stride[0]);
        *q = p->mode == NN_QUANT_INT8 ? p->quant[i] : NULL;
        *b = p->mode == NN_QUANT_BF16 ? p->bf[i] : NULL;
        rc = *q || *b ? 0 : -1;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* ---- Embedding --------------------------------------------------------------------------- */

int nn_embedding_init(nn_embedding *e, nn_params *ps, const char *prefix, int num, int dim) {
    if (!e)
        return nn_params_fail(ps, "nn_embedding_init: layer is NULL (prefix '%s')",
                              prefix ? prefix : "(null)");
    *e = (nn_embedding){.num = num, .dim = dim};
    if (num <= 0 || dim <= 0)
        return nn_params_fail(ps, "nn_embedding_init '%s': num = %d, dim = %d, expected > 0",
                              prefix ? prefix : "(null)", num, dim);
    e->weight = nn_params_add(ps, prefix, "weight", AG_SHAPE(num, dim), nn_init_normal(0, 1));
    return e->weight ? 0 : -1;
}

/* ids (ids_shape) -> out (ids_shape..., dim), out[i, :] = weight[ids[i], :]. */
ag_tensor *nn_embedding_forward(const nn_embedding *e, const nn_ctx *c, const int32_t *ids,
                                int ids_ndim, const int *ids_shape) {
    if (!e || !c || !ids) return NULL;
    return ag_gather_rows(c->tape, e->weight, ids, ids_ndim, ids_shape);
}

/* ---- Dropout ----------------------------------------------------------------------------- */

int nn_dropout_init(nn_dropout *d, double p) {
    if (!d) return ag_error("nn_dropout_init: layer is NULL");
    d->p = 0;
    if (!(p >= 0 && p < 1)) return ag_error("nn_dropout_init: p = %g, expected 0 <= p < 1", p);
    d->p = p;
    return 0;
}

ag_tensor *nn_dropout_forward(const nn_dropout *d, const nn_ctx *c, ag_tensor *x) {
    if (!d || !c || !x) return NULL;
    if (!c->training || d->p == 0) return x;
    if (!c->rng)
        return ag_report(c->tape,
                         "nn_dropout_forward: training with p = %g needs nn_ctx.rng (it is NULL)",
                         d->p);
    return ag_dropout(c->tape, x, d->p, c->rng);
}

/* ---- ReLU -------------------------------------------------------------------------------- */

ag_tensor *nn_relu(const nn_ctx *c, ag_tensor *x) {
    if (!c || !x) return NULL;
    return ag_relu(c->tape, x);
}
