/* base.h -- what every part of nn/ (and optim/) shares: the forward context and the error
 * mechanism. See nn/nn.h for the overview and the error rule. */
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

/* The message of the last failure on this thread ("" if none yet). Not cleared by successful
 * calls (like errno). Owned by the library; valid until the next failing call on this thread. */
const char *nn_last_error(void);

/* For errors found by a layer's own checks during a forward pass: records the message as
 * nn_last_error() AND reports it through ag's error handler on c's tape (ag_report), like an
 * op's error, so every forward-pass error reaches the same handler. Returns NULL. */
void *nn_forward_error(const nn_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Records a printf-style message as this thread's last error and returns -1. For libraries
 * built on nn (optim, the zoo) so that one mechanism serves them all. Messages are truncated
 * at 1023 bytes. */
int nn_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
