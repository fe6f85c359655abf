/* conv.c -- Conv1d and Conv2d: the layers, one fused op on the public op API autograd/ag_op.h
 * (im2col + GEMM), and beside it the same convolution composed of ag primitives, the tested
 * reference (tests/nn/test_conv.c). Math, shapes and names in nn/conv.h.
 *
 * Conv1d runs the 2-D code with a height of 1 (KH = SH = DH = 1, PH = 0): the weight
 * (O, C/G, K) has the memory of (O, C/G, 1, K), the input (N, C, L) that of (N, C, 1, L).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/ag_op.h"
#include "nn/internal.h"

/* ---- geometry and checks ----------------------------------------------------------------- */

/* A convolution as both layers describe it (1-D: k, s, p, d of the height are 1, 1, 0, 1). */
typedef struct conv_desc {
    const char *op; /* "conv2d", "conv1d_composite" ... for the messages */
    ag_tensor *weight, *bias;
    int in, out, groups;
    int ndim; /* of the input: 3 (Conv1d) or 4 (Conv2d) */
    int k[2], s[2], p[2], d[2];
} conv_desc;

/* The sizes of one call. The column matrix of a chunk of nc samples is (G K, nc P): row
 * r = (c KH + p) KW + q (c the input channel, so group g's rows are [g K, (g + 1) K)), column
 * j = n P + i OW + j' (sample n of the chunk, output position (i, j')). */
typedef struct conv_geom {
    int N, C, H, W, O, G, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW;
    int ndim;    /* of the input and the output */
    ptrdiff_t P; /* OH OW */
    ptrdiff_t K; /* C/G KH KW */
    int nc;      /* samples per chunk */
} conv_geom;

/* Elements of a chunk's column matrix, at most (unless one sample needs more). */
#define CONV_CHUNK_ELEMS ((ptrdiff_t)1 << 20)

static conv_desc desc2(const nn_conv2d *l, const char *op) {
    conv_desc d = {op, l->weight, l->bias, l->in, l->out, l->groups, 4, {0}, {0}, {0}, {0}};
    for (int a = 0; a < 2; a++) {
        d.k[a] = l->kernel[a];
        d.s[a] = l->stride[a];
        d.p[a] = l->padding[a];
        d.d[a] = l->dilation[a];
    }
    return d;
}

static conv_desc desc1(const nn_conv1d *l, const char *op) {
    conv_desc d = {op, l->weight,      l->bias,        l->in,           l->out,          l->groups,
                   3,  {1, l->kernel}, {1, l->stride}, {0, l->padding}, {1, l->dilation}};
    return d;
}

/* "'conv1'" from the weight's name "conv1.weight" (empty when it has none). */
static const char *layer_name(const ag_tensor *w, char *buf, size_t len) {
    buf[0] = '\0';
    if (!w || !w->name) return buf;
    size_t n = strlen(w->name), suf = strlen(".weight");
    if (n > suf && !strcmp(w->name + n - suf, ".weight")) n -= suf;
    snprintf(buf, len, " '%.*s'", (int)n, w->name);
    return buf;
}

/* "3x3" (4-D) or "3" (3-D) for a pair of (height, width) values. */
static const char *pair(const int *v, int ndim, char *buf, size_t len) {
    if (ndim == 4) snprintf(buf, len, "%dx%d", v[0], v[1]);
    else snprintf(buf, len, "%d", v[1]);
    return buf;
}

/* The layer's own numbers: sizes, groups, kernel, stride, padding, dilation, and the weight's
 * and bias's shapes. False after reporting. */
static bool desc_ok(ag_tape *t, const conv_desc *d, const char *nm) {
    char sw[64], sb[64], a[32], b[32], c[32], e[32];
    bool ok = d->in > 0 && d->out > 0 && d->groups > 0 && d->in % d->groups == 0 &&
              d->out % d->groups == 0;
    for (int i = 0; i < 2; i++)
        ok = ok && d->k[i] > 0 && d->s[i] > 0 && d->p[i] >= 0 && d->d[i] > 0;
    if (!ok) {
        ag_report(t,
                  "%s%s: invalid layer: in = %d, out = %d, groups = %d (must divide both), "
                  "kernel %s, stride %s, padding %s, dilation %s",
                  d->op, nm, d->in, d->out, d->groups, pair(d->k, d->ndim, a, sizeof a),
                  pair(d->s, d->ndim, b, sizeof b), pair(d->p, d->ndim, c, sizeof c),
                  pair(d->d, d->ndim, e, sizeof e));
        return false;
    }
    const ag_tensor *w = d->weight, *bs = d->bias;
    int want[4] = {d->out, d->in / d->groups, d->k[0], d->k[1]};
    const int *ws = d->ndim == 4 ? want : (const int[]){want[0], want[1], want[3]};
    bool wok = w->ndim == d->ndim;
    for (int i = 0; wok && i < w->ndim; i++) wok = w->shape[i] == ws[i];
    if (!wok || (bs && (bs->ndim != 1 || bs->shape[0] != d->out))) {
        ag_report(t, "%s%s: weight %s and bias %s; expected weight %s and bias [%d]", d->op, nm,
                  ag_shape_str(w, sw, sizeof sw), bs ? ag_shape_str(bs, sb, sizeof sb) : "none",
                  ag_dims_str(d->ndim, ws, a, sizeof a), d->out);
        return false;
    }
    return true;
}

/* Checks x against the layer and fills g. False after reporting (naming the layer and the
 * shapes). */
static bool conv_check(ag_tape *t, const conv_desc *d, ag_tensor *x, conv_geom *g) {
    ag_tensor *in[3] = {x, d->weight, d->bias};
    if (!ag_op_check(t, d->op, d->bias ? 3 : 2, in)) return false;
    char nm[NN_NAME_MAX + 8], sx[64], sw[64], a[32], b[32], c[32];
    layer_name(d->weight, nm, sizeof nm);
    if (!desc_ok(t, d, nm)) return false;
    if (x->ndim != d->ndim || x->shape[1] != d->in) {
        ag_report(t, "%s%s: input %s with weight %s; expected (N, %d, %s)", d->op, nm,
                  ag_shape_str(x, sx, sizeof sx), ag_shape_str(d->weight, sw, sizeof sw), d->in,
                  d->ndim == 4 ? "H, W" : "L");
        return false;
    }
    *g = (conv_geom){.N = x->shape[0],
                     .C = d->in,
                     .H = d->ndim == 4 ? x->shape[2] : 1,
                     .W = x->shape[d->ndim - 1],
                     .O = d->out,
                     .G = d->groups,
                     .KH = d->k[0],
                     .KW = d->k[1],
                     .SH = d->s[0],
                     .SW = d->s[1],
                     .PH = d->p[0],
                     .PW = d->p[1],
                     .DH = d->d[0],
                     .DW = d->d[1],
                     .ndim = d->ndim};
    const long oh = ((long)g->H + 2L * g->PH - (long)g->DH * (g->KH - 1) - 1) / g->SH + 1;
    const long ow = ((long)g->W + 2L * g->PW - (long)g->DW * (g->KW - 1) - 1) / g->SW + 1;
    const bool hfits = (long)g->H + 2L * g->PH >= (long)g->DH * (g->KH - 1) + 1;
    const bool wfits = (long)g->W + 2L * g->PW >= (long)g->DW * (g->KW - 1) + 1;
    if (!hfits || !wfits) {
        ag_report(t,
                  "%s%s: input %s is too small for kernel %s with dilation %s and padding %s "
                  "(weight %s)",
                  d->op, nm, ag_shape_str(x, sx, sizeof sx), pair(d->k, d->ndim, a, sizeof a),
                  pair(d->d, d->ndim, b, sizeof b), pair(d->p, d->ndim, c, sizeof c),
                  ag_shape_str(d->weight, sw, sizeof sw));
        return false;
    }
    g->OH = (int)oh;
    g->OW = (int)ow;
    g->P = (ptrdiff_t)g->OH * g->OW;
    g->K = (ptrdiff_t)(g->C / g->G) * g->KH * g->KW;
    ptrdiff_t per = g->G * g->K * g->P, nc = per ? CONV_CHUNK_ELEMS / per : g->N;
    g->nc = (int)(nc < 1 ? 1 : nc > g->N ? (g->N ? g->N : 1) : nc);
    return true;
}

/* ---- im2col and col2im --------------------------------------------------------------------
 * For samples [n0, n0 + nc) of x (N, C, H, W):
 *   im2col:  cols[r][n P + i OW + j] = xp[n0 + n, c, i SH + p DH, j SW + q DW]
 *            (r = (c KH + p) KW + q; xp: x with the zero padding, read as 0 outside x)
 *   col2im:  dx[n0 + n, c, ih, iw] += cols[r][n P + i OW + j] for every (r, i, j) that reads
 *            (ih, iw) -- the adjoint of im2col, accumulating.
 * im2col splits the rows r between the threads; col2im the channels c (each writes only its own
 * planes, in a fixed order: the bits do not depend on the number of threads). */

typedef struct col_job {
    const conv_geom *g;
    const ag_real *x; /* im2col's input */
    ag_real *dx;      /* col2im's output */
    ag_real *cols;    /* (G K, nc P) */
    int n0, nc;
} col_job;

/* The output columns j in [*lo, *hi) whose input column j SW + off lies in [0, W). */
static void valid_cols(const conv_geom *g, int off, int *lo, int *hi) {
    int l = off >= 0 ? 0 : (-off + g->SW - 1) / g->SW;
    int h = g->W - 1 - off < 0 ? 0 : (g->W - 1 - off) / g->SW + 1;
    *lo = l < g->OW ? l : g->OW;
    *hi = h < *lo ? *lo : h > g->OW ? g->OW : h;
}

static void im2col_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const col_job *j = ctx;
    const conv_geom *g = j->g;
    const ptrdiff_t ncP = (ptrdiff_t)j->nc * g->P, HW = (ptrdiff_t)g->H * g->W;
    for (ptrdiff_t r = r0; r < r1; r++) {
        const int q = (int)(r % g->KW), p = (int)(r / g->KW % g->KH), c = (int)(r / g->KW / g->KH);
        const int off = q * g->DW - g->PW;
        int lo, hi;
        valid_cols(g, off, &lo, &hi);
        for (int n = 0; n < j->nc; n++) {
            const ag_real *plane = j->x + ((ptrdiff_t)(j->n0 + n) * g->C + c) * HW;
            for (int i = 0; i < g->OH; i++) {
                ag_real *restrict dst = j->cols + r * ncP + n * g->P + (ptrdiff_t)i * g->OW;
                const int ih = i * g->SH - g->PH + p * g->DH;
                if (ih < 0 || ih >= g->H) {
                    memset(dst, 0, sizeof *dst * (size_t)g->OW);
                    continue;
                }
                const ag_real *restrict src = plane + (ptrdiff_t)ih * g->W;
                for (int o = 0; o < lo; o++) dst[o] = 0;
                if (g->SW == 1 && hi > lo)
                    memcpy(dst + lo, src + lo + off, sizeof *dst * (size_t)(hi - lo));
                else
                    for (int o = lo; o < hi; o++) dst[o] = src[(ptrdiff_t)o * g->SW + off];
                for (int o = hi; o < g->OW; o++) dst[o] = 0;
            }
        }
    }
}

static void col2im_channels(void *ctx, ptrdiff_t c0, ptrdiff_t c1) {
    const col_job *j = ctx;
    const conv_geom *g = j->g;
    const ptrdiff_t ncP = (ptrdiff_t)j->nc * g->P, HW = (ptrdiff_t)g->H * g->W;
    for (ptrdiff_t c = c0; c < c1; c++)
        for (int n = 0; n < j->nc; n++) {
            ag_real *plane = j->dx + ((ptrdiff_t)(j->n0 + n) * g->C + c) * HW;
            for (int p = 0; p < g->KH; p++)
                for (int q = 0; q < g->KW; q++) {
                    const ptrdiff_t r = (c * g->KH + p) * g->KW + q;
                    const int off = q * g->DW - g->PW;
                    int lo, hi;
                    valid_cols(g, off, &lo, &hi);
                    for (int i = 0; i < g->OH; i++) {
                        const int ih = i * g->SH - g->PH + p * g->DH;
                        if (ih < 0 || ih >= g->H) continue;
                        const ag_real *src = j->cols + r * ncP + n * g->P + (ptrdiff_t)i * g->OW;
                        ag_real *dst = plane + (ptrdiff_t)ih * g->W;
                        for (int o = lo; o < hi; o++) dst[(ptrdiff_t)o * g->SW + off] += src[o];
                    }
                }
        }
}

/* Work per thread: about 64k elements moved. */
static ptrdiff_t per_thread(ptrdiff_t units, ptrdiff_t elems) {
    ptrdiff_t each = units ? elems / units : 1;
    return 65536 / (each ? each : 1) + 1;
}

static void im2col(const conv_geom *g, const ag_real *x, ag_real *cols, int n0, int nc) {
    col_job j = {g, x, NULL, cols, n0, nc};
    const ptrdiff_t rows = g->G * g->K;
    ag_parallel_for(rows, per_thread(rows, rows * nc * g->P), im2col_rows, &j);
}

static void col2im(const conv_geom *g, const ag_real *cols, ag_real *dx, int n0, int nc) {
    col_job j = {g, NULL, dx, (ag_real *)cols, n0, nc};
    ag_parallel_for(g->C, per_thread(g->C, g->G * g->K * nc * g->P), col2im_channels, &j);
}

/* ---- the fused op ---------------------------------------------------------------------------
 * Per chunk of nc samples, cols = im2col(x) (G K, nc P), and per group g (Og = O / G output
 * channels, rows [g Og, (g + 1) Og) of W viewed as (O, K)):
 *   forward:   Yt[:, g Og : (g + 1) Og] (nc P, Og) = cols_g^T (nc P, K) W_g^T (K, Og)
 *              y[n, o, i] = Yt[n P + i][o] + b[o]                        (one GEMM per group)
 *   backward:  dYt (nc P, O) gathered from dy, then
 *              dW_g (Og, K) += dYt_g^T (Og, nc P) cols_g^T (nc P, K)     (GEMM, beta = 1)
 *              dcols_g^T (nc P, K) = dYt_g (nc P, Og) W_g (Og, K)        (GEMM, beta = 0)
 *              dx += col2im(dcols);   db[o] += sum over n, i of dy[n, o, i] (in double).
 * The products put the nc P rows first so that ag_gemm shares their blocks between threads.
 * The column matrix is recomputed in the backward (when the weight needs a gradient), and the
 * input's gradient reuses its memory: the scratch is (G K + O) nc P elements, kept for the
 * backward only when a node is recorded.
 */

typedef struct conv_saved {
    conv_geom g;
    ag_real *scratch; /* cols (G K, nc P), then Yt / dYt (nc P, O) */
} conv_saved;

static void conv_run_forward(const conv_geom *g, const ag_real *x, const ag_real *w,
                             const ag_real *b, ag_real *y, ag_real *cols) {
    const int Og = g->O / g->G;
    ag_real *yt = cols + g->G * g->K * g->nc * g->P;
    for (int n0 = 0; n0 < g->N; n0 += g->nc) {
        const int nc = g->N - n0 < g->nc ? g->N - n0 : g->nc;
        const ptrdiff_t ncP = nc * g->P;
        im2col(g, x, cols, n0, nc);
        for (int gr = 0; gr < g->G; gr++)
            ag_gemm((int)ncP, Og, (int)g->K, 1, cols + gr * g->K * ncP, 1, ncP, w + gr * Og * g->K,
                    1, g->K, 0, yt + gr * Og, g->O, 1);
        for (int n = 0; n < nc; n++)
            for (int o = 0; o < g->O; o++) {
                ag_real *restrict dst = y + ((ptrdiff_t)(n0 + n) * g->O + o) * g->P;
                const ag_real *restrict src = yt + n * g->P * g->O + o;
                const ag_real bo = b ? b[o] : 0;
                for (ptrdiff_t i = 0; i < g->P; i++) dst[i] = src[i * g->O] + bo;
            }
    }
}

static void conv_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *w = nd->in[1], *b = nd->n_in > 2 ? nd->in[2] : NULL, *y = nd->out;
    const conv_saved *s = nd->saved;
    const conv_geom *g = &s->g;
    const int Og = g->O / g->G;
    const bool dw = w->requires_grad, dx = x->requires_grad;
    if (b && b->requires_grad)
        for (int o = 0; o < g->O; o++) {
            double sum = 0;
            for (int n = 0; n < g->N; n++) {
                const ag_real *dy = y->grad + ((ptrdiff_t)n * g->O + o) * g->P;
                for (ptrdiff_t i = 0; i < g->P; i++) sum += dy[i];
            }
            b->grad[o] += (ag_real)sum;
        }
    if (!dw && !dx) return;
    ag_real *cols = s->scratch, *dyt = cols + g->G * g->K * g->nc * g->P;
    for (int n0 = 0; n0 < g->N; n0 += g->nc) {
        const int nc = g->N - n0 < g->nc ? g->N - n0 : g->nc;
        const ptrdiff_t ncP = nc * g->P;
        for (int n = 0; n < nc; n++)
            for (int o = 0; o < g->O; o++) {
                const ag_real *restrict src = y->grad + ((ptrdiff_t)(n0 + n) * g->O + o) * g->P;
                ag_real *restrict dst = dyt + n * g->P * g->O + o;
                for (ptrdiff_t i = 0; i < g->P; i++) dst[i * g->O] = src[i];
            }
        if (dw) {
            im2col(g, x->data, cols, n0, nc);
            for (int gr = 0; gr < g->G; gr++)
                ag_gemm(Og, (int)g->K, (int)ncP, 1, dyt + gr * Og, 1, g->O, cols + gr * g->K * ncP,
                        1, ncP, 1, w->grad + gr * Og * g->K, g->K, 1);
        }
        if (dx) {
            for (int gr = 0; gr < g->G; gr++)
                ag_gemm((int)ncP, (int)g->K, Og, 1, dyt + gr * Og, g->O, 1,
                        w->data + gr * Og * g->K, g->K, 1, 0, cols + gr * g->K * ncP, 1, ncP);
            col2im(g, cols, x->grad, n0, nc);
        }
    }
}
static const ag_op conv_op = {"conv", conv_backward};

static ag_tensor *conv_fused(ag_tape *t, const conv_desc *d, ag_tensor *x) {
    conv_geom g;
    if (!conv_check(t, d, x, &g)) return NULL;
    const int n_in = d->bias ? 3 : 2;
    ag_tensor *in[3] = {x, d->weight, d->bias};
    for (int k = 0; k < n_in; k++)
        if (!(in[k] = ag_op_contig(t, in[k]))) return NULL;
    int shape[4] = {g.N, g.O, g.OH, g.OW};
    if (g.ndim == 3) shape[2] = g.OW;
    ag_tensor *y = ag_op_out(t, g.ndim, shape, n_in, in);
    if (!y) return NULL;
    const ag_tape_pos mark = ag_tape_mark(t);
    const size_t n_scratch = (size_t)((g.G * g.K + g.O) * g.nc * g.P);
    ag_real *scratch = ag_tape_alloc(t, sizeof *scratch * (n_scratch ? n_scratch : 1));
    if (!scratch) return NULL;
    conv_run_forward(&g, in[0]->data, in[1]->data, n_in > 2 ? in[2]->data : NULL, y->data, scratch);
    if (!y->requires_grad) { /* nothing to record: the scratch goes back to the arena */
        (void)ag_tape_rewind(t, mark);
        return y;
    }
    conv_saved s = {g, scratch};
    ag_node *nd = ag_op_record(t, &conv_op, y, n_in, in, sizeof s);
    if (nd) *(conv_saved *)nd->saved = s;
    return y;
}

/* ---- the same from primitives -------------------------------------------------------------
 * x (N, C, H, W) -> xp = x with zeros concatenated on both sides of H and W (ag_concat). For
 * each group g and kernel offset (p, q), the input values that w[:, :, p, q] multiplies are a
 * strided view of xp:
 *   V[n, c, i, j] = xp[n, g C/G + c, i SH + p DH, j SW + q DW]            (N, C/G, OH, OW)
 * (ag_op_view: its gradient flows back into xp's), and
 *   Y_g = sum_{p, q} V^T (N OH OW, C/G) w[g Og : (g + 1) Og, :, p, q]^T  (C/G, Og)  (ag_matmul,
 * ag_add); the groups are concatenated along the channels, the bias added, and the result
 * (N OH OW, O) permuted to (N, O, OH, OW). */

static ag_tensor *pad_axis(ag_tape *t, ag_tensor *x, int axis, int p) {
    if (!x || p == 0) return x;
    int shape[4];
    memcpy(shape, x->shape, sizeof shape);
    shape[axis] = p;
    ag_tensor *z = ag_tensor_new(t, 4, shape);
    ag_tensor *parts[3] = {z, x, z};
    return z ? ag_concat(t, 3, parts, axis) : NULL;
}

/* One group's output (N OH OW, Og) of the padded input xp (contiguous) and weight w4 (4-D). */
static ag_tensor *composite_group(ag_tape *t, const conv_geom *g, ag_tensor *xp, ag_tensor *w4,
                                  int gr) {
    const int Og = g->O / g->G, Cg = g->C / g->G, NP = (int)(g->N * g->P);
    const ptrdiff_t *st = xp->stride;
    ag_tensor *acc = NULL, *wg = ag_narrow(t, w4, 0, gr * Og, Og);
    for (int p = 0; p < g->KH; p++)
        for (int q = 0; q < g->KW; q++) {
            const ptrdiff_t vs[4] = {st[0], st[1], g->SH * st[2], g->SW * st[3]};
            const ptrdiff_t off = gr * Cg * st[1] + p * g->DH * st[2] + q * g->DW * st[3];
            ag_tensor *v = ag_op_view(t, xp, 4, (const int[]){g->N, Cg, g->OH, g->OW}, vs, off);
            ag_tensor *rows =
                ag_reshape(t, ag_permute(t, v, (const int[]){0, 2, 3, 1}), AG_SHAPE(NP, Cg));
            ag_tensor *wpq = ag_narrow(t, ag_narrow(t, wg, 2, p, 1), 3, q, 1);
            ag_tensor *term =
                ag_matmul(t, rows, ag_transpose(t, ag_reshape(t, wpq, AG_SHAPE(Og, Cg)), 0, 1));
            acc = acc ? ag_add(t, acc, term) : term;
            if (!acc) return NULL;
        }
    return acc;
}

static ag_tensor *conv_composite(ag_tape *t, const conv_desc *d, ag_tensor *x) {
    conv_geom g;
    if (!conv_check(t, d, x, &g)) return NULL;
    ag_tensor *x4 = x, *w4 = d->weight;
    if (g.ndim == 3) {
        x4 = ag_reshape(t, x, AG_SHAPE(g.N, g.C, 1, g.W));
        w4 = ag_reshape(t, w4, AG_SHAPE(g.O, g.C / g.G, 1, g.KW));
    }
    ag_tensor *xp = ag_contiguous(t, pad_axis(t, pad_axis(t, x4, 2, g.PH), 3, g.PW));
    ag_tensor **outs = xp && w4 ? ag_tape_alloc(t, sizeof *outs * (size_t)g.G) : NULL;
    if (!outs) return NULL;
    for (int gr = 0; gr < g.G; gr++)
        if (!(outs[gr] = composite_group(t, &g, xp, w4, gr))) return NULL;
    ag_tensor *y = g.G > 1 ? ag_concat(t, g.G, outs, 1) : outs[0];
    if (d->bias) y = ag_add(t, y, d->bias);
    y = ag_permute(t, ag_reshape(t, y, AG_SHAPE(g.N, g.OH, g.OW, g.O)), (const int[]){0, 3, 1, 2});
    if (g.ndim == 3) return ag_reshape(t, y, AG_SHAPE(g.N, g.O, g.OW));
    return ag_contiguous(t, y);
}

/* ---- the layers -------------------------------------------------------------------------- */

/* Registers weight (O, C/G, k...) and bias with PyTorch's bounds; the shape checked first. */
static int conv_register(nn_params *ps, const char *prefix, const char *layer, const conv_desc *d,
                         ag_tensor **weight, ag_tensor **bias) {
    const char *p = prefix ? prefix : "(null)";
    char a[32], b[32], c[32], e[32];
    bool ok = d->in > 0 && d->out > 0 && d->groups > 0 && d->in % d->groups == 0 &&
              d->out % d->groups == 0;
    for (int i = 0; i < 2; i++)
        ok = ok && d->k[i] > 0 && d->s[i] > 0 && d->p[i] >= 0 && d->d[i] > 0;
    if (!ok)
        return nn_params_fail(ps,
                              "%s '%s': in = %d, out = %d, groups = %d, kernel %s, stride %s, "
                              "padding %s, dilation %s; expected sizes > 0, groups dividing in "
                              "and out, stride and dilation >= 1, padding >= 0",
                              layer, p, d->in, d->out, d->groups, pair(d->k, d->ndim, a, sizeof a),
                              pair(d->s, d->ndim, b, sizeof b), pair(d->p, d->ndim, c, sizeof c),
                              pair(d->d, d->ndim, e, sizeof e));
    /* kaiming_uniform(a = sqrt(5)): gain sqrt(2 / 6), bound gain sqrt(3 / fan_in) = 1/sqrt(fan_in) */
    const double fan_in = (double)(d->in / d->groups) * d->k[0] * d->k[1];
    const double k = 1.0 / sqrt(fan_in);
    int shape[4] = {d->out, d->in / d->groups, d->k[0], d->k[1]};
    if (d->ndim == 3) shape[2] = d->k[1];
    *weight = nn_params_add(ps, prefix, "weight", d->ndim, shape, nn_init_uniform(-k, k));
    if (!*weight) return -1;
    if (!bias) return 0;
    *bias = nn_params_add(ps, prefix, "bias", AG_SHAPE(d->out), nn_init_uniform(-k, k));
    return *bias ? 0 : -1;
}

int nn_conv2d_init(nn_conv2d *l, nn_params *ps, const char *prefix, int in, int out, int kh, int kw,
                   const nn_conv2d_opts *opts) {
    if (!l)
        return nn_params_fail(ps, "nn_conv2d_init: layer is NULL (prefix '%s')",
                              prefix ? prefix : "(null)");
    const nn_conv2d_opts o = opts ? *opts : (nn_conv2d_opts){.groups = 1};
    *l = (nn_conv2d){.in = in, .out = out, .groups = o.groups ? o.groups : 1, .kernel = {kh, kw}};
    for (int a = 0; a < 2; a++) {
        l->stride[a] = o.stride[a] ? o.stride[a] : 1;
        l->padding[a] = o.padding[a];
        l->dilation[a] = o.dilation[a] ? o.dilation[a] : 1;
    }
    conv_desc d = desc2(l, "conv2d");
    return conv_register(ps, prefix, "nn_conv2d_init", &d, &l->weight, o.no_bias ? NULL : &l->bias);
}

int nn_conv1d_init(nn_conv1d *l, nn_params *ps, const char *prefix, int in, int out, int k,
                   const nn_conv1d_opts *opts) {
    if (!l)
        return nn_params_fail(ps, "nn_conv1d_init: layer is NULL (prefix '%s')",
                              prefix ? prefix : "(null)");
    const nn_conv1d_opts o = opts ? *opts : (nn_conv1d_opts){.groups = 1};
    *l = (nn_conv1d){.in = in,
                     .out = out,
                     .groups = o.groups ? o.groups : 1,
                     .kernel = k,
                     .stride = o.stride ? o.stride : 1,
                     .padding = o.padding,
                     .dilation = o.dilation ? o.dilation : 1};
    conv_desc d = desc1(l, "conv1d");
    return conv_register(ps, prefix, "nn_conv1d_init", &d, &l->weight, o.no_bias ? NULL : &l->bias);
}

ag_tensor *nn_conv2d_forward(const nn_conv2d *l, const nn_ctx *c, ag_tensor *x) {
    if (!l || !c || !x) return NULL;
    conv_desc d = desc2(l, "conv2d");
    return conv_fused(c->tape, &d, x);
}

ag_tensor *nn_conv2d_composite(const nn_conv2d *l, const nn_ctx *c, ag_tensor *x) {
    if (!l || !c || !x) return NULL;
    conv_desc d = desc2(l, "conv2d_composite");
    return conv_composite(c->tape, &d, x);
}

ag_tensor *nn_conv1d_forward(const nn_conv1d *l, const nn_ctx *c, ag_tensor *x) {
    if (!l || !c || !x) return NULL;
    conv_desc d = desc1(l, "conv1d");
    return conv_fused(c->tape, &d, x);
}

ag_tensor *nn_conv1d_composite(const nn_conv1d *l, const nn_ctx *c, ag_tensor *x) {
    if (!l || !c || !x) return NULL;
    conv_desc d = desc1(l, "conv1d_composite");
    return conv_composite(c->tape, &d, x);
}
