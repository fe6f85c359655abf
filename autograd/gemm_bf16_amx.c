/* gemm_bf16_amx.c -- ag_gemm_bf16's AMX micro-kernel (tdpbf16ps on 16 x 64-byte tiles) and its
 * emulation in C: one body of code over two sets of tile operations (gemm_bf16_internal.h;
 * the packing, blocking and kernel choice are gemm_bf16.c's). */
#include "autograd/gemm_bf16_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "autograd/ag_op.h"

#if AG_CPU_X86_KERNELS
#include <immintrin.h>
#endif

#define AMX_MR AG_AMX_MR
#define AMX_NR AG_AMX_NR
#define AMX_PAIRS AG_AMX_PAIRS

/* The AMX micro-kernel, C (32 x 32) [+]= A B: C0 C1 / C2 C3 = (A0 / A1) (B0 B1), 16 pairs of k
 * a step, on tiles 0-3 (C), 4-5 (A), 6-7 (B) of 16 rows x 64 bytes, through the operations
 * ZERO(t), LOAD(t, p, stride), DP(c, a, b) (c += a b), STORE(t, p, stride), strides in bytes
 * (the layouts of gemm_bf16_internal.h), and PREFETCH(p) (a cache line about to be written).
 * While it multiplies, it prefetches the next tile of C (cn, rows rsc apart; none if NULL),
 * a share of its 32 rows at each step: a C wider than the caches (the output layer's logits)
 * is otherwise read for ownership line by line at the stores, which then stall the kernel.
 * A tile register is not renamed (a load into it waits for the products that read it), so the
 * next step's A0 and B0 are loaded as soon as their last product of this step has issued, and
 * A1, B1 between this step's first products: loads overlap products. Each tile of C gets its
 * products in the order of k, so the order of the instructions changes no bit.
 * One body for the AMX instructions and for their emulation, so that the emulation tests the
 * kernel's tiles, loads and stores on any CPU. */
#define AMX_KERNEL_BODY(ZERO, LOAD, DP, STORE, PREFETCH)                                           \
    do {                                                                                           \
        const size_t sc = (size_t)rsc * sizeof *c, sa = AMX_PAIRS * sizeof *a,                     \
                     sb = AMX_NR * sizeof *b;                                                      \
        float *c2 = c + 16 * rsc;                                                                  \
        const int steps = kp / AMX_PAIRS, per = steps ? (AMX_MR + steps - 1) / steps : 0;          \
        if (load) {                                                                                \
            LOAD(0, c, sc);                                                                        \
            LOAD(1, c + 16, sc);                                                                   \
            LOAD(2, c2, sc);                                                                       \
            LOAD(3, c2 + 16, sc);                                                                  \
        } else {                                                                                   \
            ZERO(0);                                                                               \
            ZERO(1);                                                                               \
            ZERO(2);                                                                               \
            ZERO(3);                                                                               \
        }                                                                                          \
        if (kp > 0) {                                                                              \
            LOAD(4, a, sa);                                                                        \
            LOAD(6, b, sb);                                                                        \
        }                                                                                          \
        for (int q = 0; q < kp; q += AMX_PAIRS) {                                                  \
            const bool more = q + AMX_PAIRS < kp;                                                  \
            LOAD(7, b + q * AMX_NR + 16, sb);                                                      \
            DP(0, 4, 6);                                                                           \
            LOAD(5, a + q * AMX_MR + 16 * AMX_PAIRS, sa);                                          \
            DP(1, 4, 7);                                                                           \
            DP(2, 5, 6);                                                                           \
            if (more) LOAD(4, a + (q + AMX_PAIRS) * AMX_MR, sa);                                   \
            DP(3, 5, 7);                                                                           \
            if (more) LOAD(6, b + (q + AMX_PAIRS) * AMX_NR, sb);                                   \
            const int r0 = cn ? q / AMX_PAIRS * per : AMX_MR; /* this step's rows of cn */         \
            for (int r = r0; r < r0 + per && r < AMX_MR; r++) {                                    \
                PREFETCH(cn + r * rsc);                                                            \
                PREFETCH(cn + r * rsc + 16);                                                       \
            }                                                                                      \
        }                                                                                          \
        STORE(0, c, sc);                                                                           \
        STORE(1, c + 16, sc);                                                                      \
        STORE(2, c2, sc);                                                                          \
        STORE(3, c2 + 16, sc);                                                                     \
    } while (0)

/* ---- tdpbf16ps and its tiles in C ---- */

typedef struct soft_tile {
    uint32_t w[16][16]; /* 16 rows of 64 bytes: float32 (C) or pairs of bf16 (A, B) */
} soft_tile;

/* x + y with denormals read and written as zero, rounded to nearest even (the sums of
 * tdpbf16ps). */
static float add_daz_ftz(float x, float y) {
    if (fabsf(x) < FLT_MIN) x = copysignf(0.0f, x);
    if (fabsf(y) < FLT_MIN) y = copysignf(0.0f, y);
    const float r = x + y;
    return fabsf(r) < FLT_MIN ? copysignf(0.0f, r) : r;
}

/* tdpbf16ps c, a, b, as Intel's SDM writes its operation: each element of c gets two chains
 * from zero over the 16 pairs of its row of a and column of b -- the pairs' even elements, and
 * their odd ones, each step an FMA with denormals read and written as zero (ag_bf16_fma) --
 * then c = c + (even + odd), both sums likewise. */
static void soft_dpbf16ps(soft_tile *c, const soft_tile *a, const soft_tile *b) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float even = 0.0f, odd = 0.0f, acc;
            for (int k = 0; k < 16; k++) {
                const uint32_t wa = a->w[m][k], wb = b->w[k][n];
                even = ag_bf16_fma(even, (uint16_t)wa, (uint16_t)wb);
                odd = ag_bf16_fma(odd, (uint16_t)(wa >> 16), (uint16_t)(wb >> 16));
            }
            memcpy(&acc, &c->w[m][n], sizeof acc);
            acc = add_daz_ftz(acc, add_daz_ftz(even, odd));
            memcpy(&c->w[m][n], &acc, sizeof acc);
        }
}

static void soft_load(soft_tile *t, const void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy(t->w[r], (const char *)p + r * stride, 64);
}

static void soft_store(const soft_tile *t, void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy((char *)p + r * stride, t->w[r], 64);
}

#define SOFT_ZERO(t) memset(&tm[t], 0, sizeof tm[t])
#define SOFT_LOAD(t, p, stride) soft_load(&tm[t], p, stride)
#define SOFT_DP(c, a, b) soft_dpbf16ps(&tm[c], &tm[a], &tm[b])
#define SOFT_STORE(t, p, stride) soft_store(&tm[t], p, stride)
#define SOFT_PREFETCH(p) (void)(p)

/* The AMX kernel on tiles in memory: its bits, on any CPU. */
void ag__bf16_kernel_amx_emulated(int kp, const uint32_t *a, const uint32_t *b, float *c,
                                  ptrdiff_t rsc, bool load, const float *cn) {
    soft_tile tm[8];
    AMX_KERNEL_BODY(SOFT_ZERO, SOFT_LOAD, SOFT_DP, SOFT_STORE, SOFT_PREFETCH);
}

#if AG_CPU_X86_KERNELS
/* The tile configuration (palette 1): tiles 0-7 of 16 rows x 64 bytes. */
typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

static const amx_config AMX_CONFIG = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

__attribute__((target("amx-tile"))) void ag__bf16_amx_begin(void) { _tile_loadconfig(&AMX_CONFIG); }
__attribute__((target("amx-tile"))) void ag__bf16_amx_end(void) { _tile_release(); }

#define PREFETCHW(p) __builtin_prefetch(p, 1, 3)

/* The AMX kernel on the CPU's tiles; the calling thread has loaded AMX_CONFIG. */
__attribute__((target("amx-tile,amx-bf16,prfchw"))) void
ag__bf16_kernel_amx(int kp, const uint32_t *a, const uint32_t *b, float *c, ptrdiff_t rsc,
                    bool load, const float *cn) {
    AMX_KERNEL_BODY(_tile_zero, _tile_loadd, _tile_dpbf16ps, _tile_stored, PREFETCHW);
}
#endif
