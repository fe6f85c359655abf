/* ckpt_test_util.h -- what test_ckpt.c, test_ckpt_format.c and test_ckpt_io.c share: the
 * suite's temporary directory, a small model, safetensors images made by hand and loaded, a
 * directory's entries counted. */
#ifndef TG_TESTS_NN_CKPT_TEST_UTIL_H
#define TG_TESTS_NN_CKPT_TEST_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"
#include "tests/tg_test.h"

static char *dir; /* the suite's temporary directory */

static inline const char *path_in(const char *name) { return tg_path(dir, name); }

/* A small model: a linear layer and a layer norm. */
typedef struct model {
    nn_linear fc;
    nn_layer_norm ln;
} model;

static inline nn_params *make_model(model *m, uint64_t seed) {
    nn_params *ps = nn_params_new();
    nn_linear_init(&m->fc, ps, "net.fc", 3, 2, true);
    nn_layer_norm_init(&m->ln, ps, "net.ln", 1, (const int[]){2}, NN_LAYER_NORM_EPS);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, seed), 0);
    return ps;
}

/* header JSON + data into buf as a safetensors file; hlen_override != 0 replaces the length. */
static inline size_t make_file(unsigned char *buf, const char *header, const void *data,
                               size_t dlen, uint64_t hlen_override) {
    uint64_t hl = hlen_override ? hlen_override : strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, header, strlen(header));
    if (dlen) memcpy(buf + 8 + strlen(header), data, dlen);
    return 8 + strlen(header) + dlen;
}

/* Writes the image to path_in(name) and loads it; returns nn_ckpt_load's status. */
static inline int load_image_file(const char *name, const unsigned char *buf, size_t n,
                                  nn_ckpt **out) {
    FILE *f = fopen(path_in(name), "wb");
    CU_ASSERT_EQUAL_FATAL(fwrite(buf, 1, n, f), n);
    fclose(f);
    return nn_ckpt_load(out, path_in(name));
}

/* Entries of directory d other than "." and ".." (hidden temporaries included). */
static inline int count_entries(const char *d) {
    int n = 0;
    DIR *dd = opendir(d);
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (dd) closedir(dd);
    return n;
}

#endif
