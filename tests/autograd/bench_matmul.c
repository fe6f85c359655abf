/* bench_matmul.c -- the engine's overhead over calling BLIS directly, and the cost of a node.
 *
 * For the dense shapes of the default Transformer (640 token rows, d_model 32, ffn 64, target
 * vocabulary 201) it times one training use of a weight: forward y = x w, then backward
 * dx = dy w^T and dw = x^T dy, (a) through the engine (ag_matmul or ag_linear, ag_backward_seed,
 * ag_tape_reset: everything a step pays) and (b) as the same three bli_sgemm calls on the same
 * layouts. It prints GFLOP/s of both and the overhead, medians of several repeats.
 * `big` as second argument times the big Transformer's linear layers instead (d_model 256, FFN
 * 1,024, output layer 17,851 words, 640 rows); there the BLIS column is BLIS's own kernels and
 * the engine's is its AVX-512 micro-kernel where it runs one (autograd/gemm_kernel.c).
 * `preset` times the full preset's (d_model 256, FFN 1,024, 8,000 subwords) on 510 rows, the
 * median rows of a shard's batch: below zen3's MT (512), where BLIS alone runs its code for
 * small sizes and the engine its blocked code (ops_matmul.c, ag__gemm_blocked).
 * Not a test: run it by hand (build/tests/autograd/bench_matmul [repeats [big]]).
 */
#define _POSIX_C_SOURCE 200809L
#include "autograd/ag.h"
#include "autograd/ag_op.h"
#include "tests/bench_util.h"

#include <blis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REPEATS_DEFAULT = 9 };

typedef struct shape {
    int m, k, n;
} shape;

static void fill(float *p, size_t n, ag_rng *r) {
    for (size_t i = 0; i < n; i++) p[i] = (float)ag_rng_normal(r);
}

/* Seconds per (forward + both backward products), engine. linear: w stored (n, k). */
static double time_engine(shape s, int iters, bool linear, ag_tape *t, ag_tensor *x, ag_tensor *w,
                          float *seed) {
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        ag_tensor *y = linear ? ag_linear(t, x, w, NULL) : ag_matmul(t, x, w);
        ag_backward_seed(t, y, seed);
        ag_tape_reset(t);
    }
    (void)s;
    return (bench_now() - t0) / iters;
}

/* The same three products straight through BLIS. */
static double time_blis(shape s, int iters, bool linear, float *x, float *dx, float *w, float *dw,
                        float *y, float *dy) {
    float one = 1, zero = 0;
    inc_t rsw = linear ? 1 : s.n, csw = linear ? s.k : 1; /* w as (k, n) */
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, s.m, s.n, s.k, &one, x, s.k, 1, w, rsw, csw,
                  &zero, y, s.n, 1);
        bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, s.m, s.k, s.n, &one, dy, s.n, 1, w, csw,
                  rsw, &one, dx, s.k, 1);
        bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, s.k, s.n, s.m, &one, x, 1, s.k, dy, s.n, 1,
                  &one, dw, rsw, csw);
    }
    return (bench_now() - t0) / iters;
}

static void bench_shape(shape s, bool linear, int repeats) {
    ag_rng r;
    ag_rng_seed(&r, 1);
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_leaf_new(AG_SHAPE(s.m, s.k), true);
    ag_tensor *w =
        linear ? ag_leaf_new(AG_SHAPE(s.n, s.k), true) : ag_leaf_new(AG_SHAPE(s.k, s.n), true);
    float *seed = malloc(sizeof(float) * (size_t)s.m * s.n);
    float *y = malloc(sizeof(float) * (size_t)s.m * s.n);
    fill(x->data, (size_t)x->numel, &r);
    fill(w->data, (size_t)w->numel, &r);
    fill(seed, (size_t)s.m * s.n, &r);
    double flop = 3.0 * 2.0 * s.m * s.n * s.k;
    int iters = (int)(2e8 / flop) + 1; /* about 0.02 s per repeat */
    double te[64], tb[64], ratio[64];
    time_engine(s, iters, linear, t, x, w, seed); /* warm-up: the arena reaches its size */
    for (int i = 0; i < repeats; i++) {
        te[i] = time_engine(s, iters, linear, t, x, w, seed);
        tb[i] = time_blis(s, iters, linear, x->data, x->grad, w->data, w->grad, y, seed);
        ratio[i] = te[i] / tb[i];
    }
    double me = bench_median(te, repeats), mb = bench_median(tb, repeats),
           mr = bench_median(ratio, repeats);
    printf("%-7s %4dx%-3d by %3dx%-3d  engine %6.1f GFLOP/s  BLIS %6.1f GFLOP/s  overhead %+5.1f%% "
           " (%.1f us/step)\n",
           linear ? "linear" : "matmul", s.m, s.k, s.k, s.n, flop / me * 1e-9, flop / mb * 1e-9,
           (mr - 1) * 100, me * 1e6);
    free(seed);
    free(y);
    ag_leaf_free(x);
    ag_leaf_free(w);
    ag_tape_free(t);
}

/* The attention products of the default Transformer: 256 (= batch 64 x 4 heads) independent
 * 10 x 8 by 8 x 10 products (scores = Q K^T, K^T a transposed view) and 10 x 10 by 10 x 8
 * (out = P V), forward and backward, through the engine's batched matmul. */
static void bench_attention(int repeats) {
    ag_rng r;
    ag_rng_seed(&r, 2);
    ag_tape *t = ag_tape_new();
    ag_tensor *q = ag_leaf_new(AG_SHAPE(256, 10, 8), true),
              *k = ag_leaf_new(AG_SHAPE(256, 10, 8), true);
    ag_tensor *v = ag_leaf_new(AG_SHAPE(256, 10, 8), true);
    fill(q->data, (size_t)q->numel, &r);
    fill(k->data, (size_t)k->numel, &r);
    fill(v->data, (size_t)v->numel, &r);
    float *seed = malloc(sizeof(float) * 256 * 10 * 8);
    fill(seed, 256 * 10 * 8, &r);
    const int iters = 200;
    double v_us[64];
    for (int rep = 0; rep <= repeats; rep++) {
        double t0 = bench_now();
        for (int i = 0; i < iters; i++) {
            ag_tensor *s = ag_matmul(t, q, ag_transpose(t, k, 1, 2));
            ag_tensor *o = ag_matmul(t, s, v);
            ag_backward_seed(t, o, seed);
            ag_tape_reset(t);
        }
        if (rep) v_us[rep - 1] = (bench_now() - t0) / iters * 1e6;
    }
    double us = bench_median(v_us, repeats), flop = 6.0 * 2 * 256 * 10 * 10 * 8;
    printf("attention 256 x (10x8 by 8x10, 10x10 by 10x8), forward + backward: %.1f us (%.1f "
           "GFLOP/s)\n",
           us, flop / us * 1e-3);
    free(seed);
    ag_leaf_free(q);
    ag_leaf_free(k);
    ag_leaf_free(v);
    ag_tape_free(t);
}

/* Nanoseconds to record one node (an add of two 1-element tensors, with its arena memory). */
static void bench_node_cost(int repeats) {
    ag_tape *t = ag_tape_new();
    ag_tensor *a = ag_leaf_new(AG_SHAPE(1), true), *b = ag_leaf_new(AG_SHAPE(1), true);
    double v[64];
    const int chain = 1000, rounds = 200;
    for (int rep = 0; rep <= repeats; rep++) {
        double t0 = bench_now();
        for (int r = 0; r < rounds; r++) {
            ag_tensor *h = a;
            for (int i = 0; i < chain; i++) h = ag_add(t, h, b);
            ag_tape_reset(t);
        }
        if (rep) v[rep - 1] = (bench_now() - t0) / ((double)chain * rounds) * 1e9;
    }
    printf("node    one recorded add of 1-element tensors: %.1f ns (forward + node + arena)\n",
           bench_median(v, repeats));
    ag_leaf_free(a);
    ag_leaf_free(b);
    ag_tape_free(t);
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : REPEATS_DEFAULT;
    if (repeats < 1 || repeats > 64) repeats = REPEATS_DEFAULT;
    const char *kernel = ag_gemm_kernel(); /* first: it initialises BLIS */
    printf("medians of %d repeats; one step = forward + dX + dW; BLIS configuration %s; the "
           "engine's micro-kernel: %s\n",
           repeats, bli_arch_string(bli_arch_query_id()), kernel);
    if (argc > 2 && strcmp(argv[2], "big") == 0) {
        /* The big Transformer's products (d_model 256, FFN 1,024, 17,851 target words), on the
         * rows of a 640-row shard: linear layers only, the engine against BLIS's own kernels. */
        const shape big[] = {
            {640, 256, 256}, {640, 256, 1024}, {640, 1024, 256}, {640, 256, 17851}};
        for (size_t i = 0; i < sizeof big / sizeof *big; i++) bench_shape(big[i], true, repeats);
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "preset") == 0) {
        const shape full[] = {
            {510, 256, 256}, {510, 256, 1024}, {510, 1024, 256}, {510, 256, 8000}};
        for (size_t i = 0; i < sizeof full / sizeof *full; i++) bench_shape(full[i], true, repeats);
        return 0;
    }
    const shape shapes[] = {{640, 32, 32}, {640, 32, 64}, {640, 64, 32}, {640, 32, 201}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        bench_shape(shapes[i], false, repeats);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        bench_shape(shapes[i], true, repeats);
    bench_attention(repeats);
    bench_node_cost(repeats);
    return 0;
}
