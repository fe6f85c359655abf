/* test_decode.c -- incremental decoding through the model interface (step, select, reserve) for
 * every model, and the batched greedy and beam searches of zoo/app/decode.h against the
 * one-sentence beam search they replace (kept below as the reference), on tiny random models. */
#include "tests/tg_test.h"
#include "zoo/app/decode.h"
#include "zoo/models/bahdanau.h"
#include "zoo/models/transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NS = 6, TS = 5, SV = 13, TV = 11, BOS = 2, EOS = 3 };
static const int32_t SRC[NS * TS] = {4,  5, 6, 3, 1, 7, 3, 1, 1, 1, 8, 9, 10, 11, 3,
                                     12, 4, 3, 1, 1, 5, 5, 5, 3, 1, 3, 1, 1,  1,  1};
static const int32_t SRC_LEN[NS] = {4, 2, 5, 3, 4, 1};

/* The tiny models: kind 0 the Transformer, 1 the Bahdanau GRU, 2 the Transformer with a
 * shallower decoder (3 encoder blocks, 1 decoder block). */
enum { NKIND = 3 };
static zoo_model *tiny_model(int kind, uint64_t seed) {
    if (kind != 1) {
        zoo_transformer_cfg h = zoo_transformer_default_cfg;
        h.hiddens = 8;
        h.ffn_hiddens = 12;
        h.heads = 2;
        h.layers = kind ? 3 : 2;
        h.dec_layers = kind ? 1 : 0;
        return zoo_model_new(&zoo_transformer_kind, &h, SV, TV, seed);
    }
    zoo_bahdanau_cfg h = zoo_bahdanau_default_cfg;
    h.embed = 6;
    h.hiddens = 8;
    return zoo_model_new(&zoo_bahdanau_kind, &h, SV, TV, seed);
}
static const char *const KIND[NKIND] = {"transformer", "bahdanau", "transformer 3+1"};

static double max_err(const ag_real *a, const ag_real *b, int n) {
    double e = 0;
    for (int i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

/* The sources of rows[0..n) as a batch. */
static void pick(const int32_t *rows, int n, int32_t *src, int32_t *len) {
    for (int i = 0; i < n; i++) {
        memcpy(src + (size_t)i * TS, SRC + (size_t)rows[i] * TS, sizeof *src * TS);
        len[i] = SRC_LEN[rows[i]];
    }
}

/* ---- the interface: step, select, reserve ---- */

/* For each model: steps equal decode; a select (expanding, repeating, dropping rows) between
 * steps gives the steps of a state built from the selected rows; with reserve, mark and a
 * rewind after every step (select included) the results are the same and the tape does not
 * grow; recording gradients is refused. */
static void test_select_equals_direct(void) {
    for (int kind = 0; kind < NKIND; kind++) {
        zoo_model *m = tiny_model(kind, 5);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        ag_tape *t = ag_tape_new();
        nn_ctx c = {.tape = t, .training = false};
        ag_tape_set_recording(t, false);
        const int32_t first[3] = {0, 1, 2};
        const int32_t rows[5] = {2, 0, 0, 1, 2}; /* 3 -> 5 rows */
        const int32_t rows2[2] = {4, 1};         /* 5 -> 2 rows */
        const int32_t toks[4][5] = {
            {BOS, BOS, BOS, 0, 0}, {4, 5, 6, 0, 0}, {7, 8, 9, 10, 4}, {5, 6, 0, 0, 0}};
        /* the prefix of row i of each stage, as the direct reference sees it */
        for (int rewind = 0; rewind < 2; rewind++) {
            void *s = m->ops->encode(m, &c, SRC, SRC_LEN, 3, TS, NULL);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            ag_tape_pos mark = ag_tape_mark(t);
            if (rewind) {
                CU_ASSERT_EQUAL_FATAL(m->ops->reserve(m, &c, s, 5, 4), 0);
                mark = ag_tape_mark(t);
            }
            size_t used = ag_tape_stats_get(t).bytes_used;
            ag_real got[4][5 * TV];
            const int32_t *sel[4] = {first, first, rows, rows2};
            const int n_rows[4] = {3, 3, 5, 2};
            for (int step = 0; step < 4; step++) {
                if (step == 2 || step == 3)
                    CU_ASSERT_EQUAL_FATAL(m->ops->select(m, &c, s, sel[step], n_rows[step]), 0);
                ag_tensor *y = m->ops->step(m, &c, s, toks[step], n_rows[step], NULL);
                CU_ASSERT_PTR_NOT_NULL_FATAL(y);
                CU_ASSERT_EQUAL(y->shape[0], n_rows[step]);
                memcpy(got[step], y->data, sizeof(ag_real) * (size_t)n_rows[step] * TV);
                if (rewind) {
                    CU_ASSERT_EQUAL(ag_tape_rewind(t, mark), 0);
                    CU_ASSERT_EQUAL(ag_tape_stats_get(t).bytes_used, used);
                }
            }
            /* direct: row i of step 3 is source rows[rows2[i]], its prefix the tokens it was fed */
            int32_t src[5 * TS], len[5], dec[5 * 4];
            const int32_t final_rows[2] = {rows[rows2[0]], rows[rows2[1]]};
            pick(final_rows, 2, src, len);
            for (int i = 0; i < 2; i++) {
                int r1 = rows[rows2[i]]; /* row of steps 0, 1 */
                dec[i * 4 + 0] = toks[0][r1];
                dec[i * 4 + 1] = toks[1][r1];
                dec[i * 4 + 2] = toks[2][rows2[i]];
                dec[i * 4 + 3] = toks[3][i];
            }
            ag_tensor *full =
                m->ops->decode(m, &c, m->ops->encode(m, &c, src, len, 2, TS, NULL), dec, 2, 4);
            CU_ASSERT_PTR_NOT_NULL_FATAL(full);
            double err = 0;
            for (int i = 0; i < 2; i++) {
                int r1 = rows[rows2[i]];
                err = fmax(err, max_err(got[0] + r1 * TV, full->data + (i * 4 + 0) * TV, TV));
                err = fmax(err, max_err(got[1] + r1 * TV, full->data + (i * 4 + 1) * TV, TV));
                err = fmax(err, max_err(got[2] + rows2[i] * TV, full->data + (i * 4 + 2) * TV, TV));
                err = fmax(err, max_err(got[3] + i * TV, full->data + (i * 4 + 3) * TV, TV));
            }
            if (err >= 1e-5) printf("\n    %s, rewind %d: max error %g ", KIND[kind], rewind, err);
            CU_ASSERT_TRUE(err < 1e-5);
            ag_tape_reset(t);
        }
        /* recording gradients: select and reserve refuse */
        ag_tape_set_recording(t, true);
        ag_set_error_handler(tg_capture, NULL);
        void *s = m->ops->encode(m, &c, SRC, SRC_LEN, 3, TS, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        TG_EXPECT_ERROR(m->ops->select(m, &c, s, rows, 5), "inference only");
        CU_ASSERT_EQUAL(m->ops->reserve(m, &c, s, 5, 4), -1);
        ag_set_error_handler(NULL, NULL);
        ag_tape_free(t);
        zoo_model_free(m);
    }
}

/* ---- the one-sentence beam search before batching, the reference ----
 * (zoo/app/decode.c before incremental decoding: the teacher-forced decode of every prefix at
 * each step, one source at a time.) */

typedef struct ref_hyp {
    double score;
    int len;
    int32_t parent, token;
} ref_hyp;

static int32_t ref_argmax(const ag_real *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void ref_keep_best(ref_hyp *best, int *n, int cap, double score, int32_t row,
                          int32_t token) {
    if (*n == cap && score <= best[cap - 1].score) return;
    int i = *n < cap ? (*n)++ : cap - 1;
    while (i > 0 && best[i - 1].score < score) {
        best[i] = best[i - 1];
        i--;
    }
    best[i] = (ref_hyp){score, 0, row, token};
}

static int ref_beam_search(zoo_model *m, ag_tape *t, const int32_t *src, int32_t src_len, int Ts,
                           int32_t bos, int32_t eos, int max_steps, int beam, double alpha,
                           int32_t *out, int *out_len) {
    int K = beam, V = m->tgt_vocab, L = max_steps + 1;
    int32_t *tokens = calloc((size_t)K * L, sizeof *tokens),
            *next = calloc((size_t)K * L, sizeof *next);
    int32_t *srcs = malloc(sizeof *srcs * (size_t)K * Ts), *lens = malloc(sizeof *lens * (size_t)K);
    int32_t *dec_in = malloc(sizeof *dec_in * (size_t)K * L),
            *best_tokens = malloc(sizeof *best_tokens * (size_t)L);
    ref_hyp *alive = calloc((size_t)K, sizeof *alive), *cand = calloc((size_t)2 * K, sizeof *cand);
    double *lp = malloc(sizeof *lp * (size_t)V);
    for (int k = 0; k < K; k++) {
        memcpy(srcs + (size_t)k * Ts, src, sizeof *srcs * (size_t)Ts);
        lens[k] = src_len;
    }
    ag_tape_reset(t);
    bool prev = ag_tape_set_recording(t, false);
    nn_ctx c = {.tape = t, .training = false};
    void *state = m->ops->encode(m, &c, srcs, lens, K, Ts, NULL);
    int rc = state ? 0 : -1;
    int n_alive = 1, best_len = 0, n_finished = 0;
    double best_norm = -INFINITY;
    alive[0] = (ref_hyp){0, 0, 0, 0};
    for (int s = 0; !rc && s < max_steps && n_alive > 0 && n_finished < K; s++) {
        for (int k = 0; k < K; k++) {
            int src_k = k < n_alive ? k : 0;
            dec_in[(size_t)k * (s + 1)] = bos;
            memcpy(dec_in + (size_t)k * (s + 1) + 1, tokens + (size_t)src_k * L,
                   sizeof *dec_in * (size_t)s);
        }
        ag_tensor *y = m->ops->decode(m, &c, state, dec_in, K, s + 1);
        if (!y) {
            rc = -1;
            break;
        }
        int n_cand = 0;
        for (int k = 0; k < n_alive; k++) {
            const ag_real *z = y->data + ((size_t)k * (s + 1) + s) * V;
            double mx = z[ref_argmax(z, V)], sum = 0;
            for (int v = 0; v < V; v++) sum += exp((double)z[v] - mx);
            for (int v = 0; v < V; v++) lp[v] = (double)z[v] - mx - log(sum);
            for (int v = 0; v < V; v++)
                ref_keep_best(cand, &n_cand, 2 * K, alive[k].score + lp[v], k, v);
        }
        int n_next = 0;
        for (int i = 0; i < n_cand && n_next < K; i++) {
            const ref_hyp *h = &cand[i];
            const int32_t *prefix = tokens + (size_t)h->parent * L;
            if (h->token == eos) {
                if (i >= K || n_finished >= K) continue;
                n_finished++;
                double norm = h->score / pow((5.0 + s + 1) / 6.0, alpha);
                if (norm > best_norm) {
                    best_norm = norm;
                    best_len = s;
                    memcpy(best_tokens, prefix, sizeof *best_tokens * (size_t)s);
                }
            } else {
                memcpy(next + (size_t)n_next * L, prefix, sizeof *next * (size_t)s);
                next[(size_t)n_next * L + s] = h->token;
                alive[n_next] = (ref_hyp){h->score, s + 1, 0, 0};
                n_next++;
            }
        }
        int32_t *swap = tokens;
        tokens = next;
        next = swap;
        n_alive = n_next;
    }
    for (int k = 0; !rc && k < n_alive && n_finished < K; k++) {
        double norm = alive[k].score / pow((5.0 + alive[k].len) / 6.0, alpha);
        if (norm > best_norm) {
            best_norm = norm;
            best_len = alive[k].len;
            memcpy(best_tokens, tokens + (size_t)k * L, sizeof *best_tokens * (size_t)best_len);
        }
    }
    if (!rc) {
        memcpy(out, best_tokens, sizeof *out * (size_t)best_len);
        *out_len = best_len;
    }
    ag_tape_set_recording(t, prev);
    ag_tape_reset(t);
    free(tokens), free(next), free(srcs), free(lens), free(dec_in), free(best_tokens);
    free(alive), free(cand), free(lp);
    return rc;
}

/* ---- batched greedy and beam search ---- */

/* The batched beam search gives the reference's translation of every source, for beams 1, 2
 * and 4, with and without the length penalty, on several random models of each kind; beam 1
 * and greedy agree. Some hypotheses end with <eos> early, others run to max_steps. */
static void test_beam_equals_reference(void) {
    const int T = 7;
    int compared = 0, eos_early = 0, full_length = 0;
    for (int kind = 0; kind < NKIND; kind++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            zoo_model *m = tiny_model(kind, seed);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            ag_tape *t = ag_tape_new();
            int32_t greedy_out[NS * T];
            int greedy_len[NS];
            CU_ASSERT_EQUAL_FATAL(
                zoo_greedy(m, t, SRC, SRC_LEN, NS, TS, BOS, EOS, T, greedy_out, greedy_len), 0);
            const int beams[3] = {1, 2, 4};
            const double alphas[2] = {0, 0.75};
            for (int bi = 0; bi < 3; bi++)
                for (int ai = 0; ai < 2; ai++) {
                    int32_t out[NS * T], ref[T];
                    int out_len[NS], ref_len = -1;
                    CU_ASSERT_EQUAL_FATAL(zoo_beam_search(m, t, SRC, SRC_LEN, NS, TS, BOS, EOS, T,
                                                          beams[bi], alphas[ai], out, out_len),
                                          0);
                    for (int b = 0; b < NS; b++) {
                        CU_ASSERT_EQUAL_FATAL(ref_beam_search(m, t, SRC + b * TS, SRC_LEN[b], TS,
                                                              BOS, EOS, T, beams[bi], alphas[ai],
                                                              ref, &ref_len),
                                              0);
                        bool same = ref_len == out_len[b] &&
                                    !memcmp(ref, out + b * T, sizeof *ref * (size_t)ref_len);
                        if (!same)
                            printf("\n    %s seed %d beam %d alpha %g source %d: %d tokens, "
                                   "reference %d ",
                                   KIND[kind], (int)seed, beams[bi], alphas[ai], b, out_len[b],
                                   ref_len);
                        CU_ASSERT_TRUE(same);
                        compared++;
                        eos_early += out_len[b] < T;
                        full_length += out_len[b] == T;
                        if (beams[bi] == 1) {
                            CU_ASSERT_EQUAL(out_len[b], greedy_len[b]);
                            CU_ASSERT_EQUAL(memcmp(out + b * T, greedy_out + b * T,
                                                   sizeof *out * (size_t)out_len[b]),
                                            0);
                        }
                    }
                }
            /* one source at a time gives the same as all at once */
            int32_t one[T], all[NS * T];
            int one_len, all_len[NS];
            CU_ASSERT_EQUAL_FATAL(
                zoo_beam_search(m, t, SRC, SRC_LEN, NS, TS, BOS, EOS, T, 3, 0.6, all, all_len), 0);
            for (int b = 0; b < NS; b++) {
                CU_ASSERT_EQUAL_FATAL(zoo_beam_search(m, t, SRC + b * TS, SRC_LEN + b, 1, TS, BOS,
                                                      EOS, T, 3, 0.6, one, &one_len),
                                      0);
                CU_ASSERT_EQUAL(one_len, all_len[b]);
                CU_ASSERT_EQUAL(memcmp(one, all + b * T, sizeof *one * (size_t)one_len), 0);
            }
            CU_ASSERT_EQUAL(ag_tape_stats_get(t).bytes_used, 0); /* reset when done */
            ag_tape_free(t);
            zoo_model_free(m);
        }
    CU_ASSERT_EQUAL(compared, NKIND * 3 * 3 * 2 * NS);
    CU_ASSERT_TRUE(eos_early > 0);
    CU_ASSERT_TRUE(full_length > 0);
}

/* Greedy of a batch equals greedy of each source alone; the tape's peak does not grow with the
 * steps taken (each step's intermediates are rewound), only the caches do. */
static void test_greedy_batch_and_memory(void) {
    for (int kind = 0; kind < NKIND; kind++) {
        zoo_model *m = tiny_model(kind, 9);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        ag_tape *t = ag_tape_new();
        enum { T = 12 };
        int32_t all[NS * T], one[T];
        int all_len[NS], one_len;
        CU_ASSERT_EQUAL_FATAL(zoo_greedy(m, t, SRC, SRC_LEN, NS, TS, BOS, EOS, T, all, all_len), 0);
        for (int b = 0; b < NS; b++) {
            CU_ASSERT_EQUAL_FATAL(
                zoo_greedy(m, t, SRC + b * TS, SRC_LEN + b, 1, TS, BOS, EOS, T, one, &one_len), 0);
            CU_ASSERT_EQUAL(one_len, all_len[b]);
            CU_ASSERT_EQUAL(memcmp(one, all + b * T, sizeof *one * (size_t)one_len), 0);
        }
        ag_tape_free(t);
        /* a source that never says <eos> here (no <eos> id in range: EOS = TV) decodes to the end */
        size_t peak[2];
        const int steps[2] = {8, 64};
        for (int i = 0; i < 2; i++) {
            t = ag_tape_new();
            int32_t *out = malloc(sizeof *out * (size_t)NS * steps[i]);
            int out_len[NS];
            CU_ASSERT_EQUAL_FATAL(
                zoo_greedy(m, t, SRC, SRC_LEN, NS, TS, BOS, TV, steps[i], out, out_len), 0);
            CU_ASSERT_EQUAL(out_len[0], steps[i]);
            peak[i] = ag_tape_stats_get(t).high_water;
            free(out);
            ag_tape_free(t);
        }
        /* 8x the steps: the Transformer's caches grow (2 x decoder blocks x B x H reals a
         * step), and so does the last step's contiguous copy of them for the attention; the
         * other per-step intermediates do not pile up */
        size_t cache_growth =
            kind != 1 ? (size_t)(64 - 8) * 2 * m->dec_layers * NS * 8 * sizeof(ag_real) : 0;
        CU_ASSERT_TRUE(peak[1] <= peak[0] + 2 * cache_growth + 8192);
        zoo_model_free(m);
    }
}

/* translate_batch: the translations of translate, one at a time, greedy and beam. */
static void test_translate_batch(void) {
    static const char SRC_WORDS[] = "<unk>\n<pad>\n<bos>\n<eos>\na\nb\nc\nd\ne\nf\ng\nh\ni\n";
    static const char TGT_WORDS[] = "<unk>\n<pad>\n<bos>\n<eos>\nu\nv\nw\nx\ny\nz\n.\n";
    ds_vocab *sv = NULL, *tv = NULL;
    CU_ASSERT_EQUAL_FATAL(ds_vocab_parse(SRC_WORDS, sizeof SRC_WORDS - 1, "src", &sv), 0);
    CU_ASSERT_EQUAL_FATAL(ds_vocab_parse(TGT_WORDS, sizeof TGT_WORDS - 1, "tgt", &tv), 0);
    CU_ASSERT_EQUAL_FATAL(ds_vocab_size(sv), SV);
    CU_ASSERT_EQUAL_FATAL(ds_vocab_size(tv), TV);
    zoo_model *m = tiny_model(0, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    ag_tape *t = ag_tape_new();
    const char *sentences[5] = {"a b .", "c", "d e f g", "h i a", "b"};
    for (int beam = 0; beam <= 4; beam += 2) {
        char *outs[5];
        CU_ASSERT_EQUAL_FATAL(zoo_translate_batch(m, t, sv, tv, sentences, 5, 6, beam, 0.6, outs),
                              0);
        for (int i = 0; i < 5; i++) {
            char *one = NULL;
            CU_ASSERT_EQUAL_FATAL(zoo_translate(m, t, sv, tv, sentences[i], 6, beam, 0.6, &one), 0);
            CU_ASSERT_STRING_EQUAL(one, outs[i]);
            free(one);
            free(outs[i]);
        }
    }
    ag_tape_free(t);
    zoo_model_free(m);
    ds_vocab_free(sv);
    ds_vocab_free(tv);
}

/* ---- many sentences: chunks, threads, packed weights ----
 * A Transformer large enough for its products to run from packed weights (208 features, 300
 * words; 700 sentences cut into chunks of 233 and 234 rows, each of BLIS's blocked sizes): one
 * and two threads give the same tokens, and so do three calls, one per chunk (a chunk decodes
 * as it would alone), and two threads whose worker is starved of CPU (injected: it takes one or
 * two chunks, then the caller the rest). Beam search (beam 2, 300 sentences: 128-sentence
 * chunks) the same. The chunks take the sentences by length and cut their padding (decode.h):
 * greedy gives the tokens of the decoder run on all 700 at the full width, in their order. */
enum { MB = 700, MTS = 8, MV = 300 };

static void many_calls(zoo_model *m, const int32_t *src, const int32_t *len, int beam, int n,
                       const int *cuts, int32_t *out, int *out_len) {
    ag_tape *t = ag_tape_new();
    for (int c = 0; cuts[c] < n; c++) {
        int b0 = cuts[c], b1 = cuts[c + 1];
        int rc = beam > 1 ? zoo_beam_search(m, t, src + b0 * MTS, len + b0, b1 - b0, MTS, BOS, EOS,
                                            MTS, beam, 0.6, out + b0 * MTS, out_len + b0)
                          : zoo_greedy(m, t, src + b0 * MTS, len + b0, b1 - b0, MTS, BOS, EOS, MTS,
                                       out + b0 * MTS, out_len + b0);
        CU_ASSERT_EQUAL(rc, 0);
    }
    ag_tape_free(t);
}

/* Greedy decoding through the model's ops alone, as the reference of the chunks: all MB
 * sources in one batch, in their order, encoded at the full width MTS, every row stepped to the
 * end (no select); compared with the tokens `want` a call gave. */
static void full_width_greedy(zoo_model *m, const int32_t *src, const int32_t *len,
                              const int32_t *want, const int *want_len) {
    ag_tape *t = ag_tape_new();
    nn_packs *packs = nn_packs_new();
    nn_ctx c = {.tape = t, .training = false, .packs = packs};
    ag_tape_set_recording(t, false);
    static int32_t tok[MB], got[MB * MTS];
    static int got_len[MB];
    static bool done[MB];
    void *s = m->ops->encode(m, &c, src, len, MB, MTS, NULL);
    CU_ASSERT_FATAL(s && !m->ops->reserve(m, &c, s, MB, MTS));
    for (int b = 0; b < MB; b++) tok[b] = BOS, got_len[b] = 0, done[b] = false;
    for (int step = 0; step < MTS; step++) {
        ag_tensor *y = m->ops->step(m, &c, s, tok, MB, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y);
        for (int b = 0; b < MB; b++) {
            tok[b] = ref_argmax(y->data + (size_t)b * MV, MV);
            done[b] = done[b] || tok[b] == EOS;
            if (!done[b]) got[b * MTS + got_len[b]++] = tok[b];
        }
    }
    for (int b = 0; b < MB; b++) {
        CU_ASSERT_EQUAL(got_len[b], want_len[b]);
        CU_ASSERT_EQUAL(memcmp(got + b * MTS, want + b * MTS, sizeof *got * (size_t)got_len[b]), 0);
    }
    nn_packs_free(packs);
    ag_tape_free(t);
}

/* The hook of the engine's starvation rule: a clock that stands still, every worker starved. */
static int64_t fixed_clock(void *user) {
    (void)user;
    return 1;
}
static bool all_starved(int worker, void *user) {
    (void)worker, (void)user;
    return true;
}

static void test_many_sentences_threads(void) {
    zoo_transformer_cfg h = zoo_transformer_default_cfg;
    h.hiddens = 208;
    h.ffn_hiddens = 208;
    h.heads = 8;
    h.layers = 1;
    zoo_model *m = zoo_model_new(&zoo_transformer_kind, &h, MV, MV, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    static int32_t src[MB * MTS], len[MB], out[4][MB * MTS];
    static int out_len[4][MB];
    ag_rng r;
    ag_rng_seed(&r, 17);
    for (int b = 0; b < MB; b++) {
        len[b] = 1 + (int)(ag_rng_next(&r) % MTS);
        for (int i = 0; i < MTS; i++)
            src[b * MTS + i] = i < len[b] - 1    ? 4 + (int32_t)(ag_rng_next(&r) % (MV - 4))
                               : i == len[b] - 1 ? EOS
                                                 : 1;
    }
    for (int beam = 1; beam <= 2; beam++) {
        const int n = beam == 1 ? MB : 300;
        const int whole[] = {0, n}, chunks1[] = {0, 233, 466, MB}, chunks2[] = {0, 100, 200, 300};
        memset(out, 0, sizeof out);
        for (int threads = 1; threads <= 2; threads++) {
            CU_ASSERT_EQUAL_FATAL(ag_set_threads(threads), 0);
            many_calls(m, src, len, beam, n, whole, out[threads - 1], out_len[threads - 1]);
        }
        ag_starve_hook starve = {fixed_clock, all_starved, NULL};
        CU_ASSERT_EQUAL_FATAL(ag_set_starve_hook(&starve), 0);
        many_calls(m, src, len, beam, n, whole, out[3], out_len[3]);
        CU_ASSERT_EQUAL_FATAL(ag_set_starve_hook(NULL), 0);
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(1), 0);
        many_calls(m, src, len, beam, n, beam == 1 ? chunks1 : chunks2, out[2], out_len[2]);
        for (int v = 1; v < 4; v++) {
            CU_ASSERT_EQUAL(memcmp(out_len[0], out_len[v], sizeof(int) * (size_t)n), 0);
            CU_ASSERT_EQUAL(memcmp(out[0], out[v], sizeof(int32_t) * (size_t)n * MTS), 0);
        }
        if (beam == 1) full_width_greedy(m, src, len, out[0], out_len[0]);
        int differ = 0; /* the translations are not all alike */
        for (int b = 1; b < n; b++) differ += out[0][b * MTS] != out[0][0];
        CU_ASSERT_TRUE(differ > n / 4);
    }
    zoo_model_free(m);
}

/* A source id outside the vocabulary fails the call before any chunk runs, naming the first bad
 * sentence and position in the caller's order whatever the threads: ids bad in sentences 300
 * (chunk 1 of 3) and 600 (chunk 2). (That a failing chunk fails the call with the first
 * failing task's error whatever the threads is ag_run_tasks's rule, tested in autograd.) */
static void silent(const char *msg, void *user) { (void)msg, (void)user; }

static void test_chunk_error(void) {
    zoo_transformer_cfg h = zoo_transformer_default_cfg;
    zoo_model *m = zoo_model_new(&zoo_transformer_kind, &h, MV, MV, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    static int32_t src[MB * MTS], len[MB], out[MB * MTS];
    static int out_len[MB];
    for (int b = 0; b < MB; b++) {
        len[b] = 2;
        for (int i = 0; i < MTS; i++) src[b * MTS + i] = i == 0 ? 4 + b % 50 : i == 1 ? EOS : 1;
    }
    src[300 * MTS] = MV + 1;
    src[600 * MTS] = MV + 2;
    ag_set_error_handler(silent, NULL);
    char first[1024] = "";
    for (int threads = 1; threads <= 2; threads++) {
        CU_ASSERT_EQUAL_FATAL(ag_set_threads(threads), 0);
        for (int rep = 0; rep < 3; rep++) {
            ag_tape *t = ag_tape_new();
            CU_ASSERT_EQUAL(zoo_greedy(m, t, src, len, MB, MTS, BOS, EOS, MTS, out, out_len), -1);
            if (!first[0]) snprintf(first, sizeof first, "%s", ag_last_error());
            CU_ASSERT_STRING_EQUAL(ag_last_error(), first);
            ag_tape_free(t);
        }
    }
    char want[96];
    snprintf(want, sizeof want,
             "decoding: sentence 300, position 0: source id %d, expected 0 .. %d", MV + 1, MV - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(first, want));
    if (!strstr(first, want)) fprintf(stderr, "\n  got: %s\n", first);
    ag_set_error_handler(NULL, NULL);
    CU_ASSERT_EQUAL(ag_set_threads(1), 0);
    zoo_model_free(m);
}

static CU_TestInfo tests[] = {
    {"step after select equals a state of the selected rows", test_select_equals_direct},
    {"batched beam search equals the one-sentence reference", test_beam_equals_reference},
    {"greedy: batch equals one by one; memory flat in the steps", test_greedy_batch_and_memory},
    {"700 sentences: chunks, one or two threads, packed weights", test_many_sentences_threads},
    {"translate_batch equals translate", test_translate_batch},
    {"a bad source id: the first one named, any threads", test_chunk_error},
    CU_TEST_INFO_NULL,
};

int main(void) { return tg_test_main("decode", tests); }
