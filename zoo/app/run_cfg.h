/* zoo/app/run_cfg.h -- the one configuration of a run of a zoo program.
 *
 * Everything a sub-command of transformer_nmt, bahdanau_nmt or seq2seq_nmt is configured by is
 * one zoo_run_cfg: the files it reads and writes, the data options, the training recipe (the
 * optimizer and its schedule), the loop's limits and checkpoints, the decoding options and the
 * model's config. One list of typed field groups (zoo_cfg_groups) describes it, and every use
 * of a configuration is one loop over that list:
 *
 *     the command line (--name value, --name=value)      zoo_run_parse
 *     --help, with every default, once                   zoo_run_help
 *     what the command line gave                          zoo_run_given
 *     presets (name/value pairs, applied as if given)    zoo_run_apply_preset
 *     --dump-config (the whole run as a file)            zoo_run_dump
 *     --config FILE (read one back; flags override it)   zoo_run_read_file
 *     checkpoint metadata (data.*, train.*)               zoo_cfg_meta_write / zoo_cfg_meta_read
 *     --resume: what the checkpoint fixes                zoo_run_check_fixed
 *     the ranks' start check under MPI                   zoo_run_text
 *
 * A new hyperparameter is one struct field and one row of its group's table (docs/zoo.md,
 * "Adding a flag"). Each row is a zoo_field (zoo/models/config.h: name, type, offset in the
 * group's struct, range, help; an enumeration has its names table) and the sub-commands that take
 * it: t(rain), r (translate), e(val), s(tats), (e)x(port), a(verage).
 */
#ifndef TG_ZOO_RUN_CFG_H
#define TG_ZOO_RUN_CFG_H

#include <stdbool.h>
#include <stdio.h>

#include "trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The files a run reads and writes (NULL: not given; the sub-command's default applies). */
typedef struct zoo_files {
    const char *data;            /* fra.txt (docs/datasets.md says how it is found) */
    const char *checkpoint;      /* written by train (default PROGRAM.safetensors), else read */
    const char *best_checkpoint; /* train with --valid-steps: the best validation's run */
    const char *plots;           /* directory of the plots and CSV files */
    const char *src_vocab, *tgt_vocab; /* vocabularies of a plain state_dict (export writes them) */
    const char *src_spm, *tgt_spm;     /* export: a subword checkpoint's SentencePiece models */
    const char *out; /* export: the plain state_dict; average: the averaged checkpoint */
} zoo_files;

/* translate's and eval's decoding unless --beam / --alpha say otherwise: beam search with
 * GNMT's length penalty, chosen on the validation split of a subword run (docs/benchmarks.md,
 * "Beam size and length penalty"). */
#define ZOO_DEFAULT_BEAM 4
#define ZOO_DEFAULT_ALPHA 1.0

/* How the sub-command runs: threads, shards, resuming, decoding. */
typedef struct zoo_exec {
    int threads;         /* engine threads; 0: the sub-command's default (train: one per shard,
                          * translate and eval: one per core) */
    int shards;          /* parts of each training batch run in parallel */
    int resume;          /* train: continue the run saved in the checkpoint */
    int allow_nonfinite; /* load a checkpoint with NaN or infinite weights anyway */
    int beam;            /* translate, eval: beam size (1: greedy) */
    double alpha;        /* translate, eval: beam search length penalty */
    int raw_output;      /* translate: print the model's tokens, not detokenized text */
    int split;           /* eval: the part scored, zoo_split (auto: test, else valid, else train) */
    double dist_timeout; /* train under mpirun: a collective's deadline, seconds (0: none) */
    int last;            /* average: the N most recent kept copies of --checkpoint (0: none) */
    int quantize;        /* translate, eval: nn_quant (nn/quant.h), the Linear layers' arithmetic */
    int quantize_output; /* translate, eval: the output layer in that arithmetic too */
} zoo_exec;

/* The vocabularies of a new training run (train only: --resume, translate and eval take the
 * checkpoint's). */
typedef enum { ZOO_VOCAB_WORD, ZOO_VOCAB_SUBWORD } zoo_vocab_kind;
typedef enum { ZOO_VOCAB_JOINT, ZOO_VOCAB_SEPARATE } zoo_vocab_share;
typedef struct zoo_vocab_opts {
    int kind;  /* zoo_vocab_kind: d2l's lowercase words, or cased SentencePiece units */
    int size;  /* subword: pieces of each model (at most; a small corpus gives fewer) */
    int share; /* zoo_vocab_share: one model for both languages, or one per language */
    int split_digits; /* subword: every digit a piece of its own (zoo_spm_train) */
    int number_tags;  /* subword: numbers as tags around the model (datasets/text.h) */
} zoo_vocab_opts;
extern const char *const zoo_vocab_kind_names[];  /* "word", "subword" */
extern const char *const zoo_vocab_share_names[]; /* "joint", "separate" */

typedef enum zoo_split {
    ZOO_SPLIT_AUTO,
    ZOO_SPLIT_TEST,
    ZOO_SPLIT_VALID,
    ZOO_SPLIT_TRAIN,
    ZOO_SPLIT_ALL
} zoo_split;
extern const char *const zoo_split_names[]; /* by zoo_split value */

typedef struct zoo_run_cfg {
    zoo_files files;
    ds_fra_options data; /* checkpoint metadata data.<name> */
    zoo_vocab_opts vocab;
    zoo_recipe recipe;   /* checkpoint metadata train.<name> */
    zoo_train_opts loop; /* its typed fields: limits, checkpoints, logging, validation */
    zoo_exec exec;
    void *model; /* the model kind's config (kind->config_size bytes, owned) */
} zoo_run_cfg;

/* ---- the groups ---- */

enum {
    ZOO_GROUP_SAVED = 1, /* in a training checkpoint's metadata, under the group's meta prefix */
    ZOO_GROUP_FIXED = 2, /* fixed by a checkpoint: may be given on --resume with its value only */
    ZOO_GROUP_RANKS = 4  /* the same on every rank of a run under MPI */
};

typedef struct zoo_cfg_opt {
    zoo_field f;      /* offset: in the group's struct */
    const char *cmds; /* sub-commands taking it: letters of "tresxa"; a path the sub-command writes
                       * (a file, or the directory of --plots) has its letter in upper case */
} zoo_cfg_opt;

typedef struct zoo_cfg_group {
    const char *name; /* the section of a config file: [data] */
    const char *meta; /* the metadata prefix ("data": data.num_steps), NULL: not saved */
    size_t offset;    /* of the group's struct in zoo_run_cfg (the model: its config pointer) */
    size_t size;      /* of the group's struct (the model: 0, the kind's config_size) */
    const zoo_cfg_opt *opts; /* NULL for the model: the kind's config table, for "tre" */
    int n;
    unsigned flags; /* ZOO_GROUP_* */
} zoo_cfg_group;

extern const zoo_cfg_group zoo_cfg_groups[];
extern const int zoo_n_cfg_groups;
/* The group of the model's config (its rows are the kind's config table). */
#define ZOO_CFG_MODEL "model"

/* Names of the learning-rate schedules, by zoo_lr_schedule value. */
extern const char *const zoo_schedule_names[];
/* Names of the precisions, by zoo_precision value: "fp32", "bf16", "auto". */
extern const char *const zoo_precision_names[];

/* The defaults of a run of `kind`: the data options' own, the kind's lr, epochs and config. 0,
 * or -1 (out of memory). */
int zoo_run_cfg_init(zoo_run_cfg *cfg, const zoo_model_kind *kind);
void zoo_run_cfg_free(zoo_run_cfg *cfg);

/* ---- a run: the configuration and what set it ---- */

#define ZOO_RUN_MAX_ITEMS 96

typedef struct zoo_cfg_item {
    const zoo_field *f;
    const char *cmds;
    const zoo_cfg_group *group;
    void *obj; /* the struct f's offset is into */
} zoo_cfg_item;

typedef struct zoo_run {
    const zoo_model_kind *kind;
    const char *program, *cmd; /* for messages: "transformer_nmt", "train" */
    char letter;               /* the sub-command's letter */
    zoo_run_cfg cfg;
    int n_items;
    zoo_cfg_item items[ZOO_RUN_MAX_ITEMS]; /* every group's fields, in order */
    bool given[ZOO_RUN_MAX_ITEMS];         /* set by a preset, a config file or a flag */
    const char *preset, *config;           /* --preset, --config (NULL: none) */
    bool dump, help;                       /* --dump-config, --help */
    int n_pos; /* translate: the sentences of the command line; average: the checkpoints */
    char **pos;
    char *file_text; /* the --config file's text (the strings point into it), owned */
} zoo_run;

/* Sets r up with the defaults of `kind` for the sub-command `cmd` (its letter). 0, or -1 (out of
 * memory, or a kind whose config has too many fields). Free with zoo_run_free. */
int zoo_run_init(zoo_run *r, const zoo_model_kind *kind, const char *cmd, char letter);
void zoo_run_free(zoo_run *r);

/* The item called name that the sub-command takes, or NULL. */
const zoo_cfg_item *zoo_run_find(const zoo_run *r, const char *name);
/* Whether the sub-command of r writes the path of item it (an output), rather than reads it. */
bool zoo_run_writes(const zoo_run *r, const zoo_cfg_item *it);
/* Whether the item called name was set by a preset, the config file or a flag. */
bool zoo_run_given(const zoo_run *r, const char *name);

/* Parses the sub-command's arguments (argv after the sub-command): applies --preset NAME,
 * then --config FILE, then every flag, in that order, so each overrides the one before. The
 * sentences of translate go to r->pos. Returns 0, or -1 with ag_last_error() naming the flag,
 * the file and line, what was expected and what was given (a usage error). */
int zoo_run_parse(zoo_run *r, int argc, char **argv);

/* Applies the preset called name (for r's kind). 0, or -1 naming the presets there are. */
int zoo_run_apply_preset(zoo_run *r, const char *name);
/* Reads a configuration file written by zoo_run_dump (or by hand): lines "name = value",
 * "[group]" headers, '#' comments, blank lines; an empty value unsets a text. 0, or -1 with
 * ag_last_error() "FILE:LINE: ..." naming the key and what was expected. */
int zoo_run_read_file(zoo_run *r, const char *path);
/* Writes the configuration of the sub-command (its items, every group) as such a file. */
void zoo_run_dump(const zoo_run *r, FILE *f);
/* Writes the sub-command's usage and flags, with every default. */
void zoo_run_help(const zoo_run *r, FILE *f);

/* ---- checkpoints and ranks ---- */

/* Writes the fields of group g (the struct at obj) as metadata "<meta>.<name>" ('_' for '-').
 * 0 or -1. */
int zoo_cfg_meta_write(nn_ckpt *ck, const zoo_cfg_group *g, const void *obj);
/* Reads them back into obj, strictly (the flag's type and range). A key absent leaves its field
 * as it is. only: NULL for all, else only the fields i with only[i]. 0, or -1 naming the file,
 * the key, what it expects and what it holds (obj unchanged). */
int zoo_cfg_meta_read(const nn_ckpt *ck, const zoo_cfg_group *g, void *obj, const bool *only);
/* The group called name (NULL: none). */
const zoo_cfg_group *zoo_cfg_group_find(const char *name);

/* On --resume: every item of a FIXED group given on the command line must equal the value in
 * `saved` (the checkpoint's configuration). 0, or -1 naming the first flag that differs, its
 * value and the checkpoint's. */
int zoo_run_check_fixed(const zoo_run *r, const zoo_run_cfg *saved);

/* "--name value" lines of every item of the RANKS groups: what must be the same on every rank.
 * malloc'd (caller frees), NULL when out of memory. */
char *zoo_run_text(const zoo_run *r);

#ifdef __cplusplus
}
#endif

#endif
