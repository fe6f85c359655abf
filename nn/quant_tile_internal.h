/* quant_tile_internal.h -- the register tiles of the int8 and bf16 inference products, one
 * template for both (nn/quant.c: AVX512-VNNI; nn/quant_bf16.c: AVX512-BF16). Not installed; no
 * include guard: a file includes it once, under AG_CPU_X86_KERNELS, after defining
 *   NN_TILE_KERNEL          the name of the static function it defines (below);
 *   NN_TILE_TARGET          that function's target attribute ("avx512f,avx512vnni", ...);
 *   NN_TILE_STEP(s, xw, ww) one instruction: s (16 lanes of 32-bit sums) plus the products of
 *                           xw (a 32-bit word of a row of x, in every lane) and ww (one 32-bit
 *                           word per channel), as the instruction defines them: vpdpbusd adds
 *                           4 u8 x s8 products into int32; vdpbf16ps 2 bf16 products into float,
 *                           the odd one first;
 * and, optionally,
 *   NN_TILE_STORE(acc, out, row, col, mask, s)  what becomes of the finished sums s of channels
 *                           col .. col + 15 (those in mask) of row `row`: an epilogue that
 *                           writes the layer's output in their place, acc then being its context.
 *                           Without it they are stored at acc (below).
 *
 * static void NN_TILE_KERNEL(int m, const uint8_t *x, size_t rb, const uint8_t *wb, int out,
 *                            void *acc):
 * x: m rows of rb bytes (rb a multiple of 4: G = rb / 4 words); wb: the weight in blocks of 16
 * channels (the last one padded), block b at wb + 16 b rb, holding G groups of 16 words (group
 * g's word for channel j at block + 64 g + 4 j); acc: (m, out) 32-bit sums, row-major:
 *     acc[i][16 b + j] = STEP(... STEP(STEP(0, x[i] word 0, block b word (0, j)),
 *                                       x[i] word 1, block b word (1, j)) ..., word G - 1).
 * Tiles of R <= 8 rows x 1 or 2 blocks: R x NB accumulators in registers; each group's words of
 * the blocks (64 bytes each) loaded once for the R rows, one STEP per row and block. Rows go 8 at
 * a time (R a constant: the loops unrolled), then the last m % 8; blocks 2 at a time, then the
 * last one. Each sum is its own chain over g, in order: its bits do not depend on the tile. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#ifndef NN_TILE_STORE
#define NN_TILE_STORE(acc, out, row, col, mask, s)                                                 \
    _mm512_mask_storeu_epi32(                                                                      \
        (uint8_t *)(acc) + ((size_t)(row) * (size_t)(out) + (size_t)(col)) * 4, mask, s)
#endif

/* Rows row0 .. row0 + R - 1 (x at their first) against blocks c0 / 16 .. + NB - 1. */
__attribute__((target(NN_TILE_TARGET), always_inline)) static inline void
nn_tile(int R, int NB, const uint8_t *x, size_t rb, const uint8_t *blk0, int out, int c0, void *acc,
        int row0) {
    const uint8_t *blk1 = blk0 + 16 * rb;
    const int groups = (int)(rb / 4);
    __m512i s[8][2]; /* in registers when R is a constant (the loops fully unrolled) */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) s[i][0] = s[i][1] = _mm512_setzero_si512();
    for (int g = 0; g < groups; g++) {
        __m512i w0 = _mm512_loadu_si512((const void *)(blk0 + (size_t)g * 64));
        __m512i w1 = NB > 1 ? _mm512_loadu_si512((const void *)(blk1 + (size_t)g * 64)) : w0;
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            int32_t a;
            memcpy(&a, x + (size_t)i * rb + 4 * (size_t)g, 4);
            __m512i av = _mm512_set1_epi32(a);
            s[i][0] = NN_TILE_STEP(s[i][0], av, w0);
            if (NB > 1) s[i][1] = NN_TILE_STEP(s[i][1], av, w1);
        }
    }
    for (int nb = 0; nb < NB; nb++) {
        int c = c0 + 16 * nb, n = out - c < 16 ? out - c : 16;
        __mmask16 mask = (__mmask16)((1u << n) - 1u);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) NN_TILE_STORE(acc, out, row0 + i, c, mask, s[i][nb]);
    }
}

__attribute__((target(NN_TILE_TARGET))) static void
NN_TILE_KERNEL(int m, const uint8_t *x, size_t rb, const uint8_t *wb, int out, void *acc) {
    const int blocks = (out + 15) / 16;
    for (int i = 0; i < m; i += 8) {
        const uint8_t *xi = x + (size_t)i * rb;
        int b = 0;
        if (m - i >= 8) { /* full tiles, the registers' shape known at compile time */
            for (; b + 2 <= blocks; b += 2)
                nn_tile(8, 2, xi, rb, wb + 16 * b * rb, out, 16 * b, acc, i);
            if (b < blocks) nn_tile(8, 1, xi, rb, wb + 16 * b * rb, out, 16 * b, acc, i);
        } else {
            for (; b + 2 <= blocks; b += 2)
                nn_tile(m - i, 2, xi, rb, wb + 16 * b * rb, out, 16 * b, acc, i);
            if (b < blocks) nn_tile(m - i, 1, xi, rb, wb + 16 * b * rb, out, 16 * b, acc, i);
        }
    }
}
