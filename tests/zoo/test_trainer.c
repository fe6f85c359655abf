/* test_trainer.c -- the shared trainer and predictor on a small in-memory corpus: the loss's
 * value, overfitting, determinism (seeds, threads, batch shards), exact resume, beam search
 * against greedy, checkpoints, hyperparameter and metadata errors. The fused loss, validation
 * and the decay fitted to a time budget: test_trainer_loop.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/common.h"
#include "optim/optim.h"
#include "tests/tg_test.h"
#include "tests/zoo/zoo_test.h"
#include "zoo/app/decode.h"
#include "zoo/app/trainer.h"
#include "zoo/models/transformer.h"

static ds_fra *load(void) { return zt_corpus(4); }

static zoo_trainer *new_trainer(const ds_fra *d, double dropout, uint64_t seed) {
    return zt_trainer_new(d, dropout, 0.01, seed);
}

static int run_epochs(zoo_trainer *tr, const ds_fra *d, int epochs) {
    ds_batches *it;
    if (ds_batches_new(d, DS_TRAIN, true, &it)) return -1;
    zoo_train_opts o = {.epochs = epochs};
    int rc = zoo_train(tr, d, it, &o);
    ds_batches_free(it);
    return rc;
}

/* ---- the loss ---- */

static void test_masked_ce_value(void) {
    ag_tape *t = ag_tape_new();
    ag_tensor *logits = ag_tensor_new(t, AG_SHAPE(2, 3, 4)); /* zeros: every CE is log 4 */
    logits->data[0] = 1;                                     /* row 0, t 0, class 0 */
    const int32_t tgt[6] = {0, 2, 3, 1, 1, 1}, len[2] = {2, 0};
    nn_ctx c = {.tape = t};
    ag_tensor *l = nn_masked_ce(&c, logits, tgt, len, 0);
    CU_ASSERT_EQUAL_FATAL(l->ndim, 1);
    double ce0 = log(exp(1.0) + 3) - 1; /* class 0 with logit 1 among zeros */
    CU_ASSERT_DOUBLE_EQUAL(l->data[0], (ce0 + log(4.0)) / 3, 1e-6); /* mean over T = 3 */
    CU_ASSERT_EQUAL(l->data[1], 0);                                 /* nothing valid */
    int32_t dec[6];
    zoo_teacher_inputs(tgt, 2, 3, 2, dec);
    const int32_t want[6] = {2, 0, 2, 2, 1, 1};
    CU_ASSERT_EQUAL(memcmp(dec, want, sizeof want), 0);
    ag_tape_free(t);
}

/* ---- training ---- */

static void test_overfits_and_translates(void) {
    ds_fra *d = load();
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    zoo_trainer *tr = new_trainer(d, 0, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    CU_ASSERT_EQUAL(run_epochs(tr, d, 150), 0);
    /* d2l's figure is per token and divided by T once more: log(V) / T ~ 0.3 at the start */
    CU_ASSERT_TRUE(tr->hist[0].loss > 0.2);
    CU_ASSERT_TRUE(tr->hist[tr->n_hist - 1].loss < tr->hist[0].loss / 50);
    const ds_vocab *sv = ds_fra_vocab(d, DS_SRC), *tv = ds_fra_vocab(d, DS_TGT);
    const char *src[3] = {"go .", "i lost .", "i'm home ."},
               *want[3] = {"va !", "j'ai perdu .", "je suis chez moi ."};
    for (int i = 0; i < 3; i++) {
        char *greedy = NULL, *beam1 = NULL, *beam4 = NULL;
        CU_ASSERT_EQUAL(zoo_translate(tr->model, tr->tape, sv, tv, src[i], 10, 1, 0, &greedy), 0);
        CU_ASSERT_EQUAL(zoo_translate(tr->model, tr->tape, sv, tv, src[i], 10, 0, 0, &beam1), 0);
        CU_ASSERT_EQUAL(zoo_translate(tr->model, tr->tape, sv, tv, src[i], 10, 4, 0.6, &beam4), 0);
        CU_ASSERT_STRING_EQUAL(greedy, want[i]);
        CU_ASSERT_STRING_EQUAL(beam1, want[i]);
        if (strcmp(beam4, want[i])) fprintf(stderr, "\n  beam 4: '%s' => '%s'\n", src[i], beam4);
        CU_ASSERT_STRING_EQUAL(beam4, want[i]);
        free(greedy);
        free(beam1);
        free(beam4);
    }
    zoo_trainer_free(tr);
    ds_fra_free(d);
}

static void test_same_seed_same_bits(void) {
    ds_fra *d = load();
    zoo_trainer *a = new_trainer(d, 0.2, 9), *b = new_trainer(d, 0.2, 9);
    CU_ASSERT_EQUAL(run_epochs(a, d, 4), 0);
    CU_ASSERT_EQUAL(run_epochs(b, d, 4), 0);
    size_t n = nn_params_flat_size(a->model->ps);
    CU_ASSERT_EQUAL(
        memcmp(nn_params_values(a->model->ps), nn_params_values(b->model->ps), n * sizeof(ag_real)),
        0);
    CU_ASSERT_EQUAL(a->hist[3].loss, b->hist[3].loss);
    zoo_trainer_free(a);
    zoo_trainer_free(b);
    ds_fra_free(d);
}

/* Ops split independent outputs between threads, and batch shards run on them in parallel:
 * the thread count changes no bit, with one shard or with uneven ones (a batch of 4 in 3). */
static void test_threads_change_no_bit(void) {
    ds_fra *d = load();
    for (int shards = 1; shards <= 3; shards += 2) {
        zoo_trainer *one = new_trainer(d, 0.2, 4), *two = new_trainer(d, 0.2, 4);
        CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_shards(one, shards), 0);
        CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_shards(two, shards), 0);
        CU_ASSERT_EQUAL(run_epochs(one, d, 3), 0);
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(2), 0);
        CU_ASSERT_EQUAL(ag_threads(), 2);
        CU_ASSERT_EQUAL(run_epochs(two, d, 3), 0);
        CU_ASSERT_EQUAL(ag_set_threads(1), 0);
        size_t n = nn_params_flat_size(one->model->ps);
        CU_ASSERT_EQUAL(memcmp(nn_params_values(one->model->ps), nn_params_values(two->model->ps),
                               n * sizeof(ag_real)),
                        0);
        CU_ASSERT_EQUAL(one->hist[2].loss, two->hist[2].loss);
        zoo_trainer_free(one);
        zoo_trainer_free(two);
    }
    TG_EXPECT_ERROR(ag_set_threads(0), "set_threads");
    ds_fra_free(d);
}

/* Shards change the summation order, not the objective: with no dropout and lr = 0 (the
 * parameters stay put), every epoch's loss and the last gradient norm match one shard's to
 * float rounding, and the gradient really is the sum over all shards (its norm would differ
 * otherwise). Bad shard counts are refused. */
static void test_shards_same_objective(void) {
    ds_fra *d = load();
    zoo_transformer_cfg h = zt_tiny_transformer(0);
    zoo_trainer *tr[2];
    for (int i = 0; i < 2; i++) {
        zoo_model *m =
            zoo_model_new(&zoo_transformer_kind, &h, ds_vocab_size(ds_fra_vocab(d, DS_SRC)),
                          ds_vocab_size(ds_fra_vocab(d, DS_TGT)), 6);
        tr[i] = m ? zoo_trainer_new(m, 0, 1.0, 7) : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(tr[i]);
    }
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_shards(tr[1], 2), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_shards(tr[1], 3), 0); /* grows */
    CU_ASSERT_EQUAL(tr[1]->shards, 3);
    for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(run_epochs(tr[i], d, 2), 0);
    for (int e = 0; e < 2; e++)
        CU_ASSERT_DOUBLE_EQUAL(tr[1]->hist[e].loss, tr[0]->hist[e].loss,
                               1e-6 * tr[0]->hist[e].loss);
    double g0 = optim_last_grad_norm(tr[0]->opt), g1 = optim_last_grad_norm(tr[1]->opt);
    CU_ASSERT(g0 > 0);
    CU_ASSERT_DOUBLE_EQUAL(g1, g0, 1e-5 * g0);
    TG_EXPECT_ERROR(zoo_trainer_set_shards(tr[1], 0), "shards: 0");
    CU_ASSERT_EQUAL(zoo_trainer_set_shards(tr[1], 65), -1);
    CU_ASSERT_EQUAL(tr[1]->shards, 3);
    CU_ASSERT_EQUAL(zoo_trainer_set_shards(tr[1], 1), 0); /* shrinks */
    CU_ASSERT_EQUAL(run_epochs(tr[1], d, 3), 0);
    CU_ASSERT_DOUBLE_EQUAL(tr[1]->hist[2].loss, tr[0]->hist[1].loss, 1e-6 * tr[0]->hist[1].loss);
    for (int i = 0; i < 2; i++) zoo_trainer_free(tr[i]);
    ds_fra_free(d);
}

static void test_resume_is_exact(void) {
    ds_fra *d = load();
    char *path = tg_temp_file("", 0);
    zoo_trainer *straight = new_trainer(d, 0.2, 5), *first = new_trainer(d, 0.2, 5);
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_shards(straight, 2), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_set_shards(first, 2), 0);
    CU_ASSERT_EQUAL(run_epochs(straight, d, 6), 0);
    CU_ASSERT_EQUAL(run_epochs(first, d, 3), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_trainer_save(first, d, path), 0);
    zoo_trainer_free(first);
    ds_fra_options o;
    zoo_trainer *resumed = zoo_trainer_resume(path, &zoo_transformer_kind, &o);
    if (!resumed) fprintf(stderr, "\n  %s\n", ag_last_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(resumed);
    CU_ASSERT_EQUAL(resumed->epochs_done, 3);
    CU_ASSERT_EQUAL(resumed->shards, 2);
    CU_ASSERT_EQUAL(o.batch_size, 4);
    CU_ASSERT_EQUAL(o.min_freq, 1);
    CU_ASSERT_EQUAL(zoo_trainer_check_data(resumed, d), 0);
    CU_ASSERT_EQUAL(run_epochs(resumed, d, 6), 0);
    size_t n = nn_params_flat_size(straight->model->ps);
    CU_ASSERT_EQUAL(memcmp(nn_params_values(straight->model->ps),
                           nn_params_values(resumed->model->ps), n * sizeof(ag_real)),
                    0);
    for (int e = 0; e < 6; e++) CU_ASSERT_EQUAL(straight->hist[e].loss, resumed->hist[e].loss);
    zoo_trainer_free(straight);
    zoo_trainer_free(resumed);
    tg_remove(path);
    ds_fra_free(d);
}

/* ---- checkpoints ---- */

/* A new checkpoint of tr's model with d's vocabularies (zoo_ckpt_add_model); the caller frees. */
static nn_ckpt *model_ckpt(const zoo_trainer *tr, const ds_fra *d) {
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL_FATAL(
        zoo_ckpt_add_model(ck, tr->model, ds_fra_vocab(d, DS_SRC), ds_fra_vocab(d, DS_TGT)), 0);
    return ck;
}

static void test_checkpoint_of_another_model(void) {
    ds_fra *d = load();
    zoo_trainer *tr = new_trainer(d, 0, 2);
    nn_ckpt *ck = model_ckpt(tr, d);
    zoo_model_kind other = zoo_transformer_kind;
    other.name = "bahdanau";
    zoo_model *m = NULL;
    ds_vocab *sv = NULL, *tv = NULL;
    TG_EXPECT_ERROR(zoo_ckpt_load_model(ck, &other, &m, &sv, &tv),
                    "holds a transformer model, not a bahdanau");
    CU_ASSERT_PTR_NULL(m);
    /* the right kind: same parameters, same vocabularies */
    CU_ASSERT_EQUAL_FATAL(zoo_ckpt_load_model(ck, &zoo_transformer_kind, &m, &sv, &tv), 0);
    CU_ASSERT_EQUAL(ds_vocab_size(tv), ds_vocab_size(ds_fra_vocab(d, DS_TGT)));
    CU_ASSERT_EQUAL(((const zoo_transformer_cfg *)m->cfg)->hiddens, 16);
    size_t n = nn_params_flat_size(m->ps);
    CU_ASSERT_EQUAL(
        memcmp(nn_params_values(m->ps), nn_params_values(tr->model->ps), n * sizeof(ag_real)), 0);
    /* a missing config entry is named */
    nn_ckpt *bad = nn_ckpt_new();
    nn_ckpt_set_meta(bad, "tapegrad.model", "transformer");
    zoo_model *m2 = NULL;
    ds_vocab *sv2 = NULL, *tv2 = NULL;
    TG_EXPECT_ERROR(zoo_ckpt_load_model(bad, &zoo_transformer_kind, &m2, &sv2, &tv2),
                    "config.hiddens");
    CU_ASSERT_PTR_NULL(m2);
    CU_ASSERT_PTR_NULL(sv2);
    CU_ASSERT_PTR_NULL(tv2);
    nn_ckpt_free(bad);
    zoo_model_free(m);
    ds_vocab_free(sv);
    ds_vocab_free(tv);
    nn_ckpt_free(ck);
    zoo_trainer_free(tr);
    ds_fra_free(d);
}

static void test_hparam_errors(void) {
    const zoo_model_kind *k = &zoo_transformer_kind;
    zoo_transformer_cfg h = zoo_transformer_default_cfg;
    TG_EXPECT_ERROR(zoo_config_set(k, &h, "heads", "3.5"),
                    "--heads: expected an integer in [1, 256], got '3.5'");
    CU_ASSERT_EQUAL(h.heads, 4); /* unchanged */
    /* strict numbers: the whole text, decimal integers, finite reals in range */
    static const char *const bad_int[] = {
        "1e3", "0x10", "4 ", "", "nan", "+", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_int / sizeof *bad_int; i++)
        CU_ASSERT_EQUAL(zoo_config_set(k, &h, "heads", bad_int[i]), -1);
    static const char *const bad_real[] = {"nan", "inf", "-inf", "1.5", "-0.1", "0.5x", ""};
    for (size_t i = 0; i < sizeof bad_real / sizeof *bad_real; i++)
        CU_ASSERT_EQUAL(zoo_config_set(k, &h, "dropout", bad_real[i]), -1);
    CU_ASSERT_EQUAL(zoo_config_set(k, &h, "d2l-step-positions", "2"), -1);
    TG_EXPECT_ERROR(zoo_config_set(k, &h, "nope", "1"),
                    "--nope: not a config field of the transformer model");
    CU_ASSERT_EQUAL(zoo_config_set(k, &h, "dropout", "0.25"), 0);
    CU_ASSERT_EQUAL(h.dropout, 0.25);
    CU_ASSERT_EQUAL(zoo_config_set(k, &h, "d2l-step-positions", "true"), 0);
    CU_ASSERT_TRUE(h.d2l_step_positions);
    /* every field formats to a text that parses back to the same value */
    for (int i = 0; i < k->n_config; i++) {
        zoo_transformer_cfg back = zoo_transformer_default_cfg;
        char buf[64];
        CU_ASSERT_EQUAL(zoo_field_parse(&k->config[i], &back,
                                        zoo_field_format(&k->config[i], &h, buf, sizeof buf), "x"),
                        0);
        CU_ASSERT_EQUAL(zoo_field_number(&k->config[i], &back),
                        zoo_field_number(&k->config[i], &h));
    }
    /* hiddens not a multiple of heads: a clear error, no model */
    h.heads = 3;
    TG_EXPECT_NULL(zoo_model_new(&zoo_transformer_kind, &h, 10, 10, 0), "multiple of heads");
}

/* Metadata values are read as strictly as flags: a bad value is named once (the file, the key,
 * what it expects, what it holds), never formatted into itself; integers are range-checked. */
static void test_metadata_values(void) {
    ds_fra *d = load();
    zoo_trainer *tr = new_trainer(d, 0, 2);
    nn_ckpt *ck = model_ckpt(tr, d);
    zoo_model *m = NULL;
    ds_vocab *sv = NULL, *tv = NULL;
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "config.dropout", "ten"), 0);
    CU_ASSERT_EQUAL(zoo_ckpt_load_model(ck, &zoo_transformer_kind, &m, &sv, &tv), -1);
    char want[256];
    snprintf(want, sizeof want,
             "%s: metadata config.dropout: expected a number in [0, 0.99], got 'ten'",
             nn_ckpt_source(ck));
    CU_ASSERT_STRING_EQUAL(ag_last_error(), want);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "config.dropout", "0.1"), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "config.heads", "4294967300"), 0); /* not wrapped to 4 */
    TG_EXPECT_ERROR(zoo_ckpt_load_model(ck, &zoo_transformer_kind, &m, &sv, &tv),
                    "config.heads: expected an integer in [1, 256], got '4294967300'");
    /* data.*: the range of the flag of the same name */
    ds_fra_options o = ds_fra_defaults();
    static const char *const bad[][2] = {
        {"data.num_steps", "100000000"},   {"data.num_steps", "-5"}, {"data.num_steps", "ten"},
        {"data.batch_size", "4294967306"}, {"data.split", "0.1"},    {"data.split", "0.1 nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nn_ckpt *c2 = nn_ckpt_new();
        CU_ASSERT_EQUAL(nn_ckpt_set_meta(c2, bad[i][0], bad[i][1]), 0);
        CU_ASSERT_EQUAL(zoo_data_meta_read(c2, &o, NULL), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), bad[i][0]));
        nn_ckpt_free(c2);
    }
    CU_ASSERT_EQUAL(o.num_steps, 10); /* unchanged by the refusals */
    nn_ckpt *good = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(good, "data.num_steps", "12"), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(good, "data.split", "0.1 0.05"), 0);
    CU_ASSERT_EQUAL(zoo_data_meta_read(good, &o, NULL), 0);
    CU_ASSERT_EQUAL(o.num_steps, 12);
    CU_ASSERT_EQUAL(o.valid_frac, 0.1);
    CU_ASSERT_EQUAL(o.test_frac, 0.05);
    nn_ckpt_free(good);
    nn_ckpt_free(ck);
    zoo_trainer_free(tr);
    ds_fra_free(d);
}

static CU_TestInfo tests[] = {
    {"metadata values: strict, named once, in range", test_metadata_values},
    {"masked cross-entropy and teacher forcing", test_masked_ce_value},
    {"overfits a small corpus; greedy and beam translate it", test_overfits_and_translates},
    {"same seed, same bits", test_same_seed_same_bits},
    {"resume continues bit for bit", test_resume_is_exact},
    {"two threads, the same bits", test_threads_change_no_bit},
    {"batch shards: the same objective", test_shards_same_objective},
    {"checkpoint of another model; model round trip", test_checkpoint_of_another_model},
    {"hyperparameter errors", test_hparam_errors},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("trainer", tests); }
