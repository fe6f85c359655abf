// test_module.cpp -- the module interface (nn/module.h) from C++: the snippets of docs/nn.md's
// "Modules and Sequential" (tests/nn/module_snippets.h, also run as C by test_nn_module)
// compiled as C++11 and run -- nn_sequential's C++ spelling (a std::initializer_list), the
// defs of a module of one's own, AG_SHAPE in a constructor's call -- then a Sequential trained
// a few steps from C++. Exit status 0 on success.
#include "tests/nn/module_snippets.h"

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
    return failures ? 1 : 0;
}
