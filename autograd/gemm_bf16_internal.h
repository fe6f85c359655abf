/* gemm_bf16_internal.h -- the AMX micro-kernels of ag_gemm_bf16 (gemm_bf16_amx.c), for
 * gemm_bf16.c. Not installed.
 *
 * ag__bf16_kernel_amx[_emulated](kp, a, b, c, rsc, load, cn): C (32 x 32 floats, rows rsc
 * apart, columns contiguous) = [C +] A B over kp pairs of k (a multiple of AG_AMX_PAIRS), and a
 * prefetch of the next tile's C (32 x 32 at cn, rows rsc apart; NULL: none): A 32 rows in
 * tiles, row i's pair q at a[(q - q % 16) 32 + 16 i + q % 16] (each 16 x 16-pair tile 1 KB in
 * one piece); B a 32-column panel, pair q of column j at b[q 32 + j] (a
 * 32-bit word: the bf16 of the even k in its low half, the odd one in its high half). Each
 * element: per 16 pairs, an even and an odd FMA chain from zero, then c + (even + odd)
 * (tdpbf16ps as Intel's SDM writes it; ag_op.h). The native one needs the calling thread to
 * have loaded the tile configuration (ag__bf16_amx_begin; ag__bf16_amx_end releases it), and
 * AG_CPU_AMX_BF16 (ag_cpu.h). */
#ifndef TG_AG_GEMM_BF16_INTERNAL_H
#define TG_AG_GEMM_BF16_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/ag_cpu.h"

#define AG_AMX_MR 32 /* 2 x 2 tiles of 16 x 16 floats */
#define AG_AMX_NR 32
#define AG_AMX_PAIRS 16 /* pairs of k in one tile of A (64 bytes a row) */

void ag__bf16_kernel_amx_emulated(int kp, const uint32_t *a, const uint32_t *b, float *c,
                                  ptrdiff_t rsc, bool load, const float *cn);
#if AG_CPU_X86_KERNELS
void ag__bf16_kernel_amx(int kp, const uint32_t *a, const uint32_t *b, float *c, ptrdiff_t rsc,
                         bool load, const float *cn);
void ag__bf16_amx_begin(void);
void ag__bf16_amx_end(void);
#endif

#endif
