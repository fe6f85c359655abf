/* trainer.c -- the one trainer of every zoo_model: the trainer, its shards and one step
 * (trainer.h). The loop and its stops: train_loop.c; validation: validate.c; checkpoints:
 * trainer_ckpt.c; progress lines and plots: report.c. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/trainer_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/ag_op.h"
#include "zoo/app/dist.h"
#include "zoo/app/run_cfg.h"

double zoo__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Adam with the recipe's learning rate, clipping, betas and schedule. */
static optim_cfg adam_cfg(const zoo_recipe *r) {
    optim_cfg cfg = optim_adam(r->lr);
    cfg.clip_norm = r->clip;
    cfg.beta1 = r->beta1;
    cfg.beta2 = r->beta2;
    switch (r->schedule) {
    case ZOO_SCHEDULE_INVSQRT: cfg.schedule = optim_lr_warmup_invsqrt(r->warmup); break;
    case ZOO_SCHEDULE_COSINE:
        cfg.schedule = optim_lr_warmup_cosine(r->warmup, r->decay_steps, r->min_lr_ratio);
        break;
    case ZOO_SCHEDULE_LINEAR:
        cfg.schedule = optim_lr_warmup_linear(r->warmup, r->decay_steps, r->min_lr_ratio);
        break;
    case ZOO_SCHEDULE_CONSTANT: break;
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
};

zoo_trainer *zoo__trainer_of(zoo_model *model, const zoo_recipe *r) {
    zoo_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) {
        ag_error("trainer: out of memory");
        zoo_model_free(model);
        return NULL;
    }
    tr->model = model;
    tr->recipe = *r;
    tr->opt = optim_new(model->ps, adam_cfg(r));
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
    bool decays = r->schedule == ZOO_SCHEDULE_COSINE || r->schedule == ZOO_SCHEDULE_LINEAR;
    if (r->schedule < 0 || r->schedule > ZOO_SCHEDULE_LINEAR)
        return ag_error("--lr-schedule: %d is not a schedule", r->schedule);
    if (r->schedule != ZOO_SCHEDULE_CONSTANT && r->warmup < 1)
        return ag_error("--lr-schedule %s needs --warmup-steps >= 1",
                        zoo_schedule_names[r->schedule]);
    if (decays && r->decay_steps <= r->warmup)
        return ag_error("--decay-steps %lld must be above --warmup-steps %d",
                        (long long)r->decay_steps, r->warmup);
    if (r->precision != ZOO_PRECISION_FP32 && r->precision != ZOO_PRECISION_BF16)
        return ag_error("--precision: %d is not fp32 or bf16 (auto is resolved before the "
                        "trainer: zoo_precision_auto)",
                        r->precision);
    if (r->valid_metric < ZOO_METRIC_AUTO || r->valid_metric > ZOO_METRIC_SACREBLEU)
        return ag_error("--valid-metric: %d is not a score (auto, bleu4, sacrebleu)",
                        r->valid_metric);
    optim *o = optim_new(tr->model->ps, adam_cfg(r));
    if (!o) return -1;
    optim_free(tr->opt);
    tr->opt = o;
    tr->recipe = *r;
    return 0;
}

int zoo_precision_auto(void) { return ag_bf16_faster() ? ZOO_PRECISION_BF16 : ZOO_PRECISION_FP32; }

zoo_trainer *zoo_trainer_new(zoo_model *model, double lr, double clip, uint64_t seed) {
    zoo_recipe r = zoo_recipe_d2l;
    r.lr = lr;
    r.clip = clip;
    zoo_trainer *tr = zoo__trainer_of(model, &r);
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
    ds_vocab_free(tr->vocab[0]);
    ds_vocab_free(tr->vocab[1]);
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

int zoo__push_hist(zoo_trainer *tr, zoo_epoch_stats s) {
    zoo_epoch_stats *h = grow(tr->hist, &tr->cap_hist, tr->n_hist, sizeof s);
    if (!h) return -1;
    tr->hist = h;
    tr->hist[tr->n_hist++] = s;
    return 0;
}

int zoo__push_valid(zoo_trainer *tr, zoo_valid_stats v) {
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

/* The longest of n valid lengths, at least 1, at most T. */
static int longest(const int32_t *len, int n, int T) {
    int l = 1;
    for (int i = 0; i < n; i++)
        if (len[i] > l) l = len[i];
    return l < T ? l : T;
}

/* ids (B, T) row-major cut to their first L columns: (B, L) on tape t, or ids when L = T. */
static const int32_t *cut_columns(ag_tape *t, const int32_t *ids, int B, int T, int L) {
    if (L == T) return ids;
    int32_t *out = ag_tape_alloc(t, sizeof *out * (size_t)B * L);
    if (out)
        for (int b = 0; b < B; b++)
            memcpy(out + (size_t)b * L, ids + (size_t)b * T, sizeof *out * (size_t)L);
    return out;
}

/* Forward and backward of rows [r0, r1) of the batch on shard sh; the loss sum in sh->loss.
 * In a token batch the shard's targets are cut to their longest valid length (decoders are
 * causal and the loss skips padding), and so are its sources when the model's encoding ignores
 * the padding (zoo_model_ops.pad_free): the same objective, up to rounding, in fewer rows. */
static int shard_step(zoo_shard *sh, const ds_batch *b, int r0, int r1, int32_t bos, double eps) {
    int B = r1 - r0, T = b->num_steps, Ts = T, Tt = T;
    size_t off = (size_t)r0 * T;
    zoo_model *m = sh->model;
    ag_tape *t = sh->tape;
    const int32_t *src_len = b->src_valid_len + r0, *tgt_len = b->tgt_valid_len + r0;
    if (b->by_tokens) {
        Tt = longest(tgt_len, B, T);
        if (m->ops->pad_free) Ts = longest(src_len, B, T);
    }
    const int32_t *src = cut_columns(t, b->src + off, B, T, Ts),
                  *tgt = cut_columns(t, b->tgt + off, B, T, Tt);
    nn_ctx c = {.tape = t, .training = true, .rng = &sh->rng};
    int32_t *dec_in = ag_tape_alloc(t, sizeof *dec_in * (size_t)B * Tt);
    if (!src || !tgt || !dec_in) return -1;
    zoo_teacher_inputs(tgt, B, Tt, bos, dec_in);
    void *state = m->ops->encode(m, &c, src, src_len, B, Ts, NULL);
    ag_tensor *loss =
        zoo_seq2seq_loss(m, &c, state, dec_in, tgt, tgt_len, B, Tt, b->full_steps, eps);
    if (!loss || ag_backward(t, loss)) return -1;
    sh->loss = loss->data[0];
    return 0;
}

/* Shards [s0, s1) of the step, in one thread. */
/* Task s of a step (ag_run_tasks): the forward and backward of shard s's rows, on the shard's
 * own tape. */
static int shard_task(void *ctx, int s, int thread) {
    step_job *j = ctx;
    (void)thread;
    int G = j->G, B = j->b->size, g = j->g0 + s; /* the global shard */
    int r0 = (int)((ptrdiff_t)B * g / G), r1 = (int)((ptrdiff_t)B * (g + 1) / G);
    zoo_shard *sh = &j->tr->shard[s];
    return r0 < r1 ? shard_step(sh, j->b, r0, r1, j->bos, j->tr->recipe.label_smoothing) : 0;
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

int zoo__train_step(zoo_trainer *tr, const ds_batch *b, int32_t bos, double *loss) {
    /* every rank draws the keys of all G global shards and keeps its own (trainer.h) */
    int g0 = zoo_dist_rank(tr->dist) * tr->shards, G = zoo_dist_size(tr->dist) * tr->shards;
    for (int g = 0; g < G; g++) {
        uint64_t key = ag_rng_next(&tr->rng);
        if (g >= g0 && g < g0 + tr->shards) ag_rng_seed(&tr->shard[g - g0].rng, key);
    }
    step_job job = {tr, b, bos, g0, G};
    for (int s = 0; s < tr->shards; s++) tr->shard[s].loss = 0;
    int rc = ag_run_tasks(tr->shards, shard_task, &job, NULL);
    if (rc) rc = ag_error_context("training step failed"); /* the first failed shard's error */
    *loss = 0;
    for (int s = 0; s < tr->shards; s++) {
        *loss += tr->shard[s].loss;
        ag_tape_reset(tr->shard[s].tape);
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
