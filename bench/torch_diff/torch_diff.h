/* torch_diff.h -- the helpers of torch_diff.c that torch_diff_edge.c uses (see torch_diff.c for
 * the file format and README.md for the test). */
#ifndef TORCH_DIFF_H
#define TORCH_DIFF_H

#include <stdio.h>

#include "optim/optim.h"

extern FILE *out; /* the case file */
extern ag_rng rng;
extern ag_tape *T; /* the tape every case records on */

double unif(double lo, double hi);                                /* U(lo, hi) from rng */
void put(const char *kind, const char *name, const ag_tensor *x); /* a "t KIND:NAME" record */
void put_idx(const char *name, int ndim, const int *shape, const int32_t *v, int n);
void arg(const char *k, double v); /* an argument the PyTorch side reads */
void begin(const char *name);      /* starts a case: resets the tape */
/* An input leaf U(lo, hi), rounded to multiples of q > 0; written (write it again with put after
 * changing its values). Freed by finish. */
ag_tensor *in(const char *name, int ndim, const int *shape, double lo, double hi, double q,
              bool grad);
void output(const char *name, ag_tensor *y); /* written, projected, added to the loss */
void finish(void);                           /* backward, gradients written, inputs freed, "end" */

void edge_cases(void); /* torch_diff_edge.c */

#endif
