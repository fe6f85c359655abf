/* optim.c -- SGD, Adam, AdamW over the flat buffers of a parameter store (math in optim.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"

const char *optim_kind_name(optim_kind k) {
    switch (k) {
    case OPTIM_SGD: return "sgd";
    case OPTIM_ADAM: return "adam";
    case OPTIM_ADAMW: return "adamw";
    }
    return "?";
}

/* Checks cfg; 0 or -1 with a message naming the field and the allowed range. */
static int check_cfg(const optim_cfg *c) {
    const char *k = optim_kind_name(c->kind);
    if (c->kind != OPTIM_SGD && c->kind != OPTIM_ADAM && c->kind != OPTIM_ADAMW)
        return ag_error("optim_new: unknown kind %d", (int)c->kind);
    if (!(c->lr >= 0) || !isfinite(c->lr))
        return ag_error("optim_new (%s): lr = %g, expected a finite value >= 0", k, c->lr);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return ag_error("optim_new (%s): weight_decay = %g, expected >= 0", k, c->weight_decay);
    if (!(c->clip_norm >= 0) || !isfinite(c->clip_norm))
        return ag_error("optim_new (%s): clip_norm = %g, expected > 0 (or 0: no clipping)", k,
                        c->clip_norm);
    if (c->kind == OPTIM_SGD) {
        if (!(c->momentum >= 0) || !isfinite(c->momentum))
            return ag_error("optim_new (sgd): momentum = %g, expected >= 0", c->momentum);
        if (!(c->dampening >= 0 && c->dampening <= 1))
            return ag_error("optim_new (sgd): dampening = %g, expected 0 to 1", c->dampening);
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
            return ag_error("optim_new (sgd): nesterov needs momentum > 0 and dampening "
                            "0 (got %g, %g)",
                            c->momentum, c->dampening);
    } else {
        if (!(c->beta1 >= 0 && c->beta1 < 1))
            return ag_error("optim_new (%s): beta1 = %g, expected 0 <= beta1 < 1", k, c->beta1);
        if (!(c->beta2 >= 0 && c->beta2 < 1))
            return ag_error("optim_new (%s): beta2 = %g, expected 0 <= beta2 < 1", k, c->beta2);
        if (!(c->eps >= 0) || !isfinite(c->eps))
            return ag_error("optim_new (%s): eps = %g, expected >= 0", k, c->eps);
    }
    const optim_schedule *s = &c->schedule;
    switch (s->kind) {
    case OPTIM_LR_CONSTANT: return 0;
    case OPTIM_LR_STEP:
        if (s->step_size <= 0 || !(s->gamma > 0))
            return ag_error("optim_new (%s): step schedule with step_size = %d, gamma = %g, "
                            "expected step_size > 0 and gamma > 0",
                            k, s->step_size, s->gamma);
        return 0;
    case OPTIM_LR_NOAM:
        if (s->d_model <= 0 || s->warmup <= 0)
            return ag_error("optim_new (%s): Noam schedule with d_model = %d, warmup = %d, "
                            "expected both > 0",
                            k, s->d_model, s->warmup);
        return 0;
    case OPTIM_LR_INVSQRT:
        if (s->warmup <= 0)
            return ag_error("optim_new (%s): inverse-square-root schedule with warmup = %d, "
                            "expected > 0",
                            k, s->warmup);
        return 0;
    case OPTIM_LR_COSINE:
    case OPTIM_LR_LINEAR:
        if (s->warmup < 0 || s->total <= s->warmup || !(s->min_ratio >= 0 && s->min_ratio <= 1))
            return ag_error("optim_new (%s): %s schedule with warmup = %d, total = %lld, "
                            "min_ratio = %g, expected 0 <= warmup < total and min_ratio 0 to 1",
                            k, s->kind == OPTIM_LR_COSINE ? "cosine" : "linear", s->warmup,
                            (long long)s->total, s->min_ratio);
        return 0;
    }
    return ag_error("optim_new (%s): unknown schedule kind %d", k, (int)s->kind);
}

/* The runs of parameters that share a weight decay (cfg.decay_filter), each running to the
 * next run's first parameter (the zero padding between parameters goes with the run before:
 * an update leaves zeros at zero). */
static int make_runs(optim *o) {
    size_t n = nn_params_count(o->ps);
    o->runs = malloc((n ? n : 1) * sizeof *o->runs);
    if (!o->runs) return -1;
    o->runs[0] = (optim_run){0, o->flat, true};
    o->n_runs = 1;
    for (size_t i = 0; i < n && o->cfg.decay_filter; i++) {
        bool d = o->cfg.decay_filter(nn_params_at(o->ps, i), o->cfg.decay_filter_user);
        optim_run *last = &o->runs[o->n_runs - 1];
        if (i == 0) {
            last->decay = d;
        } else if (d != last->decay) {
            last->end = nn_params_offset(o->ps, i);
            o->runs[o->n_runs++] = (optim_run){last->end, o->flat, d};
        }
    }
    return 0;
}

static ag_real *alloc_state(size_t n) {
    ag_real *p = calloc(n ? n : 1, sizeof *p);
    return p;
}

optim *optim_new(nn_params *ps, optim_cfg cfg) {
    if (!ps) {
        ag_error("optim_new: parameter store is NULL");
        return NULL;
    }
    if (!nn_params_finalized(ps)) {
        ag_error("optim_new: the parameter store is not finalized (call "
                 "nn_params_finalize first)");
        return NULL;
    }
    if (check_cfg(&cfg)) return NULL;
    optim *o = calloc(1, sizeof *o);
    if (!o) {
        ag_error("optim_new: out of memory");
        return NULL;
    }
    o->cfg = cfg;
    o->ps = ps;
    o->flat = nn_params_flat_size(ps);
    bool ok = make_runs(o) == 0;
    if (cfg.kind == OPTIM_ADAM || cfg.kind == OPTIM_ADAMW) {
        o->m = alloc_state(o->flat);
        o->v = alloc_state(o->flat);
        ok = ok && o->m && o->v;
    } else if (cfg.momentum != 0) {
        o->buf = alloc_state(o->flat);
        ok = ok && o->buf != NULL;
    }
    if (!ok) {
        optim_free(o);
        ag_error("optim_new: out of memory for the state of %zu parameters", nn_params_numel(ps));
        return NULL;
    }
    return o;
}

void optim_free(optim *o) {
    if (!o) return;
    free(o->m);
    free(o->v);
    free(o->buf);
    free(o->runs);
    free(o);
}

#ifdef TG_DOUBLE
#define SQRT sqrt
#else
#define SQRT sqrtf
#endif

/* One update of elements [i0, i1) of the flat buffers, every element with weight decay wd
 * (its run's): the gradient is read as grad * gscale (the clipping factor) and then zeroed, so
 * clipping, the update and zero_grad are one pass. Elements are independent: ranges run in
 * parallel on the engine's threads, same bits. */
typedef struct update_job {
    optim *o;
    double lr;
    ag_real gscale;
} update_job;

/* SGD with momentum mu, dampening d, weight decay wd (PyTorch's torch.optim.SGD):
 *   g = grad + wd p;  b = (t == 1) ? g : mu b + (1 - d) g;  g = nesterov ? g + mu b : b;
 *   p -= lr g. */
static void sgd_span(const update_job *j, size_t i0, size_t i1, double weight_decay) {
    optim *o = j->o;
    const optim_cfg *c = &o->cfg;
    ag_real *restrict p = nn_params_values(o->ps), *restrict gr = nn_params_grads(o->ps);
    ag_real *restrict buf = o->buf;
    const ag_real wd = (ag_real)weight_decay, mu = (ag_real)c->momentum, gs = j->gscale;
    const ag_real damp = (ag_real)(1 - c->dampening), a = (ag_real)j->lr;
    const bool first = o->t == 0;
    for (size_t i = i0; i < i1; i++) {
        ag_real g = gr[i] * gs + wd * p[i];
        gr[i] = 0;
        if (buf) {
            buf[i] = first ? g : mu * buf[i] + damp * g;
            g = c->nesterov ? g + mu * buf[i] : buf[i];
        }
        p[i] -= a * g;
    }
}

/* Adam / AdamW (PyTorch's torch.optim.Adam / AdamW), t = update number from 1:
 *   AdamW: p *= 1 - lr wd           Adam: g = grad + wd p
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
static void adam_span(const update_job *j, size_t i0, size_t i1, double weight_decay) {
    optim *o = j->o;
    const optim_cfg *c = &o->cfg;
    const int64_t t = o->t + 1;
    const double lr = j->lr;
    ag_real *restrict p = nn_params_values(o->ps), *restrict gr = nn_params_grads(o->ps);
    ag_real *restrict m = o->m, *restrict v = o->v;
    const bool decoupled = c->kind == OPTIM_ADAMW;
    const ag_real l2 = (ag_real)(decoupled ? 0 : weight_decay), gs = j->gscale;
    const ag_real keep = (ag_real)(decoupled ? 1 - lr * weight_decay : 1);
    const ag_real b1 = (ag_real)c->beta1, b2 = (ag_real)c->beta2;
    const ag_real nb1 = (ag_real)(1 - c->beta1), nb2 = (ag_real)(1 - c->beta2);
    const ag_real step_size = (ag_real)(lr / (1 - pow(c->beta1, (double)t)));
    const ag_real bc2_sqrt = (ag_real)sqrt(1 - pow(c->beta2, (double)t));
    const ag_real eps = (ag_real)c->eps;
    for (size_t i = i0; i < i1; i++) {
        ag_real g = gr[i] * gs + l2 * p[i];
        gr[i] = 0;
        p[i] *= keep; /* 1 for Adam: exact */
        m[i] = b1 * m[i] + nb1 * g;
        v[i] = b2 * v[i] + nb2 * g * g;
        ag_real denom = SQRT(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * (m[i] / denom);
    }
}

/* Elements [i0, i1) of the flat buffers, cut at the runs' borders. */
static void update_range(void *ctx, ptrdiff_t i0, ptrdiff_t i1) {
    const update_job *j = ctx;
    const optim *o = j->o;
    for (size_t r = 0; r < o->n_runs; r++) {
        size_t b = o->runs[r].begin > (size_t)i0 ? o->runs[r].begin : (size_t)i0;
        size_t e = o->runs[r].end < (size_t)i1 ? o->runs[r].end : (size_t)i1;
        if (b >= e) continue;
        double wd = o->runs[r].decay ? o->cfg.weight_decay : 0;
        if (o->cfg.kind == OPTIM_SGD) sgd_span(j, b, e, wd);
        else adam_span(j, b, e, wd);
    }
}

int optim_step(optim *o) {
    if (!o) return ag_error("optim_step: optimizer is NULL");
    double norm = optim_grad_norm(o->ps), clip = o->cfg.clip_norm;
    o->last_norm = norm;
    if (!isfinite(norm)) {
        nn_params_zero_grad(o->ps);
        return ag_error("optim_step: the gradient norm is %g at update %lld; update "
                        "skipped, gradients zeroed (check the loss for NaN/inf, e.g. with "
                        "ag_tape_set_nan_check)",
                        norm, (long long)(o->t + 1));
    }
    /* d2l's grad_clipping, as optim_clip_grad_norm, folded into the update */
    update_job j = {o, optim_lr(o), clip > 0 && norm > clip ? (ag_real)(clip / norm) : 1};
    ag_parallel_for((ptrdiff_t)o->flat, 8192, update_range, &j);
    o->t++;
    return 0;
}

int64_t optim_steps(const optim *o) { return o ? o->t : 0; }
double optim_lr(const optim *o) {
    return o ? optim_schedule_lr(o->cfg.schedule, o->cfg.lr, o->t + 1) : NAN;
}
int optim_set_lr(optim *o, double lr) {
    if (!o) return ag_error("optim_set_lr: optimizer is NULL");
    if (!(lr >= 0) || !isfinite(lr))
        return ag_error("optim_set_lr (%s): lr = %g, expected a finite value >= 0",
                        optim_kind_name(o->cfg.kind), lr);
    o->cfg.lr = lr;
    return 0;
}
double optim_last_grad_norm(const optim *o) { return o ? o->last_norm : NAN; }
const optim_cfg *optim_config(const optim *o) { return o ? &o->cfg : NULL; }
