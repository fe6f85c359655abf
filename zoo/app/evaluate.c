/* evaluate.c -- greedy (or beam) translation of a split scored against its references: corpus BLEU-4,
 * chrF and d2l's per-sentence BLEU on the tokenized text, and the standard score (sacreBLEU,
 * chrF) on detokenized output against the raw references (zoo_evaluate). */
#include "zoo/app/decode_internal.h"

#include <stdlib.h>
#include <string.h>

#include "datasets/metrics.h"

/* The sums of the scores over the translations. */
typedef struct zoo__eval_stats {
    ds_bleu_stats bs, sb; /* tokenized BLEU, the standard (sacreBLEU) one */
    ds_chrf_stats cs, ss; /* tokenized chrF, the standard one */
    double d2l;           /* sum of d2l's sentence BLEU */
} zoo__eval_stats;

/* Adds one translation to the standard score: detokenized (a subword model's output already
 * is), against the raw reference; and its line to out (zoo_evaluate_beam) when out is not NULL. */
static int standard_score(const ds_fra *data, int64_t pair, const char *hyp, bool subword,
                          ds_bleu_stats *sb, ds_chrf_stats *ss, FILE *out) {
    const char *raw = ds_fra_raw(data, DS_TGT, pair, NULL);
    char *detok = NULL;
    int rc = subword ? 0 : ds_detokenize_d2l(hyp, &detok);
    const char *text = subword ? hyp : detok;
    if (!rc && raw[0] && (ds_sacrebleu_add(sb, text, &raw, 1) || ds_chrf_add(ss, text, raw)))
        rc = ag_error_context("evaluate: pair %lld", (long long)pair);
    if (!rc && out &&
        fprintf(out, "%s\t%s\t%s\n", ds_fra_raw(data, DS_SRC, pair, NULL), raw, text) < 0)
        rc = ag_error("evaluate: writing the translations failed");
    free(detok);
    return rc;
}

/* Side `side` of a pair as the model reads or writes it: the word pipeline's tokens
 * (ds_fra_sentence); for a subword model, the raw text (ds_fra_raw), or (lowered) its d2l
 * preprocessing, the form of the tokenized scores. *out malloc'd. 0 or -1. */
static int side_text(const ds_fra *data, ds_side side, int64_t pair, bool subword, bool lowered,
                     char **out) {
    if (!subword) return ds_fra_sentence(data, side, pair, out);
    const char *raw = ds_fra_raw(data, side, pair, NULL);
    if (lowered) return ds_preprocess(raw, out);
    size_t n = strlen(raw) + 1;
    if (!(*out = malloc(n))) return ag_error("evaluate: out of memory");
    memcpy(*out, raw, n);
    return 0;
}

/* Scores one translation hyp of pair: the tokenized scores and the standard one. 0 or -1. */
static int score_one(const ds_fra *data, int64_t pair, const char *hyp, bool subword,
                     zoo__eval_stats *st, FILE *out) {
    char *ref = NULL, *low = NULL;
    double s = 0;
    int rc = side_text(data, DS_TGT, pair, subword, true, &ref);
    if (!rc && subword) rc = ds_preprocess(hyp, &low);
    const char *h = low ? low : hyp, *refs[1] = {ref};
    if (!rc && (ds_bleu_add(&st->bs, h, refs, 1) || ds_chrf_add(&st->cs, h, ref) ||
                ds_bleu_d2l(h, ref, 2, &s)))
        rc = ag_error_context("evaluate");
    st->d2l += s;
    if (!rc) rc = standard_score(data, pair, hyp, subword, &st->sb, &st->ss, out);
    free(ref);
    free(low);
    return rc;
}

int zoo_evaluate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                 const ds_fra *data, ds_part part, int num_steps, zoo_eval_result *r) {
    return zoo_evaluate_beam(m, t, src_vocab, tgt_vocab, data, part, num_steps, 1, 0, NULL, r);
}

int zoo_evaluate_beam(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                      const ds_vocab *tgt_vocab, const ds_fra *data, ds_part part, int num_steps,
                      int beam, double alpha, FILE *lines, zoo_eval_result *r) {
    memset(r, 0, sizeof *r);
    int T = num_steps,
        chunk = 2048; /* sentences per decoding call (it shares them out in chunks) */
    int64_t n = ds_fra_part_size(data, part);
    const int64_t *pairs = ds_fra_part_pairs(data, part);
    if (n <= 0) return ag_error("evaluate: the chosen split is empty");
    bool subword = ds_vocab_codec(src_vocab) && ds_vocab_codec(tgt_vocab);
    int32_t *src = malloc(sizeof *src * (size_t)chunk * T),
            *len = malloc(sizeof *len * (size_t)chunk);
    int32_t *out = malloc(sizeof *out * (size_t)chunk * T);
    int *out_len = malloc(sizeof *out_len * (size_t)chunk);
    zoo__eval_stats st = {0};
    int rc = 0;
    if (!src || !len || !out || !out_len) rc = ag_error("evaluate: out of memory");
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    for (int64_t at = 0; !rc && at < n; at += chunk) {
        int B = (int)(n - at < chunk ? n - at : chunk);
        for (int b = 0; !rc && b < B; b++) {
            char *sentence = NULL;
            if (side_text(data, DS_SRC, pairs[at + b], subword, false, &sentence)) rc = -1;
            if (!rc)
                rc = zoo__encode_sentence(src_vocab, sentence, T, src + (size_t)b * T, &len[b]);
            free(sentence);
        }
        if (!rc)
            rc = beam > 1
                     ? zoo_beam_search(m, t, src, len, B, T, bos, eos, T, beam, alpha, out, out_len)
                     : zoo_greedy(m, t, src, len, B, T, bos, eos, T, out, out_len);
        for (int b = 0; !rc && b < B; b++) {
            char *hyp = NULL;
            rc = ds_decode_translation(tgt_vocab, out + (size_t)b * T, (size_t)out_len[b],
                                  ds_fra_raw(data, DS_SRC, pairs[at + b], NULL), &hyp);
            if (!rc) rc = score_one(data, pairs[at + b], hyp, subword, &st, lines);
            free(hyp);
        }
    }
    if (!rc) {
        r->sentences = n;
        r->bleu4 = ds_bleu_compute(&st.bs).score;
        r->chrf = ds_chrf_compute(&st.cs);
        r->d2l_bleu = st.d2l / (double)n;
        r->sacrebleu = ds_bleu_compute(&st.sb).score;
        r->sacre_chrf = ds_chrf_compute(&st.ss);
        r->shared_src = part == DS_TEST ? ds_fra_shared_src_test(data) : 0;
    }
    free(src);
    free(len);
    free(out);
    free(out_len);
    return rc;
}
