/* trainer_ckpt.c -- a training run in a checkpoint: save and resume (trainer.h). The data
 * options and the recipe are written and read by their groups of the run configuration
 * (run_cfg.h: data.<name>, train.<name>); the model by model_io.c; here the rest of the run. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/trainer_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/text.h"
#include "zoo/app/dist.h"
#include "zoo/app/run_cfg.h"

/* ---- checkpoints ---- */

/* The history as text: one "loss tokens seconds" line per epoch, %.17g (exact). */
static char *history_text(const zoo_trainer *tr) {
    size_t cap = (size_t)tr->n_hist * 80 + 1, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < tr->n_hist; i++)
        n += (size_t)snprintf(s + n, cap - n, "%.17g %.17g %.17g\n", tr->hist[i].loss,
                              tr->hist[i].tokens, tr->hist[i].seconds);
    return s;
}

/* The validations as text: one "step epoch seconds train_loss loss bleu [sacrebleu chrf]" line
 * each, exact (the last two when the validation has them; checkpoints made before they were
 * recorded have 6 fields a line, and programs of that time read the first 6 of each line). */
static char *valid_text(const zoo_trainer *tr) {
    size_t cap = (size_t)tr->n_valid * 190 + 1, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < tr->n_valid; i++) {
        const zoo_valid_stats *v = &tr->valid[i];
        n += (size_t)snprintf(s + n, cap - n, "%lld %.17g %.17g %.17g %.17g %.17g",
                              (long long)v->step, v->epoch, v->seconds, v->train_loss, v->loss,
                              v->bleu);
        if (v->standard)
            n += (size_t)snprintf(s + n, cap - n, " %.17g %.17g", v->sacrebleu, v->chrf);
        n += (size_t)snprintf(s + n, cap - n, "\n");
    }
    return s;
}

/* One line of train.valid_history (6 or 8 numbers) into *v; 0, or -1 (malformed). *used: the
 * bytes read. */
static int parse_valid_line(const char *p, int64_t max_step, zoo_valid_stats *v, int *used) {
    long long step;
    *v = (zoo_valid_stats){0};
    *used = 0;
    if (sscanf(p, "%lld %lf %lf %lf %lf %lf%n", &step, &v->epoch, &v->seconds, &v->train_loss,
               &v->loss, &v->bleu, used) != 6 ||
        step < 0 || step > max_step)
        return -1;
    v->step = step;
    int more = 0;
    const char *q = p + *used;
    if (*q == ' ' && sscanf(q, " %lf %lf%n", &v->sacrebleu, &v->chrf, &more) == 2) {
        v->standard = true;
        *used += more;
    }
    q = p + *used;
    return *q && *q != '\n' ? -1 : 0; /* nothing else on the line */
}

/* The validations of train.valid_history (NULL: none). A run choosing by sacreBLEU needs it in
 * every one. */
static int parse_valid(zoo_trainer *tr, const char *text, const char *file) {
    for (const char *p = text; p && *p;) {
        zoo_valid_stats v;
        int used = 0;
        if (parse_valid_line(p, tr->steps, &v, &used))
            return ag_error("%s: metadata train.valid_history: malformed at validation %d "
                            "(expected \"step epoch seconds train_loss loss bleu [sacrebleu "
                            "chrf]\")",
                            file, tr->n_valid + 1);
        if (!v.standard && tr->recipe.valid_metric == ZOO_METRIC_SACREBLEU)
            return ag_error("%s: metadata train.valid_history: validation %d has no sacreBLEU, "
                            "which train.valid_metric sacrebleu needs",
                            file, tr->n_valid + 1);
        if (zoo__push_valid(tr, v)) return -1;
        p = strchr(p + used, '\n');
        if (p) p++;
    }
    return 0;
}

int zoo_trainer_save(const zoo_trainer *tr, const ds_fra *data, const char *path) {
    char partial[128]; /* the epoch under way: batches done, loss sum, tokens, seconds */
    snprintf(partial, sizeof partial, "%d %.17g %.17g %.17g", tr->epoch_batches, tr->epoch_loss,
             tr->epoch_tokens, tr->epoch_seconds);
    nn_ckpt *ck = nn_ckpt_new();
    char *hist = history_text(tr), *valid = valid_text(tr);
    int rc = -1;
    if (!ck || !hist || !valid) {
        ag_error("%s: out of memory", path);
    } else if (!nn_ckpt_set_borrow(ck, true) && /* saved from the model's and Adam's buffers */
               !zoo_ckpt_add_model(ck, tr->model, ds_fra_vocab(data, DS_SRC),
                                   ds_fra_vocab(data, DS_TGT)) &&
               !optim_save_state(tr->opt, ck) && !nn_ckpt_set_meta_rng(ck, "train.rng", &tr->rng) &&
               !nn_ckpt_set_meta_int(ck, "train.epochs_done", tr->epochs_done) &&
               !nn_ckpt_set_meta_int(ck, "train.shards", tr->shards * zoo_dist_size(tr->dist)) &&
               !nn_ckpt_set_meta_int(ck, "train.ranks", zoo_dist_size(tr->dist)) &&
               !nn_ckpt_set_meta_int(ck, "train.steps", tr->steps) &&
               !zoo_cfg_meta_write(ck, zoo_cfg_group_find("recipe"), &tr->recipe) &&
               !zoo_cfg_meta_write(ck, zoo_cfg_group_find("data"), ds_fra_opts(data)) &&
               !nn_ckpt_set_meta(ck, DS_PREPROCESS_KEY, /* datasets/text.h */
                                 ds_vocab_codec(ds_fra_vocab(data, DS_SRC))
                                     ? DS_PREPROCESS_NORMALIZE
                                     : DS_PREPROCESS_D2L) &&
               !nn_ckpt_set_meta(ck, "train.epoch_partial", partial) &&
               !nn_ckpt_set_meta(ck, "train.history", hist) &&
               (!tr->n_valid || !nn_ckpt_set_meta(ck, "train.valid_history", valid))) {
        rc = nn_ckpt_save(ck, path);
    }
    free(hist);
    free(valid);
    nn_ckpt_free(ck);
    return rc;
}

/* train.steps and train.epoch_partial (absent in checkpoints written before them: 0 and an
 * epoch boundary). */
static int get_progress(const nn_ckpt *ck, zoo_trainer *tr) {
    const char *file = nn_ckpt_source(ck), *partial = nn_ckpt_meta(ck, "train.epoch_partial");
    int64_t steps = 0;
    if (nn_ckpt_meta(ck, "train.steps") && nn_ckpt_meta_int(ck, "train.steps", &steps)) return -1;
    if (steps < 0 || steps > ZOO_MAX_STEPS)
        return ag_error("%s: metadata train.steps = %lld, expected 0 to %lld", file,
                        (long long)steps, (long long)ZOO_MAX_STEPS);
    tr->steps = steps;
    if (!partial) return 0;
    int used = 0;
    if (sscanf(partial, "%d %lf %lf %lf%n", &tr->epoch_batches, &tr->epoch_loss, &tr->epoch_tokens,
               &tr->epoch_seconds, &used) != 4 ||
        partial[used] || tr->epoch_batches < 0 || !isfinite(tr->epoch_loss) ||
        !isfinite(tr->epoch_tokens) || !isfinite(tr->epoch_seconds))
        return ag_error(
            "%s: metadata train.epoch_partial: expected \"batches loss tokens seconds\", got '%s'",
            file, partial);
    return 0;
}

static int parse_history(zoo_trainer *tr, const char *text, const char *file) {
    const char *p = text;
    while (p && *p) {
        zoo_epoch_stats s;
        int used = 0;
        if (sscanf(p, "%lf %lf %lf%n", &s.loss, &s.tokens, &s.seconds, &used) != 3)
            return ag_error("%s: metadata train.history: malformed at epoch %d", file,
                            tr->n_hist + 1);
        if (zoo__push_hist(tr, s)) return -1;
        p = strchr(p + used, '\n');
        if (p) p++;
    }
    if (tr->n_hist != tr->epochs_done)
        return ag_error("%s: train.history has %d epochs, train.epochs_done says %d", file,
                        tr->n_hist, tr->epochs_done);
    return 0;
}

zoo_trainer *zoo_trainer_resume(const char *path, const zoo_model_kind *kind,
                                ds_fra_options *data_opts) {
    return zoo_trainer_resume_dist(path, kind, NULL, data_opts);
}

zoo_trainer *zoo_trainer_resume_dist(const char *path, const zoo_model_kind *kind, zoo_dist *d,
                                     ds_fra_options *data_opts) {
    nn_ckpt *ck = NULL;
    zoo_model *m = NULL;
    ds_vocab *src = NULL, *tgt = NULL;
    zoo_trainer *tr = NULL;
    int64_t epochs = 0;
    zoo_recipe recipe = zoo_recipe_d2l; /* keys absent (older checkpoints): d2l's */
    if (nn_ckpt_load(&ck, path)) goto fail;
    if (!nn_ckpt_meta(ck, "train.lr") || !nn_ckpt_meta(ck, "train.clip")) {
        ag_error("%s: not a training checkpoint (no train.lr, train.clip)", path);
        goto fail;
    }
    if (zoo_cfg_meta_read(ck, zoo_cfg_group_find("recipe"), &recipe, NULL) ||
        zoo_ckpt_load_model(ck, kind, &m, &src, &tgt))
        goto fail;
    tr = zoo__trainer_of(m, &recipe);
    m = NULL; /* owned by tr (or freed) */
    if (tr) tr->vocab[DS_SRC] = src, tr->vocab[DS_TGT] = tgt;
    else ds_vocab_free(src), ds_vocab_free(tgt);
    src = tgt = NULL;
    *data_opts = ds_fra_defaults(); /* keys absent from older checkpoints: the defaults */
    if (!tr || optim_load_state(tr->opt, ck) || nn_ckpt_meta_rng(ck, "train.rng", &tr->rng) ||
        nn_ckpt_meta_int(ck, "train.epochs_done", &epochs) || zoo_data_meta_require(ck) ||
        zoo_data_meta_read(ck, data_opts, NULL))
        goto fail;
    if (epochs < 0 || epochs > 1000000) {
        ag_error("%s: metadata train.epochs_done = %lld, expected 0 to 1000000", path,
                 (long long)epochs);
        goto fail;
    }
    tr->epochs_done = (int)epochs;
    int64_t shards;
    if (nn_ckpt_meta_int(ck, "train.shards", &shards)) goto fail;
    if (shards < 1 || shards > 1048576) { /* the global count: up to 64 per rank */
        ag_error("%s: metadata train.shards = %lld, expected 1 to 1048576", path,
                 (long long)shards);
        goto fail;
    }
    int ranks = zoo_dist_size(d); /* the global count, shared between the ranks */
    if (shards % ranks || shards / ranks > 64) {
        ag_error("%s: its run has %lld shards in all, which %d rank%s cannot share (run it on a "
                 "rank count that divides %lld, into at most 64 shards each)",
                 path, (long long)shards, ranks, ranks == 1 ? "" : "s", (long long)shards);
        goto fail;
    }
    if (zoo_trainer_set_dist(tr, d) || zoo_trainer_set_shards(tr, (int)(shards / ranks))) goto fail;
    const char *hist = nn_ckpt_meta(ck, "train.history");
    if (!hist) {
        ag_error("%s: not a training checkpoint (no train.history)", path);
        goto fail;
    }
    if (parse_history(tr, hist, path) || get_progress(ck, tr) ||
        parse_valid(tr, nn_ckpt_meta(ck, "train.valid_history"), path))
        goto fail;
    nn_ckpt_free(ck);
    return tr;
fail:
    zoo_trainer_free(tr);
    nn_ckpt_free(ck);
    return NULL;
}

/* The first id where the vocabularies a and b differ (their common size when one is a prefix
 * of the other), or -1 when they are the same. */
static int32_t first_difference(const ds_vocab *a, const ds_vocab *b) {
    int32_t na = ds_vocab_size(a), nb = ds_vocab_size(b);
    for (int32_t id = 0; id < na && id < nb; id++) {
        size_t la, lb;
        const char *ta = ds_vocab_token(a, id, &la), *tb = ds_vocab_token(b, id, &lb);
        if (la != lb || memcmp(ta, tb, la)) return id;
    }
    return na == nb ? -1 : (na < nb ? na : nb);
}

int zoo_trainer_check_data(const zoo_trainer *tr, const ds_fra *data) {
    static const char *const side[2] = {"source", "target"};
    for (int s = 0; s < 2; s++) {
        const ds_vocab *v = ds_fra_vocab(data, (ds_side)s);
        int size = ds_vocab_size(v), want = s ? tr->model->tgt_vocab : tr->model->src_vocab;
        if (size != want)
            return ag_error("the data gives a %s vocabulary of %d tokens, the checkpoint's model "
                            "has %d",
                            side[s], size, want);
        int32_t id = tr->vocab[s] ? first_difference(v, tr->vocab[s]) : -1;
        if (id >= 0) {
            size_t la, lb;
            const char *a = ds_vocab_token(v, id, &la), *b = ds_vocab_token(tr->vocab[s], id, &lb);
            return ag_error("the data's %s vocabulary differs from the checkpoint's: token %d is "
                            "'%.*s' here, '%.*s' there (the same %d tokens are needed: give the "
                            "run's data and options)",
                            side[s], (int)id, (int)la, a, (int)lb, b, size);
        }
    }
    return 0;
}

/* ---- kept copies: NAME.step<STEPS>.safetensors beside NAME.safetensors ---- */

int zoo_kept_checkpoint_name(const char *path, int64_t steps, char *out, size_t len) {
    size_t n = strlen(path), ext = strlen(".safetensors");
    if (n > ext && !strcmp(path + n - ext, ".safetensors")) n -= ext;
    if (snprintf(out, len, "%.*s.step%lld.safetensors", (int)n, path, (long long)steps) >= (int)len)
        return ag_error("%s: path too long for its kept copies", path);
    return 0;
}

static int by_step_down(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* The step of a directory entry named exactly as the copy of path at that step, or -1. */
static int64_t kept_step(const char *path, const char *entry) {
    char prefix[4200], name[4200];
    if (zoo_kept_checkpoint_name(path, 0, prefix, sizeof prefix)) return -1;
    const char *slash = strrchr(prefix, '/'), *base = slash ? slash + 1 : prefix;
    size_t k = strlen(base) - strlen("0.safetensors"); /* "NAME.step" */
    if (strncmp(entry, base, k) || entry[k] < '0' || entry[k] > '9') return -1;
    char *end;
    errno = 0;
    long long step = strtoll(entry + k, &end, 10);
    if (errno || step < 0 || zoo_kept_checkpoint_name(path, step, name, sizeof name)) return -1;
    slash = strrchr(name, '/');
    return strcmp(slash ? slash + 1 : name, entry) ? -1 : step; /* "007", "7x" are not copies */
}

int zoo_kept_checkpoints(const char *path, int64_t upto, int64_t **steps) {
    char dir[4200];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return ag_error("%s: cannot list the kept copies of %s: %s", dir, path, strerror(errno));
    int n = 0, cap = 0, rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        int64_t step = kept_step(path, e->d_name);
        if (step < 0 || (upto >= 0 && step > upto)) continue;
        if (n == cap) {
            int64_t *t = realloc(*steps, sizeof *t * (size_t)(cap = cap ? 2 * cap : 16));
            if (!t) {
                rc = ag_error("%s: out of memory", dir);
                break;
            }
            *steps = t;
        }
        (*steps)[n++] = step;
    }
    closedir(d);
    if (rc) {
        free(*steps);
        *steps = NULL;
        return -1;
    }
    if (n) qsort(*steps, (size_t)n, sizeof **steps, by_step_down);
    return n;
}

int zoo_kept_checkpoints_prune(const char *path, int64_t upto, int keep) {
    int64_t *steps;
    int n = zoo_kept_checkpoints(path, upto, &steps), rc = n < 0 ? -1 : 0;
    char name[4200];
    for (int i = keep; !rc && i < n; i++)
        if (!zoo_kept_checkpoint_name(path, steps[i], name, sizeof name) && unlink(name) &&
            errno != ENOENT)
            rc = ag_error("%s: cannot remove this older kept copy: %s", name, strerror(errno));
    free(steps);
    return rc;
}
