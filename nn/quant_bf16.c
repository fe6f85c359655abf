/* quant_bf16.c -- bf16 Linear for inference: weights rounded to bf16 once, activations rounded
 * to bf16 at each product, float sums by AVX512-BF16's vdpbf16ps or its exact emulation (the
 * math and the layout in nn/quant.h). */
#include "nn/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_op.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TG_HAVE_BF16 1
#include <immintrin.h>
#endif

#define BB 16 /* channels per block: one register of 16 float sums */

uint16_t nn_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN: quiet */
    u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even (overflow gives infinity) */
    return (uint16_t)(u >> 16);
}

float nn_bf16_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

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
                nn_bf16_round((float)w[(ptrdiff_t)j * ldw + k]);
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
 * (vdpbf16ps's order: the odd product first, each addition rounded to float, to nearest even;
 * the products of two bf16 are exact in float). */

/* A float below the smallest normal flushed to zero (vdpbf16ps: DAZ on its inputs, FTZ on its
 * result). */
static inline float ftz(float v) { return fabsf(v) < 1.17549435e-38f ? 0.0f * v : v; }

static void bgemm_portable(int m, const uint16_t *x, const nn_bweight *w, float *acc) {
    int blocks = (w->out + BB - 1) / BB, pairs = w->kp / 2;
    for (int i = 0; i < m; i++) {
        const uint16_t *xr = x + (size_t)i * (size_t)w->kp;
        for (int b = 0; b < blocks; b++) {
            const uint16_t *blk = w->w + (size_t)b * BB * (size_t)w->kp;
            float s[BB] = {0};
            for (int g = 0; g < pairs; g++) {
                float x0 = ftz(nn_bf16_float(xr[2 * g])), x1 = ftz(nn_bf16_float(xr[2 * g + 1]));
                for (int j = 0; j < BB; j++) {
                    const uint16_t *wp = blk + ((size_t)g * BB + (size_t)j) * 2;
                    float p1 = x1 * ftz(nn_bf16_float(wp[1])), p0 = x0 * ftz(nn_bf16_float(wp[0]));
                    s[j] = ftz(ftz(s[j] + ftz(p1)) + ftz(p0));
                }
            }
            int n = w->out - b * BB < BB ? w->out - b * BB : BB;
            memcpy(acc + (size_t)i * (size_t)w->out + (size_t)b * BB, s, sizeof *s * (size_t)n);
        }
    }
}

#ifdef TG_HAVE_BF16
/* One row against every block, 4 blocks at a time (4 independent chains of vdpbf16ps). */
__attribute__((target("avx512f,avx512bf16"))) static void
bgemm_avx512(int m, const uint16_t *x, const nn_bweight *w, float *acc) {
    int blocks = (w->out + BB - 1) / BB, pairs = w->kp / 2;
    const size_t bs = BB * (size_t)w->kp; /* elements per block */
    for (int i = 0; i < m; i++) {
        const uint16_t *xr = x + (size_t)i * (size_t)w->kp;
        float *ar = acc + (size_t)i * (size_t)w->out;
        for (int b = 0; b < blocks; b += 4) {
            int nb = blocks - b < 4 ? blocks - b : 4;
            __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                           _mm512_setzero_ps()};
            for (int g = 0; g < pairs; g++) {
                uint32_t xp;
                memcpy(&xp, xr + 2 * g, 4);
                __m512i xv = _mm512_set1_epi32((int)xp);
                for (int q = 0; q < nb; q++) {
                    __m512i wv = _mm512_loadu_si512(
                        (const void *)(w->w + (size_t)(b + q) * bs + (size_t)g * BB * 2));
                    s[q] = _mm512_dpbf16_ps(s[q], (__m512bh)xv, (__m512bh)wv);
                }
            }
            for (int q = 0; q < nb; q++) {
                int c0 = (b + q) * BB, n = w->out - c0 < BB ? w->out - c0 : BB;
                _mm512_mask_storeu_ps(ar + c0, (__mmask16)((1u << n) - 1u), s[q]);
            }
        }
    }
}
#endif

bool nn_bkernel_available(nn_bkernel k) {
    if (k != NN_BK_AVX512BF16) return k == NN_BK_AUTO || k == NN_BK_PORTABLE;
#ifdef TG_HAVE_BF16
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

nn_bkernel nn_bkernel_auto(void) {
    static _Atomic int chosen; /* 0: not yet; else the nn_bkernel */
    int k = chosen;
    if (!k) {
        const char *env = getenv("TG_QUANT_KERNEL");
        k = (env && !strcmp(env, "portable")) || !nn_bkernel_available(NN_BK_AVX512BF16)
                ? NN_BK_PORTABLE
                : NN_BK_AVX512BF16;
        chosen = k;
    }
    return (nn_bkernel)k;
}

const char *nn_bkernel_name(nn_bkernel k) {
    return k == NN_BK_AVX512BF16 ? "avx512-bf16" : k == NN_BK_PORTABLE ? "portable" : "auto";
}

int nn_bgemm_f32(nn_bkernel k, int m, const uint16_t *x, const nn_bweight *w, float *acc) {
    if (k == NN_BK_AUTO) k = nn_bkernel_auto();
    if (!nn_bkernel_available(k))
        return ag_error("nn_bgemm_f32: kernel %s is not available on this CPU", nn_bkernel_name(k));
    if (m <= 0) return 0;
#ifdef TG_HAVE_BF16
    if (k == NN_BK_AVX512BF16) {
        bgemm_avx512(m, x, w, acc);
        return 0;
    }
#endif
    bgemm_portable(m, x, w, acc);
    return 0;
}

/* ---- the op ---- */

ag_tensor *nn_blinear_forward(ag_tape *t, ag_tensor *x, const nn_bweight *w, ag_tensor *bias) {
    if (!x || !w) return ag_report(t, "nn_blinear_forward: x or the weight is NULL");
    if (x->ndim < 1 || x->shape[x->ndim - 1] != w->in)
        return ag_report(t, "nn_blinear_forward: x's last dim is %d, the weight takes %d",
                         x->ndim ? x->shape[x->ndim - 1] : 0, w->in);
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->out))
        return ag_report(t, "nn_blinear_forward: bias of %d elements, expected (%d)",
                         bias->ndim == 1 ? bias->shape[0] : -1, w->out);
    ag_tensor *in[2] = {x, bias};
    if (ag_op_wants_grad(t, bias ? 2 : 1, in))
        return ag_report(t, "nn_blinear_forward: inference only, turn the tape's recording off");
    x = ag_contiguous(t, x);
    if (!x) return NULL;
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->out;
    ag_tensor *y = ag_tensor_new(t, x->ndim, shape);
    enum { QM = 64 }; /* rows at a time through a small scratch */
    int m = (int)(x->numel / w->in), qm = m < QM ? m : QM;
    uint16_t *xb = ag_tape_alloc(t, sizeof *xb * (size_t)qm * (size_t)w->kp + 1);
    float *acc = ag_tape_alloc(t, sizeof *acc * (size_t)qm * (size_t)w->out + 1);
    if (!y || !xb || !acc) return NULL;
    for (int i0 = 0; i0 < m; i0 += QM) {
        int r = m - i0 < QM ? m - i0 : QM;
        for (int i = 0; i < r; i++) {
            const ag_real *xr = x->data + (size_t)(i0 + i) * (size_t)w->in;
            uint16_t *br = xb + (size_t)i * (size_t)w->kp;
            for (int k = 0; k < w->in; k++) br[k] = nn_bf16_round((float)xr[k]);
            if (w->kp > w->in) br[w->in] = 0;
        }
        if (nn_bgemm_f32(NN_BK_AUTO, r, xb, w, acc)) return ag_report(t, "%s", ag_last_error());
        ag_real *yr = y->data + (size_t)i0 * (size_t)w->out;
        for (size_t e = 0; e < (size_t)r * (size_t)w->out; e++)
            yr[e] = (ag_real)(bias ? acc[e] + (float)bias->data[e % (size_t)w->out] : acc[e]);
    }
    return y;
}
