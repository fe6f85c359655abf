/* datasets/internal.h -- helpers shared by the datasets sources; not a public header. */
#ifndef TG_DS_INTERNAL_H
#define TG_DS_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "datasets/common.h"

/* Reads everything from fd (until end of file) into *buf (malloc'd, caller frees; NULL when
 * empty) and *n. Returns 0, or -1 ("path: read failed: <strerror>", out of memory). */
int ds_read_fd(int fd, const char *path, char **buf, size_t *n);

/* Returns buf grown (realloc, capacity doubling) to hold at least `need` elements of `elem`
 * bytes -- buf itself when it is already large enough -- and updates *cap; or NULL with
 * an "out of memory" message set, buf untouched. Use: p = ds_regrow(x, &cap, n, sizeof *x);
 * if (!p) fail; x = p; */
void *ds_regrow(void *buf, size_t *cap, size_t need, size_t elem);

/* 0 when s is valid UTF-8, else -1: "invalid UTF-8 byte 0xXX at byte N" (N 1-based). */
int ds__utf8_check(const char *s);

/* ds_vocab_build where the frequency and the tie rank of id i of `types` come from count[i]
 * and rank[i] (the fra-eng loader counts over the training pairs only). */
struct ds_vocab;
int ds_vocab_build_ranked(const struct ds_vocab *types, const int64_t *count, const int64_t *rank,
                          int64_t min_freq, const char *const *reserved, int n_reserved,
                          struct ds_vocab **out);

#endif
