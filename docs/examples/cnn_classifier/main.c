/* cnn_classifier -- a small convolutional network written as an outside project would write it
 * (docs/examples/cnn_classifier/README.md).
 *
 * Task: 16x16 grey images of one bar on a noisy background, 4 classes by the bar's direction:
 * horizontal, vertical, diagonal (\) and anti-diagonal (/); the bar's position, length,
 * thickness and brightness vary, the noise is Gaussian. The program makes the images itself
 * from a seed: 2400 to train, 600 held out.
 * Model (one Sequential of modules, nn/module.h): conv 3x3 (1 -> 8) -> ReLU -> max pool 2 ->
 *        conv 3x3 (8 -> 16) -> ReLU -> max pool 2 -> flatten (16 x 4 x 4) -> linear (256 -> 4).
 * Training: shuffled mini-batches of 32 (ds_loader), cross-entropy, Adam, 6 epochs.
 * Evaluation: accuracy on the held-out images (argmax of the logits), a confusion matrix; then
 * the model is saved, loaded into a second copy built from scratch and evaluated again. The same
 * program in PyTorch: bench/cnn_classifier.py.
 *
 *     cnn_classifier [seed [checkpoint.safetensors]]   (seed 1: the data, weights and shuffles)
 *
 * Exits 0 when the held-out accuracy is at least 0.95 and the reloaded model scores the same
 * (ctest runs it). Deterministic for a seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tapegrad/datasets/batches.h>
#include <tapegrad/nn/nn.h>
#include <tapegrad/optim/optim.h>

enum { S = 16, CLASSES = 4, BATCH = 32, EPOCHS = 6 }; /* S: the images' side */
enum { N_TRAIN = 2400, N_TEST = 600, N = N_TRAIN + N_TEST };

static const char *class_names[CLASSES] = {"horizontal", "vertical", "diagonal", "anti-diagonal"};

static nn_module *make_model(void) { /* x (B, 1, 16, 16) -> logits (B, 4) */
    return nn_sequential(nn_conv2d_m(1, 8, 3, 1, 1), nn_relu_m(), nn_max_pool2d_m(2, 0, 0),
                         nn_conv2d_m(8, 16, 3, 1, 1), nn_relu_m(), nn_max_pool2d_m(2, 0, 0),
                         nn_flatten_m(1, -1), nn_linear_m(16 * (S / 4) * (S / 4), CLASSES, true));
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
    for (int i = 0; i < S; i++) {
        for (int j = 0; j < 2 * S; j++) { /* row i of a, then of b */
            const ag_real v = (j < S ? a : b)[i * S + j % S];
            printf("%s%c", j % S ? "" : "    ", " .:-=+*#"[v <= 0 ? 0 : v >= 1 ? 7 : (int)(v * 8)]);
        }
        putchar('\n');
    }
}

static int fail(const char *what) {
    fprintf(stderr, "cnn_classifier: %s\n", what);
    return 1;
}

int main(int argc, char **argv) {
    const int seed = argc > 1 ? atoi(argv[1]) : 1;
    const char *path = argc > 2 ? argv[2] : "cnn_classifier.safetensors";
    static ag_real x[(size_t)N * S * S];
    static int32_t y[N], pred[N_TEST];
    make_data(x, y, seed);
    printf("a %s bar and a %s one (seed %d):\n", class_names[y[0]], class_names[y[2]], seed);
    show(x, x + 2 * S * S);

    nn_module *net = make_model(), *net2 = make_model();
    nn_params *ps = nn_module_init(net, seed);     /* the store of its tensors, owned by net */
    optim *opt = optim_new(ps, optim_adam(0.005)); /* checks ps too */
    nn_ctx *c = nn_ctx_new(seed);                  /* a tape (and a random stream), training mode */
    if (!opt || !c) return fail(ag_last_error());
    printf("parameters: %zu (0.weight [8, 1, 3, 3] ... 7.bias [4])\n", nn_params_numel(ps));
    ds_array arrays[2] = {DS_ARRAY(x, S * S), DS_ARRAY(y, 1)};
    ds_loader_opts lo = {.batch_size = BATCH, .shuffle = true, .seed = seed};
    ds_loader *loader;
    if (ds_loader_new(N_TRAIN, 2, arrays, &lo, &loader)) return fail(ag_last_error());

    const ag_real *xt = x + N_TRAIN * S * S;
    double acc = 0;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        ds_loader_epoch(loader, epoch);
        ds_minibatch b;
        double sum = 0;
        while (ds_loader_next(loader, &b)) {
            ag_tensor *xb = ag_tensor_from(c->tape, AG_SHAPE((int)b.size, 1, S, S), b.data[0]);
            double loss = optim_train_step(opt, net, c, xb, b.data[1], optim_loss_cross_entropy);
            if (isnan(loss)) return fail(ag_last_error());
            sum += loss;
        }
        /* eval mode, nothing recorded; the predictions kept for the confusion matrix */
        acc = nn_module_accuracy(net, c, AG_SHAPE(N_TEST, 1, S, S), xt, y + N_TRAIN, pred);
        if (acc < 0) return fail(ag_last_error());
        printf("epoch %d  loss %.4f  held-out accuracy %.3f\n", epoch,
               sum / (double)ds_loader_count(loader), acc);
    }
    int confusion[CLASSES][CLASSES] = {{0}};
    for (int i = 0; i < N_TEST; i++) confusion[y[N_TRAIN + i]][pred[i]]++;
    printf("held-out confusion matrix (rows: true class, columns: predicted)\n");
    for (int k = 0; k < CLASSES; k++)
        printf("  %-13s %4d %4d %4d %4d\n", class_names[k], confusion[k][0], confusion[k][1],
               confusion[k][2], confusion[k][3]);

    /* Save, load into a model built from scratch, evaluate it. */
    if (nn_module_save(net, path) || !nn_module_init(net2, 0) || nn_module_load(net2, path))
        return fail(ag_last_error());
    double acc2 = nn_module_accuracy(net2, c, AG_SHAPE(N_TEST, 1, S, S), xt, y + N_TRAIN, NULL);
    printf("reloaded from %s: held-out accuracy %.3f\n", path, acc2);

    nn_ctx_free(c); /* and its tape */
    optim_free(opt);
    ds_loader_free(loader);
    nn_module_free(net); /* and its store */
    nn_module_free(net2);
    if (acc < 0.95) return fail("held-out accuracy below 0.95");
    return acc2 == acc ? 0 : fail("the reloaded model scores differently");
}
