/* train_loop.c -- epochs, steps, limits and stops of a training run (zoo_train, trainer.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/trainer_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "zoo/app/dist.h"
#include "zoo/app/run_cfg.h"

double zoo_trainer_seconds(const zoo_trainer *tr) {
    double s = tr->epoch_seconds;
    for (int i = 0; i < tr->n_hist; i++) s += tr->hist[i].seconds;
    return s;
}

double zoo__epoch_fraction(const zoo_trainer *tr, const ds_batches *it) {
    int64_t n = ds_batches_count(it);
    return tr->epochs_done + (n ? (double)tr->epoch_batches / (double)n : 0);
}

/* The epoch under way's loss so far (d2l's: per-sequence losses / valid tokens), 0 before its
 * first batch. */
double zoo__running_loss(const zoo_trainer *tr) {
    return tr->epoch_tokens ? tr->epoch_loss / tr->epoch_tokens : 0;
}

/* A periodic save: the checkpoint, and with keep_checkpoints its copy at this step (the same
 * save to NAME.step<STEPS>.safetensors, through ag_file), the older copies of the run beyond
 * keep_checkpoints removed. 0 or -1. */
static int save_periodic(const zoo_trainer *tr, const ds_fra *data, const zoo_train_opts *o) {
    if (zoo_trainer_save(tr, data, o->checkpoint)) return -1;
    if (o->keep_checkpoints <= 0) return 0;
    char copy[4200];
    return zoo_kept_checkpoint_name(o->checkpoint, tr->steps, copy, sizeof copy) ||
                   zoo_trainer_save(tr, data, copy) ||
                   zoo_kept_checkpoints_prune(o->checkpoint, tr->steps, o->keep_checkpoints)
               ? -1
               : 0;
}

/* The checkpoints due after a step: every checkpoint_steps steps, every checkpoint_minutes. */
static int periodic_save(zoo_run_state *r, const zoo_trainer *tr) {
    const zoo_train_opts *o = r->o;
    if (!o || !o->checkpoint) return 0;
    bool due =
        (o->checkpoint_steps > 0 && tr->steps % o->checkpoint_steps == 0) ||
        (o->checkpoint_minutes > 0 && zoo__now() - r->last_ckpt >= 60 * o->checkpoint_minutes);
    if (!due) return 0;
    r->last_ckpt = zoo__now();
    return save_periodic(tr, r->data, o);
}

/* Several ranks stop after the same step: a stop signal on any rank, or a limit as rank 0 sees
 * it (its clock for the time budget). */
static int agree_stop(zoo_trainer *tr, zoo_run_why *why) {
    if (zoo_dist_size(tr->dist) == 1) return 0;
    /* an early stop as rank 0 decides it (every rank validates the same model to the same bits
     * on machines of one kind; rank 0's decision holds if another kind rounds otherwise) */
    bool root = zoo_dist_rank(tr->dist) == 0;
    int32_t v[3] = {*why == ZOO_RUN_STOP, root && *why == ZOO_RUN_LIMIT,
                    root && *why == ZOO_RUN_EARLY};
    if (zoo_dist_max(tr->dist, v, 3)) return -1;
    *why = v[0] ? ZOO_RUN_STOP : v[2] ? ZOO_RUN_EARLY : v[1] ? ZOO_RUN_LIMIT : ZOO_RUN_ON;
    return 0;
}

int64_t zoo_fit_decay_end(int64_t step, int64_t steps_done, double seconds, double budget,
                          int64_t max_steps) {
    double rest = budget - seconds, more = 1;
    if (rest > 0 && seconds > 0 && steps_done > 0)
        more = floor(rest * (double)steps_done / seconds);
    if (more < 1) more = 1;
    if (more > (double)(INT32_MAX - step)) more = (double)(INT32_MAX - step);
    int64_t end = step + (int64_t)more;
    return max_steps > step && max_steps < end ? max_steps : end;
}

bool zoo_fit_decay_possible(double time_budget, int schedule) {
    return time_budget > 0 && (schedule == ZOO_SCHEDULE_LINEAR || schedule == ZOO_SCHEDULE_COSINE);
}

/* fit_decay (trainer.h): at the end of the warm-up, and in the call that did that after each
 * validation, the decay's end from rank 0's clock (the pace of the call so far, validations and
 * saves included) into the recipe, the optimizer's schedule and the run's end step, and a line
 * on the log when it moves. 0 or -1. */
static int fit_decay(zoo_run_state *r, zoo_trainer *tr, bool validated) {
    const zoo_train_opts *o = r->o;
    bool warmup_end = tr->steps == tr->recipe.warmup;
    if (!o->fit_decay || !(warmup_end || (r->fitted && validated && tr->steps < r->end)))
        return 0; /* (a refit at the run's last step would move an end already reached) */
    double done = zoo__now() - r->t0;
    int64_t n = tr->steps - r->steps0,
            end = zoo_fit_decay_end(tr->steps, n, done, o->time_budget, o->max_steps);
    if (zoo_dist_size(tr->dist) > 1) { /* end < 2^31 */
        int32_t v = zoo_dist_rank(tr->dist) == 0 ? (int32_t)end : 0;
        if (zoo_dist_max(tr->dist, &v, 1)) return -1;
        end = v;
    }
    r->fitted = true;
    int64_t was = tr->recipe.decay_steps;
    if (!warmup_end && end == was) return 0;
    optim_schedule s = optim_config(tr->opt)->schedule;
    s.total = end;
    if (optim_set_schedule(tr->opt, s)) return -1;
    tr->recipe.decay_steps = end;
    r->end = o->max_steps && o->max_steps < end ? o->max_steps : end;
    if (!o->log) return 0;
    const char *why = end == o->max_steps ? "--max-steps" : "where the rest of --time-budget ends";
    if (warmup_end && o->valid_steps > 0) /* refits may follow */
        fprintf(o->log,
                "schedule: the warm-up ended at step %lld after %.1fs (%.3fs a step); the decay "
                "ends at step %lld, %s (fitted again after each validation)\n",
                (long long)tr->steps, done, done / (double)n, (long long)end, why);
    else if (warmup_end)
        fprintf(o->log,
                "schedule: the warm-up ended at step %lld after %.1fs (%.3fs a step); the decay "
                "ends at step %lld, %s (--decay-steps %lld --max-steps %lld repeat it)\n",
                (long long)tr->steps, done, done / (double)n, (long long)end, why, (long long)end,
                (long long)end);
    else
        fprintf(o->log,
                "schedule: at step %lld after %.1fs (%.3fs a step), the decay's end moves from "
                "step %lld to %lld, %s\n",
                (long long)tr->steps, done, done / (double)n, (long long)was, (long long)end, why);
    return 0;
}

/* Batches of epoch tr->epochs_done from tr->epoch_batches on, until the epoch ends (then its
 * stats go to the history) or a limit or a stop comes (*why). Returns 0 or -1. */
static int run_epoch(zoo_trainer *tr, ds_batches *it, int32_t bos, zoo_run_state *r,
                     zoo_epoch_stats *out, zoo_run_why *why) {
    const zoo_train_opts *o = r->o;
    *why = ZOO_RUN_ON;
    ds_batches_epoch(it, tr->epochs_done);
    ds_batch b;
    for (int k = 0; k < tr->epoch_batches; k++) /* the batches a stopped run already did */
        if (!ds_batches_next(it, &b))
            return ag_error("resume: the epoch has fewer than %d batches", tr->epoch_batches);
    while (ds_batches_next(it, &b)) {
        double loss, t0 = zoo__now();
        if (zoo__train_step(tr, &b, bos, &loss)) return -1;
        tr->epoch_loss += loss;
        for (int i = 0; i < b.size; i++) tr->epoch_tokens += b.tgt_valid_len[i];
        tr->epoch_seconds += zoo__now() - t0;
        tr->epoch_batches++;
        tr->steps++;
        zoo__report_step(r, tr, it);
        if (!o) continue;
        bool early = false, validated = o->valid_steps > 0 && tr->steps % o->valid_steps == 0;
        if (validated && zoo__validate_now(r, tr, it, &early)) return -1;
        if (fit_decay(r, tr, validated)) return -1; /* before a save, which records the end */
        if (periodic_save(r, tr)) return -1;
        if (early) *why = ZOO_RUN_EARLY;
        else if (o->stop && *o->stop) *why = ZOO_RUN_STOP;
        else if ((r->end > 0 && tr->steps >= r->end) ||
                 (o->time_budget > 0 && zoo__now() - r->t0 >= o->time_budget))
            *why = ZOO_RUN_LIMIT;
        if (agree_stop(tr, why)) return -1;
        if (*why != ZOO_RUN_ON) return 0;
    }
    *out = (zoo_epoch_stats){
        .loss = zoo__running_loss(tr), .tokens = tr->epoch_tokens, .seconds = tr->epoch_seconds};
    if (zoo__push_hist(tr, *out)) return -1;
    tr->epochs_done++;
    tr->epoch_batches = 0;
    tr->epoch_loss = tr->epoch_tokens = tr->epoch_seconds = 0;
    return 0;
}

int zoo_train_epoch(zoo_trainer *tr, ds_batches *it, int32_t bos, zoo_epoch_stats *out) {
    zoo_run_state r = {.t0 = zoo__now()};
    zoo_run_why why;
    return run_epoch(tr, it, bos, &r, out, &why);
}

/* ---- the run ---- */

/* The validation at the end of a run (or a stop), unless the last step had one. */
static int final_validation(zoo_run_state *r, zoo_trainer *tr, const ds_batches *it, bool *early) {
    if (r->o->valid_steps <= 0 || (tr->n_valid && tr->valid[tr->n_valid - 1].step == tr->steps))
        return 0;
    return zoo__validate_now(r, tr, it, early);
}

/* The step a run stops after (*end; 0: none): max_steps, and with fit_decay past the warm-up the
 * decay's end. Refuses fit_decay without its budget and schedule, and a run already there. */
static int run_end(const zoo_trainer *tr, const zoo_train_opts *o, int64_t *end) {
    const zoo_recipe *rc = &tr->recipe;
    *end = o->max_steps;
    if (o->fit_decay) {
        if (!zoo_fit_decay_possible(o->time_budget, rc->schedule))
            return ag_error("--fit-decay needs --time-budget and --lr-schedule linear or cosine "
                            "(they are %g and %s)",
                            o->time_budget, zoo_schedule_names[rc->schedule]);
        if (tr->steps >= rc->warmup && (!*end || rc->decay_steps < *end)) *end = rc->decay_steps;
    }
    if (*end && tr->steps >= *end)
        return ag_error("the run is at step %lld, where it ends (%s %lld): nothing to train",
                        (long long)tr->steps, *end == o->max_steps ? "--max-steps" : "its decay",
                        (long long)*end);
    return 0;
}

int zoo_train(zoo_trainer *tr, const ds_fra *data, ds_batches *it, const zoo_train_opts *o) {
    int32_t bos = ds_vocab_id(ds_fra_vocab(data, DS_TGT), "<bos>");
    double elapsed = 0;
    for (int i = 0; i < tr->n_hist; i++) elapsed += tr->hist[i].seconds;
    zoo_run_state r = {.o = o, .data = data, .t0 = zoo__now(), .steps0 = tr->steps};
    r.last_ckpt = r.t0;
    if (run_end(tr, o, &r.end)) return -1;
    if (o->valid_steps > 0 && !ds_fra_part_size(data, DS_VALID))
        return ag_error("validation every %lld steps: the data has no validation part",
                        (long long)o->valid_steps);
    if (zoo__valid_metric_check(tr, data, o)) return -1;
    while (tr->epochs_done < o->epochs) {
        zoo_epoch_stats s;
        zoo_run_why why;
        if (run_epoch(tr, it, bos, &r, &s, &why)) return -1;
        if (why != ZOO_RUN_ON) { /* stopped inside or at the end of an epoch: save where it is */
            bool early = false;
            if (why != ZOO_RUN_EARLY && final_validation(&r, tr, it, &early)) return -1;
            if (o->checkpoint && zoo_trainer_save(tr, data, o->checkpoint)) return -1;
            if (o->plots_dir && (tr->n_hist || tr->n_valid) &&
                zoo_trainer_write_plots(tr, o->plots_dir))
                return -1;
            return why == ZOO_RUN_STOP    ? ZOO_TRAIN_STOPPED
                   : why == ZOO_RUN_EARLY ? ZOO_TRAIN_EARLY
                                          : ZOO_TRAIN_LIMIT;
        }
        elapsed += s.seconds;
        zoo__report_epoch(&r, tr, &s, elapsed, zoo__now() - r.t0, tr->epochs_done == o->epochs);
        bool early = false;
        if (tr->epochs_done == o->epochs && final_validation(&r, tr, it, &early)) return -1;
        bool periodic = o->checkpoint_every > 0 && tr->epochs_done % o->checkpoint_every == 0;
        if (o->checkpoint &&
            (periodic ? save_periodic(tr, data, o)
                      : tr->epochs_done == o->epochs && zoo_trainer_save(tr, data, o->checkpoint)))
            return -1;
    }
    if (o->plots_dir && tr->n_hist && zoo_trainer_write_plots(tr, o->plots_dir)) return -1;
    return 0;
}
