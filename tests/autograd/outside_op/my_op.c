/* my_op.c -- an op written outside the library, on the public op API only (docs/adding-an-op.md
 * walks through it). Built twice from this file (tests/autograd/CMakeLists.txt): against `ag`
 * (float32) it checks the forward; against `ag64` (float64, TG_DOUBLE) it also checks the
 * gradients with ag_gradcheck. Exit status 0 when every check passed.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/ag_op.h"

/* ---- the op: softplus with a sharpness beta > 0 ----------------------------------------
 *   y = log(1 + exp(beta x)) / beta          elementwise, any shape; (beta -> inf: relu)
 *     = max(x, 0) + log1p(exp(-beta |x|)) / beta   (the form computed: exp never overflows)
 * Backward, g = dy:
 *   dx += g sigmoid(beta x)
 * beta is the op's state: kept in the node's saved block. */

typedef struct softplus_saved {
    double beta;
} softplus_saved;

static void softplus_backward(ag_node *n) {
    ag_tensor *x = n->in[0], *y = n->out;
    const double beta = ((const softplus_saved *)n->saved)->beta;
    if (!x->requires_grad) return;
    for (ptrdiff_t i = 0; i < x->numel; i++) /* ADD into the input's gradient, never assign */
        x->grad[i] += y->grad[i] * (ag_real)(1 / (1 + exp(-beta * x->data[i])));
}
static const ag_op softplus_op = {"softplus", softplus_backward};

ag_tensor *my_softplus(ag_tape *t, ag_tensor *x, double beta) {
    if (!ag_op_check(t, "softplus", 1, &x)) return NULL; /* NULL in: NULL out, no message */
    if (!(beta > 0)) {
        char sx[64];
        return ag_report(t, "softplus: beta = %g for input %s, expected > 0", beta,
                         ag_shape_str(x, sx, sizeof sx));
    }
    x = ag_op_contig(t, x); /* a recorded copy of a view */
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL; /* grad iff wanted */
    if (!y) return NULL;
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        double v = x->data[i];
        y->data[i] = (ag_real)((v > 0 ? v : 0) + log1p(exp(-beta * fabs(v))) / beta);
    }
    ag_node *n = ag_op_record(t, &softplus_op, y, 1, &x, sizeof(softplus_saved));
    if (n) ((softplus_saved *)n->saved)->beta = beta; /* NULL when no gradient is wanted */
    return y;
}

/* ---- the checks -------------------------------------------------------------------------- */

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "my_op: FAILED %s: ", #cond);                                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static char last_msg[512];
static void capture(const char *msg, void *user) {
    (void)user;
    snprintf(last_msg, sizeof last_msg, "%s", msg);
}

/* Values against libm in double, on a strided view; a bad beta is reported; NULL propagates. */
static void check_forward(void) {
    const double tol = sizeof(ag_real) == 4 ? 1e-6 : 1e-14; /* relative */
    ag_tape *t = ag_tape_new();
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(3, 4));
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = (ag_real)(-40 + 8.0 * i); /* -40 .. 48 */
    ag_tensor *xt = ag_transpose(t, x, 0, 1);
    ag_tensor *y = my_softplus(t, xt, 0.5);
    CHECK(y && y->ndim == 2 && y->shape[0] == 4 && y->shape[1] == 3, "shape");
    for (ptrdiff_t i = 0; y && i < y->numel; i++) {
        double v = ag_get(xt, i), want = log1p(exp(0.5 * v)) / 0.5;
        CHECK(fabs(y->data[i] - want) <= tol * fmax(1, fabs(want)),
              "softplus(%g) = %.17g, want %.17g", v, (double)y->data[i], want);
    }
    ag_set_error_handler(capture, NULL);
    CHECK(!my_softplus(t, x, 0), "beta 0 accepted");
    CHECK(strstr(last_msg, "softplus") && strstr(last_msg, "[3, 4]"), "message: %s", last_msg);
    last_msg[0] = 0;
    CHECK(!my_softplus(t, NULL, 1) && !last_msg[0], "NULL input: NULL, no second message");
    ag_set_error_handler(NULL, NULL);
    ag_tape_free(t);
}

#ifdef TG_DOUBLE
static ag_tensor *f_softplus(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    return my_softplus(t, x[0], 1.5);
}
/* A strided view in (the op makes it contiguous, a recorded copy). */
static ag_tensor *f_softplus_view(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    return my_softplus(t, ag_transpose(t, x[0], 0, 1), 0.7);
}
/* The input used twice, x * softplus(x): a backward that assigned would lose the product's
 * share of x's gradient. */
static ag_tensor *f_softplus_twice(ag_tape *t, ag_tensor *const *x, void *u) {
    (void)u;
    return ag_mul(t, x[0], my_softplus(t, x[0], 0.7));
}

static void check_gradients(void) {
    struct {
        const char *name;
        ag_gradcheck_fn fn;
    } rows[] = {
        {"softplus", f_softplus},
        {"softplus of a strided view", f_softplus_view},
        {"softplus, input used twice", f_softplus_twice},
    };
    ag_rng rng;
    ag_rng_seed(&rng, 5);
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        ag_tensor *x = ag_leaf_new(AG_SHAPE(3, 5), true);
        for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = 2 * ag_rng_normal(&rng);
        ag_gradcheck_result res = ag_gradcheck(rows[r].name, rows[r].fn, 1, &x, NULL, NULL);
        CHECK(res.ok && res.checked == 15, "%s", res.msg);
        ag_leaf_free(x);
    }
}
#endif

int main(void) {
    check_forward();
#ifdef TG_DOUBLE
    check_gradients();
#endif
    printf("my_op (%s): %s\n",
           sizeof(ag_real) == 4 ? "float32, forward" : "float64, forward and gradcheck",
           failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
