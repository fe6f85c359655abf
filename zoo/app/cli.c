/* cli.c -- train / translate / eval / stats for any zoo model kind. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/common.h"
#include "datasets/metrics.h"
#include "zoo/app/plot.h"
#include "zoo/app/decode.h"
#include "zoo/app/trainer.h"

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR NULL
#endif

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* ---- flags ---- */

typedef enum { F_INT, F_I64, F_U64, F_DBL, F_STR, F_SWITCH } ftype;

typedef struct args {
    const char *data, *checkpoint, *plots, *src_vocab, *tgt_vocab, *split, *out;
    int epochs, batch_size, num_steps, threads, shards, checkpoint_every, log_every, beam;
    int64_t num_examples, min_freq;
    uint64_t seed, split_seed;
    double lr, valid_frac, test_frac, alpha;
    int resume;
    zoo_hparams hp;
} args;

typedef struct flag {
    const char *name;
    ftype type;
    size_t off;          /* offset in args */
    double min, max;
    const char *cmds;    /* t(rain) r (translate) e(val) s(tats) (e)x(port) */
    const char *help;
} flag;

#define A(field) offsetof(args, field)
static const flag FLAGS[] = {
    {"data", F_STR, A(data), 0, 0, "tes", "path of fra.txt (default: see docs/datasets.md)"},
    {"epochs", F_INT, A(epochs), 1, 1e6, "t", "epochs of the whole run"},
    {"num-examples", F_I64, A(num_examples), 0, 1e9, "tes", "lines 0..N of the file (0: all)"},
    {"batch-size", F_INT, A(batch_size), 1, 1e6, "t", "sentence pairs per step"},
    {"num-steps", F_INT, A(num_steps), 1, 1e4, "tres", "tokens per sentence (truncate / pad)"},
    {"min-freq", F_I64, A(min_freq), 0, 1e9, "ts", "vocabulary threshold"},
    {"lr", F_DBL, A(lr), 0, 10, "t", "Adam's learning rate"},
    {"seed", F_U64, A(seed), 0, 1.8e19, "t", "initialisation, dropout and shuffling"},
    {"threads", F_INT, A(threads), 1, 256, "tre", "threads the engine may use (default: train, one per shard up to the cores; else 1); results do not depend on it"},
    {"shards", F_INT, A(shards), 1, 64, "t", "parts of each batch that run in parallel, their gradients summed (results depend on it)"},
    {"valid-frac", F_DBL, A(valid_frac), 0, 0.9, "tes", "held-out validation fraction of the pairs"},
    {"test-frac", F_DBL, A(test_frac), 0, 0.9, "tes", "held-out test fraction of the pairs"},
    {"split-seed", F_U64, A(split_seed), 0, 1.8e19, "tes", "seed of the held-out split"},
    {"checkpoint", F_STR, A(checkpoint), 0, 0, "trex", "checkpoint to write (train) or read"},
    {"checkpoint-every", F_INT, A(checkpoint_every), 0, 1e6, "t", "also checkpoint every N epochs"},
    {"resume", F_SWITCH, A(resume), 0, 1, "t", "continue the run saved in --checkpoint"},
    {"plots", F_STR, A(plots), 0, 0, "ts", "directory for the plots"},
    {"log-every", F_INT, A(log_every), 0, 1e6, "t", "epochs between progress lines (0: none)"},
    {"beam", F_INT, A(beam), 1, 1000, "r", "beam size (1: greedy, as d2l)"},
    {"alpha", F_DBL, A(alpha), 0, 10, "r", "beam search length penalty ((5+len)/6)^alpha"},
    {"src-vocab", F_STR, A(src_vocab), 0, 0, "rex", "source vocabulary file (one token per line) of a plain state_dict"},
    {"tgt-vocab", F_STR, A(tgt_vocab), 0, 0, "rex", "target vocabulary file (one token per line) of a plain state_dict"},
    {"split", F_STR, A(split), 0, 0, "e", "test | valid | train | all (default: test if any)"},
    {"out", F_STR, A(out), 0, 0, "x", "plain state_dict file to write (safetensors, no metadata)"},
};
#define N_FLAGS (sizeof FLAGS / sizeof *FLAGS)

typedef struct cli {
    const zoo_model_kind *kind;
    const char *cmd;
    char letter;
    args a;
    bool given[N_FLAGS + ZOO_MAX_HPARAMS];
    int n_pos;
    char **pos;
} cli;

static int usage_error(const cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const cli *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: ", c->kind->program, c->cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see %s %s --help)\n", c->kind->program, c->cmd);
    va_end(ap);
    return EXIT_USAGE;
}

static int fail(const cli *c, const char *msg) {
    fprintf(stderr, "%s %s: %s\n", c->kind->program, c->cmd, msg);
    return EXIT_RUNTIME;
}

static bool takes(const cli *c, const flag *f) { return strchr(f->cmds, c->letter) != NULL; }
static bool hparams_apply(const cli *c) { return c->letter != 's' && c->letter != 'x'; }

static void help(const cli *c) {
    static const char *what[] = {"train", "train on the English-French data, report loss and tokens/sec, "
                                          "translate the book's four sentences, write the checkpoint",
                                 "translate", "translate SENTENCE... (or each line of stdin) with a checkpoint",
                                 "eval", "corpus BLEU-4, chrF and mean d2l BLEU of a checkpoint on a split",
                                 "stats", "pairs, vocabulary sizes, sentence lengths and the length histogram",
                                 "export", "write a checkpoint as a plain state_dict (--out) and its vocabularies "
                                           "(--src-vocab, --tgt-vocab), for PyTorch"};
    for (int i = 0; i < 10; i += 2)
        if (!strcmp(what[i], c->cmd)) printf("usage: %s %s [flags]%s\n  %s\n\nflags:\n", c->kind->program,
                                             c->cmd, c->letter == 'r' ? " [SENTENCE ...]" : "", what[i + 1]);
    for (size_t i = 0; i < N_FLAGS; i++)
        if (takes(c, &FLAGS[i])) printf("  --%-18s %s\n", FLAGS[i].name, FLAGS[i].help);
    if (hparams_apply(c)) {
        printf("\n%s hyperparameters%s:\n", c->kind->name,
               c->letter == 't' ? "" : " (for a plain state_dict; a tapegrad checkpoint carries its own)");
        for (int i = 0; i < c->kind->hparams.n; i++)
            printf("  --%-18s %s (default %g)\n", c->kind->hparams.p[i].name, c->kind->hparams.p[i].help,
                   c->kind->hparams.p[i].value);
    }
}

static int set_flag(cli *c, const flag *f, const char *v) {
    void *dst = (char *)&c->a + f->off;
    if (f->type == F_STR) {
        *(const char **)dst = v;
        return 0;
    }
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    bool integral = f->type != F_DBL;
    if (!*v || *end || errno || d < f->min || d > f->max || (integral && d != floor(d)))
        return usage_error(c, "--%s: expected %s in [%g, %g], got '%s'", f->name,
                           integral ? "an integer" : "a number", f->min, f->max, v);
    switch (f->type) {
    case F_INT: *(int *)dst = (int)d; break;
    case F_I64: *(int64_t *)dst = (int64_t)d; break;
    case F_U64: *(uint64_t *)dst = strtoull(v, NULL, 10); break;
    default: *(double *)dst = d;
    }
    return 0;
}

/* Returns 0, EXIT_USAGE, or -1 when --help was printed. */
static int parse(cli *c, int argc, char **argv) {
    c->pos = argv;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            help(c);
            return -1;
        }
        if (strncmp(arg, "--", 2)) {
            if (c->letter != 'r') return usage_error(c, "unexpected argument '%s'", arg);
            c->pos[c->n_pos++] = argv[i];
            continue;
        }
        char name[64];
        const char *eq = strchr(arg, '='), *value = NULL;
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (len >= sizeof name) return usage_error(c, "unknown flag %s", arg);
        memcpy(name, arg + 2, len);
        name[len] = '\0';
        const flag *f = NULL;
        size_t idx = 0;
        for (size_t k = 0; k < N_FLAGS; k++)
            if (!strcmp(FLAGS[k].name, name) && takes(c, &FLAGS[k])) f = &FLAGS[idx = k];
        zoo_hparam *hp = hparams_apply(c) && !f ? zoo_hp_find(&c->a.hp, name) : NULL;
        if (!f && !hp) return usage_error(c, "unknown flag --%s", name);
        if (f && f->type == F_SWITCH) {
            if (eq) return usage_error(c, "--%s takes no value", name);
            *(int *)((char *)&c->a + f->off) = 1;
            c->given[idx] = true;
            continue;
        }
        value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) return usage_error(c, "--%s needs a value", name);
        if (f) {
            if (set_flag(c, f, value)) return EXIT_USAGE;
            c->given[idx] = true;
        } else {
            if (zoo_hp_set(&c->a.hp, name, value)) return usage_error(c, "%s", ag_last_error());
            c->given[N_FLAGS + (hp - c->a.hp.p)] = true;
        }
    }
    return 0;
}

static bool given(const cli *c, const char *name) {
    for (size_t k = 0; k < N_FLAGS; k++)
        if (!strcmp(FLAGS[k].name, name)) return c->given[k];
    for (int k = 0; k < c->a.hp.n; k++)
        if (!strcmp(c->a.hp.p[k].name, name)) return c->given[N_FLAGS + k];
    return false;
}

/* ---- shared steps ---- */

static int mkdir_p(const char *dir) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return ag_error("%s: path too long", dir);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char keep = *p;
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST) return ag_error("%s: cannot create: %s", buf, strerror(errno));
            *p = keep;
            if (!keep) break;
        }
    }
    return 0;
}

static ds_fra_options data_options(const cli *c) {
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = c->a.num_examples;
    o.num_steps = c->a.num_steps;
    o.min_freq = c->a.min_freq;
    o.batch_size = c->a.batch_size;
    o.seed = c->a.seed;
    o.valid_frac = c->a.valid_frac;
    o.test_frac = c->a.test_frac;
    o.split_seed = c->a.split_seed;
    return o;
}

static int load_data(const cli *c, const ds_fra_options *o, ds_fra **d) {
    char path[4096];
    if (ds_resolve_data_path(c->a.data, TG_SOURCE_DIR, path, sizeof path) || ds_fra_load(path, o, d))
        return fail(c, ag_last_error());
    return 0;
}

/* A model read from --checkpoint, with what it came with, and a tape to run it on. */
typedef struct loaded {
    nn_ckpt *ck;
    zoo_model *m;
    ds_vocab *sv, *tv;
    ag_tape *t;
} loaded;

static void unload(loaded *l) {
    zoo_model_free(l->m);
    ds_vocab_free(l->sv);
    ds_vocab_free(l->tv);
    nn_ckpt_free(l->ck);
    ag_tape_free(l->t);
}

/* A tapegrad checkpoint (model, vocabularies, config inside) or a plain state_dict with
 * --src-vocab, --tgt-vocab and the model flags. Returns 0, or an exit status (l is unloaded). */
static int load(const cli *c, loaded *l) {
    *l = (loaded){0};
    int rc = 0;
    if (!c->a.checkpoint) {
        rc = usage_error(c, "--checkpoint is required");
    } else if (!(l->t = ag_tape_new())) {
        rc = fail(c, "out of memory");
    } else if (nn_ckpt_load(&l->ck, c->a.checkpoint) ||
               (nn_ckpt_meta(l->ck, "tapegrad.model")
                    ? zoo_ckpt_load_model(l->ck, c->kind, &l->m, &l->sv, &l->tv)
                    : zoo_ckpt_import_state_dict(l->ck, c->kind, &c->a.hp, c->a.src_vocab,
                                                 c->a.tgt_vocab, &l->m, &l->sv, &l->tv))) {
        rc = fail(c, ag_last_error());
    }
    if (rc) unload(l);
    return rc;
}

/* num_steps: the flag, else the training run's, else d2l's 10. */
static int steps_of(const cli *c, const nn_ckpt *ck) {
    int64_t v;
    if (given(c, "num-steps")) return c->a.num_steps;
    return !nn_ckpt_meta(ck, "data.num_steps") || nn_ckpt_meta_int(ck, "data.num_steps", &v) ? 10 : (int)v;
}

/* ---- train ---- */

static const char *const ENGS[4] = {"go .", "i lost .", "he's calm .", "i'm home ."};
static const char *const FRAS[4] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};

static int cmd_train(cli *c) {
    static const char *const fixed_on_resume[] = {"num-examples", "batch-size", "num-steps", "min-freq",
                                                  "lr", "seed", "valid-frac", "test-frac", "split-seed", "shards"};
    zoo_trainer *tr = NULL;
    ds_fra *d = NULL;
    ds_batches *it = NULL;
    ds_fra_options o = data_options(c);
    int rc = 0;
    char ckpath[4096];
    if (!given(c, "checkpoint")) snprintf(ckpath, sizeof ckpath, "%s.safetensors", c->kind->program);
    else snprintf(ckpath, sizeof ckpath, "%s", c->a.checkpoint);
    if (c->a.resume) {
        for (size_t i = 0; i < sizeof fixed_on_resume / sizeof *fixed_on_resume; i++)
            if (given(c, fixed_on_resume[i]))
                return usage_error(c, "--%s cannot change on --resume (the checkpoint fixes it)", fixed_on_resume[i]);
        for (int i = 0; i < c->a.hp.n; i++)
            if (c->given[N_FLAGS + i])
                return usage_error(c, "--%s cannot change on --resume (the checkpoint fixes it)", c->a.hp.p[i].name);
        tr = zoo_trainer_resume(ckpath, c->kind, &o);
        if (!tr) return fail(c, ag_last_error());
        if ((rc = load_data(c, &o, &d))) goto done;
        if (zoo_trainer_check_data(tr, d)) {
            rc = fail(c, ag_last_error());
            goto done;
        }
        fprintf(stderr, "resuming %s after epoch %d\n", ckpath, tr->epochs_done);
    } else {
        if ((rc = load_data(c, &o, &d))) goto done;
        zoo_model *m = zoo_model_new(c->kind, &c->a.hp, ds_vocab_size(ds_fra_vocab(d, DS_SRC)),
                                     ds_vocab_size(ds_fra_vocab(d, DS_TGT)), c->a.seed);
        tr = m ? zoo_trainer_new(m, c->a.lr, 1.0, c->a.seed + 1) : NULL;
        if (!tr || zoo_trainer_set_shards(tr, c->a.shards)) {
            rc = fail(c, ag_last_error());
            goto done;
        }
    }
    if (c->a.plots && mkdir_p(c->a.plots)) {
        rc = fail(c, ag_last_error());
        goto done;
    }
    if (!given(c, "threads")) { /* one per shard, up to the cores */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (ag_set_threads(tr->shards < cores ? tr->shards : cores > 1 ? (int)cores : 1)) {
            rc = fail(c, ag_last_error());
            goto done;
        }
    }
    if (ds_batches_new(d, DS_TRAIN, true, &it)) {
        rc = fail(c, ag_last_error());
        goto done;
    }
    zoo_train_opts to = {.epochs = c->a.epochs, .clip = 1.0, .checkpoint = ckpath,
                         .checkpoint_every = c->a.checkpoint_every, .plots_dir = c->a.plots,
                         .log_every = c->a.log_every, .log = stderr};
    if (tr->epochs_done >= to.epochs) {
        rc = usage_error(c, "the checkpoint has %d epochs already; give --epochs above it", tr->epochs_done);
        goto done;
    }
    if (zoo_train(tr, d, it, &to)) {
        rc = fail(c, ag_last_error());
        goto done;
    }
    const zoo_epoch_stats *last = &tr->hist[tr->n_hist - 1];
    printf("loss %.3f, %.1f tokens/sec\n", last->loss, last->tokens / last->seconds);
    const ds_vocab *sv = ds_fra_vocab(d, DS_SRC), *tv = ds_fra_vocab(d, DS_TGT);
    for (int i = 0; i < 4 && !rc; i++) {
        char *pred = NULL;
        double bleu = 0;
        if (zoo_translate(tr->model, tr->tape, sv, tv, ENGS[i], o.num_steps, 1, 0, &pred) ||
            ds_bleu_d2l(pred, FRAS[i], 2, &bleu)) {
            rc = fail(c, ag_last_error());
        } else {
            printf("%s => %s, bleu %.3f\n", ENGS[i], pred, bleu);
        }
        free(pred);
    }
    printf("checkpoint: %s\n", ckpath);
    if (!rc && c->a.plots) {
        char *pred = NULL;
        zoo_attn_record rec;
        if (zoo_translate_attention(tr->model, tr->tape, sv, tv, ENGS[3], o.num_steps, &pred, &rec) ||
            zoo_attn_record_plot(&rec, c->a.plots, "attention")) {
            rc = fail(c, ag_last_error());
        } else {
            printf("plots: %s/loss.svg, %s/loss.csv, %s/attention_*.svg (\"%s\" => \"%s\")\n", c->a.plots,
                   c->a.plots, c->a.plots, ENGS[3], pred);
            zoo_attn_record_free(&rec);
        }
        free(pred);
    }
done:
    ds_batches_free(it);
    ds_fra_free(d);
    zoo_trainer_free(tr);
    return rc;
}

/* ---- translate ---- */

static int cmd_translate(cli *c) {
    loaded l;
    int rc = load(c, &l);
    if (rc) return rc;
    int steps = steps_of(c, l.ck);
    char *line = NULL;
    size_t cap = 0;
    for (int i = 0; !rc; i++) {
        const char *s = NULL;
        if (c->n_pos) {
            if (i == c->n_pos) break;
            s = c->pos[i];
        } else {
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) break;
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
            s = line;
        }
        char *out = NULL;
        if (zoo_translate(l.m, l.t, l.sv, l.tv, s, steps, c->a.beam, c->a.alpha, &out)) rc = fail(c, ag_last_error());
        else printf("%s\n", out);
        free(out);
        fflush(stdout);
    }
    free(line);
    unload(&l);
    return rc;
}

/* ---- eval ---- */

static int cmd_eval(cli *c) {
    loaded l;
    int rc = load(c, &l);
    if (rc) return rc;
    nn_ckpt *ck = l.ck;
    ds_fra *d = NULL;
    ds_fra_options o = data_options(c);
    if (nn_ckpt_meta(ck, "data.num_steps")) {
        /* the run's data and split, unless a flag says otherwise */
        int64_t v;
        const char *split = nn_ckpt_meta(ck, "data.split");
        if (!given(c, "num-examples") && !nn_ckpt_meta_int(ck, "data.num_examples", &v)) o.num_examples = v;
        if (!given(c, "split-seed") && !nn_ckpt_meta_int(ck, "data.split_seed", &v)) o.split_seed = (uint64_t)v;
        if (!given(c, "min-freq") && !nn_ckpt_meta_int(ck, "data.min_freq", &v)) o.min_freq = v;
        double vf, tf;
        if (split && sscanf(split, "%lf %lf", &vf, &tf) == 2) {
            if (!given(c, "valid-frac")) o.valid_frac = vf;
            if (!given(c, "test-frac")) o.test_frac = tf;
        }
    }
    o.num_steps = steps_of(c, ck);
    rc = load_data(c, &o, &d);
    ds_part part = DS_TEST;
    const char *name = c->a.split;
    if (!rc) {
        if (!name) {
            part = ds_fra_part_size(d, DS_TEST) ? DS_TEST : ds_fra_part_size(d, DS_VALID) ? DS_VALID : DS_TRAIN;
            name = part == DS_TEST ? "test" : part == DS_VALID ? "valid" : "train";
            if (part == DS_TRAIN)
                fprintf(stderr, "note: this data has no held-out split (give --test-frac): scoring the training pairs\n");
        } else if (!strcmp(name, "test") || !strcmp(name, "valid") || !strcmp(name, "train") || !strcmp(name, "all")) {
            part = name[0] == 't' ? (name[1] == 'e' ? DS_TEST : DS_TRAIN) : name[0] == 'v' ? DS_VALID : DS_ALL;
        } else {
            rc = usage_error(c, "--split: expected test, valid, train or all, got '%s'", name);
        }
    }
    zoo_eval_result r;
    if (!rc && zoo_evaluate(l.m, l.t, l.sv, l.tv, d, part, o.num_steps, &r)) rc = fail(c, ag_last_error());
    if (!rc)
        printf("corpus BLEU-4 %.2f, chrF %.2f, mean d2l BLEU %.3f on %lld %s sentences\n", r.bleu4, r.chrf,
               r.d2l_bleu, (long long)r.sentences, name);
    ds_fra_free(d);
    unload(&l);
    return rc;
}

/* ---- stats ---- */

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static int cmd_stats(cli *c) {
    ds_fra_options o = data_options(c);
    ds_fra *d = NULL;
    int rc = load_data(c, &o, &d);
    if (rc) return rc;
    const ds_fra_stats *st = ds_fra_get_stats(d);
    int64_t n = ds_fra_num_pairs(d);
    printf("lines read %lld, pairs %lld, skipped %lld (no tab) + %lld (several tabs)\n", (long long)st->lines,
           (long long)n, (long long)st->skipped_no_tab, (long long)st->skipped_many_tabs);
    printf("vocabulary: source %d tokens, target %d tokens (min_freq %lld)\n",
           ds_vocab_size(ds_fra_vocab(d, DS_SRC)), ds_vocab_size(ds_fra_vocab(d, DS_TGT)), (long long)o.min_freq);
    enum { BINS = 21 };
    double hist[2][BINS] = {{0}};
    int *lens = malloc(sizeof *lens * (size_t)(n ? n : 1));
    if (!lens) {
        ds_fra_free(d);
        return fail(c, "out of memory");
    }
    const char *side_name[2] = {"source", "target"};
    for (int s = 0; s < 2; s++) {
        double sum = 0;
        for (int64_t p = 0; p < n; p++) {
            lens[p] = ds_fra_sentence_len(d, (ds_side)s, p);
            sum += lens[p];
            hist[s][lens[p] < BINS - 1 ? lens[p] : BINS - 1]++;
        }
        qsort(lens, (size_t)n, sizeof *lens, cmp_int);
        printf("%s tokens per sentence: mean %.2f, median %d, 90th percentile %d, max %d; %lld of %lld "
               "truncated to %d steps\n", side_name[s], n ? sum / (double)n : 0, n ? lens[n / 2] : 0,
               n ? lens[(int64_t)(0.9 * (double)(n - 1))] : 0, n ? lens[n - 1] : 0,
               (long long)st->truncated[s], (long long)n, o.num_steps);
    }
    free(lens);
    if (c->a.plots) {
        char path[4096], labels[BINS][8];
        const char *bl[BINS];
        for (int b = 0; b < BINS; b++) {
            snprintf(labels[b], sizeof labels[b], b == BINS - 1 ? "%d+" : "%d", b);
            bl[b] = labels[b];
        }
        snprintf(path, sizeof path, "%s/lengths.svg", c->a.plots);
        const double *counts[2] = {hist[0], hist[1]};
        if (mkdir_p(c->a.plots) ||
            zoo_svg_histogram(path, "tokens per sentence", "# tokens per sequence", "count", 2, side_name,
                              counts, BINS, bl))
            rc = fail(c, ag_last_error());
        else
            printf("plot: %s\n", path);
    }
    ds_fra_free(d);
    return rc;
}

/* ---- export ---- */

static int cmd_export(cli *c) {
    if (!c->a.out || !c->a.src_vocab || !c->a.tgt_vocab)
        return usage_error(c, "--out, --src-vocab and --tgt-vocab are required");
    loaded l;
    int rc = load(c, &l);
    if (rc) return rc;
    nn_ckpt *plain = nn_ckpt_new();
    if (!plain || nn_ckpt_add_params(plain, l.m->ps) || nn_ckpt_save(plain, c->a.out))
        rc = fail(c, ag_last_error());
    if (!rc && (ds_vocab_save(l.sv, c->a.src_vocab) || ds_vocab_save(l.tv, c->a.tgt_vocab))) rc = fail(c, ag_last_error());
    if (!rc) printf("state_dict: %s (%zu tensors); vocabularies: %s, %s\n", c->a.out, nn_ckpt_count(plain),
                    c->a.src_vocab, c->a.tgt_vocab);
    nn_ckpt_free(plain);
    unload(&l);
    return rc;
}

/* ---- main ---- */

int zoo_cli_main(const zoo_model_kind *kind, int argc, char **argv) {
    static const struct { const char *name; char letter; int (*run)(cli *); } cmds[] = {
        {"train", 't', cmd_train}, {"translate", 'r', cmd_translate}, {"eval", 'e', cmd_eval},
        {"stats", 's', cmd_stats}, {"export", 'x', cmd_export}};
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: %s train|translate|eval|stats|export [flags]   (%s SUBCOMMAND --help for its flags)\n",
               kind->program, kind->program);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        cli c = {.kind = kind, .cmd = cmds[i].name, .letter = cmds[i].letter};
        ds_fra_options def = ds_fra_defaults();
        c.a = (args){.epochs = kind->epochs, .num_examples = def.num_examples, .batch_size = def.batch_size,
                     .num_steps = def.num_steps, .min_freq = def.min_freq, .lr = kind->lr, .seed = 0,
                     .threads = 1, .shards = 2, .log_every = 10, .beam = 1, .alpha = 0, .hp = kind->hparams};
        int rc = parse(&c, argc - 2, argv + 2);
        if (rc) return rc < 0 ? 0 : rc;
        if (ag_set_threads(c.a.threads)) return fail(&c, ag_last_error());
        rc = cmds[i].run(&c);
        ag_set_threads(1); /* joins the workers */
        return rc;
    }
    fprintf(stderr, "%s: unknown sub-command '%s' (train, translate, eval, stats, export)\n", kind->program, argv[1]);
    return EXIT_USAGE;
}
