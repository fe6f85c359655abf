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
    char *path = tg_temp_file(bytes, len);
    int rc = ds_fra_load(path, o, d);
    if (path_out) *path_out = path;
    else tg_remove(path);
    return rc;
}

static void test_missing_file(void) {
    ds_fra *d = (ds_fra *)1;
    TG_EXPECT_ERROR(ds_fra_load("/nonexistent/dir/fra.txt", NULL, &d),
                    "/nonexistent/dir/fra.txt: cannot open: No such file or directory");
    CU_ASSERT_PTR_NULL(d);
    TG_EXPECT_ERROR(ds_fra_load(NULL, NULL, &d), "ds_fra_load: path is NULL");
}

static void test_directory(void) {
    ds_fra *d;
    char *dir = tg_temp_dir();
    TG_EXPECT_ERROR(ds_fra_load(dir, NULL, &d), "is a directory");
    rmdir(dir);
    free(dir);
}

/* Permission checks are the OS's: unreadable for a normal user (-1), readable by root. */
static void test_unreadable(void) {
    char *path = tg_temp_file("a\tb\n", 4);
    chmod(path, 0);
    ds_fra *d = NULL;
    if (geteuid() != 0) {
        TG_EXPECT_ERROR(ds_fra_load(path, NULL, &d), "Permission denied");
    } else {
        TG_OK(ds_fra_load(path, NULL, &d));
        if (d) CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 1);
        ds_fra_free(d);
    }
    tg_remove(path);
}

static void test_empty_file(void) {
    ds_fra *d;
    char *path;
    TG_EXPECT_ERROR(load_bytes("", 0, NULL, &d, &path), ": empty file");
    CU_ASSERT_PTR_NULL(d);
    TG_ERROR_HAS(path);
    tg_remove(path);
    TG_EXPECT_ERROR(ds_fra_load_mem("", 0, "empty.txt", NULL, &d), "empty.txt: empty file");
}

static void test_no_pair(void) {
    ds_fra *d;
    const char *t = "no tab here\n\nthree\tfields\there\n";
    TG_EXPECT_ERROR(ds_fra_load_mem(t, strlen(t), "x.txt", NULL, &d),
                    "x.txt: no sentence pair: none of the 3 lines read has exactly one tab");
}

static void test_skipped_lines(void) {
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    o.min_freq = 1;
    ds_fra *d = NULL;
    const char *t = "a\tb\nno tab\nc\td\te\nf\tg\n\n";
    TG_OK(ds_fra_load_mem(t, strlen(t), "x.txt", &o, &d));
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
        TG_EXPECT_ERROR(load_bytes(cases[i].bytes, cases[i].len, NULL, &d, &path), cases[i].where);
        CU_ASSERT_PTR_NULL(d);
        TG_ERROR_HAS(path);
        tg_remove(path);
    }
    /* bytes after the lines read are not examined (num_examples limits the read) */
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 1;
    ds_fra *d = NULL;
    TG_OK(load_bytes("a\tb\nc\td\n\xFF\xFF\n", 10, &o, &d, NULL));
    if (d) CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 2);
    ds_fra_free(d);
}

static void test_nul_byte(void) {
    ds_fra *d = NULL;
    char *path;
    TG_EXPECT_ERROR(load_bytes("a\tb\nc\0d\te\n", 11, NULL, &d, &path), ":2:2: NUL byte");
    CU_ASSERT_PTR_NULL(d);
    tg_remove(path);
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
    TG_OK(load_bytes(buf, k, &o, &d, NULL));
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
    TG_EXPECT_ERROR(ds_fra_load_mem(t, 4, "x", &o, &d), "num_steps = 0");
    o = ds_fra_defaults();
    o.batch_size = 0;
    TG_EXPECT_ERROR(ds_fra_load_mem(t, 4, "x", &o, &d), "batch_size = 0");
    o = ds_fra_defaults();
    o.num_examples = -1;
    TG_EXPECT_ERROR(ds_fra_load_mem(t, 4, "x", &o, &d), "num_examples = -1");
    o = ds_fra_defaults();
    o.valid_frac = 0.5;
    o.test_frac = 0.5;
    TG_EXPECT_ERROR(ds_fra_load_mem(t, 4, "x", &o, &d), "valid_frac = 0.5");
    o.test_frac = -0.1;
    TG_EXPECT_ERROR(ds_fra_load_mem(t, 4, "x", &o, &d), "test_frac = -0.1");
    /* a split that leaves no training pair */
    o = ds_fra_defaults();
    o.test_frac = 0.6;
    o.valid_frac = 0.3;
    TG_OK(ds_fra_load_mem("a\tb\nc\td\n", 8, "x", &o, &d)); /* floor: 1 test, 0 valid */
    ds_fra_free(d);
    TG_OK(ds_fra_load_mem("a\tb\n", 4, "x", &o, &d)); /* floor(0.6) = 0: no split */
    if (d) {
        /* batches of an empty part */
        ds_batches *it = (ds_batches *)1;
        TG_EXPECT_ERROR(ds_batches_new(d, DS_TEST, false, &it), "test part is empty");
        CU_ASSERT_PTR_NULL(it);
    }
    ds_fra_free(d);
}

static void test_bad_sentences(void) {
    ds_vocab *v = ds_vocab_new();
    ds_vocab_add(v, "<unk>", 5, NULL);
    int32_t ids[4], vl;
    TG_EXPECT_ERROR(ds_encode_sentence(v, "bad \xC3(", 4, ids, &vl),
                    "invalid UTF-8 byte 0xC3 at byte offset 4");
    TG_EXPECT_ERROR(ds_encode_sentence(v, "ok", 0, ids, &vl), "num_steps = 0");
    int32_t bad[] = {0, 7};
    char *s = NULL;
    TG_EXPECT_ERROR(ds_decode_ids(v, bad, 2, &s), "ids[1] = 7");
    CU_ASSERT_PTR_NULL(s);
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

/* The library never prints: failures of every kind (I/O, bad data, bad options, a vocabulary
 * file) leave their message in the store and write nothing to stdout or stderr. */
static void test_failures_print_nothing(void) {
    tg_fd_capture out, err;
    tg_fd_capture_begin(&out, STDOUT_FILENO);
    tg_fd_capture_begin(&err, STDERR_FILENO);
    ds_fra *d = NULL;
    ds_vocab *v = NULL;
    ds_fra_options o = ds_fra_defaults();
    o.num_steps = 0;
    int rc[4] = {ds_fra_load("/nonexistent/dir/fra.txt", NULL, &d),
                 ds_fra_load_mem("a\tb\n\xC3\n", 6, "bad.txt", NULL, &d),
                 ds_fra_load_mem("a\tb\n", 4, "x", &o, &d),
                 ds_vocab_load("/nonexistent/dir/vocab.txt", &v)};
    char *said = tg_fd_capture_end(&err), *printed = tg_fd_capture_end(&out);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(rc[i], -1);
    TG_ERROR_HAS("/nonexistent/dir/vocab.txt");
    CU_ASSERT_STRING_EQUAL(said, "");
    CU_ASSERT_STRING_EQUAL(printed, "");
    free(said);
    free(printed);
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"missing file: the path, cannot open", test_missing_file},
        {"a directory: is a directory", test_directory},
        {"unreadable file", test_unreadable},
        {"empty file: empty file", test_empty_file},
        {"no line with two fields: no sentence pair", test_no_pair},
        {"lines without a tab / with 3 fields: skipped, counted", test_skipped_lines},
        {"invalid UTF-8: file:line:col", test_invalid_utf8},
        {"NUL byte: file:line:col", test_nul_byte},
        {"a 1 MB line and a 1 MB token", test_megabyte_line},
        {"bad options and empty parts: named", test_bad_options},
        {"predict helpers on bad input", test_bad_sentences},
        {"UTF-8 decoder strictness", test_utf8_decoder},
        {"failures print nothing (the message is in the store)", test_failures_print_nothing},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_badinput", tests);
}
