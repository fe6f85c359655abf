/* groups.c -- parameter groups (PyTorch's param_groups): hyperparameter checks, selection by
 * names / prefixes and a filter, per-group learning rates (rules in optim.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"

int optim__check_hparams(optim_kind k, const optim_group *c, const char *where) {
    if (!(c->lr >= 0) || !isfinite(c->lr))
        return ag_error("%s: lr = %g, expected a finite value >= 0", where, c->lr);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return ag_error("%s: weight_decay = %g, expected >= 0", where, c->weight_decay);
    if (k == OPTIM_SGD) {
        if (!(c->momentum >= 0) || !isfinite(c->momentum))
            return ag_error("%s: momentum = %g, expected >= 0", where, c->momentum);
        if (!(c->dampening >= 0 && c->dampening <= 1))
            return ag_error("%s: dampening = %g, expected 0 to 1", where, c->dampening);
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
            return ag_error("%s: nesterov needs momentum > 0 and dampening 0 (got %g, %g)", where,
                            c->momentum, c->dampening);
        return 0;
    }
    if (!(c->beta1 >= 0 && c->beta1 < 1))
        return ag_error("%s: beta1 = %g, expected 0 <= beta1 < 1", where, c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1))
        return ag_error("%s: beta2 = %g, expected 0 <= beta2 < 1", where, c->beta2);
    if (!(c->eps >= 0) || !isfinite(c->eps))
        return ag_error("%s: eps = %g, expected >= 0", where, c->eps);
    return 0;
}

void optim__sync_cfg(optim *o) {
    const optim_group *g = &o->groups[0];
    o->cfg.lr = g->lr;
    o->cfg.weight_decay = g->weight_decay;
    o->cfg.beta1 = g->beta1;
    o->cfg.beta2 = g->beta2;
    o->cfg.eps = g->eps;
    o->cfg.momentum = g->momentum;
    o->cfg.dampening = g->dampening;
    o->cfg.nesterov = g->nesterov;
}

optim_group optim_group_like(const optim *o) {
    optim_group g;
    memset(&g, 0, sizeof g);
    if (o) g = o->groups[0];
    g.params = NULL;
    g.filter = NULL;
    g.filter_user = NULL;
    return g;
}

/* Does the word w[0..n) select the parameter `name`: the name itself, or a prefix of it that
 * ends at a '.' ("enc" and "enc." select "enc.w", not "encoder.w")? */
static bool word_selects(const char *w, size_t n, const char *name) {
    return strncmp(name, w, n) == 0 && (name[n] == '\0' || name[n] == '.' || w[n - 1] == '.');
}

/* Marks in sel[] the parameters g selects (sel zeroed by the caller); returns how many, or -1
 * for a word that selects none. */
static long select_params(const optim *o, const optim_group *g, bool *sel, const char *where) {
    const char *s = g->params;
    while (s && *s) {
        s += strspn(s, " \t\n");
        size_t n = strcspn(s, " \t\n");
        if (!n) break;
        size_t hits = 0;
        for (size_t i = 0; i < o->n_params; i++)
            if (word_selects(s, n, nn_params_at(o->ps, i)->name)) sel[i] = true, hits++;
        if (!hits)
            return ag_error("%s: '%.*s' matches no parameter (a name, or a prefix ending at a "
                            "'.', of the store's parameters)",
                            where, (int)n, s);
        s += n;
    }
    long count = 0;
    for (size_t i = 0; i < o->n_params; i++) {
        const ag_tensor *p = nn_params_at(o->ps, i);
        if (!g->params) sel[i] = true;
        if (sel[i] && g->filter) sel[i] = g->filter(p, g->filter_user);
        count += sel[i];
    }
    return count;
}

/* Checks group g against o and its parameters (sel: those it selects); 0 or -1. */
static int check_group(const optim *o, const optim_group *g, bool *sel, const char *where) {
    if (optim__check_hparams(o->cfg.kind, g, where)) return -1;
    if (!g->params && !g->filter)
        return ag_error("%s: the group selects nothing (params and filter are both NULL)", where);
    long count = select_params(o, g, sel, where);
    if (count < 0) return -1;
    if (count == 0)
        return ag_error("%s: the group (params \"%s\"%s) matches no parameter", where,
                        g->params ? g->params : "(all)", g->filter ? ", with a filter" : "");
    for (size_t i = 0; i < o->n_params; i++)
        if (sel[i] && o->group_of[i] != 0)
            return ag_error("%s: parameter '%s' is already in group %d (a parameter belongs to "
                            "one group)",
                            where, nn_params_at(o->ps, i)->name, o->group_of[i]);
    return 0;
}

int optim_add_group(optim *o, optim_group g) {
    char where[96];
    if (!o) return ag_error("optim_add_group: optimizer is NULL");
    size_t id = o->n_groups;
    snprintf(where, sizeof where, "optim_add_group (%s, group %zu)", optim_kind_name(o->cfg.kind),
             id);
    if (o->t > 0)
        return ag_error("%s: groups are added before the first step (this optimizer has made "
                        "%lld; add them, then load a checkpoint)",
                        where, (long long)o->t);
    bool *sel = calloc(o->n_params ? o->n_params : 1, sizeof *sel);
    if (!sel) return ag_error("%s: out of memory", where);
    if (check_group(o, &g, sel, where)) {
        free(sel);
        return -1;
    }
    /* Room for the group (the arrays grown stay valid even when a later step fails). */
    char *params = g.params ? malloc(strlen(g.params) + 1) : NULL;
    bool ok = !g.params || params;
    optim_group *groups = ok ? realloc(o->groups, (id + 1) * sizeof *groups) : NULL;
    if (groups) o->groups = groups;
    double *lrs = groups ? realloc(o->group_lr, (id + 1) * sizeof *lrs) : NULL;
    if (lrs) o->group_lr = lrs;
    ok = ok && groups && lrs;
    if (ok && o->cfg.kind == OPTIM_SGD && g.momentum != 0 && !o->buf)
        ok = (o->buf = calloc(o->flat ? o->flat : 1, sizeof *o->buf)) != NULL;
    if (!ok) {
        free(sel);
        free(params);
        return ag_error("%s: out of memory", where);
    }
    if (params) strcpy(params, g.params);
    g.params = params;
    o->groups[id] = g;
    o->n_groups = id + 1;
    for (size_t i = 0; i < o->n_params; i++)
        if (sel[i]) o->group_of[i] = (int)id;
    free(sel);
    return (int)id;
}

size_t optim_group_count(const optim *o) { return o ? o->n_groups : 0; }

const optim_group *optim_group_at(const optim *o, size_t g) {
    return o && g < o->n_groups ? &o->groups[g] : NULL;
}

int optim_param_group(const optim *o, size_t i) {
    return o && i < o->n_params ? o->group_of[i] : -1;
}

double optim_group_lr(const optim *o, size_t g) {
    if (!o || g >= o->n_groups) return NAN;
    return optim_schedule_lr(o->cfg.schedule, o->groups[g].lr, o->t + 1);
}

int optim_set_group_lr(optim *o, size_t g, double lr) {
    if (!o) return ag_error("optim_set_group_lr: optimizer is NULL");
    if (g >= o->n_groups)
        return ag_error("optim_set_group_lr (%s): group %zu, expected 0 to %zu",
                        optim_kind_name(o->cfg.kind), g, o->n_groups - 1);
    if (!(lr >= 0) || !isfinite(lr))
        return ag_error("optim_set_group_lr (%s, group %zu): lr = %g, expected a finite value "
                        ">= 0",
                        optim_kind_name(o->cfg.kind), g, lr);
    o->groups[g].lr = lr;
    if (g == 0) optim__sync_cfg(o);
    return 0;
}
