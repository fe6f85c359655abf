/* ops_norm.c -- fused LayerNorm, its row kernels (ag_op.h) and inverted dropout.
 *
 * LayerNorm on rows of D = prod(trailing n_norm_dims) elements:
 *   mu = mean(x), var = mean((x - mu)^2) (biased), r = 1 / sqrt(var + eps), xh = (x - mu) r,
 *   y = xh * gamma + beta.
 * backward, with dxh = g * gamma:
 *   dx += r * (dxh - mean(dxh) - xh * mean(dxh * xh)),  dgamma += g * xh,  dbeta += g.
 */
#include "autograd/ag_internal.h"

#include <math.h>

void ag_layer_norm_rows(const ag_real *z, ag_real *y, ptrdiff_t rows, ptrdiff_t d,
                        const ag_real *gm, const ag_real *bt, double eps, ag_real *mean,
                        ag_real *rstd) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *zr = z + r * d;
        ag_real *yr = y + r * d, mu = 0, var = 0;
        for (ptrdiff_t k = 0; k < d; k++) mu += zr[k];
        mu /= (ag_real)d;
        for (ptrdiff_t k = 0; k < d; k++) var += (zr[k] - mu) * (zr[k] - mu);
        var /= (ag_real)d;
        ag_real rs = 1 / (ag_real)sqrt((double)var + eps);
        mean[r] = mu;
        rstd[r] = rs;
        for (ptrdiff_t k = 0; k < d; k++)
            yr[k] = (zr[k] - mu) * rs * (gm ? gm[k] : 1) + (bt ? bt[k] : 0);
    }
}

void ag_layer_norm_rows_backward(const ag_real *z, const ag_real *g0, ptrdiff_t rows, ptrdiff_t d,
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

typedef struct ln_saved {
    ptrdiff_t d; /* row length */
    ag_tensor *gamma, *beta;
    ag_real *mean, *rstd; /* per row */
} ln_saved;

static const ag_real *data_or_null(const ag_tensor *p) { return p ? p->data : NULL; }
static ag_real *grad_or_null(const ag_tensor *p) { return p && p->requires_grad ? p->grad : NULL; }

static void layer_norm_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const ln_saved *s = nd->saved;
    ag_layer_norm_rows_backward(x->data, y->grad, s->d ? x->numel / s->d : 0, s->d,
                                data_or_null(s->gamma), s->mean, s->rstd, grad_or_null(s->gamma),
                                grad_or_null(s->beta), x->requires_grad ? x->grad : NULL, true);
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
    ag_tensor *in[3] = {x};
    int n_in = 1;
    if (gamma) in[n_in++] = gamma;
    if (beta) in[n_in++] = beta;
    if (!ag_op_check(t, "layer_norm", n_in, in)) return NULL;
    char sx[64], sp[64];
    if (n_norm_dims < 1 || n_norm_dims > x->ndim)
        return ag_report(t, "layer_norm: cannot normalise the last %d axes of %s", n_norm_dims,
                         ag_shape_str(x, sx, sizeof sx));
    for (int i = 1; i < n_in; i++) {
        if (!fits_trailing(in[i], x, n_norm_dims))
            return ag_report(t, "layer_norm: %s %s does not match the last %d axes of input %s",
                             in[i] == gamma ? "weight" : "bias", ag_shape_str(in[i], sp, sizeof sp),
                             n_norm_dims, ag_shape_str(x, sx, sizeof sx));
    }
    for (int i = 0; i < n_in; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    ag_tensor *y = ag_op_out(t, in[0]->ndim, in[0]->shape, n_in, in);
    if (!y) return NULL;
    ln_saved s = {.gamma = gamma ? in[1] : NULL, .beta = beta ? in[n_in - 1] : NULL};
    s.d = ag_numel(n_norm_dims, in[0]->shape + in[0]->ndim - n_norm_dims);
    ptrdiff_t rows = s.d ? in[0]->numel / s.d : 0;
    s.mean = ag_tape_alloc(t, (size_t)rows * sizeof(ag_real));
    s.rstd = ag_tape_alloc(t, (size_t)rows * sizeof(ag_real));
    if (!s.mean || !s.rstd) return NULL;
    ag_layer_norm_rows(in[0]->data, y->data, rows, s.d, data_or_null(s.gamma), data_or_null(s.beta),
                       eps, s.mean, s.rstd);
    ag_node *nd = ag_op_record(t, &layer_norm_op, y, n_in, in, sizeof s);
    if (nd) *(ln_saved *)nd->saved = s;
    return y;
}

/* ---- dropout: y = x * M, M = 0 with probability p, else 1 / (1 - p); dx += g * M ----
 * The node keeps only the mask's key: the backward recomputes M from the counter hash. */

static void dropout_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    ag_dropmask_accumulate(x->grad, y->grad, x->numel, *(const ag_dropmask *)nd->saved);
}
static const ag_op dropout_op = {"dropout", dropout_backward};

ag_tensor *ag_dropout(ag_tape *t, ag_tensor *x, double p, ag_rng *rng) {
    if (!ag_op_check(t, "dropout", 1, &x)) return NULL;
    if (!(p >= 0 && p <= 1)) return ag_report(t, "dropout: probability %g is outside [0, 1]", p);
    if (p == 0) return x;
    if (!rng) return ag_report(t, "dropout: p = %g needs an RNG (it is NULL)", p);
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    ag_dropmask dm = ag_dropmask_new(p, ag_rng_next(rng));
    ag_dropmask_apply(y->data, x->data, x->numel, dm, 0);
    ag_node *nd = ag_op_record(t, &dropout_op, y, 1, &x, sizeof dm);
    if (nd) *(ag_dropmask *)nd->saved = dm;
    return y;
}
