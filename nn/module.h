/* module.h -- modules and Sequential: PyTorch's nn.Module / nn.Sequential as a convenience over
 * the layers of nn/ (whose plain functions keep working; a module wraps them).
 *
 *     nn_module *net = nn_sequential(nn_linear_m(2, 32, true), nn_relu_m(), nn_dropout_m(0.1),
 *                                    nn_linear_m(32, 3, true));
 *     if (nn_module_register(net, ps, "") || nn_params_finalize(ps, 42)) die(ag_last_error());
 *     ag_tensor *logits = nn_module_forward(net, &c, x);   // c: an nn_ctx, as for every layer
 *     ...
 *     nn_module_free(net);                                 // the tree; the store stays
 *
 * A module is a node of a tree: a kind ("Linear"), a local name ("0", "1" ... in a Sequential,
 * or any name given to nn_module_add), state of its own (the layer struct) and children it
 * owns. Life cycle:
 *   1. Build: constructors (nn_linear_m ...) and containers (nn_sequential, nn_module_add)
 *      make the tree. Nothing is registered yet: a constructor only checks its sizes, so the
 *      tree can be built inside out, as in PyTorch.
 *   2. nn_module_register(root, ps, prefix): walks the tree depth first (a module's own
 *      parameters, then its children in order) and registers every parameter and buffer in the
 *      store under prefix + "." + the path of names: "0.weight", "2.running_mean",
 *      "classifier.1.0.bias" -- PyTorch's state_dict names of the same nn.Sequential, in its
 *      order. Every module then knows its path ("classifier.1.0") and its range of the store.
 *   3. nn_params_finalize(ps, seed): as for plain layers (the same registrations in the same
 *      order give the same bits).
 *   4. nn_module_forward(m, &ctx, x): one tensor in, one out (owned by the tape).
 *   5. nn_module_free(root): the modules; the store and its tensors belong to the store.
 *
 * Train / eval. nn_ctx.training stays the switch of the whole forward (nn_eval_begin turns
 * everything off at once, as before), and every module also has a flag, true when made:
 * nn_module_train(m, on) sets it on m and its whole subtree (PyTorch's m.train(on);
 * nn_module_eval(m) is m.eval()). A module runs in training mode when the context says
 * training AND its flag and the flags of all modules above it are on (the forward of each
 * module passes its children a context with training = that conjunction). So
 * nn_module_eval(net) is PyTorch's net.eval(), and nn_module_eval(bn) inside a training net
 * freezes one BatchNorm; the one difference from PyTorch: a sub-module cannot be put back into
 * training mode under an ancestor in eval mode (set the ancestor, or its other children).
 * no_grad: torch.no_grad() is ag_tape_set_recording(tape, false); model.eval() plus no_grad
 * is nn_eval_begin / nn_eval_end (nn/base.h).
 *
 * Parameters. nn_module_param_count / nn_module_param_at are PyTorch's named_parameters()
 * (each tensor's name is its full name in the store); nn_module_tensor_count /
 * nn_module_tensor_at are its state_dict() (parameters and buffers: a buffer has requires_grad
 * false), and nn_module_state_name gives a tensor's name relative to the module, as
 * module.state_dict() names it. Saving and loading are the store's (nn_save_params,
 * nn_ckpt_add_params ...): a root registered with prefix "" saves PyTorch's names;
 * nn_module_init / nn_module_save / nn_module_load do it for a root that owns its store.
 *
 * Errors follow nn's rule (nn/nn.h): NULL or -1, the message in ag_last_error(). A
 * constructor given bad sizes returns NULL; every container given a NULL child fails, frees
 * what it was given and returns NULL, so a whole tree built in one expression is checked once.
 * A forward error names the module's path and kind:
 *     "classifier.2 (Linear): input [4, 7] does not fit: expected (..., 5)"
 * reported through ag's handler (ag_report) by the module's own checks; when an op inside a
 * module fails instead, the handler gets the op's message and ag_last_error() gets it with
 * the path in front ("classifier.2 (Linear): linear: ..."). A root's path is its prefix; with
 * prefix "" the messages start with the kind alone ("Linear: ...").
 *
 * Writing a module: a def (kind, init, forward, free) and nn_module_new; see nn_module_def. */
#ifndef TG_NN_MODULE_H
#define TG_NN_MODULE_H

#include <stddef.h>

#include "base.h"
#include "conv.h"
#include "params.h"
#include "rnn.h"

#ifdef __cplusplus
#include <initializer_list>
extern "C" {
#endif

typedef struct nn_module nn_module;

/* What a kind of module does (a constant the module points to; the built-ins have one each). */
typedef struct nn_module_def {
    const char *kind; /* PyTorch's class name, for messages: "Linear" */
    /* Registers the module's own parameters under prefix (its path); NULL for a module with
     * none. Children are registered by nn_module_register after it: do not register them.
     * Returns 0, or -1 (message in ag_last_error; the store then refuses to finalize). */
    int (*init)(nn_module *m, nn_params *ps, const char *prefix);
    /* x -> y on c->tape. c->training is already this module's mode (see Train / eval). A
     * container runs its children with nn_module_forward. Returns NULL on error (reported;
     * nn_module_fail names the module). Never called with a NULL x. */
    ag_tensor *(*forward)(const nn_module *m, const nn_ctx *c, ag_tensor *x);
    /* Frees what the state points to (not the state itself, nor the children); NULL: nothing. */
    void (*free)(nn_module *m);
} nn_module_def;

/* ---- building the tree ---- */

/* A new module of kind def (which must outlive it) with state_size zeroed bytes of state of
 * its own (nn_module_state), in training mode, no children, no name. NULL (reported) when out
 * of memory or def lacks a kind or a forward. */
nn_module *nn_module_new(const nn_module_def *def, size_t state_size);
/* The module's state (NULL when state_size was 0). */
void *nn_module_state(const nn_module *m);

/* Appends child to parent under name (NULL: the next index, "0", "1" ... counting all
 * children, as PyTorch's Sequential names them). Takes child in every case: on failure it is
 * freed (unless it is parent or one of its ancestors: then nothing is freed). Returns 0, or -1 on: a NULL parent or child (a failed constructor: its message is
 * kept, with this call's in front), a name empty, containing '.', or already a child's, a
 * parent already registered, a child that already has a parent. */
int nn_module_add(nn_module *parent, const char *name, nn_module *child);

/* Sequential: runs its children in order, each on the previous one's output. The children are
 * named "0", "1" ... Takes every module given (non-NULL ones are freed on failure). Returns the
 * container, or NULL if a module is NULL (a failed constructor) or out of memory. Use the
 * macro nn_sequential(a, b, ...) (C and C++; at least one module), nn_sequential_of(n, mods)
 * for an array (n may be 0), and nn_module_add to append later. */
nn_module *nn_sequential_of(int n, nn_module *const *mods);
#ifdef __cplusplus
}
static inline nn_module *nn_sequential_il_(std::initializer_list<nn_module *> l) {
    return nn_sequential_of((int)l.size(), l.begin());
}
#define nn_sequential(...) nn_sequential_il_({__VA_ARGS__})
extern "C" {
#else
/* sizeof does not evaluate its operand: each constructor runs once. */
#define nn_sequential(...)                                                                         \
    nn_sequential_of((int)(sizeof((nn_module *[]){__VA_ARGS__}) / sizeof(nn_module *)),            \
                     (nn_module *[]){__VA_ARGS__})
#endif

/* Frees m, its state and its whole subtree; NULL is a no-op. A child that has a parent is
 * freed with its root only (freeing it alone is a no-op). The store is left alone. */
void nn_module_free(nn_module *m);

/* ---- the tree ---- */
const char *nn_module_kind(const nn_module *m); /* "Linear" */
const char *nn_module_name(const nn_module *m); /* local name: "2"; "" for a root */
/* Full path after nn_module_register ("classifier.2"; a root's is its prefix), else "". */
const char *nn_module_path(const nn_module *m);
size_t nn_module_child_count(const nn_module *m);
nn_module *nn_module_child(const nn_module *m, size_t i); /* NULL when out of range */
/* The descendant at a dotted path of local names ("1.0"; "" is m itself), or NULL. */
nn_module *nn_module_get(const nn_module *m, const char *path);

/* ---- registration ---- */

/* Registers the parameters and buffers of root's whole tree in ps (see step 2 above); prefix
 * "" or NULL: names start at the children ("0.weight"). Returns 0, or -1 (and the store refuses
 * to finalize when a registration failed) on: a NULL root or store, a store already finalized,
 * a module already registered or that has a parent (register the root), a name too long. */
int nn_module_register(nn_module *root, nn_params *ps, const char *prefix);
/* The store m is registered in, or NULL. */
nn_params *nn_module_params(const nn_module *m);

/* PyTorch's modules own their parameters: nn_module_init(root, seed) is nn_params_new,
 * nn_module_register(root, ps, "") and nn_params_finalize(ps, seed) in one call, the store then
 * owned by root (nn_module_free(root) frees it; do not nn_params_free it). Returns the store
 * (for optim_new ...), or NULL (root left unregistered, still the caller's) on a NULL root, a
 * root already registered or with a parent, a failed registration, out of memory. */
nn_params *nn_module_init(nn_module *root, uint64_t seed);
/* save_file(m.state_dict(), path) and m.load_state_dict(load_file(path)) for a root that holds
 * every tensor of its store (nn_module_init, or registered alone in a store of its own): the
 * store's nn_save_params / nn_load_params (names, format, strict checks and atomicity are
 * theirs: a failed load changes nothing). Return 0, or -1 (message in ag_last_error), also for
 * a module that is not such a root (a child, a store shared with other modules: use the
 * store's functions). */
int nn_module_save(const nn_module *m, const char *path);
int nn_module_load(nn_module *m, const char *path);

/* ---- forward, modes ---- */

/* Runs m on x with c (see Train / eval). Returns a tensor owned by c->tape, NULL if m, c or x
 * is NULL or on an error (reported; see Errors): a module with parameters that is not
 * registered, an input that does not fit, an op that failed. */
ag_tensor *nn_module_forward(const nn_module *m, const nn_ctx *c, ag_tensor *x);

/* Sets the training flag of m and every module below it (PyTorch's m.train(on)). */
void nn_module_train(nn_module *m, bool on);
static inline void nn_module_eval(nn_module *m) { nn_module_train(m, false); }
bool nn_module_training(const nn_module *m); /* m's own flag */

/* For a def's forward: reports a usage error as "<path> (<kind>): <message>" through ag's
 * handler (ag_report on c's tape). Returns NULL, so `return nn_module_fail(m, c, ...);`. */
ag_tensor *nn_module_fail(const nn_module *m, const nn_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- running a module: a context of its own, prediction, accuracy (nn/module_run.c) ---- */

/* A context that owns a new tape and a random stream seeded with seed (for dropout), in
 * training mode: PyTorch's implicit global state made explicit in one call. Free it with
 * nn_ctx_free (its tape too); change c->training, or use nn_eval_begin / nn_eval_end, as with
 * any context. NULL (reported) when out of memory. */
nn_ctx *nn_ctx_new(uint64_t seed);
/* Frees a context from nn_ctx_new and its tape (only such a context); NULL is a no-op. */
void nn_ctx_free(nn_ctx *c);

/* net.eval() + torch.no_grad() + net(x).argmax(-1), in one call that changes nothing: x, the
 * caller's array of shape (ndim, shape) (AG_SHAPE(...)), is made a tensor on c's tape; m runs
 * on it with c in eval mode (c->training as false; m's own flags untouched) and recording off,
 * and the index of the largest value of each row of its output (..., K) -- the predicted
 * class -- goes to pred (capacity n; the first index on ties, a NaN counting as the largest,
 * as ag_argmax). The tape is then rewound to where it was. Returns 0, or -1 (message in
 * ag_last_error, naming the module's path for a forward error) on a NULL argument, a bad
 * shape, a forward that failed, more rows than n. */
int nn_module_predict(const nn_module *m, const nn_ctx *c, int ndim, const int *shape,
                      const ag_real *x, int32_t *pred, size_t n);
/* (net(x).argmax(-1) == y).float().mean(): the fraction of the output's rows whose predicted
 * class equals y's label (y: one label per row), run as nn_module_predict. pred: NULL, or an
 * array with room for one label per row, which receives the predictions (for a confusion
 * matrix). Returns the accuracy in [0, 1], or -1 (message in ag_last_error) as
 * nn_module_predict, and for a NULL y.
 *     double acc = nn_module_accuracy(net, c, AG_SHAPE(N_TEST, T), xt, yt, NULL); */
double nn_module_accuracy(const nn_module *m, const nn_ctx *c, int ndim, const int *shape,
                          const ag_real *x, const int32_t *y, int32_t *pred);

/* ---- parameters and state ----
 * All of m's subtree, in registration order; 0 / NULL before registration. Tensors are owned
 * by the store. */
size_t nn_module_param_count(const nn_module *m); /* trainable: named_parameters() */
ag_tensor *nn_module_param_at(const nn_module *m, size_t i);
size_t nn_module_tensor_count(const nn_module *m); /* params and buffers: state_dict() */
ag_tensor *nn_module_tensor_at(const nn_module *m, size_t i);
/* t's name relative to m ("2.bias" for "classifier.2.bias" and m "classifier"), as
 * m.state_dict() names it; NULL when t is not one of m's tensors. Points into t->name. */
const char *nn_module_state_name(const nn_module *m, const ag_tensor *t);
/* Zeroes the gradients of m's parameters (the root's: all of the store's; a sub-module's: its
 * own only). No-op before finalize. */
void nn_module_zero_grad(nn_module *m);

/* ---- built-in modules (nn/module_layers.c) ----
 * Each returns a new module (free it, or hand it to a container) or NULL (reported) on a bad
 * size. The layer each wraps is named; its parameters are PyTorch's (names, shapes, order). */

/* Linear(in, out, bias): x (..., in) -> (..., out). nn_linear. */
nn_module *nn_linear_m(int in, int out, bool bias);
/* Embedding(num, dim): x holds ids as whole numbers in [0, num) (any shape; exact in float32
 * below 2^24) -> (x's shape..., dim). A fraction or an id out of range is an error naming the
 * position. nn_embedding. */
nn_module *nn_embedding_m(int num, int dim);
/* LayerNorm(normalized_shape), eps NN_LAYER_NORM_EPS: x (..., shape) -> the same shape.
 * nn_layer_norm; nn_layer_norm_m(AG_SHAPE(16)). */
nn_module *nn_layer_norm_m(int ndim, const int *shape);
/* BatchNorm1d(c), PyTorch's eps and momentum: x (N, c) or (N, c, L) -> the same shape.
 * nn_batch_norm1d: training MUTATES its running statistics. */
nn_module *nn_batch_norm1d_m(int num_features);
/* Dropout(p), 0 <= p < 1: the identity in eval; in training it needs c->rng. nn_dropout. */
nn_module *nn_dropout_m(double p);
/* LSTM(input_size, hidden, num_layers, dropout), time-major, zero initial state:
 * x (T, B, input_size) -> the last layer's outputs (T, B, hidden) (PyTorch's output[0]; the
 * final state is not returned: use nn_lstm_forward for it). nn_lstm. */
nn_module *nn_lstm_m(int input_size, int hidden, int num_layers, double dropout);
/* The same with PyTorch's batch_first and bidirectional (nn/rnn.h; NULL: neither): batch-first
 * x (B, T, input_size) -> (B, T, hidden); bidirectional: the last axis 2 hidden, [forward,
 * reverse], and the _reverse parameters after each layer's (nn_lstm_init_opts). */
nn_module *nn_lstm_m_opts(int input_size, int hidden, int num_layers, double dropout,
                          const nn_rnn_opts *opts);
/* Activations, elementwise, no parameters: ReLU, GELU (exact erf form), Tanh, Sigmoid. */
nn_module *nn_relu_m(void);
nn_module *nn_gelu_m(void);
nn_module *nn_tanh_m(void);
nn_module *nn_sigmoid_m(void);
/* Softmax / LogSoftmax over the last axis (PyTorch's dim = -1). */
nn_module *nn_softmax_m(void);
nn_module *nn_log_softmax_m(void);
/* Flatten(start_dim, end_dim) (negative: from the end; PyTorch's default is (1, -1)): merges
 * those dims into one. */
nn_module *nn_flatten_m(int start_dim, int end_dim);
/* x.select(axis, index) (negative: from the end): drops axis, keeping one index of it, e.g.
 * nn_select_m(0, -1) takes an LSTM's last time step. No PyTorch module (x[-1] in a forward). */
nn_module *nn_select_m(int axis, int index);
/* Conv2d(in, out, kernel, stride, padding): square kernel, dilation 1, one group, with a bias;
 * stride 0 means 1. x (N, in, H, W) -> (N, out, OH, OW). nn_conv2d (nn/conv.h). */
nn_module *nn_conv2d_m(int in, int out, int kernel, int stride, int padding);
/* Any Conv2d: a kh x kw kernel and every option of nn_conv2d_opts (NULL: PyTorch's defaults). */
nn_module *nn_conv2d_m_opts(int in, int out, int kh, int kw, const nn_conv2d_opts *opts);
/* MaxPool2d(kernel, stride, padding) / AvgPool2d (count_include_pad): square windows, stride 0
 * means the kernel (PyTorch's stride=None), 0 <= padding <= kernel / 2. x (N, C, H, W) ->
 * (N, C, OH, OW). nn_max_pool2d / nn_avg_pool2d (nn/pool.h). */
nn_module *nn_max_pool2d_m(int kernel, int stride, int padding);
nn_module *nn_avg_pool2d_m(int kernel, int stride, int padding);

#ifdef __cplusplus
}
#endif

#endif
