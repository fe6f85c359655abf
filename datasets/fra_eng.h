/* datasets/fra_eng.h -- d2l's English-French pipeline: read, preprocess, tokenize,
 * vocabularies, truncate/pad, valid lengths, a held-out split and shuffled batches.
 *
 *     ds_fra_options o = ds_fra_defaults();          // d2l: 600 examples, 10 steps, ...
 *     ds_fra *d;
 *     if (ds_fra_load("fra.txt", &o, &d)) { fprintf(stderr, "%s\n", ag_last_error()); ... }
 *     ds_batches *it;
 *     ds_batches_new(d, DS_TRAIN, true, &it);      // shuffled, opts.batch_size rows
 *     for (int64_t epoch = 0; epoch < 300; epoch++) {
 *         ds_batches_epoch(it, epoch);                 // reshuffle: f(seed, epoch)
 *         ds_batch b;
 *         while (ds_batches_next(it, &b)) { ... b.src, b.src_valid_len, b.tgt, ... }
 *     }
 *     ds_batches_free(it); ds_fra_free(d);
 *
 * What the loader computes, exactly as d2l (docs/spec.md section 1), quirks included:
 *  - the file is strict UTF-8 read in Python text mode: "\r\n" and a lone "\r" end lines too;
 *  - preprocess: U+202F and U+00A0 become a space; lowercase as Python's str.lower()
 *    (datasets/unicode.h); a space is inserted before each of , . ! ? whose previous
 *    character is not a space -- the previous character of a line's first character is the
 *    line break, so a line starting with "." gets one; only the file's very first character
 *    never does;
 *  - lines 0..num_examples are read (inclusive: 600 gives 601 pairs when no line is
 *    skipped); a line is a pair only if it has exactly one tab; skipped lines still advance
 *    the line index; the empty text after a final line break is not a line;
 *  - tokens: each side split on single spaces, empty strings kept ("a  b" -> a, "", b);
 *  - vocabularies (per side) from the training pairs (all pairs read when there is no
 *    split): see datasets/vocab.h;
 *  - arrays: ids + <eos>, truncated (losing <eos>) or padded with <pad> to num_steps;
 *    valid_len = number of ids that are not <pad>.
 *
 * Bad input (each case is tested in tests/datasets/test_badinput.c):
 *  - missing / unreadable file, a directory: -1, "path: cannot open: <strerror>";
 *  - empty file, or no line with exactly two fields: -1 ("path: empty file",
 *    "path: no sentence pair: none of the N lines read has exactly one tab");
 *  - a line without a tab (empty lines included) or with more than one tab: skipped and
 *    counted in ds_fra_stats (skipped_no_tab, skipped_many_tabs, first_skipped), as d2l;
 *  - invalid UTF-8 (as Python's strict decoder: overlong, surrogate, > U+10FFFF,
 *    truncated): -1, "path:LINE:COL: invalid UTF-8 byte 0xXX" (d2l fails as well);
 *  - a NUL byte: -1, "path:LINE:COL: NUL byte" (a text file never has one);
 *  - very long lines (megabytes) and very long tokens: read normally, no length limit;
 *  - only lines 0..num_examples are examined: bytes after them are not read or validated.
 * LINE and COL are 1-based (LINE - 1 is d2l's line index), COL counts bytes.
 *
 * Ownership: a ds_fra owns its vocabularies and arrays; every pointer returned by an
 * accessor stays valid until ds_fra_free(). A ds_batches iterator must be freed before the
 * ds_fra it reads. */
#ifndef TG_DS_FRA_ENG_H
#define TG_DS_FRA_ENG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DS_SRC = 0, DS_TGT = 1 } ds_side;
/* The largest held-out fraction of each part (valid_frac, test_frac; their sum must stay below
 * 1): the one range of the library's check and of the programs' --valid-frac, --test-frac. */
#define DS_MAX_FRAC 0.9

/* DS_TRAIN is every pair when there is no split (valid_frac = test_frac = 0). */
typedef enum { DS_TRAIN = 0, DS_VALID = 1, DS_TEST = 2, DS_ALL = 3 } ds_part;

/* The RNG stream of the train/valid/test split (ag_rng_permutation(n, split_seed, this)). */
#define DS_SPLIT_STREAM 0x53504C4954ULL /* "SPLIT" */
/* Mixed into the epoch for the order of token batches (ds_batches_new). */
#define DS_BATCH_STREAM 0x4241544348ULL /* "BATCH" */

typedef struct {
    int64_t num_examples; /* read lines 0..num_examples inclusive; 0 = every line (600)    */
    int32_t num_steps;    /* sequence length T of the arrays, >= 1                  (10)    */
    int64_t min_freq;     /* vocabulary threshold; 0 and 1 keep every token          (2)    */
    int32_t batch_size;   /* rows per batch, last batch smaller                     (64)    */
    uint64_t seed;        /* batch shuffling: epoch e uses permutation(n, seed, e)   (0)    */
    double valid_frac;    /* held-out split: floor(valid_frac * pairs) validation    (0)    */
    double test_frac;     /*   and floor(test_frac * pairs) test pairs               (0)    */
    uint64_t split_seed;  /* split permutation(pairs, split_seed, DS_SPLIT_STREAM) (0)  */
    int32_t batch_tokens; /* > 0: ds_batches_new makes token batches (below)            (0)    */
    int split_mode;       /* DS_SPLIT_RANDOM or DS_SPLIT_DISJOINT (below)                 (0)    */
} ds_fra_options;

/* How the held-out pairs are chosen (n pairs, n_test = floor(test_frac n), n_valid =
 * floor(valid_frac n); nothing is held out when both are 0):
 *  - DS_SPLIT_RANDOM: p = permutation(n, split_seed, DS_SPLIT_STREAM); test = p[0..n_test),
 *    valid = the next n_valid, train = the rest. fra.txt repeats English sentences with other
 *    French translations, so many test pairs share their English side with a training pair
 *    (ds_fra_shared_src_test).
 *  - DS_SPLIT_DISJOINT: no English and no French sentence on two sides. Sentences are compared
 *    after preprocessing (equal token sequences are the same sentence). Pairs are grouped into
 *    connected components (two pairs are connected when they share their English or their
 *    French sentence), numbered in the order of their smallest pair index; with
 *    c = permutation(components, split_seed, DS_SPLIT_STREAM), the components are taken in
 *    the order c[0], c[1], ... and each goes, whole, to test if test's size plus its size is
 *    still <= n_test, else to valid if valid's size plus its size is <= n_valid, else to
 *    train (first fit). So test and valid never exceed their targets, and reach them
 *    exactly when the small components suffice (fra.txt: they do); one very large component
 *    ends in train. */
enum { DS_SPLIT_RANDOM = 0, DS_SPLIT_DISJOINT = 1 };
/* Their names, by value, NULL-terminated: "random", "disjoint" (the --split-mode choices). */
extern const char *const ds_split_mode_names[];

/* d2l's defaults (values in parentheses above). */
ds_fra_options ds_fra_defaults(void);

typedef struct {
    int64_t lines;             /* lines examined: d2l line indices 0..lines-1            */
    int64_t pairs;             /* lines with exactly one tab = sentence pairs            */
    int64_t skipped_no_tab;    /* lines without a tab (empty lines included)             */
    int64_t skipped_many_tabs; /* lines with two or more tabs                            */
    int64_t first_skipped;     /* 1-based line number of the first skipped line, or 0    */
    int64_t tokens[2];         /* tokens per side (DS_SRC, DS_TGT), empty ones included  */
    int64_t truncated[2];      /* sentences with more than num_steps - 1 tokens per side  */
} ds_fra_stats;

typedef struct ds_fra ds_fra;

/* Reads `path` (memory-mapped when it is a regular file) and runs the whole pipeline with
 * options *opt (NULL = ds_fra_defaults()). On success *out is a new dataset (caller frees
 * with ds_fra_free). Returns 0, or -1: a bad option (named in the message), I/O, bad data (see
 * "Bad input" above), out of memory. */
int ds_fra_load(const char *path, const ds_fra_options *opt, ds_fra **out);
/* The same on a buffer data[0..len) (not NUL-terminated; not retained); `name` stands for
 * the path in messages. */
int ds_fra_load_mem(const char *data, size_t len, const char *name, const ds_fra_options *opt,
                    ds_fra **out);
/* Frees everything the dataset owns. NULL is a no-op. */
void ds_fra_free(ds_fra *d);

/* Accessors (d must be a loaded dataset; side/part must be valid enum values). */
const ds_fra_options *ds_fra_opts(const ds_fra *d);
const ds_fra_stats *ds_fra_get_stats(const ds_fra *d);
int64_t ds_fra_num_pairs(const ds_fra *d);
int32_t ds_fra_num_steps(const ds_fra *d);
const ds_vocab *ds_fra_vocab(const ds_fra *d, ds_side side);
/* num_pairs x num_steps ids, row-major, and the num_pairs valid lengths (d2l's src_array,
 * src_valid_len, tgt_array, tgt_valid_len). */
const int32_t *ds_fra_ids(const ds_fra *d, ds_side side);
const int32_t *ds_fra_valid_len(const ds_fra *d, ds_side side);
/* The side of pair `pair` as written in the file (no preprocessing: case, no-break spaces and
 * punctuation as they are; the line break excluded): NUL-terminated, owned by d, its byte
 * length in *len if len is not NULL; NULL if pair is out of range. The references of the
 * standard score (datasets/metrics.h, ds_sacrebleu_add). */
const char *ds_fra_raw(const ds_fra *d, ds_side side, int64_t pair, size_t *len);
/* How many test pairs have an English sentence (preprocessed) that is also the English
 * sentence of a training pair: about half in random mode on fra.txt, 0 in disjoint mode;
 * 0 without a split. */
int64_t ds_fra_shared_src_test(const ds_fra *d);
/* 0-based line index in the file (d2l's i) of pair `pair`, or -1 if out of range. */
int64_t ds_fra_line_of_pair(const ds_fra *d, int64_t pair);
/* The pairs of a part, ascending, and their count. DS_ALL is 0..num_pairs-1. */
const int64_t *ds_fra_part_pairs(const ds_fra *d, ds_part part);
int64_t ds_fra_part_size(const ds_fra *d, ds_part part);

/* The preprocessed tokens of a sentence (before vocabulary lookup, not truncated): the
 * number of tokens, or -1 if pair is out of range; and token j (NUL-terminated, owned by d;
 * NULL if out of range), its byte length in *len if len is not NULL. */
int32_t ds_fra_sentence_len(const ds_fra *d, ds_side side, int64_t pair);
const char *ds_fra_token(const ds_fra *d, ds_side side, int64_t pair, int32_t j, size_t *len);
/* The preprocessed sentence as one string, tokens joined by single spaces (a BLEU
 * reference). *out is malloc'd (caller frees). Returns 0, or -1 (pair out of range, out of
 * memory). */
int ds_fra_sentence(const ds_fra *d, ds_side side, int64_t pair, char **out);

/* Replaces the vocabulary of one side by v (taken: d owns it from here, on failure too), which
 * must carry a codec (ds_vocab_set_codec, vocab.h) whose ids are v's: every pair's side, as
 * written in the file (ds_fra_raw), is encoded through the codec and becomes the side's tokens
 * (ds_fra_token: the units' strings), ids and valid lengths (+ <eos>, truncated or padded to
 * num_steps as the word-level arrays), and the side's counts in ds_fra_get_stats. The split and
 * the raw text are unchanged. Used for subword vocabularies learned from the training pairs
 * (docs/datasets.md). Returns 0, or -1 (no codec, the codec's error naming the pair, an id out
 * of v, out of memory; d is then unusable: free it). */
int ds_fra_set_vocab(ds_fra *d, ds_side side, ds_vocab *v);
/* Side `side` of a pair with number tags as training reads it (text.h): the English side's digit
 * runs, and the French side's copies of them, as tags shuffled by the pair's own key (pair + 1),
 * the same for both sides; what ds_fra_set_vocab encodes when the vocabulary has number tags,
 * and what a subword model is to be learned from. *out malloc'd. 0, or -1 (invalid UTF-8, out of
 * memory). */
int ds_fra_tagged(const ds_fra *d, ds_side side, int64_t pair, char **out);

/* Writes the split as text: two '#' comment lines (options, column names), then one line
 * per pair: "<pair>\t<line index>\t<train|valid|test>". Returns 0, or -1 (I/O). */
int ds_fra_write_split(const ds_fra *d, const char *path);

/* ---- batches ------------------------------------------------------------------------- */

typedef struct {
    int32_t size;                 /* B rows in this batch (the last one may be smaller)  */
    int32_t num_steps;            /* T (token batches: the batch's longest pair)         */
    int32_t full_steps;           /* opts.num_steps: T before a token batch's cut        */
    const int32_t *src;           /* B x T, row-major                                    */
    const int32_t *src_valid_len; /* B                                                   */
    const int32_t *tgt;           /* B x T                                               */
    const int32_t *tgt_valid_len; /* B                                                   */
    const int64_t *pairs;         /* B pair indices (rows of ds_fra_ids)                 */
    /* a token batch (batch_tokens > 0): T is its longest pair, past a row's valid lengths
     * only padding, so a consumer may cut rows to their own longest (the trainer does) */
    bool by_tokens;
} ds_batch;

typedef struct ds_batches ds_batches;

/* Iterator over the pairs of `part` in batches of opts.batch_size rows, positioned at the
 * start of epoch 0. With shuffle, epoch e visits the part in the order
 * permutation(size, opts.seed, e) (ag_rng_permutation, autograd/ag_base.h), so the same seed
 * gives the same batches, and an epoch can be replayed alone; without shuffle, ascending order.
 *
 * Token batches (opts.batch_tokens > 0): a pair's length is max(src_valid_len, tgt_valid_len);
 * epoch e takes the pairs in the order above, sorts them by length (stably: pairs of equal
 * length keep that order), and cuts the sorted list greedily into batches of at most
 * batch_tokens tokens counted as rows x the batch's longest length; the batches are then
 * visited in the order permutation(batches, seed, e ^ DS_BATCH_STREAM). A batch's arrays are
 * cut to that longest length (num_steps = it, <= opts.num_steps): every position dropped is
 * padding. The batch boundaries depend only on the lengths, so every epoch has the same number
 * of batches. Fails when batch_tokens is below the longest pair of the part (a batch must
 * hold one pair; the message names both).
 *
 * Returns 0, or -1 (empty part, out of memory). Free with ds_batches_free(). */
int ds_batches_new(const ds_fra *d, ds_part part, bool shuffle, ds_batches **out);
/* The same with batch_size rows per batch instead of opts.batch_size (e.g. a larger batch
 * for evaluation), never token batches; batch_size 0 means ds_batches_new. Fails if
 * batch_size < 0. */
int ds_batches_new_sized(const ds_fra *d, ds_part part, bool shuffle, int32_t batch_size,
                         ds_batches **out);
/* Restarts the iterator at the beginning of epoch `epoch` (>= 0). */
void ds_batches_epoch(ds_batches *it, int64_t epoch);
/* Fills *b with the next batch of the epoch and returns true, or returns false at the end of
 * the epoch. The arrays in *b belong to the iterator and are overwritten by the next call. */
bool ds_batches_next(ds_batches *it, ds_batch *b);
/* Batches per epoch: ceil(part size / batch_size), or the number of token batches. */
int64_t ds_batches_count(const ds_batches *it);
void ds_batches_free(ds_batches *it);

/* ---- prediction helpers (d2l's predict_seq2seq) --------------------------------------- */

/* d2l's preprocess_nmt on one standalone sentence, the function the loader applies to each
 * side of fra.txt: U+202F and U+00A0 become a space, Python's str.lower(), a space inserted
 * before each of , . ! ? whose previous character is not a space -- except at the text's
 * first character, which gets none (as the file's first). Nothing else changes: other
 * blanks, tabs and repeated spaces stay (datasets/text.h normalizes typed text first). On
 * success *out is a malloc'd NUL-terminated string (caller frees). Returns 0, or -1 (invalid
 * UTF-8: "sentence:1:COL: invalid UTF-8 byte 0xXX", out of memory; *out is then NULL). */
int ds_preprocess(const char *raw, char **out);

/* d2l: ids = vocab[sentence.lower().split(' ')] + [<eos>], truncated or padded with <pad>
 * to num_steps into ids[0..num_steps); *valid_len = number of tokens + 1, NOT clipped to
 * num_steps (d2l's enc_valid_len; min(*valid_len, num_steps) are real positions). Only
 * lowercasing and splitting: no punctuation spacing, as d2l. A vocabulary with a codec
 * (vocab.h) encodes the sentence through it instead, as it is (no lowercasing), a source
 * sentence's digit runs as tags first when v has number tags (ds_vocab_number_tags, text.h).
 * Returns 0, or -1 (num_steps < 1, invalid UTF-8 or NUL, out of memory). */
int ds_encode_sentence(const ds_vocab *v, const char *sentence, int32_t num_steps, int32_t *ids,
                       int32_t *valid_len);
/* d2l: ' '.join(vocab.to_tokens(ids)) over ids[0..n) up to (excluding) the first <eos>; with a
 * codec (vocab.h), the codec's text of those ids.
 * *out is malloc'd (caller frees). Returns 0, or -1 (an id out of range, named; out of
 * memory). */
int ds_decode_ids(const ds_vocab *v, const int32_t *ids, size_t n, char **out);
/* A model's translation of `source` (the sentence as given to ds_encode_sentence): ds_decode_ids,
 * then, when v has number tags, each tag as the source's digits (ds_numtag_restore). *out
 * malloc'd (caller frees). 0, or -1 (ds_decode_ids' errors, invalid UTF-8 in source). */
int ds_decode_translation(const ds_vocab *v, const int32_t *ids, size_t n, const char *source,
                          char **out);

/* ---- locating fra.txt ---------------------------------------------------------------- */

/* Finds fra.txt, trying in order:
 *   1. flag_value, if not NULL or empty (an explicit command-line flag);
 *   2. the environment variable TG_FRA_ENG (path of fra.txt), if set and not empty;
 *   3. $XDG_CACHE_HOME/tapegrad/fra-eng/fra.txt (XDG_CACHE_HOME set to an absolute path),
 *      else $HOME/.cache/tapegrad/fra-eng/fra.txt;
 *   4. ../shared/data/fra-eng/fra.txt relative to the current directory;
 *   5. <source_dir>/../shared/data/fra-eng/fra.txt, if source_dir is not NULL (programs get
 *      the source tree from CMake).
 * A path given by 1 or 2 must exist: if it does not, that is an error (no silent fallback).
 * On success the path is copied to out[0..cap). Returns 0, or -1 (not found: the message
 * lists every path tried; a path longer than cap). */
int ds_resolve_data_path(const char *flag_value, const char *source_dir, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
