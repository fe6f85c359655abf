/* ops_elementwise.c -- binary ops with NumPy broadcasting, scalar ops, unary maps (the
 * templates: autograd/map_internal.h).
 */
#include "autograd/map_internal.h"

#include <math.h>

/* d(a+b) = (1, 1); d(a-b) = (1, -1); d(ab) = (b, a); d(a/b) = (1/b, -a/b^2) = (1/b, -y/b). */
BINARY_OP(add, "add", a + b, g, g)
BINARY_OP(sub, "sub", a - b, g, -g)
BINARY_OP(mul, "mul", a *b, g *b, g *a)
BINARY_OP(div, "div", a / b, g / b, -g *y / b)

#ifdef TG_DOUBLE
#define M(fn) fn
#else
#define M(fn) fn##f
#endif

UNARY_OP(neg, "neg", -x, -1)
UNARY_OP(exp, "exp", ag_exp1(x), y)
UNARY_OP(log, "log", M(log)(x), 1 / x)
UNARY_OP(sqrt, "sqrt", M(sqrt)(x), (ag_real)0.5 / y)
UNARY_OP(tanh, "tanh", ag_tanh1(x), 1 - y * y)
UNARY_OP(sigmoid, "sigmoid", ag_sigmoid1(x), y *(1 - y))
UNARY_OP(relu, "relu", x > 0 ? x : 0, x > 0 ? 1 : 0)
UNARY_OP(add_scalar, "add_scalar", x + (ag_real)c, 1)
UNARY_OP(scale, "scale", x *(ag_real)c, (ag_real)c)

/* GELU, exact (erf) form, x any shape:
 *   y = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2   (the standard normal's CDF)
 *   dy/dx = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi) */
#define RSQRT2 ((ag_real)0.70710678118654752440)
#define RSQRT2PI ((ag_real)0.39894228040143267794)
#define PHI(x) ((ag_real)0.5 * (1 + M(erf)((x)*RSQRT2)))
UNARY_OP(gelu, "gelu", x *PHI(x), PHI(x) + x * RSQRT2PI * M(exp)((ag_real)-0.5 * x * x))

ag_tensor *ag_neg(ag_tape *t, ag_tensor *x) { return neg_impl(t, x, 0, 0); }
ag_tensor *ag_exp(ag_tape *t, ag_tensor *x) { return exp_impl(t, x, 0, 0); }
ag_tensor *ag_log(ag_tape *t, ag_tensor *x) { return log_impl(t, x, 0, 0); }
ag_tensor *ag_sqrt(ag_tape *t, ag_tensor *x) { return sqrt_impl(t, x, 0, 0); }
ag_tensor *ag_tanh(ag_tape *t, ag_tensor *x) { return tanh_impl(t, x, 0, 0); }
ag_tensor *ag_sigmoid(ag_tape *t, ag_tensor *x) { return sigmoid_impl(t, x, 0, 0); }
ag_tensor *ag_relu(ag_tape *t, ag_tensor *x) { return relu_impl(t, x, 0, 0); }
ag_tensor *ag_gelu(ag_tape *t, ag_tensor *x) { return gelu_impl(t, x, 0, 0); }
ag_tensor *ag_add_scalar(ag_tape *t, ag_tensor *x, double c) { return add_scalar_impl(t, x, c, 0); }
ag_tensor *ag_scale(ag_tape *t, ag_tensor *x, double c) { return scale_impl(t, x, c, 0); }
