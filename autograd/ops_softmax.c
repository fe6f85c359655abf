/* ops_softmax.c -- softmax, log-softmax, d2l's masked softmax, fused softmax cross-entropy.
 * All work on rows of the last axis (the input made contiguous: rows x V), max-subtracted.
 *
 *   softmax:      y = exp(x - m) / s,  s = sum exp(x - m)      dx += y * (g - sum(g * y))
 *   log_softmax:  y = x - m - log s                           dx += g - exp(y) * sum(g)
 *   masked:       softmax of x with x[k] := -1e6 for k >= len  dx[k] += [k < len] y (g - sum(g y))
 *   softmax_ce:   l = w (m + log s - x[label])                dx += g w (softmax(x) - onehot)
 */
#include "autograd/ag_internal.h"

#include <math.h>

#ifdef TG_DOUBLE
#define LOG log
#else
#define LOG logf
#endif

/* d2l replaces masked scores by this value (not -inf), so an all-masked row is uniform. */
#define MASKED_SCORE ((ag_real)-1e6)

/* Rows are exponentiated through ag_vexp (vectorized) in chunks of this many elements. */
#define CHUNK 256

/* Row r of y = x[r] - max, with x[r][k] treated as MASKED_SCORE for k >= len. */
void ag_row_shift_max(const ag_real *x, ag_real *y, ptrdiff_t n, ptrdiff_t len) {
    if (len > n) len = n;
    ag_real m = len > 0 ? x[0] : MASKED_SCORE;
    for (ptrdiff_t k = 1; k < len; k++) m = x[k] > m ? x[k] : m;
    if (len < n && MASKED_SCORE > m) m = MASKED_SCORE;
    for (ptrdiff_t k = 0; k < n; k++) y[k] = (k < len ? x[k] : MASKED_SCORE) - m;
}

/* Row r of y /= its sum. */
void ag_row_normalize(ag_real *y, ptrdiff_t n) {
    ag_real s = 0;
    for (ptrdiff_t k = 0; k < n; k++) s += y[k];
    ag_real inv = 1 / s;
    for (ptrdiff_t k = 0; k < n; k++) y[k] *= inv;
}

/* out[k] = exp(x[k] - shift) for one chunk of c <= CHUNK elements. */
static void exp_shifted(const ag_real *x, ag_real shift, ag_real *out, ptrdiff_t c) {
    ag_real tmp[CHUNK];
    for (ptrdiff_t k = 0; k < c; k++) tmp[k] = x[k] - shift;
    ag_vexp(tmp, out, c);
}

ag_real ag_row_logsumexp(const ag_real *x, ptrdiff_t n) {
    ag_real m = x[0], s = 0, e[CHUNK];
    for (ptrdiff_t k = 1; k < n; k++) m = x[k] > m ? x[k] : m;
    for (ptrdiff_t k0 = 0; k0 < n; k0 += CHUNK) {
        ptrdiff_t c = n - k0 < CHUNK ? n - k0 : CHUNK;
        exp_shifted(x + k0, m, e, c);
        for (ptrdiff_t k = 0; k < c; k++) s += e[k];
    }
    return m + LOG(s);
}

static ptrdiff_t last_dim(const ag_tensor *x) { return x->ndim ? x->shape[x->ndim - 1] : 1; }

/* ---- softmax and masked softmax share one backward ---- */

typedef struct softmax_saved {
    int32_t *lens; /* per-row valid length, NULL when unmasked */
} softmax_saved;

/* Rows of softmax, its backward, and the cross-entropy are independent: they are split between
 * the threads (ag_parallel_for) once a thread gets at least ~16K elements. */
typedef struct row_job {
    ag_tensor *x, *y;
    const int32_t *lens;
    const void *saved;
} row_job;

static ptrdiff_t rows_per_thread(ptrdiff_t n) { return 16384 / (n ? n : 1) + 1; }

/* Rows [r0, r1): shift every row, exponentiate the whole range in one vector pass (rows of an
 * attention are ~10 long: one call per row would be all prologue), then normalize. */
static void softmax_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const row_job *j = ctx;
    ptrdiff_t n = last_dim(j->x);
    for (ptrdiff_t r = r0; r < r1; r++)
        ag_row_shift_max(j->x->data + r * n, j->y->data + r * n, n, j->lens ? j->lens[r] : n);
    ag_vexp_inplace(j->y->data + r0 * n, (r1 - r0) * n);
    for (ptrdiff_t r = r0; r < r1; r++) ag_row_normalize(j->y->data + r * n, n);
}

static void softmax_backward_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const row_job *j = ctx;
    ag_tensor *x = j->x, *y = j->y;
    const int32_t *lens = j->lens;
    ptrdiff_t n = last_dim(x);
    for (ptrdiff_t r = r0; r < r1; r++) {
        const ag_real *yr = y->data + r * n, *gr = y->grad + r * n;
        ag_real *gx = x->grad + r * n;
        ptrdiff_t len = lens ? lens[r] : n;
        ag_real dot = 0;
        for (ptrdiff_t k = 0; k < n; k++) dot += gr[k] * yr[k];
        for (ptrdiff_t k = 0; k < len && k < n; k++) gx[k] += yr[k] * (gr[k] - dot);
    }
}

static void softmax_backward(ag_node *nd) {
    row_job j = {nd->in[0], nd->out, ((const softmax_saved *)nd->saved)->lens, NULL};
    ptrdiff_t n = last_dim(j.x), rows = n ? j.x->numel / n : 0;
    ag_parallel_for(rows, rows_per_thread(n), softmax_backward_rows, &j);
}
static const ag_op softmax_op = {"softmax", softmax_backward};
static const ag_op masked_softmax_op = {"masked_softmax", softmax_backward};

/* lens: per row of x (already expanded), or NULL. */
static ag_tensor *softmax_impl(ag_tape *t, const ag_op *op, ag_tensor *x, int32_t *lens) {
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    ptrdiff_t n = last_dim(x), rows = n ? x->numel / n : 0;
    row_job j = {x, y, lens, NULL};
    ag_parallel_for(rows, rows_per_thread(n), softmax_rows, &j);
    ag_node *nd = ag_op_record(t, op, y, 1, &x, sizeof(softmax_saved));
    if (nd) ((softmax_saved *)nd->saved)->lens = lens;
    return y;
}

ag_tensor *ag_softmax(ag_tape *t, ag_tensor *x) {
    if (!ag_op_check(t, "softmax", 1, &x)) return NULL;
    return softmax_impl(t, &softmax_op, x, NULL);
}

ag_tensor *ag_masked_softmax(ag_tape *t, ag_tensor *x, const int32_t *valid_lens, int vl_ndim) {
    if (!ag_op_check(t, "masked_softmax", 1, &x)) return NULL;
    char sx[64];
    if (x->ndim != 3)
        return ag_report(t, "masked_softmax: scores must be 3-D (B, Tq, Tk), got %s",
                         ag_shape_str(x, sx, sizeof sx));
    if (!valid_lens || vl_ndim == 0) return softmax_impl(t, &masked_softmax_op, x, NULL);
    if (vl_ndim != 1 && vl_ndim != 2)
        return ag_report(t, "masked_softmax: valid_lens must be 1-D (B,) or 2-D (B, Tq), got %d-D",
                         vl_ndim);
    int B = x->shape[0], Tq = x->shape[1];
    int32_t *lens = ag_tape_alloc(t, (size_t)B * Tq * sizeof *lens);
    if (!lens) return NULL;
    for (int b = 0; b < B; b++) {
        for (int q = 0; q < Tq; q++) {
            int32_t len = vl_ndim == 1 ? valid_lens[b] : valid_lens[(ptrdiff_t)b * Tq + q];
            if (len < 0)
                return ag_report(t,
                                 "masked_softmax: negative valid length %d (row %d, query %d) "
                                 "for scores %s",
                                 len, b, q, ag_shape_str(x, sx, sizeof sx));
            lens[(ptrdiff_t)b * Tq + q] = len;
        }
    }
    return softmax_impl(t, &masked_softmax_op, x, lens);
}

/* ---- log_softmax ---- */

static void log_softmax_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    ptrdiff_t n = last_dim(x), rows = n ? x->numel / n : 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *yr = y->data + r * n, *gr = y->grad + r * n;
        ag_real *gx = x->grad + r * n, gsum = 0, e[CHUNK];
        for (ptrdiff_t k = 0; k < n; k++) gsum += gr[k];
        for (ptrdiff_t k0 = 0; k0 < n; k0 += CHUNK) {
            ptrdiff_t c = n - k0 < CHUNK ? n - k0 : CHUNK;
            ag_vexp(yr + k0, e, c);
            for (ptrdiff_t k = 0; k < c; k++) gx[k0 + k] += gr[k0 + k] - e[k] * gsum;
        }
    }
}
static const ag_op log_softmax_op = {"log_softmax", log_softmax_backward};

ag_tensor *ag_log_softmax(ag_tape *t, ag_tensor *x) {
    if (!ag_op_check(t, "log_softmax", 1, &x)) return NULL;
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    ptrdiff_t n = last_dim(x), rows = n ? x->numel / n : 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const ag_real *xr = x->data + r * n;
        ag_real lse = ag_row_logsumexp(xr, n);
        for (ptrdiff_t k = 0; k < n; k++) y->data[r * n + k] = xr[k] - lse;
    }
    ag_op_record(t, &log_softmax_op, y, 1, &x, 0);
    return y;
}

/* ---- fused softmax cross-entropy ---- */

typedef struct ce_saved {
    int32_t *labels;
    ag_real *weights; /* NULL: all ones */
    ag_real *lse;     /* log-sum-exp per row */
} ce_saved;

static void softmax_ce_backward_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const row_job *j = ctx;
    ag_tensor *x = j->x, *y = j->y;
    const ce_saved *s = j->saved;
    ptrdiff_t n = last_dim(x);
    for (ptrdiff_t r = r0; r < r1; r++) {
        ag_real g = y->grad[r] * (s->weights ? s->weights[r] : 1);
        if (g == 0) continue;
        const ag_real *xr = x->data + r * n;
        ag_real *gx = x->grad + r * n, e[CHUNK];
        for (ptrdiff_t k0 = 0; k0 < n; k0 += CHUNK) {
            ptrdiff_t c = n - k0 < CHUNK ? n - k0 : CHUNK;
            exp_shifted(xr + k0, s->lse[r], e, c);
            for (ptrdiff_t k = 0; k < c; k++) gx[k0 + k] += g * e[k];
        }
        gx[s->labels[r]] -= g;
    }
}

static void softmax_ce_backward(ag_node *nd) {
    row_job j = {nd->in[0], nd->out, NULL, nd->saved};
    ptrdiff_t n = last_dim(j.x);
    ag_parallel_for(j.y->numel, rows_per_thread(n), softmax_ce_backward_rows, &j);
}
static const ag_op softmax_ce_op = {"softmax_ce", softmax_ce_backward};

typedef struct ce_fwd_job {
    ag_tensor *x, *y;
    const int32_t *labels;
    const ag_real *weights;
    ag_real *lse;
} ce_fwd_job;

static void softmax_ce_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    const ce_fwd_job *j = ctx;
    ptrdiff_t n = last_dim(j->x);
    for (ptrdiff_t r = r0; r < r1; r++) {
        const ag_real *xr = j->x->data + r * n;
        j->lse[r] = ag_row_logsumexp(xr, n);
        j->y->data[r] = (j->weights ? j->weights[r] : 1) * (j->lse[r] - xr[j->labels[r]]);
    }
}

ag_tensor *ag_softmax_ce(ag_tape *t, ag_tensor *logits, const int32_t *labels,
                         const ag_real *weights) {
    if (!ag_op_check(t, "softmax_ce", 1, &logits)) return NULL;
    char sx[64];
    if (logits->ndim < 1 || last_dim(logits) < 1)
        return ag_report(t, "softmax_ce: logits must be (..., V) with V >= 1, got %s",
                         ag_shape_str(logits, sx, sizeof sx));
    ptrdiff_t n = last_dim(logits), rows = logits->numel / n;
    for (ptrdiff_t r = 0; r < rows; r++) {
        if (labels[r] < 0 || labels[r] >= n)
            return ag_report(
                t, "softmax_ce: label %d at position %td is outside [0, %td) for logits %s",
                labels[r], r, n, ag_shape_str(logits, sx, sizeof sx));
    }
    ag_tensor *x = ag_op_contig(t, logits);
    ag_tensor *y = x ? ag_op_out(t, x->ndim - 1, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    ce_saved s = {0};
    s.lse = ag_tape_alloc(t, (size_t)rows * sizeof *s.lse);
    if (!s.lse) return NULL;
    ce_fwd_job fj = {x, y, labels, weights, s.lse};
    ag_parallel_for(rows, rows_per_thread(n), softmax_ce_rows, &fj);
    if (y->requires_grad) {
        s.labels = ag_tape_alloc(t, (size_t)rows * sizeof *labels);
        if (!s.labels) return NULL;
        memcpy(s.labels, labels, (size_t)rows * sizeof *labels);
        if (weights) {
            s.weights = ag_tape_alloc(t, (size_t)rows * sizeof *weights);
            if (!s.weights) return NULL;
            memcpy(s.weights, weights, (size_t)rows * sizeof *weights);
        }
    }
    ag_node *nd = ag_op_record(t, &softmax_ce_op, y, 1, &x, sizeof(ce_saved));
    if (nd) *(ce_saved *)nd->saved = s;
    return y;
}
