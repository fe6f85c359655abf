/* module_run.c -- running a module (nn/module.h): a context that owns its tape and random
 * stream, prediction and accuracy in eval mode with nothing recorded. */
#include <stdint.h>
#include <stdlib.h>

#include "nn/internal.h"

/* The context and the stream its rng points to, freed together. */
typedef struct ctx_box {
    nn_ctx c; /* first: nn_ctx_free casts back */
    ag_rng rng;
} ctx_box;

nn_ctx *nn_ctx_new(uint64_t seed) {
    ctx_box *b = calloc(1, sizeof *b);
    if (b) b->c.tape = ag_tape_new();
    if (!b || !b->c.tape) {
        free(b);
        ag_error("nn_ctx_new: out of memory");
        return NULL;
    }
    ag_rng_seed(&b->rng, seed);
    b->c.rng = &b->rng;
    b->c.training = true;
    return &b->c;
}

void nn_ctx_free(nn_ctx *c) {
    if (!c) return;
    ag_tape_free(c->tape);
    free((ctx_box *)c);
}

/* Runs m on x (ndim, shape, data made a tensor on c's tape) in eval mode, nothing recorded, and writes the argmax of each row of the output
 * (..., K) into pred (capacity n; NULL: scratch on the tape) and, with y, counts the rows equal
 * to it into *right. Returns the number of rows, or -1. The tape is rewound to where it was. */
static ptrdiff_t predict(const nn_module *m, const nn_ctx *c, int ndim, const int *shape,
                         const ag_real *data, int32_t *pred, size_t n, const int32_t *y,
                         ptrdiff_t *right, const char *fn) {
    if (!m || !c || !c->tape || !shape || !data)
        return ag_error("%s: needs a module, a context with a tape, a shape and data (got NULL)",
                        fn);
    nn_ctx e = *c;
    e.training = false;
    const ag_tape_pos mark = ag_tape_mark(c->tape);
    const bool rec = ag_tape_set_recording(c->tape, false);
    ag_tensor *x = ag_tensor_from(c->tape, ndim, shape, data);
    ag_tensor *out = x ? nn_module_forward(m, &e, x) : NULL;
    ptrdiff_t rows = -1;
    if (!out) {
        ag_error_context("%s", fn);
    } else if (out->ndim < 1 || out->numel == 0) {
        ag_error("%s: the module's output has no classes to choose from (empty)", fn);
    } else {
        rows = out->numel / out->shape[out->ndim - 1];
        if (!pred) n = (size_t)rows;
        if (!pred) pred = ag_tape_alloc(c->tape, (size_t)rows * sizeof *pred);
        if (!pred || ag_argmax(out, -1, pred, n)) rows = ag_error_context("%s", fn);
    }
    for (ptrdiff_t i = 0; y && i < rows; i++) *right += pred[i] == y[i];
    ag_tape_set_recording(c->tape, rec);
    ag_tape_rewind(c->tape, mark);
    return rows;
}

int nn_module_predict(const nn_module *m, const nn_ctx *c, int ndim, const int *shape,
                      const ag_real *x, int32_t *pred, size_t n) {
    if (!pred) return ag_error("nn_module_predict: pred is NULL");
    return predict(m, c, ndim, shape, x, pred, n, NULL, NULL, "nn_module_predict") < 0 ? -1 : 0;
}

double nn_module_accuracy(const nn_module *m, const nn_ctx *c, int ndim, const int *shape,
                          const ag_real *x, const int32_t *y, int32_t *pred) {
    if (!y) return ag_error("nn_module_accuracy: the labels y are NULL");
    ptrdiff_t right = 0; /* pred, when given, holds a label per row (header) */
    ptrdiff_t rows = predict(m, c, ndim, shape, x, pred, SIZE_MAX, y, &right, "nn_module_accuracy");
    return rows < 0 ? -1 : (double)right / (double)rows;
}
