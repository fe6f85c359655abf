/* evaluate.c -- greedy translation of a split scored against its references: corpus BLEU-4,
 * chrF and d2l's per-sentence BLEU on the tokenized text, and the standard score (sacreBLEU,
 * chrF) on detokenized output against the raw references (zoo_evaluate). */
#include "zoo/app/decode_internal.h"

#include <stdlib.h>
#include <string.h>

#include "datasets/metrics.h"

/* Adds one translation to the standard score: detokenized, against the raw reference. */
static int standard_score(const ds_fra *data, int64_t pair, const char *hyp, ds_bleu_stats *sb,
                          ds_chrf_stats *ss) {
    const char *raw = ds_fra_raw(data, DS_TGT, pair, NULL);
    char *detok = NULL;
    int rc = ds_detokenize_d2l(hyp, &detok);
    if (!rc && raw[0] && (ds_sacrebleu_add(sb, detok, &raw, 1) || ds_chrf_add(ss, detok, raw)))
        rc = ag_error_context("evaluate: pair %lld", (long long)pair);
    free(detok);
    return rc;
}

int zoo_evaluate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                 const ds_fra *data, ds_part part, int num_steps, zoo_eval_result *r) {
    memset(r, 0, sizeof *r);
    int T = num_steps,
        chunk = 2048; /* sentences per zoo_greedy call (it shares them out in chunks) */
    int64_t n = ds_fra_part_size(data, part);
    const int64_t *pairs = ds_fra_part_pairs(data, part);
    if (n <= 0) return ag_error("evaluate: the chosen split is empty");
    int32_t *src = malloc(sizeof *src * (size_t)chunk * T),
            *len = malloc(sizeof *len * (size_t)chunk);
    int32_t *out = malloc(sizeof *out * (size_t)chunk * T);
    int *out_len = malloc(sizeof *out_len * (size_t)chunk);
    ds_bleu_stats bs = {0};
    ds_chrf_stats cs = {0}, ss = {0};
    ds_bleu_stats sb = {0};
    double d2l = 0;
    int rc = 0;
    if (!src || !len || !out || !out_len) rc = ag_error("evaluate: out of memory");
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    for (int64_t at = 0; !rc && at < n; at += chunk) {
        int B = (int)(n - at < chunk ? n - at : chunk);
        for (int b = 0; !rc && b < B; b++) {
            char *sentence = NULL;
            if (ds_fra_sentence(data, DS_SRC, pairs[at + b], &sentence)) rc = -1;
            if (!rc)
                rc = zoo__encode_sentence(src_vocab, sentence, T, src + (size_t)b * T, &len[b]);
            free(sentence);
        }
        if (!rc) rc = zoo_greedy(m, t, src, len, B, T, bos, eos, T, out, out_len);
        for (int b = 0; !rc && b < B; b++) {
            char *hyp = NULL, *ref = NULL;
            double s = 0;
            rc = zoo__ids_to_text(tgt_vocab, out + (size_t)b * T, out_len[b], &hyp);
            if (!rc && ds_fra_sentence(data, DS_TGT, pairs[at + b], &ref)) rc = -1;
            const char *refs[1] = {ref};
            if (!rc && (ds_bleu_add(&bs, hyp, refs, 1) || ds_chrf_add(&cs, hyp, ref) ||
                        ds_bleu_d2l(hyp, ref, 2, &s)))
                rc = ag_error_context("evaluate");
            d2l += s;
            if (!rc) rc = standard_score(data, pairs[at + b], hyp, &sb, &ss);
            free(hyp);
            free(ref);
        }
    }
    if (!rc) {
        r->sentences = n;
        r->bleu4 = ds_bleu_compute(&bs).score;
        r->chrf = ds_chrf_compute(&cs);
        r->d2l_bleu = d2l / (double)n;
        r->sacrebleu = ds_bleu_compute(&sb).score;
        r->sacre_chrf = ds_chrf_compute(&ss);
        r->shared_src = part == DS_TEST ? ds_fra_shared_src_test(data) : 0;
    }
    free(src);
    free(len);
    free(out);
    free(out_len);
    return rc;
}
