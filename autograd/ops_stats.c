/* ops_stats.c -- logsumexp, var and std over one axis or over all axes (PyTorch's torch.logsumexp,
 * torch.var and torch.std with dim, correction and keepdim).
 *
 * The input (made contiguous) is seen as (outer, n, inner) around the reduced axis (AG_ALL:
 * outer = inner = 1, n = numel); the result is (outer, inner), for each (o, i) over x_k = x[o,k,i]:
 *   logsumexp: m = max_k x_k (0 when infinite), y = m + log sum_k exp(x_k - m)
 *              dx_k += dy exp(x_k - y)                       (an empty axis gives -inf)
 *   var:       mu = sum_k x_k / n,  y = sum_k (x_k - mu)^2 / D,  D = max(0, n - correction)
 *              dx_k += dy 2 (x_k - mu) / D                    (D = 0 gives inf or NaN, as PyTorch)
 *   std:       y = sqrt(var)
 *              dx_k += dy (x_k - mu) / (D y), and 0 where y = 0 (PyTorch's std_backward masks
 *              the kink of sqrt at 0)
 * correction = 1 is the unbiased estimate (PyTorch's default), 0 the biased one. The sums of var
 * run in double; logsumexp's exponentials go through ag_vexp in chunks of a row.
 */
#include "autograd/ag_internal.h"

#include <math.h>

#ifdef TG_DOUBLE
#define M(fn) fn
#else
#define M(fn) fn##f
#endif

/* Rows are exponentiated through ag_vexp (vectorized) in chunks of this many elements. */
#define CHUNK 256

typedef struct stats_saved {
    ptrdiff_t outer, n, inner;
    double divisor; /* var / std: D */
    ag_real *mean;  /* var / std: mu per output element */
    bool is_std;
} stats_saved;

/* ---- logsumexp ---- */

/* sum_k exp(xs[k * inner] - shift) (forward, acc = NULL) or, for the backward, acc[k * inner] +=
 * g exp(xs[k * inner] - shift), over n strided values. */
static ag_real exp_sum(const ag_real *xs, ptrdiff_t n, ptrdiff_t inner, ag_real shift, ag_real *acc,
                       ag_real g) {
    ag_real d[CHUNK], e[CHUNK], s = 0;
    for (ptrdiff_t k0 = 0; k0 < n; k0 += CHUNK) {
        ptrdiff_t c = n - k0 < CHUNK ? n - k0 : CHUNK;
        for (ptrdiff_t q = 0; q < c; q++) d[q] = xs[(k0 + q) * inner] - shift;
        ag_vexp(d, e, c);
        if (acc)
            for (ptrdiff_t q = 0; q < c; q++) acc[(k0 + q) * inner] += g * e[q];
        else
            for (ptrdiff_t q = 0; q < c; q++) s += e[q];
    }
    return s;
}

static void logsumexp_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const stats_saved *s = nd->saved;
    for (ptrdiff_t o = 0; o < s->outer; o++) {
        for (ptrdiff_t i = 0; i < s->inner; i++) {
            ptrdiff_t base = o * s->n * s->inner + i, r = o * s->inner + i;
            exp_sum(x->data + base, s->n, s->inner, y->data[r], x->grad + base, y->grad[r]);
        }
    }
}
static const ag_op logsumexp_op = {"logsumexp", logsumexp_backward};

ag_tensor *ag_logsumexp(ag_tape *t, ag_tensor *x, int axis, bool keepdim) {
    if (!ag_op_check(t, "logsumexp", 1, &x)) return NULL;
    int shape[AG_MAX_DIMS], nd;
    stats_saved s = {0};
    if (!ag__reduce_split(t, "logsumexp", x, axis, keepdim, &nd, shape, &s.outer, &s.n, &s.inner))
        return NULL;
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, nd, shape, 1, &x) : NULL;
    if (!y) return NULL;
    for (ptrdiff_t o = 0; o < s.outer; o++) {
        for (ptrdiff_t i = 0; i < s.inner; i++) {
            const ag_real *xs = x->data + o * s.n * s.inner + i;
            ag_real m = s.n ? xs[0] : 0;
            for (ptrdiff_t k = 1; k < s.n; k++) m = xs[k * s.inner] > m ? xs[k * s.inner] : m;
            if (isinf(m)) m = 0; /* all -inf: log 0 = -inf; a +inf: +inf (PyTorch) */
            y->data[o * s.inner + i] = m + M(log)(exp_sum(xs, s.n, s.inner, m, NULL, 0));
        }
    }
    ag_node *node = ag_op_record(t, &logsumexp_op, y, 1, &x, sizeof s);
    if (node) *(stats_saved *)node->saved = s;
    return y;
}

/* ---- var and std ---- */

static void var_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const stats_saved *s = nd->saved;
    for (ptrdiff_t o = 0; o < s->outer; o++) {
        for (ptrdiff_t i = 0; i < s->inner; i++) {
            ptrdiff_t base = o * s->n * s->inner + i, r = o * s->inner + i;
            ag_real g = y->grad[r], mu = s->mean[r];
            if (s->is_std) {
                if (y->data[r] == 0) continue; /* sqrt's kink: no gradient (PyTorch) */
                g /= 2 * y->data[r];
            }
            ag_real f = (ag_real)(2 / s->divisor) * g;
            for (ptrdiff_t k = 0; k < s->n; k++)
                x->grad[base + k * s->inner] += f * (x->data[base + k * s->inner] - mu);
        }
    }
}
static const ag_op var_op = {"var", var_backward};
static const ag_op std_op = {"std", var_backward};

static ag_tensor *variance(ag_tape *t, const ag_op *op, bool is_std, ag_tensor *x, int axis,
                           double correction, bool keepdim) {
    if (!ag_op_check(t, op->name, 1, &x)) return NULL;
    if (!isfinite(correction)) {
        char sx[64];
        return ag_report(t, "%s: correction %g is not finite (x %s)", op->name, correction,
                         ag_shape_str(x, sx, sizeof sx));
    }
    int shape[AG_MAX_DIMS], nd;
    stats_saved s = {.is_std = is_std};
    if (!ag__reduce_split(t, op->name, x, axis, keepdim, &nd, shape, &s.outer, &s.n, &s.inner))
        return NULL;
    s.divisor = fmax(0, (double)s.n - correction);
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, nd, shape, 1, &x) : NULL;
    s.mean = y ? ag_tape_alloc(t, (size_t)(y->numel ? y->numel : 1) * sizeof *s.mean) : NULL;
    if (!s.mean) return NULL;
    for (ptrdiff_t o = 0; o < s.outer; o++) {
        for (ptrdiff_t i = 0; i < s.inner; i++) {
            const ag_real *xs = x->data + o * s.n * s.inner + i;
            double mu = 0, ss = 0;
            for (ptrdiff_t k = 0; k < s.n; k++) mu += xs[k * s.inner];
            mu /= (double)s.n; /* an empty axis: NaN, as PyTorch */
            for (ptrdiff_t k = 0; k < s.n; k++)
                ss += (xs[k * s.inner] - mu) * (xs[k * s.inner] - mu);
            double v = ss / s.divisor;
            s.mean[o * s.inner + i] = (ag_real)mu;
            y->data[o * s.inner + i] = (ag_real)(is_std ? sqrt(v) : v);
        }
    }
    ag_node *node = ag_op_record(t, op, y, 1, &x, sizeof s);
    if (node) *(stats_saved *)node->saved = s;
    return y;
}

ag_tensor *ag_var(ag_tape *t, ag_tensor *x, int axis, double correction, bool keepdim) {
    return variance(t, &var_op, false, x, axis, correction, keepdim);
}
ag_tensor *ag_std(ag_tape *t, ag_tensor *x, int axis, double correction, bool keepdim) {
    return variance(t, &std_op, true, x, axis, correction, keepdim);
}
