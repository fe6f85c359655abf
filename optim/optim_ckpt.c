/* optim_ckpt.c -- optimizer state to and from checkpoints (names and rules in optim.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"

#define KEY_KIND "optim.kind"
#define KEY_STEP "optim.step"
#define KEY_LR "optim.lr"
#define KEY_GROUPS "optim.groups"
#define KEY_LAMBDA "optim.lr_lambda"
#define KEY_LEN 64 /* "optim.group.<g>.<field>" */

/* The state buffers of o with their tensor-name parts: "m", "v" or "momentum". */
static int state_slots(const optim *o, ag_real **bufs, const char **names) {
    if (o->m) {
        bufs[0] = o->m, names[0] = "m";
        bufs[1] = o->v, names[1] = "v";
        return 2;
    }
    if (o->buf) {
        bufs[0] = o->buf, names[0] = "momentum";
        return 1;
    }
    return 0;
}

/* "optim.<kind>.<slot>.<param name>" into buf (slot "step": the parameter's update count). */
static void state_name(char *buf, size_t len, const optim *o, const char *slot, const char *p) {
    snprintf(buf, len, "optim.%s.%s.%s", optim_kind_name(o->cfg.kind), slot, p);
}

/* Group g's parameters' names separated by spaces (malloc'd; NULL when out of memory). */
static char *group_members(const optim *o, size_t g) {
    size_t len = 1;
    for (size_t i = 0; i < o->n_params; i++)
        if (o->group_of[i] == (int)g) len += strlen(nn_params_at(o->ps, i)->name) + 1;
    char *s = malloc(len), *q = s;
    if (!s) return NULL;
    for (size_t i = 0; i < o->n_params; i++)
        if (o->group_of[i] == (int)g) {
            if (q != s) *q++ = ' ';
            size_t n = strlen(nn_params_at(o->ps, i)->name);
            memcpy(q, nn_params_at(o->ps, i)->name, n);
            q += n;
        }
    *q = '\0';
    return s;
}

/* The hyperparameters a group of kind k saves: name and field. */
typedef struct hp_field {
    const char *name;
    size_t offset; /* of a double in optim_group */
} hp_field;
static const hp_field HP_COMMON[] = {{"lr", offsetof(optim_group, lr)},
                                     {"weight_decay", offsetof(optim_group, weight_decay)}};
static const hp_field HP_ADAM[] = {{"beta1", offsetof(optim_group, beta1)},
                                   {"beta2", offsetof(optim_group, beta2)},
                                   {"eps", offsetof(optim_group, eps)}};
static const hp_field HP_SGD[] = {{"momentum", offsetof(optim_group, momentum)},
                                  {"dampening", offsetof(optim_group, dampening)}};

static int set_double(nn_ckpt *ck, const char *key, double v) {
    char text[32];
    snprintf(text, sizeof text, "%.17g", v); /* 17 digits: the double, exactly */
    return nn_ckpt_set_meta(ck, key, text);
}

/* Group g's metadata: its hyperparameters (and its parameters for g >= 1). */
static int save_group(const optim *o, size_t g, nn_ckpt *ck) {
    char key[KEY_LEN];
    const optim_group *gr = &o->groups[g];
    bool sgd = o->cfg.kind == OPTIM_SGD;
    const hp_field *kf = sgd ? HP_SGD : HP_ADAM;
    size_t nk = sgd ? 2 : 3;
    for (size_t f = 0; f < 2 + nk; f++) {
        const hp_field *h = f < 2 ? &HP_COMMON[f] : &kf[f - 2];
        snprintf(key, sizeof key, "optim.group.%zu.%s", g, h->name);
        if (set_double(ck, key, *(const double *)((const char *)gr + h->offset))) return -1;
    }
    if (sgd) {
        snprintf(key, sizeof key, "optim.group.%zu.nesterov", g);
        if (nn_ckpt_set_meta(ck, key, gr->nesterov ? "true" : "false")) return -1;
    }
    if (g == 0) return 0;
    char *members = group_members(o, g);
    if (!members) return ag_error("optim_save_state: out of memory");
    snprintf(key, sizeof key, "optim.group.%zu.params", g);
    int rc = nn_ckpt_set_meta(ck, key, members);
    free(members);
    return rc;
}

int optim_save_state(const optim *o, nn_ckpt *ck) {
    char name[NN_NAME_MAX + 64];
    ag_real *bufs[2];
    const char *slots[2];
    if (!o || !ck) return ag_error("optim_save_state: NULL argument");
    if (nn_ckpt_set_meta(ck, KEY_KIND, optim_kind_name(o->cfg.kind)) ||
        nn_ckpt_set_meta_int(ck, KEY_STEP, o->t) || set_double(ck, KEY_LR, o->groups[0].lr) ||
        nn_ckpt_set_meta_int(ck, KEY_GROUPS, (int64_t)o->n_groups))
        return -1;
    for (size_t g = 0; g < o->n_groups; g++)
        if (save_group(o, g, ck)) return -1;
    if (o->cfg.schedule.fn &&
        nn_ckpt_set_meta(ck, KEY_LAMBDA,
                         "a function (optim_lr_lambda), not saved: give it again in the "
                         "schedule of the cfg before loading"))
        return -1;
    int ns = state_slots(o, bufs, slots);
    for (int s = 0; s < ns; s++)
        for (size_t i = 0; i < o->n_params; i++) {
            const ag_tensor *p = nn_params_at(o->ps, i);
            state_name(name, sizeof name, o, slots[s], p->name);
            if (nn_ckpt_add(ck, name, p->ndim, p->shape, bufs[s] + nn_params_offset(o->ps, i)))
                return -1;
        }
    for (size_t i = 0; i < o->n_params; i++) /* a parameter that was frozen for some steps */
        if (o->pstep[i] != o->t) {
            state_name(name, sizeof name, o, "step", nn_params_at(o->ps, i)->name);
            if (nn_ckpt_add_i64(ck, name, 0, NULL, &o->pstep[i])) return -1;
        }
    return 0;
}

/* Is `name` one of the state tensors o expects (or may find: the update counts)? */
static bool expected_name(const optim *o, const char *name) {
    char want[NN_NAME_MAX + 64];
    ag_real *bufs[2];
    const char *slots[3];
    int ns = state_slots(o, bufs, slots);
    slots[ns++] = "step";
    for (int s = 0; s < ns; s++)
        for (size_t i = 0; i < o->n_params; i++) {
            state_name(want, sizeof want, o, slots[s], nn_params_at(o->ps, i)->name);
            if (strcmp(want, name) == 0) return true;
        }
    return false;
}

/* Reads metadata key as a double into *v; absent: -1 when required, else 0 and *v kept. */
static int meta_double(const nn_ckpt *ck, const char *key, double *v, bool required) {
    const char *text = nn_ckpt_meta(ck, key);
    if (!text)
        return required ? ag_error("%s: metadata '%s' is missing", nn_ckpt_source(ck), key) : 0;
    char *end;
    double x = strtod(text, &end);
    if (end == text || *end || !(x >= 0) || !isfinite(x))
        return ag_error("%s: metadata '%s' = \"%s\", expected a finite number >= 0",
                        nn_ckpt_source(ck), key, text);
    *v = x;
    return 0;
}

/* Compares group g's parameters in o with the checkpoint's list; 0 or -1 naming the first
 * difference. */
static int check_members(const optim *o, const nn_ckpt *ck, size_t g) {
    char key[KEY_LEN];
    snprintf(key, sizeof key, "optim.group.%zu.params", g);
    const char *saved = nn_ckpt_meta(ck, key);
    if (!saved) return ag_error("%s: metadata '%s' is missing", nn_ckpt_source(ck), key);
    char *mine = group_members(o, g);
    if (!mine) return ag_error("%s: out of memory", nn_ckpt_source(ck));
    const char *a = mine, *b = saved;
    int rc = 0;
    while (!rc && (*a || *b)) {
        size_t na = strcspn(a, " "), nb = strcspn(b, " ");
        if (na != nb || strncmp(a, b, na))
            rc = ag_error("%s: group %zu holds other parameters than the checkpoint's: '%.*s' "
                          "here, '%.*s' in its metadata '%s' (add the same groups as the saved "
                          "run)",
                          nn_ckpt_source(ck), g, na ? (int)na : 6, na ? a : "(none)",
                          nb ? (int)nb : 6, nb ? b : "(none)", key);
        a += na + (a[na] == ' ');
        b += nb + (b[nb] == ' ');
    }
    free(mine);
    return rc;
}

/* Group g's hyperparameters from the checkpoint into *gr, checked; 0 or -1. */
static int load_group(const optim *o, const nn_ckpt *ck, size_t g, optim_group *gr) {
    char key[KEY_LEN], where[NN_NAME_MAX + 64];
    bool sgd = o->cfg.kind == OPTIM_SGD;
    const hp_field *kf = sgd ? HP_SGD : HP_ADAM;
    size_t nk = sgd ? 2 : 3;
    for (size_t f = 0; f < 2 + nk; f++) {
        const hp_field *h = f < 2 ? &HP_COMMON[f] : &kf[f - 2];
        snprintf(key, sizeof key, "optim.group.%zu.%s", g, h->name);
        if (meta_double(ck, key, (double *)((char *)gr + h->offset), true)) return -1;
    }
    if (sgd) {
        snprintf(key, sizeof key, "optim.group.%zu.nesterov", g);
        const char *v = nn_ckpt_meta(ck, key);
        if (!v || (strcmp(v, "true") && strcmp(v, "false")))
            return ag_error("%s: metadata '%s' = %s%s%s, expected \"true\" or \"false\"",
                            nn_ckpt_source(ck), key, v ? "\"" : "", v ? v : "(missing)",
                            v ? "\"" : "");
        gr->nesterov = strcmp(v, "true") == 0;
    }
    if (g > 0 && check_members(o, ck, g)) return -1;
    snprintf(where, sizeof where, "%s: group %zu", nn_ckpt_source(ck), g);
    if (optim__check_hparams(o->cfg.kind, gr, where)) return -1;
    if (sgd && gr->momentum != 0 && !o->buf)
        return ag_error("%s: momentum = %g, but this optimizer was made without momentum (no "
                        "buffers to restore): give it in the cfg or the group",
                        where, gr->momentum);
    return 0;
}

/* The checkpoint's groups into gs (a copy of o's groups, the saved hyperparameters in); 0 or
 * -1, gs to be discarded then. */
static int load_groups(const optim *o, const nn_ckpt *ck, optim_group *gs) {
    const char *src = nn_ckpt_source(ck);
    memcpy(gs, o->groups, o->n_groups * sizeof *gs);
    if (!nn_ckpt_meta(ck, KEY_GROUPS)) { /* saved before groups: one group, and maybe its lr */
        if (o->n_groups > 1)
            return ag_error("%s: the optimizer state has one parameter group (no '%s': saved "
                            "before groups existed), this optimizer %zu",
                            src, KEY_GROUPS, o->n_groups);
        return meta_double(ck, KEY_LR, &gs[0].lr, false);
    }
    int64_t n;
    if (nn_ckpt_meta_int(ck, KEY_GROUPS, &n)) return -1;
    if (n != (int64_t)o->n_groups)
        return ag_error("%s: the optimizer state has %lld parameter groups, this optimizer %zu "
                        "(add the same groups with optim_add_group before loading)",
                        src, (long long)n, o->n_groups);
    for (size_t g = 0; g < o->n_groups; g++)
        if (load_group(o, ck, g, &gs[g])) return -1;
    return 0;
}

/* The kind, the step, the function schedule and the names of the optim.* tensors; 0 or -1. */
static int check_header(const optim *o, const nn_ckpt *ck, int64_t *t) {
    const char *src = nn_ckpt_source(ck);
    const char *kind = nn_ckpt_meta(ck, KEY_KIND);
    if (!kind)
        return ag_error("%s: no optimizer state (metadata '%s' is missing; expected '%s')", src,
                        KEY_KIND, optim_kind_name(o->cfg.kind));
    if (strcmp(kind, optim_kind_name(o->cfg.kind)) != 0)
        return ag_error("%s: optimizer state of kind '%s', expected '%s'", src, kind,
                        optim_kind_name(o->cfg.kind));
    if (nn_ckpt_meta_int(ck, KEY_STEP, t)) return -1;
    if (*t < 0)
        return ag_error("%s: metadata '%s' = %lld, expected >= 0", src, KEY_STEP, (long long)*t);
    if (nn_ckpt_meta(ck, KEY_LAMBDA) && !o->cfg.schedule.fn)
        return ag_error("%s: the saved run's schedule had a function (metadata '%s'), which a "
                        "checkpoint cannot hold: give it again (optim_lr_lambda or "
                        "optim_lr_times in cfg.schedule) to the optimizer that loads it",
                        src, KEY_LAMBDA);
    for (size_t i = 0; i < nn_ckpt_count(ck); i++) {
        const char *n = nn_ckpt_at(ck, i)->name;
        if (strncmp(n, NN_CKPT_OPTIM_PREFIX, strlen(NN_CKPT_OPTIM_PREFIX)) == 0 &&
            !expected_name(o, n))
            return ag_error("%s: unexpected optimizer tensor '%s' (not part of the state "
                            "of this %s optimizer over this model)",
                            src, n, optim_kind_name(o->cfg.kind));
    }
    return 0;
}

/* Each parameter's update count into steps: its "step" tensor, else t. 0 or -1. */
static int load_steps(const optim *o, const nn_ckpt *ck, int64_t t, int64_t *steps) {
    char name[NN_NAME_MAX + 64];
    for (size_t i = 0; i < o->n_params; i++) {
        state_name(name, sizeof name, o, "step", nn_params_at(o->ps, i)->name);
        steps[i] = t;
        if (!nn_ckpt_find(ck, name)) continue;
        if (nn_ckpt_read_i64(ck, name, 0, NULL, &steps[i])) return -1;
        if (steps[i] < 0 || steps[i] > t)
            return ag_error("%s: tensor '%s' = %lld, expected 0 to the step, %lld",
                            nn_ckpt_source(ck), name, (long long)steps[i], (long long)t);
    }
    return 0;
}

/* The state tensors into fresh buffers tmp[slot] (calloc'd; the caller frees). 0 or -1. */
static int load_buffers(const optim *o, const nn_ckpt *ck, ag_real **tmp) {
    char name[NN_NAME_MAX + 64];
    ag_real *bufs[2];
    const char *slots[2];
    int ns = state_slots(o, bufs, slots);
    for (int s = 0; s < ns; s++) {
        tmp[s] = calloc(o->flat ? o->flat : 1, sizeof(ag_real));
        if (!tmp[s]) return ag_error("%s: out of memory", nn_ckpt_source(ck));
        for (size_t i = 0; i < o->n_params; i++) {
            const ag_tensor *p = nn_params_at(o->ps, i);
            state_name(name, sizeof name, o, slots[s], p->name);
            if (nn_ckpt_read(ck, name, p->ndim, p->shape, tmp[s] + nn_params_offset(o->ps, i)))
                return -1;
        }
    }
    return 0;
}

int optim_load_state(optim *o, const nn_ckpt *ck) {
    ag_real *bufs[2], *tmp[2] = {NULL, NULL};
    const char *slots[2];
    if (!o || !ck) return ag_error("optim_load_state: NULL argument");
    int64_t t;
    if (check_header(o, ck, &t)) return -1;
    /* Read everything into fresh memory; commit only when every check passed. */
    optim_group *gs = malloc(o->n_groups * sizeof *gs);
    int64_t *steps = malloc((o->n_params ? o->n_params : 1) * sizeof *steps);
    int rc = gs && steps ? 0 : ag_error("%s: out of memory", nn_ckpt_source(ck));
    if (!rc) rc = load_groups(o, ck, gs);
    if (!rc) rc = load_steps(o, ck, t, steps);
    if (!rc) rc = load_buffers(o, ck, tmp);
    if (!rc) {
        int ns = state_slots(o, bufs, slots);
        for (int s = 0; s < ns; s++) memcpy(bufs[s], tmp[s], o->flat * sizeof(ag_real));
        memcpy(o->groups, gs, o->n_groups * sizeof *gs);
        memcpy(o->pstep, steps, o->n_params * sizeof *steps);
        o->t = t;
        optim__sync_cfg(o);
    }
    free(tmp[0]);
    free(tmp[1]);
    free(gs);
    free(steps);
    return rc ? -1 : 0;
}
