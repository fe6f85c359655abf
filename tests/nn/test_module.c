/* test_module.c -- modules and Sequential (nn/module.h): a Sequential equals the same network
 * written with the plain layer functions, bit for bit (values, gradients, running statistics);
 * parameter names equal PyTorch's for the same nn.Sequential; train / eval as PyTorch's for
 * Dropout and BatchNorm1d; nesting and named children; errors naming the module's path;
 * freeing (run under ASan by the sanitizer build). The snippets of docs/nn.md's "Modules and
 * Sequential" are in module_snippets.h, run at the end (test_module_doc checks they are the
 * doc's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/nn.h"
#include "tests/tg_test.h"
#include "module_test.h"

#include "module_snippets.h"

enum { B = 4 };

/* Every tensor of two stores (parameters and buffers, registration order): same values. */
static void expect_same_tensors(nn_params *a, nn_params *b) {
    CU_ASSERT_EQUAL_FATAL(nn_params_tensor_count(a), nn_params_tensor_count(b));
    for (size_t i = 0; i < nn_params_tensor_count(a); i++) {
        ag_tensor *x = nn_params_tensor_at(a, i), *y = nn_params_tensor_at(b, i);
        CU_ASSERT_EQUAL_FATAL(x->numel, y->numel);
        if (!same_bits(x->data, y->data, (size_t)x->numel)) TG_FAIL("tensor %zu differs", i);
    }
}

/* ---- a Sequential = the plain functions, bit for bit ---- */

typedef struct plain_net {
    nn_linear fc1, fc2;
    nn_batch_norm1d bn;
    nn_dropout drop;
} plain_net;

/* Linear(6, 16) BatchNorm1d(16) GELU Dropout(0.3) Linear(16, 3), written with plain layers */
static ag_tensor *plain_forward(const plain_net *n, const nn_ctx *c, ag_tensor *x) {
    ag_tensor *h = nn_batch_norm1d_forward(&n->bn, c, nn_linear_forward(&n->fc1, c, x));
    h = nn_dropout_forward(&n->drop, c, ag_gelu(c->tape, h));
    return nn_linear_forward(&n->fc2, c, h);
}

static void test_mlp_bits(void) {
    nn_params *ps1 = nn_params_new(), *ps2 = nn_params_new();
    plain_net n;
    TG_OK(nn_linear_init(&n.fc1, ps1, "fc1", 6, 16, true));
    TG_OK(nn_batch_norm1d_init(&n.bn, ps1, "bn", 16, NN_BATCH_NORM_EPS, NN_BATCH_NORM_MOMENTUM));
    TG_OK(nn_dropout_init(&n.drop, 0.3));
    TG_OK(nn_linear_init(&n.fc2, ps1, "fc2", 16, 3, true));
    nn_module *net = nn_sequential(nn_linear_m(6, 16, true), nn_batch_norm1d_m(16), nn_gelu_m(),
                                   nn_dropout_m(0.3), nn_linear_m(16, 3, true));
    CU_ASSERT_PTR_NOT_NULL_FATAL(net);
    TG_OK(nn_module_register(net, ps2, ""));
    TG_OK(nn_params_finalize(ps1, 42));
    TG_OK(nn_params_finalize(ps2, 42));
    CU_ASSERT_EQUAL_FATAL(nn_params_flat_size(ps1), nn_params_flat_size(ps2));
    CU_ASSERT(same_bits(nn_params_values(ps1), nn_params_values(ps2), nn_params_flat_size(ps1)));

    ag_real xs[B * 6], y1[B * 3];
    fill(xs, B * 6, 3);
    const ag_real w[B * 3] = {1, -2, 3, 0.5f, 1, 1, -1, 2, 0.25f, 3, -1, 1};
    ag_real *g1 = malloc(nn_params_flat_size(ps1) * sizeof *g1);
    ag_tape *t = ag_tape_new();
    for (int step = 0; step < 2; step++) { /* training (dropout drawn, batch statistics), eval */
        ag_rng r;
        for (int pass = 0; pass < 2; pass++) { /* the plain layers, then the Sequential */
            ag_rng_seed(&r, 9);
            nn_ctx c = {.tape = t, .training = step == 0, .rng = &r};
            ag_tensor *x = ag_tensor_from(t, AG_SHAPE(B, 6), xs);
            ag_tensor *y = pass == 0 ? plain_forward(&n, &c, x) : nn_module_forward(net, &c, x);
            CU_ASSERT_PTR_NOT_NULL_FATAL(y);
            ag_tensor *wt = ag_tensor_from(t, AG_SHAPE(B, 3), w);
            TG_OK(ag_backward(t, ag_sum(t, ag_mul(t, y, wt), AG_ALL, false)));
            if (pass == 0) {
                memcpy(y1, y->data, sizeof y1);
                memcpy(g1, nn_params_grads(ps1), nn_params_flat_size(ps1) * sizeof *g1);
            } else {
                CU_ASSERT(same_bits(y1, y->data, B * 3));
                CU_ASSERT(same_bits(g1, nn_params_grads(ps2), nn_params_flat_size(ps2)));
            }
            ag_tape_reset(t);
        }
        expect_same_tensors(ps1, ps2); /* the running statistics too */
        nn_params_zero_grad(ps1);
        nn_module_zero_grad(net);
        for (size_t i = 0; i < nn_params_flat_size(ps2); i++)
            if (nn_params_grads(ps2)[i] != 0) TG_FAIL("gradient %zu not zeroed", i);
    }
    free(g1);
    nn_module_free(net);
    ag_tape_free(t);
    nn_params_free(ps1);
    nn_params_free(ps2);
}

/* Embedding -> LSTM -> last step -> LayerNorm -> Linear: the same as the plain layers. */
static void test_sequence_bits(void) {
    enum { T = 5, V = 7, E = 4, H = 6 };
    nn_params *ps1 = nn_params_new(), *ps2 = nn_params_new();
    nn_embedding emb;
    nn_lstm rnn;
    nn_layer_norm ln;
    nn_linear out;
    TG_OK(nn_embedding_init(&emb, ps1, "emb", V, E));
    TG_OK(nn_lstm_init(&rnn, ps1, "rnn", E, H, 2, 0.2));
    TG_OK(nn_layer_norm_init(&ln, ps1, "ln", AG_SHAPE(H), NN_LAYER_NORM_EPS));
    TG_OK(nn_linear_init(&out, ps1, "out", H, 2, true));
    nn_module *net =
        nn_sequential(nn_embedding_m(V, E), nn_lstm_m(E, H, 2, 0.2), nn_select_m(0, -1),
                      nn_layer_norm_m(AG_SHAPE(H)), nn_linear_m(H, 2, true));
    TG_OK(nn_module_register(net, ps2, ""));
    TG_OK(nn_params_finalize(ps1, 11));
    TG_OK(nn_params_finalize(ps2, 11));
    int32_t ids[T * B];
    ag_real fids[T * B];
    for (int i = 0; i < T * B; i++) fids[i] = (ag_real)(ids[i] = (i * 5 + 3) % V);
    ag_tape *t = ag_tape_new();
    ag_rng r1, r2;
    ag_rng_seed(&r1, 2);
    ag_rng_seed(&r2, 2);
    nn_ctx c1 = {.tape = t, .training = true, .rng = &r1};
    nn_ctx c2 = {.tape = t, .training = true, .rng = &r2};
    ag_tensor *h = nn_lstm_forward(&rnn, &c1, nn_embedding_forward(&emb, &c1, ids, AG_SHAPE(T, B)),
                                   NULL, NULL, NULL, NULL);
    h = ag_reshape(t, ag_narrow(t, h, 0, T - 1, 1), AG_SHAPE(B, H));
    ag_tensor *y1 = nn_linear_forward(&out, &c1, nn_layer_norm_forward(&ln, &c1, h));
    ag_tensor *y2 = nn_module_forward(net, &c2, ag_tensor_from(t, AG_SHAPE(T, B), fids));
    CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    CU_ASSERT(y2->ndim == 2 && y2->shape[0] == B && y2->shape[1] == 2);
    CU_ASSERT(same_bits(y1->data, y2->data, B * 2));
    TG_OK(ag_backward(t, ag_sum(t, ag_add(t, y1, y2), AG_ALL, false)));
    /* both got the same gradient: d(y1 + y2) flows once into each store */
    CU_ASSERT(same_bits(nn_params_grads(ps1), nn_params_grads(ps2), nn_params_flat_size(ps1)));
    nn_module_free(net);
    ag_tape_free(t);
    nn_params_free(ps1);
    nn_params_free(ps2);
}

/* ---- names: PyTorch's state_dict of the same nn.Sequential ---- */

static void expect_names(const nn_module *m, const char *const *want, size_t n, bool params) {
    size_t got = params ? nn_module_param_count(m) : nn_module_tensor_count(m);
    CU_ASSERT_EQUAL(got, n);
    for (size_t i = 0; i < n && i < got; i++) {
        ag_tensor *p = params ? nn_module_param_at(m, i) : nn_module_tensor_at(m, i);
        if (strcmp(nn_module_state_name(m, p), want[i]))
            TG_FAIL("name %zu: '%s', PyTorch's '%s'", i, nn_module_state_name(m, p), want[i]);
    }
}

static void test_pytorch_names(void) {
    /* nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Dropout(0.1),
     *               nn.Linear(8, 3)).state_dict().keys() */
    static const char *const sd[] = {"0.weight",
                                     "0.bias",
                                     "2.weight",
                                     "2.bias",
                                     "2.running_mean",
                                     "2.running_var",
                                     "2.num_batches_tracked",
                                     "4.weight",
                                     "4.bias"};
    static const char *const np[] = {"0.weight", "0.bias",   "2.weight",
                                     "2.bias",   "4.weight", "4.bias"}; /* named_parameters() */
    nn_params *ps = nn_params_new();
    nn_module *net = nn_sequential(nn_linear_m(4, 8, true), nn_relu_m(), nn_batch_norm1d_m(8),
                                   nn_dropout_m(0.1), nn_linear_m(8, 3, true));
    TG_OK(nn_module_register(net, ps, ""));
    expect_names(net, sd, 9, false);
    expect_names(net, np, 6, true);
    CU_ASSERT_PTR_NOT_NULL(nn_params_find(ps, "2.running_var"));
    CU_ASSERT_EQUAL(nn_module_param_at(net, 0)->shape[0], 8); /* weight (out, in) */
    CU_ASSERT_EQUAL(nn_module_param_at(net, 0)->shape[1], 4);
    nn_module_free(net);

    /* nn.Sequential(nn.Embedding(10, 4), nn.LSTM(4, 6, 2), <select>, nn.LayerNorm(6),
     *               nn.Flatten(), nn.Linear(6, 2)).state_dict().keys() */
    static const char *const sq[] = {
        "0.weight",       "1.weight_ih_l0", "1.weight_hh_l0", "1.bias_ih_l0", "1.bias_hh_l0",
        "1.weight_ih_l1", "1.weight_hh_l1", "1.bias_ih_l1",   "1.bias_hh_l1", "3.weight",
        "3.bias",         "5.weight",       "5.bias"};
    nn_params *ps2 = nn_params_new();
    net = nn_sequential(nn_embedding_m(10, 4), nn_lstm_m(4, 6, 2, 0), nn_select_m(0, -1),
                        nn_layer_norm_m(AG_SHAPE(6)), nn_flatten_m(1, -1), nn_linear_m(6, 2, true));
    TG_OK(nn_module_register(net, ps2, ""));
    expect_names(net, sq, 13, false);
    expect_names(net, sq, 13, true);
    CU_ASSERT_STRING_EQUAL(nn_module_kind(nn_module_child(net, 1)), "LSTM");
    nn_module_free(net);
    nn_params_free(ps);
    nn_params_free(ps2);
}

/* ---- nesting, named children, a sub-module's parameters ---- */

static void test_nesting(void) {
    nn_params *ps = nn_params_new();
    nn_module *inner = nn_sequential(nn_linear_m(3, 5, true), nn_tanh_m());
    nn_module *net = nn_sequential(inner, nn_sequential(nn_linear_m(5, 4, false), nn_sigmoid_m()));
    nn_module *head = nn_sequential_of(0, NULL);
    TG_OK(nn_module_add(head, "proj", nn_linear_m(4, 2, true)));
    TG_OK(nn_module_add(net, "head", head));
    TG_OK(nn_module_register(net, ps, "model"));
    TG_OK(nn_params_finalize(ps, 1));
    static const char *const full[] = {"model.0.0.weight", "model.0.0.bias", "model.1.0.weight",
                                       "model.head.proj.weight", "model.head.proj.bias"};
    CU_ASSERT_EQUAL(nn_module_tensor_count(net), 5);
    for (size_t i = 0; i < 5; i++)
        CU_ASSERT_STRING_EQUAL(nn_module_tensor_at(net, i)->name, full[i]);
    /* relative names: PyTorch's net.state_dict() and net[0].state_dict() */
    CU_ASSERT_STRING_EQUAL(nn_module_state_name(net, nn_module_tensor_at(net, 3)),
                           "head.proj.weight");
    CU_ASSERT_STRING_EQUAL(nn_module_state_name(inner, nn_module_tensor_at(inner, 1)), "0.bias");
    CU_ASSERT_PTR_NULL(nn_module_state_name(inner, nn_module_tensor_at(net, 3)));
    CU_ASSERT_EQUAL(nn_module_param_count(inner), 2);
    CU_ASSERT_EQUAL(nn_module_param_count(head), 2);
    CU_ASSERT_PTR_EQUAL(nn_module_get(net, "head.proj"), nn_module_child(head, 0));
    CU_ASSERT_PTR_EQUAL(nn_module_get(net, ""), net);
    CU_ASSERT_PTR_NULL(nn_module_get(net, "2"));
    CU_ASSERT_STRING_EQUAL(nn_module_path(nn_module_get(net, "1.0")), "model.1.0");
    CU_ASSERT_STRING_EQUAL(nn_module_name(nn_module_get(net, "1.0")), "0");
    CU_ASSERT_STRING_EQUAL(nn_module_kind(nn_module_get(net, "1.1")), "Sigmoid");
    CU_ASSERT_PTR_EQUAL(nn_module_params(head), ps);

    ag_tape *t = ag_tape_new();
    ag_real xs[B * 3];
    fill(xs, B * 3, 8);
    nn_ctx c = {.tape = t, .training = true};
    ag_tensor *y = nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(B, 3), xs));
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT(y->shape[0] == B && y->shape[1] == 2);
    TG_OK(ag_backward(t, ag_sum(t, y, AG_ALL, false)));
    /* zero_grad of a sub-module zeroes its parameters only */
    nn_module_zero_grad(head);
    ag_tensor *w0 = nn_module_param_at(inner, 0), *wh = nn_module_param_at(head, 0);
    bool inner_nonzero = false, head_zero = true;
    for (ptrdiff_t i = 0; i < w0->numel; i++) inner_nonzero |= w0->grad[i] != 0;
    for (ptrdiff_t i = 0; i < wh->numel; i++) head_zero &= wh->grad[i] == 0;
    CU_ASSERT(inner_nonzero && head_zero);
    nn_module_zero_grad(net);
    for (ptrdiff_t i = 0; i < w0->numel; i++) CU_ASSERT(w0->grad[i] == 0);
    ag_tape_free(t);
    nn_module_free(net);
    nn_params_free(ps);
}

/* ---- train / eval ---- */

static void test_dropout_modes(void) {
    nn_module *net = nn_sequential(nn_dropout_m(0.5));
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 3);
    ag_real xs[64];
    for (int i = 0; i < 64; i++) xs[i] = 1;
    nn_ctx c = {.tape = t, .training = true, .rng = &r};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(8, 8), xs);
    ag_tensor *y = nn_module_forward(net, &c, x); /* training: zeros and 1 / (1 - p) = 2 */
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    int zeros = 0, twos = 0;
    for (int i = 0; i < 64; i++) zeros += y->data[i] == 0, twos += y->data[i] == 2;
    CU_ASSERT(zeros > 0 && twos > 0 && zeros + twos == 64);
    CU_ASSERT(nn_module_training(net) && nn_module_training(nn_module_child(net, 0)));
    nn_module_eval(net); /* net.eval(): the identity */
    CU_ASSERT(!nn_module_training(nn_module_child(net, 0)));
    CU_ASSERT_PTR_EQUAL(nn_module_forward(net, &c, x), x);
    nn_module_train(net, true);
    c.training = false; /* the context switches every module off */
    CU_ASSERT_PTR_EQUAL(nn_module_forward(net, &c, x), x);
    /* an ancestor in eval mode wins over a child in training mode (the documented difference) */
    c.training = true;
    nn_module_eval(net);
    nn_module_train(nn_module_child(net, 0), true);
    CU_ASSERT_PTR_EQUAL(nn_module_forward(net, &c, x), x);
    ag_tape_free(t);
    nn_module_free(net);
}

/* BatchNorm1d(2) on a known batch: PyTorch's training and eval outputs and running statistics
 * (formulas of nn/batchnorm.h), and a frozen BatchNorm inside a training net. */
static void test_batchnorm_modes(void) {
    static const ag_real xs[4 * 2] = {1, 10, 2, 20, 3, 30, 6, 60};
    const double eps = NN_BATCH_NORM_EPS;
    double mean[2], var[2]; /* per channel: biased variance */
    for (int ch = 0; ch < 2; ch++) {
        mean[ch] = var[ch] = 0;
        for (int i = 0; i < 4; i++) mean[ch] += xs[2 * i + ch] / 4.0;
        for (int i = 0; i < 4; i++) var[ch] += pow(xs[2 * i + ch] - mean[ch], 2) / 4.0;
    }
    nn_params *ps = nn_params_new();
    nn_module *net = nn_sequential(nn_batch_norm1d_m(2), nn_dropout_m(0.5));
    TG_OK(nn_module_register(net, ps, "bnnet"));
    TG_OK(nn_params_finalize(ps, 1));
    ag_tensor *rm = nn_params_find(ps, "bnnet.0.running_mean");
    ag_tensor *rv = nn_params_find(ps, "bnnet.0.running_var");
    ag_tensor *nb = nn_params_find(ps, "bnnet.0.num_batches_tracked");
    CU_ASSERT_PTR_NOT_NULL_FATAL(rm);
    ag_tape *t = ag_tape_new();
    ag_rng r;
    ag_rng_seed(&r, 3);
    nn_ctx c = {.tape = t, .training = true, .rng = &r};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(4, 2), xs);
    /* freeze the dropout: BatchNorm alone trains */
    nn_module_eval(nn_module_child(net, 1));
    ag_tensor *y = nn_module_forward(net, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_DOUBLE_EQUAL(y->data[i], (xs[i] - mean[i % 2]) / sqrt(var[i % 2] + eps), 1e-5);
    for (int ch = 0; ch < 2; ch++) {
        CU_ASSERT_DOUBLE_EQUAL(rm->data[ch], 0.1 * mean[ch], 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(rv->data[ch], 0.9 + 0.1 * var[ch] * 4 / 3, 1e-4);
    }
    CU_ASSERT_EQUAL(nb->data[0], 1);
    /* net.eval(): the running statistics normalise, and stay */
    nn_module_eval(net);
    ag_real rm0[2] = {rm->data[0], rm->data[1]}, rv0[2] = {rv->data[0], rv->data[1]};
    y = nn_module_forward(net, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_DOUBLE_EQUAL(y->data[i], (xs[i] - rm0[i % 2]) / sqrt(rv0[i % 2] + eps), 1e-4);
    CU_ASSERT(rm->data[0] == rm0[0] && rv->data[1] == rv0[1] && nb->data[0] == 1);
    /* a frozen BatchNorm in a training net (net.train(); net[0].eval()) */
    nn_module_train(net, true);
    nn_module_eval(nn_module_child(net, 0));
    y = nn_module_forward(net, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT(rm->data[0] == rm0[0] && nb->data[0] == 1);
    int zeros = 0;
    for (int i = 0; i < 8; i++) zeros += y->data[i] == 0;
    CU_ASSERT(zeros > 0); /* the dropout trains again */
    ag_tape_free(t);
    nn_module_free(net);
    nn_params_free(ps);
}

/* ---- errors ---- */

static void test_forward_errors(void) {
    ag_set_error_handler(tg_capture, NULL);
    nn_params *ps = nn_params_new();
    nn_module *net = nn_sequential(nn_linear_m(2, 7, true), nn_relu_m(), nn_linear_m(5, 3, true));
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    ag_real xs[4 * 7] = {0};
    ag_tensor *x2 = ag_tensor_from(t, AG_SHAPE(4, 2), xs);
    TG_EXPECT_NULL(nn_module_forward(net, &c, x2), "0 (Linear)", "not registered");
    TG_OK(nn_module_register(net, ps, "classifier"));
    TG_EXPECT_NULL(nn_module_forward(net, &c, x2), "classifier.0 (Linear)", "not finalized");
    TG_OK(nn_params_finalize(ps, 1));
    tg_n_captured = 0;
    TG_EXPECT_NULL(nn_module_forward(net, &c, x2), "classifier.2 (Linear): input [4, 7] does not "
                                                   "fit: expected (..., 5)");
    TG_CAPTURED_HAS("classifier.2 (Linear): input [4, 7]"); /* the handler got it too, once */
    CU_ASSERT_EQUAL(tg_n_captured, 1);
    TG_EXPECT_NULL(nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(4, 3), xs)),
                   "classifier.0 (Linear): input [4, 3]", "(..., 2)");
    tg_n_captured = 0;
    CU_ASSERT_PTR_NULL(nn_module_forward(net, &c, NULL)); /* NULL in: NULL, no message */
    CU_ASSERT_EQUAL(tg_n_captured, 0);
    nn_module_free(net);
    nn_params_free(ps);

    /* an op's error inside a module: the path in front of ag_last_error() */
    ps = nn_params_new();
    net = nn_sequential(nn_batch_norm1d_m(3), nn_dropout_m(0.5), nn_embedding_m(4, 2),
                        nn_flatten_m(2, 1), nn_select_m(3, 0), nn_layer_norm_m(AG_SHAPE(2, 3)),
                        nn_lstm_m(3, 2, 1, 0));
    TG_OK(nn_module_register(net, ps, "m"));
    TG_OK(nn_params_finalize(ps, 1));
    ag_tensor *one = ag_tensor_from(t, AG_SHAPE(1, 3), xs),
              *x3 = ag_tensor_from(t, AG_SHAPE(4, 3), xs);
    TG_EXPECT_NULL(nn_module_forward(net, &c, one), "m.0 (BatchNorm1d): ", "more than 1 value");
    TG_EXPECT_NULL(nn_module_forward(nn_module_child(net, 0), &c, x2),
                   "m.0 (BatchNorm1d): input [4, 2]", "(N, 3) or (N, 3, L)");
    TG_EXPECT_NULL(nn_module_forward(nn_module_child(net, 1), &c, x3),
                   "m.1 (Dropout): ", "needs nn_ctx.rng");
    const ag_real bad_ids[3] = {1, 2.5f, 4};
    TG_EXPECT_NULL(
        nn_module_forward(nn_module_child(net, 2), &c, ag_tensor_from(t, AG_SHAPE(3), bad_ids)),
        "m.2 (Embedding): id 2.5 at position 1", "[0, 4)");
    TG_EXPECT_NULL(nn_module_forward(nn_module_child(net, 3), &c, x3),
                   "m.3 (Flatten): cannot flatten dims 2 to 1 of input [4, 3]");
    TG_EXPECT_NULL(nn_module_forward(nn_module_child(net, 4), &c, x3),
                   "m.4 (Select): cannot select index 0 of axis 3 of input [4, 3]");
    TG_EXPECT_NULL(nn_module_forward(nn_module_child(net, 5), &c, x3),
                   "m.5 (LayerNorm): input [4, 3]", "end in [2, 3]");
    TG_EXPECT_NULL(nn_module_forward(nn_module_child(net, 6), &c, x3), "m.6 (LSTM): input [4, 3]",
                   "(T, B, 3)");
    nn_module_free(net);
    nn_params_free(ps);
    ag_tape_free(t);
    ag_set_error_handler(NULL, NULL);
}

static void test_build_errors(void) {
    TG_EXPECT_NULL(nn_linear_m(0, 3, true), "nn_linear_m", "in = 0");
    TG_EXPECT_NULL(nn_dropout_m(1.0), "p = 1");
    TG_EXPECT_NULL(nn_lstm_m(3, 4, 9, 0), "num_layers = 9");
    TG_EXPECT_NULL(nn_layer_norm_m(0, NULL), "nn_layer_norm_m");
    TG_EXPECT_NULL(nn_batch_norm1d_m(-1), "num_features = -1");
    TG_EXPECT_NULL(nn_embedding_m(3, 0), "dim = 0");
    /* a failed constructor inside a Sequential: NULL, both messages, the others freed (ASan) */
    TG_EXPECT_NULL(nn_sequential(nn_linear_m(2, 3, true), nn_linear_m(3, -1, true), nn_relu_m()),
                   "nn_sequential: module 1 is NULL", "out = -1");
    TG_EXPECT_ERROR(nn_module_register(NULL, NULL, "x"), "nn_module_register: no module");

    /* building on a finalized store is refused */
    nn_params *ps = nn_params_new();
    TG_OK(nn_params_finalize(ps, 1));
    nn_module *m = nn_sequential(nn_linear_m(2, 3, true));
    TG_EXPECT_ERROR(nn_module_register(m, ps, "late"), "'late' (Sequential)", "finalized");
    nn_params_free(ps);
    ps = nn_params_new();
    TG_OK(nn_module_register(m, ps, "a"));
    TG_EXPECT_ERROR(nn_module_register(m, ps, "b"), "already registered as 'a'");
    TG_EXPECT_ERROR(nn_module_register(nn_module_child(m, 0), ps, "c"), "has a parent");
    TG_EXPECT_ERROR(nn_module_add(m, NULL, nn_relu_m()), "'a' is already registered");
    TG_EXPECT_ERROR(nn_params_finalize(ps, 1), "already registered"); /* the store failed */
    nn_module_free(m);
    nn_params_free(ps);

    /* children: names, parents, cycles; the child is freed on failure (ASan) */
    nn_module *root = nn_sequential(nn_relu_m()), *sub = nn_sequential(nn_tanh_m());
    TG_EXPECT_ERROR(nn_module_add(root, "0", nn_gelu_m()), "already has a child named '0'");
    TG_EXPECT_ERROR(nn_module_add(root, "a.b", nn_gelu_m()), "bad child name 'a.b'");
    TG_EXPECT_ERROR(nn_module_add(root, "", nn_gelu_m()), "bad child name ''");
    TG_EXPECT_ERROR(nn_module_add(NULL, "x", nn_gelu_m()), "the parent is NULL");
    TG_EXPECT_ERROR(nn_module_add(root, "x", nn_linear_m(0, 1, true)), "child is NULL", "in = 0");
    TG_OK(nn_module_add(root, "sub", sub));
    TG_EXPECT_ERROR(nn_module_add(sub, "up", root), "would contain itself");
    TG_EXPECT_ERROR(nn_module_add(root, "again", sub), "already has a parent");
    TG_EXPECT_ERROR(nn_module_add(sub, "self", sub), "already has a parent");
    CU_ASSERT_EQUAL(nn_module_child_count(root), 2);
    nn_module_free(sub); /* a child alone: a no-op, its root frees it */
    CU_ASSERT_STRING_EQUAL(nn_module_kind(nn_module_get(root, "sub.0")), "Tanh");
    nn_module_free(root);
    nn_module_free(NULL);
    /* a custom def without a forward */
    static const nn_module_def nofwd = {"NoForward", NULL, NULL, NULL};
    TG_EXPECT_NULL(nn_module_new(&nofwd, 8), "needs a kind and a forward");
}

/* Flatten and Select values; Softmax / LogSoftmax as the ops. */
static void test_views(void) {
    ag_tape *t = ag_tape_new();
    ag_real xs[2 * 3 * 4];
    for (int i = 0; i < 24; i++) xs[i] = (ag_real)i;
    nn_ctx c = {.tape = t};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 3, 4), xs);
    nn_module *f = nn_flatten_m(1, -1), *s = nn_select_m(1, -1), *s0 = nn_select_m(-1, 1);
    ag_tensor *y = nn_module_forward(f, &c, x);
    CU_ASSERT(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 12 && ag_get(y, 13) == 13);
    y = nn_module_forward(s, &c, x); /* x[:, 2, :] */
    CU_ASSERT(y && y->ndim == 2 && y->shape[1] == 4 && ag_get(y, 0) == 8 && ag_get(y, 4) == 20);
    y = nn_module_forward(s0, &c, x); /* x[..., 1] */
    CU_ASSERT(y && y->ndim == 2 && y->shape[1] == 3 && ag_get(y, 0) == 1 && ag_get(y, 5) == 21);
    nn_module *sm = nn_sequential(nn_softmax_m()), *lsm = nn_log_softmax_m();
    ag_tensor *a = nn_module_forward(sm, &c, x), *b = ag_softmax(t, x);
    CU_ASSERT(a && b && same_bits(a->data, b->data, 24));
    a = nn_module_forward(lsm, &c, x), b = ag_log_softmax(t, x);
    CU_ASSERT(a && b && same_bits(a->data, b->data, 24));
    nn_module_free(f);
    nn_module_free(s);
    nn_module_free(s0);
    nn_module_free(sm);
    nn_module_free(lsm);
    ag_tape_free(t);
}


/* ---- a root that owns its store: init, save, load ---- */

static nn_module *small_net(void) {
    return nn_sequential(nn_linear_m(3, 4, true), nn_batch_norm1d_m(4), nn_linear_m(4, 2, true));
}

static void test_init_save_load(void) {
    char *dir = tg_temp_dir();
    const char *path = tg_path(dir, "net.safetensors");
    nn_module *net = small_net(), *net2 = small_net();
    nn_params *ps = nn_module_init(net, 42);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ps);
    CU_ASSERT_TRUE(nn_module_params(net) == ps && nn_params_finalized(ps));
    nn_params *ref = nn_params_new(); /* the bits of register + finalize by hand */
    nn_module *hand = small_net();
    TG_OK(nn_module_register(hand, ref, "") || nn_params_finalize(ref, 42));
    CU_ASSERT_EQUAL(nn_params_flat_size(ps), nn_params_flat_size(ref));
    CU_ASSERT_EQUAL(memcmp(nn_params_values(ps), nn_params_values(ref),
                           nn_params_flat_size(ps) * sizeof(ag_real)),
                    0);
    nn_params_find(ps, "1.running_mean")->data[2] = 0.5f; /* a buffer travels too */
    TG_OK(nn_module_save(net, path));
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(net2, 7));
    TG_OK(nn_module_load(net2, path));
    nn_params *ps2 = nn_module_params(net2);
    CU_ASSERT_EQUAL(memcmp(nn_params_values(ps), nn_params_values(ps2),
                           nn_params_flat_size(ps) * sizeof(ag_real)),
                    0);
    CU_ASSERT_EQUAL(nn_params_find(ps2, "1.running_mean")->data[2], 0.5f);
    /* a child, a store shared, a model that does not fit: refused, nothing changed */
    TG_EXPECT_ERROR(nn_module_save(nn_module_get(net, "0"), path), "nn_module_save (Linear '0')",
                    "registered root");
    TG_EXPECT_ERROR(nn_module_load(NULL, path), "nn_module_load: no module");
    nn_module *other = nn_sequential(nn_linear_m(3, 4, true), nn_linear_m(4, 2, true));
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(other, 1));
    ag_real before = nn_module_param_at(other, 0)->data[0];
    TG_EXPECT_ERROR(nn_module_load(other, path),
                    "tensor '1.weight' has shape [4], expected [2, 4]");
    CU_ASSERT_EQUAL(nn_module_param_at(other, 0)->data[0], before);
    TG_EXPECT_ERROR(nn_module_init(net, 1) ? 0 : -1, "already registered");
    TG_EXPECT_ERROR(nn_module_init(NULL, 1) ? 0 : -1, "nn_module_init: no module");
    TG_EXPECT_ERROR(nn_module_init(nn_module_get(net, "1"), 1) ? 0 : -1, "has a parent");
    nn_module_free(other);
    nn_module_free(hand);
    nn_params_free(ref);
    nn_module_free(net); /* and its store */
    nn_module_free(net2);
    tg_remove(dir);
}

/* ---- LSTM options in a module: batch-first is time-major on the transposed input ---- */

static void test_lstm_opts(void) {
    ag_tape *t = ag_tape_new();
    nn_rnn_opts bf = {.batch_first = true}, bi = {.batch_first = true, .bidirectional = true};
    nn_module *tm = nn_lstm_m(3, 4, 2, 0), *bm = nn_lstm_m_opts(3, 4, 2, 0, &bf),
              *bim = nn_lstm_m_opts(3, 4, 1, 0, &bi);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(tm, 5));
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(bm, 5));
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_module_init(bim, 5));
    ag_real xs[2 * 5 * 3];
    for (int i = 0; i < 30; i++) xs[i] = (ag_real)((i * 7) % 11) / 5 - 1;
    nn_ctx c = {.tape = t};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 5, 3), xs); /* (B, T, F) */
    ag_tensor *yb = nn_module_forward(bm, &c, x);
    ag_tensor *yt = ag_transpose(t, nn_module_forward(tm, &c, ag_transpose(t, x, 0, 1)), 0, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(yb);
    CU_ASSERT_PTR_NOT_NULL_FATAL(yt);
    CU_ASSERT_TRUE(yb->shape[0] == 2 && yb->shape[1] == 5 && yb->shape[2] == 4);
    for (ptrdiff_t i = 0; i < yb->numel; i++)
        if (ag_get(yb, i) != ag_get(yt, i)) CU_FAIL("batch-first != time-major transposed");
    ag_tensor *y2 = nn_module_forward(bim, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    CU_ASSERT_EQUAL(y2->shape[2], 8); /* [forward, reverse] */
    CU_ASSERT_STRING_EQUAL(nn_module_tensor_at(bim, 4)->name, "weight_ih_l0_reverse");
    CU_ASSERT_EQUAL(nn_module_tensor_count(bim), 8);
    ag_tape_reset(t);
    TG_EXPECT_ERROR(nn_module_forward(bm, &c, ag_tensor_from(t, AG_SHAPE(2, 3, 5), xs)) ? 0 : -1,
                    "LSTM: input [2, 3, 5] does not fit: expected (B, T, 3) (batch-first)");
    nn_module_free(tm);
    nn_module_free(bm);
    nn_module_free(bim);
    ag_tape_free(t);
}

/* ---- the doc's snippets ---- */

static void test_doc_snippets(void) {
    tg_fd_capture cap;
    tg_fd_capture_begin(&cap, STDOUT_FILENO);
    int rc = snippets_run();
    char *out = tg_fd_capture_end(&cap);
    CU_ASSERT_EQUAL(rc, 0);
    TG_HAS(out, "0.weight [32, 2]\n0.bias [32]\n3.weight [3, 32]\n3.bias [3]\n");
    TG_HAS(out, "features.0.weight\n", "head.bias\n");
    TG_HAS(out, "classifier.2 (Linear): input [4, 7] does not fit: expected (..., 5)");
    TG_HAS(out, "2 parameters, 5 tensors in the state_dict");
    free(out);
}

int main(void) {
    static CU_TestInfo tests[] = {{"sequential_equals_plain_bits", test_mlp_bits},
                                  {"sequence_model_bits", test_sequence_bits},
                                  {"pytorch_names", test_pytorch_names},
                                  {"nesting", test_nesting},
                                  {"dropout_train_eval", test_dropout_modes},
                                  {"batchnorm_train_eval", test_batchnorm_modes},
                                  {"forward_errors", test_forward_errors},
                                  {"build_errors", test_build_errors},
                                  {"flatten_select_softmax", test_views},
                                  {"init_save_load", test_init_save_load},
                                  {"lstm_opts", test_lstm_opts},
                                  {"doc_snippets", test_doc_snippets},
                                  CU_TEST_INFO_NULL};
    return tg_test_main("module", tests);
}
