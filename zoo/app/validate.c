/* validate.c -- validation during training: the loss per token (teacher forcing) and corpus
 * BLEU-4 (greedy) on a held-out part, the best checkpoint and patience (trainer.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/trainer_internal.h"

#include <stdio.h>

#include "zoo/app/decode.h"

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

/* A validation now: its line on the log, the history, the best checkpoint, the plots. Sets
 * *early when opts->patience validations went by without a better BLEU. Returns 0 or -1. */
int zoo__validate_now(zoo_run_state *r, zoo_trainer *tr, const ds_batches *it, bool *early) {
    const zoo_train_opts *o = r->o;
    double t0 = zoo__now(), loss, bleu;
    if (zoo_trainer_validate(tr, r->data, DS_VALID, &loss, &bleu)) return -1;
    zoo_valid_stats v = {.step = tr->steps,
                         .epoch = zoo__epoch_fraction(tr, it),
                         .seconds = zoo_trainer_seconds(tr),
                         .train_loss = tr->epoch_tokens || !tr->n_hist
                                           ? zoo__running_loss(tr)
                                           : tr->hist[tr->n_hist - 1].loss,
                         .loss = loss,
                         .bleu = bleu};
    if (zoo__push_valid(tr, v)) return -1;
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
                (long long)ds_fra_part_size(r->data, DS_VALID), zoo__now() - t0);
        fflush(o->log);
    }
    return o->plots_dir ? zoo_trainer_write_plots(tr, o->plots_dir) : 0;
}
