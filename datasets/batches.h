/* datasets/batches.h -- shuffled mini-batches over arrays in memory: features, labels,
 * lengths ..., any number of row-major arrays with one row per example (PyTorch's
 * DataLoader over a TensorDataset). The English-French pipeline has its own iterator
 * (ds_batches, datasets/fra_eng.h); this one serves any data already in arrays.
 *
 *     float xs[N * 4];  int32_t ys[N];                   // example i: xs[4i..4i+3], ys[i]
 *     ds_array arrays[2] = {DS_ARRAY(xs, 4), DS_ARRAY(ys, 1)};
 *     ds_loader_opts o = {.batch_size = 32, .shuffle = true, .seed = 1};
 *     ds_loader *it;
 *     if (ds_loader_new(N, 2, arrays, &o, &it)) { fprintf(stderr, "%s\n", ag_last_error()); ... }
 *     for (int64_t epoch = 0; epoch < 10; epoch++) {
 *         ds_loader_epoch(it, epoch);                    // the order of epoch e: f(seed, e)
 *         ds_minibatch b;
 *         while (ds_loader_next(it, &b)) {
 *             const float *x = b.data[0];                // (b.size, 4), row-major
 *             const int32_t *y = b.data[1];              // (b.size)
 *             ...
 *         }
 *     }
 *     ds_loader_free(it);
 *
 * Order: with shuffle, epoch e visits the rows in the order ag_rng_permutation(n, seed, e)
 * (autograd/ag_base.h, which spells out the algorithm), so the same seed gives the same
 * batches on every machine and any epoch can be replayed alone; without shuffle, 0..n-1.
 * Batches take batch_size consecutive rows of that order; the last one has the remaining
 * n % batch_size rows, or is dropped with drop_last (as PyTorch's DataLoader).
 *
 * Ownership: the arrays are borrowed (not copied): they must stay valid and unchanged while
 * the loader is used. A batch's rows are gathered into buffers the loader owns; the pointers in
 * a ds_minibatch are valid until the next ds_loader_next, ds_loader_epoch or ds_loader_free.
 * Errors: 0 or -1, the message in ag_last_error() (datasets/common.h). */
#ifndef TG_DS_BATCHES_H
#define TG_DS_BATCHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Arrays one loader serves at most. */
#define DS_LOADER_MAX_ARRAYS 8

/* One array: n_rows rows of row_elems elements of elem_size bytes each, row-major. */
typedef struct ds_array {
    const void *data;
    size_t elem_size; /* bytes per element, > 0 (e.g. sizeof(float)) */
    size_t row_elems; /* elements per row, > 0 */
} ds_array;

/* The array of a flat pointer p (float *, int32_t * ...) with row_elems elements a row. */
#ifdef __cplusplus
#define DS_ARRAY(p, row_elems) (ds_array{(p), sizeof *(p), (size_t)(row_elems)})
#else
#define DS_ARRAY(p, row_elems) ((ds_array){(p), sizeof *(p), (row_elems)})
#endif

typedef struct ds_loader_opts {
    int64_t batch_size; /* rows per batch, >= 1 */
    bool shuffle;       /* false: rows in order 0..n-1 every epoch */
    bool drop_last;     /* drop a last batch smaller than batch_size */
    uint64_t seed;      /* of the shuffle */
} ds_loader_opts;

typedef struct ds_minibatch {
    int64_t size;                           /* rows in this batch */
    int64_t index;                          /* the batch's number in the epoch, from 0 */
    const int64_t *rows;                    /* the size row indices gathered */
    const void *data[DS_LOADER_MAX_ARRAYS]; /* array k's rows, (size, row_elems), row-major */
} ds_minibatch;

typedef struct ds_loader ds_loader;

/* A loader over n_rows >= 1 rows of n_arrays (1 to DS_LOADER_MAX_ARRAYS) arrays, positioned
 * at the start of epoch 0. Returns 0, or -1 (a bad argument, named; out of memory); *out is
 * NULL on failure. */
int ds_loader_new(int64_t n_rows, int n_arrays, const ds_array *arrays, const ds_loader_opts *opts,
                  ds_loader **out);
/* Restarts at the beginning of epoch `epoch` (>= 0). */
void ds_loader_epoch(ds_loader *it, int64_t epoch);
/* Fills *b with the next batch of the epoch and returns true, or returns false at its end. */
bool ds_loader_next(ds_loader *it, ds_minibatch *b);
/* Batches per epoch: ceil(n / batch_size), or floor with drop_last. */
int64_t ds_loader_count(const ds_loader *it);
/* NULL is a no-op. */
void ds_loader_free(ds_loader *it);

#ifdef __cplusplus
}
#endif

#endif
