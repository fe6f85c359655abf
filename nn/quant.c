/* quant.c -- int8 Linear for inference: per-channel weight quantization, per-row activation
 * quantization, the int32 kernels (portable, AVX2, AVX512-VNNI and AMX, chosen at run time) and
 * the op (the math and the layout in nn/quant.h). */
#include "nn/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_cpu.h"
#include "autograd/ag_op.h"
#include "nn/internal.h"

const char *const nn_quant_names[] = {"none", "int8", "bf16", NULL};

#define QB 16 /* channels per block: one 512-bit register of int32 sums */

/* ---- weights ---- */

/* Round to nearest, ties to even (the default rounding mode), clamped to [-127, 127]. */
static int q8(double v) {
    double r = nearbyint(v);
    return r > 127 ? 127 : r < -127 ? -127 : (int)r;
}

nn_qweight *nn_qweight_new(const ag_real *w, int out, int in, ptrdiff_t ldw) {
    if (!w || out <= 0 || in <= 0) {
        ag_error("nn_qweight_new: weight %s (%d, %d), expected a weight with out, in > 0",
                 w ? "given" : "NULL", out, in);
        return NULL;
    }
    nn_qweight *q = calloc(1, sizeof *q);
    int blocks = (out + QB - 1) / QB, kp = (in + 3) / 4 * 4;
    if (q) {
        *q = (nn_qweight){.out = out, .in = in, .kp = kp};
        q->q = calloc((size_t)blocks * QB * (size_t)kp, 1);
        q->scale = malloc(sizeof *q->scale * (size_t)out);
        q->csum = malloc(sizeof *q->csum * (size_t)out);
    }
    if (!q || !q->q || !q->scale || !q->csum) {
        nn_qweight_free(q);
        ag_error("nn_qweight_new: out of memory for a (%d, %d) weight", out, in);
        return NULL;
    }
    for (int j = 0; j < out; j++) {
        const ag_real *row = w + (ptrdiff_t)j * ldw;
        double amax = 0;
        for (int k = 0; k < in; k++) amax = fmax(amax, fabs((double)row[k]));
        q->scale[j] = (float)(amax / 127);
        double inv = amax > 0 ? 127 / amax : 0;
        int8_t *blk = q->q + (size_t)(j / QB) * QB * (size_t)kp;
        int32_t c = 0;
        for (int k = 0; k < in; k++) {
            int v = q8((double)row[k] * inv);
            blk[(size_t)(k / 4) * QB * 4 + (size_t)(j % QB) * 4 + (size_t)(k % 4)] = (int8_t)v;
            c += v;
        }
        q->csum[j] = c;
    }
    return q;
}

void nn_qweight_free(nn_qweight *w) {
    if (!w) return;
    free(w->q);
    free(w->scale);
    free(w->csum);
    free(w);
}

int nn_qweight_at(const nn_qweight *w, int j, int k) {
    const int8_t *blk = w->q + (size_t)(j / QB) * QB * (size_t)w->kp;
    return blk[(size_t)(k / 4) * QB * 4 + (size_t)(j % QB) * 4 + (size_t)(k % 4)];
}

/* Both loops vectorize: the maximum of |x| as the maximum of its bit patterns (a non-negative
 * float orders as its bits do; a NaN or infinity in x gives a NaN scale, as the float product
 * would give NaN), and rounding to nearest even as (v + 1.5 2^23) - 1.5 2^23, exact for
 * |v| <= 2^22 (here |v| <= 127 up to one rounding) in the default rounding mode, the C11 build
 * never reassociating it. */
float nn_qrow(const ag_real *x, int in, int kp, uint8_t *u) {
    uint32_t bmax = 0;
    for (int k = 0; k < in; k++) {
        float a = fabsf((float)x[k]);
        uint32_t b;
        memcpy(&b, &a, 4);
        bmax = b > bmax ? b : bmax;
    }
    float amax;
    memcpy(&amax, &bmax, 4);
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    const float magic = 12582912.0f; /* 1.5 2^23 */
    for (int k = 0; k < in; k++) {
        float r = ((float)x[k] * inv + magic) - magic;
        r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
        u[k] = (uint8_t)((int)r + 128);
    }
    memset(u + in, 128, (size_t)(kp - in));
    return amax / 127.0f;
}

/* ---- the int32 kernels ----
 * Both compute acc (m, out) = u (m, kp) qw^T over the packed layout of nn/quant.h, channel
 * block by channel block: acc[i][16 jb + j] = sum_g sum_t u[i][4 g + t] blk[g][j][t]. */

static void qgemm_portable(int m, const uint8_t *u, const nn_qweight *w, int32_t *acc) {
    int blocks = (w->out + QB - 1) / QB, groups = w->kp / 4;
    for (int i = 0; i < m; i++) {
        const uint8_t *ur = u + (size_t)i * (size_t)w->kp;
        for (int b = 0; b < blocks; b++) {
            const int8_t *blk = w->q + (size_t)b * QB * (size_t)w->kp;
            int32_t s[QB] = {0};
            for (int g = 0; g < groups; g++)
                for (int j = 0; j < QB; j++)
                    for (int t = 0; t < 4; t++)
                        s[j] += (int32_t)ur[4 * g + t] * (int32_t)blk[(g * QB + j) * 4 + t];
            int n = w->out - b * QB < QB ? w->out - b * QB : QB;
            memcpy(acc + (size_t)i * (size_t)w->out + (size_t)b * QB, s, sizeof *s * (size_t)n);
        }
    }
}

/* Where the VNNI kernel's sums go: the int32 sums themselves (y NULL: acc, (m, out)), or the
 * layer's output y (m, out) through nn_qepilogue's arithmetic, lane by lane (qstore), so that
 * the sums never leave the registers. sx: the rows' scales; bias: NULL or out values. */
typedef struct qdest {
    int32_t *acc;
    ag_real *y;
    const float *sx;
    const nn_qweight *w;
    const ag_real *bias;
} qdest;

#if AG_CPU_X86_KERNELS
#include <immintrin.h>

/* The sums of channels col .. col + 15 (mask) of row `row` to d: stored, or through
 * nn_qepilogue's y_ij = (float)(acc_ij - 128 c_j) * (sx_i sw_j) + b_j with the same operations
 * in the same order (an exact conversion of the int32 difference, two products, one sum; no
 * FMA), hence the same bits (the float32 engine; the float64 one stores its sums). */
__attribute__((target("avx512f,avx512vnni"), always_inline)) static inline void
qstore(const qdest *d, int out, int row, int col, __mmask16 mask, __m512i s) {
    if (!d->y) {
        _mm512_mask_storeu_epi32(d->acc + (size_t)row * (size_t)out + (size_t)col, mask, s);
        return;
    }
#ifndef TG_DOUBLE
    const __m512i c128 = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(mask, d->w->csum + col), 7);
    const __m512 sc =
        _mm512_mul_ps(_mm512_set1_ps(d->sx[row]), _mm512_maskz_loadu_ps(mask, d->w->scale + col));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s, c128)), sc);
    if (d->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, d->bias + col));
    _mm512_mask_storeu_ps(d->y + (size_t)row * (size_t)out + (size_t)col, mask, v);
#endif
}
#define NN_TILE_STORE(ctx, out, row, col, mask, s)                                                 \
    qstore((const qdest *)(ctx), out, row, col, mask, s)

/* qgemm_vnni(m, u, kp, q, out, dest): u qw^T by the register tiles of
 * nn/quant_tile_internal.h, one vpdpbusd per row, block and group of 4 bytes (each 32-bit lane
 * j adds u[4g .. 4g + 3] . blk[g][j][0 .. 3]: 4 products u8 x s8 of at most 32,385 in size, so
 * the sum of 4 cannot wrap; the lanes are the block's 16 channels), the sums to a qdest. */
#define NN_TILE_KERNEL qgemm_vnni
#define NN_TILE_TARGET "avx512f,avx512vnni"
#define NN_TILE_STEP(s, xw, ww) _mm512_dpbusd_epi32(s, xw, ww)
#include "nn/quant_tile_internal.h"

/* ---- the AVX2 kernel ----
 * qgemm_avx2(m, u, w, acc): the portable kernel's sums with AVX2's byte products, exact.
 * vpmaddubsw multiplies unsigned by signed bytes and adds each pair into int16, saturating; on
 * u (up to 255) and qw (up to 127) a pair would reach 64,770. So it is given |qw| (0..127) and
 * qx = u - 128 (-127..127) with qw's sign (vpsignb): a pair |qw_a| qx'_a + |qw_b| qx'_b is at
 * most 2 * 127 * 127 = 32,258 in size and never saturates, and vpmaddwd by ones adds a
 * channel's two pairs (its 4 bytes of the group) into its int32 lane. That sums qx . qw =
 * acc - 128 c_j, so 128 c_j is added back at the end: the same integers as the other kernels.
 * A block's 16 channels are two registers of 8 lanes; rows 4 at a time share each group's
 * loads of the weight (and their absolute values). */

/* Rows i0 .. i0 + R - 1 against block b: R x 2 accumulators in registers when R is a constant
 * (the loops unrolled). */
__attribute__((target("avx2"), always_inline)) static inline void
qavx2_tile(int R, int i0, int b, const uint8_t *u, const nn_qweight *w, int32_t *acc) {
    const int8_t *blk = w->q + (size_t)b * QB * (size_t)w->kp;
    const uint8_t *x0 = u + (size_t)i0 * (size_t)w->kp;
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(-128);
    __m256i s[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) s[r][0] = s[r][1] = _mm256_setzero_si256();
    for (int g = 0; g < w->kp / 4; g++) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * g)),
                      w1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * g + 32));
        const __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            int32_t word;
            memcpy(&word, x0 + (size_t)r * (size_t)w->kp + 4 * (size_t)g, 4);
            const __m256i x = _mm256_xor_si256(_mm256_set1_epi32(word), flip);
            s[r][0] = _mm256_add_epi32(
                s[r][0],
                _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(x, w0)), ones));
            s[r][1] = _mm256_add_epi32(
                s[r][1],
                _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(x, w1)), ones));
        }
    }
    const int c0 = b * QB, n = w->out - c0 < QB ? w->out - c0 : QB;
    int32_t c128[QB] = {0}, sums[QB];
    for (int j = 0; j < n; j++) c128[j] = 128 * w->csum[c0 + j];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        _mm256_storeu_si256((__m256i *)sums, s[r][0]);
        _mm256_storeu_si256((__m256i *)(sums + 8), s[r][1]);
        int32_t *dst = acc + (size_t)(i0 + r) * (size_t)w->out + c0;
        for (int j = 0; j < n; j++) dst[j] = sums[j] + c128[j];
    }
}

__attribute__((target("avx2"))) static void qgemm_avx2(int m, const uint8_t *u, const nn_qweight *w,
                                                       int32_t *acc) {
    const int blocks = (w->out + QB - 1) / QB;
    for (int i0 = 0; i0 < m; i0 += 4)
        for (int b = 0; b < blocks; b++) {
            if (m - i0 >= 4) qavx2_tile(4, i0, b, u, w, acc); /* the registers' shape known */
            else qavx2_tile(m - i0, i0, b, u, w, acc);
        }
}
#endif

/* ---- the AMX kernel ----
 * tdpbusd on tiles of 16 rows x 64 bytes: C (16 x 16 int32) += A (16 rows of 64 u8) B (16
 * groups of 16 channels x 4 s8), c[i][j] += sum_g sum_t a[i][4 g + t] b[g][4 j + t]. 16 groups of
 * a block of the packed weight are a tile of B as they lie (64 bytes apart), and 16 rows of u
 * (kp bytes apart) a tile of A, so neither is copied. Rows 32 at a time, two blocks (32
 * channels) at a time: C0 C1 / C2 C3 = (A0 / A1) (B0 B1) on tiles 0-3, 4-5, 6-7, over the
 * chunks of 64 bytes of k, then stored to t (32 x 32 int32). FINISH(i, nb, s) takes the sums
 * of row i (of 32) and block nb (of 2) at s: it adds the groups past the last whole chunk (kp %
 * 64 bytes) and hands the 16 sums on. The rows past the last 16 go to another kernel. Integer
 * sums: the same bits as the other kernels whatever the order. One body for the instructions
 * and for their emulation in C (any CPU: the tiles' addresses, strides and loops tested). */
#define QAMX_BODY(ZERO, LOAD, DP, STORE, FINISH)                                                   \
    for (int i0 = 0; i0 < m16; i0 += 32) {                                                         \
        const int rows = m16 - i0 < 32 ? 16 : 32;                                                  \
        const uint8_t *x = u + (size_t)i0 * kp;                                                    \
        for (int b = 0; b < blocks; b += 2) {                                                      \
            const int nbs = b + 1 < blocks ? 2 : 1;                                                \
            const uint8_t *blk = wb + (size_t)16 * b * kp;                                         \
            ZERO(0);                                                                               \
            ZERO(1);                                                                               \
            ZERO(2);                                                                               \
            ZERO(3);                                                                               \
            for (size_t c = 0; c < chunks; c++) {                                                  \
                LOAD(4, x + 64 * c, kp);                                                           \
                LOAD(6, blk + 1024 * c, 64);                                                       \
                DP(0, 4, 6);                                                                       \
                if (nbs > 1) {                                                                     \
                    LOAD(7, blk + 16 * kp + 1024 * c, 64);                                         \
                    DP(1, 4, 7);                                                                   \
                }                                                                                  \
                if (rows > 16) {                                                                   \
                    LOAD(5, x + 16 * kp + 64 * c, kp);                                             \
                    DP(2, 5, 6);                                                                   \
                    if (nbs > 1) DP(3, 5, 7);                                                      \
                }                                                                                  \
            }                                                                                      \
            STORE(0, t, 128);                                                                      \
            STORE(1, t + 16, 128);                                                                 \
            STORE(2, t + 512, 128);                                                                \
            STORE(3, t + 528, 128);                                                                \
            for (int i = 0; i < rows; i++)                                                         \
                for (int nb = 0; nb < nbs; nb++) FINISH(i0 + i, b + nb, t + 32 * i + 16 * nb);     \
        }                                                                                          \
    }

typedef struct soft_tile {
    int32_t w[16][16]; /* 16 rows of 64 bytes */
} soft_tile;

/* tdpbusd c, a, b in C. */
static void soft_dpbusd(soft_tile *c, const soft_tile *a, const soft_tile *b) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            for (int g = 0; g < 16; g++) {
                const uint8_t *ab = (const uint8_t *)&a->w[i][g];
                const int8_t *bb = (const int8_t *)&b->w[g][j];
                for (int q = 0; q < 4; q++) c->w[i][j] += (int32_t)ab[q] * (int32_t)bb[q];
            }
}

static void soft_load(soft_tile *t, const void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy(t->w[r], (const char *)p + r * stride, 64);
}

static void soft_store(const soft_tile *t, void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy((char *)p + r * stride, t->w[r], 64);
}

#define SOFT_ZERO(n) memset(&tm[n], 0, sizeof tm[n])
#define SOFT_LOAD(n, p, stride) soft_load(&tm[n], p, stride)
#define SOFT_DP(c, a, b) soft_dpbusd(&tm[c], &tm[a], &tm[b])
#define SOFT_STORE(n, p, stride) soft_store(&tm[n], p, stride)
/* The groups past the whole chunks added in C, the sums stored to acc. */
#define SOFT_FINISH(row, blk_, s)                                                                  \
    do {                                                                                           \
        const uint8_t *xr = u + (size_t)(row)*kp;                                                  \
        const int8_t *bk = (const int8_t *)wb + (size_t)16 * (blk_)*kp;                            \
        int32_t sums[16];                                                                          \
        memcpy(sums, s, sizeof sums);                                                              \
        for (size_t g = 16 * chunks; g < kp / 4; g++)                                              \
            for (int j = 0; j < 16; j++)                                                           \
                for (int q = 0; q < 4; q++)                                                        \
                    sums[j] += (int32_t)xr[4 * g + q] * (int32_t)bk[64 * g + 4 * j + q];           \
        const int c0 = 16 * (blk_), n = out - c0 < 16 ? out - c0 : 16;                             \
        memcpy(acc + (size_t)(row) * (size_t)out + c0, sums, sizeof *sums * (size_t)n);            \
    } while (0)

/* The AMX kernel on tiles in memory, its sums to acc (m, out); the rows past the last 16 by
 * the portable kernel. */
static void qgemm_amx_emulated(int m, const uint8_t *u, const nn_qweight *w, int32_t *acc) {
    const size_t kp = (size_t)w->kp, chunks = kp / 64;
    const int out = w->out, blocks = (out + 15) / 16, m16 = m / 16 * 16;
    const uint8_t *wb = (const uint8_t *)w->q;
    soft_tile tm[8];
    int32_t t[32 * 32];
    QAMX_BODY(SOFT_ZERO, SOFT_LOAD, SOFT_DP, SOFT_STORE, SOFT_FINISH);
    if (m16 < m) qgemm_portable(m - m16, u + m16 * kp, w, acc + (size_t)m16 * (size_t)out);
}

#if AG_CPU_X86_KERNELS
/* The tile configuration (palette 1): tiles 0-7 of 16 rows x 64 bytes. */
static const struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} QAMX_CONFIG = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* The groups past the whole chunks by vpdpbusd, the sums to d (qstore). */
#define AMX_FINISH(row, blk_, s)                                                                   \
    do {                                                                                           \
        const uint8_t *xr = u + (size_t)(row)*kp, *bk = wb + (size_t)16 * (blk_)*kp;               \
        __m512i v = _mm512_loadu_si512((const void *)(s));                                         \
        for (size_t g = 16 * chunks; g < kp / 4; g++) {                                            \
            int32_t a;                                                                             \
            memcpy(&a, xr + 4 * g, 4);                                                             \
            v = _mm512_dpbusd_epi32(v, _mm512_set1_epi32(a),                                       \
                                    _mm512_loadu_si512((const void *)(bk + 64 * g)));              \
        }                                                                                          \
        const int c0 = 16 * (blk_), n = out - c0 < 16 ? out - c0 : 16;                             \
        qstore(d, out, row, c0, (__mmask16)((1u << n) - 1u), v);                                   \
    } while (0)

/* qgemm_amx(m, u, kp, wb, out, d): as qgemm_vnni, on the tiles (the calling thread loads the
 * configuration and releases it); the rows past the last 16 by qgemm_vnni. */
__attribute__((target("amx-tile,amx-int8,avx512f,avx512vnni"))) static void
qgemm_amx(int m, const uint8_t *u, size_t kp, const uint8_t *wb, int out, void *dest) {
    const qdest *d = dest;
    const size_t chunks = kp / 64;
    const int blocks = (out + 15) / 16, m16 = m / 16 * 16;
    if (m16) {
        _Alignas(64) int32_t t[32 * 32];
        _tile_loadconfig(&QAMX_CONFIG);
        QAMX_BODY(_tile_zero, _tile_loadd, _tile_dpbusd, _tile_stored, AMX_FINISH);
        _tile_release();
    }
    if (m16 < m) {
        const size_t off = (size_t)m16 * (size_t)out;
        qdest rest = {.acc = d->acc ? d->acc + off : NULL,
                      .y = d->y ? d->y + off : NULL,
                      .sx = d->sx ? d->sx + m16 : NULL,
                      .w = d->w,
                      .bias = d->bias};
        qgemm_vnni(m - m16, u + (size_t)m16 * kp, kp, wb, out, &rest);
    }
}
#endif

bool nn_qkernel_available(nn_qkernel k) {
    switch (k) {
    case NN_QK_AUTO:
    case NN_QK_PORTABLE:
    case NN_QK_AMX_EMULATED: return true;
    case NN_QK_VNNI: return ag_cpu_has(AG_CPU_AVX512F | AG_CPU_AVX512VNNI);
    case NN_QK_AMX: return ag_cpu_has(AG_CPU_AVX512F | AG_CPU_AVX512VNNI | AG_CPU_AMX_INT8);
    case NN_QK_AVX2: return ag_cpu_has(AG_CPU_AVX2);
    }
    return false;
}

nn_qkernel nn_qkernel_auto(void) {
    const nn_qkernel forced = nn_quant_forced();
    if (forced != NN_QK_AUTO && nn_qkernel_available(forced)) return forced;
    return nn_qkernel_available(NN_QK_AMX)    ? NN_QK_AMX
           : nn_qkernel_available(NN_QK_VNNI) ? NN_QK_VNNI
           : nn_qkernel_available(NN_QK_AVX2) ? NN_QK_AVX2
                                              : NN_QK_PORTABLE;
}

const char *nn_qkernel_name(nn_qkernel k) {
    switch (k) {
    case NN_QK_AUTO: return "auto";
    case NN_QK_PORTABLE: return "portable";
    case NN_QK_VNNI: return "avx512-vnni";
    case NN_QK_AMX: return "amx";
    case NN_QK_AMX_EMULATED: return "amx-emulated";
    case NN_QK_AVX2: return "avx2";
    }
    return "?";
}

int nn_qgemm_s32(nn_qkernel k, int m, const uint8_t *u, const nn_qweight *w, int32_t *acc) {
    if (k == NN_QK_AUTO) k = nn_qkernel_auto();
    if (!nn_qkernel_available(k))
        return ag_error("nn_qgemm_s32: kernel %s is not available on this CPU", nn_qkernel_name(k));
    if (m <= 0) return 0;
    if (k == NN_QK_AMX_EMULATED) {
        qgemm_amx_emulated(m, u, w, acc);
        return 0;
    }
#if AG_CPU_X86_KERNELS
    if (k == NN_QK_AVX2) {
        qgemm_avx2(m, u, w, acc);
        return 0;
    }
    if (k == NN_QK_VNNI || k == NN_QK_AMX) {
        (k == NN_QK_AMX ? qgemm_amx : qgemm_vnni)(m, u, (size_t)w->kp, (const uint8_t *)w->q,
                                                  w->out, &(qdest){.acc = acc});
        return 0;
    }
#endif
    qgemm_portable(m, u, w, acc);
    return 0;
}

/* ---- the op ---- */

/* y_ij = (acc_ij - 128 c_j) (sx_i sw_j) + b_j, in float, in this order (one rounding per
 * operation: the C11 build contracts nothing into an FMA). */
static void nn_qepilogue(int m, const int32_t *acc, const float *sx, const nn_qweight *w,
                         const ag_real *b, ag_real *y) {
    const int32_t *cs = w->csum;
    const float *sw = w->scale;
    for (int i = 0; i < m; i++) {
        const int32_t *a = acc + (size_t)i * (size_t)w->out;
        ag_real *yr = y + (size_t)i * (size_t)w->out;
        const float s = sx[i];
        if (b)
            for (int j = 0; j < w->out; j++)
                yr[j] = (ag_real)((float)(a[j] - 128 * cs[j]) * (s * sw[j]) + (float)b[j]);
        else
            for (int j = 0; j < w->out; j++)
                yr[j] = (ag_real)((float)(a[j] - 128 * cs[j]) * (s * sw[j]));
    }
}

ag_tensor *nn_quant_op_begin(ag_tape *t, const char *op, ag_tensor **xp, bool weight, int in,
                             int out, ag_tensor *bias) {
    ag_tensor *x = *xp;
    if (!x || !weight) return ag_report(t, "%s: x or the weight is NULL", op);
    if (x->ndim < 1 || x->shape[x->ndim - 1] != in)
        return ag_report(t, "%s: x's last dim is %d, the weight takes %d", op,
                         x->ndim ? x->shape[x->ndim - 1] : 0, in);
    if (bias && (bias->ndim != 1 || bias->shape[0] != out))
        return ag_report(t, "%s: bias of %d elements, expected (%d)", op,
                         bias->ndim == 1 ? bias->shape[0] : -1, out);
    ag_tensor *ins[2] = {x, bias};
    if (ag_op_wants_grad(t, bias ? 2 : 1, ins))
        return ag_report(t, "%s: inference only, turn the tape's recording off", op);
    if (!(x = *xp = ag_contiguous(t, x))) return NULL;
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out;
    return ag_op_new(t, x->ndim, shape, false); /* not zeroed: the op writes every element */
}

nn_qkernel nn_quant_forced(void) {
    static _Atomic int forced; /* 0: not read yet; else 1 + the kernel (the same in every thread) */
    int f = forced;
    if (!f) {
        const char *env = getenv("TG_QUANT_KERNEL");
        nn_qkernel k = NN_QK_AUTO;
        if (env)
            for (int i = NN_QK_PORTABLE; i <= NN_QK_AVX2; i++)
                if (i != NN_QK_AMX_EMULATED && !strcmp(env, nn_qkernel_name((nn_qkernel)i)))
                    k = (nn_qkernel)i;
        forced = f = 1 + (int)k;
    }
    return (nn_qkernel)(f - 1);
}

ag_tensor *nn_qlinear_forward(ag_tape *t, ag_tensor *x, const nn_qweight *w, ag_tensor *bias) {
    ag_tensor *y = nn_quant_op_begin(t, "nn_qlinear_forward", &x, w != NULL, w ? w->in : 0,
                                     w ? w->out : 0, bias);
    if (!y) return NULL;
    /* QM rows at a time: the scratch (quantized rows, int32 sums) stays small and in cache
     * whatever the number of rows (an encoder's chunk is thousands) */
    enum { QM = 64 };
    int m = (int)(x->numel / w->in), qm = m < QM ? m : QM;
    uint8_t *u = ag_tape_alloc(t, (size_t)qm * (size_t)w->kp + 1);
    float *sx = ag_tape_alloc(t, sizeof *sx * (size_t)qm + 1);
#if AG_CPU_X86_KERNELS && !defined(TG_DOUBLE)
    const nn_qkernel k = nn_qkernel_auto();
    const bool fused = k == NN_QK_VNNI || k == NN_QK_AMX; /* the epilogue in the kernel */
#else
    const bool fused = false;
#endif
    int32_t *acc = fused ? NULL : ag_tape_alloc(t, sizeof *acc * (size_t)qm * (size_t)w->out + 1);
    if (!u || !sx || (!fused && !acc)) return NULL;
    for (int i0 = 0; i0 < m; i0 += QM) {
        int r = m - i0 < QM ? m - i0 : QM;
        for (int i = 0; i < r; i++)
            sx[i] = nn_qrow(x->data + (size_t)(i0 + i) * (size_t)w->in, w->in, w->kp,
                            u + (size_t)i * (size_t)w->kp);
        ag_real *yr = y->data + (size_t)i0 * (size_t)w->out;
#if AG_CPU_X86_KERNELS && !defined(TG_DOUBLE)
        if (fused) { /* the epilogue on the kernel's registers: the same bits */
            qdest d = {.y = yr, .sx = sx, .w = w, .bias = bias ? bias->data : NULL};
            (k == NN_QK_AMX ? qgemm_amx : qgemm_vnni)(r, u, (size_t)w->kp, (const uint8_t *)w->q,
                                                      w->out, &d);
            continue;
        }
#endif
        if (nn_qgemm_s32(NN_QK_AUTO, r, u, w, acc)) return ag_report(t, "%s", ag_last_error());
        nn_qepilogue(r, acc, sx, w, bias ? bias->data : NULL, yr);
    }
    return y;
}
