/* tensor.c -- tensor creation, leaves, shape helpers, error reporting and the RNG. */
#include "autograd/ag_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- errors ---- */

static void default_handler(const char *msg, void *user) {
    (void)user;
    fprintf(stderr, "tapegrad: %s\n", msg);
}

static ag_error_fn handler = default_handler;
static void *handler_user;
static _Thread_local char last_error[512];

void ag_set_error_handler(ag_error_fn fn, void *user) {
    handler = fn ? fn : default_handler;
    handler_user = fn ? user : NULL;
}

const char *ag_last_error(void) { return last_error; }

static void *vfail(ag_tape *t, const char *fmt, va_list ap) {
    char msg[sizeof last_error];
    vsnprintf(msg, sizeof msg, fmt, ap); /* fmt's arguments may point into last_error */
    memcpy(last_error, msg, sizeof msg);
    ag__mark_failed(t);
    handler(last_error, handler_user);
    return NULL;
}

void *ag__fail(ag_tape *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(t, fmt, ap);
    va_end(ap);
    return NULL;
}

void *ag_report(ag_tape *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(t, fmt, ap);
    va_end(ap);
    return NULL;
}

int ag__axis(ag_tape *t, const char *op, const ag_tensor *x, int axis, int ndim) {
    int a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim) {
        char s[64];
        ag__fail(t, "%s: axis %d out of range for shape %s", op, axis,
                 ag_shape_str(x, s, sizeof s));
        return -1;
    }
    return a;
}

/* ---- shapes ---- */

ptrdiff_t ag__numel(int ndim, const int *shape) {
    ptrdiff_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

void ag__contig_strides(int ndim, const int *shape, ptrdiff_t *stride) {
    ptrdiff_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d];
    }
}

char *ag__dims_str(int ndim, const int *shape, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, d ? ", %d" : "%d", shape[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

char *ag_shape_str(const ag_tensor *x, char *buf, size_t len) {
    return ag__dims_str(x->ndim, x->shape, buf, len);
}

bool ag__same_shape(const ag_tensor *a, const ag_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d]) return false;
    }
    return true;
}

void ag__split(const ag_tensor *x, int axis, ptrdiff_t *outer, ptrdiff_t *n, ptrdiff_t *inner) {
    *outer = ag__numel(axis, x->shape);
    *n = x->shape[axis];
    *inner = ag__numel(x->ndim - axis - 1, x->shape + axis + 1);
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
        ag__fail(t, "%s: %d dimensions (at most %d)", op, ndim, AG_MAX_DIMS);
        return false;
    }
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            char s[96];
            ag__fail(t, "%s: negative dimension in shape %s", op, ag__dims_str(ndim, shape, s, sizeof s));
            return false;
        }
    }
    return true;
}

/* ---- tensors ---- */

ag_tensor *ag_tensor_new(ag_tape *t, int ndim, const int *shape) {
    if (!t) return ag__fail(NULL, "tensor_new: no tape given");
    if (!valid_shape(t, "tensor_new", ndim, shape)) return NULL;
    ag_tensor *y = ag__new(t, ndim, shape, false);
    if (y) memset(y->data, 0, (size_t)y->numel * sizeof(ag_real));
    return y;
}

ag_tensor *ag_tensor_from(ag_tape *t, int ndim, const int *shape, const ag_real *src) {
    if (!t) return ag__fail(NULL, "tensor_from: no tape given");
    if (!valid_shape(t, "tensor_from", ndim, shape)) return NULL;
    ag_tensor *y = ag__new(t, ndim, shape, false);
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
    memcpy(y.shape, shape, (size_t)ndim * sizeof *shape);
    ag__contig_strides(ndim, y.shape, y.stride);
    y.numel = ag__numel(ndim, y.shape);
    y.magic = AG_MAGIC;
    *x = y;
    return 0;
}

ag_tensor *ag_leaf_new(int ndim, const int *shape, bool requires_grad) {
    if (!valid_shape(NULL, "leaf_new", ndim, shape)) return NULL;
    ptrdiff_t n = ag__numel(ndim, shape);
    size_t head = (sizeof(ag_tensor) + 63) & ~(size_t)63;
    unsigned char *m = calloc(1, head + (size_t)n * sizeof(ag_real) * (requires_grad ? 2 : 1));
    if (!m) return ag__fail(NULL, "leaf_new: out of memory");
    ag_real *data = (ag_real *)(m + head);
    ag_leaf_init((ag_tensor *)m, data, requires_grad ? data + n : NULL, ndim, shape);
    return (ag_tensor *)m;
}

void ag_leaf_free(ag_tensor *x) {
    if (x) x->magic = 0;
    free(x);
}

/* ---- RNG: xoshiro256** seeded through splitmix64 ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ag_rng_seed(ag_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

uint64_t ag_rng_next(ag_rng *r) { return ag__rng_next(r); }

double ag_rng_uniform(ag_rng *r) { return (double)(ag_rng_next(r) >> 11) * 0x1.0p-53; }

double ag_rng_normal(ag_rng *r) {
    double u1 = 1.0 - ag_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = ag_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint32_t ag_rng_below(ag_rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (ag_rng_next(r) >> 32) * n;
    if ((uint32_t)m < n) {
        uint32_t floor = (uint32_t)(-n) % n;
        while ((uint32_t)m < floor) m = (ag_rng_next(r) >> 32) * n;
    }
    return (uint32_t)(m >> 32);
}

/* ---- strided iteration ---- */

void ag__iter_init(ag_iter *it, int nd, const int *shape, int k, const ptrdiff_t *const *st) {
    memset(it, 0, sizeof *it);
    it->k = k;
    /* Drop size-1 dimensions, then merge d into d+1 where every stride set is contiguous. */
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        if (m > 0) {
            bool merge = true;
            for (int s = 0; s < k; s++)
                merge &= it->st[s][m - 1] == st[s][d] * shape[d];
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
    it->outer = ag__numel(nd, shape) ? 1 : 0;
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
