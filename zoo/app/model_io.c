/* model_io.c -- model checkpoints: parameters, vocabularies and config in one file. */
#include "zoo/app/model_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/common.h"

/* ---- checkpoints ---- */

/* The vocabulary text format (datasets/vocab.h) as one malloc'd string for the metadata, which
 * holds strings: a token with a NUL byte is refused. NULL with ag_last_error(). */
static char *vocab_text(const ds_vocab *v, const char *side) {
    char *s;
    size_t n;
    if (ds_vocab_text(v, side, &s, &n)) {
        ag_error_context("checkpoint");
        return NULL;
    }
    if (strlen(s) != n) {
        free(s);
        ag_error("checkpoint: a %s token contains a NUL byte", side);
        return NULL;
    }
    return s;
}

int zoo_ckpt_add_model(nn_ckpt *ck, const zoo_model *m, const ds_vocab *src, const ds_vocab *tgt) {
    if (nn_ckpt_add_params(ck, m->ps) || nn_ckpt_set_meta(ck, "tapegrad.model", m->kind->name))
        return -1;
    for (int i = 0; i < m->kind->n_config; i++) {
        const zoo_field *f = &m->kind->config[i];
        char key[96], val[64];
        snprintf(key, sizeof key, "config.%s", f->name);
        if (nn_ckpt_set_meta(ck, key, zoo_field_format(f, m->cfg, val, sizeof val))) return -1;
    }
    const ds_vocab *vs[2] = {src, tgt};
    const char *keys[2] = {"vocab.src", "vocab.tgt"};
    for (int i = 0; i < 2; i++) {
        char *text = vocab_text(vs[i], keys[i]);
        if (!text) return -1;
        int rc = nn_ckpt_set_meta(ck, keys[i], text);
        free(text);
        if (rc) return -1;
    }
    return zoo_ckpt_add_codecs(ck, src, tgt);
}

static int vocab_from_meta(const nn_ckpt *ck, const char *key, ds_vocab **out) {
    const char *text = nn_ckpt_meta(ck, key);
    if (!text) return ag_error("%s: metadata has no %s", nn_ckpt_source(ck), key);
    char name[512];
    snprintf(name, sizeof name, "%s: metadata %s", nn_ckpt_source(ck), key);
    if (ds_vocab_parse(text, strlen(text), name, out) ||
        (ds_vocab_check_reserved(*out) && ag_error_context("%s", name))) {
        ds_vocab_free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

#define MAX_TIED 8

/* m's tied weights: the count, names and parameters (zoo_model_ops.tied). */
static int tied_of(const zoo_model *m, const char **names, ag_tensor **params) {
    return m->ops->tied ? m->ops->tied(m, names, params, MAX_TIED) : 0;
}

int zoo_ckpt_add_tied(nn_ckpt *ck, const zoo_model *m) {
    const char *names[MAX_TIED];
    ag_tensor *params[MAX_TIED];
    int n = tied_of(m, names, params);
    for (int i = 0; i < n; i++)
        if (nn_ckpt_add(ck, names[i], params[i]->ndim, params[i]->shape, params[i]->data))
            return -1;
    return 0;
}

/* ck's tensors into m's parameters, strictly (every parameter, nothing else), except that a
 * tied weight may also come under its other names, each equal to it. 0 or -1. */
static int load_params(const nn_ckpt *ck, zoo_model *m) {
    const char *names[MAX_TIED];
    ag_tensor *params[MAX_TIED];
    int n = tied_of(m, names, params), present = 0;
    for (int i = 0; i < n; i++) present += nn_ckpt_find(ck, names[i]) != NULL;
    if (nn_ckpt_load_params(ck, m->ps, present ? NN_CKPT_ALLOW_EXTRA : 0)) return -1;
    for (size_t t = 0; present && t < nn_ckpt_count(ck); t++) { /* the extras: only those */
        const char *name = nn_ckpt_at(ck, t)->name;
        bool known = !strncmp(name, NN_CKPT_OPTIM_PREFIX, strlen(NN_CKPT_OPTIM_PREFIX)) ||
                     nn_params_find(m->ps, name);
        for (int i = 0; i < n && !known; i++) known = !strcmp(name, names[i]);
        if (!known)
            return ag_error("%s: unexpected tensor '%s': not a tensor of the model",
                            nn_ckpt_source(ck), name);
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (!nn_ckpt_find(ck, names[i])) continue;
        const ag_tensor *p = params[i];
        size_t count = (size_t)p->numel;
        ag_real *v = malloc(sizeof *v * count);
        if (!v) return ag_error("%s: out of memory", nn_ckpt_source(ck));
        rc = nn_ckpt_read(ck, names[i], p->ndim, p->shape, v);
        if (!rc && memcmp(v, p->data, sizeof *v * count))
            rc = ag_error("%s: '%s' differs from '%s': the model ties them (one matrix), so they "
                          "must hold the same values",
                          nn_ckpt_source(ck), names[i], p->name);
        free(v);
    }
    return rc;
}

static int build_and_load(const nn_ckpt *ck, const zoo_model_kind *kind, const void *cfg,
                          zoo_model **m, ds_vocab **src, ds_vocab **tgt) {
    *m = zoo_model_new_zero(kind, cfg, ds_vocab_size(*src), ds_vocab_size(*tgt));
    if (!*m || load_params(ck, *m)) {
        zoo_model_free(*m);
        ds_vocab_free(*src);
        ds_vocab_free(*tgt);
        *m = NULL;
        *src = *tgt = NULL;
        return -1;
    }
    return 0;
}

int zoo_ckpt_load_model(const nn_ckpt *ck, const zoo_model_kind *kind, zoo_model **m,
                        ds_vocab **src, ds_vocab **tgt) {
    *m = NULL;
    *src = *tgt = NULL;
    const char *file = nn_ckpt_source(ck), *which = nn_ckpt_meta(ck, "tapegrad.model");
    if (!which)
        return ag_error("%s: not a tapegrad checkpoint (no tapegrad.model in its metadata); "
                        "to import a plain state_dict give --src-vocab and --tgt-vocab",
                        file);
    if (strcmp(which, kind->name))
        return ag_error("%s: holds a %s model, not a %s", file, which, kind->name);
    void *cfg = malloc(kind->config_size);
    if (!cfg) return ag_error("%s: out of memory", file);
    memcpy(cfg, kind->defaults, kind->config_size);
    int rc = 0;
    for (int i = 0; i < kind->n_config && !rc; i++) {
        char key[96], what[4200];
        snprintf(key, sizeof key, "config.%s", kind->config[i].name);
        snprintf(what, sizeof what, "%s: metadata %s", file, key);
        const char *v = nn_ckpt_meta(ck, key);
        if (!v && kind->n_first && i >= kind->n_first) continue; /* older than the field */
        rc = !v ? ag_error("%s: metadata has no %s", file, key)
                : zoo_field_parse(&kind->config[i], cfg, v, what);
    }
    if (!rc && (vocab_from_meta(ck, "vocab.src", src) || vocab_from_meta(ck, "vocab.tgt", tgt))) {
        ds_vocab_free(*src);
        *src = NULL;
        rc = -1;
    }
    if (!rc) rc = build_and_load(ck, kind, cfg, m, src, tgt);
    free(cfg);
    return rc;
}

int zoo_ckpt_import_state_dict(const nn_ckpt *ck, const zoo_model_kind *kind, const void *cfg,
                               const char *src_vocab_path, const char *tgt_vocab_path,
                               zoo_model **m, ds_vocab **src, ds_vocab **tgt) {
    *m = NULL;
    *src = *tgt = NULL;
    const char *paths[2] = {src_vocab_path, tgt_vocab_path};
    ds_vocab **vs[2] = {src, tgt};
    for (int i = 0; i < 2; i++) {
        if (!paths[i] || !*paths[i])
            return ag_error("%s: a plain state_dict needs --src-vocab and --tgt-vocab",
                            nn_ckpt_source(ck));
        if (ds_vocab_load(paths[i], vs[i]) ||
            (ds_vocab_check_reserved(*vs[i]) && ag_error_context("%s", paths[i]))) {
            ds_vocab_free(*src);
            ds_vocab_free(*tgt);
            *src = *tgt = NULL;
            return -1;
        }
    }
    return build_and_load(ck, kind, cfg, m, src, tgt);
}
