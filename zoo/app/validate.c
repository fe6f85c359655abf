/* validate.c -- validation during training: the loss per token (teacher forcing), corpus BLEU-4
 * and the standard score (sacreBLEU, chrF) of greedy translations on a held-out part, the best
 * checkpoint and patience by the run's metric (trainer.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/trainer_internal.h"

#include <stdio.h>

#include "zoo/app/decode.h"

const char *const zoo_valid_metric_names[] = {"auto", "bleu4", "sacrebleu", NULL};

double zoo_valid_score(const zoo_valid_stats *v, int metric) {
    if (metric == ZOO_METRIC_SACREBLEU) return v->standard ? v->sacrebleu : -1;
    return v->bleu;
}

int zoo_valid_metric_auto(const ds_fra *data) {
    return ds_vocab_codec(ds_fra_vocab(data, DS_TGT)) ? ZOO_METRIC_SACREBLEU : ZOO_METRIC_BLEU4;
}

int zoo_trainer_validate(zoo_trainer *tr, const ds_fra *data, ds_part part, double *loss,
                         zoo_eval_result *scores) {
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
    if (rc || zoo_evaluate(m, t, sv, tv, data, part, ds_fra_num_steps(data), scores)) return -1;
    *loss = tokens ? sum / tokens : 0;
    return 0;
}

int zoo__valid_metric_check(zoo_trainer *tr, const ds_fra *data, const zoo_train_opts *o) {
    if (tr->recipe.valid_metric == ZOO_METRIC_AUTO)
        tr->recipe.valid_metric = zoo_valid_metric_auto(data);
    if (o->valid_steps <= 0 || tr->recipe.valid_metric != ZOO_METRIC_SACREBLEU) return 0;
    for (int i = 0; i < tr->n_valid; i++)
        if (!tr->valid[i].standard)
            return ag_error("--valid-metric sacrebleu: validation %d of the run (step %lld) was "
                            "recorded without sacreBLEU; this run can only choose by bleu4",
                            i + 1, (long long)tr->valid[i].step);
    int64_t n = ds_fra_part_size(data, DS_VALID), refs = 0;
    const int64_t *pairs = ds_fra_part_pairs(data, DS_VALID);
    for (int64_t i = 0; i < n && !refs; i++)
        refs += ds_fra_raw(data, DS_TGT, pairs[i], NULL)[0] != 0;
    if (!refs)
        return ag_error("--valid-metric sacrebleu: none of the %lld validation pairs has a French "
                        "side to score against (all empty); choose --valid-metric bleu4",
                        (long long)n);
    return 0;
}

/* The best score (tr's metric) of the run's validations before the last one, and how many
 * validations since it (the last included). */
static double best_before_last(const zoo_trainer *tr, int *since) {
    double best = -1;
    *since = 0;
    for (int i = 0; i + 1 < tr->n_valid; i++) {
        (*since)++;
        double s = zoo_valid_score(&tr->valid[i], tr->recipe.valid_metric);
        if (s > best) best = s, *since = 0;
    }
    (*since)++;
    return best;
}

/* A validation now: its line on the log, the history, the best checkpoint, the plots. Sets
 * *early when opts->patience validations went by without a better score. Returns 0 or -1. */
int zoo__validate_now(zoo_run_state *r, zoo_trainer *tr, const ds_batches *it, bool *early) {
    const zoo_train_opts *o = r->o;
    double t0 = zoo__now(), loss;
    zoo_eval_result e;
    if (zoo_trainer_validate(tr, r->data, DS_VALID, &loss, &e)) return -1;
    zoo_valid_stats v = {.step = tr->steps,
                         .epoch = zoo__epoch_fraction(tr, it),
                         .seconds = zoo_trainer_seconds(tr),
                         .train_loss = tr->epoch_tokens || !tr->n_hist
                                           ? zoo__running_loss(tr)
                                           : tr->hist[tr->n_hist - 1].loss,
                         .loss = loss,
                         .bleu = e.bleu4,
                         .standard = true,
                         .sacrebleu = e.sacrebleu,
                         .chrf = e.sacre_chrf};
    if (zoo__push_valid(tr, v)) return -1;
    int since, metric = tr->recipe.valid_metric;
    double best = best_before_last(tr, &since), score = zoo_valid_score(&v, metric);
    bool better = score > best;
    if (better && o->best_checkpoint && zoo_trainer_save(tr, r->data, o->best_checkpoint))
        return -1;
    if (better) since = 0;
    *early = o->patience > 0 && since >= o->patience;
    if (o->log) {
        fprintf(o->log,
                "valid at step %lld (epoch %.2f): loss %.4f, BLEU-4 %.2f, sacreBLEU %.2f, chrF "
                "%.2f (best %s %.2f%s), %lld sentences, %.1fs\n",
                (long long)v.step, v.epoch, loss, v.bleu, v.sacrebleu, v.chrf,
                metric == ZOO_METRIC_SACREBLEU ? "sacreBLEU" : "BLEU-4", better ? score : best,
                better ? (o->best_checkpoint ? ", saved" : "") : "",
                (long long)ds_fra_part_size(r->data, DS_VALID), zoo__now() - t0);
        fflush(o->log);
    }
    return o->plots_dir ? zoo_trainer_write_plots(tr, o->plots_dir) : 0;
}
