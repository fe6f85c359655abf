/* optim_internal.h -- the optimizer struct, shared by optim.c, groups.c and optim_ckpt.c. */
#ifndef TG_OPTIM_INTERNAL_H
#define TG_OPTIM_INTERNAL_H

#include "optim/optim.h"

/* A span of the flat buffers [begin, end) updated with one set of constants: consecutive
 * trainable parameters of one group, one weight decay (cfg.decay_filter) and one update count
 * (the zero padding after a parameter goes with it: an update leaves zeros at zero). Rebuilt
 * by each step, frozen parameters left out. */
typedef struct optim_span {
    size_t begin, end;
    int group;
    bool decay;
    int64_t step; /* the parameters' updates done */
} optim_span;

struct optim {
    optim_cfg cfg; /* its hyperparameters mirror groups[0] */
    nn_params *ps;
    size_t flat;         /* nn_params_flat_size(ps) */
    size_t n_params;     /* nn_params_count(ps) */
    ag_real *m, *v;      /* Adam / AdamW moments (flat layout); NULL otherwise */
    ag_real *buf;        /* SGD momentum buffers (flat layout); NULL while no group has momentum */
    optim_group *groups; /* [n_groups]; params strings owned (malloc'd), groups[0].params NULL */
    size_t n_groups;
    int *group_of;     /* [n_params]: each parameter's group */
    bool *decay;       /* [n_params]: cfg.decay_filter's answer (true without a filter) */
    int64_t *pstep;    /* [n_params]: updates applied to each parameter (PyTorch's step) */
    optim_span *spans; /* [n_params] capacity; the current step's */
    size_t n_spans;
    double *group_lr; /* [n_groups]: the current step's lr_t per group */
    int64_t t;        /* updates done */
    double last_norm;
};

/* Checks one group's hyperparameters for optimizer kind k; messages start with `where`
 * ("optim_new (adam)"). 0 or -1. */
int optim__check_hparams(optim_kind k, const optim_group *g, const char *where);
/* Copies group 0's hyperparameters into o->cfg. */
void optim__sync_cfg(optim *o);
/* Is parameter i frozen (requires_grad false)? */
static inline bool optim__frozen(const nn_params *ps, size_t i) {
    return !nn_params_at(ps, i)->requires_grad;
}
#endif
