/* datasets/fra_split.c -- the train/valid/test split of the fra-eng pairs: random (d2l-style,
 * by pairs) or disjoint (by connected components of shared sentences); the count of test
 * pairs whose English side is also a training pair's (fra_eng.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/fra_internal.h"
#include "datasets/internal.h"
#include "autograd/ag_base.h"

const char *const ds_split_mode_names[] = {"random", "disjoint", NULL};

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ids[p] = the id of pair p's preprocessed sentence on `side` among the distinct sentences of
 * that side (equal token sequences, joined by single spaces, get equal ids). */
static int sentence_ids(const ds_fra *d, ds_side side, int32_t *ids) {
    ds_vocab *v = ds_vocab_new();
    if (!v) return -1;
    int rc = 0;
    for (int64_t p = 0; !rc && p < d->n_pairs; p++) {
        char *s = NULL;
        rc = ds_fra_sentence(d, side, p, &s);
        if (!rc) rc = ds_vocab_add(v, s, strlen(s), &ids[p]);
        free(s);
    }
    ds_vocab_free(v);
    return rc;
}

static int64_t uf_find(int64_t *parent, int64_t x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* comp[p] = the component of pair p, numbered 0.. in the order of their smallest pair;
 * returns the number of components, or -1. Two pairs are connected when they share their
 * English or their French sentence. */
static int64_t components(const ds_fra *d, int64_t *comp) {
    int64_t n = d->n_pairs, nc = 0;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    int64_t *first = malloc((size_t)n * sizeof *first), *parent = comp;
    int rc = (!ids || !first) ? ag_error("out of memory for the disjoint split") : 0;
    for (int64_t p = 0; p < n; p++) parent[p] = p;
    for (int side = 0; side < 2 && !rc; side++) {
        rc = sentence_ids(d, (ds_side)side, ids);
        for (int64_t p = 0; !rc && p < n; p++) first[p] = -1;
        for (int64_t p = 0; !rc && p < n; p++) {
            if (first[ids[p]] < 0) {
                first[ids[p]] = p;
                continue;
            }
            int64_t a = uf_find(parent, first[ids[p]]), b = uf_find(parent, p);
            if (a != b) parent[a > b ? a : b] = a < b ? a : b; /* the root is the smallest pair */
        }
    }
    if (!rc) { /* roots in ascending order get 0, 1, ...; first[] now maps root -> number */
        for (int64_t p = 0; p < n; p++) {
            int64_t r = uf_find(parent, p);
            if (r == p) first[p] = nc++;
        }
        /* a root is its component's smallest pair, so first[root] is read before (or when)
         * first[p] is overwritten; comp is the parent array until the copy */
        for (int64_t p = 0; p < n; p++) first[p] = first[uf_find(parent, p)];
        memcpy(comp, first, (size_t)n * sizeof *comp);
    }
    free(ids);
    free(first);
    return rc ? -1 : nc;
}

/* where[p] = 0 train, 1 valid, 2 test for the disjoint split (fra_eng.h). */
static int disjoint_assign(const ds_fra *d, int64_t n_valid, int64_t n_test, uint8_t *where) {
    int64_t n = d->n_pairs;
    int64_t *comp = malloc((size_t)n * sizeof *comp), *size = NULL, *perm = NULL;
    uint8_t *part = NULL;
    int64_t nc = comp ? components(d, comp) : ag_error("out of memory for the disjoint split");
    int rc = nc < 0 ? -1 : 0;
    if (!rc) {
        size = calloc((size_t)nc, sizeof *size);
        perm = malloc((size_t)nc * sizeof *perm);
        part = malloc((size_t)nc);
        if (!size || !perm || !part) rc = ag_error("out of memory for the disjoint split");
    }
    if (!rc) {
        for (int64_t p = 0; p < n; p++) size[comp[p]]++;
        ag_rng_permutation(perm, nc, d->opt.split_seed, DS_SPLIT_STREAM);
        int64_t nt = 0, nv = 0;
        for (int64_t i = 0; i < nc; i++) { /* first fit, in permutation order */
            int64_t c = perm[i];
            if (nt + size[c] <= n_test) part[c] = 2, nt += size[c];
            else if (nv + size[c] <= n_valid) part[c] = 1, nv += size[c];
            else part[c] = 0;
        }
        for (int64_t p = 0; p < n; p++) where[p] = part[comp[p]];
    }
    free(comp);
    free(size);
    free(perm);
    free(part);
    return rc;
}

/* The test pairs whose English sentence is also the English sentence of a training pair. */
static int count_shared_src(ds_fra *d) {
    int64_t n = d->n_pairs;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint8_t *in_train = calloc((size_t)n, 1);
    int rc = (!ids || !in_train) ? ag_error("out of memory") : 0;
    if (!rc) rc = sentence_ids(d, DS_SRC, ids);
    if (!rc) {
        for (int64_t q = 0; q < d->part_n[DS_TRAIN]; q++) in_train[ids[d->part[DS_TRAIN][q]]] = 1;
        d->shared_src_test = 0;
        for (int64_t q = 0; q < d->part_n[DS_TEST]; q++)
            d->shared_src_test += in_train[ids[d->part[DS_TEST][q]]];
    }
    free(ids);
    free(in_train);
    return rc;
}

/* The parts from the permutation (random: test = perm[0..n_test), valid = the next n_valid,
 * train = the rest) or from where[] (disjoint), each ascending. */
static int fill_parts(ds_fra *d, const int64_t *perm, const uint8_t *where, int64_t n_valid,
                      int64_t n_test) {
    int64_t n = d->n_pairs;
    int64_t cnt[3] = {n - n_test - n_valid, n_valid, n_test};
    if (where) {
        cnt[0] = cnt[1] = cnt[2] = 0;
        for (int64_t p = 0; p < n; p++) cnt[where[p]]++;
    }
    const int64_t *src[3] = {perm, perm, perm};
    if (perm) src[0] = perm + n_test + n_valid, src[1] = perm + n_test;
    for (int p = 0; p < 3; p++) {
        d->part[p] = malloc((size_t)(cnt[p] ? cnt[p] : 1) * sizeof(int64_t));
        if (!d->part[p]) return ag_error("out of memory for the split");
        if (where) {
            int64_t k = 0;
            for (int64_t q = 0; q < n; q++)
                if (where[q] == p) d->part[p][k++] = q;
        } else {
            memcpy(d->part[p], src[p], (size_t)cnt[p] * sizeof(int64_t));
            qsort(d->part[p], (size_t)cnt[p], sizeof(int64_t), cmp_i64);
        }
        d->part_n[p] = cnt[p];
    }
    return 0;
}

int ds__fra_make_parts(ds_fra *d) {
    int64_t n = d->n_pairs;
    int64_t *all = malloc((size_t)n * sizeof *all);
    if (!all) return ag_error("out of memory for %lld pair indices", (long long)n);
    for (int64_t i = 0; i < n; i++) all[i] = i;
    d->part[DS_ALL] = all;
    d->part_n[DS_ALL] = n;
    int64_t n_test = (int64_t)floor(d->opt.test_frac * (double)n);
    int64_t n_valid = (int64_t)floor(d->opt.valid_frac * (double)n);
    if (n_test + n_valid == 0) {
        d->part[DS_TRAIN] = d->part[DS_VALID] = d->part[DS_TEST] = all;
        d->part_n[DS_TRAIN] = n;
        return 0;
    }
    if (n_test + n_valid >= n)
        return ag_error("split leaves no training pair (%lld pairs, %lld valid, %lld test)",
                        (long long)n, (long long)n_valid, (long long)n_test);
    int64_t *perm = NULL;
    uint8_t *where = NULL;
    int rc = 0;
    if (d->opt.split_mode == DS_SPLIT_DISJOINT) {
        where = malloc((size_t)n);
        rc = where ? disjoint_assign(d, n_valid, n_test, where) : ag_error("out of memory");
    } else {
        perm = malloc((size_t)n * sizeof *perm);
        if (perm) ag_rng_permutation(perm, n, d->opt.split_seed, DS_SPLIT_STREAM);
        else rc = ag_error("out of memory for the split");
    }
    if (!rc) rc = fill_parts(d, perm, where, n_valid, n_test);
    if (!rc) rc = count_shared_src(d);
    free(perm);
    free(where);
    return rc;
}
