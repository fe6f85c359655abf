/* quant_bf16.c -- bf16 Linear for inference: weights rounded to bf16 once, activations rounded
 * to bf16 at each product, float sums by AVX512-BF16's vdpbf16ps or its exact emulation (the
 * math and the layout in nn/quant.h).
 *
 * Shared with training's bf16 product (autograd/gemm_bf16.c, ag_gemm_bf16): the rounding
 * (ag_bf16_round) and the emulation of the instruction (ag_bf16_fma), so both give its bits.
 * Not shared: the AVX512-BF16 kernel. Training's packs both operands at every call into 12-row
 * and 32-column panels for a 12 x 32 tile; here the weight is packed once (16-channel blocks)
 * and a decoding step's few rows are read in place by tiles of 1 to 8 rows, with no padded
 * rows computed (the tiles of the int8 kernel: one template, nn/quant_tile_internal.h). */
#include "nn/quant.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/ag_cpu.h"
#include "autograd/ag_op.h"
#include "nn/internal.h"

#define BB 16 /* channels per block: one register of 16 float sums */

nn_bweight *nn_bweight_new(const ag_real *w, int out, int in, ptrdiff_t ldw) {
    if (!w || out <= 0 || in <= 0) {
        ag_error("nn_bweight_new: weight %s (%d, %d), expected a weight with out, in > 0",
                 w ? "given" : "NULL", out, in);
        return NULL;
    }
    nn_bweight *b = calloc(1, sizeof *b);
    int blocks = (out + BB - 1) / BB, kp = (in + 1) / 2 * 2;
    if (b) {
        *b = (nn_bweight){.out = out, .in = in, .kp = kp};
        b->w = calloc((size_t)blocks * BB * (size_t)kp, sizeof *b->w);
    }
    if (!b || !b->w) {
        nn_bweight_free(b);
        ag_error("nn_bweight_new: out of memory for a (%d, %d) weight", out, in);
        return NULL;
    }
    for (int j = 0; j < out; j++)
        for (int k = 0; k < in; k++)
            b->w[((size_t)(j / BB) * (size_t)(kp / 2) + (size_t)(k / 2)) * BB * 2 +
                 (size_t)(j % BB) * 2 + (size_t)(k % 2)] =
                ag_bf16_round((float)w[(ptrdiff_t)j * ldw + k]);
    return b;
}

void nn_bweight_free(nn_bweight *w) {
    if (!w) return;
    free(w->w);
    free(w);
}

uint16_t nn_bweight_at(const nn_bweight *w, int j, int k) {
    return w->w[((size_t)(j / BB) * (size_t)(w->kp / 2) + (size_t)(k / 2)) * BB * 2 +
                (size_t)(j % BB) * 2 + (size_t)(k % 2)];
}

/* ---- the kernels ----
 * acc[i][16 b + j] = 0, then for each pair g: acc += x[2g+1] w[2g+1], then acc += x[2g] w[2g]
 * (vdpbf16ps's order: the odd product first, each step an FMA rounded to float, to nearest
 * even, denormals read and written as zero; the products of two bf16 are exact in float). The
 * portable kernel runs the steps with ag_bf16_fma (ag_op.h), the C reference of the instruction
 * that ag_gemm_bf16's emulated kernel runs too. */

static void bgemm_portable(int m, const uint16_t *x, const nn_bweight *w, float *acc) {
    int blocks = (w->out + BB - 1) / BB, pairs = w->kp / 2;
    for (int i = 0; i < m; i++) {
        const uint16_t *xr = x + (size_t)i * (size_t)w->kp;
        for (int b = 0; b < blocks; b++) {
            const uint16_t *blk = w->w + (size_t)b * BB * (size_t)w->kp;
            float s[BB] = {0};
            for (int g = 0; g < pairs; g++)
                for (int j = 0; j < BB; j++) {
                    const uint16_t *wp = blk + ((size_t)g * BB + (size_t)j) * 2;
                    s[j] = ag_bf16_fma(ag_bf16_fma(s[j], xr[2 * g + 1], wp[1]), xr[2 * g], wp[0]);
                }
            int n = w->out - b * BB < BB ? w->out - b * BB : BB;
            memcpy(acc + (size_t)i * (size_t)w->out + (size_t)b * BB, s, sizeof *s * (size_t)n);
        }
    }
}

#if AG_CPU_X86_KERNELS
/* bgemm_avx512(m, x, 2 kp, w, out, acc): acc = x W^T by the register tiles of
 * nn/quant_tile_internal.h, one vdpbf16ps per row, block and pair of k (float sums kept in
 * integer registers: the casts cost nothing). */
#define NN_TILE_KERNEL bgemm_avx512
#define NN_TILE_TARGET "avx512f,avx512bf16"
#define NN_TILE_STEP(s, xw, ww)                                                                    \
    _mm512_castps_si512(_mm512_dpbf16_ps(_mm512_castsi512_ps(s), (__m512bh)(xw), (__m512bh)(ww)))
#include "nn/quant_tile_internal.h"
#endif

bool nn_bkernel_available(nn_bkernel k) {
    if (k != NN_BK_AVX512BF16) return k == NN_BK_AUTO || k == NN_BK_PORTABLE;
    return ag_cpu_has(AG_CPU_AVX512F | AG_CPU_AVX512BF16);
}

nn_bkernel nn_bkernel_auto(void) {
    return nn_quant_forced() == NN_QK_PORTABLE || !nn_bkernel_available(NN_BK_AVX512BF16)
               ? NN_BK_PORTABLE
               : NN_BK_AVX512BF16;
}

const char *nn_bkernel_name(nn_bkernel k) {
    return k == NN_BK_AVX512BF16 ? "avx512-bf16" : k == NN_BK_PORTABLE ? "portable" : "auto";
}

int nn_bgemm_f32(nn_bkernel k, int m, const uint16_t *x, const nn_bweight *w, float *acc) {
    if (k == NN_BK_AUTO) k = nn_bkernel_auto();
    if (!nn_bkernel_available(k))
        return ag_error("nn_bgemm_f32: kernel %s is not available on this CPU", nn_bkernel_name(k));
    if (m <= 0) return 0;
#if AG_CPU_X86_KERNELS
    if (k == NN_BK_AVX512BF16) {
        bgemm_avx512(m, (const uint8_t *)x, 2 * (size_t)w->kp, (const uint8_t *)w->w, w->out, acc);
        return 0;
    }
#endif
    bgemm_portable(m, x, w, acc);
    return 0;
}

/* ---- the op ---- */

ag_tensor *nn_blinear_forward(ag_tape *t, ag_tensor *x, const nn_bweight *w, ag_tensor *bias) {
    ag_tensor *y = nn_quant_op_begin(t, "nn_blinear_forward", &x, w != NULL, w ? w->in : 0,
                                     w ? w->out : 0, bias);
    if (!y) return NULL;
    enum { QM = 64 }; /* rows at a time through a small scratch */
    int m = (int)(x->numel / w->in), qm = m < QM ? m : QM;
    uint16_t *xb = ag_tape_alloc(t, sizeof *xb * (size_t)qm * (size_t)w->kp + 1);
    float *acc = ag_tape_alloc(t, sizeof *acc * (size_t)qm * (size_t)w->out + 1);
    if (!xb || !acc) return NULL;
    for (int i0 = 0; i0 < m; i0 += QM) {
        int r = m - i0 < QM ? m - i0 : QM;
        for (int i = 0; i < r; i++) {
            const ag_real *xr = x->data + (size_t)(i0 + i) * (size_t)w->in;
            uint16_t *br = xb + (size_t)i * (size_t)w->kp;
            for (int k = 0; k < w->in; k++) br[k] = ag_bf16_round((float)xr[k]);
            if (w->kp > w->in) br[w->in] = 0;
        }
        if (nn_bgemm_f32(NN_BK_AUTO, r, xb, w, acc)) return ag_report(t, "%s", ag_last_error());
        for (int i = 0; i < r; i++) {
            ag_real *yr = y->data + (size_t)(i0 + i) * (size_t)w->out;
            const float *ar = acc + (size_t)i * (size_t)w->out;
            if (bias)
                for (int j = 0; j < w->out; j++) yr[j] = (ag_real)(ar[j] + (float)bias->data[j]);
            else
                for (int j = 0; j < w->out; j++) yr[j] = (ag_real)ar[j];
        }
    }
    return y;
}
