/* zoo/app/subword.h -- subword vocabularies: a C shim over SentencePiece (C++, libsentencepiece).
 *
 * A model is the bytes of a SentencePiece model file (ModelProto), exactly what spm_train writes
 * and spm_encode / spm_decode read. Ours are unigram models trained with:
 *   ids 0..3 = <unk> <pad> <bos> <eos> (the layout of datasets/vocab.h, so a piece's id is its
 *   vocabulary id), byte_fallback (a character no piece covers is spelled as UTF-8 byte pieces
 *   <0xE2>..., so every input survives and nothing encodes to <unk>), the identity normalization
 *   (no NFKC: the text given is the text learned; the caller normalizes it with
 *   ds_text_normalize), character_coverage 1, one thread, every sentence in the order given (no
 *   sampling, no shuffling) and the random seed given: the same sentences, size, seed and digit
 *   setting give the same model bytes. With split_digits, SentencePiece's split_digits: no
 *   piece holds a digit beside another character, so "1990" is always the pieces 1 9 9 0 (a
 *   space before it, a piece of its own): a number is spelled by its digits, not by the few
 *   multi-digit pieces the corpus happened to make frequent.
 *
 * Built into the static library tg_zoo_subword, which the programs and the tests link; the
 * installed zoo library never links SentencePiece: it reaches it through zoo_subword_ops, which
 * a program passes in (cli.h, zoo_cli_main_subword). The header is installed for that type; the
 * zoo_spm_* functions are not in the installed libraries (a program of its own that wants them
 * compiles zoo/app/subword.cc and links libsentencepiece and libsentencepiece_train). Exceptions and SentencePiece's status
 * never cross into C: every function returns -1 or NULL with the message in ag_last_error()
 * (autograd/ag_base.h). SentencePiece's own log lines are silenced. */
#ifndef TG_ZOO_SUBWORD_H
#define TG_ZOO_SUBWORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../datasets/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The codec name of our models in a vocabulary (ds_codec.name) and in checkpoints. */
#define ZOO_SPM_CODEC "sentencepiece"
/* The smallest vocabulary size: the 4 reserved ids and the 256 byte pieces, and a few more. */
#define ZOO_SPM_MIN_VOCAB 300

/* Trains a model of at most vocab_size pieces (fewer when the text has fewer: the limit is
 * soft) on sentences[0..n) (UTF-8, NUL-terminated, used as given) with the settings above,
 * digits split into pieces of their own when split_digits.
 * *model: the model file's bytes (malloc'd, caller frees), *len of them. Returns 0, or -1: no
 * sentence, vocab_size below ZOO_SPM_MIN_VOCAB, SentencePiece's error (its message), out of
 * memory. */
int zoo_spm_train(const char *const *sentences, size_t n, int vocab_size, bool split_digits,
                  uint32_t seed, char **model, size_t *len);

/* A loaded model; free with zoo_spm_free. */
typedef struct zoo_spm zoo_spm;
/* Loads model bytes (copied; `name` is used in messages). NULL with the error: bytes that are
 * not a SentencePiece model, or a model whose ids 0..3 are not <unk> <pad> <bos> <eos>, or
 * without byte fallback. */
zoo_spm *zoo_spm_load(const void *model, size_t len, const char *name);
void zoo_spm_free(zoo_spm *sp); /* NULL is a no-op */
/* Number of pieces (ids 0..size-1). */
int zoo_spm_size(const zoo_spm *sp);
/* The model's bytes (owned by sp), their count in *len. */
const void *zoo_spm_model(const zoo_spm *sp, size_t *len);
/* text (UTF-8) -> the ids of its pieces, as spm_encode --output_format=id: *ids malloc'd (caller
 * frees; NULL when *n is 0), no <bos> / <eos>. 0, or -1 (invalid UTF-8, out of memory). */
int zoo_spm_encode(const zoo_spm *sp, const char *text, int32_t **ids, size_t *n);
/* ids -> text, as spm_decode --input_format=id, after dropping <unk>, <pad> and <bos> (a
 * decoder's output never shows them); *out malloc'd (caller frees). 0, or -1 (an id out of
 * range, named; out of memory). */
int zoo_spm_decode(const zoo_spm *sp, const int32_t *ids, size_t n, char **out);

/* The vocabulary of model bytes: the pieces in id order, and the model as its codec
 * (ds_vocab_set_codec, named ZOO_SPM_CODEC): its encode applies ds_text_normalize (typographic
 * quotes, no-break spaces, datasets/text.h) then zoo_spm_encode; its decode is zoo_spm_decode.
 * *out is the caller's (ds_vocab_free frees the model too). 0, or -1 (zoo_spm_load's errors). */
int zoo_spm_vocab(const void *model, size_t len, const char *name, ds_vocab **out);

/* What the installed zoo library needs of SentencePiece, passed in by a program. */
typedef struct zoo_subword_ops {
    int (*train)(const char *const *sentences, size_t n, int vocab_size, bool split_digits,
                 uint32_t seed, char **model, size_t *len);
    int (*vocab)(const void *model, size_t len, const char *name, ds_vocab **out);
} zoo_subword_ops;
/* {zoo_spm_train, zoo_spm_vocab}: static, never NULL. */
const zoo_subword_ops *zoo_subword_spm(void);

#ifdef __cplusplus
}
#endif

#endif
