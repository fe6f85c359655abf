/* layer_norm.c -- LayerNorm and LayerNorm of a residual sum (AddNorm): the layers, their fused
 * kernels written on the public op API autograd/ag_op.h (one pair of row kernels serves both),
 * and beside each its composite of ag primitives, the tested reference (tests/nn/test_fused.c,
 * tests/nn/test_nn_gradcheck.c).
 *
 * LayerNorm on rows of D = prod(the trailing n_norm_dims axes) elements:
 *   mu = mean(x), var = mean((x - mu)^2) (biased), r = 1 / sqrt(var + eps), xh = (x - mu) r,
 *   y = xh * gamma + beta.
 * backward, with dxh = g * gamma:
 *   dx += r * (dxh - mean(dxh) - xh * mean(dxh * xh)),  dgamma += g * xh,  dbeta += g.
 */
#include <math.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"

/* ---- the row kernels ----------------------------------------------------------------------
 * z holds `rows` contiguous rows of d elements; gamma and beta hold d elements each, or are
 * NULL (scale 1, shift 0); mean and rstd hold one value per row.
 *   forward:  mean[r] = mean(z_r), rstd[r] = 1 / sqrt(var(z_r) + eps) (biased variance),
 *             y_r = (z_r - mean[r]) rstd[r] * gamma + beta
 *   backward, from g = d loss / dy, with xh = (z - mean) rstd and dxh = g * gamma:
 *             dgamma += sum_r g xh and dbeta += sum_r g (each skipped when NULL);
 *             dz = rstd (dxh - mean(dxh) - xh mean(dxh xh)), added into dz when accumulate
 *             (an input's gradient), assigned when not (a scratch buffer); dz NULL: skipped. */

/* The forward, LN_RB rows at a time: each row's mean and variance are its own sums in order of
 * k, as one row alone would make them (the same bits), but the rows' chains of additions
 * interleave, so they advance together instead of one addition's latency per element. */
enum { LN_RB = 8 };
static void ln_rows(const ag_real *z, ag_real *y, ptrdiff_t rows, ptrdiff_t d, const ag_real *gm,
                    const ag_real *bt, double eps, ag_real *mean, ag_real *rstd) {
    for (ptrdiff_t r0 = 0; r0 < rows; r0 += LN_RB) {
        const int nb = rows - r0 < LN_RB ? (int)(rows - r0) : LN_RB;
        const ag_real *z0 = z + r0 * d;
        ag_real mu[LN_RB] = {0}, var[LN_RB] = {0};
        for (ptrdiff_t k = 0; k < d; k++)
            for (int i = 0; i < nb; i++) mu[i] += z0[i * d + k];
        for (int i = 0; i < nb; i++) mu[i] /= (ag_real)d;
        for (ptrdiff_t k = 0; k < d; k++)
            for (int i = 0; i < nb; i++) {
                const ag_real c = z0[i * d + k] - mu[i];
                var[i] += c * c;
            }
        for (int i = 0; i < nb; i++) {
            const ag_real *zr = z0 + i * d;
            ag_real *yr = y + (r0 + i) * d, m = mu[i];
            ag_real rs = 1 / (ag_real)sqrt((double)(var[i] / (ag_real)d) + eps);
            mean[r0 + i] = m;
            rstd[r0 + i] = rs;
            for (ptrdiff_t k = 0; k < d; k++)
                yr[k] = (zr[k] - m) * rs * (gm ? gm[k] : 1) + (bt ? bt[k] : 0);
        }
    }
}

static void ln_rows_backward(const ag_real *z, const ag_real *g0, ptrdiff_t rows, ptrdiff_t d,
                             const ag_real *gm, const ag_real *mean, const ag_real *rstd,
                             ag_real *dgm, ag_real *dbt, ag_real *dz, bool accumulate) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *zr = z + r * d, *g = g0 + r * d;
        ag_real mu = mean[r], rs = rstd[r];
        ag_real sum_dxh = 0, sum_dxh_xh = 0;
        for (ptrdiff_t k = 0; k < d; k++) {
            ag_real xh = (zr[k] - mu) * rs, dxh = g[k] * (gm ? gm[k] : 1);
            sum_dxh += dxh;
            sum_dxh_xh += dxh * xh;
            if (dgm) dgm[k] += g[k] * xh;
            if (dbt) dbt[k] += g[k];
        }
        if (!dz) continue;
        ag_real m1 = sum_dxh / (ag_real)d, m2 = sum_dxh_xh / (ag_real)d;
        ag_real *gz = dz + r * d;
        if (accumulate)
            for (ptrdiff_t k = 0; k < d; k++)
                gz[k] += rs * (g[k] * (gm ? gm[k] : 1) - m1 - (zr[k] - mu) * rs * m2);
        else
            for (ptrdiff_t k = 0; k < d; k++)
                gz[k] = rs * (g[k] * (gm ? gm[k] : 1) - m1 - (zr[k] - mu) * rs * m2);
    }
}

static const ag_real *data_or_null(const ag_tensor *p) { return p ? p->data : NULL; }
static ag_real *grad_or_null(const ag_tensor *p) { return p && p->requires_grad ? p->grad : NULL; }

static bool fits_trailing(const ag_tensor *p, const ag_tensor *x, int nn) {
    if (p->ndim != nn) return false;
    for (int d = 0; d < nn; d++) {
        if (p->shape[d] != x->shape[x->ndim - nn + d]) return false;
    }
    return true;
}

/* Checks of both fused ops: n_norm_dims fits x, and gamma, beta (in[first..n_in)) have the
 * shape of x's last n_norm_dims axes. False after reporting. */
static bool check_norm_args(ag_tape *t, const char *op, ag_tensor *x, int n_norm_dims,
                            ag_tensor *const *in, int first, int n_in, const ag_tensor *gamma) {
    char sx[64], sp[64];
    if (n_norm_dims < 1 || n_norm_dims > x->ndim) {
        ag_report(t, "%s: cannot normalise the last %d axes of %s", op, n_norm_dims,
                  ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    for (int i = first; i < n_in; i++) {
        if (!fits_trailing(in[i], x, n_norm_dims)) {
            ag_report(t, "%s: %s %s does not match the last %d axes of input %s", op,
                      in[i] == gamma ? "weight" : "bias", ag_shape_str(in[i], sp, sizeof sp),
                      n_norm_dims, ag_shape_str(x, sx, sizeof sx));
            return false;
        }
    }
    return true;
}

/* ---- LayerNorm, fused ---- */

typedef struct ln_saved {
    ptrdiff_t d; /* row length */
    ag_tensor *gamma, *beta;
    ag_real *mean, *rstd; /* per row */
} ln_saved;

static void layer_norm_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const ln_saved *s = nd->saved;
    ln_rows_backward(x->data, y->grad, s->d ? x->numel / s->d : 0, s->d, data_or_null(s->gamma),
                     s->mean, s->rstd, grad_or_null(s->gamma), grad_or_null(s->beta),
                     x->requires_grad ? x->grad : NULL, true);
}
static const ag_op layer_norm_op = {"layer_norm", layer_norm_backward};

/* LayerNorm over the trailing n_norm_dims axes of x; gamma, beta of those axes' shape or NULL. */
static ag_tensor *layer_norm_fused(ag_tape *t, ag_tensor *x, int n_norm_dims, ag_tensor *gamma,
                                   ag_tensor *beta, double eps) {
    ag_tensor *in[3] = {x};
    int n_in = 1;
    if (gamma) in[n_in++] = gamma;
    if (beta) in[n_in++] = beta;
    if (!ag_op_check(t, "layer_norm", n_in, in) ||
        !check_norm_args(t, "layer_norm", x, n_norm_dims, in, 1, n_in, gamma))
        return NULL;
    for (int i = 0; i < n_in; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    ag_tensor *y = ag_op_out(t, in[0]->ndim, in[0]->shape, n_in, in);
    if (!y) return NULL;
    ln_saved s = {.gamma = gamma ? in[1] : NULL, .beta = beta ? in[n_in - 1] : NULL};
    s.d = ag_numel(n_norm_dims, in[0]->shape + in[0]->ndim - n_norm_dims);
    ptrdiff_t rows = s.d ? in[0]->numel / s.d : 0;
    s.mean = ag_tape_alloc(t, (size_t)(rows ? rows : 1) * sizeof(ag_real));
    s.rstd = ag_tape_alloc(t, (size_t)(rows ? rows : 1) * sizeof(ag_real));
    if (!s.mean || !s.rstd) return NULL;
    ln_rows(in[0]->data, y->data, rows, s.d, data_or_null(s.gamma), data_or_null(s.beta), eps,
            s.mean, s.rstd);
    ag_node *nd = ag_op_record(t, &layer_norm_op, y, n_in, in, sizeof s);
    if (nd) *(ln_saved *)nd->saved = s;
    return y;
}

/* ---- LayerNorm, the layer --------------------------------------------------------------- */

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
    return layer_norm_fused(c->tape, x, ln->ndim, ln->weight, ln->bias, ln->eps);
}

/* The same from primitives, x viewed as (R, D):
 *   mu = mean(x, 1), xc = x - mu, var = mean(xc xc, 1), xh = xc / sqrt(var + eps),
 *   y = reshape(xh) * weight + bias   (weight, bias skipped when NULL). */
ag_tensor *nn_layer_norm_composite(const nn_layer_norm *ln, const nn_ctx *c, ag_tensor *x) {
    if (!ln || !c || !x) return NULL;
    ag_tape *t = c->tape;
    ag_tensor *in[3] = {x, ln->weight, ln->bias};
    int n_in = 1;
    if (ln->weight) in[n_in++] = ln->weight;
    if (ln->bias) in[n_in++] = ln->bias;
    if (!ag_op_check(t, "layer_norm_composite", n_in, in) ||
        !check_norm_args(t, "layer_norm_composite", x, ln->ndim, in, 1, n_in, ln->weight))
        return NULL;
    const int lead = x->ndim - ln->ndim;
    const int flat[2] = {(int)ag_numel(lead, x->shape), (int)ag_numel(ln->ndim, x->shape + lead)};
    ag_tensor *x2 = ag_reshape(t, x, 2, flat);
    ag_tensor *xc = ag_sub(t, x2, ag_mean(t, x2, 1, true));
    ag_tensor *var = ag_mean(t, ag_mul(t, xc, xc), 1, true);
    ag_tensor *xh = ag_div(t, xc, ag_sqrt(t, ag_add_scalar(t, var, ln->eps)));
    ag_tensor *y = ag_reshape(t, xh, x->ndim, x->shape);
    if (ln->weight) y = ag_mul(t, y, ln->weight);
    if (ln->bias) y = ag_add(t, y, ln->bias);
    return y;
}

/* ---- LayerNorm of a residual sum, fused ---------------------------------------------------
 *
 * x, y (..., S) of one shape, S the trailing n_norm_dims axes (rows of D = prod(S) elements);
 * M the dropout mask of y, as ag_dropout's for the same rng state (0 or 1 / (1 - p); no mask
 * when p = 0):
 *   z = y .* M + x                                         kept for the backward
 *   out = (z - mean(z)) / sqrt(var(z) + eps) * gamma + beta     per row (ln_rows)
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

static void add_layer_norm_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->in[1], *out = nd->out;
    const addnorm_saved *s = nd->saved;
    ln_rows_backward(s->z, out->grad, s->d ? x->numel / s->d : 0, s->d,
                     s->gamma ? s->gamma->data : NULL, s->mean, s->rstd, grad_or_null(s->gamma),
                     grad_or_null(s->beta), s->dz, false);
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
    if (!ag_same_shape(x, y))
        return ag_report(t, "add_layer_norm: input %s and residual branch %s differ in shape",
                         ag_shape_str(x, sx, sizeof sx), ag_shape_str(y, sp, sizeof sp));
    if (!check_norm_args(t, "add_layer_norm", x, n_norm_dims, in, 2, n_in, gamma)) return NULL;
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
    ln_rows(z, out->data, rows, s.d, s.gamma ? s.gamma->data : NULL, s.beta ? s.beta->data : NULL,
            eps, s.mean, s.rstd);
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

/* The same from primitives: nn_layer_norm_composite(ag_add(nn_dropout_forward(y), x)). */
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
    return nn_layer_norm_composite(ln, c, ag_add(c->tape, nn_dropout_forward(drop, c, y), x));
}
