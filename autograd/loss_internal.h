/* loss_internal.h -- what the loss files of the engine share (ops_loss.c defines it; not
 * installed): the reductions of ag_reduction (autograd/ag.h) over per-position losses l_i, and
 * the checks of a loss's arguments.
 *
 *   NONE:      out_i = l_i           g_i = dout_i
 *   SUM:       out = sum_i l_i       g_i = dout
 *   MEAN:      out = sum_i l_i / D   g_i = dout / D    (D: the loss's denominator)
 *   BATCHMEAN: the same, D = the batch size (kl_div only)
 */
#ifndef TG_AG_LOSS_INTERNAL_H
#define TG_AG_LOSS_INTERNAL_H

#include "autograd/ag_internal.h"

/* What the backward needs of the reduction: which one, and dout -> g_i's factor. */
typedef struct loss_red {
    ag_reduction red;
    ag_real scale; /* 1 (NONE, SUM) or 1 / D (MEAN, BATCHMEAN) */
} loss_red;

/* g_i, from the loss's output gradient. */
static inline ag_real loss_grad_at(const ag_tensor *out, loss_red r, ptrdiff_t i) {
    return r.red == AG_REDUCE_NONE ? out->grad[i] : out->grad[0] * r.scale;
}

/* True for MEAN, SUM, NONE (and BATCHMEAN when batchmean_ok); reports otherwise. */
bool ag__loss_check_reduction(ag_tape *t, const char *op, ag_reduction red, bool batchmean_ok);
/* x and target usable, of one shape, and the reduction valid; reports otherwise. */
bool ag__loss_check_pair(ag_tape *t, const char *op, ag_tensor *x, ag_tensor *target,
                         ag_reduction red, bool batchmean_ok);
/* The loss's result on t: the positions' shape (nd, shape) for NONE, a scalar otherwise; *per
 * gets where the per-position losses go (the result's data for NONE, tape scratch otherwise).
 * NULL when out of memory. */
ag_tensor *ag__loss_out(ag_tape *t, ag_reduction red, int nd, const int *shape, int n_in,
                        ag_tensor *const *in, ag_real **per);
/* Reduces the n per-position losses into y (SUM; MEAN and BATCHMEAN over denom, in double, in
 * index order; NONE: already there) and returns what the backward needs. denom = 0 gives NaN,
 * as PyTorch. */
loss_red ag__loss_finish(ag_tensor *y, ag_reduction red, const ag_real *per, ptrdiff_t n,
                         double denom);
/* A copy of `bytes` bytes of src in t's arena (NULL src: NULL); *ok = false when out of memory. */
void *ag__arena_copy(ag_tape *t, const void *src, size_t bytes, bool *ok);

#endif
