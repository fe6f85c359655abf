/* datasets/metrics.h -- translation metrics: d2l's sentence BLEU, corpus BLEU-4 and chrF
 * computed as sacreBLEU 2.x does.
 *
 * d2l BLEU (docs/spec.md section 5), one sentence, tokens = split on single spaces:
 *     score = exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n ^ (1/2^n)
 *     p_n   = clipped n-gram matches / (len_pred - n + 1)
 * An empty prediction, or one shorter than n for some n <= k, scores 0 (d2l would divide
 * by zero). Result in [0, 1].
 *
 * Corpus BLEU (sacreBLEU BLEU() defaults with tokenize='none': the text is already
 * tokenized; tokens = Python's str.split(), i.e. runs of Unicode whitespace):
 *     per sentence: hyp length c, reference length r (with several references: the one
 *     closest to c, the shorter on ties); for n = 1..4, total_n += max(0, c - n + 1) and
 *     correct_n += sum over hyp n-grams g of min(count_hyp(g), max over refs count_ref(g));
 *     corpus: sums of the above; if every correct_n is 0 the score is 0 (sacreBLEU 2.x early
 *     stop); otherwise p_n = 100 correct_n / total_n, and for correct_n = 0 ('exp'
 *     smoothing, mteval-v13a) p_n = 100 / (2^j total_n) where j counts the zero-match
 *     orders so far; an order with total_n = 0 (every hypothesis shorter than n) keeps
 *     p_n = 0, which makes the score 0 (sacreBLEU: log 0 -> -9999999999);
 *     BP = 1 if c >= r else exp(1 - r / c) (0 if c = 0); BLEU = BP exp(sum_n log(p_n) / 4).
 *     Result in [0, 100]. (The PyTorch reference's corpus_bleu omits the early stop: it
 *     returns a tiny positive number instead of 0 when nothing matches.)
 *
 * chrF (sacreBLEU CHRF() defaults: char order 6, word order 0, beta 2, whitespace removed,
 * eps_smoothing off): each sentence with all Unicode whitespace removed; for n = 1..6 the
 * character (code point) n-gram counts: hyp_n += hyp n-grams (0 if the reference has no
 * n-gram of that order), ref_n += reference n-grams, match_n += sum min(count_hyp,
 * count_ref), summed over the corpus; over the orders with hyp_n > 0 and ref_n > 0
 * ("effective order"): P = mean of match_n / hyp_n, R = mean of match_n / ref_n;
 * chrF = 100 (1 + beta^2) P R / (beta^2 P + R), 0 when P + R = 0 or no order is effective.
 *
 * Text inputs must be valid UTF-8 without NUL bytes (the functions fail otherwise).
 * Every fallible function returns 0, or -1 with the message in ag_last_error(). */
#ifndef TG_DS_METRICS_H
#define TG_DS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* d2l's bleu(pred_seq, label_seq, k) into *score. Returns 0, or -1 (k < 1 or NULL, out of
 * memory). Any bytes are fine (only ' ' separates tokens). */
int ds_bleu_d2l(const char *pred, const char *label, int k, double *score);

#define DS_BLEU_ORDER 4

/* Sufficient statistics of corpus BLEU; zero-initialise ({0}) for an empty corpus. */
typedef struct {
    int64_t sys_len, ref_len;
    int64_t correct[DS_BLEU_ORDER], total[DS_BLEU_ORDER];
    int64_t sentences;
} ds_bleu_stats;

typedef struct {
    double score;                     /* [0, 100]                              */
    double precisions[DS_BLEU_ORDER]; /* p_n in percent, after smoothing       */
    double bp;                        /* brevity penalty                       */
    int64_t sys_len, ref_len;
} ds_bleu_score;

/* Adds one sentence given as token ids (e.g. predicted ids against reference ids; any
 * int32 values). Returns 0, or -1 (out of memory). */
int ds_bleu_add_ids(ds_bleu_stats *s, const int32_t *hyp, size_t hyp_len, const int32_t *ref,
                    size_t ref_len);
/* Adds one sentence given as text against n_refs >= 1 references. Returns 0, or -1 (a bad
 * argument, invalid UTF-8 / NUL, out of memory). */
int ds_bleu_add(ds_bleu_stats *s, const char *hyp, const char *const *refs, size_t n_refs);
/* The score of the statistics gathered so far. */
ds_bleu_score ds_bleu_compute(const ds_bleu_stats *s);
/* The same with sacreBLEU's effective_order (its sentence_bleu default; corpus BLEU's default
 * is off, = ds_bleu_compute): the mean of the logs runs over the orders 1..m only, m the
 * last order before the first with total_n = 0, instead of always 1..4. */
ds_bleu_score ds_bleu_compute_eff(const ds_bleu_stats *s, bool effective_order);
/* Convenience: corpus BLEU of n hypotheses against one reference each. */
int ds_corpus_bleu(const char *const *hyps, const char *const *refs, size_t n, ds_bleu_score *out);

#define DS_CHRF_ORDER 6
#define DS_CHRF_BETA 2.0

/* Sufficient statistics of chrF; zero-initialise ({0}) for an empty corpus. */
typedef struct {
    int64_t hyp[DS_CHRF_ORDER], ref[DS_CHRF_ORDER], match[DS_CHRF_ORDER];
    int64_t sentences;
} ds_chrf_stats;

/* Adds one sentence pair. Returns 0, or -1 (a bad argument, bad text, out of memory). */
int ds_chrf_add(ds_chrf_stats *s, const char *hyp, const char *ref);
/* chrF in [0, 100] of the statistics gathered so far. */
double ds_chrf_compute(const ds_chrf_stats *s);
/* Convenience: corpus chrF of n hypotheses against one reference each. */
int ds_corpus_chrf(const char *const *hyps, const char *const *refs, size_t n, double *out);

/* ---- the standard score (datasets/sacrebleu.c) -----------------------------------------
 * What every published system reports: sacreBLEU 2.x's corpus_bleu / corpus_chrf with their
 * defaults on detokenized, cased hypotheses against the raw references. Reproduced from
 * sacreBLEU 2.6.0 (tokenizers/tokenizer_13a.py, tokenizer_re.py, metrics/bleu.py; the 13a
 * tokenizer and BLEU's defaults are unchanged since 2.0.0); the signatures follow 2.x's
 * format with version DS_SACREBLEU_VERSION.
 *
 * tokenizer_13a (mteval-v13a), on code points:
 *  1. str.replace, in this order, each one left-to-right pass: "<skipped>" -> "", "-\n" -> "",
 *     "\n" -> " ", "&quot;" -> '"', "&amp;" -> "&", "&lt;" -> "<", "&gt;" -> ">"
 *     (so "&amp;quot;" becomes "&quot;", not '"');
 *  2. a space added at both ends, then four regex substitutions, each one left-to-right pass
 *     over the previous result (re.sub: non-overlapping, resuming after each match):
 *       ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "  every ASCII symbol but ' - . , and
 *                                                  digits/letters gets spaces around it;
 *       ([^0-9])([\.,]) -> "\1 \2 "   period/comma not after a digit;
 *       ([\.,])([^0-9]) -> " \1 \2"   period/comma not before a digit;
 *       ([0-9])(-)      -> "\1 \2 "   a dash after a digit;
 *     ("3.14" and "1,000" stay whole; "5-6" -> "5 - 6"; "p.m." -> "p . m .");
 *  3. ' '.join(s.split()): runs of Unicode whitespace (str.isspace) -> one space, trimmed.
 * BLEU: each hypothesis and reference is s.rstrip() then tokenizer_13a, then split on
 * whitespace into words; from there as ds_bleu_add / ds_bleu_compute (exp smoothing, BP,
 * effective order off, case kept). Empty references ("") are dropped, as sacreBLEU does; a
 * sentence whose references are all empty is an error (sacreBLEU raises). An empty
 * hypothesis is kept (it only adds reference length).
 * chrF: ds_chrf_add as is (sacreBLEU CHRF() defaults: nc 6, nw 0, beta 2, whitespace
 * removed, no eps smoothing = "eff:yes"); its input is the raw text, no tokenizer. */
#define DS_SACREBLEU_VERSION "2.6.0"

/* sacreBLEU's tokenizer_13a(text) into *out (malloc'd, caller frees). Returns 0, or -1
 * (NULL, invalid UTF-8 or a NUL byte, out of memory). */
int ds_tokenize_13a(const char *text, char **out);
/* Adds one sentence as sacreBLEU's BLEU() does (raw text, see above) against n_refs >= 1
 * references. Returns 0, or -1 (bad argument, bad text, every reference empty, no memory). */
int ds_sacrebleu_add(ds_bleu_stats *s, const char *hyp, const char *const *refs, size_t n_refs);
/* Convenience: sacreBLEU corpus_bleu of n raw hypotheses against one raw reference each. */
int ds_sacrebleu_corpus(const char *const *hyps, const char *const *refs, size_t n,
                        ds_bleu_score *out);
/* The signatures, written into buf[0..cap) (truncated to fit) and returned:
 * "nrefs:N|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0" (BLEU) and
 * "nrefs:N|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0" (chrF). */
const char *ds_sacrebleu_signature(int nrefs, char *buf, size_t cap);
const char *ds_chrf_signature(int nrefs, char *buf, size_t cap);

/* The detokenizer of the standard score for the zoo's outputs (d2l-tokenized, lowercase):
 * text split on single spaces, empty tokens dropped, tokens joined by one space except that a
 * token made only of the characters . , ! ? ; : ) is glued to the previous one ("va !" ->
 * "va!", "attends . . ." -> "attends..."). d2l's preprocessing only inserted spaces before
 * , . ! ?; the rest of the text is kept (case is not restored: the model is uncased). The
 * 13a tokenizer splits the punctuation off again, and chrF removes whitespace, so the choice
 * matters little; it is what a user of the translations would see. *out malloc'd. Returns 0,
 * or -1 (NULL, out of memory). */
int ds_detokenize_d2l(const char *text, char **out);

#ifdef __cplusplus
}
#endif

#endif
