/* loss.c -- an output layer and its cross-entropy as one op over row chunks, written on the
 * public op API autograd/ag_op.h, and beside it the same loss composed of ag_ primitives, the
 * tested reference (tests/nn/test_linear_ce.c); then d2l's masked sequence loss, which picks
 * one of the two (tests/nn/test_seq_ce.c). Math and shapes in nn/loss.h.
 */
#include "nn/loss.h"

#include "autograd/ag_op.h"

#ifdef TG_DOUBLE
#define LOG log
#else
#define LOG logf
#endif

/* ---- linear + cross-entropy, fused, in row chunks ----
 *
 * x (R, H) (leading dims flattened), W (V, H), b (V) or none, labels k (R), weights w (R),
 * eps the label smoothing. The kept rows are those with k_r != ignore_index and w_r != 0, in
 * order; they are cut into chunks of Rc rows (the last may be shorter). For a chunk of kept
 * rows, Xc (Rc, H) their inputs (gathered, or read in place when consecutive):
 *
 *   Z    = Xc W^T + b                                   (Rc, V)   the chunk's logits
 *   m_i  = max_c Z[i][c],  e = exp(Z[i] - m_i),  s_i = sum_c e[c],  lse_i = m_i + log s_i
 *   CE_i = lse_i - (1 - eps) Z[i][k_i] - eps mean_c Z[i][c];   loss = sum_i w_i CE_i
 *
 * and, when the tape wants gradients, in the same pass (overwriting Z):
 *
 *   G[i][c] = w_i (e[c] / s_i - eps / V - (1 - eps) [c == k_i])      (Rc, V) = dloss / dZ
 *   dXc = G W  (Rc, H)      dW += G^T Xc  (V, H)      db += sum_i G[i]  (V)
 *
 * dX of the kept rows, dW and db are kept in the node's saved block (dW and db summed over the
 * chunks in chunk order); the backward adds g dX (into the kept rows of x's gradient), g dW and
 * g db, g = dloss from upstream. So only Rc x V logits ever exist, and none is recomputed.
 * The products go through ag_op_gemm (ag_gemm; bf16 inputs under AG_BF16), which splits the
 * rows of each product between the threads; the rows of the softmax pass and the columns of db
 * are split too; the per-row losses are summed in row order in double. Nothing depends on the
 * number of threads.
 */

typedef struct lce_saved {
    const int32_t *rows; /* n_kept indices of the kept rows of x */
    ag_real *dx;         /* (n_kept, H): dloss / dx of the kept rows, or NULL */
    ag_real *dw;         /* (V, H) contiguous, or NULL (no gradient wanted, or no kept row) */
    ag_real *db;         /* (V), or NULL */
    ptrdiff_t n_kept;
} lce_saved;

/* The largest of z[0..V) (V >= 1) in 16 running maxima, then the largest of them: the serial
 * loop's value (m = z[0], then m = z[c] > m ? z[c] : m), since a maximum is exact in any order;
 * a NaN is passed over as there, unless it is z[0] (then NaN). Only the sign of a zero maximum
 * may differ, which changes no later value (z - m, m + log s with log s >= 0). */
#define LANES 16
static ag_real row_max(const ag_real *restrict z, ptrdiff_t V) {
    ag_real mx[LANES];
    for (int l = 0; l < LANES; l++) mx[l] = z[0];
    ptrdiff_t c = 0;
    for (; c + LANES <= V; c += LANES)
        for (int l = 0; l < LANES; l++) mx[l] = z[c + l] > mx[l] ? z[c + l] : mx[l];
    ag_real m = mx[0];
    for (int l = 1; l < LANES; l++) m = mx[l] > m ? mx[l] : m;
    for (; c < V; c++) m = z[c] > m ? z[c] : m;
    return m;
}

/* sum_c z[c] in 16 running sums (lane l: c = l mod 16), added in lane order, then the tail. */
static ag_real row_sum(const ag_real *restrict z, ptrdiff_t V) {
    ag_real acc[LANES] = {0};
    ptrdiff_t c = 0;
    for (; c + LANES <= V; c += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += z[c + l];
    ag_real sum = 0;
    for (int l = 0; l < LANES; l++) sum += acc[l];
    for (; c < V; c++) sum += z[c];
    return sum;
}
#undef LANES

/* One chunk's softmax pass: rows [i0, i1) of Z. */
typedef struct lce_chunk {
    ag_real *Z;
    const int32_t *labels; /* the chunk's labels */
    const ag_real *w;      /* the chunk's weights */
    ag_real *per;          /* the chunk's w_i CE_i */
    const ag_real *bias;   /* (V), or NULL */
    ptrdiff_t V;
    ag_real eps;
    bool grad; /* replace Z by G */
} lce_chunk;

static void lce_rows(void *ctx, ptrdiff_t i0, ptrdiff_t i1) {
    const lce_chunk *j = ctx;
    const ptrdiff_t V = j->V;
    const ag_real eps = j->eps;
    for (ptrdiff_t i = i0; i < i1; i++) {
        ag_real *restrict z = j->Z + i * V;
        const int32_t k = j->labels[i];
        const ag_real w = j->w[i];
        if (j->bias) {
            const ag_real *restrict b = j->bias;
            for (ptrdiff_t c = 0; c < V; c++) z[c] += b[c];
        }
        /* (s is summed in order, so that runs without smoothing keep their bits) */
        ag_real m = row_max(z, V), s = 0;
        /* skipped at 0: a -inf logit (a masked class) leaves CE finite */
        const ag_real sum = eps != 0 ? row_sum(z, V) : 0;
        const ag_real zk = z[k];
        for (ptrdiff_t c = 0; c < V; c++) z[c] -= m;
        ag_vexp_inplace(z, V);
        for (ptrdiff_t c = 0; c < V; c++) s += z[c];
        ag_real l = m + LOG(s) - (1 - eps) * zk;
        if (eps != 0) l -= eps * (sum / (ag_real)V);
        j->per[i] = w * l;
        if (!j->grad) continue;
        const ag_real a = w / s, spread = w * eps / (ag_real)V;
        for (ptrdiff_t c = 0; c < V; c++) z[c] = a * z[c] - spread;
        z[k] -= w * (1 - eps);
    }
}

/* db[c] += sum_i G[i][c] over the chunk's rows in order, columns [c0, c1). */
typedef struct lce_colsum {
    const ag_real *G;
    ag_real *db;
    ptrdiff_t rows, V;
    bool first; /* assign instead of add */
} lce_colsum;

static void lce_colsum_range(void *ctx, ptrdiff_t c0, ptrdiff_t c1) {
    const lce_colsum *j = ctx;
    ag_real *restrict db = j->db;
    for (ptrdiff_t i = 0; i < j->rows; i++) {
        const ag_real *restrict g = j->G + i * j->V;
        if (i == 0 && j->first)
            for (ptrdiff_t c = c0; c < c1; c++) db[c] = g[c];
        else
            for (ptrdiff_t c = c0; c < c1; c++) db[c] += g[c];
    }
}

/* The backward: every piece is an independent sum of g times a saved gradient. */
typedef struct lce_back {
    const lce_saved *s;
    ag_tensor *x, *w, *b;
    ag_real g;
} lce_back;

static void lce_back_w(void *ctx, ptrdiff_t v0, ptrdiff_t v1) {
    const lce_back *j = ctx;
    const ptrdiff_t H = j->w->shape[1], s0 = j->w->stride[0], s1 = j->w->stride[1];
    const ag_real g = j->g;
    for (ptrdiff_t v = v0; v < v1; v++) {
        const ag_real *restrict d = j->s->dw + v * H;
        ag_real *restrict gw = j->w->grad + v * s0;
        if (s1 == 1)
            for (ptrdiff_t h = 0; h < H; h++) gw[h] += g * d[h];
        else
            for (ptrdiff_t h = 0; h < H; h++) gw[h * s1] += g * d[h];
    }
}

static void lce_back_x(void *ctx, ptrdiff_t i0, ptrdiff_t i1) {
    const lce_back *j = ctx;
    const ptrdiff_t H = j->x->shape[j->x->ndim - 1];
    const ag_real g = j->g;
    for (ptrdiff_t i = i0; i < i1; i++) {
        const ag_real *restrict d = j->s->dx + i * H;
        ag_real *restrict gx = j->x->grad + (ptrdiff_t)j->s->rows[i] * H;
        for (ptrdiff_t h = 0; h < H; h++) gx[h] += g * d[h];
    }
}

static void linear_ce_backward(ag_node *nd) {
    const lce_saved *s = nd->saved;
    lce_back j = {s, nd->in[0], nd->in[1], nd->n_in > 2 ? nd->in[2] : NULL, nd->out->grad[0]};
    if (s->dx && j.x->requires_grad) ag_parallel_blocks(s->n_kept, 256, lce_back_x, &j);
    if (s->dw && j.w->requires_grad) ag_parallel_blocks(j.w->shape[0], 256, lce_back_w, &j);
    if (s->db && j.b && j.b->requires_grad) {
        const ag_real *restrict d = s->db;
        ag_real *restrict gb = j.b->grad;
        for (ptrdiff_t v = 0; v < j.b->numel; v++) gb[v] += j.g * d[v];
    }
}
static const ag_op linear_ce_op = {"linear_ce", linear_ce_backward};

/* An element count for ag_tape_alloc: at least 1. */
static size_t at_least_1(ptrdiff_t n) { return n > 0 ? (size_t)n : 1; }

/* Rows per chunk for V classes: the requested number, else the default. */
static ptrdiff_t chunk_of(int chunk_rows, ptrdiff_t V) {
    if (chunk_rows > 0) return chunk_rows;
    ptrdiff_t rc = NN_LINEAR_CE_CHUNK_ELEMS / (V ? V : 1);
    if (rc > NN_LINEAR_CE_CHUNK_ROWS) rc = NN_LINEAR_CE_CHUNK_ROWS;
    return rc < 16 ? 16 : rc;
}

/* The op's arguments: x (..., H) fits W (V >= 1, H), bias (V) or none, chunk_rows >= 0, the
 * labels and eps (ag_op_check_labels). False after reporting. */
static bool linear_ce_args(ag_tape *t, const char *op, ag_tensor *x, ag_tensor *w, ag_tensor *bias,
                           const int32_t *labels, double eps, int32_t ignore, int chunk_rows) {
    char sx[64], sw[64], sb[64];
    ag_shape_str(x, sx, sizeof sx);
    ag_shape_str(w, sw, sizeof sw);
    if (w->ndim != 2 || w->shape[0] < 1 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1]) {
        ag_report(t, "%s: input %s does not fit weight %s (expected (..., %d), weight (V >= 1, H))",
                  op, sx, sw, w->ndim == 2 ? w->shape[1] : -1);
        return false;
    }
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0])) {
        ag_report(t, "%s: bias %s does not fit weight %s (expected [%d])", op,
                  ag_shape_str(bias, sb, sizeof sb), sw, w->shape[0]);
        return false;
    }
    if (chunk_rows < 0) {
        ag_report(t, "%s: chunk_rows = %d for input %s, expected >= 0 (0: the default)", op,
                  chunk_rows, sx);
        return false;
    }
    return ag_op_check_labels(t, op, x, "input", w->shape[0], labels, ignore, eps);
}

static ag_tensor *linear_ce_fused(ag_tape *t, ag_tensor *x, ag_tensor *w, ag_tensor *bias,
                                  const int32_t *labels, const ag_real *weights, double eps,
                                  int32_t ignore, int chunk_rows) {
    const char *op = "linear_ce";
    ag_tensor *in[3] = {x, w, bias};
    int n_in = bias ? 3 : 2;
    if (!ag_op_check(t, op, n_in, in) ||
        !linear_ce_args(t, op, x, w, bias, labels, eps, ignore, chunk_rows))
        return NULL;
    const ptrdiff_t V = w->shape[0], H = w->shape[1], R = ag_numel(x->ndim - 1, x->shape);
    in[0] = x = ag_op_contig(t, x);
    if (bias) in[2] = bias = ag_op_contig(t, bias);
    if (!x || (n_in == 3 && !bias)) return NULL;
    static const int scalar[1] = {1};
    ag_tensor *y = ag_op_out(t, 0, scalar, n_in, in);
    if (!y) return NULL;

    /* the kept rows, their labels and weights, compacted */
    ptrdiff_t n = 0;
    for (ptrdiff_t r = 0; r < R; r++)
        n += labels[r] != ignore && (weights ? weights[r] != 0 : true);
    lce_saved s = {.n_kept = n};
    int32_t *rows = ag_tape_alloc(t, sizeof *rows * at_least_1(n));
    int32_t *lab = ag_tape_alloc(t, sizeof *lab * at_least_1(n));
    ag_real *wk = ag_tape_alloc(t, sizeof *wk * at_least_1(n));
    ag_real *per = ag_tape_alloc(t, sizeof *per * at_least_1(n));
    if (!rows || !lab || !wk || !per) return NULL;
    for (ptrdiff_t r = 0, i = 0; r < R; r++) {
        if (labels[r] == ignore || (weights && weights[r] == 0)) continue;
        rows[i] = (int32_t)r;
        lab[i] = labels[r];
        wk[i++] = weights ? weights[r] : 1;
    }
    s.rows = rows;

    const bool grad = y->requires_grad, gx = grad && x->requires_grad,
               gw = grad && w->requires_grad, gb = grad && bias && bias->requires_grad;
    const ptrdiff_t rc = n < chunk_of(chunk_rows, V) ? n : chunk_of(chunk_rows, V);
    ag_real *Z = NULL, *Xc = NULL;
    if (n > 0) {
        Z = ag_tape_alloc(t, sizeof *Z * (size_t)(rc * V));
        Xc = ag_tape_alloc(t, sizeof *Xc * at_least_1(rc * H));
        if (!Z || !Xc) return NULL;
        if (gx && !(s.dx = ag_tape_alloc(t, sizeof *s.dx * at_least_1(n * H)))) return NULL;
        if (gw && !(s.dw = ag_tape_alloc(t, sizeof *s.dw * at_least_1(V * H)))) return NULL;
        if (gb && !(s.db = ag_tape_alloc(t, sizeof *s.db * (size_t)V))) return NULL;
    }
    const ptrdiff_t ws0 = w->stride[0], ws1 = w->stride[1];
    for (ptrdiff_t i0 = 0; i0 < n; i0 += rc) {
        const ptrdiff_t m = n - i0 < rc ? n - i0 : rc;
        /* Xc: the chunk's rows of x, read in place when they are consecutive */
        const ag_real *xc = x->data + (ptrdiff_t)rows[i0] * H;
        if (rows[i0 + m - 1] - rows[i0] != m - 1) {
            for (ptrdiff_t i = 0; i < m; i++)
                memcpy(Xc + i * H, x->data + (ptrdiff_t)rows[i0 + i] * H, sizeof *Xc * (size_t)H);
            xc = Xc;
        }
        if (ag_op_gemm((int)m, (int)V, (int)H, xc, H, 1, w->data, ws1, ws0, 0, Z, V, 1))
            return ag_report(t, "%s: %s", op, ag_last_error());
        lce_chunk cj = {Z, lab + i0,     wk + i0, per + i0, bias ? bias->data : NULL,
                        V, (ag_real)eps, grad};
        ag_parallel_blocks(m, 16384 / V + 1, lce_rows, &cj);
        if (!grad) continue;
        if ((s.dx && ag_op_gemm((int)m, (int)H, (int)V, Z, V, 1, w->data, ws0, ws1, 0,
                                s.dx + i0 * H, H, 1)) ||
            (s.dw && ag_op_gemm((int)V, (int)H, (int)m, Z, 1, V, xc, H, 1, i0 ? 1 : 0, s.dw, H, 1)))
            return ag_report(t, "%s: %s", op, ag_last_error());
        if (s.db) {
            lce_colsum cs = {Z, s.db, m, V, i0 == 0};
            ag_parallel_blocks(V, 4096, lce_colsum_range, &cs);
        }
    }
    double total = 0;
    for (ptrdiff_t i = 0; i < n; i++) total += per[i];
    y->data[0] = (ag_real)total;
    ag_node *nd = ag_op_record(t, &linear_ce_op, y, n_in, in, sizeof s);
    if (nd) *(lce_saved *)nd->saved = s;
    return y;
}

ag_tensor *nn_linear_ce_forward(const nn_linear *l, const nn_ctx *c, ag_tensor *x,
                                const int32_t *labels, const ag_real *weights,
                                double label_smoothing, int32_t ignore_index, int chunk_rows) {
    if (!l || !c) return NULL;
    return linear_ce_fused(c->tape, x, l->weight, l->bias, labels, weights, label_smoothing,
                           ignore_index, chunk_rows);
}

ag_tensor *nn_linear_ce_composite(const nn_linear *l, const nn_ctx *c, ag_tensor *x,
                                  const int32_t *labels, const ag_real *weights,
                                  double label_smoothing, int32_t ignore_index, int chunk_rows) {
    (void)chunk_rows;
    if (!l || !c) return NULL;
    ag_tensor *z = nn_linear_forward(l, c, x);
    return ag_sum(c->tape,
                  ag_cross_entropy(c->tape, z, labels, weights, label_smoothing, ignore_index,
                                   AG_REDUCE_NONE),
                  AG_ALL, false);
}

/* ---- d2l's masked sequence loss ----
 *
 * tgt (B, T), tgt_len (B); valid(b, s) = s < tgt_len[b]. Composite (d2l's order, the bits of
 * the book's runs): per = ag_softmax_ce(z, tgt, mask) (eps = 0) or ag_cross_entropy(z, tgt,
 * mask, eps, NONE), (B, T); l = ag_mean(per, 1), (B); l *= T / T_div when T_div != T;
 * L = ag_sum(l). Fused: nn_linear_ce_forward with weights mask / T_div. */

/* The checks of the sequence losses: x (B, T, D) 3-D, with D = want_last when want_last > 0;
 * targets given; T_div >= 1 (when T_div > 0 is to be checked: check_div). */
static bool seq_args(ag_tape *t, const char *op, const char *what, const ag_tensor *x,
                     int want_last, const int32_t *tgt, const int32_t *tgt_len, int T_div,
                     bool check_div) {
    char sx[64];
    if (x->ndim != 3) {
        ag_report(t, "%s: %s %s are not 3-D (B, T, %s)", op, what, ag_shape_str(x, sx, sizeof sx),
                  want_last > 0 ? "H" : "V");
        return false;
    }
    if (want_last > 0 && x->shape[2] != want_last) {
        ag_report(t, "%s: %s %s do not fit the output layer (expected (B, T, %d))", op, what,
                  ag_shape_str(x, sx, sizeof sx), want_last);
        return false;
    }
    if (!tgt || !tgt_len) {
        ag_report(t, "%s: no %s given for %s %s", op, tgt ? "target lengths" : "targets", what,
                  ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    if (check_div && T_div < 1) {
        ag_report(t, "%s: T_div = %d for %s %s, expected >= 1", op, T_div, what,
                  ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    return true;
}

/* w[b T + s] = valid(b, s) ? one : 0, (B T) values on the tape; NULL when out of memory. */
static ag_real *seq_mask(ag_tape *t, int B, int T, const int32_t *tgt_len, ag_real one) {
    const size_t n = (size_t)B * (size_t)T;
    ag_real *w = ag_tape_alloc(t, sizeof *w * (n > 0 ? n : 1));
    if (!w) return NULL;
    for (int b = 0; b < B; b++)
        for (int s = 0; s < T; s++) w[(size_t)b * T + s] = s < tgt_len[b] ? one : 0;
    return w;
}

ag_tensor *nn_masked_ce(const nn_ctx *c, ag_tensor *logits, const int32_t *tgt,
                        const int32_t *tgt_len, double eps) {
    if (!c || !logits) return NULL;
    ag_tape *t = c->tape;
    if (!seq_args(t, "masked_ce", "logits", logits, 0, tgt, tgt_len, 1, false)) return NULL;
    const int B = logits->shape[0], T = logits->shape[1];
    ag_real *mask = seq_mask(t, B, T, tgt_len, 1);
    if (!mask) return NULL;
    ag_tensor *per =
        eps == 0 ? ag_softmax_ce(t, logits, tgt, mask)
                 : ag_cross_entropy(t, logits, tgt, mask, eps, AG_IGNORE_INDEX, AG_REDUCE_NONE);
    return ag_mean(t, per, 1, false);
}

ag_tensor *nn_seq_ce_loss_logits(const nn_ctx *c, ag_tensor *logits, const int32_t *tgt,
                                 const int32_t *tgt_len, int T_div, double eps) {
    if (!c || !logits) return NULL;
    if (!seq_args(c->tape, "seq_ce_loss", "logits", logits, 0, tgt, tgt_len, T_div, true))
        return NULL;
    const int T = logits->shape[1];
    ag_tensor *l = nn_masked_ce(c, logits, tgt, tgt_len, eps);
    if (T_div != T) l = ag_scale(c->tape, l, (double)T / T_div); /* the mean over T_div */
    return ag_sum(c->tape, l, AG_ALL, false);
}

ag_tensor *nn_seq_ce_loss_composite(const nn_linear *out, const nn_ctx *c, ag_tensor *h,
                                    const int32_t *tgt, const int32_t *tgt_len, int T_div,
                                    double eps) {
    if (!out || !c || !h) return NULL;
    if (!seq_args(c->tape, "seq_ce_loss", "features", h, out->in, tgt, tgt_len, T_div, true))
        return NULL;
    return nn_seq_ce_loss_logits(c, nn_linear_forward(out, c, h), tgt, tgt_len, T_div, eps);
}

ag_tensor *nn_seq_ce_loss_fused(const nn_linear *out, const nn_ctx *c, ag_tensor *h,
                                const int32_t *tgt, const int32_t *tgt_len, int T_div, double eps) {
    if (!out || !c || !h) return NULL;
    if (!seq_args(c->tape, "seq_ce_loss", "features", h, out->in, tgt, tgt_len, T_div, true))
        return NULL;
    ag_real *w = seq_mask(c->tape, h->shape[0], h->shape[1], tgt_len, (ag_real)1 / T_div);
    if (!w) return NULL;
    return nn_linear_ce_forward(out, c, h, tgt, w, eps, AG_IGNORE_INDEX, 0);
}

ag_tensor *nn_seq_ce_loss(const nn_linear *out, const nn_ctx *c, ag_tensor *h, const int32_t *tgt,
                          const int32_t *tgt_len, int T_div, double eps) {
    if (!out || !c || !h) return NULL;
    if (!seq_args(c->tape, "seq_ce_loss", "features", h, out->in, tgt, tgt_len, T_div, true))
        return NULL;
    const double logits = (double)h->shape[0] * h->shape[1] * out->out;
    return (logits >= NN_SEQ_CE_FUSED_MIN_LOGITS ? nn_seq_ce_loss_fused : nn_seq_ce_loss_composite)(
        out, c, h, tgt, tgt_len, T_div, eps);
}
