/* base.h -- what every part of nn/ (and optim/) shares: the forward context. Errors go through
 * the one channel of autograd/ag_base.h (ag_error, ag_last_error). See nn/nn.h. */
#ifndef TG_NN_BASE_H
#define TG_NN_BASE_H

#include <stdbool.h>
#include <stdint.h>

#include "../autograd/ag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The context every forward takes. No hidden global mode: dropout is active only when
 * training is true (then rng must be non-NULL if any dropout probability is > 0). */
typedef struct nn_packs nn_packs; /* nn/layers.h */

typedef struct nn_ctx {
    ag_tape *tape;   /* where the forward records its ops and allocates its results */
    bool training;   /* true: dropout active; false: eval mode, dropout is the identity */
    ag_rng *rng;     /* dropout's random stream (caller-owned); may be NULL in eval */
    nn_packs *packs; /* NULL, or weights packed for inference (nn_packs_new, nn/layers.h) */
} nn_ctx;

/* Evaluation for a stretch of code, in one call: training off (dropout is the identity,
 * BatchNorm normalises with its running statistics and leaves them alone) and the tape's
 * recording off (no node, no gradient: inference). nn_eval_end restores both as they were:
 *
 *     nn_eval_saved e = nn_eval_begin(&c);
 *     ag_tensor *y = model_forward(&m, &c, x);    // eval, nothing recorded
 *     nn_eval_end(&c, e);                          // back to training (if it was) and recording
 *
 * Pairs nest (each restores what its begin saw). c->tape may be NULL (then only the flag
 * changes); c must not be NULL. */
typedef struct nn_eval_saved {
    bool training, recording;
} nn_eval_saved;

static inline nn_eval_saved nn_eval_begin(nn_ctx *c) {
    nn_eval_saved s = {c->training, false};
    c->training = false;
    if (c->tape) s.recording = ag_tape_set_recording(c->tape, false);
    return s;
}

static inline void nn_eval_end(nn_ctx *c, nn_eval_saved s) {
    c->training = s.training;
    if (c->tape) ag_tape_set_recording(c->tape, s.recording);
}

#ifdef __cplusplus
}
#endif

#endif
