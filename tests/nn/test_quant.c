/* test_quant.c -- the int8 Linear of nn/quant.h: exact quantized values (ties to even), the
 * round-trip bounds, the int32 kernels (portable, the AMX kernel's emulation, and AVX2,
 * AVX512-VNNI and AMX-INT8 where the CPU has them) equal to a naive int64 sum on odd shapes and
 * at the extremes, the op (with and without bias; on the VNNI and AMX kernels the epilogue runs
 * on the kernel's sums in registers) against the dequantized reference, bit for bit, and
 * against the float product within the quantization bound, the hook in nn_linear_forward
 * (nn_packs in int8 mode, a weight kept float), and bad input. */
#include "autograd/ag_op.h"
#include "nn/nn.h"
#include "tests/tg_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 88172645463325252ull;
static float uniform(float lo, float hi) { /* xorshift64: the same draws on every run */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 40) / (double)(1 << 24));
}

static void test_exact_values(void) {
    /* 0.5 * 127 = 63.5 and -0.5 * 63.5 = -31.75: ties go to even */
    const ag_real w[2][4] = {{1, -0.5f, 0.25f, 0}, {0, 0, 0, 0}};
    nn_qweight *q = nn_qweight_new(&w[0][0], 2, 4, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    CU_ASSERT_EQUAL(q->kp, 4);
    const int want[4] = {127, -64, 32, 0};
    for (int k = 0; k < 4; k++) {
        CU_ASSERT_EQUAL(nn_qweight_at(q, 0, k), want[k]);
        CU_ASSERT_EQUAL(nn_qweight_at(q, 1, k), 0);
    }
    CU_ASSERT_EQUAL(q->scale[0], (float)(1.0 / 127));
    CU_ASSERT_EQUAL(q->scale[1], 0.0f); /* a zero channel: scale 0, all zero */
    CU_ASSERT_EQUAL(q->csum[0], 127 - 64 + 32);
    CU_ASSERT_EQUAL(q->csum[1], 0);
    nn_qweight_free(q);

    const ag_real x[3] = {2, -1, 0.5f};
    uint8_t u[4];
    float sx = nn_qrow(x, 3, 4, u);
    CU_ASSERT_EQUAL(sx, 2.0f / 127);
    CU_ASSERT_EQUAL(u[0], 255); /* 127 + 128 */
    CU_ASSERT_EQUAL(u[1], 64);  /* -63.5 -> -64 */
    CU_ASSERT_EQUAL(u[2], 160); /* 31.75 -> 32 */
    CU_ASSERT_EQUAL(u[3], 128); /* padding: 0 */
    const ag_real zero[2] = {0, 0};
    CU_ASSERT_EQUAL(nn_qrow(zero, 2, 4, u), 0.0f);
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(u[k], 128);
}

/* |W - sw qw| <= sw / 2 on every element, max |qw| = 127 in every nonzero channel. */
static void test_round_trip_bounds(void) {
    enum { OUT = 37, IN = 29 };
    ag_real w[OUT * IN];
    for (int i = 0; i < OUT * IN; i++) w[i] = uniform(-3, 3) * (i % 7 == 0 ? 10 : 1);
    nn_qweight *q = nn_qweight_new(w, OUT, IN, IN);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    for (int j = 0; j < OUT; j++) {
        int amax = 0;
        for (int k = 0; k < IN; k++) {
            int v = nn_qweight_at(q, j, k);
            amax = abs(v) > amax ? abs(v) : amax;
            double err = fabs((double)w[j * IN + k] - (double)q->scale[j] * v);
            CU_ASSERT(err <= q->scale[j] * (0.5 + 1e-5));
        }
        CU_ASSERT_EQUAL(amax, 127);
    }
    nn_qweight_free(q);
}

/* acc from kernel k against a naive int64 sum of u * qw, every element exact. extreme: 0,
 * random values; else every x = extreme (+1: u = 255; -1: u = 1) against +-1 weights (+-127). */
static void expect_kernel(nn_qkernel k, int m, int out, int in, int extreme) {
    ag_real *w = malloc(sizeof *w * (size_t)out * in), *x = malloc(sizeof *x * (size_t)m * in);
    for (int i = 0; i < out * in; i++) w[i] = extreme ? (i % 3 ? 1.0f : -1.0f) : uniform(-1, 1);
    for (int i = 0; i < m * in; i++) x[i] = extreme ? (ag_real)extreme : uniform(-2, 2);
    nn_qweight *q = nn_qweight_new(w, out, in, in);
    uint8_t *u = malloc((size_t)m * (size_t)q->kp);
    int32_t *acc = malloc(sizeof *acc * (size_t)m * out);
    for (int i = 0; i < m; i++) nn_qrow(x + (size_t)i * in, in, q->kp, u + (size_t)i * q->kp);
    CU_ASSERT_EQUAL_FATAL(nn_qgemm_s32(k, m, u, q, acc), 0);
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < out; j++) {
            int64_t s = 0;
            for (int c = 0; c < in; c++)
                s += (int64_t)u[(size_t)i * q->kp + c] * nn_qweight_at(q, j, c);
            bad += acc[(size_t)i * out + j] != s;
        }
    if (bad)
        TG_FAIL("kernel %s, m %d out %d in %d: %d sums differ", nn_qkernel_name(k), m, out, in,
                bad);
    free(w);
    free(x);
    free(u);
    free(acc);
    nn_qweight_free(q);
}

static void test_kernels_exact(void) {
    /* m, out, in; for the AMX kernels, rows in tiles of 16 (32 at a time) and the rest, blocks
     * of 16 channels in pairs and one alone, whole chunks of 64 bytes of k and the rest */
    static const int shapes[][3] = {{1, 1, 1},     {3, 17, 5},    {5, 33, 64},    {7, 16, 130},
                                    {4, 50, 257},  {9, 256, 256}, {2, 3, 1024},   {16, 16, 64},
                                    {40, 50, 200}, {70, 33, 257}, {48, 256, 1024}};
    nn_qkernel ks[5] = {NN_QK_PORTABLE, NN_QK_AVX2, NN_QK_VNNI, NN_QK_AMX, NN_QK_AMX_EMULATED};
    for (int kk = 0; kk < 5; kk++) {
        if (!nn_qkernel_available(ks[kk])) {
            printf("(%s not on this CPU: its case is not run) ", nn_qkernel_name(ks[kk]));
            continue;
        }
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            expect_kernel(ks[kk], shapes[s][0], shapes[s][1], shapes[s][2], 0);
        /* the extremes: u = 255 against +-127 over 1024 bytes, 33 million in size; u = 1
         * (qx = -127: the AVX2 kernel's byte pairs at -32,258) */
        expect_kernel(ks[kk], 5, 19, 1024, 1);
        expect_kernel(ks[kk], 37, 19, 1024, 1);
        expect_kernel(ks[kk], 6, 19, 1024, -1);
    }
    const nn_qkernel a = nn_qkernel_auto();
    CU_ASSERT(a == NN_QK_AMX || a == NN_QK_VNNI || a == NN_QK_AVX2 || a == NN_QK_PORTABLE);
    /* the best the CPU has: AVX2 only where neither AVX512-VNNI nor AMX runs */
    if (a == NN_QK_PORTABLE) CU_ASSERT(!nn_qkernel_available(NN_QK_AVX2));
    if (a == NN_QK_AVX2) CU_ASSERT(!nn_qkernel_available(NN_QK_VNNI));
    CU_ASSERT(nn_qkernel_available(a));
    CU_ASSERT(nn_qkernel_available(NN_QK_PORTABLE));
    CU_ASSERT(nn_qkernel_available(NN_QK_AMX_EMULATED));
    printf("(auto: %s) ", nn_qkernel_name(a));
}

/* The op: y = the dequantized product (the epilogue's exact bits from the int sums), and within
 * the quantization bound of the float product x W^T + b. */
static void expect_op(int in, int out) {
    enum { B = 10, T = 15 }; /* 150 rows: the op's blocks of 64 and a rest */
    ag_tape *t = ag_tape_new();
    bool prev = ag_tape_set_recording(t, false);
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(B, T, in));
    ag_tensor *w = ag_leaf_new(AG_SHAPE(out, in), false), *b = ag_leaf_new(AG_SHAPE(out), false);
    for (int i = 0; i < B * T * in; i++) x->data[i] = uniform(-2, 2);
    for (int i = 0; i < out * in; i++) w->data[i] = uniform(-0.5f, 0.5f);
    for (int i = 0; i < out; i++) b->data[i] = uniform(-1, 1);
    nn_qweight *q = nn_qweight_new(w->data, out, in, in);
    ag_tensor *y = nn_qlinear_forward(t, x, q, b), *y0 = nn_qlinear_forward(t, x, q, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y0);
    CU_ASSERT_EQUAL(y->ndim, 3);
    CU_ASSERT_EQUAL(y->shape[2], out);
    uint8_t *u = malloc((size_t)q->kp);
    int bad_bits = 0, bad_bound = 0;
    for (int i = 0; i < B * T; i++) {
        const ag_real *xr = x->data + (size_t)i * in;
        float sx = nn_qrow(xr, in, q->kp, u);
        for (int j = 0; j < out; j++) {
            int32_t s = 0;
            double ref = b->data[j], bound = 1e-5;
            for (int k = 0; k < in; k++) {
                int qw = nn_qweight_at(q, j, k);
                s += (u[k] - 128) * qw;
                ref += (double)xr[k] * w->data[j * in + k];
                bound += fabs(xr[k]) * q->scale[j] / 2 + fabs(w->data[j * in + k]) * sx / 2 +
                         sx * q->scale[j] / 4;
            }
            float want0 = (float)s * (sx * q->scale[j]), want = want0 + (float)b->data[j];
            bad_bits += y->data[(size_t)i * out + j] != want;
            bad_bits += y0->data[(size_t)i * out + j] != want0; /* no bias */
            bad_bound += fabs(y->data[(size_t)i * out + j] - ref) > bound;
        }
    }
    if (bad_bits || bad_bound)
        TG_FAIL("in %d, out %d, kernel %s: %d values off the reference's bits, %d off the bound",
                in, out, nn_qkernel_name(nn_qkernel_auto()), bad_bits, bad_bound);
    free(u);
    nn_qweight_free(q);
    ag_leaf_free(w);
    ag_leaf_free(b);
    ag_tape_set_recording(t, prev);
    ag_tape_free(t);
}

/* The op through the CPU's kernel: k shorter than a chunk of 64 bytes, then whole chunks with a
 * rest and blocks of channels in a pair and alone (AMX). */
static void test_op_against_references(void) {
    expect_op(45, 21);
    expect_op(200, 40);
}

/* nn_linear_forward through a set in int8 mode: nn_qlinear_forward's bits; a weight the set
 * keeps float: the float product's bits (the same as without a set, as nn_packs promises). */
static void test_packs_hook(void) {
    nn_params *ps = nn_params_new();
    nn_linear a, o;
    CU_ASSERT_EQUAL_FATAL(nn_linear_init(&a, ps, "a", 24, 40, true), 0);
    CU_ASSERT_EQUAL_FATAL(nn_linear_init(&o, ps, "o", 40, 7, true), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 5), 0);
    ag_tape *t = ag_tape_new();
    bool prev = ag_tape_set_recording(t, false);
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(6, 24));
    for (int i = 0; i < 6 * 24; i++) x->data[i] = uniform(-1, 1);
    nn_packs *p = nn_packs_new();
    nn_packs_set_quant(p, NN_QUANT_INT8);
    CU_ASSERT_EQUAL(nn_packs_keep_float(p, o.weight), 0);
    nn_ctx cq = {.tape = t, .packs = p}, cf = {.tape = t};
    ag_tensor *h = nn_linear_forward(&a, &cq, x);
    const nn_qweight *qa = NULL, *qo = NULL;
    const nn_bweight *ba = NULL;
    CU_ASSERT_EQUAL(nn_packs_quantized(p, a.weight, &qa, &ba), 0);
    CU_ASSERT_PTR_NULL(ba);
    CU_ASSERT_EQUAL(nn_packs_quantized(p, o.weight, &qo, &ba), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(qa);
    CU_ASSERT_PTR_NULL(qo);
    ag_tensor *h_ref = nn_qlinear_forward(t, x, qa, a.bias);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(memcmp(h->data, h_ref->data, sizeof(ag_real) * 6 * 40), 0);
    ag_tensor *y = nn_linear_forward(&o, &cq, h), *y_ref = nn_linear_forward(&o, &cf, h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(memcmp(y->data, y_ref->data, sizeof(ag_real) * 6 * 7), 0);
    /* the same set, the same input: the same bits (determinism, the weight quantized once) */
    ag_tensor *h2 = nn_linear_forward(&a, &cq, x);
    CU_ASSERT_EQUAL(memcmp(h->data, h2->data, sizeof(ag_real) * 6 * 40), 0);
    const nn_qweight *qa2 = NULL;
    CU_ASSERT_EQUAL(nn_packs_quantized(p, a.weight, &qa2, &ba), 0);
    CU_ASSERT_PTR_EQUAL(qa, qa2);
    nn_packs_free(p);
    ag_tape_set_recording(t, prev);
    ag_tape_free(t);
    nn_params_free(ps);
}

static void test_errors(void) {
    ag_set_error_handler(tg_capture, NULL);
    const ag_real w[6] = {1, 2, 3, 4, 5, 6};
    TG_EXPECT_NULL(nn_qweight_new(w, 0, 3, 3), "nn_qweight_new", "expected a weight");
    TG_EXPECT_NULL(nn_qweight_new(NULL, 2, 3, 3), "nn_qweight_new", "NULL");
    nn_qweight *q = nn_qweight_new(w, 2, 3, 3);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 4));
    bool prev = ag_tape_set_recording(t, false);
    TG_EXPECT_NULL(nn_qlinear_forward(t, x, q, NULL), "nn_qlinear_forward", "last dim is 4",
                   "takes 3");
    ag_tensor *x3 = ag_tensor_new(t, AG_SHAPE(2, 3)), *b = ag_tensor_new(t, AG_SHAPE(3));
    TG_EXPECT_NULL(nn_qlinear_forward(t, x3, q, b), "bias of 3 elements", "expected (2)");
    TG_EXPECT_NULL(nn_qlinear_forward(t, x3, NULL, NULL), "NULL");
    ag_tape_set_recording(t, prev);
    ag_tensor *xg = ag_leaf_new(AG_SHAPE(2, 3), true);
    TG_EXPECT_NULL(nn_qlinear_forward(t, xg, q, NULL), "inference only");
    uint8_t u[4] = {0};
    int32_t acc[2];
    if (!nn_qkernel_available(NN_QK_VNNI))
        TG_EXPECT_ERROR(nn_qgemm_s32(NN_QK_VNNI, 1, u, q, acc), "avx512-vnni", "not available");
    if (!nn_qkernel_available(NN_QK_AMX))
        TG_EXPECT_ERROR(nn_qgemm_s32(NN_QK_AMX, 1, u, q, acc), "amx", "not available");
    if (!nn_qkernel_available(NN_QK_AVX2))
        TG_EXPECT_ERROR(nn_qgemm_s32(NN_QK_AVX2, 1, u, q, acc), "avx2", "not available");
    ag_leaf_free(xg);
    ag_tape_free(t);
    nn_qweight_free(q);
    ag_set_error_handler(NULL, NULL);
}

/* ---- bf16 ---- */

static void test_bf16_round(void) {
    CU_ASSERT_EQUAL(ag_bf16_round(1.0f), 0x3F80);
    CU_ASSERT_EQUAL(ag_bf16_round(-2.0f), 0xC000);
    CU_ASSERT_EQUAL(ag_bf16_round(1.0f + 1.0f / 256), 0x3F80); /* a tie: to even (down) */
    CU_ASSERT_EQUAL(ag_bf16_round(1.0f + 3.0f / 256), 0x3F82); /* a tie: to even (up) */
    CU_ASSERT_EQUAL(ag_bf16_round(1.0f + 1.5f / 256), 0x3F81); /* above the tie */
    CU_ASSERT_EQUAL(ag_bf16_round(INFINITY), 0x7F80);
    CU_ASSERT_EQUAL(ag_bf16_round(3.4e38f), 0x7F80); /* past bf16's largest: infinity */
    CU_ASSERT(isnan(ag_bf16_to_float(ag_bf16_round(NAN))));
    CU_ASSERT_EQUAL(ag_bf16_to_float(0x4049), 3.140625f); /* exact */
    /* round trip: relative error at most 2^-8 (half an ulp of 8 significant bits) */
    for (int i = 0; i < 1000; i++) {
        float v = uniform(-100, 100);
        CU_ASSERT(fabsf(ag_bf16_to_float(ag_bf16_round(v)) - v) <= fabsf(v) / 256);
    }
}

/* The two bf16 kernels: the same bits (normal-range values); against the float64 product of
 * the bf16 operands within in ulps of the sum of |products|. */
static void expect_bf16_kernels(int m, int out, int in) {
    ag_real *w = malloc(sizeof *w * (size_t)out * in);
    for (int i = 0; i < out * in; i++) w[i] = uniform(-1, 1);
    nn_bweight *bw = nn_bweight_new(w, out, in, in);
    uint16_t *x = calloc((size_t)m * (size_t)bw->kp, sizeof *x);
    for (int i = 0; i < m; i++)
        for (int k = 0; k < in; k++) x[(size_t)i * bw->kp + k] = ag_bf16_round(uniform(-3, 3));
    float *a = malloc(sizeof *a * (size_t)m * out), *b = malloc(sizeof *b * (size_t)m * out);
    CU_ASSERT_EQUAL_FATAL(nn_bgemm_f32(NN_BK_PORTABLE, m, x, bw, a), 0);
    int bad_bound = 0, bad_bits = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < out; j++) {
            double s = 0, abs_s = 0;
            for (int k = 0; k < in; k++) {
                double p = (double)ag_bf16_to_float(x[(size_t)i * bw->kp + k]) *
                           ag_bf16_to_float(nn_bweight_at(bw, j, k));
                s += p;
                abs_s += fabs(p);
            }
            bad_bound += fabs(a[(size_t)i * out + j] - s) > in * abs_s * 0x1p-24 + 1e-30;
        }
    CU_ASSERT_EQUAL(bad_bound, 0);
    if (nn_bkernel_available(NN_BK_AVX512BF16)) {
        CU_ASSERT_EQUAL_FATAL(nn_bgemm_f32(NN_BK_AVX512BF16, m, x, bw, b), 0);
        for (size_t e = 0; e < (size_t)m * out; e++) bad_bits += a[e] != b[e];
        if (bad_bits)
            TG_FAIL("bf16 kernels, m %d out %d in %d: %d sums differ", m, out, in, bad_bits);
    }
    free(w);
    free(x);
    free(a);
    free(b);
    nn_bweight_free(bw);
}

static void test_bf16_kernels(void) {
    static const int shapes[][3] = {
        {1, 1, 1}, {3, 17, 5}, {5, 70, 64}, {2, 33, 257}, {4, 256, 256}};
    if (!nn_bkernel_available(NN_BK_AVX512BF16))
        printf("(avx512-bf16 not on this CPU: the portable kernel alone is checked) ");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        expect_bf16_kernels(shapes[s][0], shapes[s][1], shapes[s][2]);
    CU_ASSERT(nn_bkernel_available(NN_BK_PORTABLE));
}

/* The op through an nn_packs set in bf16 mode: the portable kernel's sums plus the bias, bit
 * for bit, and within bf16's rounding of the float product. */
static void test_bf16_op(void) {
    nn_params *ps = nn_params_new();
    nn_linear a;
    CU_ASSERT_EQUAL_FATAL(nn_linear_init(&a, ps, "a", 37, 20, true), 0);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 3), 0);
    ag_tape *t = ag_tape_new();
    bool prev = ag_tape_set_recording(t, false);
    enum { M = 70 }; /* the op's blocks of 64 and a rest */
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(M, 37));
    for (int i = 0; i < M * 37; i++) x->data[i] = uniform(-2, 2);
    nn_packs *p = nn_packs_new();
    nn_packs_set_quant(p, NN_QUANT_BF16);
    nn_ctx c = {.tape = t, .packs = p};
    ag_tensor *y = nn_linear_forward(&a, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    const nn_qweight *q = NULL;
    const nn_bweight *bw = NULL;
    CU_ASSERT_EQUAL(nn_packs_quantized(p, a.weight, &q, &bw), 0);
    CU_ASSERT_PTR_NULL(q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bw);
    uint16_t xb[M * 38] = {0};
    for (int i = 0; i < M; i++)
        for (int k = 0; k < 37; k++) xb[i * 38 + k] = ag_bf16_round(x->data[i * 37 + k]);
    float acc[M * 20];
    CU_ASSERT_EQUAL(nn_bgemm_f32(NN_BK_PORTABLE, M, xb, bw, acc), 0);
    int bad_bits = 0, bad_bound = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < 20; j++) {
            bad_bits += y->data[i * 20 + j] != acc[i * 20 + j] + a.bias->data[j];
            double ref = a.bias->data[j], bound = 1e-6;
            for (int k = 0; k < 37; k++) {
                double pk = (double)x->data[i * 37 + k] * a.weight->data[j * 37 + k];
                ref += pk;
                bound += fabs(pk) * (2.0 / 256 + 1.0 / 65536 + 37 * 0x1p-24);
            }
            bad_bound += fabs(y->data[i * 20 + j] - ref) > bound;
        }
    CU_ASSERT_EQUAL(bad_bits, 0);
    CU_ASSERT_EQUAL(bad_bound, 0);
    ag_set_error_handler(tg_capture, NULL);
    ag_tensor *x5 = ag_tensor_new(t, AG_SHAPE(2, 5));
    TG_EXPECT_NULL(nn_blinear_forward(t, x5, bw, NULL), "nn_blinear_forward", "last dim is 5");
    TG_EXPECT_NULL(nn_bweight_new(NULL, 1, 1, 1), "nn_bweight_new");
    ag_set_error_handler(NULL, NULL);
    nn_packs_free(p);
    ag_tape_set_recording(t, prev);
    ag_tape_free(t);
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"exact quantized values: per channel, per row, ties to even, zero rows", test_exact_values},
    {"round trip: |W - sw qw| <= sw / 2, 127 reached in every channel", test_round_trip_bounds},
    {"int32 kernels: portable, AVX2, VNNI, AMX, AMX emulated equal a naive sum, odd shapes, "
     "extremes",
     test_kernels_exact},
    {"the op: the dequantized product's bits, within the bound of the float product",
     test_op_against_references},
    {"nn_linear_forward with an int8 set: the op's bits; a weight kept float: float bits",
     test_packs_hook},
    {"bad input: shapes, NULL, recording on, a kernel the CPU lacks", test_errors},
    {"bf16 rounding: ties to even, infinity, NaN, round-trip bound", test_bf16_round},
    {"bf16 kernels: AVX512-BF16 and portable the same bits, within the float bound",
     test_bf16_kernels},
    {"bf16 op through nn_packs: the kernel's sums plus bias, within bf16's bound, bad input",
     test_bf16_op},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("nn_quant", tests); }
