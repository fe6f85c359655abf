/* ckpt_internal.h -- the in-memory checkpoint, shared by checkpoint.c, ckpt_params.c and
 * safetensors.c (not part of the public API). */
#ifndef TG_NN_CKPT_INTERNAL_H
#define TG_NN_CKPT_INTERNAL_H

#include "nn/internal.h"

typedef struct ck_rec {
    nn_ckpt_tensor t;   /* t.name points to name */
    char *name;
} ck_rec;

struct nn_ckpt {
    ck_rec **recs;          /* file / insertion order; each record its own allocation */
    size_t n, cap;
    unsigned char *data;    /* the data section: every tensor's bytes, ranges cover it */
    size_t len, data_cap;
    char **mkeys, **mvals;  /* metadata pairs, insertion / file order */
    size_t nmeta, meta_cap;
    nn_dtype store;         /* dtype of nn_ckpt_add: F32 or F64 */
    char *source;           /* file name for messages, or NULL: "(in memory)" */
};

/* Appends a tensor record (the bytes are already in ck->data). Returns 0 or -1 (OOM). */
int ck_push_tensor(nn_ckpt *ck, const char *name, nn_dtype dtype, int ndim,
                   const int64_t *shape, uint64_t numel, uint64_t begin, uint64_t end);
/* Sets a metadata pair without the reserved-key check. Returns 0 or -1 (OOM). */
int ck_meta_put(nn_ckpt *ck, const char *key, const char *value);
/* Parses a dtype name ("F32"); returns 0 and sets *d, or -1. */
int ck_dtype_parse(const char *s, nn_dtype *d);
/* "BOOL, U8, ..." for messages. */
const char *ck_dtype_list(void);
/* Checks that tensor `name` exists with a float dtype and shape (ndim, shape): 0, or -1 with
 * a message naming the source, the tensor and what was expected. */
int ck_check(const nn_ckpt *ck, const char *name, int ndim, const int *shape);
/* Converts t's elements (a float dtype, already checked) into dst. */
void ck_decode(const nn_ckpt *ck, const nn_ckpt_tensor *t, ag_real *dst);
/* Fills ck's tensor table and metadata from the parsed header `root` after checking every
 * rule of nn/checkpoint.h against ck->data (the data section, ck->len bytes). src names the
 * file in messages. Returns 0 or -1 (ag_last_error). In safetensors_check.c. */
struct js_val;
int ck_validate(nn_ckpt *ck, const struct js_val *root, const char *src);
/* XXH3-64 of the data section, as 16 lowercase hex digits (buf of >= 17 bytes). */
void ck_checksum_hex(const nn_ckpt *ck, char *buf);

#endif
