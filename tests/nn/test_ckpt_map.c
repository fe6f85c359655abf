/* test_ckpt_map.c -- checkpoints mapped read-only (nn_ckpt_load_opts.map): the same tensors,
 * metadata and parameter bits as a read into memory, for a training checkpoint with optimizer
 * state (large enough for the released windows and pages to matter) and for a file whose F32
 * tensor starts at an odd offset; the same refusals (checksum, non-finite, truncation); a
 * mapped checkpoint refuses additions; the file replaced by rename under a mapping is not
 * seen. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/tg_test.h"

static char *dir;

static const nn_ckpt_load_opts MAPPED = {.map = true};

/* A model of two Linear layers (about 1.2 MB of float32) and, optionally, two "optim." moments
 * of its size, as a training checkpoint holds; saved to name. */
static nn_params *save_model(const char *name, uint64_t seed, bool optim) {
    nn_params *ps = nn_params_new();
    nn_linear a, b;
    nn_linear_init(&a, ps, "a", 300, 500, true);
    nn_linear_init(&b, ps, "b", 500, 301, false);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, seed), 0);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_add_params(ck, ps), 0);
    if (optim) {
        const ag_tensor *w = a.weight;
        ag_real *m = malloc(sizeof *m * (size_t)w->numel);
        for (ptrdiff_t i = 0; i < w->numel; i++) m[i] = (ag_real)i / 7;
        CU_ASSERT_EQUAL(nn_ckpt_add(ck, "optim.m.a.weight", 2, w->shape, m), 0);
        CU_ASSERT_EQUAL(nn_ckpt_add(ck, "optim.v.a.weight", 2, w->shape, m), 0);
        free(m);
    }
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "tapegrad.model", "two"), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, tg_path(dir, name)), 0);
    nn_ckpt_free(ck);
    return ps;
}

/* Loads name both ways into stores of seed 77: same tensors, metadata, checks and bits. */
static void expect_same_load(const char *name, const nn_params *want) {
    nn_ckpt *read, *mapped;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&read, tg_path(dir, name)), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_with(&mapped, tg_path(dir, name), &MAPPED), 0);
    CU_ASSERT_EQUAL(nn_ckpt_count(read), nn_ckpt_count(mapped));
    CU_ASSERT_EQUAL(nn_ckpt_meta_count(read), nn_ckpt_meta_count(mapped));
    CU_ASSERT_STRING_EQUAL(nn_ckpt_meta(mapped, "tapegrad.model"), "two");
    CU_ASSERT_EQUAL(nn_ckpt_checked(mapped), NN_CKPT_CHECKED_FILE);
    for (size_t i = 0; i < nn_ckpt_count(read); i++) {
        const nn_ckpt_tensor *r = nn_ckpt_at(read, i), *m = nn_ckpt_at(mapped, i);
        CU_ASSERT_STRING_EQUAL(r->name, m->name);
        CU_ASSERT_EQUAL(r->numel, m->numel);
        CU_ASSERT_EQUAL(r->begin, m->begin);
    }
    nn_params *p1 = save_model("scratch.safetensors", 77, false),
              *p2 = save_model("scratch.safetensors", 77, false);
    CU_ASSERT_EQUAL(nn_ckpt_load_params(read, p1, 0), 0);
    CU_ASSERT_EQUAL(nn_ckpt_load_params(mapped, p2, 0), 0);
    for (size_t i = 0; i < nn_params_count(want); i++) {
        const ag_tensor *w = nn_params_at(want, i), *a = nn_params_at(p1, i),
                        *b = nn_params_at(p2, i);
        CU_ASSERT_EQUAL(memcmp(a->data, w->data, sizeof(ag_real) * (size_t)w->numel), 0);
        CU_ASSERT_EQUAL(memcmp(b->data, w->data, sizeof(ag_real) * (size_t)w->numel), 0);
    }
    /* loaded twice from the same mapping (its pages given back after the first): the same */
    nn_params *p3 = save_model("scratch.safetensors", 78, false);
    CU_ASSERT_EQUAL(nn_ckpt_load_params(mapped, p3, 0), 0);
    CU_ASSERT_EQUAL(memcmp(nn_params_at(p3, 0)->data, nn_params_at(want, 0)->data,
                           sizeof(ag_real) * (size_t)nn_params_at(want, 0)->numel),
                    0);
    /* the optimizer's moments read through the mapping as through memory */
    const nn_ckpt_tensor *mt = nn_ckpt_find(mapped, "optim.m.a.weight");
    if (mt) {
        ag_real *x = malloc(sizeof *x * mt->numel), *y = malloc(sizeof *y * mt->numel);
        int shape[2] = {(int)mt->shape[0], (int)mt->shape[1]};
        CU_ASSERT_EQUAL(nn_ckpt_read(read, mt->name, 2, shape, x), 0);
        CU_ASSERT_EQUAL(nn_ckpt_read(mapped, mt->name, 2, shape, y), 0);
        CU_ASSERT_EQUAL(memcmp(x, y, sizeof *x * mt->numel), 0);
        CU_ASSERT_EQUAL(y[70], (ag_real)70 / 7);
        free(x);
        free(y);
    }
    nn_params_free(p1);
    nn_params_free(p2);
    nn_params_free(p3);
    nn_ckpt_free(read);
    nn_ckpt_free(mapped);
}

static void test_same_as_read(void) {
    nn_params *ps = save_model("train.safetensors", 5, true);
    expect_same_load("train.safetensors", ps);
    nn_params_free(ps);
    ps = save_model("model.safetensors", 6, false);
    expect_same_load("model.safetensors", ps);
    nn_params_free(ps);
}

/* A file as another writer may make it: a U8 tensor of 3 bytes, then an F32 tensor at data
 * offset 3 (unaligned in memory as in the file), no checksum. */
static void test_unaligned(void) {
    unsigned char img[256];
    const char *hdr = "{\"u\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                      "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[3,11]}}";
    size_t hl = strlen(hdr);
    for (int i = 0; i < 8; i++) img[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(img + 8, hdr, hl);
    const unsigned char data[11] = {1, 2, 3, 0x00, 0x00, 0x20, 0x40, 0x00, 0x00, 0x80, 0xBF};
    memcpy(img + 8 + hl, data, sizeof data);
    FILE *f = fopen(tg_path(dir, "odd.safetensors"), "wb");
    CU_ASSERT_EQUAL_FATAL(fwrite(img, 1, 8 + hl + sizeof data, f), 8 + hl + sizeof data);
    fclose(f);
    nn_ckpt *ck;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_with(&ck, tg_path(dir, "odd.safetensors"), &MAPPED), 0);
    ag_real v[2];
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "f", 1, (const int[]){2}, v), 0);
    CU_ASSERT_EQUAL(v[0], 2.5f);
    CU_ASSERT_EQUAL(v[1], -1.0f);
    nn_ckpt_free(ck);
}

/* Corruption, non-finite values and truncation refused as by a read; additions refused. */
static void test_refusals(void) {
    ag_set_error_handler(tg_capture, NULL);
    nn_params *ps = save_model("bad.safetensors", 8, true);
    const char *p = tg_path(dir, "bad.safetensors");
    FILE *f = fopen(p, "r+b");
    fseek(f, -5, SEEK_END); /* a byte of the last optimizer moment */
    int c = fgetc(f);
    fseek(f, -5, SEEK_END);
    fputc(c ^ 1, f);
    fclose(f);
    nn_ckpt *ck = NULL;
    TG_EXPECT_ERROR(nn_ckpt_load_with(&ck, p, &MAPPED), "bad.safetensors",
                    "checksum does not match");
    CU_ASSERT_PTR_NULL(ck);
    /* NaN in a parameter */
    nn_params_at(ps, 0)->data[3] = NAN;
    CU_ASSERT_EQUAL_FATAL(nn_save_params(ps, tg_path(dir, "nan.safetensors")), 0);
    TG_EXPECT_ERROR(nn_ckpt_load_with(&ck, tg_path(dir, "nan.safetensors"), &MAPPED),
                    "tensor 'a.weight'", "element 3 is NaN");
    /* truncated: refused by its sizes, before the data */
    f = fopen(tg_path(dir, "cut.safetensors"), "wb");
    fwrite("\x10\0\0\0\0\0\0\0{}", 1, 10, f);
    fclose(f);
    TG_EXPECT_ERROR(nn_ckpt_load_with(&ck, tg_path(dir, "cut.safetensors"), &MAPPED),
                    "cut.safetensors", "header length 16 exceeds the file");
    TG_EXPECT_ERROR(nn_ckpt_load_with(&ck, tg_path(dir, "none.safetensors"), &MAPPED),
                    "none.safetensors", "cannot open");
    /* read-only once mapped */
    nn_params_at(ps, 0)->data[3] = 0;
    CU_ASSERT_EQUAL_FATAL(nn_save_params(ps, tg_path(dir, "ok.safetensors")), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_with(&ck, tg_path(dir, "ok.safetensors"), &MAPPED), 0);
    TG_EXPECT_ERROR(nn_ckpt_add(ck, "x", 1, (const int[]){1}, (const ag_real[]){1}),
                    "mapped read-only");
    /* the file replaced (saves rename a new file into place) under the mapping: the old bytes */
    nn_params_at(ps, 0)->data[0] = 1234;
    CU_ASSERT_EQUAL_FATAL(nn_save_params(ps, tg_path(dir, "ok.safetensors")), 0);
    nn_params *q = save_model("scratch.safetensors", 9, false);
    CU_ASSERT_EQUAL(nn_ckpt_load_params(ck, q, 0), 0);
    CU_ASSERT_NOT_EQUAL(nn_params_at(q, 0)->data[0], 1234);
    nn_ckpt_free(ck);
    nn_params_free(q);
    nn_params_free(ps);
    ag_set_error_handler(NULL, NULL);
}

static CU_TestInfo tests[] = {
    {"mapped: the tensors, metadata and parameter bits of a read (with optim.*)",
     test_same_as_read},
    {"mapped: an F32 tensor at an odd offset", test_unaligned},
    {"mapped: checksum, NaN, truncation, missing file, additions, a renamed-over file",
     test_refusals},
    CU_TEST_INFO_NULL,
};

int main(void) {
    dir = tg_temp_dir();
    int rc = tg_test_main("nn_ckpt_map", tests);
    if (tg_remove(dir)) perror("test_ckpt_map: removing its temporary directory");
    return rc;
}
