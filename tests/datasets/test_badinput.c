/* tests/datasets/test_badinput.c -- every documented bad-input behaviour of the reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "datasets/fra_eng.h"
#include "datasets/unicode.h"
#include "test_util.h"

/* Loads `len` bytes from a temporary file; returns the status; *d gets the dataset. */
static int load_bytes(const char *bytes, size_t len, const ds_fra_options *o, ds_fra **d,
                      char **path_out) {
    char *path = tu_temp_file(bytes, len);
    int rc = ds_fra_load(path, o, d);
    if (path_out) *path_out = path;
    else tu_unlink(path);
    return rc;
}

static void test_missing_file(void) {
    ds_fra *d = (ds_fra *)1;
    TU_STATUS(ds_fra_load("/nonexistent/dir/fra.txt", NULL, &d), DS_EIO);
    CU_ASSERT_PTR_NULL(d);
    TU_ERROR_HAS("/nonexistent/dir/fra.txt: cannot open: No such file or directory");
    TU_STATUS(ds_fra_load(NULL, NULL, &d), DS_EARG);
}

static void test_directory(void) {
    ds_fra *d;
    char *dir = tu_temp_dir();
    TU_STATUS(ds_fra_load(dir, NULL, &d), DS_EIO);
    TU_ERROR_HAS("is a directory");
    rmdir(dir);
    free(dir);
}

/* Permission checks are the OS's: unreadable for a normal user (DS_EIO), readable by root. */
static void test_unreadable(void) {
    char *path = tu_temp_file("a\tb\n", 4);
    chmod(path, 0);
    ds_fra *d = NULL;
    if (geteuid() != 0) {
        TU_STATUS(ds_fra_load(path, NULL, &d), DS_EIO);
        TU_ERROR_HAS("Permission denied");
    } else {
        TU_STATUS(ds_fra_load(path, NULL, &d), DS_OK);
        if (d) CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 1);
        ds_fra_free(d);
    }
    tu_unlink(path);
}

static void test_empty_file(void) {
    ds_fra *d;
    char *path;
    TU_STATUS(load_bytes("", 0, NULL, &d, &path), DS_EFORMAT);
    CU_ASSERT_PTR_NULL(d);
    TU_ERROR_HAS(path);
    TU_ERROR_HAS(": empty file");
    tu_unlink(path);
    TU_STATUS(ds_fra_load_mem("", 0, "empty.txt", NULL, &d), DS_EFORMAT);
    TU_ERROR_HAS("empty.txt: empty file");
}

static void test_no_pair(void) {
    ds_fra *d;
    const char *t = "no tab here\n\nthree\tfields\there\n";
    TU_STATUS(ds_fra_load_mem(t, strlen(t), "x.txt", NULL, &d), DS_EFORMAT);
    TU_ERROR_HAS("x.txt: no sentence pair: none of the 3 lines read has exactly one tab");
}

static void test_skipped_lines(void) {
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    o.min_freq = 1;
    ds_fra *d = NULL;
    const char *t = "a\tb\nno tab\nc\td\te\nf\tg\n\n";
    TU_STATUS(ds_fra_load_mem(t, strlen(t), "x.txt", &o, &d), DS_OK);
    if (!d) return;
    const ds_fra_stats *st = ds_fra_get_stats(d);
    CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 2);
    CU_ASSERT_EQUAL(st->lines, 5);
    CU_ASSERT_EQUAL(st->skipped_no_tab, 2); /* "no tab" and the empty line 4 */
    CU_ASSERT_EQUAL(st->skipped_many_tabs, 1);
    CU_ASSERT_EQUAL(st->first_skipped, 2);
    ds_fra_free(d);
}

/* Invalid UTF-8 fails with file:line:column, as Python's strict decoder fails. */
static void test_invalid_utf8(void) {
    struct {
        const char *bytes;
        size_t len;
        const char *where;
    } cases[] = {
        {"a\tb\nc\x80\td\n", 9, ":2:2: invalid UTF-8 byte 0x80"},          /* lone continuation */
        {"a\tb\xC0\xAF\n", 7, ":1:4: invalid UTF-8 byte 0xC0"},            /* overlong '/' */
        {"a\xE0\x80\x80\tb\n", 7, ":1:2: invalid UTF-8 byte 0xE0"},        /* overlong 3-byte */
        {"x\ty\na\xED\xA0\x80\tb\n", 11, ":2:2: invalid UTF-8 byte 0xED"}, /* surrogate */
        {"a\xF4\x90\x80\x80\tb\n", 8, ":1:2: invalid UTF-8 byte 0xF4"},    /* > U+10FFFF */
        {"a\xF5\x80\x80\x80\tb\n", 8, ":1:2: invalid UTF-8 byte 0xF5"},    /* bad lead */
        {"a\tb\xC3", 4, ":1:4: invalid UTF-8 byte 0xC3"},                  /* truncated at EOF */
        {"a\xE2\x80\tb\n", 6, ":1:2: invalid UTF-8 byte 0xE2"},            /* truncated mid-line */
        {"a\tb\xC3\nc\td\n", 9, ":1:4: invalid UTF-8 byte 0xC3"},          /* truncated by \n */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ds_fra *d = NULL;
        char *path;
        TU_STATUS(load_bytes(cases[i].bytes, cases[i].len, NULL, &d, &path), DS_EFORMAT);
        CU_ASSERT_PTR_NULL(d);
        TU_ERROR_HAS(path);
        TU_ERROR_HAS(cases[i].where);
        tu_unlink(path);
    }
    /* bytes after the lines read are not examined (num_examples limits the read) */
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 1;
    ds_fra *d = NULL;
    TU_STATUS(load_bytes("a\tb\nc\td\n\xFF\xFF\n", 10, &o, &d, NULL), DS_OK);
    if (d) CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 2);
    ds_fra_free(d);
}

static void test_nul_byte(void) {
    ds_fra *d = NULL;
    char *path;
    TU_STATUS(load_bytes("a\tb\nc\0d\te\n", 11, NULL, &d, &path), DS_EFORMAT);
    CU_ASSERT_PTR_NULL(d);
    TU_ERROR_HAS(":2:2: NUL byte");
    tu_unlink(path);
}

/* A line of a megabyte (and a single 1 MB token) is read like any other line. */
static void test_megabyte_line(void) {
    size_t n = 1 << 20;
    char *buf = malloc(2 * n + 64);
    size_t k = 0;
    for (size_t i = 0; i < n / 2; i++) { /* "w w w ... " : 524288 tokens */
        buf[k++] = 'W';
        buf[k++] = ' ';
    }
    buf[k++] = '\t';
    for (size_t i = 0; i < n; i++) buf[k++] = 'x'; /* one token of 1 MiB */
    buf[k++] = '\n';
    memcpy(buf + k, "w\tx\n", 4);
    k += 4;
    ds_fra_options o = ds_fra_defaults();
    o.min_freq = 1;
    ds_fra *d = NULL;
    TU_STATUS(load_bytes(buf, k, &o, &d, NULL), DS_OK);
    free(buf);
    if (!d) return;
    CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 2);
    CU_ASSERT_EQUAL(ds_fra_sentence_len(d, DS_SRC, 0), (int32_t)(n / 2 + 1)); /* trailing "" */
    size_t len = 0;
    CU_ASSERT_PTR_NOT_NULL(ds_fra_token(d, DS_TGT, 0, 0, &len));
    CU_ASSERT_EQUAL(len, n);
    CU_ASSERT_EQUAL(ds_fra_get_stats(d)->truncated[DS_SRC], 1);
    CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_SRC)[0], 10);
    ds_fra_free(d);
}

static void test_bad_options(void) {
    const char *t = "a\tb\n";
    ds_fra *d;
    ds_fra_options o = ds_fra_defaults();
    o.num_steps = 0;
    TU_STATUS(ds_fra_load_mem(t, 4, "x", &o, &d), DS_EARG);
    TU_ERROR_HAS("num_steps = 0");
    o = ds_fra_defaults();
    o.batch_size = 0;
    TU_STATUS(ds_fra_load_mem(t, 4, "x", &o, &d), DS_EARG);
    TU_ERROR_HAS("batch_size = 0");
    o = ds_fra_defaults();
    o.num_examples = -1;
    TU_STATUS(ds_fra_load_mem(t, 4, "x", &o, &d), DS_EARG);
    o = ds_fra_defaults();
    o.valid_frac = 0.5;
    o.test_frac = 0.5;
    TU_STATUS(ds_fra_load_mem(t, 4, "x", &o, &d), DS_EARG);
    TU_ERROR_HAS("valid_frac = 0.5");
    o.test_frac = -0.1;
    TU_STATUS(ds_fra_load_mem(t, 4, "x", &o, &d), DS_EARG);
    /* a split that leaves no training pair */
    o = ds_fra_defaults();
    o.test_frac = 0.6;
    o.valid_frac = 0.3;
    TU_STATUS(ds_fra_load_mem("a\tb\nc\td\n", 8, "x", &o, &d), DS_OK); /* floor: 1 test, 0 valid */
    ds_fra_free(d);
    TU_STATUS(ds_fra_load_mem("a\tb\n", 4, "x", &o, &d), DS_OK); /* floor(0.6) = 0: no split */
    if (d) {
        /* batches of an empty part */
        ds_batches *it = (ds_batches *)1;
        TU_STATUS(ds_batches_new(d, DS_TEST, false, &it), DS_EARG);
        CU_ASSERT_PTR_NULL(it);
        TU_ERROR_HAS("test part is empty");
    }
    ds_fra_free(d);
}

static void test_bad_sentences(void) {
    ds_vocab *v = ds_vocab_new();
    ds_vocab_add(v, "<unk>", 5, NULL);
    int32_t ids[4], vl;
    TU_STATUS(ds_encode_sentence(v, "bad \xC3(", 4, ids, &vl), DS_EFORMAT);
    TU_ERROR_HAS("invalid UTF-8 byte 0xC3 at byte offset 4");
    TU_STATUS(ds_encode_sentence(v, "ok", 0, ids, &vl), DS_EARG);
    int32_t bad[] = {0, 7};
    char *s = NULL;
    TU_STATUS(ds_decode_ids(v, bad, 2, &s), DS_EARG);
    CU_ASSERT_PTR_NULL(s);
    TU_ERROR_HAS("ids[1] = 7");
    ds_vocab_free(v);
}

/* UTF-8 decoding rules, byte by byte (Python's strict decoder). */
static void test_utf8_decoder(void) {
    struct {
        const char *b;
        int len;
        uint32_t cp;
    } ok[] = {{"A", 1, 'A'},
              {"\xC2\x80", 2, 0x80},
              {"\xDF\xBF", 2, 0x7FF},
              {"\xE0\xA0\x80", 3, 0x800},
              {"\xED\x9F\xBF", 3, 0xD7FF},
              {"\xEE\x80\x80", 3, 0xE000},
              {"\xEF\xBF\xBF", 3, 0xFFFF},
              {"\xF0\x90\x80\x80", 4, 0x10000},
              {"\xF4\x8F\xBF\xBF", 4, 0x10FFFF}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint32_t cp = 0;
        CU_ASSERT_EQUAL(ds_utf8_decode((const unsigned char *)ok[i].b, strlen(ok[i].b), &cp),
                        ok[i].len);
        CU_ASSERT_EQUAL(cp, ok[i].cp);
        unsigned char enc[4];
        CU_ASSERT_EQUAL(ds_utf8_encode(cp, enc), ok[i].len);
        CU_ASSERT_EQUAL(memcmp(enc, ok[i].b, (size_t)ok[i].len), 0);
    }
    const char *bad[] = {
        "\x80",         "\xBF",         "\xC0\x80",         "\xC1\xBF",         "\xE0\x9F\xBF",
        "\xED\xA0\x80", "\xED\xBF\xBF", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",
        "\xFF",         "\xC2",         "\xE0\xA0",         "\xF0\x90\x80",     "\xC2\x41",
        "\xE1\x80\x41"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t cp;
        CU_ASSERT_EQUAL(ds_utf8_decode((const unsigned char *)bad[i], strlen(bad[i]), &cp), 0);
    }
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"missing file: DS_EIO with the path", test_missing_file},
        {"a directory: DS_EIO", test_directory},
        {"unreadable file", test_unreadable},
        {"empty file: DS_EFORMAT", test_empty_file},
        {"no line with two fields: DS_EFORMAT", test_no_pair},
        {"lines without a tab / with 3 fields: skipped, counted", test_skipped_lines},
        {"invalid UTF-8: DS_EFORMAT file:line:col", test_invalid_utf8},
        {"NUL byte: DS_EFORMAT file:line:col", test_nul_byte},
        {"a 1 MB line and a 1 MB token", test_megabyte_line},
        {"bad options and empty parts: DS_EARG", test_bad_options},
        {"predict helpers on bad input", test_bad_sentences},
        {"UTF-8 decoder strictness", test_utf8_decoder},
        CU_TEST_INFO_NULL,
    };
    return tu_main("datasets_badinput", tests);
}
