/* test_optim.c -- optimizers against closed-form values, clipping, schedules, configuration
 * errors and the optimizer-state checkpoint rules (float64 twin, links optim64, so the
 * closed forms hold to 1e-12). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "tests/optim/optim_steps.h"
#include "tests/tg_test.h"

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-12 * (1 + fabs((double)(b))))

/* A store with one parameter p of 2 elements, values p0. */
static nn_params *one_param(ag_tensor **p, double a, double b) {
    nn_params *ps = nn_params_new();
    *p = nn_params_add(ps, "", "p", AG_SHAPE(2), nn_init_zeros());
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 0), 0);
    (*p)->data[0] = a;
    (*p)->data[1] = b;
    return ps;
}

static void set_grad(ag_tensor *p, double a, double b) {
    p->grad[0] = a;
    p->grad[1] = b;
}

static void test_sgd(void) {
    ag_tensor *p;
    nn_params *ps = one_param(&p, 1.0, -2.0);
    optim *o = optim_new(ps, optim_sgd(0.1));
    set_grad(p, 0.5, -1.0);
    CU_ASSERT_EQUAL(optim_step(o), 0);
    NEAR(p->data[0], 1.0 - 0.1 * 0.5);
    NEAR(p->data[1], -2.0 + 0.1 * 1.0);
    CU_ASSERT_EQUAL(p->grad[0], 0); /* zeroed */
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
                       double eps, double wd, bool decoupled) {
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

/* Steps i = from .. n-1 of o, the gradient (gs[i], 0) on p each time. */
static void steps_from(optim *o, ag_tensor *p, const double *gs, int from, int n) {
    for (int i = from; i < n; i++) {
        set_grad(p, gs[i], 0);
        optim_step(o);
    }
}

static void test_adam(void) {
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
    steps_from(o, p, gs, 1, 4);
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
    steps_from(o, p, gs, 0, 4);
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
    NEAR(p->data[1], 0); /* zero stays zero: decay of 0, gradient 0 */
    steps_from(o, p, gs, 1, 4);
    NEAR(p->data[0], adam_ref(0.5, gs, 4, 0.1, 0.9, 0.999, 1e-8, 0.5, true));
    CU_ASSERT_EQUAL(optim_steps(o), 4);
    optim_free(o);
    nn_params_free(ps);
}

static void test_clipping(void) {
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
    TG_EXPECT_ERROR(optim_step(o), "gradient norm is nan at update 2");
    NEAR(p->data[0], -0.6);
    CU_ASSERT_EQUAL(p->grad[0], 0);
    CU_ASSERT_EQUAL(optim_steps(o), 1);
    optim_free(o);
    nn_params_free(ps);
}

static void test_schedules(void) {
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
    NEAR(optim_schedule_lr(s, 1.0, 4000), pow(512, -0.5) * pow(4000, -0.5)); /* the peak */
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

static void test_warmup_schedules(void) {
    /* cosine: warm-up 4, decay to 0.1 lr at update 12 */
    optim_schedule s = optim_lr_warmup_cosine(4, 12, 0.1);
    NEAR(optim_schedule_lr(s, 2.0, 1), 0.5); /* 2 * 1/4 */
    NEAR(optim_schedule_lr(s, 2.0, 3), 1.5);
    NEAR(optim_schedule_lr(s, 2.0, 4), 2.0);                /* the peak */
    NEAR(optim_schedule_lr(s, 1.0, 6), 0.8681980515339464); /* 0.1 + 0.45 (1 + cos(pi/4)) */
    NEAR(optim_schedule_lr(s, 1.0, 8), 0.55);               /* half-way: 0.1 + 0.9 / 2 */
    NEAR(optim_schedule_lr(s, 1.0, 12), 0.1);
    NEAR(optim_schedule_lr(s, 1.0, 1000), 0.1);
    for (int t = 5; t < 12; t++)
        CU_ASSERT_TRUE(optim_schedule_lr(s, 1, t + 1) < optim_schedule_lr(s, 1, t));
    /* linear without warm-up, to 0 at update 10 */
    s = optim_lr_warmup_linear(0, 10, 0);
    NEAR(optim_schedule_lr(s, 1.0, 1), 0.9);
    NEAR(optim_schedule_lr(s, 1.0, 5), 0.5);
    NEAR(optim_schedule_lr(s, 1.0, 10), 0);
    NEAR(optim_schedule_lr(s, 1.0, 11), 0);
    s = optim_lr_warmup_linear(2, 6, 0.5);
    const double want_lin[] = {0.5, 1, 0.875, 0.75, 0.625, 0.5, 0.5};
    for (int t = 1; t <= 7; t++) NEAR(optim_schedule_lr(s, 1.0, t), want_lin[t - 1]);
    /* inverse square root: warm-up 4 then sqrt(4 / t) */
    s = optim_lr_warmup_invsqrt(4);
    NEAR(optim_schedule_lr(s, 1.0, 2), 0.5);
    NEAR(optim_schedule_lr(s, 1.0, 4), 1);
    NEAR(optim_schedule_lr(s, 1.0, 16), 0.5);
    NEAR(optim_schedule_lr(s, 3.0, 100), 0.6);
    /* INVSQRT is NOAM scaled to peak at lr: noam = lr (d w)^-0.5 invsqrt */
    for (int t = 1; t < 10; t++)
        NEAR(optim_schedule_lr(optim_lr_noam(8, 4), 1.0, t),
             optim_schedule_lr(s, 1.0, t) / sqrt(32));
    /* invalid: NaN */
    CU_ASSERT_TRUE(isnan(optim_schedule_lr(optim_lr_warmup_cosine(5, 5, 0), 1, 3)));
    CU_ASSERT_TRUE(isnan(optim_schedule_lr(optim_lr_warmup_linear(0, 5, 2), 1, 3)));
    CU_ASSERT_TRUE(isnan(optim_schedule_lr(optim_lr_warmup_invsqrt(0), 1, 3)));

    /* The optimizer follows it: SGD on a constant gradient of 1 moves by -sum lr_t. */
    ag_tensor *p;
    nn_params *ps = one_param(&p, 0, 0);
    optim_cfg c = optim_sgd(1.0);
    c.schedule = optim_lr_warmup_cosine(2, 6, 0);
    optim *o = optim_new(ps, c);
    double want = 0;
    for (int t = 1; t <= 8; t++) {
        want -= optim_schedule_lr(c.schedule, 1.0, t);
        set_grad(p, 1, 0);
        optim_step(o);
    }
    NEAR(p->data[0], -(0.5 + 1 + 0.5 * (1 + cos(3.14159265358979323846 / 4)) + 0.5 +
                       0.5 * (1 + cos(3 * 3.14159265358979323846 / 4)) + 0 + 0 + 0));
    NEAR(p->data[0], want);
    optim_free(o);
    nn_params_free(ps);
}

static void test_set_lr(void) {
    ag_tensor *p;
    nn_params *ps = one_param(&p, 0, 0);
    optim *o = optim_new(ps, optim_sgd(0.1));
    set_grad(p, 1, 0);
    optim_step(o);
    CU_ASSERT_EQUAL(optim_set_lr(o, 0.5), 0);
    NEAR(optim_lr(o), 0.5);
    NEAR(optim_config(o)->lr, 0.5);
    set_grad(p, 1, 0);
    optim_step(o);
    NEAR(p->data[0], -0.6);
    TG_EXPECT_ERROR(optim_set_lr(o, -1), "optim_set_lr (sgd): lr = -1");
    CU_ASSERT_EQUAL(optim_set_lr(o, NAN), -1);
    NEAR(optim_lr(o), 0.5); /* unchanged */
    optim_free(o);
    nn_params_free(ps);

    /* Under a schedule the new base rate is scaled by it: step schedule 2 / 0.5. */
    ps = one_param(&p, 0, 0);
    optim_cfg c = optim_sgd(1.0);
    c.schedule = optim_lr_step(2, 0.5);
    o = optim_new(ps, c);
    for (int t = 1; t <= 2; t++) {
        set_grad(p, 1, 0);
        optim_step(o);
    }
    optim_set_lr(o, 4.0);
    NEAR(optim_lr(o), 2.0); /* t = 3: 4 * 0.5 */
    optim_free(o);
    nn_params_free(ps);
}

/* A linear decay whose end moves after the warm-up: SGD on a constant gradient of 1 moves by
 * -lr_t, lr_t from the first schedule for updates 1-2 and from the second after. */
static void test_set_schedule(void) {
    ag_tensor *p;
    nn_params *ps = one_param(&p, 0, 0);
    optim_cfg c = optim_sgd(1.0);
    c.schedule = optim_lr_warmup_linear(2, 100, 0);
    optim *o = optim_new(ps, c);
    for (int t = 1; t <= 2; t++) { /* warm-up: 0.5, 1 */
        set_grad(p, 1, 0);
        optim_step(o);
    }
    NEAR(p->data[0], -1.5);
    CU_ASSERT_EQUAL(optim_set_schedule(o, optim_lr_warmup_linear(2, 6, 0)), 0);
    CU_ASSERT_EQUAL(optim_config(o)->schedule.total, 6);
    NEAR(optim_lr(o), 0.75);       /* t = 3: 1 - 1/4, not 1 - 1/98 */
    for (int t = 3; t <= 7; t++) { /* 0.75, 0.5, 0.25, 0, 0 */
        set_grad(p, 1, 0);
        optim_step(o);
    }
    NEAR(p->data[0], -3);
    CU_ASSERT_EQUAL(optim_steps(o), 7);
    /* refused as optim_new would, the schedule unchanged */
    TG_EXPECT_ERROR(optim_set_schedule(o, optim_lr_warmup_linear(2, 2, 0)),
                    "optim_set_schedule (sgd): linear schedule with warmup = 2, total = 2, "
                    "min_ratio = 0, expected 0 <= warmup < total");
    TG_EXPECT_ERROR(optim_set_schedule(o, optim_lr_step(0, 0.5)),
                    "optim_set_schedule (sgd): step schedule with step_size = 0");
    CU_ASSERT_EQUAL(optim_config(o)->schedule.total, 6);
    TG_EXPECT_ERROR(optim_set_schedule(NULL, optim_lr_constant()),
                    "optim_set_schedule: optimizer is NULL");
    optim_free(o);
    nn_params_free(ps);
}

/* A store of a small model: two weight matrices, a bias and a norm weight, odd sizes (each
 * parameter padded to 16 elements). */
static nn_params *groups_store(void) {
    nn_params *ps = nn_params_new();
    nn_params_add(ps, "fc", "weight", AG_SHAPE(2, 3), nn_init_constant(1));
    nn_params_add(ps, "fc", "bias", AG_SHAPE(3), nn_init_constant(1));
    nn_params_add(ps, "norm", "weight", AG_SHAPE(5), nn_init_constant(1));
    nn_params_add(ps, "out", "weight", AG_SHAPE(3, 2), nn_init_constant(1));
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 0), 0);
    return ps;
}

static bool no_norm(const ag_tensor *p, void *user) {
    CU_ASSERT_PTR_EQUAL(user, (void *)no_norm);
    return strstr(p->name, "norm") == NULL;
}

static void test_decay_groups(void) {
    /* AdamW with zero gradients moves only by its decay: p *= 1 - lr wd per step. */
    nn_params *ps = groups_store();
    optim_cfg c = optim_adamw(0.1);
    c.weight_decay = 0.5;
    c.decay_filter = optim_decay_matrices;
    optim *o = optim_new(ps, c);
    for (int s = 0; s < 3; s++) CU_ASSERT_EQUAL(optim_step(o), 0);
    const double decayed = pow(1 - 0.05, 3);
    const double want[4] = {decayed, 1, 1, decayed}; /* fc.weight, fc.bias, norm, out.weight */
    for (size_t i = 0; i < 4; i++) {
        ag_tensor *p = nn_params_at(ps, i);
        for (ptrdiff_t e = 0; e < p->numel; e++) NEAR(p->data[e], want[i]);
    }
    /* The padding between parameters stays zero. */
    const ag_real *v = nn_params_values(ps);
    for (size_t e = 6; e < nn_params_offset(ps, 1); e++) CU_ASSERT_EQUAL(v[e], 0);
    optim_free(o);

    /* A name rule, with gradients, against the closed form: decay everything but the norm. */
    nn_params_reinit(ps, 0);
    c.decay_filter = no_norm;
    c.decay_filter_user = (void *)no_norm;
    o = optim_new(ps, c);
    const double gs[3] = {0.3, -0.2, 0.1};
    for (int s = 0; s < 3; s++) {
        for (size_t i = 0; i < 4; i++) nn_params_at(ps, i)->grad[0] = gs[s];
        optim_step(o);
    }
    for (size_t i = 0; i < 4; i++)
        NEAR(nn_params_at(ps, i)->data[0],
             adam_ref(1.0, gs, 3, 0.1, 0.9, 0.999, 1e-8, i == 2 ? 0 : 0.5, true));
    optim_free(o);

    /* SGD's L2 term follows the same groups: g = grad + wd p only where decayed. */
    nn_params_reinit(ps, 0);
    c = optim_sgd(0.1);
    c.weight_decay = 0.2;
    c.decay_filter = optim_decay_matrices;
    o = optim_new(ps, c);
    optim_step(o);
    NEAR(nn_params_at(ps, 0)->data[0], 1 - 0.1 * 0.2);
    NEAR(nn_params_at(ps, 1)->data[0], 1);
    optim_free(o);
    nn_params_free(ps);
}

/* Runs cut between threads at any element: the same bits as one thread. */
static void test_decay_groups_threads(void) {
    ag_real *out[2];
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(ag_set_threads(k + 1), 0);
        nn_params *ps = nn_params_new();
        for (int i = 0; i < 40; i++) {
            char name[16];
            snprintf(name, sizeof name, "p%d", i);
            if (i % 3) nn_params_add(ps, "", name, AG_SHAPE(37, 29), nn_init_normal(0, 1));
            else nn_params_add(ps, "", name, AG_SHAPE(301), nn_init_normal(0, 1));
        }
        CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 3), 0);
        optim_cfg c = optim_adamw(0.01);
        c.decay_filter = optim_decay_matrices;
        optim *o = optim_new(ps, c);
        three_steps_kept(o, ps, 0, out, k);
    }
    free(out[0]);
    free(out[1]);
    ag_set_threads(1);
}

static void test_config_errors(void) {
    ag_tensor *p;
    nn_params *ps = one_param(&p, 0, 0);
    optim_cfg c = optim_adam(0.1);
    c.beta1 = 1.0;
    TG_EXPECT_NULL(optim_new(ps, c), "beta1 = 1, expected 0 <= beta1 < 1");
    c = optim_sgd(-1);
    TG_EXPECT_NULL(optim_new(ps, c), "lr = -1");
    c = optim_sgd(0.1);
    c.nesterov = true;
    TG_EXPECT_NULL(optim_new(ps, c), "nesterov needs momentum > 0");
    c = optim_adamw(0.1);
    c.schedule = optim_lr_noam(0, 10);
    TG_EXPECT_NULL(optim_new(ps, c), "Noam schedule with d_model = 0");
    c = optim_adamw(0.1);
    c.schedule = optim_lr_warmup_cosine(10, 10, 0);
    TG_EXPECT_NULL(optim_new(ps, c), "cosine schedule with warmup = 10, total = 10, min_ratio = 0");
    c.schedule = optim_lr_warmup_linear(0, 10, 1.5);
    TG_EXPECT_NULL(optim_new(ps, c),
                   "linear schedule with warmup = 0, total = 10, min_ratio = 1.5");
    c.schedule = optim_lr_warmup_invsqrt(0);
    TG_EXPECT_NULL(optim_new(ps, c), "inverse-square-root schedule with warmup = 0");
    c = optim_adam(0.1);
    c.clip_norm = -1;
    TG_EXPECT_NULL(optim_new(ps, c), "clip_norm = -1");
    nn_params *raw = nn_params_new();
    TG_EXPECT_NULL(optim_new(raw, optim_adam(0.1)), "not finalized");
    nn_params_free(raw);
    nn_params_free(ps);
}

static void test_state_rules(void) {
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
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "optim.lr"), "0.10000000000000001");
    /* Into an SGD optimizer: wrong kind. */
    optim_cfg sc = optim_sgd(0.1);
    sc.momentum = 0.9;
    optim *sgd = optim_new(ps, sc);
    TG_EXPECT_ERROR(optim_load_state(sgd, ck), "optimizer state of kind 'adam', expected 'sgd'");
    /* Into a fresh Adam: works, step and base lr restored (as PyTorch's load_state_dict). */
    optim *adam2 = optim_new(ps, optim_adam(0.7));
    CU_ASSERT_EQUAL(optim_load_state(adam2, ck), 0);
    CU_ASSERT_EQUAL(optim_steps(adam2), 1);
    CU_ASSERT_EQUAL(optim_config(adam2)->lr, 0.1);
    /* An unexpected optimizer tensor is an error, and nothing changes. */
    nn_ckpt_add(ck, "optim.adam.m.q", 1, (const int[]){2}, p->data);
    optim *adam3 = optim_new(ps, optim_adam(0.1));
    TG_EXPECT_ERROR(optim_load_state(adam3, ck), "unexpected optimizer tensor 'optim.adam.m.q'");
    CU_ASSERT_EQUAL(optim_steps(adam3), 0);
    nn_ckpt_free(ck);
    /* Missing state tensor; missing metadata. */
    ck = nn_ckpt_new();
    nn_ckpt_set_meta(ck, "optim.kind", "adam");
    nn_ckpt_set_meta(ck, "optim.step", "3");
    nn_ckpt_add(ck, "optim.adam.m.p", 1, (const int[]){2}, p->data);
    TG_EXPECT_ERROR(optim_load_state(adam3, ck),
                    "tensor 'optim.adam.v.p' is missing (expected shape [2])");
    CU_ASSERT_EQUAL(optim_steps(adam3), 0);
    /* Complete, without "optim.lr" (an older checkpoint): cfg.lr stays. A bad one: refused. */
    nn_ckpt_add(ck, "optim.adam.v.p", 1, (const int[]){2}, p->data);
    CU_ASSERT_EQUAL(optim_load_state(adam3, ck), 0);
    CU_ASSERT_EQUAL(optim_steps(adam3), 3);
    CU_ASSERT_EQUAL(optim_config(adam3)->lr, 0.1);
    nn_ckpt_set_meta(ck, "optim.lr", "fast");
    optim *adam4 = optim_new(ps, optim_adam(0.2));
    TG_EXPECT_ERROR(optim_load_state(adam4, ck),
                    "'optim.lr' = \"fast\", expected a finite number >= 0");
    CU_ASSERT_EQUAL(optim_steps(adam4), 0);
    CU_ASSERT_EQUAL(optim_config(adam4)->lr, 0.2);
    optim_free(adam4);
    nn_ckpt_free(ck);
    ck = nn_ckpt_new();
    TG_EXPECT_ERROR(optim_load_state(adam3, ck), "no optimizer state");
    nn_ckpt_set_meta(ck, "optim.kind", "adam");
    nn_ckpt_set_meta(ck, "optim.step", "three");
    TG_EXPECT_ERROR(optim_load_state(adam3, ck),
                    "'optim.step' = \"three\", expected a decimal integer");
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
    {"schedules: warm-up then cosine, linear, inverse square root", test_warmup_schedules},
    {"optim_set_lr between steps", test_set_lr},
    {"optim_set_schedule between steps: the decay's end moved", test_set_schedule},
    {"weight-decay groups: 1-D parameters, a name rule", test_decay_groups},
    {"weight-decay groups cut between threads: same bits", test_decay_groups_threads},
    {"configuration errors name the field", test_config_errors},
    {"optimizer state checkpoint rules", test_state_rules},
    CU_TEST_INFO_NULL,
};
int main(void) { return tg_test_main("optim_update", tests); }
