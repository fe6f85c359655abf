/* bench_conv.c -- Conv2d forward + backward of a small CNN's batch: the fused op (im2col +
 * ag_gemm, nn_conv2d_forward), its composite of primitives (nn_conv2d_composite) and a plain
 * direct loop (forward, then the backward's input and weight gradients). Built, not registered
 * with ctest: speed is measured, never asserted.
 *
 *     build/tests/nn/bench_conv [N C H W O reps loops]  (default 64 16 16 16 32 5 1; kernel 3x3,
 *                                                       pad 1; loops 0: no direct loops)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_op.h"
#include "nn/nn.h"
#include "tests/bench_util.h"

/* 3x3, stride 1, padding 1: y = conv(x, w) + b; then dx, dw, db from dy = y. */
static void naive(int N, int C, int H, int W, int O, const ag_real *x, const ag_real *w,
                  const ag_real *b, ag_real *y, ag_real *dx, ag_real *dw, ag_real *db) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) {
                    ag_real acc = b[o];
                    for (int c = 0; c < C; c++)
                        for (int p = 0; p < 3; p++)
                            for (int q = 0; q < 3; q++) {
                                int ih = i - 1 + p, iw = j - 1 + q;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    acc += w[((o * C + c) * 3 + p) * 3 + q] *
                                           x[((n * C + c) * H + ih) * W + iw];
                            }
                    y[((n * O + o) * H + i) * W + j] = acc;
                }
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) {
                    const ag_real g = y[((n * O + o) * H + i) * W + j];
                    db[o] += g;
                    for (int c = 0; c < C; c++)
                        for (int p = 0; p < 3; p++)
                            for (int q = 0; q < 3; q++) {
                                int ih = i - 1 + p, iw = j - 1 + q;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                const int xi = ((n * C + c) * H + ih) * W + iw;
                                const int wi = ((o * C + c) * 3 + p) * 3 + q;
                                dx[xi] += w[wi] * g;
                                dw[wi] += x[xi] * g;
                            }
                }
}

int main(int argc, char **argv) {
    int a[7] = {64, 16, 16, 16, 32, 5, 1};
    for (int i = 1; i < argc && i <= 7; i++) a[i - 1] = atoi(argv[i]);
    const int N = a[0], C = a[1], H = a[2], W = a[3], O = a[4], reps = a[5];
    nn_params *ps = nn_params_new();
    nn_conv2d conv;
    if (nn_conv2d_init(&conv, ps, "conv", C, O, 3, 3, &(nn_conv2d_opts){.padding = {1, 1}}) ||
        nn_params_finalize(ps, 1)) {
        fprintf(stderr, "%s\n", ag_last_error());
        return 1;
    }
    ag_tensor *x = ag_leaf_new(AG_SHAPE(N, C, H, W), true);
    ag_rng r;
    ag_rng_seed(&r, 2);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)ag_rng_normal(&r);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    const double macs = 3.0 * N * O * H * W * C * 9; /* forward + two backward products */
    printf("conv2d 3x3 pad 1: x [%d, %d, %d, %d] -> %d channels, forward + backward, %d reps, "
           "%d thread(s), gemm kernel %s\n",
           N, C, H, W, O, reps, ag_threads(), ag_gemm_kernel());
    for (int composite = 0; composite < 2; composite++) {
        double best = 1e30;
        for (int k = 0; k < reps; k++) {
            double t0 = bench_now();
            ag_tensor *y = (composite ? nn_conv2d_composite : nn_conv2d_forward)(&conv, &c, x);
            if (!y || ag_backward(t, ag_sum(t, ag_mul(t, y, y), AG_ALL, false))) return 1;
            double dt = bench_now() - t0;
            best = dt < best ? dt : best;
            ag_tape_reset(t);
        }
        printf("  %-28s %8.2f ms  %6.2f GMAC/s\n",
               composite ? "composite (primitives)" : "fused (im2col + GEMM)", 1e3 * best,
               macs / best * 1e-9);
    }
    if (!a[6]) return 0;
    ag_real *y = calloc((size_t)N * O * H * W, sizeof *y),
            *dx = calloc((size_t)x->numel, sizeof *y);
    ag_real *dw = calloc((size_t)conv.weight->numel, sizeof *y), *db = calloc((size_t)O, sizeof *y);
    double t0 = bench_now();
    naive(N, C, H, W, O, x->data, conv.weight->data, conv.bias->data, y, dx, dw, db);
    double dt = bench_now() - t0;
    printf("  %-28s %8.2f ms  %6.2f GMAC/s\n", "direct loops", 1e3 * dt, macs / dt * 1e-9);
    free(y), free(dx), free(dw), free(db);
    ag_tape_free(t);
    ag_leaf_free(x);
    nn_params_free(ps);
    return 0;
}
