/* seq2seq.c -- model construction. */
#include "zoo/models/seq2seq.h"

#include <stdio.h>

static zoo_model *model_new(const zoo_model_kind *kind, const void *cfg, int src_vocab,
                            int tgt_vocab, bool zero, uint64_t seed) {
    zoo_model *m = kind->create(cfg ? cfg : kind->defaults, src_vocab, tgt_vocab);
    if (!m) return NULL;
    if (zero ? nn_params_finalize_zero(m->ps) : nn_params_finalize(m->ps, seed)) {
        zoo_model_free(m);
        return NULL;
    }
    return m;
}

zoo_model *zoo_model_new(const zoo_model_kind *kind, const void *cfg, int src_vocab, int tgt_vocab,
                         uint64_t seed) {
    return model_new(kind, cfg, src_vocab, tgt_vocab, false, seed);
}

zoo_model *zoo_model_new_zero(const zoo_model_kind *kind, const void *cfg, int src_vocab,
                              int tgt_vocab) {
    return model_new(kind, cfg, src_vocab, tgt_vocab, true, 0);
}

void zoo_model_free(zoo_model *m) {
    if (m) nn_packs_free(m->packs);
    if (m) m->ops->free(m);
}


int zoo_config_set(const zoo_model_kind *k, void *cfg, const char *name, const char *text) {
    const zoo_field *f = zoo_field_find(k->config, k->n_config, name);
    if (!f) return ag_error("--%s: not a config field of the %s model", name, k->name);
    char what[80];
    snprintf(what, sizeof what, "--%s", name);
    return zoo_field_parse(f, cfg, text, what);
}
