/* init.c -- the initialisers: constant, uniform, normal, Xavier-uniform (PyTorch's fans). */
#include <math.h>
#include <stdio.h>

#include "nn/internal.h"

char *nn_shape_fmt(char *buf, size_t len, int ndim, const int *shape) {
    size_t used = 0;
    if (len == 0) return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ", %d" : "%d", shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
    return buf;
}

/* Xavier's fans as torch.nn.init._calculate_fan_in_and_fan_out: shape (out, in, k...) ->
 * fan_in = in * prod(k), fan_out = out * prod(k). */
static void xavier_fans(int ndim, const int *shape, double *fan_in, double *fan_out) {
    double rf = 1.0;
    for (int i = 2; i < ndim; i++) rf *= shape[i];
    *fan_in = ndim >= 2 ? shape[1] * rf : 0.0;
    *fan_out = ndim >= 2 ? shape[0] * rf : 0.0;
}

int nn_init_check(nn_init init, const char *pname, int ndim, const int *shape, char *msg,
                  size_t msglen) {
    double fi, fo;
    switch (init.kind) {
    case NN_INIT_CONSTANT:
        if (!isfinite(init.a)) break;
        return 0;
    case NN_INIT_UNIFORM:
        if (!isfinite(init.a) || !isfinite(init.b) || init.a > init.b) break;
        return 0;
    case NN_INIT_NORMAL:
        if (!isfinite(init.a) || !isfinite(init.b) || init.b < 0) break;
        return 0;
    case NN_INIT_XAVIER_UNIFORM:
        xavier_fans(ndim, shape, &fi, &fo);
        if (ndim < 2 || fi + fo <= 0) {
            char s[64];
            snprintf(msg, msglen,
                     "parameter '%s': Xavier init needs a shape (out, in, ...) with at least "
                     "2 dimensions, got %s",
                     pname, nn_shape_fmt(s, sizeof s, ndim, shape));
            return -1;
        }
        if (!isfinite(init.a) || init.a < 0) break;
        return 0;
    default:
        snprintf(msg, msglen, "parameter '%s': unknown initialiser kind %d", pname, (int)init.kind);
        return -1;
    }
    snprintf(msg, msglen,
             "parameter '%s': invalid initialiser (kind %d, a = %g, b = %g): expected finite "
             "numbers, a <= b for uniform, std b >= 0 for normal, gain a >= 0 for Xavier",
             pname, (int)init.kind, init.a, init.b);
    return -1;
}

int nn_init_fill(nn_init init, ag_real *x, int ndim, const int *shape, ag_rng *rng) {
    char msg[256];
    if (!x || !shape || !rng) return ag_error("nn_init_fill: NULL argument");
    if (nn_init_check(init, "(nn_init_fill)", ndim, shape, msg, sizeof msg))
        return ag_error("%s", msg);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    double lo = init.a, hi = init.b;
    if (init.kind == NN_INIT_XAVIER_UNIFORM) { /* U(-g, g), g = gain * sqrt(6 / (fi + fo)) */
        double fi, fo;
        xavier_fans(ndim, shape, &fi, &fo);
        hi = init.a * sqrt(6.0 / (fi + fo));
        lo = -hi;
    }
    switch (init.kind) {
    case NN_INIT_CONSTANT:
        for (size_t i = 0; i < n; i++) x[i] = (ag_real)init.a;
        return 0;
    case NN_INIT_XAVIER_UNIFORM:
    case NN_INIT_UNIFORM: /* lo + (hi - lo) u, u uniform in [0, 1) */
        for (size_t i = 0; i < n; i++) x[i] = (ag_real)(lo + (hi - lo) * ag_rng_uniform(rng));
        return 0;
    case NN_INIT_NORMAL: /* mean + std z, z ~ N(0, 1) */
        for (size_t i = 0; i < n; i++) x[i] = (ag_real)(init.a + init.b * ag_rng_normal(rng));
        return 0;
    }
    return ag_error("nn_init_fill: unknown initialiser kind %d", (int)init.kind);
}
