/* test_gemm_bf16_ops.c -- the precision switch (ag_set_precision) on the ops of the float32
 * engine (links ag; the float64 engine's refusal is test_gemm_bf16_64's):
 *   - AG_FP32 by default with ag_gemm's bits; linear and matmul forward and backward under
 *     AG_BF16 give ag_gemm_bf16's bits (the bias' sum stays float32); back to AG_FP32, the first
 *     bits again.
 *   - a small network trained 300 steps in both follows the float32 loss curve (every step
 *     within 3%), with the same bits on the emulated kernel as on the CPU's.
 * The products themselves, their kernels and the refusals: test_gemm_bf16.c. */
#include "autograd/ag_op.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tg_test.h"

#ifdef TG_DOUBLE
#error "bf16 products run on the float32 engine: link ag"
#endif

/* Random values over several binades: every product stays in float32's normal range. */
static void fill(float *x, size_t n, ag_rng *r) {
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((2 * ag_rng_uniform(r) - 1) * ldexp(1, (int)ag_rng_below(r, 12) - 6));
}

/* ---- the switch ---- */

typedef struct lin_run {
    float y[50 * 30], dx[50 * 40], dw[30 * 40], db[30];
} lin_run;

/* linear (50 x 40) -> 30 with bias, backward from a fixed seed, at the precision in force. */
static void run_linear(ag_tensor *x, ag_tensor *w, ag_tensor *b, const float *seed, lin_run *o) {
    memset(x->grad, 0, sizeof(float) * 50 * 40);
    memset(w->grad, 0, sizeof(float) * 30 * 40);
    memset(b->grad, 0, sizeof(float) * 30);
    ag_tape *t = ag_tape_new();
    ag_tensor *y = ag_linear(t, x, w, b);
    CU_ASSERT_FATAL(y != NULL);
    CU_ASSERT_EQUAL(ag_backward_seed(t, y, seed), 0);
    memcpy(o->y, y->data, sizeof o->y);
    memcpy(o->dx, x->grad, sizeof o->dx);
    memcpy(o->dw, w->grad, sizeof o->dw);
    memcpy(o->db, b->grad, sizeof o->db);
    ag_tape_free(t);
}

static void test_switch_ops(void) {
    enum { R = 50, IN = 40, OUT = 30 };
    ag_tensor *x = ag_leaf_new(2, (int[]){R, IN}, true),
              *w = ag_leaf_new(2, (int[]){OUT, IN}, true), *b = ag_leaf_new(1, (int[]){OUT}, true);
    static float seed[R * OUT], ref[R * IN];
    static lin_run f1, h, f2;
    ag_rng r;
    ag_rng_seed(&r, 11);
    fill(x->data, R * IN, &r);
    fill(w->data, OUT * IN, &r);
    fill(b->data, OUT, &r);
    fill(seed, R * OUT, &r);
    CU_ASSERT_EQUAL(ag_get_precision(), AG_FP32); /* the default */
    run_linear(x, w, b, seed, &f1);
    for (int i = 0; i < R; i++) memcpy(ref + i * OUT, b->data, sizeof(float) * OUT);
    ag_gemm(R, OUT, IN, 1, x->data, IN, 1, w->data, 1, IN, 1, ref, OUT, 1);
    CU_ASSERT_EQUAL(memcmp(f1.y, ref, sizeof f1.y), 0); /* float32: ag_gemm's bits */
    CU_ASSERT_EQUAL_FATAL(ag_set_precision(AG_BF16), 0);
    run_linear(x, w, b, seed, &h);
    CU_ASSERT_EQUAL(ag_set_precision(AG_FP32), 0);
    for (int i = 0; i < R; i++) memcpy(ref + i * OUT, b->data, sizeof(float) * OUT);
    ag_gemm_bf16(R, OUT, IN, x->data, IN, 1, w->data, 1, IN, 1, ref, OUT, 1);
    CU_ASSERT_EQUAL(memcmp(h.y, ref, sizeof h.y), 0); /* y = x W^T + b */
    memset(ref, 0, sizeof ref);
    ag_gemm_bf16(R, IN, OUT, seed, OUT, 1, w->data, IN, 1, 1, ref, IN, 1);
    CU_ASSERT_EQUAL(memcmp(h.dx, ref, sizeof h.dx), 0); /* dx = dy W */
    memset(ref, 0, sizeof ref);
    ag_gemm_bf16(OUT, IN, R, seed, 1, OUT, x->data, IN, 1, 1, ref, IN, 1);
    CU_ASSERT_EQUAL(memcmp(h.dw, ref, sizeof h.dw), 0);   /* dW = dy^T x */
    CU_ASSERT_EQUAL(memcmp(h.db, f1.db, sizeof h.db), 0); /* the bias' sum stays float32 */
    CU_ASSERT(memcmp(h.y, f1.y, sizeof h.y) != 0);        /* bf16 did change the product */
    run_linear(x, w, b, seed, &f2);                       /* back in float32: the first bits */
    CU_ASSERT_EQUAL(memcmp(&f1, &f2, sizeof f1), 0);
    /* matmul (R x IN) (IN x OUT) read from w transposed, forward and da */
    CU_ASSERT_EQUAL_FATAL(ag_set_precision(AG_BF16), 0);
    memset(x->grad, 0, sizeof(float) * R * IN);
    ag_tape *t = ag_tape_new();
    ag_tensor *y = ag_matmul(t, x, ag_transpose(t, w, 0, 1));
    CU_ASSERT_FATAL(y != NULL);
    CU_ASSERT_EQUAL(ag_backward_seed(t, y, seed), 0);
    CU_ASSERT_EQUAL(ag_set_precision(AG_FP32), 0);
    ag_gemm_bf16(R, OUT, IN, x->data, IN, 1, w->data, 1, IN, 0, ref, OUT, 1);
    CU_ASSERT_EQUAL(memcmp(y->data, ref, sizeof(float) * R * OUT), 0);
    memset(ref, 0, sizeof ref);
    ag_gemm_bf16(R, IN, OUT, seed, OUT, 1, w->data, IN, 1, 1, ref, IN, 1);
    CU_ASSERT_EQUAL(memcmp(x->grad, ref, sizeof(float) * R * IN), 0);
    ag_tape_free(t);
    ag_leaf_free(x), ag_leaf_free(w), ag_leaf_free(b);
}

/* ---- training ----
 * A 16 -> 64 -> 64 -> 1 tanh network fitted to a smooth function of 256 random points, full
 * batch, 300 steps of gradient descent from the same start in float32 and in bf16. */
enum { TN = 256, TI = 16, TH = 64, STEPS = 300 };
/* every step's loss within 3% of float32's (measured on the AVX512-BF16 kernel: 0.82% at worst) */
#define BF16_CURVE_TOL 0.03

static void train(ag_tensor *const *p, const ag_tensor *x, const ag_tensor *y, double *loss) {
    for (int s = 0; s < STEPS; s++) {
        ag_tape *t = ag_tape_new();
        ag_tensor *h = ag_tanh(t, ag_linear(t, (ag_tensor *)x, p[0], p[1]));
        h = ag_tanh(t, ag_linear(t, h, p[2], p[3]));
        ag_tensor *l = ag_mse_loss(t, ag_linear(t, h, p[4], p[5]), (ag_tensor *)y, AG_REDUCE_MEAN);
        CU_ASSERT_FATAL(l != NULL);
        loss[s] = l->data[0];
        CU_ASSERT_EQUAL(ag_backward(t, l), 0);
        for (int i = 0; i < 6; i++)
            for (ptrdiff_t e = 0; e < p[i]->numel; e++) {
                p[i]->data[e] -= 0.05f * p[i]->grad[e];
                p[i]->grad[e] = 0;
            }
        ag_tape_free(t);
    }
}

static void test_train_follows_fp32(void) {
    const int shapes[6][2] = {{TH, TI}, {TH, 0}, {TH, TH}, {TH, 0}, {1, TH}, {1, 0}};
    ag_tensor *p[6], *x = ag_leaf_new(2, (int[]){TN, TI}, false),
                     *y = ag_leaf_new(2, (int[]){TN, 1}, false);
    float init[6][TH * TH];
    ag_rng r;
    ag_rng_seed(&r, 21);
    for (int i = 0; i < 6; i++) {
        p[i] = ag_leaf_new(shapes[i][1] ? 2 : 1, shapes[i], true);
        for (ptrdiff_t e = 0; e < p[i]->numel; e++)
            init[i][e] = (float)(ag_rng_normal(&r) / sqrt(shapes[i][1] ? shapes[i][1] : 4));
    }
    for (int n = 0; n < TN; n++) {
        double s = 0;
        for (int i = 0; i < TI; i++)
            s += (x->data[n * TI + i] = (float)ag_rng_normal(&r)) * (i % 3 - 1);
        y->data[n] = (float)sin(0.5 * s);
    }
    static double loss[3][STEPS]; /* float32, bf16, bf16 on the emulated kernel */
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < 6; i++) memcpy(p[i]->data, init[i], sizeof(float) * p[i]->numel);
        CU_ASSERT_EQUAL_FATAL(ag_set_precision(run ? AG_BF16 : AG_FP32), 0);
        bool was = run == 2 ? ag_bf16_emulate(true) : false;
        train(p, x, y, loss[run]);
        if (run == 2) ag_bf16_emulate(was);
    }
    CU_ASSERT_EQUAL(ag_set_precision(AG_FP32), 0);
    /* the CPU's kernel and its emulation: the same bits (AMX: measured, printed below) */
    const bool same = !memcmp(loss[1], loss[2], sizeof loss[1]);
    if (strcmp(ag_gemm_bf16_kernel(), "amx 32x32")) {
        CU_ASSERT(same);
    } else {
        printf("(AMX and its emulation: %s bits) ", same ? "the same" : "different");
    }
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        double d = fabs(loss[1][s] - loss[0][s]) / loss[0][s];
        worst = d > worst ? d : worst;
    }
    printf("(loss %.4f -> %.4f float32, %.4f bf16; worst step %.2f%% apart) ", loss[0][0],
           loss[0][STEPS - 1], loss[1][STEPS - 1], 100 * worst);
    CU_ASSERT(loss[0][STEPS - 1] < loss[0][0] / 5); /* it did learn */
    CU_ASSERT(worst < BF16_CURVE_TOL);
    CU_ASSERT(loss[1][0] != loss[0][0] || loss[1][1] != loss[0][1]); /* bf16 did run */
    for (int i = 0; i < 6; i++) ag_leaf_free(p[i]);
    ag_leaf_free(x), ag_leaf_free(y);
}

static CU_TestInfo tests[] = {
    {"the switch: linear and matmul, forward and backward", test_switch_ops},
    {"a network trained in bf16 follows float32", test_train_follows_fp32},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("gemm_bf16 ops", tests); }
