/* test_groups_ckpt.c -- parameter groups, per-parameter update counts and function schedules
 * in the optimizer's checkpoint state (float64 twin, links optim64). */
#include "tests/optim/groups_fixture.h"

/* An AdamW with a group over enc and the function schedule `log`, dec.w frozen for update 2. */
static optim *ckpt_optim(nn_params *ps, lambda_log *log, double group_lr) {
    optim_cfg c = optim_adamw(0.01);
    c.schedule = optim_lr_times(optim_lr_warmup_linear(1, 10, 0), inverse, log);
    optim *o = optim_new(ps, c);
    optim_group g = group_of(o, "enc");
    g.lr = group_lr, g.beta2 = 0.9, g.weight_decay = 0.3;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    return o;
}

static void steps(optim *o, nn_params *ps, int from, int to) {
    for (int s = from; s < to; s++) {
        nn_params_at(ps, 2)->requires_grad = s != 1;
        set_grads(ps, G[s]);
        CU_ASSERT_EQUAL(optim_step(o), 0);
    }
}

static void test_checkpoint_groups(void) {
    char *dir = tg_temp_dir();
    const char *path = tg_path(dir, "run.safetensors");
    lambda_log log = {{0}, 0, -1};
    /* The uninterrupted run: 4 updates. */
    nn_params *ref = store3();
    optim *r = ckpt_optim(ref, &log, 0.05);
    steps(r, ref, 0, 4);
    /* Stopped after 2 updates, saved, loaded into a fresh optimizer (its group's lr 0.7: the
     * checkpoint's 0.05 comes back, as PyTorch's load_state_dict), 2 more updates. */
    nn_params *ps = store3();
    optim *o = ckpt_optim(ps, &log, 0.05);
    steps(o, ps, 0, 2);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_store_dtype(ck, NN_F64), 0); /* float64: exact */
    CU_ASSERT_EQUAL(nn_ckpt_add_params(ck, ps), 0);
    CU_ASSERT_EQUAL(optim_save_state(o, ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_save(ck, path), 0);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.groups"), "2");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.group.1.params"), "enc.w enc.b");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.group.1.lr"), "0.050000000000000003");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.group.1.beta2"), "0.90000000000000002");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.group.0.weight_decay"), "0.01");
    CU_ASSERT_PTR_NOT_NULL(nn_ckpt_meta(ck, "optim.lr_lambda"));
    CU_ASSERT_PTR_NULL(nn_ckpt_meta(ck, "optim.group.0.params"));
    CU_ASSERT_PTR_NOT_NULL(nn_ckpt_find(ck, "optim.adamw.step.dec.w")); /* 1, not 2 */
    nn_ckpt_free(ck);
    optim_free(o);
    nn_params_free(ps);

    nn_ckpt *in = NULL;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&in, path), 0);
    ps = store3();
    CU_ASSERT_EQUAL(nn_ckpt_load_params(in, ps, 0), 0);
    /* Refusals first, each changing nothing: no function schedule; other groups. */
    o = optim_new(ps, optim_adamw(0.01));
    TG_EXPECT_ERROR(optim_load_state(o, in), "schedule had a function",
                    "optim_lr_lambda or optim_lr_times");
    optim_free(o);
    optim_cfg c = optim_adamw(0.01);
    c.schedule = optim_lr_lambda(inverse, &log);
    o = optim_new(ps, c);
    TG_EXPECT_ERROR(optim_load_state(o, in), "has 2 parameter groups, this optimizer 1");
    optim_group g = group_of(o, "enc.w");
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    TG_EXPECT_ERROR(optim_load_state(o, in), "group 1 holds other parameters",
                    "'(none)' here, 'enc.b' in its metadata 'optim.group.1.params'");
    CU_ASSERT_EQUAL(optim_steps(o), 0);
    optim_free(o);
    /* The same groups and function: the run goes on to the same bits. */
    o = ckpt_optim(ps, &log, 0.7);
    CU_ASSERT_EQUAL(optim_load_state(o, in), 0);
    CU_ASSERT_EQUAL(optim_steps(o), 2);
    CU_ASSERT_EQUAL(optim_group_at(o, 1)->lr, 0.05);
    CU_ASSERT_EQUAL(optim_group_at(o, 1)->beta2, 0.9);
    steps(o, ps, 2, 4);
    CU_ASSERT_EQUAL(memcmp(nn_params_values(ps), nn_params_values(ref),
                           nn_params_flat_size(ps) * sizeof(ag_real)),
                    0);
    optim_free(o);
    optim_free(r);
    nn_ckpt_free(in);
    nn_params_free(ps);
    nn_params_free(ref);
    tg_remove(dir);
}

static void test_checkpoint_before_groups(void) {
    /* A checkpoint saved before groups: kind, step, lr and the moments, nothing more. */
    nn_params *ps = store3();
    nn_ckpt *ck = nn_ckpt_new();
    nn_ckpt_set_meta(ck, "optim.kind", "adam");
    nn_ckpt_set_meta(ck, "optim.step", "3");
    nn_ckpt_set_meta(ck, "optim.lr", "0.125");
    const ag_real zero[2] = {0, 0};
    for (size_t i = 0; i < 3; i++) {
        char name[64];
        const ag_tensor *p = nn_params_at(ps, i);
        snprintf(name, sizeof name, "optim.adam.m.%s", p->name);
        nn_ckpt_add(ck, name, p->ndim, p->shape, zero);
        snprintf(name, sizeof name, "optim.adam.v.%s", p->name);
        nn_ckpt_add(ck, name, p->ndim, p->shape, zero);
    }
    optim_cfg c = optim_adam(0.5);
    c.beta2 = 0.98;
    optim *o = optim_new(ps, c);
    optim_group g = group_of(o, "dec");
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    TG_EXPECT_ERROR(optim_load_state(o, ck), "one parameter group (no 'optim.groups'",
                    "this optimizer 2");
    optim_free(o);
    o = optim_new(ps, c);
    CU_ASSERT_EQUAL(optim_load_state(o, ck), 0); /* one group: lr restored, the rest the cfg's */
    CU_ASSERT_EQUAL(optim_group_count(o), 1);
    CU_ASSERT_EQUAL(optim_steps(o), 3);
    CU_ASSERT_EQUAL(optim_config(o)->lr, 0.125);
    CU_ASSERT_EQUAL(optim_group_at(o, 0)->lr, 0.125);
    CU_ASSERT_EQUAL(optim_group_at(o, 0)->beta2, 0.98);
    /* Corrupt group metadata of a new checkpoint: refused with the key. */
    nn_ckpt *ck2 = nn_ckpt_new();
    CU_ASSERT_EQUAL(optim_save_state(o, ck2), 0);
    nn_ckpt_set_meta(ck2, "optim.group.0.beta1", "-0.5");
    TG_EXPECT_ERROR(optim_load_state(o, ck2),
                    "'optim.group.0.beta1' = \"-0.5\", expected a finite number >= 0");
    nn_ckpt_set_meta(ck2, "optim.group.0.beta1", "1");
    TG_EXPECT_ERROR(optim_load_state(o, ck2), "group 0: beta1 = 1, expected 0 <= beta1 < 1");
    CU_ASSERT_EQUAL(optim_group_at(o, 0)->beta1, 0.9);
    nn_ckpt_free(ck2);
    optim_free(o);
    nn_ckpt_free(ck);
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"checkpoint round trip with groups, a frozen count and a function", test_checkpoint_groups},
    {"a checkpoint saved before groups loads as one group", test_checkpoint_before_groups},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("optim_groups_ckpt", tests); }
