/* layers.c -- Linear, Embedding, LayerNorm, Dropout, ReLU (thin layers over fused ag ops). */
#include <math.h>

#include "nn/internal.h"

/* ---- Linear ------------------------------------------------------------------------------ */

int nn_linear_init(nn_linear *l, nn_params *ps, const char *prefix, int in, int out, bool bias)
{
    if (!l) return nn_params_fail(ps, "nn_linear_init: layer is NULL (prefix '%s')",
                                  prefix ? prefix : "(null)");
    *l = (nn_linear){.in = in, .out = out};
    if (in <= 0 || out <= 0)
        return nn_params_fail(ps, "nn_linear_init '%s': in = %d, out = %d, expected > 0",
                              prefix ? prefix : "(null)", in, out);
    /* d2l: weight Xavier-uniform; bias keeps PyTorch's U(-1/sqrt(in), 1/sqrt(in)). */
    l->weight = nn_params_add(ps, prefix, "weight", AG_SHAPE(out, in), nn_init_xavier_uniform());
    if (!l->weight) return -1;
    if (bias) {
        double k = 1.0 / sqrt((double)in);
        l->bias = nn_params_add(ps, prefix, "bias", AG_SHAPE(out), nn_init_uniform(-k, k));
        if (!l->bias) return -1;
    }
    return 0;
}

/* x (..., in) -> y (..., out) = x W^T + b, W (out, in), b (out). */
ag_tensor *nn_linear_forward(const nn_linear *l, const nn_ctx *c, ag_tensor *x)
{
    if (!l || !c || !x) return NULL;
    return ag_linear(c->tape, x, l->weight, l->bias);
}

/* ---- Embedding --------------------------------------------------------------------------- */

int nn_embedding_init(nn_embedding *e, nn_params *ps, const char *prefix, int num, int dim)
{
    if (!e) return nn_params_fail(ps, "nn_embedding_init: layer is NULL (prefix '%s')",
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
                                int ids_ndim, const int *ids_shape)
{
    if (!e || !c || !ids) return NULL;
    return ag_gather_rows(c->tape, e->weight, ids, ids_ndim, ids_shape);
}

/* ---- LayerNorm --------------------------------------------------------------------------- */

int nn_layer_norm_init(nn_layer_norm *ln, nn_params *ps, const char *prefix, int ndim,
                       const int *shape, double eps)
{
    const char *p = prefix ? prefix : "(null)";
    if (!ln) return nn_params_fail(ps, "nn_layer_norm_init: layer is NULL (prefix '%s')", p);
    *ln = (nn_layer_norm){.ndim = ndim, .eps = eps};
    if (ndim < 1 || ndim > AG_MAX_DIMS || !shape)
        return nn_params_fail(ps, "nn_layer_norm_init '%s': ndim = %d, expected 1 to %d "
                                  "normalised dims", p, ndim, AG_MAX_DIMS);
    for (int i = 0; i < ndim; i++) ln->shape[i] = shape[i];
    if (!(eps > 0))
        return nn_params_fail(ps, "nn_layer_norm_init '%s': eps = %g, expected > 0 (d2l: %g)",
                              p, eps, NN_LAYER_NORM_EPS);
    ln->weight = nn_params_add(ps, prefix, "weight", ndim, shape, nn_init_ones());
    ln->bias = nn_params_add(ps, prefix, "bias", ndim, shape, nn_init_zeros());
    return ln->weight && ln->bias ? 0 : -1;
}

/* x (..., S) with S the ndim normalised dims -> (..., S):
 * y = (x - mean_S(x)) / sqrt(var_S(x) + eps) * weight + bias, biased variance. */
ag_tensor *nn_layer_norm_forward(const nn_layer_norm *ln, const nn_ctx *c, ag_tensor *x)
{
    if (!ln || !c || !x) return NULL;
    return ag_layer_norm(c->tape, x, ln->ndim, ln->weight, ln->bias, ln->eps);
}

/* ---- Dropout ----------------------------------------------------------------------------- */

int nn_dropout_init(nn_dropout *d, double p)
{
    if (!d) return ag_error("nn_dropout_init: layer is NULL");
    d->p = 0;
    if (!(p >= 0 && p < 1))
        return ag_error("nn_dropout_init: p = %g, expected 0 <= p < 1", p);
    d->p = p;
    return 0;
}

ag_tensor *nn_dropout_forward(const nn_dropout *d, const nn_ctx *c, ag_tensor *x)
{
    if (!d || !c || !x) return NULL;
    if (!c->training || d->p == 0) return x;
    if (!c->rng)
        return ag_report(c->tape, "nn_dropout_forward: training with p = %g needs nn_ctx.rng (it is NULL)",
                                d->p);
    return ag_dropout(c->tape, x, d->p, true, c->rng);
}

/* ---- ReLU -------------------------------------------------------------------------------- */

ag_tensor *nn_relu(const nn_ctx *c, ag_tensor *x)
{
    if (!c || !x) return NULL;
    return ag_relu(c->tape, x);
}

ag_tensor *nn_layer_norm_add_forward(const nn_layer_norm *ln, const nn_dropout *drop,
                                     const nn_ctx *c, ag_tensor *x, ag_tensor *y) {
    return ag_add_layer_norm(c->tape, x, y, drop->p, c->training, c->rng, ln->ndim, ln->weight,
                             ln->bias, ln->eps);
}
