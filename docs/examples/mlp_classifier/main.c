/* mlp_classifier -- a model that is not in the zoo, written as an outside project would write
 * it (docs/examples/mlp_classifier/README.md).
 *
 * Task: three interleaved spiral arms in the plane (CS231n's spiral data), 3 classes; a
 * held-out fifth of the points measures the accuracy. Model: an MLP 2-64-64-3 with GELU.
 * Training: shuffled mini-batches (ds_loader), label-smoothed cross-entropy, AdamW without
 * weight decay on the biases, a linear warm-up then cosine learning-rate schedule.
 * Evaluation: ag_argmax over the logits; probabilities copied out with ag_copy_out.
 *
 * Exits 0 when the loss fell and the held-out accuracy is at least 0.9 (ctest runs it). */
#include <math.h>
#include <stdio.h>

#include <tapegrad/datasets/batches.h>
#include <tapegrad/nn/nn.h>
#include <tapegrad/optim/optim.h>

enum {
    PER_CLASS = 200,
    CLASSES = 3,
    N = PER_CLASS * CLASSES,
    N_TEST = N / 5,
    N_TRAIN = N - N_TEST,
    IN = 2,
    HIDDEN = 64,
    BATCH = 32,
    EPOCHS = 60
};

/* ---- the model ---------------------------------------------------------------------------- */

typedef struct mlp {
    nn_linear fc1, fc2, out;
} mlp;

static int mlp_init(mlp *m, nn_params *ps) {
    return nn_linear_init(&m->fc1, ps, "fc1", IN, HIDDEN, true) ||
                   nn_linear_init(&m->fc2, ps, "fc2", HIDDEN, HIDDEN, true) ||
                   nn_linear_init(&m->out, ps, "out", HIDDEN, CLASSES, true)
               ? -1
               : 0;
}

/* x (B, 2) -> logits (B, 3); NULL if an op failed (it reported why). */
static ag_tensor *mlp_forward(const mlp *m, const nn_ctx *c, ag_tensor *x) {
    ag_tensor *h = ag_gelu(c->tape, nn_linear_forward(&m->fc1, c, x));
    h = ag_gelu(c->tape, nn_linear_forward(&m->fc2, c, h));
    return nn_linear_forward(&m->out, c, h);
}

/* ---- the data: spiral arm k at radius r, angle 4k + 4r + noise; shuffled, then split ------- */

static void make_data(ag_real *x, int32_t *y) {
    static ag_real xs[N * IN];
    static int32_t ys[N];
    ag_rng r;
    ag_rng_seed(&r, 7);
    for (int k = 0; k < CLASSES; k++)
        for (int i = 0; i < PER_CLASS; i++) {
            double rad = (double)i / (PER_CLASS - 1);
            double angle = 4.0 * k + 4.0 * rad + 0.2 * ag_rng_normal(&r);
            int n = k * PER_CLASS + i;
            xs[2 * n] = (ag_real)(rad * sin(angle));
            xs[2 * n + 1] = (ag_real)(rad * cos(angle));
            ys[n] = k;
        }
    int64_t perm[N];
    ag_rng_permutation(perm, N, 7, 0); /* the first N_TRAIN rows train, the rest test */
    for (int n = 0; n < N; n++) {
        x[2 * n] = xs[2 * perm[n]];
        x[2 * n + 1] = xs[2 * perm[n] + 1];
        y[n] = ys[perm[n]];
    }
}

static int fail(const char *what) {
    fprintf(stderr, "mlp_classifier: %s\n", what);
    return 1;
}

int main(void) {
    static ag_real x[N * IN];
    static int32_t y[N];
    make_data(x, y);

    nn_params *ps = nn_params_new();
    mlp model;
    if (mlp_init(&model, ps) || nn_params_finalize(ps, 42)) return fail(ag_last_error());

    /* Mini-batches of the training rows: features and labels gathered together. */
    ds_array arrays[2] = {DS_ARRAY(x, IN), DS_ARRAY(y, 1)};
    ds_loader_opts lo = {.batch_size = BATCH, .shuffle = true, .seed = 1};
    ds_loader *loader;
    if (ds_loader_new(N_TRAIN, 2, arrays, &lo, &loader)) return fail(ag_last_error());

    /* AdamW, no decay on the 1-D parameters (biases), warm-up then cosine to 0.1 lr. */
    optim_cfg cfg = optim_adamw(0.01);
    cfg.decay_filter = optim_decay_matrices;
    cfg.clip_norm = 1.0;
    cfg.schedule = optim_lr_warmup_cosine(20, EPOCHS * ds_loader_count(loader), 0.1);
    optim *opt = optim_new(ps, cfg);
    if (!opt) return fail(ag_last_error());

    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    double first = 0, last = 0;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        ds_loader_epoch(loader, epoch);
        ds_minibatch b;
        double sum = 0;
        while (ds_loader_next(loader, &b)) {
            ag_tensor *xb = ag_tensor_from(t, AG_SHAPE((int)b.size, IN), b.data[0]);
            ag_tensor *loss = ag_cross_entropy(t, mlp_forward(&model, &c, xb), b.data[1], NULL,
                                               0.05, AG_IGNORE_INDEX, AG_REDUCE_MEAN);
            if (!loss || ag_backward(t, loss)) return fail("forward/backward failed");
            sum += ag_get(loss, 0);
            if (optim_step(opt)) return fail(ag_last_error());
            ag_tape_reset(t);
        }
        last = sum / (double)ds_loader_count(loader);
        if (epoch == 0) first = last;
        if (epoch % 10 == 0 || epoch == EPOCHS - 1)
            printf("epoch %2d  loss %.4f  lr %.5f\n", epoch, last, optim_lr(opt));
    }

    /* Held-out accuracy: eval mode, no recording; predictions by argmax over the classes. */
    c.training = false;
    ag_tape_set_recording(t, false);
    ag_tensor *logits =
        mlp_forward(&model, &c, ag_tensor_from(t, AG_SHAPE(N_TEST, IN), x + N_TRAIN * IN));
    int32_t pred[N_TEST];
    if (!logits || ag_argmax(logits, -1, pred, N_TEST)) return fail(ag_last_error());
    int correct = 0;
    for (int i = 0; i < N_TEST; i++) correct += pred[i] == y[N_TRAIN + i];
    double acc = (double)correct / N_TEST;
    printf("loss %.4f -> %.4f, held-out accuracy %.3f (%d of %d)\n", first, last, acc, correct,
           N_TEST);

    /* Class probabilities of three held-out points, copied out of the tape as floats. */
    float probs[3 * CLASSES];
    if (ag_copy_out_f32(ag_softmax(t, ag_narrow(t, logits, 0, 0, 3)), probs, 3 * CLASSES))
        return fail(ag_last_error());
    for (int i = 0; i < 3; i++)
        printf("point (%+.2f, %+.2f), class %d: p = %.3f %.3f %.3f\n", x[(N_TRAIN + i) * IN],
               x[(N_TRAIN + i) * IN + 1], y[N_TRAIN + i], probs[3 * i], probs[3 * i + 1],
               probs[3 * i + 2]);

    ag_tape_free(t);
    optim_free(opt);
    ds_loader_free(loader);
    nn_params_free(ps);
    if (!(last < 0.5 * first)) return fail("the loss did not fall by half");
    if (acc < 0.9) return fail("held-out accuracy below 0.9");
    return 0;
}
