/* base.h -- what every part of nn/ (and optim/) shares: the forward context. Errors go through
 * the one channel of autograd/ag_base.h (ag_error, ag_last_error). See nn/nn.h. */
#ifndef TG_NN_BASE_H
#define TG_NN_BASE_H

#include <stdbool.h>
#include <stdint.h>

#include "autograd/ag.h"

/* The context every forward takes. No hidden global mode: dropout is active only when
 * training is true (then rng must be non-NULL if any dropout probability is > 0). */
typedef struct nn_ctx {
    ag_tape *tape;   /* where the forward records its ops and allocates its results */
    bool training;   /* true: dropout active; false: eval mode, dropout is the identity */
    ag_rng *rng;     /* dropout's random stream (caller-owned); may be NULL in eval */
} nn_ctx;

#endif
