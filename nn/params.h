/* params.h -- the parameter store: every trainable tensor of a model, by name, in flat buffers;
 * and the model's non-trainable buffers (running statistics) beside them.
 *
 * Life cycle:
 *   1. nn_params_new().
 *   2. Layers register their parameters (nn_linear_init ... call nn_params_add). Each gets a
 *      hierarchical name, prefix + "." + own name ("decoder.dense.weight"), a shape and an
 *      initialiser. nn_params_add returns an ag_tensor* that lives inside the store: its
 *      address never changes, so layers keep it. Before finalize it carries only the shape
 *      and the name (data == grad == NULL); do not run a forward yet.
 *   3. nn_params_finalize(ps, seed): one allocation for all values and one for all gradients;
 *      every parameter becomes a contiguous leaf (ag_leaf_init) viewing its slice; the
 *      initialisers run in registration order from one ag_rng seeded with `seed`, so the same
 *      registrations and seed give the same bits. Gradients start at zero.
 *   4. Train: forwards read the leaves, ag_backward accumulates into the gradient buffer,
 *      an optimizer (optim/optim.h) updates the value buffer and zeroes the gradients.
 *   5. nn_params_free(ps) frees the buffers and the tensor structs.
 *
 * Errors are sticky: a failed registration (bad shape, duplicate name, bad initialiser) returns
 * NULL / -1 at once and also makes nn_params_finalize fail with the same message, so model code
 * may check only the finalize call.
 *
 * Flat layout: parameter i occupies [offset(i), offset(i) + numel) of the value and gradient
 * buffers; offsets are multiples of 16 elements and the padding between parameters is zero in
 * both buffers. Optimizers keep their state in buffers of nn_params_flat_size() elements with
 * the same layout, so an update is one loop over the whole buffer.
 *
 * Buffers (nn_params_add_buffer): named tensors of a model that are not trained, e.g.
 * BatchNorm's running statistics (PyTorch's register_buffer). They are registered, named,
 * initialised (in registration order, from the same rng as the parameters), found and
 * checkpointed like parameters, but have no gradient (grad NULL, requires_grad false) and
 * live in an allocation of their own: they are not in nn_params_count / nn_params_at /
 * nn_params_offset, nor in the flat value and gradient buffers, so the optimizers, gradient
 * clipping and zero-grad never see them. Layers write them during a forward (BatchNorm in
 * training updates its running statistics). The full list, parameters and buffers in
 * registration order (PyTorch's state_dict order when a layer registers its parameters first),
 * is nn_params_tensor_count / nn_params_tensor_at: what a checkpoint saves.
 */
#ifndef TG_NN_PARAMS_H
#define TG_NN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest parameter name, terminating NUL included. */
#define NN_NAME_MAX 256

/* ---- Initialisers ------------------------------------------------------------------------ */

typedef enum nn_init_kind {
    NN_INIT_CONSTANT,       /* every element = a (zeros: a = 0, ones: a = 1) */
    NN_INIT_UNIFORM,        /* U(a, b) */
    NN_INIT_NORMAL,         /* N(mean a, std b) */
    NN_INIT_XAVIER_UNIFORM, /* U(-g, g), g = a * sqrt(6 / (fan_in + fan_out)); a = gain */
} nn_init_kind;

/* An initialiser: a kind and its two numbers. Build one with the functions below.
 * Xavier's fans follow PyTorch: for a shape (out, in, k...) fan_in = in * prod(k),
 * fan_out = out * prod(k); it needs at least 2 dimensions. */
typedef struct nn_init {
    nn_init_kind kind;
    double a, b;
} nn_init;

static inline nn_init nn_init_zeros(void) {
    nn_init r = {NN_INIT_CONSTANT, 0.0, 0.0};
    return r;
}
static inline nn_init nn_init_ones(void) {
    nn_init r = {NN_INIT_CONSTANT, 1.0, 0.0};
    return r;
}
static inline nn_init nn_init_constant(double v) {
    nn_init r = {NN_INIT_CONSTANT, v, 0.0};
    return r;
}
static inline nn_init nn_init_uniform(double lo, double hi) {
    nn_init r = {NN_INIT_UNIFORM, lo, hi};
    return r;
}
static inline nn_init nn_init_normal(double mean, double std) {
    nn_init r = {NN_INIT_NORMAL, mean, std};
    return r;
}
static inline nn_init nn_init_xavier_uniform(void) {
    nn_init r = {NN_INIT_XAVIER_UNIFORM, 1.0, 0.0};
    return r;
}

/* Fills x (numel values, row-major, shape (ndim, shape) for Xavier's fans) from rng.
 * Returns 0, or -1 (message in ag_last_error) for an invalid initialiser: uniform with
 * a > b, normal with std < 0, Xavier on fewer than 2 dimensions or a zero fan. */
int nn_init_fill(nn_init init, ag_real *x, int ndim, const int *shape, ag_rng *rng);

/* ---- The store --------------------------------------------------------------------------- */

typedef struct nn_params nn_params;

/* Returns a new empty store (NULL when out of memory). */
nn_params *nn_params_new(void);
/* Frees the store, its buffers and every tensor it returned. NULL is a no-op. */
void nn_params_free(nn_params *ps);

/* Registers the parameter `prefix.name` ("" prefix: just `name`) of the given shape (1 to
 * AG_MAX_DIMS dims, all > 0) and initialiser. Returns its tensor, owned by the store, stable
 * for the store's life, or NULL (and the store fails) on: NULL/empty name, NULL prefix (e.g. a
 * failed nn_join), a name longer than NN_NAME_MAX - 1, a duplicate name, a bad shape, an
 * invalid initialiser, a store already finalized. The tensor's name field points to the full
 * name. */
ag_tensor *nn_params_add(nn_params *ps, const char *prefix, const char *name, int ndim,
                         const int *shape, nn_init init);

/* Registers the non-trainable buffer `prefix.name`: the same rules, names (shared with the
 * parameters: a name is unique across both) and errors as nn_params_add, ndim 0 (a scalar)
 * included. The tensor has no gradient. After finalize its data live outside the flat buffers
 * (see "Buffers" above); nn_params_reinit reruns its initialiser too. */
ag_tensor *nn_params_add_buffer(nn_params *ps, const char *prefix, const char *name, int ndim,
                                const int *shape, nn_init init);

/* Replaces the initialiser of a registered parameter or buffer (before finalize), e.g. to
 * override a layer's default. Returns 0, or -1 if p is not in ps, the store is finalized or
 * init invalid. */
int nn_params_set_init(nn_params *ps, ag_tensor *p, nn_init init);

/* Records a registration error of a caller-written layer (printf-style message): makes
 * finalize fail with it, sets ag_last_error, returns -1. */
int nn_params_fail(nn_params *ps, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Allocates the flat buffers (and the buffers' own allocation), points every parameter and
 * buffer at its slice, runs the initialisers in registration order from ag_rng seeded with
 * `seed`, zeroes the gradients. Returns 0, or -1 on an earlier registration error, a second
 * finalize, or out of memory. A store with no parameters finalizes fine. */
int nn_params_finalize(nn_params *ps, uint64_t seed);
/* nn_params_finalize without the initialisers: every value and buffer is zero. For a store
 * whose values all come next from a checkpoint (nn_ckpt_load_params requires every parameter
 * and buffer), where drawing random values first would be wasted work. Returns as finalize. */
int nn_params_finalize_zero(nn_params *ps);
/* Reruns the initialisers exactly as finalize did with `seed` (same bits for the same seed)
 * and zeroes the gradients. Returns 0, or -1 if the store is not finalized. */
int nn_params_reinit(nn_params *ps, uint64_t seed);
bool nn_params_finalized(const nn_params *ps);

/* Number of registered parameters (trainable tensors; buffers excluded). */
size_t nn_params_count(const nn_params *ps);
/* Parameter i in registration order (0 <= i < count), or NULL when out of range. */
ag_tensor *nn_params_at(const nn_params *ps, size_t i);
/* Every tensor of the model, parameters and buffers, in registration order: count, and tensor
 * i (NULL when out of range). A buffer is told by requires_grad == false. */
size_t nn_params_tensor_count(const nn_params *ps);
ag_tensor *nn_params_tensor_at(const nn_params *ps, size_t i);
/* The parameter or buffer with this full name, or NULL. */
ag_tensor *nn_params_find(const nn_params *ps, const char *name);
/* Total number of scalars of all parameters (padding and buffers excluded). */
size_t nn_params_numel(const nn_params *ps);

/* Flat buffers (after finalize; NULL before). Both hold nn_params_flat_size() elements, the
 * zero padding included. Owned by the store. */
size_t nn_params_flat_size(const nn_params *ps);
size_t nn_params_offset(const nn_params *ps, size_t i); /* parameter i's first element */
ag_real *nn_params_values(nn_params *ps);
ag_real *nn_params_grads(nn_params *ps);

/* Makes replica read master's values: both finalized stores of the same registrations (the
 * same model built twice). Each replica parameter then views master's value buffer (its own is
 * freed) and keeps its own gradient buffer, so a forward and backward through the replica
 * leaves master's gradients alone: that is how the trainer runs shards of a batch in parallel
 * and sums their gradients. master must outlive replica; nn_params_reinit of the replica is
 * refused. Buffers are not shared: the replica's get a copy of master's values, then stay its
 * own, so a training forward through the replica (BatchNorm) updates the replica's running
 * statistics, not master's (as PyTorch's DataParallel keeps only the first replica's).
 * Returns 0, or -1 (ag_last_error names the first difference). */
int nn_params_share_values(nn_params *replica, nn_params *master);

/* Sets every gradient to zero (one memset). No-op before finalize. */
void nn_params_zero_grad(nn_params *ps);

/* Writes prefix + "." + the printf-formatted suffix into buf ("" prefix: just the suffix) and
 * returns buf, for building the prefixes of sub-layers:
 *     nn_linear_init(&b->dense1, ps, nn_join(p, sizeof p, prefix, "ffn.dense%d", 1), ...);
 * Returns NULL (and sets ag_last_error) when the result does not fit; a NULL prefix then makes
 * the registration that receives it fail, so the error is not lost. */
char *nn_join(char *buf, size_t len, const char *prefix, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif
