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
 * k, KC = 256 kept), which BLIS's configurations "haswell" (Intel) and "zen", "zen2", "zen3"
 * (AMD; BLIS 0.9 has no "zen4": a Zen 4 gets "zen3") all run for float, so results are
 * bit-identical to BLIS's own for beta 0 or 1 (tests/autograd/test_gemm_kernel.c checks this on
 * either side of each configuration's thresholds); with another configuration BLIS's own
 * kernels stay.
 *
 * The kernel runs only in BLIS's blocked code. BLIS computes a product with a side below its
 * "sup" thresholds (haswell: m, n or k < 201; zen3: m < 512, n < 200 or k < 240; ag_gemm holds
 * m to NT, ag__gemm_blocked) with its code for small sizes instead, with its own kernels; but
 * that code reads MR and NR from the context to choose between its two algorithms, which split
 * the k sum differently, so there the engine's context does not always give BLIS's bits
 * (ops_matmul.c, gemm_rows).
 *
 * The micro-panels of A and B are packed by packm_24xk and packm_16xk below (BLIS's packing
 * gathers a row-major A, or a column-major B, one value at a time).
 *
 * Chosen once, at the first product: when the engine is float32, the compiler can target
 * AVX-512F, the CPU (and its OS) supports it (ag_cpu_has), BLIS has chosen one of the
 * configurations above (never its own AVX-512 ones, "skx" and "knl"), and the environment
 * variable TG_GEMM_KERNEL is not "blis" (which keeps BLIS's own kernels, for comparison). */
#include "autograd/ag_cpu.h"
#include "autograd/ag_internal.h"

#include <blis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if !defined(TG_DOUBLE) && AG_CPU_X86_KERNELS
#define TG_HAVE_AVX512_KERNEL 1
#include <immintrin.h>

#define MR 24
#define NR 16
#define C_AHEAD 48 /* steps of k before a tile's end at which its C is prefetched */

/* How a tile's first k block meets C: BLIS's beta (0, 1 or any), or a bias row (C = bias + A B,
 * the bits of C preset to the bias and beta = 1). */
enum { TILE_BETA, TILE_BIAS };

static inline void tile(dim_t m, dim_t n, dim_t k, float al, const float *restrict a,
                        const float *restrict b, int mode, float be, const float *restrict bias,
                        float *restrict c, inc_t rs_c, inc_t cs_c)
    __attribute__((target("avx512f"), always_inline));
static inline void tile(dim_t m, dim_t n, dim_t k, float al, const float *restrict a,
                        const float *restrict b, int mode, float be, const float *restrict bias,
                        float *restrict c, inc_t rs_c, inc_t cs_c) {
    __m512 acc[MR];
#pragma GCC unroll 24
    for (int i = 0; i < MR; i++) acc[i] = _mm512_setzero_ps();
#define TILE_STEPS(count)                                                                          \
    for (dim_t p = 0; p < (count); p++) {                                                          \
        const __m512 bv = _mm512_loadu_ps(b);                                                      \
        _mm_prefetch((const char *)(a + 8 * MR), _MM_HINT_T0);                                     \
        _Pragma("GCC unroll 24") for (int i = 0; i < MR; i++) acc[i] =                             \
            _mm512_fmadd_ps(_mm512_set1_ps(a[i]), bv, acc[i]);                                     \
        a += MR;                                                                                   \
        b += NR;                                                                                   \
    }
    /* C's rows are fetched while the last C_AHEAD steps run: C is the one operand not in cache
     * (a tile's rows lie a row stride apart in a matrix of megabytes), and fetched at the start
     * they would be evicted by the A panel streaming through L1. Both lines a row may straddle. */
    const dim_t k_first = k > C_AHEAD ? k - C_AHEAD : 0;
    TILE_STEPS(k_first)
    if (cs_c == 1)
        for (dim_t i = 0; i < m; i++) {
            _mm_prefetch((const char *)(c + i * rs_c), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i * rs_c + n - 1), _MM_HINT_T0);
        }
    TILE_STEPS(k - k_first)
#undef TILE_STEPS
    const __m512 va = _mm512_set1_ps(al), vb = _mm512_set1_ps(be);
    const __mmask16 mask = (__mmask16)((1u << n) - 1u);
    const __m512 bias_v = mode == TILE_BIAS ? _mm512_maskz_loadu_ps(mask, bias) : vb;
    for (dim_t i = 0; i < m; i++) {
        __m512 r = al == 1 ? acc[i] : _mm512_mul_ps(va, acc[i]);
        float *ci = c + i * rs_c;
        if (mode == TILE_BIAS) {
            _mm512_mask_storeu_ps(ci, mask, _mm512_add_ps(bias_v, r));
        } else if (cs_c == 1) {
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

__attribute__((target("avx512f"))) static void
gemm_ukr_24x16(dim_t m, dim_t n, dim_t k, float *restrict alpha, float *restrict a,
               float *restrict b, float *restrict beta, float *restrict c, inc_t rs_c, inc_t cs_c,
               auxinfo_t *restrict data, cntx_t *restrict cntx) {
    (void)data;
    (void)cntx;
    tile(m, n, k, *alpha, a, b, TILE_BETA, *beta, NULL, c, rs_c, cs_c);
}

/* The packing of A and B for it (BLIS's packm kernel interface, 0.9): panel p (ldp per k, P =
 * 24 values per k for A, 16 for B) from the cdim x n block a (inca between its P rows, lda
 * along k) times kappa, rows cdim..P-1 and columns n..n_max-1 zeroed. BLIS's generic kernel for
 * a 24-row panel gathers a row-major A one float at a time, and its 16-wide one a column-major
 * B (a transposed weight, x W^T) one float at a time; here 8 x 8 blocks are transposed in
 * registers. A pure copy (kappa = 1: the bits of a) or one product by kappa, as BLIS's. */
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

/* A panel of P = 24 (A's) or 16 (B's) values per k. */
static inline void pack_panel(int P, dim_t cdim, dim_t n, dim_t n_max, float kap,
                              const float *restrict a, inc_t inca, inc_t lda, float *restrict p,
                              inc_t ldp) __attribute__((target("avx512f"), always_inline));
static inline void pack_panel(int P, dim_t cdim, dim_t n, dim_t n_max, float kap,
                              const float *restrict a, inc_t inca, inc_t lda, float *restrict p,
                              inc_t ldp) {
    dim_t k0 = 0;
    if (cdim == P && kap == 1 && lda == 1) /* the panel's rows contiguous: 8 x 8 transposes */
        for (; k0 + 8 <= n; k0 += 8)
            for (int i0 = 0; i0 < P; i0 += 8)
                transpose8_store(a + i0 * inca + k0, inca, p + k0 * ldp + i0, ldp);
    else if (cdim == P && kap == 1 && inca == 1) /* its columns contiguous: copies */
        for (; k0 < n; k0++) {
            const float *ak = a + k0 * lda;
            float *pk = p + k0 * ldp;
            _mm512_storeu_ps(pk, _mm512_loadu_ps(ak));
            if (P == 24) _mm256_storeu_ps(pk + 16, _mm256_loadu_ps(ak + 16));
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
        for (dim_t i = k < n ? cdim : 0; i < P; i++) p[k * ldp + i] = 0;
}

#define DEFINE_PACKM(P)                                                                            \
    __attribute__((target("avx512f"))) static void packm_##P##xk(                                  \
        conj_t conja, pack_t schema, dim_t cdim, dim_t n, dim_t n_max, float *restrict kappa,      \
        float *restrict a, inc_t inca, inc_t lda, float *restrict p, inc_t ldp,                    \
        cntx_t *restrict cntx) {                                                                   \
        (void)conja; /* real data */                                                               \
        (void)schema;                                                                              \
        (void)cntx;                                                                                \
        pack_panel(P, cdim, n, n_max, *kappa, a, inca, lda, p, ldp);                               \
    }
DEFINE_PACKM(24) /* A's micro-panels */
DEFINE_PACKM(16) /* B's */
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const cntx_t *chosen; /* NULL: BLIS's own context */
#ifdef TG_HAVE_AVX512_KERNEL
static cntx_t own_cntx;
static dim_t kc_block, mc_block;
#endif

static void choose(void) {
#ifdef TG_HAVE_AVX512_KERNEL
    const char *env = getenv("TG_GEMM_KERNEL");
    if (env && strcmp(env, "blis") == 0) return;
    if (!ag_cpu_has(AG_CPU_AVX512F)) return;
    /* The configurations whose float micro-kernel is BLIS's haswell 6x16 (row-preferring, an
     * FMA per k): the bits this kernel keeps. BLIS initialised first: the environment variable
     * BLIS_ARCH_TYPE (a configuration forced by hand) needs its contexts to choose from. */
    bli_init();
    arch_t arch = bli_arch_query_id();
    if (arch != BLIS_ARCH_HASWELL && arch != BLIS_ARCH_ZEN && arch != BLIS_ARCH_ZEN2 &&
        arch != BLIS_ARCH_ZEN3)
        return;
    cntx_t *native = bli_gks_query_cntx();
    /* The blocking must keep KC (the split of the k sum, hence the bits) and fit MR and NR:
     * MC and NC must be multiples of them. Both kernels must prefer row-stored C: BLIS's choice
     * between its blocked and small-size code depends on it (ops_matmul.c makes it the same for
     * both contexts). */
    const num_t F = BLIS_FLOAT;
    if (native->blkszs[BLIS_MC].v[F] % MR || native->blkszs[BLIS_NC].v[F] % NR ||
        !bli_cntx_l3_vir_ukr_prefers_rows_dt(F, BLIS_GEMM_UKR, native))
        return;
    own_cntx = *native;
    own_cntx.blkszs[BLIS_MR].v[F] = own_cntx.blkszs[BLIS_MR].e[F] = MR;
    own_cntx.blkszs[BLIS_NR].v[F] = own_cntx.blkszs[BLIS_NR].e[F] = NR;
    own_cntx.l3_nat_ukrs[BLIS_GEMM_UKR].ptr[F] = (void_fp)gemm_ukr_24x16;
    own_cntx.l3_vir_ukrs[BLIS_GEMM_UKR].ptr[F] = (void_fp)gemm_ukr_24x16;
    own_cntx.l3_nat_ukrs_prefs[BLIS_GEMM_UKR].v[F] = true; /* prefers row-stored C */
    own_cntx.packm_kers[BLIS_PACKM_24XK_KER].ptr[F] = (void_fp)packm_24xk;
    own_cntx.packm_kers[BLIS_PACKM_16XK_KER].ptr[F] = (void_fp)packm_16xk;
    kc_block = native->blkszs[BLIS_KC].v[F];
    mc_block = native->blkszs[BLIS_MC].v[F];
    chosen = &own_cntx;
#endif
}

const void *ag__gemm_cntx(void) {
    pthread_once(&once, choose);
    return chosen;
}

const char *ag_gemm_kernel(void) { return ag__gemm_cntx() ? "tapegrad avx512 24x16" : "blis"; }

/* ---- B packed once (ag_pack_b) ----
 * Layout: k in blocks of KC (BLIS's, 256), each block the 16-wide micro-panels of B's columns
 * one after the other: block p0 (kc values) of panel jp at panels + p0 * NP * 16 + jp * kc * 16,
 * NP = ceil(n / 16) panels, the last zero padded. The product below walks BLIS's loops (k
 * blocks, blocks of MC rows with A packed by packm_24xk, micro-panels of B, of A) over these
 * panels and calls the same micro-kernel body per tile, so every element is the same sequence
 * of FMAs as in ag_gemm, and the same k-block additions: the same bits. Its KC and MC are
 * BLIS's own (haswell: 256 and 168, zen3: 256 and 144; MC does not change the bits). It applies
 * only where ag_gemm would run this kernel in every BLIS call (the engine's kernel chosen; m, n,
 * k at least BLIS's "sup" thresholds, m counted per block of ROW_BLOCK rows when the product is
 * cut); elsewhere it calls ag_gemm on the original B. */

struct ag_packed_b {
    int k, n;
    const ag_real *b; /* the original, for ag_gemm */
    ptrdiff_t rsb, csb;
    float *panels; /* NULL: products go to ag_gemm */
};

#ifdef TG_HAVE_AVX512_KERNEL
__attribute__((target("avx512f"))) static void pack_all(ag_packed_b *pb, size_t np) {
    const dim_t k = pb->k, n = pb->n;
    for (dim_t p0 = 0; p0 < k; p0 += kc_block) {
        const dim_t kc = k - p0 < kc_block ? k - p0 : kc_block;
        for (size_t jp = 0; jp < np; jp++) {
            const dim_t j0 = (dim_t)jp * NR, nc = n - j0 < NR ? n - j0 : NR;
            pack_panel(NR, nc, kc, kc, 1, pb->b + p0 * pb->rsb + j0 * pb->csb, pb->csb, pb->rsb,
                       pb->panels + (size_t)p0 * np * NR + jp * (size_t)kc * NR, NR);
        }
    }
}
#endif

/* Rows per block when a product of at least 2 ROW_BLOCK rows is cut (ag_gemm_packed here, and
 * ag_gemm's GEMM_BLOCK: the same 512), the last block longer. */
#define ROW_BLOCK 512

bool ag_gemm_packs(int m, int n, int k) {
#ifdef TG_HAVE_AVX512_KERNEL
    /* ag_gemm's shortest BLIS call (it cuts when n k >= 4096 too, which blocked code implies). */
    const int rows = m >= 2 * ROW_BLOCK ? ROW_BLOCK : m;
    return ag__gemm_cntx() && ag__gemm_blocked(rows, n, k, 1);
#else
    (void)m, (void)n, (void)k;
    return false;
#endif
}

ag_packed_b *ag_pack_b(int k, int n, const ag_real *b, ptrdiff_t rsb, ptrdiff_t csb) {
    if (k < 1 || n < 1 || !b) {
        ag_report(NULL, "pack_b: a %d x %d matrix, expected at least 1 x 1", k, n);
        return NULL;
    }
    ag_packed_b *pb = calloc(1, sizeof *pb);
    if (!pb) {
        ag_report(NULL, "pack_b: out of memory");
        return NULL;
    }
    *pb = (ag_packed_b){k, n, b, rsb, csb, NULL};
#ifdef TG_HAVE_AVX512_KERNEL
    if (!ag__gemm_cntx()) return pb;
    const size_t np = ((size_t)n + NR - 1) / NR, bytes = np * NR * (size_t)k * sizeof(float);
    if (!(pb->panels = aligned_alloc(64, (bytes + 63) / 64 * 64))) {
        free(pb);
        ag_report(NULL, "pack_b: out of memory for %zu bytes", bytes);
        return NULL;
    }
    pack_all(pb, np);
#endif
    return pb;
}

void ag_packed_b_free(ag_packed_b *pb) {
    if (!pb) return;
    free(pb->panels);
    free(pb);
}

int ag_packed_b_rows(const ag_packed_b *pb) { return pb->k; }
int ag_packed_b_cols(const ag_packed_b *pb) { return pb->n; }

#ifdef TG_HAVE_AVX512_KERNEL
/* A's packed blocks (MC x KC), one per thread, kept between calls (ag__scratch_free). */
static _Thread_local float *a_buf;
#endif

void ag__packed_scratch_free(void) {
#ifdef TG_HAVE_AVX512_KERNEL
    free(a_buf);
    a_buf = NULL;
#endif
}

#ifdef TG_HAVE_AVX512_KERNEL

/* Rows [r0, r1) of C = A B (+ bias) over the packed panels. */
__attribute__((target("avx512f"))) static void packed_rows(const ag_packed_b *pb, const float *a,
                                                           ptrdiff_t rsa, ptrdiff_t csa,
                                                           const float *bias, float *c,
                                                           ptrdiff_t rsc, dim_t r0, dim_t r1) {
    const dim_t k = pb->k, n = pb->n, np = (n + NR - 1) / NR;
    for (dim_t p0 = 0; p0 < k; p0 += kc_block) {
        const dim_t kc = k - p0 < kc_block ? k - p0 : kc_block;
        const int mode = p0 == 0 && bias ? TILE_BIAS : TILE_BETA;
        const float be = p0 == 0 ? 0 : 1;
        for (dim_t i0 = r0; i0 < r1; i0 += mc_block) {
            const dim_t mc = r1 - i0 < mc_block ? r1 - i0 : mc_block;
            for (dim_t ir = 0; ir < mc; ir += MR) /* A's micro-panels of this block */
                pack_panel(MR, mc - ir < MR ? mc - ir : MR, kc, kc, 1,
                           a + (i0 + ir) * rsa + p0 * csa, rsa, csa, a_buf + ir * kc, MR);
            for (dim_t jp = 0; jp < np; jp++) {
                const dim_t j0 = jp * NR, nc = n - j0 < NR ? n - j0 : NR;
                const float *bp = pb->panels + p0 * np * NR + jp * kc * NR;
                for (dim_t ir = 0; ir < mc; ir += MR)
                    tile(mc - ir < MR ? mc - ir : MR, nc, kc, 1, a_buf + ir * kc, bp, mode, be,
                         bias ? bias + j0 : NULL, c + (i0 + ir) * rsc + j0, rsc, 1);
            }
        }
    }
}

typedef struct packed_job {
    const ag_packed_b *pb;
    const float *a, *bias;
    ptrdiff_t rsa, csa, rsc;
    float *c;
    dim_t m;
    atomic_bool failed; /* a thread could not allocate its buffer for A */
} packed_job;

static void packed_blocks(void *ctx, ptrdiff_t b0, ptrdiff_t b1) {
    const packed_job *j = ctx;
    if (!a_buf &&
        !(a_buf = aligned_alloc(64, sizeof(float) * (size_t)(mc_block + MR) * kc_block))) {
        atomic_store(&((packed_job *)ctx)->failed, true);
        return;
    }
    const ptrdiff_t nb = j->m / ROW_BLOCK > 0 ? j->m / ROW_BLOCK : 1;
    for (ptrdiff_t blk = b0; blk < b1; blk++)
        packed_rows(j->pb, j->a, j->rsa, j->csa, j->bias, j->c, j->rsc, blk * ROW_BLOCK,
                    blk == nb - 1 ? j->m : (blk + 1) * ROW_BLOCK);
}
#endif

int ag_gemm_packed(int m, const ag_real *a, ptrdiff_t rsa, ptrdiff_t csa, const ag_packed_b *pb,
                   const ag_real *bias, ag_real *c, ptrdiff_t rsc) {
    const int n = pb->n, k = pb->k;
    if (m < 1) return 0;
#ifdef TG_HAVE_AVX512_KERNEL
    if (pb->panels && ag_gemm_packs(m, n, k)) {
        packed_job j = {pb, a, bias, rsa, csa, rsc, c, m, false};
        if (m >= 2 * ROW_BLOCK) ag_parallel_for(m / ROW_BLOCK, 1, packed_blocks, &j);
        else packed_blocks(&j, 0, 1);
        return atomic_load(&j.failed) ? ag_error("gemm_packed: out of memory for packing A") : 0;
    }
#endif
    if (bias)
        for (int r = 0; r < m; r++) memcpy(c + (ptrdiff_t)r * rsc, bias, sizeof *c * (size_t)n);
    ag_gemm(m, n, k, 1, a, rsa, csa, pb->b, pb->rsb, pb->csb, bias ? 1 : 0, c, rsc, 1);
    return 0;
}
