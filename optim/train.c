/* train.c -- one training step in one call (optim.h, "Training steps"): the loss's backward,
 * the update and the tape's reset; with a module, its forward and a loss function first. */
#include <math.h>

#include "optim/optim_internal.h"

double optim_minimize(optim *o, ag_tape *t, ag_tensor *loss) {
    if (!o || !t) {
        ag_error("optim_minimize: needs an optimizer and a tape (got NULL)");
        return NAN;
    }
    double v = NAN;
    if (!loss) {
        ag_error_context("optim_minimize: no loss (its forward failed)");
    } else if (loss->numel != 1) {
        char s[64];
        ag_error("optim_minimize: the loss has shape %s, expected one value",
                 ag_shape_str(loss, s, sizeof s));
    } else if (isnan(v = ag_get(loss, 0))) {
        ag_error("optim_minimize: the loss is NaN (no update)");
    } else if (ag_backward(t, loss) || optim_step(o)) {
        v = NAN; /* optim_step zeroed the gradients it refused */
    }
    ag_tape_reset(t);
    return v;
}

double optim_train_step(optim *o, const nn_module *m, const nn_ctx *c, ag_tensor *x,
                        const void *target, optim_loss_fn loss) {
    if (!o || !m || !c || !c->tape || !loss) {
        ag_error("optim_train_step: needs an optimizer, a module, a context with a tape and a "
                 "loss function (got NULL)");
        if (c && c->tape) ag_tape_reset(c->tape);
        return NAN;
    }
    if (nn_module_params(m) != o->ps) {
        ag_error("optim_train_step: module '%s' (%s) is not registered in the optimizer's store",
                 nn_module_path(m), nn_module_kind(m));
        ag_tape_reset(c->tape);
        return NAN;
    }
    ag_tensor *out = x ? nn_module_forward(m, c, x) : NULL;
    if (!x) ag_error("optim_train_step: no input (NULL)");
    return optim_minimize(o, c->tape, out ? loss(c->tape, out, target) : NULL);
}

ag_tensor *optim_loss_cross_entropy(ag_tape *t, ag_tensor *logits, const void *labels) {
    if (!labels) {
        ag_error("optim_loss_cross_entropy: the labels are NULL");
        return NULL;
    }
    return ag_cross_entropy(t, logits, labels, NULL, 0, AG_IGNORE_INDEX, AG_REDUCE_MEAN);
}

ag_tensor *optim_loss_mse(ag_tape *t, ag_tensor *out, const void *target) {
    if (!out || !target) {
        ag_error("optim_loss_mse: %s is NULL", out ? "the target" : "the output");
        return NULL;
    }
    ag_tensor *y = ag_tensor_from(t, out->ndim, out->shape, target);
    return y ? ag_mse_loss(t, out, y, AG_REDUCE_MEAN) : NULL;
}
