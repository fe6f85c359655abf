/* torch_diff.c -- the float64 side of the differential test against PyTorch (README.md).
 *
 * For each case: inputs drawn from one seeded ag_rng (some rounded to a grid, so ties, kinks and
 * bounds are hit exactly), the op or layer run forward on tapegrad's float64 build, every output
 * y_k projected by a random R_k (L = sum_k sum(R_k * y_k), as ag_gradcheck), ag_backward(L).
 * Written to the output file as text (%.17g, exact for doubles):
 *   case NAME                   a new case
 *   a KEY VALUE                 an argument of the case (python reads it)
 *   t KIND:NAME NDIM D0 .. \n V0 V1 ...
 *     KIND in: an input (leaf or parameter)   out: an output   R: the projection of out:NAME
 *     grad: the gradient of L w.r.t. in:NAME  idx: integer data (indices, lengths)
 *   end
 * torch_diff.py recomputes each case with torch.float64 from the same inputs and compares.
 * The helpers below are shared with torch_diff_edge.c (non-finite inputs) through torch_diff.h.
 * Build: see README.md (links the float64 twins ag64, nn64, optim64). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torch_diff.h"

#ifndef TG_DOUBLE
#error "torch_diff must be built with -DTG_DOUBLE against the float64 libraries"
#endif

FILE *out;
ag_rng rng;
ag_tape *T;
static ag_tensor *L;
#define MAXIN 24
static ag_tensor *ins[MAXIN];
static char in_names[MAXIN][64];
static int nin;
static nn_params *case_ps;

double unif(double lo, double hi) { return lo + (hi - lo) * ag_rng_uniform(&rng); }

static void put_vals(const char *key, int ndim, const int *shape, const double *v, ptrdiff_t n) {
    fprintf(out, "t %s %d", key, ndim);
    for (int i = 0; i < ndim; i++) fprintf(out, " %d", shape[i]);
    fputc('\n', out);
    for (ptrdiff_t i = 0; i < n; i++) fprintf(out, "%s%.17g", i ? " " : "", v[i]);
    fputc('\n', out);
}

void put(const char *kind, const char *name, const ag_tensor *x) {
    char key[128];
    snprintf(key, sizeof key, "%s:%s", kind, name);
    double *v = malloc(sizeof(double) * (size_t)(x->numel ? x->numel : 1));
    ag_copy_out_f64(x, v, (size_t)x->numel);
    put_vals(key, x->ndim, x->shape, v, x->numel);
    free(v);
}

static void put_grad(const char *name, const ag_tensor *x) {
    char key[128];
    snprintf(key, sizeof key, "grad:%s", name);
    put_vals(key, x->ndim, x->shape, x->grad, x->numel); /* leaves are contiguous */
}

void put_idx(const char *name, int ndim, const int *shape, const int32_t *v, int n) {
    char key[128];
    double d[256];
    snprintf(key, sizeof key, "idx:%s", name);
    for (int i = 0; i < n; i++) d[i] = v[i];
    put_vals(key, ndim, shape, d, n);
}

void arg(const char *k, double v) { fprintf(out, "a %s %.17g\n", k, v); }

void begin(const char *name) {
    fprintf(out, "case %s\n", name);
    ag_tape_reset(T);
    nin = 0;
    L = NULL;
    case_ps = NULL;
}

/* An input leaf with values U(lo, hi), rounded to multiples of q when q > 0. */
ag_tensor *in(const char *name, int ndim, const int *shape, double lo, double hi, double q,
              bool grad) {
    ag_tensor *x = ag_leaf_new(ndim, shape, grad);
    for (ptrdiff_t i = 0; i < x->numel; i++) {
        double v = unif(lo, hi);
        x->data[i] = q > 0 ? q * nearbyint(v / q) : v;
    }
    ins[nin] = x;
    snprintf(in_names[nin++], 64, "%s", name);
    put("in", name, x);
    return x;
}

/* Records output y: written, projected by a fresh random R, added to L. */
void output(const char *name, ag_tensor *y) {
    if (!y) {
        fprintf(stderr, "torch_diff: %s: %s\n", name, ag_last_error());
        exit(1);
    }
    put("out", name, y);
    ag_tensor *r = ag_tensor_new(T, y->ndim, y->shape);
    for (ptrdiff_t i = 0; i < r->numel; i++) r->data[i] = unif(-1, 1);
    put("R", name, r);
    ag_tensor *l = ag_sum(T, ag_mul(T, y, r), AG_ALL, false);
    L = L ? ag_add(T, L, l) : l;
}

void finish(void) {
    if (L && L->requires_grad && ag_backward(T, L) != 0) {
        fprintf(stderr, "torch_diff: backward: %s\n", ag_last_error());
        exit(1);
    }
    for (int i = 0; i < nin; i++) {
        if (ins[i]->requires_grad) put_grad(in_names[i], ins[i]);
        ag_leaf_free(ins[i]);
    }
    if (case_ps)
        for (size_t i = 0; i < nn_params_count(case_ps); i++) {
            ag_tensor *p = nn_params_at(case_ps, i);
            put_grad(p->name, p);
        }
    fputs("end\n", out);
}

#define S(...) AG_SHAPE(__VA_ARGS__)

/* ---- autograd ops ---------------------------------------------------------------------- */

static void unary_cases(void) {
    begin("abs");
    output("y", ag_abs(T, in("x", S(3, 5), -2, 2, 0.5, true)));
    finish();
    begin("log1p");
    output("y", ag_log1p(T, in("x", S(3, 5), -0.9, 3, 0, true)));
    finish();
    begin("silu");
    output("y", ag_silu(T, in("x", S(3, 5), -6, 6, 0, true)));
    finish();
    begin("leaky_relu");
    arg("slope", 0.2);
    output("y", ag_leaky_relu(T, in("x", S(3, 5), -2, 2, 0.5, true), 0.2));
    finish();
    begin("elu");
    arg("alpha", 1.5);
    output("y", ag_elu(T, in("x", S(3, 5), -3, 2, 0.5, true), 1.5));
    finish();
    const double sp[][2] = {{1, 20}, {2, 1}, {0.5, 3}};
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "softplus_b%g_t%g", sp[i][0], sp[i][1]);
        begin(nm);
        arg("beta", sp[i][0]);
        arg("threshold", sp[i][1]);
        output("y", ag_softplus(T, in("x", S(4, 6), -8, 8, 0.25, true), sp[i][0], sp[i][1]));
        finish();
    }
    const double ps[] = {2.5, -1.5, 3, 0, 1};
    for (int i = 0; i < 5; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "pow_scalar_%g", ps[i]);
        begin(nm);
        arg("p", ps[i]);
        double lo = (ps[i] == 3 || ps[i] == 0 || ps[i] == 1) ? -2 : 0.2;
        output("y", ag_pow_scalar(T, in("x", S(3, 4), lo, 2, 0, true), ps[i]));
        finish();
    }
    begin("pow_tensor");
    output("y", ag_pow(T, in("a", S(3, 4), 0.3, 2, 0, true), in("b", S(4), -1.5, 2.5, 0, true)));
    finish();
    begin("pow_tensor_zero_base");
    {
        ag_tensor *a = in("a", S(6), 0, 1, 0, true), *b = in("b", S(6), 0, 1, 0, true);
        const double av[] = {0, 0, 0, 1.5, 0.7, 2}, bv[] = {0, 1, 2, 2.5, 0, -1};
        memcpy(a->data, av, sizeof av);
        memcpy(b->data, bv, sizeof bv);
        fputs("a zero_base 1\n", out);
        put("in", "a", a);
        put("in", "b", b);
        output("y", ag_pow(T, a, b));
    }
    finish();
    const double cl[][2] = {{-0.5, 1}, {-0.25, INFINITY}, {-INFINITY, 0.5}, {1, -1}};
    for (int i = 0; i < 4; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "clamp_%g_%g", cl[i][0], cl[i][1]);
        begin(nm);
        arg("min", cl[i][0]);
        arg("max", cl[i][1]);
        output("y", ag_clamp(T, in("x", S(4, 5), -2, 2, 0.25, true), cl[i][0], cl[i][1]));
        finish();
    }
}

static void binary_cases(void) {
    begin("maximum_ties");
    output("y", ag_maximum(T, in("a", S(3, 4), -1, 1, 0.5, true), in("b", S(4), -1, 1, 0.5, true)));
    finish();
    begin("minimum_ties");
    output("y", ag_minimum(T, in("a", S(3, 4), -1, 1, 0.5, true), in("b", S(4), -1, 1, 0.5, true)));
    finish();
    begin("where");
    {
        ag_tensor *cond = in("cond", S(3, 1), 0, 1, 1, false);
        output("y",
               ag_where(T, cond, in("a", S(3, 4), -1, 1, 0, true), in("b", S(4), -1, 1, 0, true)));
    }
    finish();
    begin("masked_fill");
    arg("value", -7.5);
    {
        ag_tensor *x = in("x", S(2, 3, 4), -1, 1, 0, true);
        output("y", ag_masked_fill(T, x, in("mask", S(3, 1), 0, 1, 1, false), -7.5));
    }
    finish();
}

static void reduce_cases(void) {
    const int axes[] = {1, 0, AG_ALL};
    for (int i = 0; i < 3; i++)
        for (int kd = 0; kd < 2; kd++) {
            char nm[64];
            snprintf(nm, sizeof nm, "logsumexp_ax%d_kd%d", axes[i], kd);
            begin(nm);
            arg("axis", axes[i]);
            arg("keepdim", kd);
            double sc = i == 1 ? 400 : 3; /* large values: the max shift */
            output("y", ag_logsumexp(T, in("x", S(3, 5), -sc, sc, 0, true), axes[i], kd));
            finish();
        }
    for (int mx = 0; mx < 2; mx++)
        for (int kd = 0; kd < 2; kd++) {
            char nm[64];
            int32_t idx[16];
            snprintf(nm, sizeof nm, "%s_dim_kd%d", mx ? "max" : "min", kd);
            begin(nm);
            arg("keepdim", kd);
            ag_tensor *x = in("x", S(4, 5), -1, 1, 0.5, true);
            output("y", mx ? ag_max_dim(T, x, 1, kd, idx, 16) : ag_min_dim(T, x, 1, kd, idx, 16));
            put_idx("indices", S(4), idx, 4);
            finish();
        }
    for (int mx = 0; mx < 2; mx++)
        for (int i = 0; i < 3; i++) {
            char nm[64];
            snprintf(nm, sizeof nm, "%s_ax%d", mx ? "amax" : "amin", axes[i]);
            begin(nm);
            arg("axis", axes[i]);
            ag_tensor *x = in("x", S(4, 5), -1, 1, 0.5, true);
            output("y", mx ? ag_amax(T, x, axes[i], false) : ag_amin(T, x, axes[i], false));
            finish();
        }
    for (int sd = 0; sd < 2; sd++)
        for (int corr = 0; corr < 2; corr++)
            for (int i = 0; i < 3; i += 2) {
                char nm[64];
                snprintf(nm, sizeof nm, "%s_c%d_ax%d", sd ? "std" : "var", corr, axes[i]);
                begin(nm);
                arg("correction", corr);
                arg("axis", axes[i]);
                ag_tensor *x = in("x", S(3, 5), -2, 2, 0, true);
                if (axes[i] == 1) /* a constant row: std = 0 */
                    for (int j = 0; j < 5; j++) x->data[5 + j] = 0.75;
                put("in", "x", x);
                output("y",
                       sd ? ag_std(T, x, axes[i], corr, true) : ag_var(T, x, axes[i], corr, false));
                finish();
            }
}

static void index_cases(void) {
    const int sax[] = {0, 1, 2, -1};
    for (int i = 0; i < 4; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "stack_ax%d", sax[i]);
        begin(nm);
        arg("axis", sax[i]);
        ag_tensor *xs[3] = {in("x0", S(2, 3), -1, 1, 0, true), in("x1", S(2, 3), -1, 1, 0, true),
                            in("x2", S(2, 3), -1, 1, 0, true)};
        output("y", ag_stack(T, 3, xs, sax[i]));
        finish();
    }
    begin("index_select_ax1");
    {
        const int32_t ix[] = {2, 0, 2, 3, 2};
        ag_tensor *x = in("x", S(3, 4), -1, 1, 0, true);
        put_idx("index", S(5), ix, 5);
        output("y", ag_index_select(T, x, 1, ix, 5));
    }
    finish();
    begin("index_select_ax0");
    {
        const int32_t ix[] = {1, 1, 0};
        ag_tensor *x = in("x", S(2, 3, 2), -1, 1, 0, true);
        put_idx("index", S(3), ix, 3);
        output("y", ag_index_select(T, x, 0, ix, 3));
    }
    finish();
    begin("gather_ax1");
    {
        const int32_t ix[] = {0, 3, 3, 1, 2, 2, 0, 0};
        ag_tensor *x = in("x", S(3, 4), -1, 1, 0, true);
        put_idx("index", S(2, 4), ix, 8);
        output("y", ag_gather(T, x, 1, ix, S(2, 4)));
    }
    finish();
    begin("gather_ax0");
    {
        const int32_t ix[] = {2, 0, 1, 2, 2, 2};
        ag_tensor *x = in("x", S(3, 4), -1, 1, 0, true);
        put_idx("index", S(2, 3), ix, 6);
        output("y", ag_gather(T, x, 0, ix, S(2, 3)));
    }
    finish();
}

static const char *red_name[] = {"mean", "sum", "none", "batchmean"};

static void loss_cases(void) {
    for (int r = 0; r < 3; r++) {
        char nm[64];
        snprintf(nm, sizeof nm, "l1_loss_%s", red_name[r]);
        begin(nm);
        arg("reduction", r);
        output("y", ag_l1_loss(T, in("x", S(3, 4), -1, 1, 0.5, true),
                               in("y", S(3, 4), -1, 1, 0.5, true), (ag_reduction)r));
        finish();
        const double betas[] = {1, 0.5, 0};
        for (int b = 0; b < 3; b++) {
            snprintf(nm, sizeof nm, "smooth_l1_b%g_%s", betas[b], red_name[r]);
            begin(nm);
            arg("reduction", r);
            arg("beta", betas[b]);
            output("y", ag_smooth_l1_loss(T, in("x", S(3, 4), -1.5, 1.5, 0.5, true),
                                          in("y", S(3, 4), -1.5, 1.5, 0.5, true), betas[b],
                                          (ag_reduction)r));
            finish();
        }
        const double deltas[] = {1, 0.5};
        for (int d = 0; d < 2; d++) {
            snprintf(nm, sizeof nm, "huber_d%g_%s", deltas[d], red_name[r]);
            begin(nm);
            arg("reduction", r);
            arg("delta", deltas[d]);
            output("y", ag_huber_loss(T, in("x", S(3, 4), -1.5, 1.5, 0.5, true),
                                      in("y", S(3, 4), -1.5, 1.5, 0.5, true), deltas[d],
                                      (ag_reduction)r));
            finish();
        }
    }
    for (int r = 0; r < 4; r++)
        for (int lt = 0; lt < 2; lt++) {
            char nm[64];
            snprintf(nm, sizeof nm, "kl_div_%s_lt%d", red_name[r], lt);
            begin(nm);
            arg("reduction", r);
            arg("log_target", lt);
            ag_tensor *x = in("x", S(3, 4), -3, 0, 0, true);
            ag_tensor *y =
                lt ? in("t", S(3, 4), -3, 0.5, 0, true) : in("t", S(3, 4), -0.3, 1, 0, true);
            if (!lt) { /* probabilities with exact zeros where the draw was negative */
                for (int i = 0; i < 12; i++) y->data[i] = y->data[i] < 0 ? 0 : y->data[i];
                put("in", "t", y);
            }
            output("y", ag_kl_div(T, x, y, (ag_reduction)r, lt));
            finish();
        }
}

/* ---- nn layers --------------------------------------------------------------------------- */

/* Finalizes the case's store, gives every parameter U(-0.5, 0.5) values, writes them. */
static void params_ready(nn_params *ps) {
    nn_params_finalize(ps, 1);
    case_ps = ps;
    for (size_t i = 0; i < nn_params_tensor_count(ps); i++) {
        ag_tensor *p = nn_params_tensor_at(ps, i);
        if (!p->requires_grad) continue; /* buffers keep their init */
        for (ptrdiff_t j = 0; j < p->numel; j++) p->data[j] = unif(-0.5, 0.5);
        put("in", p->name, p);
    }
}

static void conv_cases(void) {
    nn_ctx c = {T, true, NULL, NULL};
    for (int v = 0; v < 2; v++) {
        begin(v ? "conv1d_s2_p1_d2_g2" : "conv1d_default");
        nn_params *ps = nn_params_new();
        nn_conv1d l;
        nn_conv1d_opts o = {2, 1, 2, 2, false}, o0 = {0};
        nn_conv1d_init(&l, ps, "conv", 4, 6, 3, v ? &o : &o0);
        arg("stride", v ? 2 : 1), arg("padding", v), arg("dilation", v ? 2 : 1),
            arg("groups", v ? 2 : 1);
        params_ready(ps);
        output("y", nn_conv1d_forward(&l, &c, in("x", S(2, 4, 11), -1, 1, 0, true)));
        finish();
        nn_params_free(ps);
    }
    for (int v = 0; v < 2; v++) {
        begin(v ? "conv2d_s21_p10_d12_g2" : "conv2d_default");
        nn_params *ps = nn_params_new();
        nn_conv2d l;
        nn_conv2d_opts o = {{2, 1}, {1, 0}, {1, 2}, 2, false},
                       o0 = {{0, 0}, {0, 0}, {0, 0}, 0, false};
        nn_conv2d_init(&l, ps, "conv", 4, 6, 3, 2, v ? &o : &o0);
        arg("stride0", v ? 2 : 1), arg("stride1", 1), arg("padding0", v), arg("padding1", 0);
        arg("dilation0", 1), arg("dilation1", v ? 2 : 1), arg("groups", v ? 2 : 1);
        params_ready(ps);
        output("y", nn_conv2d_forward(&l, &c, in("x", S(2, 4, 7, 8), -1, 1, 0, true)));
        finish();
        nn_params_free(ps);
    }
    /* pools: kernel, stride, padding; q > 0 draws ties */
    const int pk[][3] = {{3, 2, 1}, {2, 0, 1}, {3, 1, 0}, {2, 2, 0}};
    for (int d = 1; d <= 2; d++)
        for (int avg = 0; avg < 2; avg++)
            for (int i = 0; i < 4; i++)
                for (int tie = 0; tie < 1 + !avg; tie++) {
                    char nm[64];
                    snprintf(nm, sizeof nm, "%s_pool%dd_k%d_s%d_p%d%s", avg ? "avg" : "max", d,
                             pk[i][0], pk[i][1], pk[i][2], tie ? "_ties" : "");
                    begin(nm);
                    arg("kernel", pk[i][0]), arg("stride", pk[i][1]), arg("padding", pk[i][2]);
                    ag_tensor *x = d == 1 ? in("x", S(2, 3, 9), -1, 1, tie ? 0.5 : 0, true)
                                          : in("x", S(2, 2, 7, 6), -1, 1, tie ? 0.5 : 0, true);
                    ag_tensor *y;
                    if (d == 1)
                        y = avg ? nn_avg_pool1d(&c, x, pk[i][0], pk[i][1], pk[i][2])
                                : nn_max_pool1d(&c, x, pk[i][0], pk[i][1], pk[i][2]);
                    else
                        y = avg ? nn_avg_pool2d(&c, x, pk[i][0], pk[i][1], pk[i][2])
                                : nn_max_pool2d(&c, x, pk[i][0], pk[i][1], pk[i][2]);
                    output("y", y);
                    finish();
                }
}

static void rnn_cases(void) {
    nn_ctx c = {T, true, NULL, NULL};
    const int32_t lens[] = {5, 2, 4};
    for (int gru = 0; gru < 2; gru++)
        for (int v = 0; v < 3; v++) {
            /* v 0: batch_first, bidirectional, lengths; 1: + h0 (and c0); 2: time-major, one
             * direction, no lengths */
            bool bf = v < 2, bi = v < 2, len = v < 2, h0 = v == 1;
            char nm[64];
            snprintf(nm, sizeof nm, "%s_%s%s%s%s", gru ? "gru" : "lstm", bf ? "bf_" : "tm_",
                     bi ? "bi_" : "", len ? "len" : "nolen", h0 ? "_h0" : "");
            begin(nm);
            arg("batch_first", bf), arg("bidirectional", bi), arg("lengths", len), arg("h0", h0);
            nn_params *ps = nn_params_new();
            nn_rnn_opts o = {bf, bi};
            nn_lstm l;
            nn_gru g;
            if (gru) nn_gru_init_opts(&g, ps, "rnn", 3, 4, 2, 0.0, &o);
            else nn_lstm_init_opts(&l, ps, "rnn", 3, 4, 2, 0.0, &o);
            params_ready(ps);
            int D = bi ? 2 : 1;
            ag_tensor *x =
                bf ? in("x", S(3, 5, 3), -1, 1, 0, true) : in("x", S(5, 3, 3), -1, 1, 0, true);
            ag_tensor *s0 = h0 ? in("h0", S(2 * D, 3, 4), -1, 1, 0, true) : NULL;
            ag_tensor *c0 = h0 && !gru ? in("c0", S(2 * D, 3, 4), -1, 1, 0, true) : NULL;
            if (len) put_idx("lengths", S(3), lens, 3);
            ag_tensor *hn = NULL, *cn = NULL, *y;
            if (gru) y = nn_gru_forward_lengths(&g, &c, x, len ? lens : NULL, s0, &hn);
            else y = nn_lstm_forward_lengths(&l, &c, x, len ? lens : NULL, s0, c0, &hn, &cn);
            output("y", y);
            output("h_n", hn);
            if (!gru) output("c_n", cn);
            finish();
            nn_params_free(ps);
        }
}

static void batchnorm_cases(void) {
    for (int v = 0; v < 2; v++) {
        nn_ctx c = {T, true, NULL, NULL};
        begin(v ? "batchnorm1d_NCL" : "batchnorm1d_NC");
        nn_params *ps = nn_params_new();
        nn_batch_norm1d bn;
        nn_batch_norm1d_init(&bn, ps, "bn", 3, NN_BATCH_NORM_EPS, NN_BATCH_NORM_MOMENTUM);
        params_ready(ps);
        for (int i = 0; i < 3; i++) bn.running_var->data[i] = unif(0.5, 1.5);
        for (int i = 0; i < 3; i++) bn.running_mean->data[i] = unif(-0.5, 0.5);
        put("in", "running_mean", bn.running_mean);
        put("in", "running_var", bn.running_var);
        /* two training forwards (different batches), then one in eval */
        for (int k = 0; k < 3; k++) {
            char xn[8], yn[8];
            snprintf(xn, sizeof xn, "x%d", k);
            snprintf(yn, sizeof yn, "y%d", k);
            c.training = k < 2;
            ag_tensor *x = v ? in(xn, S(4, 3, 5), -2, 2, 0, true) : in(xn, S(6, 3), -2, 2, 0, true);
            output(yn, nn_batch_norm1d_forward(&bn, &c, x));
        }
        put("out", "running_mean", bn.running_mean);
        put("out", "running_var", bn.running_var);
        put("out", "num_batches_tracked", bn.num_batches_tracked);
        finish();
        nn_params_free(ps);
    }
}

/* ---- optimizers ------------------------------------------------------------------------ */

static double lambda_lr(int64_t done, void *user) {
    (void)user;
    return 1.0 / (1.0 + 0.5 * (double)done);
}

static void optim_cases(void) {
    for (int k = 0; k < 3; k++) {
        const char *nm[] = {"adamw_groups", "adam_groups", "sgd_groups"};
        begin(nm[k]);
        nn_params *ps = nn_params_new();
        nn_params_add(ps, "a", "weight", S(3, 4), nn_init_zeros());
        nn_params_add(ps, "a", "bias", S(4), nn_init_zeros());
        nn_params_add(ps, "b", "weight", S(2, 3), nn_init_zeros());
        nn_params_add(ps, "c", "weight", S(3), nn_init_zeros());
        nn_params_finalize(ps, 1);
        size_t np = nn_params_count(ps);
        for (size_t i = 0; i < np; i++) {
            ag_tensor *p = nn_params_at(ps, i);
            for (ptrdiff_t j = 0; j < p->numel; j++) p->data[j] = unif(-1, 1);
            put("in", p->name, p);
        }
        nn_params_find(ps, "c.weight")->requires_grad = false; /* frozen */
        optim_cfg cfg = k == 0 ? optim_adamw(0.05) : k == 1 ? optim_adam(0.05) : optim_sgd(0.1);
        if (k == 1) cfg.weight_decay = 0.02;
        if (k == 2) cfg.momentum = 0.9, cfg.nesterov = true, cfg.weight_decay = 0.01;
        cfg.schedule = optim_lr_lambda(lambda_lr, NULL);
        optim *o = optim_new(ps, cfg);
        optim_group g = optim_group_like(o);
        g.params = "b";
        g.lr = k == 2 ? 0.03 : 0.02;
        g.weight_decay = k == 2 ? 0.05 : 0.1;
        g.beta1 = 0.8, g.beta2 = 0.99, g.eps = 1e-6;
        g.momentum = 0.5, g.dampening = 0.1, g.nesterov = false;
        if (optim_add_group(o, g) < 0) {
            fprintf(stderr, "torch_diff: %s\n", ag_last_error());
            exit(1);
        }
        for (int s = 1; s <= 3; s++) {
            ag_tape_reset(T);
            /* loss_s = sum_p sum(R_p * p * p * p): gradients 3 R p^2, of both signs */
            ag_tensor *l = NULL;
            for (size_t i = 0; i < np; i++) {
                ag_tensor *p = nn_params_at(ps, i);
                ag_tensor *r = ag_tensor_new(T, p->ndim, p->shape);
                for (ptrdiff_t j = 0; j < r->numel; j++) r->data[j] = unif(-1, 1);
                char key[64];
                snprintf(key, sizeof key, "step%d:%s", s, p->name);
                put("R", key, r);
                ag_tensor *li =
                    ag_sum(T, ag_mul(T, r, ag_mul(T, p, ag_mul(T, p, p))), AG_ALL, false);
                l = l ? ag_add(T, l, li) : li;
            }
            if (ag_backward(T, l) != 0 || optim_step(o) != 0) {
                fprintf(stderr, "torch_diff: %s\n", ag_last_error());
                exit(1);
            }
            for (size_t i = 0; i < np; i++) {
                char key[64];
                snprintf(key, sizeof key, "step%d:%s", s, nn_params_at(ps, i)->name);
                put("out", key, nn_params_at(ps, i));
            }
        }
        fputs("end\n", out);
        optim_free(o);
        nn_params_free(ps);
    }
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "torch_diff.txt";
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 20261124;
    out = fopen(path, "w");
    if (!out) {
        perror(path);
        return 1;
    }
    ag_rng_seed(&rng, seed);
    T = ag_tape_new();
    fprintf(out, "seed %llu\n", (unsigned long long)seed);
    unary_cases();
    binary_cases();
    reduce_cases();
    index_cases();
    loss_cases();
    conv_cases();
    rnn_cases();
    batchnorm_cases();
    optim_cases();
    edge_cases();
    ag_tape_free(T);
    fclose(out);
    printf("torch_diff: wrote %s (seed %llu)\n", path, (unsigned long long)seed);
    return 0;
}
