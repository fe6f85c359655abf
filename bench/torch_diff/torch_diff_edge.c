/* torch_diff_edge.c -- the cases of torch_diff with non-finite inputs and degenerate sizes:
 * NaN against NaN-propagating ops (maximum, minimum, amax, max_dim, clamp, max pooling), infinite
 * entries of logsumexp, 0 and negative bases of pow, a variance over one element. */
#include <math.h>
#include <string.h>

#include "torch_diff.h"

#define S(...) AG_SHAPE(__VA_ARGS__)

/* x's values replaced by v (x->numel of them) and x written again. */
static ag_tensor *set(const char *name, ag_tensor *x, const double *v) {
    for (ptrdiff_t i = 0; i < x->numel; i++) x->data[i] = v[i];
    put("in", name, x);
    return x;
}

void edge_cases(void) {
    const double N = NAN, I = INFINITY;
    for (int mx = 0; mx < 2; mx++) {
        begin(mx ? "maximum_nan" : "minimum_nan");
        ag_tensor *a =
            set("a", in("a", S(2, 3), 0, 1, 0, true), (const double[]){N, 1, 2, 0.5, N, -1});
        ag_tensor *b = set("b", in("b", S(3), 0, 1, 0, true), (const double[]){0, 1, N});
        output("y", mx ? ag_maximum(T, a, b) : ag_minimum(T, a, b));
        finish();
    }
    for (int mx = 0; mx < 2; mx++) {
        begin(mx ? "amax_nan_ax1" : "amin_nan_ax1");
        arg("axis", 1);
        ag_tensor *x = set("x", in("x", S(3, 4), 0, 1, 0, true),
                           (const double[]){1, N, 3, 3, N, 0, N, 2, 0.5, 0.5, -1, 0.25});
        output("y", mx ? ag_amax(T, x, 1, false) : ag_amin(T, x, 1, false));
        finish();
    }
    for (int mx = 0; mx < 2; mx++) {
        int32_t idx[3];
        begin(mx ? "max_dim_nan" : "min_dim_nan");
        arg("keepdim", 0);
        ag_tensor *x = set("x", in("x", S(3, 4), 0, 1, 0, true),
                           (const double[]){1, N, 3, N, 2, 0, 5, 2, 0.5, 0.5, -1, 0.25});
        output("y", mx ? ag_max_dim(T, x, 1, false, idx, 3) : ag_min_dim(T, x, 1, false, idx, 3));
        put_idx("indices", S(3), idx, 3);
        finish();
    }
    begin("clamp_nan");
    arg("min", -0.5), arg("max", 1);
    output("y", ag_clamp(T, set("x", in("x", S(4), 0, 1, 0, true), (const double[]){N, -1, 0.5, 2}),
                         -0.5, 1));
    finish();
    begin("max_pool1d_k3_s2_p1_nan");
    arg("kernel", 3), arg("stride", 2), arg("padding", 1);
    output("y", nn_max_pool1d(&(nn_ctx){T, true, NULL, NULL},
                              set("x", in("x", S(1, 1, 7), 0, 1, 0, true),
                                  (const double[]){1, N, 0.5, 3, N, N, -1}),
                              3, 2, 1));
    finish();
    for (int kd = 0; kd < 2; kd++) {
        begin(kd ? "logsumexp_inf_ax1_kd1" : "logsumexp_inf_ax1_kd0");
        arg("axis", 1), arg("keepdim", kd);
        ag_tensor *x = set("x", in("x", S(4, 3), 0, 1, 0, true),
                           (const double[]){-I, 0.5, 1, -I, -I, -I, I, 0, 1, I, I, -I});
        output("y", ag_logsumexp(T, x, 1, kd));
        finish();
    }
    const double ps[] = {0.5, -1, 2, -2};
    for (int i = 0; i < 4; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "pow_scalar_%g_zero_neg", ps[i]);
        begin(nm);
        arg("p", ps[i]);
        output("y",
               ag_pow_scalar(
                   T, set("x", in("x", S(4), 0, 1, 0, true), (const double[]){0, -0.5, 1.5, -2}),
                   ps[i]));
        finish();
    }
    begin("pow_tensor_neg_base");
    output("y", ag_pow(T, set("a", in("a", S(4), 0, 1, 0, true), (const double[]){-2, -2, 0, 0}),
                       set("b", in("b", S(4), 0, 1, 0, true), (const double[]){2, 0.5, -1, 0.5})));
    finish();
    for (int sd = 0; sd < 2; sd++) {
        begin(sd ? "std_c1_ax1_single" : "var_c1_ax1_single");
        arg("correction", 1), arg("axis", 1);
        ag_tensor *x = in("x", S(3, 1), -1, 1, 0, true);
        output("y", sd ? ag_std(T, x, 1, 1, true) : ag_var(T, x, 1, 1, false));
        finish();
    }
}
