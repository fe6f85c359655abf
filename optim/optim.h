/* optim.h -- optimizers over an nn parameter store: SGD (momentum), Adam, AdamW, gradient
 * clipping by global norm, learning-rate schedules, optimizer state in checkpoints.
 *
 *     optim_cfg cfg = optim_adam(0.005);     // PyTorch defaults: betas 0.9 / 0.999, eps 1e-8
 *     cfg.clip_norm = 1.0;                   // d2l's grad_clipping(net, 1) before each update
 *     optim *opt = optim_new(ps, cfg);       // NULL on a bad config (ag_last_error says which)
 *     for (...) {
 *         ... forward, ag_backward ...
 *         optim_step(opt);                   // clip, update, zero the gradients
 *     }
 *     optim_free(opt);
 *
 * Semantics are PyTorch's (torch.optim, single-tensor code path), the update number t
 * counting from 1, lr_t the schedule's value at t (see optim_schedule_lr), g the gradient:
 *   SGD:   g += wd * p;  with momentum mu: b = g at t = 1, else b = mu * b + (1 - dampening) * g;
 *          g = nesterov ? g + mu * b : b;   p -= lr_t * g
 *   Adam:  g += wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *          p -= (lr_t / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *          i.e. p -= lr_t * m_hat / (sqrt(v_hat) + eps), eps added after the square root
 *   AdamW: p *= 1 - lr_t * wd (decoupled decay), then Adam's update with no wd in g.
 * lr, wd, betas, eps, momentum, dampening and nesterov are those of the parameter's group
 * (PyTorch's param_groups; see "Parameter groups" below): group 0 holds the cfg's values and
 * every parameter no optim_add_group claimed. wd is the group's weight_decay for the
 * parameters cfg.decay_filter accepts (every parameter when it is NULL), 0 for the others.
 * t in the bias corrections (and SGD's "t = 1") is the parameter's own update count, as
 * PyTorch's per-parameter state['step']: it differs from the optimizer's count only for a
 * parameter that was frozen for some steps.
 * Frozen parameters (requires_grad false on the store's tensor, set after nn_params_finalize
 * and read at each step: PyTorch's p.requires_grad_(False); the ops then compute no gradient
 * for it) are skipped by every optimizer: not updated, not decayed, not
 * counted in the gradient norm (nor clipped), their state (moments, momentum buffer, update
 * count) left as it was; their gradients are zeroed with the others.
 * The state (moments, momentum buffers) lives in flat buffers laid out like the store's
 * (nn/params.h), so an update is one loop over the parameters. Every trainable parameter is
 * updated each step, including those whose gradient is zero (they move with their momentum).
 *
 * Errors follow nn's rule (nn/nn.h): 0 / -1 or NULL, message in ag_last_error().
 */
#ifndef TG_OPTIM_H
#define TG_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Learning-rate schedules ---------------------------------------------------------------- */

/* The warm-up schedules (COSINE, LINEAR, INVSQRT) share one warm-up: lr_t = lr * t / warmup
 * for t <= warmup (lr exactly at t = warmup; warmup 0: none), then decay. With
 * p = (t - warmup) / (total - warmup) and r = min_ratio:
 *   COSINE:  lr_t = lr * (r + (1 - r) * (1 + cos(pi p)) / 2)   until t = total, then lr * r
 *   LINEAR:  lr_t = lr * (r + (1 - r) * (1 - p))                until t = total, then lr * r
 *   INVSQRT: lr_t = lr * sqrt(warmup / t)                       (fairseq's inverse_sqrt)
 * (Hugging Face's get_cosine/linear_schedule_with_warmup give update t the value these give
 * update t - 1: their first update runs at lr 0.) INVSQRT is NOAM scaled to peak at lr. */
typedef enum optim_lr_kind {
    OPTIM_LR_CONSTANT, /* lr_t = lr */
    OPTIM_LR_STEP,     /* lr_t = lr * gamma^floor((t - 1) / step_size)  (PyTorch StepLR) */
    OPTIM_LR_NOAM,     /* lr_t = lr * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5): the
                         * Transformer's warmup; cfg.lr plays the role of the "factor" */
    OPTIM_LR_COSINE,   /* linear warm-up, then cosine decay to lr * min_ratio at total */
    OPTIM_LR_LINEAR,   /* linear warm-up, then linear decay to lr * min_ratio at total */
    OPTIM_LR_INVSQRT,  /* linear warm-up, then lr * sqrt(warmup / t) */
} optim_lr_kind;

/* A schedule given as a function (PyTorch's LambdaLR): the multiplier of the base rate for
 * the update that follows `done` updates (0 for the first: PyTorch's lr_lambda(last_epoch)),
 * user as given. It must return a finite value >= 0 (else optim_step fails), and depend on
 * `done` alone: it may be called more than once per update (optim_lr, a log line). */
typedef double (*optim_lr_fn)(int64_t done, void *user);

typedef struct optim_schedule {
    optim_lr_kind kind;
    int step_size;    /* STEP: updates per decay, > 0 */
    double gamma;     /* STEP: decay factor, > 0 */
    int d_model;      /* NOAM: model width, > 0 */
    int warmup;       /* NOAM, INVSQRT: warm-up updates, > 0; COSINE, LINEAR: >= 0 */
    int64_t total;    /* COSINE, LINEAR: the update where the decay ends, > warmup */
    double min_ratio; /* COSINE, LINEAR: final lr / lr, 0 to 1 */
    optim_lr_fn fn;   /* NULL, or a multiplier on top of the kind's value (optim_lr_lambda) */
    void *fn_user;
} optim_schedule;

/* (Fields in declaration order: kind, step_size, gamma, d_model, warmup, total, min_ratio, fn,
 * fn_user; one spelling for C and C++, which has no compound literals.) */
static inline optim_schedule optim_lr_constant(void) {
    optim_schedule s = {OPTIM_LR_CONSTANT, 0, 0.0, 0, 0, 0, 0.0, NULL, NULL};
    return s;
}
static inline optim_schedule optim_lr_step(int step_size, double gamma) {
    optim_schedule s = {OPTIM_LR_STEP, step_size, gamma, 0, 0, 0, 0.0, NULL, NULL};
    return s;
}
static inline optim_schedule optim_lr_noam(int d_model, int warmup) {
    optim_schedule s = {OPTIM_LR_NOAM, 0, 0.0, d_model, warmup, 0, 0.0, NULL, NULL};
    return s;
}
static inline optim_schedule optim_lr_warmup_cosine(int warmup, int64_t total, double min_ratio) {
    optim_schedule s = {OPTIM_LR_COSINE, 0, 0.0, 0, warmup, total, min_ratio, NULL, NULL};
    return s;
}
static inline optim_schedule optim_lr_warmup_linear(int warmup, int64_t total, double min_ratio) {
    optim_schedule s = {OPTIM_LR_LINEAR, 0, 0.0, 0, warmup, total, min_ratio, NULL, NULL};
    return s;
}
static inline optim_schedule optim_lr_warmup_invsqrt(int warmup) {
    optim_schedule s = {OPTIM_LR_INVSQRT, 0, 0.0, 0, warmup, 0, 0.0, NULL, NULL};
    return s;
}
/* PyTorch's LambdaLR: lr_t = lr * fn(t - 1, user), for every group's lr. */
static inline optim_schedule optim_lr_lambda(optim_lr_fn fn, void *user) {
    optim_schedule s = {OPTIM_LR_CONSTANT, 0, 0.0, 0, 0, 0, 0.0, fn, user};
    return s;
}
/* s with fn as a further multiplier (PyTorch's ChainedScheduler of s and a LambdaLR):
 * lr_t = (s's value at t) * fn(t - 1, user). Replaces a function s already has. */
static inline optim_schedule optim_lr_times(optim_schedule s, optim_lr_fn fn, void *user) {
    s.fn = fn;
    s.fn_user = user;
    return s;
}

/* The learning rate of update t (t >= 1) for base rate lr: the kind's value, times
 * s.fn(t - 1, s.fn_user) when s has a function. Returns NaN for t < 1 or an invalid
 * schedule (a function's value is returned as it is, even negative or NaN). */
double optim_schedule_lr(optim_schedule s, double lr, int64_t t);

/* ---- Configuration ------------------------------------------------------------------------ */

typedef enum optim_kind { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW } optim_kind;

/* A rule on parameters (true: the parameter is in), given the parameter (its name, shape) and
 * a user pointer. As cfg.decay_filter: which parameters get weight decay, called once per
 * parameter by optim_new (in registration order) with cfg.decay_filter_user. As a group's
 * filter (optim_add_group): which parameters the group takes. */
typedef bool (*optim_param_fn)(const ag_tensor *param, void *user);
typedef optim_param_fn optim_decay_fn;

/* The common recipe (nanoGPT's and minGPT's configure_optimizers, PyTorch's "no decay for
 * biases and norms"): decay the parameters of 2 or more dimensions (Linear and GRU weights,
 * embeddings), none for 1-D ones (biases, LayerNorm and BatchNorm weights). A name rule is a
 * function of param->name, e.g. strstr(param->name, "norm") == NULL. */
bool optim_decay_matrices(const ag_tensor *param, void *user);

typedef struct optim_cfg {
    optim_kind kind;
    double lr;                   /* base learning rate of group 0, >= 0 */
    double beta1, beta2, eps;    /* Adam, AdamW: 0 <= beta < 1, eps >= 0 */
    double momentum;             /* SGD: >= 0 (0: plain SGD) */
    double dampening;            /* SGD: in [0, 1] */
    bool nesterov;               /* SGD: needs momentum > 0 and dampening 0 */
    double weight_decay;         /* >= 0; L2 in the gradient (SGD, Adam), decoupled (AdamW) */
    optim_decay_fn decay_filter; /* NULL: weight decay for every parameter; else for those
                                   * it accepts (e.g. optim_decay_matrices), in every group */
    void *decay_filter_user;
    double clip_norm;        /* > 0: clip the gradients by global L2 norm first; 0: off */
    optim_schedule schedule; /* constant unless set; scales every group's lr */
} optim_cfg;

/* Configurations with PyTorch's defaults (AdamW: weight_decay 0.01), constant lr, no
 * clipping; change fields before optim_new. */
/* (Fields in declaration order, one spelling for C and C++: kind, lr, beta1, beta2, eps,
 * momentum, dampening, nesterov, weight_decay, decay_filter, decay_filter_user, clip_norm,
 * schedule.) */
static inline optim_cfg optim_sgd(double lr) {
    optim_cfg c = {OPTIM_SGD,          lr, 0.0, 0.0, 0.0, 0.0, 0.0, false, 0.0, NULL, NULL, 0.0,
                   optim_lr_constant()};
    return c;
}
static inline optim_cfg optim_adam(double lr) {
    optim_cfg c = {OPTIM_ADAM,         lr, 0.9, 0.999, 1e-8, 0.0, 0.0, false, 0.0, NULL, NULL, 0.0,
                   optim_lr_constant()};
    return c;
}
static inline optim_cfg optim_adamw(double lr) {
    optim_cfg c = {OPTIM_ADAMW,        lr, 0.9, 0.999, 1e-8, 0.0, 0.0, false, 0.01, NULL, NULL, 0.0,
                   optim_lr_constant()};
    return c;
}

/* "sgd", "adam", "adamw". */
const char *optim_kind_name(optim_kind k);

/* ---- The optimizer ------------------------------------------------------------------------ */

typedef struct optim optim;

/* Returns a new optimizer over the finalized store ps (which must outlive it), its state at
 * zero and its update count at 0; NULL on an invalid cfg (the message names the field and the
 * allowed range), a store not finalized, or out of memory. A NULL ps fails with the message
 * of the call that returned it kept behind this one ("optim_new: parameter store is NULL:
 * nn_module_init: ..."), so optim_new(nn_module_init(net, seed), cfg) is checked once. */
optim *optim_new(nn_params *ps, optim_cfg cfg);
void optim_free(optim *o); /* NULL is a no-op */

/* One update from the gradients in the store: computes their global L2 norm, clips when
 * cfg.clip_norm > 0 and the norm exceeds it, applies the update with lr_t for t = steps + 1,
 * zeroes the gradients and counts the step. Returns 0; or -1 when the gradient norm is NaN or
 * infinite: then nothing is updated, the gradients are zeroed and the step is not counted. */
int optim_step(optim *o);

int64_t optim_steps(const optim *o); /* updates done so far */
double optim_lr(const optim *o);     /* lr the next optim_step will use in group 0 */
/* Changes the base learning rate (cfg.lr) from the next step on, e.g. a schedule of your own
 * or a cut on a plateau: the cfg's schedule still applies on top (with the constant schedule
 * the next step runs at exactly lr). lr finite and >= 0; returns 0, or -1 (nothing changed;
 * also when the optimizer has several groups: set each with optim_set_group_lr).
 * The base rate is part of the saved state (see Checkpoints). */
int optim_set_lr(optim *o, double lr);
/* Replaces the schedule (cfg.schedule) from the next step on: update t = optim_steps + 1 runs
 * at optim_schedule_lr(s, base lr, t), the count of updates going on as it was (e.g. the end
 * of a decay moved once a run knows how many steps its time holds). The schedule is not part
 * of the saved state: a resumed run passes it in its cfg. Returns 0, or -1 for an invalid
 * schedule (the message names the field and the allowed range, as optim_new's; nothing
 * changed). */
int optim_set_schedule(optim *o, optim_schedule s);
double optim_last_grad_norm(const optim *o); /* norm before clipping, at the last step */
/* The cfg given to optim_new, its hyperparameters those of group 0 now (lr after
 * optim_set_lr or a load). Owned by o. */
const optim_cfg *optim_config(const optim *o);

/* ---- Parameter groups (PyTorch's param_groups) -------------------------------------------
 * Group 0 has the cfg's hyperparameters and holds every parameter that no other group claims.
 * optim_add_group adds group 1, 2, ... (before the first step): it takes the parameters its
 * selection matches, with its own hyperparameters. Start from optim_group_like (group 0's
 * values, selecting nothing) and change what differs, as a PyTorch group dict overrides the
 * optimizer's defaults:
 *
 *     optim *o = optim_new(ps, optim_adamw(1e-3));
 *     optim_group g = optim_group_like(o);
 *     g.params = "encoder decoder.embedding";   // names or prefixes, separated by spaces
 *     g.lr = 1e-4;
 *     if (optim_add_group(o, g) < 0) ...        // ag_last_error says why
 *
 * Selection: a word of params matches the parameter of that name and every parameter under it
 * as a prefix ("encoder" matches "encoder.x.weight", not "encoder2.weight"); filter (with
 * filter_user), when set, narrows the selection to the parameters it accepts (params NULL:
 * every parameter it accepts). A word matching no parameter, a group matching none, a
 * parameter another group already holds, or a bad hyperparameter is an error, and nothing
 * changes. cfg.decay_filter still applies in every group (a parameter it rejects gets no
 * weight decay). Each group's lr is scaled by cfg.schedule. */
typedef struct optim_group {
    const char *params;    /* names or prefixes separated by spaces; NULL: all (see filter) */
    optim_param_fn filter; /* NULL, or only the parameters it accepts */
    void *filter_user;
    double lr, weight_decay;    /* as in optim_cfg, with the same ranges */
    double beta1, beta2, eps;   /* Adam, AdamW */
    double momentum, dampening; /* SGD */
    bool nesterov;              /* SGD */
} optim_group;

/* Group 0's hyperparameters, selecting nothing (params, filter, filter_user NULL). */
optim_group optim_group_like(const optim *o);
/* Adds a group (above); returns its index (>= 1), or -1. Refused once a step was taken. */
int optim_add_group(optim *o, optim_group g);
size_t optim_group_count(const optim *o); /* 1 + the groups added */
/* Group g's hyperparameters and selection (params copied, owned by o; group 0: params and
 * filter NULL), or NULL when g is out of range. */
const optim_group *optim_group_at(const optim *o, size_t g);
/* The group of parameter i (registration order), or -1 when i is out of range. */
int optim_param_group(const optim *o, size_t i);
double optim_group_lr(const optim *o, size_t g); /* lr group g's next step uses; NaN if none */
/* optim_set_lr for group g (group 0: the same as optim_set_lr with one group). */
int optim_set_group_lr(optim *o, size_t g, double lr);

/* ---- Gradient utilities (usable without an optimizer) ----------------------------------- */

/* sqrt(sum of every gradient element squared), accumulated in double; frozen parameters
 * (requires_grad false) are left out. */
double optim_grad_norm(nn_params *ps);
/* d2l's grad_clipping: when the global norm exceeds max_norm (> 0), scales every gradient by
 * max_norm / norm (frozen parameters: neither counted nor scaled). Returns the norm before
 * clipping. */
double optim_clip_grad_norm(nn_params *ps, double max_norm);

/* ---- Training steps ----------------------------------------------------------------------
 * PyTorch's step in one call:
 *
 *     double loss = optim_train_step(opt, net, c, x, y, optim_loss_cross_entropy);
 *     if (isnan(loss)) ...                       // ag_last_error says why; nothing was updated
 *
 * is net(x), F.cross_entropy(out, y), opt.zero_grad(), loss.backward(), opt.step() (with the
 * cfg's clipping and schedule) and loss.item(), the tape then reset. */

/* A loss: out (on t) and the caller's target -> a scalar tensor on t, or NULL (reported). */
typedef ag_tensor *(*optim_loss_fn)(ag_tape *t, ag_tensor *out, const void *target);
/* F.cross_entropy(logits, labels): logits (..., K), labels const int32_t[] with one class in
 * [0, K) per row (AG_IGNORE_INDEX skips one), the mean over the rows (ag_cross_entropy). */
ag_tensor *optim_loss_cross_entropy(ag_tape *t, ag_tensor *logits, const void *labels);
/* F.mse_loss(out, target): target const ag_real[] of out's numel, row-major in out's shape. */
ag_tensor *optim_loss_mse(ag_tape *t, ag_tensor *out, const void *target);

/* The end of a step: ag_backward(t, loss), optim_step(o), then ag_tape_reset(t) (every tensor
 * of the step freed, whatever happened). Returns the loss's value, or NaN (message in
 * ag_last_error; no update) when o or t is NULL, loss is NULL (a failed forward: its message
 * kept, with this function's name in front), not one value, NaN, or when the backward or the
 * update failed (optim_step's rule: a NaN or infinite gradient norm). */
double optim_minimize(optim *o, ag_tape *t, ag_tensor *loss);
/* A whole step: out = nn_module_forward(m, c, x) (c as given: training mode when c->training),
 * then optim_minimize(o, c->tape, loss(c->tape, out, target)). m must be registered in o's
 * store (a root from nn_module_init, or any module of the store). x (made on c->tape) is freed
 * by the reset. Returns the loss's value, or NaN as optim_minimize, and for a NULL argument
 * or a module of another store (the tape is reset in every case). */
double optim_train_step(optim *o, const nn_module *m, const nn_ctx *c, ag_tensor *x,
                        const void *target, optim_loss_fn loss);

/* ---- Checkpoints ---------------------------------------------------------------------------
 * The state goes into a checkpoint beside the model (nn/checkpoint.h):
 *   metadata  "optim.kind" = "sgd" | "adam" | "adamw",  "optim.step" = t (decimal),
 *             "optim.lr" = group 0's base learning rate (%.17g: exact in double),
 *             "optim.groups" = the number of groups, and for each group g:
 *             "optim.group.<g>.lr", ".weight_decay", and ".beta1", ".beta2", ".eps" (Adam,
 *             AdamW) or ".momentum", ".dampening", ".nesterov" (SGD): its hyperparameters;
 *             "optim.group.<g>.params" (g >= 1): its parameters' names, separated by spaces;
 *             "optim.lr_lambda" when cfg.schedule has a function (which cannot be saved)
 *   tensors   Adam / AdamW: "optim.<kind>.m.<param name>", "optim.<kind>.v.<param name>"
 *             SGD with momentum: "optim.sgd.momentum.<param name>"
 *             "optim.<kind>.step.<param name>": a scalar I64, the parameter's own update
 *             count, only where it differs from t (a parameter that was frozen)
 *   all with the parameter's shape, in the checkpoint's store dtype (F32 by default, which is
 *   exact for the float32 build: training resumes bit for bit).
 * optim_load_state checks the kind, the step, the groups (as many, holding the same
 * parameters: add the same groups with optim_add_group before loading) and every tensor
 * (missing, misshapen, mistyped), rejects "optim." tensors it does not expect, and changes
 * nothing unless all checks pass. It restores every group's hyperparameters, as PyTorch's
 * load_state_dict restores its param_groups (call optim_set_group_lr ... afterwards to resume
 * at another rate). A checkpoint without "optim.groups" (saved before groups existed) is one
 * group: it loads into an optimizer with one group and restores its lr from "optim.lr" when
 * present, the other hyperparameters staying the cfg's. The schedule is not stored: the
 * caller passes the same cfg to optim_new; a checkpoint marked "optim.lr_lambda" loads only
 * into an optimizer whose schedule has a function again (the function itself is the
 * caller's: the same one gives the same run). Frozen flags are the model's, not saved here. */
int optim_save_state(const optim *o, nn_ckpt *ck);
int optim_load_state(optim *o, const nn_ckpt *ck);

#ifdef __cplusplus
}
#endif

#endif
