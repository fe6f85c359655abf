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
};

#endif
