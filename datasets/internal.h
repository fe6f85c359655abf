/* datasets/internal.h -- helpers shared by the datasets sources; not a public header. */
#ifndef TG_DS_INTERNAL_H
#define TG_DS_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "datasets/common.h"

#if defined(__GNUC__)
#define DS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DS_PRINTF(a, b)
/* ds_vocab_build where the frequency and the tie rank of id i of `types` come from count[i]
 * and rank[i] (the fra-eng loader counts over the training pairs only). */
struct ds_vocab;
int ds_vocab_build_ranked(const struct ds_vocab *types, const int64_t *count, const int64_t *rank,
                          int64_t min_freq, const char *const *reserved, int n_reserved,
                          struct ds_vocab **out);

#endif

/* Reads everything from fd (until end of file) into *buf (malloc'd, caller frees; NULL when
 * empty) and *n. Returns DS_OK, DS_EIO ("path: read failed: <strerror>"), DS_ENOMEM. */
int ds_read_fd(int fd, const char *path, char **buf, size_t *n);

/* Formats the thread-local error message and returns `status` (so `return ds_fail(...)`). */
int ds_fail(int status, const char *fmt, ...) DS_PRINTF(2, 3);

/* Returns buf grown (realloc, capacity doubling) to hold at least `need` elements of `elem`
 * bytes -- buf itself when it is already large enough -- and updates *cap; or NULL with
 * DS_ENOMEM's message set, buf untouched. Use: p = ds_regrow(x, &cap, n, sizeof *x);
 * if (!p) fail; x = p; */
void *ds_regrow(void *buf, size_t *cap, size_t need, size_t elem);

/* ds_vocab_build where the frequency and the tie rank of id i of `types` come from count[i]
 * and rank[i] (the fra-eng loader counts over the training pairs only). */
struct ds_vocab;
int ds_vocab_build_ranked(const struct ds_vocab *types, const int64_t *count, const int64_t *rank,
                          int64_t min_freq, const char *const *reserved, int n_reserved,
                          struct ds_vocab **out);

#endif
