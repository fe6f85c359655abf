/* attention.c -- the attention cores of nn/attention.h: each a fused kernel (one recorded op,
 * written on the public op API autograd/ag_op.h) behind its nn forward, and beside it the same
 * computation composed of ag_ primitives, the tested reference (tests/nn/test_fused.c).
 */
#include "autograd/ag_op.h"
#include "nn/attention.h"

#include <math.h>
#include <string.h>

int nn_attention_init(nn_attention *a, int heads, double dropout) {
    if (heads < 1) return ag_error("nn_attention_init: heads = %d, expected >= 1", heads);
    a->heads = heads;
    return nn_dropout_init(&a->dropout, dropout);
}

/* ---- scaled dot-product attention over packed heads, fused ----
 *
 * Heads are packed in the feature axis: head h of batch row b reads Q = q[b, :, h d:(h+1) d]
 * (Tq x d), K = k[b, :, h d:(h+1) d] (Tk x d) and V = v[b, :, h dv:(h+1) dv] (Tk x dv), with
 * d = H / heads and dv = Hv / heads; pair index r = b * heads + h.
 *
 *   S = (Q K^T) * scale, scale = 1 / sqrt(d)                                 Tq x Tk
 *   P = masked_softmax(S, len)  (S[i][j] := -1e6 for j >= len_i)      -> weights[r]
 *   D = P .* M  (M: the dropout mask of ag_dropout on the weights tensor: 0 or 1 / (1 - p))
 *   O = D V                                                          -> out[b, :, h dv:]
 * Backward, G = dO (Tq x dv):
 *   dV += D^T G      dD = G V^T      dP = dD .* M
 *   dS[i][j] = [j < len_i] P[i][j] (dP[i][j] - sum_j' dP[i][j'] P[i][j'])
 *   dQ += scale dS K      dK += scale dS^T Q
 *
 * The products go through ag_gemm with strides that read every head in place; the softmax,
 * mask and dropout run on the pair's Tq x Tk block while it is in cache. The dropout mask is
 * recomputed from its counter hash in the backward, not stored. Pairs are independent: they are
 * split between the threads. p = 0: no dropout (the nn forward passes 0 in eval).
 */

typedef struct attn_saved {
    ag_tensor *w;        /* P, (B * heads, Tq, Tk) */
    ag_real *d;          /* D = P .* M, or NULL without dropout (D = P) */
    ag_real *scratch;    /* dP / dS of every pair, for the backward */
    const int32_t *lens; /* copied; NULL: no mask */
    int vl_ndim, heads;
    ag_real scale;
    ag_dropmask dm;
} attn_saved;

typedef struct attn_job {
    const ag_tensor *q, *k, *v, *y;
    const attn_saved *s;
} attn_job;

static ptrdiff_t valid_len(const attn_saved *s, int b, int i, int Tq, int Tk) {
    if (!s->lens) return Tk;
    return s->vl_ndim == 2 ? s->lens[(ptrdiff_t)b * Tq + i] : s->lens[b];
}

/* Forward of pairs [r0, r1). */
static void attn_forward_pairs(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const attn_job *j = ctx;
    const attn_saved *s = j->s;
    int Tq = j->q->shape[1], Tk = j->k->shape[1], H = j->q->shape[2], Hv = j->v->shape[2];
    int heads = s->heads, d = H / heads, dv = Hv / heads;
    ptrdiff_t block = (ptrdiff_t)Tq * Tk;
    for (ptrdiff_t r = r0; r < r1; r++) {
        int b = (int)(r / heads), h = (int)(r % heads);
        const ag_real *Q = j->q->data + (ptrdiff_t)b * Tq * H + h * d;
        const ag_real *K = j->k->data + (ptrdiff_t)b * Tk * H + h * d;
        const ag_real *V = j->v->data + (ptrdiff_t)b * Tk * Hv + h * dv;
        ag_real *P = s->w->data + r * block;
        ag_gemm(Tq, Tk, d, s->scale, Q, H, 1, K, 1, H, 0, P, Tk, 1);
        for (int i = 0; i < Tq; i++)
            ag_row_shift_max(P + (ptrdiff_t)i * Tk, P + (ptrdiff_t)i * Tk, Tk,
                             valid_len(s, b, i, Tq, Tk));
        ag_vexp_inplace(P, block);
        for (int i = 0; i < Tq; i++) ag_row_normalize(P + (ptrdiff_t)i * Tk, Tk);
        const ag_real *D = P;
        if (s->d) {
            ag_dropmask_apply(s->d + r * block, P, block, s->dm, (uint32_t)(r * block));
            D = s->d + r * block;
        }
        ag_gemm(Tq, dv, Tk, 1, D, Tk, 1, V, Hv, 1, 0, j->y->data + (ptrdiff_t)b * Tq * Hv + h * dv,
                Hv, 1);
    }
}

/* Backward of pairs [r0, r1). */
static void attn_backward_pairs(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const attn_job *j = ctx;
    const attn_saved *s = j->s;
    const ag_tensor *q = j->q, *k = j->k, *v = j->v;
    int Tq = q->shape[1], Tk = k->shape[1], H = q->shape[2], Hv = v->shape[2];
    int heads = s->heads, d = H / heads, dv = Hv / heads;
    ptrdiff_t block = (ptrdiff_t)Tq * Tk;
    for (ptrdiff_t r = r0; r < r1; r++) {
        int b = (int)(r / heads), h = (int)(r % heads);
        ptrdiff_t oq = (ptrdiff_t)b * Tq * H + h * d, ok = (ptrdiff_t)b * Tk * H + h * d;
        ptrdiff_t ov = (ptrdiff_t)b * Tk * Hv + h * dv;
        const ag_real *G = j->y->grad + (ptrdiff_t)b * Tq * Hv + h * dv;
        const ag_real *P = s->w->data + r * block, *D = s->d ? s->d + r * block : P;
        if (v->grad) ag_gemm(Tk, dv, Tq, 1, D, 1, Tk, G, Hv, 1, 1, v->grad + ov, Hv, 1);
        if (!q->grad && !k->grad) continue;
        ag_real *dS = s->scratch + r * block;
        ag_gemm(Tq, Tk, dv, 1, G, Hv, 1, v->data + ov, 1, Hv, 0, dS, Tk, 1);
        if (s->d) ag_dropmask_apply(dS, dS, block, s->dm, (uint32_t)(r * block));
        for (int i = 0; i < Tq; i++) {
            const ag_real *Pi = P + (ptrdiff_t)i * Tk;
            ag_real *dSi = dS + (ptrdiff_t)i * Tk, dot = 0;
            ptrdiff_t len = valid_len(s, b, i, Tq, Tk);
            for (int c = 0; c < Tk; c++) dot += dSi[c] * Pi[c];
            for (int c = 0; c < Tk; c++) dSi[c] = c < len ? Pi[c] * (dSi[c] - dot) : 0;
        }
        if (q->grad)
            ag_gemm(Tq, d, Tk, s->scale, dS, Tk, 1, k->data + ok, H, 1, 1, q->grad + oq, H, 1);
        if (k->grad)
            ag_gemm(Tk, d, Tq, s->scale, dS, 1, Tk, q->data + oq, H, 1, 1, k->grad + ok, H, 1);
    }
}

/* ---- one query per row, inference: every head of a row at once ----
 * A decoder step attends with Tq = 1. Per pair, the general path above makes two products too
 * small for anything but call overhead and one long chain of dependent additions each. Here a
 * row's keys are transposed once for all its heads (kt[f][j] = K[j][f], 16 columns, zeros past
 * Tk) and the heads' sums advance together, so the additions of different heads overlap. The
 * arithmetic is ag_gemm's for these sizes (its own loop: each sum accumulated in order over the
 * shared axis, a product then an addition, then times the scale), so the results are the same
 * bits as the general path's. Keys and values may be views whose rows are apart (a decoder's
 * cache narrowed to the steps so far): rows b and positions j are read through their strides. */

#define ROW1_TK 16    /* at most this many keys */
#define ROW1_H 1024   /* features of q and k, at most */
#define ROW1_HEADS 64 /* heads, at most */
#define ROW1_D 64     /* features per head: ag_gemm's own loop up to this many (SMALL_K) */

typedef struct row1_job {
    const ag_tensor *q, *k, *v;
    ag_tensor *y, *w;
    const int32_t *lens; /* (B,) or NULL */
    int heads;
    ag_real scale;
} row1_job;

static bool row1_fits(const ag_tensor *q, const ag_tensor *k, const ag_tensor *v, int heads,
                      int vl_ndim) {
    int H = q->shape[2], d = H / heads, dv = v->shape[2] / heads;
    return q->shape[1] == 1 && k->shape[1] <= ROW1_TK && H <= ROW1_H && heads <= ROW1_HEADS &&
           d <= ROW1_D && dv <= ROW1_D && vl_ndim < 2 && ag_is_contiguous(q) && k->stride[2] == 1 &&
           v->stride[2] == 1;
}

static void row1_forward(void *ctx, ptrdiff_t b0, ptrdiff_t b1) {
    const row1_job *j = ctx;
    const int Tk = j->k->shape[1], H = j->q->shape[2], Hv = j->v->shape[2], heads = j->heads;
    const int d = H / heads, dv = Hv / heads;
    ag_real kt[ROW1_H * ROW1_TK], acc[ROW1_HEADS * ROW1_TK];
    memset(kt, 0, sizeof(ag_real) * (size_t)H * ROW1_TK); /* columns Tk.. stay zero */
    for (ptrdiff_t b = b0; b < b1; b++) {
        const ag_real *q = j->q->data + b * H;
        const ag_real *K = j->k->data + b * j->k->stride[0];
        const ag_real *V = j->v->data + b * j->v->stride[0];
        const ptrdiff_t rsk = j->k->stride[1], rsv = j->v->stride[1];
        for (int c = 0; c < Tk; c++)
            for (int f = 0; f < H; f++) kt[f * ROW1_TK + c] = K[c * rsk + f];
        memset(acc, 0, sizeof(ag_real) * (size_t)heads * ROW1_TK);
        for (int p = 0; p < d; p++)
            for (int h = 0; h < heads; h++) {
                const ag_real x = q[h * d + p], *restrict kr = kt + (h * d + p) * ROW1_TK;
                ag_real *restrict a = acc + h * ROW1_TK;
                for (int c = 0; c < ROW1_TK; c++) a[c] += x * kr[c];
            }
        ag_real *P = j->w->data + b * heads * Tk, *restrict o = j->y->data + b * Hv;
        const ptrdiff_t len = j->lens ? j->lens[b] : Tk;
        for (int h = 0; h < heads; h++) {
            ag_real *Ph = P + h * Tk;
            for (int c = 0; c < Tk; c++) Ph[c] = j->scale * acc[h * ROW1_TK + c];
            ag_row_shift_max(Ph, Ph, Tk, len);
            ag_vexp_inplace(Ph, Tk);
            ag_row_normalize(Ph, Tk);
        }
        memset(o, 0, sizeof(ag_real) * (size_t)Hv);
        for (int c = 0; c < Tk; c++) {
            const ag_real *restrict vr = V + c * rsv;
            for (int h = 0; h < heads; h++) {
                const ag_real x = P[h * Tk + c];
                for (int e = h * dv; e < (h + 1) * dv; e++) o[e] += x * vr[e];
            }
        }
    }
}

/* Pairs per thread: at least ~32K multiply-adds each. */
static ptrdiff_t pairs_per_thread(const ag_tensor *q, const ag_tensor *k, const ag_tensor *v,
                                  int heads) {
    double macs = (double)q->shape[1] * k->shape[1] * (q->shape[2] + v->shape[2]) / heads;
    return (ptrdiff_t)(32768 / (macs + 1)) + 1;
}

static void attention_backward(ag_node *nd) {
    attn_job j = {nd->in[0], nd->in[1], nd->in[2], nd->out, nd->saved};
    ag_parallel_blocks((ptrdiff_t)j.q->shape[0] * j.s->heads,
                       pairs_per_thread(j.q, j.k, j.v, j.s->heads), attn_backward_pairs, &j);
}
static const ag_op attention_op = {"attention", attention_backward};

/* The forward of attention_fused for a query per row, nothing recorded (row1_fits). */
static ag_tensor *attention_row1(ag_tape *t, ag_tensor *q, ag_tensor *k, ag_tensor *v, int heads,
                                 const int32_t *valid_lens, int vl_ndim, ag_tensor **weights) {
    const int B = q->shape[0], Tk = k->shape[1];
    row1_job j = {q,
                  k,
                  v,
                  ag_op_new(t, AG_SHAPE(B, 1, v->shape[2]), false),
                  ag_op_new(t, AG_SHAPE(B * heads, 1, Tk), false),
                  valid_lens && vl_ndim == 1 ? valid_lens : NULL,
                  heads,
                  (ag_real)(1 / sqrt((double)(q->shape[2] / heads)))};
    if (!j.y || !j.w) return NULL;
    double macs = (double)Tk * (q->shape[2] + v->shape[2]);
    ag_parallel_blocks(B, (ptrdiff_t)(32768 / macs) + 1, row1_forward, &j);
    if (weights) *weights = j.w;
    return j.y;
}

static ag_tensor *attention_fused(ag_tape *t, ag_tensor *q, ag_tensor *k, ag_tensor *v, int heads,
                                  const int32_t *valid_lens, int vl_ndim, double p, ag_rng *rng,
                                  ag_tensor **weights) {
    if (weights) *weights = NULL;
    ag_tensor *in[3] = {q, k, v};
    if (!ag_op_check(t, "attention", 3, in)) return NULL;
    char sq[64], sk[64], sv[64];
    ag_shape_str(q, sq, sizeof sq);
    ag_shape_str(k, sk, sizeof sk);
    ag_shape_str(v, sv, sizeof sv);
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3 || k->shape[0] != q->shape[0] ||
        v->shape[0] != q->shape[0] || v->shape[1] != k->shape[1] || k->shape[2] != q->shape[2])
        return ag_report(t,
                         "attention: queries %s, keys %s, values %s; expected (B, Tq, H), "
                         "(B, Tk, H), (B, Tk, Hv)",
                         sq, sk, sv);
    if (heads < 1 || q->shape[2] % heads || v->shape[2] % heads)
        return ag_report(t,
                         "attention: %d heads do not divide the features of queries %s and "
                         "values %s",
                         heads, sq, sv);
    if (vl_ndim < 0 || vl_ndim > 2)
        return ag_report(t, "attention: valid lengths of %d dimensions (expected 0, 1 or 2)",
                         vl_ndim);
    if (!(p >= 0 && p <= 1))
        return ag_report(t, "attention: dropout probability %g is outside [0, 1]", p);
    bool drop = p > 0;
    if (drop && !rng)
        return ag_report(t, "attention: dropout %g in training needs an RNG (nn_ctx.rng is NULL)",
                         p);
    int B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1];
    if (!drop && !ag_op_wants_grad(t, 3, in) && row1_fits(q, k, v, heads, vl_ndim))
        return attention_row1(t, q, k, v, heads, valid_lens, vl_ndim, weights);
    for (int i = 0; i < 3; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    ag_tensor *y = ag_op_out(t, AG_SHAPE(B, Tq, v->shape[2]), 3, in);
    attn_saved s = {.heads = heads,
                    .vl_ndim = vl_ndim,
                    .scale = (ag_real)(1 / sqrt((double)(q->shape[2] / heads)))};
    s.w = y ? ag_op_new(t, AG_SHAPE(B * heads, Tq, Tk), false) : NULL;
    if (!s.w) return NULL;
    ptrdiff_t n_lens = vl_ndim == 2 ? (ptrdiff_t)B * Tq : B, n_w = s.w->numel;
    if (valid_lens && vl_ndim > 0) {
        int32_t *lens = ag_tape_alloc(t, sizeof *lens * (size_t)n_lens);
        if (!lens) return NULL;
        memcpy(lens, valid_lens, sizeof *lens * (size_t)n_lens);
        s.lens = lens;
    }
    if (drop) {
        s.dm = ag_dropmask_new(p, ag_rng_next(rng));
        if (!(s.d = ag_tape_alloc(t, sizeof *s.d * (size_t)n_w))) return NULL;
    }
    if (y->requires_grad && !(s.scratch = ag_tape_alloc(t, sizeof *s.scratch * (size_t)n_w)))
        return NULL;
    attn_job j = {in[0], in[1], in[2], y, &s};
    ag_parallel_blocks((ptrdiff_t)B * heads, pairs_per_thread(in[0], in[1], in[2], heads),
                       attn_forward_pairs, &j);
    ag_node *nd = ag_op_record(t, &attention_op, y, 3, in, sizeof s);
    if (nd) *(attn_saved *)nd->saved = s;
    if (weights) *weights = s.w;
    return y;
}

ag_tensor *nn_attention_forward(const nn_attention *a, const nn_ctx *c, ag_tensor *q, ag_tensor *k,
                                ag_tensor *v, const int32_t *valid_lens, int vl_ndim,
                                ag_tensor **weights) {
    if (weights) *weights = NULL;
    if (!a || !c) return NULL;
    return attention_fused(c->tape, q, k, v, a->heads, valid_lens, vl_ndim,
                           c->training ? a->dropout.p : 0, c->rng, weights);
}

/* ---- the same from primitives ----
 * split: (B, T, heads d) -> (B heads, T, d); the lengths repeated for every head of a row;
 * W = masked_softmax(split(q) split(k)^T * scale); out = merge(dropout(W) split(v)), merge the
 * inverse of split. The dropout is nn_dropout_forward's on W, so the same rng state drops what
 * the fused kernel drops. */

static ag_tensor *split_heads(ag_tape *t, ag_tensor *x, int heads) {
    const int B = x->shape[0], T = x->shape[1], d = x->shape[2] / heads;
    ag_tensor *y =
        ag_permute(t, ag_reshape(t, x, AG_SHAPE(B, T, heads, d)), (const int[]){0, 2, 1, 3});
    return ag_reshape(t, y, AG_SHAPE(B * heads, T, d));
}

static ag_tensor *merge_heads(ag_tape *t, ag_tensor *x, int heads) {
    if (!x) return NULL;
    const int B = x->shape[0] / heads, T = x->shape[1], d = x->shape[2];
    ag_tensor *y =
        ag_permute(t, ag_reshape(t, x, AG_SHAPE(B, heads, T, d)), (const int[]){0, 2, 1, 3});
    return ag_reshape(t, y, AG_SHAPE(B, T, heads * d));
}

ag_tensor *nn_attention_composite(const nn_attention *a, const nn_ctx *c, ag_tensor *q,
                                  ag_tensor *k, ag_tensor *v, const int32_t *valid_lens,
                                  int vl_ndim, ag_tensor **weights) {
    if (weights) *weights = NULL;
    if (!a || !c || !ag_op_check(c->tape, "attention_composite", 3, (ag_tensor *[]){q, k, v}))
        return NULL;
    ag_tape *t = c->tape;
    const int heads = a->heads;
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3 || heads < 1 || q->shape[2] % heads ||
        v->shape[2] % heads) {
        char sq[64], sk[64], sv[64];
        return ag_report(t,
                         "attention_composite: queries %s, keys %s, values %s with %d heads; "
                         "expected (B, Tq, H), (B, Tk, H), (B, Tk, Hv), heads dividing H and Hv",
                         ag_shape_str(q, sq, sizeof sq), ag_shape_str(k, sk, sizeof sk),
                         ag_shape_str(v, sv, sizeof sv), heads);
    }
    const int B = q->shape[0], per = vl_ndim == 2 ? q->shape[1] : 1;
    int32_t *lens = NULL;
    if (valid_lens && (vl_ndim == 1 || vl_ndim == 2)) {
        if (!(lens = ag_tape_alloc(t, sizeof *lens * (size_t)B * heads * per))) return NULL;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < per; i++)
                    lens[((ptrdiff_t)b * heads + h) * per + i] = valid_lens[(ptrdiff_t)b * per + i];
    }
    ag_tensor *s = ag_scale(
        t, ag_matmul(t, split_heads(t, q, heads), ag_transpose(t, split_heads(t, k, heads), 1, 2)),
        1 / sqrt((double)(q->shape[2] / heads)));
    ag_tensor *w = ag_masked_softmax(t, s, lens ? lens : valid_lens, vl_ndim);
    if (w && weights) *weights = w;
    return merge_heads(
        t, ag_matmul(t, nn_dropout_forward(&a->dropout, c, w), split_heads(t, v, heads)), heads);
}

/* ---- additive scores, fused ----
 *   s[b][i][j] = sum_h w[h] f[b][i][j][h],  f = tanh(q[b][i] + k[b][j])   q (B, Tq, H), k (B, Tk, H)
 * Backward, g = ds: a = g w (1 - f^2); dq[b][i] += sum_j a; dk[b][j] += sum_i a;
 * dw += sum_{b,i,j} g f. The features f are kept for the backward (B Tq Tk H values). */

typedef struct additive_saved {
    ag_real *f;
} additive_saved;

static void additive_scores_backward(ag_node *nd) {
    ag_tensor *q = nd->in[0], *k = nd->in[1], *w = nd->in[2], *y = nd->out;
    const ag_real *restrict f = ((const additive_saved *)nd->saved)->f, *restrict wv = w->data;
    const int B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1], H = q->shape[2];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++) {
                ptrdiff_t e = ((ptrdiff_t)b * Tq + i) * Tk + j;
                const ag_real g = y->grad[e], *restrict fe = f + e * H;
                if (w->grad)
                    for (int h = 0; h < H; h++) w->grad[h] += g * fe[h];
                /* q and k may be one tensor: no restrict on their gradients */
                ag_real *dq = q->grad ? q->grad + ((ptrdiff_t)b * Tq + i) * H : NULL;
                ag_real *dk = k->grad ? k->grad + ((ptrdiff_t)b * Tk + j) * H : NULL;
                if (dq && dk) {
                    for (int h = 0; h < H; h++) {
                        ag_real a = g * wv[h] * (1 - fe[h] * fe[h]);
                        dq[h] += a;
                        dk[h] += a;
                    }
                } else if (dq || dk) {
                    ag_real *d = dq ? dq : dk;
                    for (int h = 0; h < H; h++) d[h] += g * wv[h] * (1 - fe[h] * fe[h]);
                }
            }
}
static const ag_op additive_scores_op = {"additive_scores", additive_scores_backward};

static ag_tensor *additive_scores_fused(ag_tape *t, ag_tensor *q, ag_tensor *k, ag_tensor *w) {
    ag_tensor *in[3] = {q, k, w};
    if (!ag_op_check(t, "additive_scores", 3, in)) return NULL;
    if (q->ndim != 3 || k->ndim != 3 || w->ndim != 1 || k->shape[0] != q->shape[0] ||
        k->shape[2] != q->shape[2] || w->shape[0] != q->shape[2] || q->shape[2] < 1) {
        char sq[64], sk[64], sw[64];
        return ag_report(t,
                         "additive_scores: queries %s, keys %s, weight %s; expected (B, Tq, H), "
                         "(B, Tk, H), (H)",
                         ag_shape_str(q, sq, sizeof sq), ag_shape_str(k, sk, sizeof sk),
                         ag_shape_str(w, sw, sizeof sw));
    }
    for (int i = 0; i < 3; i++)
        if (!(in[i] = ag_op_contig(t, in[i]))) return NULL;
    q = in[0], k = in[1], w = in[2];
    const int B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1], H = q->shape[2];
    ag_tensor *y = ag_op_out(t, AG_SHAPE(B, Tq, Tk), 3, in);
    additive_saved s = {y ? ag_tape_alloc(t, sizeof *s.f * (size_t)y->numel * H) : NULL};
    if (!s.f) return NULL;
    const ag_real *restrict wv = w->data;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq; i++) {
            const ag_real *restrict qi = q->data + ((ptrdiff_t)b * Tq + i) * H;
            for (int j = 0; j < Tk; j++) {
                ptrdiff_t e = ((ptrdiff_t)b * Tq + i) * Tk + j;
                const ag_real *restrict kj = k->data + ((ptrdiff_t)b * Tk + j) * H;
                ag_real *restrict fe = s.f + e * H, acc = 0;
                for (int h = 0; h < H; h++) fe[h] = ag_tanh1(qi[h] + kj[h]);
                for (int h = 0; h < H; h++) acc += wv[h] * fe[h];
                y->data[e] = acc;
            }
        }
    ag_node *nd = ag_op_record(t, &additive_scores_op, y, 3, in, sizeof s);
    if (nd) *(additive_saved *)nd->saved = s;
    return y;
}

/* w_v must be a Linear(H -> 1) without bias: false after reporting. */
static bool check_w_v(const nn_linear *w_v, const nn_ctx *c) {
    if (w_v->out == 1 && !w_v->bias) return true;
    ag_report(c->tape,
              "additive_scores: w_v is a Linear(%d -> %d)%s; expected a Linear(H -> 1) "
              "without bias",
              w_v->in, w_v->out, w_v->bias ? " with bias" : "");
    return false;
}

ag_tensor *nn_additive_scores_forward(const nn_linear *w_v, const nn_ctx *c, ag_tensor *q,
                                      ag_tensor *k) {
    if (!w_v || !c || !q || !k || !check_w_v(w_v, c)) return NULL;
    ag_tensor *w = ag_reshape(c->tape, w_v->weight, AG_SHAPE(w_v->in)); /* (1, H) as (H) */
    return additive_scores_fused(c->tape, q, k, w);
}

/* The same from primitives: f = tanh(q (B, Tq, 1, H) + k (B, 1, Tk, H)) as a broadcast sum
 * (B, Tq, Tk, H), then the linear map f w^T -> (B, Tq, Tk, 1) -> (B, Tq, Tk). */
ag_tensor *nn_additive_scores_composite(const nn_linear *w_v, const nn_ctx *c, ag_tensor *q,
                                        ag_tensor *k) {
    if (!w_v || !c ||
        !ag_op_check(c->tape, "additive_scores_composite", 2, (ag_tensor *[]){q, k}) ||
        !check_w_v(w_v, c))
        return NULL;
    ag_tape *t = c->tape;
    if (q->ndim != 3 || k->ndim != 3) {
        char sq[64], sk[64];
        return ag_report(t,
                         "additive_scores_composite: queries %s, keys %s; expected "
                         "(B, Tq, H), (B, Tk, H)",
                         ag_shape_str(q, sq, sizeof sq), ag_shape_str(k, sk, sizeof sk));
    }
    const int B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1];
    ag_tensor *f = ag_tanh(t, ag_add(t, ag_reshape(t, q, AG_SHAPE(B, Tq, 1, q->shape[2])),
                                     ag_reshape(t, k, AG_SHAPE(k->shape[0], 1, Tk, k->shape[2]))));
    return ag_reshape(t, ag_linear(t, f, w_v->weight, NULL), AG_SHAPE(B, Tq, Tk));
}
