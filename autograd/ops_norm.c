/* ops_norm.c -- fused LayerNorm, AddNorm (LayerNorm of x + dropout(y)) and inverted dropout.
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
    const ag_real *z;      /* the rows normalised: x, or add_layer_norm's x + dropout(y) */
    ag_real *dz;           /* add_layer_norm: d loss / dz, scratch for the backward */
    ag_dropmask dm;       /* add_layer_norm's dropout of y, when drop */
    bool drop;
} ln_saved;

/* Forward of rows [0, rows) of s->z into y; fills s->mean and s->rstd. */
static void ln_forward(const ln_saved *s, ag_real *y, ptrdiff_t rows, double eps) {
    const ag_real *gm = s->gamma ? s->gamma->data : NULL, *bt = s->beta ? s->beta->data : NULL;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *zr = s->z + r * s->d;
        ag_real *yr = y + r * s->d, mu = 0, var = 0;
        for (ptrdiff_t k = 0; k < s->d; k++) mu += zr[k];
        mu /= (ag_real)s->d;
        for (ptrdiff_t k = 0; k < s->d; k++) var += (zr[k] - mu) * (zr[k] - mu);
        var /= (ag_real)s->d;
        ag_real rs = 1 / (ag_real)sqrt((double)var + eps);
        s->mean[r] = mu;
        s->rstd[r] = rs;
        for (ptrdiff_t k = 0; k < s->d; k++)
            yr[k] = (zr[k] - mu) * rs * (gm ? gm[k] : 1) + (bt ? bt[k] : 0);
    }
}

/* Backward of rows [0, rows) from g: gamma's and beta's gradients accumulate; dz (when not
 * NULL) receives d loss / dz, added (accumulate) or assigned. */
static void ln_backward(const ln_saved *s, const ag_real *g0, ag_real *dz, bool accumulate,
                        ptrdiff_t rows) {
    ptrdiff_t d = s->d;
    const ag_real *gm = s->gamma ? s->gamma->data : NULL;
    ag_real *dgm = s->gamma && s->gamma->requires_grad ? s->gamma->grad : NULL;
    ag_real *dbt = s->beta && s->beta->requires_grad ? s->beta->grad : NULL;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *zr = s->z + r * d, *g = g0 + r * d;
        ag_real mu = s->mean[r], rs = s->rstd[r];
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

static void layer_norm_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const ln_saved *s = nd->saved;
    ln_backward(s, y->grad, x->requires_grad ? x->grad : NULL, true, s->d ? x->numel / s->d : 0);
}
static const ag_op layer_norm_op = {"layer_norm", layer_norm_backward};

/* add_layer_norm: dz from the LayerNorm, then dx += dz and dy += dz * M. */
static void add_layer_norm_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->in[1], *out = nd->out;
    const ln_saved *s = nd->saved;
    ln_backward(s, out->grad, s->dz, false, s->d ? x->numel / s->d : 0);
    const ag_real *restrict dz = s->dz;
    if (x->requires_grad) {
        ag_real *restrict gx = x->grad;
        for (ptrdiff_t i = 0; i < x->numel; i++) gx[i] += dz[i];
    }
    if (y->requires_grad) {
        ag_real *restrict gy = y->grad;
        if (s->drop)
            ag_dropmask_accumulate(gy, dz, y->numel, s->dm);
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

/* The checks and set-up shared by both entries: in = {x, [y], [gamma], [beta]} (n_x = 1 or 2
 * leading inputs), made contiguous; the output and the saved state (mean and rstd allocated).
 * NULL after reporting. */
static ag_tensor *ln_setup(ag_tape *t, const char *op, ag_tensor **in, int n_x, int *n_in,
                           int n_norm_dims, ag_tensor *gamma, ag_tensor *beta, ln_saved *s) {
    if (gamma) in[(*n_in)++] = gamma;
    if (beta) in[(*n_in)++] = beta;
    if (!ag_op_check(t, op, *n_in, in)) return NULL;
    ag_tensor *x = in[0];
    char sx[64], sp[64];
    if (n_norm_dims < 1 || n_norm_dims > x->ndim)
        return ag_report(t, "%s: cannot normalise the last %d axes of %s", op, n_norm_dims,
                        ag_shape_str(x, sx, sizeof sx));
    if (n_x == 2 && !ag_same_shape(in[0], in[1]))
        return ag_report(t, "%s: input %s and residual branch %s differ in shape", op,
                        ag_shape_str(in[0], sx, sizeof sx), ag_shape_str(in[1], sp, sizeof sp));
    for (int i = n_x; i < *n_in; i++) {
        if (!fits_trailing(in[i], x, n_norm_dims))
            return ag_report(t, "%s: %s %s does not match the last %d axes of input %s", op,
                            in[i] == gamma ? "weight" : "bias", ag_shape_str(in[i], sp, sizeof sp),
                            n_norm_dims, ag_shape_str(x, sx, sizeof sx));
    }
    for (int i = 0; i < *n_in; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    ag_tensor *out = ag_op_out(t, in[0]->ndim, in[0]->shape, *n_in, in);
    if (!out) return NULL;
    *s = (ln_saved){.gamma = gamma ? in[n_x] : NULL, .beta = beta ? in[*n_in - 1] : NULL};
    s->d = ag_numel(n_norm_dims, in[0]->shape + in[0]->ndim - n_norm_dims);
    ptrdiff_t rows = s->d ? in[0]->numel / s->d : 0;
    s->mean = ag_tape_alloc(t, (size_t)rows * sizeof(ag_real));
    s->rstd = ag_tape_alloc(t, (size_t)rows * sizeof(ag_real));
    return s->mean && s->rstd ? out : NULL;
}

ag_tensor *ag_layer_norm(ag_tape *t, ag_tensor *x, int n_norm_dims, ag_tensor *gamma,
                         ag_tensor *beta, double eps) {
    ag_tensor *in[3] = {x};
    int n_in = 1;
    ln_saved s;
    ag_tensor *y = ln_setup(t, "layer_norm", in, 1, &n_in, n_norm_dims, gamma, beta, &s);
    if (!y) return NULL;
    s.z = in[0]->data;
    ln_forward(&s, y->data, s.d ? y->numel / s.d : 0, eps);
    ag_node *nd = ag_op_record(t, &layer_norm_op, y, n_in, in, sizeof s);
    if (nd) *(ln_saved *)nd->saved = s;
    return y;
}

ag_tensor *ag_add_layer_norm(ag_tape *t, ag_tensor *x, ag_tensor *y, double p, bool training,
                             ag_rng *rng, int n_norm_dims, ag_tensor *gamma, ag_tensor *beta,
                             double eps) {
    if (!(p >= 0 && p <= 1))
        return ag_report(t, "add_layer_norm: dropout probability %g is outside [0, 1]", p);
    bool drop = training && p > 0;
    if (drop && !rng) return ag_report(t, "add_layer_norm: training with dropout %g needs an RNG", p);
    ag_tensor *in[4] = {x, y};
    int n_in = 2;
    ln_saved s;
    ag_tensor *out = ln_setup(t, "add_layer_norm", in, 2, &n_in, n_norm_dims, gamma, beta, &s);
    ag_real *z = out ? ag_tape_alloc(t, sizeof *z * (size_t)out->numel) : NULL;
    if (!z || (out->requires_grad && !(s.dz = ag_tape_alloc(t, sizeof *s.dz * (size_t)out->numel))))
        return NULL;
    const ag_real *restrict xs = in[0]->data, *restrict ys = in[1]->data;
    ag_real *restrict zs = z;
    if (drop) {
        s.drop = true;
        s.dm = ag_dropmask_new(p, ag_rng_next(rng));
        const ag_dropmask dm = s.dm;
        for (ptrdiff_t i = 0; i < out->numel; i++) zs[i] = ys[i] * ag_dropmask_at(&dm, (uint32_t)i) + xs[i];
    } else {
        for (ptrdiff_t i = 0; i < out->numel; i++) zs[i] = ys[i] + xs[i];
    }
    s.z = z;
    ln_forward(&s, out->data, s.d ? out->numel / s.d : 0, eps);
    ag_node *nd = ag_op_record(t, &add_layer_norm_op, out, n_in, in, sizeof s);
    if (nd) *(ln_saved *)nd->saved = s;
    return out;
}

/* ---- dropout: y = x * M, M = 0 with probability p, else 1 / (1 - p); dx += g * M ----
 * The node keeps only the mask's key: the backward recomputes M from the counter hash. */

static void dropout_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    ag_dropmask_accumulate(x->grad, y->grad, x->numel, *(const ag_dropmask *)nd->saved);
}
static const ag_op dropout_op = {"dropout", dropout_backward};

ag_tensor *ag_dropout(ag_tape *t, ag_tensor *x, double p, bool training, ag_rng *rng) {
    if (!ag_op_check(t, "dropout", 1, &x)) return NULL;
    if (!(p >= 0 && p <= 1)) return ag_report(t, "dropout: probability %g is outside [0, 1]", p);
    if (!training || p == 0) return x;
    if (!rng) return ag_report(t, "dropout: training with p = %g needs an RNG", p);
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    ag_dropmask dm = ag_dropmask_new(p, ag_rng_next(rng));
    ag_dropmask_apply(y->data, x->data, x->numel, dm, 0);
    ag_node *nd = ag_op_record(t, &dropout_op, y, 1, &x, sizeof dm);
    if (nd) *(ag_dropmask *)nd->saved = dm;
    return y;
}
