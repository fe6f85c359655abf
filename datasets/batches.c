/* datasets/batches.c -- shuffled mini-batches over arrays in memory (datasets/batches.h). */
#include <stdlib.h>
#include <string.h>

#include "datasets/batches.h"
#include "datasets/internal.h"

struct ds_loader {
    int64_t n, B;
    bool shuffle, drop_last;
    uint64_t seed;
    int n_arrays;
    ds_array arrays[DS_LOADER_MAX_ARRAYS];
    size_t row_bytes[DS_LOADER_MAX_ARRAYS];
    int64_t *order;                  /* this epoch's row order */
    int64_t pos, index;              /* next position in order, next batch number */
    char *buf[DS_LOADER_MAX_ARRAYS]; /* (B, row) gathered rows per array */
};

void ds_loader_free(ds_loader *it) {
    if (!it) return;
    for (int k = 0; k < it->n_arrays; k++) free(it->buf[k]);
    free(it->order);
    free(it);
}

int ds_loader_new(int64_t n_rows, int n_arrays, const ds_array *arrays, const ds_loader_opts *opts,
                  ds_loader **out) {
    if (!out) return ag_error("ds_loader_new: out is NULL");
    *out = NULL;
    if (!opts) return ag_error("ds_loader_new: opts is NULL");
    if (n_rows < 1 || (uint64_t)n_rows > SIZE_MAX / sizeof(int64_t))
        return ag_error("ds_loader_new: n_rows = %lld, expected >= 1", (long long)n_rows);
    if (opts->batch_size < 1)
        return ag_error("ds_loader_new: batch_size = %lld, expected >= 1",
                        (long long)opts->batch_size);
    if (n_arrays < 1 || n_arrays > DS_LOADER_MAX_ARRAYS || !arrays)
        return ag_error("ds_loader_new: %d arrays, expected 1 to %d", n_arrays,
                        DS_LOADER_MAX_ARRAYS);
    int64_t B = opts->batch_size < n_rows ? opts->batch_size : n_rows; /* buffer rows */
    for (int k = 0; k < n_arrays; k++) {
        const ds_array *a = &arrays[k];
        if (!a->data || a->elem_size == 0 || a->row_elems == 0)
            return ag_error("ds_loader_new: array %d has data %s, elem_size %zu, "
                            "row_elems %zu (expected data, and sizes > 0)",
                            k, a->data ? "set" : "NULL", a->elem_size, a->row_elems);
        if (a->row_elems > SIZE_MAX / a->elem_size ||
            (uint64_t)B > SIZE_MAX / (a->row_elems * a->elem_size))
            return ag_error("ds_loader_new: array %d: a batch of %lld rows of %zu x "
                            "%zu bytes is too large",
                            k, (long long)B, a->row_elems, a->elem_size);
    }
    ds_loader *it = calloc(1, sizeof *it);
    if (!it) return ag_error("ds_loader_new: out of memory");
    it->n = n_rows;
    it->B = opts->batch_size;
    it->shuffle = opts->shuffle;
    it->drop_last = opts->drop_last;
    it->seed = opts->seed;
    it->n_arrays = n_arrays;
    memcpy(it->arrays, arrays, (size_t)n_arrays * sizeof *arrays);
    bool ok = (it->order = malloc((size_t)n_rows * sizeof *it->order)) != NULL;
    for (int k = 0; k < n_arrays && ok; k++) {
        it->row_bytes[k] = arrays[k].row_elems * arrays[k].elem_size;
        ok = (it->buf[k] = malloc((size_t)B * it->row_bytes[k])) != NULL;
    }
    if (!ok) {
        ds_loader_free(it);
        return ag_error("ds_loader_new: out of memory for batches of %lld rows over "
                        "%lld rows",
                        (long long)B, (long long)n_rows);
    }
    ds_loader_epoch(it, 0);
    *out = it;
    return 0;
}

void ds_loader_epoch(ds_loader *it, int64_t epoch) {
    if (it->shuffle) {
        ag_rng_permutation(it->order, it->n, it->seed, (uint64_t)epoch);
    } else {
        for (int64_t i = 0; i < it->n; i++) it->order[i] = i;
    }
    it->pos = 0;
    it->index = 0;
}

bool ds_loader_next(ds_loader *it, ds_minibatch *b) {
    int64_t left = it->n - it->pos, size = left < it->B ? left : it->B;
    if (size <= 0 || (it->drop_last && size < it->B)) return false;
    memset(b, 0, sizeof *b);
    b->size = size;
    b->index = it->index++;
    b->rows = it->order + it->pos;
    for (int k = 0; k < it->n_arrays; k++) {
        const char *src = it->arrays[k].data;
        size_t rb = it->row_bytes[k];
        for (int64_t r = 0; r < size; r++) {
            TG_ASSERT(b->rows[r] >= 0 && b->rows[r] < it->n);
            memcpy(it->buf[k] + (size_t)r * rb, src + (size_t)b->rows[r] * rb, rb);
        }
        b->data[k] = it->buf[k];
    }
    it->pos += size;
    return true;
}

int64_t ds_loader_count(const ds_loader *it) {
    return it->n / it->B + (!it->drop_last && it->n % it->B != 0);
}
