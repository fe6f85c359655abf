/* cmd_train.c -- PROGRAM train: a new run or a resumed one, on one process or several; then the
 * report, the book's four translations and the plots (cli.h, docs/zoo.md). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/ag_op.h"
#include "datasets/metrics.h"
#include "zoo/app/decode.h"
#include "zoo/app/trainer_internal.h"

/* The signal that asked a training run to stop (0: none). */
static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }

static const char *const ENGS[4] = {"go .", "i lost .", "he's calm .", "i'm home ."};
static const char *const FRAS[4] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
/* The same as fra.txt writes them, for a subword (cased, raw text) run. */
static const char *const ENGS_CASED[4] = {"Go.", "I lost.", "He's calm.", "I'm home."};

/* A training run under way: what cmd_train builds and frees. */
typedef struct train_run {
    char ckpath[4096], best[4200]; /* the checkpoint, the best checkpoint ("": none) */
    bool rank0;                    /* alone prints and writes files */
    zoo_trainer *tr;
    ds_fra *d;
    ds_batches *it;
    zoo_lock lock[2]; /* of the checkpoint and the best checkpoint (fd -1: not held) */
} train_run;

/* The checkpoint's path (default PROGRAM.safetensors) and the best checkpoint's (with
 * --valid-steps: NAME.best.safetensors unless given), checked before any work. 0 or an exit
 * status. */
static int output_paths(const zoo_cli *c, train_run *t) {
    const zoo_run_cfg *cfg = &c->run.cfg;
    const zoo_files *f = &cfg->files;
    if (f->checkpoint) snprintf(t->ckpath, sizeof t->ckpath, "%s", f->checkpoint);
    else snprintf(t->ckpath, sizeof t->ckpath, "%s.safetensors", c->run.program);
    if ((cfg->loop.patience || f->best_checkpoint) && !cfg->loop.valid_steps)
        return zoo__usage(c, "--patience and --best-checkpoint need --valid-steps");
    if (cfg->recipe.valid_metric != ZOO_METRIC_AUTO && !cfg->loop.valid_steps)
        return zoo__usage(c,
                          "--valid-metric %s needs --valid-steps (it chooses between "
                          "validations)",
                          zoo_valid_metric_names[cfg->recipe.valid_metric]);
    if (cfg->loop.valid_steps && f->best_checkpoint) {
        snprintf(t->best, sizeof t->best, "%s", f->best_checkpoint);
    } else if (cfg->loop.valid_steps) { /* NAME.safetensors -> NAME.best.safetensors */
        size_t n = strlen(t->ckpath), ext = strlen(".safetensors");
        if (n > ext && !strcmp(t->ckpath + n - ext, ".safetensors"))
            snprintf(t->best, sizeof t->best, "%.*s.best.safetensors", (int)(n - ext), t->ckpath);
        else snprintf(t->best, sizeof t->best, "%s.best", t->ckpath);
    }
    zoo_path_extra extra[2] = {{"--checkpoint", t->ckpath, true},
                               {"--best-checkpoint", t->best, true}};
    if (t->rank0 && zoo__check_paths(c, extra, *t->best ? 2 : 1))
        return zoo__usage(c, "%s", ag_last_error());
    return 0;
}

/* What a new run's config and length refuse (--heads 3 --hiddens 32), before any work: a model
 * of that config with tiny vocabularies is built and dropped; the vocabulary flags that do not
 * go together. 0 or an exit status. */
static int check_config(const zoo_cli *c) {
    const zoo_run_cfg *cfg = &c->run.cfg;
    bool subword = cfg->vocab.kind == ZOO_VOCAB_SUBWORD;
    /* a value other than the default (a --dump-config file gives every one, unchanged) */
    zoo_run_cfg d;
    if (zoo_run_cfg_init(&d, c->run.kind)) return zoo__fail(c, ag_last_error());
    bool size = cfg->vocab.size != d.vocab.size, share = cfg->vocab.share != d.vocab.share,
         digits = cfg->vocab.split_digits != d.vocab.split_digits,
         tags = cfg->vocab.number_tags != d.vocab.number_tags,
         min_freq = cfg->data.min_freq != d.data.min_freq;
    zoo_run_cfg_free(&d);
    if (!subword && (size || share || digits || tags))
        return zoo__usage(c, "--%s is for subword vocabularies: give --vocab subword",
                          size     ? "vocab-size"
                          : share  ? "vocab-share"
                          : digits ? "split-digits"
                                   : "number-tags");
    if (subword && min_freq)
        return zoo__usage(c, "--min-freq is for word vocabularies: a subword vocabulary has "
                             "--vocab-size pieces (--vocab word to use it)");
    if (subword && !c->subword)
        return zoo__usage(c, "--vocab subword: this program was built without SentencePiece");
    if (c->run.kind->one_vocab && c->run.kind->one_vocab(cfg->model) &&
        !(subword && cfg->vocab.share == ZOO_VOCAB_JOINT))
        return zoo__usage(c, "--share-embeddings needs one vocabulary for both languages: give "
                             "--vocab subword --vocab-share joint, or --share-embeddings 0");
    if (cfg->loop.fit_decay && !zoo_fit_decay_possible(cfg->loop.time_budget, cfg->recipe.schedule))
        return zoo__usage(c, "--fit-decay needs --time-budget and --lr-schedule linear or "
                             "cosine: give them, or --fit-decay 0");
    int rc = zoo__check_steps(c, cfg->model, cfg->data.num_steps);
    zoo_model *probe = rc ? NULL : zoo_model_new(c->run.kind, cfg->model, 4, 4, 0);
    if (!rc && !probe) rc = zoo__usage(c, "%s", ag_last_error());
    zoo_model_free(probe);
    return rc;
}

/* Rank 0 locks the checkpoint and the best checkpoint for the run (paths.c). 0 or an exit
 * status naming the process that holds one. */
static int lock_outputs(const zoo_cli *c, train_run *t) {
    if (t->rank0 &&
        (zoo__lock(&t->lock[0], t->ckpath) || (*t->best && zoo__lock(&t->lock[1], t->best))))
        return zoo__fail(c, ag_last_error());
    return 0;
}

/* --resume of a subword run: the data re-encoded with the checkpoint's models (never learned
 * again). The vocabulary flags may be given with the checkpoint's values only: its kind, its
 * sharing (joint: the same model on both sides), its pieces, its digits and its number tags.
 * 0 or an exit status. */
static int resume_subword(zoo_cli *c, train_run *t) {
    nn_ckpt *ck = NULL;
    int rc = nn_ckpt_load(&ck, t->ckpath) || zoo__subword_data(c, ck, t->d) ? -1 : 0;
    nn_ckpt_free(ck);
    if (rc) return zoo__fail(c, ag_last_error());
    const zoo_vocab_opts *v = &c->run.cfg.vocab;
    const ds_codec *s = ds_vocab_codec(ds_fra_vocab(t->d, DS_SRC)),
                   *g = ds_vocab_codec(ds_fra_vocab(t->d, DS_TGT));
    int kind = s ? ZOO_VOCAB_SUBWORD : ZOO_VOCAB_WORD,
        pieces = ds_vocab_size(ds_fra_vocab(t->d, 0));
    int share = s && s->model_len == g->model_len && !memcmp(s->model, g->model, s->model_len)
                    ? ZOO_VOCAB_JOINT
                    : ZOO_VOCAB_SEPARATE;
    const char *fixed = "it cannot change on --resume";
    if (zoo_run_given(&c->run, "vocab") && v->kind != kind)
        return zoo__usage(c, "--vocab %s differs from the checkpoint's %s: %s",
                          zoo_vocab_kind_names[v->kind], zoo_vocab_kind_names[kind], fixed);
    if (kind == ZOO_VOCAB_SUBWORD && zoo_run_given(&c->run, "vocab-share") && v->share != share)
        return zoo__usage(c, "--vocab-share %s differs from the checkpoint's %s: %s",
                          zoo_vocab_share_names[v->share], zoo_vocab_share_names[share], fixed);
    if (kind == ZOO_VOCAB_SUBWORD && zoo_run_given(&c->run, "vocab-size") && v->size != pieces)
        return zoo__usage(c, "--vocab-size %d differs from the checkpoint's %d pieces: %s", v->size,
                          pieces, fixed);
    if (kind == ZOO_VOCAB_SUBWORD && zoo_run_given(&c->run, "split-digits")) {
        int split = zoo__spm_split_digits(s->model, s->model_len, t->ckpath);
        if (split < 0) return zoo__fail(c, ag_last_error());
        if (split != (v->split_digits != 0))
            return zoo__usage(c,
                              "--split-digits %d differs from the checkpoint's model (digits %s): "
                              "%s",
                              v->split_digits, split ? "split" : "not split", fixed);
    }
    const bool tags = ds_vocab_number_tags(ds_fra_vocab(t->d, DS_SRC));
    if (kind == ZOO_VOCAB_SUBWORD && zoo_run_given(&c->run, "number-tags") &&
        (v->number_tags != 0) != tags)
        return zoo__usage(c, "--number-tags %d differs from the checkpoint's %d: %s",
                          v->number_tags, tags, fixed);
    return 0;
}

/* --resume: the run in the checkpoint; what it fixes may be given again with the same value
 * only. Afterwards c's configuration holds the run's data options, recipe and model config.
 * 0 or an exit status. */
static int resume_run(zoo_cli *c, train_run *t) {
    zoo_run_cfg *cfg = &c->run.cfg;
    ds_fra_options o;
    if (!(t->tr = zoo_trainer_resume_dist(t->ckpath, c->run.kind, c->dist, &o)))
        return zoo__fail(c, ag_last_error());
    zoo_run_cfg saved = *cfg;
    saved.data = o;
    saved.recipe = t->tr->recipe;
    if (cfg->recipe.valid_metric == ZOO_METRIC_AUTO) /* auto on --resume: the checkpoint's */
        cfg->recipe.valid_metric = saved.recipe.valid_metric;
    if (cfg->recipe.precision == ZOO_PRECISION_AUTO) cfg->recipe.precision = saved.recipe.precision;
    saved.model = (void *)t->tr->model->cfg;
    if (zoo_run_check_fixed(&c->run, &saved)) return zoo__usage(c, "%s", ag_last_error());
    if (zoo_run_given(&c->run, "shards") && cfg->exec.shards != t->tr->shards)
        return zoo__usage(c,
                          "--shards %d differs from the checkpoint's %d%s: it cannot change on "
                          "--resume",
                          cfg->exec.shards, t->tr->shards,
                          zoo_dist_size(c->dist) > 1 ? " per rank" : "");
    cfg->data = o;
    cfg->recipe = t->tr->recipe;
    memcpy(cfg->model, t->tr->model->cfg, c->run.kind->config_size);
    int rc = zoo__check_steps(c, cfg->model, o.num_steps);
    if (!rc) rc = zoo__load_data(c, &o, &t->d);
    if (!rc) rc = resume_subword(c, t);
    if (!rc && zoo_trainer_check_data(t->tr, t->d)) rc = zoo__fail(c, ag_last_error());
    if (!rc)
        fprintf(stderr, "resuming %s at step %lld (epoch %d, batch %d)\n", t->ckpath,
                (long long)t->tr->steps, t->tr->epochs_done + 1, t->tr->epoch_batches);
    return rc;
}

/* A new run: the data, a model from the config, a trainer with the recipe. 0 or an exit
 * status. */
static int new_run(zoo_cli *c, train_run *t) {
    const zoo_run_cfg *cfg = &c->run.cfg;
    int rc = zoo__load_data(c, &cfg->data, &t->d);
    if (rc) return rc;
    if (cfg->vocab.kind == ZOO_VOCAB_SUBWORD && zoo__subword_train(c, t->d))
        return zoo__fail(c, ag_last_error());
    zoo_recipe recipe = cfg->recipe;
    if (recipe.valid_metric == ZOO_METRIC_AUTO) recipe.valid_metric = zoo_valid_metric_auto(t->d);
    if (recipe.precision == ZOO_PRECISION_AUTO) {
        recipe.precision = zoo_precision_auto();
        if (t->rank0)
            fprintf(stderr, "%s train: --precision auto: %s%s)\n", c->run.program,
                    recipe.precision == ZOO_PRECISION_BF16
                        ? "bf16 (its products run faster than fp32's here: "
                        : "fp32 (bf16 products would be slower here: ",
                    ag_gemm_bf16_kernel());
    }
    zoo_model *m = zoo_model_new(c->run.kind, cfg->model, ds_vocab_size(ds_fra_vocab(t->d, DS_SRC)),
                                 ds_vocab_size(ds_fra_vocab(t->d, DS_TGT)), cfg->data.seed);
    t->tr = m ? zoo_trainer_new(m, cfg->recipe.lr, cfg->recipe.clip, cfg->data.seed + 1) : NULL;
    if (!t->tr || zoo_trainer_set_dist(t->tr, c->dist) ||
        zoo_trainer_set_shards(t->tr, cfg->exec.shards))
        return zoo__fail(c, ag_last_error());
    if (zoo_trainer_set_recipe(t->tr, &recipe)) return zoo__usage(c, "%s", ag_last_error());
    return 0;
}

/* What must hold before the first step: a validation split, the threads (one per shard unless
 * given, up to the cores a machine's ranks share), the batches, limits above what is done, the
 * same run on every rank. 0 or an exit status. */
static int prepare(zoo_cli *c, train_run *t) {
    const zoo_run_cfg *cfg = &c->run.cfg;
    zoo_trainer *tr = t->tr;
    if (cfg->loop.valid_steps && !ds_fra_part_size(t->d, DS_VALID))
        return zoo__usage(c,
                          "--valid-steps %lld: the validation split is empty (--valid-frac %g of "
                          "%lld pairs); give a --valid-frac that holds at least one pair",
                          (long long)cfg->loop.valid_steps, cfg->data.valid_frac,
                          (long long)ds_fra_num_pairs(t->d));
    if (zoo__valid_metric_check(tr, t->d, &cfg->loop)) return zoo__usage(c, "%s", ag_last_error());
    long cores = sysconf(_SC_NPROCESSORS_ONLN) / zoo_dist_local_size(c->dist);
    if (!cfg->exec.threads && ag_set_threads(tr->shards < cores ? tr->shards
                                             : cores > 1        ? (int)cores
                                                                : 1))
        return zoo__fail(c, ag_last_error());
    if (tr->recipe.precision == ZOO_PRECISION_BF16 && !ag_bf16_native() && t->rank0)
        fprintf(stderr,
                "%s train: --precision bf16: no bf16 kernel on the CPU's instructions (it lacks "
                "AMX and AVX512-BF16, or TG_BF16_KERNEL=emulated); training in float32\n",
                c->run.program);
    if (ds_batches_new(t->d, DS_TRAIN, true, &t->it))
        return cfg->data.batch_tokens ? zoo__usage(c, "--batch-tokens: %s", ag_last_error())
                                      : zoo__fail(c, ag_last_error());
    if (tr->epochs_done >= cfg->loop.epochs)
        return zoo__usage(c, "the checkpoint has %d epochs already; give --epochs above it",
                          tr->epochs_done);
    if (cfg->loop.max_steps && tr->steps >= cfg->loop.max_steps)
        return zoo__usage(c, "the checkpoint has %lld steps already; give --max-steps above it",
                          (long long)tr->steps);
    bool report = false; /* under several processes: every rank's run must be the same */
    if (zoo_dist_size(c->dist) == 1) return zoo_dist_check_start(c->dist, 0, NULL, &report);
    char *extra = zoo_run_text(&c->run);
    char *text = extra ? zoo_dist_run_text(tr, t->d, extra) : NULL;
    int rc = zoo_dist_check_start(c->dist, text ? 0 : zoo__fail(c, ag_last_error()), text, &report);
    zoo_dist_write_held(c->dist, stderr);
    free(extra);
    free(text);
    if (report) zoo__fail(c, ag_last_error());
    return rc;
}

/* The run itself, stopped by SIGINT / SIGTERM after the step under way (saved: exit 128 + the
 * signal). Returns zoo_train's result, or an exit status (>= 1 after reporting) in *rc. */
static int train(zoo_cli *c, train_run *t, int *rc) {
    zoo_train_opts to = c->run.cfg.loop;
    to.checkpoint = t->rank0 ? t->ckpath : NULL;
    to.plots_dir = t->rank0 ? c->run.cfg.files.plots : NULL;
    to.log = t->rank0 ? stderr : NULL;
    to.stop = &stop_signal;
    to.best_checkpoint = t->rank0 && *t->best ? t->best : NULL;
    const bool bf16 = t->tr->recipe.precision == ZOO_PRECISION_BF16 && ag_bf16_native();
    if (bf16 && ag_set_precision(AG_BF16)) return *rc = zoo__fail(c, ag_last_error()), -1;
    struct sigaction sa = {.sa_handler = on_stop_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int trc = zoo_train(t->tr, t->d, t->it, &to);
    ag_set_precision(AG_FP32); /* the translations after the run: float32 */
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    *rc = 0;
    if (trc < 0) {
        *rc = zoo__fail(c, ag_last_error());
        zoo_dist_abort(c->dist, *rc); /* the other ranks may wait in a step: end them all */
    } else if (trc == ZOO_TRAIN_STOPPED) {
        if (t->rank0)
            fprintf(stderr,
                    "%s %s: interrupted at step %lld (epoch %d, batch %d): checkpoint %s; "
                    "continue with --resume\n",
                    c->run.program, c->run.cmd, (long long)t->tr->steps, t->tr->epochs_done + 1,
                    t->tr->epoch_batches, t->ckpath);
        *rc = 128 + (int)(stop_signal ? stop_signal : SIGTERM); /* the signal of another rank */
    }
    return trc;
}

/* Why the run stopped early, its validations and its loss (rank 0). */
static void print_summary(const zoo_cli *c, const train_run *t, int trc) {
    const zoo_trainer *tr = t->tr;
    int64_t max_steps = c->run.cfg.loop.max_steps;
    if (trc == ZOO_TRAIN_LIMIT || trc == ZOO_TRAIN_EARLY)
        printf("stopped at step %lld (epoch %d, batch %d) by %s; checkpoint %s (continue with "
               "--resume)\n",
               (long long)tr->steps, tr->epochs_done + 1, tr->epoch_batches,
               trc == ZOO_TRAIN_EARLY                ? "--patience"
               : max_steps && tr->steps >= max_steps ? "--max-steps"
               : c->run.cfg.loop.fit_decay && tr->steps >= tr->recipe.decay_steps
                   ? "the end of the decay (--fit-decay)"
                   : "--time-budget",
               t->ckpath);
    if (tr->n_valid) {
        int b = 0, metric = tr->recipe.valid_metric;
        for (int i = 1; i < tr->n_valid; i++)
            if (zoo_valid_score(&tr->valid[i], metric) > zoo_valid_score(&tr->valid[b], metric))
                b = i;
        const zoo_valid_stats *last = &tr->valid[tr->n_valid - 1];
        char sacre[32] = "-"; /* a validation of a checkpoint made before it was recorded */
        if (last->standard) snprintf(sacre, sizeof sacre, "%.2f", last->sacrebleu);
        printf("valid: BLEU-4 %.2f, sacreBLEU %s, loss %.4f at step %lld; best %s %.2f at step "
               "%lld (%s)\n",
               last->bleu, sacre, last->loss, (long long)last->step,
               metric == ZOO_METRIC_SACREBLEU ? "sacreBLEU" : "BLEU-4",
               zoo_valid_score(&tr->valid[b], metric), (long long)tr->valid[b].step, t->best);
    }
    if (tr->epoch_batches) /* the epoch under way */
        printf("loss %.3f, %.1f tokens/sec (epoch %d so far)\n",
               tr->epoch_tokens ? tr->epoch_loss / tr->epoch_tokens : 0,
               tr->epoch_seconds > 0 ? tr->epoch_tokens / tr->epoch_seconds : 0,
               tr->epochs_done + 1);
    else
        printf("loss %.3f, %.1f tokens/sec\n", tr->hist[tr->n_hist - 1].loss,
               tr->hist[tr->n_hist - 1].tokens / tr->hist[tr->n_hist - 1].seconds);
}

/* The book's four sentences, the checkpoint, the attention plots. 0 or an exit status. */
static int print_translations(const zoo_cli *c, const train_run *t) {
    const ds_vocab *sv = ds_fra_vocab(t->d, DS_SRC), *tv = ds_fra_vocab(t->d, DS_TGT);
    int steps = ds_fra_num_steps(t->d), rc = 0;
    /* subword: cased text in and out; the d2l BLEU is on its preprocessed (lowercase) form */
    const char *const *engs = ds_vocab_codec(sv) ? ENGS_CASED : ENGS;
    for (int i = 0; i < 4 && !rc; i++) {
        char *pred = NULL, *low = NULL;
        double bleu = 0;
        if (zoo_translate(t->tr->model, t->tr->tape, sv, tv, engs[i], steps, 1, 0, &pred) ||
            (ds_vocab_codec(tv) ? ds_preprocess(pred, &low) : 0) ||
            ds_bleu_d2l(low ? low : pred, FRAS[i], 2, &bleu))
            rc = zoo__fail(c, ag_last_error());
        else printf("%s => %s, bleu %.3f\n", engs[i], pred, bleu);
        free(pred);
        free(low);
    }
    printf("checkpoint: %s\n", t->ckpath);
    const char *plots = c->run.cfg.files.plots;
    if (rc || !plots) return rc;
    char *pred = NULL;
    zoo_attn_record rec;
    if (zoo_translate_attention(t->tr->model, t->tr->tape, sv, tv, engs[3], steps, &pred, &rec) ||
        zoo_attn_record_plot(&rec, plots, "attention")) {
        rc = zoo__fail(c, ag_last_error());
    } else {
        printf("plots: %s/loss.svg, %s/loss.csv, %s/attention_*.svg (\"%s\" => \"%s\")\n", plots,
               plots, plots, engs[3], pred);
        zoo_attn_record_free(&rec);
    }
    free(pred);
    return rc;
}

int zoo__cmd_train(zoo_cli *c) {
    train_run t = {.rank0 = zoo_dist_rank(c->dist) == 0, .lock = {{.fd = -1}, {.fd = -1}}};
    zoo_dist_set_timeout(c->dist, c->run.cfg.exec.dist_timeout); /* checked by the flag's range */
    int rc = output_paths(c, &t);
    if (!rc && !c->run.cfg.exec.resume) rc = check_config(c);
    if (!rc) rc = lock_outputs(c, &t);
    if (!rc) rc = c->run.cfg.exec.resume ? resume_run(c, &t) : new_run(c, &t);
    if (!rc) rc = prepare(c, &t);
    if (!rc) {
        double seconds = zoo_trainer_seconds(t.tr);
        int trc = train(c, &t, &rc);
        if (!rc && t.rank0) {
            zoo_dist_report(c->dist, stderr, zoo_trainer_seconds(t.tr) - seconds);
            print_summary(c, &t, trc);
            rc = print_translations(c, &t);
        }
    }
    ds_batches_free(t.it);
    ds_fra_free(t.d);
    zoo_trainer_free(t.tr);
    zoo__unlock(&t.lock[0]);
    zoo__unlock(&t.lock[1]);
    return rc;
}
