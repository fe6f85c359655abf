/* zoo/app/trainer.h -- the one trainer of every seq2seq model (d2l's train_seq2seq,
 * docs/spec.md section 5).
 *
 * A step: dec_in = <bos> + Y[:, :-1] (teacher forcing); logits = decode(encode(X), dec_in);
 * per-sequence loss = MaskedSoftmaxCELoss (mean over T); objective = its sum over the batch;
 * backward; clip gradients to global norm (the clip given to zoo_trainer_new; d2l: 1); Adam.
 * Reported like d2l, for the LAST epoch: loss = sum of per-sequence losses / valid target
 * tokens, tokens/sec = valid target tokens / the epoch's seconds.
 *
 * A run is a zoo_trainer: the model, its optimizer, the dropout RNG, the epochs done and the
 * per-epoch history. zoo_trainer_save writes all of it (with the vocabularies and the data
 * options) into one checkpoint, and zoo_trainer_resume restores it, so a resumed run continues
 * exactly: batches are shuffled by a function of (seed, epoch), and the RNG, moments and step
 * count come back bit for bit.
 */
#ifndef TG_ZOO_TRAINER_H
#define TG_ZOO_TRAINER_H

#include <signal.h>
#include <stdio.h>

#include "../../datasets/fra_eng.h"
#include "../../optim/optim.h"
#include "decode.h"
#include "model_io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the loss of d2l's train_seq2seq ---- */

/* Teacher forcing: dec_in[b] = <bos> followed by tgt[b, :-1]. */
void zoo_teacher_inputs(const int32_t *tgt, int B, int T, int32_t bos, int32_t *dec_in);
/* The objective of a batch of B rows: decode(m, c, state, dec_in, B, T) against tgt (B, T) and
 * tgt_len (B,), d2l's MaskedSoftmaxCELoss summed over the batch, each sequence's mean over T_div
 * positions (d2l: T_div = T; a token batch cut to T of num_steps: T_div = num_steps, the loss
 * of the uncut batch), label smoothing eps. A model with decode_features gives its features
 * and output layer to nn_seq_ce_loss, which picks the fused or the composite kernel
 * (nn/loss.h); one without gives its logits to nn_seq_ce_loss_logits. Returns a scalar on
 * c->tape, or NULL after an error (reported). */
ag_tensor *zoo_seq2seq_loss(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *dec_in,
                            const int32_t *tgt, const int32_t *tgt_len, int B, int T, int T_div,
                            double eps);

/* ---- the training recipe ----
 * Adam's learning rate, betas and gradient clipping, a learning-rate schedule after a linear
 * warm-up, label smoothing. d2l's recipe (zoo_recipe_d2l) is Adam 0.9 / 0.999 at lr 0.005,
 * clipping at norm 1, a constant rate and no smoothing. Its fields are the group "recipe" of the
 * run configuration (run_cfg.h): the programs' flags (--lr, --beta2, --lr-schedule ...) and the
 * checkpoint's metadata ("train.<name>", '_' for '-'); a resumed run continues with its recipe. */
typedef enum zoo_lr_schedule {
    ZOO_SCHEDULE_CONSTANT,
    ZOO_SCHEDULE_INVSQRT, /* lr sqrt(warmup / step) after the warm-up */
    ZOO_SCHEDULE_COSINE,  /* down to min_lr_ratio lr at decay_steps */
    ZOO_SCHEDULE_LINEAR
} zoo_lr_schedule;

/* The inputs of the products while training (ag_set_precision): float32, or bf16 with float32
 * accumulation (on a CPU without AVX512-BF16 the trainer says so and stays in float32). AUTO is
 * a run's choice before it starts (zoo_precision_auto), never a trainer's: a checkpoint holds
 * the precision it resolved to. */
typedef enum zoo_precision {
    ZOO_PRECISION_FP32,
    ZOO_PRECISION_BF16,
    ZOO_PRECISION_AUTO
} zoo_precision;

/* What --precision auto resolves to on this machine: ZOO_PRECISION_BF16 where bf16 products run
 * faster than float32's (ag_bf16_faster: AMX tiles, where a step of --preset full costs about
 * half of float32's, or AMD's full-rate AVX512-BF16, 0.66; docs/benchmarks.md),
 * ZOO_PRECISION_FP32 elsewhere (Intel's AVX512-BF16 alone is slower than float32). */
int zoo_precision_auto(void);

/* The validation score that picks the best checkpoint and drives the patience
 * (zoo_train_opts.valid_steps): corpus BLEU-4 on d2l's lowercased tokens, or the standard score,
 * sacreBLEU (13a, cased) of the detokenized output against the raw references (zoo_evaluate).
 * Auto: sacreBLEU when the target vocabulary is subword (it has a codec), BLEU-4 otherwise;
 * zoo_train resolves it before its first validation, so a checkpoint always names a score.
 * Checkpoints made before the key have none: their runs chose by BLEU-4. */
typedef enum zoo_valid_metric {
    ZOO_METRIC_AUTO,
    ZOO_METRIC_BLEU4,
    ZOO_METRIC_SACREBLEU
} zoo_valid_metric;
extern const char *const zoo_valid_metric_names[]; /* "auto", "bleu4", "sacrebleu" */

typedef struct zoo_recipe {
    double lr;   /* Adam's learning rate */
    double clip; /* gradients clipped to this global norm (0: never) */
    double beta1, beta2;
    int schedule;        /* zoo_lr_schedule */
    int warmup;          /* warm-up steps of the invsqrt, cosine and linear schedules */
    int64_t decay_steps; /* cosine, linear: the step where the decay ends (> warmup) */
    double min_lr_ratio; /* cosine, linear: final rate / rate */
    double label_smoothing;
    int precision;    /* zoo_precision */
    int valid_metric; /* zoo_valid_metric (zoo_recipe_d2l: BLEU-4, the choice before the key) */
} zoo_recipe;
extern const zoo_recipe zoo_recipe_d2l;

/* Reads the data options of a run from ck's metadata data.<name> (absent keys are left as they
 * are; checkpoints made before 2026-11-24 hold the two fractions in data.split as "valid test").
 * only: NULL for all, else only the fields i (in the order of the run configuration's "data"
 * group) with only[i]. Returns 0, or -1 with ag_last_error() naming the file, the key, what it
 * expects and what it holds. */
int zoo_data_meta_read(const nn_ckpt *ck, ds_fra_options *o, const bool *only);
/* 0 when ck holds every data.<name> a training checkpoint must (those added later may be absent:
 * their defaults; the fractions may be in the older data.split), else -1 naming the key. */
int zoo_data_meta_require(const nn_ckpt *ck);

/* The most steps a run counts (the range of --max-steps): a checkpoint claiming more is refused
 * before its count could overflow. */
#define ZOO_MAX_STEPS INT64_C(1000000000000)

typedef struct zoo_epoch_stats {
    double loss;   /* sum of per-sequence losses / valid target tokens */
    double tokens; /* valid target tokens */
    double seconds;
} zoo_epoch_stats;

/* One validation (zoo_train_opts.valid_steps): when, and the scores on the validation part. */
typedef struct zoo_valid_stats {
    int64_t step;      /* optimizer steps done */
    double epoch;      /* fractional epoch */
    double seconds;    /* training seconds so far (steps only, the whole run, resumes included) */
    double train_loss; /* the running loss of the epoch under way (d2l's definition) */
    double loss;       /* cross-entropy per valid target token (teacher forcing, no dropout) */
    double bleu;       /* corpus BLEU-4, 0..100, greedy (zoo_evaluate) */
    /* The standard score of the same translations (zoo_eval_result's sacrebleu, sacre_chrf),
     * when `standard`: false for a validation read from a checkpoint made before they were
     * recorded (its train.valid_history lines have 6 fields, not 8). */
    bool standard;
    double sacrebleu, chrf;
} zoo_valid_stats;

/* The score `metric` (ZOO_METRIC_BLEU4 or ZOO_METRIC_SACREBLEU) of a validation; -1 when it has
 * none (sacreBLEU of an older validation). */
double zoo_valid_score(const zoo_valid_stats *v, int metric);
/* The metric auto stands for on `data`: sacreBLEU when its target vocabulary has a codec
 * (subword), else BLEU-4. */
int zoo_valid_metric_auto(const ds_fra *data);

typedef struct zoo_shard zoo_shard; /* one row range of every batch (trainer.c) */
typedef struct zoo_dist zoo_dist;   /* the processes of a data-parallel run (dist.h) */

typedef struct zoo_trainer {
    zoo_model *model; /* owned */
    optim *opt;       /* owned */
    ag_tape *tape;    /* owned; shard 0's tape */
    ag_rng rng;       /* seeds each shard's dropout stream, once per step */
    int shards;       /* see zoo_trainer_set_shards: this process's */
    zoo_shard *shard; /* owned, `shards` entries */
    zoo_dist *dist;   /* not owned; NULL: this process alone (zoo_trainer_set_dist) */
    int epochs_done;
    int n_hist, cap_hist;
    zoo_epoch_stats *hist; /* one per epoch done */
    int64_t steps;         /* optimizer steps of the whole run */
    zoo_recipe recipe;     /* zoo_recipe_d2l unless set (zoo_trainer_set_recipe) */
    /* The epoch under way when a run stopped inside it (all 0 at an epoch boundary): batches
     * done, their loss sum, valid tokens and seconds. A resumed run skips those batches of the
     * epoch's order, a function of (seed, epoch), and carries on with the same bits. */
    int epoch_batches;
    double epoch_loss, epoch_tokens, epoch_seconds;
    int n_valid, cap_valid;
    zoo_valid_stats *valid; /* the validations of the run, in order */
    ds_vocab *vocab[2];     /* a resumed run's vocabularies (DS_SRC, DS_TGT), owned; else NULL */
} zoo_trainer;

typedef struct zoo_train_opts {
    int epochs;         /* total epochs of the run (a resumed run counts those done) */
    int64_t max_steps;  /* stop after this many steps of the whole run; 0: no limit */
    double time_budget; /* stop once this call has trained this many seconds; 0: none */
    /* With time_budget and a linear or cosine schedule: when the warm-up ends in this call, the
     * decay's end (the recipe's decay_steps, saved with the run) moves to the last step the
     * rest of the budget holds at the pace of the call so far (validations and saves
     * included), at most max_steps, agreed by rank 0; a line on log says so. After each
     * validation of that call it is fitted again the same way (a line when it moves), so a
     * pace that drifts still ends the decay with the budget. The run stops there: with
     * fit_decay it never trains past the decay's end (a resumed run included; its calls keep
     * the end they load). */
    bool fit_decay;
    const char *checkpoint;    /* written at the end, at a stop and periodically; NULL: never */
    int checkpoint_every;      /* also every N epochs; 0: none */
    int64_t checkpoint_steps;  /* also every N steps; 0: none */
    double checkpoint_minutes; /* also every M minutes of training; 0: none */
    const char *plots_dir;     /* loss.csv and loss.svg written at the end; NULL: none */
    int log_every;             /* epochs between progress reports; 0: none */
    int64_t log_steps;         /* also a progress line every N steps; 0: none */
    FILE *log;                 /* progress stream; redrawn in place when it is a terminal */
    /* Checked after every step: when *stop is set (e.g. by a SIGINT handler), the run saves and
     * returns ZOO_TRAIN_STOPPED. NULL: never. */
    volatile sig_atomic_t *stop;
    /* Validation on the data's DS_VALID part (which must not be empty) every valid_steps steps
     * and when the run ends or stops (0: never): the loss per token, corpus BLEU-4 and the
     * standard score (sacreBLEU, chrF) of greedy translations, a line on log, the history in
     * the checkpoint and the plots. A score (the recipe's valid_metric) above every earlier one
     * saves the run to best_checkpoint (NULL: not kept); after `patience` validations without
     * one (0: never) the run saves and returns ZOO_TRAIN_EARLY. */
    int64_t valid_steps;
    const char *best_checkpoint;
    int patience;
    /* Every periodic save (checkpoint_steps, checkpoint_minutes, checkpoint_every) also writes
     * a copy NAME.step<STEPS>.safetensors beside the checkpoint (zoo_kept_checkpoint_name), and
     * only the keep_checkpoints most recent copies of this run are kept (0: no copies). */
    int keep_checkpoints;
} zoo_train_opts;

/* What zoo_train returns besides 0 (every epoch done) and -1 (an error). */
enum {
    ZOO_TRAIN_LIMIT = 1,   /* max_steps or the time budget reached; the checkpoint saved */
    ZOO_TRAIN_STOPPED = 2, /* *opts->stop was set; the checkpoint saved */
    ZOO_TRAIN_EARLY = 3    /* opts->patience validations without a better score; saved */
};

/* The validation of zoo_train on `part` of data, with tr's model in eval mode: *loss, the
 * cross-entropy per valid target token (teacher forcing, 256 sentences at a time), and *scores,
 * zoo_evaluate's of greedy translations (BLEU-4, sacreBLEU, chrF ...). Returns 0 or -1
 * (ag_last_error). */
int zoo_trainer_validate(zoo_trainer *tr, const ds_fra *data, ds_part part, double *loss,
                         zoo_eval_result *scores);

/* A new run: takes ownership of model; Adam (PyTorch defaults) with lr and clipping by clip;
 * dropout RNG seeded from seed. NULL with ag_last_error(). */
zoo_trainer *zoo_trainer_new(zoo_model *model, double lr, double clip, uint64_t seed);
void zoo_trainer_free(zoo_trainer *tr);

/* Sets the recipe of a run that has not taken a step yet (the optimizer is rebuilt with its
 * betas and schedule). Returns 0, or -1 (ag_last_error) for values out of range, a schedule
 * whose warm-up or decay steps do not fit, or a run already under way. */
int zoo_trainer_set_recipe(zoo_trainer *tr, const zoo_recipe *r);

/* Cuts every batch into `shards` row ranges (as even as can be; a batch smaller than that
 * leaves some empty) that run as independent forward and backward passes, in parallel on the
 * threads of ag_set_threads. Each shard runs its own replica of the model: the same values, its
 * own gradient buffer, tape and dropout stream. Their gradients are summed in shard order before
 * clipping and the update, so the objective is the same as one pass over the batch; the bits
 * depend on the number of shards (sums in another order, other dropout draws), never on the
 * number of threads. A new trainer has 1 shard; a checkpoint keeps the number. Returns 0, or -1
 * (ag_last_error) for shards outside [1, 64] or out of memory (the trainer is then unchanged). */
int zoo_trainer_set_shards(zoo_trainer *tr, int shards);

/* Spreads the run over the ranks of d (dist.h; NULL: this process alone), before its first step
 * or on resuming (zoo_trainer_resume_dist), and before zoo_trainer_set_shards, whose count is
 * then each rank's: the run has shards x size shards in all ("global" shards). Global shard
 * g = rank x shards + s takes rows [B g / G, B (g + 1) / G) of every batch (the whole batch, the
 * same on every rank, as one process would use); every rank draws the dropout keys of all G
 * shards from the same RNG and keeps its own, so keys and rows depend on G only, never on the
 * rank count. After a step's forward and backward, each rank sums its shards' gradients in shard
 * order, then the ranks sum theirs (zoo_dist_sum) and the loss, and every rank clips and
 * updates the same bits. One process with G shards and G/S ranks with S shards each take the
 * same rows and dropout draws, and the same gradients up to the order of the sums: the same
 * bits for 2 ranks (a + b is b + a), within rounding otherwise. A stop (a signal on any rank,
 * the time budget as rank 0 measures it) is agreed after every step, so every rank stops after
 * the same one. Returns 0. */
int zoo_trainer_set_dist(zoo_trainer *tr, zoo_dist *d);

/* The rest of epoch tr->epochs_done over `it` (positioned by this function, past the batches of
 * that epoch already done). Returns 0 or -1 (an op failed: its message went to ag's error
 * handler and is in ag_last_error(); or the gradient norm was not finite). */
int zoo_train_epoch(zoo_trainer *tr, ds_batches *it, int32_t bos, zoo_epoch_stats *out);

/* Trains from where tr is (mid-epoch included) to opts->epochs, with progress, checkpoints and
 * plots, stopping early at opts->max_steps, after opts->time_budget seconds, or when *opts->stop
 * is set: then it saves the checkpoint (mid-epoch; zoo_trainer_resume continues it with the
 * same bits as an uninterrupted run) and returns ZOO_TRAIN_LIMIT or ZOO_TRAIN_STOPPED. data and
 * its vocabularies go into the checkpoints. Returns 0 when every epoch is done, or -1
 * (ag_last_error says why; checkpoints already written are intact). */
int zoo_train(zoo_trainer *tr, const ds_fra *data, ds_batches *it, const zoo_train_opts *opts);

/* The decay's end fit_decay chooses (zoo_train_opts) when the warm-up ends at `step` after
 * steps_done steps of this call in `seconds`: step + floor((budget - seconds) x steps_done /
 * seconds), at least step + 1, at most max_steps when that is above step (0: no limit), and
 * below 2^31. */
int64_t zoo_fit_decay_end(int64_t step, int64_t steps_done, double seconds, double budget,
                          int64_t max_steps);

/* Whether fit_decay can run: a time budget (> 0) and a decay to fit (zoo_lr_schedule linear or
 * cosine). zoo_train refuses fit_decay otherwise. */
bool zoo_fit_decay_possible(double time_budget, int schedule);

/* The seconds the run's training steps took, resumes included (validations excluded). */
double zoo_trainer_seconds(const zoo_trainer *tr);

/* Writes the whole run to path (atomically): model, vocabularies, config, optimizer state and
 * settings (lr, clip, shards: the global count, and the ranks that ran them), RNG, epochs done,
 * history, data options. Under several ranks only rank 0 calls it (zoo_train does so). Returns
 * 0 or -1. */
int zoo_trainer_save(const zoo_trainer *tr, const ds_fra *data, const char *path);

/* Restores a run saved by zoo_trainer_save into a new trainer, its optimizer configured with
 * the run's learning rate and clipping (stored in the checkpoint). The data options stored
 * there are returned in *data_opts so the caller loads the same data (and so the same
 * vocabularies: checked by zoo_trainer_check_data). NULL with ag_last_error(). */
zoo_trainer *zoo_trainer_resume(const char *path, const zoo_model_kind *kind,
                                ds_fra_options *data_opts);
/* The same, spread over the ranks of d (zoo_trainer_set_dist): the checkpoint's global shard
 * count is shared between them, each rank running count / size (an error when size does not
 * divide it). Every rank reads the checkpoint. A run resumed on another rank count keeps its
 * rows and dropout draws: one process with 2 shards and 2 ranks with 1 give the same bits. */
zoo_trainer *zoo_trainer_resume_dist(const char *path, const zoo_model_kind *kind, zoo_dist *d,
                                     ds_fra_options *data_opts);
/* 0 if data's vocabularies fit the run: the model's sizes, and for a resumed run the same tokens
 * in the same order as its checkpoint's; else -1 naming the side and the first difference. */
int zoo_trainer_check_data(const zoo_trainer *tr, const ds_fra *data);

/* The copy of checkpoint `path` kept at step `steps` (zoo_train_opts.keep_checkpoints), beside
 * it: NAME.step<STEPS>.safetensors, NAME being path without its .safetensors (if it has one).
 * Written into out; 0, or -1 when it does not fit in len. */
int zoo_kept_checkpoint_name(const char *path, int64_t steps, char *out, size_t len);
/* The steps of the kept copies of `path` in its folder (the files named exactly so), those at
 * most `upto` (-1: all), the most recent first: *steps is malloc'd (the caller frees it; NULL
 * when there are none). Returns their count, or -1 (the folder cannot be read, out of memory). */
int zoo_kept_checkpoints(const char *path, int64_t upto, int64_t **steps);
/* Keeps the `keep` most recent copies of `path` of steps at most `upto` and removes the older
 * ones (only files named as zoo_kept_checkpoint_name names them). 0, or -1 naming a file that
 * could not be removed. */
int zoo_kept_checkpoints_prune(const char *path, int64_t upto, int keep);

/* Writes the history as CSV (epoch,loss,tokens,seconds,tokens_per_sec) and as an SVG line plot
 * of the loss; with validations, also valid.csv
 * (step,epoch,seconds,train_loss,valid_loss,bleu,sacrebleu,chrf; the last two empty for a
 * validation without them) and the curves valid_bleu.svg, valid_bleu_time.svg (BLEU-4 against
 * steps and minutes), valid_sacrebleu.svg, valid_sacrebleu_time.svg (sacreBLEU and chrF, the
 * validations that have them) and valid_loss.svg. Returns 0 or -1. */
int zoo_trainer_write_plots(const zoo_trainer *tr, const char *dir);

#ifdef __cplusplus
}
#endif

#endif
