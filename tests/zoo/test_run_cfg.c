/* test_run_cfg.c -- the one run configuration (zoo/app/run_cfg.h): defaults, flags, presets,
 * configuration files (written, read back, bad keys and values named with file and line),
 * checkpoint metadata of its groups (and the older data.split), the resume check, the ranks'
 * text. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/run_cfg.h"
#include "zoo/models/transformer.h"
#include "tests/tg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const zoo_model_kind *K = &zoo_transformer_kind;

static int parse(zoo_run *r, const char *cmd, char letter, int argc, const char **argv) {
    CU_ASSERT_EQUAL_FATAL(zoo_run_init(r, K, cmd, letter), 0);
    return zoo_run_parse(r, argc, (char **)argv);
}

/* Defaults come from the data options, the kind and the recipe; flags set and mark "given". */
static void test_defaults_and_flags(void) {
    zoo_run r;
    const char *argv[] = {"--epochs",      "3",      "--lr=0.01", "--heads", "2",
                          "--lr-schedule", "cosine", "--resume"};
    CU_ASSERT_EQUAL(parse(&r, "train", 't', 8, argv), 0);
    const zoo_transformer_cfg *m = r.cfg.model;
    CU_ASSERT_EQUAL(r.cfg.loop.epochs, 3);
    CU_ASSERT_EQUAL(r.cfg.recipe.lr, 0.01);
    CU_ASSERT_EQUAL(r.cfg.recipe.clip, 1);
    CU_ASSERT_EQUAL(r.cfg.recipe.schedule, ZOO_SCHEDULE_COSINE);
    CU_ASSERT_EQUAL(m->heads, 2);
    CU_ASSERT_EQUAL(m->hiddens, zoo_transformer_default_cfg.hiddens);
    CU_ASSERT_EQUAL(r.cfg.exec.resume, 1);
    CU_ASSERT_EQUAL(r.cfg.exec.shards, 2);
    CU_ASSERT_EQUAL(r.cfg.data.num_steps, ds_fra_defaults().num_steps);
    CU_ASSERT(zoo_run_given(&r, "epochs") && zoo_run_given(&r, "heads"));
    CU_ASSERT(!zoo_run_given(&r, "hiddens") && !zoo_run_given(&r, "seed"));
    zoo_run_free(&r);
    /* the kind's trainer defaults */
    CU_ASSERT_EQUAL(parse(&r, "train", 't', 0, NULL), 0);
    CU_ASSERT_EQUAL(r.cfg.loop.epochs, K->epochs);
    CU_ASSERT_EQUAL(r.cfg.recipe.lr, K->lr);
    zoo_run_free(&r);
}

static void expect_usage(const char *cmd, char letter, int argc, const char **argv,
                         const char *want) {
    zoo_run r;
    CU_ASSERT_EQUAL(parse(&r, cmd, letter, argc, argv), -1);
    if (!strstr(ag_last_error(), want))
        printf("\n    got '%s', expected '%s'", ag_last_error(), want);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), want));
    zoo_run_free(&r);
}

/* Bad flags name the flag, what it expects and what was given. */
static void test_bad_flags(void) {
    expect_usage("train", 't', 2, (const char *[]){"--epochs", "0"},
                 "--epochs: expected an integer in [1, 1000000], got '0'");
    expect_usage("train", 't', 2, (const char *[]){"--lr-schedule", "step"},
                 "--lr-schedule: expected one of constant, invsqrt, cosine, linear, got 'step'");
    expect_usage("train", 't', 1, (const char *[]){"--nope"}, "unknown flag --nope");
    expect_usage("train", 't', 1, (const char *[]){"--epochs"}, "--epochs needs a value");
    expect_usage("train", 't', 1, (const char *[]){"--resume=1"}, "--resume takes no value");
    expect_usage("stats", 's', 2, (const char *[]){"--beam", "2"}, "unknown flag --beam");
    expect_usage("translate", 'r', 2, (const char *[]){"--heads", "x"},
                 "--heads: expected an integer in [1, 256], got 'x'");
    expect_usage("train", 't', 2, (const char *[]){"--checkpoint", ""},
                 "--checkpoint: expected a path, got an empty text");
    expect_usage("train", 't', 2, (const char *[]){"--preset", "tiny"},
                 "--preset tiny: no such preset for transformer_nmt (full)");
    expect_usage("eval", 'e', 2, (const char *[]){"--preset", "full"},
                 "--preset: only train takes a preset");
    expect_usage("train", 't', 2, (const char *[]){"--config", "/nonexistent/run.cfg"},
                 "--config /nonexistent/run.cfg: cannot open");
}

/* A preset sets its values as if given; flags override it wherever they stand. */
static void test_preset(void) {
    zoo_run r;
    const char *argv[] = {"--hiddens", "128", "--preset", "full"};
    CU_ASSERT_EQUAL(parse(&r, "train", 't', 4, argv), 0);
    const zoo_transformer_cfg *m = r.cfg.model;
    CU_ASSERT_EQUAL(m->hiddens, 128);
    CU_ASSERT_EQUAL(m->heads, 8);
    CU_ASSERT(m->share_embeddings);
    CU_ASSERT(r.cfg.vocab.split_digits);
    CU_ASSERT(r.cfg.vocab.number_tags);
    CU_ASSERT_EQUAL(r.cfg.data.batch_tokens, 1024);
    CU_ASSERT_EQUAL(r.cfg.recipe.schedule, ZOO_SCHEDULE_LINEAR);
    CU_ASSERT_EQUAL(r.cfg.recipe.warmup, 1600);
    CU_ASSERT_EQUAL(r.cfg.recipe.decay_steps, 12000); /* moved by --fit-decay */
    CU_ASSERT(r.cfg.loop.fit_decay);
    CU_ASSERT_EQUAL(r.cfg.loop.max_steps, 0);
    CU_ASSERT_EQUAL(r.cfg.recipe.beta2, 0.98);
    CU_ASSERT_EQUAL(r.cfg.loop.time_budget, 3600);
    CU_ASSERT(zoo_run_given(&r, "valid-steps"));
    zoo_run_free(&r);
}

static char *dump_text(const zoo_run *r) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    zoo_run_dump(r, f);
    fclose(f);
    return buf;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* --dump-config's file read back with --config gives the same configuration; flags beside it
 * override it. */
static void test_dump_and_read(void) {
    char path[] = "/tmp/tg_run_cfg_XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    zoo_run a, b;
    const char *argv[] = {"--preset",      "full",   "--data",        "/x/fra.txt", "--seed",  "7",
                          "--lr-schedule", "linear", "--decay-steps", "900",        "--resume"};
    CU_ASSERT_EQUAL(parse(&a, "train", 't', 11, argv), 0);
    char *text = dump_text(&a);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "[data]\nnum-examples = 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "lr-schedule = linear\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "data = /x/fra.txt\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "checkpoint = \n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "[model]\nhiddens = 256\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "beam =")); /* translate's, not train's */
    write_file(path, text);
    const char *argv2[] = {"--config", path};
    CU_ASSERT_EQUAL(parse(&b, "train", 't', 2, argv2), 0);
    char *again = dump_text(&b);
    CU_ASSERT_STRING_EQUAL(again, text);
    CU_ASSERT_EQUAL(b.cfg.data.seed, 7);
    CU_ASSERT(zoo_run_given(&b, "seed"));
    zoo_run_free(&b);
    const char *argv3[] = {"--epochs", "5", "--config", path};
    CU_ASSERT_EQUAL(parse(&b, "train", 't', 4, argv3), 0);
    CU_ASSERT_EQUAL(b.cfg.loop.epochs, 5);
    CU_ASSERT_EQUAL(b.cfg.recipe.decay_steps, 900);
    zoo_run_free(&b);
    free(again);
    free(text);
    zoo_run_free(&a);
    unlink(path);
}

/* A bad line names the file, the line, the key and what was expected. */
static void test_bad_files(void) {
    static const char *const cases[][2] = {
        {"[data]\nnope = 1\n", ":2: nope: not a setting of transformer_nmt train"},
        {"epochs = ten\n", ":1: epochs: expected an integer in [1, 1000000], got 'ten'"},
        {"# c\n\n[recipe]\nepochs = 3\n", ":4: epochs: belongs to [train], not [recipe]"},
        {"[what]\n", ":1: unknown group [what]"},
        {"epochs 3\n", ":1: expected 'name = value', got 'epochs 3'"},
        {"resume = maybe\n", ":1: resume: expected on or off, got 'maybe'"},
        {"[model]\nheads = 300\n", ":2: heads: expected an integer in [1, 256], got '300'"},
    };
    char path[] = "/tmp/tg_run_cfg_XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_file(path, cases[i][0]);
        char want[256];
        snprintf(want, sizeof want, "%s%s", path, cases[i][1]);
        expect_usage("train", 't', 2, (const char *[]){"--config", path}, want);
    }
    unlink(path);
}

/* The saved groups round-trip through checkpoint metadata; data.split of older checkpoints is
 * read; a bad value is refused naming the key, leaving the struct as it was. */
static void test_meta(void) {
    zoo_run r;
    const char *argv[] = {"--num-steps",   "12",      "--valid-frac",   "0.125", "--lr", "0.25",
                          "--lr-schedule", "invsqrt", "--warmup-steps", "40"};
    CU_ASSERT_EQUAL(parse(&r, "train", 't', 10, argv), 0);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(zoo_cfg_meta_write(ck, zoo_cfg_group_find("data"), &r.cfg.data), 0);
    CU_ASSERT_EQUAL(zoo_cfg_meta_write(ck, zoo_cfg_group_find("recipe"), &r.cfg.recipe), 0);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "data.num_steps"), "12");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "train.lr_schedule"), "invsqrt");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "train.lr"), "0.25");
    ds_fra_options o = ds_fra_defaults();
    zoo_recipe rc = zoo_recipe_d2l;
    CU_ASSERT_EQUAL(zoo_data_meta_read(ck, &o, NULL), 0);
    CU_ASSERT_EQUAL(zoo_cfg_meta_read(ck, zoo_cfg_group_find("recipe"), &rc, NULL), 0);
    CU_ASSERT_EQUAL(o.num_steps, 12);
    CU_ASSERT_EQUAL(o.valid_frac, 0.125);
    CU_ASSERT_EQUAL(o.batch_size, r.cfg.data.batch_size);
    CU_ASSERT_EQUAL(rc.warmup, 40);
    CU_ASSERT_EQUAL(rc.lr, 0.25);
    CU_ASSERT_EQUAL(rc.schedule, ZOO_SCHEDULE_INVSQRT);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "train.lr_schedule", "sometimes"), 0);
    CU_ASSERT_EQUAL(zoo_cfg_meta_read(ck, zoo_cfg_group_find("recipe"), &rc, NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "metadata train.lr_schedule: expected one of"));
    CU_ASSERT_EQUAL(rc.warmup, 40);
    nn_ckpt_free(ck);
    /* older checkpoints: the fractions in data.split */
    ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "data.split", "0.1 0.05"), 0);
    o = ds_fra_defaults();
    CU_ASSERT_EQUAL(zoo_data_meta_read(ck, &o, NULL), 0);
    CU_ASSERT_EQUAL(o.valid_frac, 0.1);
    CU_ASSERT_EQUAL(o.test_frac, 0.05);
    nn_ckpt_free(ck);
    zoo_run_free(&r);
}

/* On --resume, a given value of a fixed group must equal the checkpoint's; other groups may
 * change. The ranks' text lists the fixed groups and the loop. */
static void test_fixed_and_ranks(void) {
    zoo_run r;
    const char *argv[] = {"--epochs", "9", "--heads", "8", "--label-smoothing", "0.1"};
    CU_ASSERT_EQUAL(parse(&r, "train", 't', 6, argv), 0);
    zoo_run_cfg saved = r.cfg;
    zoo_transformer_cfg m = *(const zoo_transformer_cfg *)r.cfg.model;
    saved.model = &m;
    CU_ASSERT_EQUAL(zoo_run_check_fixed(&r, &saved), 0);
    saved.loop.epochs = 2; /* the loop is not fixed */
    CU_ASSERT_EQUAL(zoo_run_check_fixed(&r, &saved), 0);
    m.heads = 4;
    CU_ASSERT_EQUAL(zoo_run_check_fixed(&r, &saved), -1);
    CU_ASSERT_STRING_EQUAL(
        ag_last_error(), "--heads 8 differs from the checkpoint's 4: it cannot change on --resume");
    m.heads = 8;
    saved.recipe.label_smoothing = 0;
    CU_ASSERT_EQUAL(zoo_run_check_fixed(&r, &saved), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "--label-smoothing 0.1 differs"));
    char *text = zoo_run_text(&r);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "--epochs 9\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "--heads 8\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "--num-steps 10\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "--threads")); /* may differ between ranks */
    free(text);
    zoo_run_free(&r);
}

/* translate's sentences are its positional arguments; other commands refuse them. */
static void test_positional(void) {
    zoo_run r;
    const char *argv[] = {"go .", "--beam", "4", "i lost ."};
    CU_ASSERT_EQUAL(parse(&r, "translate", 'r', 4, argv), 0);
    CU_ASSERT_EQUAL(r.n_pos, 2);
    CU_ASSERT_STRING_EQUAL(r.pos[1], "i lost .");
    CU_ASSERT_EQUAL(r.cfg.exec.beam, 4);
    zoo_run_free(&r);
    expect_usage("eval", 'e', 1, (const char *[]){"go ."}, "unexpected argument 'go .'");
}

int main(void) {
    static CU_TestInfo tests[] = {{"defaults and flags", test_defaults_and_flags},
                                  {"bad flags", test_bad_flags},
                                  {"presets", test_preset},
                                  {"--dump-config and --config", test_dump_and_read},
                                  {"bad configuration files", test_bad_files},
                                  {"checkpoint metadata", test_meta},
                                  {"--resume and ranks", test_fixed_and_ranks},
                                  {"sentences", test_positional},
                                  CU_TEST_INFO_NULL};
    return tg_test_main("run_cfg", tests);
}
