/* report.c -- what a training run reports: progress lines, the loss and validation CSV files
 * and their plots (trainer.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "autograd/ag_file.h"
#include "optim/optim.h"
#include "zoo/app/plot.h"

/* ---- progress lines ---- */

/* The time left to the nearest limit: left (by the epochs), or less by the run's end step
 * (--max-steps or the fitted decay's end, at per_step seconds a step) or by --time-budget (done:
 * seconds since the call started). */
static double time_left(const zoo_run_state *r, const zoo_trainer *tr, double left, double per_step,
                        double done) {
    if (r->end > 0 && (double)(r->end - tr->steps) * per_step < left)
        left = (double)(r->end - tr->steps) * per_step;
    if (r->o->time_budget > 0 && r->o->time_budget - done < left) left = r->o->time_budget - done;
    return left > 0 ? left : 0;
}

/* A progress line every o->log_steps steps: step, epoch (fractional), the epoch's running loss,
 * the learning rate, tokens/sec of the epoch so far, elapsed, and the time left to the nearest
 * limit. */
void zoo__report_step(const zoo_run_state *r, const zoo_trainer *tr, const ds_batches *it) {
    const zoo_train_opts *o = r->o;
    if (!o || !o->log || o->log_steps <= 0 || tr->steps % o->log_steps) return;
    int64_t steps = tr->steps - r->steps0; /* this call's */
    double done = zoo__now() - r->t0, per_step = done / (double)(steps ? steps : 1);
    double frac = zoo__epoch_fraction(tr, it),
           left = time_left(r, tr, (o->epochs - frac) * ds_batches_count(it) * per_step, per_step,
                            done);
    fprintf(
        o->log,
        "step %lld (epoch %.2f): loss %.4f, lr %.3g, %.1f tokens/sec, elapsed %.1fs, "
        "remaining %.1fs\n",
        (long long)tr->steps, frac, zoo__running_loss(tr),
        optim_schedule_lr(optim_config(tr->opt)->schedule, optim_config(tr->opt)->lr, tr->steps),
        tr->epoch_seconds > 0 ? tr->epoch_tokens / tr->epoch_seconds : 0, done, left);
    fflush(o->log);
}

/* An epoch's line; elapsed: the training seconds of the epochs so far, done: seconds since the
 * run started (the time budget's clock). */
void zoo__report_epoch(const zoo_run_state *r, const zoo_trainer *tr, const zoo_epoch_stats *s,
                       double elapsed, double done, bool last) {
    const zoo_train_opts *o = r->o;
    if (!o->log || o->log_every <= 0) return;
    bool tty = isatty(fileno(o->log));
    if (!last && tr->epochs_done % o->log_every && !tty) return;
    double per_epoch = elapsed / (tr->epochs_done ? tr->epochs_done : 1);
    double left = time_left(r, tr, per_epoch * (o->epochs - tr->epochs_done),
                            elapsed / (double)(tr->steps ? tr->steps : 1), done);
    fprintf(o->log, "%sepoch %d/%d: loss %.4f, %.1f tokens/sec, elapsed %.1fs, remaining %.1fs%s",
            tty ? "\r" : "", tr->epochs_done, o->epochs, s->loss, s->tokens / s->seconds, elapsed,
            left, tty ? "\033[K" : "\n");
    if (tty && last) fputc('\n', o->log);
    fflush(o->log);
}

/* ---- plots ---- */

/* valid.csv: a line per validation, sacreBLEU and chrF empty for one recorded without them. */
static int write_valid_csv(const zoo_trainer *tr, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/valid.csv", dir);
    ag_file out;
    FILE *f = ag_file_open(&out, path);
    if (!f) return -1;
    fprintf(f, "step,epoch,seconds,train_loss,valid_loss,bleu,sacrebleu,chrf\n");
    for (int i = 0; i < tr->n_valid; i++) {
        const zoo_valid_stats *v = &tr->valid[i];
        fprintf(f, "%lld,%.4f,%.3f,%.6f,%.6f,%.4f", (long long)v->step, v->epoch, v->seconds,
                v->train_loss, v->loss, v->bleu);
        if (v->standard) fprintf(f, ",%.4f,%.4f\n", v->sacrebleu, v->chrf);
        else fprintf(f, ",,\n");
    }
    return ag_file_commit(&out);
}

/* valid_sacrebleu.svg and valid_sacrebleu_time.svg: sacreBLEU and chrF of the validations that
 * have them, against steps and training minutes (nothing when none has). */
static int write_standard_plots(const zoo_trainer *tr, const char *dir) {
    int n = 0;
    size_t bytes = sizeof(double) * (size_t)tr->n_valid;
    double *steps = malloc(bytes), *mins = malloc(bytes), *sb = malloc(bytes), *cf = malloc(bytes);
    int rc = steps && mins && sb && cf ? 0 : ag_error("plots: out of memory");
    for (int i = 0; !rc && i < tr->n_valid; i++) {
        const zoo_valid_stats *v = &tr->valid[i];
        if (!v->standard) continue;
        steps[n] = (double)v->step, mins[n] = v->seconds / 60;
        sb[n] = v->sacrebleu, cf[n++] = v->chrf;
    }
    zoo_series by_step[2] = {{"sacreBLEU", steps, sb, n}, {"chrF", steps, cf, n}},
               by_time[2] = {{"sacreBLEU", mins, sb, n}, {"chrF", mins, cf, n}};
    const char *title = "validation: the standard score (cased, detokenized)";
    char path[4096];
    if (!rc && n) {
        snprintf(path, sizeof path, "%s/valid_sacrebleu.svg", dir);
        rc = zoo_svg_lines(path, title, "step", "sacreBLEU, chrF", by_step, 2, false);
    }
    if (!rc && n) {
        snprintf(path, sizeof path, "%s/valid_sacrebleu_time.svg", dir);
        rc = zoo_svg_lines(path, title, "training minutes", "sacreBLEU, chrF", by_time, 2, false);
    }
    free(steps), free(mins), free(sb), free(cf);
    return rc;
}

/* valid.csv and the validation curves (nothing without validations). */
static int write_valid_plots(const zoo_trainer *tr, const char *dir) {
    int n = tr->n_valid;
    if (!n) return 0;
    if (write_valid_csv(tr, dir)) return -1;
    char path[4096];
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
    return rc ? rc : write_standard_plots(tr, dir);
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
