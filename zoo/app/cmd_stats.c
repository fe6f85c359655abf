/* cmd_stats.c -- PROGRAM stats: pairs, vocabularies, sentence lengths, batches and padding,
 * the length histogram (cli.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "zoo/app/plot.h"

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int zoo__cmd_stats(zoo_cli *c) {
    ds_fra_options o = c->run.cfg.data;
    ds_fra *d = NULL;
    int rc = zoo__load_data(c, &o, &d);
    if (rc) return rc;
    const ds_fra_stats *st = ds_fra_get_stats(d);
    int64_t n = ds_fra_num_pairs(d);
    printf("lines read %lld, pairs %lld, skipped %lld (no tab) + %lld (several tabs)\n",
           (long long)st->lines, (long long)n, (long long)st->skipped_no_tab,
           (long long)st->skipped_many_tabs);
    printf("vocabulary: source %d tokens, target %d tokens (min_freq %lld)\n",
           ds_vocab_size(ds_fra_vocab(d, DS_SRC)), ds_vocab_size(ds_fra_vocab(d, DS_TGT)),
           (long long)o.min_freq);
    enum { BINS = 21 };
    double hist[2][BINS] = {{0}};
    int *lens = malloc(sizeof *lens * (size_t)(n ? n : 1));
    if (!lens) {
        ds_fra_free(d);
        return zoo__fail(c, "out of memory");
    }
    const char *side_name[2] = {"source", "target"};
    for (int s = 0; s < 2; s++) {
        double sum = 0;
        for (int64_t p = 0; p < n; p++) {
            lens[p] = ds_fra_sentence_len(d, (ds_side)s, p);
            sum += lens[p];
            hist[s][lens[p] < BINS - 1 ? lens[p] : BINS - 1]++;
        }
        qsort(lens, (size_t)n, sizeof *lens, cmp_int);
        printf("%s tokens per sentence: mean %.2f, median %d, 90th percentile %d, max %d; %lld of "
               "%lld "
               "truncated to %d steps\n",
               side_name[s], n ? sum / (double)n : 0, n ? lens[n / 2] : 0,
               n ? lens[(int64_t)(0.9 * (double)(n - 1))] : 0, n ? lens[n - 1] : 0,
               (long long)st->truncated[s], (long long)n, o.num_steps);
    }
    free(lens);
    /* the training batches of an epoch: how much of what a step computes is padding */
    ds_batches *it = NULL;
    if (ds_batches_new(d, DS_TRAIN, false, &it)) {
        ds_fra_free(d);
        return o.batch_tokens ? zoo__usage(c, "--batch-tokens: %s", ag_last_error())
                              : zoo__fail(c, ag_last_error());
    }
    ds_batch b;
    double positions = 0, valid[2] = {0, 0}, rows = 0;
    while (ds_batches_next(it, &b)) {
        positions += (double)b.size * b.num_steps;
        rows += b.size;
        for (int r = 0; r < b.size; r++)
            valid[0] += b.src_valid_len[r], valid[1] += b.tgt_valid_len[r];
    }
    int64_t nb = ds_batches_count(it);
    printf("batches (%s): %lld per epoch, %.1f pairs and %.0f positions on average; padding: "
           "%.1f%% of the source and %.1f%% of the target positions\n",
           o.batch_tokens ? "--batch-tokens" : "--batch-size", (long long)nb, rows / (double)nb,
           positions / (double)nb, 100 * (1 - valid[0] / positions),
           100 * (1 - valid[1] / positions));
    ds_batches_free(it);
    if (c->run.cfg.files.plots) {
        char path[4096], labels[BINS][8];
        const char *bl[BINS];
        for (int b = 0; b < BINS; b++) {
            snprintf(labels[b], sizeof labels[b], b == BINS - 1 ? "%d+" : "%d", b);
            bl[b] = labels[b];
        }
        snprintf(path, sizeof path, "%s/lengths.svg", c->run.cfg.files.plots);
        const double *counts[2] = {hist[0], hist[1]};
        if (zoo__mkdir_p(c->run.cfg.files.plots) ||
            zoo_svg_histogram(path, "tokens per sentence", "# tokens per sequence", "count", 2,
                              side_name, counts, BINS, bl))
            rc = zoo__fail(c, ag_last_error());
        else printf("plot: %s\n", path);
    }
    ds_fra_free(d);
    return rc;
}
