/* datasets/text.h -- text as people type and read it, around the word-level pipeline: typed
 * sentences -> the corpus's preprocessed form (what a model's vocabulary knows), and a model's
 * French tokens -> text to paste.
 *
 *     char *model, *typed, *unk, *fr;
 *     ds_text_source("I'm home.", NULL, &model, &typed);  // "i'm home .", "I'm home ."
 *     ... encode `model`, translate it to `tokens` ("je suis chez moi .") ...
 *     ds_text_unk_word(src_vocab, model, typed, &unk);     // the one out-of-vocabulary word
 *     ds_detokenize_fr(tokens, unk, &fr);                  // "Je suis chez moi."
 *
 * Every function takes and gives UTF-8; invalid UTF-8 is refused (-1, "invalid UTF-8 byte
 * 0xXX at byte N", N 1-based), never passed on. Results are malloc'd (caller frees). Library
 * code: errors go to ag_error, nothing is printed. */
#ifndef TG_DS_TEXT_H
#define TG_DS_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The checkpoint metadata key naming a model's preprocessing, and the one value known:
 * d2l's preprocess_nmt (ds_preprocess, datasets/fra_eng.h). A checkpoint without the key
 * was made with it. */
#define DS_PREPROCESS_KEY "data.preprocess"
#define DS_PREPROCESS_D2L "d2l"
/* Subword models (cased): the text as typed, through ds_text_normalize alone. */
#define DS_PREPROCESS_NORMALIZE "normalize"

/* Typed text -> the corpus's character forms (the English side of fra.txt):
 *  - apostrophes U+2019 U+2018 U+201B U+02BC -> U+0027 ';
 *  - quotation marks U+201C U+201D U+201E U+201F -> U+0022 "; guillemets U+00AB and U+00BB
 *    -> " with the blanks inside them removed (« a » -> "a");
 *  - U+2026 (ellipsis) -> "...";
 *  - U+200B, U+2060, U+FEFF (zero width) and U+00AD (soft hyphen) removed;
 *  - every blank (Python's str.isspace(): tab, line breaks, U+00A0, U+202F, U+2009, ...)
 *    -> a space, runs of blanks -> one space, none at either end.
 * Case, letters and other punctuation are kept. Returns 0, or -1 (invalid UTF-8, out of
 * memory; *out is then NULL). */
int ds_text_normalize(const char *raw, char **out);

/* A typed sentence for a model whose preprocessing is `scheme`. NULL or "d2l": *model =
 * ds_preprocess(ds_text_normalize(raw)), the text to encode; *typed = the same tokens before
 * lowercasing (ds_text_normalize, then a space before each , . ! ? not preceded by one, but the
 * first character): token j of *typed is token j of *model as typed (lowercasing never makes or
 * removes a space). Text already in the corpus form ("i'm home .") is unchanged. "normalize" (a
 * subword model's input): *model = *typed = a copy of raw, checked to be UTF-8 and not
 * normalized here: a subword vocabulary's codec (datasets/vocab.h; the zoo's SentencePiece one)
 * applies ds_text_normalize as it encodes, so the text is normalized once. typed may be NULL.
 * Returns 0, or -1 (an unknown scheme, named; invalid UTF-8; out of memory; the outputs are then
 * NULL). */
int ds_text_source(const char *raw, const char *scheme, char **model, char **typed);

/* The sentences of a typed English line, to translate one at a time (a model trained on
 * sentences drops or merges the later ones of a paragraph): the line is cut after . ! ? or an
 * ellipsis (U+2026), with any further ones and any closing quotes or brackets after it, where
 * blanks follow and then an uppercase ASCII letter, a digit, an opening quote or bracket, or a
 * non-ASCII character -- but never after a period that ends a known abbreviation (Mr. Dr. St.
 * p.m. e.g. etc. ..., compared without case) or a single capital letter other than I
 * (initials: "J. K. Rowling"). Lowercase text (the corpus form "i'm home . go .") is never
 * cut. Each sentence keeps its characters as typed, without the blanks around it. *out gets
 * the n sentences (malloc'd strings, and the array; the caller frees each and the array; NULL
 * when n = 0). Returns n (0 for an empty or blank line), or -1 (invalid UTF-8, out of memory;
 * *out NULL). */
int ds_text_sentences(const char *line, char ***out);

/* The source words a vocabulary does not know: the number of space-separated tokens of
 * `model` that v lacks (they encode as <unk>), and when there is exactly one, *word = a copy
 * of it as typed (the same token of `typed`; of `model` if typed is NULL or has another
 * number of tokens), else *word = NULL. Returns the count (>= 0), or -1 (out of memory). */
int ds_text_unk_word(const ds_vocab *v, const char *model, const char *typed, char **word);

/* French tokens (a translation as ds_decode_ids gives it: tokens joined by spaces) -> text,
 * by French typography kept simple:
 *  - no space before . , ) ... and after ( ; a plain space (U+0020, not the narrow no-break
 *    space U+202F typesetters use: terminals show it badly) before ! ? : ; ;
 *  - " alternates: the first opens (no space after it), the next closes (none before it);
 *  - the first letter of the text and of each sentence after . ! ? is capitalised (the
 *    model's vocabulary is lowercase): the smallest code point Python lowercases to it;
 *  - <unk>: the first becomes unk_word if it is not NULL, the others are dropped; <pad>,
 *    <bos>, <eos> are dropped; empty tokens (repeated spaces) are skipped.
 * Returns 0, or -1 (invalid UTF-8, out of memory; *out is then NULL). */
int ds_detokenize_fr(const char *tokens, const char *unk_word, char **out);

/* ---- Number tags: numbers copied around a model, not spelled by it ----
 * A model trained with number tags (zoo: --number-tags 1) never sees the digits its source
 * and target share: each maximal run of ASCII digits of a source is replaced by a tag, the
 * code point U+E000 + K (Unicode's private use area), K the index of its value among the
 * source's distinct runs in order of first appearance (the first DS_NUMTAG_MAX of them; later
 * ones stay digits); in a training target, a run equal to one of the source's becomes the same
 * tag, the others stay digits. The model learns to place a tag, which it sees in every
 * number-bearing pair, instead of to spell a number digit by digit; ds_numtag_restore puts
 * the source's digits back. Training pairs are tagged with `shuffle` set (their own key, the
 * same for both sides of a pair): number j then gets entry j of a permutation of
 * 0 .. DS_NUMTAG_MAX - 1 drawn from it, so that every tag is as frequent as any other and a
 * model learns to copy the tag it reads, not to number the numbers it writes (in order, tag 0
 * would be in every number-bearing pair and tag 1 in a fifth of them). shuffle 0 (a sentence
 * to translate): tag K for number K, which ds_numtag_restore reads back. "I was born in 1956." -> "I was born in \uE000." -> (model)
 * "Je suis né en \uE000." -> "Je suis né en 1956."; "1,000" is two runs ("1", "000"), so
 * a model can write them "1 000" as French does. Tag characters already in a text are
 * removed when it is tagged. Each returns 0, or -1 (invalid UTF-8 in either text, out of
 * memory); *out malloc'd (caller frees), NULL on failure. */
#define DS_NUMTAG_MAX 4 /* fra.txt has at most 4 distinct numbers in an English sentence */
/* src with its digit runs as tags. */
int ds_numtag_source(const char *src, uint64_t shuffle, char **out);
/* tgt (src's translation) with the runs equal to one of src's as src's tags (the same shuffle). */
int ds_numtag_target(const char *src, const char *tgt, uint64_t shuffle, char **out);
/* text (a translation of ds_numtag_source(src)) with each tag K as src's run K; a tag src has
 * no run for is dropped. */
int ds_numtag_restore(const char *src, const char *text, char **out);

#ifdef __cplusplus
}
#endif

#endif
