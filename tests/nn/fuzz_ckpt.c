/* tests/nn/fuzz_ckpt.c -- libFuzzer harness for the checkpoint reader of nn/io (header, tensor
 * table, sizes, checksums, non-finite values). Built and run by run_fuzz.sh:
 *
 *     tests/nn/run_fuzz.sh 60        # seconds
 *
 * Each input is a whole file image, loaded with nn_ckpt_load_mem. Invariants, each checked
 * with abort() so that libFuzzer reports the input:
 *   - a load returns 0 with a checkpoint, or -1 with NULL and a message naming the file;
 *   - what loads with the default options loads with allow_nonfinite, and what only the
 *     latter loads was refused for a non-finite value;
 *   - an accepted checkpoint's tensors lie inside its data section, numel x dtype size bytes
 *     each, and its float tensors decode;
 *   - re-serialised (nn_ckpt_save_mem), it re-loads as a format-2 file with every byte
 *     verified, to the same tensors (names, dtypes, shapes, bytes) and the same metadata
 *     (format and checksum keys aside), and serialising that again gives the same bytes;
 *   - that re-serialised image with any one bit flipped is refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/checkpoint.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_ckpt: invariant failed at %s:%d: %s\n  last error: %s\n",        \
                    __FILE__, __LINE__, #cond, ag_last_error());                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define NAME "fuzz.safetensors"

static bool is_reserved(const char *k) {
    return !strcmp(k, NN_CKPT_FORMAT_KEY) || !strcmp(k, NN_CKPT_CHECKSUM_KEY) ||
           !strcmp(k, NN_CKPT_LEGACY_CHECKSUM_KEY);
}

/* Loads an image; checks the status convention. Returns the checkpoint or NULL. */
static nn_ckpt *load(const uint8_t *data, size_t size, const char *name, bool lenient) {
    nn_ckpt_load_opts o = {.allow_nonfinite = lenient};
    nn_ckpt *ck = (nn_ckpt *)&o; /* must be overwritten */
    int rc = nn_ckpt_load_mem(&ck, data, size, name, &o);
    CHECK(rc == 0 || rc == -1);
    CHECK((rc == 0) == (ck != NULL));
    if (rc) CHECK(strstr(ag_last_error(), name) != NULL);
    return ck;
}

/* The tensor table is consistent with a data section inside an image of size bytes; float
 * tensors decode. */
static void check_tensors(const nn_ckpt *ck, size_t size) {
    uint64_t covered = 0;
    for (size_t i = 0; i < nn_ckpt_count(ck); i++) {
        const nn_ckpt_tensor *t = nn_ckpt_at(ck, i);
        CHECK(t && t->name && t->begin <= t->end);
        CHECK(t->ndim >= 0 && t->ndim <= NN_CKPT_MAX_DIMS);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        CHECK(numel == t->numel);
        CHECK(t->end - t->begin == t->numel * nn_dtype_size(t->dtype));
        CHECK(t->end <= size - 8);
        covered += t->end - t->begin;
        CHECK(nn_ckpt_find(ck, t->name) == t); /* names are unique */
        if ((t->dtype == NN_F32 || t->dtype == NN_F64 || t->dtype == NN_F16 ||
             t->dtype == NN_BF16) &&
            t->numel <= 4096) {
            int shape[NN_CKPT_MAX_DIMS];
            bool fits = true; /* a dim beyond int (beside a 0) cannot be asked for */
            for (int d = 0; d < t->ndim; d++) {
                fits = fits && t->shape[d] <= INT32_MAX;
                shape[d] = fits ? (int)t->shape[d] : 0;
            }
            ag_real *v = malloc((size_t)t->numel * sizeof *v + 1);
            CHECK(v);
            if (fits) CHECK(nn_ckpt_read(ck, t->name, t->ndim, shape, v) == 0);
            free(v);
        }
    }
    CHECK(covered <= size - 8);
}

/* a and b hold the same tensors (bytes compared through a re-serialisation) and metadata. */
static void check_same(const nn_ckpt *a, const nn_ckpt *b) {
    CHECK(nn_ckpt_count(a) == nn_ckpt_count(b));
    for (size_t i = 0; i < nn_ckpt_count(a); i++) {
        const nn_ckpt_tensor *x = nn_ckpt_at(a, i), *y = nn_ckpt_at(b, i);
        CHECK(strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->ndim == y->ndim);
        CHECK(memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof x->shape[0]) == 0);
        CHECK(x->begin == y->begin && x->end == y->end);
    }
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < nn_ckpt_meta_count(a); i++) {
        const char *k, *v;
        CHECK(nn_ckpt_meta_at(a, i, &k, &v) == 0);
        if (is_reserved(k)) continue;
        na++;
        const char *w = nn_ckpt_meta(b, k);
        CHECK(w && strcmp(v, w) == 0);
    }
    for (size_t i = 0; i < nn_ckpt_meta_count(b); i++) {
        const char *k;
        CHECK(nn_ckpt_meta_at(b, i, &k, NULL) == 0);
        if (!is_reserved(k)) nb++;
    }
    CHECK(na == nb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nn_ckpt *strict = load(data, size, NAME, false);
    nn_ckpt *ck = load(data, size, NAME, true);
    if (strict) CHECK(ck != NULL);
    if (!strict && ck) CHECK(strstr(ag_last_error(), "non-finite") != NULL);
    nn_ckpt_free(strict);
    if (!ck) return 0;
    CHECK(size >= 8);
    check_tensors(ck, size);

    unsigned char *img, *img2;
    size_t n, n2;
    CHECK(nn_ckpt_save_mem(ck, &img, &n) == 0);
    nn_ckpt *again = load(img, n, "resaved", true);
    CHECK(again != NULL);
    CHECK(nn_ckpt_checked(again) == NN_CKPT_CHECKED_FILE);
    CHECK(strcmp(nn_ckpt_meta(again, NN_CKPT_FORMAT_KEY), NN_CKPT_FORMAT) == 0);
    check_same(ck, again);
    CHECK(nn_ckpt_save_mem(again, &img2, &n2) == 0);
    CHECK(n == n2 && memcmp(img, img2, n) == 0); /* also: the tensors' bytes are the same */
    /* One bit flipped, at a place the input picks: refused. */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
    size_t bit = (size_t)(h % (n * 8));
    img2[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    nn_ckpt *flipped = load(img2, n, "flipped", true);
    if (flipped) fprintf(stderr, "fuzz_ckpt: bit %zu of the re-serialised image flipped\n", bit);
    CHECK(flipped == NULL);
    free(img);
    free(img2);
    nn_ckpt_free(again);
    nn_ckpt_free(ck);
    return 0;
}
