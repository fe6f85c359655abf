/* safetensors.c -- the file format: atomic writing and strictly validated reading
 * (format and rules in nn/checkpoint.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/io/ckpt_internal.h"
#include "nn/io/json.h"

#define MAX_HEADER ((uint64_t)100 << 20)  /* as the reference implementation: 100 MB */

/* ---- A growable string ------------------------------------------------------------------ */

typedef struct sbuf { char *s; size_t len, cap; bool oom; } sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = true; return; }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf_u64(sbuf *b, uint64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    sb_puts(b, t);
}

/* A JSON string literal: quotes, backslashes and control characters escaped. */
static void sb_json_str(sbuf *b, const char *s)
{
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

/* The JSON header, padded with spaces so that 8 + its length is a multiple of 8. */
static int build_header(const nn_ckpt *ck, sbuf *b)
{
    char sum[17];
    ck_checksum_hex(ck, sum);
    sb_puts(b, "{\"__metadata__\":{");
    for (size_t i = 0; i < ck->nmeta; i++) {
        if (strcmp(ck->mkeys[i], NN_CKPT_CHECKSUM_KEY) == 0) continue;  /* rewritten below */
        sb_json_str(b, ck->mkeys[i]);
        sb_puts(b, ":");
        sb_json_str(b, ck->mvals[i]);
        sb_puts(b, ",");
    }
    sb_json_str(b, NN_CKPT_CHECKSUM_KEY);
    sb_puts(b, ":");
    sb_json_str(b, sum);
    sb_puts(b, "}");
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
    return b->oom ? -1 : 0;
}

/* fsyncs the directory holding path so that the rename itself is durable (best effort). */
static void sync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int nn_ckpt_save(const nn_ckpt *ck, const char *path)
{
    if (!ck || !path || !path[0]) return ag_error("nn_ckpt_save: NULL argument");
    sbuf hdr = {0};
    if (build_header(ck, &hdr)) {
        free(hdr.s);
        return ag_error("%s: out of memory building the header", path);
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        free(hdr.s);
        return ag_error("%s: out of memory", path);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(hdr.s);
        free(tmp);
        return ag_error("%s: cannot create a temporary file beside it: %s", path,
                            strerror(e));
    }
    fchmod(fd, 0644);
    FILE *f = fdopen(fd, "wb");
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
    bool ok = f && fwrite(len8, 1, 8, f) == 8 && fwrite(hdr.s, 1, hdr.len, f) == hdr.len &&
              (ck->len == 0 || fwrite(ck->data, 1, ck->len, f) == ck->len) && fflush(f) == 0 &&
              fsync(fileno(f)) == 0;
    int e = errno;
    if (f) {
        if (fclose(f) != 0 && ok) {
            ok = false;
            e = errno;
        }
    } else {
        close(fd);
    }
    free(hdr.s);
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return ag_error("%s: writing the temporary file failed: %s (previous file kept)",
                            path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        free(tmp);
        return ag_error("%s: rename from the temporary file failed: %s (previous file kept)",
                            path, strerror(e));
    }
    free(tmp);
    sync_dir(path);
    return 0;
}

/* ---- Reading ------------------------------------------------------------------------------ */

/* Parses a whole file held in buf (malloc'd, len bytes; ownership taken). */
static int parse_owned(nn_ckpt **out, unsigned char *buf, size_t len, const char *src)
{
    char err[256];
    *out = NULL;
    if (len < 8) {
        free(buf);
        return ag_error("%s: file is %zu bytes, shorter than the 8-byte header length "
                            "(truncated, or not a safetensors file)", src, len);
    }
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)buf[i] << (8 * i);
    if (n > len - 8 || n > MAX_HEADER || n == 0) {
        free(buf);
        if (n == 0) return ag_error("%s: header length is 0, expected a JSON object", src);
        if (n > MAX_HEADER && n <= len - 8)
            return ag_error("%s: header length %llu exceeds the limit of %llu bytes", src,
                                (unsigned long long)n, (unsigned long long)MAX_HEADER);
        return ag_error("%s: header length %llu exceeds the file (%zu bytes after the "
                            "length field): truncated, or not a safetensors file", src,
                            (unsigned long long)n, len - 8);
    }
    js_val root;
    if (js_parse((const char *)buf + 8, (size_t)n, &root, err, sizeof err)) {
        free(buf);
        return ag_error("%s: header is not valid JSON: %s", src, err);
    }
    nn_ckpt *ck = nn_ckpt_new();
    char *s = ck ? malloc(strlen(src) + 1) : NULL;
    if (!s) {
        nn_ckpt_free(ck);
        js_free(&root);
        free(buf);
        return ag_error("%s: out of memory", src);
    }
    strcpy(s, src);
    ck->source = s;
    /* Validate in place (the JSON numbers point into the header text), then move the data
     * section to the front of buf, which becomes the checkpoint's buffer. */
    ck->len = len - 8 - (size_t)n;
    ck->data = buf + 8 + n;
    int rc = ck_validate(ck, &root, src);
    js_free(&root);
    memmove(buf, buf + 8 + n, ck->len);
    ck->data = buf;
    ck->data_cap = len;
    if (rc) {
        nn_ckpt_free(ck);
        return -1;
    }
    *out = ck;
    return 0;
}

int nn_ckpt_parse(nn_ckpt **out, const void *bytes, size_t len, const char *name)
{
    if (!out) return ag_error("nn_ckpt_parse: out is NULL");
    *out = NULL;
    if (!bytes && len) return ag_error("nn_ckpt_parse: bytes is NULL");
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) return ag_error("%s: out of memory (%zu bytes)", name ? name : "(buffer)", len);
    if (len) memcpy(buf, bytes, len);
    return parse_owned(out, buf, len, name ? name : "(buffer)");
}

int nn_ckpt_load(nn_ckpt **out, const char *path)
{
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
    size_t len = (size_t)st.st_size;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(f);
        return ag_error("%s: out of memory (%zu bytes)", path, len);
    }
    size_t got = len ? fread(buf, 1, len, f) : 0;
    int e = ferror(f) ? errno : 0;
    fclose(f);
    if (got != len) {
        free(buf);
        return ag_error("%s: read %zu of %zu bytes: %s", path, got, len,
                            e ? strerror(e) : "file shrank while reading");
    }
    return parse_owned(out, buf, len, path);
}
