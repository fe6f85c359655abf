/* zoo/app/cli_internal.h -- what the sub-commands of the zoo's programs share (cli.c) and the
 * sub-commands themselves (cmd_train.c, cmd_translate.c, cmd_eval.c, cmd_stats.c, cmd_export.c,
 * cmd_average.c).
 * Not installed. Exit statuses: 0 success, 1 a runtime failure, 2 a usage error; each failure
 * prints one line on stderr, "PROGRAM CMD: what". */
#ifndef TG_ZOO_CLI_INTERNAL_H
#define TG_ZOO_CLI_INTERNAL_H

#include "datasets/common.h"
#include "zoo/app/cli.h"
#include "zoo/app/dist.h"
#include "zoo/app/run_cfg.h"
#include "zoo/app/subword.h"

enum { ZOO_EXIT_RUNTIME = 1, ZOO_EXIT_USAGE = 2 };

typedef struct zoo_cli {
    zoo_run run;    /* the configuration and what set it (run_cfg.h) */
    zoo_dist *dist; /* the processes of a train run (dist.h); one for every other command */
    const zoo_subword_ops *subword; /* SentencePiece, from the program (NULL: none) */
} zoo_cli;

/* Print "PROGRAM CMD: message (see PROGRAM CMD --help)" and return ZOO_EXIT_USAGE; print
 * "PROGRAM CMD: msg" and return ZOO_EXIT_RUNTIME. */
int zoo__usage(const zoo_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int zoo__fail(const zoo_cli *c, const char *msg);

/* Creates dir and its parents; an existing path must be a writable directory. 0 or -1. */
int zoo__mkdir_p(const char *dir);
/* An output file the program will write at path (what: its flag): an existing path must be a
 * regular file and its folder must exist and be writable. 0 or -1 (ag_last_error). */
int zoo__check_output_file(const char *what, const char *path);

/* A path beside the configuration's: train's checkpoint when it is the default one. */
typedef struct zoo_path_extra {
    const char *flag, *path;
    bool out;
} zoo_path_extra;
/* Every path the sub-command reads or writes (the configuration's files group, as the data
 * loader finds --data, and the extras), resolved (symbolic links, ".", ".."), checked before
 * any work: two that name the same file where one is written, a path that names a file --plots
 * writes (loss.csv, attention_*.svg ...), an output that cannot be created (a directory, a
 * missing folder, a link to nothing). --plots is created. 0, or -1 with ag_last_error() naming
 * both flags (a usage error). */
int zoo__check_paths(const zoo_cli *c, const zoo_path_extra *extra, int n_extra);
/* The lock of a checkpoint being trained: an advisory lock (flock) on CHECKPOINT.lock, which
 * holds the pid; released by zoo__unlock, which removes the file, or by the kernel when the
 * process ends. fd -1: not held. */
typedef struct zoo_lock {
    int fd;
    char path[4200];
} zoo_lock;
/* Takes the lock of ckpath. 0, or -1 naming the process that holds it. */
int zoo__lock(zoo_lock *l, const char *ckpath);
void zoo__unlock(zoo_lock *l);

/* The data of --data (or found as docs/datasets.md says) with options o. 0 or an exit status. */
int zoo__load_data(const zoo_cli *c, const ds_fra_options *o, ds_fra **d);

/* A model read from --checkpoint, with what it came with, and a tape to run it on. */
typedef struct zoo_loaded {
    nn_ckpt *ck;
    zoo_model *m;
    ds_vocab *sv, *tv;
    ds_vocab *out_tv; /* translate --raw-output of a subword model: tv without its codec */
    ag_tape *t;
} zoo_loaded;
/* A tapegrad checkpoint (model, vocabularies, config inside) or a plain state_dict with
 * --src-vocab, --tgt-vocab and the model flags. 0, or an exit status (l is then unloaded). */
int zoo__load(const zoo_cli *c, zoo_loaded *l);
void zoo__unload(zoo_loaded *l);

/* The data options of the checkpoint's run (data.* metadata) for the data flags named in
 * names[0 .. n) that were not given; the others as configured. 0 or an exit status. */
int zoo__run_options(const zoo_cli *c, const nn_ckpt *ck, const char *const *names, int n,
                     ds_fra_options *o);
/* Refuses a sequence length a model of config cfg cannot run. 0 or an exit status. */
int zoo__check_steps(const zoo_cli *c, const void *cfg, int num_steps);
/* translate and eval without --threads: one thread per core. 0 or an exit status. */
int zoo__decode_threads(const zoo_cli *c);

/* ---- subword vocabularies (subword_run.c) ---- */
/* train --vocab subword: SentencePiece models of --vocab-size pieces (one joint model, or one
 * per language) learned from the training pairs of d (their raw text through
 * ds_text_normalize, in pair order, seeded by --seed), then d re-encoded with them
 * (ds_fra_set_vocab). 0, or -1 (ag_last_error). */
int zoo__subword_train(const zoo_cli *c, ds_fra *d);
/* d re-encoded with the checkpoint's subword vocabularies (nothing for a word-level one). 0 or
 * -1. */
int zoo__subword_data(const zoo_cli *c, const nn_ckpt *ck, ds_fra *d);
/* Whether the SentencePiece model file model[0..len) was trained with split_digits (its
 * TrainerSpec, field 2 of the ModelProto, field 25 of that): 1 or 0, or -1 (reported, naming
 * `what`) for bytes that are not a well-formed protocol buffer there. */
int zoo__spm_split_digits(const void *model, size_t len, const char *what);

/* The sub-commands. Each returns an exit status. */
int zoo__cmd_train(zoo_cli *c);
int zoo__cmd_translate(zoo_cli *c);
int zoo__cmd_eval(zoo_cli *c);
int zoo__cmd_stats(zoo_cli *c);
int zoo__cmd_export(zoo_cli *c);
int zoo__cmd_average(zoo_cli *c);

#endif
