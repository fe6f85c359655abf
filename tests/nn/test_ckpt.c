/* test_ckpt.c -- safetensors checkpoints (float32 product, links nn): bit-identical round
 * trips with metadata, reading files as other writers make them (no checksum, F16 / BF16 /
 * F64) and as the previous version wrote them (legacy checksum), a table of malformed files,
 * one per validation rule, each rejected with its own message; the format-2 checksum against
 * every kind of edit; sizes checked before the data is read; non-finite weights; and the
 * atomic writer of autograd/ag_file.h (symlinks, modes, stale temporaries, abort). */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/ag_file.h"
#include "nn/nn.h"
#include "tests/tg_test.h"

static char *dir; /* the suite's temporary directory */

static const char *path_in(const char *name) { return tg_path(dir, name); }

/* A small model: a linear layer and a layer norm. */
typedef struct model {
    nn_linear fc;
    nn_layer_norm ln;
} model;

static nn_params *make_model(model *m, uint64_t seed) {
    nn_params *ps = nn_params_new();
    nn_linear_init(&m->fc, ps, "net.fc", 3, 2, true);
    nn_layer_norm_init(&m->ln, ps, "net.ln", 1, (const int[]){2}, NN_LAYER_NORM_EPS);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, seed), 0);
    return ps;
}

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

/* header JSON + data into buf as a safetensors file; hlen_override != 0 replaces the length. */
static size_t make_file(unsigned char *buf, const char *header, const void *data, size_t dlen,
                        uint64_t hlen_override) {
    uint64_t hl = hlen_override ? hlen_override : strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, header, strlen(header));
    if (dlen) memcpy(buf + 8 + strlen(header), data, dlen);
    return 8 + strlen(header) + dlen;
}

/* Writes the image to path_in(name) and loads it; returns nn_ckpt_load's status. */
static int load_image_file(const char *name, const unsigned char *buf, size_t n, nn_ckpt **out) {
    FILE *f = fopen(path_in(name), "wb");
    CU_ASSERT_EQUAL_FATAL(fwrite(buf, 1, n, f), n);
    fclose(f);
    return nn_ckpt_load(out, path_in(name));
}

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

/* Entries of directory d other than "." and ".." (hidden temporaries included). */
static int count_entries(const char *d) {
    int n = 0;
    DIR *dd = opendir(d);
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (dd) closedir(dd);
    return n;
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

/* ---- The atomic writer (autograd/ag_file.h) ------------------------------------------------ */

/* The whole content of path into buf (NUL-terminated); returns its length or -1. */
static long slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* Writes text to path through ag_file; returns ag_file_commit's status. */
static int write_atomic(const char *path, const char *text) {
    ag_file af;
    FILE *f = ag_file_open(&af, path);
    if (!f) return -1;
    fputs(text, f);
    return ag_file_commit(&af);
}

static void test_file_symlink_mode(void) {
    char sub[128], real[192], link[192], link2[192], dangling[192], buf[64], lt[192];
    snprintf(sub, sizeof sub, "%s/links", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    snprintf(real, sizeof real, "%s/real.txt", sub);
    snprintf(link, sizeof link, "%s/link.txt", sub);
    snprintf(link2, sizeof link2, "%s/link2.txt", sub);
    snprintf(dangling, sizeof dangling, "%s/dangling.txt", sub);
    CU_ASSERT_EQUAL(write_atomic(real, "old"), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(real, 0600), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("real.txt", link), 0); /* relative, as ln -s makes them */
    CU_ASSERT_EQUAL_FATAL(symlink(link, link2), 0);      /* absolute, a chain of two */
    /* Through the chain: the links stay links, the target gets the data, keeps mode 0600. */
    CU_ASSERT_EQUAL(write_atomic(link2, "new"), 0);
    struct stat st;
    CU_ASSERT_EQUAL(lstat(link, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    CU_ASSERT_EQUAL(lstat(link2, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    ssize_t k = readlink(link, lt, sizeof lt - 1);
    CU_ASSERT_EQUAL_FATAL(k, 8);
    lt[k] = '\0';
    CU_ASSERT_STRING_EQUAL(lt, "real.txt");
    CU_ASSERT_EQUAL(slurp(real, buf, sizeof buf), 3);
    CU_ASSERT_STRING_EQUAL(buf, "new");
    CU_ASSERT_EQUAL(stat(real, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
    /* A checkpoint saved through a link: the same. */
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_save(ck, link), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_EQUAL(lstat(link, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    CU_ASSERT_EQUAL(stat(real, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
    CU_ASSERT_EQUAL(nn_ckpt_load(&ck, link), 0);
    nn_ckpt_free(ck);
    /* A dangling link creates its target; a new file gets 0666 & ~umask. */
    CU_ASSERT_EQUAL_FATAL(symlink("created.txt", dangling), 0);
    mode_t old = umask(027);
    CU_ASSERT_EQUAL(write_atomic(dangling, "made"), 0);
    umask(old);
    snprintf(real, sizeof real, "%s/created.txt", sub);
    CU_ASSERT_EQUAL(slurp(real, buf, sizeof buf), 4);
    CU_ASSERT_EQUAL(stat(real, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0640);
    CU_ASSERT_EQUAL(lstat(dangling, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    /* 3 links, real.txt, created.txt: no temporary left. */
    CU_ASSERT_EQUAL(count_entries(sub), 5);
    /* A link loop. */
    snprintf(link, sizeof link, "%s/loop.txt", sub);
    CU_ASSERT_EQUAL_FATAL(symlink("loop.txt", link), 0);
    TG_EXPECT_ERROR(write_atomic(link, "x"), "loop.txt: more than 40 levels of symbolic links");
    /* A device is written in place. */
    CU_ASSERT_EQUAL(write_atomic("/dev/null", "discarded"), 0);
}

static void test_file_stale_abort(void) {
    char sub[128], target[192], p[256], buf[64];
    snprintf(sub, sizeof sub, "%s/stale", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    snprintf(target, sizeof target, "%s/out.bin", sub);
    CU_ASSERT_EQUAL(write_atomic(target, "keep"), 0);
    /* A pid that no longer exists: a child that has exited and been reaped. */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CU_ASSERT_FATAL(dead > 0);
    waitpid(dead, NULL, 0);
    static const char *const names[] = {".out.bin.tmp.%ld.aB3dE9",   /* stale: removed */
                                        ".out.bin.tmp.1.aB3dE9",     /* pid 1 lives: kept */
                                        ".other.bin.tmp.%ld.aB3dE9", /* another target: kept */
                                        ".out.bin.tmp.%ld.toolong7", /* not our pattern: kept */
                                        "out.bin.tmp.XXXXXX"};       /* not ours: kept */
    for (int i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof name, names[i], (long)dead);
        snprintf(p, sizeof p, "%s/%s", sub, name);
        FILE *f = fopen(p, "wb");
        fputs("partial", f);
        fclose(f);
    }
    CU_ASSERT_EQUAL(count_entries(sub), 6);
    /* Open: the stale temporary goes, ours appears under the documented name. */
    ag_file af;
    FILE *f = ag_file_open(&af, target);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    snprintf(p, sizeof p, "%s/.out.bin.tmp.%ld.", sub, (long)getpid());
    CU_ASSERT_EQUAL(strncmp(af.tmp, p, strlen(p)), 0);
    CU_ASSERT_EQUAL(strlen(af.tmp), strlen(p) + 6);
    CU_ASSERT_EQUAL(access(af.tmp, F_OK), 0);
    snprintf(p, sizeof p, "%s/.out.bin.tmp.%ld.aB3dE9", sub, (long)dead);
    CU_ASSERT_EQUAL(access(p, F_OK), -1);
    CU_ASSERT_EQUAL(count_entries(sub), 6); /* out.bin, 4 kept, our temporary */
    /* Abort: the target intact, the temporary gone; abort again is a no-op. */
    fputs("half-written", f);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    ag_file_abort(&af);
    ag_file_abort(&af);
    CU_ASSERT_PTR_NULL(af.fp);
    CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
    CU_ASSERT_EQUAL(slurp(target, buf, sizeof buf), 4);
    CU_ASSERT_STRING_EQUAL(buf, "keep");
    CU_ASSERT_EQUAL(count_entries(sub), 5);
    /* Commit on a closed ag_file is an error, not a crash. */
    TG_EXPECT_ERROR(ag_file_commit(&af), "not open");
}

/* ---- buffers (BatchNorm's running statistics) -------------------------------------------- */

static nn_params *make_bn(nn_batch_norm1d *bn, nn_linear *fc) {
    nn_params *ps = nn_params_new();
    nn_linear_init(fc, ps, "net.fc", 3, 2, true);
    nn_batch_norm1d_init(bn, ps, "net.bn", 2, 1e-5, 0.1);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 3), 0);
    return ps;
}

/* A BatchNorm1d store trained three batches: its checkpoint holds the parameters and the
 * buffers in the state_dict's order, num_batches_tracked as I64; a fresh store loads the same
 * running statistics; a file written as PyTorch does (I64 counter) loads. */
static void test_buffers(void) {
    nn_batch_norm1d bn, bn2;
    nn_linear fc, fc2;
    nn_params *ps = make_bn(&bn, &fc);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    for (int step = 0; step < 3; step++) {
        ag_tensor *x = ag_tensor_new(t, AG_SHAPE(4, 2));
        for (int i = 0; i < 8; i++) x->data[i] = (ag_real)(i * (step + 1) % 5) - 1;
        CU_ASSERT_PTR_NOT_NULL_FATAL(nn_batch_norm1d_forward(&bn, &c, x));
        ag_tape_reset(t);
    }
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 3);
    CU_ASSERT_NOT_EQUAL(bn.running_mean->data[0], 0);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_add_params(ck, ps), 0);
    static const char *order[] = {"net.fc.weight",
                                  "net.fc.bias",
                                  "net.bn.weight",
                                  "net.bn.bias",
                                  "net.bn.running_mean",
                                  "net.bn.running_var",
                                  "net.bn.num_batches_tracked"};
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_count(ck), 7);
    for (size_t i = 0; i < 7; i++) CU_ASSERT_STRING_EQUAL(nn_ckpt_at(ck, i)->name, order[i]);
    const nn_ckpt_tensor *nbt = nn_ckpt_find(ck, "net.bn.num_batches_tracked");
    CU_ASSERT_EQUAL(nbt->dtype, NN_I64);
    CU_ASSERT_EQUAL(nbt->ndim, 0);
    int64_t count = 0;
    CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, "net.bn.num_batches_tracked", 0, NULL, &count), 0);
    CU_ASSERT_EQUAL(count, 3);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("bn.safetensors")), 0);
    nn_ckpt_free(ck);

    nn_params *ps2 = make_bn(&bn2, &fc2);
    CU_ASSERT_EQUAL_FATAL(nn_load_params(ps2, path_in("bn.safetensors")), 0);
    for (size_t i = 0; i < nn_params_tensor_count(ps); i++) {
        const ag_tensor *a = nn_params_tensor_at(ps, i), *b = nn_params_tensor_at(ps2, i);
        CU_ASSERT_EQUAL_FATAL(a->numel, b->numel);
        for (ptrdiff_t k = 0; k < a->numel; k++) CU_ASSERT_EQUAL(a->data[k], b->data[k]);
    }
    CU_ASSERT_EQUAL(bn2.num_batches_tracked->data[0], 3);
    /* the eval forward of both agrees: the same running statistics */
    c.training = false;
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 2));
    for (int i = 0; i < 4; i++) x->data[i] = (ag_real)i;
    ag_tensor *y1 = nn_batch_norm1d_forward(&bn, &c, x), *y2 = nn_batch_norm1d_forward(&bn2, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(y1->data[i], y2->data[i]);
    nn_params_free(ps2);

    /* as PyTorch writes a BatchNorm1d(2)'s state_dict: F32 and an I64 counter of 7 */
    static const unsigned char data[] = {
        0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40, /* weight 1, 2 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0xBF, /* bias 0, -1 */
        0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x40, 0x40, /* running_mean 0.5, 3 */
        0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0x80, 0x3E, /* running_var 4, 0.25 */
        0x07, 0,    0,    0,    0,    0,    0,    0,    /* num_batches_tracked 7 */
    };
    const char *hdr =
        "{\"bn.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"bn.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
        "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
        "\"bn.running_var\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
        "\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]}}";
    unsigned char buf[1024];
    size_t n = make_file(buf, hdr, data, sizeof data, 0);
    nn_ckpt *pt;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&pt, buf, n, "torch_bn.safetensors", NULL), 0);
    nn_params *ps3 = nn_params_new();
    nn_batch_norm1d bn3;
    nn_batch_norm1d_init(&bn3, ps3, "bn", 2, 1e-5, 0.1);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps3, 1), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_params(pt, ps3, 0), 0);
    CU_ASSERT_EQUAL(bn3.weight->data[1], 2);
    CU_ASSERT_EQUAL(bn3.bias->data[1], -1);
    CU_ASSERT_EQUAL(bn3.running_mean->data[1], 3);
    CU_ASSERT_EQUAL(bn3.running_var->data[1], 0.25f);
    CU_ASSERT_EQUAL(bn3.num_batches_tracked->data[0], 7);
    /* an I64 tensor where the store wants floats is refused */
    TG_EXPECT_ERROR(nn_ckpt_read(pt, "bn.num_batches_tracked", 0, NULL, (ag_real[1]){0}),
                    "dtype I64, expected a float dtype");
    nn_ckpt_free(pt);
    nn_params_free(ps3);
    nn_params_free(ps);
    ag_tape_free(t);
}

/* ---- non-strict loads (PyTorch's strict=False) ------------------------------------------- */

typedef struct encoder {
    nn_embedding emb;
    nn_lstm rnn;
    nn_batch_norm1d bn;
} encoder;

static void encoder_init(encoder *e, nn_params *ps) {
    nn_embedding_init(&e->emb, ps, "encoder.embedding", 10, 4);
    nn_lstm_init(&e->rnn, ps, "encoder.rnn", 4, 3, 1, 0);
    nn_batch_norm1d_init(&e->bn, ps, "encoder.bn", 3, 1e-5, 0.1);
}

/* A pretrained encoder's checkpoint into a new model's store (encoder + decoder): the
 * encoder's tensors loaded, the decoder's reported missing, the checkpoint's extra tensor
 * unexpected; a shape mismatch names both shapes; a checkpoint matching nothing is an error. */
static void test_partial_load(void) {
    nn_params *pre = nn_params_new();
    encoder e;
    encoder_init(&e, pre);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(pre, 7), 0);
    e.bn.num_batches_tracked->data[0] = 5;
    e.bn.running_var->data[2] = 9;
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_add_params(ck, pre), 0);
    CU_ASSERT_EQUAL_FATAL(
        nn_ckpt_add(ck, "head.weight", 1, (const int[]){2}, (const ag_real[]){1, 2}), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_add(ck, "optim.step", 0, NULL, (const ag_real[]){3}), 0);

    nn_params *ps = nn_params_new();
    encoder e2;
    nn_linear dec;
    encoder_init(&e2, ps);
    nn_linear_init(&dec, ps, "decoder.dense", 3, 10, true);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 8), 0);
    ag_real dec_before = dec.weight->data[0];
    /* strict: refused, pointing at the non-strict load */
    TG_EXPECT_ERROR(nn_ckpt_load_params(ck, ps, 0), "decoder.dense.weight' is missing");
    nn_ckpt_load_report r;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_params_partial(ck, ps, &r), 0);
    CU_ASSERT_EQUAL(r.loaded, 1 + 4 + 5);
    CU_ASSERT_EQUAL_FATAL(r.n_missing, 2);
    CU_ASSERT_STRING_EQUAL(r.missing[0], "decoder.dense.weight");
    CU_ASSERT_STRING_EQUAL(r.missing[1], "decoder.dense.bias");
    CU_ASSERT_EQUAL_FATAL(r.n_unexpected, 1);
    CU_ASSERT_STRING_EQUAL(r.unexpected[0], "head.weight");
    nn_ckpt_load_report_free(&r);
    for (size_t i = 0; i < nn_params_tensor_count(pre); i++) {
        const ag_tensor *a = nn_params_tensor_at(pre, i), *b = nn_params_find(ps, a->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        for (ptrdiff_t k = 0; k < a->numel; k++) CU_ASSERT_EQUAL(a->data[k], b->data[k]);
    }
    CU_ASSERT_EQUAL(e2.bn.num_batches_tracked->data[0], 5);
    CU_ASSERT_EQUAL(dec.weight->data[0], dec_before);              /* untouched */
    CU_ASSERT_EQUAL(nn_ckpt_load_params_partial(ck, ps, NULL), 0); /* no report wanted */

    /* a shape mismatch: an error naming both shapes, the store untouched */
    nn_params *wide = nn_params_new();
    nn_embedding emb;
    nn_embedding_init(&emb, wide, "encoder.embedding", 10, 5);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(wide, 1), 0);
    ag_real w0 = emb.weight->data[0];
    TG_EXPECT_ERROR(nn_ckpt_load_params_partial(ck, wide, &r),
                    "tensor 'encoder.embedding.weight' has shape [10, 4], expected [10, 5]");
    CU_ASSERT_EQUAL(emb.weight->data[0], w0);
    CU_ASSERT_EQUAL(r.n_missing + r.n_unexpected + r.loaded, 0);
    nn_params_free(wide);

    /* nothing matches: an error */
    nn_params *other = nn_params_new();
    nn_linear fc;
    nn_linear_init(&fc, other, "net.fc", 3, 2, true);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(other, 1), 0);
    TG_EXPECT_ERROR(nn_ckpt_load_params_partial(ck, other, &r),
                    "a non-strict load matched nothing");
    nn_params_free(other);
    nn_ckpt_free(ck);
    nn_params_free(ps);
    nn_params_free(pre);
}

/* ---- Streamed saves: borrowed tensors --------------------------------------------------- */

/* The checkpoint of the streamed tests: tensors of the store dtype, an int64 tensor between
 * them, an empty one and a scalar, borrowed or copied as ck is set. vals gets the 21 values
 * of the float tensors (kept alive by the caller while ck borrows them). */
static void streamed_content(nn_ckpt *ck, ag_real *vals) {
    for (int i = 0; i < 21; i++) vals[i] = (ag_real)((i - 7) * 0.375);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "w", 2, (const int[]){3, 5}, vals), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add_i64(ck, "count", 1, (const int[]){2}, (const int64_t[]){7, -3}), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "b", 1, (const int[]){5}, vals + 15), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "empty", 2, (const int[]){0, 2}, NULL), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "s", 0, NULL, vals + 20), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "k", "v"), 0);
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Copied or borrowed, saved to a file or to memory: the same bytes as the files written before
 * saves were streamed (length and FNV-1a of streamed_content's image as the build of commit
 * b2cfeb6 wrote it, F32 and F64). */
static void test_streamed_bytes(void) {
    static const size_t want_len[2] = {484, 576};
    static const uint64_t want_fnv[2] = {0xf8e4ef8e71d0af1cull, 0xe729ae4598a55043ull};
    for (int f64 = 0; f64 < 2; f64++)
        for (int borrow = 0; borrow < 2; borrow++) {
            nn_ckpt *ck = nn_ckpt_new();
            CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
            if (f64) CU_ASSERT_EQUAL(nn_ckpt_set_store_dtype(ck, NN_F64), 0);
            CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, borrow), 0);
            ag_real vals[21];
            streamed_content(ck, vals);
            unsigned char *img;
            size_t n;
            CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &img, &n), 0);
            CU_ASSERT_EQUAL(n, want_len[f64]);
            CU_ASSERT_EQUAL(fnv1a(img, n), want_fnv[f64]);
            CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("streamed.safetensors")), 0);
            static unsigned char file[1024];
            FILE *f = fopen(path_in("streamed.safetensors"), "rb");
            CU_ASSERT_PTR_NOT_NULL_FATAL(f);
            size_t got = fread(file, 1, sizeof file, f);
            fclose(f);
            CU_ASSERT_EQUAL(got, n);
            CU_ASSERT_EQUAL(memcmp(file, img, n), 0);
            /* read back from the checkpoint in memory, borrowed or not */
            ag_real w[15];
            int64_t c[2];
            CU_ASSERT_EQUAL(nn_ckpt_read(ck, "w", 2, (const int[]){3, 5}, w), 0);
            CU_ASSERT_EQUAL(memcmp(w, vals, sizeof w), 0);
            CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, "count", 1, (const int[]){2}, c), 0);
            CU_ASSERT_TRUE(c[0] == 7 && c[1] == -3);
            free(img);
            nn_ckpt_free(ck);
        }
}

/* A borrowed tensor is taken as it is when saved; the file loads, checksum verified. */
static void test_borrowed_taken_at_save(void) {
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(NULL, true), -1);
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, true), 0);
    enum { BIG = 100000 }; /* 400 KB: many chunks of the 16 KiB buffer */
    ag_real *v = malloc(BIG * sizeof *v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    for (int i = 0; i < BIG; i++) v[i] = (ag_real)i;
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "v", 1, (const int[]){BIG}, v), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "tapegrad.model", "test"), 0);
    v[BIG - 1] = -1; /* after the add, before the save: saved */
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("borrowed.safetensors")), 0);
    nn_ckpt_free(ck);
    nn_ckpt *in;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&in, path_in("borrowed.safetensors")), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(in), NN_CKPT_CHECKED_FILE);
    ag_real *back = malloc(BIG * sizeof *back);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(nn_ckpt_read(in, "v", 1, (const int[]){BIG}, back), 0);
    CU_ASSERT_EQUAL(memcmp(back, v, BIG * sizeof *v), 0);
    CU_ASSERT_EQUAL(back[BIG - 1], -1);
    nn_ckpt_free(in);
    free(back);
    free(v);
}

/* A loaded file whose data section is not in the order of its header, plus a borrowed tensor:
 * the save writes each tensor at its range. */
static void test_streamed_data_order(void) {
    static const float data[4] = {3, 4, 1, 2}; /* b's values, then a's */
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char buf[512];
    size_t n = make_file(buf, hdr, data, sizeof data, 0);
    nn_ckpt *ck;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&ck, buf, n, "order.safetensors", NULL), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, true), 0);
    const ag_real c[3] = {5, 6, 7};
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "c", 1, (const int[]){3}, c), 0);
    unsigned char *img;
    size_t m;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &img, &m), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&ck, img, m, "resaved", NULL), 0);
    ag_real v[3];
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "a", 1, (const int[]){2}, v), 0);
    CU_ASSERT_TRUE(v[0] == 1 && v[1] == 2);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "b", 1, (const int[]){2}, v), 0);
    CU_ASSERT_TRUE(v[0] == 3 && v[1] == 4);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "c", 1, (const int[]){3}, v), 0);
    CU_ASSERT_TRUE(v[0] == 5 && v[1] == 6 && v[2] == 7);
    CU_ASSERT_EQUAL(nn_ckpt_find(ck, "c")->begin, 16);
    nn_ckpt_free(ck);
    free(img);
}

/* A write that fails while the tensors stream (a full device) is reported with its cause. */
static void test_streamed_write_error(void) {
    if (access("/dev/full", W_OK) != 0) return; /* no such device here */
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, true), 0);
    enum { BIG = 1 << 20 }; /* 4 MB: more than the stream's buffer */
    ag_real *v = calloc(BIG, sizeof *v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "v", 1, (const int[]){BIG}, v), 0);
    TG_EXPECT_ERROR(nn_ckpt_save(ck, "/dev/full"),
                    "/dev/full: writing the temporary file failed: No space left on device");
    nn_ckpt_free(ck);
    free(v);
    model m; /* the shortcut, which borrows the store's buffers, fails the same way */
    nn_params *ps = make_model(&m, 1);
    TG_EXPECT_ERROR(nn_save_params(ps, "/dev/full"), "No space left on device");
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"round trip: bit-identical values and metadata", test_roundtrip},
    {"F64 store dtype, scalars, empty tensors", test_f64_store},
    {"files of other writers: F16, BF16, no checksum", test_other_writers},
    {"malformed files: one per validation rule", test_malformed_table},
    {"checksum catches a flipped data byte", test_checksum_flip},
    {"load rules: missing, extra, shape, dtype, optim.*", test_load_rules},
    {"atomic save: temporary file and rename", test_atomic_save},
    {"format-2 checksum: every edit of a marked file refused", test_checksum_edits},
    {"legacy files: data checksum verified, header not", test_legacy},
    {"sizes checked before the data is read", test_sizes_first},
    {"non-finite weights refused, loadable to inspect", test_nonfinite},
    {"ag_file: symlinks, modes, devices", test_file_symlink_mode},
    {"ag_file: stale temporaries, abort", test_file_stale_abort},
    {"buffers: BatchNorm's running statistics, I64 counter", test_buffers},
    {"non-strict load: a pretrained encoder into a new model", test_partial_load},
    {"streamed saves: the bytes of the copying writer, borrowed or not", test_streamed_bytes},
    {"a borrowed tensor is saved as it is at the save", test_borrowed_taken_at_save},
    {"a loaded file's data out of header order, plus a borrowed tensor", test_streamed_data_order},
    {"a write failing mid-stream is reported", test_streamed_write_error},
    CU_TEST_INFO_NULL,
};
/* The suite's files go to one temporary directory, removed at the end. */
int main(void) {
    dir = tg_temp_dir();
    int rc = tg_test_main("nn_checkpoint", tests);
    if (tg_remove(dir)) perror("test_ckpt: removing its temporary directory");
    return rc;
}
