/* trainer.c -- d2l's train_seq2seq for any zoo_model, with progress, checkpoints and resume. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/trainer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autograd/ag_file.h"
#include "datasets/common.h"
#include "zoo/app/decode.h"
#include "zoo/app/dist.h"
#include "zoo/app/plot.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const zoo_recipe zoo_recipe_d2l = {.beta1 = 0.9,
                                   .beta2 = 0.999,
                                   .schedule = 0,
                                   .warmup = 0,
                                   .decay_steps = 0,
                                   .min_lr_ratio = 0,
                                   .label_smoothing = 0};

#define R(field) offsetof(zoo_recipe, field)
const zoo_field zoo_recipe_fields[] = {
    {"beta1", ZOO_REAL, R(beta1), 0, 0.9999, "Adam's beta1"},
    {"beta2", ZOO_REAL, R(beta2), 0, 0.9999, "Adam's beta2 (0.98 in the Transformer papers)"},
    {"lr-schedule", ZOO_CHOICE, R(schedule), 0, 0,
     "constant|invsqrt|cosine|linear: the learning rate after a linear warm-up of "
     "--warmup-steps (invsqrt: lr sqrt(warmup / step); cosine, linear: down to "
     "--min-lr-ratio lr at --decay-steps)"},
    {"warmup-steps", ZOO_INT, R(warmup), 0, 1e9, "warm-up steps of the schedule"},
    {"decay-steps", ZOO_I64, R(decay_steps), 0, 1e12,
     "cosine, linear: the step where the decay ends"},
    {"min-lr-ratio", ZOO_REAL, R(min_lr_ratio), 0, 1, "cosine, linear: final rate / rate"},
    {"label-smoothing", ZOO_REAL, R(label_smoothing), 0, 0.99,
     "label smoothing of the cross-entropy (PyTorch's definition)"},
};
#undef R
const int zoo_n_recipe_fields = sizeof zoo_recipe_fields / sizeof *zoo_recipe_fields;

/* Adam with lr, clipping and the recipe's betas and schedule. */
static optim_cfg adam_cfg(double lr, double clip, const zoo_recipe *r) {
    optim_cfg cfg = optim_adam(lr);
    cfg.clip_norm = clip;
    cfg.beta1 = r->beta1;
    cfg.beta2 = r->beta2;
    switch (r->schedule) {
    case 1: cfg.schedule = optim_lr_warmup_invsqrt(r->warmup); break;
    case 2:
        cfg.schedule = optim_lr_warmup_cosine(r->warmup, r->decay_steps, r->min_lr_ratio);
        break;
    case 3:
        cfg.schedule = optim_lr_warmup_linear(r->warmup, r->decay_steps, r->min_lr_ratio);
        break;
    default: break; /* constant */
    }
    return cfg;
}


/* ---- loss ---- */

void zoo_teacher_inputs(const int32_t *tgt, int B, int T, int32_t bos, int32_t *dec_in) {
    for (int b = 0; b < B; b++) {
        dec_in[(size_t)b * T] = bos;
        memcpy(dec_in + (size_t)b * T + 1, tgt + (size_t)b * T, sizeof *dec_in * (size_t)(T - 1));
    }
}

ag_tensor *zoo_seq2seq_loss(const zoo_model *m, const nn_ctx *c, void *state, const int32_t *dec_in,
                            const int32_t *tgt, const int32_t *tgt_len, int B, int T, int T_div,
                            double eps) {
    if (!m->ops->decode_features) /* no features to fuse from: the logits */
        return nn_seq_ce_loss_logits(c, m->ops->decode(m, c, state, dec_in, B, T), tgt, tgt_len,
                                     T_div, eps);
    const nn_linear *out = NULL;
    ag_tensor *h = m->ops->decode_features(m, c, state, dec_in, B, T, &out);
    return nn_seq_ce_loss(out, c, h, tgt, tgt_len, T_div, eps); /* nn picks the kernel */
}

/* One row range of every batch: a model (shard 0: the trainer's; others: replicas viewing its
 * values, with their own gradients), a tape, a dropout stream, and what its last step gave. */
struct zoo_shard {
    zoo_model *model;
    ag_tape *tape;
    ag_rng rng;
    double loss; /* the step's summed per-sequence loss */
    bool failed;
    char err[512]; /* why, copied from the worker thread's ag_last_error */
};

static zoo_trainer *trainer_of(zoo_model *model, double lr, double clip, const zoo_recipe *r) {
    zoo_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) {
        ag_error("trainer: out of memory");
        zoo_model_free(model);
        return NULL;
    }
    tr->model = model;
    tr->recipe = *r;
    tr->opt = optim_new(model->ps, adam_cfg(lr, clip, r));
    tr->tape = ag_tape_new();
    tr->shard = calloc(1, sizeof *tr->shard);
    if (!tr->opt || !tr->tape || !tr->shard) {
        if (tr->opt) ag_error("trainer: out of memory");
        zoo_trainer_free(tr);
        return NULL;
    }
    tr->shards = 1;
    tr->shard[0] = (zoo_shard){.model = model, .tape = tr->tape};
    return tr;
}

int zoo_trainer_set_recipe(zoo_trainer *tr, const zoo_recipe *r) {
    if (tr->steps) return ag_error("the recipe of a run is set before its first step");
    bool decays = r->schedule == 2 || r->schedule == 3; /* cosine, linear */
    char name[32];
    if (r->schedule && r->warmup < 1)
        return ag_error(
            "--lr-schedule %s needs --warmup-steps >= 1",
            zoo_field_format(zoo_field_find(zoo_recipe_fields, zoo_n_recipe_fields, "lr-schedule"),
                             r, name, sizeof name));
    if (decays && r->decay_steps <= r->warmup)
        return ag_error("--decay-steps %lld must be above --warmup-steps %d",
                        (long long)r->decay_steps, r->warmup);
    const optim_cfg *old = optim_config(tr->opt);
    optim *o = optim_new(tr->model->ps, adam_cfg(old->lr, old->clip_norm, r));
    if (!o) return -1;
    optim_free(tr->opt);
    tr->opt = o;
    tr->recipe = *r;
    return 0;
}

zoo_trainer *zoo_trainer_new(zoo_model *model, double lr, double clip, uint64_t seed) {
    zoo_trainer *tr = trainer_of(model, lr, clip, &zoo_recipe_d2l);
    if (tr) ag_rng_seed(&tr->rng, seed);
    return tr;
}

/* Frees shards [from, n) of sh (never shard 0, which the trainer owns directly). */
static void free_shards(zoo_shard *sh, int from, int n) {
    for (int s = from > 0 ? from : 1; s < n; s++) {
        zoo_model_free(sh[s].model);
        ag_tape_free(sh[s].tape);
    }
}

int zoo_trainer_set_shards(zoo_trainer *tr, int shards) {
    if (shards < 1 || shards > 64) return ag_error("shards: %d (expected 1 to 64)", shards);
    if (shards == tr->shards) return 0;
    zoo_shard *sh = calloc((size_t)shards, sizeof *sh);
    if (!sh) return ag_error("trainer: out of memory");
    zoo_model *m = tr->model;
    int s = 0;
    for (; s < shards && s < tr->shards; s++) sh[s] = tr->shard[s];
    for (; s < shards; s++) {
        sh[s].tape = ag_tape_new();
        sh[s].model = zoo_model_new(m->kind, m->cfg, m->src_vocab, m->tgt_vocab, 0);
        if (!sh[s].tape || !sh[s].model || nn_params_share_values(sh[s].model->ps, m->ps)) {
            if (!sh[s].tape) ag_error("trainer: out of memory");
            free_shards(sh, tr->shards, s + 1);
            free(sh);
            return -1;
        }
    }
    free_shards(tr->shard, shards, tr->shards);
    free(tr->shard);
    tr->shard = sh;
    tr->shards = shards;
    return 0;
}

int zoo_trainer_set_dist(zoo_trainer *tr, zoo_dist *d) {
    tr->dist = d;
    return 0;
}

void zoo_trainer_free(zoo_trainer *tr) {
    if (!tr) return;
    if (tr->shard) free_shards(tr->shard, 1, tr->shards); /* replicas go before the model */
    free(tr->shard);
    optim_free(tr->opt);
    ag_tape_free(tr->tape);
    zoo_model_free(tr->model);
    free(tr->hist);
    free(tr->valid);
    free(tr);
}

/* Array a of n elements of `size` bytes with room for one more (capacity *cap, doubled when
 * full): a itself, or the grown copy (a then freed), or NULL after an error (a kept). */
static void *grow(void *a, int *cap, int n, size_t size) {
    if (n < *cap) return a;
    int c = *cap ? 2 * *cap : 64;
    void *p = realloc(a, size * (size_t)c);
    if (!p) return ag_error("trainer: out of memory"), NULL;
    *cap = c;
    return p;
}

static int push_hist(zoo_trainer *tr, zoo_epoch_stats s) {
    zoo_epoch_stats *h = grow(tr->hist, &tr->cap_hist, tr->n_hist, sizeof s);
    if (!h) return -1;
    tr->hist = h;
    tr->hist[tr->n_hist++] = s;
    return 0;
}

static int push_valid(zoo_trainer *tr, zoo_valid_stats v) {
    zoo_valid_stats *h = grow(tr->valid, &tr->cap_valid, tr->n_valid, sizeof v);
    if (!h) return -1;
    tr->valid = h;
    tr->valid[tr->n_valid++] = v;
    return 0;
}

/* ---- one step ---- */

typedef struct step_job {
    zoo_trainer *tr;
    const ds_batch *b;
    int32_t bos;
    int g0, G; /* this rank's first global shard, the global shard count */
} step_job;

/* Forward and backward of rows [r0, r1) of the batch on shard sh; the loss sum in sh->loss. */
static int shard_step(zoo_shard *sh, const ds_batch *b, int r0, int r1, int32_t bos, double eps) {
    int B = r1 - r0, T = b->num_steps;
    size_t off = (size_t)r0 * T;
    zoo_model *m = sh->model;
    ag_tape *t = sh->tape;
    nn_ctx c = {.tape = t, .training = true, .rng = &sh->rng};
    int32_t *dec_in = ag_tape_alloc(t, sizeof *dec_in * (size_t)B * T);
    if (!dec_in) return -1;
    zoo_teacher_inputs(b->tgt + off, B, T, bos, dec_in);
    void *state = m->ops->encode(m, &c, b->src + off, b->src_valid_len + r0, B, T, NULL);
    ag_tensor *loss = zoo_seq2seq_loss(m, &c, state, dec_in, b->tgt + off, b->tgt_valid_len + r0, B,
                                       T, b->full_steps, eps);
    if (!loss || ag_backward(t, loss)) return -1;
    sh->loss = loss->data[0];
    return 0;
}

/* Shards [s0, s1) of the step, in one thread. */
static void run_shards(void *ctx, ptrdiff_t s0, ptrdiff_t s1) {
    step_job *j = ctx;
    int G = j->G, B = j->b->size;
    for (ptrdiff_t s = s0; s < s1; s++) {
        zoo_shard *sh = &j->tr->shard[s];
        ptrdiff_t g = j->g0 + s; /* the global shard */
        int r0 = (int)((ptrdiff_t)B * g / G), r1 = (int)((ptrdiff_t)B * (g + 1) / G);
        sh->loss = 0;
        sh->failed = r0 < r1 && shard_step(sh, j->b, r0, r1, j->bos, j->tr->recipe.label_smoothing);
        if (sh->failed) snprintf(sh->err, sizeof sh->err, "%s", ag_last_error());
    }
}

/* Adds every replica's gradients to the model's, in shard order, and zeroes them: elements
 * [i0, i1) of the flat buffers. */
static void reduce_grads(void *ctx, ptrdiff_t i0, ptrdiff_t i1) {
    zoo_trainer *tr = ctx;
    ag_real *restrict g = nn_params_grads(tr->model->ps);
    for (int s = 1; s < tr->shards; s++) {
        ag_real *restrict gs = nn_params_grads(tr->shard[s].model->ps);
        for (ptrdiff_t i = i0; i < i1; i++) g[i] += gs[i];
        memset(gs + i0, 0, sizeof *gs * (size_t)(i1 - i0));
    }
}

/* One update from batch b; its loss sum in *loss. */
static int train_step(zoo_trainer *tr, const ds_batch *b, int32_t bos, double *loss) {
    /* every rank draws the keys of all G global shards and keeps its own (trainer.h) */
    int g0 = zoo_dist_rank(tr->dist) * tr->shards, G = zoo_dist_size(tr->dist) * tr->shards;
    for (int g = 0; g < G; g++) {
        uint64_t key = ag_rng_next(&tr->rng);
        if (g >= g0 && g < g0 + tr->shards) ag_rng_seed(&tr->shard[g - g0].rng, key);
    }
    step_job job = {tr, b, bos, g0, G};
    ag_parallel_for(tr->shards, 1, run_shards, &job);
    int rc = 0;
    *loss = 0;
    for (int s = 0; s < tr->shards; s++) {
        zoo_shard *sh = &tr->shard[s];
        if (sh->failed && !rc) rc = ag_error("training step failed: %s", sh->err);
        *loss += sh->loss;
        ag_tape_reset(sh->tape);
    }
    if (rc) {
        for (int s = 0; s < tr->shards; s++) nn_params_zero_grad(tr->shard[s].model->ps);
        return rc;
    }
    if (tr->shards > 1)
        ag_parallel_for((ptrdiff_t)nn_params_flat_size(tr->model->ps), 4096, reduce_grads, tr);
    if (G > tr->shards && /* then over the ranks: the flat gradient buffer and the loss */
        (zoo_dist_sum(tr->dist, nn_params_grads(tr->model->ps),
                      nn_params_flat_size(tr->model->ps)) ||
         zoo_dist_sum_f64(tr->dist, loss, 1)))
        return -1;
    if (optim_step(tr->opt))
        return ag_error("training diverged: the gradient norm is %g at epoch %d",
                        optim_last_grad_norm(tr->opt), tr->epochs_done + 1);
    return 0;
}

/* ---- epochs, steps and stops ---- */

/* Why run_epoch returned before the end of its epoch. */
typedef enum { RUN_ON, RUN_LIMIT, RUN_STOP, RUN_EARLY } run_why;

typedef struct run_state {
    const zoo_train_opts *o; /* NULL: no limits, no progress (zoo_train_epoch) */
    const ds_fra *data;
    double t0;        /* when this call started training */
    double last_ckpt; /* when the last checkpoint of this call was written */
} run_state;

int zoo_trainer_validate(zoo_trainer *tr, const ds_fra *data, ds_part part, double *loss,
                         double *bleu) {
    enum { ROWS = 256 };
    zoo_model *m = tr->model;
    ag_tape *t = tr->tape;
    ds_batches *it;
    if (ds_batches_new_sized(data, part, false, ROWS, &it)) return -1;
    const ds_vocab *sv = ds_fra_vocab(data, DS_SRC), *tv = ds_fra_vocab(data, DS_TGT);
    int32_t bos = ds_vocab_id(tv, "<bos>");
    nn_ctx c = {.tape = t, .training = true};
    nn_eval_saved e = nn_eval_begin(&c);
    double sum = 0, tokens = 0;
    int rc = 0;
    ds_batch b;
    while (!rc && ds_batches_next(it, &b)) {
        int B = b.size, T = b.num_steps;
        int32_t *dec_in = ag_tape_alloc(t, sizeof *dec_in * (size_t)B * T);
        void *state = dec_in ? m->ops->encode(m, &c, b.src, b.src_valid_len, B, T, NULL) : NULL;
        if (state) zoo_teacher_inputs(b.tgt, B, T, bos, dec_in);
        /* the sum of the per-sequence means over T (no logits kept: the fused loss) */
        ag_tensor *l =
            state ? zoo_seq2seq_loss(m, &c, state, dec_in, b.tgt, b.tgt_valid_len, B, T, T, 0)
                  : NULL;
        if (!l) rc = ag_error_context("validation");
        else sum += (double)l->data[0] * T;
        for (int i = 0; i < B; i++) tokens += b.tgt_valid_len[i];
        ag_tape_reset(t);
    }
    nn_eval_end(&c, e);
    ds_batches_free(it);
    zoo_eval_result r;
    if (rc || zoo_evaluate(m, t, sv, tv, data, part, ds_fra_num_steps(data), &r)) return -1;
    *loss = tokens ? sum / tokens : 0;
    *bleu = r.bleu4;
    return 0;
}

double zoo_trainer_seconds(const zoo_trainer *tr) {
    double s = tr->epoch_seconds;
    for (int i = 0; i < tr->n_hist; i++) s += tr->hist[i].seconds;
    return s;
}

/* The best BLEU of the run's validations before the last one, and how many validations since
 * it (the last included). */
static double best_before_last(const zoo_trainer *tr, int *since) {
    double best = -1;
    *since = 0;
    for (int i = 0; i + 1 < tr->n_valid; i++) {
        (*since)++;
        if (tr->valid[i].bleu > best) best = tr->valid[i].bleu, *since = 0;
    }
    (*since)++;
    return best;
}

static double epoch_fraction(const zoo_trainer *tr, const ds_batches *it) {
    int64_t n = ds_batches_count(it);
    return tr->epochs_done + (n ? (double)tr->epoch_batches / (double)n : 0);
}

/* The epoch under way's loss so far (d2l's: per-sequence losses / valid tokens), 0 before its
 * first batch. */
static double running_loss(const zoo_trainer *tr) {
    return tr->epoch_tokens ? tr->epoch_loss / tr->epoch_tokens : 0;
}

/* A validation now: its line on the log, the history, the best checkpoint, the plots. Sets
 * *early when opts->patience validations went by without a better BLEU. Returns 0 or -1. */
static int validate_now(run_state *r, zoo_trainer *tr, const ds_batches *it, bool *early) {
    const zoo_train_opts *o = r->o;
    double t0 = now(), loss, bleu;
    if (zoo_trainer_validate(tr, r->data, DS_VALID, &loss, &bleu)) return -1;
    zoo_valid_stats v = {.step = tr->steps,
                         .epoch = epoch_fraction(tr, it),
                         .seconds = zoo_trainer_seconds(tr),
                         .train_loss = tr->epoch_tokens || !tr->n_hist
                                           ? running_loss(tr)
                                           : tr->hist[tr->n_hist - 1].loss,
                         .loss = loss,
                         .bleu = bleu};
    if (push_valid(tr, v)) return -1;
    int since;
    double best = best_before_last(tr, &since);
    bool better = bleu > best;
    if (better && o->best_checkpoint && zoo_trainer_save(tr, r->data, o->best_checkpoint))
        return -1;
    if (better) since = 0;
    *early = o->patience > 0 && since >= o->patience;
    if (o->log) {
        fprintf(o->log,
                "valid at step %lld (epoch %.2f): loss %.4f, BLEU-4 %.2f (best %.2f%s), "
                "%lld sentences, %.1fs\n",
                (long long)v.step, v.epoch, loss, bleu, better ? bleu : best,
                better ? (o->best_checkpoint ? ", saved" : "") : "",
                (long long)ds_fra_part_size(r->data, DS_VALID), now() - t0);
        fflush(o->log);
    }
    return o->plots_dir ? zoo_trainer_write_plots(tr, o->plots_dir) : 0;
}

/* A progress line every o->log_steps steps: step, epoch (fractional), the epoch's running loss,
 * the learning rate, tokens/sec of the epoch so far, elapsed, and the time left to the nearest
 * limit. */
/* The time left to the nearest limit: left (by the epochs), or less by --max-steps (at
 * per_step seconds a step) or by --time-budget (done: seconds since the run started). */
static double time_left(const zoo_train_opts *o, const zoo_trainer *tr, double left,
                        double per_step, double done) {
    if (o->max_steps > 0 && (double)(o->max_steps - tr->steps) * per_step < left)
        left = (double)(o->max_steps - tr->steps) * per_step;
    if (o->time_budget > 0 && o->time_budget - done < left) left = o->time_budget - done;
    return left > 0 ? left : 0;
}

static void report_step(const run_state *r, const zoo_trainer *tr, const ds_batches *it) {
    const zoo_train_opts *o = r->o;
    if (!o || !o->log || o->log_steps <= 0 || tr->steps % o->log_steps) return;
    double done = now() - r->t0, per_step = done / (double)(tr->steps ? tr->steps : 1);
    double frac = epoch_fraction(tr, it),
           left = time_left(o, tr, (o->epochs - frac) * ds_batches_count(it) * per_step,
                            per_step, done);
    fprintf(
        o->log,
        "step %lld (epoch %.2f): loss %.4f, lr %.3g, %.1f tokens/sec, elapsed %.1fs, "
        "remaining %.1fs\n",
        (long long)tr->steps, frac, running_loss(tr),
        optim_schedule_lr(optim_config(tr->opt)->schedule, optim_config(tr->opt)->lr, tr->steps),
        tr->epoch_seconds > 0 ? tr->epoch_tokens / tr->epoch_seconds : 0, done, left);
    fflush(o->log);
}

/* The checkpoints due after a step: every checkpoint_steps steps, every checkpoint_minutes. */
static int periodic_save(run_state *r, const zoo_trainer *tr) {
    const zoo_train_opts *o = r->o;
    if (!o || !o->checkpoint) return 0;
    bool due = (o->checkpoint_steps > 0 && tr->steps % o->checkpoint_steps == 0) ||
               (o->checkpoint_minutes > 0 && now() - r->last_ckpt >= 60 * o->checkpoint_minutes);
    if (!due) return 0;
    r->last_ckpt = now();
    return zoo_trainer_save(tr, r->data, o->checkpoint);
}

/* Several ranks stop after the same step: a stop signal on any rank, or a limit as rank 0 sees
 * it (its clock for the time budget). */
static int agree_stop(zoo_trainer *tr, run_why *why) {
    if (zoo_dist_size(tr->dist) == 1) return 0;
    /* an early stop as rank 0 decides it (every rank validates the same model to the same bits
     * on machines of one kind; rank 0's decision holds if another kind rounds otherwise) */
    bool root = zoo_dist_rank(tr->dist) == 0;
    int32_t v[3] = {*why == RUN_STOP, root && *why == RUN_LIMIT, root && *why == RUN_EARLY};
    if (zoo_dist_max(tr->dist, v, 3)) return -1;
    *why = v[0] ? RUN_STOP : v[2] ? RUN_EARLY : v[1] ? RUN_LIMIT : RUN_ON;
    return 0;
}

/* Batches of epoch tr->epochs_done from tr->epoch_batches on, until the epoch ends (then its
 * stats go to the history) or a limit or a stop comes (*why). Returns 0 or -1. */
static int run_epoch(zoo_trainer *tr, ds_batches *it, int32_t bos, run_state *r,
                     zoo_epoch_stats *out, run_why *why) {
    const zoo_train_opts *o = r->o;
    *why = RUN_ON;
    ds_batches_epoch(it, tr->epochs_done);
    ds_batch b;
    for (int k = 0; k < tr->epoch_batches; k++) /* the batches a stopped run already did */
        if (!ds_batches_next(it, &b))
            return ag_error("resume: the epoch has fewer than %d batches", tr->epoch_batches);
    while (ds_batches_next(it, &b)) {
        double loss, t0 = now();
        if (train_step(tr, &b, bos, &loss)) return -1;
        tr->epoch_loss += loss;
        for (int i = 0; i < b.size; i++) tr->epoch_tokens += b.tgt_valid_len[i];
        tr->epoch_seconds += now() - t0;
        tr->epoch_batches++;
        tr->steps++;
        report_step(r, tr, it);
        if (periodic_save(r, tr)) return -1;
        if (!o) continue;
        bool early = false;
        if (o->valid_steps > 0 && tr->steps % o->valid_steps == 0 &&
            validate_now(r, tr, it, &early))
            return -1;
        if (early) *why = RUN_EARLY;
        else if (o->stop && *o->stop) *why = RUN_STOP;
        else if ((o->max_steps > 0 && tr->steps >= o->max_steps) ||
                 (o->time_budget > 0 && now() - r->t0 >= o->time_budget))
            *why = RUN_LIMIT;
        if (agree_stop(tr, why)) return -1;
        if (*why != RUN_ON) return 0;
    }
    *out = (zoo_epoch_stats){
        .loss = running_loss(tr), .tokens = tr->epoch_tokens, .seconds = tr->epoch_seconds};
    if (push_hist(tr, *out)) return -1;
    tr->epochs_done++;
    tr->epoch_batches = 0;
    tr->epoch_loss = tr->epoch_tokens = tr->epoch_seconds = 0;
    return 0;
}

int zoo_train_epoch(zoo_trainer *tr, ds_batches *it, int32_t bos, zoo_epoch_stats *out) {
    run_state r = {.t0 = now()};
    run_why why;
    return run_epoch(tr, it, bos, &r, out, &why);
}

/* ---- the run ---- */

/* An epoch's line; elapsed: the training seconds of the epochs so far, done: seconds since the
 * run started (the time budget's clock). */
static void report(const zoo_train_opts *o, const zoo_trainer *tr, const zoo_epoch_stats *s,
                   double elapsed, double done, bool last) {
    if (!o->log || o->log_every <= 0) return;
    bool tty = isatty(fileno(o->log));
    if (!last && tr->epochs_done % o->log_every && !tty) return;
    double per_epoch = elapsed / (tr->epochs_done ? tr->epochs_done : 1);
    double left = time_left(o, tr, per_epoch * (o->epochs - tr->epochs_done),
                            elapsed / (double)(tr->steps ? tr->steps : 1), done);
    fprintf(o->log, "%sepoch %d/%d: loss %.4f, %.1f tokens/sec, elapsed %.1fs, remaining %.1fs%s",
            tty ? "\r" : "", tr->epochs_done, o->epochs, s->loss, s->tokens / s->seconds, elapsed,
            left, tty ? "\033[K" : "\n");
    if (tty && last) fputc('\n', o->log);
    fflush(o->log);
}

/* The validation at the end of a run (or a stop), unless the last step had one. */
static int final_validation(run_state *r, zoo_trainer *tr, const ds_batches *it, bool *early) {
    if (r->o->valid_steps <= 0 || (tr->n_valid && tr->valid[tr->n_valid - 1].step == tr->steps))
        return 0;
    return validate_now(r, tr, it, early);
}

int zoo_train(zoo_trainer *tr, const ds_fra *data, ds_batches *it, const zoo_train_opts *o) {
    int32_t bos = ds_vocab_id(ds_fra_vocab(data, DS_TGT), "<bos>");
    double elapsed = 0;
    for (int i = 0; i < tr->n_hist; i++) elapsed += tr->hist[i].seconds;
    run_state r = {.o = o, .data = data, .t0 = now()};
    r.last_ckpt = r.t0;
    if (o->valid_steps > 0 && !ds_fra_part_size(data, DS_VALID))
        return ag_error("validation every %lld steps: the data has no validation part",
                        (long long)o->valid_steps);
    while (tr->epochs_done < o->epochs) {
        zoo_epoch_stats s;
        run_why why;
        if (run_epoch(tr, it, bos, &r, &s, &why)) return -1;
        if (why != RUN_ON) { /* stopped inside or at the end of an epoch: save where it is */
            bool early = false;
            if (why != RUN_EARLY && final_validation(&r, tr, it, &early)) return -1;
            if (o->checkpoint && zoo_trainer_save(tr, data, o->checkpoint)) return -1;
            if (o->plots_dir && (tr->n_hist || tr->n_valid) &&
                zoo_trainer_write_plots(tr, o->plots_dir))
                return -1;
            return why == RUN_STOP    ? ZOO_TRAIN_STOPPED
                   : why == RUN_EARLY ? ZOO_TRAIN_EARLY
                                      : ZOO_TRAIN_LIMIT;
        }
        elapsed += s.seconds;
        report(o, tr, &s, elapsed, now() - r.t0, tr->epochs_done == o->epochs);
        bool early = false;
        if (tr->epochs_done == o->epochs && final_validation(&r, tr, it, &early)) return -1;
        bool periodic = o->checkpoint_every > 0 && tr->epochs_done % o->checkpoint_every == 0;
        if (o->checkpoint && (periodic || tr->epochs_done == o->epochs) &&
            zoo_trainer_save(tr, data, o->checkpoint))
            return -1;
    }
    if (o->plots_dir && tr->n_hist && zoo_trainer_write_plots(tr, o->plots_dir)) return -1;
    return 0;
}

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

/* The validations as text: one "step epoch seconds train_loss loss bleu" line each, exact. */
static char *valid_text(const zoo_trainer *tr) {
    size_t cap = (size_t)tr->n_valid * 140 + 1, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < tr->n_valid; i++) {
        const zoo_valid_stats *v = &tr->valid[i];
        n += (size_t)snprintf(s + n, cap - n, "%lld %.17g %.17g %.17g %.17g %.17g\n",
                              (long long)v->step, v->epoch, v->seconds, v->train_loss, v->loss,
                              v->bleu);
    }
    return s;
}

static int parse_valid(zoo_trainer *tr, const char *text, const char *file) {
    for (const char *p = text; p && *p;) {
        zoo_valid_stats v;
        long long step;
        int used = 0;
        if (sscanf(p, "%lld %lf %lf %lf %lf %lf%n", &step, &v.epoch, &v.seconds, &v.train_loss,
                   &v.loss, &v.bleu, &used) != 6 ||
            step < 0 || step > tr->steps)
            return ag_error("%s: metadata train.valid_history: malformed at validation %d", file,
                            tr->n_valid + 1);
        v.step = step;
        if (push_valid(tr, v)) return -1;
        p = strchr(p + used, '\n');
        if (p) p++;
    }
    return 0;
}

static int set_meta_double(nn_ckpt *ck, const char *key, double v) {
    char text[64];
    snprintf(text, sizeof text, "%.17g", v);
    return nn_ckpt_set_meta(ck, key, text);
}

/* A real in [min, max] from metadata key, strictly (the whole text, finite). */
static int get_meta_double(const nn_ckpt *ck, const char *key, double min, double max, double *v) {
    const char *text = nn_ckpt_meta(ck, key);
    if (!text) return ag_error("%s: metadata has no %s", nn_ckpt_source(ck), key);
    char what[4200];
    snprintf(what, sizeof what, "%s: metadata %s", nn_ckpt_source(ck), key);
    const zoo_field f = {key, ZOO_REAL, 0, min, max, ""};
    return zoo_field_parse(&f, v, text, what);
}

#define D(field) offsetof(ds_fra_options, field)
const zoo_field zoo_data_fields[] = {
    {"num-examples", ZOO_I64, D(num_examples), 0, 1e9, "lines 0..N of the file (0: all)"},
    {"batch-size", ZOO_INT, D(batch_size), 1, 1e6, "sentence pairs per step"},
    {"num-steps", ZOO_INT, D(num_steps), 1, 1e4, "tokens per sentence (truncate / pad)"},
    {"min-freq", ZOO_I64, D(min_freq), 0, 1e9, "vocabulary threshold"},
    {"seed", ZOO_U64, D(seed), 0, 18446744073709551615.0, "initialisation, dropout and shuffling"},
    {"valid-frac", ZOO_REAL, D(valid_frac), 0, 0.9, "held-out validation fraction of the pairs"},
    {"test-frac", ZOO_REAL, D(test_frac), 0, 0.9, "held-out test fraction of the pairs"},
    {"split-seed", ZOO_U64, D(split_seed), 0, 18446744073709551615.0, "seed of the held-out split"},
    {"batch-tokens", ZOO_INT, D(batch_tokens), 0, 1e8,
     "batches of at most N tokens (rows x longest pair) over length-sorted pairs, instead of "
     "--batch-size rows (0: off)"},
};
#undef D
const int zoo_n_data_fields = sizeof zoo_data_fields / sizeof *zoo_data_fields;

/* The metadata key of a field: "data.num_steps" for the data field "num-steps",
 * "train.lr_schedule" for the recipe field "lr-schedule". */
static void meta_key(const char *group, const zoo_field *f, char *key, size_t len) {
    snprintf(key, len, "%s.%s", group, f->name);
    for (char *p = key; *p; p++)
        if (*p == '-') *p = '_';
}
/* The data fractions go together in "data.split". */
static bool in_split(const zoo_field *f) { return f->type == ZOO_REAL; }

static int set_recipe_meta(nn_ckpt *ck, const zoo_recipe *r) {
    char key[64], val[64];
    for (int i = 0; i < zoo_n_recipe_fields; i++) {
        meta_key("train", &zoo_recipe_fields[i], key, sizeof key);
        if (nn_ckpt_set_meta(ck, key, zoo_field_format(&zoo_recipe_fields[i], r, val, sizeof val)))
            return -1;
    }
    return 0;
}

/* The recipe of a checkpoint (a key absent, as in checkpoints made before the recipe: d2l's). */
static int get_recipe(const nn_ckpt *ck, zoo_recipe *r) {
    char key[64], what[4200];
    for (int i = 0; i < zoo_n_recipe_fields; i++) {
        meta_key("train", &zoo_recipe_fields[i], key, sizeof key);
        const char *text = nn_ckpt_meta(ck, key);
        snprintf(what, sizeof what, "%s: metadata %s", nn_ckpt_source(ck), key);
        if (text && zoo_field_parse(&zoo_recipe_fields[i], r, text, what)) return -1;
    }
    return 0;
}

static int set_data_meta(nn_ckpt *ck, const ds_fra_options *o) {
    char split[64], key[64], val[64];
    snprintf(split, sizeof split, "%.17g %.17g", o->valid_frac, o->test_frac);
    for (int i = 0; i < zoo_n_data_fields; i++) {
        const zoo_field *f = &zoo_data_fields[i];
        if (in_split(f)) continue;
        meta_key("data", f, key, sizeof key);
        if (nn_ckpt_set_meta(ck, key, zoo_field_format(f, o, val, sizeof val))) return -1;
    }
    return nn_ckpt_set_meta(ck, "data.split", split);
}

int zoo_data_meta_read(const nn_ckpt *ck, ds_fra_options *o, const bool *only) {
    const char *file = nn_ckpt_source(ck), *split = nn_ckpt_meta(ck, "data.split");
    char key[64], what[4200], fracs[2][64] = {{0}};
    if (split && sscanf(split, "%63s %63s", fracs[0], fracs[1]) != 2)
        return ag_error("%s: metadata data.split: expected two numbers, got '%s'", file, split);
    ds_fra_options r = *o;
    for (int i = 0, k = 0; i < zoo_n_data_fields; i++) {
        const zoo_field *f = &zoo_data_fields[i];
        const char *text = in_split(f) ? (split ? fracs[k++] : NULL) : NULL;
        meta_key("data", f, key, sizeof key);
        if (!in_split(f)) text = nn_ckpt_meta(ck, key);
        snprintf(what, sizeof what, "%s: metadata %s", file, in_split(f) ? "data.split" : key);
        if (text && (!only || only[i]) && zoo_field_parse(f, &r, text, what)) return -1;
    }
    *o = r;
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
               !set_recipe_meta(ck, &tr->recipe) &&
               !nn_ckpt_set_meta(ck, "train.epoch_partial", partial) &&
               !nn_ckpt_set_meta(ck, "train.history", hist) &&
               (!tr->n_valid || !nn_ckpt_set_meta(ck, "train.valid_history", valid)) &&
               !set_data_meta(ck, ds_fra_opts(data)) &&
               !set_meta_double(ck, "train.lr", optim_config(tr->opt)->lr) &&
               !set_meta_double(ck, "train.clip", optim_config(tr->opt)->clip_norm)) {
        rc = nn_ckpt_save(ck, path);
    }
    free(hist);
    free(valid);
    nn_ckpt_free(ck);
    return rc;
}

/* The whole data options of a training checkpoint: every key must be there (but
 * data.batch_tokens, absent from checkpoints made before it: 0). */
static int get_data_meta(const nn_ckpt *ck, ds_fra_options *o) {
    char key[64];
    for (int i = 0; i < zoo_n_data_fields; i++) {
        meta_key("data", &zoo_data_fields[i], key, sizeof key);
        if (!in_split(&zoo_data_fields[i]) && strcmp(key, "data.batch_tokens") &&
            !nn_ckpt_meta(ck, key))
            return ag_error("%s: metadata has no %s", nn_ckpt_source(ck), key);
    }
    if (!nn_ckpt_meta(ck, "data.split"))
        return ag_error("%s: metadata has no data.split", nn_ckpt_source(ck));
    *o = ds_fra_defaults();
    return zoo_data_meta_read(ck, o, NULL);
}

/* train.steps and train.epoch_partial (absent in checkpoints written before them: 0 and an
 * epoch boundary). */
static int get_progress(const nn_ckpt *ck, zoo_trainer *tr) {
    const char *file = nn_ckpt_source(ck), *partial = nn_ckpt_meta(ck, "train.epoch_partial");
    int64_t steps = 0;
    if (nn_ckpt_meta(ck, "train.steps") && nn_ckpt_meta_int(ck, "train.steps", &steps)) return -1;
    if (steps < 0)
        return ag_error("%s: metadata train.steps = %lld, expected >= 0", file, (long long)steps);
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
        if (push_hist(tr, s)) return -1;
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
    double lr, clip;
    if (nn_ckpt_load(&ck, path) || get_meta_double(ck, "train.lr", 0, 10, &lr) ||
        get_meta_double(ck, "train.clip", 0, 1e30, &clip) ||
        zoo_ckpt_load_model(ck, kind, &m, &src, &tgt))
        goto fail;
    ds_vocab_free(src);
    ds_vocab_free(tgt);
    zoo_recipe recipe = zoo_recipe_d2l;
    if (get_recipe(ck, &recipe)) goto fail;
    tr = trainer_of(m, lr, clip, &recipe);
    m = NULL; /* owned by tr (or freed) */
    if (!tr || optim_load_state(tr->opt, ck) || nn_ckpt_meta_rng(ck, "train.rng", &tr->rng) ||
        nn_ckpt_meta_int(ck, "train.epochs_done", &epochs) || get_data_meta(ck, data_opts))
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

int zoo_trainer_check_data(const zoo_trainer *tr, const ds_fra *data) {
    int s = ds_vocab_size(ds_fra_vocab(data, DS_SRC)),
        t = ds_vocab_size(ds_fra_vocab(data, DS_TGT));
    if (s != tr->model->src_vocab || t != tr->model->tgt_vocab)
        return ag_error("the data gives vocabularies of %d / %d tokens, the checkpoint's "
                        "model has %d / %d",
                        s, t, tr->model->src_vocab, tr->model->tgt_vocab);
    return 0;
}

/* ---- plots ---- */

/* valid.csv and the validation curves (nothing without validations). */
static int write_valid_plots(const zoo_trainer *tr, const char *dir) {
    int n = tr->n_valid;
    if (!n) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/valid.csv", dir);
    ag_file out;
    FILE *f = ag_file_open(&out, path);
    if (!f) return -1;
    fprintf(f, "step,epoch,seconds,train_loss,valid_loss,bleu\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%lld,%.4f,%.3f,%.6f,%.6f,%.4f\n", (long long)tr->valid[i].step,
                tr->valid[i].epoch, tr->valid[i].seconds, tr->valid[i].train_loss,
                tr->valid[i].loss, tr->valid[i].bleu);
    if (ag_file_commit(&out)) return -1;
    double *steps = malloc(sizeof(double) * (size_t)n), *mins = malloc(sizeof(double) * (size_t)n),
           *bleu = malloc(sizeof(double) * (size_t)n), *loss = malloc(sizeof(double) * (size_t)n);
    int rc = 0;
    if (!steps || !mins || !bleu || !loss) rc = ag_error("plots: out of memory");
    for (int i = 0; !rc && i < n; i++) {
        steps[i] = (double)tr->valid[i].step;
        mins[i] = tr->valid[i].seconds / 60;
        bleu[i] = tr->valid[i].bleu;
        loss[i] = tr->valid[i].loss;
    }
    zoo_series sb = {"valid", steps, bleu, n}, st = {"valid", mins, bleu, n},
               sl = {"valid", steps, loss, n};
    if (!rc) snprintf(path, sizeof path, "%s/valid_bleu.svg", dir);
    if (!rc) rc = zoo_svg_lines(path, "validation BLEU-4", "step", "BLEU-4", &sb, 1, false);
    if (!rc) snprintf(path, sizeof path, "%s/valid_bleu_time.svg", dir);
    if (!rc)
        rc = zoo_svg_lines(path, "validation BLEU-4", "training minutes", "BLEU-4", &st, 1, false);
    if (!rc) snprintf(path, sizeof path, "%s/valid_loss.svg", dir);
    if (!rc) rc = zoo_svg_lines(path, "validation loss (per token)", "step", "loss", &sl, 1, true);
    free(steps);
    free(mins);
    free(bleu);
    free(loss);
    return rc;
}

int zoo_trainer_write_plots(const zoo_trainer *tr, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/loss.csv", dir);
    ag_file out; /* through a temporary file and a rename */
    FILE *f = ag_file_open(&out, path);
    if (!f) return -1;
    fprintf(f, "epoch,loss,tokens,seconds,tokens_per_sec\n");
    for (int i = 0; i < tr->n_hist; i++)
        fprintf(f, "%d,%.6f,%.0f,%.6f,%.1f\n", i + 1, tr->hist[i].loss, tr->hist[i].tokens,
                tr->hist[i].seconds, tr->hist[i].tokens / tr->hist[i].seconds);
    if (ag_file_commit(&out)) return -1;
    if (!tr->n_hist) return write_valid_plots(tr, dir);
    double *x = malloc(sizeof *x * (size_t)tr->n_hist), *y = malloc(sizeof *y * (size_t)tr->n_hist);
    if (!x || !y) {
        free(x);
        free(y);
        return ag_error("plots: out of memory");
    }
    for (int i = 0; i < tr->n_hist; i++) {
        x[i] = i + 1;
        y[i] = tr->hist[i].loss;
    }
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    zoo_series s = {"train", x, y, tr->n_hist};
    int rc = zoo_svg_lines(path, "training loss (per token)", "epoch", "loss", &s, 1, true);
    free(x);
    free(y);
    return rc ? rc : write_valid_plots(tr, dir);
}
