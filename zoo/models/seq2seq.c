/* seq2seq.c -- hyperparameter tables and model construction. */
#include "zoo/models/seq2seq.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- hyperparameters ---- */

zoo_hparam *zoo_hp_find(zoo_hparams *h, const char *name) {
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->p[i].name, name)) return &h->p[i];
    return NULL;
}

double zoo_hp(const zoo_hparams *h, const char *name) {
    zoo_hparam *p = zoo_hp_find((zoo_hparams *)h, name);
    return p ? p->value : NAN;
}

int zoo_hp_set(zoo_hparams *h, const char *name, const char *text) {
    zoo_hparam *p = zoo_hp_find(h, name);
    if (!p) return ag_error("--%s: not a hyperparameter of this model", name);
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    bool bad = !*text || *end || errno || !isfinite(v) || v < p->min || v > p->max ||
               (p->integer && v != floor(v));
    if (bad)
        return ag_error("--%s: expected %s in [%g, %g], got '%s'", name,
                            p->integer ? "an integer" : "a number", p->min, p->max, text);
    p->value = v;
    return 0;
}

/* ---- models ---- */

zoo_model *zoo_model_new(const zoo_model_kind *kind, const zoo_hparams *h, int src_vocab,
                         int tgt_vocab, uint64_t seed) {
    zoo_model *m = kind->create(h, src_vocab, tgt_vocab);
    if (!m) return NULL;
    if (nn_params_finalize(m->ps, seed)) {
        zoo_model_free(m);
        return NULL;
    }
    return m;
}

void zoo_model_free(zoo_model *m) {
    if (m) m->ops->free(m);
}

