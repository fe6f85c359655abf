/* test_ckpt.c -- safetensors checkpoints (float32 product, links nn): bit-identical round
 * trips with metadata, reading files as other writers make them (no checksum, F16 / BF16 /
 * F64), a table of malformed files, one per validation rule, each rejected with its own
 * message, a flipped data byte, the load rules, the atomic save. What the loader refuses
 * beyond the table is in test_ckpt_format.c; the atomic writer, buffers, non-strict loads and
 * streamed saves in test_ckpt_io.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/nn.h"
#include "tests/tg_test.h"
#include "tests/nn/ckpt_test_util.h"

static void test_roundtrip(void) {
    model a, b;
    nn_params *pa = make_model(&a, 1), *pb = make_model(&b, 2);
    for (int i = 0; i < 2; i++) a.ln.weight->data[i] = 0.1f * (float)(i + 1); /* not 1s */
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_add_params(ck, pa), 0);
    const char *weird = "quote \" backslash \\ newline \n tab \t unicode \xc3\xa9\xe2\x82\xac";
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "config", "{\"hidden\": 32}"), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "weird", weird), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "config", "{\"hidden\": 64}"), 0); /* replaces */
    CU_ASSERT_EQUAL(nn_ckpt_set_meta_int(ck, "epoch", -12345678901LL), 0);
    ag_rng r, r2;
    ag_rng_seed(&r, 99);
    ag_rng_next(&r);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta_rng(ck, "rng", &r), 0);
    TG_EXPECT_ERROR(nn_ckpt_set_meta(ck, NN_CKPT_CHECKSUM_KEY, "x"), "reserved");
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, NN_CKPT_FORMAT_KEY, "2"), -1);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, NN_CKPT_LEGACY_CHECKSUM_KEY, "x"), -1);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "tapegrad.model", "mlp"), 0); /* a mark, not reserved */
    TG_EXPECT_ERROR(nn_ckpt_set_meta(ck, "latin1", "caf\xe9"), "must be UTF-8"); /* not UTF-8 */
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("rt.safetensors")), 0);
    nn_ckpt_free(ck);

    nn_ckpt *in;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&in, path_in("rt.safetensors")), 0);
    CU_ASSERT_EQUAL(nn_ckpt_count(in), 4);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_at(in, 0)->name, "net.fc.weight");
    CU_ASSERT_EQUAL(nn_ckpt_at(in, 0)->dtype, NN_F32);
    CU_ASSERT_EQUAL(nn_ckpt_at(in, 0)->shape[0], 2);
    CU_ASSERT_EQUAL(nn_ckpt_at(in, 0)->shape[1], 3);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(in, "config"), "{\"hidden\": 64}");
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(in, "weird"), weird);
    int64_t e;
    CU_ASSERT_EQUAL(nn_ckpt_meta_int(in, "epoch", &e), 0);
    CU_ASSERT_EQUAL(e, -12345678901LL);
    CU_ASSERT_EQUAL(nn_ckpt_meta_rng(in, "rng", &r2), 0);
    CU_ASSERT_EQUAL(memcmp(&r, &r2, sizeof r), 0);
    TG_EXPECT_ERROR(nn_ckpt_meta_int(in, "weird", &e), "expected a decimal integer");
    CU_ASSERT_EQUAL(nn_ckpt_checked(in), NN_CKPT_CHECKED_FILE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(nn_ckpt_meta(in, NN_CKPT_CHECKSUM_KEY));
    CU_ASSERT_EQUAL(strlen(nn_ckpt_meta(in, NN_CKPT_CHECKSUM_KEY)), 16);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(in, NN_CKPT_FORMAT_KEY), NN_CKPT_FORMAT);
    /* config, weird, tapegrad.model, epoch, rng, then the format and the checksum */
    CU_ASSERT_EQUAL(nn_ckpt_meta_count(in), 7);
    const char *k, *v;
    CU_ASSERT_EQUAL(nn_ckpt_meta_at(in, 0, &k, &v), 0);
    CU_ASSERT_STRING_EQUAL(k, "config");
    CU_ASSERT_EQUAL(nn_ckpt_meta_at(in, 6, &k, &v), 0);
    CU_ASSERT_STRING_EQUAL(k, NN_CKPT_CHECKSUM_KEY);
    CU_ASSERT_EQUAL(nn_ckpt_meta_at(in, 7, &k, &v), -1);
    /* Into a differently initialised store: bit-identical values. */
    CU_ASSERT_NOT_EQUAL(memcmp(a.fc.weight->data, b.fc.weight->data, 6 * sizeof(ag_real)), 0);
    CU_ASSERT_EQUAL(nn_ckpt_load_params(in, pb, 0), 0);
    for (size_t i = 0; i < nn_params_count(pa); i++)
        CU_ASSERT_EQUAL(memcmp(nn_params_at(pa, i)->data, nn_params_at(pb, i)->data,
                               (size_t)nn_params_at(pa, i)->numel * sizeof(ag_real)),
                        0);
    /* Saving a loaded checkpoint again gives the same bytes. */
    CU_ASSERT_EQUAL(nn_ckpt_save(in, path_in("rt2.safetensors")), 0);
    nn_ckpt_free(in);
    FILE *f1 = fopen(path_in("rt.safetensors"), "rb"),
         *f2 = fopen(path_in("rt2.safetensors"), "rb");
    static unsigned char b1[8192], b2[8192];
    size_t n1 = fread(b1, 1, sizeof b1, f1), n2 = fread(b2, 1, sizeof b2, f2);
    fclose(f1);
    fclose(f2);
    CU_ASSERT_EQUAL(n1, n2);
    CU_ASSERT_EQUAL(memcmp(b1, b2, n1), 0);
    /* nn_ckpt_save_mem gives the same image. */
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&in, path_in("rt2.safetensors")), 0);
    unsigned char *img;
    size_t ilen;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(in, &img, &ilen), 0);
    CU_ASSERT_EQUAL(ilen, n1);
    CU_ASSERT_EQUAL(memcmp(img, b1, n1), 0);
    free(img);
    nn_ckpt_free(in);
    /* The header is padded so that the data section starts 8-byte aligned. */
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b1[i] << (8 * i);
    CU_ASSERT_EQUAL((8 + hl) % 8, 0);
    /* The shortcuts. */
    CU_ASSERT_EQUAL(nn_save_params(pa, path_in("short.safetensors")), 0);
    CU_ASSERT_EQUAL(nn_params_reinit(pb, 5), 0);
    CU_ASSERT_EQUAL(nn_load_params(pb, path_in("short.safetensors")), 0);
    CU_ASSERT_EQUAL(memcmp(a.ln.weight->data, b.ln.weight->data, 2 * sizeof(ag_real)), 0);
    TG_EXPECT_ERROR(nn_load_params(pb, path_in("nonexistent.safetensors")),
                    "nonexistent.safetensors: cannot open");
    nn_params_free(pa);
    nn_params_free(pb);
}

static void test_f64_store(void) {
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_store_dtype(ck, NN_F16), -1);
    CU_ASSERT_EQUAL(nn_ckpt_set_store_dtype(ck, NN_F64), 0);
    const ag_real v[3] = {1.5f, -2.25f, 1e-3f};
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "x", 1, (const int[]){3}, v), 0);
    TG_EXPECT_ERROR(nn_ckpt_add(ck, "x", 1, (const int[]){3}, v), "duplicate tensor 'x'");
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "scalar", 0, NULL, v), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "empty", 2, (const int[]){0, 4}, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("f64.safetensors")), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&ck, path_in("f64.safetensors")), 0);
    CU_ASSERT_EQUAL(nn_ckpt_find(ck, "x")->dtype, NN_F64);
    CU_ASSERT_EQUAL(nn_ckpt_find(ck, "x")->end - nn_ckpt_find(ck, "x")->begin, 24);
    CU_ASSERT_EQUAL(nn_ckpt_find(ck, "scalar")->ndim, 0);
    CU_ASSERT_EQUAL(nn_ckpt_find(ck, "empty")->numel, 0);
    ag_real out[3];
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "x", 1, (const int[]){3}, out), 0);
    CU_ASSERT_EQUAL(memcmp(out, v, sizeof v), 0);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "scalar", 0, NULL, out), 0);
    CU_ASSERT_EQUAL(out[0], 1.5f);
    nn_ckpt_free(ck);
}

/* ---- Hand-made files ----------------------------------------------------------------------- */

static void test_other_writers(void) {
    /* As safetensors.torch.save_file writes: no checksum, F16, BF16, F32, an I64 tensor. */
    static const unsigned char data[] = {
        0x00, 0x3C, 0x00, 0xC0, 0x00, 0x38, 0x01, 0x00, /* F16: 1, -2, 0.5, 2^-24 */
        0x80, 0x3F, 0x40, 0xC0,                         /* BF16: 1, -3 */
        0x00, 0x00, 0x20, 0x40,                         /* F32: 2.5 */
        0x07, 0,    0,    0,    0,    0,    0,    0,    /* I64: 7 */
    };
    const char *hdr = "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                      "\"f\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]},"
                      "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
                      "\"__metadata__\":{\"format\":\"pt\"}}   ";
    unsigned char buf[512];
    size_t n = make_file(buf, hdr, data, sizeof data, 0);
    nn_ckpt *ck;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&ck, buf, n, "torch.safetensors", NULL), 0);
    ag_real v[4];
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "h", 2, (const int[]){2, 2}, v), 0);
    CU_ASSERT_EQUAL(v[0], 1);
    CU_ASSERT_EQUAL(v[1], -2);
    CU_ASSERT_EQUAL(v[2], 0.5f);
    CU_ASSERT_EQUAL(v[3], 1.0f / 16777216);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "b", 1, (const int[]){2}, v), 0);
    CU_ASSERT_EQUAL(v[0], 1);
    CU_ASSERT_EQUAL(v[1], -3);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "f", 0, NULL, v), 0);
    CU_ASSERT_EQUAL(v[0], 2.5f);
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(ck, "format"), "pt");
    CU_ASSERT_EQUAL(nn_ckpt_checked(ck), NN_CKPT_UNCHECKED); /* no tapegrad.* key: plain */
    /* Mistyped: an integer tensor where a parameter is expected. */
    TG_EXPECT_ERROR(nn_ckpt_read(ck, "i", 1, (const int[]){1}, v),
                    "torch.safetensors: tensor 'i' has dtype I64, expected a float dtype");
    TG_EXPECT_ERROR(nn_ckpt_read(ck, "h", 1, (const int[]){4}, v),
                    "tensor 'h' has shape [2, 2], expected [4]");
    TG_EXPECT_ERROR(nn_ckpt_read(ck, "zz", 1, (const int[]){4}, v),
                    "tensor 'zz' is missing (expected shape [4])");
    nn_ckpt_free(ck);
}

/* One malformed file per validation rule. The valid base: one F32 tensor "w" of shape [2]. */
typedef struct bad_case {
    const char *what;
    const char *header;
    size_t dlen;   /* bytes of data after the header */
    uint64_t hlen; /* 0: the header's length */
    size_t cut;    /* bytes cut from the end of the file */
    const char *expect;
} bad_case;

#define W2 "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static const bad_case bad_cases[] = {
    {"header length past the file", "{" W2 "}", 8, 100000, 0,
     "header length 100000 exceeds the file: it is 70 bytes, so at most 62 follow"},
    {"header length 2^64 - 1", "{" W2 "}", 8, 0xFFFFFFFFFFFFFFFFull, 0, "exceeds the file"},
    {"file shorter than the length", "{}", 0, 0, 7, "shorter than the 8-byte header length"},
    {"truncated data", "{" W2 "}", 8, 0, 3,
     "file is 67 bytes but its header describes 70 (a 54-byte header and 8 bytes of data, up to "
     "the end of tensor 'w'): truncated file?"},
    {"bad JSON: trailing comma", "{" W2 ",}", 8, 0, 0, "header is not valid JSON"},
    {"bad JSON: unterminated", "{\"w\":{\"dtype\":\"F32", 0, 0, 0, "header is not valid JSON"},
    {"bad JSON: trailing text", "{" W2 "}x", 8, 0, 0, "unexpected text after the JSON value"},
    {"bad JSON: duplicate key", "{" W2 "," W2 "}", 8, 0, 0, "duplicate key \"w\""},
    {"header not an object", "[1,2]", 0, 0, 0, "header is a JSON array, expected an object"},
    {"unknown dtype", "{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, 0,
     "unknown dtype \"F33\""},
    {"shape / bytes mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
     8, 0, 0, "shape [3] of F32 needs 12 bytes but data_offsets [0, 8] span 8"},
    {"negative shape", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, 0, 0,
     "shape entry 0 is not a non-negative integer"},
    {"begin > end", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, 0, 0,
     "has begin > end"},
    {"overlapping ranges",
     "{" W2 ",\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 0, 0, "overlap"},
    {"range outside the file", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
     8, 0, 0,
     "file is 71 bytes but its header describes 79 (a 55-byte header and 16 bytes of data"},
    {"gap in the data", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 0, 0,
     "bytes [0, 4) of the data section belong to no tensor"},
    {"trailing data", "{" W2 "}", 12, 0, 0,
     "bytes [8, 12) of the data section belong to no "
     "tensor (trailing data after 'w'): file is 74 bytes but its header describes 70"},
    {"missing field", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, 0, 0,
     "missing field \"data_offsets\""},
    {"unexpected field", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}",
     8, 0, 0, "unexpected field \"x\""},
    {"metadata value not a string", "{\"__metadata__\":{\"n\":3}," W2 "}", 8, 0, 0,
     "__metadata__ value of \"n\" is a JSON number, expected a string"},
    {"legacy checksum mismatch",
     "{\"__metadata__\":{\"" NN_CKPT_LEGACY_CHECKSUM_KEY "\":\"0123456789abcdef\"}," W2 "}", 8, 0,
     0,
     "checksum does not match: metadata " NN_CKPT_LEGACY_CHECKSUM_KEY
     " (legacy scheme, the data section only) is \"0123456789abcdef\""},
    {"checksum mismatch",
     "{\"__metadata__\":{\"" NN_CKPT_CHECKSUM_KEY "\":\"0123456789abcdef\"}," W2 "}", 8, 0, 0,
     "checksum does not match: metadata " NN_CKPT_CHECKSUM_KEY " is "
     "0123456789abcdef but the file hashes to"},
    {"checksum not hex",
     "{\"__metadata__\":{\"" NN_CKPT_CHECKSUM_KEY "\":\"0123456789ABCDEF\"}," W2 "}", 8, 0, 0,
     "not 16 lowercase hex digits"},
    {"checksum escaped",
     "{\"__metadata__\":{\"" NN_CKPT_CHECKSUM_KEY "\":\"\\u0030123456789abcdef\"}," W2 "}", 8, 0, 0,
     "not 16 lowercase hex digits"},
    {"marked, no checksum", "{\"__metadata__\":{\"tapegrad.model\":\"mlp\"}," W2 "}", 8, 0, 0,
     "checksum missing: metadata key 'tapegrad.model' marks the file as a tapegrad checkpoint"},
    {"format 2, legacy checksum only",
     "{\"__metadata__\":{\"" NN_CKPT_FORMAT_KEY "\":\"2\",\"" NN_CKPT_LEGACY_CHECKSUM_KEY
     "\":\"0123456789abcdef\"}," W2 "}",
     8, 0, 0, "checksum missing: metadata key '" NN_CKPT_FORMAT_KEY "'"},
    {"unknown format", "{\"__metadata__\":{\"" NN_CKPT_FORMAT_KEY "\":\"3\"}," W2 "}", 8, 0, 0,
     "metadata " NN_CKPT_FORMAT_KEY " is \"3\", a format this version does not know"},
};

static void test_malformed_table(void) {
    static const unsigned char data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        unsigned char buf[1024];
        size_t n = make_file(buf, c->header, data, c->dlen, c->hlen) - c->cut;
        /* Through a real file, as the loader sees it. */
        char name[64];
        snprintf(name, sizeof name, "bad%02zu.safetensors", i);
        nn_ckpt *ck = (nn_ckpt *)1;
        int rc = load_image_file(name, buf, n, &ck);
        if (rc == 0) fprintf(stderr, "\n  accepted: %s\n", c->what);
        CU_ASSERT_EQUAL(rc, -1);
        TG_EXPECT_NULL(ck, c->expect);
        TG_ERROR_HAS(name); /* the message names the file */
    }
    /* Header length 0 on its own. */
    unsigned char z[8] = {0};
    nn_ckpt *ck;
    TG_EXPECT_ERROR(nn_ckpt_load_mem(&ck, z, 8, "zero", NULL), "header length is 0");
}

/* Checksum: a valid file with one data byte flipped. */
static void test_checksum_flip(void) {
    model a;
    nn_params *pa = make_model(&a, 3);
    CU_ASSERT_EQUAL_FATAL(nn_save_params(pa, path_in("flip.safetensors")), 0);
    FILE *f = fopen(path_in("flip.safetensors"), "r+b");
    fseek(f, -3, SEEK_END);
    int c = fgetc(f);
    fseek(f, -3, SEEK_END);
    fputc(c ^ 0x10, f);
    fclose(f);
    TG_EXPECT_ERROR(nn_load_params(pa, path_in("flip.safetensors")),
                    "flip.safetensors: checksum does not match");
    nn_params_free(pa);
}

/* Loading into a store: missing, extra, misshapen, mistyped tensors; optim.* extras. */
static void test_load_rules(void) {
    model a;
    nn_params *pa = make_model(&a, 4);
    ag_real before[6];
    memcpy(before, a.fc.weight->data, sizeof before);
    const ag_real vals[6] = {1, 2, 3, 4, 5, 6};

    /* Missing: a checkpoint without net.ln.bias. */
    nn_ckpt *ck = nn_ckpt_new();
    nn_ckpt_add(ck, "net.fc.weight", 2, (const int[]){2, 3}, vals);
    nn_ckpt_add(ck, "net.fc.bias", 1, (const int[]){2}, vals);
    nn_ckpt_add(ck, "net.ln.weight", 1, (const int[]){2}, vals);
    TG_EXPECT_ERROR(nn_ckpt_load_params(ck, pa, 0),
                    "tensor 'net.ln.bias' is missing (expected shape [2])");
    CU_ASSERT_EQUAL(memcmp(before, a.fc.weight->data, sizeof before), 0); /* untouched */

    /* Complete, plus optimizer state: accepted (optim.* skipped by a model-only load). */
    nn_ckpt_add(ck, "net.ln.bias", 1, (const int[]){2}, vals);
    nn_ckpt_add(ck, "optim.adam.m.net.fc.bias", 1, (const int[]){2}, vals);
    CU_ASSERT_EQUAL(nn_ckpt_load_params(ck, pa, 0), 0);
    CU_ASSERT_EQUAL(a.fc.weight->data[5], 6);
    /* Extra: anything else is an error unless allowed. */
    nn_ckpt_add(ck, "net.extra.weight", 1, (const int[]){2}, vals);
    TG_EXPECT_ERROR(nn_ckpt_load_params(ck, pa, 0), "unexpected tensor 'net.extra.weight'");
    CU_ASSERT_EQUAL(nn_ckpt_load_params(ck, pa, NN_CKPT_ALLOW_EXTRA), 0);
    nn_ckpt_free(ck);

    /* Wrong shape: (3, 2) for the (2, 3) weight, as a file. */
    ck = nn_ckpt_new();
    nn_ckpt_add(ck, "net.fc.weight", 2, (const int[]){3, 2}, vals);
    nn_ckpt_add(ck, "net.fc.bias", 1, (const int[]){2}, vals);
    nn_ckpt_add(ck, "net.ln.weight", 1, (const int[]){2}, vals);
    nn_ckpt_add(ck, "net.ln.bias", 1, (const int[]){2}, vals);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("shape.safetensors")), 0);
    nn_ckpt_free(ck);
    TG_EXPECT_ERROR(nn_load_params(pa, path_in("shape.safetensors")),
                    "shape.safetensors: tensor 'net.fc.weight' has shape [3, 2], expected [2, 3]");

    /* Mistyped: an I32 parameter. */
    const char *hdr =
        "{\"net.fc.weight\":{\"dtype\":\"I32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
        "\"net.fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
        "\"net.ln.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[32,40]},"
        "\"net.ln.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[40,48]}}";
    unsigned char data[48] = {0}, buf[1024];
    size_t n = make_file(buf, hdr, data, sizeof data, 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&ck, buf, n, "typed.safetensors", NULL), 0);
    TG_EXPECT_ERROR(
        nn_ckpt_load_params(ck, pa, 0),
        "typed.safetensors: tensor 'net.fc.weight' has dtype I32, expected a float dtype");
    nn_ckpt_free(ck);
    nn_params_free(pa);
}

/* Saving goes through ag_file: the target is replaced whole, nothing else is left in the
 * directory, and a failed save keeps the previous file. */
static void test_atomic_save(void) {
    char sub[128];
    snprintf(sub, sizeof sub, "%s/atomic", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    char target[192];
    snprintf(target, sizeof target, "%s/model.safetensors", sub);
    model a;
    nn_params *pa = make_model(&a, 5);
    CU_ASSERT_EQUAL(nn_save_params(pa, target), 0);
    a.fc.weight->data[0] = 42;
    CU_ASSERT_EQUAL(nn_save_params(pa, target), 0); /* over the previous one */
    CU_ASSERT_EQUAL(count_entries(sub), 1);
    a.fc.weight->data[0] = 0;
    CU_ASSERT_EQUAL(nn_load_params(pa, target), 0);
    CU_ASSERT_EQUAL(a.fc.weight->data[0], 42);
    /* A directory in the way: refused before anything is written. */
    char blocked[192];
    snprintf(blocked, sizeof blocked, "%s/blocked", sub);
    mkdir(blocked, 0755);
    TG_EXPECT_ERROR(nn_save_params(pa, blocked),
                    "blocked: is a directory, expected a file (nothing written)");
    CU_ASSERT_EQUAL(count_entries(sub), 2); /* model.safetensors and blocked/: no temporary */
    /* A directory that does not exist. */
    TG_EXPECT_ERROR(nn_save_params(pa, "/nonexistent-dir/x.safetensors"),
                    "/nonexistent-dir/x.safetensors: cannot create a temporary file beside "
                    "it: No such file or directory");
    nn_params_free(pa);
}

static CU_TestInfo tests[] = {
    {"round trip: bit-identical values and metadata", test_roundtrip},
    {"F64 store dtype, scalars, empty tensors", test_f64_store},
    {"files of other writers: F16, BF16, no checksum", test_other_writers},
    {"malformed files: one per validation rule", test_malformed_table},
    {"checksum catches a flipped data byte", test_checksum_flip},
    {"load rules: missing, extra, shape, dtype, optim.*", test_load_rules},
    {"atomic save: temporary file and rename", test_atomic_save},
    CU_TEST_INFO_NULL,
};


/* The suite's files go to one temporary directory, removed at the end. */
int main(void) {
    dir = tg_temp_dir();
    int rc = tg_test_main("nn_checkpoint", tests);
    if (tg_remove(dir)) perror("test_ckpt: removing its temporary directory");
    return rc;
}
