/* tests/datasets/test_vocab.c -- the token table, d2l's Vocab rules, the text format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "datasets/vocab.h"
#include "test_util.h"

static void test_add_find(void) {
    ds_vocab *v = ds_vocab_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(ds_vocab_size(v), 0);
    int32_t id = -1;
    TG_OK(ds_vocab_add(v, "chat", 4, &id));
    CU_ASSERT_EQUAL(id, 0);
    TG_OK(ds_vocab_add(v, "chien", 5, &id));
    CU_ASSERT_EQUAL(id, 1);
    TG_OK(ds_vocab_add(v, "chat", 4, &id)); /* existing: same id */
    CU_ASSERT_EQUAL(id, 0);
    TG_OK(ds_vocab_add(v, "", 0, &id)); /* the empty token is a token */
    CU_ASSERT_EQUAL(id, 2);
    TG_OK(ds_vocab_add(v, "a\0b", 3, &id)); /* arbitrary bytes, length-delimited */
    CU_ASSERT_EQUAL(id, 3);
    CU_ASSERT_EQUAL(ds_vocab_find(v, "a", 1), -1);
    CU_ASSERT_EQUAL(ds_vocab_find(v, "a\0b", 3), 3);
    CU_ASSERT_EQUAL(ds_vocab_find(v, "cha", 3), -1);
    CU_ASSERT_EQUAL(ds_vocab_find(v, "", 0), 2);
    CU_ASSERT_EQUAL(ds_vocab_size(v), 4);
    size_t len = 99;
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(v, 1, &len), "chien");
    CU_ASSERT_EQUAL(len, 5);
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(v, 2, &len), "");
    CU_ASSERT_EQUAL(len, 0);
    CU_ASSERT_PTR_NULL(ds_vocab_token(v, 4, NULL));
    CU_ASSERT_PTR_NULL(ds_vocab_token(v, -1, NULL));
    CU_ASSERT_EQUAL(ds_vocab_id(v, "chien"), 1);
    CU_ASSERT_EQUAL(ds_vocab_id(v, "loup"), DS_UNK);
    ds_vocab_free(v);
    ds_vocab_free(NULL);
}

/* 200k distinct tokens: the table rehashes many times; every token keeps its id and string
 * (arena pointers never move). */
static void test_many_tokens(void) {
    ds_vocab *v = ds_vocab_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    char buf[32];
    const char *first = NULL;
    for (int i = 0; i < 200000; i++) {
        int n = snprintf(buf, sizeof buf, "tok%d", i);
        int32_t id;
        if (ds_vocab_count(v, buf, (size_t)n, i % 7, &id) != 0 || id != i) {
            TG_FAIL("token %d got id %d", i, id);
            break;
        }
        if (i == 0) first = ds_vocab_token(v, 0, NULL);
    }
    CU_ASSERT_EQUAL(ds_vocab_size(v), 200000);
    CU_ASSERT_PTR_EQUAL(ds_vocab_token(v, 0, NULL), first);
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        int n = snprintf(buf, sizeof buf, "tok%d", i);
        bad += ds_vocab_find(v, buf, (size_t)n) != i ||
               strcmp(ds_vocab_token(v, i, NULL), buf) != 0 || ds_vocab_freq(v, i) != i % 7;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ds_vocab_find(v, "tok200000", 9), -1);
    ds_vocab_free(v);
}

static ds_vocab *count_words(const char *const *w, int n) {
    ds_vocab *c = ds_vocab_new();
    for (int i = 0; i < n; i++) ds_vocab_count(c, w[i], strlen(w[i]), 1, NULL);
    return c;
}

/* d2l's Vocab: <unk>, reserved, then descending frequency with ties in first-seen order. */
static void test_build_tie_order(void) {
    /* frequencies: b 3, a 3, x 2, c 2, d 1, e 1; first seen: b, a, c, d, x, e */
    const char *w[] = {"b", "a", "c", "d", "b", "a", "x", "c", "b", "a", "x", "e"};
    ds_vocab *c = count_words(w, 12);
    ds_vocab *v;
    TG_OK(ds_vocab_build(c, 2, ds_reserved_tokens, 3, &v));
    const char *want[] = {"<unk>", "<pad>", "<bos>", "<eos>", "b", "a", "c", "x"};
    CU_ASSERT_EQUAL_FATAL(ds_vocab_size(v), 8);
    for (int i = 0; i < 8; i++) CU_ASSERT_STRING_EQUAL(ds_vocab_token(v, i, NULL), want[i]);
    CU_ASSERT_EQUAL(ds_vocab_freq(v, 4), 3);
    CU_ASSERT_EQUAL(ds_vocab_freq(v, 7), 2);
    CU_ASSERT_EQUAL(ds_vocab_id(v, "d"), DS_UNK); /* below min_freq */
    TG_OK(ds_vocab_check_reserved(v));
    ds_vocab_free(v);
    /* min_freq 1 (and 0) keep every token: ... c x d e (d before e: first seen) */
    for (int mf = 0; mf <= 1; mf++) {
        TG_OK(ds_vocab_build(c, mf, ds_reserved_tokens, 3, &v));
        CU_ASSERT_EQUAL(ds_vocab_size(v), 10);
        CU_ASSERT_STRING_EQUAL(ds_vocab_token(v, 8, NULL), "d");
        CU_ASSERT_STRING_EQUAL(ds_vocab_token(v, 9, NULL), "e");
        ds_vocab_free(v);
    }
    ds_vocab_free(c);
}

/* A reserved token that also occurs in the text is not added twice (d2l). */
static void test_build_reserved_in_text(void) {
    const char *w[] = {"<pad>", "<pad>", "<unk>", "<unk>", "<unk>", "go", "go"};
    ds_vocab *c = count_words(w, 7), *v;
    TG_OK(ds_vocab_build(c, 2, ds_reserved_tokens, 3, &v));
    CU_ASSERT_EQUAL(ds_vocab_size(v), 5);
    CU_ASSERT_EQUAL(ds_vocab_id(v, "<pad>"), DS_PAD);
    CU_ASSERT_EQUAL(ds_vocab_id(v, "<unk>"), DS_UNK);
    CU_ASSERT_EQUAL(ds_vocab_id(v, "go"), 4);
    CU_ASSERT_EQUAL(ds_vocab_freq(v, DS_UNK), 3);
    ds_vocab_free(v);
    const char *dup[] = {"<pad>", "<pad>"};
    TG_EXPECT_ERROR(ds_vocab_build(c, 2, dup, 2, &v), "<pad>");
    CU_ASSERT_PTR_NULL(v);
    ds_vocab_free(c);
}

static void test_lookup_to_tokens(void) {
    const char *w[] = {"le", "chat", "le", "chat", "noir"};
    ds_vocab *c = count_words(w, 5), *v;
    TG_OK(ds_vocab_build(c, 2, ds_reserved_tokens, 3, &v));
    const char *toks[] = {"le", "chat", "noir", "<eos>", ""};
    int32_t ids[5];
    ds_vocab_lookup(v, toks, 5, ids);
    int32_t want[] = {4, 5, DS_UNK, DS_EOS, DS_UNK};
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(ids[i], want[i]);
    const char *back[5];
    TG_OK(ds_vocab_to_tokens(v, ids, 5, back));
    CU_ASSERT_STRING_EQUAL(back[0], "le");
    CU_ASSERT_STRING_EQUAL(back[2], "<unk>");
    CU_ASSERT_STRING_EQUAL(back[3], "<eos>");
    int32_t bad[] = {4, 6};
    TG_EXPECT_ERROR(ds_vocab_to_tokens(v, bad, 2, back), "ids[1] = 6");
    ds_vocab_free(v);
    ds_vocab_free(c);
}

static void test_check_reserved(void) {
    ds_vocab *v = ds_vocab_new();
    ds_vocab_add(v, "<unk>", 5, NULL);
    ds_vocab_add(v, "<pad>", 5, NULL);
    TG_EXPECT_ERROR(ds_vocab_check_reserved(v), "id 2 is missing");
    ds_vocab_add(v, "<eos>", 5, NULL);
    TG_EXPECT_ERROR(ds_vocab_check_reserved(v), "expected <bos>");
    ds_vocab_free(v);
}

static void test_save_load_roundtrip(void) {
    const char *w[] = {"été", "été", "", "", "ça", "ça", "!", "!", "x"};
    ds_vocab *c = count_words(w, 9), *v, *back = NULL;
    TG_OK(ds_vocab_build(c, 2, ds_reserved_tokens, 3, &v));
    char *path = tg_temp_file("", 0);
    TG_OK(ds_vocab_save(v, path));
    FILE *f = fopen(path, "rb");
    char text[256] = {0};
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    /* one token per line in id order; the empty token is an empty line */
    const char *want = "<unk>\n<pad>\n<bos>\n<eos>\nété\n\nça\n!\n";
    CU_ASSERT_EQUAL(n, strlen(want));
    CU_ASSERT_STRING_EQUAL(text, want);
    TG_OK(ds_vocab_load(path, &back));
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(ds_vocab_size(back), ds_vocab_size(v));
    for (int32_t i = 0; i < ds_vocab_size(v); i++)
        CU_ASSERT_STRING_EQUAL(ds_vocab_token(back, i, NULL), ds_vocab_token(v, i, NULL));
    CU_ASSERT_EQUAL(ds_vocab_id(back, ""), 5);
    TG_OK(ds_vocab_check_reserved(back));
    ds_vocab_free(back);
    tg_remove(path);
    ds_vocab_free(v);
    ds_vocab_free(c);
}

static void test_parse_variants(void) {
    ds_vocab *v;
    /* CRLF lines and a last line without a newline */
    TG_OK(ds_vocab_parse("a\r\nb\r\nc", 7, "crlf.txt", &v));
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(ds_vocab_size(v), 3);
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(v, 1, NULL), "b");
    CU_ASSERT_STRING_EQUAL(ds_vocab_token(v, 2, NULL), "c");
    ds_vocab_free(v);
    /* errors name the file and line */
    TG_EXPECT_ERROR(ds_vocab_parse("a\nb\nc\nb\n", 8, "dup.txt", &v),
                    "dup.txt:4: duplicate token \"b\" (first at line 2)");
    CU_ASSERT_PTR_NULL(v);
    TG_EXPECT_ERROR(ds_vocab_parse("a\n\xC3\n", 4, "utf.txt", &v),
                    "utf.txt:2:1: invalid UTF-8 byte 0xC3");
    TG_EXPECT_ERROR(ds_vocab_parse("a\nb\0c\n", 6, "nul.txt", &v), "nul.txt:2:2: NUL byte");
    TG_EXPECT_ERROR(ds_vocab_parse("a\nb\rc\n", 6, "cr.txt", &v), "cr.txt:2:2: carriage return");
    TG_EXPECT_ERROR(ds_vocab_parse("", 0, "empty.txt", &v), "empty.txt: empty vocabulary file");
    TG_EXPECT_ERROR(ds_vocab_load("/nonexistent/dir/vocab.txt", &v),
                    "/nonexistent/dir/vocab.txt: cannot open vocabulary");
}

static void test_save_errors(void) {
    ds_vocab *v = ds_vocab_new();
    ds_vocab_add(v, "a\nb", 3, NULL);
    TG_EXPECT_ERROR(ds_vocab_save(v, "/tmp/ds_never_written.txt"), "line break");
    ds_vocab_free(v);
    v = ds_vocab_new();
    ds_vocab_add(v, "a", 1, NULL);
    TG_EXPECT_ERROR(ds_vocab_save(v, "/nonexistent/dir/v.txt"), "/nonexistent/dir/v.txt");
    ds_vocab_free(v);
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"add/find/token, empty and binary tokens", test_add_find},
        {"200k tokens, rehashing, stable pointers", test_many_tokens},
        {"d2l Vocab: frequency order, stable ties", test_build_tie_order},
        {"d2l Vocab: reserved tokens in the text", test_build_reserved_in_text},
        {"lookup and to_tokens", test_lookup_to_tokens},
        {"check_reserved", test_check_reserved},
        {"save/load round trip", test_save_load_roundtrip},
        {"parse: CRLF, no final newline, errors", test_parse_variants},
        {"save errors", test_save_errors},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_vocab", tests);
}
