// test_headers.cpp -- tapegrad from C++: every public header included (the generated
// all_public_headers.h: <tapegrad/autograd/ag.h>, <tapegrad/nn/nn.h> ...), then a small model
// trained through the C API, so that the extern "C" guards (linkage) and AG_SHAPE's C++
// spelling (a temporary std::initializer_list) are both exercised. Exit status 0 on success.
//
// The zoo's headers are included (they must compile as C++); their functions are not called
// until they carry extern "C" guards of their own.
#include "all_public_headers.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

static int failures = 0;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

// y = x W^T + b through nn_linear, a mean squared error, a few Adam steps: the loss must fall.
static void train_linear() {
    nn_params *ps = nn_params_new();
    nn_linear fc;
    CHECK(nn_linear_init(&fc, ps, "fc", 3, 2, true) == 0);
    CHECK(nn_params_finalize(ps, 7) == 0);
    optim *opt = optim_new(ps, optim_adam(0.05));
    CHECK(opt != nullptr);
    ag_tape *t = ag_tape_new();
    const ag_real xs[4 * 3] = {1, 2, 3, 0, 1, 0, -1, 2, 1, 0.5, 0.5, -2};
    const ag_real ys[4 * 2] = {1, 0, 0, 1, 1, 1, 0, 0};
    double first = 0, last = 0;
    for (int step = 0; step < 50; step++) {
        nn_ctx c = {t, true, nullptr, nullptr};
        ag_tensor *x = ag_tensor_from(t, AG_SHAPE(4, 3), xs);
        ag_tensor *y = ag_tensor_from(t, AG_SHAPE(4, 2), ys);
        ag_tensor *loss = ag_mse_loss(t, nn_linear_forward(&fc, &c, x), y, AG_REDUCE_MEAN);
        CHECK(loss != nullptr);
        if (!loss) break;
        double l = ag_get(loss, 0);
        if (step == 0) first = l;
        last = l;
        CHECK(ag_backward(t, loss) == 0);
        CHECK(optim_step(opt) == 0);
        ag_tape_reset(t);
    }
    CHECK(last < 0.5 * first);
    std::printf("nn_linear + Adam from C++: loss %.4f -> %.4f\n", first, last);
    ag_tape_free(t);
    optim_free(opt);
    nn_params_free(ps);
}

// AG_SHAPE inside a call (the initializer_list lives to the end of the full expression), a
// reshape with -1, and the values read back.
static void shapes() {
    ag_tape *t = ag_tape_new();
    std::vector<ag_real> v(24);
    for (size_t i = 0; i < v.size(); i++) v[i] = (ag_real)i;
    ag_tensor *x = ag_tensor_from(t, AG_SHAPE(2, 3, 4), v.data());
    CHECK(x && x->ndim == 3 && x->shape[0] == 2 && x->shape[1] == 3 && x->shape[2] == 4);
    ag_tensor *r = ag_reshape(t, x, AG_SHAPE(4, -1));
    CHECK(r && r->ndim == 2 && r->shape[1] == 6);
    ag_tensor *s = ag_sum(t, r, AG_ALL, false);
    CHECK(s && ag_get(s, 0) == 276);
    ag_tensor *w = ag_leaf_new(AG_SHAPE(3), true);
    CHECK(w && w->numel == 3);
    ag_leaf_free(w);
    ag_tape_free(t);
}

// The datasets library: DS_ARRAY's C++ spelling and the loader.
static void loader() {
    float feats[5 * 2] = {0};
    int32_t labels[5] = {0, 1, 2, 3, 4};
    ds_array arrays[2] = {DS_ARRAY(feats, 2), DS_ARRAY(labels, 1)};
    ds_loader_opts o = {2, true, false, 3};
    ds_loader *it = nullptr;
    CHECK(ds_loader_new(5, 2, arrays, &o, &it) == 0);
    CHECK(it && ds_loader_count(it) == 3);
    int64_t rows = 0;
    ds_minibatch b;
    while (it && ds_loader_next(it, &b)) rows += b.size;
    CHECK(rows == 5);
    ds_loader_free(it);
    // the error contract: -1 and the message in the one store
    CHECK(ds_loader_new(0, 2, arrays, &o, &it) == -1 && it == nullptr);
    CHECK(std::strstr(ag_last_error(), "n_rows = 0") != nullptr);
    TG_ASSERT(rows == 5); // an internal invariant's check compiles from C++ too
}

int main() {
    ag_set_error_handler(nullptr, nullptr);
    shapes();
    train_linear();
    loader();
    if (failures) std::fprintf(stderr, "%d checks failed\n", failures);
    else std::printf("every public header compiled as C++; ag, nn, optim, datasets called\n");
    return failures ? 1 : 0;
}
