/* ops_norm.c -- fused LayerNorm and inverted dropout.
 *
 * LayerNorm on rows of D = prod(trailing n_norm_dims) elements:
 *   mu = mean(x), var = mean((x - mu)^2) (biased), r = 1 / sqrt(var + eps), xh = (x - mu) r,
 *   y = xh * gamma + beta.
 * backward, with dxh = g * gamma:
 *   dx += r * (dxh - mean(dxh) - xh * mean(dxh * xh)),  dgamma += g * xh,  dbeta += g.
 */
#include "autograd/ag_internal.h"

#include <math.h>

typedef struct ln_saved {
    ptrdiff_t d;           /* row length */
    ag_tensor *gamma, *beta;
    ag_real *mean, *rstd;  /* per row */
} ln_saved;

static void layer_norm_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const ln_saved *s = nd->saved;
    ptrdiff_t d = s->d, rows = d ? x->numel / d : 0;
    const ag_real *gm = s->gamma ? s->gamma->data : NULL;
    ag_real *dgm = s->gamma && s->gamma->requires_grad ? s->gamma->grad : NULL;
    ag_real *dbt = s->beta && s->beta->requires_grad ? s->beta->grad : NULL;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *xr = x->data + r * d, *g = y->grad + r * d;
        ag_real mu = s->mean[r], rs = s->rstd[r];
        ag_real sum_dxh = 0, sum_dxh_xh = 0;
        for (ptrdiff_t k = 0; k < d; k++) {
            ag_real xh = (xr[k] - mu) * rs, dxh = g[k] * (gm ? gm[k] : 1);
            sum_dxh += dxh;
            sum_dxh_xh += dxh * xh;
            if (dgm) dgm[k] += g[k] * xh;
            if (dbt) dbt[k] += g[k];
        }
        if (!x->requires_grad) continue;
        ag_real m1 = sum_dxh / (ag_real)d, m2 = sum_dxh_xh / (ag_real)d;
        ag_real *gx = x->grad + r * d;
        for (ptrdiff_t k = 0; k < d; k++) {
            ag_real xh = (xr[k] - mu) * rs, dxh = g[k] * (gm ? gm[k] : 1);
            gx[k] += rs * (dxh - m1 - xh * m2);
        }
    }
}
static const ag_op layer_norm_op = {"layer_norm", layer_norm_backward};

static bool fits_trailing(const ag_tensor *p, const ag_tensor *x, int nn) {
    if (p->ndim != nn) return false;
    for (int d = 0; d < nn; d++) {
        if (p->shape[d] != x->shape[x->ndim - nn + d]) return false;
    }
    return true;
}

ag_tensor *ag_layer_norm(ag_tape *t, ag_tensor *x, int n_norm_dims, ag_tensor *gamma,
                         ag_tensor *beta, double eps) {
    ag_tensor *in[3] = {x, gamma, beta};
    int n_in = 1;
    if (gamma) in[n_in++] = gamma;
    if (beta) in[n_in++] = beta;
    if (!ag__check(t, "layer_norm", n_in, in)) return NULL;
    char sx[64], sp[64];
    if (n_norm_dims < 1 || n_norm_dims > x->ndim)
        return ag__fail(t, "layer_norm: cannot normalise the last %d axes of %s", n_norm_dims,
                        ag_shape_str(x, sx, sizeof sx));
    for (int i = 1; i < n_in; i++) {
        if (!fits_trailing(in[i], x, n_norm_dims))
            return ag__fail(t, "layer_norm: %s %s does not match the last %d axes of input %s",
                            in[i] == gamma ? "weight" : "bias", ag_shape_str(in[i], sp, sizeof sp),
                            n_norm_dims, ag_shape_str(x, sx, sizeof sx));
        in[i] = ag__contig(t, in[i]);
    }
    ag_tensor *xc = in[0] = ag__contig(t, x);
    ag_tensor *y = xc ? ag__out(t, xc->ndim, xc->shape, n_in, in) : NULL;
    if (!y) return NULL;
    ln_saved s = {.gamma = gamma ? in[1] : NULL, .beta = beta ? in[n_in - 1] : NULL};
    s.d = ag__numel(n_norm_dims, xc->shape + xc->ndim - n_norm_dims);
    ptrdiff_t rows = s.d ? xc->numel / s.d : 0;
    s.mean = ag__alloc(t, (size_t)rows * sizeof(ag_real));
    s.rstd = ag__alloc(t, (size_t)rows * sizeof(ag_real));
    if (!s.mean || !s.rstd) return NULL;
    const ag_real *gm = s.gamma ? s.gamma->data : NULL, *bt = s.beta ? s.beta->data : NULL;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *xr = xc->data + r * s.d;
        ag_real *yr = y->data + r * s.d, mu = 0, var = 0;
        for (ptrdiff_t k = 0; k < s.d; k++) mu += xr[k];
        mu /= (ag_real)s.d;
        for (ptrdiff_t k = 0; k < s.d; k++) var += (xr[k] - mu) * (xr[k] - mu);
        var /= (ag_real)s.d;
        ag_real rs = 1 / (ag_real)sqrt((double)var + eps);
        s.mean[r] = mu;
        s.rstd[r] = rs;
        for (ptrdiff_t k = 0; k < s.d; k++)
            yr[k] = (xr[k] - mu) * rs * (gm ? gm[k] : 1) + (bt ? bt[k] : 0);
    }
    ag_node *nd = ag__record(t, &layer_norm_op, y, n_in, in, sizeof(ln_saved));
    if (nd) *(ln_saved *)nd->saved = s;
    return y;
}

/* ---- dropout: y = x * mask, mask = 0 with probability p, else 1 / (1 - p); dx += g * mask ---- */

static void dropout_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const ag_real *restrict mask = *(ag_real *const *)nd->saved, *restrict g = y->grad;
    ag_real *restrict gx = x->grad;
    for (ptrdiff_t i = 0; i < x->numel; i++) gx[i] += g[i] * mask[i];
}
static const ag_op dropout_op = {"dropout", dropout_backward};

ag_tensor *ag_dropout(ag_tape *t, ag_tensor *x, double p, bool training, ag_rng *rng) {
    if (!ag__check(t, "dropout", 1, &x)) return NULL;
    if (!(p >= 0 && p <= 1)) return ag__fail(t, "dropout: probability %g is outside [0, 1]", p);
    if (!training || p == 0) return x;
    if (!rng) return ag__fail(t, "dropout: training with p = %g needs an RNG", p);
    x = ag__contig(t, x);
    ag_tensor *y = x ? ag__out(t, x->ndim, x->shape, 1, &x) : NULL;
    ag_real *mask = y ? ag__alloc(t, (size_t)x->numel * sizeof *mask) : NULL;
    if (!mask) return NULL;
    ag__dropmask dm = ag__dropmask_new(p, ag_rng_next(rng));
    ag_real *restrict ms_out = mask;
    for (ptrdiff_t i = 0; i < x->numel; i++) ms_out[i] = ag__dropmask_at(&dm, (uint32_t)i);
    const ag_real *restrict xs = x->data, *restrict ms = mask;
    ag_real *restrict ys = y->data;
    for (ptrdiff_t i = 0; i < x->numel; i++) ys[i] = xs[i] * ms[i];
    ag_node *nd = ag__record(t, &dropout_op, y, 1, &x, sizeof mask);
    if (nd) *(ag_real **)nd->saved = mask;
    return y;
}
