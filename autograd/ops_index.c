/* ops_index.c -- stack, index_select and gather (PyTorch's torch.stack, torch.index_select and
 * torch.gather), each backward a scatter-add.
 *
 *   stack:        y = concat of the inputs, each with a new axis of 1 at `axis` (a composite of
 *                 ag_reshape and ag_concat: their backward)
 *   index_select: x (outer, N, inner) around axis, index (n) in [0, N):
 *                 y[o, j, i] = x[o, index[j], i]           dx[o, index[j], i] += dy[o, j, i]
 *   gather:       index of x's rank, index.shape[d] <= x.shape[d] for d != axis, values in
 *                 [0, x.shape[axis]); y has index's shape:
 *                 y[p] = x[p with p[axis] := index[p]]      dx[p with p[axis] := index[p]] += dy[p]
 * Repeated indices add their gradients. Indices are int32, copied; a negative or too large one
 * is reported with its position (PyTorch refuses them too).
 */
#include "autograd/ag_internal.h"

/* ---- stack ---- */

ag_tensor *ag_stack(ag_tape *t, int n, ag_tensor *const *xs, int axis) {
    if (n < 1) return ag_report(t, "stack: no inputs");
    if (!ag_op_check(t, "stack", n, xs)) return NULL;
    const ag_tensor *x0 = xs[0];
    char s0[64], si[64];
    if (x0->ndim + 1 > AG_MAX_DIMS)
        return ag_report(t,
                         "stack: inputs %s have %d dimensions; the result would have more than %d",
                         ag_shape_str(x0, s0, sizeof s0), x0->ndim, AG_MAX_DIMS);
    int a = ag_op_axis(t, "stack", x0, axis, x0->ndim + 1);
    if (a < 0) return NULL;
    for (int i = 1; i < n; i++)
        if (!ag_same_shape(xs[i], x0))
            return ag_report(t, "stack: input %d has shape %s, input 0 has %s (all must be equal)",
                             i, ag_shape_str(xs[i], si, sizeof si),
                             ag_shape_str(x0, s0, sizeof s0));
    int shape[AG_MAX_DIMS];
    for (int d = 0, k = 0; d <= x0->ndim; d++) shape[d] = d == a ? 1 : x0->shape[k++];
    ag_tensor **views = ag_tape_alloc(t, (size_t)n * sizeof *views);
    if (!views) return NULL;
    for (int i = 0; i < n; i++)
        if (!(views[i] = ag_reshape(t, xs[i], x0->ndim + 1, shape))) return NULL;
    return ag_concat(t, n, views, a);
}

/* ---- index_select ---- */

typedef struct index_select_saved {
    ptrdiff_t outer, N, inner;
    int n;
    int32_t index[];
} index_select_saved;

static void index_select_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const index_select_saved *s = nd->saved;
    for (ptrdiff_t o = 0; o < s->outer; o++)
        for (int j = 0; j < s->n; j++) {
            ag_real *gx = x->grad + (o * s->N + s->index[j]) * s->inner;
            const ag_real *gy = y->grad + (o * s->n + j) * s->inner;
            for (ptrdiff_t i = 0; i < s->inner; i++) gx[i] += gy[i];
        }
}
static const ag_op index_select_op = {"index_select", index_select_backward};

/* Every index in [0, N); reports the first that is not. */
static bool check_indices(ag_tape *t, const char *op, const ag_tensor *x, int axis,
                          const int32_t *index, ptrdiff_t n, int ind_nd, const int *ind_shape) {
    if (n > 0 && !index) return ag_report(t, "%s: the index is NULL", op), false;
    for (ptrdiff_t j = 0; j < n; j++) {
        if (index[j] < 0 || index[j] >= x->shape[axis]) {
            char sx[64], si[96];
            ag_report(
                t, "%s: index %d at position %td of index %s is outside [0, %d) (axis %d of x %s)",
                op, (int)index[j], j, ag_dims_str(ind_nd, ind_shape, si, sizeof si), x->shape[axis],
                axis, ag_shape_str(x, sx, sizeof sx));
            return false;
        }
    }
    return true;
}

ag_tensor *ag_index_select(ag_tape *t, ag_tensor *x, int axis, const int32_t *index, int n) {
    const char *op = "index_select";
    if (!ag_op_check(t, op, 1, &x)) return NULL;
    int a = ag_op_axis(t, op, x, axis, x->ndim);
    if (a < 0) return NULL;
    if (n < 0) return ag_report(t, "%s: %d indices", op, n);
    if (!check_indices(t, op, x, a, index, n, 1, &n)) return NULL;
    x = ag_op_contig(t, x);
    if (!x) return NULL;
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[a] = n;
    ag_tensor *y = ag_op_out(t, x->ndim, shape, 1, &x);
    if (!y) return NULL;
    ptrdiff_t outer, N, inner;
    ag_op_split(x, a, &outer, &N, &inner);
    for (ptrdiff_t o = 0; o < outer; o++)
        for (int j = 0; j < n; j++)
            memcpy(y->data + (o * n + j) * inner, x->data + (o * N + index[j]) * inner,
                   (size_t)inner * sizeof(ag_real));
    ag_node *nd = ag_op_record(t, &index_select_op, y, 1, &x,
                               sizeof(index_select_saved) + (size_t)n * sizeof(int32_t));
    if (nd) {
        index_select_saved *s = nd->saved;
        *s = (index_select_saved){outer, N, inner, n};
        if (n) memcpy(s->index, index, (size_t)n * sizeof *index);
    }
    return y;
}

/* ---- gather ---- */

typedef struct gather_saved {
    int axis;
    int32_t index[]; /* y->numel values */
} gather_saved;

/* The offset in x (contiguous) of the element y[idx] reads: idx with idx[axis] := k. */
static inline ptrdiff_t gather_src(const ag_tensor *x, int axis, const int *idx, int32_t k) {
    ptrdiff_t o = 0;
    for (int d = 0; d < x->ndim; d++) o += (d == axis ? k : idx[d]) * x->stride[d];
    return o;
}
/* idx to the next row-major position of shape (nd dims). */
static inline void next_pos(int *idx, const int *shape, int nd) {
    for (int d = nd - 1; d >= 0 && ++idx[d] == shape[d]; d--) idx[d] = 0;
}

static void gather_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const gather_saved *s = nd->saved;
    int idx[AG_MAX_DIMS] = {0};
    for (ptrdiff_t p = 0; p < y->numel; p++, next_pos(idx, y->shape, y->ndim))
        x->grad[gather_src(x, s->axis, idx, s->index[p])] += y->grad[p];
}
static const ag_op gather_op = {"gather", gather_backward};

ag_tensor *ag_gather(ag_tape *t, ag_tensor *x, int axis, const int32_t *index, int index_ndim,
                     const int *index_shape) {
    const char *op = "gather";
    if (!ag_op_check(t, op, 1, &x)) return NULL;
    int a = ag_op_axis(t, op, x, axis, x->ndim);
    if (a < 0) return NULL;
    char sx[64], si[96];
    bool fits = index_ndim == x->ndim && (index_shape || index_ndim == 0);
    for (int d = 0; fits && d < x->ndim; d++)
        fits = index_shape[d] >= 0 && (d == a || index_shape[d] <= x->shape[d]);
    if (!fits)
        return ag_report(t,
                         "%s: index %s must have the rank of x %s and no larger dimension but "
                         "along axis %d",
                         op,
                         index_shape ? ag_dims_str(index_ndim, index_shape, si, sizeof si) : "NULL",
                         ag_shape_str(x, sx, sizeof sx), a);
    ptrdiff_t n = ag_numel(index_ndim, index_shape);
    if (!check_indices(t, op, x, a, index, n, index_ndim, index_shape)) return NULL;
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, index_ndim, index_shape, 1, &x) : NULL;
    if (!y) return NULL;
    int idx[AG_MAX_DIMS] = {0};
    for (ptrdiff_t p = 0; p < n; p++, next_pos(idx, y->shape, y->ndim))
        y->data[p] = x->data[gather_src(x, a, idx, index[p])];
    ag_node *nd =
        ag_op_record(t, &gather_op, y, 1, &x, sizeof(gather_saved) + (size_t)n * sizeof(int32_t));
    if (nd) {
        gather_saved *s = nd->saved;
        s->axis = a;
        if (n) memcpy(s->index, index, (size_t)n * sizeof *index);
    }
    return y;
}
