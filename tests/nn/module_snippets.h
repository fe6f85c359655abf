/* module_snippets.h -- the code of docs/nn.md's section "Modules and Sequential", compiled as C
 * (tests/nn/test_module.c) and as C++ (tests/cxx/test_headers.cpp) and run by both. Every ```c
 * block of that section appears here line for line (leading spaces aside: ctest
 * test_nn_module_doc, tests/nn/check_doc_snippets.sh), inside functions that give it its
 * variables. snippets_run() returns 0 when every snippet did what the doc says. */
#ifndef TG_TEST_MODULE_SNIPPETS_H
#define TG_TEST_MODULE_SNIPPETS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "optim/optim.h"

static int fail(const char *what) {
    fprintf(stderr, "snippet: %s\n", what);
    return 1;
}

/* ---- build, register, one training step, the state_dict, free ---- */
static int snip_quickstart(ag_tape *t, ag_rng *rng) {
    const ag_real xs[4 * 2] = {0.5f, -1, 1, 0, -0.25f, 0.75f, 0, 1};
    const int32_t labels[4] = {0, 2, 1, 1};
    ag_rng_seed(rng, 7);
    /* doc block 1 */
    nn_params *ps = nn_params_new();
    nn_module *net = nn_sequential(nn_linear_m(2, 32, true), nn_gelu_m(), nn_dropout_m(0.1),
                                   nn_linear_m(32, 3, true));
    if (nn_module_register(net, ps, "") || nn_params_finalize(ps, 42)) return fail(ag_last_error());
    optim *opt = optim_new(ps, optim_adamw(1e-3));
    /* doc block 2 */
    nn_ctx c = {t, true, rng, NULL}; /* tape, training, rng, packs */
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(4, 2), xs);
    ag_tensor *logits = nn_module_forward(net, &c, x); /* (4, 2) -> (4, 3) */
    ag_tensor *loss = ag_cross_entropy(t, logits, labels, NULL, 0, AG_IGNORE_INDEX, AG_REDUCE_MEAN);
    if (!loss || ag_backward(t, loss) || optim_step(opt)) return fail(ag_last_error());
    ag_tape_reset(t);
    /* doc block 3 */
    for (size_t i = 0; i < nn_module_tensor_count(net); i++) { /* net.state_dict() */
        ag_tensor *p = nn_module_tensor_at(net, i);
        char shape[64];
        printf("%s %s\n", nn_module_state_name(net, p), ag_shape_str(p, shape, sizeof shape));
    }
    optim_free(opt);
    nn_module_free(net); /* the modules; the store keeps the tensors */
    nn_params_free(ps);
    return 0;
}

/* ---- nesting and named children ---- */
static int snip_nesting(void) {
    nn_params *ps = nn_params_new();
    /* doc block 4 */
    nn_module *model = nn_sequential_of(0, NULL); /* an empty Sequential */
    if (nn_module_add(model, "features", nn_sequential(nn_linear_m(8, 16, true), nn_relu_m())) ||
        nn_module_add(model, "head", nn_linear_m(16, 4, true)) ||
        nn_module_register(model, ps, "model"))
        return fail(ag_last_error());
    nn_module *first = nn_module_get(model, "features.0"); /* model.features[0] */
    /* end */
    for (size_t i = 0; i < nn_module_tensor_count(model); i++)
        printf("%s\n", nn_module_state_name(model, nn_module_tensor_at(model, i)));
    int rc = strcmp(nn_module_path(first), "model.features.0") ? fail("path") : 0;
    nn_module_free(model);
    nn_params_free(ps);
    return rc;
}

/* ---- train / eval / no_grad; a sub-module's parameters ---- */
static int snip_modes(ag_tape *t, ag_rng *rng) {
    nn_params *ps = nn_params_new();
    nn_module *net = nn_sequential(nn_linear_m(3, 4, true), nn_batch_norm1d_m(4), nn_relu_m());
    if (nn_module_register(net, ps, "") || nn_params_finalize(ps, 1)) return fail(ag_last_error());
    const ag_real xs[2 * 3] = {1, 2, 3, 4, 5, 6};
    nn_ctx c = {t, true, rng, NULL};
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 3), xs);
    /* doc block 5 */
    nn_module_eval(net);                        /* net.eval() */
    nn_module_train(net, true);                 /* net.train() */
    nn_module_eval(nn_module_get(net, "1"));    /* net[1].eval(): that BatchNorm frozen */
    bool was = ag_tape_set_recording(t, false); /* with torch.no_grad(): */
    ag_tensor *y = nn_module_forward(net, &c, x);
    ag_tape_set_recording(t, was);
    nn_eval_saved e = nn_eval_begin(&c); /* model.eval() and no_grad together, for a stretch */
    ag_tensor *z = nn_module_forward(net, &c, x);
    nn_eval_end(&c, e);
    /* doc block 6 */
    nn_module *bn = nn_module_get(net, "1");
    printf("%zu parameters, %zu tensors in the state_dict\n", nn_module_param_count(bn),
           nn_module_tensor_count(bn));
    for (size_t i = 0; i < nn_module_param_count(bn); i++) /* bn.named_parameters() */
        printf("%s\n", nn_module_param_at(bn, i)->name);   /* "1.weight", "1.bias" */
    nn_module_zero_grad(net);                              /* net.zero_grad() */
    /* end */
    int rc = y && z && !nn_module_training(bn) && nn_module_training(net) ? 0 : fail("modes");
    ag_tape_reset(t);
    nn_module_free(net);
    nn_params_free(ps);
    return rc;
}

/* ---- errors ---- */
static int snip_errors(ag_tape *t) {
    nn_params *ps = nn_params_new();
    const ag_real xs[4 * 2] = {0};
    nn_ctx c = {t, false, NULL, NULL};
    /* doc block 7 */
    nn_module *clf = nn_sequential(nn_linear_m(2, 7, true), nn_relu_m(), nn_linear_m(5, 3, true));
    if (nn_module_register(clf, ps, "classifier") || nn_params_finalize(ps, 1))
        return fail(ag_last_error());
    ag_tensor *y = nn_module_forward(clf, &c, ag_tensor_from(t, AG_SHAPE(4, 2), xs));
    if (!y) printf("%s\n", ag_last_error());
    /* classifier.2 (Linear): input [4, 7] does not fit: expected (..., 5) */
    /* end */
    nn_module_free(clf);
    nn_params_free(ps);
    ag_tape_reset(t);
    return y ? fail("no error") : 0;
}

/* ---- a module of one's own ---- */
/* doc block 8 */
typedef struct scale_state {
    ag_tensor *gain; /* (dim), in the store */
    int dim;
} scale_state;

static int scale_init(nn_module *m, nn_params *ps, const char *prefix) {
    scale_state *s = (scale_state *)nn_module_state(m);
    s->gain = nn_params_add(ps, prefix, "gain", AG_SHAPE(s->dim), nn_init_ones());
    return s->gain ? 0 : -1;
}

/* x (..., dim) -> x * gain */
static ag_tensor *scale_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const scale_state *s = (const scale_state *)nn_module_state(m);
    if (x->shape[x->ndim - 1] != s->dim)
        return nn_module_fail(m, c, "last dim %d, expected %d", x->shape[x->ndim - 1], s->dim);
    return ag_mul(c->tape, x, s->gain);
}

static const nn_module_def scale_def = {"Scale", scale_init, scale_forward, NULL};

static nn_module *scale_m(int dim) {
    nn_module *m = nn_module_new(&scale_def, sizeof(scale_state));
    if (m) ((scale_state *)nn_module_state(m))->dim = dim;
    return m;
}

/* y = x + body(x): a container of one's own */
static ag_tensor *residual_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    return ag_add(c->tape, x, nn_module_forward(nn_module_child(m, 0), c, x));
}

static const nn_module_def residual_def = {"Residual", NULL, residual_forward, NULL};

static nn_module *residual_m(nn_module *body) {
    nn_module *m = nn_module_new(&residual_def, 0);
    if (nn_module_add(m, "body", body)) { /* body is freed on failure */
        nn_module_free(m);
        return NULL;
    }
    return m;
}
/* end */

static int snip_custom(ag_tape *t) {
    nn_params *ps = nn_params_new();
    /* doc block 9 */
    nn_module *block =
        nn_sequential(residual_m(nn_sequential(nn_linear_m(4, 4, true), nn_tanh_m(), scale_m(4))),
                      nn_layer_norm_m(AG_SHAPE(4)));
    /* names: 0.body.0.weight, 0.body.0.bias, 0.body.2.gain, 1.weight, 1.bias */
    /* end */
    if (nn_module_register(block, ps, "") || nn_params_finalize(ps, 3))
        return fail(ag_last_error());
    const ag_real xs[2 * 4] = {1, 2, 3, 4, -1, 0, 1, 0.5f};
    nn_ctx c = {t, true, NULL, NULL};
    ag_tensor *y = nn_module_forward(block, &c, ag_tensor_from(t, AG_SHAPE(2, 4), xs));
    int rc = y && nn_params_find(ps, "0.body.2.gain") && nn_params_find(ps, "1.bias")
                 ? 0
                 : fail("custom module");
    nn_module_free(block);
    nn_params_free(ps);
    ag_tape_reset(t);
    return rc;
}

/* ---- the short way: nn_ctx_new, optim_train_step, predict / accuracy ---- */
static int snip_short(void) {
    const ag_real xs[4 * 2] = {0.5f, -1, 1, 0, -0.25f, 0.75f, 0, 1};
    const int32_t labels[4] = {0, 2, 1, 1};
    /* doc block */
    nn_module *net = nn_sequential(nn_linear_m(2, 16, true), nn_tanh_m(), nn_linear_m(16, 3, true));
    optim *opt = optim_new(nn_module_init(net, 7), optim_adam(0.05)); /* one check for both */
    nn_ctx *c = nn_ctx_new(7); /* owns a tape and a random stream; training mode */
    if (!opt || !c) return fail(ag_last_error());
    for (int step = 0; step < 60; step++) {
        ag_tensor *x = ag_tensor_from(c->tape, AG_SHAPE(4, 2), xs);
        double loss = optim_train_step(opt, net, c, x, labels, optim_loss_cross_entropy);
        if (isnan(loss)) return fail(ag_last_error()); /* nothing was updated */
    }
    int32_t pred[4]; /* net(x).argmax(-1) in eval mode, nothing recorded */
    if (nn_module_predict(net, c, AG_SHAPE(4, 2), xs, pred, 4)) return fail(ag_last_error());
    double acc = nn_module_accuracy(net, c, AG_SHAPE(4, 2), xs, labels, NULL);
    nn_ctx_free(c); /* and its tape */
    optim_free(opt);
    nn_module_free(net); /* and its store */
    /* end */
    printf("the short way: accuracy %.2f, predictions %d %d %d %d\n", acc, (int)pred[0],
           (int)pred[1], (int)pred[2], (int)pred[3]);
    return acc == 1.0 && memcmp(pred, labels, sizeof pred) == 0 ? 0 : fail("short way: accuracy");
}

static int snippets_run(void) {
    ag_tape *t = ag_tape_new();
    ag_rng rng;
    ag_rng_seed(&rng, 1);
    int rc = snip_quickstart(t, &rng) || snip_nesting() || snip_modes(t, &rng) || snip_errors(t) ||
             snip_custom(t) || snip_short();
    ag_tape_free(t);
    fflush(stdout);
    return rc;
}

#endif
