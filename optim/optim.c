/* optim.c -- SGD, Adam, AdamW over the flat buffers of a parameter store (math in optim.h). */
#include <math.h>
#include <stdio.h>
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

/* Group 0 as cfg describes it. */
static optim_group group_of_cfg(const optim_cfg *c) {
    optim_group g = {NULL,     NULL,   NULL,        c->lr,        c->weight_decay, c->beta1,
                     c->beta2, c->eps, c->momentum, c->dampening, c->nesterov};
    return g;
}

/* Checks a schedule; 0 or -1 with a message that starts with `where` and names the field and
 * the allowed range. */
static int check_schedule(const optim_schedule *s, const char *where) {
    switch (s->kind) {
    case OPTIM_LR_CONSTANT: return 0;
    case OPTIM_LR_STEP:
        if (s->step_size <= 0 || !(s->gamma > 0))
            return ag_error("%s: step schedule with step_size = %d, gamma = %g, "
                            "expected step_size > 0 and gamma > 0",
                            where, s->step_size, s->gamma);
        return 0;
    case OPTIM_LR_NOAM:
        if (s->d_model <= 0 || s->warmup <= 0)
            return ag_error("%s: Noam schedule with d_model = %d, warmup = %d, "
                            "expected both > 0",
                            where, s->d_model, s->warmup);
        return 0;
    case OPTIM_LR_INVSQRT:
        if (s->warmup <= 0)
            return ag_error("%s: inverse-square-root schedule with warmup = %d, "
                            "expected > 0",
                            where, s->warmup);
        return 0;
    case OPTIM_LR_COSINE:
    case OPTIM_LR_LINEAR:
        if (s->warmup < 0 || s->total <= s->warmup || !(s->min_ratio >= 0 && s->min_ratio <= 1))
            return ag_error("%s: %s schedule with warmup = %d, total = %lld, "
                            "min_ratio = %g, expected 0 <= warmup < total and min_ratio 0 to 1",
                            where, s->kind == OPTIM_LR_COSINE ? "cosine" : "linear", s->warmup,
                            (long long)s->total, s->min_ratio);
        return 0;
    }
    return ag_error("%s: unknown schedule kind %d", where, (int)s->kind);
}

/* Checks cfg; 0 or -1 with a message naming the field and the allowed range. */
static int check_cfg(const optim_cfg *c) {
    const char *k = optim_kind_name(c->kind);
    char where[64];
    if (c->kind != OPTIM_SGD && c->kind != OPTIM_ADAM && c->kind != OPTIM_ADAMW)
        return ag_error("optim_new: unknown kind %d", (int)c->kind);
    snprintf(where, sizeof where, "optim_new (%s)", k);
    optim_group g0 = group_of_cfg(c);
    if (optim__check_hparams(c->kind, &g0, where)) return -1;
    if (!(c->clip_norm >= 0) || !isfinite(c->clip_norm))
        return ag_error("optim_new (%s): clip_norm = %g, expected > 0 (or 0: no clipping)", k,
                        c->clip_norm);
    return check_schedule(&c->schedule, where);
}

static ag_real *alloc_state(size_t n) {
    ag_real *p = calloc(n ? n : 1, sizeof *p);
    return p;
}

/* The per-parameter arrays and group 0; false when out of memory. */
static bool alloc_tables(optim *o) {
    size_t n = o->n_params ? o->n_params : 1;
    o->groups = calloc(1, sizeof *o->groups);
    o->group_lr = calloc(1, sizeof *o->group_lr);
    o->group_of = calloc(n, sizeof *o->group_of);
    o->decay = calloc(n, sizeof *o->decay);
    o->pstep = calloc(n, sizeof *o->pstep);
    o->spans = calloc(n, sizeof *o->spans);
    if (!o->groups || !o->group_lr || !o->group_of || !o->decay || !o->pstep || !o->spans)
        return false;
    o->groups[0] = group_of_cfg(&o->cfg);
    o->n_groups = 1;
    for (size_t i = 0; i < o->n_params; i++)
        o->decay[i] = !o->cfg.decay_filter ||
                      o->cfg.decay_filter(nn_params_at(o->ps, i), o->cfg.decay_filter_user);
    return true;
}

optim *optim_new(nn_params *ps, optim_cfg cfg) {
    if (!ps) {
        /* a failed nn_module_init / nn_params_new: its message kept, behind this one */
        ag_error_context("optim_new: parameter store is NULL");
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
    o->n_params = nn_params_count(ps);
    bool ok = alloc_tables(o);
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
    for (size_t g = 0; o->groups && g < o->n_groups; g++) free((char *)o->groups[g].params);
    free(o->groups);
    free(o->group_lr);
    free(o->group_of);
    free(o->decay);
    free(o->pstep);
    free(o->spans);
    free(o);
}

#ifdef TG_DOUBLE
#define SQRT sqrt
#else
#define SQRT sqrtf
#endif

/* One update of a span's elements [i0, i1) (a part of it), with its group's hyperparameters and
 * lr_t, its weight decay and update count: the gradient is read as grad * gscale (the clipping
 * factor) and then zeroed, so clipping, the update and zero_grad are one pass. Elements are
 * independent: ranges run in parallel on the engine's threads, same bits. */
typedef struct update_job {
    optim *o;
    ag_real gscale;
} update_job;

/* SGD with momentum mu, dampening d, weight decay wd (PyTorch's torch.optim.SGD), t the
 * parameters' update number from 1:
 *   g = grad + wd p;  b = (t == 1) ? g : mu b + (1 - d) g;  g = nesterov ? g + mu b : b;
 *   p -= lr g.   (mu = 0: no buffer, g as it is.) */
static void sgd_span(const update_job *j, const optim_span *sp, size_t i0, size_t i1) {
    optim *o = j->o;
    const optim_group *c = &o->groups[sp->group];
    ag_real *restrict p = nn_params_values(o->ps), *restrict gr = nn_params_grads(o->ps);
    ag_real *restrict buf = c->momentum != 0 ? o->buf : NULL;
    const ag_real wd = (ag_real)(sp->decay ? c->weight_decay : 0), mu = (ag_real)c->momentum;
    const ag_real damp = (ag_real)(1 - c->dampening), a = (ag_real)o->group_lr[sp->group];
    const ag_real gs = j->gscale;
    const bool first = sp->step == 0, nesterov = c->nesterov;
    for (size_t i = i0; i < i1; i++) {
        ag_real g = gr[i] * gs + wd * p[i];
        gr[i] = 0;
        if (buf) {
            buf[i] = first ? g : mu * buf[i] + damp * g;
            g = nesterov ? g + mu * buf[i] : buf[i];
        }
        p[i] -= a * g;
    }
}

/* Adam / AdamW (PyTorch's torch.optim.Adam / AdamW), t the parameters' update number from 1:
 *   AdamW: p *= 1 - lr wd           Adam: g = grad + wd p
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
static void adam_span(const update_job *j, const optim_span *sp, size_t i0, size_t i1) {
    optim *o = j->o;
    const optim_group *c = &o->groups[sp->group];
    const int64_t t = sp->step + 1;
    const double lr = o->group_lr[sp->group], weight_decay = sp->decay ? c->weight_decay : 0;
    ag_real *restrict p = nn_params_values(o->ps), *restrict gr = nn_params_grads(o->ps);
    ag_real *restrict m = o->m, *restrict v = o->v;
    const bool decoupled = o->cfg.kind == OPTIM_ADAMW;
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

/* Elements [i0, i1) of the flat buffers, cut at the spans' borders (elements of no span:
 * frozen parameters, left alone). */
static void update_range(void *ctx, ptrdiff_t i0, ptrdiff_t i1) {
    const update_job *j = ctx;
    const optim *o = j->o;
    for (size_t r = 0; r < o->n_spans; r++) {
        const optim_span *sp = &o->spans[r];
        size_t b = sp->begin > (size_t)i0 ? sp->begin : (size_t)i0;
        size_t e = sp->end < (size_t)i1 ? sp->end : (size_t)i1;
        if (b >= e) continue;
        if (o->cfg.kind == OPTIM_SGD) sgd_span(j, sp, b, e);
        else adam_span(j, sp, b, e);
    }
}

/* The step's spans: runs of trainable parameters with the same group, decay and update
 * count, each parameter with the padding after it. Zeroes the frozen parameters' gradients. */
static void make_spans(optim *o) {
    ag_real *g = nn_params_grads(o->ps);
    o->n_spans = 0;
    for (size_t i = 0; i < o->n_params; i++) {
        size_t b = nn_params_offset(o->ps, i);
        size_t e = i + 1 < o->n_params ? nn_params_offset(o->ps, i + 1) : o->flat;
        if (optim__frozen(o->ps, i)) {
            memset(g + b, 0, (e - b) * sizeof *g);
            continue;
        }
        optim_span *last = o->n_spans ? &o->spans[o->n_spans - 1] : NULL;
        if (last && last->end == b && last->group == o->group_of[i] && last->decay == o->decay[i] &&
            last->step == o->pstep[i])
            last->end = e;
        else o->spans[o->n_spans++] = (optim_span){b, e, o->group_of[i], o->decay[i], o->pstep[i]};
    }
}

/* Each group's lr_t for update t = steps + 1 into o->group_lr; 0 or -1 (a bad value). */
static int group_lrs(optim *o) {
    for (size_t g = 0; g < o->n_groups; g++) {
        double lr = optim_schedule_lr(o->cfg.schedule, o->groups[g].lr, o->t + 1);
        if (!(lr >= 0) || !isfinite(lr))
            return ag_error("optim_step: the learning rate of group %zu is %g at update %lld "
                            "(base rate %g%s); update skipped, gradients zeroed",
                            g, lr, (long long)(o->t + 1), o->groups[g].lr,
                            o->cfg.schedule.fn ? ", times the schedule's function" : "");
        o->group_lr[g] = lr;
    }
    return 0;
}

int optim_step(optim *o) {
    if (!o) return ag_error("optim_step: optimizer is NULL");
    if (group_lrs(o)) {
        nn_params_zero_grad(o->ps);
        return -1;
    }
    double norm = optim_grad_norm(o->ps), clip = o->cfg.clip_norm;
    o->last_norm = norm;
    if (!isfinite(norm)) {
        nn_params_zero_grad(o->ps);
        return ag_error("optim_step: the gradient norm is %g at update %lld; update "
                        "skipped, gradients zeroed (check the loss for NaN/inf, e.g. with "
                        "ag_tape_set_nan_check)",
                        norm, (long long)(o->t + 1));
    }
    make_spans(o);
    /* d2l's grad_clipping, as optim_clip_grad_norm, folded into the update */
    update_job j = {o, clip > 0 && norm > clip ? (ag_real)(clip / norm) : 1};
    ag_parallel_for((ptrdiff_t)o->flat, 8192, update_range, &j);
    for (size_t i = 0; i < o->n_params; i++)
        if (!optim__frozen(o->ps, i)) o->pstep[i]++;
    o->t++;
    return 0;
}

int64_t optim_steps(const optim *o) { return o ? o->t : 0; }
double optim_lr(const optim *o) { return optim_group_lr(o, 0); }
int optim_set_lr(optim *o, double lr) {
    if (!o) return ag_error("optim_set_lr: optimizer is NULL");
    if (o->n_groups > 1)
        return ag_error("optim_set_lr (%s): the optimizer has %zu parameter groups; set each "
                        "one's rate with optim_set_group_lr",
                        optim_kind_name(o->cfg.kind), o->n_groups);
    if (!(lr >= 0) || !isfinite(lr))
        return ag_error("optim_set_lr (%s): lr = %g, expected a finite value >= 0",
                        optim_kind_name(o->cfg.kind), lr);
    return optim_set_group_lr(o, 0, lr);
}
int optim_set_schedule(optim *o, optim_schedule s) {
    if (!o) return ag_error("optim_set_schedule: optimizer is NULL");
    char where[64];
    snprintf(where, sizeof where, "optim_set_schedule (%s)", optim_kind_name(o->cfg.kind));
    if (check_schedule(&s, where)) return -1;
    o->cfg.schedule = s;
    return 0;
}
double optim_last_grad_norm(const optim *o) { return o ? o->last_norm : NAN; }
const optim_cfg *optim_config(const optim *o) { return o ? &o->cfg : NULL; }
