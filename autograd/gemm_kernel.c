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
 * A's micro-panels are packed by packm_24xk below (BLIS's generic packing for 24 rows gathers
 * a row-major A one value at a time); B's keep BLIS's 16-wide packing.
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

__attribute__((target("avx512f"))) static void
gemm_ukr_24x16(dim_t m, dim_t n, dim_t k, float *restrict alpha, float *restrict a,
               float *restrict b, float *restrict beta, float *restrict c, inc_t rs_c, inc_t cs_c,
               auxinfo_t *restrict data, cntx_t *restrict cntx) {
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

/* The packing of A for it (BLIS's packm kernel interface, 0.9): panel p (ldp per k, 24 values
 * per k) from the cdim x n block a (inca between its rows, lda between its columns) times kappa,
 * rows cdim..23 and columns n..n_max-1 zeroed. BLIS's generic kernel for a 24-row panel
 * gathers a row-major A one float at a time; here 8 x 8 blocks are transposed in registers.
 * A pure copy (kappa = 1: the bits of a) or one product by kappa, as BLIS's. */
static inline void transpose8_store(const float *a, inc_t inca, float *p, inc_t ldp)
    __attribute__((target("avx512f"), always_inline));
static inline void transpose8_store(const float *a, inc_t inca, float *p, inc_t ldp) {
    __m256 r0 = _mm256_loadu_ps(a), r1 = _mm256_loadu_ps(a + inca),
           r2 = _mm256_loadu_ps(a + 2 * inca), r3 = _mm256_loadu_ps(a + 3 * inca),
           r4 = _mm256_loadu_ps(a + 4 * inca), r5 = _mm256_loadu_ps(a + 5 * inca),
           r6 = _mm256_loadu_ps(a + 6 * inca), r7 = _mm256_loadu_ps(a + 7 * inca);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
           t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
           t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(p + 0 * ldp, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(p + 1 * ldp, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(p + 2 * ldp, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(p + 3 * ldp, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(p + 4 * ldp, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(p + 5 * ldp, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(p + 6 * ldp, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(p + 7 * ldp, _mm256_permute2f128_ps(u3, u7, 0x31));
}

__attribute__((target("avx512f"))) static void packm_24xk(conj_t conja, pack_t schema, dim_t cdim,
                                                          dim_t n, dim_t n_max,
                                                          float *restrict kappa, float *restrict a,
                                                          inc_t inca, inc_t lda, float *restrict p,
                                                          inc_t ldp, cntx_t *restrict cntx) {
    (void)conja; /* real data */
    (void)schema;
    (void)cntx;
    const float kap = *kappa;
    dim_t k0 = 0;
    if (cdim == MR && kap == 1 && lda == 1) /* rows of A contiguous: 8 x 8 transposes */
        for (; k0 + 8 <= n; k0 += 8)
            for (int i0 = 0; i0 < MR; i0 += 8)
                transpose8_store(a + i0 * inca + k0, inca, p + k0 * ldp + i0, ldp);
    else if (cdim == MR && kap == 1 && inca == 1) /* columns of A contiguous: copies */
        for (; k0 < n; k0++) {
            const float *ak = a + k0 * lda;
            float *pk = p + k0 * ldp;
            _mm512_storeu_ps(pk, _mm512_loadu_ps(ak));
            _mm256_storeu_ps(pk + 16, _mm256_loadu_ps(ak + 16));
        }
    for (dim_t k = k0; k < n; k++) {
        const float *ak = a + k * lda;
        float *pk = p + k * ldp;
        if (kap == 1)
            for (dim_t i = 0; i < cdim; i++) pk[i] = ak[i * inca];
        else
            for (dim_t i = 0; i < cdim; i++) pk[i] = kap * ak[i * inca];
    }
    for (dim_t k = 0; k < n_max; k++)
        for (dim_t i = k < n ? cdim : 0; i < MR; i++) p[k * ldp + i] = 0;
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
    own_cntx.packm_kers[BLIS_PACKM_24XK_KER].ptr[F] = (void_fp)packm_24xk;
    chosen = &own_cntx;
#endif
}

const void *ag__gemm_cntx(void) {
    pthread_once(&once, choose);
    return chosen;
}

const char *ag_gemm_kernel(void) { return ag__gemm_cntx() ? "tapegrad avx512 24x16" : "blis"; }
