/* ckpt_internal.h -- the in-memory checkpoint, shared by the sources of nn/io (not part of
 * the public API). */
#ifndef TG_NN_CKPT_INTERNAL_H
#define TG_NN_CKPT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/io/checkpoint.h"

typedef struct ck_rec {
    nn_ckpt_tensor t; /* first (a tensor's record is (ck_rec *)t); t.name points to name */
    char *name;
    size_t at;          /* where the bytes are in the checkpoint's data buffer (when held) */
    const ag_real *src; /* borrowed (nn_ckpt_set_borrow): the caller's values; NULL: held */
} ck_rec;

struct nn_ckpt {
    ck_rec **recs; /* file / insertion order; each record its own allocation */
    size_t n, cap;
    unsigned char *data;   /* the bytes of the held tensors (a loaded file's whole data section) */
    size_t len;            /* the data section's size: every tensor's range, borrowed ones too */
    size_t held, data_cap; /* bytes used in data, and allocated */
    bool borrow;           /* nn_ckpt_add borrows instead of copying */
    char **mkeys, **mvals; /* metadata pairs, insertion / file order */
    size_t nmeta, meta_cap;
    nn_dtype store;        /* dtype of nn_ckpt_add: F32 or F64 */
    char *source;          /* file name for messages, or NULL: "(in memory)" */
    nn_ckpt_check checked; /* what a checksum verified at load */
    unsigned char *map;    /* a mapped file (nn_ckpt_load_opts.map; data points into it), or NULL */
    size_t map_len;        /* its size */
};

/* ---- mapped files (ckpt_map.c) ---- */
/* Maps size bytes of fd read-only into *base (NULL when size is 0). Returns 0, or -1 naming
 * path. */
int ck_map(int fd, const char *path, size_t size, unsigned char **base);
void ck_unmap(unsigned char *base, size_t size); /* NULL base: nothing */
/* Gives back the pages of bytes [begin, end) of ck's data section when ck is mapped (the
 * kernel reads them again from the file if they are touched again); else nothing. */
void ck_release(const nn_ckpt *ck, size_t begin, size_t end);

/* Appends a tensor record, its bytes held at ck->data + begin (the caller sets another place,
 * or a borrowed source, in ck->recs[ck->n - 1]). Returns 0 or -1 (OOM). */
int ck_push_tensor(nn_ckpt *ck, const char *name, nn_dtype dtype, int ndim, const int64_t *shape,
                   uint64_t numel, uint64_t begin, uint64_t end);
/* Sets a metadata pair without the reserved-key check. Returns 0 or -1 (OOM). */
int ck_meta_put(nn_ckpt *ck, const char *key, const char *value);
/* Parses a dtype name ("F32"); returns 0 and sets *d, or -1. */
int ck_dtype_parse(const char *s, nn_dtype *d);
/* "BOOL, U8, ..." for messages. */
const char *ck_dtype_list(void);
/* Checks that tensor `name` exists with a float dtype (i64: dtype I64) and shape (ndim,
 * shape): 0, or -1 with a message naming the source, the tensor and what was expected. */
int ck_check(const nn_ckpt *ck, const char *name, int ndim, const int *shape, bool i64);
/* Converts t's elements (a float dtype, already checked) into dst. */
void ck_decode(const nn_ckpt *ck, const nn_ckpt_tensor *t, ag_real *dst);
/* The bytes of a held tensor t of ck. */
const unsigned char *ck_bytes(const nn_ckpt *ck, const nn_ckpt_tensor *t);
/* Encodes n values of src as little-endian dtype d (F32 or F64) into dst (n * size bytes). */
void ck_encode(unsigned char *dst, const ag_real *src, size_t n, nn_dtype d);
/* Formats (ndim, shape) as "[2, 3]" into buf (always NUL-terminated); returns buf. */
char *ck_shape_fmt(char *buf, size_t len, int ndim, const int64_t *shape);
/* The checks and room of adding tensor `name` (ndim, shape) from src: the name is valid and
 * new, the shape sane, src not NULL when there is data, and ck's data buffer grown to hold
 * numel elements of es bytes (es 0: nothing to hold, a borrowed tensor). Returns 0 with sh and
 * *numel filled, or -1 after ag_error naming op. The caller writes the bytes at ck->data +
 * ck->held, then calls ck_push_tensor. */
int ck_add_begin(nn_ckpt *ck, const char *op, const char *name, int ndim, const int *shape,
                 const void *src, size_t es, int64_t *sh, uint64_t *numel);
/* Whether a metadata key is one nn_ckpt_save writes itself (format, checksums). */
bool ck_reserved_key(const char *key);

/* What a header says about its file's checksum (filled by ck_validate, used by ck_verify). */
typedef struct ck_sum_info {
    nn_ckpt_check scheme; /* UNCHECKED: plain state_dict; CHECKED_DATA: legacy; _FILE: format 2 */
    size_t digits_at;     /* CHECKED_FILE: offset of the checksum's 16 hex digits in the header */
} ck_sum_info;

/* Fills ck's tensor table and metadata from the parsed header `root` (text hdr, hlen bytes)
 * of a file of file_size bytes, checking every rule of nn/io/checkpoint.h that does not need
 * the data: on success ck->len is the data section's size (file_size - 8 - hlen, equal to
 * what the header describes) and *sum says which checksum to verify. ck->source names the
 * file in messages. Returns 0 or -1 (ag_last_error). In safetensors_check.c. */
struct js_val;
int ck_validate(nn_ckpt *ck, const struct js_val *root, const char *hdr, size_t hlen,
                uint64_t file_size, ck_sum_info *sum);
/* The rules that need the data (ck->data read): the checksum described by sum, then finite
 * values unless opts->allow_nonfinite. Sets ck->checked. Returns 0 or -1. */
int ck_verify(nn_ckpt *ck, const ck_sum_info *sum, const char *hdr, size_t hlen,
              const nn_ckpt_load_opts *opts);
/* The format-2 checksum into *out: XXH3-64 of the 8 length bytes (hlen, little-endian), hdr
 * with its 16 bytes at digits_at read as '0', and the data section of ck (its pages released
 * as they are hashed when ck is mapped). Returns 0, or -1 when out of memory (no message). */
int ck_file_hash(const char *hdr, size_t hlen, size_t digits_at, const nn_ckpt *ck, uint64_t *out);

#endif
