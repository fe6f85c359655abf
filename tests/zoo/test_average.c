/* test_average.c -- checkpoint averaging (PROGRAM average, cmd_average.c) and the copies train
 * --keep-checkpoints keeps (zoo_kept_checkpoint_name, zoo_kept_checkpoints, ..._prune): the
 * mean of three tiny checkpoints made here, exactly; what the result holds; the refusals (another
 * config, vocabulary, kind, a missing file, --out naming an input); the kept copies' names. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/tg_test.h"
#include "zoo/app/cli.h"
#include "zoo/app/trainer.h"

static const char WORDS[] = "<unk>\n<pad>\n<bos>\n<eos>\na\nb\nc\nd\ne\nf\ng\nh\n";
static const char OTHER_WORDS[] = "<unk>\n<pad>\n<bos>\n<eos>\na\nb\nX\nd\ne\nf\ng\nh\n";

/* The value of element j of every parameter of checkpoint k (0, 1, 2): 1, 2, 4 times (j % 3 +
 * 1), but element 1: 1e8, 1, -1e8 (whose float sum in this order is 0: the mean is summed in
 * double, 1 / 3). */
static float value(int k, ptrdiff_t j) {
    static const float big[3] = {1e8f, 1.0f, -1e8f}, scale[3] = {1, 2, 4};
    return j == 1 ? big[k] : scale[k] * (float)(j % 3 + 1);
}

/* The expected mean of element j: in double, then stored as float. */
static float mean(ptrdiff_t j) {
    double s = 0;
    for (int k = 0; k < 3; k++) s += (double)value(k, j);
    return (float)(s / 3);
}

/* Writes a checkpoint of `kind` (config: its defaults with one field set: name = text, or
 * none) whose parameters are value(k, j), with an Adam-like tensor and data.* metadata, as
 * dir/file. */
static const char *make(const char *dir, const char *file, const zoo_model_kind *kind, int k,
                        const char *name, const char *text, const char *tgt_words) {
    void *cfg = malloc(kind->config_size);
    memcpy(cfg, kind->defaults, kind->config_size);
    if (name) CU_ASSERT_EQUAL_FATAL(zoo_config_set(kind, cfg, name, text), 0);
    ds_vocab *sv, *tv;
    TG_OK(ds_vocab_parse(WORDS, sizeof WORDS - 1, "src", &sv));
    TG_OK(ds_vocab_parse(tgt_words, strlen(tgt_words), "tgt", &tv));
    zoo_model *m = zoo_model_new(kind, cfg, 12, 12, 7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    for (size_t i = 0; i < nn_params_tensor_count(m->ps); i++) {
        ag_tensor *p = nn_params_tensor_at(m->ps, i);
        for (ptrdiff_t j = 0; j < p->numel; j++) p->data[j] = value(k, j);
    }
    nn_ckpt *ck = nn_ckpt_new();
    const ag_real moment[2] = {5, 6};
    TG_OK(zoo_ckpt_add_model(ck, m, sv, tv));
    TG_OK(nn_ckpt_add(ck, "optim.adam.m.0", 1, (const int[]){2}, moment));
    TG_OK(nn_ckpt_set_meta(ck, "data.num_steps", k ? "11" : "10"));
    TG_OK(nn_ckpt_set_meta(ck, "train.steps", "40"));
    const char *path = tg_path(dir, file);
    TG_OK(nn_ckpt_save(ck, path));
    nn_ckpt_free(ck);
    zoo_model_free(m);
    ds_vocab_free(sv);
    ds_vocab_free(tv);
    free(cfg);
    return path;
}

/* Runs `transformer_nmt ARGS...` (NULL-terminated); its exit status, stderr in *err (caller
 * frees). */
static int run(char **err, ...) {
    char *argv[16] = {"transformer_nmt"};
    int argc = 1;
    va_list ap;
    va_start(ap, err);
    for (char *a; argc < 15 && (a = va_arg(ap, char *));) argv[argc++] = a;
    va_end(ap);
    tg_fd_capture out, e;
    tg_fd_capture_begin(&out, STDOUT_FILENO);
    tg_fd_capture_begin(&e, STDERR_FILENO);
    int rc = zoo_cli_main(&zoo_transformer_kind, argc, argv);
    *err = tg_fd_capture_end(&e);
    free(tg_fd_capture_end(&out));
    return rc;
}

static void test_mean_of_three(void) {
    char *dir = tg_temp_dir(), *err;
    char a[4096], b[4096], c[4096], out[4096];
    snprintf(a, sizeof a, "%s", make(dir, "a.safetensors", &zoo_transformer_kind, 0, 0, 0, WORDS));
    snprintf(b, sizeof b, "%s", make(dir, "b.safetensors", &zoo_transformer_kind, 1, 0, 0, WORDS));
    snprintf(c, sizeof c, "%s", make(dir, "c.safetensors", &zoo_transformer_kind, 2, 0, 0, WORDS));
    snprintf(out, sizeof out, "%s", tg_path(dir, "avg.safetensors"));
    CU_ASSERT_EQUAL(run(&err, "average", "--out", out, a, b, c, (char *)0), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    free(err);
    nn_ckpt *ck;
    TG_OK(nn_ckpt_load(&ck, out));
    CU_ASSERT_EQUAL(mean(0), (float)(7.0 / 3));
    CU_ASSERT_EQUAL(mean(1), (float)(1.0 / 3)); /* summed in double */
    size_t params = 0;
    for (size_t i = 0; i < nn_ckpt_count(ck); i++) {
        const nn_ckpt_tensor *t = nn_ckpt_at(ck, i);
        CU_ASSERT(strncmp(t->name, "optim.", 6) != 0); /* no optimizer state */
        CU_ASSERT_EQUAL(t->dtype, NN_F32);
        int shape[NN_CKPT_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = (int)t->shape[d];
        float *v = malloc(sizeof *v * t->numel);
        TG_OK(nn_ckpt_read(ck, t->name, t->ndim, shape, v));
        int wrong = 0;
        for (uint64_t j = 0; j < t->numel; j++) wrong += v[j] != mean((ptrdiff_t)j);
        CU_ASSERT_EQUAL(wrong, 0);
        free(v);
        params++;
    }
    CU_ASSERT(params > 10);
    /* the first input's model, config, vocabularies and data options; no train.* */
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "tapegrad.model"), "transformer");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "data.num_steps"), "10");
    CU_ASSERT_PTR_NULL(nn_ckpt_meta(ck, "train.steps"));
    CU_ASSERT_PTR_NOT_NULL(nn_ckpt_meta(ck, "config.hiddens"));
    const char *inputs = nn_ckpt_meta(ck, "average.inputs");
    CU_ASSERT_PTR_NOT_NULL_FATAL(inputs);
    TG_HAS(inputs, "3\n", a, b, c);
    zoo_model *m;
    ds_vocab *sv, *tv;
    TG_OK(zoo_ckpt_load_model(ck, &zoo_transformer_kind, &m, &sv, &tv)); /* as translate does */
    CU_ASSERT_EQUAL(ds_vocab_size(tv), 12);
    zoo_model_free(m);
    ds_vocab_free(sv);
    ds_vocab_free(tv);
    nn_ckpt_free(ck);
    tg_remove(dir);
}

/* average with `second` as the second input fails with status `status`, stderr holding what. */
static void refused(const char *second, int status, const char *what, const char *what2) {
    char *dir = tg_temp_dir(), *err;
    char a[4096], out[4096];
    snprintf(a, sizeof a, "%s", make(dir, "a.safetensors", &zoo_transformer_kind, 0, 0, 0, WORDS));
    snprintf(out, sizeof out, "%s", tg_path(dir, "avg.safetensors"));
    CU_ASSERT_EQUAL(run(&err, "average", "--out", out, a, second, (char *)0), status);
    TG_HAS(err, "transformer_nmt average: ", what, what2);
    CU_ASSERT(access(out, F_OK) != 0); /* nothing written */
    free(err);
    tg_remove(dir);
}

static void test_refusals(void) {
    char *dir = tg_temp_dir(), p[4096];
    snprintf(p, sizeof p, "%s",
             make(dir, "drop.safetensors", &zoo_transformer_kind, 1, "dropout", "0.2", WORDS));
    refused(p, 1, "drop.safetensors: its config.dropout is '0.2'", "'0.1'");
    snprintf(p, sizeof p, "%s",
             make(dir, "heads.safetensors", &zoo_transformer_kind, 1, "heads", "2", WORDS));
    refused(p, 1, "heads.safetensors: its config.heads is '2'", "'4'");
    snprintf(p, sizeof p, "%s",
             make(dir, "voc.safetensors", &zoo_transformer_kind, 1, 0, 0, OTHER_WORDS));
    refused(p, 1, "voc.safetensors: its target vocabulary (vocab.tgt) differs from", "at token 6");
    snprintf(p, sizeof p, "%s", make(dir, "gru.safetensors", &zoo_bahdanau_kind, 1, 0, 0, WORDS));
    refused(p, 1, "gru.safetensors: its tapegrad.model is 'bahdanau'", "'transformer'");
    refused(tg_path(dir, "missing.safetensors"), 1, "missing.safetensors", "cannot open");
    /* a bahdanau checkpoint first: not the program's kind */
    char *err, out[4096];
    snprintf(out, sizeof out, "%s", tg_path(dir, "avg.safetensors"));
    CU_ASSERT_EQUAL(run(&err, "average", "--out", out, p, p, (char *)0), 1);
    TG_HAS(err, "gru.safetensors: holds a bahdanau model, not a transformer");
    free(err);
    /* --out naming an input (through another spelling): a usage error, before any work */
    snprintf(p, sizeof p, "%s", make(dir, "a.safetensors", &zoo_transformer_kind, 0, 0, 0, WORDS));
    char alias[4200];
    snprintf(alias, sizeof alias, "%s/./a.safetensors", dir);
    CU_ASSERT_EQUAL(run(&err, "average", "--out", alias, p, p, (char *)0), 2);
    TG_HAS(err, "--out and checkpoint 1 name the same file");
    free(err);
    CU_ASSERT_EQUAL(run(&err, "average", "--out", out, (char *)0), 2);
    TG_HAS(err, "give the checkpoints to average");
    free(err);
    CU_ASSERT_EQUAL(run(&err, "average", "--out", out, "--last", "2", p, (char *)0), 2);
    TG_HAS(err, "not both");
    free(err);
    CU_ASSERT_EQUAL(run(&err, "average", "--out", out, "--last", "2", (char *)0), 2);
    TG_HAS(err, "--last needs --checkpoint");
    free(err);
    tg_remove(dir);
}

/* The kept copies: their names, which files are copies, the most recent first, pruning. */
static void test_kept_copies(void) {
    char name[4200];
    TG_OK(zoo_kept_checkpoint_name("d/run.safetensors", 40, name, sizeof name));
    CU_ASSERT_STRING_EQUAL(name, "d/run.step40.safetensors");
    TG_OK(zoo_kept_checkpoint_name("run.ckpt", 0, name, sizeof name));
    CU_ASSERT_STRING_EQUAL(name, "run.ckpt.step0.safetensors");
    char *dir = tg_temp_dir();
    static const char *const files[] = {
        "run.step2.safetensors",  "run.step4.safetensors",   "run.step6.safetensors",
        "run.step10.safetensors", "run.step007.safetensors", "run.step3.safetensors.tmp",
        "runs.step3.safetensors", "run.step-1.safetensors",  "run.stepx.safetensors",
        "run.safetensors",        "other.step5.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        FILE *f = fopen(tg_path(dir, files[i]), "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fclose(f);
    }
    char ck[4200];
    snprintf(ck, sizeof ck, "%s", tg_path(dir, "run.safetensors"));
    int64_t *steps;
    CU_ASSERT_EQUAL_FATAL(zoo_kept_checkpoints(ck, -1, &steps), 4);
    CU_ASSERT(steps[0] == 10 && steps[1] == 6 && steps[2] == 4 && steps[3] == 2);
    free(steps);
    CU_ASSERT_EQUAL(zoo_kept_checkpoints(ck, 5, &steps), 2);
    free(steps);
    /* a run at step 6 keeping 2: step 2 goes; step 10 (not of its steps) and the others stay */
    TG_OK(zoo_kept_checkpoints_prune(ck, 6, 2));
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        CU_ASSERT_EQUAL(access(tg_path(dir, files[i]), F_OK) == 0, i != 0);
    CU_ASSERT_EQUAL(zoo_kept_checkpoints(tg_path(dir, "none.safetensors"), -1, &steps), 0);
    CU_ASSERT_PTR_NULL(steps);
    TG_EXPECT_ERROR(zoo_kept_checkpoints("/nonexistent-dir/run.safetensors", -1, &steps),
                    "/nonexistent-dir", "cannot list");
    tg_remove(dir);
}

int main(void) {
    static CU_TestInfo tests[] = {{"mean of three checkpoints", test_mean_of_three},
                                  {"refusals", test_refusals},
                                  {"kept copies", test_kept_copies},
                                  CU_TEST_INFO_NULL};
    return tg_test_main("average", tests);
}
