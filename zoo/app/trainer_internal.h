/* zoo/app/trainer_internal.h -- what the trainer's files share (trainer.c: the trainer and its
 * step; train_loop.c: epochs, limits and stops; validate.c; trainer_ckpt.c: checkpoint metadata;
 * report.c: progress lines, CSV and plots). Not installed. */
#ifndef TG_ZOO_TRAINER_INTERNAL_H
#define TG_ZOO_TRAINER_INTERNAL_H

#include "zoo/app/trainer.h"

/* Seconds on the monotonic clock. */
double zoo__now(void);

/* A trainer of model (owned; freed on failure) with Adam configured by the recipe, one shard.
 * NULL with ag_last_error(). */
zoo_trainer *zoo__trainer_of(zoo_model *model, const zoo_recipe *r);

/* Appends to the history or the validations. 0 or -1 (out of memory). */
int zoo__push_hist(zoo_trainer *tr, zoo_epoch_stats s);
int zoo__push_valid(zoo_trainer *tr, zoo_valid_stats v);

/* One update from batch b; its summed per-sequence loss in *loss. 0 or -1. */
int zoo__train_step(zoo_trainer *tr, const ds_batch *b, int32_t bos, double *loss);

/* Why an epoch returned before its end. */
typedef enum { ZOO_RUN_ON, ZOO_RUN_LIMIT, ZOO_RUN_STOP, ZOO_RUN_EARLY } zoo_run_why;

/* A call of zoo_train: its options (NULL: no limits, no progress: zoo_train_epoch), data and
 * clocks. */
typedef struct zoo_run_state {
    const zoo_train_opts *o;
    const ds_fra *data;
    double t0;        /* when this call started training */
    double last_ckpt; /* when the last checkpoint of this call was written */
    int64_t steps0;   /* the run's steps when this call started */
    int64_t end;      /* the step to stop after: max_steps, or the fitted decay's end; 0: none */
    bool fitted;      /* fit_decay fitted the decay's end at the warm-up's end in this call */
} zoo_run_state;

/* The fractional epoch; the running loss of the epoch under way (d2l's: per-sequence losses /
 * valid tokens; 0 before its first batch). */
double zoo__epoch_fraction(const zoo_trainer *tr, const ds_batches *it);
double zoo__running_loss(const zoo_trainer *tr);

/* A validation now (validate.c): its line on the log, the history, the best checkpoint, the
 * plots; *early when opts->patience validations went by without a better score (the recipe's
 * valid_metric). 0 or -1. */
int zoo__validate_now(zoo_run_state *r, zoo_trainer *tr, const ds_batches *it, bool *early);

/* Before a run's first step (validate.c): resolves the recipe's valid_metric auto for data
 * (zoo_valid_metric_auto), and with validations, refuses a metric that cannot be computed:
 * sacreBLEU on a validation part without a reference (every French side of it empty), or on a
 * history with validations recorded without it. 0 or -1 naming --valid-metric. */
int zoo__valid_metric_check(zoo_trainer *tr, const ds_fra *data, const zoo_train_opts *o);

/* Progress lines (report.c): every o->log_steps steps, and an epoch's line (elapsed: training
 * seconds of the epochs so far; done: seconds since the call started). */
void zoo__report_step(const zoo_run_state *r, const zoo_trainer *tr, const ds_batches *it);
void zoo__report_epoch(const zoo_run_state *r, const zoo_trainer *tr, const zoo_epoch_stats *s,
                       double elapsed, double done, bool last);

#endif
