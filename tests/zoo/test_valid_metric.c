/* test_valid_metric.c -- the standard score in the validations of a training run (trainer.h):
 * every validation records sacreBLEU and chrF beside BLEU-4, exactly zoo_evaluate's; valid.csv
 * and the curves; the history through a checkpoint and a resume, and the history of a checkpoint
 * made before the scores were recorded (6 numbers a line, no train.valid_metric); the metric that
 * picks the best checkpoint and counts the patience, auto resolved by the vocabulary (word:
 * BLEU-4, subword: sacreBLEU), and its refusals. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/text.h"
#include "tests/tg_test.h"
#include "tests/zoo/zoo_test.h"
#include "zoo/app/subword.h"

/* The 8 pairs of zt_corpus_with, 2 of them held out for validation, batches of 2. */
static ds_fra *corpus(void) {
    ds_fra_options o = ds_fra_defaults();
    o.min_freq = 1;
    o.batch_size = 2;
    o.valid_frac = 0.25;
    return zt_corpus_with(&o);
}

/* Trains tr over d to `epochs` with a validation every `every` steps (plots into dir unless
 * NULL). zoo_train's result. */
static int train_to(zoo_trainer *tr, const ds_fra *d, int epochs, int64_t every, const char *dir,
                    const char *best, int patience) {
    ds_batches *it;
    if (ds_batches_new(d, DS_TRAIN, true, &it)) return -1;
    zoo_train_opts o = {.epochs = epochs,
                        .valid_steps = every,
                        .plots_dir = dir,
                        .best_checkpoint = best,
                        .patience = patience};
    int rc = zoo_train(tr, d, it, &o);
    ds_batches_free(it);
    return rc;
}

/* The whole file at path (malloc'd), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = calloc(1, 1 << 16);
    if (s) s[fread(s, 1, (1 << 16) - 1, f)] = '\0';
    fclose(f);
    return s;
}

/* a and b are the same validations, to the bit. */
static void same_validations(const zoo_trainer *a, const zoo_trainer *b) {
    CU_ASSERT_EQUAL_FATAL(a->n_valid, b->n_valid);
    for (int i = 0; i < a->n_valid; i++) {
        const zoo_valid_stats *x = &a->valid[i], *y = &b->valid[i];
        CU_ASSERT_EQUAL(x->step, y->step);
        CU_ASSERT_EQUAL(x->epoch, y->epoch);
        CU_ASSERT_EQUAL(x->seconds, y->seconds);
        CU_ASSERT_EQUAL(x->train_loss, y->train_loss);
        CU_ASSERT_EQUAL(x->loss, y->loss);
        CU_ASSERT_EQUAL(x->bleu, y->bleu);
        CU_ASSERT_EQUAL(x->standard, y->standard);
        CU_ASSERT_EQUAL(x->sacrebleu, y->sacrebleu);
        CU_ASSERT_EQUAL(x->chrf, y->chrf);
    }
}

/* The recorded scores are zoo_evaluate's on the validation part, exactly (the last validation is
 * at the end: the model evaluated again); auto is BLEU-4 for a word run; valid.csv has the new
 * columns, each row the history's values; the standard curves are written. */
static void test_records_the_standard_score(void) {
    ds_fra *d = corpus();
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    zoo_trainer *tr = zt_trainer_new(d, 0.1, 0.01, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    CU_ASSERT_EQUAL(tr->recipe.valid_metric, ZOO_METRIC_BLEU4); /* zoo_recipe_d2l's */
    zoo_recipe r = tr->recipe;
    r.valid_metric = ZOO_METRIC_AUTO;
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_recipe(tr, &r), 0);
    char *dir = tg_temp_dir();
    CU_ASSERT_EQUAL_FATAL(train_to(tr, d, 2, 2, dir, NULL, 0), 0);
    CU_ASSERT_EQUAL(tr->recipe.valid_metric, ZOO_METRIC_BLEU4); /* auto, word vocabularies */
    CU_ASSERT_EQUAL_FATAL(tr->n_valid, 3);                      /* steps 2, 4, 6 */
    zoo_eval_result e;
    CU_ASSERT_EQUAL_FATAL(zoo_evaluate(tr->model, tr->tape, ds_fra_vocab(d, DS_SRC),
                                       ds_fra_vocab(d, DS_TGT), d, DS_VALID, ds_fra_num_steps(d),
                                       &e),
                          0);
    const zoo_valid_stats *last = &tr->valid[2];
    CU_ASSERT_EQUAL(last->step, 6);
    CU_ASSERT(last->standard);
    CU_ASSERT_EQUAL(last->bleu, e.bleu4);
    CU_ASSERT_EQUAL(last->sacrebleu, e.sacrebleu);
    CU_ASSERT_EQUAL(last->chrf, e.sacre_chrf);
    CU_ASSERT(e.sacrebleu >= 0 && e.sacrebleu <= 100 && e.sacre_chrf >= 0 && e.sacre_chrf <= 100);
    /* zoo_trainer_validate gives the same scores */
    double loss;
    zoo_eval_result v;
    CU_ASSERT_EQUAL(zoo_trainer_validate(tr, d, DS_VALID, &loss, &v), 0);
    CU_ASSERT_EQUAL(v.sacrebleu, e.sacrebleu);
    CU_ASSERT_EQUAL(v.sacre_chrf, e.sacre_chrf);
    CU_ASSERT_EQUAL(loss, last->loss);
    /* valid.csv: the header, then one row per validation with the history's values */
    char *csv = slurp(tg_path(dir, "valid.csv"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    char want[1024];
    int n = snprintf(want, sizeof want,
                     "step,epoch,seconds,train_loss,valid_loss,bleu,sacrebleu,chrf\n");
    for (int i = 0; i < 3; i++) {
        const zoo_valid_stats *s = &tr->valid[i];
        n += snprintf(want + n, sizeof want - (size_t)n,
                      "%lld,%.4f,%.3f,%.6f,%.6f,%.4f,%.4f,%.4f\n", (long long)s->step, s->epoch,
                      s->seconds, s->train_loss, s->loss, s->bleu, s->sacrebleu, s->chrf);
    }
    CU_ASSERT_STRING_EQUAL(csv, want);
    free(csv);
    static const char *const curves[] = {"valid_sacrebleu.svg", "valid_sacrebleu_time.svg",
                                         "valid_bleu.svg", "valid_bleu_time.svg"};
    for (int i = 0; i < 4; i++) {
        char *svg = slurp(tg_path(dir, curves[i]));
        CU_ASSERT_PTR_NOT_NULL(svg);
        if (svg && i < 2) {
            CU_ASSERT_PTR_NOT_NULL(strstr(svg, "sacreBLEU"));
            CU_ASSERT_PTR_NOT_NULL(strstr(svg, "chrF"));
            CU_ASSERT_PTR_NOT_NULL(strstr(svg, i ? "training minutes" : "step"));
        }
        free(svg);
    }
    tg_remove(dir);
    zoo_trainer_free(tr);
    ds_fra_free(d);
}

/* A copy of ck without the metadata key `drop`: a checkpoint as a program before the key wrote
 * it. */
static nn_ckpt *without_key(const nn_ckpt *ck, const char *drop) {
    nn_ckpt *out = nn_ckpt_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    for (size_t i = 0; i < nn_ckpt_meta_count(ck); i++) {
        const char *k, *v;
        CU_ASSERT_EQUAL_FATAL(nn_ckpt_meta_at(ck, i, &k, &v), 0);
        if (strcmp(k, drop) && strcmp(k, NN_CKPT_FORMAT_KEY) && strcmp(k, NN_CKPT_CHECKSUM_KEY))
            CU_ASSERT_EQUAL_FATAL(nn_ckpt_set_meta(out, k, v), 0);
    }
    for (size_t i = 0; i < nn_ckpt_count(ck); i++) {
        const nn_ckpt_tensor *t = nn_ckpt_at(ck, i);
        int shape[NN_CKPT_MAX_DIMS];
        for (int j = 0; j < t->ndim; j++) shape[j] = (int)t->shape[j];
        if (t->dtype == NN_I64) {
            int64_t *buf = malloc(sizeof *buf * (t->numel ? t->numel : 1));
            CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, t->name, t->ndim, shape, buf), 0);
            CU_ASSERT_EQUAL(nn_ckpt_add_i64(out, t->name, t->ndim, shape, buf), 0);
            free(buf);
        } else {
            ag_real *buf = malloc(sizeof *buf * (t->numel ? t->numel : 1));
            CU_ASSERT_EQUAL(nn_ckpt_read(ck, t->name, t->ndim, shape, buf), 0);
            CU_ASSERT_EQUAL(nn_ckpt_add(out, t->name, t->ndim, shape, buf), 0);
            free(buf);
        }
    }
    return out;
}

/* The history goes through a checkpoint to the bit (8 numbers a validation) and the metric with
 * it; a resumed run appends to it. A checkpoint made before them (6 numbers a line, no
 * train.valid_metric) loads, keeps BLEU-4 as its metric, and resumes: its validations have no
 * standard score (empty cells in valid.csv), the new ones have; saved again, each keeps its
 * form. */
static void test_history_round_trip_and_old_checkpoints(void) {
    ds_fra *d = corpus();
    zoo_trainer *tr = zt_trainer_new(d, 0.1, 0.01, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    CU_ASSERT_EQUAL_FATAL(train_to(tr, d, 1, 1, NULL, NULL, 0), 0); /* validations at 1, 2, 3 */
    char *path = tg_temp_file("", 0), *dir = tg_temp_dir();
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_save(tr, d, path), 0);
    nn_ckpt *ck = NULL;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&ck, path), 0);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "train.valid_metric"), "bleu4");
    const char *hist = nn_ckpt_meta(ck, "train.valid_history");
    CU_ASSERT_PTR_NOT_NULL_FATAL(hist);
    int fields = 0; /* of the first line */
    for (const char *p = hist; *p && *p != '\n'; p++) fields += *p == ' ';
    CU_ASSERT_EQUAL(fields + 1, 8);
    ds_fra_options o;
    zoo_trainer *back = zoo_trainer_resume(path, &zoo_transformer_kind, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    same_validations(tr, back);
    CU_ASSERT_EQUAL(back->recipe.valid_metric, ZOO_METRIC_BLEU4);
    CU_ASSERT_EQUAL(train_to(back, d, 2, 1, NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL(back->n_valid, 6);
    CU_ASSERT(back->valid[5].standard && back->valid[5].step == 6);
    zoo_trainer_free(back);
    /* before the change: 6 numbers a validation, no train.valid_metric */
    char old[2048];
    size_t n = 0;
    for (int i = 0; i < tr->n_valid; i++) {
        const zoo_valid_stats *v = &tr->valid[i];
        n += (size_t)snprintf(old + n, sizeof old - n, "%lld %.17g %.17g %.17g %.17g %.17g\n",
                              (long long)v->step, v->epoch, v->seconds, v->train_loss, v->loss,
                              v->bleu);
    }
    nn_ckpt *pre = without_key(ck, "train.valid_metric");
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(pre, "train.valid_history", old), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(pre, path), 0);
    back = zoo_trainer_resume(path, &zoo_transformer_kind, &o);
    if (!back) fprintf(stderr, "\n  %s\n", ag_last_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(back->recipe.valid_metric, ZOO_METRIC_BLEU4);
    CU_ASSERT_EQUAL_FATAL(back->n_valid, 3);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(!back->valid[i].standard);
        CU_ASSERT_EQUAL(back->valid[i].bleu, tr->valid[i].bleu);
        CU_ASSERT_EQUAL(back->valid[i].loss, tr->valid[i].loss);
    }
    /* sacreBLEU cannot choose in this run: its first validations lack it */
    back->recipe.valid_metric = ZOO_METRIC_SACREBLEU;
    TG_EXPECT_ERROR(train_to(back, d, 2, 1, NULL, NULL, 0),
                    "--valid-metric sacrebleu: validation 1 of the run (step 1) was recorded "
                    "without sacreBLEU");
    CU_ASSERT_EQUAL(back->steps, 3);
    back->recipe.valid_metric = ZOO_METRIC_BLEU4;
    CU_ASSERT_EQUAL_FATAL(train_to(back, d, 2, 1, dir, NULL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(back->n_valid, 6);
    CU_ASSERT(back->valid[3].standard && back->valid[5].standard);
    char *csv = slurp(tg_path(dir, "valid.csv"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    const char *row1 = strchr(csv, '\n') + 1, *row4 = row1;
    for (int i = 0; i < 3; i++) row4 = strchr(row4, '\n') + 1;
    CU_ASSERT_EQUAL(strncmp(strchr(row1, '\n') - 2, ",,", 2), 0); /* no standard score */
    CU_ASSERT_NOT_EQUAL(strncmp(strchr(row4, '\n') - 2, ",,", 2), 0);
    free(csv);
    /* saved again: old lines 6 numbers, new ones 8; read back the same */
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_save(back, d, path), 0);
    zoo_trainer *again = zoo_trainer_resume(path, &zoo_transformer_kind, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    same_validations(back, again);
    zoo_trainer_free(again);
    zoo_trainer_free(back);
    /* a checkpoint choosing by sacreBLEU with validations without it, malformed lines */
    static const char *const bad[][3] = {
        {"sacrebleu", NULL, "validation 1 has no sacreBLEU, which train.valid_metric sacrebleu"},
        {"bleu4", "1 0.5 2 3 4 5 6\n", "malformed at validation 1"},
        {"bleu4", "1 0.5 2 3 4 5 6 7\n2 0.5 2 3 4 5 6 7 8\n", "malformed at validation 2"},
        {"bleu4", "1 0.5 2 3 4 5 6 seven\n", "malformed at validation 1"},
        {"bleu5", NULL, "train.valid_metric"}};
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(nn_ckpt_set_meta(pre, "train.valid_metric", bad[i][0]), 0);
        CU_ASSERT_EQUAL(nn_ckpt_set_meta(pre, "train.valid_history", bad[i][1] ? bad[i][1] : old),
                        0);
        CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(pre, path), 0);
        TG_EXPECT_NULL(zoo_trainer_resume(path, &zoo_transformer_kind, &o), bad[i][2]);
    }
    nn_ckpt_free(pre);
    nn_ckpt_free(ck);
    tg_remove(path);
    tg_remove(dir);
    zoo_trainer_free(tr);
    ds_fra_free(d);
}

/* A checkpoint of a 3-step run with two validations whose BLEU-4 no new one can beat (101) and
 * whose sacreBLEU every new one beats (-1), choosing by `metric`; resumed into *out. */
static void resume_rigged(const ds_fra *d, const char *path, const char *metric,
                          zoo_trainer **out) {
    zoo_trainer *tr = zt_trainer_new(d, 0.1, 0.01, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    CU_ASSERT_EQUAL_FATAL(train_to(tr, d, 1, 0, NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_save(tr, d, path), 0);
    zoo_trainer_free(tr);
    nn_ckpt *ck = NULL;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&ck, path), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "train.valid_history",
                                     "1 0.3 0.01 1 1 101 -1 -1\n2 0.6 0.02 1 1 101 -1 -1\n"),
                    0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "train.valid_metric", metric), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path), 0);
    nn_ckpt_free(ck);
    ds_fra_options o;
    *out = zoo_trainer_resume(path, &zoo_transformer_kind, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*out);
}

/* The best checkpoint and the patience follow the run's metric: by BLEU-4 nothing beats 101
 * (no best written, patience 1 stops at the first validation); by sacreBLEU the first new
 * validation is a best, and the best checkpoint holds the run up to the best sacreBLEU. */
static void test_best_by_the_metric(void) {
    ds_fra *d = corpus();
    char *path = tg_temp_file("", 0), *dir = tg_temp_dir();
    const char *best = tg_path(dir, "best.safetensors");
    zoo_trainer *tr;
    resume_rigged(d, path, "bleu4", &tr);
    CU_ASSERT_EQUAL(tr->recipe.valid_metric, ZOO_METRIC_BLEU4);
    CU_ASSERT_EQUAL(train_to(tr, d, 3, 1, NULL, best, 1), ZOO_TRAIN_EARLY);
    CU_ASSERT_EQUAL(tr->n_valid, 3);
    CU_ASSERT_EQUAL(tr->steps, 4);
    struct stat sb;
    CU_ASSERT_NOT_EQUAL(stat(best, &sb), 0); /* never a better BLEU-4 */
    zoo_trainer_free(tr);
    resume_rigged(d, path, "sacrebleu", &tr);
    CU_ASSERT_EQUAL(tr->recipe.valid_metric, ZOO_METRIC_SACREBLEU);
    int rc = train_to(tr, d, 3, 1, NULL, best, 2);
    CU_ASSERT(rc == 0 || rc == ZOO_TRAIN_EARLY);
    CU_ASSERT(tr->n_valid >= 3);
    CU_ASSERT_EQUAL_FATAL(stat(best, &sb), 0);
    int top = 2; /* the first validation with the highest sacreBLEU */
    for (int i = 3; i < tr->n_valid; i++)
        if (tr->valid[i].sacrebleu > tr->valid[top].sacrebleu) top = i;
    ds_fra_options o;
    zoo_trainer *b = zoo_trainer_resume(best, &zoo_transformer_kind, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->n_valid, top + 1);
    CU_ASSERT_EQUAL(b->steps, tr->valid[top].step);
    CU_ASSERT_EQUAL(b->recipe.valid_metric, ZOO_METRIC_SACREBLEU);
    zoo_trainer_free(b);
    /* a recipe with no such metric is refused */
    zoo_trainer *fresh = zt_trainer_new(d, 0.1, 0.01, 4);
    zoo_recipe r = fresh->recipe;
    r.valid_metric = 3;
    TG_EXPECT_ERROR(zoo_trainer_set_recipe(fresh, &r), "--valid-metric: 3 is not a score");
    zoo_trainer_free(fresh);
    zoo_trainer_free(tr);
    tg_remove(path);
    tg_remove(dir);
    ds_fra_free(d);
}

/* A subword run (cased text, a SentencePiece codec on both sides): auto is sacreBLEU, and the
 * recorded scores are zoo_evaluate's (the codec's detokenized text against the raw references).
 * A validation part whose French sides are all empty cannot give sacreBLEU: refused. */
static void test_subword_run(void) {
    static const char pairs[] = "I lost my keys.\tJ'ai perdu mes clés.\n"
                                "He's very calm.\tIl est très calme.\n"
                                "I'm at home now.\tJe suis chez moi maintenant.\n"
                                "We won the game.\tNous avons gagné le match.\n"
                                "Be nice to her.\tSois gentil avec elle.\n"
                                "Where is the station?\tOù est la gare ?\n"
                                "She is reading a book.\tElle lit un livre.\n"
                                "The cat sleeps on the bed.\tLe chat dort sur le lit.\n";
    char text[3 * sizeof pairs]; /* each pair 3 times: the validation pairs are seen in training,
                                  * so the scores the test compares are not all 0 */
    snprintf(text, sizeof text, "%s%s%s", pairs, pairs, pairs);
    const char *sentences[16];
    ds_fra_options o = ds_fra_defaults();
    o.batch_size = 4;
    o.valid_frac = 0.25;
    o.num_steps = 12;
    ds_fra *d = NULL;
    CU_ASSERT_EQUAL_FATAL(ds_fra_load_mem(text, strlen(text), "mem", &o, &d), 0);
    for (int i = 0; i < 8; i++) {
        sentences[2 * i] = ds_fra_raw(d, DS_SRC, i, NULL);
        sentences[2 * i + 1] = ds_fra_raw(d, DS_TGT, i, NULL);
    }
    char *model = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_train(sentences, 16, 320, false, 1, &model, &len), 0);
    ds_vocab *sv = NULL, *tv = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(model, len, "m", &sv), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(model, len, "m", &tv), 0);
    CU_ASSERT_EQUAL_FATAL(ds_fra_set_vocab(d, DS_SRC, sv), 0);
    CU_ASSERT_EQUAL_FATAL(ds_fra_set_vocab(d, DS_TGT, tv), 0);
    CU_ASSERT_EQUAL(zoo_valid_metric_auto(d), ZOO_METRIC_SACREBLEU);
    zoo_trainer *tr = zt_trainer_new(d, 0.1, 0.01, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    zoo_recipe r = tr->recipe;
    r.valid_metric = ZOO_METRIC_AUTO;
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_recipe(tr, &r), 0);
    CU_ASSERT_EQUAL_FATAL(train_to(tr, d, 60, 200, NULL, NULL, 0), 0);
    CU_ASSERT_EQUAL(tr->recipe.valid_metric, ZOO_METRIC_SACREBLEU);
    CU_ASSERT_EQUAL_FATAL(tr->n_valid, 2); /* steps 200 and 300 (the end) */
    zoo_eval_result e;
    CU_ASSERT_EQUAL_FATAL(zoo_evaluate(tr->model, tr->tape, sv, tv, d, DS_VALID, 12, &e), 0);
    CU_ASSERT_EQUAL(tr->valid[1].sacrebleu, e.sacrebleu);
    CU_ASSERT_EQUAL(tr->valid[1].chrf, e.sacre_chrf);
    CU_ASSERT_EQUAL(tr->valid[1].bleu, e.bleu4);
    /* not a comparison of zeros, and the chrF field not a BLEU (sacreBLEU and the tokenized
     * BLEU-4 are equal where every output's case matches its reference: 57.34 both on an AVX2
     * Zen 3, 41 and 42 on an AVX-512 Xeon; chrF 65.38 and 60) */
    CU_ASSERT(e.sacrebleu > 10 && e.sacre_chrf > 10 && e.sacre_chrf != e.bleu4);
    zoo_trainer_free(tr);
    ds_fra_free(d);
    /* the French sides empty: nothing to score sacreBLEU against */
    static const char empty[] = "Go.\t\nHi.\t\nRun!\t\nI lost.\t\n";
    o.valid_frac = 0.5;
    CU_ASSERT_EQUAL_FATAL(ds_fra_load_mem(empty, sizeof empty - 1, "mem", &o, &d), 0);
    tr = zt_trainer_new(d, 0.1, 0.01, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    tr->recipe.valid_metric = ZOO_METRIC_SACREBLEU;
    TG_EXPECT_ERROR(train_to(tr, d, 1, 1, NULL, NULL, 0),
                    "--valid-metric sacrebleu: none of the 2 validation pairs has a French side");
    CU_ASSERT_EQUAL(tr->steps, 0);
    zoo_trainer_free(tr);
    ds_fra_free(d);
    free(model);
}

static CU_TestInfo tests[] = {
    {"every validation records the standard score; valid.csv", test_records_the_standard_score},
    {"history round trip; checkpoints made before it", test_history_round_trip_and_old_checkpoints},
    {"the best checkpoint and patience by the metric", test_best_by_the_metric},
    {"a subword run: sacreBLEU by default; refusals", test_subword_run},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("valid_metric", tests); }
