/* quant.c -- int8 Linear for inference: per-channel weight quantization, per-row activation
 * quantization, the int32 kernels (portable and AVX512-VNNI, chosen at run time) and the op
 * (the math and the layout in nn/quant.h). */
#include "nn/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_op.h"

const char *const nn_quant_names[] = {"none", "int8", NULL};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TG_HAVE_VNNI 1
#include <immintrin.h>
#endif

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

float nn_qrow(const ag_real *x, int in, int kp, uint8_t *u) {
    float amax = 0;
    for (int k = 0; k < in; k++) amax = fmaxf(amax, fabsf((float)x[k]));
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int k = 0; k < in; k++) u[k] = (uint8_t)(q8((double)((float)x[k] * inv)) + 128);
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

#ifdef TG_HAVE_VNNI
/* Rows i0 .. i0 + r (r <= 4) against every block: one vpdpbusd per row and group of 4 bytes,
 * the group's 64 weight bytes loaded once for the r rows. Each 32-bit lane j accumulates
 * u[4g .. 4g + 3] . blk[g][j][0 .. 3] (4 products u8 x s8, each at most 32,385 in size: the
 * sum of 4 cannot wrap), the lanes the 16 channels of the block. */
__attribute__((target("avx512f,avx512vnni"))) static void
qgemm_vnni_rows(int r, const uint8_t *u, const nn_qweight *w, int32_t *acc) {
    int blocks = (w->out + QB - 1) / QB, groups = w->kp / 4;
    size_t kp = (size_t)w->kp;
    for (int b = 0; b < blocks; b++) {
        const int8_t *blk = w->q + (size_t)b * QB * kp;
        __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
        for (int g = 0; g < groups; g++) {
            __m512i wv = _mm512_loadu_si512((const void *)(blk + (size_t)g * QB * 4));
            int32_t a[4] = {0, 0, 0, 0};
            for (int i = 0; i < r; i++) memcpy(&a[i], u + (size_t)i * kp + 4 * (size_t)g, 4);
            s0 = _mm512_dpbusd_epi32(s0, _mm512_set1_epi32(a[0]), wv);
            if (r > 1) s1 = _mm512_dpbusd_epi32(s1, _mm512_set1_epi32(a[1]), wv);
            if (r > 2) s2 = _mm512_dpbusd_epi32(s2, _mm512_set1_epi32(a[2]), wv);
            if (r > 3) s3 = _mm512_dpbusd_epi32(s3, _mm512_set1_epi32(a[3]), wv);
        }
        int n = w->out - b * QB < QB ? w->out - b * QB : QB;
        __mmask16 mask = (__mmask16)((1u << n) - 1u);
        __m512i s[4] = {s0, s1, s2, s3};
        for (int i = 0; i < r; i++)
            _mm512_mask_storeu_epi32(acc + (size_t)i * (size_t)w->out + (size_t)b * QB, mask, s[i]);
    }
}

static void qgemm_vnni(int m, const uint8_t *u, const nn_qweight *w, int32_t *acc) {
    for (int i = 0; i < m; i += 4)
        qgemm_vnni_rows(m - i < 4 ? m - i : 4, u + (size_t)i * (size_t)w->kp, w,
                        acc + (size_t)i * (size_t)w->out);
}
#endif

bool nn_qkernel_available(nn_qkernel k) {
    if (k != NN_QK_VNNI) return k == NN_QK_AUTO || k == NN_QK_PORTABLE;
#ifdef TG_HAVE_VNNI
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

nn_qkernel nn_qkernel_auto(void) {
    static _Atomic int chosen; /* 0: not yet; else the nn_qkernel (the same in every thread) */
    int k = chosen;
    if (!k) {
        const char *env = getenv("TG_QUANT_KERNEL");
        k = (env && !strcmp(env, "portable")) || !nn_qkernel_available(NN_QK_VNNI)
                ? NN_QK_PORTABLE
                : NN_QK_VNNI;
        chosen = k;
    }
    return (nn_qkernel)k;
}

const char *nn_qkernel_name(nn_qkernel k) {
    return k == NN_QK_VNNI ? "avx512-vnni" : k == NN_QK_PORTABLE ? "portable" : "auto";
}

int nn_qgemm_s32(nn_qkernel k, int m, const uint8_t *u, const nn_qweight *w, int32_t *acc) {
    if (k == NN_QK_AUTO) k = nn_qkernel_auto();
    if (!nn_qkernel_available(k))
        return ag_error("nn_qgemm_s32: kernel %s is not available on this CPU", nn_qkernel_name(k));
    if (m <= 0) return 0;
#ifdef TG_HAVE_VNNI
    if (k == NN_QK_VNNI) {
        qgemm_vnni(m, u, w, acc);
        return 0;
    }
#endif
    qgemm_portable(m, u, w, acc);
    return 0;
}

/* ---- the op ---- */

ag_tensor *nn_qlinear_forward(ag_tape *t, ag_tensor *x, const nn_qweight *w, ag_tensor *bias) {
    if (!x || !w) return ag_report(t, "nn_qlinear_forward: x or the weight is NULL");
    if (x->ndim < 1 || x->shape[x->ndim - 1] != w->in)
        return ag_report(t, "nn_qlinear_forward: x's last dim is %d, the weight takes %d",
                         x->ndim ? x->shape[x->ndim - 1] : 0, w->in);
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->out))
        return ag_report(t, "nn_qlinear_forward: bias of %d elements, expected (%d)",
                         bias->ndim == 1 ? bias->shape[0] : -1, w->out);
    ag_tensor *in[2] = {x, bias};
    if (ag_op_wants_grad(t, bias ? 2 : 1, in))
        return ag_report(t, "nn_qlinear_forward: inference only, turn the tape's recording off");
    x = ag_contiguous(t, x);
    if (!x) return NULL;
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->out;
    ag_tensor *y = ag_tensor_new(t, x->ndim, shape);
    int m = (int)(x->numel / w->in);
    uint8_t *u = ag_tape_alloc(t, (size_t)m * (size_t)w->kp + 1);
    float *sx = ag_tape_alloc(t, sizeof *sx * (size_t)m + 1);
    int32_t *acc = ag_tape_alloc(t, sizeof *acc * (size_t)m * (size_t)w->out + 1);
    if (!y || !u || !sx || !acc) return NULL;
    for (int i = 0; i < m; i++)
        sx[i] = nn_qrow(x->data + (size_t)i * (size_t)w->in, w->in, w->kp, u + (size_t)i * w->kp);
    if (nn_qgemm_s32(NN_QK_AUTO, m, u, w, acc)) return ag_report(t, "%s", ag_last_error());
    const ag_real *b = bias ? bias->data : NULL;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < w->out; j++) {
            size_t at = (size_t)i * (size_t)w->out + (size_t)j;
            float v = (float)(acc[at] - 128 * w->csum[j]) * (sx[i] * w->scale[j]);
            y->data[at] = (ag_real)(b ? v + (float)b[j] : v);
        }
    return y;
}
