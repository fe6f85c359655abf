/* char_lm -- a character-level language model, written as an outside project would write it
 * (docs/examples/char_lm/README.md).
 *
 * Data: the opening of Lewis Carroll's "Alice's Adventures in Wonderland" (1865, public
 * domain), embedded below. Every position i gives one example: the CTX characters before it
 * predict character i.
 * Model (Bengio et al. 2003's neural probabilistic LM, on characters): an embedding of each
 * context character, the CTX embeddings concatenated, a hidden layer with GELU, a linear layer
 * to logits over the vocabulary; softmax cross-entropy.
 * Training: shuffled mini-batches (ds_loader), AdamW without decay on the 1-D parameters, a
 * warm-up then cosine schedule. Then it samples text: the softmax of the logits copied out
 * (ag_copy_out) and drawn from, and a greedy continuation (ag_argmax).
 *
 * Exits 0 when the loss fell to under half its first value (ctest runs it). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tapegrad/datasets/batches.h>
#include <tapegrad/nn/nn.h>
#include <tapegrad/optim/optim.h>

static const char TEXT[] =
    "alice was beginning to get very tired of sitting by her sister on the bank, and of "
    "having nothing to do: once or twice she had peeped into the book her sister was "
    "reading, but it had no pictures or conversations in it, and what is the use of a book, "
    "thought alice, without pictures or conversations? so she was considering in her own "
    "mind (as well as she could, for the hot day made her feel very sleepy and stupid), "
    "whether the pleasure of making a daisy-chain would be worth the trouble of getting up "
    "and picking the daisies, when suddenly a white rabbit with pink eyes ran close by her. "
    "there was nothing so very remarkable in that; nor did alice think it so very much out "
    "of the way to hear the rabbit say to itself, oh dear! oh dear! i shall be late! but "
    "when the rabbit actually took a watch out of its waistcoat-pocket, and looked at it, "
    "and then hurried on, alice started to her feet, for it flashed across her mind that she "
    "had never before seen a rabbit with either a waistcoat-pocket, or a watch to take out "
    "of it, and burning with curiosity, she ran across the field after it, and fortunately "
    "was just in time to see it pop down a large rabbit-hole under the hedge. ";

enum { CTX = 8, EMB = 16, HIDDEN = 128, BATCH = 64, STEPS = 800, REPORT = 100, SAMPLE = 160 };

/* ---- the vocabulary: the distinct bytes of the text, in byte order -------------------------- */

typedef struct vocab {
    int size;
    char chars[256];
    int32_t id[256]; /* byte -> id, -1 when absent */
} vocab;

static void vocab_build(vocab *v, const char *text) {
    bool seen[256] = {false};
    for (const char *p = text; *p; p++) seen[(unsigned char)*p] = true;
    v->size = 0;
    for (int b = 0; b < 256; b++) {
        v->id[b] = seen[b] ? v->size : -1;
        if (seen[b]) v->chars[v->size++] = (char)b;
    }
}

/* ---- the model ------------------------------------------------------------------------------ */

typedef struct char_mlp {
    nn_embedding emb;
    nn_linear hidden, out;
} char_mlp;

static int model_init(char_mlp *m, nn_params *ps, int vocab_size) {
    return nn_embedding_init(&m->emb, ps, "emb", vocab_size, EMB) ||
                   nn_linear_init(&m->hidden, ps, "hidden", CTX * EMB, HIDDEN, true) ||
                   nn_linear_init(&m->out, ps, "out", HIDDEN, vocab_size, true)
               ? -1
               : 0;
}

/* ids (B, CTX) -> logits (B, V). */
static ag_tensor *model_forward(const char_mlp *m, const nn_ctx *c, const int32_t *ids, int B) {
    ag_tensor *e = nn_embedding_forward(&m->emb, c, ids, AG_SHAPE(B, CTX)); /* (B, CTX, EMB) */
    ag_tensor *h = ag_reshape(c->tape, e, AG_SHAPE(B, CTX * EMB));          /* concatenated */
    h = ag_gelu(c->tape, nn_linear_forward(&m->hidden, c, h));
    return nn_linear_forward(&m->out, c, h);
}

/* Continues `ctx` (CTX ids) by n characters into out: drawn from softmax(logits / temperature)
 * with rng, or the most likely one when rng is NULL. */
static int generate(const char_mlp *m, const vocab *v, ag_tape *t, const int32_t *start, int n,
                    double temperature, ag_rng *rng, char *out) {
    nn_ctx c = {.tape = t, .training = false};
    int32_t ctx[CTX];
    memcpy(ctx, start, sizeof ctx);
    bool was = ag_tape_set_recording(t, false);
    for (int i = 0; i < n; i++) {
        ag_tensor *logits = model_forward(m, &c, ctx, 1);
        int32_t next;
        if (!rng) {
            if (!logits || ag_argmax(logits, -1, &next, 1)) return -1;
        } else {
            float p[256];
            ag_tensor *probs = ag_softmax(t, ag_scale(t, logits, 1 / temperature));
            if (!probs || ag_copy_out_f32(probs, p, 256)) return -1;
            double u = ag_rng_uniform(rng), acc = 0;
            next = (int32_t)v->size - 1; /* if rounding leaves u above the total */
            for (int k = 0; k < v->size; k++)
                if ((acc += p[k]) > u) {
                    next = k;
                    break;
                }
        }
        out[i] = v->chars[next];
        memmove(ctx, ctx + 1, (CTX - 1) * sizeof *ctx);
        ctx[CTX - 1] = next;
        ag_tape_reset(t);
    }
    out[n] = '\0';
    ag_tape_set_recording(t, was);
    return 0;
}

static int fail(const char *what) {
    fprintf(stderr, "char_lm: %s\n", what);
    return 1;
}

int main(void) {
    vocab v;
    vocab_build(&v, TEXT);
    enum { L = sizeof TEXT - 1, N = L - CTX };
    static int32_t ids[L], contexts[N * CTX], targets[N];
    for (int i = 0; i < L; i++) ids[i] = v.id[(unsigned char)TEXT[i]];
    for (int i = 0; i < N; i++) {
        memcpy(contexts + i * CTX, ids + i, CTX * sizeof *ids);
        targets[i] = ids[i + CTX];
    }
    printf("text: %d characters, vocabulary %d, %d examples\n", L, v.size, N);

    nn_params *ps = nn_params_new();
    char_mlp model;
    if (model_init(&model, ps, v.size) || nn_params_finalize(ps, 1)) return fail(ag_last_error());

    ds_array arrays[2] = {DS_ARRAY(contexts, CTX), DS_ARRAY(targets, 1)};
    ds_loader_opts lo = {.batch_size = BATCH, .shuffle = true, .drop_last = true, .seed = 2};
    ds_loader *loader;
    if (ds_loader_new(N, 2, arrays, &lo, &loader)) return fail(ag_last_error());

    optim_cfg cfg = optim_adamw(3e-3);
    cfg.decay_filter = optim_decay_matrices; /* the embedding and weights decay, biases not */
    cfg.clip_norm = 1.0;
    cfg.schedule = optim_lr_warmup_cosine(100, STEPS, 0.1);
    optim *opt = optim_new(ps, cfg);
    if (!opt) return fail(ag_last_error());

    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    double first = 0, window = 0;
    int64_t epoch = 0;
    ds_minibatch b;
    for (int step = 1; step <= STEPS; step++) {
        if (!ds_loader_next(loader, &b)) { /* the epoch is over: the next one, reshuffled */
            ds_loader_epoch(loader, ++epoch);
            ds_loader_next(loader, &b);
        }
        ag_tensor *logits = model_forward(&model, &c, b.data[0], (int)b.size);
        ag_tensor *loss =
            ag_cross_entropy(t, logits, b.data[1], NULL, 0, AG_IGNORE_INDEX, AG_REDUCE_MEAN);
        if (!loss || ag_backward(t, loss)) return fail("forward/backward failed");
        window += ag_get(loss, 0);
        if (step == 1)
            printf("step    1  loss %.3f  (log V = %.3f)\n", ag_get(loss, 0), log(v.size));
        if (optim_step(opt)) return fail(ag_last_error());
        ag_tape_reset(t);
        if (step % REPORT == 0) {
            window /= REPORT;
            if (step == REPORT) first = window;
            printf("step %4d  loss %.3f  (epoch %lld)\n", step, window, (long long)epoch);
            if (step < STEPS) window = 0;
        }
    }

    char text[SAMPLE + 1];
    ag_rng rng;
    ag_rng_seed(&rng, 3);
    if (generate(&model, &v, t, ids, SAMPLE, 0.7, &rng, text)) return fail(ag_last_error());
    printf("sample (temperature 0.7) after \"%.*s\":\n  %s\n", CTX, TEXT, text);
    if (generate(&model, &v, t, ids, SAMPLE, 1, NULL, text)) return fail(ag_last_error());
    printf("greedy:\n  %s\n", text);

    ag_tape_free(t);
    optim_free(opt);
    ds_loader_free(loader);
    nn_params_free(ps);
    if (!(window < 0.5 * first)) return fail("the loss did not fall to half");
    return 0;
}
