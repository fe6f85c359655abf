/* layers.h -- Linear, Embedding, LayerNorm, Dropout, ReLU.
 *
 * Every layer is a small struct the caller owns (usually a member of the model's struct):
 *   nn_X_init(&layer, ps, prefix, sizes...)  registers the layer's parameters in ps under
 *       prefix + "." + PyTorch's names ("weight", "bias") with d2l's default initialisers
 *       (docs/spec.md 5) and fills the struct. Returns 0, or -1 (message in ag_last_error; the
 *       store then refuses to finalize). The struct holds pointers into the store: it stays
 *       valid as long as the store does, and needs no free.
 *   nn_X_forward(&layer, &ctx, x)  builds the layer on ctx->tape. Returns a tensor owned by
 *       the tape (freed by ag_tape_reset), or NULL if an input is NULL or an op failed (the
 *       op reported it through ag's error handler).
 * To change an initialiser, call nn_params_set_init(ps, layer.weight, ...) before finalize.
 */
#ifndef TG_NN_LAYERS_H
#define TG_NN_LAYERS_H

#include "base.h"
#include "params.h"
#include "quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Linear: y = x W^T + b ---------------------------------------------------------------- */

typedef struct nn_linear {
    ag_tensor *weight; /* (out, in) as PyTorch; init Xavier-uniform */
    ag_tensor *bias;   /* (out), init U(-1/sqrt(in), 1/sqrt(in)); NULL without bias */
    int in, out;
} nn_linear;

/* Registers prefix.weight and, when bias is true, prefix.bias. in, out > 0. */
int nn_linear_init(nn_linear *l, nn_params *ps, const char *prefix, int in, int out, bool bias);
/* Weight tying (Press and Wolf, 2017): a Linear whose weight is the registered parameter
 * `weight` of shape (out, in), e.g. an embedding table (num, dim) as the output layer of num
 * classes over dim features. Registers only prefix.bias (when bias is true, initialised as
 * nn_linear_init's). The gradients of both uses add up in weight's. Returns 0, or -1 (the store
 * fails) when weight is NULL or not 2-D. */
int nn_linear_init_tied(nn_linear *l, nn_params *ps, const char *prefix, ag_tensor *weight,
                        bool bias);
/* x (..., in) -> (..., out), any number of leading dims. With c->packs set and nothing to
 * record, from the weight packed once (below): the same bits; or, in a set quantizing to int8
 * (nn_packs_set_quant), nn_qlinear_forward (nn/quant.h) unless the set keeps w float. */
ag_tensor *nn_linear_forward(const nn_linear *l, const nn_ctx *c, ag_tensor *x);

/* ---- Packed weights for inference ----
 * A stretch of inference that runs the same Linear layers many times (a decoder, one token at
 * a time) can have their weights packed once for the GEMM micro-kernel instead of at every
 * product (ag_pack_b, autograd/ag_op.h): make a set, point nn_ctx.packs at it, free it after.
 * A layer's weight is packed the first time a large enough product needs it (never when the
 * engine's own kernel is not in use); the set is shared by threads (a mutex guards it). The
 * weights must not change while the set lives: it holds copies taken at first use.
 *
 *     nn_packs *p = nn_packs_new();
 *     nn_ctx c = {.tape = t, .training = false, .packs = p};   // recording off
 *     ... forwards ...
 *     nn_packs_free(p);
 *
 * nn_packs_new returns NULL (reported) only when out of memory. */
typedef struct ag_packed_b ag_packed_b; /* autograd/ag_op.h */
nn_packs *nn_packs_new(void);
void nn_packs_free(nn_packs *p);
/* W^T of weight w (out, in) packed, made at the first call; NULL (reported) when out of
 * memory. Owned by the set. */
const ag_packed_b *nn_packs_get(nn_packs *p, const ag_tensor *w);
/* Quantized inference (nn/quant.h): a set in mode NN_QUANT_INT8 (NN_QUANT_BF16) gives the
 * Linear layers that use it their weight quantized per output channel (rounded to bf16), made once at first use and shared by the
 * threads, except the weights it was told to keep float (an output layer over a vocabulary,
 * which needs float logits). Set the mode before the set is used. nn_packs_keep_float returns
 * 0, or -1 (reported) when out of memory. nn_packs_quantized sets *q to w's int8 form in an
 * int8 set, *b to its bf16 form in a bf16 set (owned by the set), the other (or both, when the
 * set is float or w is kept float or not 2-D) to NULL, and returns 0; -1 (reported) when out
 * of memory. */
void nn_packs_set_quant(nn_packs *p, nn_quant mode);
int nn_packs_keep_float(nn_packs *p, const ag_tensor *w);
int nn_packs_quantized(nn_packs *p, const ag_tensor *w, const nn_qweight **q,
                       const nn_bweight **b);

/* ---- Embedding: row lookup ------------------------------------------------------------------ */

typedef struct nn_embedding {
    ag_tensor *weight; /* (num, dim), init N(0, 1) */
    int num, dim;
} nn_embedding;

/* Registers prefix.weight (num, dim). num, dim > 0. */
int nn_embedding_init(nn_embedding *e, nn_params *ps, const char *prefix, int num, int dim);
/* ids: ids_ndim dims of shape ids_shape (copied; values in [0, num)) -> (ids_shape..., dim).
 * An id out of range is an op error (NULL). */
ag_tensor *nn_embedding_forward(const nn_embedding *e, const nn_ctx *c, const int32_t *ids,
                                int ids_ndim, const int *ids_shape);

/* ---- LayerNorm over the trailing dims ------------------------------------------------------ */

/* d2l's and PyTorch's default epsilon. */
#define NN_LAYER_NORM_EPS 1e-5

typedef struct nn_layer_norm {
    ag_tensor *weight; /* gamma, shape = the normalised dims, init 1 */
    ag_tensor *bias;   /* beta, same shape, init 0 */
    int ndim;          /* number of trailing dims normalised (1 to AG_MAX_DIMS) */
    int shape[AG_MAX_DIMS];
    double eps;
} nn_layer_norm;

/* Registers prefix.weight and prefix.bias of shape (ndim, shape) (PyTorch's normalized_shape),
 * eps > 0 (use NN_LAYER_NORM_EPS). */
int nn_layer_norm_init(nn_layer_norm *ln, nn_params *ps, const char *prefix, int ndim,
                       const int *shape, double eps);
/* x (..., shape) -> same shape: per position, (x - mean) / sqrt(var + eps) * weight + bias,
 * mean and biased variance over the trailing ndim dims. One fused op (nn/layer_norm.c, on
 * autograd/ag_op.h). nn_layer_norm_composite computes the same from ag primitives (ag_mean,
 * ag_sub, ag_mul, ag_add_scalar, ag_sqrt, ag_div, ag_reshape), the tested reference. A layer
 * struct filled by hand may leave weight or bias NULL (no scale, no shift). NULL (reported,
 * naming the shapes) when x does not end in shape. */
ag_tensor *nn_layer_norm_forward(const nn_layer_norm *ln, const nn_ctx *c, ag_tensor *x);
ag_tensor *nn_layer_norm_composite(const nn_layer_norm *ln, const nn_ctx *c, ag_tensor *x);

/* ---- Dropout ---------------------------------------------------------------------------- */

typedef struct nn_dropout {
    double p; /* probability of zeroing an element, 0 <= p < 1 */
} nn_dropout;

/* No parameters; fails only for p outside [0, 1). */
int nn_dropout_init(nn_dropout *d, double p);
/* Training: inverted dropout (zero with probability p, scale the rest by 1/(1-p)) drawing from
 * c->rng; eval (c->training false) or p = 0: returns x itself. Same shape as x. */
ag_tensor *nn_dropout_forward(const nn_dropout *d, const nn_ctx *c, ag_tensor *x);

/* ---- LayerNorm of a residual sum (AddNorm) ------------------------------------------------ */

/* x, y (..., S) of one shape, S = ln's normalised dims -> (..., S):
 *   LayerNorm(x + dropout(y)) = (z - mean_S(z)) / sqrt(var_S(z) + eps) * weight + bias,
 *   z = x + dropout(y)
 * the residual connection, its dropout and the normalisation of a Transformer block (d2l's
 * AddNorm). The dropout is drop's, training only: the same rng state drops the same elements
 * as nn_dropout_forward. nn_layer_norm_add_forward runs one fused kernel (nn/layer_norm.c,
 * on LayerNorm's row kernels); nn_layer_norm_add_composite computes the same from
 * nn_dropout_forward, ag_add and nn_layer_norm_composite: the tested reference. NULL (reported)
 * when x and y differ in shape, x does not end in S, or training with dropout and no c->rng. */
ag_tensor *nn_layer_norm_add_forward(const nn_layer_norm *ln, const nn_dropout *drop,
                                     const nn_ctx *c, ag_tensor *x, ag_tensor *y);
ag_tensor *nn_layer_norm_add_composite(const nn_layer_norm *ln, const nn_dropout *drop,
                                       const nn_ctx *c, ag_tensor *x, ag_tensor *y);

/* ---- ReLU ------------------------------------------------------------------------------- */

/* max(x, 0) elementwise; no parameters, so no struct. */
ag_tensor *nn_relu(const nn_ctx *c, ag_tensor *x);

#ifdef __cplusplus
}
#endif

#endif
