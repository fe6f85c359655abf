/* test_groups.c -- parameter groups, frozen parameters and function schedules (float64 twin,
 * links optim64).
 *
 * The expected numbers are PyTorch's updates (torch.optim.Adam / AdamW / SGD, single-tensor
 * code path; LambdaLR; param_groups; a parameter with requires_grad False has no gradient and
 * is skipped, its state['step'] kept), computed in float64 by a transcription of those
 * formulas line by line (Adam's exp_avg.lerp_, exp_avg_sq.mul_().addcmul_(), addcdiv_ with
 * step_size = lr / (1 - b1^t) and denom = sqrt(v) / sqrt(1 - b2^t) + eps; SGD's buffer =
 * clone(grad) on a parameter's first step, then mu buf + (1 - dampening) g). They agree to
 * 1e-12 (lerp and the library's b1 m + (1 - b1) g differ only by rounding). */
#include "tests/optim/groups_fixture.h"
#include "tests/optim/optim_steps.h"

/* Three updates with G, checking the values after each against want[step]. */
static void run3(optim *o, nn_params *ps, const double want[3][5]) {
    for (int s = 0; s < 3; s++) {
        set_grads(ps, G[s]);
        CU_ASSERT_EQUAL(optim_step(o), 0);
        expect_values(ps, want[s]);
    }
}

static void test_adam_groups(void) {
    /* Adam (L2 decay), group 0 (dec.w): lr 0.01, PyTorch's defaults; group 1 (enc.*): lr 0.05,
     * betas 0.8 / 0.99, eps 1e-6, weight_decay 0.1. */
    static const double want[3][5] = {
        {0.45000014285673468, -0.95000016666611109, 0.15000041666319447, 1.50999999975,
         -0.50999999959999998},
        {0.42499270007166795, -0.96285123436319342, 0.10359349916032318, 1.5126633700623682,
         -0.5085705523452253},
        {0.39000479946560135, -0.97242525960321302, 0.12136235082395372, 1.5132772586670753,
         -0.51237148507745245}};
    nn_params *ps = store3();
    optim *o = optim_new(ps, optim_adam(0.01));
    optim_group g = group_of(o, "enc");
    g.lr = 0.05, g.beta1 = 0.8, g.beta2 = 0.99, g.eps = 1e-6, g.weight_decay = 0.1;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    CU_ASSERT_EQUAL(optim_group_count(o), 2);
    CU_ASSERT_EQUAL(optim_param_group(o, 0), 1);
    CU_ASSERT_EQUAL(optim_param_group(o, 1), 1);
    CU_ASSERT_EQUAL(optim_param_group(o, 2), 0);
    CU_ASSERT_EQUAL(optim_param_group(o, 3), -1);
    CU_ASSERT_STRING_EQUAL(optim_group_at(o, 1)->params, "enc");
    CU_ASSERT_PTR_NOT_EQUAL(optim_group_at(o, 1)->params, g.params); /* a copy */
    CU_ASSERT_EQUAL(optim_group_at(o, 1)->beta2, 0.99);
    CU_ASSERT_PTR_NULL(optim_group_at(o, 2));
    NEAR(optim_group_lr(o, 1), 0.05);
    NEAR(optim_lr(o), 0.01);
    run3(o, ps, want);
    optim_free(o);
    nn_params_free(ps);
}

static void test_adamw_groups(void) {
    /* AdamW, cfg lr 0.02, weight_decay 0.01, decay_filter optim_decay_matrices; group 1
     * "enc.w enc.b": lr 0.1, weight_decay 0.5, beta2 0.95. enc.b (1-D) gets no decay in its
     * group: the filter holds in every group. */
    static const double want[3][5] = {
        {0.37500000333333317, -0.85000000499999973, 0.100000009999999, 1.5196999995,
         -0.51989999920000007},
        {0.31581933480959895, -0.85132455096683057, 0.0060707151443408908, 1.5247228001248365,
         -0.51693712469061059},
        {0.23918140661512385, -0.85416525282782607, 0.040125158311717903, 1.5256456327742258,
         -0.52443560273012668}};
    nn_params *ps = store3();
    optim_cfg c = optim_adamw(0.02);
    c.decay_filter = optim_decay_matrices;
    optim *o = optim_new(ps, c);
    optim_group g = group_of(o, " enc.w\tenc.b ");
    g.lr = 0.1, g.weight_decay = 0.5, g.beta2 = 0.95;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    run3(o, ps, want);
    optim_free(o);
    nn_params_free(ps);
}

static void test_sgd_groups(void) {
    /* SGD, group 0 (dec.w): lr 0.1, momentum 0.9; group 1 (enc.w): momentum 0 (dampening
     * 0.5, unused without momentum); group 2 (enc.b): lr 0.3, momentum 0.5, nesterov,
     * weight_decay 0.2. */
    static const double want[3][5] = {
        {0.46999999999999997, -0.97999999999999998, 0.13700000000000001, 1.54,
         -0.52500000000000002},
        {0.47999999999999998, -1.03, 0.091670000000000001, 1.556, -0.51750000000000007},
        {0.45999999999999996, -1.04, 0.20736469999999999, 1.5604, -0.55075000000000007}};
    nn_params *ps = store3();
    optim_cfg c = optim_sgd(0.1);
    c.momentum = 0.9;
    optim *o = optim_new(ps, c);
    optim_group g = group_of(o, "enc.w");
    g.momentum = 0, g.dampening = 0.5;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    g = group_of(o, "enc.b");
    g.lr = 0.3, g.momentum = 0.5, g.nesterov = true, g.weight_decay = 0.2;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 2);
    run3(o, ps, want);
    optim_free(o);
    nn_params_free(ps);

    /* No momentum in the cfg, a group with momentum 0.9, dampening 0.1, lr 0.05: its buffers
     * come with the group. */
    static const double want2[3][5] = {
        {0.46999999999999997, -0.97999999999999998, 0.19, 1.52, -0.51249999999999996},
        {0.47999999999999998, -1.03, 0.185, 1.5289999999999999, -0.51024999999999998},
        {0.45999999999999996, -1.04, 0.215, 1.5326, -0.52622499999999994}};
    ps = store3();
    o = optim_new(ps, optim_sgd(0.1));
    g = group_of(o, "dec");
    g.lr = 0.05, g.momentum = 0.9, g.dampening = 0.1;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    run3(o, ps, want2);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(optim_save_state(o, ck), 0);
    CU_ASSERT_PTR_NOT_NULL(nn_ckpt_find(ck, "optim.sgd.momentum.dec.w"));
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.group.1.momentum"), "0.90000000000000002");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.group.0.momentum"), "0");
    nn_ckpt_free(ck);
    optim_free(o);
    nn_params_free(ps);
}

/* Reads optimizer tensor `name` (2 elements) from o's saved state. */
static void saved_state(const optim *o, const char *name, ag_real out[2]) {
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_store_dtype(ck, NN_F64), 0);
    CU_ASSERT_EQUAL(optim_save_state(o, ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, name, AG_SHAPE(2, 1), out), 0);
    nn_ckpt_free(ck);
}

/* The update count saved for dec.w: -1 when none is saved (it equals the optimizer's). */
static int64_t saved_step(const optim *o, const char *name) {
    nn_ckpt *ck = nn_ckpt_new();
    int64_t s = -1;
    CU_ASSERT_EQUAL(optim_save_state(o, ck), 0);
    if (nn_ckpt_find(ck, name)) CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, name, 0, NULL, &s), 0);
    nn_ckpt_free(ck);
    return s;
}

static void test_frozen_adamw(void) {
    /* AdamW lr 0.1, weight_decay 0.1; dec.w frozen for updates 2 and 3 (its gradient holds junk,
     * a NaN included: neither used nor counted), trained again at update 4, its own second. */
    static const double want[4][5] = {{0.39500000333333318, -0.89000000499999976,
                                       0.098000009999999013, 1.5849999975, -0.5949999960000002},
                                      {0.3510281478947474, -0.92532153016723295,
                                       0.0038020578118706377, 1.5849999975, -0.5949999960000002},
                                      {0.28720922006385824, -0.9613459986428845,
                                       0.038486386052270088, 1.5849999975, -0.5949999960000002},
                                      {0.22766607653717075, -0.98337887224684495,
                                       0.031417392617180781, 1.5780824980128643,
                                       -0.62361057901571959}};
    nn_params *ps = store3();
    ag_tensor *dec = nn_params_at(ps, 2);
    optim_cfg c = optim_adamw(0.1);
    c.weight_decay = 0.1;
    c.clip_norm = 1e6; /* on, never reached: the NaN must not reach the norm */
    optim *o = optim_new(ps, c);
    set_grads(ps, G[0]);
    CU_ASSERT_EQUAL(optim_step(o), 0);
    expect_values(ps, want[0]);
    ag_real m1[2], v1[2], m[2], v[2];
    saved_state(o, "optim.adamw.m.dec.w", m1);
    saved_state(o, "optim.adamw.v.dec.w", v1);
    NEAR(m1[0], -0.039999999999999994);
    NEAR(m1[1], 0.024999999999999994);
    NEAR(v1[0], 0.00016000000000000018);
    NEAR(v1[1], 6.2500000000000056e-05);
    dec->requires_grad = false;
    for (int s = 1; s < 3; s++) {
        set_grads(ps, G[s]);
        dec->grad[0] = NAN, dec->grad[1] = 1e9;
        CU_ASSERT_EQUAL(optim_step(o), 0);
        expect_values(ps, want[s]);
        CU_ASSERT_EQUAL(dec->grad[0], 0); /* zeroed with the others */
        CU_ASSERT_EQUAL(dec->grad[1], 0);
    }
    NEAR(optim_last_grad_norm(o), sqrt(0.2 * 0.2 + 0.1 * 0.1 + 0.3 * 0.3));
    saved_state(o, "optim.adamw.m.dec.w", m);
    saved_state(o, "optim.adamw.v.dec.w", v);
    CU_ASSERT_EQUAL(memcmp(m, m1, sizeof m), 0); /* the state as it was, to the bit */
    CU_ASSERT_EQUAL(memcmp(v, v1, sizeof v), 0);
    CU_ASSERT_EQUAL(saved_step(o, "optim.adamw.step.dec.w"), 1);
    CU_ASSERT_EQUAL(saved_step(o, "optim.adamw.step.enc.w"), -1); /* = optim.step, not saved */
    dec->requires_grad = true;
    set_grads(ps, G[3]);
    CU_ASSERT_EQUAL(optim_step(o), 0);
    expect_values(ps, want[3]);
    CU_ASSERT_EQUAL(saved_step(o, "optim.adamw.step.dec.w"), 2);
    CU_ASSERT_EQUAL(optim_steps(o), 4);
    optim_free(o);
    nn_params_free(ps);
}

/* SGD with momentum and weight decay, Adam with L2 decay, AdamW: a parameter frozen from the
 * start keeps its bits, its state stays zero, and the others move as without it. */
static void test_frozen_every_kind(void) {
    optim_cfg cfgs[3] = {optim_sgd(0.1), optim_adam(0.1), optim_adamw(0.1)};
    cfgs[0].momentum = 0.9, cfgs[0].weight_decay = 0.1, cfgs[1].weight_decay = 0.1;
    const char *state[3] = {"optim.sgd.momentum.dec.w", "optim.adam.m.dec.w",
                            "optim.adamw.v.dec.w"};
    for (int k = 0; k < 3; k++) {
        nn_params *ps = store3(), *ref = store3();
        nn_params_at(ps, 2)->requires_grad = false;
        optim *o = optim_new(ps, cfgs[k]), *r = optim_new(ref, cfgs[k]);
        for (int s = 0; s < 2; s++) {
            set_grads(ps, G[s]);
            set_grads(ref, G[s]);
            *elem(ref, 3, true) = *elem(ref, 4, true) = 0; /* ref: dec.w has no gradient */
            CU_ASSERT_EQUAL(optim_step(o), 0);
            CU_ASSERT_EQUAL(optim_step(r), 0);
        }
        for (int e = 0; e < 3; e++) CU_ASSERT_EQUAL(*elem(ps, e, false), *elem(ref, e, false));
        CU_ASSERT_EQUAL(*elem(ps, 3, false), P0[3]);
        CU_ASSERT_EQUAL(*elem(ps, 4, false), P0[4]);
        ag_real st[2];
        saved_state(o, state[k], st);
        CU_ASSERT_EQUAL(st[0], 0);
        CU_ASSERT_EQUAL(st[1], 0);
        CU_ASSERT_EQUAL(
            saved_step(o, k ? (k == 1 ? "optim.adam.step.dec.w" : "optim.adamw.step.dec.w")
                            : "optim.sgd.step.dec.w"),
            0);
        optim_free(o);
        optim_free(r);
        nn_params_free(ps);
        nn_params_free(ref);
    }
}

static void test_frozen_clip(void) {
    /* SGD lr 1, clip 1: p's gradient (3, 4) has norm 5 and is clipped to (0.6, 0.8); q is frozen
     * with a gradient of 100, which neither counts in the norm nor moves q (d2l's grad_clipping
     * takes the parameters with requires_grad). */
    nn_params *ps = nn_params_new();
    ag_tensor *p = nn_params_add(ps, "", "p", AG_SHAPE(2), nn_init_zeros());
    ag_tensor *q = nn_params_add(ps, "", "q", AG_SHAPE(1), nn_init_constant(2));
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 0), 0);
    q->requires_grad = false;
    p->grad[0] = 3, p->grad[1] = 4, q->grad[0] = 100;
    NEAR(optim_grad_norm(ps), 5);
    NEAR(optim_clip_grad_norm(ps, 1.0), 5);
    NEAR(p->grad[0], 0.6);
    NEAR(p->grad[1], 0.8);
    CU_ASSERT_EQUAL(q->grad[0], 100); /* not scaled */
    optim_cfg c = optim_sgd(1.0);
    c.clip_norm = 1.0;
    optim *o = optim_new(ps, c);
    p->grad[0] = 3, p->grad[1] = 4;
    CU_ASSERT_EQUAL(optim_step(o), 0);
    NEAR(optim_last_grad_norm(o), 5);
    NEAR(p->data[0], -0.6);
    NEAR(p->data[1], -0.8);
    CU_ASSERT_EQUAL(q->data[0], 2);
    CU_ASSERT_EQUAL(q->grad[0], 0);
    /* Unfrozen, it counts: norm sqrt(3^2 + 4^2 + 12^2) = 13. */
    q->requires_grad = true;
    p->grad[0] = 3, p->grad[1] = 4, q->grad[0] = 12;
    CU_ASSERT_EQUAL(optim_step(o), 0);
    NEAR(optim_last_grad_norm(o), 13);
    NEAR(q->data[0], 2 - 12.0 / 13);
    optim_free(o);
    nn_params_free(ps);
}

/* Two parameters a, b of one element each. */
static nn_params *store_ab(void) {
    nn_params *ps = nn_params_new();
    nn_params_add(ps, "", "a", AG_SHAPE(1), nn_init_zeros());
    nn_params_add(ps, "", "b", AG_SHAPE(1), nn_init_zeros());
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 0), 0);
    return ps;
}

static void test_lambda_two_groups(void) {
    /* SGD, group 0 (a) lr 0.1, group 1 (b) lr 1, gradient 1; PyTorch's
     * LambdaLR(opt, lambda k: 1 / (k + 1)) chained with StepLR(step_size 2, gamma 0.5):
     * update t runs at lr * 0.5^floor((t - 1) / 2) / t. */
    static const double lr_a[3] = {0.10000000000000001, 0.050000000000000003, 0.016666666666666666};
    static const double lr_b[3] = {1, 0.5, 0.16666666666666666};
    static const double p_a[3] = {-0.10000000000000001, -0.15000000000000002, -0.16666666666666669};
    static const double p_b[3] = {-1, -1.5, -1.6666666666666667};
    lambda_log log = {{0}, 0, -1};
    nn_params *ps = store_ab();
    optim_cfg c = optim_sgd(0.1);
    c.schedule = optim_lr_times(optim_lr_step(2, 0.5), inverse, &log);
    optim *o = optim_new(ps, c);
    optim_group g = group_of(o, "b");
    g.lr = 1;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    for (int s = 0; s < 3; s++) {
        NEAR(optim_group_lr(o, 0), lr_a[s]);
        NEAR(optim_group_lr(o, 1), lr_b[s]);
        nn_params_at(ps, 0)->grad[0] = 1, nn_params_at(ps, 1)->grad[0] = 1;
        CU_ASSERT_EQUAL(optim_step(o), 0);
        NEAR(nn_params_at(ps, 0)->data[0], p_a[s]);
        NEAR(nn_params_at(ps, 1)->data[0], p_b[s]);
    }
    /* optim_lr_lambda alone: PyTorch's LambdaLR, lr(k) = 1 / (k + 1) from k = 0. */
    NEAR(optim_schedule_lr(optim_lr_lambda(inverse, &log), 2.0, 1), 2.0);
    NEAR(optim_schedule_lr(optim_lr_lambda(inverse, &log), 2.0, 4), 0.5);
    optim_free(o);

    /* A function returning NaN at update 2: the step fails, nothing moves, gradients zeroed. */
    log = (lambda_log){{0}, 0, 1};
    nn_params_reinit(ps, 0);
    c.schedule = optim_lr_lambda(inverse, &log);
    o = optim_new(ps, c);
    nn_params_at(ps, 0)->grad[0] = 1;
    CU_ASSERT_EQUAL(optim_step(o), 0);
    nn_params_at(ps, 0)->grad[0] = 1;
    TG_EXPECT_ERROR(optim_step(o), "learning rate of group 0 is nan at update 2",
                    "times the schedule's function");
    NEAR(nn_params_at(ps, 0)->data[0], -0.1);
    CU_ASSERT_EQUAL(nn_params_at(ps, 0)->grad[0], 0);
    CU_ASSERT_EQUAL(optim_steps(o), 1);
    CU_ASSERT_EQUAL(log.seen[0], 0); /* the updates done before each call */
    CU_ASSERT_EQUAL(log.seen[1], 1);
    optim_free(o);
    nn_params_free(ps);
}

static bool one_dim(const ag_tensor *p, void *user) {
    (void)user;
    return p->ndim == 1;
}
static bool none(const ag_tensor *p, void *user) {
    (void)p, (void)user;
    return false;
}

static void test_group_errors(void) {
    nn_params *ps = store3();
    optim *o = optim_new(ps, optim_adamw(0.1));
    TG_EXPECT_ERROR(optim_add_group(o, group_of(o, "enc.x")),
                    "optim_add_group (adamw, group 1): 'enc.x' matches no parameter");
    TG_EXPECT_ERROR(optim_add_group(o, group_of(o, "en")), "'en' matches no parameter");
    TG_EXPECT_ERROR(optim_add_group(o, group_of(o, NULL)), "selects nothing");
    optim_group g = group_of(o, NULL);
    g.filter = none;
    TG_EXPECT_ERROR(optim_add_group(o, g), "group 1", "matches no parameter");
    g = group_of(o, "enc");
    g.filter = none;
    TG_EXPECT_ERROR(optim_add_group(o, g), "the group (params \"enc\", with a filter) matches no");
    g = group_of(o, "dec");
    g.beta1 = 1;
    TG_EXPECT_ERROR(optim_add_group(o, g), "group 1): beta1 = 1, expected 0 <= beta1 < 1");
    g = group_of(o, "dec");
    g.lr = -1;
    TG_EXPECT_ERROR(optim_add_group(o, g), "lr = -1");
    CU_ASSERT_EQUAL(optim_group_count(o), 1); /* nothing changed */
    CU_ASSERT_EQUAL(optim_param_group(o, 2), 0);
    /* A filter narrows a selection: enc's 1-D parameter only. */
    g = group_of(o, "enc");
    g.filter = one_dim;
    CU_ASSERT_EQUAL(optim_add_group(o, g), 1);
    CU_ASSERT_EQUAL(optim_param_group(o, 0), 0);
    CU_ASSERT_EQUAL(optim_param_group(o, 1), 1);
    /* Claimed twice. */
    TG_EXPECT_ERROR(optim_add_group(o, group_of(o, "dec enc")),
                    "optim_add_group (adamw, group 2): parameter 'enc.b' is already in group 1");
    CU_ASSERT_EQUAL(optim_group_count(o), 2);
    TG_EXPECT_ERROR(optim_set_lr(o, 0.5), "optim_set_lr (adamw): the optimizer has 2 parameter "
                                          "groups");
    TG_EXPECT_ERROR(optim_set_group_lr(o, 2, 0.5), "group 2, expected 0 to 1");
    TG_EXPECT_ERROR(optim_set_group_lr(o, 1, NAN), "group 1): lr = nan");
    CU_ASSERT_EQUAL(optim_set_group_lr(o, 1, 0.5), 0);
    NEAR(optim_group_lr(o, 1), 0.5);
    CU_ASSERT_EQUAL(optim_set_group_lr(o, 0, 0.25), 0);
    NEAR(optim_config(o)->lr, 0.25); /* the cfg mirrors group 0 */
    CU_ASSERT_TRUE(isnan(optim_group_lr(o, 2)));
    CU_ASSERT_EQUAL(optim_step(o), 0);
    TG_EXPECT_ERROR(optim_add_group(o, group_of(o, "dec")), "before the first step");
    optim_free(o);
    o = optim_new(ps, optim_sgd(0.1));
    g = group_of(o, "dec");
    g.nesterov = true;
    TG_EXPECT_ERROR(optim_add_group(o, g), "(sgd, group 1): nesterov needs momentum > 0");
    optim_free(o);
    nn_params_free(ps);
}

/* Groups with group 0's hyperparameters, and nothing frozen, give one group's bits: the spans
 * are cut differently, each element's update is the same (2 threads). */
static void test_groups_same_bits(void) {
    ag_real *out[2];
    CU_ASSERT_EQUAL(ag_set_threads(2), 0);
    for (int k = 0; k < 2; k++) {
        nn_params *ps = nn_params_new();
        for (int i = 0; i < 12; i++) {
            char name[16];
            snprintf(name, sizeof name, "l%d", i);
            nn_params_add(ps, name, "w", AG_SHAPE(37, 29), nn_init_normal(0, 1));
            nn_params_add(ps, name, "b", AG_SHAPE(301), nn_init_normal(0, 1));
        }
        CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 3), 0);
        optim_cfg c = optim_adamw(0.01);
        c.decay_filter = optim_decay_matrices;
        c.schedule = optim_lr_warmup_cosine(2, 10, 0.1);
        optim *o = optim_new(ps, c);
        if (k == 1) {
            CU_ASSERT_EQUAL(optim_add_group(o, group_of(o, "l1 l5.w l7")), 1);
            CU_ASSERT_EQUAL(optim_add_group(o, group_of(o, "l10")), 2);
        }
        three_steps_kept(o, ps, 1, out, k);
    }
    free(out[0]);
    free(out[1]);
    ag_set_threads(1);
}

static CU_TestInfo tests[] = {
    {"adam: per-group lr, betas, eps, weight decay", test_adam_groups},
    {"adamw: per-group lr, weight decay, beta2; the decay filter in every group",
     test_adamw_groups},
    {"sgd: per-group momentum, nesterov, weight decay; momentum only in a group", test_sgd_groups},
    {"adamw: a frozen parameter keeps its value and state, then resumes its own count",
     test_frozen_adamw},
    {"sgd, adam, adamw skip a parameter frozen from the start", test_frozen_every_kind},
    {"clipping leaves frozen gradients out", test_frozen_clip},
    {"a function schedule over two groups, chained with a step schedule", test_lambda_two_groups},
    {"group errors: no match, claimed twice, bad values, after a step", test_group_errors},
    {"groups with group 0's values: the bits of one group", test_groups_same_bits},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("optim_groups", tests); }
