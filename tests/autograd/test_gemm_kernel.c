/* test_gemm_kernel.c -- ag_gemm against BLIS's own kernels and against float64, where the
 * engine's AVX-512 GEMM micro-kernel (autograd/gemm_kernel.c) runs and where it does not.
 *
 * BLIS computes a product in one of two ways: its blocked code, which packs the operands and
 * calls the micro-kernel (the engine's where it chose its own), or, with a side below its "sup"
 * thresholds (m < MT, n < NT or k < KT; m and n swapped for a C not stored by rows), its code
 * for small sizes, with its own kernels. The thresholds belong to BLIS's configuration: haswell
 * (Intel) 201, 201, 201; zen3 (AMD Zen 3 and Zen 4) 512, 200, 240; ag_gemm holds m to NT and
 * every side to at least 200 (ops_matmul.c: on zen3 blocked from 200 x 200 x 240). 13 sizes,
 * each in the 8 layouts (A, B transposed or not; C row- or column-major), with beta 0 (C full of
 * NaN: it must not be read), 1 or another value and alpha 1 or another, are picked so that on
 * either configuration both ways run, the blocked one with every layout and every kind of beta:
 * full and edge tiles both ways, one to three k blocks of KC = 256, sizes on each side of the
 * thresholds.
 *
 * Every case is made twice: here, with the kernel the engine chose, and in a child process with
 * TG_GEMM_KERNEL=blis (BLIS's own kernels and context throughout). What holds, per case:
 *   - in BLIS's blocked code with the engine's kernel: BLIS's bits for beta 0 or 1, within
 *     2 ulp for another beta;
 *   - in its code for small sizes: BLIS's bits when that code takes the same one of its two
 *     algorithms with the engine's context as with BLIS's (it reads MR from the context: 24
 *     against 6; ops_matmul.c); otherwise the k sum is split differently: no claim on the bits;
 *   - without the engine's kernel: BLIS's bits everywhere;
 *   - everywhere: within the rounding bound of a float64 product, on a sample of elements.
 * The test prints BLIS's configuration and thresholds, the kernel and how many cases ran each
 * way (zen3: 64 with the engine's kernel, haswell 72); with the engine's kernel in use at
 * least 8 must run it. On a CPU without AVX-512, or with TG_GEMM_KERNEL=blis set, both runs use
 * BLIS's kernels; BLIS_ARCH_TYPE=3 forces BLIS's haswell configuration. Then products from a B
 * packed once (ag_pack_b) against ag_gemm. */
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

/* m x n x k. Blocked on both configurations: the first four (zen3's KT among them), 300 x 1100,
 * 511 x 208 (MT - 1 on zen3), 239 x 257; blocked on zen3 only: 512 x 200 (its NT; with a
 * column-major C, BLIS sees 200 x 512); blocked on haswell only: 1023 x 257 x 201 and
 * 201 x 201 x 201 (haswell's thresholds; k below zen3's KT); small on both: k = 100, m = 100,
 * m = 199 (one below ag_gemm's least side). */
static const int SIZES[][3] = {{512, 520, 240}, {1023, 600, 257}, {600, 512, 600},  {528, 528, 256},
                               {512, 200, 256}, {300, 1100, 260}, {1023, 257, 201}, {511, 208, 600},
                               {239, 257, 257}, {201, 201, 201},  {201, 201, 100},  {100, 300, 300},
                               {199, 600, 300}};
#define NSIZES (sizeof SIZES / sizeof *SIZES)
#define NCASES (NSIZES * 8)

typedef struct gcase {
    int m, n, k;
    bool ta, tb, cc; /* A, B transposed (column-major) views; C column-major */
    float alpha, beta;
} gcase;

/* Case v: size v / 8 in layout v % 8; beta 0, 1 or another by (size + layout) % 3, so every
 * layout meets every kind of beta over the sizes. */
static gcase case_of(size_t v) {
    size_t i = v / 8, l = v % 8;
    gcase g = {SIZES[i][0],
               SIZES[i][1],
               SIZES[i][2],
               l & 1,
               (l >> 1) & 1,
               (l >> 2) & 1,
               (i * 3 + l) % 5 == 2 ? 0.375f : 1.0f,
               0.0f};
    size_t b = (i + l) % 3;
    g.beta = b == 0 ? 0.0f : b == 1 ? 1.0f : ((i + l) % 2 ? 0.5f : -2.0f);
    return g;
}

static size_t out_size(void) {
    size_t total = 0;
    for (size_t v = 0; v < NCASES; v++) total += (size_t)case_of(v).m * case_of(v).n;
    return total;
}

/* Case v through ag_gemm into out (m x n in C's layout). C starts as NaN when beta = 0, else
 * random; its start is kept in c0 when c0 is not NULL, A and B in *a, *b (the caller frees them)
 * when a is not NULL. Returns false when some result is not finite. */
static bool run_case(size_t v, float *out, float *c0, float **a_out, float **b_out) {
    gcase g = case_of(v);
    unsigned seed = (unsigned)v + 1;
    size_t na = (size_t)g.m * g.k, nb = (size_t)g.k * g.n, nc = (size_t)g.m * g.n;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    if (!a || !b) abort();
    for (size_t i = 0; i < na; i++) a[i] = frand(&seed);
    for (size_t i = 0; i < nb; i++) b[i] = frand(&seed);
    for (size_t i = 0; i < nc; i++) out[i] = g.beta == 0 ? NAN : frand(&seed);
    if (c0) memcpy(c0, out, nc * sizeof *c0);
    ag_gemm(g.m, g.n, g.k, g.alpha, a, g.ta ? 1 : g.k, g.ta ? g.m : 1, b, g.tb ? 1 : g.n,
            g.tb ? g.k : 1, g.beta, out, g.cc ? 1 : g.n, g.cc ? g.m : 1);
    bool finite = true;
    for (size_t i = 0; i < nc; i++) finite = finite && isfinite(out[i]);
    if (a_out) {
        *a_out = a;
        *b_out = b;
    } else {
        free(a);
        free(b);
    }
    return finite;
}

/* The cases with BLIS's own kernels, in a child process that sets TG_GEMM_KERNEL=blis before
 * its first product (the choice is made once per process: nothing in this process may call
 * ag_gemm, ag_gemm_kernel or ag_gemm_packs before). Returns the child's results one after
 * another in shared memory (munmap by the caller). */
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
        bool finite = true;
        for (size_t v = 0, off = 0; v < NCASES; off += (size_t)case_of(v).m * case_of(v).n, v++)
            finite = run_case(v, shared + off, NULL, NULL, NULL) && finite;
        _exit(finite ? 0 : 3);
    }
    int status = 0;
    CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return shared;
}

/* Whether ag_gemm runs case g through BLIS's blocked code: BLIS 0.9's test (bli_gemmsup), the
 * thresholds of cntx, m and n swapped for a column-major C (the micro-kernels prefer rows), or
 * m and n at least max(200, NT) and k at least max(200, KT) (ag_gemm turns BLIS's code for small
 * sizes off there). */
static bool blis_blocked(const gcase *g, cntx_t *cntx) {
    int m = g->cc ? g->n : g->m, n = g->cc ? g->m : g->n;
    int mt = (int)bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_MT, cntx),
        nt = (int)bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_NT, cntx),
        kt = (int)bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_KT, cntx);
    if (m >= mt && n >= nt && g->k >= kt) return true;
    nt = nt > 200 ? nt : 200;
    kt = kt > 200 ? kt : 200;
    return m >= nt && n >= nt && g->k >= kt;
}

/* Whether BLIS's code for small sizes takes the same algorithm for case g with the engine's
 * context as with its own. It chooses (bli_gemmsup_int, 0.9) the block-panel one when the number
 * of MR-row panels of C is at least the number of NR-column ones, MR and NR read from the
 * context (the engine's MR 24, BLIS's 6 or so; NR 16 in both), m and n swapped unless at least
 * two of C, A, B are stored by rows (the small-size kernels prefer rows). A transposed B reaches
 * BLIS either way (ag_gemm copies it row-major when small): both are tried. */
static bool same_algorithm(const gcase *g, cntx_t *cntx) {
    const int mr = (int)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MR, cntx),
              nr = (int)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NR, cntx);
    const int rows = !g->cc + !g->ta;
    for (int b_rows = g->tb ? 0 : 1; b_rows <= 1; b_rows++) {
        bool primary = rows + b_rows >= 2;
        int m = primary ? g->m : g->n, n = primary ? g->n : g->m;
        if ((m / 24 >= n / nr) != (m / mr >= n / nr)) return false;
    }
    return true;
}

/* The worst ulps (of BLIS's value) between x and ref, m x n. */
static double worst_ulps(const float *x, const float *ref, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (x[i] == ref[i]) continue;
        double ulp = nextafterf(fabsf(ref[i]), INFINITY) - fabsf(ref[i]);
        double d = fabs((double)x[i] - ref[i]) / ulp;
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* x against the product in float64, on every 7th row and 5th column and the last ones: the
 * worst |x - exact| / bound, bound = (k + 3) u (|alpha| sum_p |a_ip b_pj| + |beta c_ij|),
 * u = 2^-24: a k-term sum of products, its product by alpha and the addition of beta C, each
 * operation rounded once. At most 1 when x is right. */
static double worst_vs_f64(const gcase *g, const float *a, const float *b, const float *c0,
                           const float *x) {
    ptrdiff_t rsa = g->ta ? 1 : g->k, csa = g->ta ? g->m : 1, rsb = g->tb ? 1 : g->n,
              csb = g->tb ? g->k : 1, rsc = g->cc ? 1 : g->n, csc = g->cc ? g->m : 1;
    double worst = 0;
    for (int i = 0; i < g->m; i = i + 7 < g->m || i == g->m - 1 ? i + 7 : g->m - 1)
        for (int j = 0; j < g->n; j = j + 5 < g->n || j == g->n - 1 ? j + 5 : g->n - 1) {
            double dot = 0, mag = 0;
            for (int p = 0; p < g->k; p++) {
                double t = (double)a[i * rsa + p * csa] * b[p * rsb + j * csb];
                dot += t;
                mag += fabs(t);
            }
            double c = g->beta == 0 ? 0 : c0[i * rsc + j * csc];
            double exact = (double)g->alpha * dot + (double)g->beta * c;
            double bound = (g->k + 3) * 0x1p-24 * (fabs(g->alpha) * mag + fabs(g->beta * c));
            double e = fabs((double)x[i * rsc + j * csc] - exact) / bound;
            if (!(e <= worst)) worst = e;
        }
    return worst;
}

static void test_against_blis(void) {
    size_t total = out_size();
    float *ref = run_cases_blis(total);
    const char *kernel = ag_gemm_kernel();
    const bool own = strcmp(kernel, "blis") != 0;
    cntx_t *cntx = bli_gks_query_cntx();
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f");
    printf("\n    BLIS configuration %s (MT %d, NT %d, KT %d, KC %d); micro-kernel: %s (CPU %s "
           "AVX-512F)",
           bli_arch_string(bli_arch_query_id()),
           (int)bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_MT, cntx),
           (int)bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_NT, cntx),
           (int)bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_KT, cntx),
           (int)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_KC, cntx), kernel,
           avx512 ? "has" : "lacks");
    if (!avx512) CU_ASSERT_FALSE(own);
    const float *r = ref;
    int differ = 0, blocked = 0, ran_kernel = 0, other_alg = 0, other_bits = 0;
    double worst_f64 = 0;
    for (size_t v = 0; v < NCASES; v++) {
        gcase g = case_of(v);
        size_t nc = (size_t)g.m * g.n;
        float *x = malloc(nc * sizeof *x), *c0 = malloc(nc * sizeof *c0), *a, *b;
        CU_ASSERT_FATAL(x && c0);
        CU_ASSERT(run_case(v, x, c0, &a, &b));
        const bool in_blocked = blis_blocked(&g, cntx), kern = own && in_blocked;
        const bool other = own && !kern && !same_algorithm(&g, cntx);
        blocked += in_blocked;
        ran_kernel += kern;
        other_alg += other;
        if (!g.cc) CU_ASSERT_EQUAL(ag_gemm_packs(g.m, g.n, g.k), kern);
        /* The engine's kernel: BLIS's bits for beta 0 or 1; for another beta it rounds beta C +
         * alpha AB once in every tile, BLIS's edge tiles twice: an ulp or two of the sum. BLIS's
         * code for small sizes: its bits when it takes the same algorithm, else only right. */
        double worst = worst_ulps(x, r, nc), e = worst_vs_f64(&g, a, b, c0, x);
        bool ok = other || (kern && g.beta != 0 && g.beta != 1 ? worst <= 2 : worst == 0);
        other_bits += other && worst != 0;
        if (!ok || !(e <= 1)) {
            differ++;
            printf("\n    m %d n %d k %d ta %d tb %d cc %d alpha %g beta %g (%s): %g ulp from "
                   "BLIS's, %.3g of the float64 bound",
                   g.m, g.n, g.k, g.ta, g.tb, g.cc, g.alpha, g.beta,
                   kern ? "engine's kernel" : "BLIS's small-size code", worst, e);
        }
        if (e > worst_f64) worst_f64 = e;
        r += nc;
        free(x), free(c0), free(a), free(b);
    }
    printf("\n    %zu cases: %d in BLIS's blocked code (%d with the engine's kernel), %d in its "
           "code for small sizes, %d of them with another algorithm than BLIS's own context picks "
           "(%d not BLIS's bits); worst error %.3g of the float64 bound",
           (size_t)NCASES, blocked, ran_kernel, (int)NCASES - blocked, other_alg, other_bits,
           worst_f64);
    CU_ASSERT(differ == 0);
    if (own) CU_ASSERT(ran_kernel >= 8); /* 600 x 512 x 600 at least, blocked everywhere */
    munmap(ref, total * sizeof(float));
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
    /* Runs from panels: on haswell those with every side >= 201 (m per 512-row block); on zen3
     * those with m, n >= 200 and k >= 240 (511 x 200 x 240 and 512 x 200 x 240 at the edge), not
     * 256 x 208 x 200 nor 201 x 201 x 201 (k below its KT). */
    static const int sizes[][3] = {
        {201, 201, 201},  {250, 17, 256},   {256, 1000, 256}, {239, 257, 600}, {300, 300, 1024},
        {1100, 250, 260}, {100, 300, 300},  {5, 40, 8},       {256, 208, 200}, {512, 200, 240},
        {511, 200, 240},  {1024, 201, 256}, {600, 520, 520}};
    const size_t nsizes = sizeof sizes / sizeof *sizes;
    for (int threads = 1; threads <= 2; threads++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(threads), 0);
        for (size_t i = 0; i < nsizes; i++)
            for (int v = 0; v < 8; v++)
                packed_case(sizes[i][0], sizes[i][1], sizes[i][2], v & 1, v & 2, v & 4);
    }
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    /* ag_gemm_packs: the engine's kernel in every BLIS call of ag_gemm, whose calls have at
     * least 512 rows (the product cut in blocks of 512 from 1024 rows on). */
    const bool own = strcmp(ag_gemm_kernel(), "blis") != 0;
    int packs = 0;
    for (size_t i = 0; i < nsizes; i++) {
        gcase g = {
            .m = sizes[i][0] >= 1024 ? 512 : sizes[i][0], .n = sizes[i][1], .k = sizes[i][2]};
        bool expect = own && blis_blocked(&g, bli_gks_query_cntx());
        CU_ASSERT_EQUAL(ag_gemm_packs(sizes[i][0], sizes[i][1], sizes[i][2]), expect);
        packs += expect;
    }
    printf("\n  packed products: %s, %d of %zu sizes from packed panels\n", ag_gemm_kernel(), packs,
           nsizes);
    if (own) CU_ASSERT(packs >= 1);
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

int main(void) { return tg_test_main("gemm_kernel", tests); }
