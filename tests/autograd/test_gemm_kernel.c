/* test_gemm_kernel.c -- the engine's AVX-512 GEMM micro-kernel (autograd/gemm_kernel.c) against
 * BLIS's own kernels.
 *
 * 80 products through ag_gemm, large enough for BLIS's blocked path (every side at least 201),
 * with full and edge tiles both ways, one or more k blocks, transposed operands, a column-major
 * C, alpha != 1 and beta 0 (C full of NaN: it must not be read), 1 or another value, are made
 * twice: here, with the kernel the engine chose, and in a child process with
 * TG_GEMM_KERNEL=blis (BLIS's own kernels). Beta 0 or 1 must give the same bits (the kernel
 * keeps BLIS's order of operations), another beta agree within 2 ulps. On a CPU without
 * AVX-512 both runs use BLIS's kernels; the test prints which kernel ran. Then products from a
 * B packed once (ag_pack_b) against ag_gemm. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "autograd/ag.h"
#include "autograd/ag_op.h"
#include "tests/tg_test.h"

#include <blis.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

/* The cases: every combination of these sizes (BLIS sends a product with a side below 201 to
 * its kernels for small sizes, never to the micro-kernel, so the sizes start there; m and n
 * around multiples of 24 and 16 give edge tiles both ways, k around KC = 256 one or more
 * k blocks), each with its own layout, alpha and beta, cycled through by case number. */
static const int MS[] = {201, 216, 239, 512, 1023};
static const int NS[] = {201, 208, 257, 300};
static const int KS[] = {201, 256, 257, 600};
#define NM (sizeof MS / sizeof *MS)
#define NN (sizeof NS / sizeof *NS)
#define NK (sizeof KS / sizeof *KS)
#define NCASES (NM * NN * NK)

typedef struct gcase {
    int m, n, k;
    bool ta, tb, cc; /* A, B transposed (column-major) views; C column-major */
    float alpha, beta;
} gcase;

static gcase case_of(size_t v) {
    gcase g = {MS[v / (NN * NK)],
               NS[v / NK % NN],
               KS[v % NK],
               v & 1,
               (v >> 1) & 1,
               (v % 7) == 3,
               (v % 5 == 4) ? 0.375f : 1.0f,
               0.0f};
    g.beta = v % 3 == 0 ? 0.0f : v % 3 == 1 ? 1.0f : (v % 2 ? 0.5f : -2.0f);
    return g;
}

static size_t out_size(void) {
    size_t total = 0;
    for (size_t v = 0; v < NCASES; v++) total += (size_t)case_of(v).m * case_of(v).n;
    return total;
}

/* Every case through ag_gemm, its results one after another in out. C starts as NaN when
 * beta = 0 (it must not be read). Returns false when some result is not finite. */
static bool run_cases(float *out) {
    bool finite = true;
    for (size_t v = 0; v < NCASES; v++) {
        gcase g = case_of(v);
        unsigned seed = (unsigned)v + 1;
        size_t na = (size_t)g.m * g.k, nb = (size_t)g.k * g.n, nc = (size_t)g.m * g.n;
        float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
        if (!a || !b) abort();
        for (size_t i = 0; i < na; i++) a[i] = frand(&seed);
        for (size_t i = 0; i < nb; i++) b[i] = frand(&seed);
        for (size_t i = 0; i < nc; i++) out[i] = g.beta == 0 ? NAN : frand(&seed);
        ag_gemm(g.m, g.n, g.k, g.alpha, a, g.ta ? 1 : g.k, g.ta ? g.m : 1, b, g.tb ? 1 : g.n,
                g.tb ? g.k : 1, g.beta, out, g.cc ? 1 : g.n, g.cc ? g.m : 1);
        for (size_t i = 0; i < nc; i++) finite = finite && isfinite(out[i]);
        out += nc;
        free(a);
        free(b);
    }
    return finite;
}

/* The cases with BLIS's own kernels, in a child process that sets TG_GEMM_KERNEL=blis before
 * its first product (the choice is made once per process: nothing in this process may call
 * ag_gemm before). Returns the child's results in shared memory (munmap by the caller). */
static float *run_cases_blis(size_t total) {
    float *shared = mmap(NULL, total * sizeof(float), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(shared != MAP_FAILED);
    fflush(stdout);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        setenv("TG_GEMM_KERNEL", "blis", 1);
        if (strcmp(ag_gemm_kernel(), "blis") != 0) _exit(2);
        _exit(run_cases(shared) ? 0 : 3);
    }
    int status = 0;
    CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return shared;
}

static void test_against_blis(void) {
    size_t total = out_size();
    float *ref = run_cases_blis(total), *mine = malloc(total * sizeof *mine);
    CU_ASSERT_FATAL(mine != NULL);
    const char *kernel = ag_gemm_kernel();
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f");
    printf("\n    micro-kernel: %s (CPU %s AVX-512F); %zu cases", kernel, avx512 ? "has" : "lacks",
           (size_t)NCASES);
    if (!avx512) CU_ASSERT_STRING_EQUAL(kernel, "blis");
    CU_ASSERT(run_cases(mine));
    const float *r = ref, *x = mine;
    int differ = 0;
    for (size_t v = 0; v < NCASES; v++) {
        gcase g = case_of(v);
        size_t nc = (size_t)g.m * g.n;
        double worst = 0; /* ulps of the reference value */
        for (size_t i = 0; i < nc; i++) {
            if (x[i] == r[i]) continue;
            double ulp = nextafterf(fabsf(r[i]), INFINITY) - fabsf(r[i]);
            double d = fabs((double)x[i] - r[i]) / ulp;
            if (!(d <= worst)) worst = d;
        }
        /* beta 0 or 1: the same bits. Another beta: beta C + alpha AB rounded once in every
         * tile here, twice in BLIS's edge tiles: at most an ulp or two of the sum. */
        bool ok = (g.beta == 0 || g.beta == 1) ? worst == 0 : worst <= 2;
        if (!ok) {
            differ++;
            printf("\n    m %d n %d k %d ta %d tb %d cc %d alpha %g beta %g: %g ulp", g.m, g.n, g.k,
                   g.ta, g.tb, g.cc, g.alpha, g.beta, worst);
        }
        r += nc;
        x += nc;
    }
    CU_ASSERT(differ == 0);
    munmap(ref, total * sizeof(float));
    free(mine);
}

/* ---- B packed once (ag_pack_b, ag_gemm_packed, ag_linear_packed) ----
 * Against ag_gemm in this process, bit for bit: C = A B (beta 0) and C = bias + A B (C preset to
 * the bias rows, beta 1), B a transposed weight (x W^T, as Linear) or row-major, A row- or
 * column-major; sizes through one or more k blocks (partial last ones), edge tiles both ways,
 * more than 2 x 512 rows (shared between two threads), and sizes below BLIS's thresholds, where
 * ag_gemm_packed calls ag_gemm itself. */
static void packed_case(int m, int n, int k, bool w_layout, bool ta, bool bias) {
    unsigned seed = (unsigned)(m * 131 + n * 7 + k + w_layout * 3 + ta * 5 + bias);
    float *a = malloc(sizeof *a * (size_t)m * k), *b = malloc(sizeof *b * (size_t)k * n);
    float *bv = malloc(sizeof *bv * (size_t)n), *c1 = malloc(sizeof *c1 * (size_t)m * n),
          *c2 = malloc(sizeof *c2 * (size_t)m * n);
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = frand(&seed);
    for (size_t i = 0; i < (size_t)k * n; i++) b[i] = frand(&seed);
    for (int j = 0; j < n; j++) bv[j] = frand(&seed);
    ptrdiff_t rsa = ta ? 1 : k, csa = ta ? m : 1;
    ptrdiff_t rsb = w_layout ? 1 : n, csb = w_layout ? k : 1; /* W (n, k) read as W^T */
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) c1[(size_t)i * n + j] = bias ? bv[j] : NAN;
    ag_gemm(m, n, k, 1, a, rsa, csa, b, rsb, csb, bias ? 1 : 0, c1, n, 1);
    for (size_t i = 0; i < (size_t)m * n; i++) c2[i] = NAN;
    ag_packed_b *pb = ag_pack_b(k, n, b, rsb, csb);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pb);
    CU_ASSERT_EQUAL(ag_packed_b_rows(pb), k);
    CU_ASSERT_EQUAL(ag_packed_b_cols(pb), n);
    CU_ASSERT_EQUAL(ag_gemm_packed(m, a, rsa, csa, pb, bias ? bv : NULL, c2, n), 0);
    bool same = memcmp(c1, c2, sizeof *c1 * (size_t)m * n) == 0;
    CU_ASSERT(same);
    if (!same)
        fprintf(stderr, "\n  packed %d x %d x %d (W layout %d, A transposed %d, bias %d) differs\n",
                m, n, k, w_layout, ta, bias);
    ag_packed_b_free(pb);
    free(a), free(b), free(bv), free(c1), free(c2);
}

static void test_packed(void) {
    static const int sizes[][3] = {{201, 201, 201}, {250, 17, 256},   {256, 1000, 256},
                                   {239, 257, 600}, {300, 300, 1024}, {1100, 250, 260},
                                   {100, 300, 300}, {5, 40, 8},       {256, 208, 200}};
    for (int threads = 1; threads <= 2; threads++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(threads), 0);
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            for (int v = 0; v < 8; v++)
                packed_case(sizes[i][0], sizes[i][1], sizes[i][2], v & 1, v & 2, v & 4);
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    printf("\n  packed products: %s (from packed panels for 201 x 201 x 201: %s)\n",
           ag_gemm_kernel(), ag_gemm_packs(201, 201, 201) ? "yes" : "no");
}

/* ag_linear_packed: ag_linear's bits, inference only, shapes checked. */
static char captured[512];
static void capture(const char *msg, void *user) {
    (void)user;
    snprintf(captured, sizeof captured, "%s", msg);
}

static void test_linear_packed(void) {
    enum { R = 260, IN = 300, OUT = 270 };
    unsigned seed = 9;
    ag_tensor *x = ag_leaf_new(AG_SHAPE(2, R / 2, IN), false),
              *w = ag_leaf_new(AG_SHAPE(OUT, IN), true), *bias = ag_leaf_new(AG_SHAPE(OUT), true);
    ag_tensor *xs[3] = {x, w, bias};
    for (int l = 0; l < 3; l++)
        for (ptrdiff_t i = 0; i < xs[l]->numel; i++) xs[l]->data[i] = frand(&seed);
    ag_packed_b *wt = ag_pack_b(IN, OUT, w->data, 1, IN);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wt);
    ag_tape *t = ag_tape_new();
    ag_tape_set_recording(t, false);
    ag_tensor *y1 = ag_linear(t, x, w, bias), *y2 = ag_linear_packed(t, x, wt, bias);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    CU_ASSERT_EQUAL(y2->ndim, 3);
    CU_ASSERT_EQUAL(y2->shape[2], OUT);
    CU_ASSERT_EQUAL(memcmp(y1->data, y2->data, sizeof *y1->data * (size_t)y1->numel), 0);
    ag_set_error_handler(capture, NULL);
    ag_tensor *bad = ag_leaf_new(AG_SHAPE(4, IN + 1), false);
    CU_ASSERT_PTR_NULL(ag_linear_packed(t, bad, wt, bias));
    CU_ASSERT_PTR_NOT_NULL(strstr(captured, "linear_packed: input [4, 301]"));
    CU_ASSERT_PTR_NULL(ag_linear_packed(t, x, wt, w));
    CU_ASSERT_PTR_NOT_NULL(strstr(captured, "bias [270, 300]"));
    ag_tape_reset(t);
    ag_tape_set_recording(t, true); /* the bias wants a gradient: refused */
    CU_ASSERT_PTR_NULL(ag_linear_packed(t, x, wt, bias));
    CU_ASSERT_PTR_NOT_NULL(strstr(captured, "inference only"));
    ag_set_error_handler(NULL, NULL);
    ag_leaf_free(bad);
    ag_packed_b_free(wt);
    for (int l = 0; l < 3; l++) ag_leaf_free(xs[l]);
    ag_tape_free(t);
}

static CU_TestInfo tests[] = {{"the same results as BLIS's own kernels", test_against_blis},
                              {"B packed once: ag_gemm's bits", test_packed},
                              {"ag_linear_packed: ag_linear's bits; errors", test_linear_packed},
                              CU_TEST_INFO_NULL};
static CU_SuiteInfo suites[] = {{"gemm_kernel", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return tg_test_run(suites); }
