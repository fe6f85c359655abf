/* ops_reduce.c -- sum, mean and max over one axis or over all axes.
 *
 * The input (made contiguous) is seen as (outer, n, inner) around the reduced axis (n = numel,
 * outer = inner = 1 for AG_ALL); the result is (outer, inner):
 *   sum:  y[o,i] = sum_k x[o,k,i]              dx[o,k,i] += dy[o,i]
 *   mean: y[o,i] = sum_k x[o,k,i] / n          dx[o,k,i] += dy[o,i] / n
 *   max:  y[o,i] = x[o,k*,i], k* first argmax  dx[o,k*,i] += dy[o,i]
 */
#include "autograd/ag_internal.h"

typedef enum { R_SUM, R_MEAN, R_MAX } reduce_kind;

typedef struct reduce_saved {
    reduce_kind kind;
    ptrdiff_t outer, n, inner;
    int32_t *argmax; /* max only: k* per output element */
} reduce_saved;

static void reduce_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const reduce_saved *s = nd->saved;
    ag_real scale = s->kind == R_MEAN ? (ag_real)1 / (ag_real)s->n : 1;
    for (ptrdiff_t o = 0; o < s->outer; o++) {
        for (ptrdiff_t i = 0; i < s->inner; i++) {
            ag_real g = y->grad[o * s->inner + i] * scale;
            ag_real *gx = x->grad + o * s->n * s->inner + i;
            if (s->kind == R_MAX) {
                gx[s->argmax[o * s->inner + i] * s->inner] += g;
            } else {
                for (ptrdiff_t k = 0; k < s->n; k++) gx[k * s->inner] += g;
            }
        }
    }
}
static const ag_op sum_op = {"sum", reduce_backward};
static const ag_op mean_op = {"mean", reduce_backward};
static const ag_op max_op = {"max", reduce_backward};

bool ag__reduce_split(ag_tape *t, const char *op, const ag_tensor *x, int axis, bool keepdim,
                      int *nd, int *shape, ptrdiff_t *outer, ptrdiff_t *n, ptrdiff_t *inner) {
    *nd = 0;
    if (axis == AG_ALL) {
        *outer = *inner = 1;
        *n = x->numel;
        if (keepdim)
            for (; *nd < x->ndim; (*nd)++) shape[*nd] = 1;
        return true;
    }
    int a = ag_op_axis(t, op, x, axis, x->ndim);
    if (a < 0) return false;
    ag_op_split(x, a, outer, n, inner);
    for (int d = 0; d < x->ndim; d++) {
        if (d != a) shape[(*nd)++] = x->shape[d];
        else if (keepdim) shape[(*nd)++] = 1;
    }
    return true;
}

static ag_tensor *reduce(ag_tape *t, const ag_op *op, reduce_kind kind, ag_tensor *x, int axis,
                         bool keepdim) {
    if (!ag_op_check(t, op->name, 1, &x)) return NULL;
    int shape[AG_MAX_DIMS], nd;
    ptrdiff_t outer, n, inner;
    if (!ag__reduce_split(t, op->name, x, axis, keepdim, &nd, shape, &outer, &n, &inner))
        return NULL;
    if (kind == R_MAX && n == 0) {
        char sx[64];
        return ag_report(t, "max: reducing an empty axis of %s", ag_shape_str(x, sx, sizeof sx));
    }
    x = ag_op_contig(t, x);
    ag_tensor *in[1] = {x};
    ag_tensor *y = x ? ag_op_out(t, nd, shape, 1, in) : NULL;
    if (!y) return NULL;
    int32_t *arg = NULL;
    if (kind == R_MAX && y->requires_grad) {
        arg = ag_tape_alloc(t, (size_t)(outer * inner) * sizeof *arg);
        if (!arg) return NULL;
    }
    for (ptrdiff_t o = 0; o < outer; o++) {
        for (ptrdiff_t i = 0; i < inner; i++) {
            const ag_real *xs = x->data + o * n * inner + i;
            ag_real acc = kind == R_MAX ? xs[0] : 0;
            int32_t best = 0;
            if (kind == R_MAX) {
                for (ptrdiff_t k = 1; k < n; k++) {
                    if (xs[k * inner] > acc) {
                        acc = xs[k * inner];
                        best = (int32_t)k;
                    }
                }
            } else {
                for (ptrdiff_t k = 0; k < n; k++) acc += xs[k * inner];
                if (kind == R_MEAN) acc /= (ag_real)n;
            }
            y->data[o * inner + i] = acc;
            if (arg) arg[o * inner + i] = best;
        }
    }
    ag_node *node = ag_op_record(t, op, y, 1, in, sizeof(reduce_saved));
    if (node) *(reduce_saved *)node->saved = (reduce_saved){kind, outer, n, inner, arg};
    return y;
}

ag_tensor *ag_sum(ag_tape *t, ag_tensor *x, int axis, bool keepdim) {
    return reduce(t, &sum_op, R_SUM, x, axis, keepdim);
}
ag_tensor *ag_mean(ag_tape *t, ag_tensor *x, int axis, bool keepdim) {
    return reduce(t, &mean_op, R_MEAN, x, axis, keepdim);
}
ag_tensor *ag_max(ag_tape *t, ag_tensor *x, int axis, bool keepdim) {
    return reduce(t, &max_op, R_MAX, x, axis, keepdim);
}
