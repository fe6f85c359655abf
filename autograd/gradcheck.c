/* gradcheck.c -- analytic gradients against central differences.
 *
 * L(inputs) = sum_i R_i f(inputs)_i with R a fixed N(0,1) projection (a plain sum would pass a
 * wrong softmax backward: sum(softmax(x)) is constant). Analytic: one backward seeded with R.
 * Numeric, per checked element x_j: (L(x_j + eps) - L(x_j - eps)) / (2 eps), in the library's
 * precision (use the float64 twin for tight tolerances).
 */
#include "autograd/ag_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gc_run {
    ag_gradcheck_fn fn;
    ag_tensor *const *inputs;
    void *user;
    ag_tape *tape;
    double *proj; /* R, numel of the output */
    ptrdiff_t numel;
} gc_run;

/* Evaluates L with recording off; returns NAN when the function failed. */
static double eval_loss(gc_run *g) {
    ag_tape_reset(g->tape);
    bool prev = ag_tape_set_recording(g->tape, false);
    ag_tensor *y = g->fn(g->tape, g->inputs, g->user);
    ag_tape_set_recording(g->tape, prev);
    if (!y || y->numel != g->numel) return NAN;
    double l = 0;
    for (ptrdiff_t i = 0; i < y->numel; i++) l += g->proj[i] * (double)ag_get(y, i);
    return l;
}

static void defaults(ag_gradcheck_opts *o) {
#ifdef TG_DOUBLE
    const double eps = 1e-6, atol = 1e-6, rtol = 1e-5;
#else
    const double eps = 1e-2, atol = 1e-2, rtol = 5e-2;
#endif
    if (o->eps <= 0) o->eps = eps;
    if (o->atol <= 0) o->atol = atol;
    if (o->rtol <= 0) o->rtol = rtol;
    if (o->seed == 0) o->seed = 0x5eed5eedull;
}

static void fail(ag_gradcheck_result *res, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void fail(ag_gradcheck_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->msg, sizeof res->msg, fmt, ap);
    va_end(ap);
    res->ok = false;
}

/* Appends prefix, x's shape ("[4, 5]") and suffix to the report's shapes (truncated when full). */
static void add_shape(ag_gradcheck_result *res, const char *prefix, const ag_tensor *x,
                      const char *suffix) {
    size_t len = strlen(res->shapes);
    char buf[64];
    if (len + 1 >= sizeof res->shapes) return;
    snprintf(res->shapes + len, sizeof res->shapes - len, "%s%s%s", prefix,
             ag_shape_str(x, buf, sizeof buf), suffix);
}

/* The numeric pass over input i (x): central differences of the checked elements (every one, or
 * max_elems spread evenly) against the analytic gradient in x->grad, into res; stops at the
 * first element out of tolerance. */
static void numeric_pass(gc_run *g, const ag_gradcheck_opts *opts, const char *name, int i,
                         ag_tensor *x, ag_gradcheck_result *res) {
    const ag_gradcheck_opts o = *opts;
    if (!x->requires_grad || x->numel == 0) return;
    ptrdiff_t count = o.max_elems > 0 && o.max_elems < x->numel ? o.max_elems : x->numel;
    for (ptrdiff_t c = 0; c < count; c++) {
        ptrdiff_t j = count == x->numel ? c : c * (x->numel - 1) / (count > 1 ? count - 1 : 1);
        ag_real orig = x->data[j];
        x->data[j] = (ag_real)(orig + o.eps);
        double lp = eval_loss(g);
        x->data[j] = (ag_real)(orig - o.eps);
        double lm = eval_loss(g);
        x->data[j] = orig;
        double h = ((double)(ag_real)(orig + o.eps) - (double)(ag_real)(orig - o.eps)) / 2;
        double num = (lp - lm) / (2 * h), ana = (double)x->grad[j];
        if (o.skip_kinks) {
            double l0 = eval_loss(g), fwd = (lp - l0) / h, bwd = (l0 - lm) / h;
            if (fabs(fwd - bwd) > o.atol + o.rtol * fmax(fabs(fwd), fabs(bwd))) {
                res->skipped++;
                continue;
            }
        }
        double err = fabs(num - ana), scale = fmax(fabs(num), fabs(ana));
        double allowed = o.atol + o.rtol * scale;
        if (err > res->max_abs_err || isnan(err)) res->max_abs_err = err;
        if (scale >= o.atol && (err / scale > res->max_rel_err || isnan(err)))
            res->max_rel_err = err / scale;
        if (err / allowed > res->worst || isnan(err)) res->worst = err / allowed;
        res->checked++;
        if (!(err <= allowed)) {
            fail(res,
                 "gradcheck %s: input %d (%s) element %td: numeric %.10g, analytic %.10g "
                 "(|diff| %.3g > atol %.1g + rtol %.1g * |value|)",
                 name, i, x->name ? x->name : "unnamed", j, num, ana, err, o.atol, o.rtol);
            return;
        }
    }
}

ag_gradcheck_result ag_gradcheck(const char *name, ag_gradcheck_fn fn, int n_inputs,
                                 ag_tensor *const *inputs, void *user,
                                 const ag_gradcheck_opts *opts) {
    ag_gradcheck_result res = {.ok = true};
    ag_gradcheck_opts o = opts ? *opts : (ag_gradcheck_opts){0};
    defaults(&o);
    snprintf(res.name, sizeof res.name, "%s", name ? name : "");
    res.eps = o.eps;
    res.atol = o.atol;
    res.rtol = o.rtol;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i] || inputs[i]->tape || !ag_is_contiguous(inputs[i])) {
            fail(&res, "gradcheck %s: input %d must be a contiguous leaf", name, i);
            return res;
        }
        if (inputs[i]->grad) memset(inputs[i]->grad, 0, (size_t)inputs[i]->numel * sizeof(ag_real));
        add_shape(&res, "", inputs[i], inputs[i]->requires_grad ? " " : " (const) ");
        if (inputs[i]->requires_grad) res.elems += (int)inputs[i]->numel;
    }
    gc_run g = {fn, inputs, user, ag_tape_new(), NULL, 0};
    ag_real *seed = NULL;
    if (!g.tape) {
        fail(&res, "gradcheck %s: out of memory", name);
        return res;
    }
    /* Analytic pass. */
    ag_tensor *y = fn(g.tape, inputs, user);
    if (!y) {
        fail(&res, "gradcheck %s: the function failed: %s", name, ag_last_error());
        goto done;
    }
    g.numel = y->numel;
    add_shape(&res, "-> ", y, "");
    g.proj = malloc((size_t)(g.numel ? g.numel : 1) * sizeof *g.proj);
    seed = malloc((size_t)(g.numel ? g.numel : 1) * sizeof *seed);
    if (!g.proj || !seed) {
        fail(&res, "gradcheck %s: out of memory", name);
        goto done;
    }
    ag_rng rng;
    ag_rng_seed(&rng, o.seed);
    for (ptrdiff_t i = 0; i < g.numel; i++) seed[i] = (ag_real)(g.proj[i] = ag_rng_normal(&rng));
    for (ptrdiff_t i = 0; i < g.numel; i++) g.proj[i] = (double)seed[i]; /* L uses R as seeded */
    if (y->requires_grad && ag_backward_seed(g.tape, y, seed) != 0) {
        fail(&res, "gradcheck %s: backward failed: %s", name, ag_last_error());
        goto done;
    }
    /* Numeric pass. */
    for (int i = 0; i < n_inputs && res.ok; i++) numeric_pass(&g, &o, name, i, inputs[i], &res);
done:
    free(seed);
    free(g.proj);
    ag_tape_free(g.tape);
    return res;
}
