/* ops_shape.c -- reshape, permute, transpose, narrow (views); contiguous, concat,
 * repeat_interleave (copies); gather_rows (embedding lookup).
 *
 * A view shares the data and the gradient of the tensor it views, so it records no node:
 * gradients written through the view land in the base's gradient directly.
 */
#include "autograd/ag_internal.h"

/* dst[...] (+)= src[...] over a shape, each side with its own strides. */
static void copy_strided(int nd, const int *shape, const ag_real *src, const ptrdiff_t *ss,
                         ag_real *dst, const ptrdiff_t *ds, bool accumulate) {
    ag_iter it;
    ag_iter_init(&it, nd, shape, 2, (const ptrdiff_t *[]){ss, ds});
    for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {
        const ag_real *s = src + it.off[0];
        ag_real *d = dst + it.off[1];
        if (accumulate)
            for (ptrdiff_t j = 0; j < it.inner; j++) d[j * it.is[1]] += s[j * it.is[0]];
        else
            for (ptrdiff_t j = 0; j < it.inner; j++) d[j * it.is[1]] = s[j * it.is[0]];
    }
}

/* ---- contiguous: y = x laid out row-major; dx += dy ---- */

static void contiguous_backward(ag_node *n) {
    ag_tensor *x = n->in[0], *y = n->out;
    copy_strided(x->ndim, x->shape, y->grad, y->stride, x->grad, x->stride, true);
}
static const ag_op contiguous_op = {"contiguous", contiguous_backward};

ag_tensor *ag_contiguous(ag_tape *t, ag_tensor *x) {
    if (!ag_op_check(t, "contiguous", 1, &x)) return NULL;
    if (ag_is_contiguous(x)) return x;
    ag_tensor *y = ag_op_out(t, x->ndim, x->shape, 1, &x);
    if (!y) return NULL;
    copy_strided(x->ndim, x->shape, x->data, x->stride, y->data, y->stride, false);
    ag_op_record(t, &contiguous_op, y, 1, &x, 0);
    return y;
}

/* ---- views ---- */

ag_tensor *ag_reshape(ag_tape *t, ag_tensor *x, int ndim, const int *shape) {
    if (!ag_op_check(t, "reshape", 1, &x)) return NULL;
    char sx[64], sn[96];
    if (ndim < 0 || ndim > AG_MAX_DIMS)
        return ag_report(t, "reshape: %d dimensions requested (at most %d)", ndim, AG_MAX_DIMS);
    int dims[AG_MAX_DIMS], infer = -1;
    ptrdiff_t known = 1;
    for (int d = 0; d < ndim; d++) {
        dims[d] = shape[d];
        if (shape[d] == -1 && infer < 0) {
            infer = d;
        } else if (shape[d] < 0) {
            return ag_report(t, "reshape: bad target shape %s for %s",
                             ag_dims_str(ndim, shape, sn, sizeof sn),
                             ag_shape_str(x, sx, sizeof sx));
        } else {
            known *= shape[d];
        }
    }
    if (infer >= 0 && known > 0 && x->numel % known == 0) dims[infer] = (int)(x->numel / known);
    if ((infer >= 0 && (known == 0 || x->numel % known)) || ag_numel(ndim, dims) != x->numel)
        return ag_report(t, "reshape: cannot view %s (%td elements) as %s",
                         ag_shape_str(x, sx, sizeof sx), x->numel,
                         ag_dims_str(ndim, shape, sn, sizeof sn));
    x = ag_op_contig(t, x);
    if (!x) return NULL;
    ptrdiff_t st[AG_MAX_DIMS];
    ag_contig_strides(ndim, dims, st);
    return ag_op_view(t, x, ndim, dims, st, 0);
}

ag_tensor *ag_permute(ag_tape *t, ag_tensor *x, const int *perm) {
    if (!ag_op_check(t, "permute", 1, &x)) return NULL;
    int shape[AG_MAX_DIMS];
    ptrdiff_t st[AG_MAX_DIMS];
    bool seen[AG_MAX_DIMS] = {false};
    for (int d = 0; d < x->ndim; d++) {
        int p = perm[d];
        if (p < 0 || p >= x->ndim || seen[p]) {
            char sx[64], sp[96];
            return ag_report(t, "permute: %s is not a permutation of the axes of %s",
                             ag_dims_str(x->ndim, perm, sp, sizeof sp),
                             ag_shape_str(x, sx, sizeof sx));
        }
        seen[p] = true;
        shape[d] = x->shape[p];
        st[d] = x->stride[p];
    }
    return ag_op_view(t, x, x->ndim, shape, st, 0);
}

ag_tensor *ag_transpose(ag_tape *t, ag_tensor *x, int axis0, int axis1) {
    if (!ag_op_check(t, "transpose", 1, &x)) return NULL;
    int a0 = ag_op_axis(t, "transpose", x, axis0, x->ndim);
    int a1 = a0 < 0 ? -1 : ag_op_axis(t, "transpose", x, axis1, x->ndim);
    if (a1 < 0) return NULL;
    int perm[AG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) perm[d] = d;
    perm[a0] = a1;
    perm[a1] = a0;
    return ag_permute(t, x, perm);
}

ag_tensor *ag_narrow(ag_tape *t, ag_tensor *x, int axis, int start, int len) {
    if (!ag_op_check(t, "narrow", 1, &x)) return NULL;
    int a = ag_op_axis(t, "narrow", x, axis, x->ndim);
    if (a < 0) return NULL;
    if (start < 0 || len < 0 || start > x->shape[a] - len) {
        char sx[64];
        return ag_report(t, "narrow: [%d, %d) is outside axis %d of %s", start, start + len, a,
                         ag_shape_str(x, sx, sizeof sx));
    }
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[a] = len;
    return ag_op_view(t, x, x->ndim, shape, x->stride, start * x->stride[a]);
}

/* ---- concat: y = [x_0 | x_1 | ...] along axis; dx_i += the slab of dy it came from ---- */

static void concat_backward(ag_node *n) {
    ag_tensor *y = n->out;
    int axis = *(const int *)n->saved;
    ptrdiff_t at = 0;
    for (int i = 0; i < n->n_in; i++) {
        ag_tensor *x = n->in[i];
        if (x->requires_grad)
            copy_strided(x->ndim, x->shape, y->grad + at * y->stride[axis], y->stride, x->grad,
                         x->stride, true);
        at += x->shape[axis];
    }
}
static const ag_op concat_op = {"concat", concat_backward};

ag_tensor *ag_concat(ag_tape *t, int n, ag_tensor *const *xs, int axis) {
    if (n < 1) return ag_report(t, "concat: no inputs");
    if (!ag_op_check(t, "concat", n, xs)) return NULL;
    int a = ag_op_axis(t, "concat", xs[0], axis, xs[0]->ndim);
    if (a < 0) return NULL;
    int shape[AG_MAX_DIMS];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[a] = 0;
    for (int i = 0; i < n; i++) {
        bool fits = xs[i]->ndim == xs[0]->ndim;
        for (int d = 0; fits && d < xs[0]->ndim; d++) fits = d == a || xs[i]->shape[d] == shape[d];
        if (!fits) {
            char s0[64], si[64];
            return ag_report(
                t, "concat: input %d has shape %s, input 0 has %s (only axis %d may differ)", i,
                ag_shape_str(xs[i], si, sizeof si), ag_shape_str(xs[0], s0, sizeof s0), a);
        }
        shape[a] += xs[i]->shape[a];
    }
    ag_tensor *y = ag_op_out(t, xs[0]->ndim, shape, n, xs);
    if (!y) return NULL;
    ptrdiff_t at = 0;
    for (int i = 0; i < n; i++) {
        copy_strided(xs[i]->ndim, xs[i]->shape, xs[i]->data, xs[i]->stride,
                     y->data + at * y->stride[a], y->stride, false);
        at += xs[i]->shape[a];
    }
    ag_node *nd = ag_op_record(t, &concat_op, y, n, xs, sizeof(int));
    if (nd) *(int *)nd->saved = a;
    return y;
}

/* ---- repeat_interleave: y[.., i*R + r, ..] = x[.., i, ..]; dx_i += sum_r dy_{i*R+r} ----
 * For each r, the elements y[.., i*R + r, ..] form a strided view of y with x's shape. */

typedef struct repeat_saved {
    int axis, repeats;
} repeat_saved;

static void repeat_strides(const ag_tensor *y, int axis, int repeats, ptrdiff_t *st) {
    memcpy(st, y->stride, sizeof y->stride);
    st[axis] *= repeats;
}

static void repeat_backward(ag_node *n) {
    ag_tensor *x = n->in[0], *y = n->out;
    const repeat_saved *s = n->saved;
    ptrdiff_t st[AG_MAX_DIMS];
    repeat_strides(y, s->axis, s->repeats, st);
    for (int r = 0; r < s->repeats; r++)
        copy_strided(x->ndim, x->shape, y->grad + r * y->stride[s->axis], st, x->grad, x->stride,
                     true);
}
static const ag_op repeat_op = {"repeat_interleave", repeat_backward};

ag_tensor *ag_repeat_interleave(ag_tape *t, ag_tensor *x, int repeats, int axis) {
    if (!ag_op_check(t, "repeat_interleave", 1, &x)) return NULL;
    int a = ag_op_axis(t, "repeat_interleave", x, axis, x->ndim);
    if (a < 0) return NULL;
    if (repeats < 1)
        return ag_report(t, "repeat_interleave: repeats must be >= 1, got %d", repeats);
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[a] *= repeats;
    ag_tensor *y = ag_op_out(t, x->ndim, shape, 1, &x);
    if (!y) return NULL;
    ptrdiff_t st[AG_MAX_DIMS];
    repeat_strides(y, a, repeats, st);
    for (int r = 0; r < repeats; r++)
        copy_strided(x->ndim, x->shape, x->data, x->stride, y->data + r * y->stride[a], st, false);
    ag_node *nd = ag_op_record(t, &repeat_op, y, 1, &x, sizeof(repeat_saved));
    if (nd) *(repeat_saved *)nd->saved = (repeat_saved){a, repeats};
    return y;
}

/* ---- gather_rows: y[r, :] = table[ids[r], :]; dtable[ids[r], :] += dy[r, :] ---- */

typedef struct gather_saved {
    ptrdiff_t n;
    int32_t ids[];
} gather_saved;

static void gather_backward(ag_node *nd) {
    ag_tensor *tab = nd->in[0], *y = nd->out;
    const gather_saved *s = nd->saved;
    int dim = tab->shape[1];
    for (ptrdiff_t r = 0; r < s->n; r++) {
        ag_real *g = tab->grad + s->ids[r] * tab->stride[0];
        const ag_real *gy = y->grad + r * dim;
        for (int j = 0; j < dim; j++) g[j * tab->stride[1]] += gy[j];
    }
}
static const ag_op gather_op = {"gather_rows", gather_backward};

ag_tensor *ag_gather_rows(ag_tape *t, ag_tensor *table, const int32_t *ids, int ids_ndim,
                          const int *ids_shape) {
    if (!ag_op_check(t, "gather_rows", 1, &table)) return NULL;
    char st[64], si[96];
    if (table->ndim != 2)
        return ag_report(t, "gather_rows: the table must be 2-D (rows, dim), got %s",
                         ag_shape_str(table, st, sizeof st));
    if (ids_ndim < 0 || ids_ndim + 1 > AG_MAX_DIMS)
        return ag_report(t, "gather_rows: ids have %d dimensions (at most %d)", ids_ndim,
                         AG_MAX_DIMS - 1);
    ptrdiff_t n = ag_numel(ids_ndim, ids_shape);
    for (ptrdiff_t r = 0; r < n; r++) {
        if (ids[r] < 0 || ids[r] >= table->shape[0])
            return ag_report(t,
                             "gather_rows: id %d at position %td of ids %s is outside the table %s",
                             ids[r], r, ag_dims_str(ids_ndim, ids_shape, si, sizeof si),
                             ag_shape_str(table, st, sizeof st));
    }
    int shape[AG_MAX_DIMS];
    memcpy(shape, ids_shape, (size_t)ids_ndim * sizeof *shape);
    shape[ids_ndim] = table->shape[1];
    ag_tensor *y = ag_op_out(t, ids_ndim + 1, shape, 1, &table);
    if (!y) return NULL;
    int dim = table->shape[1];
    for (ptrdiff_t r = 0; r < n; r++) {
        const ag_real *row = table->data + ids[r] * table->stride[0];
        ag_real *yr = y->data + r * dim;
        for (int j = 0; j < dim; j++) yr[j] = row[j * table->stride[1]];
    }
    ag_node *nd = ag_op_record(t, &gather_op, y, 1, &table,
                               sizeof(gather_saved) + (size_t)n * sizeof(int32_t));
    if (nd) {
        gather_saved *s = nd->saved;
        s->n = n;
        memcpy(s->ids, ids, (size_t)n * sizeof *ids);
    }
    return y;
}
