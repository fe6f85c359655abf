/* pytorch_snippets.h -- the code of docs/pytorch.md ("From PyTorch to tapegrad"), compiled as C
 * (tests/docs/test_pytorch_doc.c) and as C++11 (tests/cxx/test_pytorch_doc.cpp) and run by both.
 * Every ```c block of the page appears here line for line (leading spaces and blank lines
 * aside: ctest docs_pytorch_snippets, tests/nn/check_doc_snippets.sh), inside functions that
 * give it its variables: small tensors, a few steps. pytorch_snippets_run() returns 0 when
 * every snippet ran and did what the page says. */
#ifndef TG_TEST_PYTORCH_SNIPPETS_H
#define TG_TEST_PYTORCH_SNIPPETS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/ag_op.h"
#include "datasets/batches.h"
#include "nn/nn.h"
#include "optim/optim.h"

static int pt_fail(const char *where) {
    fprintf(stderr, "pytorch.md snippet %s: %s\n", where, ag_last_error());
    return 1;
}
#define fail(what) pt_fail(what)

/* ---- a module; parameters; save and load; eval; zero_grad ---- */
static int pt_module(const char *path) {
    ag_tape *t = ag_tape_new();
    ag_rng rng;
    ag_rng_seed(&rng, 1);
    const ag_real xs[4 * 2] = {0.5f, -1, 1, 0, -0.25f, 0.75f, 0, 1};
    const int32_t labels[4] = {0, 2, 1, 1};
    /* section "A module" */
    nn_module *net = nn_sequential(nn_linear_m(2, 16, true), nn_relu_m(), nn_linear_m(16, 3, true));
    nn_params *ps = nn_module_init(net, 42); /* register + initialise; net owns the store */
    if (!ps) return fail(ag_last_error());
    nn_ctx c = {t, true, &rng, NULL}; /* tape, training, rng (dropout), packs */
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(4, 2), xs);
    ag_tensor *logits = nn_module_forward(net, &c, x); /* (4, 2) -> (4, 3) */
    /* section "Parameters" */
    for (size_t i = 0; i < nn_module_param_count(net); i++) { /* named_parameters() */
        ag_tensor *p = nn_module_param_at(net, i);
        char shape[64];
        printf("%s %s %td\n", p->name, ag_shape_str(p, shape, sizeof shape), p->numel);
    }
    ag_tensor *w = nn_params_find(ps, "2.weight"); /* state_dict()["2.weight"] */
    printf("%s: %d x %d, first value %g\n", w->name, w->shape[0], w->shape[1], ag_get(w, 0));
    /* section "zero_grad" */
    ag_tensor *loss = ag_cross_entropy(t, logits, labels, NULL, 0, AG_IGNORE_INDEX, AG_REDUCE_MEAN);
    if (!loss || ag_backward(t, loss)) return fail("backward"); /* loss.backward() */
    printf("d loss / d 2.bias[0] = %g\n", nn_params_find(ps, "2.bias")->grad[0]);
    nn_module_zero_grad(net); /* net.zero_grad() (optim_step also zeroes them) */
    ag_tape_reset(t);         /* frees the step's graph: every step ends with it */
    /* section "Saving and loading" */
    if (nn_module_save(net, path)) return fail(ag_last_error()); /* save_file(net.state_dict()) */
    nn_module *net2 =
        nn_sequential(nn_linear_m(2, 16, true), nn_relu_m(), nn_linear_m(16, 3, true));
    if (!nn_module_init(net2, 0) || nn_module_load(net2, path)) /* net2.load_state_dict(...) */
        return fail(ag_last_error());
    nn_params *ps2 = nn_module_params(net2);
    /* end */
    int rc = ag_get(nn_params_find(ps2, "2.weight"), 0) == ag_get(w, 0) ? 0 : fail("reload");
    /* section "no_grad" */
    nn_module_eval(net); /* net.eval(): dropout off, BatchNorm on its statistics */
    bool was = ag_tape_set_recording(t, false); /* with torch.no_grad(): */
    ag_tensor *y = nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(4, 2), xs));
    ag_tape_set_recording(t, was);
    nn_module_train(net, true); /* net.train() */

    nn_eval_saved e = nn_eval_begin(&c); /* both at once for the whole forward, any layers */
    ag_tensor *y2 = nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(4, 2), xs));
    nn_eval_end(&c, e);
    /* end */
    if (!y || !y2 || y->requires_grad || ag_get(y, 5) != ag_get(y2, 5)) rc = fail("eval");
    ag_tape_reset(t);
    nn_module_free(net); /* and its store */
    nn_module_free(net2);
    ag_tape_free(t);
    return rc;
}

/* ---- the DataLoader, an optimizer, groups, freezing, schedules ---- */
/* section "Schedulers" */
static double halve_after_4(int64_t done, void *user) {
    (void)user;
    return done < 4 ? 1.0 : 0.5; /* lambda epoch: 1.0 if epoch < 4 else 0.5 */
}
/* end */

static int pt_training(const char *path) {
    enum { N = 10 };
    ag_real xs[N * 3];
    int32_t ys[N];
    for (int i = 0; i < N * 3; i++) xs[i] = (ag_real)((i * 7) % 5 - 2) / 2;
    for (int i = 0; i < N; i++) ys[i] = i % 2;
    ag_tape *t = ag_tape_new();
    nn_params *ps = nn_params_new();
    nn_module *net = nn_sequential(nn_linear_m(3, 8, true), nn_tanh_m(), nn_linear_m(8, 2, true));
    if (nn_module_register(net, ps, "") || nn_params_finalize(ps, 3)) return fail("register");
    nn_ctx c = {t, true, NULL, NULL};
    /* section "Optimizers" */
    optim_cfg cfg = optim_adamw(1e-2);       /* AdamW(params, lr=1e-2), weight_decay 0.01 */
    cfg.decay_filter = optim_decay_matrices; /* no weight decay on 1-D tensors (biases, norms) */
    cfg.clip_norm = 1.0;                     /* clip_grad_norm_(params, 1.0) before each step */
    cfg.schedule = optim_lr_lambda(halve_after_4, NULL); /* LambdaLR(opt, lr_lambda) */
    optim *opt = optim_new(ps, cfg);
    optim_group g = optim_group_like(opt); /* {"params": net[2].parameters(), "lr": 1e-3} */
    g.params = "2";
    g.lr = 1e-3;
    if (!opt || optim_add_group(opt, g) < 0) return fail(ag_last_error());
    /* section "Freezing" */
    nn_module *first = nn_module_get(net, "0"); /* net[0] */
    for (size_t i = 0; i < nn_module_param_count(first); i++)
        nn_module_param_at(first, i)->requires_grad = false; /* p.requires_grad_(False) */
    /* section "The DataLoader" */
    ds_array arrays[2] = {DS_ARRAY(xs, 3), DS_ARRAY(ys, 1)}; /* TensorDataset(xs, ys) */
    ds_loader_opts lo = {4, true, false, 7}; /* batch_size, shuffle, drop_last, seed */
    ds_loader *loader;
    if (ds_loader_new(N, 2, arrays, &lo, &loader)) return fail(ag_last_error());
    for (int epoch = 0; epoch < 3; epoch++) {
        ds_loader_epoch(loader, epoch); /* that epoch's shuffle */
        ds_minibatch b;
        while (ds_loader_next(loader, &b)) { /* for xb, yb in loader: */
            ag_tensor *xb = ag_tensor_from(t, AG_SHAPE((int)b.size, 3), (const ag_real *)b.data[0]);
            ag_tensor *out = nn_module_forward(net, &c, xb);
            ag_tensor *loss = ag_cross_entropy(t, out, (const int32_t *)b.data[1], NULL, 0,
                                               AG_IGNORE_INDEX, AG_REDUCE_MEAN);
            if (!loss || ag_backward(t, loss) || optim_step(opt)) return fail(ag_last_error());
            ag_tape_reset(t);
        }
        printf("epoch %d: lr %g (group 1: %g)\n", epoch, optim_lr(opt), optim_group_lr(opt, 1));
    }
    /* end */
    int rc = optim_steps(opt) == 9 && optim_lr(opt) == 0.5e-2 ? 0 : fail("steps or lr");
    /* section "Saving and loading" */
    nn_ckpt *ck = nn_ckpt_new(); /* torch.save({"model": ..., "optimizer": opt.state_dict()}) */
    if (!ck || nn_ckpt_add_params(ck, ps) || optim_save_state(opt, ck) ||
        nn_ckpt_set_meta_int(ck, "epoch", 3) || nn_ckpt_save(ck, path))
        return fail(ag_last_error());
    nn_ckpt_free(ck);
    /* ... and back, into a model and an optimizer built (with its groups) as before: */
    if (nn_ckpt_load(&ck, path) || nn_ckpt_load_params(ck, ps, 0) || optim_load_state(opt, ck))
        return fail(ag_last_error());
    nn_ckpt_free(ck);
    /* end */
    ds_loader_free(loader);
    optim_free(opt);
    nn_module_free(net);
    nn_params_free(ps);
    ag_tape_free(t);
    return rc;
}

/* ---- a custom autograd.Function and its gradient check ---- */
/* section "A custom autograd.Function" */
/* y = x^2 elementwise; dy/dx = 2x. Backward: ADD into the input's gradient. */
static void square_backward(ag_node *n) {
    ag_tensor *x = n->in[0], *y = n->out;
    if (!x->requires_grad) return;
    for (ptrdiff_t i = 0; i < y->numel; i++) x->grad[i] += 2 * x->data[i] * y->grad[i];
}
static const ag_op SQUARE = {"square", square_backward};

static ag_tensor *my_square(ag_tape *t, ag_tensor *x) {
    if (!ag_op_check(t, "square", 1, &x)) return NULL;
    x = ag_op_contig(t, x); /* a recorded copy of a strided view */
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    for (ptrdiff_t i = 0; i < y->numel; i++) y->data[i] = x->data[i] * x->data[i];
    ag_op_record(t, &SQUARE, y, 1, &x, 0); /* ctx.save_for_backward: n->in, n->out, n->saved */
    return y;
}
/* section "The gradient check" */
static ag_tensor *f_square(ag_tape *t, ag_tensor *const *in, void *user) {
    (void)user;
    return my_square(t, ag_transpose(t, in[0], 0, 1)); /* a view in, too */
}
/* end */

static int pt_custom(void) {
    /* section "The gradient check" */
    ag_tensor *x = ag_leaf_new(AG_SHAPE(3, 4), true); /* torch.randn(3, 4, requires_grad=True) */
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)(i % 5) / 4 - 0.5f;
    ag_gradcheck_result r = ag_gradcheck("square", f_square, 1, &x, NULL, NULL);
    printf("%s: %s, %d elements, max error %.2g\n", r.name, r.ok ? "ok" : r.msg, r.checked,
           r.max_abs_err);
    ag_leaf_free(x);
    /* end */
    return r.ok && r.checked == 12 ? 0 : fail("gradcheck");
}

/* ---- losses, conv and pooling, an LSTM ---- */
static int pt_layers(void) {
    ag_tape *t = ag_tape_new();
    nn_params *ps = nn_params_new();
    ag_rng rng;
    ag_rng_seed(&rng, 2);
    nn_ctx c = {t, true, &rng, NULL};
    int rc = 0;
    {
        const ag_real ps4[4] = {0.5f, -1, 2, 0}, ts4[4] = {1, -1, 0, 0};
        const ag_real lg[2 * 3] = {1, 2, 3, 0, 0, 0};
        const int32_t lab[2] = {2, 0};
        /* section "Losses" */
        ag_tensor *pred = ag_tensor_from(t, AG_SHAPE(4), ps4);
        ag_tensor *target = ag_tensor_from(t, AG_SHAPE(4), ts4);
        ag_tensor *l1 = ag_l1_loss(t, pred, target, AG_REDUCE_MEAN);          /* F.l1_loss */
        ag_tensor *mse = ag_mse_loss(t, pred, target, AG_REDUCE_SUM);         /* reduction="sum" */
        ag_tensor *hub = ag_huber_loss(t, pred, target, 1.0, AG_REDUCE_NONE); /* delta=1.0 */
        ag_tensor *ce = ag_cross_entropy(t, ag_tensor_from(t, AG_SHAPE(2, 3), lg), lab, NULL, 0.1,
                                         AG_IGNORE_INDEX, AG_REDUCE_MEAN); /* label_smoothing=0.1 */
        /* end */
        if (!l1 || !mse || !hub || !ce || ag_get(l1, 0) != 0.625f || ag_get(mse, 0) != 4.25f ||
            hub->ndim != 1)
            rc = fail("losses");
        printf("l1 %g mse %g ce %g\n", ag_get(l1, 0), ag_get(mse, 0), ag_get(ce, 0));
    }
    {
        ag_real img[2 * 1 * 6 * 6];
        for (int i = 0; i < 72; i++) img[i] = (ag_real)(i % 7) - 3;
        /* section "Convolutions and pooling" */
        /* nn.Conv2d(1, 4, 3, padding=1): stride, padding, dilation (h, w), groups, no_bias */
        nn_conv2d conv;
        nn_conv2d_opts co = {{1, 1}, {1, 1}, {1, 1}, 1, false};
        if (nn_conv2d_init(&conv, ps, "conv", 1, 4, 3, 3, &co)) return fail(ag_last_error());
        /* ... nn_params_finalize(ps, seed) after the last registration ... */
        /* end */
        nn_lstm lstm;
        nn_rnn_opts o = {true, true}; /* batch_first, bidirectional */
        if (nn_lstm_init_opts(&lstm, ps, "lstm", 3, 5, 2, 0.0, &o) || nn_params_finalize(ps, 9))
            return fail(ag_last_error());
        /* section "Convolutions and pooling" */
        ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 1, 6, 6), img); /* (N, C, H, W) */
        ag_tensor *h = nn_max_pool2d(&c, nn_relu(&c, nn_conv2d_forward(&conv, &c, x)), 2, 0, 0);
        ag_tensor *a = nn_avg_pool2d(&c, h, 3, 1, 1); /* kernel 3, stride 1, padding 1 */
        /* h, a: (2, 4, 3, 3) */
        /* end */
        if (!a || a->shape[1] != 4 || a->shape[2] != 3 || a->shape[3] != 3) rc = fail("conv");
        ag_real seq[2 * 4 * 3];
        for (int i = 0; i < 24; i++) seq[i] = (ag_real)(i % 5) / 5;
        /* section "LSTM" */
        ag_tensor *xs = ag_tensor_from(t, AG_SHAPE(2, 4, 3), seq); /* (B, T, F): batch_first */
        int32_t len[2] = {4, 2}; /* pack_padded_sequence's lengths */
        ag_tensor *hn, *cn;
        ag_tensor *out = nn_lstm_forward_lengths(&lstm, &c, xs, len, NULL, NULL, &hn, &cn);
        /* out (2, 4, 10) = [forward, reverse], zero at t >= len[b]; hn, cn (2 layers x 2, 2, 5) */
        /* end */
        if (!out || out->shape[2] != 10 || hn->shape[0] != 4 || ag_get(out, 1 * 40 + 3 * 10) != 0)
            rc = fail("lstm");
    }
    nn_params_free(ps);
    ag_tape_free(t);
    return rc;
}
/* ---- one call per step: a CNN of modules, optim_train_step, nn_module_accuracy ---- */
static int pt_one_call(void) {
    ag_real imgs[8 * 36]; /* class 0: the top half bright; class 1: the bottom half */
    int32_t labels[8];
    for (int n = 0; n < 8; n++) {
        labels[n] = n % 2;
        for (int i = 0; i < 36; i++)
            imgs[n * 36 + i] = ((i < 18) == (labels[n] == 0)) ? 1.0f : (ag_real)(n % 3) / 10;
    }
    /* section "One call per step" */
    nn_module *net =
        nn_sequential(nn_conv2d_m(1, 4, 3, 1, 1), nn_relu_m(), nn_max_pool2d_m(2, 0, 0),
                      nn_flatten_m(1, -1), nn_linear_m(4 * 3 * 3, 2, true));
    optim *opt = optim_new(nn_module_init(net, 5), optim_adam(0.02)); /* checks the init too */
    nn_ctx *c = nn_ctx_new(5); /* a tape and a random stream of its own, training mode */
    if (!opt || !c) return fail(ag_last_error());
    for (int step = 0; step < 30; step++) {
        ag_tensor *x = ag_tensor_from(c->tape, AG_SHAPE(8, 1, 6, 6), imgs);
        double loss = optim_train_step(opt, net, c, x, labels, optim_loss_cross_entropy);
        if (isnan(loss)) return fail(ag_last_error()); /* nothing updated; the tape reset */
    }
    double acc = nn_module_accuracy(net, c, AG_SHAPE(8, 1, 6, 6), imgs, labels, NULL);
    nn_ctx_free(c); /* and its tape */
    /* end */
    printf("one call per step: accuracy %.2f after %lld steps\n", acc, (long long)optim_steps(opt));
    optim_free(opt);
    nn_module_free(net);
    return acc == 1.0 ? 0 : fail("one call per step: accuracy");
}
#undef fail

static int pytorch_snippets_run(const char *path) {
    int rc = pt_module(path) || pt_training(path) || pt_custom() || pt_layers() || pt_one_call();
    fflush(stdout);
    return rc;
}

#endif
