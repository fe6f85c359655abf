/* test_ckpt_format.c -- what a checkpoint's loader refuses (float32 product, links nn): the
 * format-2 checksum against every kind of edit, files as the previous version wrote them
 * (legacy checksum over the data only), sizes checked before the data is read, non-finite
 * weights. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/nn.h"
#include "tests/tg_test.h"
#include "tests/nn/ckpt_test_util.h"

/* ---- Format-2 checksum: every edit of a marked file is refused ------------------------------ */

/* Replaces the first occurrence of `from` in buf[0..n) by `to` (same length). */
static void edit(unsigned char *buf, size_t n, const char *from, const char *to) {
    size_t k = strlen(from);
    CU_ASSERT_EQUAL_FATAL(strlen(to), k);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(buf + i, from, k) == 0) {
            memcpy(buf + i, to, k);
            return;
        }
    CU_FAIL_FATAL("edit: text not found");
}

/* Removes `"key":"<value>",` or `,"key":"<value>"` from the header of a file image in buf
 * (rewriting the length, same padding rule as a save); returns the new size. */
static size_t drop_meta(unsigned char *buf, size_t n, const char *key) {
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    char hdr[4096], pat[128];
    CU_ASSERT_FATAL(hl < sizeof hdr);
    memcpy(hdr, buf + 8, hl);
    hdr[hl] = '\0';
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    char *at = strstr(hdr, pat);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    char *end = strchr(at + strlen(pat), '"') + 1;
    if (*end == ',') end++;
    else if (at[-1] == ',') at--;
    memmove(at, end, strlen(end) + 1);
    size_t dlen = n - 8 - hl;
    unsigned char data[4096];
    memcpy(data, buf + 8 + hl, dlen);
    return make_file(buf, hdr, data, dlen, 0);
}

/* A zoo-like checkpoint: marked with tapegrad.model, a config, a vocabulary. */
static size_t marked_image(unsigned char *buf, size_t cap) {
    const ag_real w[6] = {0.5f, -1.25f, 2, 0.125f, -3.5f, 1}, b[2] = {0.25f, -0.75f};
    nn_ckpt *ck = nn_ckpt_new();
    nn_ckpt_add(ck, "fc.weight", 2, (const int[]){2, 3}, w);
    nn_ckpt_add(ck, "fc.bias", 1, (const int[]){2}, b);
    nn_ckpt_set_meta(ck, "tapegrad.model", "mlp");
    nn_ckpt_set_meta(ck, "config.dropout", "0.1");
    nn_ckpt_set_meta(ck, "vocab.src", "<unk>\n<pad>\nhello\nworld");
    unsigned char *img;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &img, &n), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_FATAL(n <= cap);
    memcpy(buf, img, n);
    free(img);
    return n;
}

static void test_checksum_edits(void) {
    unsigned char buf[4096];
    size_t n = marked_image(buf, sizeof buf);
    nn_ckpt *ck;
    CU_ASSERT_EQUAL_FATAL(load_image_file("marked.safetensors", buf, n, &ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(ck), NN_CKPT_CHECKED_FILE);
    nn_ckpt_free(ck);
    static const struct {
        const char *what, *from, *to;
    } edits[] = {
        {"edited metadata value", "\"config.dropout\":\"0.1\"", "\"config.dropout\":\"0.5\""},
        {"renamed vocabulary token", "hello", "hallo"},
        {"renamed tensor", "\"fc.weight\"", "\"fc.weighx\""},
        {"edited dtype", "\"F32\"", "\"I32\""},
        {"edited shape", "\"shape\":[2,3]", "\"shape\":[3,2]"},
        {"edited metadata key", "\"config.dropout\"", "\"config.dropouT\""},
        {"edited padding", " ", "\t"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        unsigned char e[4096];
        memcpy(e, buf, n);
        edit(e, n, edits[i].from, edits[i].to);
        ck = (nn_ckpt *)1;
        int rc = load_image_file("edited.safetensors", e, n, &ck);
        if (rc == 0) fprintf(stderr, "\n  accepted: %s\n", edits[i].what);
        CU_ASSERT_EQUAL(rc, -1);
        TG_EXPECT_NULL(ck,
                       "edited.safetensors: checksum does not match: metadata " NN_CKPT_CHECKSUM_KEY
                       " is ");
        TG_ERROR_HAS("its header (metadata, tensor names, dtypes, shapes, offsets) or "
                     "its data changed after it was saved");
    }
    /* Every data bit flipped in turn (the last 32 bytes are the data). */
    int accepted = 0;
    for (size_t bit = 0; bit < 32 * 8; bit++) {
        unsigned char e[4096];
        memcpy(e, buf, n);
        e[n - 32 + bit / 8] ^= (unsigned char)(1u << (bit % 8));
        if (nn_ckpt_load_mem(&ck, e, n, "flipped", NULL) == 0) {
            accepted++;
            nn_ckpt_free(ck);
        } else if (bit == 0) {
            TG_ERROR_HAS("flipped: checksum does not match");
        }
    }
    CU_ASSERT_EQUAL(accepted, 0);
    /* The header length changed (one more byte of padding taken into the header). */
    {
        unsigned char e[4096];
        memcpy(e, buf, n);
        e[0]++;
        CU_ASSERT_EQUAL(nn_ckpt_load_mem(&ck, e, n, "longer", NULL), -1);
    }
    /* The checksum key deleted: the format key and tapegrad.model still mark the file. */
    unsigned char e[4096];
    memcpy(e, buf, n);
    size_t m = drop_meta(e, n, NN_CKPT_CHECKSUM_KEY);
    TG_EXPECT_ERROR(load_image_file("nosum.safetensors", e, m, &ck),
                    "nosum.safetensors: checksum missing: metadata key '" NN_CKPT_FORMAT_KEY
                    "' marks the file as a tapegrad checkpoint, but it "
                    "has no " NN_CKPT_CHECKSUM_KEY);
    /* ... and the format key too: tapegrad.model still marks it. */
    m = drop_meta(e, m, NN_CKPT_FORMAT_KEY);
    TG_EXPECT_ERROR(load_image_file("nosum.safetensors", e, m, &ck),
                    "nosum.safetensors: checksum missing: metadata key 'tapegrad.model'");
    /* Every tapegrad.* key deleted: a plain state_dict, which loads unverified (the zoo's
     * loader then refuses it for want of tapegrad.model). */
    m = drop_meta(e, m, "tapegrad.model");
    CU_ASSERT_EQUAL_FATAL(load_image_file("nosum.safetensors", e, m, &ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(ck), NN_CKPT_UNCHECKED);
    nn_ckpt_free(ck);
}

/* ---- Legacy files: written before format 2, checksum over the data only --------------------- */

/* The exact file nn_ckpt_save wrote before format 2 (commit 0b2edc5) for fc.weight [2, 3],
 * fc.bias [2] and metadata tapegrad.model = mlp, config.dropout = 0.1. */
static const char legacy_header[] =
    "{\"__metadata__\":{\"tapegrad.model\":\"mlp\",\"config.dropout\":\"0.1\","
    "\"tapegrad.xxh3_64\":\"e4db7e8b0d24574c\"},"
    "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}     ";
static const unsigned char legacy_data[32] = {
    0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0xa0, 0xbf, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x3e,
    0x00, 0x00, 0x60, 0xc0, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x40, 0xbf};

static void test_legacy(void) {
    unsigned char buf[1024];
    size_t n = make_file(buf, legacy_header, legacy_data, sizeof legacy_data, 0);
    CU_ASSERT_EQUAL(n, 272);
    nn_ckpt *ck;
    CU_ASSERT_EQUAL_FATAL(load_image_file("legacy.safetensors", buf, n, &ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(ck), NN_CKPT_CHECKED_DATA);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "tapegrad.model"), "mlp");
    ag_real w[6];
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "fc.weight", 2, (const int[]){2, 3}, w), 0);
    CU_ASSERT_EQUAL(w[1], -1.25f);
    /* Saved again: format 2, the legacy key dropped. */
    unsigned char *img;
    size_t m;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &img, &m), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&ck, img, m, "upgraded", NULL), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(ck), NN_CKPT_CHECKED_FILE);
    CU_ASSERT_PTR_NULL(nn_ckpt_meta(ck, NN_CKPT_LEGACY_CHECKSUM_KEY));
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "config.dropout"), "0.1");
    nn_ckpt_free(ck);
    free(img);
    /* A flipped data bit: refused by the legacy checksum. */
    buf[n - 5] ^= 0x04;
    TG_EXPECT_ERROR(
        load_image_file("legacy.safetensors", buf, n, &ck),
        "legacy.safetensors: checksum does not match: metadata " NN_CKPT_LEGACY_CHECKSUM_KEY
        " (legacy scheme, the data section only)");
    buf[n - 5] ^= 0x04;
    /* An edited header is what the legacy scheme cannot see: it loads, flagged CHECKED_DATA. */
    edit(buf, n, "\"0.1\"", "\"0.9\"");
    CU_ASSERT_EQUAL_FATAL(load_image_file("legacy.safetensors", buf, n, &ck), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(ck), NN_CKPT_CHECKED_DATA);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "config.dropout"), "0.9");
    nn_ckpt_free(ck);
    /* The legacy key deleted: tapegrad.model marks it, so it is refused. */
    n = drop_meta(buf, n, NN_CKPT_LEGACY_CHECKSUM_KEY);
    TG_EXPECT_ERROR(load_image_file("legacy.safetensors", buf, n, &ck),
                    "legacy.safetensors: checksum missing: metadata key 'tapegrad.model'");
}

/* ---- Sizes before data ---------------------------------------------------------------------- */

static void test_sizes_first(void) {
    unsigned char buf[4096];
    size_t n = marked_image(buf, sizeof buf);
    nn_ckpt *ck;
    /* Truncated: the message names the file and both sizes. */
    char want[256];
    CU_ASSERT_EQUAL(load_image_file("cut.safetensors", buf, n - 3, &ck), -1);
    snprintf(want, sizeof want, "cut.safetensors: file is %zu bytes but its header describes %zu",
             n - 3, n);
    TG_ERROR_HAS(want);
    /* The header length larger than the file. */
    unsigned char e[4096];
    memcpy(e, buf, n);
    e[2] = 1; /* + 65536 */
    CU_ASSERT_EQUAL(load_image_file("hlen.safetensors", e, n, &ck), -1);
    snprintf(want, sizeof want,
             "hlen.safetensors: header length %llu exceeds the file: it is %zu "
             "bytes",
             (unsigned long long)(e[0] | e[1] << 8) + 65536, n);
    TG_ERROR_HAS(want);
    /* A header that describes 2^42 bytes of data in a small file: refused by the sizes, never
     * allocated (an allocation of 4 TB would fail with "out of memory"). */
    const char *huge = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776],"
                       "\"data_offsets\":[0,4398046511104]}}";
    n = make_file(buf, huge, "abcdefgh", 8, 0);
    CU_ASSERT_EQUAL(load_image_file("huge.safetensors", buf, n, &ck), -1);
    snprintf(want, sizeof want,
             "huge.safetensors: file is %zu bytes but its header describes "
             "%llu (a %zu-byte header and 4398046511104 bytes of data, up to the end of tensor "
             "'w'): truncated file?",
             n, 4398046511104ull + strlen(huge) + 8, strlen(huge));
    TG_ERROR_HAS(want);
    /* A header length over 100 MB in a (sparse) file long enough for it: refused before the
     * header is read. */
    FILE *f = fopen(path_in("bighdr.safetensors"), "wb");
    uint64_t hl = (100u << 20) + 1;
    for (int i = 0; i < 8; i++) fputc((int)(hl >> (8 * i)) & 0xff, f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(truncate(path_in("bighdr.safetensors"), (off_t)(hl + 64)), 0);
    TG_EXPECT_ERROR(nn_ckpt_load(&ck, path_in("bighdr.safetensors")),
                    "bighdr.safetensors: header length 104857601 exceeds the limit of "
                    "104857600 bytes");
    remove(path_in("bighdr.safetensors"));
}

/* ---- Non-finite weights ---------------------------------------------------------------------- */

static void test_nonfinite(void) {
    model a;
    nn_params *pa = make_model(&a, 6);
    a.fc.weight->data[4] = NAN;
    CU_ASSERT_EQUAL_FATAL(nn_save_params(pa, path_in("nan.safetensors")), 0);
    nn_ckpt *ck;
    TG_EXPECT_ERROR(nn_ckpt_load(&ck, path_in("nan.safetensors")),
                    "nan.safetensors: tensor 'net.fc.weight' (F32 [2, 3]) holds 1 "
                    "non-finite value (element 4 is NaN): refused");
    TG_ERROR_HAS("nn_ckpt_load_opts.allow_nonfinite");
    CU_ASSERT_EQUAL(nn_load_params(pa, path_in("nan.safetensors")), -1);
    /* Inspecting: loads, NaN and all. */
    nn_ckpt_load_opts inspect = {.allow_nonfinite = true};
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_with(&ck, path_in("nan.safetensors"), &inspect), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(ck), NN_CKPT_CHECKED_FILE);
    a.fc.weight->data[4] = 0;
    CU_ASSERT_EQUAL(nn_ckpt_load_params(ck, pa, 0), 0);
    CU_ASSERT(isnan(a.fc.weight->data[4]));
    nn_ckpt_free(ck);
    /* Infinities, in F64 too; the count and the first element. */
    nn_ckpt *out = nn_ckpt_new();
    nn_ckpt_set_store_dtype(out, NN_F64);
    const ag_real v[4] = {1, -INFINITY, 2, INFINITY}, fine[2] = {1e30f, -1e-30f};
    nn_ckpt_add(out, "ok", 1, (const int[]){2}, fine);
    nn_ckpt_add(out, "bad", 2, (const int[]){2, 2}, v);
    unsigned char *img;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(out, &img, &n), 0);
    nn_ckpt_free(out);
    TG_EXPECT_ERROR(nn_ckpt_load_mem(&ck, img, n, "inf", NULL),
                    "inf: tensor 'bad' (F64 [2, 2]) holds 2 non-finite values (element 1 "
                    "is -inf)");
    CU_ASSERT_EQUAL(nn_ckpt_load_mem(&ck, img, n, "inf", &inspect), 0);
    nn_ckpt_free(ck);
    free(img);
    /* F32 is tested 16 values at a time, then a tail: a -inf in the second block and a NaN in
     * the tail are counted and the first named; in a tensor of the largest finite values and
     * subnormals, nothing is refused. */
    ag_real f32[37], ok32[37];
    for (int i = 0; i < 37; i++) f32[i] = ok32[i] = i % 2 ? FLT_MAX : -1e-40f;
    f32[20] = -INFINITY;
    f32[35] = NAN;
    out = nn_ckpt_new();
    nn_ckpt_add(out, "ok32", 1, (const int[]){37}, ok32);
    nn_ckpt_add(out, "bad32", 1, (const int[]){37}, f32);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(out, &img, &n), 0);
    nn_ckpt_free(out);
    TG_EXPECT_ERROR(nn_ckpt_load_mem(&ck, img, n, "f32", NULL),
                    "f32: tensor 'bad32' (F32 [37]) holds 2 non-finite values (element 20 is "
                    "-inf)");
    free(img);
    /* Half precisions of other writers: F16 +inf, BF16 NaN, F8_E5M2 -inf, F8_E4M3 NaN; and
     * the finite extremes of each, which load. */
    static const struct {
        const char *dtype;
        unsigned char bytes[2];
        size_t es;
        const char *is;
    } cases[] = {
        {"F16", {0x00, 0x7c}, 2, "inf"}, {"BF16", {0xc1, 0x7f}, 2, "NaN"},
        {"F8_E5M2", {0xfc}, 1, "-inf"},  {"F8_E4M3", {0x7f}, 1, "NaN"},
        {"F16", {0xff, 0x7b}, 2, NULL},  {"BF16", {0x7f, 0xff}, 2, NULL},
        {"F8_E5M2", {0x7b}, 1, NULL},    {"F8_E4M3", {0x7e}, 1, NULL},
        {"I16", {0x00, 0x7c}, 2, NULL}, /* not a float: no check */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char hdr[160], want[96];
        snprintf(hdr, sizeof hdr,
                 "{\"x\":{\"dtype\":\"%s\",\"shape\":[],\"data_offsets\":[0,%zu]}}", cases[i].dtype,
                 cases[i].es);
        unsigned char file[256];
        n = make_file(file, hdr, cases[i].bytes, cases[i].es, 0);
        int rc = nn_ckpt_load_mem(&ck, file, n, "half", NULL);
        CU_ASSERT_EQUAL(rc, cases[i].is ? -1 : 0);
        if (cases[i].is) {
            snprintf(want, sizeof want, "(element 0 is %s)", cases[i].is);
            TG_ERROR_HAS(want);
        } else {
            nn_ckpt_free(ck);
        }
    }
    nn_params_free(pa);
}

static CU_TestInfo tests[] = {
    {"format-2 checksum: every edit of a marked file refused", test_checksum_edits},
    {"legacy files: data checksum verified, header not", test_legacy},
    {"sizes checked before the data is read", test_sizes_first},
    {"non-finite weights refused, loadable to inspect", test_nonfinite},
    CU_TEST_INFO_NULL,
};


/* The suite's files go to one temporary directory, removed at the end. */
int main(void) {
    dir = tg_temp_dir();
    int rc = tg_test_main("nn_checkpoint_format", tests);
    if (tg_remove(dir)) perror("test_ckpt_format: removing its temporary directory");
    return rc;
}
