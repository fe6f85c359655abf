/* safetensors.c -- the file format: writing through ag_file as a stream (the header, then
 * each tensor's bytes), reading the header first and the data last (format, checksums and
 * rules in nn/io/checkpoint.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "autograd/ag_file.h"
#include "nn/io/ckpt_internal.h"
#include "nn/io/json.h"

#define MAX_HEADER ((uint64_t)100 << 20) /* as the reference implementation: 100 MB */

/* ---- A growable string ------------------------------------------------------------------ */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf_u64(sbuf *b, uint64_t v) {
    char t[24];
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    sb_puts(b, t);
}

/* A JSON string literal: quotes, backslashes and control characters escaped. */
static void sb_json_str(sbuf *b, const char *s) {
    sb_putn(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_putn(b, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            sb_puts(b, e);
        } else {
            sb_putn(b, s, 1);
        }
    }
    sb_putn(b, "\"", 1);
}

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- Writing ------------------------------------------------------------------------------
 * The data section is never assembled: it goes to a sink tensor by tensor, a held tensor's
 * bytes as they are, a borrowed one's values encoded in chunks. A save sends it twice, first
 * to the hash (the checksum stands in the header, before the data), then to the file. */

/* Where bytes go: an XXH3 state, a stream or a buffer (exactly one set). */
typedef struct sink {
    XXH3_state_t *hash;
    FILE *f;
    unsigned char *mem; /* advanced as bytes arrive */
    int err;            /* errno of a failed write */
} sink;

static int sink_put(sink *s, const void *p, size_t n) {
    if (n == 0) return 0;
    if (s->hash) {
        XXH3_64bits_update(s->hash, p, n);
    } else if (s->f) {
        if (fwrite(p, 1, n, s->f) != n) {
            s->err = errno;
            return -1;
        }
    } else {
        memcpy(s->mem, p, n);
        s->mem += n;
    }
    return 0;
}

static int by_begin(const void *a, const void *b) {
    const nn_ckpt_tensor *x = *(const nn_ckpt_tensor *const *)a,
                         *y = *(const nn_ckpt_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Sends ck's data section to s: every tensor's bytes in the order of their ranges (which tile
 * it). Returns 0, or -1 when a write failed (s->err) or out of memory (s->err 0). */
static int put_data(const nn_ckpt *ck, sink *s) {
    const nn_ckpt_tensor **order = malloc((ck->n ? ck->n : 1) * sizeof *order);
    if (!order) return -1;
    for (size_t i = 0; i < ck->n; i++) order[i] = &ck->recs[i]->t;
    qsort(order, ck->n, sizeof *order, by_begin);
    unsigned char buf[1 << 14];
    int rc = 0;
    for (size_t i = 0; i < ck->n && !rc; i++) {
        const nn_ckpt_tensor *t = order[i];
        const ag_real *src = ((const ck_rec *)t)->src;
        if (t->end == t->begin) continue;
        if (!src) {
            rc = sink_put(s, ck_bytes(ck, t), (size_t)(t->end - t->begin));
            continue;
        }
        const size_t es = nn_dtype_size(t->dtype), chunk = sizeof buf / es;
        for (size_t k = 0; k < t->numel && !rc; k += chunk) {
            size_t m = t->numel - k < chunk ? (size_t)t->numel - k : chunk;
            ck_encode(buf, src + k, m, t->dtype);
            rc = sink_put(s, buf, m * es);
        }
    }
    free(order);
    return rc;
}

/* The JSON header of ck, padded with spaces so that 8 + its length is a multiple of 8, ending
 * its metadata with the format key and the format-2 checksum of the file it heads: XXH3-64 of
 * the length bytes, this header with its 16 digits '0', and the data section, streamed.
 * Returns 0, or -1 when out of memory (no message; b->s is the caller's to free). */
static int build_header(const nn_ckpt *ck, sbuf *b) {
    sb_puts(b, "{\"__metadata__\":{");
    for (size_t i = 0; i < ck->nmeta; i++) {
        if (ck_reserved_key(ck->mkeys[i])) continue; /* rewritten below */
        sb_json_str(b, ck->mkeys[i]);
        sb_puts(b, ":");
        sb_json_str(b, ck->mvals[i]);
        sb_puts(b, ",");
    }
    sb_json_str(b, NN_CKPT_FORMAT_KEY);
    sb_puts(b, ":");
    sb_json_str(b, NN_CKPT_FORMAT);
    sb_puts(b, ",");
    sb_json_str(b, NN_CKPT_CHECKSUM_KEY);
    sb_puts(b, ":\"");
    size_t digits_at = b->len;
    sb_puts(b, "0000000000000000\"}"); /* the checksum's 16 digits, filled in below */
    for (size_t i = 0; i < ck->n; i++) {
        const nn_ckpt_tensor *t = &ck->recs[i]->t;
        sb_puts(b, ",");
        sb_json_str(b, t->name);
        sb_puts(b, ":{\"dtype\":\"");
        sb_puts(b, nn_dtype_name(t->dtype));
        sb_puts(b, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) sb_puts(b, ",");
            sb_printf_u64(b, (uint64_t)t->shape[d]);
        }
        sb_puts(b, "],\"data_offsets\":[");
        sb_printf_u64(b, t->begin);
        sb_puts(b, ",");
        sb_printf_u64(b, t->end);
        sb_puts(b, "]}");
    }
    sb_puts(b, "}");
    while (!b->oom && (8 + b->len) % 8) sb_puts(b, " ");
    sink s = {.hash = b->oom ? NULL : XXH3_createState()};
    if (!s.hash) return -1;
    unsigned char len8[8];
    put_le64(len8, b->len);
    XXH3_64bits_reset(s.hash);
    XXH3_64bits_update(s.hash, len8, 8);
    XXH3_64bits_update(s.hash, b->s, b->len);
    int rc = put_data(ck, &s);
    uint64_t h = XXH3_64bits_digest(s.hash);
    XXH3_freeState(s.hash);
    if (rc) return -1;
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    memcpy(b->s + digits_at, hex, 16);
    return 0;
}

int nn_ckpt_save_mem(const nn_ckpt *ck, unsigned char **bytes, size_t *len) {
    if (bytes) *bytes = NULL;
    if (len) *len = 0;
    if (!ck || !bytes || !len) return ag_error("nn_ckpt_save_mem: NULL argument");
    sbuf hdr = {0};
    unsigned char *buf = NULL;
    if (!build_header(ck, &hdr)) buf = malloc(8 + hdr.len + ck->len);
    sink s = {.mem = buf ? buf + 8 + hdr.len : NULL};
    if (!buf || put_data(ck, &s)) {
        free(buf);
        free(hdr.s);
        return ag_error("nn_ckpt_save_mem: out of memory");
    }
    put_le64(buf, hdr.len);
    memcpy(buf + 8, hdr.s, hdr.len);
    *bytes = buf;
    *len = 8 + hdr.len + ck->len;
    free(hdr.s);
    return 0;
}

int nn_ckpt_save(const nn_ckpt *ck, const char *path) {
    if (!ck || !path || !path[0]) return ag_error("nn_ckpt_save: NULL argument");
    sbuf hdr = {0};
    if (build_header(ck, &hdr)) {
        free(hdr.s);
        return ag_error("%s: out of memory building the header", path);
    }
    ag_file af;
    FILE *f = ag_file_open(&af, path);
    if (!f) {
        free(hdr.s);
        return -1;
    }
    unsigned char len8[8];
    put_le64(len8, hdr.len);
    sink s = {.f = f};
    bool ok = !sink_put(&s, len8, 8) && !sink_put(&s, hdr.s, hdr.len) && !put_data(ck, &s);
    free(hdr.s);
    if (!ok) {
        ag_file_abort(&af);
        return ag_error("%s: writing the temporary file failed: %s (previous file kept)", path,
                        s.err ? strerror(s.err) : "out of memory");
    }
    return ag_file_commit(&af);
}

/* ---- Reading ------------------------------------------------------------------------------ */

/* A file image being read from its start: an open file, or a buffer. */
typedef struct ck_in {
    FILE *f;                  /* the file, or NULL */
    const unsigned char *mem; /* the buffer (when f is NULL) */
    uint64_t size;            /* bytes in the image (a file's size by fstat) */
    uint64_t at;              /* bytes read so far from mem */
    const char *name;         /* for messages */
    unsigned char *map;       /* mem is this mapped file: the checkpoint takes it, or NULL */
} ck_in;

/* Reads the next n bytes (`what`, for messages) into dst. Returns 0 or -1. */
static int in_read(ck_in *in, void *dst, size_t n, const char *what) {
    if (n == 0) return 0;
    if (!in->f) {
        memcpy(dst, in->mem + in->at, n);
        in->at += n;
        return 0;
    }
    size_t got = fread(dst, 1, n, in->f);
    if (got == n) return 0;
    int e = ferror(in->f) ? errno : 0;
    return ag_error("%s: reading %s: got %zu of %zu bytes: %s", in->name, what, got, n,
                    e ? strerror(e) : "the file shrank while being read");
}

/* Reads and checks a whole image: the length, the header, its validation against in->size,
 * and only then the data section. On success *out is the new checkpoint. Returns 0 or -1. */
static int load_image(nn_ckpt **out, ck_in *in, const nn_ckpt_load_opts *opts) {
    const char *src = in->name;
    unsigned long long size = in->size;
    unsigned char len8[8];
    if (in->size < 8)
        return ag_error("%s: file is %llu bytes, shorter than the 8-byte header length "
                        "(truncated, or not a safetensors file)",
                        src, size);
    if (in_read(in, len8, 8, "the header length")) return -1;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)len8[i] << (8 * i);
    if (n == 0) return ag_error("%s: header length is 0, expected a JSON object", src);
    if (n > in->size - 8)
        return ag_error("%s: header length %llu exceeds the file: it is %llu bytes, so at most "
                        "%llu follow the length field (truncated, or not a safetensors file)",
                        src, (unsigned long long)n, size, size - 8);
    if (n > MAX_HEADER)
        return ag_error("%s: header length %llu exceeds the limit of %llu bytes (100 MB; "
                        "not a safetensors file?)",
                        src, (unsigned long long)n, (unsigned long long)MAX_HEADER);
    int rc = -1;
    char err[256];
    js_val root = {0};
    ck_sum_info sum;
    nn_ckpt *ck = NULL;
    char *hdr = malloc((size_t)n);
    if (!hdr) {
        ag_error("%s: out of memory (a %llu-byte header)", src, (unsigned long long)n);
        goto done;
    }
    if (in_read(in, hdr, (size_t)n, "the header")) goto done;
    if (js_parse(hdr, (size_t)n, &root, err, sizeof err)) {
        ag_error("%s: header is not valid JSON: %s", src, err);
        goto done;
    }
    ck = nn_ckpt_new();
    if (ck) ck->source = malloc(strlen(src) + 1);
    if (!ck || !ck->source) {
        ag_error("%s: out of memory", src);
        goto done;
    }
    strcpy(ck->source, src);
    if (ck_validate(ck, &root, hdr, (size_t)n, in->size, &sum)) goto done;
    js_free(&root);
    /* Sizes agree: now the data section, mapped (the checkpoint owns the mapping from here) or
     * read into memory. */
    if (in->map) {
        ck->map = in->map;
        ck->map_len = (size_t)in->size;
        ck->data = in->map + in->at;
        in->map = NULL;
    } else if (ck->len && !(ck->data = malloc(ck->len))) {
        ag_error("%s: out of memory (%zu bytes of data)", src, ck->len);
        goto done;
    }
    ck->held = ck->data_cap = ck->len;
    if ((!ck->map && in_read(in, ck->data, ck->len, "the data section")) ||
        ck_verify(ck, &sum, hdr, (size_t)n, opts))
        goto done;
    *out = ck;
    ck = NULL;
    rc = 0;
done:
    js_free(&root);
    free(hdr);
    nn_ckpt_free(ck);
    return rc;
}

int nn_ckpt_load_mem(nn_ckpt **out, const void *bytes, size_t len, const char *name,
                     const nn_ckpt_load_opts *opts) {
    if (!out) return ag_error("nn_ckpt_load_mem: out is NULL");
    *out = NULL;
    if (!bytes && len) return ag_error("nn_ckpt_load_mem: bytes is NULL");
    ck_in in = {
        .mem = bytes ? bytes : (const void *)"", .size = len, .name = name ? name : "(buffer)"};
    return load_image(out, &in, opts);
}

int nn_ckpt_load_with(nn_ckpt **out, const char *path, const nn_ckpt_load_opts *opts) {
    if (!out) return ag_error("nn_ckpt_load: out is NULL");
    *out = NULL;
    if (!path) return ag_error("nn_ckpt_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return ag_error("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return ag_error("%s: not a regular file", path);
    }
    ck_in in = {.f = f, .size = (uint64_t)st.st_size, .name = path};
    if (opts && opts->map) {
        if (ck_map(fileno(f), path, (size_t)st.st_size, &in.map)) {
            fclose(f);
            return -1;
        }
        in.f = NULL;
        in.mem = in.map ? in.map : (const unsigned char *)"";
    }
    int rc = load_image(out, &in, opts);
    ck_unmap(in.map, (size_t)in.size); /* not taken: the load failed before the data */
    fclose(f);
    return rc;
}

int nn_ckpt_load(nn_ckpt **out, const char *path) { return nn_ckpt_load_with(out, path, NULL); }
