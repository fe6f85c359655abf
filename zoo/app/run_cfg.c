/* run_cfg.c -- the groups of a run's configuration and every loop over them (run_cfg.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/run_cfg_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/common.h"
#include "nn/quant.h"
#include "zoo/app/subword.h"

/* ---- the tables: one row per field ---- */

#define F(field) offsetof(zoo_files, field)
static const zoo_cfg_opt FILES[] = {
    {{"data", ZOO_STR, F(data), 0, 0, "path of fra.txt (default: see docs/datasets.md)", NULL},
     "tes"},
    {{"checkpoint", ZOO_STR, F(checkpoint), 0, 0,
      "checkpoint to write (train; default PROGRAM.safetensors) or read (average: the run whose "
      "kept copies --last takes)",
      NULL},
     "Trexa"},
    {{"best-checkpoint", ZOO_STR, F(best_checkpoint), 0, 0,
      "with --valid-steps: where the run is saved at each new best score (--valid-metric; "
      "default: the checkpoint's name with .best before .safetensors)",
      NULL},
     "T"},
    {{"plots", ZOO_STR, F(plots), 0, 0, "directory for the plots", NULL}, "TS"},
    {{"src-vocab", ZOO_STR, F(src_vocab), 0, 0,
      "source vocabulary file (one token per line) of a plain state_dict", NULL},
     "reX"},
    {{"tgt-vocab", ZOO_STR, F(tgt_vocab), 0, 0,
      "target vocabulary file (one token per line) of a plain state_dict", NULL},
     "reX"},
    {{"src-spm", ZOO_STR, F(src_spm), 0, 0,
      "export of a subword checkpoint: its source SentencePiece model file (spm_encode --model)",
      NULL},
     "X"},
    {{"tgt-spm", ZOO_STR, F(tgt_spm), 0, 0,
      "export of a subword checkpoint: its target SentencePiece model file (spm_decode --model)",
      NULL},
     "X"},
    {{"out", ZOO_STR, F(out), 0, 0,
      "file to write: export's plain state_dict (safetensors, no metadata), average's checkpoint, "
      "eval's translations (one line a sentence: source, reference, translation, tab-separated)",
      NULL},
     "XAE"},
};
#undef F

#define D(field) offsetof(ds_fra_options, field)
static const zoo_cfg_opt DATA[] = {
    {{"num-examples", ZOO_I64, D(num_examples), 0, 1e9, "lines 0..N of the file (0: all)", NULL},
     "tes"},
    {{"batch-size", ZOO_INT, D(batch_size), 1, 1e6, "sentence pairs per step", NULL}, "ts"},
    {{"num-steps", ZOO_INT, D(num_steps), 1, 1e4, "tokens per sentence (truncate / pad)", NULL},
     "tres"},
    {{"min-freq", ZOO_I64, D(min_freq), 0, 1e9, "vocabulary threshold", NULL}, "ts"},
    {{"seed", ZOO_U64, D(seed), 0, 18446744073709551615.0, "initialisation, dropout and shuffling",
      NULL},
     "t"},
    {{"valid-frac", ZOO_REAL, D(valid_frac), 0, DS_MAX_FRAC,
      "held-out validation fraction of the pairs", NULL},
     "tes"},
    {{"test-frac", ZOO_REAL, D(test_frac), 0, DS_MAX_FRAC, "held-out test fraction of the pairs",
      NULL},
     "tes"},
    {{"split-seed", ZOO_U64, D(split_seed), 0, 18446744073709551615.0, "seed of the held-out split",
      NULL},
     "tes"},
    {{"split-mode", ZOO_CHOICE, D(split_mode), 0, 0,
      "random: pairs drawn at random (test pairs may share their English side with training); "
      "disjoint: whole groups of pairs sharing an English or French sentence, no sentence on "
      "two sides (docs/datasets.md)",
      ds_split_mode_names},
     "tes"},
    {{"batch-tokens", ZOO_INT, D(batch_tokens), 0, 1e8,
      "batches of at most N tokens (rows x longest pair) over length-sorted pairs, instead of "
      "--batch-size rows (0: off)",
      NULL},
     "ts"},
};
#undef D

const char *const zoo_vocab_kind_names[] = {"word", "subword", NULL};
const char *const zoo_vocab_share_names[] = {"joint", "separate", NULL};

#define V(field) offsetof(zoo_vocab_opts, field)
static const zoo_cfg_opt VOCAB[] = {
    {{"vocab", ZOO_CHOICE, V(kind), 0, 0,
      "word: d2l's lowercase words (--min-freq); subword: cased SentencePiece units learned from "
      "the training pairs, kept in the checkpoint (docs/datasets.md)",
      zoo_vocab_kind_names},
     "t"},
    {{"vocab-size", ZOO_INT, V(size), ZOO_SPM_MIN_VOCAB, 1e6,
      "--vocab subword: pieces per model (at most)", NULL},
     "t"},
    {{"vocab-share", ZOO_CHOICE, V(share), 0, 0,
      "--vocab subword: one model for both languages, or one per language", zoo_vocab_share_names},
     "t"},
    {{"split-digits", ZOO_INT, V(split_digits), 0, 1,
      "--vocab subword: 1: every digit a piece of its own (a number spelled by its digits, not "
      "by the multi-digit pieces the corpus made)",
      NULL},
     "t"},
    {{"number-tags", ZOO_INT, V(number_tags), 0, 1,
      "--vocab subword: 1: the numbers a source shares with its translation as tags, copied "
      "back after translation (the model places a number, it does not spell it; "
      "docs/datasets.md)",
      NULL},
     "t"},
};
#undef V

const char *const zoo_split_names[] = {"auto", "test", "valid", "train", "all", NULL};

const char *const zoo_schedule_names[] = {"constant", "invsqrt", "cosine", "linear", NULL};

const char *const zoo_precision_names[] = {"fp32", "bf16", "auto", NULL};

#define R(field) offsetof(zoo_recipe, field)
static const zoo_cfg_opt RECIPE[] = {
    {{"lr", ZOO_REAL, R(lr), 0, 10, "Adam's learning rate", NULL}, "t"},
    {{"clip", ZOO_REAL, R(clip), 0, 1e6, "clip the gradients to this global norm (0: never)", NULL},
     "t"},
    {{"beta1", ZOO_REAL, R(beta1), 0, 0.9999, "Adam's beta1", NULL}, "t"},
    {{"beta2", ZOO_REAL, R(beta2), 0, 0.9999, "Adam's beta2 (0.98 in the Transformer papers)",
      NULL},
     "t"},
    {{"lr-schedule", ZOO_CHOICE, R(schedule), 0, 0,
      "the learning rate after a linear warm-up of --warmup-steps (invsqrt: lr sqrt(warmup / "
      "step); cosine, linear: down to --min-lr-ratio lr at --decay-steps)",
      zoo_schedule_names},
     "t"},
    {{"warmup-steps", ZOO_INT, R(warmup), 0, 1e9, "warm-up steps of the schedule", NULL}, "t"},
    {{"decay-steps", ZOO_I64, R(decay_steps), 0, 1e12,
      "cosine, linear: the step where the decay ends", NULL},
     "t"},
    {{"min-lr-ratio", ZOO_REAL, R(min_lr_ratio), 0, 1, "cosine, linear: final rate / rate", NULL},
     "t"},
    {{"label-smoothing", ZOO_REAL, R(label_smoothing), 0, 0.99,
      "label smoothing of the cross-entropy (PyTorch's definition)", NULL},
     "t"},
    {{"precision", ZOO_CHOICE, R(precision), 0, 0,
      "inputs of the products while training: fp32; bf16 with float32 sums (AMX, else "
      "AVX512-BF16; without either, float32 and a message); auto: bf16 where it is faster "
      "than fp32 (AMX tiles, AMD's AVX512-BF16), else fp32",
      zoo_precision_names},
     "t"},
    {{"valid-metric", ZOO_CHOICE, R(valid_metric), 0, 0,
      "with --valid-steps: the score that picks --best-checkpoint and counts --patience: bleu4 "
      "(d2l's lowercased tokens), sacrebleu (the standard score: cased, detokenized, against the "
      "raw references); auto: sacrebleu for --vocab subword, bleu4 for word",
      zoo_valid_metric_names},
     "t"},
};
#undef R

#define L(field) offsetof(zoo_train_opts, field)
static const zoo_cfg_opt LOOP[] = {
    {{"epochs", ZOO_INT, L(epochs), 1, 1e6, "epochs of the whole run", NULL}, "t"},
    {{"max-steps", ZOO_I64, L(max_steps), 0, 1e12,
      "stop, save and report after N steps of the whole run (0: no limit)", NULL},
     "t"},
    {{"time-budget", ZOO_REAL, L(time_budget), 0, 1e9,
      "stop, save and report after S seconds of training (0: no limit)", NULL},
     "t"},
    {{"fit-decay", ZOO_BOOL, L(fit_decay), 0, 1,
      "with --time-budget and --lr-schedule linear or cosine: at the end of the warm-up and "
      "after each validation, move --decay-steps to the last step the rest of the budget holds "
      "at the pace so far (at most --max-steps), and stop there",
      NULL},
     "t"},
    {{"checkpoint-every", ZOO_INT, L(checkpoint_every), 0, 1e6,
      "also checkpoint every N epochs (0: at the end only)", NULL},
     "t"},
    {{"checkpoint-steps", ZOO_I64, L(checkpoint_steps), 0, 1e12,
      "also checkpoint every N steps (0: none)", NULL},
     "t"},
    {{"checkpoint-minutes", ZOO_REAL, L(checkpoint_minutes), 0, 1e6,
      "also checkpoint every M minutes of training (0: none)", NULL},
     "t"},
    {{"keep-checkpoints", ZOO_INT, L(keep_checkpoints), 0, 1e6,
      "every periodic save also keeps a copy NAME.step<STEPS>.safetensors beside the checkpoint, "
      "the N most recent of the run (each a whole checkpoint; 0: none)",
      NULL},
     "t"},
    {{"log-every", ZOO_INT, L(log_every), 0, 1e6, "epochs between progress lines (0: none)", NULL},
     "t"},
    {{"log-steps", ZOO_I64, L(log_steps), 0, 1e12,
      "also a progress line every N steps: step, epoch, loss, lr, tokens/sec, elapsed, remaining "
      "(0: none)",
      NULL},
     "t"},
    {{"valid-steps", ZOO_I64, L(valid_steps), 0, 1e12,
      "validate every N steps and at the end: loss, corpus BLEU-4, sacreBLEU and chrF (greedy) "
      "on the --valid-frac split, in the log, the checkpoint and the plots (0: never)",
      NULL},
     "t"},
    {{"patience", ZOO_INT, L(patience), 0, 1e6,
      "with --valid-steps: stop after N validations without a better score (--valid-metric; 0: "
      "never)",
      NULL},
     "t"},
};
#undef L

#define X(field) offsetof(zoo_exec, field)
static const zoo_cfg_opt EXEC[] = {
    {{"threads", ZOO_INT, X(threads), 0, 256,
      "threads the engine may use; results do not depend on it (0: train one per shard, "
      "translate and eval one per core)",
      NULL},
     "tre"},
    {{"shards", ZOO_INT, X(shards), 1, 64,
      "parts of each batch that run in parallel, their gradients summed (results depend on it)",
      NULL},
     "ts"},
    {{"resume", ZOO_SWITCH, X(resume), 0, 1, "continue the run saved in --checkpoint", NULL}, "t"},
    {{"allow-nonfinite", ZOO_SWITCH, X(allow_nonfinite), 0, 1,
      "load a checkpoint with NaN or infinite weights anyway (to inspect it)", NULL},
     "rex"},
    {{"beam", ZOO_INT, X(beam), 1, 1000, "beam size (1: greedy, as d2l)", NULL}, "re"},
    {{"alpha", ZOO_REAL, X(alpha), 0, 10, "beam search length penalty ((5+len)/6)^alpha", NULL},
     "re"},
    {{"raw-output", ZOO_SWITCH, X(raw_output), 0, 1,
      "print the model's tokens as they are (word models: lowercase, spaced, <unk>; subword "
      "models: the pieces, spaced), not French text",
      NULL},
     "r"},
    {{"split", ZOO_CHOICE, X(split), 0, 0,
      "the part of the run's data to score (auto: test, else valid, else train)", zoo_split_names},
     "e"},
    {{"dist-timeout", ZOO_REAL, X(dist_timeout), 0, 1e6,
      "under mpirun: seconds a rank waits for the others in a collective before it ends the job, "
      "naming the ranks that did not answer (0: wait for ever)",
      NULL},
     "t"},
    {{"last", ZOO_INT, X(last), 0, 1e6,
      "average the N most recent kept copies of --checkpoint (train --keep-checkpoints) instead "
      "of the checkpoints given as arguments (0: the arguments)",
      NULL},
     "a"},
    {{"quantize", ZOO_CHOICE, X(quantize), 0, 0,
      "the attention and FFN projections in int8 (weights per output channel, activations per "
      "row) or bf16, or float (none); the output layer (unless --quantize-output) and the "
      "attention scores stay float",
      nn_quant_names},
     "re"},
    {{"quantize-output", ZOO_SWITCH, X(quantize_output), 0, 1,
      "with --quantize int8 or bf16: the output layer over the target vocabulary in that "
      "arithmetic too (faster; not the same tokens as float: see docs/zoo.md)",
      NULL},
     "re"},
};
#undef X

#define N(a) (int)(sizeof a / sizeof *a)
#define G(field) offsetof(zoo_run_cfg, field)
const zoo_cfg_group zoo_cfg_groups[] = {
    {"files", NULL, G(files), sizeof(zoo_files), FILES, N(FILES), 0},
    {"data", "data", G(data), sizeof(ds_fra_options), DATA, N(DATA),
     ZOO_GROUP_SAVED | ZOO_GROUP_FIXED | ZOO_GROUP_RANKS},
    {"vocab", NULL, G(vocab), sizeof(zoo_vocab_opts), VOCAB, N(VOCAB), ZOO_GROUP_RANKS},
    {"recipe", "train", G(recipe), sizeof(zoo_recipe), RECIPE, N(RECIPE),
     ZOO_GROUP_SAVED | ZOO_GROUP_FIXED | ZOO_GROUP_RANKS},
    {"train", NULL, G(loop), sizeof(zoo_train_opts), LOOP, N(LOOP), ZOO_GROUP_RANKS},
    {"exec", NULL, G(exec), sizeof(zoo_exec), EXEC, N(EXEC), 0},
    /* the kind's config table and size; its metadata (config.<name>) is written by model_io.c */
    {ZOO_CFG_MODEL, NULL, G(model), 0, NULL, 0, ZOO_GROUP_FIXED | ZOO_GROUP_RANKS},
};
#undef G
const int zoo_n_cfg_groups = N(zoo_cfg_groups);

const zoo_recipe zoo_recipe_d2l = {.lr = 0.005,
                                   .clip = 1,
                                   .beta1 = 0.9,
                                   .beta2 = 0.999,
                                   .schedule = ZOO_SCHEDULE_CONSTANT,
                                   .warmup = 0,
                                   .decay_steps = 0,
                                   .min_lr_ratio = 0,
                                   .label_smoothing = 0,
                                   .precision = ZOO_PRECISION_FP32,
                                   .valid_metric = ZOO_METRIC_BLEU4};

const zoo_cfg_group *zoo_cfg_group_find(const char *name) {
    for (int g = 0; g < zoo_n_cfg_groups; g++)
        if (!strcmp(zoo_cfg_groups[g].name, name)) return &zoo_cfg_groups[g];
    return NULL;
}

/* ---- presets: name/value pairs for one model kind, applied as if given ----
 * Why each value of "full": docs/zoo.md, "The whole corpus". */
typedef struct preset_value {
    const char *name, *value;
} preset_value;

/* One value a line. */
/* clang-format off */
static const preset_value FULL[] = {
    {"num-examples", "0"},
    {"valid-frac", "0.01197"},
    {"test-frac", "0.01197"},
    {"split-seed", "1"},
    {"num-steps", "28"},
    {"batch-tokens", "1024"},
    {"hiddens", "256"},
    {"ffn-hiddens", "1024"},
    {"heads", "8"},
    {"layers", "3"},
    {"dropout", "0.1"},
    {"d2l-step-positions", "0"},
    {"embed-std", "0.0625"},
    {"share-embeddings", "1"},
    {"lr", "0.001"},
    {"beta2", "0.98"},
    {"lr-schedule", "linear"},
    {"warmup-steps", "1600"},
    {"decay-steps", "12000"},
    {"min-lr-ratio", "0"},
    {"label-smoothing", "0.1"},
    {"precision", "auto"},
    {"epochs", "1000"},
    {"time-budget", "3600"},
    {"fit-decay", "1"},
    {"valid-steps", "1000"},
    {"log-steps", "200"},
    {"log-every", "1"},
    {"checkpoint-minutes", "10"},
    {"split-mode", "disjoint"},
    {"vocab", "subword"},
    {"vocab-size", "8000"},
    {"vocab-share", "joint"},
    {"split-digits", "1"},
    {"number-tags", "1"},
};
/* clang-format on */

static const struct {
    const char *kind, *name;
    const preset_value *values;
    int n;
} PRESETS[] = {{"transformer", "full", FULL, N(FULL)}};
#undef N

/* ---- defaults and items ---- */

int zoo_run_cfg_init(zoo_run_cfg *cfg, const zoo_model_kind *kind) {
    zoo_recipe recipe = zoo_recipe_d2l;
    recipe.lr = kind->lr;
    recipe.valid_metric = ZOO_METRIC_AUTO; /* resolved by the run's vocabulary (trainer.h) */
    *cfg = (zoo_run_cfg){.data = ds_fra_defaults(),
                         .vocab = {.kind = ZOO_VOCAB_WORD, .size = 8000, .share = ZOO_VOCAB_JOINT},
                         .recipe = recipe,
                         .loop = {.epochs = kind->epochs, .log_every = 10},
                         .exec = {.threads = 0,
                                  .shards = 2,
                                  .beam = ZOO_DEFAULT_BEAM,
                                  .alpha = ZOO_DEFAULT_ALPHA,
                                  .dist_timeout = 300}};
    cfg->model = malloc(kind->config_size);
    if (!cfg->model) return ag_error("out of memory");
    memcpy(cfg->model, kind->defaults, kind->config_size);
    return 0;
}

void zoo_run_cfg_free(zoo_run_cfg *cfg) {
    free(cfg->model);
    cfg->model = NULL;
}

/* The struct group g's offsets are into, in cfg. */
static void *group_obj(const zoo_cfg_group *g, zoo_run_cfg *cfg) {
    void *at = (char *)cfg + g->offset;
    return g->opts ? at : *(void **)at;
}

int zoo_run_init(zoo_run *r, const zoo_model_kind *kind, const char *cmd, char letter) {
    *r = (zoo_run){.kind = kind, .program = kind->program, .cmd = cmd, .letter = letter};
    if (zoo_run_cfg_init(&r->cfg, kind)) return -1;
    for (int gi = 0; gi < zoo_n_cfg_groups; gi++) {
        const zoo_cfg_group *g = &zoo_cfg_groups[gi];
        int n = g->opts ? g->n : kind->n_config;
        if (r->n_items + n > ZOO_RUN_MAX_ITEMS) {
            zoo_run_free(r);
            return ag_error("%s: the configuration has more than %d fields", kind->program,
                            ZOO_RUN_MAX_ITEMS);
        }
        for (int i = 0; i < n; i++)
            r->items[r->n_items++] = (zoo_cfg_item){
                .f = g->opts ? &g->opts[i].f : &kind->config[i],
                .cmds = g->opts ? g->opts[i].cmds : "tre",
                .group = g,
                .obj = group_obj(g, &r->cfg),
            };
    }
    return 0;
}

void zoo_run_free(zoo_run *r) {
    zoo_run_cfg_free(&r->cfg);
    free(r->file_text);
    r->file_text = NULL;
}

bool zoo__takes(const zoo_run *r, const zoo_cfg_item *it) {
    return strchr(it->cmds, r->letter) || strchr(it->cmds, r->letter - 'a' + 'A');
}

bool zoo_run_writes(const zoo_run *r, const zoo_cfg_item *it) {
    return strchr(it->cmds, r->letter - 'a' + 'A') != NULL;
}

int zoo__item_index(const zoo_run *r, const char *name) {
    for (int i = 0; i < r->n_items; i++)
        if (!strcmp(r->items[i].f->name, name) && zoo__takes(r, &r->items[i])) return i;
    return -1;
}

const zoo_cfg_item *zoo_run_find(const zoo_run *r, const char *name) {
    int i = zoo__item_index(r, name);
    return i < 0 ? NULL : &r->items[i];
}

bool zoo_run_given(const zoo_run *r, const char *name) {
    int i = zoo__item_index(r, name);
    return i >= 0 && r->given[i];
}

/* Sets item i from text (what: how to name it in an error). 0 or -1. */
int zoo__set_item(zoo_run *r, int i, const char *text, const char *what) {
    const zoo_cfg_item *it = &r->items[i];
    if (it->f->type == ZOO_SWITCH) { /* from a preset or a file: on / off */
        int *v = (int *)((char *)it->obj + it->f->offset);
        if (!strcmp(text, "on") || !strcmp(text, "1")) *v = 1;
        else if (!strcmp(text, "off") || !strcmp(text, "0")) *v = 0;
        else return ag_error("%s: expected on or off, got '%s'", what, text);
    } else if (it->f->type == ZOO_STR) {
        *(const char **)((char *)it->obj + it->f->offset) = *text ? text : NULL;
    } else if (zoo_field_parse(it->f, it->obj, text, what)) {
        return -1;
    }
    r->given[i] = true;
    return 0;
}

int zoo_run_apply_preset(zoo_run *r, const char *name) {
    for (size_t k = 0; k < sizeof PRESETS / sizeof *PRESETS; k++) {
        if (strcmp(PRESETS[k].kind, r->kind->name) || strcmp(PRESETS[k].name, name)) continue;
        for (int v = 0; v < PRESETS[k].n; v++) {
            char what[96];
            snprintf(what, sizeof what, "--preset %s: --%s", name, PRESETS[k].values[v].name);
            int i = zoo__item_index(r, PRESETS[k].values[v].name);
            if (i < 0) return ag_error("%s: not a flag of %s", what, r->cmd);
            if (zoo__set_item(r, i, PRESETS[k].values[v].value, what)) return -1;
        }
        return 0;
    }
    return ag_error("--preset %s: no such preset for %s (%s)", name, r->program,
                    strcmp(r->kind->name, "transformer") ? "it has none" : "full");
}

/* ---- checkpoints ---- */

static const zoo_field *group_field(const zoo_cfg_group *g, int i) { return &g->opts[i].f; }

/* "data.num_steps" for the field "num-steps" of the group whose prefix is "data". */
static void meta_key(const char *prefix, const zoo_field *f, char *key, size_t len) {
    snprintf(key, len, "%s.%s", prefix, f->name);
    for (char *p = key; *p; p++)
        if (*p == '-') *p = '_';
}

int zoo_cfg_meta_write(nn_ckpt *ck, const zoo_cfg_group *g, const void *obj) {
    char key[96], val[4200];
    for (int i = 0; i < g->n; i++) {
        meta_key(g->meta, group_field(g, i), key, sizeof key);
        if (nn_ckpt_set_meta(ck, key, zoo_field_format(group_field(g, i), obj, val, sizeof val)))
            return -1;
    }
    return 0;
}

int zoo_cfg_meta_read(const nn_ckpt *ck, const zoo_cfg_group *g, void *obj, const bool *only) {
    char key[96], what[4200];
    void *tmp = malloc(g->size); /* the group's struct, changed only when every key parses */
    if (!tmp) return ag_error("%s: out of memory", nn_ckpt_source(ck));
    memcpy(tmp, obj, g->size);
    int rc = 0;
    for (int i = 0; i < g->n && !rc; i++) {
        meta_key(g->meta, group_field(g, i), key, sizeof key);
        const char *text = nn_ckpt_meta(ck, key);
        snprintf(what, sizeof what, "%s: metadata %s", nn_ckpt_source(ck), key);
        if (text && (!only || only[i])) rc = zoo_field_parse(group_field(g, i), tmp, text, what);
    }
    if (!rc) memcpy(obj, tmp, g->size);
    free(tmp);
    return rc;
}

/* The data fields that checkpoints made before 2026-11-24 hold together in data.split. */
static bool in_legacy_split(const zoo_field *f) {
    return !strcmp(f->name, "valid-frac") || !strcmp(f->name, "test-frac");
}

int zoo_data_meta_require(const nn_ckpt *ck) {
    const zoo_cfg_group *g = zoo_cfg_group_find("data");
    bool split = nn_ckpt_meta(ck, "data.split") != NULL;
    char key[96];
    for (int i = 0; i < g->n; i++) {
        const zoo_field *f = group_field(g, i);
        /* fields added after the first training checkpoints: absent means their default */
        bool newer = !strcmp(f->name, "batch-tokens") || !strcmp(f->name, "split-mode");
        meta_key(g->meta, f, key, sizeof key);
        if (!newer && !(split && in_legacy_split(f)) && !nn_ckpt_meta(ck, key))
            return ag_error("%s: metadata has no %s", nn_ckpt_source(ck), key);
    }
    return 0;
}

int zoo_data_meta_read(const nn_ckpt *ck, ds_fra_options *o, const bool *only) {
    const zoo_cfg_group *g = zoo_cfg_group_find("data");
    ds_fra_options r = *o;
    const char *split = nn_ckpt_meta(ck, "data.split"); /* before 2026-11-24: "valid test" */
    if (split) {
        char fracs[2][64], what[4200];
        int used = 0;
        if (sscanf(split, "%63s %63s%n", fracs[0], fracs[1], &used) != 2 || split[used])
            return ag_error("%s: metadata data.split: expected two numbers, got '%s'",
                            nn_ckpt_source(ck), split);
        snprintf(what, sizeof what, "%s: metadata data.split", nn_ckpt_source(ck));
        for (int i = 0, k = 0; i < g->n; i++) {
            const zoo_field *f = group_field(g, i);
            bool frac = in_legacy_split(f);
            if (frac && (!only || only[i]) && zoo_field_parse(f, &r, fracs[k], what)) return -1;
            k += frac;
        }
    }
    if (zoo_cfg_meta_read(ck, g, &r, only)) return -1;
    *o = r;
    return 0;
}

/* ---- resume and ranks ---- */

int zoo_run_check_fixed(const zoo_run *r, const zoo_run_cfg *saved) {
    char a[4200], b[4200];
    for (int i = 0; i < r->n_items; i++) {
        const zoo_cfg_item *it = &r->items[i];
        if (!r->given[i] || !(it->group->flags & ZOO_GROUP_FIXED)) continue;
        zoo_run_cfg copy = *saved; /* the item's struct in the checkpoint's configuration */
        const void *there = group_obj(it->group, &copy);
        if (strcmp(zoo_field_format(it->f, it->obj, a, sizeof a),
                   zoo_field_format(it->f, there, b, sizeof b)))
            return ag_error(
                "--%s %s differs from the checkpoint's %s: it cannot change on --resume",
                it->f->name, a, b);
    }
    return 0;
}

char *zoo_run_text(const zoo_run *r) {
    size_t cap = 64 * (size_t)r->n_items + 1, n = 0;
    char *s = malloc(cap), v[4200];
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < r->n_items; i++) {
        const zoo_cfg_item *it = &r->items[i];
        if (!(it->group->flags & ZOO_GROUP_RANKS)) continue;
        zoo_field_format(it->f, it->obj, v, sizeof v);
        size_t need = strlen(it->f->name) + strlen(v) + 5;
        if (n + need >= cap) {
            char *t = realloc(s, cap = 2 * cap + need);
            if (!t) return free(s), NULL;
            s = t;
        }
        n += (size_t)snprintf(s + n, cap - n, "--%s %s\n", it->f->name, v);
    }
    return s;
}
