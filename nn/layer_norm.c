/* layer_norm.c -- LayerNorm, and LayerNorm of a residual sum (AddNorm): a fused kernel written
 * on autograd/ag_op.h (sharing ag_layer_norm's row kernels) and its composite of ag primitives,
 * the tested reference (tests/nn/test_fused.c). */
#include "autograd/ag_op.h"
#include "nn/internal.h"

/* ---- LayerNorm --------------------------------------------------------------------------- */

int nn_layer_norm_init(nn_layer_norm *ln, nn_params *ps, const char *prefix, int ndim,
                       const int *shape, double eps) {
    const char *p = prefix ? prefix : "(null)";
    if (!ln) return nn_params_fail(ps, "nn_layer_norm_init: layer is NULL (prefix '%s')", p);
    *ln = (nn_layer_norm){.ndim = ndim, .eps = eps};
    if (ndim < 1 || ndim > AG_MAX_DIMS || !shape)
        return nn_params_fail(ps,
                              "nn_layer_norm_init '%s': ndim = %d, expected 1 to %d "
                              "normalised dims",
                              p, ndim, AG_MAX_DIMS);
    for (int i = 0; i < ndim; i++) ln->shape[i] = shape[i];
    if (!(eps > 0))
        return nn_params_fail(ps, "nn_layer_norm_init '%s': eps = %g, expected > 0 (d2l: %g)", p,
                              eps, NN_LAYER_NORM_EPS);
    ln->weight = nn_params_add(ps, prefix, "weight", ndim, shape, nn_init_ones());
    ln->bias = nn_params_add(ps, prefix, "bias", ndim, shape, nn_init_zeros());
    return ln->weight && ln->bias ? 0 : -1;
}

/* x (..., S) with S the ndim normalised dims -> (..., S):
 * y = (x - mean_S(x)) / sqrt(var_S(x) + eps) * weight + bias, biased variance. */
ag_tensor *nn_layer_norm_forward(const nn_layer_norm *ln, const nn_ctx *c, ag_tensor *x) {
    if (!ln || !c || !x) return NULL;
    return ag_layer_norm(c->tape, x, ln->ndim, ln->weight, ln->bias, ln->eps);
}

/* ---- LayerNorm of a residual sum, fused ---------------------------------------------------
 *
 * x, y (..., S) of one shape, S the trailing n_norm_dims axes (rows of D = prod(S) elements);
 * M the dropout mask of y, as ag_dropout's for the same rng state (0 or 1 / (1 - p); no mask
 * when p = 0):
 *   z = y .* M + x                                         kept for the backward
 *   out = (z - mean(z)) / sqrt(var(z) + eps) * gamma + beta     per row (ag_layer_norm_rows)
 * Backward, G = d out:
 *   dz from the rows' backward (assigned into a scratch buffer; dgamma, dbeta accumulate)
 *   dx += dz      dy += dz .* M  (M recomputed from its counter hash, not stored)
 */

typedef struct addnorm_saved {
    ptrdiff_t d; /* row length */
    ag_tensor *gamma, *beta;
    ag_real *mean, *rstd; /* per row */
    const ag_real *z;     /* x + dropout(y) */
    ag_real *dz;          /* d loss / dz, scratch for the backward */
    ag_dropmask dm;       /* the dropout of y, when drop */
    bool drop;
} addnorm_saved;

static ag_real *grad_or_null(const ag_tensor *p) { return p && p->requires_grad ? p->grad : NULL; }

static void add_layer_norm_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->in[1], *out = nd->out;
    const addnorm_saved *s = nd->saved;
    ag_layer_norm_rows_backward(s->z, out->grad, s->d ? x->numel / s->d : 0, s->d,
                                s->gamma ? s->gamma->data : NULL, s->mean, s->rstd,
                                grad_or_null(s->gamma), grad_or_null(s->beta), s->dz, false);
    const ag_real *restrict dz = s->dz;
    if (x->requires_grad) {
        ag_real *restrict gx = x->grad;
        for (ptrdiff_t i = 0; i < x->numel; i++) gx[i] += dz[i];
    }
    if (y->requires_grad) {
        ag_real *restrict gy = y->grad;
        if (s->drop) ag_dropmask_accumulate(gy, dz, y->numel, s->dm);
        else
            for (ptrdiff_t i = 0; i < y->numel; i++) gy[i] += dz[i];
    }
}
static const ag_op add_layer_norm_op = {"add_layer_norm", add_layer_norm_backward};

static bool fits_trailing(const ag_tensor *p, const ag_tensor *x, int nn) {
    if (p->ndim != nn) return false;
    for (int d = 0; d < nn; d++) {
        if (p->shape[d] != x->shape[x->ndim - nn + d]) return false;
    }
    return true;
}

/* LayerNorm(x + dropout(y)) over the trailing n_norm_dims axes; gamma, beta may be NULL.
 * p = 0: no dropout (the nn forward passes 0 in eval). NULL after reporting. */
static ag_tensor *add_layer_norm_fused(ag_tape *t, ag_tensor *x, ag_tensor *y, double p,
                                       ag_rng *rng, int n_norm_dims, ag_tensor *gamma,
                                       ag_tensor *beta, double eps) {
    if (!(p >= 0 && p <= 1))
        return ag_report(t, "add_layer_norm: dropout probability %g is outside [0, 1]", p);
    bool drop = p > 0;
    if (drop && !rng)
        return ag_report(t,
                         "add_layer_norm: dropout %g in training needs an RNG (nn_ctx.rng is "
                         "NULL)",
                         p);
    ag_tensor *in[4] = {x, y};
    int n_in = 2;
    if (gamma) in[n_in++] = gamma;
    if (beta) in[n_in++] = beta;
    if (!ag_op_check(t, "add_layer_norm", n_in, in)) return NULL;
    char sx[64], sp[64];
    if (n_norm_dims < 1 || n_norm_dims > x->ndim)
        return ag_report(t, "add_layer_norm: cannot normalise the last %d axes of %s", n_norm_dims,
                         ag_shape_str(x, sx, sizeof sx));
    if (!ag_same_shape(x, y))
        return ag_report(t, "add_layer_norm: input %s and residual branch %s differ in shape",
                         ag_shape_str(x, sx, sizeof sx), ag_shape_str(y, sp, sizeof sp));
    for (int i = 2; i < n_in; i++) {
        if (!fits_trailing(in[i], x, n_norm_dims))
            return ag_report(t, "add_layer_norm: %s %s does not match the last %d axes of input %s",
                             in[i] == gamma ? "weight" : "bias", ag_shape_str(in[i], sp, sizeof sp),
                             n_norm_dims, ag_shape_str(x, sx, sizeof sx));
    }
    for (int i = 0; i < n_in; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    ag_tensor *out = ag_op_out(t, in[0]->ndim, in[0]->shape, n_in, in);
    if (!out) return NULL;
    addnorm_saved s = {.gamma = gamma ? in[2] : NULL, .beta = beta ? in[n_in - 1] : NULL};
    s.d = ag_numel(n_norm_dims, in[0]->shape + in[0]->ndim - n_norm_dims);
    ptrdiff_t rows = s.d ? out->numel / s.d : 0;
    s.mean = ag_tape_alloc(t, (size_t)rows * sizeof(ag_real));
    s.rstd = ag_tape_alloc(t, (size_t)rows * sizeof(ag_real));
    ag_real *z = s.mean && s.rstd ? ag_tape_alloc(t, sizeof *z * (size_t)out->numel) : NULL;
    if (!z || (out->requires_grad && !(s.dz = ag_tape_alloc(t, sizeof *s.dz * (size_t)out->numel))))
        return NULL;
    const ag_real *restrict xs = in[0]->data, *restrict ys = in[1]->data;
    ag_real *restrict zs = z;
    if (drop) {
        s.drop = true;
        s.dm = ag_dropmask_new(p, ag_rng_next(rng));
        const ag_dropmask dm = s.dm;
        for (ptrdiff_t i = 0; i < out->numel; i++)
            zs[i] = ys[i] * ag_dropmask_at(&dm, (uint32_t)i) + xs[i];
    } else {
        for (ptrdiff_t i = 0; i < out->numel; i++) zs[i] = ys[i] + xs[i];
    }
    s.z = z;
    ag_layer_norm_rows(z, out->data, rows, s.d, s.gamma ? s.gamma->data : NULL,
                       s.beta ? s.beta->data : NULL, eps, s.mean, s.rstd);
    ag_node *nd = ag_op_record(t, &add_layer_norm_op, out, n_in, in, sizeof s);
    if (nd) *(addnorm_saved *)nd->saved = s;
    return out;
}

ag_tensor *nn_layer_norm_add_forward(const nn_layer_norm *ln, const nn_dropout *drop,
                                     const nn_ctx *c, ag_tensor *x, ag_tensor *y) {
    if (!ln || !drop || !c) return NULL;
    return add_layer_norm_fused(c->tape, x, y, c->training ? drop->p : 0, c->rng, ln->ndim,
                                ln->weight, ln->bias, ln->eps);
}

/* The same from primitives: nn_layer_norm_forward(ag_add(nn_dropout_forward(y), x)). */
ag_tensor *nn_layer_norm_add_composite(const nn_layer_norm *ln, const nn_dropout *drop,
                                       const nn_ctx *c, ag_tensor *x, ag_tensor *y) {
    if (!ln || !drop || !c || !x || !y) return NULL;
    if (!ag_same_shape(x, y)) {
        char sx[64], sy[64];
        return ag_report(c->tape,
                         "add_layer_norm_composite: input %s and residual branch %s "
                         "differ in shape",
                         ag_shape_str(x, sx, sizeof sx), ag_shape_str(y, sy, sizeof sy));
    }
    return nn_layer_norm_forward(ln, c, ag_add(c->tape, nn_dropout_forward(drop, c, y), x));
}
