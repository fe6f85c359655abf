/* ag_op.h -- the public op-authoring API: everything an op needs, in the library or outside it.
 *
 * An op is one section of one file: a constructor (validate, shape rule, forward, record) and
 * a backward function, tied by a constant descriptor. A whole op, written outside the library:
 *
 *     #include <tapegrad/autograd/ag_op.h>     // installed; in the source tree "autograd/ag_op.h"
 *
 *     // y = x^2 elementwise; dy/dx = 2x.
 *     static void square_backward(ag_node *n) {       // ADDS into the input's gradient
 *         ag_tensor *x = n->in[0], *y = n->out;
 *         if (!x->requires_grad) return;
 *         for (ptrdiff_t i = 0; i < y->numel; i++) x->grad[i] += 2 * x->data[i] * y->grad[i];
 *     }
 *     static const ag_op SQUARE = {"square", square_backward};
 *
 *     ag_tensor *my_square(ag_tape *t, ag_tensor *x) {
 *         if (!ag_op_check(t, "square", 1, &x)) return NULL;  // NULL in: NULL out, no message
 *         x = ag_op_contig(t, x);                             // a recorded copy of a view
 *         ag_tensor *y = ag_op_out(t, x->ndim, x->shape, 1, &x);
 *         if (!y) return NULL;
 *         for (ptrdiff_t i = 0; i < y->numel; i++) y->data[i] = x->data[i] * x->data[i];
 *         ag_op_record(t, &SQUARE, y, 1, &x, 0);             // only when a gradient is wanted
 *         return y;
 *     }
 *
 * Compile the same file with -DTG_DOUBLE and link the float64 twin (ag64) to gradient-check it
 * in double precision with ag_gradcheck (docs/adding-an-op.md shows the whole outside project).
 * Rules: the backward accumulates (+=; BLIS beta = 1), never assigns; an op reports a usage
 * error with ag_report (op name and shapes) and returns NULL; what the backward needs beyond
 * the inputs and the output goes in the node's `saved` block (ag_op_record's saved_bytes), or
 * is recomputed (see the dropout masks below).
 */
#ifndef TG_AG_OP_H
#define TG_AG_OP_H

#include <float.h>
#include <math.h>
#include <string.h>

#include "ag.h"

/* C's restrict, spelled __restrict in C++ (GCC, Clang and MSVC all take it). */
#ifdef __cplusplus
#define AG_RESTRICT __restrict
#else
#define AG_RESTRICT restrict
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ag_node ag_node;

/* The constant descriptor of an op: its name (for messages) and its backward. */
typedef struct ag_op {
    const char *name;
    /* Adds d loss / d in[i] into in[i]->grad for every input that requires a gradient, from
     * out->grad. Must accumulate (+=), never assign. The engine makes out->grad and the grad of
     * every input that requires one valid just before the call (an intermediate's is NULL
     * outside the reverse pass, and its buffer is reused after it): read them in the call, never
     * keep them from the forward or past the call. */
    void (*backward)(ag_node *n);
} ag_op;

/* For a backward that cannot finish (a product that found no memory: ag_op_gemm), called from
 * it on the thread running the pass, after the cause was recorded (ag_error): once the backward
 * returns, ag_backward reports "backward: <op name>: <cause>", marks the tape failed and returns
 * -1 (the gradients are then incomplete). */
void ag_op_fail_backward(void);

struct ag_node {
    const ag_op *op;
    ag_tensor *out;
    ag_tensor **in; /* n_in inputs, arena copy */
    int n_in;
    void *saved;   /* op-specific state in the arena (NULL when none asked) */
    ag_node *prev; /* the tape is a list from the newest node back */
};

/* ---- memory and validation ----
 * ag_tape_alloc (ag.h) gives an op its scratch and saved memory on the tape; ag_tape_calloc
 * the same, zeroed. */
void *ag_tape_calloc(ag_tape *t, size_t bytes);

/* True when every input is usable on t: not NULL (NULL returns false silently), a live tensor
 * of t or a leaf, not from an earlier step, not from another tape. Reports otherwise. */
bool ag_op_check(ag_tape *t, const char *op, int n, ag_tensor *const *in);
/* Normalises axis (negative from the end) against ndim; returns -1 after reporting. */
int ag_op_axis(ag_tape *t, const char *op, const ag_tensor *x, int axis, int ndim);

/* The arguments of a softmax cross-entropy over C classes, for x (..., D) with one label per
 * row (rows = prod of x's leading dims): label_smoothing in [0, 1], labels not NULL (unless
 * there is no row), each in [0, C) or equal to ignore_index. The one check of ag_nll_loss,
 * ag_cross_entropy and the fused cross-entropies of nn/ (nn/loss.c); `what` names x in the
 * messages ("logits", "input"). True, or false after reporting, e.g.
 * "cross_entropy: label 3 at position 1 is outside [0, 3) (labels [2], logits [2, 3])". */
bool ag_op_check_labels(ag_tape *t, const char *op, const ag_tensor *x, const char *what,
                        ptrdiff_t C, const int32_t *labels, int32_t ignore_index,
                        double label_smoothing);

/* ---- making results ---- */
/* True when recording and some input requires a gradient. */
bool ag_op_wants_grad(const ag_tape *t, int n, ag_tensor *const *in);
/* A new contiguous tensor on t with uninitialised data. When rg it requires a gradient: its grad
 * is NULL until the reverse pass gives it a zeroed buffer (see ag_op.backward). */
ag_tensor *ag_op_new(ag_tape *t, int ndim, const int *shape, bool rg);
/* ag_op_new with rg = ag_op_wants_grad(t, n, in). */
ag_tensor *ag_op_out(ag_tape *t, int ndim, const int *shape, int n, ag_tensor *const *in);
/* A view of x's data and grad: new shape and strides, element offset. The view of an
 * intermediate shares its base's gradient buffer once the reverse pass makes it. */
ag_tensor *ag_op_view(ag_tape *t, ag_tensor *x, int ndim, const int *shape, const ptrdiff_t *stride,
                      ptrdiff_t offset);
/* Records a node when y requires a gradient (else records nothing and returns NULL); saved
 * gets saved_bytes of zeroed arena memory. Runs the NaN tripwire when it is on. */
ag_node *ag_op_record(ag_tape *t, const ag_op *op, ag_tensor *y, int n, ag_tensor *const *in,
                      size_t saved_bytes);
/* The same input, contiguous (a recorded copy when x is a view). */
static inline ag_tensor *ag_op_contig(ag_tape *t, ag_tensor *x) {
    return x && !ag_is_contiguous(x) ? ag_contiguous(t, x) : x;
}

/* ---- shape helpers ---- */
ptrdiff_t ag_numel(int ndim, const int *shape);
void ag_contig_strides(int ndim, const int *shape, ptrdiff_t *stride);
/* "[2, 3]" from a raw shape. */
char *ag_dims_str(int ndim, const int *shape, char *buf, size_t len);
bool ag_same_shape(const ag_tensor *a, const ag_tensor *b);
/* Splits a contiguous shape around axis: outer = prod(shape[:axis]), n = shape[axis],
 * inner = prod(shape[axis+1:]). */
void ag_op_split(const ag_tensor *x, int axis, ptrdiff_t *outer, ptrdiff_t *n, ptrdiff_t *inner);

/* ---- strided iteration ----
 * Walks a shape with up to three stride sets (e.g. output, a, b), merging dimensions that are
 * contiguous for every set, as runs of `inner` elements:
 *
 *     ag_iter it; ag_iter_init(&it, nd, shape, 2, (const ptrdiff_t *[]){sx, sy});
 *     for (ptrdiff_t r = 0; r < it.outer; r++, ag_iter_next(&it))
 *         for (ptrdiff_t j = 0; j < it.inner; j++)
 *             y[it.off[1] + j * it.is[1]] = f(x[it.off[0] + j * it.is[0]]);
 *
 * A stride of 0 broadcasts (or, when writing with +=, reduces). */
typedef struct ag_iter {
    int nd, k;
    int shape[AG_MAX_DIMS];
    ptrdiff_t st[3][AG_MAX_DIMS];
    int idx[AG_MAX_DIMS];
    ptrdiff_t off[3]; /* offsets of the current run, per stride set */
    ptrdiff_t inner;  /* length of a run */
    ptrdiff_t is[3];  /* strides within a run */
    ptrdiff_t outer;  /* number of runs */
} ag_iter;
void ag_iter_init(ag_iter *it, int nd, const int *shape, int k, const ptrdiff_t *const *st);
static inline void ag_iter_next(ag_iter *it) {
    for (int d = it->nd - 1; d >= 0; d--) {
        for (int s = 0; s < it->k; s++) it->off[s] += it->st[s][d];
        if (++it->idx[d] < it->shape[d]) return;
        for (int s = 0; s < it->k; s++) it->off[s] -= it->st[s][d] * it->shape[d];
        it->idx[d] = 0;
    }
}

/* ---- vector math ----
 * exp, tanh and sigmoid of one element, written branch-free so that a loop calling them
 * vectorizes (float); libm in double (the gradient checks). Accuracy against libm (tests/
 * autograd/test_ops.c): exp within 2 ulp over the normal range (0 below -87.34), tanh and
 * sigmoid within 4 ulp; NaN and infinities behave as in libm.
 *
 * exp: 2^n e^r, n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts,
 * Cody-Waite); e^r by its degree-7 Taylor polynomial (truncation < 6e-9 relative); 2^n as
 * 2^s 2^(n-s), s = [n > 0], from exponent bits (both factors normal for n in [-126, 128]);
 * rounding by the 1.5 * 2^23 trick, as GCC will not vectorize floorf under IEEE traps.
 * tanh: |x| < 0.625: Cephes' odd polynomial x + x^3 P(x^2); else 1 - 2 / (e^(2|x|) + 1), sign
 * restored (no cancellation there). sigmoid: 1 / (1 + e^-x). */
#ifdef TG_DOUBLE
static inline ag_real ag_exp1(ag_real x) { return exp(x); }
static inline ag_real ag_tanh1(ag_real x) { return tanh(x); }
static inline ag_real ag_sigmoid1(ag_real x) { return 1 / (1 + exp(-x)); }
#else
static inline float ag_exp1(float v) {
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693145751953125f,
                ln2_lo = 1.428606765330187e-06f, hi = 88.7228394f, lo = -87.3365479f,
                round = 12582912.0f;
    float c = v > hi ? hi : v;
    c = c < lo ? lo : c;
    c = c != c ? 0.0f : c;
    float k = (c * log2e + round) - round;
    float r = (c - k * ln2_hi) - k * ln2_lo;
    float p =
        1.0f +
        r * (1.0f +
             r * (0.5f +
                  r * (1.0f / 6 +
                       r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
    float s = k > 0 ? 1.0f : 0.0f;
    int32_t bits = ((int32_t)(k - s) + 127) << 23;
    float two_ks;
    memcpy(&two_ks, &bits, sizeof two_ks);
    float e = (p * (1.0f + s)) * two_ks;
    e = v < lo ? 0.0f : e;
    e = v > hi ? INFINITY : e;
    return v != v ? v : e;
}
static inline float ag_tanh1(float x) {
    float a = x < 0 ? -x : x, z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) *
                       z -
                   3.33332819422e-1f) *
                      z * x +
                  x;
    float big = 1.0f - 2.0f / (ag_exp1(2.0f * a) + 1.0f);
    big = x < 0 ? -big : big;
    return a < 0.625f ? small : big; /* NaN: big, which is NaN */
}
static inline float ag_sigmoid1(float x) { return 1.0f / (1.0f + ag_exp1(-x)); }
#endif
/* y[i] = exp(x[i]) for i < n; x and y must not overlap. */
void ag_vexp(const ag_real *x, ag_real *y, ptrdiff_t n);
/* x[i] = exp(x[i]) for i < n. */
void ag_vexp_inplace(ag_real *x, ptrdiff_t n);

/* ---- dropout masks (ag_dropout, and fused ops that drop inside, e.g. nn/attention.c) ----
 * Counter-based draws: one 64-bit value from the stream keys a call, and element i's uniform
 * 32-bit number is a bijective hash of (key, i) (two rounds of Chris Wellons' "lowbias32"
 * integer hash). No sequential state between elements, so loops vectorize and every backward
 * recomputes its mask instead of storing it; an element is dropped when its number is below
 * p 2^32 (probability p to within 2^-32). */
typedef struct ag_dropmask {
    uint32_t k0, k1;
    uint64_t threshold;
    ag_real keep; /* 1 / (1 - p), the factor of a kept element (0 when p = 1) */
} ag_dropmask;

static inline uint32_t ag_hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static inline ag_dropmask ag_dropmask_new(double p, uint64_t key) {
    ag_dropmask m = {(uint32_t)key, (uint32_t)(key >> 32),
                     p >= 1 ? UINT64_C(1) << 32 : (uint64_t)(p * 4294967296.0),
                     p < 1 ? (ag_real)(1 / (1 - p)) : 0};
    return m;
}

/* The mask value of element i: 0 (dropped) or keep. */
static inline ag_real ag_dropmask_at(const ag_dropmask *m, uint32_t i) {
    return (uint64_t)ag_hash32(ag_hash32(i + m->k0) ^ m->k1) < m->threshold ? 0 : m->keep;
}

/* y[e] = x[e] * M[base + e] for e < n (y may be x): the mask of elements base.. applied. */
static inline void ag_dropmask_apply(ag_real *y, const ag_real *x, ptrdiff_t n, ag_dropmask dm,
                                     uint32_t base) {
    for (ptrdiff_t e = 0; e < n; e++) y[e] = x[e] * ag_dropmask_at(&dm, base + (uint32_t)e);
}

/* d[e] += g[e] * M[e] for e < n: a masked gradient added (d and g distinct). */
static inline void ag_dropmask_accumulate(ag_real *AG_RESTRICT d, const ag_real *AG_RESTRICT g,
                                          ptrdiff_t n, ag_dropmask dm) {
    for (ptrdiff_t e = 0; e < n; e++) d[e] += g[e] * ag_dropmask_at(&dm, (uint32_t)e);
}

/* ---- softmax rows (ops_softmax.c) ----
 * y = x - max(x) for one row of n, x[k] read as -1e6 for k >= len (ag_masked_softmax's mask;
 * len >= n: no mask); then ag_vexp and ag_row_normalize give the (masked) softmax. */
void ag_row_shift_max(const ag_real *x, ag_real *y, ptrdiff_t n, ptrdiff_t len);
/* y /= sum(y), one row of n. */
void ag_row_normalize(ag_real *y, ptrdiff_t n);
/* The first index of the largest of x[0..n), n >= 1, a NaN counting as the largest (ag_argmax's
 * rule); vectorized, for rows such as a decoder's logits. */
ptrdiff_t ag_row_argmax(const ag_real *x, ptrdiff_t n);
/* log(sum_k exp(x[k])) of one row of n >= 1, max-subtracted (exp through ag_vexp). */
ag_real ag_row_logsumexp(const ag_real *x, ptrdiff_t n);

/* ---- the one GEMM entry (ops_matmul.c) ----
 * C (m x n) = alpha * A (m x k) B (k x n) + beta * C, every operand given by element strides
 * (rs = between rows, cs = between columns), so a transposed view costs nothing. Small
 * products use the engine's own loop; the rest go to BLIS. */
void ag_gemm(int m, int n, int k, ag_real alpha, const ag_real *a, ptrdiff_t rsa, ptrdiff_t csa,
             const ag_real *b, ptrdiff_t rsb, ptrdiff_t csb, ag_real beta, ag_real *c,
             ptrdiff_t rsc, ptrdiff_t csc);
/* The micro-kernel BLIS runs ag_gemm's products with (a static string): "tapegrad avx512 24x16"
 * (the engine's own, on an AVX-512 CPU where BLIS would pick its AVX2 kernels; float32 only) or
 * "blis" (BLIS's choice; also when the environment sets TG_GEMM_KERNEL=blis). */
const char *ag_gemm_kernel(void);

/* ---- bf16 products (gemm_bf16.c) ----
 * C (m x n) = A (m x k) B (k x n) + beta C, beta 0 (C not read) or 1, float32 operands given
 * by element strides as ag_gemm's (no alpha). A and B are rounded to bf16 (ag_bf16_round)
 * as they are packed, and every sum is float32, each step rounded to nearest even with
 * denormals read and written as zero. Each C(i, j) is a fixed chain of such steps over k: its
 * bits depend on row i of A, column j of B, k and the kernel's chain only, never on blocking
 * or threads. Two chains, each with a kernel on the CPU's instructions and a portable one of
 * the same bits (ag_gemm_bf16_kernel names the one in use):
 *   - vdpbf16ps's (AVX512-BF16; "avx512bf16 12x32", "emulated 12x32"): one FMA chain over
 *     the pairs of k, the odd element of each pair first;
 *   - tdpbf16ps's (AMX; "amx 32x32", "amx-emulated 32x32"), as Intel's SDM writes it: for
 *     each 16 pairs of k from k = 0, two FMA chains from zero (the pairs' even elements, and
 *     their odd ones), then c = c + (even + odd).
 * Shares large products between the engine's threads. Returns 0, or -1 (reported, C
 * unchanged) for a negative size, another beta, or no memory for the packed block (512 KB). */
int ag_gemm_bf16(int m, int n, int k, const float *a, ptrdiff_t rsa, ptrdiff_t csa, const float *b,
                 ptrdiff_t rsb, ptrdiff_t csb, float beta, float *c, ptrdiff_t rsc, ptrdiff_t csc);
/* x rounded to bf16: nearest, ties to even; a NaN stays a NaN of the same sign (made quiet);
 * +-inf stay; a float32 denormal becomes a zero of its sign (vcvtneps2bf16's rule); a finite
 * value past bf16's largest rounds to inf. */
uint16_t ag_bf16_round(float x);
float ag_bf16_to_float(uint16_t h); /* exact */
/* One step of AVX512-BF16's vdpbf16ps (and of AMX's tdpbf16ps chains), written in C: the
 * instruction's bits, the one portable reference of ag_gemm_bf16's emulated kernels and nn's
 * bf16 inference kernel. Returns
 *   acc + a b  as one FMA rounded to nearest even, a, b (bf16) and acc read as zero when
 *   denormal (DAZ), a denormal result flushed to a zero of its sign (FTZ).
 * A lane of vdpbf16ps is two steps per pair of k, the odd element's first. The product of two
 * bf16 is exact in float32 unless it leaves the normal range: there the addition gives the
 * FMA's bits without a call; outside it (and for inf, NaN) fmaf does. */
static inline float ag_bf16_fma(float acc, uint16_t a, uint16_t b) {
    uint32_t ua = (uint32_t)a << 16, ub = (uint32_t)b << 16;
    if (!(ua & 0x7f800000u)) ua &= 0x80000000u;
    if (!(ub & 0x7f800000u)) ub &= 0x80000000u;
    float fa, fb;
    memcpy(&fa, &ua, sizeof fa);
    memcpy(&fb, &ub, sizeof fb);
    if (fabsf(acc) < FLT_MIN) acc = copysignf(0.0f, acc);
    const float p = fa * fb;
    const float r =
        isfinite(p) && (fabsf(p) >= FLT_MIN || fa == 0 || fb == 0) ? acc + p : fmaf(fa, fb, acc);
    return fabsf(r) < FLT_MIN ? copysignf(0.0f, r) : r;
}
/* The kernel ag_gemm_bf16 runs (a static string): the CPU's best by default -- "amx 32x32"
 * (AMX-BF16 tiles, where the CPU has them and Linux lets the process use them), else
 * "avx512bf16 12x32", else "emulated 12x32" -- or what the environment asks for at the first
 * product: TG_BF16_KERNEL=emulated (the portable kernel of the best one's chain),
 * TG_BF16_KERNEL=avx512bf16 (not AMX). */
const char *ag_gemm_bf16_kernel(void);
/* Forces the portable kernel of the CPU's best chain (true) or the CPU's best (false, whatever
 * the environment says), for tests and comparisons; returns whether a portable one was in use.
 * Not while products run. */
bool ag_bf16_emulate(bool on);
/* Selects a kernel by its name or the name's first word ("avx512bf16", "emulated", "amx",
 * "amx-emulated"), or "auto" (the CPU's best), for tests and comparisons. Returns 0, or -1
 * (reported) for an unknown name or a kernel this CPU cannot run (the one in use stays). Not
 * while products run. */
int ag_bf16_set_kernel(const char *name);

/* The product of an op that follows the engine's precision (ag_set_precision, ag.h): ag_gemm
 * with alpha 1 under AG_FP32 (its bits; returns 0); under AG_BF16 (float32 engine),
 * ag_gemm_bf16 and its result: -1 when it fails (reported: no memory for the calling thread's
 * packed block, "ag_gemm_bf16: out of memory ..."; C untouched), never a float32 product in its
 * place. A forward reports it for its op (`return ag_report(t, "linear: %s",
 * ag_last_error())`), a backward with ag_op_fail_backward. matmul and linear run their forward
 * and backward products through it, and so should a fused op's products whose inputs may be
 * bf16. beta: 0 or 1. */
int ag_op_gemm(int m, int n, int k, const ag_real *a, ptrdiff_t rsa, ptrdiff_t csa,
               const ag_real *b, ptrdiff_t rsb, ptrdiff_t csb, ag_real beta, ag_real *c,
               ptrdiff_t rsc, ptrdiff_t csc);

/* ---- B packed once, for many products (gemm_kernel.c) ----
 * For inference with a fixed right operand (a Linear layer's weight while decoding): ag_gemm
 * packs B into the micro-kernel's panels at every call, which for a 256-row product costs
 * about a tenth of it; packed once, it is reused. Same bits as ag_gemm (the same kernel, the
 * same sums in the same order). Only the engine's own micro-kernel has packed products: with
 * BLIS's (or in float64), or for sizes where ag_gemm would not run it, ag_gemm_packed calls
 * ag_gemm with the original B, which must then stay valid and unchanged.
 *
 * True when a product of these sizes runs from packed panels (the engine's kernel is in use
 * and m, n, k reach BLIS's thresholds for its packed path). */
bool ag_gemm_packs(int m, int n, int k);
typedef struct ag_packed_b ag_packed_b;
/* B (k x n, strides rsb, csb) packed; the caller owns the result (ag_packed_b_free) and keeps b
 * unchanged while it lives. NULL (reported) for an empty B or out of memory. */
ag_packed_b *ag_pack_b(int k, int n, const ag_real *b, ptrdiff_t rsb, ptrdiff_t csb);
void ag_packed_b_free(ag_packed_b *pb);
int ag_packed_b_rows(const ag_packed_b *pb); /* k */
int ag_packed_b_cols(const ag_packed_b *pb); /* n */
/* C (m x n, rows rsc apart, columns contiguous) = A (m x k) B + bias (n values, broadcast over
 * rows; NULL: none): the bits of ag_gemm with C preset to the bias rows and beta = 1 (beta = 0
 * without bias). Shares large products between the threads as ag_gemm. Returns 0, or -1
 * (reported) when out of memory. */
int ag_gemm_packed(int m, const ag_real *a, ptrdiff_t rsa, ptrdiff_t csa, const ag_packed_b *pb,
                   const ag_real *bias, ag_real *c, ptrdiff_t rsc);
/* ag_linear's forward, y = x W^T + b, with W^T packed (ag_pack_b of W (out, in) viewed as
 * in x out: rsb 1, csb in): the same bits as ag_linear. Inference only: reported (NULL) when
 * the tape would record a gradient for x or bias. */
ag_tensor *ag_linear_packed(ag_tape *t, ag_tensor *x, const ag_packed_b *wt, ag_tensor *bias);

#ifdef __cplusplus
}
#endif

#endif
