/* optim_internal.h -- the optimizer struct, shared by optim.c and optim_ckpt.c. */
#ifndef TG_OPTIM_INTERNAL_H
#define TG_OPTIM_INTERNAL_H

#include "optim/optim.h"

/* A run of the flat buffers [begin, end) whose parameters share one weight decay: the
 * parameter groups of cfg.decay_filter (one run over everything without a filter). */
typedef struct optim_run {
    size_t begin, end;
    bool decay;
} optim_run;

struct optim {
    optim_cfg cfg;
    nn_params *ps;
    size_t flat;     /* nn_params_flat_size(ps) */
    ag_real *m, *v;  /* Adam / AdamW moments (flat layout); NULL otherwise */
    ag_real *buf;    /* SGD momentum buffers (flat layout); NULL without momentum */
    optim_run *runs; /* ascending, covering [0, flat) */
    size_t n_runs;
    int64_t t; /* updates done */
    double last_norm;
};

#endif
