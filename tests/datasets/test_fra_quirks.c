/* tests/datasets/test_fra_quirks.c -- d2l's pipeline on small synthetic files: its
 * preprocessing rules, lines and fields, <pad>/<unk> in the text, a quirk corpus index for
 * index against tests/datasets/ref_numbers.py, and the order the data path is resolved in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "datasets/fra_eng.h"
#include "autograd/ag_base.h"
#include "test_util.h"

/* ---- d2l quirks on synthetic text ---------------------------------------------------- */

static void test_preprocess_rules(void) {
    ds_fra_options o = ds_fra_defaults();
    o.min_freq = 1;
    /* line 0 starts with "." (the file's first character: no space); line 1 starts with "!"
     * (after a line break: a space, hence an empty first token); "a,b" -> "a ,b"; "?!" ->
     * " ? !"; NBSP and NNBSP before "!" / "?" become the one space; uppercase, accented and
     * Cyrillic letters are lowercased; Greek capital sigma is final at the end of a word. */
    ds_fra *d = tu_load_text(".Hi\tSALUT!\n"
                             "!a,b\tÇA\xC2\xA0!\n"
                             "WHY?!\tÉTÉ\xE2\x80\xAF?\n"
                             "ΟΔΟΣ ΣΑ\tС Œ İ\n",
                             &o);
    if (!d) return;
    tu_expect_sentence(d, DS_SRC, 0, ".hi");
    tu_expect_sentence(d, DS_TGT, 0, "salut !");
    tu_expect_sentence(d, DS_SRC, 1, " !a ,b");
    CU_ASSERT_STRING_EQUAL(ds_fra_token(d, DS_SRC, 1, 0, NULL), "");
    tu_expect_sentence(d, DS_TGT, 1, "ça !");
    tu_expect_sentence(d, DS_SRC, 2, "why ? !");
    tu_expect_sentence(d, DS_TGT, 2, "été ?");
    tu_expect_sentence(d, DS_SRC, 3,
                       "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 \xCF\x83\xCE\xB1"); /* final sigma */
    tu_expect_sentence(d, DS_TGT, 3, "с œ i\xCC\x87");
    ds_fra_free(d);
    /* a tab right before punctuation: the second field starts with a space -> empty token */
    d = tu_load_text("go\t!\n", &o);
    if (d) {
        tu_expect_sentence(d, DS_TGT, 0, " !");
        CU_ASSERT_EQUAL(ds_fra_sentence_len(d, DS_TGT, 0), 2);
    }
    ds_fra_free(d);
}

static void test_lines_and_fields(void) {
    ds_fra_options o = ds_fra_defaults();
    o.min_freq = 1;
    o.num_examples = 3;
    /* lines 0..3 are read (inclusive); line 1 has no tab, line 2 three fields: both skipped
     * but counted as line indices, so only lines 0 and 3 become pairs; line 4 is not read. */
    ds_fra *d = tu_load_text("a\tb\nnotab\nx\ty\tz\nc  d\te \n f\tg\n", &o);
    if (!d) return;
    const ds_fra_stats *st = ds_fra_get_stats(d);
    CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 2);
    CU_ASSERT_EQUAL(st->lines, 4);
    CU_ASSERT_EQUAL(st->skipped_no_tab, 1);
    CU_ASSERT_EQUAL(st->skipped_many_tabs, 1);
    CU_ASSERT_EQUAL(st->first_skipped, 2);
    CU_ASSERT_EQUAL(ds_fra_line_of_pair(d, 1), 3);
    /* empty tokens kept: "c  d" -> c, "", d; "e " -> e, "" */
    CU_ASSERT_EQUAL(ds_fra_sentence_len(d, DS_SRC, 1), 3);
    CU_ASSERT_STRING_EQUAL(ds_fra_token(d, DS_SRC, 1, 1, NULL), "");
    CU_ASSERT_EQUAL(ds_fra_sentence_len(d, DS_TGT, 1), 2);
    ds_fra_free(d);
    /* CRLF and lone CR end lines (Python universal newlines); no final newline needed */
    o.num_examples = 0;
    d = tu_load_text("a\tb\r\nc\td\re\tf", &o);
    if (d) {
        CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 3);
        tu_expect_sentence(d, DS_TGT, 0, "b");
        tu_expect_sentence(d, DS_SRC, 2, "e");
        tu_expect_sentence(d, DS_TGT, 2, "f");
        CU_ASSERT_EQUAL(ds_fra_get_stats(d)->skipped_no_tab, 0);
    }
    ds_fra_free(d);
    /* an empty line in the middle is a skipped line; the empty text after the last line
     * break is not a line */
    d = tu_load_text("a\tb\n\nc\td\n", &o);
    if (d) {
        CU_ASSERT_EQUAL(ds_fra_get_stats(d)->lines, 3);
        CU_ASSERT_EQUAL(ds_fra_get_stats(d)->skipped_no_tab, 1);
        CU_ASSERT_EQUAL(ds_fra_line_of_pair(d, 1), 2);
    }
    ds_fra_free(d);
}

static void test_arrays_quirks(void) {
    ds_fra_options o = ds_fra_defaults();
    o.num_steps = 4;
    o.min_freq = 2;
    /* src tokens: "x <pad> y" twice -> <pad> is id 1 and counts as padding in valid_len
     * (d2l counts ids != <pad>); "<unk>" in the text maps to 0; rare tokens map to <unk> */
    ds_fra *d = tu_load_text("x <pad> y\tu\nx <pad> y\tu v w\nrare <unk>\tu v w z\n", &o);
    if (!d) return;
    const ds_vocab *sv = ds_fra_vocab(d, DS_SRC);
    CU_ASSERT_EQUAL(ds_vocab_size(sv), 6); /* <unk> <pad> <bos> <eos> x y */
    int32_t x = ds_vocab_id(sv, "x"), y = ds_vocab_id(sv, "y");
    tu_expect_row(d, DS_SRC, 0, (const int32_t[]){x, DS_PAD, y, DS_EOS});
    CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_SRC)[0], 3);
    tu_expect_row(d, DS_SRC, 2, (const int32_t[]){DS_UNK, DS_UNK, DS_EOS, DS_PAD});
    CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_SRC)[2], 3);
    /* tgt: "u v w" fits exactly with <eos>; "u v w z" (4 tokens) is truncated: no <eos> */
    const ds_vocab *tv = ds_fra_vocab(d, DS_TGT);
    int32_t u = ds_vocab_id(tv, "u"), v = ds_vocab_id(tv, "v"), w = ds_vocab_id(tv, "w");
    tu_expect_row(d, DS_TGT, 0, (const int32_t[]){u, DS_EOS, DS_PAD, DS_PAD});
    tu_expect_row(d, DS_TGT, 1, (const int32_t[]){u, v, w, DS_EOS});
    tu_expect_row(d, DS_TGT, 2, (const int32_t[]){u, v, w, DS_UNK});
    CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_TGT)[0], 2);
    CU_ASSERT_EQUAL(ds_fra_valid_len(d, DS_TGT)[2], 4);
    CU_ASSERT_EQUAL(ds_fra_get_stats(d)->truncated[DS_TGT], 1);
    ds_fra_free(d);
}

/* A synthetic corpus of quirky snippets (separators, CR/LF, punctuation, every casing kind,
 * no-break spaces, sigma contexts, case-ignorable marks, reserved tokens) drawn with the
 * documented RNG; ref_numbers.py draws the same bytes and runs Python's own str.lower,
 * universal newlines and d2l's pipeline on them (ref keys synth.*). */
static const char *const snippets[] = {"\t",      "\n",     "\r",     "\r\n",
                                       " ",       "  ",     ",",      ".",
                                       "!",       "?",      "a",      "B",
                                       "go",      "Tom",    "\u00c9", "\u00e9t\u00e9",
                                       "\u00c7A", "\u0152", "\u03a3", "\u039f\u03a3",
                                       "\u0391",  "\u0130", "\u00a0", "\u202f",
                                       "\u2009",  "\u01c5", "\u1e9e", "'",
                                       "\u00b7",  "\u0345", "\u02b0", "<pad>",
                                       "<unk>",   "\u023a", "\u212a", "\u0421",
                                       "\u00ff",  "\u0178", "\ufeff", "\U0001d400",
                                       "\u10a0",  "\u2c2f", "x\u0307"};

static uint64_t fnv_str(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void test_synthetic_corpus(void) {
    const size_t ns = sizeof snippets / sizeof snippets[0];
    size_t cap = 40000 * 8, n = 0;
    char *buf = malloc(cap);
    ag_rng r;
    ag_rng_seed_stream(&r, 2024, 0x53594E5448ULL);
    for (int i = 0; i < 40000; i++) {
        const char *sn = snippets[ag_rng_below64(&r, ns)];
        size_t l = strlen(sn);
        memcpy(buf + n, sn, l);
        n += l;
    }
    CU_ASSERT_EQUAL(n, 90720);
    CU_ASSERT_EQUAL(fnv_str(0xcbf29ce484222325ULL, buf, n), 0xd44dade1402f006bULL);
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = 0;
    o.num_steps = 6;
    ds_fra *d = NULL;
    TG_OK(ds_fra_load_mem(buf, n, "synthetic", &o, &d));
    free(buf);
    if (!d) return;
    CU_ASSERT_EQUAL(ds_fra_num_pairs(d), 529);
    CU_ASSERT_EQUAL(ds_fra_get_stats(d)->lines, 2797);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t p = 0; p < ds_fra_num_pairs(d); p++) {
        for (int s = 0; s < 2; s++) {
            char *t;
            if (ds_fra_sentence(d, (ds_side)s, p, &t) != 0) break;
            h = fnv_str(h, t, strlen(t));
            h = fnv_str(h, s == 0 ? "\t" : "\n", 1);
            free(t);
        }
    }
    CU_ASSERT_EQUAL(h, 0xa4b7fc589dfb8ffcULL);
    const struct {
        int32_t size;
        uint64_t vocab, ids, vl;
        int64_t trunc;
    } want[2] = {{70, 0x18dfd8a93d4218eeULL, 0xf65ef1e195da7054ULL, 0x68214a7e407c3bb1ULL, 79},
                 {75, 0x58aa0c0580916aedULL, 0xa152045c08392f17ULL, 0x182291b0a4422266ULL, 80}};
    for (int s = 0; s < 2; s++) {
        const ds_vocab *v = ds_fra_vocab(d, (ds_side)s);
        CU_ASSERT_EQUAL(ds_vocab_size(v), want[s].size);
        uint64_t hv = 0xcbf29ce484222325ULL;
        for (int32_t i = 0; i < ds_vocab_size(v); i++) {
            size_t len;
            const char *t = ds_vocab_token(v, i, &len);
            if (i) hv = fnv_str(hv, "\n", 1);
            hv = fnv_str(hv, t, len);
        }
        CU_ASSERT_EQUAL(hv, want[s].vocab);
        CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_ids(d, (ds_side)s), 529 * 6), want[s].ids);
        CU_ASSERT_EQUAL(tu_fnv_i32(ds_fra_valid_len(d, (ds_side)s), 529), want[s].vl);
        CU_ASSERT_EQUAL(ds_fra_get_stats(d)->truncated[s], want[s].trunc);
    }
    ds_fra_free(d);
}

/* The data-path resolution order of ds_resolve_data_path. */
static void test_resolve_path(void) {
    char out[4096];
    char *home = tg_temp_dir(), *file = tg_temp_file("a\tb\n", 4);
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/tapegrad", home);
    const char *saved_env = getenv("TG_FRA_ENG"), *saved_xdg = getenv("XDG_CACHE_HOME");
    char *se = saved_env ? strdup(saved_env) : NULL, *sx = saved_xdg ? strdup(saved_xdg) : NULL;
    unsetenv("TG_FRA_ENG");
    /* 1. the flag wins; a missing flag path is an error, not a fallback */
    setenv("TG_FRA_ENG", "/nonexistent/env/fra.txt", 1);
    TG_OK(ds_resolve_data_path(file, NULL, out, sizeof out));
    CU_ASSERT_STRING_EQUAL(out, file);
    TG_EXPECT_ERROR(ds_resolve_data_path("/nonexistent/flag/fra.txt", NULL, out, sizeof out),
                    "/nonexistent/flag/fra.txt (given explicitly)");
    /* 2. then TG_FRA_ENG, also without fallback */
    TG_EXPECT_ERROR(ds_resolve_data_path(NULL, NULL, out, sizeof out),
                    "/nonexistent/env/fra.txt (from TG_FRA_ENG)");
    setenv("TG_FRA_ENG", file, 1);
    TG_OK(ds_resolve_data_path("", NULL, out, sizeof out));
    CU_ASSERT_STRING_EQUAL(out, file);
    unsetenv("TG_FRA_ENG");
    /* 3. the cache directory under XDG_CACHE_HOME */
    char dir[4300], cached[4400];
    snprintf(dir, sizeof dir, "%s/fra-eng", cache);
    snprintf(cached, sizeof cached, "%s/fra.txt", dir);
    CU_ASSERT_EQUAL(mkdir(cache, 0700), 0);
    CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
    FILE *f = fopen(cached, "w");
    if (f) {
        fputs("a\tb\n", f);
        fclose(f);
    }
    setenv("XDG_CACHE_HOME", home, 1);
    TG_OK(ds_resolve_data_path(NULL, "/nonexistent/src", out, sizeof out));
    CU_ASSERT_STRING_EQUAL(out, cached);
    /* too small a buffer */
    TG_EXPECT_ERROR(ds_resolve_data_path(NULL, NULL, out, 8), "does not fit the 8-byte buffer");
    unlink(cached);
    /* 5. the source tree (4. the current directory is whatever ctest uses: not asserted) */
    if (access("../shared/data/fra-eng/fra.txt", R_OK) == 0 || access(TG_DATA_DEFAULT, R_OK) == 0)
        TG_OK(ds_resolve_data_path(NULL, TG_SOURCE_DIR, out, sizeof out));
    else
        TG_EXPECT_ERROR(ds_resolve_data_path(NULL, TG_SOURCE_DIR, out, sizeof out),
                        "fra.txt not found");
    /* nothing anywhere: the message lists what was tried */
    if (access("../shared/data/fra-eng/fra.txt", R_OK) == 0)
        TG_OK(ds_resolve_data_path(NULL, "/nonexistent/src", out, sizeof out));
    else
        TG_EXPECT_ERROR(ds_resolve_data_path(NULL, "/nonexistent/src", out, sizeof out),
                        "fra.txt not found", "/nonexistent/src/../shared/data/fra-eng/fra.txt");
    rmdir(dir);
    rmdir(cache);
    rmdir(home);
    free(home);
    tg_remove(file);
    if (se) setenv("TG_FRA_ENG", se, 1);
    if (sx) setenv("XDG_CACHE_HOME", sx, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(se);
    free(sx);
}

int main(void) {
    static const CU_TestInfo tests[] = {
        {"preprocess: punctuation, NBSP, lowercase, sigma", test_preprocess_rules},
        {"lines: inclusive limit, skipped lines, CR/LF", test_lines_and_fields},
        {"arrays: <pad>/<unk> in text, truncation", test_arrays_quirks},
        {"synthetic quirk corpus = Python, index for index", test_synthetic_corpus},
        {"data path resolution order", test_resolve_path},
        CU_TEST_INFO_NULL,
    };
    return tg_test_main("datasets_fra_quirks", tests);
}
