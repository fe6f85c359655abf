/* ops_loss_pointwise.c -- elementwise losses with PyTorch's definitions: L1, smooth L1, Huber
 * (x and target of one shape, d = x - target) and KL divergence (PyTorch's kl_div). Each computes
 * per-position l_i, reduced as every loss (autograd/loss_internal.h); the backward adds
 * g_i dl_i/dx into x and g_i dl_i/dtarget into the target, when they require a gradient:
 *
 *   l1:        l = |d|                                    dl/dd = sgn(d) (0 at d = 0)
 *   smooth_l1: l = 0.5 d^2 / beta        (|d| < beta)     dl/dd = d / beta
 *                  |d| - 0.5 beta        (else)                  sgn(d)
 *              beta = 0: l1 (PyTorch falls back to l1_loss)
 *   huber:     l = 0.5 d^2               (|d| < delta)    dl/dd = d
 *                  delta (|d| - 0.5 delta) (else)                delta sgn(d)
 *              dl/dx = dl/dd, dl/dtarget = -dl/dd
 *   kl_div:    x log-probabilities, y the target:
 *              l = xlogy(y, y) - y x,  xlogy(0, 0) = 0    dl/dx = -y
 *                                                         dl/dy = log y + 1 - x (0 where y = 0)
 *              log_target: l = exp(y) (y - x)             dl/dx = -exp(y)
 *                                                         dl/dy = exp(y) (y - x + 1)
 * MEAN divides by numel; kl_div also takes BATCHMEAN, the sum over shape[0] (1 for a scalar).
 * At a kink the gradient is PyTorch's: l1'(0) = 0; smooth_l1 and huber are differentiable at
 * their joins (d / beta = sgn(d) there); kl_div's target gradient at y = 0 is 0 (the mask of
 * PyTorch's kl_div_target_backward).
 */
#include "autograd/loss_internal.h"

#include <math.h>

#ifdef TG_DOUBLE
#define M(fn) fn
#else
#define M(fn) fn##f
#endif

typedef enum { L_L1, L_SMOOTH_L1, L_HUBER, L_KL, L_KL_LOG } pw_kind;

typedef struct pw_saved {
    loss_red r;
    pw_kind kind;
    ag_real param; /* beta (smooth_l1), delta (huber) */
} pw_saved;

static inline ag_real sgn(ag_real d) { return d > 0 ? 1 : d < 0 ? -1 : 0; }

/* l at d (regression losses). */
static inline ag_real reg_loss(pw_kind k, ag_real d, ag_real p) {
    ag_real a = M(fabs)(d);
    if (k == L_SMOOTH_L1 && p > 0) return a < p ? (ag_real)0.5 * d * d / p : a - (ag_real)0.5 * p;
    if (k == L_HUBER) return a < p ? (ag_real)0.5 * d * d : p * (a - (ag_real)0.5 * p);
    return a; /* l1, and smooth_l1 with beta = 0 */
}
/* dl/dd (regression losses). */
static inline ag_real reg_grad(pw_kind k, ag_real d, ag_real p) {
    if (k == L_SMOOTH_L1 && p > 0) return d < -p ? -1 : d > p ? 1 : d / p;
    if (k == L_HUBER) return d < -p ? -p : d > p ? p : d;
    return sgn(d);
}

static void pw_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->in[1], *out = nd->out;
    const pw_saved *s = nd->saved;
    ag_real *gx = x->requires_grad ? x->grad : NULL, *gy = y->requires_grad ? y->grad : NULL;
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        ag_real g = loss_grad_at(out, s->r, i), v = x->data[i], tg = y->data[i];
        if (s->kind == L_KL) {
            if (gx) gx[i] -= g * tg;
            if (gy && tg != 0) gy[i] += g * (M(log)(tg) + 1 - v);
        } else if (s->kind == L_KL_LOG) {
            ag_real e = M(exp)(tg);
            if (gx) gx[i] -= g * e;
            if (gy) gy[i] += g * e * (tg - v + 1);
        } else {
            ag_real dd = g * reg_grad(s->kind, v - tg, s->param);
            if (gx) gx[i] += dd;
            if (gy) gy[i] -= dd;
        }
    }
}
static const ag_op l1_op = {"l1_loss", pw_backward};
static const ag_op smooth_l1_op = {"smooth_l1_loss", pw_backward};
static const ag_op huber_op = {"huber_loss", pw_backward};
static const ag_op kl_op = {"kl_div", pw_backward};

/* The loss of kind over x and target (checked), reduced. */
static ag_tensor *pw_loss(ag_tape *t, const ag_op *op, pw_kind kind, double param, ag_tensor *x,
                          ag_tensor *target, ag_reduction reduction) {
    x = ag_op_contig(t, x);
    target = ag_op_contig(t, target);
    if (!x || !target) return NULL;
    ag_tensor *in[2] = {x, target};
    ag_real *per;
    ag_tensor *y = ag__loss_out(t, reduction, x->ndim, x->shape, 2, in, &per);
    if (!y) return NULL;
    pw_saved s = {{reduction, 1}, kind, (ag_real)param};
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        ag_real v = x->data[i], tg = target->data[i];
        if (kind == L_KL) per[i] = (tg == 0 ? 0 : tg * M(log)(tg)) - tg * v;
        else if (kind == L_KL_LOG) per[i] = M(exp)(tg) * (tg - v);
        else per[i] = reg_loss(kind, v - tg, s.param);
    }
    double denom = reduction == AG_REDUCE_BATCHMEAN && x->ndim ? x->shape[0]
                   : reduction == AG_REDUCE_BATCHMEAN          ? 1
                                                               : (double)x->numel;
    s.r = ag__loss_finish(y, reduction, per, x->numel, denom);
    ag_node *nd = ag_op_record(t, op, y, 2, in, sizeof s);
    if (nd) *(pw_saved *)nd->saved = s;
    return y;
}

ag_tensor *ag_l1_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, ag_reduction reduction) {
    if (!ag__loss_check_pair(t, "l1_loss", x, target, reduction, false)) return NULL;
    return pw_loss(t, &l1_op, L_L1, 0, x, target, reduction);
}

ag_tensor *ag_smooth_l1_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, double beta,
                             ag_reduction reduction) {
    if (!ag__loss_check_pair(t, "smooth_l1_loss", x, target, reduction, false)) return NULL;
    if (!(beta >= 0) || isinf(beta)) {
        char sx[64];
        return ag_report(t, "smooth_l1_loss: beta = %g for input %s, expected finite and >= 0",
                         beta, ag_shape_str(x, sx, sizeof sx));
    }
    return pw_loss(t, &smooth_l1_op, L_SMOOTH_L1, beta, x, target, reduction);
}

ag_tensor *ag_huber_loss(ag_tape *t, ag_tensor *x, ag_tensor *target, double delta,
                         ag_reduction reduction) {
    if (!ag__loss_check_pair(t, "huber_loss", x, target, reduction, false)) return NULL;
    if (!(delta > 0) || isinf(delta)) {
        char sx[64];
        return ag_report(t, "huber_loss: delta = %g for input %s, expected finite and > 0", delta,
                         ag_shape_str(x, sx, sizeof sx));
    }
    return pw_loss(t, &huber_op, L_HUBER, delta, x, target, reduction);
}

ag_tensor *ag_kl_div(ag_tape *t, ag_tensor *input, ag_tensor *target, ag_reduction reduction,
                     bool log_target) {
    if (!ag__loss_check_pair(t, "kl_div", input, target, reduction, true)) return NULL;
    return pw_loss(t, &kl_op, log_target ? L_KL_LOG : L_KL, 0, input, target, reduction);
}
