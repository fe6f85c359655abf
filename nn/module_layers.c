/* module_layers.c -- the built-in modules (nn/module.h): each a def over the plain layer of
 * nn/ it wraps, with a check of its input that names the module's path. */
#include <math.h>
#include <string.h>

#include "nn/internal.h"

/* "[4, 7]" of x */
#define SHAPE(x, buf) ag_shape_str((x), (buf), sizeof(buf))

/* ---- Linear ---- */

typedef struct linear_state {
    nn_linear l;
    int in, out;
    bool bias;
} linear_state;

static int linear_init(nn_module *m, nn_params *ps, const char *prefix) {
    linear_state *s = nn_module_state(m);
    return nn_linear_init(&s->l, ps, prefix, s->in, s->out, s->bias);
}

/* x (..., in) -> x W^T + b (..., out) */
static ag_tensor *linear_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const linear_state *s = nn_module_state(m);
    char sx[64];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != s->in)
        return nn_module_fail(m, c, "input %s does not fit: expected (..., %d)", SHAPE(x, sx),
                              s->in);
    return nn_linear_forward(&s->l, c, x);
}

static const nn_module_def linear_def = {"Linear", linear_init, linear_forward, NULL};

nn_module *nn_linear_m(int in, int out, bool bias) {
    if (in <= 0 || out <= 0) {
        ag_error("nn_linear_m: in = %d, out = %d, expected > 0", in, out);
        return NULL;
    }
    nn_module *m = nn_module_new(&linear_def, sizeof(linear_state));
    if (m) *(linear_state *)nn_module_state(m) = (linear_state){.in = in, .out = out, .bias = bias};
    return m;
}

/* ---- Embedding ---- */

typedef struct embedding_state {
    nn_embedding e;
    int num, dim;
} embedding_state;

static int embedding_init(nn_module *m, nn_params *ps, const char *prefix) {
    embedding_state *s = nn_module_state(m);
    return nn_embedding_init(&s->e, ps, prefix, s->num, s->dim);
}

/* x (...) of whole numbers in [0, num) -> weight rows (..., dim) */
static ag_tensor *embedding_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const embedding_state *s = nn_module_state(m);
    int32_t *ids = ag_tape_alloc(c->tape, (size_t)(x->numel ? x->numel : 1) * sizeof *ids);
    if (!ids) return NULL;
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        ag_real v = ag_get(x, i);
        if (!(v >= 0 && v < s->num && v == floor(v)))
            return nn_module_fail(m, c, "id %g at position %td is not a whole number in [0, %d)",
                                  (double)v, i, s->num);
        ids[i] = (int32_t)v;
    }
    return nn_embedding_forward(&s->e, c, ids, x->ndim, x->shape);
}

static const nn_module_def embedding_def = {"Embedding", embedding_init, embedding_forward, NULL};

nn_module *nn_embedding_m(int num, int dim) {
    if (num <= 0 || dim <= 0) {
        ag_error("nn_embedding_m: num = %d, dim = %d, expected > 0", num, dim);
        return NULL;
    }
    nn_module *m = nn_module_new(&embedding_def, sizeof(embedding_state));
    if (m) *(embedding_state *)nn_module_state(m) = (embedding_state){.num = num, .dim = dim};
    return m;
}

/* ---- LayerNorm ---- */

typedef struct layer_norm_state {
    nn_layer_norm ln;
    int ndim, shape[AG_MAX_DIMS];
} layer_norm_state;

static int layer_norm_init(nn_module *m, nn_params *ps, const char *prefix) {
    layer_norm_state *s = nn_module_state(m);
    return nn_layer_norm_init(&s->ln, ps, prefix, s->ndim, s->shape, NN_LAYER_NORM_EPS);
}

/* x (..., shape) -> normalised over the trailing dims, the same shape */
static ag_tensor *layer_norm_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const layer_norm_state *s = nn_module_state(m);
    bool fits = x->ndim >= s->ndim;
    for (int d = 0; fits && d < s->ndim; d++) fits = x->shape[x->ndim - s->ndim + d] == s->shape[d];
    char sx[64], ss[64];
    if (!fits)
        return nn_module_fail(m, c, "input %s does not fit: expected it to end in %s", SHAPE(x, sx),
                              nn_shape_fmt(ss, sizeof ss, s->ndim, s->shape));
    return nn_layer_norm_forward(&s->ln, c, x);
}

static const nn_module_def layer_norm_def = {"LayerNorm", layer_norm_init, layer_norm_forward,
                                             NULL};

nn_module *nn_layer_norm_m(int ndim, const int *shape) {
    bool ok = shape && ndim >= 1 && ndim <= AG_MAX_DIMS;
    for (int d = 0; ok && d < ndim; d++) ok = shape[d] > 0;
    if (!ok) {
        ag_error("nn_layer_norm_m: the normalized shape needs 1 to %d dims, each > 0", AG_MAX_DIMS);
        return NULL;
    }
    nn_module *m = nn_module_new(&layer_norm_def, sizeof(layer_norm_state));
    if (!m) return NULL;
    layer_norm_state *s = nn_module_state(m);
    s->ndim = ndim;
    memcpy(s->shape, shape, (size_t)ndim * sizeof *shape);
    return m;
}

/* ---- BatchNorm1d ---- */

typedef struct batch_norm_state {
    nn_batch_norm1d bn;
    int num_features;
} batch_norm_state;

static int batch_norm_init(nn_module *m, nn_params *ps, const char *prefix) {
    batch_norm_state *s = nn_module_state(m);
    return nn_batch_norm1d_init(&s->bn, ps, prefix, s->num_features, NN_BATCH_NORM_EPS,
                                NN_BATCH_NORM_MOMENTUM);
}

/* x (N, C) or (N, C, L) -> the same shape (nn/batchnorm.h) */
static ag_tensor *batch_norm_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const batch_norm_state *s = nn_module_state(m);
    char sx[64];
    if ((x->ndim != 2 && x->ndim != 3) || x->shape[1] != s->num_features)
        return nn_module_fail(m, c, "input %s does not fit: expected (N, %d) or (N, %d, L)",
                              SHAPE(x, sx), s->num_features, s->num_features);
    return nn_batch_norm1d_forward(&s->bn, c, x);
}

static const nn_module_def batch_norm_def = {"BatchNorm1d", batch_norm_init, batch_norm_forward,
                                             NULL};

nn_module *nn_batch_norm1d_m(int num_features) {
    if (num_features <= 0) {
        ag_error("nn_batch_norm1d_m: num_features = %d, expected > 0", num_features);
        return NULL;
    }
    nn_module *m = nn_module_new(&batch_norm_def, sizeof(batch_norm_state));
    if (m) ((batch_norm_state *)nn_module_state(m))->num_features = num_features;
    return m;
}

/* ---- Dropout ---- */

static ag_tensor *dropout_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    return nn_dropout_forward(nn_module_state(m), c, x);
}

static const nn_module_def dropout_def = {"Dropout", NULL, dropout_forward, NULL};

nn_module *nn_dropout_m(double p) {
    nn_dropout d;
    if (nn_dropout_init(&d, p)) return NULL;
    nn_module *m = nn_module_new(&dropout_def, sizeof d);
    if (m) *(nn_dropout *)nn_module_state(m) = d;
    return m;
}

/* ---- LSTM ---- */

typedef struct lstm_state {
    nn_lstm l;
    int input_size, hidden, num_layers;
    double dropout;
    nn_rnn_opts opts;
} lstm_state;

static int lstm_init(nn_module *m, nn_params *ps, const char *prefix) {
    lstm_state *s = nn_module_state(m);
    return nn_lstm_init_opts(&s->l, ps, prefix, s->input_size, s->hidden, s->num_layers, s->dropout,
                             &s->opts);
}

/* x (T, B, input_size), or (B, T, input_size) batch-first -> the last layer's outputs
 * (T, B, D hidden) or (B, T, D hidden), D = 2 when bidirectional; zero initial state */
static ag_tensor *lstm_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const lstm_state *s = nn_module_state(m);
    char sx[64];
    if (x->ndim != 3 || x->shape[2] != s->input_size)
        return nn_module_fail(m, c, "input %s does not fit: expected %s%d) (%s)", SHAPE(x, sx),
                              s->opts.batch_first ? "(B, T, " : "(T, B, ", s->input_size,
                              s->opts.batch_first ? "batch-first" : "time-major");
    return nn_lstm_forward(&s->l, c, x, NULL, NULL, NULL, NULL);
}

static const nn_module_def lstm_def = {"LSTM", lstm_init, lstm_forward, NULL};

nn_module *nn_lstm_m_opts(int input_size, int hidden, int num_layers, double dropout,
                          const nn_rnn_opts *opts) {
    if (input_size <= 0 || hidden <= 0 || num_layers < 1 || num_layers > NN_LSTM_MAX_LAYERS ||
        !(dropout >= 0 && dropout < 1)) {
        ag_error("nn_lstm_m: input_size = %d, hidden = %d, num_layers = %d, dropout = %g; "
                 "expected sizes > 0, 1 <= num_layers <= %d, 0 <= dropout < 1",
                 input_size, hidden, num_layers, dropout, NN_LSTM_MAX_LAYERS);
        return NULL;
    }
    nn_module *m = nn_module_new(&lstm_def, sizeof(lstm_state));
    if (m)
        *(lstm_state *)nn_module_state(m) = (lstm_state){.input_size = input_size,
                                                         .hidden = hidden,
                                                         .num_layers = num_layers,
                                                         .dropout = dropout,
                                                         .opts = opts ? *opts : (nn_rnn_opts){0}};
    return m;
}

nn_module *nn_lstm_m(int input_size, int hidden, int num_layers, double dropout) {
    return nn_lstm_m_opts(input_size, hidden, num_layers, dropout, NULL);
}

/* ---- activations: one ag op each ---- */

#define ACTIVATION(fn, kind, op)                                                                   \
    static ag_tensor *fn##_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {            \
        (void)m;                                                                                   \
        return op(c->tape, x);                                                                     \
    }                                                                                              \
    static const nn_module_def fn##_def = {kind, NULL, fn##_forward, NULL};                        \
    nn_module *nn_##fn##_m(void) { return nn_module_new(&fn##_def, 0); }

ACTIVATION(relu, "ReLU", ag_relu)
ACTIVATION(gelu, "GELU", ag_gelu)
ACTIVATION(tanh, "Tanh", ag_tanh)
ACTIVATION(sigmoid, "Sigmoid", ag_sigmoid)
ACTIVATION(softmax, "Softmax", ag_softmax)
ACTIVATION(log_softmax, "LogSoftmax", ag_log_softmax)

/* ---- Flatten and Select: views ---- */

typedef struct dims_state {
    int a, b; /* Flatten: start, end; Select: axis, index */
} dims_state;

/* x (d0, ..., dn) -> (d0, ..., d_start * ... * d_end, ..., dn) */
static ag_tensor *flatten_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const dims_state *s = nn_module_state(m);
    int n = x->ndim, lo = s->a < 0 ? s->a + n : s->a, hi = s->b < 0 ? s->b + n : s->b;
    char sx[64];
    if (lo < 0 || hi >= n || lo > hi)
        return nn_module_fail(m, c, "cannot flatten dims %d to %d of input %s", s->a, s->b,
                              SHAPE(x, sx));
    int shape[AG_MAX_DIMS], k = 0;
    for (int d = 0; d < n; d++) {
        if (d <= lo || d > hi) shape[k++] = x->shape[d];
        else shape[k - 1] *= x->shape[d];
    }
    return ag_reshape(c->tape, x, k, shape);
}

/* x (..., d_axis, ...) -> x[..., index, ...] without the axis */
static ag_tensor *select_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x) {
    const dims_state *s = nn_module_state(m);
    int n = x->ndim, axis = s->a < 0 ? s->a + n : s->a;
    int len = axis >= 0 && axis < n ? x->shape[axis] : 0, idx = s->b < 0 ? s->b + len : s->b;
    char sx[64];
    if (axis < 0 || axis >= n || idx < 0 || idx >= len)
        return nn_module_fail(m, c, "cannot select index %d of axis %d of input %s", s->b, s->a,
                              SHAPE(x, sx));
    int shape[AG_MAX_DIMS], k = 0;
    for (int d = 0; d < n; d++)
        if (d != axis) shape[k++] = x->shape[d];
    return ag_reshape(c->tape, ag_narrow(c->tape, x, axis, idx, 1), k, shape);
}

static const nn_module_def flatten_def = {"Flatten", NULL, flatten_forward, NULL};
static const nn_module_def select_def = {"Select", NULL, select_forward, NULL};

static nn_module *dims_module(const nn_module_def *def, int a, int b) {
    nn_module *m = nn_module_new(def, sizeof(dims_state));
    if (m) *(dims_state *)nn_module_state(m) = (dims_state){a, b};
    return m;
}

nn_module *nn_flatten_m(int start_dim, int end_dim) {
    return dims_module(&flatten_def, start_dim, end_dim);
}

nn_module *nn_select_m(int axis, int index) { return dims_module(&select_def, axis, index); }
