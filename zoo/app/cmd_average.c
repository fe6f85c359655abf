/* cmd_average.c -- PROGRAM average: checkpoint averaging (cli.h), as fairseq's
 * scripts/average_checkpoints.py and Marian do it:
 *
 *     PROGRAM average --out AVG.safetensors CK1.safetensors CK2.safetensors ...
 *     PROGRAM average --out AVG.safetensors --last N --checkpoint NAME.safetensors
 *
 * (the second takes the N most recent copies train --keep-checkpoints kept beside NAME:
 * NAME.step<STEPS>.safetensors). Every parameter of the result is the element-wise mean of the
 * inputs' -- summed in double in the order of the inputs, divided by their count, then stored
 * in the checkpoints' dtype -- with the model, vocabularies, config and data options of the
 * first input. Every input must hold a model of the program's kind with the same config, the
 * same vocabularies and the same tensors (names, dtypes, shapes); an error names the file and
 * what differs. The optimizer state and the training run (train.*) are not kept: the result is
 * for translate and eval, not for --resume. --out never names an input (paths.c). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The inputs: the arguments, or the --last N kept copies of --checkpoint (names owned). */
typedef struct avg_inputs {
    int n;
    const char **paths;
    char (*names)[4200];
} avg_inputs;

static int kept_inputs(const zoo_cli *c, avg_inputs *in) {
    const char *ck = c->run.cfg.files.checkpoint;
    int last = c->run.cfg.exec.last;
    int64_t *steps;
    int n = zoo_kept_checkpoints(ck, -1, &steps);
    if (n < 0) return zoo__fail(c, ag_last_error());
    if (n < last) {
        free(steps);
        char msg[4400];
        snprintf(msg, sizeof msg,
                 "--last %d: %s has %d kept cop%s (NAME.step<STEPS>.safetensors, written by train "
                 "--keep-checkpoints)",
                 last, ck, n, n == 1 ? "y" : "ies");
        return zoo__fail(c, msg);
    }
    in->names = malloc(sizeof *in->names * (size_t)last);
    in->paths = malloc(sizeof *in->paths * (size_t)last);
    int rc = !in->names || !in->paths ? zoo__fail(c, "out of memory") : 0;
    for (int i = 0; !rc && i < last; i++) { /* the oldest first: as they were written */
        if (zoo_kept_checkpoint_name(ck, steps[last - 1 - i], in->names[i], sizeof *in->names))
            rc = zoo__fail(c, ag_last_error());
        in->paths[i] = in->names[i];
    }
    free(steps);
    in->n = last;
    return rc;
}

/* The inputs, each checked against the outputs (paths.c). 0 or an exit status. */
static int get_inputs(const zoo_cli *c, avg_inputs *in) {
    const zoo_run *r = &c->run;
    *in = (avg_inputs){0};
    if (!r->cfg.files.out) return zoo__usage(c, "--out is required");
    if (r->cfg.exec.last && r->n_pos)
        return zoo__usage(c, "give the checkpoints as arguments or --last N, not both");
    if (r->cfg.exec.last && !r->cfg.files.checkpoint)
        return zoo__usage(c, "--last needs --checkpoint (the run whose kept copies it takes)");
    if (!r->cfg.exec.last && r->cfg.files.checkpoint)
        return zoo__usage(c, "--checkpoint names the run of --last N; give the checkpoints to "
                             "average as arguments");
    if (!r->cfg.exec.last && !r->n_pos)
        return zoo__usage(c, "give the checkpoints to average (or --last N --checkpoint NAME)");
    int rc = 0;
    if (r->cfg.exec.last) {
        rc = kept_inputs(c, in);
    } else {
        in->n = r->n_pos;
        in->paths = malloc(sizeof *in->paths * (size_t)r->n_pos);
        if (!in->paths) return zoo__fail(c, "out of memory");
        for (int i = 0; i < r->n_pos; i++) in->paths[i] = r->pos[i];
    }
    for (int i = 0; !rc && i < in->n; i++) {
        char flag[40];
        snprintf(flag, sizeof flag, "checkpoint %d", i + 1);
        zoo_path_extra e = {flag, in->paths[i], false};
        if (zoo__check_paths(c, &e, 1)) rc = zoo__usage(c, "%s", ag_last_error());
    }
    return rc;
}

static void free_inputs(avg_inputs *in) {
    free(in->paths);
    free(in->names);
}

/* ---- the same run ---- */

static bool is_param(const nn_ckpt_tensor *t) {
    return strncmp(t->name, NN_CKPT_OPTIM_PREFIX, strlen(NN_CKPT_OPTIM_PREFIX)) != 0;
}

static void shape_text(const nn_ckpt_tensor *t, char *s, size_t len) {
    int n = snprintf(s, len, "%s [", nn_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && n < (int)len; d++)
        n += snprintf(s + n, len - (size_t)n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (n < (int)len) snprintf(s + n, len - (size_t)n, "]");
}

/* b's metadata key equals a's (both absent counts as equal); else -1 naming both. */
static int same_meta(const nn_ckpt *a, const nn_ckpt *b, const char *key, const char *what) {
    const char *x = nn_ckpt_meta(a, key), *y = nn_ckpt_meta(b, key);
    if ((!x && !y) || (x && y && !strcmp(x, y))) return 0;
    if (!x != !y || !what)
        return ag_error("%s: its %s is %s%s%s, %s's %s%s%s: only checkpoints of one run are "
                        "averaged",
                        nn_ckpt_source(b), key, y ? "'" : "", y ? y : "absent", y ? "'" : "",
                        nn_ckpt_source(a), x ? "'" : "", x ? x : "absent", x ? "'" : "");
    int line = 1; /* a vocabulary: the first token (line) that differs */
    for (size_t i = 0; x[i] == y[i]; i++) line += x[i] == '\n';
    return ag_error("%s: its %s (%s) differs from %s's at token %d: only checkpoints of one run "
                    "are averaged",
                    nn_ckpt_source(b), what, key, nn_ckpt_source(a), line - 1);
}

/* Whether b holds the same kind, config, vocabularies and tensors as a. 0, or -1 naming b's
 * file and the first difference. */
static int same_run(const nn_ckpt *a, const nn_ckpt *b) {
    if (same_meta(a, b, "tapegrad.model", NULL) ||
        same_meta(a, b, "vocab.src", "source vocabulary") ||
        same_meta(a, b, "vocab.tgt", "target vocabulary") ||
        same_meta(a, b, "vocab.src_model", NULL) || same_meta(a, b, "vocab.tgt_model", NULL) ||
        same_meta(a, b, "vocab.number_tags", NULL))
        return -1;
    const nn_ckpt *both[2] = {a, b};
    for (int k = 0; k < 2; k++) /* config.* keys of either */
        for (size_t i = 0; i < nn_ckpt_meta_count(both[k]); i++) {
            const char *key, *value;
            if (!nn_ckpt_meta_at(both[k], i, &key, &value) && !strncmp(key, "config.", 7) &&
                same_meta(a, b, key, NULL))
                return -1;
        }
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < nn_ckpt_count(both[k]); i++) {
            const nn_ckpt_tensor *t = nn_ckpt_at(both[k], i);
            if (!is_param(t)) continue;
            const nn_ckpt_tensor *u = nn_ckpt_find(both[1 - k], t->name);
            if (!u)
                return ag_error("%s: %s tensor %s, which %s %s", nn_ckpt_source(b),
                                k ? "has a" : "has no", t->name, nn_ckpt_source(a),
                                k ? "has not" : "has");
            char st[160], su[160];
            shape_text(t, st, sizeof st);
            shape_text(u, su, sizeof su);
            if (strcmp(st, su))
                return ag_error("%s: tensor %s is %s, %s's is %s", nn_ckpt_source(b), t->name,
                                k ? st : su, nn_ckpt_source(a), k ? su : st);
        }
    return 0;
}

/* ---- the mean ---- */

/* acc += the parameters of ck (those of `first`'s order; buf: room for the largest). 0 or -1. */
static int accumulate(const nn_ckpt *first, const nn_ckpt *ck, double *acc, ag_real *buf) {
    for (size_t i = 0; i < nn_ckpt_count(first); i++) {
        const nn_ckpt_tensor *t = nn_ckpt_at(first, i);
        if (!is_param(t)) continue;
        int shape[NN_CKPT_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = (int)t->shape[d];
        if (nn_ckpt_read(ck, t->name, t->ndim, shape, buf)) return -1;
        for (uint64_t j = 0; j < t->numel; j++) acc[j] += (double)buf[j];
        acc += t->numel;
    }
    return 0;
}

/* The mean (acc / n) as a checkpoint of ag_real tensors in first's order. NULL or the
 * checkpoint (caller frees). */
static nn_ckpt *mean_of(const nn_ckpt *first, const double *acc, int n, ag_real *buf) {
    nn_ckpt *avg = nn_ckpt_new();
    for (size_t i = 0; avg && i < nn_ckpt_count(first); i++) {
        const nn_ckpt_tensor *t = nn_ckpt_at(first, i);
        if (!is_param(t)) continue;
        int shape[NN_CKPT_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = (int)t->shape[d];
        for (uint64_t j = 0; j < t->numel; j++) buf[j] = (ag_real)(acc[j] / n);
        if (nn_ckpt_add(avg, t->name, t->ndim, shape, buf)) nn_ckpt_free(avg), avg = NULL;
        acc += t->numel;
    }
    return avg;
}

/* The output: the model (its averaged parameters, vocabularies, config) in the first input's
 * dtype, its data options (data.*) and subword models (vocab.src_model, vocab.tgt_model), and
 * which inputs were averaged. 0 or -1. */
static int write_average(const nn_ckpt *first, const zoo_loaded *l, const avg_inputs *in,
                         const char *path) {
    nn_dtype dtype = NN_F32;
    for (size_t i = 0; i < nn_ckpt_count(first); i++)
        if (is_param(nn_ckpt_at(first, i))) {
            dtype = nn_ckpt_at(first, i)->dtype;
            break;
        }
    size_t len = 32;
    for (int i = 0; i < in->n; i++) len += strlen(in->paths[i]) + 1;
    char *list = malloc(len);
    nn_ckpt *out = nn_ckpt_new();
    int rc = -1;
    if (!list || !out) {
        ag_error("%s: out of memory", path);
    } else {
        size_t k = (size_t)snprintf(list, len, "%d", in->n);
        for (int i = 0; i < in->n; i++)
            k += (size_t)snprintf(list + k, len - k, "\n%s", in->paths[i]);
        rc = nn_ckpt_set_store_dtype(out, dtype) || nn_ckpt_set_borrow(out, true) ||
                     zoo_ckpt_add_model(out, l->m, l->sv, l->tv) ||
                     nn_ckpt_set_meta(out, "average.inputs", list)
                 ? -1
                 : 0;
        for (size_t i = 0; !rc && i < nn_ckpt_meta_count(first); i++) {
            const char *key, *value;
            if (!nn_ckpt_meta_at(first, i, &key, &value) &&
                (!strncmp(key, "data.", 5) || !strcmp(key, "vocab.src_model") ||
                 !strcmp(key, "vocab.tgt_model") || !strcmp(key, "vocab.number_tags")))
                /* and the subword models and their number tags, as they are */
                rc = nn_ckpt_set_meta(out, key, value);
        }
        if (!rc) rc = nn_ckpt_save(out, path);
    }
    free(list);
    nn_ckpt_free(out);
    return rc;
}

/* Sums every input into acc (first: the loaded first input), checking each against it. 0 or
 * -1. */
static int sum_inputs(const zoo_loaded *l, const avg_inputs *in, double *acc, ag_real *buf) {
    if (accumulate(l->ck, l->ck, acc, buf)) return -1;
    for (int i = 1; i < in->n; i++) {
        nn_ckpt *ck;
        if (nn_ckpt_load(&ck, in->paths[i])) return -1;
        int rc = same_run(l->ck, ck) || accumulate(l->ck, ck, acc, buf) ? -1 : 0;
        nn_ckpt_free(ck);
        if (rc) return -1;
    }
    return 0;
}

int zoo__cmd_average(zoo_cli *c) {
    avg_inputs in;
    int rc = get_inputs(c, &in);
    if (rc) return free_inputs(&in), rc;
    zoo_loaded l = {0}; /* the first input: its model, of the program's kind, and vocabularies */
    if (nn_ckpt_load(&l.ck, in.paths[0]) ||
        (!nn_ckpt_meta(l.ck, "tapegrad.model") &&
         ag_error("%s: not a checkpoint of train (no tapegrad.model in its metadata)",
                  in.paths[0])) ||
        zoo_ckpt_load_model(l.ck, c->run.kind, &l.m, &l.sv, &l.tv)) {
        rc = zoo__fail(c, ag_last_error());
        zoo__unload(&l);
        free_inputs(&in);
        return rc;
    }
    uint64_t total = 0, largest = 0;
    for (size_t i = 0; i < nn_ckpt_count(l.ck); i++) {
        const nn_ckpt_tensor *t = nn_ckpt_at(l.ck, i);
        if (!is_param(t)) continue;
        total += t->numel;
        if (t->numel > largest) largest = t->numel;
    }
    double *acc = calloc(total ? total : 1, sizeof *acc);
    ag_real *buf = malloc(sizeof *buf * (largest ? largest : 1));
    nn_ckpt *avg = NULL;
    if (!acc || !buf) ag_error("out of memory");
    if (!acc || !buf || sum_inputs(&l, &in, acc, buf) || !(avg = mean_of(l.ck, acc, in.n, buf)) ||
        nn_ckpt_load_params(avg, l.m->ps, 0) || write_average(l.ck, &l, &in, c->run.cfg.files.out))
        rc = zoo__fail(c, ag_last_error());
    if (!rc)
        printf("average of %d checkpoints (%s ... %s): %s, the mean of each of %lld parameters; "
               "no optimizer state: for translate and eval, not --resume\n",
               in.n, in.paths[0], in.paths[in.n - 1], c->run.cfg.files.out, (long long)total);
    nn_ckpt_free(avg);
    free(acc);
    free(buf);
    zoo__unload(&l);
    free_inputs(&in);
    return rc;
}
