/* gemm_kernel.c -- the engine's own GEMM micro-kernel for AVX-512 CPUs, run inside BLIS.
 *
 * BLIS 0.9 (Debian's libblis) chooses its AVX-512 kernels ("skx") only when it can tell from
 * the CPU's brand string that the core has two 512-bit FMA units; for other brand strings
 * (virtual machines report "Intel(R) Xeon(R) Processor") it falls back to its AVX2 kernels
 * ("haswell"), half the arithmetic width. On such a CPU the engine keeps BLIS's blocking and
 * packing and plugs in this micro-kernel through a copy of BLIS's own context (BLIS's
 * documented way to add a kernel): a product runs 1.5-1.7x faster (docs/benchmarks.md).
 *
 * The micro-kernel, C (MR x NR tile) = alpha A B + beta C, MR = 24, NR = 16, float:
 *   a: BLIS's packed micro-panel of A, k columns of MR values (a[p MR + i] = A(i, p));
 *   b: the packed micro-panel of B, k rows of NR values (b[p NR + j] = B(p, j));
 *   acc[i] (one 16-float register per row of the tile) += a[p MR + i] * b[p NR .. +16) for
 *   p = 0 .. k-1, one FMA each, in that order; then row i of C = alpha acc[i] + beta C(i, :)
 *   (alpha = 1 skips the product; beta = 0 does not read C; beta = 1 is one addition).
 * 24 accumulators and the row of B fill 25 of the 32 vector registers; each FMA takes its value
 * of A as a broadcast memory operand. An edge tile (m < MR or n < NR; the packed panels are zero
 * padded) is computed the same way and stored under a mask, so an element's bits never depend
 * on where its tile falls. This is the order of operations of BLIS's haswell kernel (an FMA per
 * k, KC = 256 kept), so results are bit-identical to it for beta 0 or 1 (tests/autograd/
 * test_gemm_kernel.c checks this).
 *
 * Chosen once, at the first product: when the engine is float32, the compiler can target
 * AVX-512F, the CPU (and its OS) supports it, BLIS has not chosen an AVX-512 configuration
 * itself, and the environment variable TG_GEMM_KERNEL is not "blis" (which keeps BLIS's own
 * kernels, for comparison). */
#include "autograd/ag_internal.h"

#include <blis.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if !defined(TG_DOUBLE) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TG_HAVE_AVX512_KERNEL 1
#include <immintrin.h>

#define MR 24
#define NR 16

__attribute__((target("avx512f"))) static void gemm_ukr_24x16(
    dim_t m, dim_t n, dim_t k, float *restrict alpha, float *restrict a, float *restrict b,
    float *restrict beta, float *restrict c, inc_t rs_c, inc_t cs_c, auxinfo_t *restrict data,
    cntx_t *restrict cntx) {
    (void)data;
    (void)cntx;
    __m512 acc[MR];
#pragma GCC unroll 24
    for (int i = 0; i < MR; i++) acc[i] = _mm512_setzero_ps();
    for (dim_t p = 0; p < k; p++) {
        const __m512 bv = _mm512_loadu_ps(b);
        _mm_prefetch((const char *)(a + 8 * MR), _MM_HINT_T0);
#pragma GCC unroll 24
        for (int i = 0; i < MR; i++) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), bv, acc[i]);
        a += MR;
        b += NR;
    }
    const float al = *alpha, be = *beta;
    const __m512 va = _mm512_set1_ps(al), vb = _mm512_set1_ps(be);
    const __mmask16 mask = (__mmask16)((1u << n) - 1u);
    for (dim_t i = 0; i < m; i++) {
        __m512 r = al == 1 ? acc[i] : _mm512_mul_ps(va, acc[i]);
        float *ci = c + i * rs_c;
        if (cs_c == 1) {
            if (be == 1) r = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, ci), r);
            else if (be != 0) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, ci), r);
            _mm512_mask_storeu_ps(ci, mask, r);
        } else { /* general column stride: through a row buffer */
            float row[NR] = {0};
            if (be != 0)
                for (dim_t j = 0; j < n; j++) row[j] = ci[j * cs_c];
            const __m512 x = _mm512_loadu_ps(row);
            if (be == 1) r = _mm512_add_ps(x, r);
            else if (be != 0) r = _mm512_fmadd_ps(vb, x, r);
            _mm512_storeu_ps(row, r);
            for (dim_t j = 0; j < n; j++) ci[j * cs_c] = row[j];
        }
    }
}
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const cntx_t *chosen; /* NULL: BLIS's own context */
#ifdef TG_HAVE_AVX512_KERNEL
static cntx_t own_cntx;
#endif

static void choose(void) {
#ifdef TG_HAVE_AVX512_KERNEL
    const char *env = getenv("TG_GEMM_KERNEL");
    if (env && strcmp(env, "blis") == 0) return;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) return;
    arch_t arch = bli_arch_query_id();
    if (arch == BLIS_ARCH_SKX || arch == BLIS_ARCH_KNL) return;
    const cntx_t *native = bli_gks_query_cntx();
    /* The blocking must keep KC (the split of the k sum, hence the bits) and fit MR and NR:
     * MC and NC must be multiples of them. */
    const num_t F = BLIS_FLOAT;
    if (native->blkszs[BLIS_MC].v[F] % MR || native->blkszs[BLIS_NC].v[F] % NR) return;
    own_cntx = *native;
    own_cntx.blkszs[BLIS_MR].v[F] = own_cntx.blkszs[BLIS_MR].e[F] = MR;
    own_cntx.blkszs[BLIS_NR].v[F] = own_cntx.blkszs[BLIS_NR].e[F] = NR;
    own_cntx.l3_nat_ukrs[BLIS_GEMM_UKR].ptr[F] = (void_fp)gemm_ukr_24x16;
    own_cntx.l3_vir_ukrs[BLIS_GEMM_UKR].ptr[F] = (void_fp)gemm_ukr_24x16;
    own_cntx.l3_nat_ukrs_prefs[BLIS_GEMM_UKR].v[F] = true; /* prefers row-stored C */
    chosen = &own_cntx;
#endif
}

const void *ag__gemm_cntx(void) {
    pthread_once(&once, choose);
    return chosen;
}

const char *ag_gemm_kernel(void) {
    return ag__gemm_cntx() ? "tapegrad avx512 24x16" : "blis";
}
