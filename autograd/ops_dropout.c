/* ops_dropout.c -- inverted dropout (its counter-hash masks are in ag_op.h, shared with fused
 * ops that drop inside). */
#include "autograd/ag_internal.h"

/* ---- dropout: y = x * M, M = 0 with probability p, else 1 / (1 - p); dx += g * M ----
 * The node keeps only the mask's key: the backward recomputes M from the counter hash. */

static void dropout_backward(ag_node *nd) {
    ag_tensor *x = nd->in[0], *y = nd->out;
    ag_dropmask_accumulate(x->grad, y->grad, x->numel, *(const ag_dropmask *)nd->saved);
}
static const ag_op dropout_op = {"dropout", dropout_backward};

ag_tensor *ag_dropout(ag_tape *t, ag_tensor *x, double p, ag_rng *rng) {
    if (!ag_op_check(t, "dropout", 1, &x)) return NULL;
    if (!(p >= 0 && p <= 1)) return ag_report(t, "dropout: probability %g is outside [0, 1]", p);
    if (p == 0) return x;
    if (!rng) return ag_report(t, "dropout: p = %g needs an RNG (it is NULL)", p);
    x = ag_op_contig(t, x);
    ag_tensor *y = x ? ag_op_out(t, x->ndim, x->shape, 1, &x) : NULL;
    if (!y) return NULL;
    ag_dropmask dm = ag_dropmask_new(p, ag_rng_next(rng));
    ag_dropmask_apply(y->data, x->data, x->numel, dm, 0);
    ag_node *nd = ag_op_record(t, &dropout_op, y, 1, &x, sizeof dm);
    if (nd) *(ag_dropmask *)nd->saved = dm;
    return y;
}
