/* test_gemm_bf16.c -- bf16 products (autograd/gemm_bf16.c) and the precision switch's refusals
 * (the switch on the ops, and a network trained in bf16: test_gemm_bf16_ops.c).
 *
 * What is pinned, on any CPU:
 *   - ag_bf16_round: nearest with ties to even, NaN kept (quiet, same sign), +-inf kept,
 *     float32 denormals to a zero of their sign, past the largest bf16 to inf; every bf16
 *     value goes back to itself; where the CPU has AVX512-BF16, the same bits as its
 *     vcvtneps2bf16 over specials and a million random bit patterns.
 *   - ag_gemm_bf16 against references written here (the two chains of ag_op.h, one element at
 *     a time: vdpbf16ps's, pairs of k with the odd element first; tdpbf16ps's, per 16 pairs an
 *     even and an odd chain from zero, then c + (even + odd); every step rounded to nearest
 *     even with denormals read and written as zero) on bf16-rounded inputs: the SAME bits
 *     (0 ulp), on odd shapes across every block edge of the kernels (tiles 12 x 32 and
 *     32 x 32, MC 96, KC 256, NC 1024), A and B transposed or not, C by rows or by columns,
 *     beta 0 (C full of NaN: not read) and 1, k = 0 and odd k, a denormal in C (read as zero)
 *     -- with both emulated kernels always, and with the AVX512-BF16 kernel where the CPU has
 *     it. The AMX kernel, where the CPU has it, is held to the float64 bound below on the same
 *     cases, and the number of its elements whose bits differ from the emulated tdpbf16ps
 *     chain is printed: that Intel's hardware computes exactly the SDM's chain is measured
 *     there, not assumed. Every kernel this CPU runs: within the rounding bound of a float64
 *     product of the same rounded inputs; 1 and 2 threads, and two products at once in two tasks
 *     (each thread taking blocks of the other's), give the same bits; bad beta,
 *     sizes and kernel names reported.
 *   - the switch: an unknown value refused, AG_FP32 left in force. The float64 engine (this
 *     file built against ag64) refuses AG_BF16. Denormal products (outside float32's normal
 *     range) are not pinned. */
#include "autograd/ag_cpu.h"
#include "autograd/ag_op.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tg_test.h"

#ifndef TG_DOUBLE

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- rounding ---- */

static const uint32_t ROUND_CASES[][2] = {
    {0x3f800000, 0x3f80}, /* 1 */
    {0x3f808000, 0x3f80}, /* tie, even below */
    {0x3f818000, 0x3f82}, /* tie, odd below: up */
    {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80}, {0xbf808001, 0xbf81},
    {0xbf818000, 0xbf82}, {0x00000000, 0x0000}, {0x80000000, 0x8000}, /* zeros */
    {0x00000001, 0x0000}, {0x807fffff, 0x8000}, {0x007fffff, 0x0000}, /* denormals */
    {0x00800000, 0x0080}, {0x00808000, 0x0080},                       /* smallest normal */
    {0x7f800000, 0x7f80}, {0xff800000, 0xff80},                       /* inf */
    {0x7f7fffff, 0x7f80}, {0xff7fffff, 0xff80}, {0x7f7f7fff, 0x7f7f}, /* to inf, largest */
    {0x7fc00000, 0x7fc0}, {0x7f800001, 0x7fc0}, {0xff800001, 0xffc0},
    {0x7fa00000, 0x7fe0}, {0x7fffffff, 0x7fff}, /* NaNs: quiet, sign kept */
};

static void test_round(void) {
    for (size_t i = 0; i < sizeof ROUND_CASES / sizeof *ROUND_CASES; i++) {
        uint16_t got = ag_bf16_round(from_bits(ROUND_CASES[i][0]));
        if (got != ROUND_CASES[i][1])
            TG_FAIL("bf16(0x%08x) = 0x%04x, expected 0x%04x", ROUND_CASES[i][0], got,
                    ROUND_CASES[i][1]);
    }
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f), denormal = !(h & 0x7f80) && (h & 0x7f);
        uint16_t back = ag_bf16_round(ag_bf16_to_float((uint16_t)h));
        uint16_t want = denormal ? (uint16_t)(h & 0x8000)
                        : nan    ? (uint16_t)(h | 0x40)
                                 : (uint16_t)h;
        bad += back != want || bits(ag_bf16_to_float((uint16_t)h)) != h << 16;
    }
    CU_ASSERT_EQUAL(bad, 0);
}

#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#include <immintrin.h>
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static void
hw_round16(const float *x, uint16_t *out) {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x));
    memcpy(out, &h, 32);
}
#define HAVE_HW_ROUND 1
#endif

/* Against the CPU's own conversion, where it has one. */
static void test_round_matches_cpu(void) {
#ifdef HAVE_HW_ROUND
    bool was = ag_bf16_emulate(false), has = ag_bf16_native(); /* the CPU's best */
    ag_bf16_emulate(was);
    if (!has) {
        printf("(no AVX512-BF16: the CPU's conversion not compared) ");
        return;
    }
    float x[16];
    uint16_t hw[16];
    ag_rng r;
    ag_rng_seed(&r, 7);
    int bad = 0;
    for (int it = 0; it < 65536 + 2; it++) {
        for (int i = 0; i < 16; i++) {
            size_t c = (size_t)(it * 16 + i) % (sizeof ROUND_CASES / sizeof *ROUND_CASES);
            x[i] = from_bits(it < 2 ? ROUND_CASES[c][0] : (uint32_t)ag_rng_next(&r));
        }
        hw_round16(x, hw);
        for (int i = 0; i < 16; i++) {
            bad += hw[i] != ag_bf16_round(x[i]); /* NaNs' payloads included */
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
#endif
}

#ifdef HAVE_HW_ROUND
/* 16 lanes of vdpbf16ps: acc[j] += a[j].hi b[j].hi, then += a[j].lo b[j].lo. */
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static void
hw_dot16(float *acc, const uint32_t *a, const uint32_t *b) {
    __m512 r = _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a),
                                (__m512bh)_mm512_loadu_si512(b));
    _mm512_storeu_ps(acc, r);
}
#endif

/* A random bf16 of exponent near 2^-63 (products near the bottom of float's range) one time in
 * four, else a random bit pattern. */
static uint16_t some_bf16(ag_rng *r) {
    uint32_t u = (uint32_t)ag_rng_next(r);
    if (u & 3) return (uint16_t)(u >> 16);
    return (uint16_t)((u & 0x8000) | ((0x40 + (u >> 4) % 8) << 7) | ((u >> 8) & 0x7f));
}

/* Against the CPU's own instruction, where it has one: NaNs compared as NaNs (their payloads
 * are not pinned), every other result bit for bit. */
static void test_fma_matches_cpu(void) {
#ifdef HAVE_HW_ROUND
    bool was = ag_bf16_emulate(false), has = ag_bf16_native();
    ag_bf16_emulate(was);
    if (!has) {
        printf("(no AVX512-BF16: vdpbf16ps not compared) ");
        return;
    }
    ag_rng r;
    ag_rng_seed(&r, 9);
    int bad = 0, tiny = 0;
    for (int it = 0; it < 1 << 16; it++) {
        uint32_t a[16], b[16];
        float hw[16], sw[16];
        for (int j = 0; j < 16; j++) {
            a[j] = some_bf16(&r) | (uint32_t)some_bf16(&r) << 16;
            b[j] = some_bf16(&r) | (uint32_t)some_bf16(&r) << 16;
            uint32_t c = (uint32_t)ag_rng_next(&r);
            hw[j] = sw[j] = from_bits(c & 1 ? c : (c & 0x807fffffu) | 0x00800000u); /* tiny */
            float p =
                ag_bf16_to_float((uint16_t)(a[j] >> 16)) * ag_bf16_to_float((uint16_t)(b[j] >> 16));
            tiny += p != 0 && fabsf(p) < 0x1p-126f;
            sw[j] = ag_bf16_fma(ag_bf16_fma(sw[j], (uint16_t)(a[j] >> 16), (uint16_t)(b[j] >> 16)),
                                (uint16_t)a[j], (uint16_t)b[j]);
        }
        hw_dot16(hw, a, b);
        for (int j = 0; j < 16; j++)
            bad += isnan(hw[j]) ? !isnan(sw[j]) : bits(hw[j]) != bits(sw[j]);
    }
    printf("(%d of 1M lanes with a product below float's normal range) ", tiny);
    CU_ASSERT(tiny > 1000);
    CU_ASSERT_EQUAL(bad, 0);
#endif
}

/* ---- one step of vdpbf16ps in C (ag_bf16_fma) ---- */

static void test_fma_step(void) {
    const float big = 0x1.fffffep127f;
    /* {acc, a, b, expected}: a and b bf16 bit patterns */
    static const struct {
        float acc;
        uint16_t a, b;
        float want;
    } cases[] = {
        {1.0f, 0x4040, 0x4000, 7.0f},             /* 1 + 3 x 2 */
        {0x1p-126f, 0x1f80, 0x1f80, 0x1.4p-126f}, /* 2^-128: the product's exact value counts */
        {0x1p-126f, 0x9f80, 0x1f80, 0.0f},        /* 2^-126 - 2^-128: denormal, to +0 */
        {-0x1.8p-126f, 0x3f80, 0x0080, -0.0f},    /* -1.5 2^-126 + 2^-126: to -0 */
        {1.0f, 0x0001, 0x3f80, 1.0f},             /* a denormal: read as zero */
        {0x1p-130f, 0x3f80, 0x0000, 0.0f},        /* acc denormal: read as zero */
        {0.0f, 0x7f00, 0x4000, INFINITY},         /* 2^127 x 2 */
        {0.0f, 0x0000, 0x7f80, NAN},              /* 0 x inf */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float got = ag_bf16_fma(cases[i].acc, cases[i].a, cases[i].b);
        if (isnan(cases[i].want) ? !isnan(got) : bits(got) != bits(cases[i].want))
            TG_FAIL("case %zu: %a + bf16 0x%04x x 0x%04x = %a, expected %a", i, cases[i].acc,
                    cases[i].a, cases[i].b, got, cases[i].want);
    }
    /* fused: 2^127 x 2 - the largest float is 2^128 - (2^128 - 2^104) = 2^104, finite */
    CU_ASSERT_EQUAL(bits(ag_bf16_fma(-big, 0x7f00, 0x4000)), bits(0x1p104f));
}

/* ---- the product against the chain written out ---- */

static float flush(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }

static float rnd(float x) { return ag_bf16_to_float(ag_bf16_round(x)); }

/* C(i, j) by the chain of ag_op.h, one element at a time. */
static float chain(int k, const float *a, ptrdiff_t csa, const float *b, ptrdiff_t rsb,
                   float start) {
    float acc = start;
    for (int p = 0; p < k; p += 2) {
        float a1 = p + 1 < k ? rnd(a[(p + 1) * csa]) : 0,
              b1 = p + 1 < k ? rnd(b[(p + 1) * rsb]) : 0;
        acc = flush(fmaf(a1, b1, flush(acc)));
        acc = flush(fmaf(rnd(a[p * csa]), rnd(b[p * rsb]), acc));
    }
    return acc;
}

/* C(i, j) by tdpbf16ps's chain (AMX): per 16 pairs of k from k = 0 (zero past k), an even and
 * an odd chain from zero, then acc = acc + (even + odd), every sum with denormals as zero. */
static float sum_ftz(float x, float y) { return flush(flush(x) + flush(y)); }

static float chain_amx(int k, const float *a, ptrdiff_t csa, const float *b, ptrdiff_t rsb,
                       float start) {
    float acc = start;
    for (int g = 0; g < k; g += 32) {
        float even = 0, odd = 0;
        for (int p = g; p < g + 32 && p < k; p += 2) {
            even = flush(fmaf(rnd(a[p * csa]), rnd(b[p * rsb]), even));
            float a1 = p + 1 < k ? rnd(a[(p + 1) * csa]) : 0,
                  b1 = p + 1 < k ? rnd(b[(p + 1) * rsb]) : 0;
            odd = flush(fmaf(a1, b1, odd));
        }
        acc = sum_ftz(acc, sum_ftz(even, odd));
    }
    return acc;
}

static bool amx_chain(void) { return !strncmp(ag_gemm_bf16_kernel(), "amx", 3); }

typedef struct layout {
    bool at, bt, cc; /* A transposed, B transposed, C by columns */
} layout;

/* Random values over several binades: every product stays in float32's normal range. */
static void fill(float *x, size_t n, ag_rng *r) {
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((2 * ag_rng_uniform(r) - 1) * ldexp(1, (int)ag_rng_below(r, 12) - 6));
}

/* Whether got is within the rounding bound of the float64 value of start + sum_p a_p b_p over
 * the k bf16-rounded values of a and b (strides sa, sb): k + k / 16 + 4 roundings (the AMX
 * chain's two sums per 16 pairs included) of at most 2^-24 each of a partial sum bounded by
 * |start| + sum |a_p b_p|. *sum gets the float64 value. */
static bool within_bound(float got, int k, const float *a, ptrdiff_t sa, const float *b,
                         ptrdiff_t sb, double start, double *sum) {
    double exact = start, mag = fabs(start);
    for (int p = 0; p < k; p++) {
        double t = (double)rnd(a[p * sa]) * rnd(b[p * sb]);
        exact += t;
        mag += fabs(t);
    }
    *sum = exact;
    return fabs(got - exact) <= (k + k / 16 + 4) * 0x1p-24 * mag;
}

/* One case: the kernel in use against its chain. exact: bit for bit, returns the mismatches;
 * else within the float64 bound (within_bound), returns the elements outside it and
 * adds those whose bits differ from the chain to *differ. */
static int check_case(int m, int n, int k, layout L, float beta, uint64_t seed, bool exact,
                      int *differ) {
    ag_rng r;
    ag_rng_seed(&r, seed);
    size_t na = (size_t)m * k + 1, nb = (size_t)k * n + 1, nc = (size_t)m * n;
    float *a = malloc(sizeof *a * na), *b = malloc(sizeof *b * nb), *c = malloc(sizeof *c * nc),
          *c0 = malloc(sizeof *c0 * nc);
    fill(a, na, &r);
    fill(b, nb, &r);
    fill(c0, nc, &r);
    if (nc > 2) c0[1] = 0x1p-130f; /* a denormal: read as zero */
    for (size_t i = 0; i < nc; i++) c[i] = beta ? c0[i] : NAN;
    ptrdiff_t rsa = L.at ? 1 : k, csa = L.at ? m : 1, rsb = L.bt ? 1 : n, csb = L.bt ? k : 1;
    ptrdiff_t rsc = L.cc ? 1 : n, csc = L.cc ? m : 1;
    int bad = ag_gemm_bf16(m, n, k, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) != 0;
    float (*ref)(int, const float *, ptrdiff_t, const float *, ptrdiff_t, float) =
        amx_chain() ? chain_amx : chain;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            ptrdiff_t o = i * rsc + j * csc;
            float start = beta ? c0[o] : 0,
                  want = ref(k, a + i * rsa, csa, b + j * csb, rsb, start);
            double exact_sum = want; /* the float64 sum only where the bound is the test */
            bool off = exact ? bits(want) != bits(c[o])
                             : !within_bound(c[o], k, a + i * rsa, csa, b + j * csb, rsb,
                                             k ? flush(start) : start, &exact_sum);
            if (!exact) *differ += bits(want) != bits(c[o]);
            if (off && bad++ < 3)
                TG_FAIL("%s: %dx%dx%d at%d bt%d cc%d beta %g: C(%d, %d) = %a, expected %a",
                        ag_gemm_bf16_kernel(), m, n, k, L.at, L.bt, L.cc, (double)beta, i, j,
                        (double)c[o], exact_sum);
        }
    free(a), free(b), free(c), free(c0);
    return bad;
}

static const int SHAPES[][3] = {
    {1, 1, 1}, {3, 5, 7},   {12, 32, 256}, {13, 33, 257}, {97, 65, 513},
    {5, 3, 0}, {25, 70, 2}, {200, 40, 31}, {7, 1100, 9},  {96, 64, 512},
};

/* Every shape, layout and beta on the kernel in use; returns the elements whose bits differ
 * from its chain (asserted zero when exact, else only the float64 bound is asserted). */
static int run_shapes(bool exact) {
    int bad = 0, differ = 0;
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++)
        for (int l = 0; l < 8; l++)
            for (int beta = 0; beta < 2; beta++)
                bad += check_case(SHAPES[s][0], SHAPES[s][1], SHAPES[s][2],
                                  (layout){l & 1, l & 2, l & 4}, (float)beta, 100 * s + l, exact,
                                  &differ);
    CU_ASSERT_EQUAL(bad, 0);
    return exact ? bad : differ;
}

static const char *const KERNEL_NAMES[] = {"emulated", "avx512bf16", "amx-emulated", "amx"};

/* Runs the kernel named `name` (its first word) through run_shapes; false when this CPU cannot
 * run it. The kernel in use is restored. */
static bool on_kernel(const char *name, const char *full, bool exact, int *differ) {
    const char *was = ag_gemm_bf16_kernel();
    if (ag_bf16_set_kernel(name)) return false;
    CU_ASSERT_STRING_EQUAL(ag_gemm_bf16_kernel(), full);
    *differ = run_shapes(exact);
    CU_ASSERT_EQUAL(ag_bf16_set_kernel(was), 0);
    return true;
}

static void test_emulated_is_the_chain(void) {
    int differ;
    CU_ASSERT(on_kernel("emulated", "emulated 12x32", true, &differ));
}

static void test_amx_emulated_is_the_chain(void) {
    int differ;
    CU_ASSERT(on_kernel("amx-emulated", "amx-emulated 32x32", true, &differ));
}

static void test_native_is_the_chain(void) {
    int differ;
    if (!on_kernel("avx512bf16", "avx512bf16 12x32", true, &differ))
        printf("(no AVX512-BF16 on this CPU: its kernel not run) ");
}

static void test_amx_native(void) {
    int differ;
    if (!on_kernel("amx", "amx 32x32", false, &differ)) {
        printf("(no AMX-BF16 tiles for this process: the AMX kernel not run) ");
        return;
    }
    printf("(AMX: within the float64 bound; %d elements of the cases differ in bits from the "
           "SDM's tdpbf16ps chain) ",
           differ);
}

/* A (m x k) and B (k x n) of fill's values from seed; the caller frees them. */
static void operands(int m, int n, int k, uint64_t seed, float **a, float **b) {
    ag_rng r;
    ag_rng_seed(&r, seed);
    *a = malloc(sizeof **a * (size_t)m * k);
    *b = malloc(sizeof **b * (size_t)k * n);
    fill(*a, (size_t)m * k, &r);
    fill(*b, (size_t)k * n, &r);
}

/* Within the bound of a float64 product of the same rounded inputs (within_bound), on every
 * kernel this CPU runs. */
static void test_float64_bound(void) {
    enum { M = 37, N = 45, K = 700 };
    float *a, *b, *c = malloc(sizeof *c * M * N);
    operands(M, N, K, 3, &a, &b);
    const char *was = ag_gemm_bf16_kernel();
    for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof *KERNEL_NAMES; kn++) {
        if (ag_bf16_set_kernel(KERNEL_NAMES[kn])) continue;
        CU_ASSERT_EQUAL_FATAL(ag_gemm_bf16(M, N, K, a, K, 1, b, N, 1, 0, c, N, 1), 0);
        int bad = 0;
        double sum;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                bad += !within_bound(c[i * N + j], K, a + i * K, 1, b + j, N, 0, &sum);
        if (bad) TG_FAIL("%s: %d of %d elements outside the bound", KERNEL_NAMES[kn], bad, M * N);
    }
    CU_ASSERT_EQUAL(ag_bf16_set_kernel(was), 0);
    free(a), free(b), free(c);
}

enum { TM = 300, TN = 200, TK = 300 };

/* Task i of test_threads_same_bits: the product into c[i] (blocks that the other task's thread
 * may take once its own product is done). */
typedef struct product_tasks {
    const float *a, *b;
    float *c[2];
} product_tasks;

static int product_task(void *ctx, int i, int thread) {
    product_tasks *p = ctx;
    (void)thread;
    return ag_gemm_bf16(TM, TN, TK, p->a, TK, 1, p->b, 1, TK, 0, p->c[i], TN, 1);
}

/* One thread, two, and two products at once in two tasks: the same bits. */
static void test_threads_same_bits(void) {
    const size_t bytes = sizeof(float) * TM * TN;
    float *a, *b, *c1 = malloc(bytes), *c2 = malloc(bytes), *t0 = malloc(bytes),
                  *t1 = malloc(bytes);
    operands(TM, TN, TK, 5, &a, &b);
    const char *was = ag_gemm_bf16_kernel();
    for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof *KERNEL_NAMES; kn++) {
        if (ag_bf16_set_kernel(KERNEL_NAMES[kn])) continue;
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(1), 0);
        ag_gemm_bf16(TM, TN, TK, a, TK, 1, b, 1, TK, 0, c1, TN, 1);
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
        ag_gemm_bf16(TM, TN, TK, a, TK, 1, b, 1, TK, 0, c2, TN, 1);
        if (memcmp(c1, c2, bytes)) TG_FAIL("%s: 1 and 2 threads differ", KERNEL_NAMES[kn]);
        product_tasks p = {a, b, {t0, t1}};
        CU_ASSERT_EQUAL(ag_run_tasks(2, product_task, &p, NULL), 0);
        if (memcmp(c1, t0, bytes) || memcmp(c1, t1, bytes))
            TG_FAIL("%s: a product inside a task differs", KERNEL_NAMES[kn]);
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    CU_ASSERT_EQUAL(ag_bf16_set_kernel(was), 0);
    free(a), free(b), free(c1), free(c2), free(t0), free(t1);
}

/* ag_bf16_faster per kernel: AMX's tiles, AVX512-BF16 at full rate (AMD's cores), never the
 * emulations; "auto" and the CPU's best kernel agree with it. */
static void test_faster(void) {
    const char *was = ag_gemm_bf16_kernel();
    const bool full_rate = ag_cpu_has(AG_CPU_BF16_DOT_FULL_RATE);
    for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof *KERNEL_NAMES; kn++) {
        if (ag_bf16_set_kernel(KERNEL_NAMES[kn])) continue;
        const bool amx = !strcmp(KERNEL_NAMES[kn], "amx");
        const bool avx = !strcmp(KERNEL_NAMES[kn], "avx512bf16");
        CU_ASSERT_EQUAL(ag_bf16_faster(), amx || (avx && full_rate));
    }
    CU_ASSERT_EQUAL(ag_bf16_set_kernel("auto"), 0);
    printf("(the CPU's best, %s: bf16 %s than float32) ", ag_gemm_bf16_kernel(),
           ag_bf16_faster() ? "faster" : "slower");
    CU_ASSERT_EQUAL(ag_bf16_faster(), ag_cpu_has(AG_CPU_AMX_BF16) || full_rate);
    CU_ASSERT_EQUAL(ag_bf16_set_kernel(was), 0);
}

static void test_bad_input(void) {
    float x[4] = {1, 2, 3, 4}, c[4] = {9, 9, 9, 9};
    TG_EXPECT_ERROR(ag_gemm_bf16(2, 2, 1, x, 1, 1, x, 2, 1, 0.5f, c, 2, 1), "ag_gemm_bf16",
                    "beta 0.5", "beta 0 or 1");
    TG_EXPECT_ERROR(ag_gemm_bf16(-1, 2, 1, x, 1, 1, x, 2, 1, 0, c, 2, 1), "ag_gemm_bf16", "m -1");
    CU_ASSERT_EQUAL(c[0], 9); /* untouched */
    TG_EXPECT_ERROR(ag_set_precision((ag_precision)7), "ag_set_precision", "unknown precision 7");
    const char *was = ag_gemm_bf16_kernel();
    TG_EXPECT_ERROR(ag_bf16_set_kernel("amx512"), "ag_bf16_set_kernel", "unknown kernel 'amx512'",
                    "auto, avx512bf16, emulated, amx or amx-emulated");
    TG_EXPECT_ERROR(ag_bf16_set_kernel("emulated 12"), "unknown kernel 'emulated 12'");
    TG_EXPECT_ERROR(ag_bf16_set_kernel(NULL), "ag_bf16_set_kernel", "no name");
    CU_ASSERT_STRING_EQUAL(ag_gemm_bf16_kernel(), was); /* the one in use stays */
    if (ag_bf16_set_kernel("amx")) {
        TG_EXPECT_ERROR(ag_bf16_set_kernel("amx"), "ag_bf16_set_kernel", "'amx' needs AMX-BF16");
        CU_ASSERT_STRING_EQUAL(ag_gemm_bf16_kernel(), was);
    }
    CU_ASSERT_EQUAL(ag_bf16_set_kernel("emulated 12x32"), 0); /* the whole name too */
    CU_ASSERT_STRING_EQUAL(ag_gemm_bf16_kernel(), "emulated 12x32");
    CU_ASSERT_EQUAL(ag_bf16_set_kernel("auto"), 0);
    CU_ASSERT_EQUAL(ag_bf16_set_kernel(was), 0);
    CU_ASSERT_EQUAL(ag_get_precision(), AG_FP32);
}

static CU_TestInfo tests[] = {
    {"bf16 rounding: ties to even, NaN, inf, denormals, every bf16", test_round},
    {"bf16 rounding: the CPU's vcvtneps2bf16 bits", test_round_matches_cpu},
    {"one step of vdpbf16ps in C: FMA, DAZ, FTZ, overflow", test_fma_step},
    {"one step of vdpbf16ps in C: the CPU's bits", test_fma_matches_cpu},
    {"emulated kernel: the chain's bits over shapes, layouts, beta", test_emulated_is_the_chain},
    {"AVX512-BF16 kernel: the chain's bits over shapes, layouts, beta", test_native_is_the_chain},
    {"emulated AMX kernel: tdpbf16ps's chain, its bits", test_amx_emulated_is_the_chain},
    {"AMX kernel: the float64 bound over shapes, layouts, beta", test_amx_native},
    {"within the float64 bound", test_float64_bound},
    {"1 and 2 threads, two tasks: the same bits", test_threads_same_bits},
    {"bf16 faster than float32: AMX, full-rate AVX512-BF16", test_faster},
    {"bad beta, size, precision reported", test_bad_input},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("gemm_bf16", tests); }

#else /* the float64 engine */

static void test_float64_refuses(void) {
    CU_ASSERT_EQUAL(ag_get_precision(), AG_FP32);
    TG_EXPECT_ERROR(ag_set_precision(AG_BF16), "ag_set_precision", "float32 engine");
    CU_ASSERT_EQUAL(ag_get_precision(), AG_FP32);
    CU_ASSERT_EQUAL(ag_set_precision(AG_FP32), 0);
}

static CU_TestInfo tests[] = {
    {"the float64 engine refuses AG_BF16", test_float64_refuses},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("gemm_bf16 (float64)", tests); }

#endif