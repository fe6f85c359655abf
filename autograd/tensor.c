/* tensor.c -- tensor creation, leaves, shape helpers, strided iteration, error reporting. */
#include "autograd/ag_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- errors (the channel itself is in base.c) ---- */

static void *vfail(ag_tape *t, const char *fmt, va_list ap) {
    ag_verror(fmt, ap);
    ag__mark_failed(t);
    ag_error_raise();
    return NULL;
}

void *ag_report(ag_tape *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(t, fmt, ap);
    va_end(ap);
    return NULL;
}


int ag_op_axis(ag_tape *t, const char *op, const ag_tensor *x, int axis, int ndim) {
    int a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim) {
        char s[64];
        ag_report(t, "%s: axis %d out of range for shape %s", op, axis,
                  ag_shape_str(x, s, sizeof s));
        return -1;
    }
    return a;
}

/* ---- shapes ---- */

ptrdiff_t ag_numel(int ndim, const int *shape) {
    ptrdiff_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

void ag_contig_strides(int ndim, const int *shape, ptrdiff_t *stride) {
    ptrdiff_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d];
    }
}

char *ag_dims_str(int ndim, const int *shape, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, d ? ", %d" : "%d", shape[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

char *ag_shape_str(const ag_tensor *x, char *buf, size_t len) {
    return ag_dims_str(x->ndim, x->shape, buf, len);
}

bool ag_same_shape(const ag_tensor *a, const ag_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d]) return false;
    }
    return true;
}

void ag_op_split(const ag_tensor *x, int axis, ptrdiff_t *outer, ptrdiff_t *n, ptrdiff_t *inner) {
    *outer = ag_numel(axis, x->shape);
    *n = x->shape[axis];
    *inner = ag_numel(x->ndim - axis - 1, x->shape + axis + 1);
}

bool ag_is_contiguous(const ag_tensor *x) {
    ptrdiff_t s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (x->shape[d] != 1 && x->stride[d] != s) return false;
        s *= x->shape[d];
    }
    return true;
}

ag_real ag_get(const ag_tensor *x, ptrdiff_t i) {
    ptrdiff_t off = 0;
    for (int d = x->ndim - 1; d >= 0; d--) {
        off += (i % x->shape[d]) * x->stride[d];
        i /= x->shape[d];
    }
    return x->data[off];
}

static bool valid_shape(ag_tape *t, const char *op, int ndim, const int *shape) {
    if (ndim < 0 || ndim > AG_MAX_DIMS) {
        ag_report(t, "%s: %d dimensions (at most %d)", op, ndim, AG_MAX_DIMS);
        return false;
    }
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            char s[96];
            ag_report(t, "%s: negative dimension in shape %s", op,
                      ag_dims_str(ndim, shape, s, sizeof s));
            return false;
        }
    }
    return true;
}

/* ---- tensors ---- */

ag_tensor *ag_tensor_new(ag_tape *t, int ndim, const int *shape) {
    if (!t) return ag_report(NULL, "tensor_new: no tape given");
    if (!valid_shape(t, "tensor_new", ndim, shape)) return NULL;
    ag_tensor *y = ag_op_new(t, ndim, shape, false);
    if (y) memset(y->data, 0, (size_t)y->numel * sizeof(ag_real));
    return y;
}

ag_tensor *ag_tensor_from(ag_tape *t, int ndim, const int *shape, const ag_real *src) {
    if (!t) return ag_report(NULL, "tensor_from: no tape given");
    if (!valid_shape(t, "tensor_from", ndim, shape)) return NULL;
    ag_tensor *y = ag_op_new(t, ndim, shape, false);
    if (y) memcpy(y->data, src, (size_t)y->numel * sizeof(ag_real));
    return y;
}

int ag_leaf_init(ag_tensor *x, ag_real *data, ag_real *grad, int ndim, const int *shape) {
    if (!valid_shape(NULL, "leaf_init", ndim, shape)) return -1;
    ag_tensor y = {0}; /* built aside: shape may point into *x */
    y.data = data;
    y.grad = grad;
    y.requires_grad = grad != NULL;
    y.ndim = ndim;
    if (ndim > 0)
        memcpy(y.shape, shape, (size_t)ndim * sizeof *shape); /* shape may be NULL for a scalar */
    ag_contig_strides(ndim, y.shape, y.stride);
    y.numel = ag_numel(ndim, y.shape);
    y.magic = AG_MAGIC;
    *x = y;
    return 0;
}

ag_tensor *ag_leaf_new(int ndim, const int *shape, bool requires_grad) {
    if (!valid_shape(NULL, "leaf_new", ndim, shape)) return NULL;
    ptrdiff_t n = ag_numel(ndim, shape);
    size_t head = (sizeof(ag_tensor) + 63) & ~(size_t)63;
    unsigned char *m = calloc(1, head + (size_t)n * sizeof(ag_real) * (requires_grad ? 2 : 1));
    if (!m) return ag_report(NULL, "leaf_new: out of memory");
    ag_real *data = (ag_real *)(m + head);
    ag_leaf_init((ag_tensor *)m, data, requires_grad ? data + n : NULL, ndim, shape);
    return (ag_tensor *)m;
}

void ag_leaf_free(ag_tensor *x) {
    if (x) x->magic = 0;
    free(x);
}

/* ---- strided iteration ---- */

void ag_iter_init(ag_iter *it, int nd, const int *shape, int k, const ptrdiff_t *const *st) {
    memset(it, 0, sizeof *it);
    it->k = k;
    /* Drop size-1 dimensions, then merge d into d+1 where every stride set is contiguous. */
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        if (m > 0) {
            bool merge = true;
            for (int s = 0; s < k; s++) merge &= it->st[s][m - 1] == st[s][d] * shape[d];
            if (merge) {
                it->shape[m - 1] *= shape[d];
                for (int s = 0; s < k; s++) it->st[s][m - 1] = st[s][d];
                continue;
            }
        }
        it->shape[m] = shape[d];
        for (int s = 0; s < k; s++) it->st[s][m] = st[s][d];
        m++;
    }
    it->outer = ag_numel(nd, shape) ? 1 : 0;
    if (m == 0) {
        it->inner = 1;
        it->nd = 0;
        return;
    }
    it->inner = it->shape[m - 1];
    for (int s = 0; s < k; s++) it->is[s] = it->st[s][m - 1];
    it->nd = m - 1; /* the outer dims */
    for (int d = 0; d < it->nd; d++) it->outer *= it->shape[d];
}
