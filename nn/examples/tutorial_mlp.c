/* tutorial_mlp.c -- the tutorial of docs/nn.md: write, train, save and reload a small model.
 *
 * Task: points in [-1, 1]^2 labelled by the angular sector (3 classes) they fall in -- not
 * linearly separable, so the model needs its hidden layers. Model: a 2-32-32-3 MLP with ReLU
 * and dropout, trained with Adam and gradient clipping on the full batch.
 *
 * Run: tutorial_mlp [checkpoint path]   (default: tutorial_mlp.safetensors)
 * Exits 0 when the loss fell, the accuracy is high, and the reloaded checkpoint reproduces the
 * trained model's outputs bit for bit; 1 otherwise (ctest runs it). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "optim/optim.h"

#define PI 3.14159265358979323846

enum { N = 256, IN = 2, HIDDEN = 32, CLASSES = 3, STEPS = 300 };

/* ---- 1. The model: a struct of layers, an init that registers them, a forward ------------ */

typedef struct mlp {
    nn_linear fc1, fc2, fc3;
    nn_dropout drop;
} mlp;

/* Registers fc1.weight, fc1.bias, ... under `prefix` ("" at the top level). */
static int mlp_init(mlp *m, nn_params *ps, const char *prefix) {
    char p[NN_NAME_MAX];
    if (nn_linear_init(&m->fc1, ps, nn_join(p, sizeof p, prefix, "fc1"), IN, HIDDEN, true) ||
        nn_linear_init(&m->fc2, ps, nn_join(p, sizeof p, prefix, "fc2"), HIDDEN, HIDDEN, true) ||
        nn_linear_init(&m->fc3, ps, nn_join(p, sizeof p, prefix, "fc3"), HIDDEN, CLASSES, true))
        return -1;
    return nn_dropout_init(&m->drop, 0.1);
}

/* x (B, 2) -> logits (B, 3). NULL if anything failed (ag reported it). */
static ag_tensor *mlp_forward(const mlp *m, const nn_ctx *c, ag_tensor *x) {
    ag_tensor *h = nn_relu(c, nn_linear_forward(&m->fc1, c, x));
    h = nn_dropout_forward(&m->drop, c, h);
    h = nn_relu(c, nn_linear_forward(&m->fc2, c, h));
    return nn_linear_forward(&m->fc3, c, h);
}

/* ---- 2. Data: N points, label = angular sector ---------------------------------------------- */

static void make_data(ag_real *x, int32_t *y) {
    ag_rng r;
    ag_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) {
        double a = 2 * ag_rng_uniform(&r) - 1, b = 2 * ag_rng_uniform(&r) - 1;
        double angle = atan2(b, a) + PI; /* [0, 2 pi] */
        x[2 * i] = (ag_real)a;
        x[2 * i + 1] = (ag_real)b;
        y[i] = (int32_t)(angle / (2 * PI / CLASSES)) % CLASSES;
    }
}

/* The fraction of the N rows of logits [N, CLASSES] whose largest entry is at ys[i]; copies the
 * logits into out [N * CLASSES] (the caller's) to compare a reloaded model with. */
static double accuracy(const ag_tensor *logits, const int32_t *ys, ag_real *out) {
    int correct = 0;
    for (int i = 0; i < N; i++) {
        int best = 0;
        for (int k = 0; k < CLASSES; k++) {
            out[i * CLASSES + k] = ag_get(logits, i * CLASSES + k);
            if (out[i * CLASSES + k] > out[i * CLASSES + best]) best = k;
        }
        correct += best == ys[i];
    }
    return (double)correct / N;
}

static int fail(const char *what) {
    fprintf(stderr, "tutorial_mlp: %s\n", what);
    return 1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tutorial_mlp.safetensors";
    static ag_real xs[N * IN];
    static int32_t ys[N];
    make_data(xs, ys);

    /* ---- 3. Parameters: register, then finalize (one allocation, seeded init) ------------- */
    nn_params *ps = nn_params_new();
    mlp model;
    if (mlp_init(&model, ps, "") || nn_params_finalize(ps, 42)) return fail(ag_last_error());
    printf("model: %zu tensors, %zu parameters\n", nn_params_count(ps), nn_params_numel(ps));

    /* ---- 4. Optimizer: Adam, clipping by global norm ---------------------------------------- */
    optim_cfg cfg = optim_adam(0.01);
    cfg.clip_norm = 1.0;
    optim *opt = optim_new(ps, cfg);
    if (!opt) return fail(ag_last_error());

    /* ---- 5. Train: forward, loss, backward, step, reset --------------------------------------- */
    ag_tape *t = ag_tape_new();
    ag_rng rng;
    ag_rng_seed(&rng, 1);
    nn_ctx c = {.tape = t, .training = true, .rng = &rng};
    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        ag_tensor *x = ag_tensor_from(t, AG_SHAPE(N, IN), xs);
        ag_tensor *logits = mlp_forward(&model, &c, x);
        ag_tensor *loss = ag_mean(t, ag_softmax_ce(t, logits, ys, NULL), AG_ALL, false);
        if (!loss || ag_backward(t, loss)) return fail("forward/backward failed");
        double l = ag_get(loss, 0);
        if (step == 0) first = l;
        last = l;
        if (step % 50 == 0 || step == STEPS - 1) printf("step %3d  loss %.4f\n", step, l);
        if (optim_step(opt)) return fail(ag_last_error());
        ag_tape_reset(t); /* every intermediate of the step freed at once */
    }

    /* ---- 6. Evaluate: training = false turns dropout off; no tape recording needed -------- */
    c.training = false;
    ag_tape_set_recording(t, false);
    ag_tensor *logits = mlp_forward(&model, &c, ag_tensor_from(t, AG_SHAPE(N, IN), xs));
    if (!logits) return fail("eval forward failed");
    static ag_real trained[N * CLASSES];
    double acc = accuracy(logits, ys, trained);
    printf("loss %.4f -> %.4f, train accuracy %.3f\n", first, last, acc);

    /* ---- 7. Save: parameters, optimizer state and metadata, atomically -------------------- */
    nn_ckpt *ck = nn_ckpt_new();
    if (!ck || nn_ckpt_add_params(ck, ps) || optim_save_state(opt, ck) ||
        nn_ckpt_set_meta(ck, "model", "mlp 2-32-32-3, relu, dropout 0.1") || nn_ckpt_save(ck, path))
        return fail(ag_last_error());
    nn_ckpt_free(ck);

    /* ---- 8. Reload into a fresh model and check that it computes the same outputs --------- */
    nn_params *ps2 = nn_params_new();
    mlp model2;
    if (mlp_init(&model2, ps2, "") || nn_params_finalize(ps2, 999) ||
        nn_load_params(ps2, path)) /* the optim.* tensors are skipped by a model-only load */
        return fail(ag_last_error());
    ag_tape_reset(t);
    ag_tensor *again = mlp_forward(&model2, &c, ag_tensor_from(t, AG_SHAPE(N, IN), xs));
    if (!again) return fail("reloaded forward failed");
    for (int i = 0; i < N * CLASSES; i++)
        if (ag_get(again, i) != trained[i]) return fail("reloaded model differs");
    printf("saved %s and reloaded it: same outputs\n", path);

    ag_tape_free(t);
    optim_free(opt);
    nn_params_free(ps);
    nn_params_free(ps2);
    if (!(last < 0.5 * first)) return fail("the loss did not fall by half");
    if (acc < 0.9) return fail("train accuracy below 0.9");
    return 0;
}
