/* cli.c -- train / translate / eval / stats for any zoo model kind. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/common.h"
#include "datasets/metrics.h"
#include "zoo/app/plot.h"
#include "zoo/app/decode.h"
#include "zoo/app/dist.h"
#include "zoo/app/trainer.h"

#ifndef TG_SOURCE_DIR
#define TG_SOURCE_DIR NULL
#endif

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* ---- flags ----
 * The program's own flags are one table of typed fields over `args` (zoo/models/config.h), plus
 * the model's config fields (its kind's table) over a config struct. Defaults are set in one
 * place each: init_args (from ds_fra_defaults and the kind for the data and training flags) and
 * the kind's default config; --help prints them from there. */

typedef struct args {
    const char *data, *checkpoint, *plots, *src_vocab, *tgt_vocab, *split, *out, *preset,
        *best_checkpoint;
    int epochs, threads, shards, checkpoint_every, log_every, beam, patience;
    int64_t max_steps, checkpoint_steps, log_steps, valid_steps;
    double lr, alpha, time_budget, checkpoint_minutes;
    int resume, allow_nonfinite;
    ds_fra_options o; /* the data flags: their table is zoo_data_fields (trainer.h) */
    zoo_recipe r;     /* the recipe flags: their table is zoo_recipe_fields (trainer.h) */
    void *hp;         /* the model's config (kind->config_size bytes), malloc'd */
} args;

typedef struct flag {
    zoo_field f;      /* over args */
    const char *cmds; /* t(rain) r (translate) e(val) s(tats) (e)x(port) */
} flag;

#define A(field) offsetof(args, field)
static const flag FLAGS[] = {
    {{"data", ZOO_STR, A(data), 0, 0, "path of fra.txt (default: see docs/datasets.md)"}, "tes"},
    {{"epochs", ZOO_INT, A(epochs), 1, 1e6, "epochs of the whole run"}, "t"},
    {{"lr", ZOO_REAL, A(lr), 0, 10, "Adam's learning rate"}, "t"},
    {{"threads", ZOO_INT, A(threads), 1, 256,
      "threads the engine may use; results do not depend on it (unless given: train one per "
      "shard, translate and eval one per core)"},
     "tre"},
    {{"shards", ZOO_INT, A(shards), 1, 64,
      "parts of each batch that run in parallel, their gradients summed (results depend on it)"},
     "t"},
    {{"checkpoint", ZOO_STR, A(checkpoint), 0, 0,
      "checkpoint to write (train; default PROGRAM.safetensors) or read"},
     "trex"},
    {{"checkpoint-every", ZOO_INT, A(checkpoint_every), 0, 1e6,
      "also checkpoint every N epochs (0: at the end only)"},
     "t"},
    {{"checkpoint-steps", ZOO_I64, A(checkpoint_steps), 0, 1e12,
      "also checkpoint every N steps (0: none)"},
     "t"},
    {{"checkpoint-minutes", ZOO_REAL, A(checkpoint_minutes), 0, 1e6,
      "also checkpoint every M minutes of training (0: none)"},
     "t"},
    {{"max-steps", ZOO_I64, A(max_steps), 1, 1e12,
      "stop, save and report after N steps of the whole run (default: none)"},
     "t"},
    {{"time-budget", ZOO_REAL, A(time_budget), 0.001, 1e9,
      "stop, save and report after S seconds of training (default: none)"},
     "t"},
    {{"log-steps", ZOO_I64, A(log_steps), 0, 1e12,
      "also a progress line every N steps: step, epoch, loss, lr, tokens/sec, elapsed, remaining "
      "(0: none)"},
     "t"},
    {{"valid-steps", ZOO_I64, A(valid_steps), 0, 1e12,
      "validate every N steps and at the end: loss and corpus BLEU-4 (greedy) on the "
      "--valid-frac split, in the log, the checkpoint and the plots (0: never)"},
     "t"},
    {{"best-checkpoint", ZOO_STR, A(best_checkpoint), 0, 0,
      "with --valid-steps: where the run is saved at each new best BLEU (default: the "
      "checkpoint's name with .best before .safetensors)"},
     "t"},
    {{"patience", ZOO_INT, A(patience), 0, 1e6,
      "with --valid-steps: stop after N validations without a better BLEU (0: never)"},
     "t"},
    {{"preset", ZOO_STR, A(preset), 0, 0,
      "full: the whole-corpus recipe (docs/zoo.md); flags given as well override its values"},
     "t"},
    {{"resume", ZOO_SWITCH, A(resume), 0, 1, "continue the run saved in --checkpoint"}, "t"},
    {{"plots", ZOO_STR, A(plots), 0, 0, "directory for the plots"}, "ts"},
    {{"log-every", ZOO_INT, A(log_every), 0, 1e6, "epochs between progress lines (0: none)"}, "t"},
    {{"beam", ZOO_INT, A(beam), 1, 1000, "beam size (1: greedy, as d2l)"}, "r"},
    {{"alpha", ZOO_REAL, A(alpha), 0, 10, "beam search length penalty ((5+len)/6)^alpha"}, "r"},
    {{"src-vocab", ZOO_STR, A(src_vocab), 0, 0,
      "source vocabulary file (one token per line) of a plain state_dict"},
     "rex"},
    {{"tgt-vocab", ZOO_STR, A(tgt_vocab), 0, 0,
      "target vocabulary file (one token per line) of a plain state_dict"},
     "rex"},
    {{"split", ZOO_STR, A(split), 0, 0, "test | valid | train | all (default: test if any)"}, "e"},
    {{"out", ZOO_STR, A(out), 0, 0, "plain state_dict file to write (safetensors, no metadata)"},
     "x"},
    {{"allow-nonfinite", ZOO_SWITCH, A(allow_nonfinite), 0, 1,
      "load a checkpoint with NaN or infinite weights anyway (to inspect it)"},
     "rex"},
};
#define N_FLAGS (sizeof FLAGS / sizeof *FLAGS)
#define MAX_CONFIG 32 /* fields of a model's config */

/* The sub-commands taking each data flag (zoo_data_fields, in its order). */
static const char *const DATA_CMDS[] = {"tes", "ts", "tres", "ts", "t", "tes", "tes", "tes", "ts"};
#define N_DATA (sizeof DATA_CMDS / sizeof *DATA_CMDS)
#define N_RECIPE 7 /* zoo_n_recipe_fields: the recipe flags, train only */

typedef struct cli {
    const zoo_model_kind *kind;
    const char *cmd;
    char letter;
    args a;
    bool given[N_FLAGS + N_DATA + N_RECIPE + MAX_CONFIG]; /* program, data, recipe, config */
    int n_pos;
    char **pos;
    zoo_dist *dist; /* the processes of a train run (dist.h); one for every other command */
} cli;

/* The defaults of every flag, in one place: the data options' own defaults, the kind's trainer
 * defaults and config, and the program's. a->hp is malloc'd (NULL when out of memory). */
static void init_args(args *a, const zoo_model_kind *kind) {
    *a = (args){.epochs = kind->epochs,
                .lr = kind->lr,
                .o = ds_fra_defaults(),
                .r = zoo_recipe_d2l,
                .threads = 1,
                .shards = 2,
                .log_every = 10,
                .beam = 1,
                .alpha = 0};
    a->hp = malloc(kind->config_size);
    if (a->hp) memcpy(a->hp, kind->defaults, kind->config_size);
}

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
static bool config_applies(const cli *c) { return c->letter != 's' && c->letter != 'x'; }

static void print_field(const zoo_field *f, const void *defaults) {
    char def[64];
    if (f->type == ZOO_SWITCH ||
        (f->type == ZOO_STR && !*(const char *const *)((const char *)defaults + f->offset)))
        printf("  --%-20s %s\n", f->name, f->help);
    else
        printf("  --%-20s %s (default %s)\n", f->name, f->help,
               zoo_field_format(f, defaults, def, sizeof def));
}

static void help(const cli *c) {
    static const char *what[] = {
        "train",
        "train on the English-French data, report loss and tokens/sec, "
        "translate the book's four sentences, write the checkpoint",
        "translate",
        "translate SENTENCE... (or each line of stdin) with a checkpoint",
        "eval",
        "corpus BLEU-4, chrF and mean d2l BLEU of a checkpoint on a split",
        "stats",
        "pairs, vocabulary sizes, sentence lengths and the length histogram",
        "export",
        "write a checkpoint as a plain state_dict (--out) and its vocabularies "
        "(--src-vocab, --tgt-vocab), for PyTorch"};
    for (int i = 0; i < 10; i += 2)
        if (!strcmp(what[i], c->cmd))
            printf("usage: %s %s [flags]%s\n  %s\n\nflags:\n", c->kind->program, c->cmd,
                   c->letter == 'r' ? " [SENTENCE ...]" : "", what[i + 1]);
    for (size_t i = 0; i < N_FLAGS; i++)
        if (takes(c, &FLAGS[i])) print_field(&FLAGS[i].f, &c->a);
    for (size_t i = 0; i < N_DATA; i++)
        if (strchr(DATA_CMDS[i], c->letter)) print_field(&zoo_data_fields[i], &c->a.o);
    for (int i = 0; i < zoo_n_recipe_fields && c->letter == 't'; i++)
        print_field(&zoo_recipe_fields[i], &c->a.r);
    if (config_applies(c)) {
        printf("\n%s config%s:\n", c->kind->name,
               c->letter == 't'
                   ? ""
                   : " (for a plain state_dict; a tapegrad checkpoint carries its own)");
        for (int i = 0; i < c->kind->n_config; i++)
            print_field(&c->kind->config[i], c->kind->defaults);
    }
}

/* ---- presets ----
 * A preset is a list of flags for one model kind, applied before the command line (whose flags
 * override it) and counted as given. Why each value: docs/zoo.md, "The whole corpus". */
static const struct {
    const char *kind, *name, *flags;
} PRESETS[] = {
    {"transformer", "full",
     "--num-examples 0 --valid-frac 0.01197 --test-frac 0.01197 --split-seed 1 "
     "--num-steps 20 --batch-tokens 4096 "
     "--hiddens 256 --ffn-hiddens 1024 --heads 8 --layers 3 --dropout 0.1 "
     "--d2l-step-positions 0 --embed-std 0.0625 "
     "--lr 0.001 --beta2 0.98 --lr-schedule invsqrt --warmup-steps 400 --label-smoothing 0.1 "
     "--epochs 1000 --time-budget 3600 --valid-steps 250 --log-steps 50 --log-every 1 "
     "--checkpoint-minutes 10"},
};

static int parse(cli *c, int argc, char **argv);

/* Applies the preset named by --preset NAME (or --preset=NAME) in argv, if any. Returns 0 or
 * EXIT_USAGE. */
static int apply_preset(cli *c, int argc, char **argv) {
    const char *name = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) name = argv[i + 1];
        else if (!strncmp(argv[i], "--preset=", 9)) name = argv[i] + 9;
    }
    if (!name || c->letter != 't') return 0;
    for (size_t k = 0; k < sizeof PRESETS / sizeof *PRESETS; k++) {
        if (strcmp(PRESETS[k].kind, c->kind->name) || strcmp(PRESETS[k].name, name)) continue;
        char buf[1024], *words[64], *save = NULL;
        int n = 0;
        snprintf(buf, sizeof buf, "%s", PRESETS[k].flags);
        for (char *w = strtok_r(buf, " ", &save); w && n < 64; w = strtok_r(NULL, " ", &save))
            words[n++] = w;
        return parse(c, n, words);
    }
    return usage_error(c, "--preset %s: no such preset for %s (%s)", name, c->kind->program,
                       strcmp(c->kind->name, "transformer") ? "it has none" : "full");
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
        char name[64], what[80];
        const char *eq = strchr(arg, '='), *value = NULL;
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (len >= sizeof name) return usage_error(c, "unknown flag %s", arg);
        memcpy(name, arg + 2, len);
        name[len] = '\0';
        /* a program flag (over c->a) or a config field (over c->a.hp) */
        const zoo_field *f = NULL;
        void *obj = &c->a;
        size_t idx = 0;
        for (size_t k = 0; k < N_FLAGS && !f; k++)
            if (!strcmp(FLAGS[k].f.name, name) && takes(c, &FLAGS[k])) f = &FLAGS[idx = k].f;
        for (size_t k = 0; k < N_DATA && !f; k++)
            if (!strcmp(zoo_data_fields[k].name, name) && strchr(DATA_CMDS[k], c->letter)) {
                f = &zoo_data_fields[k];
                obj = &c->a.o;
                idx = N_FLAGS + k;
            }
        if (!f && c->letter == 't' &&
            (f = zoo_field_find(zoo_recipe_fields, zoo_n_recipe_fields, name))) {
            obj = &c->a.r;
            idx = N_FLAGS + N_DATA + (size_t)(f - zoo_recipe_fields);
        }
        if (!f && config_applies(c) &&
            (f = zoo_field_find(c->kind->config, c->kind->n_config, name))) {
            obj = c->a.hp;
            idx = N_FLAGS + N_DATA + N_RECIPE + (size_t)(f - c->kind->config);
        }
        if (!f) return usage_error(c, "unknown flag --%s", name);
        if (f->type == ZOO_SWITCH) {
            if (eq) return usage_error(c, "--%s takes no value", name);
        } else {
            value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!value) return usage_error(c, "--%s needs a value", name);
        }
        snprintf(what, sizeof what, "--%s", name);
        if (zoo_field_parse(f, obj, value, what)) return usage_error(c, "%s", ag_last_error());
        c->given[idx] = true;
    }
    return 0;
}

static bool given(const cli *c, const char *name) {
    for (size_t k = 0; k < N_FLAGS; k++)
        if (!strcmp(FLAGS[k].f.name, name)) return c->given[k];
    for (size_t k = 0; k < N_DATA; k++)
        if (!strcmp(zoo_data_fields[k].name, name)) return c->given[N_FLAGS + k];
    for (int k = 0; k < zoo_n_recipe_fields; k++)
        if (!strcmp(zoo_recipe_fields[k].name, name)) return c->given[N_FLAGS + N_DATA + k];
    for (int k = 0; k < c->kind->n_config; k++)
        if (!strcmp(c->kind->config[k].name, name))
            return c->given[N_FLAGS + N_DATA + N_RECIPE + k];
    return false;
}

/* ---- shared steps ---- */

/* Creates dir and its parents; an existing path must be a directory. 0 or -1 (ag_last_error). */
static int mkdir_p(const char *dir) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return ag_error("%s: path too long", dir);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char keep = *p;
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return ag_error("%s: cannot create: %s", buf, strerror(errno));
            *p = keep;
            if (!keep) break;
        }
    }
    struct stat st;
    if (stat(dir, &st)) return ag_error("%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return ag_error("%s: exists and is not a directory", dir);
    if (access(dir, W_OK)) return ag_error("%s: cannot write into it: %s", dir, strerror(errno));
    return 0;
}

/* An output file the program will write at path: an existing path must be a regular file (or a
 * link to one) and the folder that will hold it must exist and be writable. Checked before any
 * work starts, so a long run never ends unable to save. 0 or -1 (ag_last_error). */
static int check_output_file(const char *what, const char *path) {
    struct stat st;
    if (!stat(path, &st) && !S_ISREG(st.st_mode))
        return ag_error("%s %s: exists and is not a regular file", what, path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return ag_error("%s %s: its folder %s does not exist", what, path, dir);
    if (access(dir, W_OK))
        return ag_error("%s %s: cannot write into %s: %s", what, path, dir, strerror(errno));
    return 0;
}

/* True when a and b name the same file: the same inode when both exist, else the same text. */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!stat(a, &sa) && !stat(b, &sb)) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return !strcmp(a, b);
}

static int load_data(const cli *c, const ds_fra_options *o, ds_fra **d) {
    char path[4096];
    if (ds_resolve_data_path(c->a.data, TG_SOURCE_DIR, path, sizeof path) ||
        ds_fra_load(path, o, d))
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
    } else if (nn_ckpt_load_with(&l->ck, c->a.checkpoint,
                                 &(nn_ckpt_load_opts){.allow_nonfinite = c->a.allow_nonfinite}) ||
               (nn_ckpt_meta(l->ck, "tapegrad.model")
                    ? zoo_ckpt_load_model(l->ck, c->kind, &l->m, &l->sv, &l->tv)
                    : zoo_ckpt_import_state_dict(l->ck, c->kind, c->a.hp, c->a.src_vocab,
                                                 c->a.tgt_vocab, &l->m, &l->sv, &l->tv))) {
        rc = fail(c, ag_last_error());
    }
    if (rc) unload(l);
    return rc;
}

/* The data options a checkpoint's run used (data.* metadata, read strictly), for the data flags
 * named in `names` that the command line did not give; the others come from the flags (or
 * their defaults). 0, or an exit status after the message. */
static int run_options(const cli *c, const nn_ckpt *ck, const char *const *names, int n,
                       ds_fra_options *o) {
    bool only[N_DATA] = {false};
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < N_DATA; k++)
            if (!strcmp(zoo_data_fields[k].name, names[i]) && !c->given[N_FLAGS + k])
                only[k] = true;
    *o = c->a.o;
    return zoo_data_meta_read(ck, o, only) ? fail(c, ag_last_error()) : 0;
}

/* Refuses a sequence length the model cannot run (before any work). 0 or an exit status. */
static int check_steps(const cli *c, const void *cfg, int num_steps) {
    if (c->kind->check_steps && c->kind->check_steps(cfg, num_steps))
        return usage_error(c, "%s", ag_last_error());
    return 0;
}

/* ---- train ---- */

/* The signal that asked a training run to stop (0: none). */
static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }

static const char *const ENGS[4] = {"go .", "i lost .", "he's calm .", "i'm home ."};
static const char *const FRAS[4] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};

/* Under several processes: every rank's run must be the same (dist.h). 0 or the exit status
 * of every rank. */
static int check_ranks(const cli *c, const zoo_trainer *tr, const ds_fra *d) {
    bool report = false;
    if (zoo_dist_size(c->dist) == 1) return zoo_dist_check_start(c->dist, 0, NULL, &report);
    char extra[192];
    snprintf(extra, sizeof extra,
             "--epochs %d\n--max-steps %lld\n--valid-steps %lld\n--patience %d\n", c->a.epochs,
             (long long)c->a.max_steps, (long long)c->a.valid_steps, c->a.patience);
    char *text = zoo_dist_run_text(tr, d, extra);
    int rc = zoo_dist_check_start(c->dist, text ? 0 : fail(c, ag_last_error()), text, &report);
    zoo_dist_write_held(c->dist, stderr);
    free(text);
    if (report) fail(c, ag_last_error());
    return rc;
}

static int cmd_train(cli *c) {
    zoo_trainer *tr = NULL;
    ds_fra *d = NULL;
    ds_batches *it = NULL;
    ds_fra_options o = c->a.o;
    int rc = 0;
    bool rank0 = zoo_dist_rank(c->dist) == 0; /* alone prints and writes files */
    char ckpath[4096];
    if (!given(c, "checkpoint"))
        snprintf(ckpath, sizeof ckpath, "%s.safetensors", c->kind->program);
    else snprintf(ckpath, sizeof ckpath, "%s", c->a.checkpoint);
    char best[4200] = "";
    if ((given(c, "patience") || given(c, "best-checkpoint")) && !c->a.valid_steps)
        return usage_error(c, "--patience and --best-checkpoint need --valid-steps");
    if (c->a.valid_steps && c->a.best_checkpoint) {
        snprintf(best, sizeof best, "%s", c->a.best_checkpoint);
    } else if (c->a.valid_steps) { /* NAME.safetensors -> NAME.best.safetensors */
        size_t n = strlen(ckpath), ext = strlen(".safetensors");
        if (n > ext && !strcmp(ckpath + n - ext, ".safetensors"))
            snprintf(best, sizeof best, "%.*s.best.safetensors", (int)(n - ext), ckpath);
        else snprintf(best, sizeof best, "%s.best", ckpath);
    }
    if (rank0 && (check_output_file("--checkpoint", ckpath) ||
                  (*best && check_output_file("--best-checkpoint", best)) ||
                  (c->a.plots && mkdir_p(c->a.plots))))
        return usage_error(c, "%s", ag_last_error());
    if (*best && same_file(best, ckpath))
        return usage_error(c, "--best-checkpoint and --checkpoint name the same file (%s)", best);
    if (c->a.resume) {
        tr = zoo_trainer_resume_dist(ckpath, c->kind, c->dist, &o);
        if (!tr) return fail(c, ag_last_error());
        /* what the checkpoint fixes may be given again, with the same value only */
        char a[64], b[64];
        for (size_t k = 0; k < N_DATA; k++)
            if (c->given[N_FLAGS + k] &&
                strcmp(zoo_field_format(&zoo_data_fields[k], &c->a.o, a, sizeof a),
                       zoo_field_format(&zoo_data_fields[k], &o, b, sizeof b))) {
                rc = usage_error(
                    c, "--%s %s differs from the checkpoint's %s: it cannot change on --resume",
                    zoo_data_fields[k].name, a, b);
                goto done;
            }
        for (int k = 0; k < zoo_n_recipe_fields; k++)
            if (c->given[N_FLAGS + N_DATA + k] &&
                strcmp(zoo_field_format(&zoo_recipe_fields[k], &c->a.r, a, sizeof a),
                       zoo_field_format(&zoo_recipe_fields[k], &tr->recipe, b, sizeof b))) {
                rc = usage_error(
                    c, "--%s %s differs from the checkpoint's %s: it cannot change on --resume",
                    zoo_recipe_fields[k].name, a, b);
                goto done;
            }
        for (int k = 0; k < c->kind->n_config; k++)
            if (c->given[N_FLAGS + N_DATA + N_RECIPE + k] &&
                strcmp(zoo_field_format(&c->kind->config[k], c->a.hp, a, sizeof a),
                       zoo_field_format(&c->kind->config[k], tr->model->cfg, b, sizeof b))) {
                rc = usage_error(
                    c, "--%s %s differs from the checkpoint's %s: it cannot change on --resume",
                    c->kind->config[k].name, a, b);
                goto done;
            }
        if ((given(c, "lr") && c->a.lr != optim_config(tr->opt)->lr) ||
            (given(c, "shards") && c->a.shards != tr->shards)) {
            rc = usage_error(
                c, "--lr and --shards cannot change on --resume (the checkpoint has %g and %d%s)",
                optim_config(tr->opt)->lr, tr->shards,
                zoo_dist_size(c->dist) > 1 ? " per rank" : "");
            goto done;
        }
        if ((rc = check_steps(c, tr->model->cfg, o.num_steps)) || (rc = load_data(c, &o, &d)))
            goto done;
        if (zoo_trainer_check_data(tr, d)) {
            rc = fail(c, ag_last_error());
            goto done;
        }
        fprintf(stderr, "resuming %s at step %lld (epoch %d, batch %d)\n", ckpath,
                (long long)tr->steps, tr->epochs_done + 1, tr->epoch_batches);
    } else {
        if ((rc = check_steps(c, c->a.hp, o.num_steps)) || (rc = load_data(c, &o, &d))) goto done;
        zoo_model *m = zoo_model_new(c->kind, c->a.hp, ds_vocab_size(ds_fra_vocab(d, DS_SRC)),
                                     ds_vocab_size(ds_fra_vocab(d, DS_TGT)), c->a.o.seed);
        tr = m ? zoo_trainer_new(m, c->a.lr, 1.0, c->a.o.seed + 1) : NULL;
        if (!tr || zoo_trainer_set_dist(tr, c->dist) || zoo_trainer_set_shards(tr, c->a.shards)) {
            rc = fail(c, ag_last_error());
            goto done;
        }
        bool recipe_given = false;
        for (int k = 0; k < zoo_n_recipe_fields; k++)
            recipe_given |= c->given[N_FLAGS + N_DATA + k];
        if (recipe_given && zoo_trainer_set_recipe(tr, &c->a.r)) {
            rc = usage_error(c, "%s", ag_last_error());
            goto done;
        }
    }
    if (c->a.valid_steps && !ds_fra_part_size(d, DS_VALID)) {
        rc = usage_error(c,
                         "--valid-steps %lld: the validation split is empty (--valid-frac %g of "
                         "%lld pairs); give a --valid-frac that holds at least one pair",
                         (long long)c->a.valid_steps, o.valid_frac, (long long)ds_fra_num_pairs(d));
        goto done;
    }
    if (!given(c, "threads")) { /* one per shard, up to the cores (shared by a machine's ranks) */
        long cores = sysconf(_SC_NPROCESSORS_ONLN) / zoo_dist_local_size(c->dist);
        if (ag_set_threads(tr->shards < cores ? tr->shards : cores > 1 ? (int)cores : 1)) {
            rc = fail(c, ag_last_error());
            goto done;
        }
    }
    if (ds_batches_new(d, DS_TRAIN, true, &it)) {
        rc = o.batch_tokens ? usage_error(c, "--batch-tokens: %s", ag_last_error())
                            : fail(c, ag_last_error());
        goto done;
    }
    zoo_train_opts to = {.epochs = c->a.epochs,
                         .max_steps = c->a.max_steps,
                         .time_budget = c->a.time_budget,
                         .checkpoint = rank0 ? ckpath : NULL,
                         .checkpoint_every = c->a.checkpoint_every,
                         .checkpoint_steps = c->a.checkpoint_steps,
                         .checkpoint_minutes = c->a.checkpoint_minutes,
                         .plots_dir = rank0 ? c->a.plots : NULL,
                         .log_every = c->a.log_every,
                         .log_steps = c->a.log_steps,
                         .log = rank0 ? stderr : NULL,
                         .stop = &stop_signal,
                         .valid_steps = c->a.valid_steps,
                         .best_checkpoint = rank0 && *best ? best : NULL,
                         .patience = c->a.patience};
    if (tr->epochs_done >= to.epochs) {
        rc = usage_error(c, "the checkpoint has %d epochs already; give --epochs above it",
                         tr->epochs_done);
        goto done;
    }
    if (c->a.max_steps && tr->steps >= c->a.max_steps) {
        rc = usage_error(c, "the checkpoint has %lld steps already; give --max-steps above it",
                         (long long)tr->steps);
        goto done;
    }
    if ((rc = check_ranks(c, tr, d))) goto done;
    /* SIGINT / SIGTERM: finish the step, save, exit 130 / 143 */
    struct sigaction sa = {.sa_handler = on_stop_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    double seconds = zoo_trainer_seconds(tr);
    int trc = zoo_train(tr, d, it, &to);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (trc < 0) {
        rc = fail(c, ag_last_error());
        zoo_dist_abort(c->dist, rc); /* the other ranks may wait in a step: end them all */
        goto done;
    }
    if (trc == ZOO_TRAIN_STOPPED) {
        if (rank0)
            fprintf(stderr,
                    "%s %s: interrupted at step %lld (epoch %d, batch %d): checkpoint %s; "
                    "continue with --resume\n",
                    c->kind->program, c->cmd, (long long)tr->steps, tr->epochs_done + 1,
                    tr->epoch_batches, ckpath);
        rc = 128 + (int)(stop_signal ? stop_signal : SIGTERM); /* the signal of another rank */
        goto done;
    }
    if (!rank0) goto done;
    zoo_dist_report(c->dist, stderr, zoo_trainer_seconds(tr) - seconds);
    if (trc == ZOO_TRAIN_LIMIT || trc == ZOO_TRAIN_EARLY)
        printf("stopped at step %lld (epoch %d, batch %d) by %s; checkpoint %s (continue with "
               "--resume)\n",
               (long long)tr->steps, tr->epochs_done + 1, tr->epoch_batches,
               trc == ZOO_TRAIN_EARLY                          ? "--patience"
               : c->a.max_steps && tr->steps >= c->a.max_steps ? "--max-steps"
                                                               : "--time-budget",
               ckpath);
    if (tr->n_valid) {
        int b = 0;
        for (int i = 1; i < tr->n_valid; i++)
            if (tr->valid[i].bleu > tr->valid[b].bleu) b = i;
        printf("valid: BLEU-4 %.2f, loss %.4f at step %lld; best BLEU-4 %.2f at step %lld "
               "(%s)\n",
               tr->valid[tr->n_valid - 1].bleu, tr->valid[tr->n_valid - 1].loss,
               (long long)tr->valid[tr->n_valid - 1].step, tr->valid[b].bleu,
               (long long)tr->valid[b].step, best);
    }
    if (tr->epoch_batches) /* the epoch under way */
        printf("loss %.3f, %.1f tokens/sec (epoch %d so far)\n",
               tr->epoch_tokens ? tr->epoch_loss / tr->epoch_tokens : 0,
               tr->epoch_seconds > 0 ? tr->epoch_tokens / tr->epoch_seconds : 0,
               tr->epochs_done + 1);
    else
        printf("loss %.3f, %.1f tokens/sec\n", tr->hist[tr->n_hist - 1].loss,
               tr->hist[tr->n_hist - 1].tokens / tr->hist[tr->n_hist - 1].seconds);
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
        if (zoo_translate_attention(tr->model, tr->tape, sv, tv, ENGS[3], o.num_steps, &pred,
                                    &rec) ||
            zoo_attn_record_plot(&rec, c->a.plots, "attention")) {
            rc = fail(c, ag_last_error());
        } else {
            printf("plots: %s/loss.svg, %s/loss.csv, %s/attention_*.svg (\"%s\" => \"%s\")\n",
                   c->a.plots, c->a.plots, c->a.plots, ENGS[3], pred);
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

/* Translates the valid sentences of lines[0..n) in one batched call and prints every line's
 * translation in order (an empty line for a bad one, whose error was reported with its line
 * number: first_line is the number of lines[0]). Returns 0, or -1 after printing a line's or
 * the decoder's error. */
static int translate_lines(const cli *c, loaded *l, int steps, char **lines, int n, long first_line,
                           bool numbered) {
    char **outs = calloc((size_t)n, sizeof *outs);
    const char **ok = malloc(sizeof *ok * (size_t)n);
    bool *bad = calloc((size_t)n, sizeof *bad);
    int32_t *ids = malloc(sizeof *ids * (size_t)steps);
    int rc = 0, n_ok = 0;
    if (!outs || !ok || !bad || !ids) {
        fail(c, "out of memory");
        rc = -1;
    }
    for (int i = 0; i < n && rc >= 0;
         i++) { /* a line that cannot be encoded is reported, not fatal */
        int32_t len;
        if (ds_encode_sentence(l->sv, lines[i], steps, ids, &len)) {
            bad[i] = true;
            rc = 1;
            if (numbered)
                fprintf(stderr, "%s %s: line %ld: %s\n", c->kind->program, c->cmd, first_line + i,
                        ag_last_error());
            else
                fprintf(stderr, "%s %s: sentence %ld: %s\n", c->kind->program, c->cmd,
                        first_line + i, ag_last_error());
        } else {
            ok[n_ok++] = lines[i];
        }
    }
    if (rc >= 0 && n_ok &&
        zoo_translate_batch(l->m, l->t, l->sv, l->tv, ok, n_ok, steps, c->a.beam, c->a.alpha,
                            outs)) {
        fail(c, ag_last_error());
        rc = -1;
    }
    for (int i = 0, k = 0; i < n && rc >= 0; i++) printf("%s\n", bad[i] ? "" : outs[k++]);
    for (int i = 0; i < n_ok; i++) free(outs[i]);
    free(outs);
    free(ok);
    free(bad);
    free(ids);
    return rc < 0 ? -1 : rc;
}

/* Sentences from the command line, or every line of stdin, translated in batches. A line that
 * cannot be read (invalid UTF-8, a NUL) is reported with its number and printed as an empty
 * line; the others are translated, and the exit status is then 1. */
/* translate and eval without --threads: one per core (decoding shares its chunks of sentences
 * between them; decode.h). Returns 0, or the exit code after reporting. */
static int decode_threads(cli *c) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (given(c, "threads") || cores < 2) return 0;
    return ag_set_threads(cores < 256 ? (int)cores : 256) ? fail(c, ag_last_error()) : 0;
}

static int cmd_translate(cli *c) {
    loaded l;
    int rc = decode_threads(c);
    if (rc) return rc;
    rc = load(c, &l);
    if (rc) return rc;
    ds_fra_options o;
    if ((rc = run_options(c, l.ck, (const char *const[]){"num-steps"}, 1, &o))) {
        unload(&l);
        return rc;
    }
    int steps = o.num_steps;
    if ((rc = check_steps(c, l.m->cfg, steps))) {
        unload(&l);
        return rc;
    }
    bool any_bad = false;
    if (c->n_pos) {
        int r = translate_lines(c, &l, steps, c->pos, c->n_pos, 1, false);
        any_bad = r > 0;
        if (r < 0) rc = EXIT_RUNTIME;
    } else {
        /* stdin, in batches of ZOO_DECODE_ROWS lines (so a long stream starts printing early) */
        enum { BATCH = ZOO_DECODE_ROWS };
        char *lines[BATCH] = {0};
        size_t caps[BATCH] = {0};
        long line_no = 0;
        for (bool eof = false; !eof && !rc;) {
            int n = 0;
            while (n < BATCH) {
                ssize_t got = getline(&lines[n], &caps[n], stdin);
                if (got < 0) {
                    eof = true;
                    break;
                }
                while (got > 0 && (lines[n][got - 1] == '\n' || lines[n][got - 1] == '\r'))
                    lines[n][--got] = '\0';
                n++;
            }
            if (n) {
                int r = translate_lines(c, &l, steps, lines, n, line_no + 1, true);
                any_bad |= r > 0;
                if (r < 0) rc = EXIT_RUNTIME;
                fflush(stdout);
            }
            line_no += n;
        }
        if (ferror(stdin)) rc = fail(c, "reading standard input failed");
        for (int i = 0; i < BATCH; i++) free(lines[i]);
    }
    if (!rc && any_bad) rc = EXIT_RUNTIME;
    unload(&l);
    return rc;
}

/* ---- eval ---- */

static int cmd_eval(cli *c) {
    loaded l;
    int rc = decode_threads(c);
    if (rc) return rc;
    rc = load(c, &l);
    if (rc) return rc;
    nn_ckpt *ck = l.ck;
    ds_fra *d = NULL;
    ds_fra_options o;
    /* the run's data and split, unless a flag says otherwise */
    static const char *const run_data[] = {"num-examples", "split-seed", "min-freq",
                                           "valid-frac",   "test-frac",  "num-steps"};
    rc = run_options(c, ck, run_data, 6, &o);
    if (!rc) rc = check_steps(c, l.m->cfg, o.num_steps);
    if (!rc) rc = load_data(c, &o, &d);
    ds_part part = DS_TEST;
    const char *name = c->a.split;
    if (!rc) {
        if (!name) {
            part = ds_fra_part_size(d, DS_TEST)    ? DS_TEST
                   : ds_fra_part_size(d, DS_VALID) ? DS_VALID
                                                   : DS_TRAIN;
            name = part == DS_TEST ? "test" : part == DS_VALID ? "valid" : "train";
            if (part == DS_TRAIN)
                fprintf(stderr, "note: this data has no held-out split (give --test-frac): scoring "
                                "the training pairs\n");
        } else if (!strcmp(name, "test") || !strcmp(name, "valid") || !strcmp(name, "train") ||
                   !strcmp(name, "all")) {
            part = name[0] == 't'   ? (name[1] == 'e' ? DS_TEST : DS_TRAIN)
                   : name[0] == 'v' ? DS_VALID
                                    : DS_ALL;
        } else {
            rc = usage_error(c, "--split: expected test, valid, train or all, got '%s'", name);
        }
    }
    zoo_eval_result r;
    if (!rc && zoo_evaluate(l.m, l.t, l.sv, l.tv, d, part, o.num_steps, &r))
        rc = fail(c, ag_last_error());
    if (!rc)
        printf("corpus BLEU-4 %.2f, chrF %.2f, mean d2l BLEU %.3f on %lld %s sentences\n", r.bleu4,
               r.chrf, r.d2l_bleu, (long long)r.sentences, name);
    ds_fra_free(d);
    unload(&l);
    return rc;
}

/* ---- stats ---- */

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static int cmd_stats(cli *c) {
    ds_fra_options o = c->a.o;
    ds_fra *d = NULL;
    int rc = load_data(c, &o, &d);
    if (rc) return rc;
    const ds_fra_stats *st = ds_fra_get_stats(d);
    int64_t n = ds_fra_num_pairs(d);
    printf("lines read %lld, pairs %lld, skipped %lld (no tab) + %lld (several tabs)\n",
           (long long)st->lines, (long long)n, (long long)st->skipped_no_tab,
           (long long)st->skipped_many_tabs);
    printf("vocabulary: source %d tokens, target %d tokens (min_freq %lld)\n",
           ds_vocab_size(ds_fra_vocab(d, DS_SRC)), ds_vocab_size(ds_fra_vocab(d, DS_TGT)),
           (long long)o.min_freq);
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
        printf("%s tokens per sentence: mean %.2f, median %d, 90th percentile %d, max %d; %lld of "
               "%lld "
               "truncated to %d steps\n",
               side_name[s], n ? sum / (double)n : 0, n ? lens[n / 2] : 0,
               n ? lens[(int64_t)(0.9 * (double)(n - 1))] : 0, n ? lens[n - 1] : 0,
               (long long)st->truncated[s], (long long)n, o.num_steps);
    }
    free(lens);
    /* the training batches of an epoch: how much of what a step computes is padding */
    ds_batches *it = NULL;
    if (ds_batches_new(d, DS_TRAIN, false, &it)) {
        ds_fra_free(d);
        return o.batch_tokens ? usage_error(c, "--batch-tokens: %s", ag_last_error())
                              : fail(c, ag_last_error());
    }
    ds_batch b;
    double positions = 0, valid[2] = {0, 0}, rows = 0;
    while (ds_batches_next(it, &b)) {
        positions += (double)b.size * b.num_steps;
        rows += b.size;
        for (int r = 0; r < b.size; r++)
            valid[0] += b.src_valid_len[r], valid[1] += b.tgt_valid_len[r];
    }
    int64_t nb = ds_batches_count(it);
    printf("batches (%s): %lld per epoch, %.1f pairs and %.0f positions on average; padding: "
           "%.1f%% of the source and %.1f%% of the target positions\n",
           o.batch_tokens ? "--batch-tokens" : "--batch-size", (long long)nb, rows / (double)nb,
           positions / (double)nb, 100 * (1 - valid[0] / positions),
           100 * (1 - valid[1] / positions));
    ds_batches_free(it);
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
            zoo_svg_histogram(path, "tokens per sentence", "# tokens per sequence", "count", 2,
                              side_name, counts, BINS, bl))
            rc = fail(c, ag_last_error());
        else printf("plot: %s\n", path);
    }
    ds_fra_free(d);
    return rc;
}

/* ---- export ---- */

static int cmd_export(cli *c) {
    if (!c->a.out || !c->a.src_vocab || !c->a.tgt_vocab)
        return usage_error(c, "--out, --src-vocab and --tgt-vocab are required");
    const char *names[4] = {"--checkpoint", "--out", "--src-vocab", "--tgt-vocab"};
    const char *paths[4] = {c->a.checkpoint, c->a.out, c->a.src_vocab, c->a.tgt_vocab};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4 && paths[0]; j++)
            if (same_file(paths[i], paths[j]))
                return usage_error(
                    c,
                    "%s and %s name the same file (%s): an output never replaces an input "
                    "or another output",
                    names[i], names[j], paths[j]);
    for (int i = 1; i < 4; i++)
        if (check_output_file(names[i], paths[i])) return usage_error(c, "%s", ag_last_error());
    loaded l;
    int rc = load(c, &l);
    if (rc) return rc;
    nn_ckpt *plain = nn_ckpt_new();
    if (!plain || nn_ckpt_set_borrow(plain, true) || nn_ckpt_add_params(plain, l.m->ps) ||
        nn_ckpt_save(plain, c->a.out))
        rc = fail(c, ag_last_error());
    if (!rc && (ds_vocab_save(l.sv, c->a.src_vocab) || ds_vocab_save(l.tv, c->a.tgt_vocab)))
        rc = fail(c, ag_last_error());
    if (!rc)
        printf("state_dict: %s (%zu tensors); vocabularies: %s, %s\n", c->a.out,
               nn_ckpt_count(plain), c->a.src_vocab, c->a.tgt_vocab);
    nn_ckpt_free(plain);
    unload(&l);
    return rc;
}

/* ---- main ---- */

int zoo_cli_main(const zoo_model_kind *kind, int argc, char **argv) {
    return zoo_cli_main_dist(kind, NULL, argc, argv);
}

int zoo_cli_main_dist(const zoo_model_kind *kind, const struct zoo_dist_transport *transport,
                      int argc, char **argv) {
    static const struct {
        const char *name;
        char letter;
        int (*run)(cli *);
    } cmds[] = {{"train", 't', cmd_train},
                {"translate", 'r', cmd_translate},
                {"eval", 'e', cmd_eval},
                {"stats", 's', cmd_stats},
                {"export", 'x', cmd_export}};
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: %s train|translate|eval|stats|export [flags]   (%s SUBCOMMAND --help for "
               "its flags)\n",
               kind->program, kind->program);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        cli c = {.kind = kind, .cmd = cmds[i].name, .letter = cmds[i].letter};
        if (kind->n_config > MAX_CONFIG || zoo_n_recipe_fields != N_RECIPE ||
            zoo_n_data_fields != (int)N_DATA)
            return fail(&c, "the model's config has too many fields");
        /* under mpirun: train on every process, rank 0 alone printing (dist.h) */
        if (!(c.dist = zoo_dist_open(transport))) return fail(&c, ag_last_error());
        if (zoo_dist_size(c.dist) > 1 && c.letter != 't') {
            int rc = zoo_dist_rank(c.dist) ? EXIT_USAGE
                                           : usage_error(&c,
                                                         "%s runs in one process; run it "
                                                         "without mpirun (%d processes here)",
                                                         c.cmd, zoo_dist_size(c.dist));
            zoo_dist_close(c.dist);
            return rc;
        }
        if (zoo_dist_hold_output(c.dist)) {
            zoo_dist_close(c.dist);
            return fail(&c, ag_last_error());
        }
        init_args(&c.a, kind);
        int rc = c.a.hp ? apply_preset(&c, argc - 2, argv + 2) : fail(&c, "out of memory");
        if (!rc) rc = parse(&c, argc - 2, argv + 2);
        if (!rc && !ag_set_threads(c.a.threads)) {
            rc = cmds[i].run(&c);
            ag_set_threads(1); /* joins the workers */
        } else if (!rc) {
            rc = fail(&c, ag_last_error());
        }
        if (!zoo_dist_started(c.dist)) { /* a rank that failed before the check takes part */
            bool report;
            int all = zoo_dist_check_start(c.dist, rc > 0 ? rc : 0, NULL, &report);
            zoo_dist_write_held(c.dist, stderr);
            if (all && rc <= 0) rc = all;
        }
        free(c.a.hp);
        if (fflush(stdout) || ferror(stdout)) {
            /* a full disk or a closed pipe: what was printed is incomplete */
            fprintf(stderr, "%s %s: writing to standard output failed: %s\n", kind->program, c.cmd,
                    strerror(errno));
            if (rc <= 0) rc = EXIT_RUNTIME;
        }
        zoo_dist_close(c.dist);
        return rc < 0 ? 0 : rc;
    }
    fprintf(stderr, "%s: unknown sub-command '%s' (train, translate, eval, stats, export)\n",
            kind->program, argv[1]);
    return EXIT_USAGE;
}
