/* schedule.c -- learning-rate schedules and gradient-norm utilities. */
#include <math.h>

#include "optim/optim.h"

double optim_schedule_lr(optim_schedule s, double lr, int64_t t)
{
    if (t < 1) return NAN;
    switch (s.kind) {
    case OPTIM_LR_CONSTANT:
        return lr;
    case OPTIM_LR_STEP:  /* lr * gamma^floor((t - 1) / step_size) */
        if (s.step_size <= 0 || !(s.gamma > 0)) return NAN;
        return lr * pow(s.gamma, (double)((t - 1) / s.step_size));
    case OPTIM_LR_NOAM:  /* lr * d^-0.5 * min(t^-0.5, t * w^-1.5) */
        if (s.d_model <= 0 || s.warmup <= 0) return NAN;
        return lr * pow((double)s.d_model, -0.5) *
               fmin(pow((double)t, -0.5), (double)t * pow((double)s.warmup, -1.5));
    }
    return NAN;
}

/* sqrt(sum_i g_i^2) over the flat gradient buffer (padding is zero), in double. */
double optim_grad_norm(nn_params *ps)
{
    const ag_real *g = nn_params_grads(ps);
    size_t n = nn_params_flat_size(ps);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
    return sqrt(s);
}

/* d2l: if norm > theta, g *= theta / norm for every gradient element. */
double optim_clip_grad_norm(nn_params *ps, double max_norm)
{
    double norm = optim_grad_norm(ps);
    if (max_norm > 0 && norm > max_norm) {
        ag_real *g = nn_params_grads(ps);
        size_t n = nn_params_flat_size(ps);
        ag_real scale = (ag_real)(max_norm / norm);
        for (size_t i = 0; i < n; i++) g[i] *= scale;
    }
    return norm;
}
