// test_module.cpp -- the module interface (nn/module.h) from C++: the snippets of docs/nn.md's
// "Modules and Sequential" (tests/nn/module_snippets.h, also run as C by test_nn_module)
// compiled as C++11 and run -- nn_sequential's C++ spelling (a std::initializer_list), the
// defs of a module of one's own, AG_SHAPE in a constructor's call -- then a Sequential trained
// a few steps from C++. Exit status 0 on success.
#include "tests/nn/module_snippets.h"

#include <cmath>
#include <cstdio>

int main() {
    ag_set_error_handler(nullptr, nullptr);
    int failures = snippets_run() ? 1 : 0;

    nn_params *ps = nn_params_new();
    nn_module *net = nn_sequential(nn_linear_m(3, 8, true), nn_tanh_m(), nn_linear_m(8, 1, true));
    if (!net || nn_module_register(net, ps, "") || nn_params_finalize(ps, 7)) {
        std::fprintf(stderr, "test_cxx_module: %s\n", ag_last_error());
        return 1;
    }
    optim *opt = optim_new(ps, optim_adam(0.05));
    ag_tape *t = ag_tape_new();
    const ag_real xs[4 * 3] = {1, 2, 3, 0, 1, 0, -1, 2, 1, 0.5f, 0.5f, -2};
    const ag_real ys[4] = {1, 0, -1, 0.5f};
    double first = 0, last = 0;
    for (int step = 0; step < 40; step++) {
        nn_ctx c = {t, true, nullptr, nullptr};
        ag_tensor *y = nn_module_forward(net, &c, ag_tensor_from(t, AG_SHAPE(4, 3), xs));
        ag_tensor *loss = ag_mse_loss(t, y, ag_tensor_from(t, AG_SHAPE(4, 1), ys), AG_REDUCE_MEAN);
        if (!loss || ag_backward(t, loss) || optim_step(opt)) {
            failures++;
            break;
        }
        (step == 0 ? first : last) = ag_get(loss, 0);
        ag_tape_reset(t);
    }
    if (!(last < 0.5 * first)) failures++;
    std::printf("a Sequential from C++: loss %.4f -> %.4f\n", first, last);
    ag_tape_free(t);
    optim_free(opt);
    nn_module_free(net);
    nn_params_free(ps);

    // The shorter API from C++: a CNN module tree owning its store, a context owning its tape,
    // optim_train_step, nn_module_accuracy on a C array (the class is the brighter half).
    nn_module *cnn =
        nn_sequential(nn_conv2d_m(1, 4, 3, 1, 1), nn_relu_m(), nn_max_pool2d_m(2, 0, 0),
                      nn_avg_pool2d_m(2, 0, 0), nn_flatten_m(1, -1), nn_linear_m(4, 2, true));
    nn_ctx *c = nn_ctx_new(3);
    optim *adam = optim_new(nn_module_init(cnn, 3), optim_adam(0.05));
    if (!c || !adam) {
        std::fprintf(stderr, "test_cxx_module: %s\n", ag_last_error());
        return 1;
    }
    static ag_real img[8 * 16];
    int32_t cls[8];
    for (int n = 0; n < 8; n++) {
        cls[n] = n % 2;
        for (int i = 0; i < 16; i++) img[n * 16 + i] = ((i < 8) == (cls[n] == 0)) ? 1.0f : 0.0f;
    }
    double loss = 0;
    for (int step = 0; step < 30 && !std::isnan(loss); step++)
        loss = optim_train_step(adam, cnn, c, ag_tensor_from(c->tape, AG_SHAPE(8, 1, 4, 4), img),
                                cls, optim_loss_cross_entropy);
    const double acc = nn_module_accuracy(cnn, c, AG_SHAPE(8, 1, 4, 4), img, cls, nullptr);
    if (std::isnan(loss) || acc != 1.0) failures++;
    std::printf("a CNN from C++: loss %.4f, accuracy %.2f\n", loss, acc);
    nn_ctx_free(c);
    optim_free(adam);
    nn_module_free(cnn);
    return failures ? 1 : 0;
}
