/* datasets/fra_internal.h -- the ds_fra struct, shared by fra_eng.c and fra_batches.c. */
#ifndef TG_DS_FRA_INTERNAL_H
#define TG_DS_FRA_INTERNAL_H

#include "datasets/fra_eng.h"

typedef struct {
    ds_vocab *types; /* distinct preprocessed tokens, first-seen order (all pairs read) */
    int32_t *tok;    /* type ids of every sentence, concatenated                      */
    size_t ntok, captok;
    int64_t *off;       /* sentence p is tok[off[p] .. off[p+1])                          */
    ds_vocab *vocab;    /* the d2l vocabulary                                             */
    int32_t *ids;       /* pairs x num_steps                                              */
    int32_t *valid_len; /* pairs                                                          */
} ds_fra_side;

struct ds_fra {
    ds_fra_options opt;
    ds_fra_stats stats;
    int64_t n_pairs;
    size_t cap_pairs; /* capacity of off[] (both sides) and line_of_pair[]      */
    int64_t *line_of_pair;
    ds_fra_side side[2];
    int64_t *part[4]; /* ascending pair indices of train, valid, test, all      */
    int64_t part_n[4];
    /* The raw sides as written in the file (ds_fra_raw): pair p's English side starts at
     * raw[raw_off[2p]], its French side at raw[raw_off[2p + 1]], each NUL-terminated. */
    char *raw;
    size_t raw_n, raw_cap;
    int64_t *raw_off;
    size_t raw_off_cap;
    int64_t shared_src_test; /* test pairs whose English side is also a training pair's */
};

/* The train/valid/test parts and shared_src_test from the options (fra_split.c). */
int ds__fra_make_parts(ds_fra *d);

#endif
