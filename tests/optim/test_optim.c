/* test_optim.c -- optimizers against closed-form values, clipping, schedules, configuration
 * errors and the optimizer-state checkpoint rules (float64 twin, links optim64, so the
 * closed forms hold to 1e-12). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "optim/optim.h"
#include "tests/tg_test.h"

#define HAS(msg, sub) CU_ASSERT_PTR_NOT_NULL(strstr((msg), (sub)))
#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-12 * (1 + fabs((double)(b))))

/* A store with one parameter p of 2 elements, values p0. */
static nn_params *one_param(ag_tensor **p, double a, double b)
{
    nn_params *ps = nn_params_new();
    *p = nn_params_add(ps, "", "p", AG_SHAPE(2), nn_init_zeros());
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 0), 0);
    (*p)->data[0] = a;
    (*p)->data[1] = b;
    return ps;
}

static void set_grad(ag_tensor *p, double a, double b)
{
    p->grad[0] = a;
    p->grad[1] = b;
}

static void test_sgd(void)
{
    ag_tensor *p;
    nn_params *ps = one_param(&p, 1.0, -2.0);
    optim *o = optim_new(ps, optim_sgd(0.1));
    set_grad(p, 0.5, -1.0);
    CU_ASSERT_EQUAL(optim_step(o), 0);
    NEAR(p->data[0], 1.0 - 0.1 * 0.5);
    NEAR(p->data[1], -2.0 + 0.1 * 1.0);
    CU_ASSERT_EQUAL(p->grad[0], 0);  /* zeroed */
    CU_ASSERT_EQUAL(optim_steps(o), 1);
    optim_free(o);
    nn_params_free(ps);

    /* Momentum 0.9, constant gradient g: b1 = g, b2 = 1.9 g, b3 = 2.71 g. */
    ps = one_param(&p, 1.0, 0.0);
    optim_cfg c = optim_sgd(0.1);
    c.momentum = 0.9;
    o = optim_new(ps, c);
    for (int i = 0; i < 3; i++) {
        set_grad(p, 0.5, 0);
        optim_step(o);
    }
    NEAR(p->data[0], 1.0 - 0.1 * 0.5 * (1 + 1.9 + 2.71));
    optim_free(o);
    nn_params_free(ps);

    /* Nesterov: step uses g + mu b: t1: b = g -> g + 0.9 g; t2: b = 1.9 g -> g + 1.71 g. */
    ps = one_param(&p, 1.0, 0.0);
    c.nesterov = true;
    o = optim_new(ps, c);
    for (int i = 0; i < 2; i++) {
        set_grad(p, 0.5, 0);
        optim_step(o);
    }
    NEAR(p->data[0], 1.0 - 0.1 * 0.5 * (1.9 + 2.71));
    optim_free(o);
    nn_params_free(ps);

    /* Weight decay and dampening: g = grad + wd p; b2 = mu b1 + (1 - d) g2. */
    ps = one_param(&p, 2.0, 0.0);
    c = optim_sgd(0.1);
    c.momentum = 0.5;
    c.dampening = 0.25;
    c.weight_decay = 0.1;
    o = optim_new(ps, c);
    set_grad(p, 1.0, 0);
    optim_step(o);
    double g1 = 1.0 + 0.1 * 2.0, b1 = g1, p1 = 2.0 - 0.1 * b1;
    NEAR(p->data[0], p1);
    set_grad(p, 1.0, 0);
    optim_step(o);
    double g2 = 1.0 + 0.1 * p1, b2 = 0.5 * b1 + 0.75 * g2;
    NEAR(p->data[0], p1 - 0.1 * b2);
    optim_free(o);
    nn_params_free(ps);
}

/* Adam's closed form for a gradient sequence gs on one scalar. */
static double adam_ref(double p, const double *gs, int n, double lr, double b1, double b2,
                       double eps, double wd, bool decoupled)
{
    double m = 0, v = 0;
    for (int t = 1; t <= n; t++) {
        double g = gs[t - 1];
        if (decoupled) p *= 1 - lr * wd;
        else g += wd * p;
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        double mh = m / (1 - pow(b1, t)), vh = v / (1 - pow(b2, t));
        p -= lr * mh / (sqrt(vh) + eps);
    }
    return p;
}

static void test_adam(void)
{
    ag_tensor *p;
    /* First step: m_hat = g, v_hat = g^2, so p -= lr g / (|g| + eps). */
    nn_params *ps = one_param(&p, 1.0, -1.0);
    optim *o = optim_new(ps, optim_adam(0.01));
    set_grad(p, 0.3, -2e-9);
    optim_step(o);
    NEAR(p->data[0], 1.0 - 0.01 * 0.3 / (0.3 + 1e-8));
    /* eps after the square root: a tiny gradient moves by lr * g / (|g| + eps), not lr. */
    NEAR(p->data[1], -1.0 + 0.01 * 2e-9 / (2e-9 + 1e-8));
    const double gs[4] = {0.3, -0.1, 0.7, 0.05};
    for (int i = 1; i < 4; i++) {
        set_grad(p, gs[i], 0);
        optim_step(o);
    }
    NEAR(p->data[0], adam_ref(1.0, gs, 4, 0.01, 0.9, 0.999, 1e-8, 0, false));
    optim_free(o);
    nn_params_free(ps);

    /* Adam with L2 weight decay, other betas. */
    ps = one_param(&p, 0.5, 0);
    optim_cfg c = optim_adam(0.1);
    c.beta1 = 0.8;
    c.beta2 = 0.99;
    c.eps = 1e-6;
    c.weight_decay = 0.2;
    o = optim_new(ps, c);
    for (int i = 0; i < 4; i++) {
        set_grad(p, gs[i], 0);
        optim_step(o);
    }
    NEAR(p->data[0], adam_ref(0.5, gs, 4, 0.1, 0.8, 0.99, 1e-6, 0.2, false));
    optim_free(o);
    nn_params_free(ps);

    /* AdamW: p1 = p0 (1 - lr wd) - lr g / (|g| + eps) on the first step, then the closed form. */
    ps = one_param(&p, 0.5, 0);
    c = optim_adamw(0.1);
    c.weight_decay = 0.5;
    o = optim_new(ps, c);
    set_grad(p, gs[0], 0);
    optim_step(o);
    NEAR(p->data[0], 0.5 * (1 - 0.1 * 0.5) - 0.1 * 0.3 / (0.3 + 1e-8));
    NEAR(p->data[1], 0);  /* zero stays zero: decay of 0, gradient 0 */
    for (int i = 1; i < 4; i++) {
        set_grad(p, gs[i], 0);
        optim_step(o);
    }
    NEAR(p->data[0], adam_ref(0.5, gs, 4, 0.1, 0.9, 0.999, 1e-8, 0.5, true));
    CU_ASSERT_EQUAL(optim_steps(o), 4);
    optim_free(o);
    nn_params_free(ps);
}

static void test_clipping(void)
{
    ag_tensor *p;
    nn_params *ps = nn_params_new();
    p = nn_params_add(ps, "", "p", AG_SHAPE(1), nn_init_zeros());
    ag_tensor *q = nn_params_add(ps, "", "q", AG_SHAPE(1), nn_init_zeros());
    nn_params_finalize(ps, 0);
    /* Global norm over both parameters: sqrt(3^2 + 4^2) = 5. */
    p->grad[0] = 3;
    q->grad[0] = 4;
    NEAR(optim_grad_norm(ps), 5);
    NEAR(optim_clip_grad_norm(ps, 1.0), 5);
    NEAR(p->grad[0], 0.6);
    NEAR(q->grad[0], 0.8);
    /* Below the threshold: unchanged. */
    NEAR(optim_clip_grad_norm(ps, 2.0), 1.0);
    NEAR(p->grad[0], 0.6);
    /* In optim_step: SGD lr 1 with clip 1 moves by the clipped gradient. */
    optim_cfg c = optim_sgd(1.0);
    c.clip_norm = 1.0;
    optim *o = optim_new(ps, c);
    p->grad[0] = 30;
    q->grad[0] = -40;
    CU_ASSERT_EQUAL(optim_step(o), 0);
    NEAR(optim_last_grad_norm(o), 50);
    NEAR(p->data[0], -0.6);
    NEAR(q->data[0], 0.8);
    /* A non-finite gradient: no update, gradients zeroed, step not counted, message. */
    p->grad[0] = NAN;
    CU_ASSERT_EQUAL(optim_step(o), -1);
    HAS(ag_last_error(), "gradient norm is nan at update 2");
    NEAR(p->data[0], -0.6);
    CU_ASSERT_EQUAL(p->grad[0], 0);
    CU_ASSERT_EQUAL(optim_steps(o), 1);
    optim_free(o);
    nn_params_free(ps);
}

static void test_schedules(void)
{
    optim_schedule s = optim_lr_constant();
    NEAR(optim_schedule_lr(s, 0.5, 1), 0.5);
    NEAR(optim_schedule_lr(s, 0.5, 1000), 0.5);
    CU_ASSERT_TRUE(isnan(optim_schedule_lr(s, 0.5, 0)));
    s = optim_lr_step(2, 0.5);
    const double want_step[] = {1, 1, 0.5, 0.5, 0.25};
    for (int t = 1; t <= 5; t++) NEAR(optim_schedule_lr(s, 1.0, t), want_step[t - 1]);
    /* Noam, the Transformer's: d_model 512, warmup 4000; linear warmup then t^-0.5. */
    s = optim_lr_noam(512, 4000);
    NEAR(optim_schedule_lr(s, 1.0, 1), pow(512, -0.5) * pow(4000, -1.5));
    NEAR(optim_schedule_lr(s, 1.0, 2000), pow(512, -0.5) * 2000 * pow(4000, -1.5));
    NEAR(optim_schedule_lr(s, 1.0, 4000), pow(512, -0.5) * pow(4000, -0.5));  /* the peak */
    NEAR(optim_schedule_lr(s, 2.0, 16000), 2 * pow(512, -0.5) * pow(16000, -0.5));
    CU_ASSERT_TRUE(optim_schedule_lr(s, 1, 3999) < optim_schedule_lr(s, 1, 4000));
    CU_ASSERT_TRUE(optim_schedule_lr(s, 1, 4001) < optim_schedule_lr(s, 1, 4000));
    /* The optimizer follows its schedule: SGD lr_t on a constant gradient of 1. */
    ag_tensor *p;
    nn_params *ps = one_param(&p, 0, 0);
    optim_cfg c = optim_sgd(1.0);
    c.schedule = optim_lr_step(2, 0.1);
    optim *o = optim_new(ps, c);
    double want = 0;
    for (int t = 1; t <= 5; t++) {
        NEAR(optim_lr(o), optim_schedule_lr(c.schedule, 1.0, t));
        want -= optim_lr(o);
        set_grad(p, 1, 0);
        optim_step(o);
        NEAR(p->data[0], want);
    }
    optim_free(o);
    nn_params_free(ps);
}

static void test_config_errors(void)
{
    ag_tensor *p;
    nn_params *ps = one_param(&p, 0, 0);
    optim_cfg c = optim_adam(0.1);
    c.beta1 = 1.0;
    CU_ASSERT_PTR_NULL(optim_new(ps, c));
    HAS(ag_last_error(), "beta1 = 1, expected 0 <= beta1 < 1");
    c = optim_sgd(-1);
    CU_ASSERT_PTR_NULL(optim_new(ps, c));
    HAS(ag_last_error(), "lr = -1");
    c = optim_sgd(0.1);
    c.nesterov = true;
    CU_ASSERT_PTR_NULL(optim_new(ps, c));
    HAS(ag_last_error(), "nesterov needs momentum > 0");
    c = optim_adamw(0.1);
    c.schedule = optim_lr_noam(0, 10);
    CU_ASSERT_PTR_NULL(optim_new(ps, c));
    HAS(ag_last_error(), "Noam schedule with d_model = 0");
    c = optim_adam(0.1);
    c.clip_norm = -1;
    CU_ASSERT_PTR_NULL(optim_new(ps, c));
    HAS(ag_last_error(), "clip_norm = -1");
    nn_params *raw = nn_params_new();
    CU_ASSERT_PTR_NULL(optim_new(raw, optim_adam(0.1)));
    HAS(ag_last_error(), "not finalized");
    nn_params_free(raw);
    nn_params_free(ps);
}

static void test_state_rules(void)
{
    ag_tensor *p;
    nn_params *ps = one_param(&p, 1, 2);
    optim *adam = optim_new(ps, optim_adam(0.1));
    set_grad(p, 1, 1);
    optim_step(adam);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(optim_save_state(adam, ck), 0);
    CU_ASSERT_PTR_NOT_NULL(nn_ckpt_find(ck, "optim.adam.m.p"));
    CU_ASSERT_PTR_NOT_NULL(nn_ckpt_find(ck, "optim.adam.v.p"));
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.kind"), "adam");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.step"), "1");
    /* Into an SGD optimizer: wrong kind. */
    optim_cfg sc = optim_sgd(0.1);
    sc.momentum = 0.9;
    optim *sgd = optim_new(ps, sc);
    CU_ASSERT_EQUAL(optim_load_state(sgd, ck), -1);
    HAS(ag_last_error(), "optimizer state of kind 'adam', expected 'sgd'");
    /* Into a fresh Adam: works, step restored. */
    optim *adam2 = optim_new(ps, optim_adam(0.1));
    CU_ASSERT_EQUAL(optim_load_state(adam2, ck), 0);
    CU_ASSERT_EQUAL(optim_steps(adam2), 1);
    /* An unexpected optimizer tensor is an error, and nothing changes. */
    nn_ckpt_add(ck, "optim.adam.m.q", 1, (const int[]){2}, p->data);
    optim *adam3 = optim_new(ps, optim_adam(0.1));
    CU_ASSERT_EQUAL(optim_load_state(adam3, ck), -1);
    HAS(ag_last_error(), "unexpected optimizer tensor 'optim.adam.m.q'");
    CU_ASSERT_EQUAL(optim_steps(adam3), 0);
    nn_ckpt_free(ck);
    /* Missing state tensor; missing metadata. */
    ck = nn_ckpt_new();
    nn_ckpt_set_meta(ck, "optim.kind", "adam");
    nn_ckpt_set_meta(ck, "optim.step", "3");
    nn_ckpt_add(ck, "optim.adam.m.p", 1, (const int[]){2}, p->data);
    CU_ASSERT_EQUAL(optim_load_state(adam3, ck), -1);
    HAS(ag_last_error(), "tensor 'optim.adam.v.p' is missing (expected shape [2])");
    CU_ASSERT_EQUAL(optim_steps(adam3), 0);
    nn_ckpt_free(ck);
    ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(optim_load_state(adam3, ck), -1);
    HAS(ag_last_error(), "no optimizer state");
    nn_ckpt_set_meta(ck, "optim.kind", "adam");
    nn_ckpt_set_meta(ck, "optim.step", "three");
    CU_ASSERT_EQUAL(optim_load_state(adam3, ck), -1);
    HAS(ag_last_error(), "'optim.step' = \"three\", expected a decimal integer");
    nn_ckpt_free(ck);
    optim_free(adam);
    optim_free(adam2);
    optim_free(adam3);
    optim_free(sgd);
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"sgd: plain, momentum, nesterov, dampening, weight decay", test_sgd},
    {"adam and adamw against the closed form", test_adam},
    {"clipping by global norm; non-finite gradients", test_clipping},
    {"schedules: constant, step, noam", test_schedules},
    {"configuration errors name the field", test_config_errors},
    {"optimizer state checkpoint rules", test_state_rules},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"optim_update", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(void) { return tg_test_run(suites); }
