/* test_subword.c -- the SentencePiece shim (zoo/app/subword.h) and the subword path of the data
 * library (datasets/vocab.h codecs, ds_fra_set_vocab): a model learned from a small in-test
 * corpus; encode / decode round trips of any UTF-8, characters never seen included (byte
 * fallback, never <unk>); the same seed gives the same model bytes; digits split into pieces
 * of their own; bad model bytes and bad arguments refused with a message; a dataset re-encoded
 * through the vocabulary's codec, with and without number tags. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/subword.h"
#include "zoo/app/model_io.h"
#include "zoo/models/transformer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_base.h"
#include "datasets/fra_eng.h"
#include "datasets/text.h"
#include "tests/tg_test.h"

/* A small bilingual corpus, each line used once (the shim takes them in this order). */
static const char *const CORPUS[] = {
    "Go.",
    "Va !",
    "I lost.",
    "J'ai perdu.",
    "He's calm.",
    "Il est calme.",
    "I'm home.",
    "Je suis chez moi.",
    "We're happy.",
    "Nous sommes heureux.",
    "She is reading a book.",
    "Elle lit un livre.",
    "The cat sleeps.",
    "Le chat dort.",
    "I'm hungry!",
    "J'ai faim !",
    "Where is the station?",
    "Où est la gare ?",
    "It's raining.",
    "Il pleut.",
};
enum { N_CORPUS = sizeof CORPUS / sizeof *CORPUS };

static char *train_model(uint32_t seed, size_t *len) {
    char *m = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_train(CORPUS, N_CORPUS, 400, false, seed, &m, len), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_TRUE(*len > 1000);
    return m;
}

/* Text -> ids -> text is the identity, for seen and unseen characters alike. */
static void check_round_trip(const zoo_spm *sp, const char *text) {
    int32_t *ids = NULL;
    size_t n = 0;
    char *back = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_encode(sp, text, &ids, &n), 0);
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT_TRUE(ids[i] > 3); /* never <unk> (0), nor <pad> <bos> <eos> */
        CU_ASSERT_TRUE(ids[i] < zoo_spm_size(sp));
    }
    CU_ASSERT_EQUAL_FATAL(zoo_spm_decode(sp, ids, n, &back), 0);
    CU_ASSERT_STRING_EQUAL(back, text);
    CU_ASSERT_PTR_NULL(strstr(back, "<unk>"));
    free(ids);
    free(back);
}

static void test_train_and_round_trip(void) {
    size_t len;
    char *m = train_model(7, &len);
    zoo_spm *sp = zoo_spm_load(m, len, "test model");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    CU_ASSERT_TRUE(zoo_spm_size(sp) > 260 && zoo_spm_size(sp) <= 400);
    size_t back_len;
    const void *bytes = zoo_spm_model(sp, &back_len);
    CU_ASSERT_EQUAL(back_len, len);
    CU_ASSERT_EQUAL(memcmp(bytes, m, len), 0);
    check_round_trip(sp, "Je suis chez moi.");
    check_round_trip(sp, "Où est la gare ?");
    /* never seen: other scripts, symbols, emoji, a combining accent */
    check_round_trip(
        sp, "Zürich \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 e\xcc\x81t\xc3\xa9");
    check_round_trip(sp, "{[(<qwxz>)]} ~^|\\ 0123456789");
    /* a byte piece: "✓" (U+2713) was never seen, so it is spelled by its three UTF-8 bytes */
    int32_t *ids = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_encode(sp, "\xe2\x9c\x93", &ids, &n), 0);
    CU_ASSERT_TRUE(n >= 3);
    free(ids);
    /* empty text: no ids */
    CU_ASSERT_EQUAL(zoo_spm_encode(sp, "", &ids, &n), 0);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(ids);
    /* <unk> <pad> <bos> are never shown by decode */
    int32_t special[3] = {0, 1, 2};
    char *text = NULL;
    CU_ASSERT_EQUAL(zoo_spm_decode(sp, special, 3, &text), 0);
    CU_ASSERT_STRING_EQUAL(text, "");
    free(text);
    zoo_spm_free(sp);
    free(m);
}

/* Same corpus and seed: the same bytes, twice. */
static void test_deterministic(void) {
    size_t la, lb;
    char *a = train_model(11, &la), *b = train_model(11, &lb);
    CU_ASSERT_EQUAL(la, lb);
    CU_ASSERT_TRUE(la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
}

/* Piece id of v as text: a byte piece <0xHH> as its one byte (*b), else its token. */
static const char *piece_text(const ds_vocab *v, int id, char *b, size_t *len) {
    const char *t = ds_vocab_token(v, id, len);
    unsigned byte;
    if (*len == 6 && sscanf(t, "<0x%2X>", &byte) == 1) {
        *b = (char)byte;
        *len = 1;
        return b;
    }
    return t;
}

/* The longest run of digits in a piece of v. */
static int longest_digit_run(const ds_vocab *v) {
    int best = 0;
    for (int i = 0; i < ds_vocab_size(v); i++) {
        char b;
        size_t tl;
        const char *t = piece_text(v, i, &b, &tl);
        for (size_t j = 0, run = 0; j < tl; j++) {
            run = t[j] >= '0' && t[j] <= '9' ? run + 1 : 0;
            if ((int)run > best) best = (int)run;
        }
    }
    return best;
}

/* split_digits: no piece holds two digits, a digit is never joined to another character, so
 * a number is always its digits one piece each (and survives the round trip). The switch
 * reaches SentencePiece (the model records it: other bytes than without; a corpus this small
 * makes no multi-digit piece either way -- the preset's 8,000 pieces of fra.txt hold 33, such
 * as "\xe2\x96\x812013"); deterministic like the rest. */
static void test_split_digits(void) {
    enum { REPEAT = 12 };
    const char *lines[N_CORPUS + 3 * REPEAT];
    for (int i = 0; i < N_CORPUS; i++) lines[i] = CORPUS[i];
    for (int r = 0; r < REPEAT; r++) {
        lines[N_CORPUS + 3 * r] = "I was born in 1990.";
        lines[N_CORPUS + 3 * r + 1] = "Je suis n\xc3\xa9 en 1990.";
        lines[N_CORPUS + 3 * r + 2] = "It costs 25 euros.";
    }
    const size_t n = sizeof lines / sizeof *lines;
    char *plain = NULL, *split = NULL, *again = NULL;
    size_t lp, ls, la;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_train(lines, n, 400, false, 4, &plain, &lp), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_spm_train(lines, n, 400, true, 4, &split, &ls), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_spm_train(lines, n, 400, true, 4, &again, &la), 0);
    CU_ASSERT_TRUE(ls == la && !memcmp(split, again, ls));
    ds_vocab *vs = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(split, ls, "split", &vs), 0);
    CU_ASSERT_FALSE(lp == ls && !memcmp(plain, split, ls));
    CU_ASSERT_EQUAL(longest_digit_run(vs), 1);
    zoo_spm *sp = zoo_spm_load(split, ls, "split");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    static const char text[] = "In 1990, 42 cats cost 3.50 euros.";
    int32_t *ids = NULL;
    size_t k = 0, digits = 0;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_encode(sp, text, &ids, &k), 0);
    for (size_t i = 0; i < k; i++) {
        char b;
        size_t tl;
        const char *t = piece_text(vs, ids[i], &b, &tl);
        bool has_digit = false;
        for (size_t j = 0; j < tl; j++) has_digit |= t[j] >= '0' && t[j] <= '9';
        if (!has_digit) continue;
        CU_ASSERT_EQUAL(tl, 1); /* the digit alone: no "\xe2\x96\x81" before it, nothing after */
        digits++;
    }
    CU_ASSERT_EQUAL(digits, 9); /* 1 9 9 0 4 2 3 5 0 */
    free(ids);
    check_round_trip(sp, text);
    zoo_spm_free(sp);
    ds_vocab_free(vs);
    free(plain), free(split), free(again);
}

static void test_bad_input(void) {
    char *m = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(zoo_spm_train(CORPUS, 0, 400, false, 1, &m, &len), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "no sentence"));
    CU_ASSERT_EQUAL(zoo_spm_train(CORPUS, N_CORPUS, 100, false, 1, &m, &len), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "vocabulary size 100"));
    CU_ASSERT_PTR_NULL(m);
    /* not a model */
    CU_ASSERT_PTR_NULL(zoo_spm_load("garbage", 7, "bad.model"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "bad.model: not a SentencePiece model"));
    CU_ASSERT_PTR_NULL(zoo_spm_load("", 0, "empty.model"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "empty.model"));
    /* a truncated model */
    char *good = train_model(3, &len);
    CU_ASSERT_PTR_NULL(zoo_spm_load(good, len / 2, "half.model"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "half.model"));
    ds_vocab *v = NULL;
    CU_ASSERT_EQUAL(zoo_spm_vocab("garbage", 7, "bad.model", &v), -1);
    CU_ASSERT_PTR_NULL(v);
    /* an id out of range */
    zoo_spm *sp = zoo_spm_load(good, len, "good.model");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    int32_t bad[2] = {5, 1000000};
    char *text = NULL;
    CU_ASSERT_EQUAL(zoo_spm_decode(sp, bad, 2, &text), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "ids[1] = 1000000"));
    CU_ASSERT_PTR_NULL(text);
    zoo_spm_free(sp);
    free(good);
}

/* The vocabulary: the pieces in id order, <unk> <pad> <bos> <eos> first; ds_encode_sentence and
 * ds_decode_ids go through the codec (typed quotes normalized, case kept). */
static void test_vocab_codec(void) {
    size_t len;
    char *m = train_model(5, &len);
    ds_vocab *v = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &v), 0);
    CU_ASSERT_EQUAL(ds_vocab_check_reserved(v), 0);
    const ds_codec *c = ds_vocab_codec(v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->name, ZOO_SPM_CODEC);
    CU_ASSERT_EQUAL(c->model_len, len);
    int32_t ids[12], vlen = 0;
    CU_ASSERT_EQUAL_FATAL(ds_encode_sentence(v, "I\xe2\x80\x99m home.", 12, ids, &vlen), 0);
    CU_ASSERT_TRUE(vlen > 1 && vlen <= 12);
    CU_ASSERT_EQUAL(ids[vlen - 1], DS_EOS);
    for (int j = vlen; j < 12; j++) CU_ASSERT_EQUAL(ids[j], DS_PAD);
    char *text = NULL;
    CU_ASSERT_EQUAL_FATAL(ds_decode_ids(v, ids, 12, &text), 0);
    CU_ASSERT_STRING_EQUAL(text, "I'm home."); /* U+2019 -> ', the rest as typed */
    free(text);
    /* truncated: num_steps ids, no <eos>, valid length counts them all */
    CU_ASSERT_EQUAL(ds_encode_sentence(v, "Where is the station?", 2, ids, &vlen), 0);
    CU_ASSERT_TRUE(vlen > 2);
    CU_ASSERT_NOT_EQUAL(ids[1], DS_EOS);
    /* translate's path for typed text: ds_text_source ("normalize": the text as typed) then the
     * codec, which normalizes once, gives the ids the text normalized beforehand gives (the
     * path that normalized twice), and zoo_spm_encode's of ds_text_normalize's text */
    static const char *const typed[] = {"  I\xe2\x80\x99m\xc2\xa0 home. ",
                                        "Il a dit \xc2\xab non \xc2\xbb\xe2\x80\xa6",
                                        "\xe2\x80\x9cGo\xe2\x80\x9d\t\xe2\x80\xafnow!", "Plain."};
    zoo_spm *sp = zoo_spm_load(m, len, "m");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    for (int i = 0; i < 4; i++) {
        char *as_typed = NULL, *norm = NULL;
        int32_t a[16], b[16], la = 0, lb = 0, *want = NULL;
        size_t n = 0;
        CU_ASSERT_EQUAL_FATAL(ds_text_source(typed[i], DS_PREPROCESS_NORMALIZE, &as_typed, NULL),
                              0);
        CU_ASSERT_STRING_EQUAL(as_typed, typed[i]);
        CU_ASSERT_EQUAL_FATAL(ds_text_normalize(typed[i], &norm), 0);
        CU_ASSERT_EQUAL(ds_encode_sentence(v, as_typed, 16, a, &la), 0);
        CU_ASSERT_EQUAL(ds_encode_sentence(v, norm, 16, b, &lb), 0);
        CU_ASSERT_EQUAL(la, lb);
        CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
        CU_ASSERT_EQUAL_FATAL(zoo_spm_encode(sp, norm, &want, &n), 0);
        CU_ASSERT_EQUAL(la, (int32_t)n + 1);
        for (size_t j = 0; j < n && j < 16; j++) CU_ASSERT_EQUAL(a[j], want[j]);
        free(as_typed), free(norm), free(want);
    }
    zoo_spm_free(sp);
    /* a second codec is refused (and its context freed: no leak under ASan) */
    zoo_spm *extra = zoo_spm_load(m, len, "m");
    ds_codec again = *c;
    again.ctx = extra;
    CU_ASSERT_EQUAL(ds_vocab_set_codec(v, &again), -1);
    ds_vocab_free(v);
    free(m);
}

/* A dataset re-encoded with the codec: ids, valid lengths, tokens and counts follow it. */
static void test_dataset(void) {
    static const char data[] = "Go.\tVa !\nI lost.\tJ'ai perdu.\nI'm home.\tJe suis chez moi.\n";
    ds_fra_options o = ds_fra_defaults();
    o.num_steps = 16;
    ds_fra *d = NULL;
    CU_ASSERT_EQUAL_FATAL(ds_fra_load_mem(data, strlen(data), "mem", &o, &d), 0);
    size_t len;
    char *m = train_model(5, &len);
    ds_vocab *sv = NULL, *tv = NULL, *plain = ds_vocab_new();
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &sv), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &tv), 0);
    CU_ASSERT_EQUAL(ds_fra_set_vocab(d, DS_SRC, sv), 0);
    CU_ASSERT_EQUAL(ds_fra_set_vocab(d, DS_TGT, tv), 0);
    CU_ASSERT_PTR_EQUAL(ds_fra_vocab(d, DS_TGT), tv);
    for (int64_t p = 0; p < 3; p++) {
        const int32_t *row = ds_fra_ids(d, DS_TGT) + p * 16;
        int32_t vl = ds_fra_valid_len(d, DS_TGT)[p];
        CU_ASSERT_EQUAL(vl, ds_fra_sentence_len(d, DS_TGT, p) + 1);
        CU_ASSERT_EQUAL(row[vl - 1], DS_EOS);
        char *text = NULL;
        CU_ASSERT_EQUAL_FATAL(ds_decode_ids(tv, row, 16, &text), 0);
        CU_ASSERT_STRING_EQUAL(text, ds_fra_raw(d, DS_TGT, p, NULL));
        free(text);
    }
    size_t tl;
    CU_ASSERT_STRING_EQUAL(ds_fra_token(d, DS_SRC, 0, 0, &tl),
                           ds_vocab_token(sv, ds_fra_ids(d, DS_SRC)[0], NULL));
    CU_ASSERT_EQUAL(ds_fra_get_stats(d)->tokens[DS_TGT],
                    (int64_t)ds_fra_sentence_len(d, DS_TGT, 0) + ds_fra_sentence_len(d, DS_TGT, 1) +
                        ds_fra_sentence_len(d, DS_TGT, 2));
    /* a vocabulary without a codec is refused, and freed */
    CU_ASSERT_EQUAL(ds_fra_set_vocab(d, DS_SRC, plain), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "no codec"));
    ds_fra_free(d);
    free(m);
}

/* A checkpoint of a model with subword vocabularies: the model bytes go in (base64 metadata) and
 * come back, with codecs that encode as the originals; bad metadata is refused by name. */
static void test_checkpoint(void) {
    size_t len;
    char *m = train_model(9, &len);
    ds_vocab *sv = NULL, *tv = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &sv), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &tv), 0);
    zoo_transformer_cfg cfg = zoo_transformer_default_cfg;
    zoo_model *model =
        zoo_model_new(&zoo_transformer_kind, &cfg, ds_vocab_size(sv), ds_vocab_size(tv), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(model);
    nn_ckpt *ck = nn_ckpt_new(), *back = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_ckpt_add_model(ck, model, sv, tv), 0);
    unsigned char *bytes = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &bytes, &n), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&back, bytes, n, "ck", NULL), 0);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(back, "vocab.src_model"),
                           nn_ckpt_meta(back, "vocab.tgt_model"));
    const zoo_subword_ops *c = zoo_subword_spm();
    ds_vocab *s2 = NULL, *t2 = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_ckpt_subword(c, back, &s2, &t2), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
    const ds_codec *k = ds_vocab_codec(s2);
    CU_ASSERT_EQUAL(k->model_len, len);
    CU_ASSERT_TRUE(k->model_len == len && !memcmp(k->model, m, len));
    int32_t a[16], b[16], la, lb;
    CU_ASSERT_EQUAL(ds_encode_sentence(sv, "Il pleut à Zürich.", 16, a, &la), 0);
    CU_ASSERT_EQUAL(ds_encode_sentence(t2, "Il pleut à Zürich.", 16, b, &lb), 0);
    CU_ASSERT_EQUAL(la, lb);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    ds_vocab_free(s2);
    ds_vocab_free(t2);
    /* a program without SentencePiece names what it lacks */
    CU_ASSERT_EQUAL(zoo_ckpt_subword(NULL, back, &s2, &t2), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "built without SentencePiece"));
    CU_ASSERT_PTR_NULL(s2);
    /* damaged metadata: not base64, not a model, one side only */
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(back, "vocab.src_model", "AB$D"), 0);
    CU_ASSERT_EQUAL(zoo_ckpt_subword(c, back, &s2, &t2), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "ck: metadata vocab.src_model: not base64 at "
                                                   "character 3"));
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(back, "vocab.src_model", "AAAAAAAA"), 0);
    CU_ASSERT_EQUAL(zoo_ckpt_subword(c, back, &s2, &t2), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "not a SentencePiece model"));
    nn_ckpt_free(back);
    /* a word-level checkpoint: no codecs */
    ds_vocab *w = ds_vocab_new();
    for (int i = 0; i < ds_vocab_size(sv); i++) {
        size_t tl;
        const char *tok = ds_vocab_token(sv, i, &tl);
        CU_ASSERT_EQUAL(ds_vocab_add(w, tok, tl, NULL), 0);
    }
    nn_ckpt *plain = nn_ckpt_new();
    CU_ASSERT_EQUAL(zoo_ckpt_add_model(plain, model, w, w), 0);
    CU_ASSERT_PTR_NULL(nn_ckpt_meta(plain, "vocab.src_model"));
    CU_ASSERT_EQUAL(zoo_ckpt_subword(c, plain, &s2, &t2), 0);
    CU_ASSERT_PTR_NULL(s2);
    CU_ASSERT_PTR_NULL(t2);
    nn_ckpt_free(plain);
    ds_vocab_free(w);
    free(bytes);
    nn_ckpt_free(ck);
    zoo_model_free(model);
    ds_vocab_free(sv);
    ds_vocab_free(tv);
    free(m);
}

/* Number tags (datasets/text.h) on the subword path: a dataset's pairs encoded with the source's
 * digit runs and the target's copies as tags, ds_encode_sentence tagging a source,
 * ds_decode_translation restoring the source's digits, and the checkpoint's vocab.number_tags. A
 * pair's tags are shuffled (ds_fra_tagged), a sentence to translate's in order. */
static void test_number_tags(void) {
    static const char data[] = "I was born in 1956.\tJe suis n\xc3\xa9 en 1956.\n"
                               "Room 12 has 3 beds.\tLa chambre 12 a 3 lits.\n"
                               "I have 2 dogs.\tJ'ai deux chiens.\n";
    ds_fra_options o = ds_fra_defaults();
    o.num_steps = 24;
    ds_fra *d = NULL;
    CU_ASSERT_EQUAL_FATAL(ds_fra_load_mem(data, strlen(data), "mem", &o, &d), 0);
    /* a model learned from the tagged pairs (the tags become pieces) */
    const char *text[N_CORPUS + 6];
    char *tagged[6] = {0};
    for (int i = 0; i < N_CORPUS; i++) text[i] = CORPUS[i];
    for (int64_t p = 0; p < 3; p++) {
        CU_ASSERT_EQUAL(ds_fra_tagged(d, DS_SRC, p, &tagged[2 * p]), 0);
        CU_ASSERT_EQUAL(ds_fra_tagged(d, DS_TGT, p, &tagged[2 * p + 1]), 0);
    }
    for (int i = 0; i < 6; i++) text[N_CORPUS + i] = tagged[i];
    char *m = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_train(text, N_CORPUS + 6, 400, true, 3, &m, &len), 0);
    ds_vocab *sv = NULL, *tv = NULL, *plain = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &sv), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &tv), 0);
    CU_ASSERT_EQUAL_FATAL(zoo_spm_vocab(m, len, "m", &plain), 0);
    CU_ASSERT_FALSE(ds_vocab_number_tags(sv));
    ds_vocab_set_number_tags(sv, true);
    ds_vocab_set_number_tags(tv, true);
    CU_ASSERT_EQUAL_FATAL(ds_fra_set_vocab(d, DS_SRC, sv), 0);
    CU_ASSERT_EQUAL_FATAL(ds_fra_set_vocab(d, DS_TGT, tv), 0);
    /* each side's ids are its tagged text (ds_fra_tagged: the pair's shuffle of the tags) */
    for (int64_t p = 0; p < 3; p++) {
        char *s = NULL, *t = NULL;
        CU_ASSERT_EQUAL(ds_decode_ids(plain, ds_fra_ids(d, DS_SRC) + p * 24, 24, &s), 0);
        CU_ASSERT_EQUAL(ds_decode_ids(plain, ds_fra_ids(d, DS_TGT) + p * 24, 24, &t), 0);
        if (s) CU_ASSERT_STRING_EQUAL(s, tagged[2 * p]);
        if (t) CU_ASSERT_STRING_EQUAL(t, tagged[2 * p + 1]);
        free(s), free(t);
    }
    /* each number a tag (3 bytes: EE 80 80+K), the same on both sides, two numbers two tags;
     * "deux" has none */
    char want[64];
    const char *n0 = tagged[0] + strlen("I was born in "), *n1 = tagged[2] + strlen("Room "),
               *n2 = n1 + 3 + strlen(" has ");
    CU_ASSERT(!strncmp(n0, "\xee\x80", 2) && !strncmp(n1, "\xee\x80", 2) &&
              !strncmp(n2, "\xee\x80", 2) && strncmp(n1, n2, 3));
    snprintf(want, sizeof want, "Je suis n\xc3\xa9 en %.3s.", n0);
    CU_ASSERT_STRING_EQUAL(tagged[1], want);
    snprintf(want, sizeof want, "La chambre %.3s a %.3s lits.", n1, n2);
    CU_ASSERT_STRING_EQUAL(tagged[3], want);
    CU_ASSERT_PTR_NULL(strstr(tagged[5], "\xee\x80"));
    /* a source to translate: tagged as it is encoded; a model's tags restored from it, a tag it
     * has no number for dropped; a plain vocabulary (no tags) decodes the tags as they are */
    int32_t a[24], b[24], la, lb;
    CU_ASSERT_EQUAL(ds_encode_sentence(sv, "In 1990, 7 men.", 24, a, &la), 0);
    CU_ASSERT_EQUAL(ds_encode_sentence(plain, "In \xee\x80\x80, \xee\x80\x81 men.", 24, b, &lb), 0);
    CU_ASSERT_EQUAL(la, lb);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    int32_t *ids = NULL;
    size_t n = 0;
    char *out = NULL;
    zoo_spm *sp = zoo_spm_load(m, len, "m");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    CU_ASSERT_EQUAL_FATAL(
        zoo_spm_encode(sp, "En \xee\x80\x80, \xee\x80\x81 hommes \xee\x80\x82.", &ids, &n), 0);
    zoo_spm_free(sp);
    CU_ASSERT_EQUAL(ds_decode_translation(tv, ids, n, "In 1990, 7 men.", &out), 0);
    if (out) CU_ASSERT_STRING_EQUAL(out, "En 1990, 7 hommes .");
    free(out);
    CU_ASSERT_EQUAL(ds_decode_translation(plain, ids, n, "In 1990, 7 men.", &out), 0);
    if (out) CU_ASSERT_STRING_EQUAL(out, "En \xee\x80\x80, \xee\x80\x81 hommes \xee\x80\x82.");
    free(out);
    free(ids);
    /* the checkpoint records the tags, and gives them back; a bad value is refused */
    zoo_transformer_cfg cfg = zoo_transformer_default_cfg;
    zoo_model *model =
        zoo_model_new(&zoo_transformer_kind, &cfg, ds_vocab_size(sv), ds_vocab_size(tv), 1);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL_FATAL(zoo_ckpt_add_model(ck, model, sv, tv), 0);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "vocab.number_tags"), "1");
    ds_vocab *s2 = NULL, *t2 = NULL;
    CU_ASSERT_EQUAL_FATAL(zoo_ckpt_subword(zoo_subword_spm(), ck, &s2, &t2), 0);
    CU_ASSERT_TRUE(ds_vocab_number_tags(s2) && ds_vocab_number_tags(t2));
    ds_vocab_free(s2), ds_vocab_free(t2);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "vocab.number_tags", "yes"), 0);
    CU_ASSERT_EQUAL(zoo_ckpt_subword(zoo_subword_spm(), ck, &s2, &t2), -1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(ag_last_error(), "metadata vocab.number_tags is 'yes', expected 1"));
    CU_ASSERT_PTR_NULL(s2);
    nn_ckpt *untagged = nn_ckpt_new();
    CU_ASSERT_EQUAL(zoo_ckpt_add_model(untagged, model, plain, plain), 0);
    CU_ASSERT_PTR_NULL(nn_ckpt_meta(untagged, "vocab.number_tags"));
    nn_ckpt_free(untagged);
    nn_ckpt_free(ck);
    zoo_model_free(model);
    ds_vocab_free(plain);
    ds_fra_free(d);
    for (int i = 0; i < 6; i++) free(tagged[i]);
    free(m);
}

int main(void) {
    static CU_TestInfo tests[] = {{"train, encode, decode", test_train_and_round_trip},
                                  {"same seed, same bytes", test_deterministic},
                                  {"digits split", test_split_digits},
                                  {"bad input", test_bad_input},
                                  {"vocabulary and codec", test_vocab_codec},
                                  {"dataset re-encoded", test_dataset},
                                  {"checkpoint round trip", test_checkpoint},
                                  {"number tags", test_number_tags},
                                  CU_TEST_INFO_NULL};
    return tg_test_main("subword", tests);
}
