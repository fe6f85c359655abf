/* test_module_run.c -- the conveniences of nn/module.h for writing a model like a PyTorch user:
 * the Conv2d / MaxPool2d / AvgPool2d modules against the plain layer functions (bits: values
 * and gradients), their PyTorch names and errors; nn_ctx_new (its tape, its stream, training
 * mode); nn_module_predict / nn_module_accuracy (exact predictions and accuracy, eval mode
 * without touching the caller's context, the module or the running statistics, the tape
 * rewound, bad input). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/tg_test.h"
#include "module_test.h"

/* ---- Conv2d, MaxPool2d, AvgPool2d = the plain functions, bit for bit ---- */

enum { N = 2, C = 2, H = 8, W = 8, O = 3 };

static void test_conv_pool_bits(void) {
    nn_params *ps1 = nn_params_new();
    nn_conv2d cv;
    const nn_conv2d_opts same = {.padding = {1, 1}};
    TG_OK(nn_conv2d_init(&cv, ps1, "0", C, O, 3, 3, &same));
    TG_OK(nn_params_finalize(ps1, 11));
    nn_module *net =
        nn_sequential(nn_conv2d_m(C, O, 3, 1, 1), nn_relu_m(), nn_max_pool2d_m(2, 0, 0),
                      nn_avg_pool2d_m(3, 1, 1), nn_flatten_m(1, -1));
    nn_params *ps2 = nn_module_init(net, 11);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ps2);
    CU_ASSERT_EQUAL_FATAL(nn_params_flat_size(ps1), nn_params_flat_size(ps2));
    CU_ASSERT(same_bits(nn_params_values(ps1), nn_params_values(ps2), nn_params_flat_size(ps1)));
    CU_ASSERT_STRING_EQUAL(nn_params_at(ps2, 0)->name, "0.weight"); /* PyTorch's names */
    CU_ASSERT_STRING_EQUAL(nn_params_at(ps2, 1)->name, "0.bias");
    CU_ASSERT_STRING_EQUAL(nn_module_kind(nn_module_child(net, 2)), "MaxPool2d");
    CU_ASSERT_STRING_EQUAL(nn_module_kind(nn_module_child(net, 3)), "AvgPool2d");

    ag_real xs[N * C * H * W], w[N * O * 4 * 4], y1[N * O * 4 * 4];
    fill(xs, N * C * H * W, 3);
    fill(w, N * O * 4 * 4, 4);
    ag_real *g1 = malloc(nn_params_flat_size(ps1) * sizeof *g1);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    for (int pass = 0; pass < 2; pass++) { /* the plain functions, then the Sequential */
        ag_tensor *x = ag_tensor_from(t, AG_SHAPE(N, C, H, W), xs), *y;
        if (pass == 0) {
            y = nn_max_pool2d(&c, nn_relu(&c, nn_conv2d_forward(&cv, &c, x)), 2, 0, 0);
            y = ag_reshape(t, nn_avg_pool2d(&c, y, 3, 1, 1), AG_SHAPE(N, O * 4 * 4));
        } else {
            y = nn_module_forward(net, &c, x);
        }
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        CU_ASSERT_EQUAL(y->ndim, 2);
        CU_ASSERT_EQUAL(y->shape[1], O * 4 * 4);
        ag_tensor *wt = ag_tensor_from(t, AG_SHAPE(N, O * 4 * 4), w);
        TG_OK(ag_backward(t, ag_sum(t, ag_mul(t, y, wt), AG_ALL, false)));
        if (pass == 0) {
            memcpy(y1, y->data, sizeof y1);
            memcpy(g1, nn_params_grads(ps1), nn_params_flat_size(ps1) * sizeof *g1);
        } else {
            CU_ASSERT(same_bits(y1, y->data, N * O * 4 * 4));
            CU_ASSERT(same_bits(g1, nn_params_grads(ps2), nn_params_flat_size(ps2)));
        }
        ag_tape_reset(t);
    }
    free(g1);
    ag_tape_free(t);
    nn_module_free(net);
    nn_params_free(ps1);
}

/* nn_conv2d_m_opts: every option reaches the layer (shapes, names, output size). */
static void test_conv_opts(void) {
    const nn_conv2d_opts o = {.stride = {2, 1}, .padding = {0, 1}, .groups = 2, .no_bias = true};
    nn_module *net = nn_sequential(nn_conv2d_m_opts(4, 6, 3, 2, &o));
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(net, 1));
    CU_ASSERT_EQUAL(nn_module_param_count(net), 1); /* no bias */
    const ag_tensor *wt = nn_module_param_at(net, 0);
    CU_ASSERT_STRING_EQUAL(wt->name, "0.weight");
    CU_ASSERT(wt->ndim == 4 && wt->shape[0] == 6 && wt->shape[1] == 2 && wt->shape[2] == 3 &&
              wt->shape[3] == 2);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_real xs[1 * 4 * 7 * 5] = {0};
    ag_tensor *y = nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(1, 4, 7, 5), xs));
    CU_ASSERT_PTR_NOT_NULL_FATAL(y); /* OH = (7 - 3) / 2 + 1 = 3, OW = 5 + 2 - 2 + 1 = 6 */
    CU_ASSERT(y->shape[0] == 1 && y->shape[1] == 6 && y->shape[2] == 3 && y->shape[3] == 6);
    ag_tape_free(t);
    nn_module_free(net);
}

static void test_conv_pool_errors(void) {
    TG_EXPECT_NULL(nn_conv2d_m(0, 3, 3, 1, 1), "nn_conv2d_m", "in = 0", "expected sizes > 0");
    TG_EXPECT_NULL(nn_conv2d_m(1, 3, 3, 1, -1), "nn_conv2d_m", "padding (-1, -1)");
    const nn_conv2d_opts bad = {.groups = -2};
    TG_EXPECT_NULL(nn_conv2d_m_opts(2, 2, 3, 3, &bad), "nn_conv2d_m", "groups -2");
    TG_EXPECT_NULL(nn_max_pool2d_m(0, 0, 0), "nn_max_pool2d_m: kernel 0");
    TG_EXPECT_NULL(nn_avg_pool2d_m(3, -1, 0), "nn_avg_pool2d_m: kernel 3, stride -1");
    TG_EXPECT_NULL(nn_max_pool2d_m(2, 0, 2), "nn_max_pool2d_m", "padding 2", "kernel / 2");
    /* groups that do not divide: refused by the layer at registration */
    const nn_conv2d_opts g3 = {.groups = 3};
    nn_module *m = nn_conv2d_m_opts(4, 6, 3, 3, &g3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    TG_EXPECT_NULL(nn_module_init(m, 1), "groups");
    nn_module_free(m);

    ag_set_error_handler(tg_capture, NULL);
    nn_module *net = nn_sequential(nn_conv2d_m(2, 3, 3, 1, 0), nn_max_pool2d_m(4, 0, 0));
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(net, 1));
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t};
    ag_real xs[2 * 3 * 5 * 5] = {0};
    TG_EXPECT_NULL(nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(2, 3, 5, 5), xs)),
                   "0 (Conv2d): input [2, 3, 5, 5] does not fit: expected (N, 2, H, W)");
    TG_EXPECT_NULL(
        nn_module_forward(nn_module_child(net, 1), &c, ag_tensor_from(t, AG_SHAPE(2, 3, 5), xs)),
        "1 (MaxPool2d): input [2, 3, 5] does not fit: expected (N, C, H, W)");
    /* 5x5 -> conv 3x3 -> 3x3, smaller than the 4x4 window: the op's error, the path in front */
    TG_EXPECT_NULL(nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(1, 2, 5, 5), xs)),
                   "1 (MaxPool2d): ");
    ag_tape_free(t);
    nn_module_free(net);
    ag_set_error_handler(NULL, NULL);
}

/* ---- nn_ctx_new ---- */

static void test_ctx_new(void) {
    nn_ctx *c = nn_ctx_new(7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NOT_NULL(c->tape);
    CU_ASSERT(c->training);
    CU_ASSERT_PTR_NULL(c->packs);
    ag_rng r;
    ag_rng_seed(&r, 7);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(ag_rng_next(c->rng), ag_rng_next(&r));
    const ag_real xs[2] = {1, 2};
    CU_ASSERT_PTR_NOT_NULL(ag_tensor_from(c->tape, AG_SHAPE(2), xs)); /* a working tape */
    nn_ctx_free(c);
    nn_ctx_free(NULL); /* no-op */
}

/* ---- nn_module_predict / nn_module_accuracy ---- */

/* Linear(2, 3) with W = [[1, 0], [0, 1], [-1, -1]], b = 0, then `tail` (NULL: nothing). */
static nn_module *known_net(nn_module *tail) {
    nn_module *net = tail ? nn_sequential(nn_linear_m(2, 3, true), tail)
                          : nn_sequential(nn_linear_m(2, 3, true));
    if (!net || !nn_module_init(net, 1)) return NULL;
    const ag_real wv[6] = {1, 0, 0, 1, -1, -1};
    memcpy(nn_module_param_at(net, 0)->data, wv, sizeof wv);
    memset(nn_module_param_at(net, 1)->data, 0, 3 * sizeof(ag_real));
    return net;
}

/* rows -> logits (2, 1, -3), (0, 5, -5), (-2, -1, 3), (1, 1, -2): classes 0, 1, 2, 0 (a tie:
 * the first) */
static const ag_real X4[4 * 2] = {2, 1, 0, 5, -2, -1, 1, 1};

static void test_predict_exact(void) {
    nn_module *net = known_net(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(net);
    nn_ctx *c = nn_ctx_new(1);
    int32_t pred[4] = {-1, -1, -1, -1};
    TG_OK(nn_module_predict(net, c, AG_SHAPE(4, 2), X4, pred, 4));
    CU_ASSERT(pred[0] == 0 && pred[1] == 1 && pred[2] == 2 && pred[3] == 0);
    const int32_t y[4] = {0, 1, 2, 1};
    CU_ASSERT_EQUAL(nn_module_accuracy(net, c, AG_SHAPE(4, 2), X4, y, NULL), 0.75);
    int32_t pred2[4] = {-1, -1, -1, -1};
    CU_ASSERT_EQUAL(nn_module_accuracy(net, c, AG_SHAPE(4, 2), X4, y, pred2), 0.75);
    CU_ASSERT(memcmp(pred, pred2, sizeof pred) == 0);
    /* a leading batch of batches: (2, 2, 2) -> rows in row-major order */
    int32_t pred3[4];
    TG_OK(nn_module_predict(net, c, AG_SHAPE(2, 2, 2), X4, pred3, 4));
    CU_ASSERT(memcmp(pred, pred3, sizeof pred) == 0);
    nn_ctx_free(c);
    nn_module_free(net);
}

/* Eval mode for the call only: dropout off (deterministic, the caller's context and the
 * module's flags unchanged), BatchNorm on its running statistics (not updated), nothing
 * recorded, the tape where it was. */
static void test_predict_eval(void) {
    nn_module *net = known_net(nn_dropout_m(0.9));
    CU_ASSERT_PTR_NOT_NULL_FATAL(net);
    nn_ctx *c = nn_ctx_new(2);
    ag_real keep[2] = {5, 6};
    ag_tensor *before = ag_tensor_from(c->tape, AG_SHAPE(2), keep);
    const size_t used = ag_tape_stats_get(c->tape).bytes_used;
    int32_t pred[4];
    for (int i = 0; i < 3; i++) { /* dropout 0.9 in training would scramble these */
        TG_OK(nn_module_predict(net, c, AG_SHAPE(4, 2), X4, pred, 4));
        CU_ASSERT(pred[0] == 0 && pred[1] == 1 && pred[2] == 2 && pred[3] == 0);
    }
    CU_ASSERT(c->training);
    CU_ASSERT(nn_module_training(net) && nn_module_training(nn_module_child(net, 1)));
    CU_ASSERT(ag_tape_set_recording(c->tape, true)); /* recording was restored (on) */
    CU_ASSERT_EQUAL(ag_tape_stats_get(c->tape).bytes_used, used);
    CU_ASSERT(before->data[0] == 5 && before->data[1] == 6);
    nn_ctx_free(c);
    nn_module_free(net);

    net = nn_sequential(nn_linear_m(2, 3, true), nn_batch_norm1d_m(3));
    nn_params *ps = nn_module_init(net, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ps);
    c = nn_ctx_new(3);
    const size_t n = nn_params_tensor_count(ps);
    ag_tensor *mean = nn_params_tensor_at(ps, n - 3), *var = nn_params_tensor_at(ps, n - 2);
    CU_ASSERT_STRING_EQUAL(mean->name, "1.running_mean");
    CU_ASSERT_STRING_EQUAL(var->name, "1.running_var");
    TG_OK(nn_module_predict(net, c, AG_SHAPE(4, 2), X4, pred, 4));
    for (int j = 0; j < 3; j++) CU_ASSERT(mean->data[j] == 0 && var->data[j] == 1);
    nn_ctx_free(c);
    nn_module_free(net);
}

static void test_predict_errors(void) {
    ag_set_error_handler(tg_capture, NULL);
    nn_module *net = known_net(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(net);
    nn_ctx *c = nn_ctx_new(1);
    int32_t pred[4];
    const int32_t y[4] = {0};
    TG_EXPECT_ERROR(nn_module_predict(NULL, c, AG_SHAPE(4, 2), X4, pred, 4), "nn_module_predict",
                    "needs a module");
    TG_EXPECT_ERROR(nn_module_predict(net, c, AG_SHAPE(4, 2), NULL, pred, 4), "got NULL");
    TG_EXPECT_ERROR(nn_module_predict(net, c, AG_SHAPE(4, 2), X4, NULL, 4), "pred is NULL");
    nn_ctx no_tape = {0};
    TG_EXPECT_ERROR(nn_module_predict(net, &no_tape, AG_SHAPE(4, 2), X4, pred, 4), "a tape");
    /* more rows than pred holds: ag_argmax's refusal, this function's name in front */
    TG_EXPECT_ERROR(nn_module_predict(net, c, AG_SHAPE(4, 2), X4, pred, 3), "nn_module_predict: ");
    /* an input the module refuses: the module's path and kind */
    TG_EXPECT_ERROR(nn_module_predict(net, c, AG_SHAPE(2, 4), X4, pred, 4),
                    "nn_module_predict: 0 (Linear): input [2, 4] does not fit");
    TG_EXPECT_ERROR(nn_module_predict(net, c, AG_SHAPE(0, 2), X4, pred, 4), "nn_module_predict");
    CU_ASSERT_EQUAL(nn_module_accuracy(net, c, AG_SHAPE(4, 2), X4, NULL, NULL), -1);
    TG_ERROR_HAS("nn_module_accuracy: the labels y are NULL");
    const ag_real x43[4 * 3] = {0}; /* an input the Linear refuses */
    CU_ASSERT_EQUAL(nn_module_accuracy(net, c, AG_SHAPE(4, 3), x43, y, NULL), -1);
    TG_ERROR_HAS("nn_module_accuracy: 0 (Linear): input [4, 3] does not fit");
    nn_ctx_free(c);
    nn_module_free(net);
    ag_set_error_handler(NULL, NULL);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"Conv2d, MaxPool2d, AvgPool2d modules = the plain functions (bits)", test_conv_pool_bits},
        {"nn_conv2d_m_opts: options reach the layer", test_conv_opts},
        {"conv / pool modules: bad sizes, bad input", test_conv_pool_errors},
        {"nn_ctx_new: tape, seeded stream, training", test_ctx_new},
        {"predict / accuracy: exact classes, ties, accuracy", test_predict_exact},
        {"predict: eval mode for the call only, tape rewound", test_predict_eval},
        {"predict / accuracy: bad input", test_predict_errors},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("module_run", tests);
}
