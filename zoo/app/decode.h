/* zoo/app/decode.h -- translation with any zoo_model: greedy (d2l's predict_seq2seq) and beam
 * search, both batched over sentences; attention recording for the heatmaps; evaluation on a
 * split.
 *
 * Every function runs in eval mode (no dropout) with recording off (no gradients), on the tape
 * it is given, which it resets before returning. Decoding encodes once, then feeds one token
 * per sentence (per hypothesis in beam search) at each step through the model's incremental
 * step (zoo_model_ops); the tape is rewound after each step to where the encoder's state ends,
 * so memory does not grow with the steps, and finished sentences leave the batch (select).
 *
 * zoo_greedy and zoo_beam_search cut their sentences into chunks of about 256 rows (sentences
 * times beam; the cut depends on B and the beam alone): tasks of ag_run_tasks, which the
 * engine's threads (ag_set_threads) take one at a time, each chunk decoded start to end on the
 * caller's tape or a thread's own; the model's Linear weights are packed once per call
 * (nn_packs). Results do not depend on the number of threads. The model is only read: it must
 * not change during a call.
 *
 * Where it lives: decode.c (the chunks, the packed weights, what the decoders share), greedy.c,
 * beam.c, translate.c (sentences <-> ids, zoo_translate*), attention.c (zoo_translate_attention,
 * zoo_attn_record_*), evaluate.c (zoo_evaluate); decode_internal.h between them.
 */
#ifndef TG_ZOO_DECODE_H
#define TG_ZOO_DECODE_H

#include <stdio.h>

#include "../../datasets/fra_eng.h"
#include "../models/seq2seq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Greedy decoding of B sources at once, as d2l: decoder input <bos>; at each of max_steps steps
 * take the argmax (ties: lowest id), stop a row at <eos>, else feed the token back. src is
 * (B, Ts), src_len (B,). out (B, max_steps) receives each row's tokens (without <eos>), out_len
 * (B,) their counts. Returns 0 or -1 (ag_last_error). */
int zoo_greedy(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B, int Ts,
               int32_t bos, int32_t eos, int max_steps, int32_t *out, int *out_len);

/* Beam search for B sources (B, Ts) with src_len (B,), each independently: per source it keeps
 * the `beam` best prefixes by total log-probability; an <eos> among the step's `beam` best
 * candidates finishes its prefix (as fairseq: the `beam` more candidates kept refill the beam,
 * they do not end it); a source's search stops when `beam` prefixes are finished or after
 * max_steps tokens, where the unfinished prefixes compete too. The result maximises
 * logprob / lp(len) with GNMT's length penalty lp = ((5 + len) / 6)^alpha (alpha 0: raw
 * log-probability), len counting <eos>. beam 1 is greedy decoding. One step of the model per
 * token on all live prefixes of all sources (at most B * beam rows). out (B, max_steps) and
 * out_len (B,) as zoo_greedy. Returns 0 or -1 (ag_last_error). */
int zoo_beam_search(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B,
                    int Ts, int32_t bos, int32_t eos, int max_steps, int beam, double alpha,
                    int32_t *out, int *out_len);

/* Decoding of m in int8 (q = NN_QUANT_INT8) or bf16 (NN_QUANT_BF16) from now on (nn/quant.h):
 * the Linear layers of attention and FFN quantized once (per output channel; bf16: rounded),
 * at their first use, and shared by the decoding threads through m->packs; the output layer
 * (over the target vocabulary) too when output is true, else it stays float. The attention
 * scores and softmax, LayerNorm and the embeddings stay float. NN_QUANT_NONE goes back to
 * float decoding (the weights packed per call, the default's bits; output is then ignored).
 * The model's parameters must not change afterwards (the quantized copies would not follow).
 * Returns 0 or -1 (ag_last_error). */
int zoo_decode_quantize(zoo_model *m, nn_quant q, bool output);

/* Rows (sentences times beam) decoded together by zoo_translate_batch: enough for 8 chunks,
 * longest first, so that the threads finish together. */
#define ZOO_DECODE_ROWS 2048

/* n sentences, d2l's way: each lowercased, split on spaces, ids, <eos>, padded to num_steps;
 * decoded greedily (beam <= 1) or with beam search, ZOO_DECODE_ROWS / max(beam, 1) sentences at
 * a time. outs[i] receives sentence i's space-joined translation (malloc'd, caller frees).
 * Returns 0, or -1 (ag_last_error) with every outs[i] NULL. */
int zoo_translate_batch(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                        const ds_vocab *tgt_vocab, const char *const *sentences, int n,
                        int num_steps, int beam, double alpha, char **outs);
/* zoo_translate_batch of one sentence into *out. */
int zoo_translate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                  const char *sentence, int num_steps, int beam, double alpha, char **out);

/* ---- attention for the heatmaps ---- */

typedef struct zoo_attn_map {
    int layers, heads, rows, cols;
    float *w; /* [layer][head][row][col], malloc'd */
} zoo_attn_map;

typedef struct zoo_attn_record {
    zoo_attn_map enc_self; /* (layers, heads, Ts, Ts); layers 0 if the model has none */
    zoo_attn_map
        dec_self; /* (layers, heads, steps, steps): row t = step t's weights, zero past t */
    zoo_attn_map dec_cross; /* (layers, heads, steps, Ts) */
    int src_steps;          /* Ts: the source as the encoder saw it, padding included */
    int steps;              /* decoder steps taken (the output tokens, plus <eos> if reached) */
    const char *
        *src_tokens; /* Ts labels: the source tokens, <eos>, <pad>... (owned by the vocab) */
    const char *
        *tgt_tokens; /* steps labels: the decoder's inputs, <bos> first (owned by the vocab) */
} zoo_attn_record;

/* Greedy translation of one sentence recording every attention map. *out as zoo_translate;
 * rec must be freed with zoo_attn_record_free. Returns 0 or -1. */
int zoo_translate_attention(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                            const ds_vocab *tgt_vocab, const char *sentence, int num_steps,
                            char **out, zoo_attn_record *rec);
void zoo_attn_record_free(zoo_attn_record *rec);
/* Writes dir/<prefix>_encoder_self.svg, _decoder_self.svg, _decoder_cross.svg (those the model
 * has): a layers x heads grid each, like d2l's show_heatmaps. Returns 0 or -1. */
int zoo_attn_record_plot(const zoo_attn_record *rec, const char *dir, const char *prefix);

/* ---- evaluation ---- */

typedef struct zoo_eval_result {
    int64_t sentences;
    double bleu4;    /* corpus BLEU-4, 0..100 (sacreBLEU's, tokenized input) */
    double chrf;     /* chrF, 0..100 */
    double d2l_bleu; /* mean of d2l's per-sentence BLEU (k = 2), 0..1 */
    /* The standard score (datasets/metrics.h): sacreBLEU's corpus BLEU (13a) and chrF of the
     * detokenized translations (ds_detokenize_d2l) against the raw French sentences
     * (ds_fra_raw), cased. The model is uncased: its lowercase output loses every capital
     * letter, so the cased score is low by construction. */
    double sacrebleu, sacre_chrf;
    int64_t shared_src; /* scored pairs (test only) whose English side a training pair has */
} zoo_eval_result;

/* Greedy-translates the source of every pair of `part` (batches of up to 256), encoded with
 * the model's vocabulary src_vocab as d2l's predict does, and scores the translations (decoded
 * with tgt_vocab) against the preprocessed target sentences. The data may have been loaded with
 * other options than the model was trained on. Returns 0 or -1. */
int zoo_evaluate(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab, const ds_vocab *tgt_vocab,
                 const ds_fra *data, ds_part part, int num_steps, zoo_eval_result *r);
/* The same decoded by beam search (beam > 1, zoo_beam_search with the length penalty alpha;
 * beam 1: greedy, zoo_evaluate). For subword vocabularies (both with a codec, datasets/vocab.h)
 * the sources are the raw text of the pairs (ds_fra_raw) through the codec, the translations
 * are the codec's text (cased, detokenized): the standard score takes them as they are, and the
 * tokenized scores compare their d2l preprocessing (ds_preprocess: lowercase, punctuation
 * spaced) with the reference's. lines: NULL, or a stream that gets one line per pair, in the
 * part's order: the raw source, the raw reference and the translation as the standard score
 * takes it (cased text for a subword model, the tokens detokenized for a word model), separated
 * by tabs (the data file's sides hold no tab); the caller owns and closes it. */
int zoo_evaluate_beam(zoo_model *m, ag_tape *t, const ds_vocab *src_vocab,
                      const ds_vocab *tgt_vocab, const ds_fra *data, ds_part part, int num_steps,
                      int beam, double alpha, FILE *lines, zoo_eval_result *r);

#ifdef __cplusplus
}
#endif

#endif
