/* ops_matmul.c -- the GEMM entry, matmul (2-D and batched 3-D) and the fused linear op.
 *
 * Every operand is passed to GEMM as (pointer, row stride, column stride), so a transposed
 * view (ag_transpose swaps two strides) is read in place: no copies, no transpose flags.
 */
#include "autograd/ag_internal.h"

#include <blis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A portable build (TG_NATIVE=OFF, x86-64 GCC: CMake defines TG_MULTIVERSION) compiles the hot
 * loops below three times, for the x86-64 baseline, AVX2 and AVX-512 (x86-64-v4: its masks let
 * GCC vectorize exp's clamps, which it will not do without them under IEEE traps), and the
 * loader picks one from the CPU (GCC's target_clones, glibc's ifunc). Same code, same bits: ISO
 * C mode contracts no a * b + c into an FMA. */
#if defined(TG_MULTIVERSION) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TG_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TG_CLONES
#endif

/* Products of at most this many multiply-adds run in the engine's own loop: below it, BLIS's
 * per-call set-up (packing, about 0.3-1 us) costs more than the arithmetic. */
#define SMALL_GEMM_MACS 4096

#ifdef TG_DOUBLE
#define BLIS_GEMM_EX bli_dgemm_ex
#else
#define BLIS_GEMM_EX bli_sgemm_ex
#endif

/* Largest B (elements) copied to row-major before BLIS; see ag_gemm. */
#define TRANSPOSE_COPY_MAX (64 * 1024)

/* A per-thread scratch buffer of at least n elements, kept between calls (NULL if out of
 * memory); at most TRANSPOSE_COPY_MAX elements. Pool workers free theirs when they end
 * (ag__scratch_free); the main thread's lives until exit. */
static _Thread_local ag_real *scratch_buf;
static _Thread_local size_t scratch_cap;

void ag__scratch_free(void) {
    ag__packed_scratch_free();
    ag__bf16_scratch_free();
    free(scratch_buf);
    scratch_buf = NULL;
    scratch_cap = 0;
}

static ag_real *scratch(size_t n) {
    if (n > scratch_cap) {
        ag_real *p = realloc(scratch_buf, n * sizeof *p);
        if (!p) return NULL;
        scratch_buf = p;
        scratch_cap = n;
    }
    return scratch_buf;
}

/* Micro-kernel for small products, C (m x n) = alpha A (m x k) B (k x n) + beta C, in column
 * blocks of W = 8 or 16 (8 when n <= 8: attention heads are often 8 wide). A block of B is
 * read in place when its rows are contiguous and W wide; otherwise it is first copied into a
 * zero-padded k x W panel. Each row of C is then accumulated in a fixed W-wide array (one or two
 * vector registers: the compiler vectorizes the constant-length loop fully) and written once.
 * Whatever the operands' strides, the inner loop runs over contiguous memory. C is not read
 * when beta = 0. Needs k <= SMALL_K. */
#define SMALL_K 64

#define DEFINE_SMALL_GEMM(W)                                                                       \
    TG_CLONES                                                                                      \
    static void small_gemm_##W(int m, int n, int k, ag_real alpha, const ag_real *a,               \
                               ptrdiff_t rsa, ptrdiff_t csa, const ag_real *b, ptrdiff_t rsb,      \
                               ptrdiff_t csb, ag_real beta, ag_real *c, ptrdiff_t rsc,             \
                               ptrdiff_t csc) {                                                    \
        ag_real panel[SMALL_K * W], arow[SMALL_K];                                                 \
        for (int j0 = 0; j0 < n; j0 += W) {                                                        \
            int nb = n - j0 < W ? n - j0 : W;                                                      \
            const ag_real *bw = b + j0 * csb;                                                      \
            ptrdiff_t rsw = rsb;                                                                   \
            if (csb != 1 || nb != W) {                                                             \
                for (int p = 0; p < k; p++) {                                                      \
                    const ag_real *bp = bw + p * rsb;                                              \
                    ag_real *dst = panel + p * W;                                                  \
                    for (int j = 0; j < nb; j++) dst[j] = bp[j * csb];                             \
                    for (int j = nb; j < W; j++) dst[j] = 0;                                       \
                }                                                                                  \
                bw = panel;                                                                        \
                rsw = W;                                                                           \
            }                                                                                      \
            for (int i = 0; i < m; i++) {                                                          \
                const ag_real *ai = a + i * rsa;                                                   \
                if (csa != 1) {                                                                    \
                    for (int p = 0; p < k; p++) arow[p] = ai[p * csa];                             \
                    ai = arow;                                                                     \
                }                                                                                  \
                ag_real acc[W] = {0};                                                              \
                for (int p = 0; p < k; p++) {                                                      \
                    const ag_real x = ai[p], *bp = bw + p * rsw;                                   \
                    for (int j = 0; j < W; j++) acc[j] += x * bp[j];                               \
                }                                                                                  \
                ag_real *ci = c + i * rsc + j0 * csc;                                              \
                if (csc == 1 && nb == W) {                                                         \
                    if (beta == 1)                                                                 \
                        for (int j = 0; j < W; j++) ci[j] += alpha * acc[j];                       \
                    else if (beta == 0)                                                            \
                        for (int j = 0; j < W; j++) ci[j] = alpha * acc[j];                        \
                    else                                                                           \
                        for (int j = 0; j < W; j++) ci[j] = alpha * acc[j] + beta * ci[j];         \
                } else if (csc == 1 && beta == 1) {                                                \
                    for (int j = 0; j < nb; j++) ci[j] += alpha * acc[j];                          \
                } else if (csc == 1 && beta == 0) {                                                \
                    for (int j = 0; j < nb; j++) ci[j] = alpha * acc[j];                           \
                } else {                                                                           \
                    for (int j = 0; j < nb; j++)                                                   \
                        ci[j * csc] = alpha * acc[j] + (beta == 0 ? 0 : beta * ci[j * csc]);       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_SMALL_GEMM(8)
DEFINE_SMALL_GEMM(16)

typedef struct gemm_args {
    int n, k;
    ag_real alpha;
    const ag_real *a;
    ptrdiff_t rsa, csa;
    const ag_real *b;
    ptrdiff_t rsb, csb;
    ag_real beta;
    ag_real *c;
    ptrdiff_t rsc, csc;
    int m;
} gemm_args;

#define GEMM_BLOCK 512 /* rows of C per BLIS call in a large product (ag_gemm) */

#ifdef TG_DOUBLE
#define BLIS_DT BLIS_DOUBLE
#else
#define BLIS_DT BLIS_FLOAT
#endif

/* BLIS 0.9 computes a product C (m x n) = A (m x k) B with a side below its thresholds
 * (bli_gemmsup: m < MT, n < NT or k < KT, m and n swapped first when C is not stored by rows:
 * the micro-kernels prefer row-stored C, BLIS's and the engine's alike, and BLIS then computes
 * C^T = B^T A^T) with its code for small sizes ("sup"), which reads A and B unpacked; the rest
 * with its blocked code, which packs them. Zen3's MT is 512 (NT 200, KT 240) and the rows of a
 * shard's batch in the full preset (468-520 over 150 steps, median 510) are mostly below it:
 * there the small-size code ran the preset's Linear layers (forward and both gradients) at
 * 0.59-0.86 of the blocked code's speed on Zen 3, the slowest where a B's rows lie 4 KB apart
 * (1024 floats: every row of a panel in the same cache sets), 1,024 inputs on 510 rows at
 * 31.8 GFLOP/s against 53.7 (tests/autograd/bench_matmul.c, docs/benchmarks.md). So ag_gemm
 * sends every product whose three sides reach BLOCKED_MIN and BLIS's NT and KT to the blocked
 * code, m held to NT as n is; a product with a side below 200 (the book's run: 32- and 64-wide
 * features) stays BLIS's choice, its bits as before. */
#define BLOCKED_MIN 200

static dim_t at_least(dim_t a, dim_t b) { return a > b ? a : b; }

bool ag__gemm_blocked(int m, int n, int k, ptrdiff_t csc) {
    const cntx_t *own = ag__gemm_cntx();
    cntx_t *cx = own ? (cntx_t *)own : bli_gks_query_cntx();
    const bool by_rows = csc == 1 || csc == -1; /* bli_obj_is_row_stored */
    const dim_t rows = by_rows ? m : n, cols = by_rows ? n : m;
    if (!bli_cntx_l3_sup_thresh_is_met(BLIS_DT, rows, cols, k, cx)) return true;
    const dim_t nt = at_least(BLOCKED_MIN, bli_cntx_get_l3_sup_thresh_dt(BLIS_DT, BLIS_NT, cx));
    const dim_t kt = at_least(BLOCKED_MIN, bli_cntx_get_l3_sup_thresh_dt(BLIS_DT, BLIS_KT, cx));
    return rows >= nt && cols >= nt && k >= kt;
}

/* Rows [r0, r1) of C, one BLIS call, with the engine's context where it has one. Its small-size
 * calls get it too: BLIS's code for small sizes runs its own kernels and blocksizes from it, but
 * chooses between its two algorithms (block-panel or panel-block, bli_gemmsup_int) from the
 * context's MR and NR, 24 x 16 here where BLIS's own say 6 x 16. Where the choices differ (C's
 * count of 16-column panels between its counts of 24-row and of 6-row ones, as in a weight's
 * gradient with fewer rows than columns: 32 x 64 over k = 640) the results are not always
 * BLIS's bits (its two algorithms split the k sum differently), and the panel-block one runs
 * 10-15% faster there on a Zen 4. It stays: the default runs' numbers were made with it (the
 * seq2seq model's change without it). So ag_gemm gives the bits of BLIS's own kernels
 * (TG_GEMM_KERNEL=blis) in BLIS's blocked code, and in its small-size code where both choices
 * agree (tests/autograd/test_gemm_kernel.c). */
static void gemm_rows(void *ctx, ptrdiff_t r0, ptrdiff_t r1) {
    gemm_args *g = ctx;
    ag_real alpha = g->alpha, beta = g->beta;
    const int rows = (int)(r1 - r0);
    rntm_t blocked, *rntm = NULL; /* NULL: BLIS's choice; BLIS copies a runtime given */
    if (ag__gemm_blocked(rows, g->n, g->k, g->csc)) {
        bli_rntm_init(&blocked);
        bli_rntm_disable_l3_sup(&blocked);
        rntm = &blocked;
    }
    BLIS_GEMM_EX(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, rows, g->n, g->k, &alpha,
                 (ag_real *)g->a + r0 * g->rsa, g->rsa, g->csa, (ag_real *)g->b, g->rsb, g->csb,
                 &beta, g->c + r0 * g->rsc, g->rsc, g->csc, (cntx_t *)ag__gemm_cntx(), rntm);
}

/* Blocks [b0, b1) of GEMM_BLOCK rows of C, the last block taking the rows left over. */
static void gemm_blocks(void *ctx, ptrdiff_t b0, ptrdiff_t b1) {
    const gemm_args *g = ctx;
    ptrdiff_t nb = g->m / GEMM_BLOCK;
    for (ptrdiff_t blk = b0; blk < b1; blk++)
        gemm_rows(ctx, blk * GEMM_BLOCK, blk == nb - 1 ? g->m : (blk + 1) * GEMM_BLOCK);
}

void ag_gemm(int m, int n, int k, ag_real alpha, const ag_real *a, ptrdiff_t rsa, ptrdiff_t csa,
             const ag_real *b, ptrdiff_t rsb, ptrdiff_t csb, ag_real beta, ag_real *c,
             ptrdiff_t rsc, ptrdiff_t csc) {
    if (m == 0 || n == 0) return;
    if (k <= SMALL_K && (double)m * n * k <= SMALL_GEMM_MACS) {
        (n <= 8 ? small_gemm_8 : small_gemm_16)(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c,
                                                rsc, csc);
        return;
    }
    /* Rows of C are independent: a product of at least 2 GEMM_BLOCK rows is cut into blocks of
     * GEMM_BLOCK rows (the last one longer), each a BLIS call, shared between the threads. The
     * cut depends on m alone, never on the thread count: BLIS does not always give a row the
     * same bits in products of different heights (its kernels for small sizes take over by
     * size), so a cut per thread would make results depend on the number of threads. */
    const bool cut = (double)n * k >= 4096 && m >= 2 * GEMM_BLOCK;
    /* BLIS packs a column-major B (a transposed view, rsb = 1) at about half the speed of a
     * row-major one; a small B is cheaper to copy row-major first. Where every call runs the
     * engine's micro-kernel (the shortest call decides) it comes with its own packing, as fast
     * for either, and B's layout does not change the packed bits; BLIS's code for small sizes
     * picks its kernels (and bits) by the operands' layouts: there the copy always stays, as
     * with BLIS's own kernels. (A column-major C counts: BLIS's test swaps m and n for it.) */
    if (rsb == 1 && csb != 1 && (size_t)k * n <= TRANSPOSE_COPY_MAX &&
        !(ag__gemm_cntx() && ag__gemm_blocked(cut ? GEMM_BLOCK : m, n, k, csc))) {
        ag_real *bcopy = scratch((size_t)k * n);
        if (bcopy) {
            for (int p = 0; p < k; p++)
                for (int j = 0; j < n; j++) bcopy[(ptrdiff_t)p * n + j] = b[p + j * csb];
            b = bcopy;
            rsb = n;
            csb = 1;
        }
    }
    gemm_args g = {n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc, m};
    if (cut) ag_parallel_for(m / GEMM_BLOCK, 1, gemm_blocks, &g);
    else gemm_rows(&g, 0, m);
}

/* ag_gemm, or ag_gemm_bf16 when the engine's precision is AG_BF16 (ag_op.h): its failure is
 * the caller's, never a product in another precision. */
int ag_op_gemm(int m, int n, int k, const ag_real *a, ptrdiff_t rsa, ptrdiff_t csa,
               const ag_real *b, ptrdiff_t rsb, ptrdiff_t csb, ag_real beta, ag_real *c,
               ptrdiff_t rsc, ptrdiff_t csc) {
#ifndef TG_DOUBLE
    if (ag_get_precision() == AG_BF16)
        return ag_gemm_bf16(m, n, k, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
#endif
    ag_gemm(m, n, k, 1, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
    return 0;
}

/* ---- matmul ----
 * y_i = a_i b_i for every batch index i (up to two batch axes, each operand with its own batch
 * strides, so a permuted view such as heads split out of (B, T, h, d) needs no copy); a 2-D
 * operand is the same matrix for every i.
 * backward: da_i += dy_i b_i^T, db_i += a_i^T dy_i. */

#define MM_MAX_BATCH 2

typedef struct mm_plan {
    int nb; /* batch axes, 0 to 2 */
    int bshape[MM_MAX_BATCH];
    int m, n, k;
    ptrdiff_t sa[MM_MAX_BATCH], sb[MM_MAX_BATCH], sy[MM_MAX_BATCH]; /* 0 for a shared operand */
    ptrdiff_t rsa, csa, rsb, csb;
} mm_plan;

static void mm_plan_of(const ag_tensor *a, const ag_tensor *b, mm_plan *p) {
    int la = a->ndim - 1, lb = b->ndim - 1;
    const ag_tensor *batched = a->ndim > 2 ? a : b;
    memset(p, 0, sizeof *p);
    p->m = a->shape[la - 1];
    p->k = a->shape[la];
    p->n = b->shape[lb];
    p->nb = batched->ndim - 2;
    p->rsa = a->stride[la - 1];
    p->csa = a->stride[la];
    p->rsb = b->stride[lb - 1];
    p->csb = b->stride[lb];
    ptrdiff_t sy = (ptrdiff_t)p->m * p->n;
    for (int d = p->nb - 1; d >= 0; d--) {
        p->bshape[d] = batched->shape[d];
        p->sa[d] = a->ndim > 2 ? a->stride[d] : 0;
        p->sb[d] = b->ndim > 2 ? b->stride[d] : 0;
        p->sy[d] = sy;
        sy *= p->bshape[d];
    }
    /* A batch of a over a shared b whose rows continue from batch to batch is one tall
     * product: (batch * m) x k by k x n. */
    bool fold = p->nb > 0 && b->ndim == 2;
    ptrdiff_t rows = p->m;
    for (int d = p->nb - 1; d >= 0 && fold; d--) {
        fold = p->bshape[d] == 1 || p->sa[d] == rows * p->rsa;
        rows *= p->bshape[d];
    }
    if (fold) {
        p->m = (int)rows;
        p->nb = 0;
    }
}

/* Offsets of batch index i (flattened) in a, b and y. */
static void mm_offsets(const mm_plan *p, ptrdiff_t i, ptrdiff_t *oa, ptrdiff_t *ob, ptrdiff_t *oy) {
    ptrdiff_t n1 = p->nb > 1 ? p->bshape[1] : 1, i0 = i / n1, i1 = i % n1;
    *oa = i0 * p->sa[0] + i1 * p->sa[1];
    *ob = i0 * p->sb[0] + i1 * p->sb[1];
    *oy = i0 * p->sy[0] + i1 * p->sy[1];
}

static ptrdiff_t mm_batches(const mm_plan *p) {
    return (p->nb > 0 ? p->bshape[0] : 1) * (p->nb > 1 ? p->bshape[1] : 1);
}

typedef struct mm_job {
    const mm_plan *p;
    ag_tensor *a, *b, *y;
    int what;           /* 0: forward y; 1: backward da; 2: backward db */
    _Atomic int failed; /* a product failed (bf16: no memory); the first one's message: */
    char error[256];
} mm_job;

static void mm_batch_range(void *ctx, ptrdiff_t i0, ptrdiff_t i1) {
    mm_job *j = ctx;
    const mm_plan *p = j->p;
    for (ptrdiff_t i = i0; i < i1 && !j->failed; i++) {
        ptrdiff_t oa, ob, oy;
        mm_offsets(p, i, &oa, &ob, &oy);
        int rc;
        if (j->what == 0)
            rc = ag_op_gemm(p->m, p->n, p->k, j->a->data + oa, p->rsa, p->csa, j->b->data + ob,
                            p->rsb, p->csb, 0, j->y->data + oy, p->n, 1);
        else if (j->what == 1) /* da_i += dy_i b_i^T */
            rc = ag_op_gemm(p->m, p->k, p->n, j->y->grad + oy, p->n, 1, j->b->data + ob, p->csb,
                            p->rsb, 1, j->a->grad + oa, p->rsa, p->csa);
        else /* db_i += a_i^T dy_i */
            rc = ag_op_gemm(p->k, p->n, p->m, j->a->data + oa, p->csa, p->rsa, j->y->grad + oy,
                            p->n, 1, 1, j->b->grad + ob, p->rsb, p->csb);
        int first = 0;
        if (rc && atomic_compare_exchange_strong(&j->failed, &first, 1))
            snprintf(j->error, sizeof j->error, "%s", ag_last_error()); /* this thread's */
    }
}

/* Runs one kind of product over every batch: in parallel when the batches write to distinct
 * memory (an operand shared by every batch gathers all their gradients: serial then). Returns
 * 0, or -1 with the first failed product's message in the caller's ag_last_error. */
static int mm_run(const mm_plan *p, ag_tensor *a, ag_tensor *b, ag_tensor *y, int what) {
    mm_job j = {p, a, b, y, what, 0, ""};
    ptrdiff_t nb = mm_batches(p);
    bool shared = (what == 1 && a->ndim == 2) || (what == 2 && b->ndim == 2);
    ptrdiff_t per_batch = (ptrdiff_t)p->m * p->n * p->k;
    if (shared || nb < 2) mm_batch_range(&j, 0, nb);
    else
        ag_parallel_for(nb, per_batch >= 32768 ? 1 : 32768 / (per_batch + 1) + 1, mm_batch_range,
                        &j);
    return j.failed ? ag_error("%s", j.error) : 0;
}

static void matmul_backward(ag_node *nd) {
    ag_tensor *a = nd->in[0], *b = nd->in[1], *y = nd->out;
    mm_plan p;
    mm_plan_of(a, b, &p);
    if ((a->requires_grad && mm_run(&p, a, b, y, 1)) ||
        (b->requires_grad && mm_run(&p, a, b, y, 2)))
        ag_op_fail_backward();
}
static const ag_op matmul_op = {"matmul", matmul_backward};

ag_tensor *ag_matmul(ag_tape *t, ag_tensor *a, ag_tensor *b) {
    ag_tensor *in[2] = {a, b};
    if (!ag_op_check(t, "matmul", 2, in)) return NULL;
    char sa[64], sb[64];
    ag_shape_str(a, sa, sizeof sa);
    ag_shape_str(b, sb, sizeof sb);
    if (a->ndim < 2 || a->ndim > 2 + MM_MAX_BATCH || b->ndim < 2 || b->ndim > 2 + MM_MAX_BATCH)
        return ag_report(t, "matmul: operands must be 2-D to 4-D, got %s and %s", sa, sb);
    if (a->shape[a->ndim - 1] != b->shape[b->ndim - 2])
        return ag_report(t, "matmul: inner dimensions differ: %s and %s", sa, sb);
    if (a->ndim > 2 && b->ndim > 2 &&
        (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int) * (size_t)(a->ndim - 2))))
        return ag_report(t, "matmul: batch dimensions differ: %s and %s", sa, sb);
    const ag_tensor *batched = a->ndim > 2 ? a : b;
    int nd = batched->ndim, shape[2 + MM_MAX_BATCH];
    memcpy(shape, batched->shape, sizeof(int) * (size_t)(nd - 2));
    shape[nd - 2] = a->shape[a->ndim - 2];
    shape[nd - 1] = b->shape[b->ndim - 1];
    ag_tensor *y = ag_op_out(t, nd, shape, 2, in);
    if (!y) return NULL;
    mm_plan p;
    mm_plan_of(a, b, &p);
    if (mm_run(&p, a, b, y, 0)) return ag_report(t, "matmul: %s", ag_last_error());
    ag_op_record(t, &matmul_op, y, 2, in, 0);
    return y;
}

/* ---- linear ----
 * x (R, in) [leading dims flattened], w (out, in), bias (out):  y (R, out) = x w^T + bias.
 * backward: dx += dy w;  dw += dy^T x;  dbias += sum over rows of dy. */

static void linear_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *w = nd->in[1], *bias = nd->n_in > 2 ? nd->in[2] : NULL;
    ag_tensor *y = nd->out;
    int out = w->shape[0], in = w->shape[1];
    int rows = out ? (int)(y->numel / out) : 0;
    if ((x->requires_grad && ag_op_gemm(rows, in, out, y->grad, out, 1, w->data, w->stride[0],
                                        w->stride[1], 1, x->grad, in, 1)) ||
        (w->requires_grad && ag_op_gemm(out, in, rows, y->grad, 1, out, x->data, in, 1, 1, w->grad,
                                        w->stride[0], w->stride[1]))) {
        ag_op_fail_backward();
        return;
    }
    if (bias && bias->requires_grad) { /* bias is contiguous (ag_linear) */
        for (int r = 0; r < rows; r++) {
            const ag_real *restrict g = y->grad + (ptrdiff_t)r * out;
            ag_real *restrict db = bias->grad;
            for (int o = 0; o < out; o++) db[o] += g[o];
        }
    }
}
static const ag_op linear_op = {"linear", linear_backward};

/* A Linear's output for x (..., in): x's shape with `out` last (ag_op_out of in[0..n_in)). */
static ag_tensor *linear_out(ag_tape *t, const ag_tensor *x, int out, int n_in,
                             ag_tensor *const *in) {
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out;
    return ag_op_out(t, x->ndim, shape, n_in, in);
}

static void linear_packed_backward(ag_node *nd) { (void)nd; /* never recorded: no gradient */ }
static const ag_op linear_packed_op = {"linear_packed", linear_packed_backward};

ag_tensor *ag_linear_packed(ag_tape *t, ag_tensor *x, const ag_packed_b *wt, ag_tensor *bias) {
    ag_tensor *in[2] = {x, bias};
    int n_in = bias ? 2 : 1;
    if (!ag_op_check(t, "linear_packed", n_in, in)) return NULL;
    if (!wt) return ag_report(t, "linear_packed: no packed weight");
    const int inf = ag_packed_b_rows(wt), out = ag_packed_b_cols(wt);
    char sx[64], sb[64];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != inf)
        return ag_report(t,
                         "linear_packed: input %s does not fit a packed %d x %d weight "
                         "(expected [..., %d])",
                         ag_shape_str(x, sx, sizeof sx), out, inf, inf);
    if (bias && (bias->ndim != 1 || bias->shape[0] != out))
        return ag_report(t,
                         "linear_packed: bias %s does not fit a packed %d x %d weight "
                         "(expected [%d])",
                         ag_shape_str(bias, sb, sizeof sb), out, inf, out);
    if (ag_op_wants_grad(t, n_in, in))
        return ag_report(t, "linear_packed: inference only, turn the tape's recording off or "
                            "use ag_linear");
    in[0] = x = ag_op_contig(t, x);
    if (bias) in[1] = bias = ag_op_contig(t, bias);
    if (!x || (bias && !in[1])) return NULL;
    ag_tensor *y = linear_out(t, x, out, n_in, in);
    if (!y) return NULL;
    int rows = out ? (int)(y->numel / out) : 0;
    if (ag_gemm_packed(rows, x->data, inf, 1, wt, bias ? bias->data : NULL, y->data, out)) {
        ag__mark_failed(t); /* reported */
        return NULL;
    }
    ag_op_record(t, &linear_packed_op, y, n_in, in, 0);
    return y;
}

ag_tensor *ag_linear(ag_tape *t, ag_tensor *x, ag_tensor *w, ag_tensor *bias) {
    ag_tensor *in[3] = {x, w, bias};
    int n_in = bias ? 3 : 2;
    if (!ag_op_check(t, "linear", n_in, in)) return NULL;
    char sx[64], sw[64], sbias[64];
    ag_shape_str(x, sx, sizeof sx);
    ag_shape_str(w, sw, sizeof sw);
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return ag_report(t, "linear: input %s does not fit weight %s (expected [..., %d])", sx, sw,
                         w->ndim == 2 ? w->shape[1] : -1);
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))
        return ag_report(t, "linear: bias %s does not fit weight %s (expected [%d])",
                         ag_shape_str(bias, sbias, sizeof sbias), sw, w->shape[0]);
    in[0] = x = ag_op_contig(t, x);
    if (bias) in[2] = bias = ag_op_contig(t, bias);
    if (!x || (n_in > 2 && !bias)) return NULL;
    int out = w->shape[0], inf = w->shape[1];
    ag_tensor *y = linear_out(t, x, out, n_in, in);
    if (!y) return NULL;
    int rows = out ? (int)(y->numel / out) : 0;
    if (bias) {
        for (int r = 0; r < rows; r++) {
            ag_real *restrict yr = y->data + (ptrdiff_t)r * out;
            const ag_real *restrict bd = bias->data;
            for (int o = 0; o < out; o++) yr[o] = bd[o];
        }
    }
    if (ag_op_gemm(rows, out, inf, x->data, inf, 1, w->data, w->stride[1], w->stride[0],
                   bias ? 1 : 0, y->data, out, 1))
        return ag_report(t, "linear: %s", ag_last_error());
    ag_op_record(t, &linear_op, y, n_in, in, 0);
    return y;
}
