/* schedule.c -- learning-rate schedules, gradient-norm utilities, the weight-decay rule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* The schedule's kind alone (no function). */
static double kind_lr(optim_schedule s, double lr, int64_t t) {
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

double optim_schedule_lr(optim_schedule s, double lr, int64_t t) {
    if (t < 1) return NAN;
    double r = kind_lr(s, lr, t);
    return s.fn ? r * s.fn(t - 1, s.fn_user) : r; /* LambdaLR's lr_lambda(last_epoch) */
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

/* The frozen parameters' element ranges [b, e) of the flat buffer, ascending. */
typedef struct frozen_list {
    size_t n, *b, *e;
} frozen_list;

/* The chunk [b, b + n) of g into tmp with the frozen ranges zeroed; returns tmp. */
static const ag_real *chunk_masked(const ag_real *g, size_t b, size_t n, const frozen_list *f,
                                   ag_real *tmp) {
    memcpy(tmp, g + b, n * sizeof *tmp);
    for (size_t k = 0; k < f->n; k++) {
        size_t lo = f->b[k] > b ? f->b[k] : b, hi = f->e[k] < b + n ? f->e[k] : b + n;
        if (lo < hi) memset(tmp + (lo - b), 0, (hi - lo) * sizeof *tmp);
    }
    return tmp;
}

typedef struct norm_job {
    const ag_real *g;
    size_t n;
    double *part;
    const frozen_list *frozen; /* NULL: nothing frozen */
} norm_job;

/* Chunk c's sum of squares; a frozen element counts as 0 (adding 0 to a lane leaves its bits,
 * so the sum is the one of the other elements in the same order). tmp: NORM_CHUNK elements of
 * scratch when something is frozen (NULL then: out of memory, NaN). */
static double chunk_value(const norm_job *j, size_t c, ag_real *tmp) {
    size_t b = c * NORM_CHUNK, e = b + NORM_CHUNK < j->n ? b + NORM_CHUNK : j->n;
    if (!j->frozen) return chunk_sumsq(j->g + b, e - b);
    if (!tmp) return NAN;
    return chunk_sumsq(chunk_masked(j->g, b, e - b, j->frozen, tmp), e - b);
}

static void norm_chunks(void *ctx, ptrdiff_t c0, ptrdiff_t c1) {
    const norm_job *j = ctx;
    ag_real *tmp = j->frozen ? malloc(NORM_CHUNK * sizeof *tmp) : NULL;
    for (ptrdiff_t c = c0; c < c1; c++) j->part[c] = chunk_value(j, (size_t)c, tmp);
    free(tmp);
}

/* The frozen ranges of ps into f (arrays malloc'd, freed by the caller); -1 out of memory. */
static int frozen_ranges(nn_params *ps, frozen_list *f) {
    size_t np = nn_params_count(ps), flat = nn_params_flat_size(ps);
    f->n = 0;
    f->b = f->e = NULL;
    for (size_t i = 0; i < np; i++) f->n += !nn_params_at(ps, i)->requires_grad;
    if (!f->n) return 0;
    f->b = malloc(f->n * sizeof *f->b);
    f->e = malloc(f->n * sizeof *f->e);
    if (!f->b || !f->e) return -1;
    f->n = 0;
    for (size_t i = 0; i < np; i++)
        if (!nn_params_at(ps, i)->requires_grad) {
            f->b[f->n] = nn_params_offset(ps, i);
            f->e[f->n++] = i + 1 < np ? nn_params_offset(ps, i + 1) : flat;
        }
    return 0;
}

double optim_grad_norm(nn_params *ps) {
    const ag_real *g = nn_params_grads(ps);
    size_t n = nn_params_flat_size(ps), chunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    frozen_list f;
    if (frozen_ranges(ps, &f)) {
        free(f.b);
        free(f.e);
        ag_error("optim_grad_norm: out of memory");
        return NAN;
    }
    double stack[256], *part = chunks <= 256 ? stack : malloc(chunks * sizeof *part), s = 0;
    norm_job j = {g, n, part, f.n ? &f : NULL};
    if (part) {
        ag_parallel_for((ptrdiff_t)chunks, 2, norm_chunks, &j);
        for (size_t c = 0; c < chunks; c++) s += part[c];
        if (part != stack) free(part);
    } else { /* the same chunks in the same order, one at a time */
        ag_real *tmp = f.n ? malloc(NORM_CHUNK * sizeof *tmp) : NULL;
        for (size_t c = 0; c < chunks; c++) s += chunk_value(&j, c, tmp);
        free(tmp);
    }
    free(f.b);
    free(f.e);
    return sqrt(s);
}

/* d2l: if norm > theta, g *= theta / norm for every gradient element (frozen ones left). */
double optim_clip_grad_norm(nn_params *ps, double max_norm) {
    double norm = optim_grad_norm(ps);
    if (max_norm > 0 && norm > max_norm) {
        ag_real *g = nn_params_grads(ps);
        size_t np = nn_params_count(ps);
        ag_real scale = (ag_real)(max_norm / norm);
        for (size_t i = 0; i < np; i++) {
            const ag_tensor *p = nn_params_at(ps, i);
            if (!p->requires_grad) continue;
            ag_real *q = g + nn_params_offset(ps, i);
            for (ptrdiff_t k = 0; k < p->numel; k++) q[k] *= scale;
        }
    }
    return norm;
}

/* Weight decay for parameters of 2 or more dimensions only (optim.h). */
bool optim_decay_matrices(const ag_tensor *param, void *user) {
    (void)user;
    return param && param->ndim >= 2;
}
