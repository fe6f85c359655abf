/* ops_loss.c -- losses with PyTorch's definitions and reductions: mean squared error, binary
 * cross-entropy with logits, negative log-likelihood, softmax cross-entropy with label
 * smoothing (a fused row kernel, like ag_softmax_ce).
 *
 * Shapes: MSE and BCE take x and y of one shape, any, with a position per element; NLL and CE
 * take x (..., C) and labels (...), a position per row of C. Every loss computes per-position
 * values l_i and reduces them (ag_reduction, autograd/ag.h) to out, (positions) or a scalar:
 *   NONE: out_i = l_i             g_i = dout_i
 *   SUM:  out = sum_i l_i         g_i = dout
 *   MEAN: out = sum_i l_i / D     g_i = dout / D    D = numel (MSE, BCE), or the sum of the
 *                                                   weights of the positions not ignored
 * and its backward adds g_i * d l_i / d input (into every input that requires a gradient):
 *   mse: l = (x - y)^2                                dx += 2 g (x - y);  dy -= 2 g (x - y)
 *   bce: l = (1 - y) x + q sp,  sp = softplus(-x) = max(-x, 0) + log1p(exp(-|x|)),
 *        q = 1 + (p - 1) y,  p = pos_weight[c]      dx += g ((1 - y) - q sigmoid(-x))
 *        (c the last index; p = 1 without)
 *                                                     dy += g ((p - 1) sp - x)
 *   nll: l = -w[k] logp[k],  k the label              dlogp[k] -= g w[k]
 *   ce:  l = w (lse - (1 - eps) x[k] - eps mean_c x[c]),  lse = log sum_c exp(x[c])
 *                                                     dx[c] += g w (softmax(x)[c] - eps / C)
 *                                                     dx[k] -= g w (1 - eps)
 * A position whose label is ignore_index has l = 0 and no gradient. The per-position sums of
 * the reductions run in index order, in double: the same bits whatever the threads.
 */
#include "autograd/loss_internal.h"

#include <math.h>

#ifdef TG_DOUBLE
#define M(fn) fn
#else
#define M(fn) fn##f
#endif

/* ---- reductions, shared by every loss (declared in autograd/loss_internal.h) ---- */

bool ag__loss_check_reduction(ag_tape *t, const char *op, ag_reduction red, bool batchmean_ok) {
    if (red == AG_REDUCE_MEAN || red == AG_REDUCE_SUM || red == AG_REDUCE_NONE) return true;
    if (red == AG_REDUCE_BATCHMEAN && batchmean_ok) return true;
    if (red == AG_REDUCE_BATCHMEAN)
        ag_report(t,
                  "%s: reduction AG_REDUCE_BATCHMEAN is kl_div's only; use AG_REDUCE_MEAN, "
                  "AG_REDUCE_SUM or AG_REDUCE_NONE",
                  op);
    else
        ag_report(t, "%s: reduction %d is not AG_REDUCE_MEAN, AG_REDUCE_SUM or AG_REDUCE_NONE", op,
                  (int)red);
    return false;
}

ag_tensor *ag__loss_out(ag_tape *t, ag_reduction red, int nd, const int *shape, int n_in,
                        ag_tensor *const *in, ag_real **per) {
    static const int scalar[1] = {1};
    bool none = red == AG_REDUCE_NONE;
    ag_tensor *y = ag_op_out(t, none ? nd : 0, none ? shape : scalar, n_in, in);
    if (!y) return NULL;
    if (none) {
        *per = y->data;
        return y;
    }
    ptrdiff_t n = ag_numel(nd, shape);
    *per = ag_tape_alloc(t, (size_t)(n ? n : 1) * sizeof **per);
    return *per ? y : NULL;
}

loss_red ag__loss_finish(ag_tensor *y, ag_reduction red, const ag_real *per, ptrdiff_t n,
                         double denom) {
    loss_red r = {red, 1};
    if (red == AG_REDUCE_NONE) return r;
    double s = 0;
    for (ptrdiff_t i = 0; i < n; i++) s += per[i];
    if (red == AG_REDUCE_MEAN || red == AG_REDUCE_BATCHMEAN) {
        s /= denom;
        r.scale = (ag_real)(1 / denom);
    }
    y->data[0] = (ag_real)s;
    return r;
}

bool ag__loss_check_pair(ag_tape *t, const char *op, ag_tensor *x, ag_tensor *target,
                         ag_reduction red, bool batchmean_ok) {
    ag_tensor *in[2] = {x, target};
    if (!ag_op_check(t, op, 2, in) || !ag__loss_check_reduction(t, op, red, batchmean_ok))
        return false;
    if (!ag_same_shape(x, target)) {
        char sx[64], sy[64];
        ag_report(t, "%s: input %s and target %s must have one shape (no broadcasting)", op,
                  ag_shape_str(x, sx, sizeof sx), ag_shape_str(target, sy, sizeof sy));
        return false;
    }
    return true;
}

void *ag__arena_copy(ag_tape *t, const void *src, size_t bytes, bool *ok) {
    if (!src) return NULL;
    void *p = ag_tape_alloc(t, bytes ? bytes : 1);
    if (!p) *ok = false;
    else memcpy(p, src, bytes);
    return p;
}

/* ---- mean squared error ---- */

static void mse_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->in[1], *out = nd->out;
    const loss_red r = *(const loss_red *)nd->saved;
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        ag_real d = 2 * loss_grad_at(out, r, i) * (x->data[i] - y->data[i]);
        if (x->requires_grad) x->grad[i] += d;
        if (y->requires_grad) y->grad[i] -= d;
    }
}
static const ag_op mse_op = {"mse_loss", mse_backward};

ag_tensor *ag_mse_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, ag_reduction reduction) {
    if (!ag__loss_check_pair(t, "mse_loss", x, target, reduction, false)) return NULL;
    x = ag_op_contig(t, x);
    target = ag_op_contig(t, target);
    if (!x || !target) return NULL;
    ag_tensor *in[2] = {x, target};
    ag_real *per;
    ag_tensor *y = ag__loss_out(t, reduction, x->ndim, x->shape, 2, in, &per);
    if (!y) return NULL;
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        ag_real d = x->data[i] - target->data[i];
        per[i] = d * d;
    }
    loss_red r = ag__loss_finish(y, reduction, per, x->numel, (double)x->numel);
    ag_node *nd = ag_op_record(t, &mse_op, y, 2, in, sizeof(loss_red));
    if (nd) *(loss_red *)nd->saved = r;
    return y;
}

/* ---- binary cross-entropy with logits ---- */

/* softplus(-x) = -log sigmoid(x) = max(-x, 0) + log1p(exp(-|x|)): exp never overflows. */
static inline ag_real softplus_neg(ag_real x) {
    return (x < 0 ? -x : 0) + M(log1p)(M(exp)(-M(fabs)(x)));
}
/* sigmoid(-x) = 1 - sigmoid(x), from exp(-|x|). */
static inline ag_real sigmoid_neg(ag_real x) {
    ag_real e = M(exp)(-M(fabs)(x));
    return x >= 0 ? e / (1 + e) : 1 / (1 + e);
}

typedef struct bce_saved {
    loss_red r;
    ag_real *pos_weight; /* C values, or NULL for ones */
    ptrdiff_t C;         /* the last dimension (1 for a scalar) */
} bce_saved;

static void bce_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->in[1], *out = nd->out;
    const bce_saved *s = nd->saved;
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        ag_real g = loss_grad_at(out, s->r, i), v = x->data[i], tg = y->data[i];
        ag_real pm1 = s->pos_weight ? s->pos_weight[i % s->C] - 1 : 0;
        if (x->requires_grad) x->grad[i] += g * ((1 - tg) - (1 + pm1 * tg) * sigmoid_neg(v));
        if (y->requires_grad) y->grad[i] += g * (pm1 * softplus_neg(v) - v);
    }
}
static const ag_op bce_op = {"bce_with_logits", bce_backward};

ag_tensor *ag_bce_with_logits(ag_tape *t, ag_tensor *x, ag_tensor *target,
                              const ag_real *pos_weight, ag_reduction reduction) {
    if (!ag__loss_check_pair(t, "bce_with_logits", x, target, reduction, false)) return NULL;
    x = ag_op_contig(t, x);
    target = ag_op_contig(t, target);
    if (!x || !target) return NULL;
    ag_tensor *in[2] = {x, target};
    ag_real *per;
    ag_tensor *y = ag__loss_out(t, reduction, x->ndim, x->shape, 2, in, &per);
    if (!y) return NULL;
    bce_saved s = {{reduction, 1}, NULL, x->ndim ? x->shape[x->ndim - 1] : 1};
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        ag_real v = x->data[i], tg = target->data[i];
        ag_real p = pos_weight ? pos_weight[i % s.C] : 1;
        per[i] = (1 - tg) * v + (1 + (p - 1) * tg) * softplus_neg(v);
    }
    s.r = ag__loss_finish(y, reduction, per, x->numel, (double)x->numel);
    bool ok = true;
    if (y->requires_grad)
        s.pos_weight = ag__arena_copy(t, pos_weight, (size_t)s.C * sizeof *pos_weight, &ok);
    if (!ok) return NULL;
    ag_node *nd = ag_op_record(t, &bce_op, y, 2, in, sizeof(bce_saved));
    if (nd) *(bce_saved *)nd->saved = s;
    return y;
}

/* ---- class losses: shared checks (ag_op.h) ---- */

bool ag_op_check_labels(ag_tape *t, const char *op, const ag_tensor *x, const char *what,
                        ptrdiff_t C, const int32_t *labels, int32_t ignore,
                        double label_smoothing) {
    char sx[64], sl[64];
    if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
        ag_report(t, "%s: label_smoothing = %g for %s %s, expected 0 to 1", op, label_smoothing,
                  what, ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    const ptrdiff_t rows = x->ndim >= 1 ? ag_numel(x->ndim - 1, x->shape) : 1;
    if (!labels && rows > 0) {
        ag_report(t, "%s: no labels given for %s %s", op, what, ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    for (ptrdiff_t r = 0; r < rows; r++) {
        if (labels[r] != ignore && (labels[r] < 0 || labels[r] >= C)) {
            ag_report(t, "%s: label %d at position %td is outside [0, %td) (labels %s, %s %s)", op,
                      (int)labels[r], r, C, ag_dims_str(x->ndim - 1, x->shape, sl, sizeof sl), what,
                      ag_shape_str(x, sx, sizeof sx));
            return false;
        }
    }
    return true;
}

/* x (..., C) with C >= 1, labels (...) each in [0, C) or equal to ignore, label smoothing in
 * [0, 1]. */
static bool check_labels(ag_tape *t, const char *op, const char *what, const ag_tensor *x,
                         const int32_t *labels, int32_t ignore, double label_smoothing) {
    char sx[64];
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1) {
        ag_report(t, "%s: %s must be (..., C) with C >= 1, got %s", op, what,
                  ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    return ag_op_check_labels(t, op, x, what, x->shape[x->ndim - 1], labels, ignore,
                              label_smoothing);
}

/* ---- negative log-likelihood ---- */

typedef struct nll_saved {
    loss_red r;
    int32_t *labels;
    ag_real *w; /* class weights (C), NULL for ones */
    int32_t ignore;
} nll_saved;

static void nll_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *out = nd->out;
    const nll_saved *s = nd->saved;
    ptrdiff_t C = x->shape[x->ndim - 1], rows = x->numel / C;
    for (ptrdiff_t r = 0; r < rows; r++) {
        int32_t k = s->labels[r];
        if (k == s->ignore) continue;
        x->grad[r * C + k] -= loss_grad_at(out, s->r, r) * (s->w ? s->w[k] : 1);
    }
}
static const ag_op nll_op = {"nll_loss", nll_backward};

ag_tensor *ag_nll_loss(ag_tape *t, ag_tensor *logp, const int32_t *labels,
                       const ag_real *class_weights, int32_t ignore_index, ag_reduction reduction) {
    const char *op = "nll_loss";
    if (!ag_op_check(t, op, 1, &logp) || !ag__loss_check_reduction(t, op, reduction, false) ||
        !check_labels(t, op, "log-probabilities", logp, labels, ignore_index, 0))
        return NULL;
    ag_tensor *x = ag_op_contig(t, logp);
    if (!x) return NULL;
    ptrdiff_t C = x->shape[x->ndim - 1], rows = x->numel / C;
    ag_real *per;
    ag_tensor *y = ag__loss_out(t, reduction, x->ndim - 1, x->shape, 1, &x, &per);
    if (!y) return NULL;
    double denom = 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        int32_t k = labels[r];
        ag_real w = k == ignore_index ? 0 : class_weights ? class_weights[k] : 1;
        per[r] = k == ignore_index ? 0 : -w * x->data[r * C + k];
        denom += w;
    }
    nll_saved s = {ag__loss_finish(y, reduction, per, rows, denom), NULL, NULL, ignore_index};
    bool ok = true;
    if (y->requires_grad) {
        s.labels = ag__arena_copy(t, labels, (size_t)rows * sizeof *labels, &ok);
        s.w = ag__arena_copy(t, class_weights, (size_t)C * sizeof *class_weights, &ok);
    }
    if (!ok) return NULL;
    ag_node *nd = ag_op_record(t, &nll_op, y, 1, &x, sizeof(nll_saved));
    if (nd) *(nll_saved *)nd->saved = s;
    return y;
}

/* ---- softmax cross-entropy with label smoothing (fused, rows in parallel) ---- */

/* Rows are exponentiated through ag_vexp (vectorized) in chunks of this many elements. */
#define CHUNK 256

typedef struct ce_saved {
    loss_red r;
    int32_t *labels;
    ag_real *w;   /* per-position weights, NULL for ones */
    ag_real *lse; /* per row */
    double eps;
    int32_t ignore;
} ce_saved;

typedef struct ce_job {
    ag_tensor *x, *out;
    const int32_t *labels;
    const ag_real *w;
    ce_saved *s;
    ag_real *per; /* forward: the per-row losses */
} ce_job;

static ptrdiff_t rows_per_thread(ptrdiff_t C) { return 16384 / C + 1; }

/* Forward rows [r0, r1): lse and l_r (0 for an ignored row). */
static void ce_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const ce_job *j = ctx;
    ptrdiff_t C = j->x->shape[j->x->ndim - 1];
    const ag_real eps = (ag_real)j->s->eps;
    for (ptrdiff_t r = r0; r < r1; r++) {
        int32_t k = j->labels[r];
        if (k == j->s->ignore) {
            j->per[r] = j->s->lse[r] = 0;
            continue;
        }
        const ag_real *xr = j->x->data + r * C;
        ag_real lse = ag_row_logsumexp(xr, C), l = lse - (1 - eps) * xr[k];
        if (eps != 0) { /* skipped at 0: a -inf logit (a masked class) leaves l finite */
            ag_real sum = 0;
            for (ptrdiff_t c = 0; c < C; c++) sum += xr[c];
            l -= eps * (sum / (ag_real)C);
        }
        j->s->lse[r] = lse;
        j->per[r] = (j->w ? j->w[r] : 1) * l;
    }
}

/* Backward rows [r0, r1). */
static void ce_backward_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const ce_job *j = ctx;
    const ce_saved *s = j->s;
    ag_tensor *x = j->x;
    ptrdiff_t C = x->shape[x->ndim - 1];
    const ag_real eps = (ag_real)s->eps, spread = eps / (ag_real)C;
    for (ptrdiff_t r = r0; r < r1; r++) {
        int32_t k = s->labels[r];
        ag_real g = k == s->ignore ? 0 : loss_grad_at(j->out, s->r, r) * (s->w ? s->w[r] : 1);
        if (g == 0) continue;
        const ag_real *xr = x->data + r * C;
        ag_real *gx = x->grad + r * C, d[CHUNK], e[CHUNK];
        for (ptrdiff_t k0 = 0; k0 < C; k0 += CHUNK) {
            ptrdiff_t c = C - k0 < CHUNK ? C - k0 : CHUNK;
            for (ptrdiff_t q = 0; q < c; q++) d[q] = xr[k0 + q] - s->lse[r];
            ag_vexp(d, e, c);
            for (ptrdiff_t q = 0; q < c; q++) gx[k0 + q] += g * (e[q] - spread);
        }
        gx[k] -= g * (1 - eps);
    }
}

static void ce_backward(ag_node *nd) {
    ce_job j = {nd->in[0], nd->out, NULL, NULL, nd->saved, NULL};
    ptrdiff_t C = j.x->shape[j.x->ndim - 1];
    ag_parallel_for(j.x->numel / C, rows_per_thread(C), ce_backward_rows, &j);
}
static const ag_op ce_op = {"cross_entropy", ce_backward};

ag_tensor *ag_cross_entropy(ag_tape *t, ag_tensor *logits, const int32_t *labels,
                            const ag_real *weights, double label_smoothing, int32_t ignore_index,
                            ag_reduction reduction) {
    const char *op = "cross_entropy";
    if (!ag_op_check(t, op, 1, &logits) || !ag__loss_check_reduction(t, op, reduction, false) ||
        !check_labels(t, op, "logits", logits, labels, ignore_index, label_smoothing))
        return NULL;
    ag_tensor *x = ag_op_contig(t, logits);
    if (!x) return NULL;
    ptrdiff_t C = x->shape[x->ndim - 1], rows = x->numel / C;
    ag_real *per;
    ag_tensor *y = ag__loss_out(t, reduction, x->ndim - 1, x->shape, 1, &x, &per);
    if (!y) return NULL;
    ce_saved s = {{reduction, 1}, NULL, NULL, NULL, label_smoothing, ignore_index};
    s.lse = ag_tape_alloc(t, (size_t)(rows ? rows : 1) * sizeof *s.lse);
    if (!s.lse) return NULL;
    ce_job j = {x, y, labels, weights, &s, per};
    ag_parallel_for(rows, rows_per_thread(C), ce_rows, &j);
    double denom = 0;
    for (ptrdiff_t r = 0; r < rows; r++)
        if (labels[r] != ignore_index) denom += weights ? weights[r] : 1;
    s.r = ag__loss_finish(y, reduction, per, rows, denom);
    bool ok = true;
    if (y->requires_grad) {
        s.labels = ag__arena_copy(t, labels, (size_t)rows * sizeof *labels, &ok);
        s.w = ag__arena_copy(t, weights, (size_t)rows * sizeof *weights, &ok);
    }
    if (!ok) return NULL;
    ag_node *nd = ag_op_record(t, &ce_op, y, 1, &x, sizeof(ce_saved));
    if (nd) *(ce_saved *)nd->saved = s;
    return y;
}
