/* quant.h -- int8 inference for Linear layers: weights quantized once per output channel,
 * activations per row at each product, int32 accumulation, float output (nn/quant.c); and bf16
 * inference (nn/quant_bf16.c, at the end).
 *
 * For decoding only (no backward: a quantized product is never recorded). A set of packed
 * weights (nn_packs, nn/layers.h) in NN_QUANT_INT8 mode quantizes each Linear weight the first
 * time it is used and nn_linear_forward then runs nn_qlinear_forward instead of the float GEMM,
 * except for the weights the set keeps float (the output layer: nn_packs_keep_float).
 *
 * The math (per output channel j of W (out, in), per row i of x (m, in)):
 *     sw_j = max_k |W_jk| / 127,  qw_jk = round(W_jk / sw_j)            in [-127, 127] (int8)
 *     sx_i = max_k |x_ik| / 127,  qx_ik = round(x_ik / sx_i)            in [-127, 127]
 *     y_ij = sx_i sw_j (sum_k qx_ik qw_jk) + b_j
 * (round: to nearest, ties to even; a zero row or channel has scale 0 and gives 0 / b_j). The
 * sum is exact in int32 for in < 133,000 (127 * 127 * in < 2^31). Dequantized operands
 * x~ = sx qx, W~ = sw qw: y = x~ W~^T + b up to the float rounding of the last line, and
 * |x_ik - x~_ik| <= sx_i / 2, |W_jk - W~_jk| <= sw_j / 2.
 *
 * Kernels: AVX512-VNNI's vpdpbusd multiplies unsigned by signed bytes, so activations are
 * stored as u_ik = qx_ik + 128 in [1, 255] and the kernel computes
 *     acc_ij = sum_k u_ik qw_jk = sum_k qx_ik qw_jk + 128 c_j,   c_j = sum_k qw_jk
 * and the epilogue subtracts 128 c_j (c_j precomputed with the weight). AMX-INT8's tdpbusd
 * (16 x 16 sums a tile from 16 rows x 64 bytes of u and 16 groups of a block of the layout
 * below, as they lie) computes the same sums. Chosen at run time: the AMX kernel where the CPU
 * has AMX-INT8 and Linux grants the tiles (with AVX512-VNNI for the rows past the last 16 and
 * the bytes of k past the last 64), else the VNNI kernel where it has AVX512F and AVX512-VNNI,
 * else the AVX2 kernel (vpmaddubsw on |qw| and qx with qw's sign: exact, see quant.c), else a
 * portable C loop over the same layout; the environment variable TG_QUANT_KERNEL ("portable",
 * "avx512-vnni", "amx", "avx2") forces one the CPU has. All give the same int32 sums
 * (integer addition: the order does not matter), hence the same bits.
 */
#ifndef TG_NN_QUANT_H
#define TG_NN_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a set of packed weights (nn_packs) runs Linear layers. NONE: float (the default). */
typedef enum nn_quant { NN_QUANT_NONE, NN_QUANT_INT8, NN_QUANT_BF16 } nn_quant;
/* "none", "int8", "bf16", NULL: the names of --quantize, by nn_quant value. */
extern const char *const nn_quant_names[];

/* The int32 kernels. AUTO: the best the CPU has. AMX_EMULATED: the AMX kernel's tiles in memory
 * (its loops and addresses on any CPU, for tests; slow). */
typedef enum nn_qkernel {
    NN_QK_AUTO,
    NN_QK_PORTABLE,
    NN_QK_VNNI,
    NN_QK_AMX,
    NN_QK_AMX_EMULATED,
    NN_QK_AVX2
} nn_qkernel;
/* True when kernel k can run on this CPU (AUTO, PORTABLE and AMX_EMULATED always). */
bool nn_qkernel_available(nn_qkernel k);
/* The kernel AUTO resolves to: AMX, VNNI, AVX2 or PORTABLE (see the top). */
nn_qkernel nn_qkernel_auto(void);
/* "auto", "portable", "avx512-vnni", "amx", "amx-emulated", "avx2" (static strings). */
const char *nn_qkernel_name(nn_qkernel k);

/* A weight W (out, in) quantized per output channel, packed for the kernels: blocks of 16
 * channels (the last padded with zero channels), in each block kp / 4 groups of 16 x 4 bytes,
 * group g holding qw[j][4g .. 4g + 3] for the block's 16 channels j (kp = in rounded up to a
 * multiple of 4, padded with zeros). */
typedef struct nn_qweight {
    int out, in, kp;
    int8_t *q;     /* ((out + 15) / 16) * 16 * kp bytes, the layout above */
    float *scale;  /* (out,) sw_j */
    int32_t *csum; /* (out,) c_j = sum_k qw_jk */
} nn_qweight;

/* W (out, in) with row stride ldw (elements) quantized. The caller owns the result
 * (nn_qweight_free); NULL (reported) when out of memory or out, in <= 0. */
nn_qweight *nn_qweight_new(const ag_real *w, int out, int in, ptrdiff_t ldw);
void nn_qweight_free(nn_qweight *w); /* NULL is a no-op */
/* qw_jk (unpacked), for tests and messages. */
int nn_qweight_at(const nn_qweight *w, int j, int k);

/* Row quantization: x (in,) -> u (kp,) with u_k = qx_k + 128 (the padding 128: qx = 0);
 * returns sx. */
float nn_qrow(const ag_real *x, int in, int kp, uint8_t *u);

/* acc (m, w->out), row-major: acc_ij = sum_k u_ik qw_jk over the kp bytes of each row of u
 * (m rows, kp bytes apart), with kernel k (AUTO: nn_qkernel_auto; a kernel this CPU lacks is
 * refused: -1 reported). Returns 0 or -1. */
int nn_qgemm_s32(nn_qkernel k, int m, const uint8_t *u, const nn_qweight *w, int32_t *acc);

/* y = x W^T + b in int8 (the math at the top): x (..., in) -> (..., out) on tape t, bias (out,)
 * or NULL. Recording must be off (no gradient flows through a quantized product: reported).
 * Returns the result (on the tape) or NULL (reported). */
ag_tensor *nn_qlinear_forward(ag_tape *t, ag_tensor *x, const nn_qweight *w, ag_tensor *bias);

/* ---- bf16 (nn/quant_bf16.c) ----
 * A set in NN_QUANT_BF16 mode runs nn_blinear_forward instead: W rounded to bf16 once (to
 * nearest, ties to even), each activation rounded to bf16 at each product, and
 *     acc_ij = 0; for each pair g: acc_ij += x_i,2g+1 W_j,2g+1; acc_ij += x_i,2g W_j,2g
 *     y_ij = acc_ij + b_j
 * in float, each addition rounded to nearest even (a product of two bf16 is exact in float):
 * AVX512-BF16's vdpbf16ps, which adds the odd product of a pair first (checked against this
 * order on random inputs: the other order, or one rounding per pair, differ), where the CPU has
 * it, else the same steps in C (ag_bf16_fma, autograd/ag_op.h: each an FMA, subnormal inputs
 * and results flushed to zero as the instruction does), which give the same bits, products
 * below float's normal range included (test_gemm_bf16 compares them with the CPU's). Against a
 * float product of the bf16-rounded operands summed in another order the error is the float
 * summation's (in ulps of the sum of |products|: at most in / 2 of them), and against the float
 * product of the original operands add the bf16 rounding: a relative 2^-8 per operand. */
typedef enum nn_bkernel { NN_BK_AUTO, NN_BK_PORTABLE, NN_BK_AVX512BF16 } nn_bkernel;
bool nn_bkernel_available(nn_bkernel k);
nn_bkernel nn_bkernel_auto(void);          /* TG_QUANT_KERNEL=portable forces the portable one */
const char *nn_bkernel_name(nn_bkernel k); /* "portable", "avx512-bf16" */

/* Rounding to bf16 and back: ag_bf16_round, ag_bf16_to_float (autograd/ag_op.h). */

/* W (out, in) in bf16, in blocks of 16 channels, each kp / 2 pairs of 16 x 2 values (kp = in
 * rounded up to even, zero padded). */
typedef struct nn_bweight {
    int out, in, kp;
    uint16_t *w;
} nn_bweight;
/* The caller owns the result (nn_bweight_free); NULL (reported) when out of memory or out,
 * in <= 0. */
nn_bweight *nn_bweight_new(const ag_real *w, int out, int in, ptrdiff_t ldw);
void nn_bweight_free(nn_bweight *w);
uint16_t nn_bweight_at(const nn_bweight *w, int j, int k);
/* acc (m, w->out) from x (m rows of kp bf16 values) with kernel k (a kernel the CPU lacks: -1
 * reported). Returns 0 or -1. */
int nn_bgemm_f32(nn_bkernel k, int m, const uint16_t *x, const nn_bweight *w, float *acc);
/* y = x W^T + b in bf16 (above); as nn_qlinear_forward otherwise. */
ag_tensor *nn_blinear_forward(ag_tape *t, ag_tensor *x, const nn_bweight *w, ag_tensor *bias);

#ifdef __cplusplus
}
#endif

#endif
