/* checkpoint.h -- checkpoints in the safetensors format, written and read by tapegrad itself.
 *
 * File layout (https://github.com/huggingface/safetensors, little-endian):
 *     u64 N | N bytes of JSON header | data section
 *     header = {"__metadata__": {"key": "value", ...},
 *               "<tensor name>": {"dtype": "F32", "shape": [out, in], "data_offsets": [b, e]},
 *               ...}
 * Offsets are relative to the data section; each tensor's bytes are its values in row-major
 * order. Tensor names and layouts are PyTorch's state_dict ones (docs/spec.md 6), so a file moves
 * between tapegrad and PyTorch (safetensors.torch.save_file / load_file) both ways.
 *
 * Writing: F32 by default (values converted from ag_real), F64 on request; the JSON is padded
 * with spaces so the data section starts 8-byte aligned. The file goes through ag_file
 * (autograd/ag_file.h): a temporary file beside the target, fsync, rename -- a crash mid-save
 * leaves the previous file intact, a symlink stays a symlink, the target's mode is kept. It is
 * written as a stream: the header, then each tensor's bytes; the checksum (below) is computed
 * over the same bytes in a first pass, incrementally, so a save builds nothing in memory but
 * the header and a 16 KiB buffer. A checkpoint that borrows its tensors (nn_ckpt_set_borrow)
 * holds no copy of them either: a model and its optimizer state go from their own buffers to
 * the file.
 * Every save ends the metadata with two keys of its own:
 *     "tapegrad.format": "2"                       (NN_CKPT_FORMAT_KEY, NN_CKPT_FORMAT)
 *     "tapegrad.checksum": "<16 lowercase hex>"    (NN_CKPT_CHECKSUM_KEY)
 *
 * Checksums. Format 2 (this version): XXH3-64 (seed 0) of the whole file -- the 8 length
 * bytes, the header and the data section -- computed with the 16 hex digits of the
 * tapegrad.checksum value replaced by sixteen ASCII '0'. It covers every byte of the file but
 * those 16: metadata keys and values, tensor names, dtypes, shapes, offsets, the padding, the
 * data. Legacy files (written before format 2) carry "tapegrad.xxh3_64"
 * (NN_CKPT_LEGACY_CHECKSUM_KEY): XXH3-64 of the data section only -- they still load, their
 * data verified, their header not (nn_ckpt_checked says which). Which scheme applies:
 *   - tapegrad.format present: must be "2" (a newer format is refused by name);
 *   - tapegrad.checksum present: format-2 checksum, verified;
 *   - else tapegrad.xxh3_64 present (and no tapegrad.format): legacy checksum, verified;
 *   - else any metadata key starting with "tapegrad." (NN_CKPT_MARK_PREFIX: tapegrad.format,
 *     the zoo's tapegrad.model, ...) marks the file as this project's, and a marked file
 *     without a checksum is refused (its checksum key was deleted);
 *   - else a plain state_dict from elsewhere (safetensors.torch.save_file writes no
 *     checksum): loaded, nothing to verify. Deleting every tapegrad.* key turns a checkpoint
 *     into such a file -- no checksum can prevent that; the zoo's loader requires
 *     tapegrad.model, so its model checkpoints cannot be stripped that way.
 * A mismatch is refused with "<file>: checksum does not match ...".
 *
 * Reading reads the header first and the data last: the 8-byte length (the header must fit
 * in the file and be at most 100 MB), the header, then its validation, which compares the
 * data size the header describes with the file size (stat) before the data section is
 * allocated or read; a truncated file, or one with bytes the header does not describe, is
 * refused naming the file and both sizes. Every rule rejects with a message naming the file
 * and the tensor: well-formed JSON (strict RFC 8259, no duplicate keys), every entry an
 * object with exactly dtype / shape / data_offsets, a known dtype (BOOL U8 I8 U16 I16 U32 I32
 * U64 I64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2), shape entries non-negative integers (at most
 * NN_CKPT_MAX_DIMS), byte range length = numel * dtype size, ranges inside the data section,
 * not overlapping, and together covering it with no gap; metadata values strings; the
 * checksum as above; and, last, no NaN or infinity in a float tensor (F16 BF16 F32 F64
 * F8_E4M3 F8_E5M2): such a file is refused naming the tensor and the first bad element,
 * unless nn_ckpt_load_opts.allow_nonfinite asks to load it for inspection.
 *
 * Loading into a parameter store (nn_ckpt_load_params), the rule: every parameter (and buffer) of the store
 * must be in the checkpoint with a float dtype (F32, F64, F16, BF16; converted to ag_real) and
 * exactly the parameter's shape. Tensors of the checkpoint that are not parameters are an
 * error, except those whose name starts with "optim." -- the optimizer state, which a
 * model-only load skips on purpose (optim_load_state reads them) -- or with the flag
 * NN_CKPT_ALLOW_EXTRA. Nothing is written into the store unless every check passed.
 *
 * Typical use (the optimizer part is optional, see optim/optim.h):
 *     nn_ckpt *ck = nn_ckpt_new();
 *     nn_ckpt_set_borrow(ck, true);                     // save from ps's and opt's buffers
 *     nn_ckpt_add_params(ck, ps);                       // model
 *     optim_save_state(opt, ck);                        // Adam moments, step
 *     nn_ckpt_set_meta(ck, "config", "{\"hidden\": 32}");
 *     int rc = nn_ckpt_save(ck, "model.safetensors");  // 0 or -1, message in ag_last_error()
 *     nn_ckpt_free(ck);
 *
 *     nn_ckpt *in;
 *     if (nn_ckpt_load(&in, "model.safetensors") || nn_ckpt_load_params(in, ps, 0) ||
 *         optim_load_state(opt, in))
 *         fprintf(stderr, "%s\n", ag_last_error());
 *     nn_ckpt_free(in);
 */
#ifndef TG_NN_CHECKPOINT_H
#define TG_NN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base.h"
#include "../params.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NN_CKPT_MAX_DIMS 8
/* Metadata keys that nn_ckpt_save writes and nn_ckpt_set_meta refuses (see the top). */
#define NN_CKPT_FORMAT_KEY "tapegrad.format"
#define NN_CKPT_FORMAT "2"
#define NN_CKPT_CHECKSUM_KEY "tapegrad.checksum"       /* format 2: the whole file */
#define NN_CKPT_LEGACY_CHECKSUM_KEY "tapegrad.xxh3_64" /* legacy: the data section only */
/* A metadata key with this prefix marks a file as this project's: it must carry a checksum. */
#define NN_CKPT_MARK_PREFIX "tapegrad."
/* Prefix of the tensors that a model-only load skips (optimizer state). */
#define NN_CKPT_OPTIM_PREFIX "optim."

typedef enum nn_dtype {
    NN_BOOL,
    NN_U8,
    NN_I8,
    NN_U16,
    NN_I16,
    NN_U32,
    NN_I32,
    NN_U64,
    NN_I64,
    NN_F16,
    NN_BF16,
    NN_F32,
    NN_F64,
    NN_F8_E4M3,
    NN_F8_E5M2,
} nn_dtype;

const char *nn_dtype_name(nn_dtype d); /* "F32" ... */
size_t nn_dtype_size(nn_dtype d);      /* bytes per element */

/* One tensor of a checkpoint (read-only view; owned by the checkpoint, valid until it is
 * freed; the pointer itself stays valid when tensors are added). */
typedef struct nn_ckpt_tensor {
    const char *name;
    nn_dtype dtype;
    int ndim;
    int64_t shape[NN_CKPT_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end; /* byte range in the data section */
} nn_ckpt_tensor;

/* An in-memory checkpoint: named tensors (raw little-endian bytes) and string metadata. */
typedef struct nn_ckpt nn_ckpt;

/* Returns an empty checkpoint (NULL when out of memory); free with nn_ckpt_free. */
nn_ckpt *nn_ckpt_new(void);
void nn_ckpt_free(nn_ckpt *ck); /* NULL is a no-op */

/* ---- Files ------------------------------------------------------------------------------- */

/* Writes ck to path atomically through ag_file (temporary file + fsync + rename; symlinks and
 * the mode kept), with a format-2 checksum. Returns 0 or -1. */
int nn_ckpt_save(const nn_ckpt *ck, const char *path);
/* The same file image in memory: *bytes is a new buffer of *len bytes the caller frees.
 * Returns 0, or -1 (out of memory) with *bytes NULL. */
int nn_ckpt_save_mem(const nn_ckpt *ck, unsigned char **bytes, size_t *len);

/* Options of a load; {0} (or a NULL pointer) is the default: everything checked. */
typedef struct nn_ckpt_load_opts {
    /* true: load tensors holding NaN or infinity instead of refusing the file -- to inspect a
     * run that diverged, never to resume from it. The checksums are verified all the same. */
    bool allow_nonfinite;
    /* true: map the file read-only (mmap) instead of reading its data section into memory.
     * The checks read every byte all the same (the checksum covers the whole file: optimizer
     * state included), in windows whose pages are given back once hashed, and so are each
     * tensor's after its finiteness check and after nn_ckpt_load_params decodes it: loading a
     * model holds about one tensor of the file in memory at a time, not the whole file (a
     * training checkpoint is three times its model: Adam's two moments). Tensors are read
     * byte by byte, so their alignment in the file does not matter. The checkpoint is then
     * read-only (nn_ckpt_add refused) and the file must not be changed while it lives (a
     * file truncated under a mapping faults; checkpoints are replaced by rename, which
     * leaves the mapped file intact). */
    bool map;
} nn_ckpt_load_opts;

/* Reads and validates path (header first, rules at the top of this file) with the default
 * options. On success *out is a new checkpoint the caller frees and 0 is returned; on
 * failure *out is NULL and -1 is returned. */
int nn_ckpt_load(nn_ckpt **out, const char *path);
/* The same with options (opts may be NULL: the defaults). */
int nn_ckpt_load_with(nn_ckpt **out, const char *path, const nn_ckpt_load_opts *opts);
/* The same from a buffer holding a whole file image (not kept: the checkpoint copies the data
 * section); name is used in messages. opts may be NULL. */
int nn_ckpt_load_mem(nn_ckpt **out, const void *bytes, size_t len, const char *name,
                     const nn_ckpt_load_opts *opts);

/* What a checksum verified when ck was loaded. */
typedef enum nn_ckpt_check {
    NN_CKPT_UNCHECKED,    /* built in memory, or a plain state_dict without a checksum */
    NN_CKPT_CHECKED_DATA, /* a legacy file: its data section verified, its header not */
    NN_CKPT_CHECKED_FILE, /* format 2: every byte of the file verified */
} nn_ckpt_check;
nn_ckpt_check nn_ckpt_checked(const nn_ckpt *ck);

/* ---- Tensors ------------------------------------------------------------------------------ */

/* dtype in which nn_ckpt_add stores ag_real values: NN_F32 (default) or NN_F64 (a float64
 * build that must resume bit for bit). Returns 0, or -1 for another dtype. */
int nn_ckpt_set_store_dtype(nn_ckpt *ck, nn_dtype d);
/* on: the tensors nn_ckpt_add adds from now on (so nn_ckpt_add_params' and optim_save_state's
 * too) are borrowed, not copied: ck keeps a pointer to the caller's values and converts them to
 * the store dtype when it is saved or read (nn_ckpt_read), taking the values they hold then.
 * They must stay valid until ck is freed, and unchanged while a save runs. Off by default;
 * int64 tensors are always copied. Returns 0, or -1 for a NULL ck. */
int nn_ckpt_set_borrow(nn_ckpt *ck, bool on);
/* Adds a copy of src (numel = prod(shape) values, row-major) as `name`. 0 <= ndim <=
 * NN_CKPT_MAX_DIMS, dims >= 0. Returns 0, or -1 on a duplicate name or out of memory. */
int nn_ckpt_add(nn_ckpt *ck, const char *name, int ndim, const int *shape, const ag_real *src);
size_t nn_ckpt_count(const nn_ckpt *ck);
const nn_ckpt_tensor *nn_ckpt_at(const nn_ckpt *ck, size_t i); /* file order; NULL if out */
const nn_ckpt_tensor *nn_ckpt_find(const nn_ckpt *ck, const char *name); /* NULL if absent */
/* Copies tensor `name` into dst (converted to ag_real) after checking that it exists, has a
 * float dtype (F32, F64, F16, BF16) and exactly the shape (ndim, shape). Returns 0 or -1 with
 * a message naming the file, the tensor and the expected dtype or shape. */
int nn_ckpt_read(const nn_ckpt *ck, const char *name, int ndim, const int *shape, ag_real *dst);

/* ---- Parameters --------------------------------------------------------------------------- */

/* Adds every tensor of the finalized store, parameters and buffers (nn_params_tensor_at:
 * registration order, PyTorch's state_dict order), under its name. A buffer named
 * "num_batches_tracked" (BatchNorm's counter, a float in the store) is written as I64, as
 * PyTorch does; loading converts it back (and also takes a float tensor). Returns 0 or -1. */
int nn_ckpt_add_params(nn_ckpt *ck, const nn_params *ps);

#define NN_CKPT_ALLOW_EXTRA 1u /* flag: tolerate tensors that are not parameters */
/* Copies the checkpoint into the finalized store, by the rule above. flags: 0 or
 * NN_CKPT_ALLOW_EXTRA. Returns 0, or -1 leaving the store untouched. */
int nn_ckpt_load_params(const nn_ckpt *ck, nn_params *ps, unsigned flags);

/* PyTorch's load_state_dict(strict=False): copies every tensor of the checkpoint whose name is
 * a parameter's or buffer's of the finalized store (the rule above for its dtype and shape; a
 * shape that differs is an error naming both shapes), and reports in *report (may be NULL)
 * how many were loaded, the store's names the checkpoint lacks (missing) and the checkpoint's
 * names the store lacks (unexpected; "optim." tensors left out). A checkpoint that matches no
 * name of the store is an error. Returns 0, or -1 leaving the store untouched. The names point
 * into the store (missing) and the checkpoint (unexpected); free the report's arrays with
 * nn_ckpt_load_report_free. */
typedef struct nn_ckpt_load_report {
    size_t loaded;
    size_t n_missing, n_unexpected;
    const char **missing, **unexpected;
} nn_ckpt_load_report;
int nn_ckpt_load_params_partial(const nn_ckpt *ck, nn_params *ps, nn_ckpt_load_report *report);
void nn_ckpt_load_report_free(nn_ckpt_load_report *r); /* NULL is a no-op */

/* Int64 tensors (dtype I64): add one from src, or read one into dst after checking that it
 * exists with dtype I64 and exactly the shape. Return 0 or -1 (a message naming the tensor). */
int nn_ckpt_add_i64(nn_ckpt *ck, const char *name, int ndim, const int *shape, const int64_t *src);
int nn_ckpt_read_i64(const nn_ckpt *ck, const char *name, int ndim, const int *shape, int64_t *dst);

/* Shortcuts: the parameters and buffers alone, no metadata. */
int nn_save_params(const nn_params *ps, const char *path);
int nn_load_params(nn_params *ps, const char *path);

/* ---- Metadata (string pairs) ------------------------------------------------------------- */

/* Sets key to value (both copied; replaces an existing key). Both must be valid UTF-8
 * (binary data does not belong in metadata); NN_CKPT_FORMAT_KEY, NN_CKPT_CHECKSUM_KEY and
 * NN_CKPT_LEGACY_CHECKSUM_KEY are reserved (nn_ckpt_save writes the first two, and drops the
 * third, stale once anything changes). Returns 0 or -1. */
int nn_ckpt_set_meta(nn_ckpt *ck, const char *key, const char *value);
/* The value of key, or NULL. Owned by ck. */
const char *nn_ckpt_meta(const nn_ckpt *ck, const char *key);
size_t nn_ckpt_meta_count(const nn_ckpt *ck);
/* Pair i (insertion or file order); returns 0, or -1 when i is out of range. */
int nn_ckpt_meta_at(const nn_ckpt *ck, size_t i, const char **key, const char **value);
/* Metadata holding integers and random-stream states exactly (decimal / hex strings). */
int nn_ckpt_set_meta_int(nn_ckpt *ck, const char *key, int64_t v);
/* Reads key as an integer. Returns 0, or -1 if absent or not an integer (message). */
int nn_ckpt_meta_int(const nn_ckpt *ck, const char *key, int64_t *v);
int nn_ckpt_set_meta_rng(nn_ckpt *ck, const char *key, const ag_rng *r);
int nn_ckpt_meta_rng(const nn_ckpt *ck, const char *key, ag_rng *r);

/* Where ck came from ("path" or "(in memory)"), for messages. */
const char *nn_ckpt_source(const nn_ckpt *ck);

#ifdef __cplusplus
}
#endif

#endif
