/* ops_minmax.c -- max / min over one axis with their indices (torch.max(x, dim) / min), and
 * amax / amin over one axis or all (torch.amax / amin). The two differ only in where the
 * gradient goes when several elements tie for the extremum, as in PyTorch:
 *
 * The input (made contiguous) is seen as (outer, n, inner) around the reduced axis (AG_ALL:
 * outer = inner = 1, n = numel); the result is (outer, inner):
 *   max_dim: y[o,i] = x[o,k*,i], k* the FIRST index of the maximum     dx[o,k*,i] += dy[o,i]
 *            (torch.max(x, dim): the gradient follows the returned index)
 *   amax:    y[o,i] = max_k x[o,k,i]                                   dx[o,k,i] += dy[o,i] / c
 *            for every k with x[o,k,i] = y[o,i], c of them (torch.amax: split evenly)
 * min_dim and amin the same with the minimum. A NaN counts as the extremum (both propagate it,
 * as PyTorch; the index is the first NaN's, as ag_argmax); amax's gradient is then NaN on every
 * element of the slice, as torch.amax's (its tie count x == y is 0 there: dy / 0 * 0; the
 * even split between NaNs is torch.max(x)'s evenly_distribute_backward, another op). An empty
 * axis is refused. ag_max (ops_reduce.c) keeps its own rule: the
 * first maximum, NaNs not looked for.
 */
#include "autograd/ag_internal.h"

#include <math.h>

typedef struct minmax_saved {
    ptrdiff_t outer, n, inner;
    int32_t *arg; /* max_dim / min_dim: k* per output element; NULL for amax / amin */
    bool is_min;
} minmax_saved;

/* v replaces best as the extremum: strictly beyond it, or the first NaN. */
static inline bool beats(ag_real v, ag_real best, bool is_min) {
    return (is_min ? v < best : v > best) || (v != v && best == best);
}
/* v ties with the extremum m (a finite or infinite m: a NaN m is handled apart). */
static inline bool ties(ag_real v, ag_real m) { return v == m; }

static void minmax_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const minmax_saved *s = nd->saved;
    for (ptrdiff_t o = 0; o < s->outer; o++) {
        for (ptrdiff_t i = 0; i < s->inner; i++) {
            ptrdiff_t r = o * s->inner + i;
            const ag_real *xs = x->data + o * s->n * s->inner + i;
            ag_real *gx = x->grad + o * s->n * s->inner + i, g = y->grad[r], m = y->data[r];
            if (s->arg) {
                gx[s->arg[r] * s->inner] += g;
                continue;
            }
            if (m != m) { /* torch.amax: dy / count(x == y) * (x == y) = (dy / 0) * 0 */
                for (ptrdiff_t k = 0; k < s->n; k++) gx[k * s->inner] += (ag_real)NAN;
                continue;
            }
            ptrdiff_t c = 0;
            for (ptrdiff_t k = 0; k < s->n; k++) c += ties(xs[k * s->inner], m);
            ag_real share = g / (ag_real)c;
            for (ptrdiff_t k = 0; k < s->n; k++)
                if (ties(xs[k * s->inner], m)) gx[k * s->inner] += share;
        }
    }
}
static const ag_op max_dim_op = {"max_dim", minmax_backward};
static const ag_op min_dim_op = {"min_dim", minmax_backward};
static const ag_op amax_op = {"amax", minmax_backward};
static const ag_op amin_op = {"amin", minmax_backward};

/* The extremum of each (o, i) into y and its first index into arg (scratch of outer * inner). */
static void minmax_forward(const ag_tensor *x, ag_tensor *y, const minmax_saved *s, int32_t *arg) {
    for (ptrdiff_t o = 0; o < s->outer; o++) {
        for (ptrdiff_t i = 0; i < s->inner; i++) {
            const ag_real *xs = x->data + o * s->n * s->inner + i;
            ag_real best = xs[0];
            int32_t k_best = 0;
            for (ptrdiff_t k = 1; k < s->n && best == best; k++) {
                if (beats(xs[k * s->inner], best, s->is_min)) {
                    best = xs[k * s->inner];
                    k_best = (int32_t)k;
                }
            }
            y->data[o * s->inner + i] = best;
            arg[o * s->inner + i] = k_best;
        }
    }
}

/* with_index: max_dim / min_dim (one axis; indices to the caller's buffer when given). */
static ag_tensor *minmax(ag_tape *t, const ag_op *op, bool is_min, bool with_index, ag_tensor *x,
                         int axis, bool keepdim, int32_t *indices, size_t n_indices) {
    if (!ag_op_check(t, op->name, 1, &x)) return NULL;
    char sx[64];
    if (with_index && axis == AG_ALL)
        return ag_report(t, "%s: needs one axis, not AG_ALL, for %s (%s reduces every axis)",
                         op->name, ag_shape_str(x, sx, sizeof sx), is_min ? "amin" : "amax");
    int shape[AG_MAX_DIMS], nd;
    minmax_saved s = {.is_min = is_min};
    if (!ag__reduce_split(t, op->name, x, axis, keepdim, &nd, shape, &s.outer, &s.n, &s.inner))
        return NULL;
    if (s.n == 0)
        return ag_report(t, "%s: reducing an empty axis of %s", op->name,
                         ag_shape_str(x, sx, sizeof sx));
    size_t m = (size_t)(s.outer * s.inner);
    if (indices && n_indices < m)
        return ag_report(t, "%s: the indices buffer holds %zu values, %zu needed for %s", op->name,
                         n_indices, m, ag_shape_str(x, sx, sizeof sx));
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, nd, shape, 1, &x) : NULL;
    int32_t *arg = y ? ag_tape_alloc(t, (m ? m : 1) * sizeof *arg) : NULL;
    if (!arg) return NULL;
    minmax_forward(x, y, &s, arg);
    if (indices) memcpy(indices, arg, m * sizeof *arg);
    if (with_index) s.arg = arg;
    ag_node *node = ag_op_record(t, op, y, 1, &x, sizeof s);
    if (node) *(minmax_saved *)node->saved = s;
    return y;
}

ag_tensor *ag_max_dim(ag_tape *t, ag_tensor *x, int axis, bool keepdim, int32_t *indices,
                      size_t n_indices) {
    return minmax(t, &max_dim_op, false, true, x, axis, keepdim, indices, n_indices);
}
ag_tensor *ag_min_dim(ag_tape *t, ag_tensor *x, int axis, bool keepdim, int32_t *indices,
                      size_t n_indices) {
    return minmax(t, &min_dim_op, true, true, x, axis, keepdim, indices, n_indices);
}
ag_tensor *ag_amax(ag_tape *t, ag_tensor *x, int axis, bool keepdim) {
    return minmax(t, &amax_op, false, false, x, axis, keepdim, NULL, 0);
}
ag_tensor *ag_amin(ag_tape *t, ag_tensor *x, int axis, bool keepdim) {
    return minmax(t, &amin_op, true, false, x, axis, keepdim, NULL, 0);
}
