/* datasets/vocab.h -- token <-> id hash table (XXH3, open addressing), d2l's Vocab.
 *
 * A ds_vocab holds distinct byte strings ("tokens"), each with a dense id 0..size-1 given in
 * insertion order, and a 64-bit frequency. It serves both as a counter (ds_vocab_count) and
 * as the final d2l vocabulary (ds_vocab_build). Token bytes are copied into the vocab's own
 * arena, so callers never keep them alive; returned token pointers stay valid until
 * ds_vocab_free(). Lookups hash once (XXH3-64) and probe linearly; nothing scans the list.
 *
 * d2l layout (ds_vocab_build, and what the fra-eng loader produces): id 0 "<unk>", then the
 * reserved tokens "<pad>" 1, "<bos>" 2, "<eos>" 3, then every token with frequency >=
 * min_freq by descending frequency, ties in first-seen order. Unknown tokens map to 0.
 *
 * Not thread-safe for concurrent writers; concurrent readers (find/lookup/token) are fine. */
#ifndef TG_DS_VOCAB_H
#define TG_DS_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { DS_UNK = 0, DS_PAD = 1, DS_BOS = 2, DS_EOS = 3 };

typedef struct ds_vocab ds_vocab;

/* New empty vocab (no tokens at all, not even <unk>). Returns NULL when out of memory
 * (ag_last_error set). Free with ds_vocab_free(). */
ds_vocab *ds_vocab_new(void);
/* Frees v and every string it owns. NULL is a no-op. */
void ds_vocab_free(ds_vocab *v);

/* Number of tokens (ids are 0..size-1). */
int32_t ds_vocab_size(const ds_vocab *v);

/* Interns tok[0..len) (any bytes, may be empty, may contain NUL): stores its id -- the
 * existing one, or size-1 after appending it -- in *id (id may be NULL). Returns 0, or -1 out
 * of memory (also when the vocab would exceed INT32_MAX-1 tokens or a token 4 GiB). */
int ds_vocab_add(ds_vocab *v, const char *tok, size_t len, int32_t *id);
/* As ds_vocab_add, then adds n to the token's frequency. */
int ds_vocab_count(ds_vocab *v, const char *tok, size_t len, int64_t n, int32_t *id);

/* Id of tok[0..len), or -1 when absent. */
int32_t ds_vocab_find(const ds_vocab *v, const char *tok, size_t len);
/* d2l's vocab[token] for a NUL-terminated token: its id, or DS_UNK (0) when absent. */
int32_t ds_vocab_id(const ds_vocab *v, const char *tok);
/* d2l's vocab[tokens]: ids[i] = ds_vocab_id(v, tokens[i]) for i < n. */
void ds_vocab_lookup(const ds_vocab *v, const char *const *tokens, size_t n, int32_t *ids);

/* Token of an id as a NUL-terminated string owned by v (NULL if id is out of range);
 * *len (if len is not NULL) receives its byte length (tokens may contain NUL bytes only
 * when added that way through ds_vocab_add; the fra-eng reader never produces them). */
const char *ds_vocab_token(const ds_vocab *v, int32_t id, size_t *len);
/* d2l's vocab.to_tokens: tokens[i] = token of ids[i]. Returns 0, or -1 naming the
 * first out-of-range id (tokens then partly filled). Pointers are owned by v. */
int ds_vocab_to_tokens(const ds_vocab *v, const int32_t *ids, size_t n, const char **tokens);
/* Frequency of an id (0 if out of range, or for tokens only added, never counted). */
int64_t ds_vocab_freq(const ds_vocab *v, int32_t id);

/* d2l's Vocab(tokens, min_freq, reserved_tokens) from a counter: a new vocab (*out, caller
 * frees) with "<unk>", the n_reserved reserved tokens (distinct, none equal to "<unk>"),
 * then the tokens of `counts` whose frequency >= min_freq by descending frequency, ties by
 * their id in `counts` (i.e. first-seen order). Tokens already present (e.g. "<pad>" found
 * in the text) are not added twice. Frequencies are copied from `counts`. Returns 0, or -1
 * (a duplicate reserved token, out of memory). */
int ds_vocab_build(const ds_vocab *counts, int64_t min_freq, const char *const *reserved,
                   int n_reserved, ds_vocab **out);
/* The fra-eng reserved tokens: {"<pad>", "<bos>", "<eos>"}. */
extern const char *const ds_reserved_tokens[3];

/* Checks the d2l layout: ids 0..3 are "<unk>", "<pad>", "<bos>", "<eos>". Returns 0, or -1
 * naming the first mismatch. */
int ds_vocab_check_reserved(const ds_vocab *v);

/* ---- a codec: text <-> ids by another tokenizer (subword units) ----
 * A vocabulary may carry a codec: then ds_encode_sentence and ds_decode_ids (fra_eng.h) turn
 * text into ids and back through it instead of splitting on spaces, and ds_fra_set_vocab
 * re-encodes a dataset with it. The library never looks inside: the model zoo's programs attach
 * a SentencePiece model (zoo/app/subword.h); the datasets library does not link it. */
typedef struct ds_codec {
    const char *name; /* what it is, for messages and checkpoints ("sentencepiece"), static */
    /* text (NUL-terminated UTF-8) -> *ids (malloc'd, caller frees), *n of them, no <eos>.
     * 0, or -1 with ag_error set. */
    int (*encode)(void *ctx, const char *text, int32_t **ids, size_t *n);
    /* ids[0..n) -> *out, text (malloc'd, caller frees). 0, or -1 with ag_error set. */
    int (*decode)(void *ctx, const int32_t *ids, size_t n, char **out);
    void (*free)(void *ctx); /* called once by ds_vocab_free (NULL: nothing to free) */
    void *ctx;
    const void *model; /* the codec's model bytes (owned by ctx), kept with the vocabulary */
    size_t model_len;
} ds_codec;
/* Attaches a copy of *c to v, which owns c->ctx from then on (c->free(c->ctx) when v is freed;
 * on failure too). A vocabulary has at most one codec: -1 if it has one already. */
int ds_vocab_set_codec(ds_vocab *v, const ds_codec *c);
/* v's codec (owned by v), or NULL: the word-level pipeline. */
const ds_codec *ds_vocab_codec(const ds_vocab *v);
/* Whether the text of v's sentences carries number tags (text.h: a source's digit runs as
 * tags, the model's tags restored from the source); set by whoever made v (the zoo, from its
 * run configuration or checkpoint). Off for a new vocabulary. */
void ds_vocab_set_number_tags(ds_vocab *v, bool on);
bool ds_vocab_number_tags(const ds_vocab *v);

/* Text format (what the model zoo imports): one token per line in id order, each followed
 * by "\n", UTF-8, no other content. An empty token is an empty line.
 * ds_vocab_save returns 0, or -1: I/O (path and strerror in the message), or a token that
 * contains "\n" or "\r" (not representable). Frequencies are not saved. */
int ds_vocab_save(const ds_vocab *v, const char *path);
/* The same text in memory: *out (NUL-terminated, malloc'd, caller frees) and its length *len.
 * Returns 0, or -1 (a token with a line break, `name` used in the message; out of memory). */
int ds_vocab_text(const ds_vocab *v, const char *name, char **out, size_t *len);
/* Loads the text format into a new vocab (*out, caller frees; frequencies 0). A final line
 * without "\n" is accepted, a "\r" before "\n" is dropped (CRLF files). Errors, each with
 * path:line, return -1: I/O (cannot open/read), bad data (empty file, invalid UTF-8, NUL byte, a
 * lone "\r", a duplicate token -- which also names the line of the first occurrence). */
int ds_vocab_load(const char *path, ds_vocab **out);
/* The same parser on a buffer; `name` is used in messages. */
int ds_vocab_parse(const char *data, size_t len, const char *name, ds_vocab **out);

#ifdef __cplusplus
}
#endif

#endif
