/* bench_decode.c -- decoding speed and peak memory of the big Transformer (d_model 256, FFN
 * 1024, 8 heads, 3 + 3 layers) with the full fra.txt vocabularies, randomly initialised (seed
 * 42): it never says <eos>, so every sentence runs num_steps steps, the worst case.
 *   bench_decode FRA_TXT greedy|beam [batch] [num_steps] [beam] [threads] [none|int8|bf16]
 * decodes the 2,000 sentences of a seeded test split (split_seed 1), `batch` sentences per call
 * of zoo_greedy / zoo_beam_search (default: all at once), and prints sentences/s, the process's
 * peak RSS (getrusage ru_maxrss) and a hash of the translations (the same hash: the same
 * tokens). threads: the engine's threads (default 1). The last argument: the Linear layers'
 * arithmetic (zoo_decode_quantize; default none). Run one mode per process: the peak RSS is the
 * process's. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "datasets/fra_eng.h"
#include "zoo/app/decode.h"
#include "tests/bench_util.h"
#include "zoo/models/transformer.h"

static double peak_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024.0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s FRA_TXT greedy|beam [batch] [num_steps] [beam] [threads] "
                "[none|int8|bf16]\n",
                argv[0]);
        return 2;
    }
    bool greedy = !strcmp(argv[2], "greedy");
    int batch = argc > 3 ? atoi(argv[3]) : 2000, T = argc > 4 ? atoi(argv[4]) : 10;
    int K = argc > 5 ? atoi(argv[5]) : 4, N = 2000;
    if (argc > 6 && ag_set_threads(atoi(argv[6])))
        return fprintf(stderr, "%s\n", ag_last_error()), 2;
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    o.num_steps = T;
    o.test_frac = (N + 0.5) / 167130.0; /* fra.txt's pairs: floor(test_frac * pairs) = 2000 */
    o.split_seed = 1;
    ds_fra *d;
    if (ds_fra_load(argv[1], &o, &d)) return fprintf(stderr, "%s\n", ag_last_error()), 1;
    const ds_vocab *sv = ds_fra_vocab(d, DS_SRC), *tv = ds_fra_vocab(d, DS_TGT);
    int64_t n_test = ds_fra_part_size(d, DS_TEST);
    if (n_test < N) return fprintf(stderr, "only %lld test pairs\n", (long long)n_test), 1;
    const int64_t *pairs = ds_fra_part_pairs(d, DS_TEST);
    int32_t *src = malloc(sizeof *src * (size_t)N * T), *len = malloc(sizeof *len * N);
    int32_t *out = malloc(sizeof *out * (size_t)N * T);
    int *out_len = malloc(sizeof *out_len * N);
    for (int i = 0; i < N; i++) {
        memcpy(src + (size_t)i * T, ds_fra_ids(d, DS_SRC) + pairs[i] * T, sizeof *src * T);
        len[i] = ds_fra_valid_len(d, DS_SRC)[pairs[i]];
    }
    /* the big model, randomly initialised: it never says <eos>, every sentence runs T steps */
    zoo_transformer_cfg hp = zoo_transformer_default_cfg;
    hp.hiddens = 256;
    hp.ffn_hiddens = 1024;
    hp.heads = 8;
    hp.layers = 3;
    zoo_model *m =
        zoo_model_new(&zoo_transformer_kind, &hp, ds_vocab_size(sv), ds_vocab_size(tv), 42);
    if (!m) return fprintf(stderr, "%s\n", ag_last_error()), 1;
    nn_quant q = NN_QUANT_NONE;
    for (int i = 0; argc > 7 && nn_quant_names[i]; i++)
        if (!strcmp(argv[7], nn_quant_names[i])) q = (nn_quant)i;
    if (zoo_decode_quantize(m, q, false)) return fprintf(stderr, "%s\n", ag_last_error()), 1;
    printf("vocab %d/%d, %d sentences, num_steps %d, %s batch %d%s, %s (%s), rss after load "
           "%.0f MB\n",
           ds_vocab_size(sv), ds_vocab_size(tv), N, T, greedy ? "greedy" : "beam", batch,
           greedy ? "" : " sentences", q ? nn_quant_names[q] : "float",
           q == NN_QUANT_INT8   ? nn_qkernel_name(nn_qkernel_auto())
           : q == NN_QUANT_BF16 ? nn_bkernel_name(nn_bkernel_auto())
                                : "float kernels",
           peak_mb());
    int32_t bos = ds_vocab_id(tv, "<bos>"), eos = ds_vocab_id(tv, "<eos>");
    ag_tape *t = ag_tape_new();
    double t0 = bench_now();
    int rc = 0;
    for (int at = 0; at < N && !rc; at += batch) {
        int B = N - at < batch ? N - at : batch;
        if (greedy) {
            rc = zoo_greedy(m, t, src + (size_t)at * T, len + at, B, T, bos, eos, T,
                            out + (size_t)at * T, out_len + at);
        } else {
            rc = zoo_beam_search(m, t, src + (size_t)at * T, len + at, B, T, bos, eos, T, K, 0.6,
                                 out + (size_t)at * T, out_len + at);
        }
    }
    double secs = bench_now() - t0;
    if (rc) return fprintf(stderr, "%s\n", ag_last_error()), 1;
    uint64_t h = 1469598103934665603ULL;
    long tokens = 0;
    for (int i = 0; i < N; i++) {
        tokens += out_len[i];
        for (int j = 0; j < out_len[i]; j++)
            h = (h ^ (uint64_t)out[(size_t)i * T + j]) * 1099511628211ULL;
        h = (h ^ 0xffff) * 1099511628211ULL;
    }
    printf("%s: %.2f s, %.1f sentences/s, %ld tokens, hash %016llx, peak RSS %.0f MB, tape high "
           "water %.0f MB\n",
           greedy ? "greedy" : "beam", secs, N / secs, tokens, (unsigned long long)h, peak_mb(),
           ag_tape_stats_get(t).high_water / 1048576.0);
    ag_tape_free(t);
    zoo_model_free(m);
    free(src), free(len), free(out), free(out_len);
    ds_fra_free(d);
    return 0;
}
