/* batchnorm.c -- BatchNorm1d: one op on autograd/ag_op.h (forward and backward, training and
 * eval), the running-statistics update, and beside them the same layer composed of ag
 * primitives, the tested reference (math and names in nn/batchnorm.h; tests in
 * tests/nn/test_batchnorm.c). */
#include <math.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"

int nn_batch_norm1d_init(nn_batch_norm1d *bn, nn_params *ps, const char *prefix, int num_features,
                         double eps, double momentum) {
    const char *p = prefix ? prefix : "(null)";
    if (!bn) return nn_params_fail(ps, "nn_batch_norm1d_init: layer is NULL (prefix '%s')", p);
    *bn = (nn_batch_norm1d){.num_features = num_features, .eps = eps, .momentum = momentum};
    if (num_features <= 0)
        return nn_params_fail(ps, "nn_batch_norm1d_init '%s': num_features = %d, expected > 0", p,
                              num_features);
    if (!(eps > 0))
        return nn_params_fail(ps,
                              "nn_batch_norm1d_init '%s': eps = %g, expected > 0 "
                              "(PyTorch: %g)",
                              p, eps, NN_BATCH_NORM_EPS);
    if (!(momentum >= 0 && momentum <= 1))
        return nn_params_fail(ps,
                              "nn_batch_norm1d_init '%s': momentum = %g, expected 0 to 1 "
                              "(PyTorch: %g)",
                              p, momentum, NN_BATCH_NORM_MOMENTUM);
    const int C = num_features;
    bn->weight = nn_params_add(ps, prefix, "weight", AG_SHAPE(C), nn_init_ones());
    bn->bias = nn_params_add(ps, prefix, "bias", AG_SHAPE(C), nn_init_zeros());
    bn->running_mean =
        nn_params_add_buffer(ps, prefix, "running_mean", AG_SHAPE(C), nn_init_zeros());
    bn->running_var = nn_params_add_buffer(ps, prefix, "running_var", AG_SHAPE(C), nn_init_ones());
    bn->num_batches_tracked =
        nn_params_add_buffer(ps, prefix, "num_batches_tracked", 0, NULL, nn_init_zeros());
    return bn->weight && bn->bias && bn->running_mean && bn->running_var && bn->num_batches_tracked
               ? 0
               : -1;
}

/* ---- the op ----
 *
 * x (N, C, L) (L = 1 for a 2-D input), element x[n, c, l] at (n C + c) L + l; weight w and
 * bias b (C). Per channel c, over its M = N L elements, with the statistics (mean_c, rstd_c):
 * the batch's in training (rstd_c = 1 / sqrt(var_c + eps), biased variance), the running
 * ones in eval (rstd_c = 1 / sqrt(running_var_c + eps)):
 *   xh = (x - mean_c) rstd_c          y = xh w_c + b_c
 * Backward, g = dy, S_c = sum over the channel of g, P_c = sum of g xh:
 *   dw_c += P_c          db_c += S_c
 *   training: dx += w_c rstd_c (g - S_c / M - xh P_c / M)   (through mean_c and var_c)
 *   eval:     dx += w_c rstd_c g                            (the statistics are constants)
 * Sums are accumulated in double.
 */

typedef struct bn_saved {
    ag_real *mean, *rstd; /* (C) the statistics used */
    double *sums;         /* (2C) scratch for the backward: S, then P */
    bool batch;           /* the batch's statistics (training) */
} bn_saved;

/* (N, C, L) of x: L = 1 for a 2-D input. */
static void bn_dims(const ag_tensor *x, ptrdiff_t *N, int *C, ptrdiff_t *L) {
    *N = x->shape[0];
    *C = x->shape[1];
    *L = x->ndim == 3 ? x->shape[2] : 1;
}

static void bn_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *w = nd->in[1], *b = nd->in[2], *y = nd->out;
    const bn_saved *s = nd->saved;
    ptrdiff_t N, L;
    int C;
    bn_dims(x, &N, &C, &L);
    const double M = (double)N * (double)L;
    double *S = s->sums, *P = s->sums + C;
    for (int c = 0; c < C; c++) S[c] = P[c] = 0;
    for (ptrdiff_t n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const ag_real *xr = x->data + (n * C + c) * L, *g = y->grad + (n * C + c) * L;
            const ag_real mu = s->mean[c], rs = s->rstd[c];
            double sg = 0, sgx = 0;
            for (ptrdiff_t l = 0; l < L; l++) {
                sg += g[l];
                sgx += g[l] * ((xr[l] - mu) * rs);
            }
            S[c] += sg;
            P[c] += sgx;
        }
    if (w->grad)
        for (int c = 0; c < C; c++) w->grad[c] += (ag_real)P[c];
    if (b->grad)
        for (int c = 0; c < C; c++) b->grad[c] += (ag_real)S[c];
    if (!x->grad) return;
    for (ptrdiff_t n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const ag_real *restrict xr = x->data + (n * C + c) * L;
            const ag_real *restrict g = y->grad + (n * C + c) * L;
            ag_real *restrict d = x->grad + (n * C + c) * L;
            const ag_real mu = s->mean[c], rs = s->rstd[c], k = w->data[c] * rs;
            const ag_real ms = s->batch ? (ag_real)(S[c] / M) : 0;
            const ag_real mp = s->batch ? (ag_real)(P[c] / M) : 0;
            for (ptrdiff_t l = 0; l < L; l++) d[l] += k * (g[l] - ms - (xr[l] - mu) * rs * mp);
        }
}
static const ag_op bn_op = {"batch_norm1d", bn_backward};

/* The batch statistics of x into mean, rstd (C) and the unbiased variance into uvar (C),
 * two passes in double; acc is (C) scratch. */
static void batch_stats(const ag_tensor *x, double eps, ag_real *mean, ag_real *rstd, double *uvar,
                        double *acc) {
    ptrdiff_t N, L;
    int C;
    bn_dims(x, &N, &C, &L);
    const double M = (double)N * (double)L;
    for (int c = 0; c < C; c++) acc[c] = 0;
    for (ptrdiff_t n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const ag_real *xr = x->data + (n * C + c) * L;
            double sx = 0;
            for (ptrdiff_t l = 0; l < L; l++) sx += xr[l];
            acc[c] += sx;
        }
    for (int c = 0; c < C; c++) {
        uvar[c] = acc[c] / M; /* the mean, for now */
        acc[c] = 0;
    }
    for (ptrdiff_t n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const ag_real *xr = x->data + (n * C + c) * L;
            const double mu = uvar[c];
            double sq = 0;
            for (ptrdiff_t l = 0; l < L; l++) sq += (xr[l] - mu) * (xr[l] - mu);
            acc[c] += sq;
        }
    for (int c = 0; c < C; c++) {
        mean[c] = (ag_real)uvar[c];
        rstd[c] = (ag_real)(1 / sqrt(acc[c] / M + eps));
        uvar[c] = acc[c] / (M - 1);
    }
}

/* The checks of the fused op and of the composite: x (N, C) or (N, C, L) with bn's C
 * channels, the running statistics allocated, more than one value per channel in training.
 * False after reporting. */
static bool bn_check(const nn_batch_norm1d *bn, const nn_ctx *c, const char *op, ag_tensor *x) {
    ag_tape *t = c->tape;
    ag_tensor *in[3] = {x, bn->weight, bn->bias};
    if (!ag_op_check(t, op, 3, in)) return false;
    char sx[64], sw[64];
    if ((x->ndim != 2 && x->ndim != 3) || x->shape[1] != bn->num_features) {
        ag_report(t,
                  "%s: input %s with weight %s; expected (N, C) or (N, C, L) with "
                  "C = %d channels",
                  op, ag_shape_str(x, sx, sizeof sx), ag_shape_str(bn->weight, sw, sizeof sw),
                  bn->num_features);
        return false;
    }
    ag_tensor *rm = bn->running_mean, *rv = bn->running_var, *nbt = bn->num_batches_tracked;
    if (!rm || !rv || !nbt || !rm->data || !rv->data || !nbt->data) {
        ag_report(t, "%s: the running statistics are not allocated (store not finalized?)", op);
        return false;
    }
    ptrdiff_t N, L;
    int C;
    bn_dims(x, &N, &C, &L);
    if (c->training && N * L < 2) {
        ag_report(t, "%s: training needs more than 1 value per channel, input %s", op,
                  ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    return true;
}

ag_tensor *nn_batch_norm1d_forward(const nn_batch_norm1d *bn, const nn_ctx *c, ag_tensor *x) {
    static const char op[] = "batch_norm1d";
    if (!bn || !c || !x) return NULL;
    if (!bn_check(bn, c, op, x)) return NULL;
    ag_tape *t = c->tape;
    ag_tensor *in[3] = {x, bn->weight, bn->bias};
    ag_tensor *rm = bn->running_mean, *rv = bn->running_var, *nbt = bn->num_batches_tracked;
    ptrdiff_t N, L;
    int C;
    bn_dims(x, &N, &C, &L);
    const bool batch = c->training;
    for (int k = 0; k < 3; k++)
        if (!(in[k] = ag_op_contig(t, in[k]))) return NULL;
    x = in[0];
    ag_tensor *y = ag_op_out(t, x->ndim, x->shape, 3, in);
    bn_saved s = {.batch = batch};
    s.mean = y ? ag_tape_alloc(t, sizeof(ag_real) * 2 * (size_t)C) : NULL;
    s.sums = s.mean ? ag_tape_alloc(t, sizeof(double) * 2 * (size_t)C) : NULL;
    if (!s.sums) return NULL;
    s.rstd = s.mean + C;
    double *uvar = s.sums, *acc = s.sums + C; /* the forward's scratch; the backward's later */
    if (batch) {
        batch_stats(x, bn->eps, s.mean, s.rstd, uvar, acc);
    } else {
        for (int k = 0; k < C; k++) {
            s.mean[k] = rm->data[k];
            s.rstd[k] = (ag_real)(1 / sqrt((double)rv->data[k] + bn->eps));
        }
    }
    const ag_real *w = in[1]->data, *b = in[2]->data;
    for (ptrdiff_t n = 0; n < N; n++)
        for (int k = 0; k < C; k++) {
            const ag_real *restrict xr = x->data + (n * C + k) * L;
            ag_real *restrict yr = y->data + (n * C + k) * L;
            const ag_real mu = s.mean[k], sc = s.rstd[k] * w[k], sh = b[k];
            for (ptrdiff_t l = 0; l < L; l++) yr[l] = (xr[l] - mu) * sc + sh;
        }
    if (batch) { /* PyTorch's running-statistics update, in the forward */
        const double m = bn->momentum;
        for (int k = 0; k < C; k++) {
            rm->data[k] = (ag_real)((1 - m) * rm->data[k] + m * s.mean[k]);
            rv->data[k] = (ag_real)((1 - m) * rv->data[k] + m * uvar[k]);
        }
        nbt->data[0] += 1;
    }
    ag_node *nd = ag_op_record(t, &bn_op, y, 3, in, sizeof s);
    if (nd) *(bn_saved *)nd->saved = s;
    return y;
}

/* ---- the same from primitives ----
 *
 * x (N, C) or (N, C, L); a channel's values are reduced over axis 0, then (3-D) axis 2, and the
 * per-channel vectors (C) are viewed as (C) or (C, 1) so that they broadcast against x:
 *   training: mu = mean(x), xc = x - mu, var = mean(xc xc), xh = xc / sqrt(var + eps)
 *   eval:     xh = (x - running_mean) / sqrt(running_var + eps)   (constants: no gradient)
 *   y = xh * weight + bias
 * and in training the running statistics take mu and var M / (M - 1) as in the fused op. */

/* Per-channel mean of v (N, C) or (N, C, L), kept as (1, C) or (1, C, 1). */
static ag_tensor *channel_mean(ag_tape *t, ag_tensor *v) {
    ag_tensor *m = ag_mean(t, v, 0, true);
    return v && v->ndim == 3 ? ag_mean(t, m, 2, true) : m;
}

/* A (C) vector viewed to broadcast against x's channels: (C) for 2-D x, (C, 1) for 3-D. */
static ag_tensor *per_channel(ag_tape *t, ag_tensor *v, const ag_tensor *x) {
    return x->ndim == 3 ? ag_reshape(t, v, AG_SHAPE(v->shape[0], 1)) : v;
}

ag_tensor *nn_batch_norm1d_composite(const nn_batch_norm1d *bn, const nn_ctx *c, ag_tensor *x) {
    if (!bn || !c || !x) return NULL;
    if (!bn_check(bn, c, "batch_norm1d_composite", x)) return NULL;
    ag_tape *t = c->tape;
    ag_tensor *xh;
    if (c->training) {
        ag_tensor *mu = channel_mean(t, x), *xc = ag_sub(t, x, mu);
        ag_tensor *var = channel_mean(t, ag_mul(t, xc, xc));
        xh = ag_div(t, xc, ag_sqrt(t, ag_add_scalar(t, var, bn->eps)));
        if (!xh) return NULL;
        ptrdiff_t N, L;
        int C;
        bn_dims(x, &N, &C, &L);
        const double M = (double)N * (double)L, m = bn->momentum;
        ag_real *rm = bn->running_mean->data, *rv = bn->running_var->data;
        for (int k = 0; k < C; k++) { /* mu and var are contiguous (1, C(, 1)) */
            rm[k] = (ag_real)((1 - m) * rm[k] + m * mu->data[k]);
            rv[k] = (ag_real)((1 - m) * rv[k] + m * ((double)var->data[k] * M / (M - 1)));
        }
        bn->num_batches_tracked->data[0] += 1;
    } else {
        ag_tensor *rm = per_channel(t, bn->running_mean, x);
        ag_tensor *rs = ag_sqrt(t, ag_add_scalar(t, per_channel(t, bn->running_var, x), bn->eps));
        xh = ag_div(t, ag_sub(t, x, rm), rs);
    }
    return ag_add(t, ag_mul(t, xh, per_channel(t, bn->weight, x)), per_channel(t, bn->bias, x));
}
