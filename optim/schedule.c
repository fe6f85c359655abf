/* schedule.c -- learning-rate schedules, gradient-norm utilities, the weight-decay rule. */
#include <math.h>
#include <stdlib.h>

#include "optim/optim.h"

#define PI 3.14159265358979323846

/* The factor of the warm-up schedules at update t >= 1 (math in optim.h): t / w during the
 * warm-up, then the decay of p = (t - w) / (total - w) in (0, 1], or sqrt(w / t). */
static double warmup_decay(optim_schedule s, int64_t t) {
    const double w = s.warmup, r = s.min_ratio;
    if (s.kind == OPTIM_LR_INVSQRT) {
        if (s.warmup <= 0) return NAN;
        return t <= s.warmup ? (double)t / w : sqrt(w / (double)t);
    }
    if (s.warmup < 0 || s.total <= s.warmup || !(r >= 0 && r <= 1)) return NAN;
    if (t <= s.warmup) return (double)t / w;
    if (t >= s.total) return r;
    double p = (double)(t - s.warmup) / (double)(s.total - s.warmup);
    return r + (1 - r) * (s.kind == OPTIM_LR_COSINE ? 0.5 * (1 + cos(PI * p)) : 1 - p);
}

double optim_schedule_lr(optim_schedule s, double lr, int64_t t) {
    if (t < 1) return NAN;
    switch (s.kind) {
    case OPTIM_LR_CONSTANT: return lr;
    case OPTIM_LR_STEP: /* lr * gamma^floor((t - 1) / step_size) */
        if (s.step_size <= 0 || !(s.gamma > 0)) return NAN;
        return lr * pow(s.gamma, (double)((t - 1) / s.step_size));
    case OPTIM_LR_NOAM: /* lr * d^-0.5 * min(t^-0.5, t * w^-1.5) */
        if (s.d_model <= 0 || s.warmup <= 0) return NAN;
        return lr * pow((double)s.d_model, -0.5) *
               fmin(pow((double)t, -0.5), (double)t * pow((double)s.warmup, -1.5));
    case OPTIM_LR_COSINE:
    case OPTIM_LR_LINEAR:
    case OPTIM_LR_INVSQRT: return lr * warmup_decay(s, t);
    }
    return NAN;
}

/* sqrt(sum_i g_i^2) over the flat gradient buffer (padding is zero), in double. The sum has
 * one fixed order whatever the threads: the buffer is cut into chunks of NORM_CHUNK elements,
 * each summed in NORM_LANES interleaved lanes (lane j takes elements j, j + LANES, ...; a
 * vector of independent sums, not one latency-bound chain), the lanes added in order, and the
 * chunks added in order; chunks run in parallel on the engine's threads. */
#define NORM_CHUNK 4096
#define NORM_LANES 8

static double chunk_sumsq(const ag_real *g, size_t n) {
    double lane[NORM_LANES] = {0}, s = 0;
    size_t i = 0;
    for (; i + NORM_LANES <= n; i += NORM_LANES)
        for (int j = 0; j < NORM_LANES; j++) lane[j] += (double)g[i + j] * (double)g[i + j];
    for (int j = 0; j < NORM_LANES; j++) s += lane[j];
    for (; i < n; i++) s += (double)g[i] * (double)g[i];
    return s;
}

typedef struct norm_job {
    const ag_real *g;
    size_t n;
    double *part;
} norm_job;

static void norm_chunks(void *ctx, ptrdiff_t c0, ptrdiff_t c1) {
    const norm_job *j = ctx;
    for (ptrdiff_t c = c0; c < c1; c++) {
        size_t b = (size_t)c * NORM_CHUNK, e = b + NORM_CHUNK < j->n ? b + NORM_CHUNK : j->n;
        j->part[c] = chunk_sumsq(j->g + b, e - b);
    }
}

double optim_grad_norm(nn_params *ps) {
    const ag_real *g = nn_params_grads(ps);
    size_t n = nn_params_flat_size(ps), chunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double stack[256], *part = chunks <= 256 ? stack : malloc(chunks * sizeof *part), s = 0;
    if (part) {
        norm_job j = {g, n, part};
        ag_parallel_for((ptrdiff_t)chunks, 2, norm_chunks, &j);
        for (size_t c = 0; c < chunks; c++) s += part[c];
        if (part != stack) free(part);
    } else { /* the same chunks in the same order, one at a time */
        for (size_t b = 0; b < n; b += NORM_CHUNK)
            s += chunk_sumsq(g + b, b + NORM_CHUNK < n ? NORM_CHUNK : n - b);
    }
    return sqrt(s);
}

/* d2l: if norm > theta, g *= theta / norm for every gradient element. */
double optim_clip_grad_norm(nn_params *ps, double max_norm) {
    double norm = optim_grad_norm(ps);
    if (max_norm > 0 && norm > max_norm) {
        ag_real *g = nn_params_grads(ps);
        size_t n = nn_params_flat_size(ps);
        ag_real scale = (ag_real)(max_norm / norm);
        for (size_t i = 0; i < n; i++) g[i] *= scale;
    }
    return norm;
}

/* Weight decay for parameters of 2 or more dimensions only (optim.h). */
bool optim_decay_matrices(const ag_tensor *param, void *user) {
    (void)user;
    return param && param->ndim >= 2;
}
