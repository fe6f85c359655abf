/* optim_ckpt.c -- optimizer state to and from checkpoints (names and rules in optim.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"

#define KEY_KIND "optim.kind"
#define KEY_STEP "optim.step"
#define KEY_LR "optim.lr"

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

/* "optim.<kind>.<slot>.<param name>" into buf. */
static void state_name(char *buf, size_t len, const optim *o, const char *slot, const char *p) {
    snprintf(buf, len, "optim.%s.%s.%s", optim_kind_name(o->cfg.kind), slot, p);
}

int optim_save_state(const optim *o, nn_ckpt *ck) {
    char name[NN_NAME_MAX + 64];
    ag_real *bufs[2];
    const char *slots[2];
    if (!o || !ck) return ag_error("optim_save_state: NULL argument");
    char lr[32];
    snprintf(lr, sizeof lr, "%.17g", o->cfg.lr); /* 17 digits: the double, exactly */
    if (nn_ckpt_set_meta(ck, KEY_KIND, optim_kind_name(o->cfg.kind)) ||
        nn_ckpt_set_meta_int(ck, KEY_STEP, o->t) || nn_ckpt_set_meta(ck, KEY_LR, lr))
        return -1;
    int ns = state_slots(o, bufs, slots);
    for (int s = 0; s < ns; s++)
        for (size_t i = 0; i < nn_params_count(o->ps); i++) {
            const ag_tensor *p = nn_params_at(o->ps, i);
            state_name(name, sizeof name, o, slots[s], p->name);
            if (nn_ckpt_add(ck, name, p->ndim, p->shape, bufs[s] + nn_params_offset(o->ps, i)))
                return -1;
        }
    return 0;
}

/* Is `name` one of the state tensors o expects? */
static bool expected_name(const optim *o, const char *name) {
    char want[NN_NAME_MAX + 64];
    ag_real *bufs[2];
    const char *slots[2];
    int ns = state_slots(o, bufs, slots);
    for (int s = 0; s < ns; s++)
        for (size_t i = 0; i < nn_params_count(o->ps); i++) {
            state_name(want, sizeof want, o, slots[s], nn_params_at(o->ps, i)->name);
            if (strcmp(want, name) == 0) return true;
        }
    return false;
}

int optim_load_state(optim *o, const nn_ckpt *ck) {
    char name[NN_NAME_MAX + 64];
    ag_real *bufs[2];
    const char *slots[2];
    if (!o || !ck) return ag_error("optim_load_state: NULL argument");
    const char *src = nn_ckpt_source(ck);
    const char *kind = nn_ckpt_meta(ck, KEY_KIND);
    if (!kind)
        return ag_error("%s: no optimizer state (metadata '%s' is missing; expected '%s')", src,
                        KEY_KIND, optim_kind_name(o->cfg.kind));
    if (strcmp(kind, optim_kind_name(o->cfg.kind)) != 0)
        return ag_error("%s: optimizer state of kind '%s', expected '%s'", src, kind,
                        optim_kind_name(o->cfg.kind));
    int64_t t;
    if (nn_ckpt_meta_int(ck, KEY_STEP, &t)) return -1;
    if (t < 0)
        return ag_error("%s: metadata '%s' = %lld, expected >= 0", src, KEY_STEP, (long long)t);
    double lr = o->cfg.lr; /* kept when the checkpoint has no KEY_LR */
    const char *lr_text = nn_ckpt_meta(ck, KEY_LR);
    if (lr_text) {
        char *end;
        lr = strtod(lr_text, &end);
        if (end == lr_text || *end || !(lr >= 0) || !isfinite(lr))
            return ag_error("%s: metadata '%s' = \"%s\", expected a finite number >= 0", src,
                            KEY_LR, lr_text);
    }
    for (size_t i = 0; i < nn_ckpt_count(ck); i++) {
        const char *n = nn_ckpt_at(ck, i)->name;
        if (strncmp(n, NN_CKPT_OPTIM_PREFIX, strlen(NN_CKPT_OPTIM_PREFIX)) == 0 &&
            !expected_name(o, n))
            return ag_error("%s: unexpected optimizer tensor '%s' (not part of the state "
                            "of this %s optimizer over this model)",
                            src, n, optim_kind_name(o->cfg.kind));
    }
    /* Read into fresh buffers; commit only when every tensor passed. */
    int ns = state_slots(o, bufs, slots);
    ag_real *tmp[2] = {NULL, NULL};
    int rc = 0;
    for (int s = 0; s < ns && !rc; s++) {
        tmp[s] = calloc(o->flat ? o->flat : 1, sizeof(ag_real));
        if (!tmp[s]) rc = ag_error("%s: out of memory", src);
        for (size_t i = 0; i < nn_params_count(o->ps) && !rc; i++) {
            const ag_tensor *p = nn_params_at(o->ps, i);
            state_name(name, sizeof name, o, slots[s], p->name);
            rc = nn_ckpt_read(ck, name, p->ndim, p->shape, tmp[s] + nn_params_offset(o->ps, i));
        }
    }
    if (!rc)
        for (int s = 0; s < ns; s++) memcpy(bufs[s], tmp[s], o->flat * sizeof(ag_real));
    free(tmp[0]);
    free(tmp[1]);
    if (rc) return -1;
    o->t = t;
    o->cfg.lr = lr;
    return 0;
}
