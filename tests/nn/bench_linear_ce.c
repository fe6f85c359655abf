/* bench_linear_ce.c -- the output layer with its cross-entropy, fused in row chunks
 * (nn_linear_ce_forward) against its composite (nn_linear_forward + ag_cross_entropy + sum):
 * one forward and backward of each, in turn, on a fresh tape.
 *   bench_linear_ce [--bf16] [rows] [H] [V] [kept] [reps] [threads] [chunk ...]
 * defaults: 1280 rows (a shard of the big Transformer's batch: 64 x 20), H 256, V 17851, a
 * fraction 0.43 of the rows kept (weight 1/T; the others are padding, weight 0: the whole
 * corpus at --num-steps 20), 7 repetitions, 1 thread, chunk 0 (nn/loss.h's default); --bf16
 * runs the products in bf16 (ag_set_precision(AG_BF16), the kernel printed), float32 without.
 * Several chunk sizes may be given: each is run in turn with the composite. Prints, per variant,
 * the median wall and CPU time of the repetitions, GFLOP/s of the three products over the rows
 * each computes (the composite computes every row), and the tape's high-water mark. Built by
 * CMake, never run by ctest: speed is measured, not asserted (docs/benchmarks.md). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_op.h"
#include "nn/nn.h"
#include "tests/bench_util.h"

/* A leaf requiring a gradient, N(0, scale^2) draws from r. */
static ag_tensor *randn_leaf(int ndim, const int *shape, double scale, ag_rng *r) {
    ag_tensor *x = ag_leaf_new(ndim, shape, true);
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)(scale * ag_rng_normal(r));
    return x;
}

int main(int argc, char **argv) {
    const bool bf16 = argc > 1 && !strcmp(argv[1], "--bf16");
    if (bf16) {
        if (ag_set_precision(AG_BF16)) return fprintf(stderr, "%s\n", ag_last_error()), 2;
        argv++, argc--;
    }
    int R = argc > 1 ? atoi(argv[1]) : 1280, H = argc > 2 ? atoi(argv[2]) : 256;
    int V = argc > 3 ? atoi(argv[3]) : 17851;
    double kept = argc > 4 ? atof(argv[4]) : 0.43;
    int reps = argc > 5 ? atoi(argv[5]) : 7, threads = argc > 6 ? atoi(argv[6]) : 1;
    int n_chunks = argc > 7 ? argc - 7 : 1;
    if (R < 1 || H < 1 || V < 1 || reps < 1 || reps > 99 || ag_set_threads(threads)) {
        fprintf(stderr, "usage: %s [--bf16] [rows] [H] [V] [kept] [reps] [threads] [chunk ...]\n",
                argv[0]);
        return 2;
    }
    ag_rng rng;
    ag_rng_seed(&rng, 1);
    ag_tensor *W = randn_leaf(AG_SHAPE(V, H), 0.1, &rng), *b = ag_leaf_new(AG_SHAPE(V), true);
    ag_tensor *x = randn_leaf(AG_SHAPE(R, H), 1, &rng);
    int32_t *labels = malloc(sizeof *labels * (size_t)R);
    ag_real *w = malloc(sizeof *w * (size_t)R);
    int n_kept = 0;
    for (int r = 0; r < R; r++) { /* rows of 20 positions, the first ~kept of each valid */
        labels[r] = (int32_t)(ag_rng_next(&rng) % (uint64_t)V);
        w[r] = (r % 20) < kept * 20 ? (ag_real)(1.0 / 20) : 0;
        n_kept += w[r] != 0;
    }
    nn_linear l = {.weight = W, .bias = b, .in = H, .out = V};
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    printf("rows %d (%d kept), H %d, V %d, %d threads, %d repetitions (medians), products %s\n", R,
           n_kept, H, V, threads, reps, bf16 ? ag_gemm_bf16_kernel() : "float32");
    for (int k = 0; k < n_chunks; k++) {
        int chunk = argc > 7 ? atoi(argv[7 + k]) : 0;
        double wall[2][99], cpu[2][99];
        size_t high[2] = {0, 0};
        for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
            for (int v = 0; v < 2; v++) {
                ag_tape_reset(t);
                ag_tape_stats s0 = ag_tape_stats_get(t);
                double t0 = bench_clock(CLOCK_MONOTONIC),
                       c0 = bench_clock(CLOCK_PROCESS_CPUTIME_ID);
                ag_tensor *y = (v ? nn_linear_ce_composite : nn_linear_ce_forward)(
                    &l, &c, x, labels, w, 0, AG_IGNORE_INDEX, chunk);
                if (!y || ag_backward(t, y)) return fprintf(stderr, "%s\n", ag_last_error()), 1;
                if (rep < 0) continue;
                wall[v][rep] = bench_clock(CLOCK_MONOTONIC) - t0;
                cpu[v][rep] = bench_clock(CLOCK_PROCESS_CPUTIME_ID) - c0;
                size_t hw = ag_tape_stats_get(t).bytes_used - s0.bytes_used;
                if (hw > high[v]) high[v] = hw;
            }
        }
        for (int v = 0; v < 2; v++) {
            double mw = bench_median(wall[v], reps), mc = bench_median(cpu[v], reps);
            double flops = 6.0 * (v ? R : n_kept) * (double)H * V;
            printf("%-28s wall %8.2f ms  cpu %8.2f ms  %6.1f GFLOP/s  tape %7.1f MiB\n",
                   v ? "composite" : "fused", 1e3 * mw, 1e3 * mc, flops / mw * 1e-9,
                   high[v] / 1048576.0);
            if (v == 0) printf("  (chunk_rows %d)\n", chunk);
        }
    }
    ag_tape_free(t);
    ag_leaf_free(W);
    ag_leaf_free(b);
    ag_leaf_free(x);
    free(labels);
    free(w);
    return 0;
}
