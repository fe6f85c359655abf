/* test_train_step.c -- one training step in one call (optim.h, "Training steps"):
 * optim_train_step equals the step written out (forward, loss, backward, optim_step, reset) bit
 * for bit, losses and parameters, with cross-entropy and with MSE, with dropout drawn from the
 * context's stream; optim_minimize's value; every refusal (NULL arguments, a module of another
 * store, a failed forward, a NaN loss, a loss that is not one value) returns NaN with a message,
 * updates nothing and resets the tape; optim_new keeps the message of a failed store. */
#include <math.h>
#include <string.h>

#include "optim/optim.h"
#include "tests/tg_test.h"
#include "tests/nn/module_test.h"

enum { B = 6, IN = 4, K = 3, STEPS = 4 };

static const int32_t LABELS[B] = {0, 2, 1, 1, 0, 2};

static nn_module *make_net(void) {
    return nn_sequential(nn_linear_m(IN, 8, true), nn_gelu_m(), nn_dropout_m(0.25),
                         nn_linear_m(8, K, true));
}

/* STEPS steps of net (from seed 5) by hand when by_hand, else with optim_train_step; the losses
 * into loss[], the final values into vals (flat). loss_fn: cross-entropy or MSE. */
static void train(bool by_hand, bool mse, double *loss, ag_real *vals, size_t n_vals) {
    nn_module *net = make_net();
    nn_params *ps = nn_module_init(net, 5);
    optim_cfg cfg = optim_adamw(0.01);
    cfg.clip_norm = 0.5;
    optim *opt = optim_new(ps, cfg);
    nn_ctx *c = nn_ctx_new(9);
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    ag_real xs[B * IN], ys[B * K];
    fill(xs, B * IN, 1);
    fill(ys, B * K, 2);
    for (int s = 0; s < STEPS; s++) {
        ag_tensor *x = ag_tensor_from(c->tape, AG_SHAPE(B, IN), xs);
        if (by_hand) {
            ag_tensor *out = nn_module_forward(net, c, x);
            ag_tensor *l =
                mse ? ag_mse_loss(c->tape, out, ag_tensor_from(c->tape, AG_SHAPE(B, K), ys),
                                  AG_REDUCE_MEAN)
                    : ag_cross_entropy(c->tape, out, LABELS, NULL, 0, AG_IGNORE_INDEX,
                                       AG_REDUCE_MEAN);
            CU_ASSERT_PTR_NOT_NULL_FATAL(l);
            loss[s] = ag_get(l, 0);
            TG_OK(ag_backward(c->tape, l));
            TG_OK(optim_step(opt));
            ag_tape_reset(c->tape);
        } else {
            loss[s] = mse ? optim_train_step(opt, net, c, x, ys, optim_loss_mse)
                          : optim_train_step(opt, net, c, x, LABELS, optim_loss_cross_entropy);
            CU_ASSERT(!isnan(loss[s]));
            CU_ASSERT_EQUAL(ag_tape_stats_get(c->tape).bytes_used, 0); /* reset */
        }
    }
    CU_ASSERT_EQUAL(optim_steps(opt), STEPS);
    CU_ASSERT_EQUAL_FATAL(nn_params_flat_size(ps), n_vals);
    memcpy(vals, nn_params_values(ps), n_vals * sizeof *vals);
    nn_ctx_free(c);
    optim_free(opt);
    nn_module_free(net);
}

static void test_step_equals_by_hand(void) {
    nn_module *probe = make_net();
    const size_t n = nn_params_flat_size(nn_module_init(probe, 5));
    nn_module_free(probe);
    for (int mse = 0; mse < 2; mse++) {
        double l1[STEPS], l2[STEPS];
        ag_real v1[256], v2[256];
        CU_ASSERT_FATAL(n <= 256);
        train(true, mse, l1, v1, n);
        train(false, mse, l2, v2, n);
        CU_ASSERT(memcmp(l1, l2, sizeof l1) == 0);
        CU_ASSERT(memcmp(v1, v2, n * sizeof *v1) == 0);
    }
}

/* optim_minimize alone: the loss's value, the update, the reset. */
static void test_minimize(void) {
    nn_params *ps = nn_params_new();
    ag_tensor *w = nn_params_add(ps, "", "w", AG_SHAPE(2), nn_init_zeros());
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    TG_OK(nn_params_finalize(ps, 1));
    optim *opt = optim_new(ps, optim_sgd(0.5));
    ag_tape *t = ag_tape_new();
    const ag_real target[2] = {1, -3};
    /* loss = sum (w - target)^2 = 10 at w = 0; gradient 2 (w - target) = (-2, 6) */
    ag_tensor *d = ag_sub(t, w, ag_tensor_from(t, AG_SHAPE(2), target));
    CU_ASSERT_EQUAL(optim_minimize(opt, t, ag_sum(t, ag_mul(t, d, d), AG_ALL, false)), 10.0);
    CU_ASSERT(w->data[0] == 1 && w->data[1] == -3); /* w -= 0.5 * (-2, 6) */
    CU_ASSERT_EQUAL(ag_tape_stats_get(t).bytes_used, 0);
    CU_ASSERT_EQUAL(optim_steps(opt), 1);
    ag_tape_free(t);
    optim_free(opt);
    nn_params_free(ps);
}

#define EXPECT_NAN(call, ...)                                                                      \
    do {                                                                                           \
        CU_ASSERT(isnan(call));                                                                    \
        TG_ERROR_HAS(__VA_ARGS__);                                                                 \
    } while (0)

static void test_refusals(void) {
    ag_set_error_handler(tg_capture, NULL);
    nn_module *net = make_net(), *other = make_net();
    nn_params *ps = nn_module_init(net, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(other, 6));
    optim *opt = optim_new(ps, optim_adam(0.01));
    nn_ctx *c = nn_ctx_new(1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt);
    const size_t n = nn_params_flat_size(ps);
    ag_real before[256], xs[B * IN];
    CU_ASSERT_FATAL(n <= 256);
    memcpy(before, nn_params_values(ps), n * sizeof *before);
    fill(xs, B * IN, 1);
    const optim_loss_fn ce = optim_loss_cross_entropy;
#define X ag_tensor_from(c->tape, AG_SHAPE(B, IN), xs)
    EXPECT_NAN(optim_train_step(NULL, net, c, X, LABELS, ce), "optim_train_step", "(got NULL)");
    EXPECT_NAN(optim_train_step(opt, net, c, X, LABELS, NULL), "optim_train_step", "loss function");
    EXPECT_NAN(optim_train_step(opt, net, c, NULL, LABELS, ce), "optim_train_step: no input");
    EXPECT_NAN(
        optim_train_step(opt, other, c, X, LABELS, ce),
        "optim_train_step: module '' (Sequential) is not registered in the optimizer's store");
    /* a failed forward: the module's message, behind optim_minimize's */
    EXPECT_NAN(
        optim_train_step(opt, net, c, ag_tensor_from(c->tape, AG_SHAPE(3, 8), xs), LABELS, ce),
        "optim_minimize: no loss", "0 (Linear): input [3, 8] does not fit");
    const int32_t bad[B] = {0, 1, 7, 0, 0, 0};
    EXPECT_NAN(optim_train_step(opt, net, c, X, bad, ce), "optim_minimize: no loss");
    EXPECT_NAN(optim_train_step(opt, net, c, X, NULL, ce),
               "optim_loss_cross_entropy: the labels are NULL");
    EXPECT_NAN(optim_train_step(opt, net, c, X, NULL, optim_loss_mse),
               "optim_loss_mse: the target is NULL");
    ag_real nan_x[B * IN];
    memcpy(nan_x, xs, sizeof nan_x);
    nan_x[5] = NAN;
    EXPECT_NAN(
        optim_train_step(opt, net, c, ag_tensor_from(c->tape, AG_SHAPE(B, IN), nan_x), LABELS, ce),
        "optim_minimize: the loss is NaN (no update)");
    EXPECT_NAN(optim_minimize(opt, NULL, NULL), "optim_minimize", "(got NULL)");
    ag_tensor *two = ag_tensor_from(c->tape, AG_SHAPE(2), xs);
    EXPECT_NAN(optim_minimize(opt, c->tape, two), "optim_minimize: the loss has shape [2]",
               "one value");
#undef X
    CU_ASSERT_EQUAL(ag_tape_stats_get(c->tape).bytes_used, 0); /* every refusal reset it */
    CU_ASSERT_EQUAL(optim_steps(opt), 0);
    CU_ASSERT(memcmp(before, nn_params_values(ps), n * sizeof *before) == 0); /* no update */
    for (size_t i = 0; i < n; i++)
        if (nn_params_grads(ps)[i] != 0) TG_FAIL("gradient %zu left after a refusal", i);
    nn_ctx_free(c);
    optim_free(opt);
    nn_module_free(net);
    nn_module_free(other);

    /* optim_new on a failed store: both messages */
    TG_EXPECT_NULL(optim_new(nn_module_init(NULL, 1), optim_adam(0.1)),
                   "optim_new: parameter store is NULL: ", "nn_module_init");
    ag_set_error_handler(NULL, NULL);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"optim_train_step = the step by hand (bits; CE and MSE)", test_step_equals_by_hand},
        {"optim_minimize: value, update, reset", test_minimize},
        {"refusals: NaN, message, no update, tape reset", test_refusals},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("train_step", tests);
}
