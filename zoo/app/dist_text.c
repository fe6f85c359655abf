/* dist_text.c -- the text of a run that every rank of a group must share (zoo_dist_run_text,
 * zoo/app/dist.h): the lines the start check compares. */
#include "zoo/app/dist.h"
#include "zoo/app/run_cfg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

/* A text that grows (run_text). */
typedef struct text {
    char *s;
    size_t n, cap;
    bool failed;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = t->failed ? 0 : vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
        va_end(ap);
        if (t->failed || (size_t)k < t->cap - t->n) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = 2 * t->cap + (size_t)k;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

/* The flag lines of a typed table over obj: "--name value". */
static void add_fields(text *t, const zoo_field *f, int n, const void *obj) {
    char v[64];
    for (int i = 0; i < n; i++)
        add(t, "--%s %s\n", f[i].name, zoo_field_format(&f[i], obj, v, sizeof v));
}

/* XXH3 of what batches are made of: the ids and lengths of both sides, the parts, the
 * vocabularies' tokens. */
static uint64_t data_hash(const ds_fra *data) {
    XXH3_state_t *h = XXH3_createState();
    if (!h) return 0;
    XXH3_64bits_reset(h);
    int64_t pairs = ds_fra_num_pairs(data);
    int32_t steps = ds_fra_num_steps(data);
    XXH3_64bits_update(h, &pairs, sizeof pairs);
    XXH3_64bits_update(h, &steps, sizeof steps);
    for (int s = 0; s < 2; s++) {
        XXH3_64bits_update(h, ds_fra_ids(data, (ds_side)s),
                           sizeof(int32_t) * (size_t)pairs * (size_t)steps);
        XXH3_64bits_update(h, ds_fra_valid_len(data, (ds_side)s), sizeof(int32_t) * (size_t)pairs);
        const ds_vocab *v = ds_fra_vocab(data, (ds_side)s);
        for (int32_t id = 0; id < ds_vocab_size(v); id++) {
            size_t len = 0;
            const char *tok = ds_vocab_token(v, id, &len);
            XXH3_64bits_update(h, tok, len + 1);
        }
    }
    for (int p = DS_TRAIN; p <= DS_TEST; p++) {
        int64_t n = ds_fra_part_size(data, (ds_part)p);
        XXH3_64bits_update(h, &n, sizeof n);
        XXH3_64bits_update(h, ds_fra_part_pairs(data, (ds_part)p), sizeof(int64_t) * (size_t)n);
    }
    uint64_t r = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return r;
}

char *zoo_dist_run_text(const zoo_trainer *tr, const ds_fra *data, const char *extra) {
    text t = {0};
    const zoo_model *m = tr->model;
    add(&t, "model %s\n", m->kind->name);
    add_fields(&t, m->kind->config, m->kind->n_config, m->cfg);
    const zoo_cfg_group *recipe = zoo_cfg_group_find("recipe"), *opts = zoo_cfg_group_find("data");
    for (int i = 0; i < recipe->n; i++) add_fields(&t, &recipe->opts[i].f, 1, &tr->recipe);
    for (int i = 0; i < opts->n; i++) add_fields(&t, &opts->opts[i].f, 1, ds_fra_opts(data));
    add(&t, "shards (all ranks) %d\n", tr->shards * zoo_dist_size(tr->dist));
    if (extra) add(&t, "%s", extra);
    add(&t, "data (XXH3 of the pairs, split and vocabularies) %016llx\n",
        (unsigned long long)data_hash(data));
    add(&t, "steps done %lld, epochs %d, batches of the epoch %d\n", (long long)tr->steps,
        tr->epochs_done, tr->epoch_batches);
    add(&t, "rng %016llx %016llx %016llx %016llx\n", (unsigned long long)tr->rng.s[0],
        (unsigned long long)tr->rng.s[1], (unsigned long long)tr->rng.s[2],
        (unsigned long long)tr->rng.s[3]);
    add(&t, "model values (XXH3) %016llx\n",
        (unsigned long long)XXH3_64bits(nn_params_values(m->ps),
                                        sizeof(ag_real) * nn_params_flat_size(m->ps)));
    if (t.failed || !t.s) {
        free(t.s);
        ag_error("dist: out of memory");
        return NULL;
    }
    return t.s;
}
