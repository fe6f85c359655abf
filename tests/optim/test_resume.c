/* test_resume.c -- training resumes from a checkpoint bit for bit.
 *
 * A tiny model (linear -> relu -> dropout -> linear) trained on shuffled minibatches with
 * clipping and a schedule: N steps straight, versus N/2 steps, save (parameters, optimizer
 * state, the dropout and data random streams), load into a fresh store (initialised from
 * another seed) and a fresh optimizer, N/2 more steps. The two loss trajectories and the final
 * parameters must be identical bit for bit, for SGD with momentum, Adam and AdamW (also with
 * weight-decay groups, a warm-up schedule and a base lr changed by optim_set_lr).
 * Built twice: on the float32 product (F32 checkpoint) and on the float64 twin (F64). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optim/optim.h"
#include "tests/tg_test.h"

enum { N_DATA = 32, IN = 4, HID = 8, OUT = 3, BATCH = 8, STEPS = 20 };

#ifdef TG_DOUBLE
#define STORE_DTYPE NN_F64 /* float64 values survive only in F64 */
#else
#define STORE_DTYPE NN_F32
#endif

typedef struct tiny {
    nn_linear fc1, fc2;
    nn_dropout drop;
} tiny;

typedef struct run {
    nn_params *ps;
    tiny m;
    optim *o;
    ag_rng drop_rng, data_rng;
    ag_tape *t;
} run;

static ag_real xs[N_DATA * IN];
static int32_t ys[N_DATA];

static void make_data(void) {
    ag_rng r;
    ag_rng_seed(&r, 2024);
    for (int i = 0; i < N_DATA * IN; i++) xs[i] = (ag_real)ag_rng_normal(&r);
    for (int i = 0; i < N_DATA; i++) ys[i] = (int32_t)ag_rng_below(&r, OUT);
}

static void run_init(run *r, uint64_t init_seed, optim_cfg cfg) {
    r->ps = nn_params_new();
    nn_linear_init(&r->m.fc1, r->ps, "fc1", IN, HID, true);
    nn_linear_init(&r->m.fc2, r->ps, "fc2", HID, OUT, true);
    nn_dropout_init(&r->m.drop, 0.2);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(r->ps, init_seed), 0);
    r->o = optim_new(r->ps, cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->o);
    ag_rng_seed(&r->drop_rng, 11);
    ag_rng_seed(&r->data_rng, 12);
    r->t = ag_tape_new();
}

static void run_free(run *r) {
    ag_tape_free(r->t);
    optim_free(r->o);
    nn_params_free(r->ps);
}

/* One step on a random minibatch; returns the loss. */
static ag_real train_step(run *r) {
    ag_real bx[BATCH * IN];
    int32_t by[BATCH];
    for (int b = 0; b < BATCH; b++) {
        uint32_t i = ag_rng_below(&r->data_rng, N_DATA);
        memcpy(bx + b * IN, xs + i * IN, IN * sizeof(ag_real));
        by[b] = ys[i];
    }
    ag_tape *t = r->t;
    nn_ctx c = {.tape = t, .training = true, .rng = &r->drop_rng};
    ag_tensor *h =
        nn_relu(&c, nn_linear_forward(&r->m.fc1, &c, ag_tensor_from(t, AG_SHAPE(BATCH, IN), bx)));
    ag_tensor *logits = nn_linear_forward(&r->m.fc2, &c, nn_dropout_forward(&r->m.drop, &c, h));
    ag_tensor *loss = ag_mean(t, ag_softmax_ce(t, logits, by, NULL), AG_ALL, false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loss);
    CU_ASSERT_EQUAL(ag_backward(t, loss), 0);
    ag_real l = ag_get(loss, 0);
    CU_ASSERT_EQUAL(optim_step(r->o), 0);
    ag_tape_reset(t);
    return l;
}

/* Before step CUT_STEP (in the first half) the base lr is multiplied by `cut` (0: never), as
 * a cut on a plateau would: the resumed run must continue at the cut rate. */
enum { CUT_STEP = STEPS / 2 - 3 };

static ag_real cut_and_step(run *r, int s, double cut) {
    if (s == CUT_STEP && cut > 0)
        CU_ASSERT_EQUAL(optim_set_lr(r->o, optim_config(r->o)->lr * cut), 0);
    return train_step(r);
}

static void check_resume(optim_cfg cfg, double cut, const char *file) {
    ag_real straight[STEPS], resumed[STEPS];
    run a;
    run_init(&a, 1, cfg);
    for (int s = 0; s < STEPS; s++) straight[s] = cut_and_step(&a, s, cut);

    run b;
    run_init(&b, 1, cfg);
    for (int s = 0; s < STEPS / 2; s++) resumed[s] = cut_and_step(&b, s, cut);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_store_dtype(ck, STORE_DTYPE), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add_params(ck, b.ps), 0);
    CU_ASSERT_EQUAL(optim_save_state(b.o, ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta_rng(ck, "train.dropout_rng", &b.drop_rng), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta_rng(ck, "train.data_rng", &b.data_rng), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, file), 0);
    nn_ckpt_free(ck);
    run_free(&b);

    run c;
    run_init(&c, 777, cfg); /* other initial values: everything must come from the file */
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&ck, file), 0);
    CU_ASSERT_EQUAL(nn_ckpt_load_params(ck, c.ps, 0), 0);
    CU_ASSERT_EQUAL(optim_load_state(c.o, ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_meta_rng(ck, "train.dropout_rng", &c.drop_rng), 0);
    CU_ASSERT_EQUAL(nn_ckpt_meta_rng(ck, "train.data_rng", &c.data_rng), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_EQUAL(optim_steps(c.o), STEPS / 2);
    for (int s = STEPS / 2; s < STEPS; s++) resumed[s] = train_step(&c);

    CU_ASSERT_EQUAL(memcmp(straight, resumed, sizeof straight), 0);
    CU_ASSERT_EQUAL(memcmp(nn_params_values(a.ps), nn_params_values(c.ps),
                           nn_params_flat_size(a.ps) * sizeof(ag_real)),
                    0);
    CU_ASSERT_TRUE(straight[STEPS - 1] < straight[0]); /* it did train */
    run_free(&a);
    run_free(&c);
    unlink(file);
}

static const char *file; /* in the program's temporary directory */

static void test_resume_sgd(void) {
    optim_cfg c = optim_sgd(0.2);
    c.momentum = 0.9;
    c.nesterov = true;
    c.weight_decay = 1e-3;
    c.clip_norm = 1.0;
    c.schedule = optim_lr_step(4, 0.7);
    check_resume(c, 0, file);
}

static void test_resume_adam(void) {
    optim_cfg c = optim_adam(0.5);
    c.clip_norm = 0.5;
    c.schedule = optim_lr_noam(HID, 5);
    check_resume(c, 0, file);
}

static void test_resume_adamw(void) {
    optim_cfg c = optim_adamw(0.02);
    c.clip_norm = 1.0;
    check_resume(c, 0, file);
}

/* The recipe of docs/nn.md: AdamW without decay on biases, warm-up then cosine, and the base
 * lr cut by optim_set_lr before the checkpoint (it is part of the saved state). */
static void test_resume_adamw_recipe(void) {
    optim_cfg c = optim_adamw(0.05);
    c.weight_decay = 0.1;
    c.decay_filter = optim_decay_matrices;
    c.clip_norm = 1.0;
    c.schedule = optim_lr_warmup_cosine(4, STEPS, 0.1);
    check_resume(c, 0.5, file);
}

static CU_TestInfo tests[] = {
    {"resume bit for bit: sgd + nesterov + step schedule", test_resume_sgd},
    {"resume bit for bit: adam + clipping + noam", test_resume_adam},
    {"resume bit for bit: adamw", test_resume_adamw},
    {"resume bit for bit: adamw, decay groups, warm-up cosine, set_lr", test_resume_adamw_recipe},
    CU_TEST_INFO_NULL,
};

int main(void) {
    char *dir = tg_temp_dir(), *path = strdup(tg_path(dir, "resume.safetensors"));
    file = path;
    make_data();
    int rc = tg_test_main("optim_resume", tests);
    free(path);
    tg_remove(dir);
    return rc;
}
