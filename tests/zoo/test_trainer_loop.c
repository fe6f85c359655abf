/* test_trainer_loop.c -- the shared trainer's objective and run loop on a small in-memory
 * corpus: the output layer fused with the loss against its composite (three models, label
 * smoothing, the mean over 2 T), validation (the loss per token, BLEU, when, the best
 * checkpoint), the decay's end fitted to a time budget and a run with it (its bits, its refusals,
 * its refits after validations), a token batch cut per shard.
 * The loss's value, training, resume and checkpoints: test_trainer.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/common.h"
#include "optim/optim.h"
#include "tests/tg_test.h"
#include "tests/zoo/zoo_test.h"
#include "zoo/app/decode.h"
#include "zoo/app/trainer.h"
#include "zoo/models/bahdanau.h"
#include "zoo/models/encdec.h"
#include "zoo/models/transformer.h"

static ds_fra *load(void) { return zt_corpus(4); }

/* The eight pairs in batches of 2, 2 of them held out for validation. */
static ds_fra *load_with_valid(void) {
    ds_fra_options o = ds_fra_defaults();
    o.min_freq = 1;
    o.batch_size = 2;
    o.valid_frac = 0.25;
    return zt_corpus_with(&o);
}

static zoo_trainer *new_trainer(const ds_fra *d, double dropout, uint64_t seed) {
    return zt_trainer_new(d, dropout, 0.01, seed);
}

/* ---- the output layer fused with the loss ---- */

/* The objective of one batch, as the trainer's shards compute it (zoo_seq2seq_loss): fused
 * (nn_seq_ce_loss_fused on decode_features) and composite (decode, then nn_seq_ce_loss_logits:
 * d2l's masked CE, mean, sum), for the three models, in training with dropout drawing the same
 * stream, with and without label smoothing: the same loss and the same parameter gradients up
 * to float rounding, the fused pass recording fewer nodes. This small batch is below nn's
 * threshold, so zoo_seq2seq_loss takes the composite: its bits exactly. And decode is, bit for
 * bit, the output layer applied to decode_features. */
/* The objective of batch b on tape t, in training with a dropout stream seeded 5, the way p:
 * 0: fused; 1: composite on decode's logits; 2: the trainer's zoo_seq2seq_loss (nn picks);
 * 3, 4: fused and composite with the mean over 2 T positions (a token batch cut to half). */
static ag_tensor *one_objective(zoo_model *m, ag_tape *t, const ds_batch *b, const int32_t *dec_in,
                                int p, double eps) {
    const int B = b->size, T = b->num_steps, T_div = p < 3 ? T : 2 * T;
    ag_rng rng;
    ag_rng_seed(&rng, 5);
    nn_ctx c = {.tape = t, .training = true, .rng = &rng};
    void *s = m->ops->encode(m, &c, b->src, b->src_valid_len, B, T, NULL);
    if (p == 2)
        return zoo_seq2seq_loss(m, &c, s, dec_in, b->tgt, b->tgt_valid_len, B, T, T_div, eps);
    if (p == 1 || p == 4)
        return nn_seq_ce_loss_logits(&c, m->ops->decode(m, &c, s, dec_in, B, T), b->tgt,
                                     b->tgt_valid_len, T_div, eps);
    const nn_linear *out = NULL;
    ag_tensor *h = m->ops->decode_features(m, &c, s, dec_in, B, T, &out);
    return nn_seq_ce_loss_fused(out, &c, h, b->tgt, b->tgt_valid_len, T_div, eps);
}

/* decode = the output layer on decode_features, bit for bit (evaluation). */
static void decode_is_features_then_layer(zoo_model *m, const ds_batch *b, const int32_t *dec_in,
                                          int TV) {
    const int B = b->size, T = b->num_steps;
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    void *s = m->ops->encode(m, &c, b->src, b->src_valid_len, B, T, NULL);
    ag_tensor *y = m->ops->decode(m, &c, s, dec_in, B, T);
    const nn_linear *out = NULL;
    ag_tensor *h = m->ops->decode_features(m, &c, s, dec_in, B, T, &out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    ag_tensor *y2 = nn_linear_forward(out, &c, h);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    CU_ASSERT_EQUAL(h->ndim, 3);
    CU_ASSERT_EQUAL(y->numel, (ptrdiff_t)B * T * TV);
    CU_ASSERT_EQUAL(y2->numel, y->numel);
    CU_ASSERT_EQUAL(memcmp(y->data, y2->data, sizeof *y->data * (size_t)y->numel), 0);
    ag_tape_free(t);
}

static void test_fused_loss_same_objective(void) {
    ds_fra *d = load();
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    ds_batches *it;
    ds_batch b;
    CU_ASSERT_EQUAL_FATAL(ds_batches_new(d, DS_TRAIN, false, &it), 0);
    CU_ASSERT_FATAL(ds_batches_next(it, &b));
    const int B = b.size, T = b.num_steps, SV = ds_vocab_size(ds_fra_vocab(d, DS_SRC)),
              TV = ds_vocab_size(ds_fra_vocab(d, DS_TGT));
    int32_t *dec_in = malloc(sizeof *dec_in * (size_t)B * T);
    zoo_teacher_inputs(b.tgt, B, T, 1, dec_in);
    zoo_transformer_cfg th = zt_tiny_transformer(0.2);
    zoo_bahdanau_cfg bh = zoo_bahdanau_default_cfg;
    bh.embed = 8;
    bh.hiddens = 16;
    bh.dropout = 0.2;
    zoo_encdec_cfg eh = zoo_encdec_default_cfg;
    eh.embed = 8;
    eh.hiddens = 16;
    eh.dropout = 0.2;
    const zoo_model_kind *kinds[3] = {&zoo_transformer_kind, &zoo_bahdanau_kind, &zoo_encdec_kind};
    const void *cfgs[3] = {&th, &bh, &eh};
    for (int k = 0; k < 3; k++) {
        zoo_model *m = zoo_model_new(kinds[k], cfgs[k], SV, TV, 11);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m->ops->decode_features);
        size_t P = nn_params_flat_size(m->ps);
        ag_real *g[5];
        for (int p = 0; p < 5; p++) g[p] = malloc(sizeof **g * P);
        for (int e = 0; e < 2; e++) {
            double loss[5], eps = e ? 0.1 : 0;
            size_t nodes[5];
            /* the five ways of one_objective */
            for (int p = 0; p < 5; p++) {
                ag_tape *t = ag_tape_new();
                ag_tensor *l = one_objective(m, t, &b, dec_in, p, eps);
                CU_ASSERT_PTR_NOT_NULL_FATAL(l);
                CU_ASSERT_EQUAL(l->numel, 1);
                CU_ASSERT_EQUAL(ag_backward(t, l), 0);
                loss[p] = l->data[0];
                nodes[p] = ag_tape_stats_get(t).nodes;
                memcpy(g[p], nn_params_grads(m->ps), sizeof **g * P);
                nn_params_zero_grad(m->ps);
                ag_tape_free(t);
            }
            CU_ASSERT(loss[1] > 0);
            CU_ASSERT_DOUBLE_EQUAL(loss[0], loss[1], 1e-5 * loss[1]);
            CU_ASSERT(nodes[0] < nodes[1]);
            double gmax = 0, diff = 0;
            for (size_t i = 0; i < P; i++) {
                gmax = fmax(gmax, fabs(g[1][i]));
                diff = fmax(diff, fabs(g[0][i] - g[1][i]));
            }
            CU_ASSERT(gmax > 0);
            CU_ASSERT(diff <= 1e-4 * gmax);
            if (!(diff <= 1e-4 * gmax) || fabs(loss[0] - loss[1]) > 1e-5 * loss[1])
                fprintf(stderr, "\n  %s, eps %g: loss %.9g vs %.9g, gradients %g of %g\n",
                        kinds[k]->name, eps, loss[0], loss[1], diff, gmax);
            /* B T V is far below the threshold: the composite, to the bit */
            CU_ASSERT((double)B * T * TV < NN_SEQ_CE_FUSED_MIN_LOGITS);
            CU_ASSERT_EQUAL(loss[2], loss[1]);
            CU_ASSERT_EQUAL(memcmp(g[2], g[1], sizeof **g * P), 0);
            /* the mean over 2 T: half the objective, on either path */
            CU_ASSERT_DOUBLE_EQUAL(loss[3], loss[1] / 2, 1e-5 * loss[1]);
            CU_ASSERT_DOUBLE_EQUAL(loss[4], loss[1] / 2, 1e-5 * loss[1]);
        }
        decode_is_features_then_layer(m, &b, dec_in, TV);
        for (int p = 0; p < 5; p++) free(g[p]);
        zoo_model_free(m);
    }
    free(dec_in);
    ds_batches_free(it);
    ds_fra_free(d);
}

/* Validation: the loss is the cross-entropy per valid target token of the held-out pairs (the
 * composite on the whole part at once gives the same value), the BLEU is zoo_evaluate's, and
 * zoo_train records one validation every valid_steps steps and one at the end, with the best
 * checkpoint written at each new best. */
static void test_validation(void) {
    ds_fra *d = load_with_valid();
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    zoo_trainer *tr = new_trainer(d, 0.1, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    double loss = -1;
    zoo_eval_result v;
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_validate(tr, d, DS_VALID, &loss, &v), 0);
    /* the reference: decode the 2 pairs at once, masked cross-entropy, no dropout */
    ds_batches *it;
    ds_batch b;
    CU_ASSERT_EQUAL_FATAL(ds_batches_new_sized(d, DS_VALID, false, 2, &it), 0);
    CU_ASSERT_FATAL(ds_batches_next(it, &b));
    int B = b.size, T = b.num_steps;
    int32_t dec_in[2 * 10];
    zoo_teacher_inputs(b.tgt, B, T, ds_vocab_id(ds_fra_vocab(d, DS_TGT), "<bos>"), dec_in);
    nn_ctx c = {.tape = tr->tape};
    zoo_model *m = tr->model;
    void *st = m->ops->encode(m, &c, b.src, b.src_valid_len, B, T, NULL);
    ag_tensor *l =
        nn_masked_ce(&c, m->ops->decode(m, &c, st, dec_in, B, T), b.tgt, b.tgt_valid_len, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    double want = (l->data[0] + l->data[1]) * T / (b.tgt_valid_len[0] + b.tgt_valid_len[1]);
    CU_ASSERT_DOUBLE_EQUAL(loss, want, 1e-5 * want);
    ag_tape_reset(tr->tape);
    ds_batches_free(it);
    zoo_eval_result r;
    CU_ASSERT_EQUAL(zoo_evaluate(m, tr->tape, ds_fra_vocab(d, DS_SRC), ds_fra_vocab(d, DS_TGT), d,
                                 DS_VALID, T, &r),
                    0);
    CU_ASSERT_EQUAL(v.bleu4, r.bleu4);
    CU_ASSERT_EQUAL(v.sacrebleu, r.sacrebleu);
    CU_ASSERT_EQUAL(v.sacre_chrf, r.sacre_chrf);
    /* in a run: 3 batches an epoch, 2 epochs, every 2 steps: steps 2, 4, 6 (the end) */
    char *best = tg_temp_file("", 0);
    CU_ASSERT_EQUAL_FATAL(ds_batches_new(d, DS_TRAIN, true, &it), 0);
    zoo_train_opts to = {.epochs = 2, .valid_steps = 2, .best_checkpoint = best};
    CU_ASSERT_EQUAL(zoo_train(tr, d, it, &to), 0);
    CU_ASSERT_EQUAL(tr->n_valid, 3);
    for (int i = 0; i < tr->n_valid && i < 3; i++) {
        CU_ASSERT_EQUAL(tr->valid[i].step, 2 * (i + 1));
        CU_ASSERT(tr->valid[i].loss > 0 && tr->valid[i].bleu >= 0);
    }
    struct stat sb;
    CU_ASSERT(stat(best, &sb) == 0 && sb.st_size > 0); /* the first validation is a best */
    /* a part without pairs is refused before any step */
    zoo_trainer *t2 = new_trainer(d, 0.1, 4);
    ds_fra *d0 = load(); /* no split */
    zoo_train_opts bad = {.epochs = 1, .valid_steps = 1};
    TG_EXPECT_ERROR(zoo_train(t2, d0, it, &bad), "the data has no validation part");
    CU_ASSERT_EQUAL(t2->steps, 0);
    tg_remove(best);
    zoo_trainer_free(t2);
    ds_fra_free(d0);
    ds_batches_free(it);
    zoo_trainer_free(tr);
    ds_fra_free(d);
}

/* ---- token batches cut per shard ---- */

/* A token batch's shard is cut to its rows' longest valid lengths (targets always; sources, as
 * the Transformer's encoding ignores padding): the step's objective is the uncut one up to
 * rounding. One batch of the eight pairs (sources of 4 columns at most, in 6: they are cut),
 * a trainer of 2 shards without dropout: the loss its epoch of that batch reports and its
 * gradient norm against the objective of the whole batch at its full width, computed on the
 * same parameters first. */
static void test_token_batch_cut(void) {
    ds_fra_options fo = ds_fra_defaults();
    fo.min_freq = 1;
    fo.batch_tokens = 1000; /* the eight pairs in one batch */
    ds_fra *d = zt_corpus_with(&fo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    ds_batches *it;
    ds_batch b;
    CU_ASSERT_EQUAL_FATAL(ds_batches_new(d, DS_TRAIN, false, &it), 0);
    CU_ASSERT_EQUAL(ds_batches_count(it), 1);
    CU_ASSERT_FATAL(ds_batches_next(it, &b));
    const int B = b.size, T = b.num_steps;
    CU_ASSERT(b.by_tokens);
    CU_ASSERT_EQUAL_FATAL(B, 8);
    CU_ASSERT_EQUAL_FATAL(T, 6); /* "je suis chez moi ." <eos> */
    int src_max = 0;
    for (int i = 0; i < B; i++)
        if (b.src_valid_len[i] > src_max) src_max = b.src_valid_len[i];
    CU_ASSERT_EQUAL(src_max, 4);
    zoo_trainer *tr = new_trainer(d, 0, 6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    CU_ASSERT_EQUAL(zoo_trainer_set_shards(tr, 2), 0);
    zoo_model *m = tr->model;
    int32_t bos = ds_vocab_id(ds_fra_vocab(d, DS_TGT), "<bos>"), dec_in[8 * 6];
    zoo_teacher_inputs(b.tgt, B, T, bos, dec_in);
    ag_rng rng;
    ag_rng_seed(&rng, 1);
    nn_ctx c = {.tape = tr->tape, .training = true, .rng = &rng};
    void *st = m->ops->encode(m, &c, b.src, b.src_valid_len, B, T, NULL);
    ag_tensor *l = zoo_seq2seq_loss(m, &c, st, dec_in, b.tgt, b.tgt_valid_len, B, T, b.full_steps,
                                    tr->recipe.label_smoothing);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_EQUAL_FATAL(ag_backward(tr->tape, l), 0);
    double want = l->data[0], g2 = 0;
    const ag_real *g = nn_params_grads(m->ps);
    for (size_t i = 0; i < nn_params_flat_size(m->ps); i++) g2 += (double)g[i] * g[i];
    ag_tape_reset(tr->tape);
    nn_params_zero_grad(m->ps);
    zoo_epoch_stats e;
    CU_ASSERT_EQUAL(zoo_train_epoch(tr, it, bos, &e), 0);
    CU_ASSERT(want > 0 && g2 > 0);
    CU_ASSERT_DOUBLE_EQUAL(e.loss * e.tokens, want, 1e-5 * want);
    CU_ASSERT_DOUBLE_EQUAL(optim_last_grad_norm(tr->opt), sqrt(g2), 1e-5 * sqrt(g2));
    zoo_trainer_free(tr);
    ds_batches_free(it);
    ds_fra_free(d);
}

/* ---- the decay fitted to the time budget ---- */

/* A trainer of the tiny model, linear warm-up 4 then decay to 0 at `decay`. */
static zoo_trainer *linear_trainer(const ds_fra *d, int64_t decay) {
    zoo_trainer *tr = new_trainer(d, 0.1, 5);
    zoo_recipe r = tr->recipe;
    r.schedule = ZOO_SCHEDULE_LINEAR;
    r.warmup = 4;
    r.decay_steps = decay;
    r.min_lr_ratio = 0;
    CU_ASSERT_EQUAL(zoo_trainer_set_recipe(tr, &r), 0);
    return tr;
}

static int run_opts(zoo_trainer *tr, const ds_fra *d, const zoo_train_opts *o) {
    ds_batches *it;
    if (ds_batches_new(d, DS_TRAIN, true, &it)) return -1;
    int rc = zoo_train(tr, d, it, o);
    ds_batches_free(it);
    return rc;
}

static void test_fit_decay_end(void) {
    /* warm-up over at step 100 after 100 steps in 50 s: 3550 s more hold 7100 steps */
    CU_ASSERT_EQUAL(zoo_fit_decay_end(100, 100, 50, 3600, 0), 7200);
    CU_ASSERT_EQUAL(zoo_fit_decay_end(100, 40, 50, 3600, 0), 100 + 2840); /* a resumed call */
    CU_ASSERT_EQUAL(zoo_fit_decay_end(100, 100, 50, 3600, 5000), 5000);   /* --max-steps */
    CU_ASSERT_EQUAL(zoo_fit_decay_end(100, 100, 50, 3600, 100), 7200);    /* not above: none */
    CU_ASSERT_EQUAL(zoo_fit_decay_end(100, 100, 50, 50.4, 0), 101);       /* no time left */
    CU_ASSERT_EQUAL(zoo_fit_decay_end(100, 100, 3700, 3600, 0), 101);
    CU_ASSERT_EQUAL(zoo_fit_decay_end(100, 0, 0, 3600, 0), 101);
    CU_ASSERT_EQUAL(zoo_fit_decay_end(10, 10, 1e-9, 1e9, 0), INT32_MAX);
    CU_ASSERT_TRUE(zoo_fit_decay_possible(3600, ZOO_SCHEDULE_LINEAR));
    CU_ASSERT_TRUE(zoo_fit_decay_possible(0.5, ZOO_SCHEDULE_COSINE));
    CU_ASSERT_FALSE(zoo_fit_decay_possible(0, ZOO_SCHEDULE_LINEAR));     /* no budget */
    CU_ASSERT_FALSE(zoo_fit_decay_possible(3600, ZOO_SCHEDULE_INVSQRT)); /* no decay to fit */
    CU_ASSERT_FALSE(zoo_fit_decay_possible(3600, ZOO_SCHEDULE_CONSTANT));
}

/* Capped by max_steps, a fitted run is the run with that decay: the same bits. Past its end it
 * refuses to train on; a budget alone fits an end that stops the run at rate 0 (or the budget
 * stops it first). */
static void test_fit_decay_run(void) {
    ds_fra *d = load();
    zoo_trainer *fit = linear_trainer(d, 1000), *plain = linear_trainer(d, 12);
    FILE *log = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    zoo_train_opts o = {
        .epochs = 100, .max_steps = 12, .time_budget = 3600, .fit_decay = true, .log = log};
    CU_ASSERT_EQUAL(run_opts(fit, d, &o), ZOO_TRAIN_LIMIT);
    zoo_train_opts p = {.epochs = 100, .max_steps = 12};
    CU_ASSERT_EQUAL(run_opts(plain, d, &p), ZOO_TRAIN_LIMIT);
    CU_ASSERT_EQUAL(fit->steps, 12);
    CU_ASSERT_EQUAL(fit->recipe.decay_steps, 12);
    CU_ASSERT_EQUAL(optim_config(fit->opt)->schedule.total, 12);
    size_t n = nn_params_flat_size(fit->model->ps);
    CU_ASSERT_EQUAL(memcmp(nn_params_values(fit->model->ps), nn_params_values(plain->model->ps),
                           n * sizeof(ag_real)),
                    0);
    char line[512] = "";
    rewind(log);
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, log));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "schedule: the warm-up ended at step 4 after "));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "the decay ends at step 12, --max-steps (--decay-steps "
                                        "12 --max-steps 12 repeat it)"));
    fclose(log);
    /* at its end: nothing to train, with or without --max-steps */
    o.max_steps = 0;
    o.log = NULL;
    TG_EXPECT_ERROR(run_opts(fit, d, &o), "the run is at step 12, where it ends (its decay 12)");
    CU_ASSERT_EQUAL(fit->steps, 12);
    /* refused without a budget or a decaying schedule */
    zoo_trainer *t = linear_trainer(d, 1000);
    o.time_budget = 0;
    TG_EXPECT_ERROR(run_opts(t, d, &o), "--fit-decay needs --time-budget and --lr-schedule "
                                        "linear or cosine (they are 0 and linear)");
    zoo_recipe r = t->recipe;
    r.schedule = ZOO_SCHEDULE_INVSQRT;
    CU_ASSERT_EQUAL(zoo_trainer_set_recipe(t, &r), 0);
    o.time_budget = 1;
    TG_EXPECT_ERROR(run_opts(t, d, &o), "(they are 1 and invsqrt)");
    CU_ASSERT_EQUAL(t->steps, 0);
    zoo_trainer_free(t);
    /* a budget of 0.5 s: an end fitted after the warm-up, the run stopped there (at rate 0) or
     * by the budget before it */
    t = linear_trainer(d, 1000);
    o.time_budget = 0.5;
    o.epochs = 1000000;
    CU_ASSERT_EQUAL(run_opts(t, d, &o), ZOO_TRAIN_LIMIT);
    CU_ASSERT(t->recipe.decay_steps > 4 && t->steps <= t->recipe.decay_steps);
    CU_ASSERT_EQUAL(optim_config(t->opt)->schedule.total, t->recipe.decay_steps);
    if (t->steps == t->recipe.decay_steps) CU_ASSERT_EQUAL(optim_lr(t->opt), 0);
    zoo_trainer_free(t);
    zoo_trainer_free(fit);
    zoo_trainer_free(plain);
    ds_fra_free(d);
}

/* Refits: after each validation of the call that fitted the end at the warm-up's, the end is
 * fitted again at the pace so far. Each move on the log starts from the end before it, at a
 * validation's step; the last is the recipe's and the optimizer's, and the run stops at or
 * before it. The warm-up's pace holds one validation in 4 steps, the rest one in 3, so the end
 * moves. A capped run's refits all give max_steps: the run with that decay, bit for bit. A later
 * call (a resume) keeps the end it has. */
static void test_fit_decay_refit(void) {
    ds_fra *d = load_with_valid();
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    zoo_trainer *t = linear_trainer(d, 1000);
    FILE *log = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    zoo_train_opts o = {
        .epochs = 1000000, .time_budget = 0.5, .fit_decay = true, .valid_steps = 3, .log = log};
    CU_ASSERT_EQUAL(run_opts(t, d, &o), ZOO_TRAIN_LIMIT);
    rewind(log);
    char line[512];
    long long end = -1, at, from, to;
    int moves = 0;
    while (fgets(line, sizeof line, log)) {
        const char *p = strstr(line, "the decay ends at step ");
        if (!strncmp(line, "schedule: the warm-up ended at step 4 after ", 44) && p) {
            CU_ASSERT_EQUAL(end, -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(line, "(fitted again after each validation)"));
            end = atoll(p + 23);
        } else if (sscanf(line,
                          "schedule: at step %lld after %*fs (%*fs a step), the decay's end "
                          "moves from step %lld to %lld, ",
                          &at, &from, &to) == 3) {
            CU_ASSERT(at > 4 && at % 3 == 0 && at < to);
            CU_ASSERT_EQUAL(from, end);
            end = to;
            moves++;
        }
    }
    CU_ASSERT(moves >= 1);
    CU_ASSERT_EQUAL(t->recipe.decay_steps, end);
    CU_ASSERT_EQUAL(optim_config(t->opt)->schedule.total, end);
    CU_ASSERT(t->steps <= end);
    /* a later call: no fit of its own, it trains on to the end it has (or says it is there) */
    o.log = NULL;
    if (t->steps == end) {
        TG_EXPECT_ERROR(run_opts(t, d, &o), "nothing to train");
    } else {
        CU_ASSERT_EQUAL(run_opts(t, d, &o), ZOO_TRAIN_LIMIT);
        CU_ASSERT(t->steps <= end);
    }
    CU_ASSERT_EQUAL(t->recipe.decay_steps, end);
    fclose(log);
    zoo_trainer_free(t);
    /* capped: validations and refits at 12, the plain run's bits */
    zoo_trainer *fit = linear_trainer(d, 1000), *plain = linear_trainer(d, 12);
    o = (zoo_train_opts){
        .epochs = 100, .max_steps = 12, .time_budget = 3600, .fit_decay = true, .valid_steps = 3};
    CU_ASSERT_EQUAL(run_opts(fit, d, &o), ZOO_TRAIN_LIMIT);
    zoo_train_opts p = {.epochs = 100, .max_steps = 12};
    CU_ASSERT_EQUAL(run_opts(plain, d, &p), ZOO_TRAIN_LIMIT);
    CU_ASSERT_EQUAL(fit->n_valid, 4);
    CU_ASSERT_EQUAL(fit->recipe.decay_steps, 12);
    size_t n = nn_params_flat_size(fit->model->ps);
    CU_ASSERT_EQUAL(memcmp(nn_params_values(fit->model->ps), nn_params_values(plain->model->ps),
                           n * sizeof(ag_real)),
                    0);
    zoo_trainer_free(fit);
    zoo_trainer_free(plain);
    ds_fra_free(d);
}

static CU_TestInfo tests[] = {
    {"the output layer fused with the loss: the same objective", test_fused_loss_same_objective},
    {"validation: loss per token, BLEU, when, the best checkpoint", test_validation},
    {"a token batch cut per shard: the uncut step's objective", test_token_batch_cut},
    {"the decay's end fitted to a time budget", test_fit_decay_end},
    {"a run with its decay fitted: the run with that decay; its refusals", test_fit_decay_run},
    {"the decay's end fitted again after each validation", test_fit_decay_refit},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("trainer loop", tests); }
