/* bench_gemm_bf16.c -- float32 products (ag_gemm) against bf16 ones (ag_gemm_bf16) at the
 * shapes of the big Transformer's (--preset full) linear layers.
 *
 * For each layer, x (R, in) and its weight w (out, in): the three products of one training use,
 * y = x w^T, dx = dy w, dw = dy^T x, with the operands' layouts of ag_linear. It prints
 * GFLOP/s (2 m n k per product) of the three together for both, and the ratio, then bf16's
 * GFLOP/s of each product apart; medians of several repeats made in turn, on one thread, the
 * kernels named. R = 512 rows (one of the 2 shards of --preset full's 1,024-token batch); the
 * output layer (its joint 8,000-piece vocabulary) takes its rows in chunks of 256 (nn/loss.h).
 * Not a test: run it by hand (build/tests/autograd/bench_gemm_bf16 [repeats]).
 *
 * First it measures the two instructions' own rates on this core (x86-64 with AVX512-BF16 only):
 * 24 independent accumulators, 50 million instructions, 5 times each in turn, of vfmadd231ps
 * (16 multiply-adds) and of vdpbf16ps (32), in billions of multiply-adds per second: the
 * ceilings of the two kernels.
 */
#define _POSIX_C_SOURCE 200809L
#include "autograd/ag.h"
#include "autograd/ag_op.h"
#include "tests/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct layer {
    const char *name;
    int rows, in, out;
} layer;

static const layer LAYERS[] = {
    {"attention projection 256 -> 256", 512, 256, 256},
    {"FFN in 256 -> 1024", 512, 256, 1024},
    {"FFN out 1024 -> 256", 512, 1024, 256},
    {"output layer 256 -> 8000 (256-row chunk)", 256, 256, 8000},
};

/* Seconds of each of the three products of one training use (t[0] y, t[1] dx, t[2] dw). */
static void one_use(const layer *L, bool bf16, const float *x, const float *w, const float *dy,
                    float *y, float *dx, float *dw, double t[3]) {
    const int R = L->rows, in = L->in, out = L->out;
    double t0 = bench_now();
    if (bf16) ag_gemm_bf16(R, out, in, x, in, 1, w, 1, in, 0, y, out, 1);
    else ag_gemm(R, out, in, 1, x, in, 1, w, 1, in, 0, y, out, 1);
    double t1 = bench_now();
    if (bf16) ag_gemm_bf16(R, in, out, dy, out, 1, w, in, 1, 1, dx, in, 1);
    else ag_gemm(R, in, out, 1, dy, out, 1, w, in, 1, 1, dx, in, 1);
    double t2 = bench_now();
    if (bf16) ag_gemm_bf16(out, in, R, dy, 1, out, x, in, 1, 1, dw, in, 1);
    else ag_gemm(out, in, R, 1, dy, 1, out, x, in, 1, 1, dw, in, 1);
    double t3 = bench_now();
    t[0] = t1 - t0, t[1] = t2 - t1, t[2] = t3 - t2;
}

#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#include <immintrin.h>
#define INSNS 50000000L
#define ACC 24
/* Multiply-adds per second of back-to-back vdpbf16ps (bf16 = 1) or vfmadd231ps (bf16 = 0). */
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,fma"), noinline)) static double
insn_rate(bool bf16) {
    __m512 acc[ACC];
    for (int i = 0; i < ACC; i++) acc[i] = _mm512_set1_ps((float)i);
    __m512i a = _mm512_set1_epi32(0x3f803f80), b = _mm512_set1_epi32(0x3c003c00);
    double t0 = bench_now();
    for (long n = 0; n < INSNS / ACC; n++) {
        if (bf16) {
#pragma GCC unroll 24
            for (int i = 0; i < ACC; i++)
                acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)a, (__m512bh)b);
        } else {
#pragma GCC unroll 24
            for (int i = 0; i < ACC; i++)
                acc[i] = _mm512_fmadd_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), acc[i]);
        }
        __asm__ volatile("" : "+v"(a)); /* no hoisting across iterations */
    }
    double dt = bench_now() - t0;
    float sink[16];
    for (int i = 1; i < ACC; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    _mm512_storeu_ps(sink, acc[0]);
    if (sink[0] == 1234.5f) printf(" ");
    return (double)INSNS * (bf16 ? 32 : 16) / dt;
}

/* Multiply-adds per second of back-to-back tdpbf16ps (16 x 16 floats += 16 x 32 bf16 by 32 x
 * 16: 8,192 a tile) on four independent tiles of C, A and B loaded once: the AMX kernel's
 * ceiling. Run once the library has chosen its AMX kernel: Linux has granted the process the
 * tile data; the configuration is this thread's own. */
__attribute__((target("amx-tile,amx-bf16"), noinline)) static double tile_rate(void) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    static _Alignas(64) uint32_t ab[16 * 16];
    static _Alignas(64) float c[16 * 16];
    for (int i = 0; i < 256; i++) ab[i] = 0x3c003c00u; /* pairs of 2^-7 */
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_loadd(6, ab, 64);
    _tile_loadd(7, ab, 64);
    const long n = INSNS / 40; /* 8,192 multiply-adds each */
    double t0 = bench_now();
    for (long i = 0; i < n; i += 4) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    double dt = bench_now() - t0;
    _tile_stored(0, c, 64);
    _tile_release();
    if (c[0] == 1234.5f) printf(" ");
    return (double)n * 8192 / dt;
}

static void insn_rates(void) {
    if (!ag_bf16_native()) return;
    if (!strncmp(ag_gemm_bf16_kernel(), "amx", 3)) { /* the library was granted the tiles */
        double amx[5];
        for (int r = 0; r < 5; r++) amx[r] = tile_rate();
        printf("one core, median of 5: tdpbf16ps %.1f G multiply-adds/s (4 tiles of C, nothing "
               "loaded in the loop)\n",
               bench_median(amx, 5) * 1e-9);
    }
    double fma[5], dp[5], ratio[5];
    for (int r = 0; r < 5; r++) { /* in turn: a drift of the machine's speed hits both */
        fma[r] = insn_rate(false);
        dp[r] = insn_rate(true);
        ratio[r] = dp[r] / fma[r];
    }
    printf("one core, medians of 5 in turn: vfmadd231ps %.1f G multiply-adds/s, vdpbf16ps %.1f "
           "G/s (ratio %.2f)\n",
           bench_median(fma, 5) * 1e-9, bench_median(dp, 5) * 1e-9, bench_median(ratio, 5));
}
#else
static void insn_rates(void) {}
#endif

static float *filled(size_t n, ag_rng *r) {
    float *p = malloc(sizeof *p * n);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (float)(0.1 * ag_rng_normal(r));
    return p;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1 || reps > 1000) {
        fprintf(stderr, "bench_gemm_bf16: repeats %s: expected 1 to 1000\n", argv[1]);
        return 2;
    }
    insn_rates();
    printf("kernels: float32 %s, bf16 %s; 1 thread, medians of %d\n", ag_gemm_kernel(),
           ag_gemm_bf16_kernel(), reps);
    printf("%-42s %8s %8s %6s | bf16: %6s %6s %6s\n", "layer (rows x in -> out), GFLOP/s", "fp32",
           "bf16", "ratio", "y", "dx", "dw");
    ag_rng r;
    ag_rng_seed(&r, 1);
    double tot[2] = {0, 0}, flops_all = 0;
    for (size_t l = 0; l < sizeof LAYERS / sizeof *LAYERS; l++) {
        const layer *L = &LAYERS[l];
        size_t R = (size_t)L->rows, in = (size_t)L->in, out = (size_t)L->out;
        float *x = filled(R * in, &r), *w = filled(out * in, &r), *dy = filled(R * out, &r),
              *y = filled(R * out, &r), *dx = filled(R * in, &r), *dw = filled(out * in, &r);
        double t[3], med[2], part[3], *v = malloc(sizeof *v * 5 * (size_t)reps);
        if (!v) exit(1);
        one_use(L, false, x, w, dy, y, dx, dw, t); /* warm-up */
        one_use(L, true, x, w, dy, y, dx, dw, t);
        for (int i = 0; i < reps; i++) /* in turn */
            for (int p = 0; p < 2; p++) {
                one_use(L, p, x, w, dy, y, dx, dw, t);
                v[p * reps + i] = t[0] + t[1] + t[2];
                if (p)
                    for (int q = 0; q < 3; q++) v[(2 + q) * reps + i] = t[q];
            }
        for (int p = 0; p < 2; p++) {
            med[p] = bench_median(v + p * reps, reps);
            tot[p] += med[p];
        }
        for (int q = 0; q < 3; q++)
            part[q] = 2.0 * (double)R * in * out / bench_median(v + (2 + q) * reps, reps) * 1e-9;
        double flops = 6.0 * (double)R * in * out;
        flops_all += flops;
        printf("%-42s %8.1f %8.1f %5.2fx |       %6.1f %6.1f %6.1f\n", L->name,
               flops / med[0] * 1e-9, flops / med[1] * 1e-9, med[0] / med[1], part[0], part[1],
               part[2]);
        free(x), free(y), free(w), free(dy), free(dx), free(dw), free(v);
    }
    printf("%-42s %8.1f %8.1f %5.2fx\n", "all four", flops_all / tot[0] * 1e-9,
           flops_all / tot[1] * 1e-9, tot[0] / tot[1]);
    return 0;
}
