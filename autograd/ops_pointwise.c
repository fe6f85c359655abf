/* ops_pointwise.c -- the model writer's elementwise ops, each PyTorch's definition (forward,
 * gradient, and the gradient chosen at its kinks), on the templates of autograd/map_internal.h:
 *
 *   abs          y = |x|                                 dx = sgn(x) g, 0 at x = 0
 *   pow_scalar   y = x^p                                 dx = p x^(p-1) g, 0 when p = 0
 *   pow          y = a^b (broadcast)                     da = b a^(b-1) g, 0 where b = 0
 *                                                        db = y log(a) g, 0 where a = 0, b >= 0
 *   clamp        y = min(max(x, lo), hi)                 dx = g where lo <= x <= hi (the bounds
 *                                                        included), else 0
 *   maximum      y = max(a, b) (broadcast, NaN wins)     da = g where a > b, g/2 where a = b,
 *                                                        0 where a < b (db: the mirror)
 *   minimum      y = min(a, b) (broadcast, NaN wins)     da = g where a < b, g/2 where a = b,
 *                                                        0 where a > b (db: the mirror)
 *   softplus     y = log1p(exp(beta x)) / beta,          dx = sigmoid(beta x) g,
 *                y = x where beta x > threshold          g where beta x > threshold
 *   silu         y = x s, s = sigmoid(x)                 dx = s (1 + x (1 - s)) g
 *   leaky_relu   y = x (x > 0), slope x (x <= 0)         dx = g (x > 0), slope g (x <= 0)
 *   elu          y = x (x > 0), alpha expm1(x) (x <= 0)  dx = g (x > 0), alpha exp(x) g (x <= 0)
 *   log1p        y = log(1 + x)                          dx = g / (1 + x)
 *   where        y = cond ? a : b (3-way broadcast)      da = g where cond, db = g where not
 *   masked_fill  y = mask ? value : x (x's shape)        dx = g where not mask
 *
 * The conventions at the kinks are PyTorch's derivative formulas (derivatives.yaml and the
 * CPU kernels): abs'(0) = 0 (sgn), clamp passes the gradient at a bound, maximum / minimum
 * split it in halves between equal operands, leaky_relu'(0) = slope and elu'(0) = alpha (the
 * x <= 0 branch), pow's exponent gets nothing at 0^b for b >= 0. A condition or mask is a
 * tensor, true where nonzero (a NaN is true), and never gets a gradient.
 */
#include "autograd/map_internal.h"

#include <math.h>

#ifdef TG_DOUBLE
#define M(fn) fn
#else
#define M(fn) fn##f
#endif

/* ---- unary maps (c, c2: the op's constants) ---- */

UNARY_OP(abs, "abs", M(fabs)(x), x > 0 ? 1 : x < 0 ? -1 : 0)
UNARY_OP(pow_scalar, "pow_scalar", M(pow)(x, (ag_real)c),
         c == 0 ? 0 : (ag_real)c * M(pow)(x, (ag_real)(c - 1)))
/* clamp: c = lo, c2 = hi; max first, then min, so lo > hi gives hi everywhere (PyTorch). */
#define CLAMP_LO(x) ((x) < (ag_real)c ? (ag_real)c : (x))
UNARY_OP(clamp, "clamp", CLAMP_LO(x) > (ag_real)c2 ? (ag_real)c2 : CLAMP_LO(x),
         x >= (ag_real)c && x <= (ag_real)c2 ? 1 : 0)
/* softplus: c = beta, c2 = threshold. */
UNARY_OP(softplus, "softplus",
         x *(ag_real)c > (ag_real)c2 ? x : M(log1p)(ag_exp1(x * (ag_real)c)) / (ag_real)c,
         x *(ag_real)c > (ag_real)c2 ? 1 : ag_sigmoid1(x * (ag_real)c))
UNARY_OP(silu, "silu", x *ag_sigmoid1(x), ag_sigmoid1(x) * (1 + x * (1 - ag_sigmoid1(x))))
UNARY_OP(leaky_relu, "leaky_relu", x > 0 ? x : x * (ag_real)c, x > 0 ? 1 : (ag_real)c)
UNARY_OP(elu, "elu", x > 0 ? x : (ag_real)c * M(expm1)(x), x > 0 ? 1 : (ag_real)c * ag_exp1(x))
UNARY_OP(log1p, "log1p", M(log1p)(x), 1 / (1 + x))

ag_tensor *ag_abs(ag_tape *t, ag_tensor *x) { return abs_impl(t, x, 0, 0); }
ag_tensor *ag_pow_scalar(ag_tape *t, ag_tensor *x, double p) { return pow_scalar_impl(t, x, p, 0); }
ag_tensor *ag_silu(ag_tape *t, ag_tensor *x) { return silu_impl(t, x, 0, 0); }
ag_tensor *ag_log1p(ag_tape *t, ag_tensor *x) { return log1p_impl(t, x, 0, 0); }
ag_tensor *ag_elu(ag_tape *t, ag_tensor *x, double alpha) { return elu_impl(t, x, alpha, 0); }
ag_tensor *ag_leaky_relu(ag_tape *t, ag_tensor *x, double negative_slope) {
    return leaky_relu_impl(t, x, negative_slope, 0);
}

ag_tensor *ag_clamp(ag_tape *t, ag_tensor *x, double min, double max) {
    if (!ag_op_check(t, "clamp", 1, &x)) return NULL;
    if (isnan(min) || isnan(max)) {
        char sx[64];
        return ag_report(t, "clamp: bound %s is NaN (x %s)", isnan(min) ? "min" : "max",
                         ag_shape_str(x, sx, sizeof sx));
    }
    return clamp_impl(t, x, min, max);
}

ag_tensor *ag_softplus(ag_tape *t, ag_tensor *x, double beta, double threshold) {
    if (!ag_op_check(t, "softplus", 1, &x)) return NULL;
    if (beta == 0 || isnan(beta) || isnan(threshold)) {
        char sx[64];
        return ag_report(t,
                         "softplus: beta = %g, threshold = %g (x %s): beta must be nonzero, "
                         "neither NaN",
                         beta, threshold, ag_shape_str(x, sx, sizeof sx));
    }
    return softplus_impl(t, x, beta, threshold);
}

/* ---- binary maps with broadcasting ---- */

BINARY_OP(pow, "pow", M(pow)(a, b), b == 0 ? 0 : g * b * M(pow)(a, b - 1),
          a == 0 && b >= 0 ? 0 : g * y * M(log)(a))
/* NaN wins: a when a > b or a is NaN, else b (NaN when b is). */
BINARY_OP(maximum, "maximum", a > b || a != a ? a : b,
          a<b          ? 0
              : a == b ? g / 2
                       : g,
              a>
                  b
              ? 0
          : a == b ? g / 2
                   : g)
BINARY_OP(minimum, "minimum",
          a<b || a != a ? a : b, a> b ? 0
          : a == b ? g / 2
                   : g,
          a < b    ? 0
          : a == b ? g / 2
                   : g)

/* ---- where / masked_fill: y = cond ? a : b over the broadcast of the three ----
 * masked_fill is where(mask, value, x) with the constant value for a, its result x's shape. */

enum { W_Y, W_C, W_A, W_B };

typedef struct where_layout {
    int nd;
    int shape[AG_MAX_DIMS];
    ptrdiff_t st[4][AG_MAX_DIMS]; /* y, cond, a, b; 0 along broadcast axes */
    bool has_a;                   /* false: a is the constant value (masked_fill) */
    ag_real value;
} where_layout;

/* The broadcast of cond, a (NULL: a scalar) and b into L; false after reporting. */
static bool where_broadcast(ag_tape *t, const char *op, const ag_tensor *c, const ag_tensor *a,
                            const ag_tensor *b, where_layout *L) {
    const ag_tensor *in[3] = {c, a, b};
    L->nd = 0;
    for (int k = 0; k < 3; k++)
        if (in[k] && in[k]->ndim > L->nd) L->nd = in[k]->ndim;
    for (int d = 0; d < L->nd; d++) {
        int n = 1;
        for (int k = 0; k < 3; k++) {
            int dk = in[k] ? d - (L->nd - in[k]->ndim) : -1, nk = dk >= 0 ? in[k]->shape[dk] : 1;
            if (nk != 1 && n != 1 && nk != n) {
                char s0[64], s1[64], s2[64];
                ag_report(t, "%s: shapes %s, %s and %s do not broadcast (axis %d)", op,
                          ag_shape_str(c, s0, sizeof s0), a ? ag_shape_str(a, s1, sizeof s1) : "[]",
                          ag_shape_str(b, s2, sizeof s2), d);
                return false;
            }
            if (nk != 1) n = nk;
            L->st[W_C + k][d] = nk == 1 ? 0 : in[k]->stride[dk];
        }
        L->shape[d] = n;
    }
    ag_contig_strides(L->nd, L->shape, L->st[W_Y]);
    return true;
}

/* Walks L's shape in row-major order; off[k] is the element offset of stride set k. */
static bool where_next(const where_layout *L, int *idx, ptrdiff_t *off) {
    for (int d = L->nd - 1; d >= 0; d--) {
        for (int k = 0; k < 4; k++) off[k] += L->st[k][d];
        if (++idx[d] < L->shape[d]) return true;
        for (int k = 0; k < 4; k++) off[k] -= L->st[k][d] * L->shape[d];
        idx[d] = 0;
    }
    return false;
}

/* in: {a, b, cond} (where) or {b, cond} (masked_fill, b = x). */
static void where_backward(ag_node *n) {
    const where_layout *L = n->saved;
    ag_tensor *y = n->out, *a = L->has_a ? n->in[0] : NULL, *b = n->in[L->has_a ? 1 : 0];
    ag_tensor *c = n->in[L->has_a ? 2 : 1];
    ag_real *ga = a && a->requires_grad ? a->grad : NULL, *gb = b->requires_grad ? b->grad : NULL;
    if (y->numel == 0) return;
    int idx[AG_MAX_DIMS] = {0};
    ptrdiff_t off[4] = {0, 0, 0, 0};
    do {
        bool pick_a = c->data[off[W_C]] != 0;
        if (pick_a && ga) ga[off[W_A]] += y->grad[off[W_Y]];
        if (!pick_a && gb) gb[off[W_B]] += y->grad[off[W_Y]];
    } while (where_next(L, idx, off));
}
static const ag_op where_op = {"where", where_backward};
static const ag_op masked_fill_op = {"masked_fill", where_backward};

static ag_tensor *where_run(ag_tape *t, const ag_op *op, where_layout *L, ag_tensor *c,
                            ag_tensor *a, ag_tensor *b) {
    ag_tensor *in[3] = {a, b, c}, **rec = a ? in : in + 1;
    int n_rec = a ? 3 : 2, n_grad = a ? 2 : 1; /* cond never carries a gradient */
    ag_tensor *y = ag_op_new(t, L->nd, L->shape, ag_op_wants_grad(t, n_grad, rec));
    if (!y) return NULL;
    if (y->numel > 0) {
        int idx[AG_MAX_DIMS] = {0};
        ptrdiff_t off[4] = {0, 0, 0, 0};
        do {
            bool pick_a = c->data[off[W_C]] != 0;
            y->data[off[W_Y]] = pick_a ? (a ? a->data[off[W_A]] : L->value) : b->data[off[W_B]];
        } while (where_next(L, idx, off));
    }
    ag_node *nd = ag_op_record(t, op, y, n_rec, rec, sizeof *L);
    if (nd) *(where_layout *)nd->saved = *L;
    return y;
}

ag_tensor *ag_where(ag_tape *t, ag_tensor *cond, ag_tensor *a, ag_tensor *b) {
    ag_tensor *in[3] = {cond, a, b};
    where_layout L = {.has_a = true};
    if (!ag_op_check(t, "where", 3, in) || !where_broadcast(t, "where", cond, a, b, &L))
        return NULL;
    return where_run(t, &where_op, &L, cond, a, b);
}

ag_tensor *ag_masked_fill(ag_tape *t, ag_tensor *x, ag_tensor *mask, double value) {
    ag_tensor *in[2] = {x, mask};
    where_layout L = {.has_a = false, .value = (ag_real)value};
    if (!ag_op_check(t, "masked_fill", 2, in) ||
        !where_broadcast(t, "masked_fill", mask, NULL, x, &L))
        return NULL;
    bool same = L.nd == x->ndim;
    for (int d = 0; same && d < L.nd; d++) same = L.shape[d] == x->shape[d];
    if (!same) {
        char sx[64], sm[64];
        return ag_report(t, "masked_fill: mask %s does not broadcast to the shape of x %s",
                         ag_shape_str(mask, sm, sizeof sm), ag_shape_str(x, sx, sizeof sx));
    }
    return where_run(t, &masked_fill_op, &L, mask, NULL, x);
}
