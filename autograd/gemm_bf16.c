/* gemm_bf16.c -- products with bfloat16 inputs and float32 accumulation (mixed precision); the
 * precision switch (ag_set_precision) and bf16 rounding are in precision.c.
 *
 * ag_gemm_bf16: C (m x n) (+)= A (m x k) B (k x n), A and B rounded to bf16 while they are
 * packed, every sum in float32. Each element of C is a chain over k taken in pairs
 * (2q, 2q + 1), q = 0, 1, ...; an odd k pads its last pair with zeros. S(acc, p) = an FMA
 * rounded to nearest even, a denormal acc read as zero (DAZ) and a denormal result flushed to
 * zero (FTZ); the product of two bf16 values (8-bit significands) is exact in float32 unless
 * it leaves float32's normal range. Two chains, by the kernel in use:
 *   vdpbf16ps's (the AVX512-BF16 kernel and "emulated"), the odd element of a pair first:
 *     acc = beta ? C(i, j) : 0
 *     acc = S(acc, A(i, 2q + 1) B(2q + 1, j)),  then  acc = S(acc, A(i, 2q) B(2q, j))
 *   tdpbf16ps's (the AMX kernel and "amx-emulated"), per 16 pairs q0 .. q0 + 15 from q0 = 0
 *   (pairs past k zero):
 *     even = S(... S(0, A(i, 2 q0) B(2 q0, j)) ..., A(i, 2 q0 + 30) B(2 q0 + 30, j))
 *     odd  = the same over the odd elements
 *     acc  = acc + (even + odd), both sums rounded to nearest even with DAZ and FTZ.
 * A chain is the same whatever the blocking, the tile an element falls in or the number of
 * threads: C's bits depend on its own row of A, column of B, k and the kernel's chain only.
 *
 * Blocking (BLIS's loops): columns of C in blocks of NC, k in blocks of KC (even: a pair never
 * straddles two blocks; C is stored and read back in float32 between them, which is exact),
 * rows in blocks of MC shared between the threads; B's block is packed once per (NC, KC) block
 * into NR-wide panels, A's into MR-high panels per row block. The panels' packing and the row
 * blocks are ag_parallel_blocks' blocks: split between the threads, or inside a task run one at
 * a time and shared with the threads whose tasks have ended (threads.c). A packed panel of R lines (rows of
 * A or columns of B) holds, for pair q, R 32-bit words: word (q, r) = bf16(line r, k = 2q) in
 * its low half, bf16(line r, 2q + 1) in its high half.
 *
 * AVX512-BF16 micro-kernel (MR = 12 rows x NR = 32 columns): 24 float32 accumulators of 16
 * lanes; per pair q, two loads of B's panel and, for each row, a broadcast word of A into two
 * vdpbf16ps (_mm512_dpbf16_ps: lane j += a.hi * b[j].hi, then += a.lo * b[j].lo); before
 * its first pair it prefetches the next tile's C, which arrives while it multiplies.
 * AMX micro-kernel (32 x 32): C in four 16 x 16 float32 tiles; per 16 pairs of k, two tiles of
 * A (16 rows of 16 pairs: A is packed tile by tile for it, each tile 1 KB in one piece) and two
 * of B (B's usual NR-wide panel, 16 pairs of 16 columns: the layout tdpbf16ps reads), four
 * tdpbf16ps, the loads of the next step's tiles between them; it prefetches the next tile's C
 * while it multiplies. Panels hold a multiple of 16 pairs (zero past k). Each thread loads the
 * tile configuration before its row blocks and releases it after.
 * On a CPU without the instructions (or with TG_BF16_KERNEL=emulated, ag_bf16_emulate,
 * ag_bf16_set_kernel) a portable kernel computes the same chain with ag_bf16_fma (ag_op.h: the
 * instruction's step in C) on the same packed panels -- for AMX, the kernel's own code on tiles
 * in memory (gemm_bf16_amx.c) -- the same bits (test_gemm_bf16.c), much more slowly. The
 * native kernels pack with the CPU's conversion, 16 or 32 values at a time (a layout that
 * crosses k by 16 x 16 transposes in registers); the portable ones round in C (the same words).
 *
 * nn's bf16 inference product (nn/quant_bf16.c) shares the rounding and the step (hence its
 * bits) with this file, not the kernels: these pack both operands at every call, which pays for
 * training's products of hundreds of rows; inference packs its weight once, in 16-channel
 * blocks, and reads the activations in place with tiles of 1 to 8 rows, because a decoding step
 * has few rows (a beam of 4, a handful of sentences), where a 12-row tile would mostly compute
 * padding and packing A would add a pass over x. */
#include "autograd/ag_cpu.h"
#include "autograd/ag_internal.h"
#include "autograd/gemm_bf16_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if AG_CPU_X86_KERNELS
#include <immintrin.h>
#endif

#define MR 12 /* the AVX512-BF16 kernel's tile of C (and its emulation's) */
#define NR 32
#define AMX_MR AG_AMX_MR /* the AMX kernel's (gemm_bf16_amx.c) */
#define AMX_NR AG_AMX_NR
#define AMX_PAIRS AG_AMX_PAIRS
#define KC 256  /* multiple of 2 AMX_PAIRS: a pair, or a tile's 16, never straddles blocks */
#define MC 96   /* multiple of MR and AMX_MR */
#define NC 1024 /* multiple of NR and AMX_NR */

/* ---- packing ---- */

/* Panel of R lines (lines <= R of them real, the rest zero) over kc values of k: line r's value
 * at k = p is src[r ls + p ps]; dst gets (kc + 1) / 2 pairs of R words (the layout above). */
static void pack_panel(int R, int lines, int kc, const float *src, ptrdiff_t ls, ptrdiff_t ps,
                       uint32_t *restrict dst) {
    const int kp = (kc + 1) / 2;
    if (ps == 1) { /* lines contiguous along k: round a line, then deal out its pairs */
        uint16_t row[KC];
        for (int r = 0; r < R; r++) {
            if (r < lines) {
                const float *s = src + r * ls;
                for (int p = 0; p < kc; p++) row[p] = ag_bf16_round(s[p]);
                if (kc & 1) row[kc] = 0;
                for (int q = 0; q < kp; q++)
                    dst[q * R + r] = (uint32_t)row[2 * q] | (uint32_t)row[2 * q + 1] << 16;
            } else {
                for (int q = 0; q < kp; q++) dst[q * R + r] = 0;
            }
        }
        return;
    }
    for (int q = 0; q < kp; q++) { /* two values of k at a time, across the lines */
        const float *s0 = src + 2 * q * ps, *s1 = s0 + ps;
        uint32_t *d = dst + q * R;
        if (2 * q + 1 < kc)
            for (int r = 0; r < lines; r++)
                d[r] = (uint32_t)ag_bf16_round(s0[r * ls]) | (uint32_t)ag_bf16_round(s1[r * ls])
                                                                 << 16;
        else
            for (int r = 0; r < lines; r++) d[r] = ag_bf16_round(s0[r * ls]);
        for (int r = lines; r < R; r++) d[r] = 0;
    }
}

/* Pairs [kp, kpp) of every panel of R lines (an AMX tile's depth): zero. */
static void zero_pad_pairs(int R, int lines, int kp, int kpp, uint32_t *dst) {
    if (kpp == kp) return;
    for (int r0 = 0; r0 < lines; r0 += R)
        memset(dst + (ptrdiff_t)(r0 / R) * kpp * R + (ptrdiff_t)kp * R, 0,
               sizeof *dst * (size_t)(kpp - kp) * R);
}

/* Panels of R lines each for `lines` lines (the last one zero-padded): panel p at
 * dst + p kpp R, its pairs from kp = (kc + 1) / 2 to kpp zero. */
static void pack_block(int R, int lines, int kc, const float *src, ptrdiff_t ls, ptrdiff_t ps,
                       int kpp, uint32_t *restrict dst) {
    for (int r0 = 0; r0 < lines; r0 += R)
        pack_panel(R, lines - r0 < R ? lines - r0 : R, kc, src + r0 * ls, ls, ps,
                   dst + (ptrdiff_t)(r0 / R) * kpp * R);
    zero_pad_pairs(R, lines, (kc + 1) / 2, kpp, dst);
}

#if AG_CPU_X86_KERNELS
/* r[i] word j <-> r[j] word i: a 16 x 16 block of 32-bit words transposed in registers
 * (pairs of words, then of 64-bit halves, then of 128-bit quarters twice). */
__attribute__((target("avx512f"))) static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 4) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
        t[i + 2] = _mm512_unpacklo_epi32(r[i + 2], r[i + 3]);
        t[i + 3] = _mm512_unpackhi_epi32(r[i + 2], r[i + 3]);
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    }
}

/* The first n of 16 lanes (none for n <= 0, all for n >= 16). */
static inline __mmask16 upto(int n) {
    return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Values p .. p + 31 of a line contiguous along k (p even), to bf16, zero past kc (a pair's pad,
 * pairs past kp): the 16 words of pairs p / 2 .. p / 2 + 15, in order. */
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static inline __m512i
words32(const float *s, int p, int kc) {
    const __m512 lo = _mm512_maskz_loadu_ps(upto(kc - p), s + p),
                 hi = _mm512_maskz_loadu_ps(upto(kc - p - 16), s + p + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* lo's 16 values first */
}

/* The words of pair q of 16 lines r .. r + 15 contiguous across (ls = 1): the line
 * (value 2q, value 2q + 1) of each, zero for lines at or past `lines` and pairs at or past kp. */
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static inline __m512i
pair_across(const float *src, ptrdiff_t ps, int r, int lines, int q, int kc) {
    const __mmask16 m = 2 * q < kc ? upto(lines - r) : 0, m1 = 2 * q + 1 < kc ? m : 0;
    const float *s0 = src + 2 * q * ps + r;
    const __m256bh lo = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s0)),
                   hi = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m1, s0 + ps));
    return _mm512_or_si512(_mm512_cvtepu16_epi32((__m256i)lo),
                           _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)hi), 16));
}

/* pack_block with the CPU's conversion: lines contiguous across (ls = 1: a row-major B, a
 * transposed A) are read a whole row of the block at a time, 16 words of a pair per store;
 * lines contiguous along k (ps = 1: a transposed B, a row-major A) 16 lines x 16 pairs at a
 * time (for panels of fewer than 16 lines, a panel's lines and zeros), converted line by line
 * and transposed in registers; other strides panel by panel (pack_panel). */
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static void
pack_block_avx512(int R, int lines, int kc, const float *src, ptrdiff_t ls, ptrdiff_t ps, int kpp,
                  uint32_t *restrict dst) {
    const int kp = (kc + 1) / 2;
    if (ps == 1 && (R % 16 == 0 || R < 16)) {
        /* G lines at a time (16, or a whole panel of fewer: the transpose's other rows zero) */
        const int padded = (lines + R - 1) / R * R, G = R < 16 ? R : 16;
        const __mmask16 keep = upto(G);
        for (int r = 0; r < padded; r += G) {
            uint32_t *panel = dst + (ptrdiff_t)(r / R) * kpp * R + r % R;
            for (int q0 = 0; q0 < kpp; q0 += 16) {
                __m512i v[16];
                for (int i = 0; i < 16; i++)
                    v[i] = i < G && r + i < lines ? words32(src + (r + i) * ls, 2 * q0, kc)
                                                  : _mm512_setzero_si512();
                transpose16(v);
                for (int i = 0; i < 16 && q0 + i < kpp; i++)
                    _mm512_mask_storeu_epi32(panel + (ptrdiff_t)(q0 + i) * R, keep, v[i]);
            }
        }
        return;
    }
    if (ls != 1 || ps == 1) {
        for (int r0 = 0; r0 < lines; r0 += R)
            pack_panel(R, lines - r0 < R ? lines - r0 : R, kc, src + r0 * ls, ls, ps,
                       dst + (ptrdiff_t)(r0 / R) * kpp * R);
        zero_pad_pairs(R, lines, kp, kpp, dst);
        return;
    }
    const int padded = (lines + R - 1) / R * R;
    /* pair q's two rows of the source read in order, 16 lines (or to the end of r's panel) at a
     * time */
    for (int q = 0; q < kp; q++)
        for (int r = 0; r < padded;) {
            const int in_panel = R - r % R, n = in_panel < 16 ? in_panel : 16;
            _mm512_mask_storeu_epi32(dst + (ptrdiff_t)(r / R) * kpp * R + r % R + q * R, upto(n),
                                     pair_across(src, ps, r, lines, q, kc));
            r += n;
        }
    zero_pad_pairs(R, lines, kp, kpp, dst);
}
#endif

typedef void (*bf16_packer)(int, int, int, const float *, ptrdiff_t, ptrdiff_t, int, uint32_t *);

/* A's block for the AMX kernels, tile by tile: in each panel of AMX_MR rows, 16 pairs of k
 * at a time, the panel's rows' 16 pairs in turn (64 bytes each), so that each tile of A the
 * kernel loads (16 rows x 16 pairs) is 1 KB in one piece, and a panel's tiles follow each
 * other in the order it loads them. Row r's pairs q .. q + 15 (q a multiple of 16) start at
 * dst + tiled(r, q, kpp). Rows up to a multiple of AMX_MR and pairs from kp to kpp zero. */
static ptrdiff_t tiled(int r, int q, int kpp) {
    return (ptrdiff_t)(r / AMX_MR) * AMX_MR * kpp + (ptrdiff_t)q * AMX_MR + (r % AMX_MR) * 16;
}

/* The tiled A with `block` (pack_block or pack_block_avx512: the same words), panel by panel,
 * then transposed. R = AMX_MR. */
static void pack_rows_with(bf16_packer block, int R, int lines, int kc, const float *src,
                           ptrdiff_t ls, ptrdiff_t ps, int kpp, uint32_t *restrict dst) {
    const int kp = (kc + 1) / 2;
    _Alignas(64) uint32_t panel[AMX_MR * (KC / 2)];
    for (int r0 = 0; r0 < lines; r0 += R) {
        block(R, lines - r0 < R ? lines - r0 : R, kc, src + r0 * ls, ls, ps, kp, panel);
        for (int r = 0; r < R; r++)
            for (int q = 0; q < kpp; q++)
                dst[tiled(r0 + r, q & ~15, kpp) + (q & 15)] = q < kp ? panel[q * R + r] : 0;
    }
}

static void pack_rows(int R, int lines, int kc, const float *src, ptrdiff_t ls, ptrdiff_t ps,
                      int kpp, uint32_t *restrict dst) {
    pack_rows_with(pack_block, R, lines, kc, src, ls, ps, kpp, dst);
}

#if AG_CPU_X86_KERNELS
/* pack_rows with the CPU's conversion (kpp a multiple of 16): a row contiguous along k (ps = 1)
 * is already a row of pairs, 32 values to 16 words a store; rows contiguous across (ls = 1, a
 * transposed A) come 16 pairs x 16 rows at a time, transposed in registers; else through
 * panels (pack_rows_with). */
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static void
pack_rows_avx512(int R, int lines, int kc, const float *src, ptrdiff_t ls, ptrdiff_t ps, int kpp,
                 uint32_t *restrict dst) {
    const int padded = (lines + R - 1) / R * R;
    if (ps == 1) {
        for (int r = 0; r < padded; r++)
            for (int q = 0; q < kpp; q += 16) {
                const __m512i w =
                    r < lines ? words32(src + r * ls, 2 * q, kc) : _mm512_setzero_si512();
                _mm512_storeu_si512(dst + tiled(r, q, kpp), w);
            }
        return;
    }
    if (ls == 1 && padded % 16 == 0) {
        for (int q0 = 0; q0 < kpp; q0 += 16) /* 32 rows of the source, along them */
            for (int r = 0; r < padded; r += 16) {
                __m512i v[16];
                for (int i = 0; i < 16; i++) v[i] = pair_across(src, ps, r, lines, q0 + i, kc);
                transpose16(v);
                for (int i = 0; i < 16; i++) _mm512_storeu_si512(dst + tiled(r + i, q0, kpp), v[i]);
            }
        return;
    }
    pack_rows_with(pack_block_avx512, R, lines, kc, src, ls, ps, kpp, dst);
}
#endif

/* ---- micro-kernels: tile c (mr x nr, row stride rsc, columns contiguous) = [c +] a b ----
 * kp: the pairs of k in the packed panels (a multiple of AMX_PAIRS for the AMX kernels). */

/* vdpbf16ps in C (ag_bf16_fma, ag_op.h: the instruction's bits), row by row. A: an MR-line
 * panel (pair q of row i at a[q MR + i]); B: an NR-line panel (pair q of column j at
 * b[q NR + j]). */
static void kernel_emulated(int kp, const uint32_t *a, const uint32_t *b, float *c, ptrdiff_t rsc,
                            bool load, const float *cn) {
    (void)cn;
    float acc[NR];
    for (int i = 0; i < MR; i++) {
        for (int j = 0; j < NR; j++) acc[j] = load ? c[i * rsc + j] : 0.0f;
        for (int q = 0; q < kp; q++) {
            const uint32_t wa = a[q * MR + i], *bq = b + q * NR;
            for (int j = 0; j < NR; j++) {
                const float t = ag_bf16_fma(acc[j], (uint16_t)(wa >> 16), (uint16_t)(bq[j] >> 16));
                acc[j] = ag_bf16_fma(t, (uint16_t)wa, (uint16_t)bq[j]);
            }
        }
        for (int j = 0; j < NR; j++) c[i * rsc + j] = acc[j];
    }
}

#if AG_CPU_X86_KERNELS
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static void
kernel_avx512bf16(int kp, const uint32_t *a, const uint32_t *b, float *c, ptrdiff_t rsc, bool load,
                  const float *cn) {
    __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        acc0[i] = load ? _mm512_loadu_ps(c + i * rsc) : _mm512_setzero_ps();
        acc1[i] = load ? _mm512_loadu_ps(c + i * rsc + 16) : _mm512_setzero_ps();
    }
    if (cn) /* the next tile's C, its 24 lines, while this one multiplies */
        for (int i = 0; i < MR; i++) {
            __builtin_prefetch(cn + i * rsc, 1, 3);
            __builtin_prefetch(cn + i * rsc + 16, 1, 3);
        }
    for (int q = 0; q < kp; q++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + q * NR),
                       b1 = (__m512bh)_mm512_loadu_si512(b + q * NR + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[q * MR + i]);
            acc0[i] = _mm512_dpbf16_ps(acc0[i], ai, b0);
            acc1[i] = _mm512_dpbf16_ps(acc1[i], ai, b1);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(c + i * rsc, acc0[i]);
        _mm512_storeu_ps(c + i * rsc + 16, acc1[i]);
    }
}
#endif

typedef void (*bf16_kernel)(int, const uint32_t *, const uint32_t *, float *, ptrdiff_t, bool,
                            const float *);

/* ---- the kernels, and the one in use ---- */

typedef struct bf16_kernel_desc {
    const char *name; /* ag_gemm_bf16_kernel's answer */
    int mr, nr;       /* the tile of C */
    int pairs;        /* a panel's pairs of k are padded to a multiple of this */
    bf16_kernel kern;
    bf16_packer pack_a, pack_b;
    bool tiles; /* AMX: each thread loads the tile configuration, then releases it */
} bf16_kernel_desc;

enum { K_EMULATED, K_AVX512, K_AMX_EMULATED, K_AMX, N_KERNELS };

static const bf16_kernel_desc KERNELS[N_KERNELS] = {
    [K_EMULATED] = {"emulated 12x32", MR, NR, 1, kernel_emulated, pack_block, pack_block, false},
#if AG_CPU_X86_KERNELS
    [K_AVX512] = {"avx512bf16 12x32", MR, NR, 1, kernel_avx512bf16, pack_block_avx512,
                  pack_block_avx512, false},
    [K_AMX] = {"amx 32x32", AMX_MR, AMX_NR, AMX_PAIRS, ag__bf16_kernel_amx, pack_rows_avx512,
               pack_block_avx512, true},
#endif
    [K_AMX_EMULATED] = {"amx-emulated 32x32", AMX_MR, AMX_NR, AMX_PAIRS,
                        ag__bf16_kernel_amx_emulated, pack_rows, pack_block, false},
};

static bool runs(int k) { /* this CPU can run kernel k */
    switch (k) {
    case K_AVX512: return ag_cpu_has(AG_CPU_AVX512BF16 | AG_CPU_AVX512BW);
    case K_AMX: return ag_cpu_has(AG_CPU_AMX_BF16 | AG_CPU_AVX512BF16 | AG_CPU_AVX512BW);
    default: return true;
    }
}

/* The CPU's best kernel, or the emulation of its chain. */
static int best(bool emulated) {
    if (runs(K_AMX)) return emulated ? K_AMX_EMULATED : K_AMX;
    return runs(K_AVX512) && !emulated ? K_AVX512 : K_EMULATED;
}

static _Atomic int chosen = -1; /* -1: not yet; else K_* (any thread) */

static int kernel_in_use(void) {
    if (chosen < 0) {
        const char *env = getenv("TG_BF16_KERNEL");
        if (env && !strcmp(env, "emulated")) chosen = best(true);
        else if (env && !strcmp(env, "avx512bf16")) chosen = runs(K_AVX512) ? K_AVX512 : K_EMULATED;
        else chosen = best(false);
    }
    return chosen;
}

bool ag_bf16_native(void) {
    const int k = kernel_in_use();
    return k == K_AVX512 || k == K_AMX;
}

bool ag_bf16_faster(void) {
    const int k = kernel_in_use();
    return k == K_AMX || (k == K_AVX512 && ag_cpu_has(AG_CPU_BF16_DOT_FULL_RATE));
}

bool ag_bf16_emulate(bool on) {
    const bool was = !ag_bf16_native();
    chosen = best(on);
    return was;
}

int ag_bf16_set_kernel(const char *name) {
    if (!name)
        return ag_error("ag_bf16_set_kernel: no name (expected auto, avx512bf16, "
                        "emulated, amx or amx-emulated)");
    for (int k = 0; k < N_KERNELS; k++) {
        const char *kn = KERNELS[k].name;
        const size_t word = kn ? strcspn(kn, " ") : 0;
        if (!kn || (strcmp(name, kn) && (strncmp(name, kn, word) || name[word]))) continue;
        if (!runs(k))
            return ag_error("ag_bf16_set_kernel: '%s' needs %s, which this CPU (or the operating "
                            "system) does not give",
                            name, k == K_AMX ? "AMX-BF16 tiles" : "AVX512-BF16");
        chosen = k;
        return 0;
    }
    if (!strcmp(name, "auto")) {
        chosen = best(false);
        return 0;
    }
    return ag_error("ag_bf16_set_kernel: unknown kernel '%s' (expected auto, avx512bf16, "
                    "emulated, amx or amx-emulated)",
                    name);
}

const char *ag_gemm_bf16_kernel(void) { return KERNELS[kernel_in_use()].name; }

/* ---- the blocked product ---- */

typedef struct bf16_job {
    const bf16_kernel_desc *k;
    int m, nc, kc, kpp; /* kpp: (kc + 1) / 2 pairs, padded to a multiple of k->pairs */
    const float *a;     /* A at column pc */
    ptrdiff_t rsa, csa;
    const uint32_t *bpack; /* B's block, packed */
    float *c;              /* C at column jc */
    ptrdiff_t rsc, csc;
    bool load; /* accumulate into C (beta = 1 or a later k block) */
} bf16_job;

/* The calling thread's buffer for B's packed block, kept between calls (freed by
 * ag__bf16_scratch_free; 512 KB). A's packed block (48 KB) lives on each thread's stack. */
static _Thread_local uint32_t *bpack_buf;

void ag__bf16_scratch_free(void) {
    free(bpack_buf);
    bpack_buf = NULL;
}

/* One tile of C (mr x nr at c): in place when whole with contiguous columns, else through a
 * zero-padded copy (the padded lanes are computed and dropped). cn: the next tile's C, to
 * prefetch (whole, in place), or NULL. */
static void tile(const bf16_job *j, const uint32_t *ap, const uint32_t *bp, float *c, int mr,
                 int nr, const float *cn) {
    const int MT = j->k->mr, NT = j->k->nr;
    if (mr == MT && nr == NT && j->csc == 1) {
        j->k->kern(j->kpp, ap, bp, c, j->rsc, j->load, cn);
        return;
    }
    float t[AMX_MR * AMX_NR];
    if (j->load)
        for (int i = 0; i < MT; i++)
            for (int jj = 0; jj < NT; jj++)
                t[i * NT + jj] = i < mr && jj < nr ? c[i * j->rsc + jj * j->csc] : 0.0f;
    j->k->kern(j->kpp, ap, bp, t, NT, j->load, NULL);
    for (int i = 0; i < mr; i++)
        for (int jj = 0; jj < nr; jj++) c[i * j->rsc + jj * j->csc] = t[i * NT + jj];
}

/* Row blocks [b0, b1) of MC rows: pack A's block, run its tiles against every panel of B. */
static void row_blocks(void *ctx, ptrdiff_t b0, ptrdiff_t b1) {
    const bf16_job *j = ctx;
    const int MT = j->k->mr, NT = j->k->nr;
    _Alignas(64) uint32_t apack_buf[MC * (KC / 2)];
#if AG_CPU_X86_KERNELS
    if (j->k->tiles) ag__bf16_amx_begin();
#endif
    for (ptrdiff_t blk = b0; blk < b1; blk++) {
        const int i0 = (int)blk * MC, mc = j->m - i0 < MC ? j->m - i0 : MC;
        j->k->pack_a(MT, mc, j->kc, j->a + i0 * j->rsa, j->rsa, j->csa, j->kpp, apack_buf);
        for (int jr = 0; jr < j->nc; jr += NT) {
            const uint32_t *bp = j->bpack + (ptrdiff_t)jr * j->kpp;
            const int nr = j->nc - jr < NT ? j->nc - jr : NT;
            for (int ir = 0; ir < mc; ir += MT) {
                /* the tile after this one: the next rows, else the next panel's first */
                const int in = ir + MT < mc ? ir + MT : 0, jn = ir + MT < mc ? jr : jr + NT;
                const bool whole = in + MT <= mc && jn + NT <= j->nc && j->csc == 1;
                tile(j, apack_buf + (ptrdiff_t)ir * j->kpp, bp,
                     j->c + (i0 + ir) * j->rsc + jr * j->csc, mc - ir < MT ? mc - ir : MT, nr,
                     whole ? j->c + (i0 + in) * j->rsc + jn : NULL);
            }
        }
    }
#if AG_CPU_X86_KERNELS
    if (j->k->tiles) ag__bf16_amx_end();
#endif
}

/* Panels [p0, p1) of B's block (NR columns each, the last one may be short), into the
 * caller's buffer (a helping thread has its own). */
typedef struct bpack_job {
    const bf16_job *j;
    const float *b; /* B at (pc, jc) */
    ptrdiff_t rsb, csb;
    uint32_t *dst;
} bpack_job;

static void pack_b_panels(void *ctx, ptrdiff_t p0, ptrdiff_t p1) {
    const bpack_job *p = ctx;
    const bf16_job *j = p->j;
    const int R = j->k->nr, c0 = (int)p0 * R, c1 = (int)p1 * R < j->nc ? (int)p1 * R : j->nc;
    j->k->pack_b(R, c1 - c0, j->kc, p->b + c0 * p->csb, p->csb, p->rsb, j->kpp,
                 p->dst + (ptrdiff_t)c0 * j->kpp);
}

int ag_gemm_bf16(int m, int n, int k, const float *a, ptrdiff_t rsa, ptrdiff_t csa, const float *b,
                 ptrdiff_t rsb, ptrdiff_t csb, float beta, float *c, ptrdiff_t rsc, ptrdiff_t csc) {
    if (m < 0 || n < 0 || k < 0 || (beta != 0 && beta != 1))
        return ag_error("ag_gemm_bf16: m %d, n %d, k %d, beta %g: expected sizes >= 0 and beta "
                        "0 or 1",
                        m, n, k, (double)beta);
    if (m == 0 || n == 0) return 0;
    if (!bpack_buf && !(bpack_buf = malloc(sizeof(uint32_t) * NC * (KC / 2))))
        return ag_error("ag_gemm_bf16: out of memory for the packed block of B (%d KB, %d x %d "
                        "bf16) of a %d x %d x %d product (m x n x k)",
                        (int)(sizeof(uint32_t) * NC * (KC / 2) / 1024), KC, NC, m, n, k);
    bf16_job j = {.k = &KERNELS[kernel_in_use()],
                  .m = m,
                  .rsa = rsa,
                  .csa = csa,
                  .bpack = bpack_buf,
                  .rsc = rsc,
                  .csc = csc};
    const int P = j.k->pairs;
    const ptrdiff_t nblocks = (m + MC - 1) / MC;
    for (int jc = 0; jc < n; jc += NC) {
        j.nc = n - jc < NC ? n - jc : NC;
        j.c = c + jc * csc;
        for (int pc = 0; pc == 0 || pc < k; pc += KC) {
            j.kc = k - pc < KC ? k - pc : KC;
            j.kpp = ((j.kc + 1) / 2 + P - 1) / P * P;
            bpack_job pj = {&j, b + pc * rsb + jc * csb, rsb, csb, bpack_buf};
            const int R = j.k->nr; /* panels of at least 64K values a thread */
            ag_parallel_blocks((j.nc + R - 1) / R, 65536 / (R * j.kc + 1) + 1, pack_b_panels, &pj);
            j.a = a + pc * csa;
            j.load = beta != 0 || pc > 0;
            const double work = (double)m * j.nc * j.kc;
            ag_parallel_blocks(nblocks, work >= (1 << 21) ? 1 : nblocks, row_blocks, &j);
        }
    }
    return 0;
}
