/* lstm_classifier -- an LSTM sequence classifier written with the module interface
 * (nn/module.h), as an outside project would write it (README.md; the same program in PyTorch:
 * bench/lstm_classifier.py).
 *
 * Task: sequences of T = 16 symbols out of 5; the class is the symbol that occurs most often
 * (sequences with a tie are drawn again). Model: Embedding -> 2-layer LSTM (batch-first) -> its
 * last step -> BatchNorm1d -> GELU -> Dropout -> Linear. Training: AdamW with no weight decay on
 * the 1-D parameters, warm-up then cosine, clipping by global norm. Then the model is saved,
 * loaded into a second copy built from scratch, and both are evaluated on held-out sequences.
 *
 * Exits 0 when the held-out accuracy is at least 0.9 and the reloaded model scores the same. */
#include <math.h>
#include <stdio.h>

#include <tapegrad/datasets/batches.h>
#include <tapegrad/nn/nn.h>
#include <tapegrad/optim/optim.h>

enum { T = 16, SYMBOLS = 5, N_TRAIN = 2048, N_TEST = 512, BATCH = 64, EPOCHS = 10 };

static nn_module *make_model(void) {
    const nn_rnn_opts rnn = {.batch_first = true}; /* x (B, T) */
    return nn_sequential(nn_embedding_m(SYMBOLS, 16), nn_lstm_m_opts(16, 64, 2, 0.1, &rnn),
                         nn_select_m(1, -1), nn_batch_norm1d_m(64), nn_gelu_m(), nn_dropout_m(0.2),
                         nn_linear_m(64, SYMBOLS, true));
}

/* n sequences (n, T) of symbols as whole numbers, and their majority symbol */
static void make_data(ag_real *x, int32_t *y, int n, uint64_t seed) {
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        int count[SYMBOLS] = {0}, best = 0, ties = 0;
        for (int t = 0; t < T; t++)
            count[(int)(x[i * T + t] = (ag_real)ag_rng_below(&r, SYMBOLS))]++;
        for (int s = 1; s < SYMBOLS; s++) best = count[s] > count[best] ? s : best;
        for (int s = 0; s < SYMBOLS; s++) ties += count[s] == count[best];
        y[i] = best;
        if (ties > 1) i--; /* draw it again */
    }
}

static int fail(const char *what) {
    fprintf(stderr, "lstm_classifier: %s\n", what);
    return 1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "lstm_classifier.safetensors";
    static ag_real x[N_TRAIN * T], xt[N_TEST * T];
    static int32_t y[N_TRAIN], yt[N_TEST];
    make_data(x, y, N_TRAIN, 1);
    make_data(xt, yt, N_TEST, 2);

    nn_module *net = make_model(), *net2 = make_model();
    nn_params *ps = nn_module_init(net, 42); /* the store of its tensors, owned by net */
    ds_array arrays[2] = {DS_ARRAY(x, T), DS_ARRAY(y, 1)};
    ds_loader_opts lo = {.batch_size = BATCH, .shuffle = true, .seed = 3};
    ds_loader *loader;
    if (ds_loader_new(N_TRAIN, 2, arrays, &lo, &loader)) return fail(ag_last_error());
    optim_cfg cfg = optim_adamw(3e-3);
    cfg.decay_filter = optim_decay_matrices; /* no decay on biases and BatchNorm */
    cfg.clip_norm = 1.0;
    cfg.schedule = optim_lr_warmup_cosine(30, EPOCHS * ds_loader_count(loader), 0.05);
    optim *opt = optim_new(ps, cfg); /* checks ps too */
    nn_ctx *c = nn_ctx_new(5);       /* a tape and the dropout's random stream, training mode */
    if (!opt || !c) return fail(ag_last_error());

    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        ds_loader_epoch(loader, epoch);
        ds_minibatch b;
        double sum = 0;
        while (ds_loader_next(loader, &b)) {
            ag_tensor *xb = ag_tensor_from(c->tape, AG_SHAPE((int)b.size, T), b.data[0]);
            /* forward, cross-entropy, backward, clipped AdamW update, tape reset */
            double loss = optim_train_step(opt, net, c, xb, b.data[1], optim_loss_cross_entropy);
            if (isnan(loss)) return fail(ag_last_error());
            sum += loss;
        }
        printf("epoch %2d  loss %.4f  lr %.5f\n", epoch, sum / ds_loader_count(loader),
               optim_lr(opt));
    }
    /* Held-out accuracy in eval mode, nothing recorded; then save, load into a model built
     * from scratch, evaluate it. */
    double acc = nn_module_accuracy(net, c, AG_SHAPE(N_TEST, T), xt, yt, NULL);
    if (nn_module_save(net, path) || !nn_module_init(net2, 0) || nn_module_load(net2, path))
        return fail(ag_last_error());
    double acc2 = nn_module_accuracy(net2, c, AG_SHAPE(N_TEST, T), xt, yt, NULL);
    printf("held-out accuracy %.4f; reloaded from %s: %.4f\n", acc, path, acc2);

    nn_ctx_free(c); /* and its tape */
    optim_free(opt);
    ds_loader_free(loader);
    nn_module_free(net); /* and its store */
    nn_module_free(net2);
    if (acc < 0.9) return fail(acc < 0 ? ag_last_error() : "held-out accuracy below 0.9");
    return acc2 == acc ? 0 : fail("the reloaded model scores differently");
}
