/* translate.c -- sentences to ids and back, and the translation of sentences (zoo_translate,
 * zoo_translate_batch) through greedy decoding or beam search. */
#include "zoo/app/decode_internal.h"

#include <stdlib.h>

int zoo__encode_sentence(const ds_vocab *v, const char *sentence, int num_steps, int32_t *ids,
                         int32_t *len) {
    if (ds_encode_sentence(v, sentence, num_steps, ids, len))
        return ag_error_context("source sentence");
    return 0;
}

int zoo_translate_batch(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                        const ds_vocab *tgt_vocab, const char *const *sentences, int n,
                        int num_steps, int beam, double alpha, char **outs) {
    for (int i = 0; i < n; i++) outs[i] = NULL;
    const int T = num_steps,
              chunk = beam > 1 ? (ZOO_DECODE_ROWS + beam - 1) / beam : ZOO_DECODE_ROWS;
    int32_t *src = malloc(sizeof *src * (size_t)chunk * T),
            *len = malloc(sizeof *len * (size_t)chunk);
    int32_t *res = malloc(sizeof *res * (size_t)chunk * T);
    int *res_len = malloc(sizeof *res_len * (size_t)chunk);
    int rc = src && len && res && res_len ? 0 : ag_error("translate: out of memory");
    int32_t bos = ds_vocab_id(tgt_vocab, "<bos>"), eos = ds_vocab_id(tgt_vocab, "<eos>");
    for (int at = 0; !rc && at < n; at += chunk) {
        int B = n - at < chunk ? n - at : chunk;
        for (int b = 0; !rc && b < B; b++)
            rc =
                zoo__encode_sentence(src_vocab, sentences[at + b], T, src + (size_t)b * T, &len[b]);
        if (!rc)
            rc = beam > 1
                     ? zoo_beam_search(m, t, src, len, B, T, bos, eos, T, beam, alpha, res, res_len)
                     : zoo_greedy(m, t, src, len, B, T, bos, eos, T, res, res_len);
        for (int b = 0; !rc && b < B; b++)
            rc = ds_decode_translation(tgt_vocab, res + (size_t)b * T, (size_t)res_len[b],
                                       sentences[at + b],
                                  &outs[at + b]);
    }
    for (int i = 0; rc && i < n; i++) {
        free(outs[i]);
        outs[i] = NULL;
    }
    free(src), free(len), free(res), free(res_len);
    return rc;
}

int zoo_translate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                  const char *sentence, int num_steps, int beam, double alpha, char **out) {
    return zoo_translate_batch(m, t, src_vocab, tgt_vocab, &sentence, 1, num_steps, beam, alpha,
                               out);
}
