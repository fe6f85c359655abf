/* pool.c -- max and average pooling, 1-D and 2-D: one op each on the public op API
 * autograd/ag_op.h, and beside them the same pooling composed of ag primitives, the tested
 * reference (tests/nn/test_conv.c). Math and shapes in nn/pool.h. The 1-D pools run the 2-D
 * code with a height of 1 (x (N, C, L) has the memory of (N, C, 1, L)).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"

/* ---- geometry and checks ----------------------------------------------------------------- */

typedef struct pool_geom {
    nn_pool_kind kind;
    int ndim;         /* of the input and the output: 3 or 4 */
    ptrdiff_t planes; /* N C */
    int H, W, KH, KW, SH, SW, PH, PW, OH, OW;
} pool_geom;

/* "max_pool2d", "avg_pool1d_composite" ... */
static const char *pool_name(nn_pool_kind kind, int ndim, bool composite, char *buf, size_t len) {
    snprintf(buf, len, "%s_pool%dd%s", kind == NN_POOL_MAX ? "max" : "avg", ndim - 2,
             composite ? "_composite" : "");
    return buf;
}

/* k, s, p: (height, width), the height 1, s 1, p 0 for 1-D; s 0 means the kernel. Fills g;
 * false after reporting. */
static bool pool_check(ag_tape *t, const char *op, ag_tensor *x, nn_pool_kind kind, int ndim,
                       const int *k, const int *s, const int *p, pool_geom *g) {
    if (!ag_op_check(t, op, 1, &x)) return false;
    char sx[64], win[160];
    if (ndim == 4)
        snprintf(win, sizeof win, "kernel %dx%d, stride %dx%d, padding %dx%d", k[0], k[1], s[0],
                 s[1], p[0], p[1]);
    else snprintf(win, sizeof win, "kernel %d, stride %d, padding %d", k[1], s[1], p[1]);
    if (x->ndim != ndim) {
        ag_report(t, "%s: input %s (%s); expected (N, C, %s)", op, ag_shape_str(x, sx, sizeof sx),
                  win, ndim == 4 ? "H, W" : "L");
        return false;
    }
    *g = (pool_geom){.kind = kind,
                     .ndim = ndim,
                     .planes = (ptrdiff_t)x->shape[0] * x->shape[1],
                     .H = ndim == 4 ? x->shape[2] : 1,
                     .W = x->shape[ndim - 1]};
    bool ok = true;
    for (int a = 0; a < 2; a++) ok = ok && k[a] >= 1 && s[a] >= 0 && p[a] >= 0 && p[a] <= k[a] / 2;
    if (!ok) {
        ag_report(t,
                  "%s: input %s: invalid window (%s): expected kernel >= 1, stride >= 0 (0: the "
                  "kernel), 0 <= padding <= kernel / 2",
                  op, ag_shape_str(x, sx, sizeof sx), win);
        return false;
    }
    g->KH = k[0], g->KW = k[1], g->PH = p[0], g->PW = p[1];
    g->SH = s[0] ? s[0] : k[0], g->SW = s[1] ? s[1] : k[1];
    if ((long)g->H + 2L * g->PH < g->KH || (long)g->W + 2L * g->PW < g->KW) {
        ag_report(t, "%s: input %s is smaller than the window (%s)", op,
                  ag_shape_str(x, sx, sizeof sx), win);
        return false;
    }
    g->OH = (g->H + 2 * g->PH - g->KH) / g->SH + 1;
    g->OW = (g->W + 2 * g->PW - g->KW) / g->SW + 1;
    return true;
}

/* ---- the ops ------------------------------------------------------------------------------
 * Per plane (one (n, c) pair: H W inputs, OH OW outputs), window (i, j) = rows
 * [i SH - PH, i SH - PH + KH) x columns [j SW - PW, j SW - PW + KW), clipped to the plane:
 *   max: y = x[a], a = the first index, in row-major order, with x[a] > every earlier one or
 *        NaN (PyTorch's scan: start at -inf; take v when v > max or v is NaN); arg[i, j] = a
 *        backward: dx[a] += dy
 *   avg: y = sum of the clipped window / (KH KW);  backward: dx += dy / (KH KW) over it
 * The planes are split between the threads; each writes only its own (the same bits for any
 * number of threads). */

typedef struct pool_job {
    const pool_geom *g;
    const ag_real *x; /* forward: the input; backward: dy */
    ag_real *y;       /* forward: the output; backward: dx */
    int32_t *arg;     /* max: (planes, OH, OW) window maxima, or NULL (not recorded) */
    bool backward;
} pool_job;

static void pool_planes(void *ctx, ptrdiff_t p0, ptrdiff_t p1) {
    const pool_job *j = ctx;
    const pool_geom *g = j->g;
    const ptrdiff_t HW = (ptrdiff_t)g->H * g->W, OHW = (ptrdiff_t)g->OH * g->OW;
    const ag_real inv = (ag_real)1 / (ag_real)(g->KH * g->KW);
    for (ptrdiff_t pl = p0; pl < p1; pl++) {
        const ag_real *x = j->x + pl * (j->backward ? OHW : HW);
        ag_real *y = j->y + pl * (j->backward ? HW : OHW);
        int32_t *arg = j->arg ? j->arg + pl * OHW : NULL;
        for (int i = 0; i < g->OH; i++)
            for (int jj = 0; jj < g->OW; jj++) {
                const ptrdiff_t o = (ptrdiff_t)i * g->OW + jj;
                const int h0 = i * g->SH - g->PH, w0 = jj * g->SW - g->PW;
                const int ha = h0 < 0 ? 0 : h0, hb = h0 + g->KH > g->H ? g->H : h0 + g->KH;
                const int wa = w0 < 0 ? 0 : w0, wb = w0 + g->KW > g->W ? g->W : w0 + g->KW;
                if (g->kind == NN_POOL_MAX && j->backward) {
                    y[arg[o]] += x[o];
                } else if (g->kind == NN_POOL_MAX) {
                    ag_real m = -INFINITY;
                    int32_t a = (int32_t)(ha * g->W + wa);
                    for (int h = ha; h < hb; h++)
                        for (int w = wa; w < wb; w++) {
                            const ag_real v = x[(ptrdiff_t)h * g->W + w];
                            if (v > m || isnan(v)) m = v, a = (int32_t)(h * g->W + w);
                        }
                    y[o] = m;
                    if (arg) arg[o] = a;
                } else if (j->backward) {
                    const ag_real d = x[o] * inv;
                    for (int h = ha; h < hb; h++)
                        for (int w = wa; w < wb; w++) y[(ptrdiff_t)h * g->W + w] += d;
                } else {
                    ag_real sum = 0;
                    for (int h = ha; h < hb; h++)
                        for (int w = wa; w < wb; w++) sum += x[(ptrdiff_t)h * g->W + w];
                    y[o] = sum * inv;
                }
            }
    }
}

typedef struct pool_saved {
    pool_geom g;
    int32_t *arg; /* max only */
} pool_saved;

static void pool_run(const pool_geom *g, const ag_real *x, ag_real *y, int32_t *arg, bool bwd) {
    pool_job j = {g, x, y, arg, bwd};
    const ptrdiff_t work = (ptrdiff_t)g->OH * g->OW * g->KH * g->KW;
    ag_parallel_for(g->planes, 32768 / (work ? work : 1) + 1, pool_planes, &j);
}

static void pool_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    const pool_saved *s = nd->saved;
    if (x->requires_grad) pool_run(&s->g, y->grad, x->grad, s->arg, true);
}
static const ag_op pool_op = {"pool", pool_backward};

/* x (N, C, H, W) or (N, C, L); k, s, p as pool_check takes them. */
static ag_tensor *pool_fused(const nn_ctx *c, ag_tensor *x, nn_pool_kind kind, int ndim,
                             const int *k, const int *s, const int *p) {
    if (!c || !x) return NULL;
    ag_tape *t = c->tape;
    char op[32];
    pool_name(kind, ndim, false, op, sizeof op);
    pool_geom g;
    if (!pool_check(t, op, x, kind, ndim, k, s, p, &g)) return NULL;
    if (!(x = ag_op_contig(t, x))) return NULL;
    int shape[4] = {x->shape[0], x->shape[1], g.OH, g.OW};
    if (ndim == 3) shape[2] = g.OW;
    ag_tensor *y = ag_op_out(t, ndim, shape, 1, &x);
    if (!y) return NULL;
    pool_saved sv = {g, NULL};
    if (kind == NN_POOL_MAX && y->requires_grad &&
        !(sv.arg = ag_tape_alloc(t, sizeof *sv.arg * (size_t)(y->numel ? y->numel : 1))))
        return NULL;
    pool_run(&g, x->data, y->data, sv.arg, false);
    ag_node *nd = ag_op_record(t, &pool_op, y, 1, &x, sizeof sv);
    if (nd) *(pool_saved *)nd->saved = sv;
    return y;
}

ag_tensor *nn_max_pool2d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding) {
    return pool_fused(c, x, NN_POOL_MAX, 4, (const int[]){kernel, kernel},
                      (const int[]){stride, stride}, (const int[]){padding, padding});
}
ag_tensor *nn_avg_pool2d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding) {
    return pool_fused(c, x, NN_POOL_AVG, 4, (const int[]){kernel, kernel},
                      (const int[]){stride, stride}, (const int[]){padding, padding});
}
ag_tensor *nn_max_pool1d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding) {
    return pool_fused(c, x, NN_POOL_MAX, 3, (const int[]){1, kernel}, (const int[]){1, stride},
                      (const int[]){0, padding});
}
ag_tensor *nn_avg_pool1d(const nn_ctx *c, ag_tensor *x, int kernel, int stride, int padding) {
    return pool_fused(c, x, NN_POOL_AVG, 3, (const int[]){1, kernel}, (const int[]){1, stride},
                      (const int[]){0, padding});
}

ag_tensor *nn_pool2d(const nn_ctx *c, ag_tensor *x, nn_pool_kind kind, const int kernel[2],
                     const int stride[2], const int padding[2]) {
    if (!kernel) return c ? ag_report(c->tape, "nn_pool2d: kernel is NULL") : NULL;
    return pool_fused(c, x, kind, 4, kernel, stride ? stride : (const int[]){0, 0},
                      padding ? padding : (const int[]){0, 0});
}

/* ---- the same from primitives -------------------------------------------------------------
 * xp = x with KH rows and KW columns of the pad value on each side (ag_concat; -inf for max, 0
 * for avg); for each window offset (p, q) the strided view
 *   V_pq[n, c, i, j] = xp[n, c, i SH + p, j SW + q]                          (N, C, OH, OW)
 * copied to (N, C, OH, OW, 1); the KH KW of them concatenated along the last axis in row-major
 * order of (p, q), and y = ag_max (first maximum: PyTorch's tie rule) or ag_mean over it (the
 * padded zeros counted: count_include_pad). */

static ag_tensor *pad_axis(ag_tape *t, ag_tensor *x, int axis, int p, ag_real value) {
    if (!x || p == 0) return x;
    int shape[4];
    memcpy(shape, x->shape, sizeof shape);
    shape[axis] = p;
    ag_tensor *z = ag_tensor_new(t, 4, shape);
    if (!z) return NULL;
    for (ptrdiff_t i = 0; i < z->numel; i++) z->data[i] = value;
    ag_tensor *parts[3] = {z, x, z};
    return ag_concat(t, 3, parts, axis);
}

ag_tensor *nn_pool2d_composite(const nn_ctx *c, ag_tensor *x, nn_pool_kind kind,
                               const int kernel[2], const int stride[2], const int padding[2]) {
    if (!c || !x || !kernel) return NULL;
    ag_tape *t = c->tape;
    char op[32];
    pool_name(kind, 4, true, op, sizeof op);
    pool_geom g;
    if (!pool_check(t, op, x, kind, 4, kernel, stride ? stride : (const int[]){0, 0},
                    padding ? padding : (const int[]){0, 0}, &g))
        return NULL;
    const ag_real pad = kind == NN_POOL_MAX ? -INFINITY : 0;
    ag_tensor *xp = ag_contiguous(t, pad_axis(t, pad_axis(t, x, 2, g.PH, pad), 3, g.PW, pad));
    ag_tensor **views = xp ? ag_tape_alloc(t, sizeof *views * (size_t)(g.KH * g.KW)) : NULL;
    if (!views) return NULL;
    const int N = x->shape[0], C = x->shape[1];
    const ptrdiff_t *st = xp->stride, vs[4] = {st[0], st[1], g.SH * st[2], g.SW * st[3]};
    for (int p = 0; p < g.KH; p++)
        for (int q = 0; q < g.KW; q++) {
            ag_tensor *v =
                ag_op_view(t, xp, 4, (const int[]){N, C, g.OH, g.OW}, vs, p * st[2] + q * st[3]);
            if (!(views[p * g.KW + q] = ag_reshape(t, v, AG_SHAPE(N, C, g.OH, g.OW, 1))))
                return NULL;
        }
    ag_tensor *all = ag_concat(t, g.KH * g.KW, views, 4);
    return kind == NN_POOL_MAX ? ag_max(t, all, 4, false) : ag_mean(t, all, 4, false);
}
