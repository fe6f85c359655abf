/* readout.c -- values out of the engine: argmax along an axis, and copies of a tensor's values
 * into caller-owned arrays. Neither is an op: no tape, nothing recorded. Both walk any strides
 * (views included) in row-major order of the shape.
 *
 *   argmax:   x (outer..., n, inner...) -> out[o] = first k maximising x[..., k, ...]
 *             (a NaN counts as the maximum), o over the other axes in row-major order
 *   copy_out: dst[i] = x[i], i the row-major flat index, converted to float or double
 */
#include "autograd/ag_internal.h"

#include <math.h>

/* ---- argmax ---- */

/* ag_row_argmax: blocks of ARGMAX_BLOCK values, each reduced in ARGMAX_LANES independent lanes
 * (a fixed-width loop the compiler vectorizes) to its largest value (NaN left out) and whether
 * it holds a NaN. The first block with a NaN ends the search at its first NaN; otherwise the
 * first block whose largest beats everything before it holds the answer, found by one more scan
 * of that block for the first value equal to its largest (-0 and +0 compare equal, as in the
 * one-by-one rule). */
enum { ARGMAX_LANES = 16, ARGMAX_BLOCK = 256 };

ptrdiff_t ag_row_argmax(const ag_real *x, ptrdiff_t n) {
    ag_real best = x[0];
    if (isnan(best)) return 0;
    ptrdiff_t best_block = -1;
    for (ptrdiff_t b0 = 0; b0 < n; b0 += ARGMAX_BLOCK) {
        ptrdiff_t e = b0 + ARGMAX_BLOCK < n ? b0 + ARGMAX_BLOCK : n, i = b0;
        ag_real m[ARGMAX_LANES];
        int nan[ARGMAX_LANES] = {0};
        for (int l = 0; l < ARGMAX_LANES; l++) m[l] = -INFINITY;
        for (; i + ARGMAX_LANES <= e; i += ARGMAX_LANES)
            for (int l = 0; l < ARGMAX_LANES; l++) {
                ag_real v = x[i + l];
                m[l] = v > m[l] ? v : m[l];
                nan[l] |= v != v;
            }
        for (; i < e; i++) {
            m[0] = x[i] > m[0] ? x[i] : m[0];
            nan[0] |= x[i] != x[i];
        }
        ag_real bm = m[0];
        int any_nan = nan[0];
        for (int l = 1; l < ARGMAX_LANES; l++) {
            bm = m[l] > bm ? m[l] : bm;
            any_nan |= nan[l];
        }
        if (any_nan) {
            for (i = b0; !isnan(x[i]); i++) {}
            return i;
        }
        if (bm > best) best = bm, best_block = b0;
    }
    if (best_block < 0) return 0;
    ptrdiff_t i = best_block;
    while (x[i] != best) i++;
    return i;
}

int ag_argmax(const ag_tensor *x, int axis, int32_t *out, size_t n) {
    if (!x || !out) {
        ag_report(NULL, "argmax: %s is NULL", x ? "out" : "the tensor");
        return -1;
    }
    char sx[64];
    int a = axis == AG_ALL ? -1 : axis < 0 ? axis + x->ndim : axis;
    if (axis != AG_ALL && (a < 0 || a >= x->ndim)) {
        ag_report(NULL, "argmax: axis %d out of range for shape %s", axis,
                  ag_shape_str(x, sx, sizeof sx));
        return -1;
    }
    /* The reduced axis (len, stride) and the others, kept in order: the output's shape. */
    ptrdiff_t len = a < 0 ? x->numel : x->shape[a], step = a < 0 ? 0 : x->stride[a];
    int shape[AG_MAX_DIMS], nd = 0;
    ptrdiff_t stride[AG_MAX_DIMS];
    for (int d = 0; d < x->ndim && a >= 0; d++) {
        if (d == a) continue;
        shape[nd] = x->shape[d];
        stride[nd++] = x->stride[d];
    }
    ptrdiff_t n_out = a < 0 ? 1 : ag_numel(nd, shape);
    if (len == 0 || len > INT32_MAX) {
        ag_report(NULL, "argmax: axis %d of %s has %td elements (expected 1 to 2^31 - 1)", axis,
                  ag_shape_str(x, sx, sizeof sx), len);
        return -1;
    }
    if ((size_t)n_out > n) {
        ag_report(NULL, "argmax: %td indices for axis %d of %s, out holds %zu", n_out, axis,
                  ag_shape_str(x, sx, sizeof sx), n);
        return -1;
    }
    if (a < 0) { /* the flattening: walk x in row-major order */
        ag_real best = ag_get(x, 0);
        int32_t arg = 0;
        for (ptrdiff_t i = 1; i < len; i++) {
            ag_real v = ag_get(x, i);
            if (v > best || (isnan(v) && !isnan(best))) best = v, arg = (int32_t)i;
        }
        out[0] = arg;
        return 0;
    }
    ag_iter it;
    ag_iter_init(&it, nd, shape, 1, (const ptrdiff_t *[]){stride});
    ptrdiff_t o = 0;
    for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {
        for (ptrdiff_t j = 0; j < it.inner; j++, o++) {
            const ag_real *xs = x->data + it.off[0] + j * it.is[0];
            if (step == 1) {
                out[o] = (int32_t)ag_row_argmax(xs, len);
                continue;
            }
            ag_real best = xs[0];
            int32_t arg = 0;
            for (ptrdiff_t k = 1; k < len; k++) {
                ag_real v = xs[k * step];
                if (v > best || (isnan(v) && !isnan(best))) best = v, arg = (int32_t)k;
            }
            out[o] = arg;
        }
    }
    return 0;
}

/* ---- copies out ---- */

/* dst[i] = (T)x[i] in row-major order, for T = float or double. */
#define COPY_OUT(fname, T)                                                                         \
    int fname(const ag_tensor *x, T *dst, size_t n) {                                              \
        if (!x || !dst) {                                                                          \
            ag_report(NULL, "copy_out: %s is NULL", x ? "dst" : "the tensor");                     \
            return -1;                                                                             \
        }                                                                                          \
        if ((size_t)x->numel > n) {                                                                \
            char sx[64];                                                                           \
            ag_report(NULL, "copy_out: %s has %td values, dst holds %zu",                          \
                      ag_shape_str(x, sx, sizeof sx), x->numel, n);                                \
            return -1;                                                                             \
        }                                                                                          \
        ag_iter it;                                                                                \
        ag_iter_init(&it, x->ndim, x->shape, 1, (const ptrdiff_t *[]){x->stride});                 \
        for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it)) {                              \
            const ag_real *xs = x->data + it.off[0];                                               \
            for (ptrdiff_t j = 0; j < it.inner; j++) *dst++ = (T)xs[j * it.is[0]];                 \
        }                                                                                          \
        return 0;                                                                                  \
    }

COPY_OUT(ag_copy_out_f32, float)
COPY_OUT(ag_copy_out_f64, double)

int ag_copy_out(const ag_tensor *x, ag_real *dst, size_t n) {
#ifdef TG_DOUBLE
    return ag_copy_out_f64(x, dst, n);
#else
    return ag_copy_out_f32(x, dst, n);
#endif
}
