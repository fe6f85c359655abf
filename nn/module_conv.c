/* module_conv.c -- the convolution and pooling modules (nn/module.h): Conv2d over nn_conv2d,
 * MaxPool2d / AvgPool2d over nn_pool2d, each with a check of its input naming the module. */
#include "nn/internal.h"

/* "[4, 7]" of x */
#define SHAPE(x, buf) ag_shape_str((x), (buf), sizeof(buf))

/* ---- Conv2d ---- */

typedef struct conv2d_state {
    nn_conv2d l;
    int in, out, kh, kw;
    nn_conv2d_opts opts;
} conv2d_state;

static int conv2d_init(nn_module *m, nn_params *ps, const char *prefix) {
    conv2d_state *s = nn_module_state(m);
    return nn_conv2d_init(&s->l, ps, prefix, s->in, s->out, s->kh, s->kw, &s->opts);
}

/* x (N, in, H, W) -> (N, out, OH, OW) (nn/conv.h) */
static ag_tensor *conv2d_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const conv2d_state *s = nn_module_state(m);
    char sx[64];
    if (x->ndim != 4 || x->shape[1] != s->in)
        return nn_module_fail(m, c, "input %s does not fit: expected (N, %d, H, W)", SHAPE(x, sx),
                              s->in);
    return nn_conv2d_forward(&s->l, c, x);
}

static const nn_module_def conv2d_def = {"Conv2d", conv2d_init, conv2d_forward, NULL};

nn_module *nn_conv2d_m_opts(int in, int out, int kh, int kw, const nn_conv2d_opts *opts) {
    const nn_conv2d_opts o = opts ? *opts : (nn_conv2d_opts){{0, 0}, {0, 0}, {0, 0}, 0, false};
    bool ok = in > 0 && out > 0 && kh > 0 && kw > 0 && o.groups >= 0;
    for (int d = 0; d < 2; d++)
        ok = ok && o.stride[d] >= 0 && o.padding[d] >= 0 && o.dilation[d] >= 0;
    if (!ok) {
        ag_error("nn_conv2d_m: in = %d, out = %d, kernel %d x %d, stride (%d, %d), padding (%d, "
                 "%d), dilation (%d, %d), groups %d; expected sizes > 0 and options >= 0",
                 in, out, kh, kw, o.stride[0], o.stride[1], o.padding[0], o.padding[1],
                 o.dilation[0], o.dilation[1], o.groups);
        return NULL;
    }
    nn_module *m = nn_module_new(&conv2d_def, sizeof(conv2d_state));
    if (m)
        *(conv2d_state *)nn_module_state(m) =
            (conv2d_state){.in = in, .out = out, .kh = kh, .kw = kw, .opts = o};
    return m;
}

nn_module *nn_conv2d_m(int in, int out, int kernel, int stride, int padding) {
    const nn_conv2d_opts o = {{stride, stride}, {padding, padding}, {1, 1}, 1, false};
    return nn_conv2d_m_opts(in, out, kernel, kernel, &o);
}

/* ---- MaxPool2d, AvgPool2d ---- */

typedef struct pool_state {
    nn_pool_kind kind;
    int kernel, stride, padding;
} pool_state;

/* x (N, C, H, W) -> (N, C, OH, OW) (nn/pool.h) */
static ag_tensor *pool_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const pool_state *s = nn_module_state(m);
    char sx[64];
    if (x->ndim != 4)
        return nn_module_fail(m, c, "input %s does not fit: expected (N, C, H, W)", SHAPE(x, sx));
    const int k[2] = {s->kernel, s->kernel}, st[2] = {s->stride, s->stride},
              p[2] = {s->padding, s->padding};
    return nn_pool2d(c, x, s->kind, k, st, p);
}

static const nn_module_def max_pool_def = {"MaxPool2d", NULL, pool_forward, NULL};
static const nn_module_def avg_pool_def = {"AvgPool2d", NULL, pool_forward, NULL};

static nn_module *pool_module(nn_pool_kind kind, int kernel, int stride, int padding) {
    const char *name = kind == NN_POOL_MAX ? "nn_max_pool2d_m" : "nn_avg_pool2d_m";
    if (kernel < 1 || stride < 0 || padding < 0 || padding > kernel / 2) {
        ag_error("%s: kernel %d, stride %d, padding %d; expected kernel >= 1, stride >= 0 (0: "
                 "the kernel), 0 <= padding <= kernel / 2",
                 name, kernel, stride, padding);
        return NULL;
    }
    nn_module *m =
        nn_module_new(kind == NN_POOL_MAX ? &max_pool_def : &avg_pool_def, sizeof(pool_state));
    if (m) *(pool_state *)nn_module_state(m) = (pool_state){kind, kernel, stride, padding};
    return m;
}

nn_module *nn_max_pool2d_m(int kernel, int stride, int padding) {
    return pool_module(NN_POOL_MAX, kernel, stride, padding);
}

nn_module *nn_avg_pool2d_m(int kernel, int stride, int padding) {
    return pool_module(NN_POOL_AVG, kernel, stride, padding);
}
