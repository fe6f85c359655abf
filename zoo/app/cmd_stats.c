/* cmd_stats.c -- PROGRAM stats: pairs, vocabularies, sentence lengths, batches and padding,
 * the length histogram (cli.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "zoo/app/plot.h"

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The training batches of an epoch: how much of what a step computes is padding, and in token
 * batches how much is left once each of the --shards shards cuts its rows to their longest
 * target and (a pad_free model: the Transformer) source, as the trainer does. 0 or an exit
 * status. */
static int print_padding(zoo_cli *c, const ds_fra *d, const ds_fra_options *o) {
    ds_batches *it = NULL;
    if (ds_batches_new(d, DS_TRAIN, false, &it))
        return o->batch_tokens ? zoo__usage(c, "--batch-tokens: %s", ag_last_error())
                               : zoo__fail(c, ag_last_error());
    const int G = c->run.cfg.exec.shards;
    ds_batch b;
    double positions = 0, valid[2] = {0, 0}, rows = 0, cut[2] = {0, 0};
    while (ds_batches_next(it, &b)) {
        positions += (double)b.size * b.num_steps;
        rows += b.size;
        for (int g = 0; g < G; g++) { /* the trainer's rows of shard g */
            int r0 = (int)((ptrdiff_t)b.size * g / G), r1 = (int)((ptrdiff_t)b.size * (g + 1) / G);
            int longest[2] = {0, 0};
            for (int r = r0; r < r1; r++) {
                const int len[2] = {b.src_valid_len[r], b.tgt_valid_len[r]};
                for (int s = 0; s < 2; s++) {
                    valid[s] += len[s];
                    if (len[s] > longest[s]) longest[s] = len[s];
                }
            }
            for (int s = 0; s < 2; s++) cut[s] += (double)(r1 - r0) * longest[s];
        }
    }
    int64_t nb = ds_batches_count(it);
    printf("batches (%s): %lld per epoch, %.1f pairs and %.0f positions on average; padding: "
           "%.1f%% of the source and %.1f%% of the target positions\n",
           o->batch_tokens ? "--batch-tokens" : "--batch-size", (long long)nb, rows / (double)nb,
           positions / (double)nb, 100 * (1 - valid[0] / positions),
           100 * (1 - valid[1] / positions));
    if (o->batch_tokens)
        printf("each of %d shards cut to its rows' longest (training): padding %.1f%% of the "
               "source positions (the Transformer's; other models keep the batch's) and %.1f%% of "
               "the target's\n",
               G, 100 * (1 - valid[0] / cut[0]), 100 * (1 - valid[1] / cut[1]));
    ds_batches_free(it);
    return 0;
}

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
    rc = print_padding(c, d, &o);
    if (rc) {
        ds_fra_free(d);
        return rc;
    }
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
