/* tests/datasets/bench_datasets.c -- times the d2l pipeline: fra.txt to batches.
 *
 *   bench_datasets [path/to/fra.txt] [runs]
 *
 * Two cases: the whole file (num_examples = 0) and d2l's default run (num_examples = 600),
 * each timed as ds_fra_load (read, preprocess, tokenize, vocabularies, arrays) plus one
 * shuffled epoch of batches (every batch copied out). Prints the median, min and max wall
 * time over the runs (after one warm-up run, so the file is in the page cache). Not a ctest
 * test. The path is resolved by ds_resolve_data_path (flag, TG_FRA_ENG, cache, ../shared). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "datasets/fra_eng.h"
#include "tests/bench_util.h"

/* One run: returns 0 and the load / epoch times, or nonzero on error (message printed). */
static int run_once(const char *path, int64_t num_examples, double *t_load, double *t_epoch,
                    ds_fra **keep) {
    ds_fra_options o = ds_fra_defaults();
    o.num_examples = num_examples;
    ds_fra *d;
    double t0 = bench_now();
    if (ds_fra_load(path, &o, &d)) {
        fprintf(stderr, "bench_datasets: %s\n", ag_last_error());
        return 1;
    }
    double t1 = bench_now();
    ds_batches *it;
    if (ds_batches_new(d, DS_TRAIN, true, &it)) {
        fprintf(stderr, "bench_datasets: %s\n", ag_last_error());
        ds_fra_free(d);
        return 1;
    }
    ds_batch b;
    volatile int64_t sink = 0;
    while (ds_batches_next(it, &b)) sink += b.src[0] + b.tgt_valid_len[b.size - 1];
    (void)sink;
    double t2 = bench_now();
    ds_batches_free(it);
    *t_load = t1 - t0;
    *t_epoch = t2 - t1;
    if (keep && !*keep) *keep = d;
    else ds_fra_free(d);
    return 0;
}

static int bench(const char *path, const char *name, int64_t num_examples, int runs) {
    double *tot = malloc(sizeof(double) * (size_t)runs),
           *ld = malloc(sizeof(double) * (size_t)runs), *ep = malloc(sizeof(double) * (size_t)runs);
    double a, b;
    ds_fra *d = NULL;
    int rc = run_once(path, num_examples, &a, &b, &d); /* warm-up: page cache, allocator */
    for (int r = 0; r < runs && !rc; r++) {
        rc = run_once(path, num_examples, &ld[r], &ep[r], NULL);
        tot[r] = ld[r] + ep[r];
    }
    if (!rc) {
        bench_sort(tot, runs);
        bench_sort(ld, runs);
        bench_sort(ep, runs);
        printf("%-12s %6lld pairs, vocab %5d / %5d: file to batches median %8.3f ms (min %.3f, max "
               "%.3f; "
               "load %.3f + epoch %.3f ms) over %d runs\n",
               name, (long long)ds_fra_num_pairs(d), ds_vocab_size(ds_fra_vocab(d, DS_SRC)),
               ds_vocab_size(ds_fra_vocab(d, DS_TGT)), 1e3 * tot[runs / 2], 1e3 * tot[0],
               1e3 * tot[runs - 1], 1e3 * ld[runs / 2], 1e3 * ep[runs / 2], runs);
    }
    ds_fra_free(d);
    free(tot);
    free(ld);
    free(ep);
    return rc;
}

int main(int argc, char **argv) {
    char path[4096];
    if (ds_resolve_data_path(argc > 1 ? argv[1] : NULL, TG_SOURCE_DIR, path, sizeof path)) {
        fprintf(stderr, "bench_datasets: %s\n", ag_last_error());
        return 1;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 0;
    printf("bench_datasets: %s\n", path);
    if (bench(path, "whole file", 0, runs > 0 ? runs : 11)) return 1;
    if (bench(path, "default run", 600, runs > 0 ? runs : 201)) return 1;
    return 0;
}
