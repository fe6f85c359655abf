/* optim_internal.h -- the optimizer struct, shared by optim.c and optim_ckpt.c. */
#ifndef TG_OPTIM_INTERNAL_H
#define TG_OPTIM_INTERNAL_H

#include "optim/optim.h"

struct optim {
    optim_cfg cfg;
    nn_params *ps;
    size_t flat;           /* nn_params_flat_size(ps) */
    ag_real *m, *v;        /* Adam / AdamW moments (flat layout); NULL otherwise */
    ag_real *buf;          /* SGD momentum buffers (flat layout); NULL without momentum */
    int64_t t;             /* updates done */
    double last_norm;
};

#endif
