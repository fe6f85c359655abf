/* cnn_classifier -- a small convolutional network written as an outside project would write it
 * (docs/examples/cnn_classifier/README.md).
 *
 * Task: 16x16 grey images of one bar on a noisy background, 4 classes by the bar's direction:
 * horizontal, vertical, diagonal (\) and anti-diagonal (/); the bar's position, length,
 * thickness and brightness vary, the noise is Gaussian. The program makes the images itself
 * from a seed: 2400 to train, 600 held out.
 * Model: conv 3x3 (1 -> 8) -> ReLU -> max pool 2 -> conv 3x3 (8 -> 16) -> ReLU -> max pool 2
 *        -> flatten (16 x 4 x 4) -> linear (256 -> 4).
 * Training: shuffled mini-batches of 32 (ds_loader), cross-entropy, Adam, 6 epochs.
 * Evaluation: accuracy on the held-out images (argmax of the logits).
 *
 *     cnn_classifier [seed]        (default 1: the data, the initial weights and the shuffles)
 *
 * Exits 0 when the held-out accuracy is at least 0.95 (ctest runs it). Deterministic for a
 * seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tapegrad/datasets/batches.h>
#include <tapegrad/nn/nn.h>
#include <tapegrad/optim/optim.h>

enum {
    S = 16, /* image side */
    CLASSES = 4,
    N_TRAIN = 2400,
    N_TEST = 600,
    N = N_TRAIN + N_TEST,
    BATCH = 32,
    EPOCHS = 6
};

static const char *class_names[CLASSES] = {"horizontal", "vertical", "diagonal", "anti-diagonal"};

/* ---- the model ---------------------------------------------------------------------------- */

typedef struct cnn {
    nn_conv2d conv1, conv2;
    nn_linear fc;
} cnn;

static int cnn_init(cnn *m, nn_params *ps) {
    const nn_conv2d_opts same = {.padding = {1, 1}}; /* 3x3 with padding 1 keeps the size */
    return nn_conv2d_init(&m->conv1, ps, "conv1", 1, 8, 3, 3, &same) ||
                   nn_conv2d_init(&m->conv2, ps, "conv2", 8, 16, 3, 3, &same) ||
                   nn_linear_init(&m->fc, ps, "fc", 16 * (S / 4) * (S / 4), CLASSES, true)
               ? -1
               : 0;
}

/* x (B, 1, 16, 16) -> logits (B, 4); NULL if an op failed (it reported why). */
static ag_tensor *cnn_forward(const cnn *m, const nn_ctx *c, ag_tensor *x) {
    ag_tensor *h = nn_max_pool2d(c, nn_relu(c, nn_conv2d_forward(&m->conv1, c, x)), 2, 0, 0);
    h = nn_max_pool2d(c, nn_relu(c, nn_conv2d_forward(&m->conv2, c, h)), 2, 0, 0); /* (B,16,4,4) */
    if (!h) return NULL;
    h = ag_reshape(c->tape, h, AG_SHAPE(h->shape[0], 16 * (S / 4) * (S / 4)));
    return nn_linear_forward(&m->fc, c, h);
}

/* ---- the data ------------------------------------------------------------------------------ */

/* One image of class k into img (S x S): noise N(0, 0.3^2), then a bar of brightness 0.8-1.2
 * along the class's direction through a random point, 7 to 13 pixels long, 1 or 2 thick. */
static void draw(ag_real *img, int k, ag_rng *r) {
    for (int i = 0; i < S * S; i++) img[i] = (ag_real)(0.3 * ag_rng_normal(r));
    static const int dir[CLASSES][2] = {{0, 1}, {1, 0}, {1, 1}, {1, -1}}; /* (row, column) step */
    static const int side[CLASSES][2] = {{1, 0}, {0, 1}, {0, 1}, {0, 1}}; /* thickening step */
    const int len = 7 + (int)(ag_rng_uniform(r) * 7), thick = 1 + (ag_rng_uniform(r) < 0.5);
    const double v = 0.8 + 0.4 * ag_rng_uniform(r);
    const int r0 = 2 + (int)(ag_rng_uniform(r) * (S - 4)),
              c0 = 2 + (int)(ag_rng_uniform(r) * (S - 4));
    for (int s = -len / 2; s < len - len / 2; s++)
        for (int w = 0; w < thick; w++) {
            int y = r0 + s * dir[k][0] + w * side[k][0], x = c0 + s * dir[k][1] + w * side[k][1];
            if (y >= 0 && y < S && x >= 0 && x < S) img[y * S + x] += (ag_real)v;
        }
}

static void make_data(ag_real *x, int32_t *y, uint64_t seed) {
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (int n = 0; n < N; n++) {
        y[n] = n % CLASSES;
        draw(x + (size_t)n * S * S, y[n], &r);
    }
}

/* Two images side by side as text, ' ' to '#' by brightness. */
static void show(const ag_real *a, const ag_real *b) {
    static const char shades[] = " .:-=+*#";
    for (int i = 0; i < S; i++) {
        for (int k = 0; k < 2; k++) {
            printf("    ");
            for (int j = 0; j < S; j++) {
                const ag_real v = (k ? b : a)[i * S + j];
                putchar(shades[v <= 0 ? 0 : v >= 1 ? 7 : (int)(v * 8)]);
            }
        }
        putchar('\n');
    }
}

static int fail(const char *what) {
    fprintf(stderr, "cnn_classifier: %s\n", what);
    return 1;
}

/* Held-out accuracy: eval mode, nothing recorded; one batch of all the test images. */
static double evaluate(const cnn *m, nn_ctx *c, const ag_real *x, const int32_t *y, int32_t *pred) {
    nn_eval_saved e = nn_eval_begin(c);
    ag_tensor *logits = cnn_forward(m, c, ag_tensor_from(c->tape, AG_SHAPE(N_TEST, 1, S, S), x));
    int rc = logits ? ag_argmax(logits, -1, pred, N_TEST) : -1;
    nn_eval_end(c, e);
    ag_tape_reset(c->tape);
    if (rc) return -1;
    int correct = 0;
    for (int i = 0; i < N_TEST; i++) correct += pred[i] == y[i];
    return (double)correct / N_TEST;
}

int main(int argc, char **argv) {
    const uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    static ag_real x[(size_t)N * S * S];
    static int32_t y[N], pred[N_TEST];
    make_data(x, y, seed);
    printf("a %s bar and a %s one (seed %llu):\n", class_names[y[0]], class_names[y[2]],
           (unsigned long long)seed);
    show(x, x + 2 * S * S);

    nn_params *ps = nn_params_new();
    cnn model;
    if (cnn_init(&model, ps) || nn_params_finalize(ps, seed)) return fail(ag_last_error());
    printf("parameters: %zu (conv1.weight [8, 1, 3, 3] ... fc.bias [4])\n", nn_params_numel(ps));

    ds_array arrays[2] = {DS_ARRAY(x, S * S), DS_ARRAY(y, 1)};
    ds_loader_opts lo = {.batch_size = BATCH, .shuffle = true, .seed = seed};
    ds_loader *loader;
    if (ds_loader_new(N_TRAIN, 2, arrays, &lo, &loader)) return fail(ag_last_error());
    optim *opt = optim_new(ps, optim_adam(0.005));
    if (!opt) return fail(ag_last_error());

    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    const ag_real *xt = x + (size_t)N_TRAIN * S * S;
    double acc = 0;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        ds_loader_epoch(loader, epoch);
        ds_minibatch b;
        double sum = 0;
        while (ds_loader_next(loader, &b)) {
            ag_tensor *xb = ag_tensor_from(t, AG_SHAPE((int)b.size, 1, S, S), b.data[0]);
            ag_tensor *loss = ag_cross_entropy(t, cnn_forward(&model, &c, xb), b.data[1], NULL, 0,
                                               AG_IGNORE_INDEX, AG_REDUCE_MEAN);
            if (!loss || ag_backward(t, loss)) return fail("forward/backward failed");
            sum += ag_get(loss, 0);
            if (optim_step(opt)) return fail(ag_last_error());
            ag_tape_reset(t);
        }
        if ((acc = evaluate(&model, &c, xt, y + N_TRAIN, pred)) < 0) return fail(ag_last_error());
        printf("epoch %d  loss %.4f  held-out accuracy %.3f\n", epoch,
               sum / (double)ds_loader_count(loader), acc);
    }
    int confusion[CLASSES][CLASSES] = {{0}};
    for (int i = 0; i < N_TEST; i++) confusion[y[N_TRAIN + i]][pred[i]]++;
    printf("held-out accuracy %.3f (%d images); rows: true class, columns: predicted\n", acc,
           N_TEST);
    for (int k = 0; k < CLASSES; k++)
        printf("  %-13s %4d %4d %4d %4d\n", class_names[k], confusion[k][0], confusion[k][1],
               confusion[k][2], confusion[k][3]);

    ag_tape_free(t);
    optim_free(opt);
    ds_loader_free(loader);
    nn_params_free(ps);
    if (acc < 0.95) return fail("held-out accuracy below 0.95");
    return 0;
}
