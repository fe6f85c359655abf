/* datasets/vocab.c -- the token table: arena-backed strings, XXH3 hashes, linear probing. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>
#include <xxhash.h>

#include "datasets/internal.h"
#include "datasets/unicode.h"
#include "datasets/vocab.h"

#include "autograd/ag_file.h"

const char *const ds_reserved_tokens[3] = {"<pad>", "<bos>", "<eos>"};

/* Token bytes live in a chain of blocks that never move, so token pointers stay valid. */
typedef struct block {
    struct block *next;
    char data[];
} block;
#define BLOCK_BYTES ((size_t)64 * 1024)
#define MAX_TOKENS ((size_t)INT32_MAX - 1)

typedef struct {
    const char *str; /* NUL-terminated copy in the arena */
    uint32_t len;
    uint64_t hash; /* XXH3-64 of the bytes */
    int64_t freq;
} entry;

struct ds_vocab {
    entry *ent; /* indexed by id */
    size_t n, cap;
    /* Open addressing with linear probing, load factor <= 1/2. A slot holds
     * (upper 32 hash bits) << 32 | (id + 1), 0 = empty: most mismatches are rejected by the
     * tag without touching the entry. */
    uint64_t *slots;
    size_t mask;
    /* arena */
    block *blocks;
    char *cur;
    size_t left;
    ds_codec codec;   /* codec.encode NULL: none */
    bool number_tags; /* ds_vocab_set_number_tags */
};

ds_vocab *ds_vocab_new(void) {
    ds_vocab *v = calloc(1, sizeof *v);
    if (v) v->slots = calloc(64, sizeof *v->slots);
    if (!v || !v->slots) {
        free(v);
        ag_error("out of memory creating a vocabulary");
        return NULL;
    }
    v->mask = 63;
    return v;
}

void ds_vocab_free(ds_vocab *v) {
    if (!v) return;
    for (block *b = v->blocks; b;) {
        block *nx = b->next;
        free(b);
        b = nx;
    }
    free(v->ent);
    free(v->slots);
    if (v->codec.free) v->codec.free(v->codec.ctx);
    free(v);
}

int ds_vocab_set_codec(ds_vocab *v, const ds_codec *c) {
    if (v->codec.encode || !c->encode || !c->decode) {
        if (c->free) c->free(c->ctx);
        return ag_error("ds_vocab_set_codec: %s", v->codec.encode ? "the vocabulary has a codec"
                                                                  : "encode or decode is NULL");
    }
    v->codec = *c;
    return 0;
}

const ds_codec *ds_vocab_codec(const ds_vocab *v) { return v->codec.encode ? &v->codec : NULL; }

void ds_vocab_set_number_tags(ds_vocab *v, bool on) { v->number_tags = on; }
bool ds_vocab_number_tags(const ds_vocab *v) { return v->number_tags; }

int32_t ds_vocab_size(const ds_vocab *v) { return (int32_t)v->n; }

static inline uint64_t slot_tag(uint64_t h) { return h & 0xFFFFFFFF00000000ULL; }

static int32_t probe(const ds_vocab *v, const char *tok, size_t len, uint64_t h, size_t *slot) {
    size_t i = (size_t)h & v->mask;
    const uint64_t tag = slot_tag(h);
    for (;;) {
        uint64_t s = v->slots[i];
        if (s == 0) {
            *slot = i;
            return -1;
        }
        if (slot_tag(s) == tag) {
            size_t id = (size_t)(uint32_t)s - 1;
            const entry *e = &v->ent[id];
            if (e->hash == h && e->len == len && memcmp(e->str, tok, len) == 0) {
                *slot = i;
                return (int32_t)id;
            }
        }
        i = (i + 1) & v->mask;
    }
}

int32_t ds_vocab_find(const ds_vocab *v, const char *tok, size_t len) {
    size_t slot;
    return probe(v, tok, len, XXH3_64bits(tok, len), &slot);
}

int32_t ds_vocab_id(const ds_vocab *v, const char *tok) {
    int32_t id = ds_vocab_find(v, tok, strlen(tok));
    return id < 0 ? DS_UNK : id;
}

void ds_vocab_lookup(const ds_vocab *v, const char *const *tokens, size_t n, int32_t *ids) {
    for (size_t i = 0; i < n; i++) ids[i] = ds_vocab_id(v, tokens[i]);
}

static int rehash(ds_vocab *v) {
    size_t cap = (v->mask + 1) * 2;
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return ag_error("out of memory growing a vocabulary to %zu slots", cap);
    for (size_t id = 0; id < v->n; id++) {
        uint64_t h = v->ent[id].hash;
        size_t i = (size_t)h & (cap - 1);
        while (slots[i]) i = (i + 1) & (cap - 1);
        slots[i] = slot_tag(h) | (uint64_t)(id + 1);
    }
    free(v->slots);
    v->slots = slots;
    v->mask = cap - 1;
    return 0;
}

/* Copies len bytes + NUL into the arena. */
static const char *arena_copy(ds_vocab *v, const char *tok, size_t len) {
    if (v->left < len + 1) {
        size_t sz = len + 1 > BLOCK_BYTES ? len + 1 : BLOCK_BYTES;
        block *b = malloc(sizeof *b + sz);
        if (!b) return NULL;
        b->next = v->blocks;
        v->blocks = b;
        v->cur = b->data;
        v->left = sz;
    }
    char *p = v->cur;
    if (len) memcpy(p, tok, len);
    p[len] = 0;
    v->cur += len + 1;
    v->left -= len + 1;
    return p;
}

static int grow_entries(ds_vocab *v) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    entry *e = realloc(v->ent, cap * sizeof *e);
    if (!e) return ag_error("out of memory growing a vocabulary to %zu tokens", cap);
    v->ent = e;
    v->cap = cap;
    return 0;
}

int ds_vocab_count(ds_vocab *v, const char *tok, size_t len, int64_t n, int32_t *id_out) {
    uint64_t h = XXH3_64bits(tok, len);
    size_t slot;
    int32_t id = probe(v, tok, len, h, &slot);
    if (id < 0) {
        if (v->n >= MAX_TOKENS) return ag_error("vocabulary full (%zu tokens)", v->n);
        if (len >= UINT32_MAX) return ag_error("token of %zu bytes too long", len);
        if (v->n == v->cap && grow_entries(v)) return -1;
        if (2 * (v->n + 1) > v->mask + 1) { /* keep the load factor <= 1/2 */
            if (rehash(v)) return -1;
            probe(v, tok, len, h, &slot);
        }
        const char *p = arena_copy(v, tok, len);
        if (!p) return ag_error("out of memory storing a token of %zu bytes", len);
        id = (int32_t)v->n++;
        v->ent[id] = (entry){.str = p, .len = (uint32_t)len, .hash = h, .freq = 0};
        v->slots[slot] = slot_tag(h) | (uint64_t)(id + 1);
    }
    v->ent[id].freq += n;
    if (id_out) *id_out = id;
    return 0;
}

int ds_vocab_add(ds_vocab *v, const char *tok, size_t len, int32_t *id) {
    return ds_vocab_count(v, tok, len, 0, id);
}

const char *ds_vocab_token(const ds_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || (size_t)id >= v->n) return NULL;
    if (len) *len = v->ent[id].len;
    return v->ent[id].str;
}

int ds_vocab_to_tokens(const ds_vocab *v, const int32_t *ids, size_t n, const char **tokens) {
    for (size_t i = 0; i < n; i++) {
        tokens[i] = ds_vocab_token(v, ids[i], NULL);
        if (!tokens[i])
            return ag_error("ids[%zu] = %d is not an id of this vocabulary (size %zu)", i,
                            (int)ids[i], v->n);
    }
    return 0;
}

int64_t ds_vocab_freq(const ds_vocab *v, int32_t id) {
    if (id < 0 || (size_t)id >= v->n) return 0;
    return v->ent[id].freq;
}

typedef struct {
    int64_t count, rank;
    int32_t id;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1; /* descending frequency */
    return (x->rank > y->rank) - (x->rank < y->rank);              /* then first seen */
}

int ds_vocab_build_ranked(const ds_vocab *types, const int64_t *count, const int64_t *rank,
                          int64_t min_freq, const char *const *reserved, int n_reserved,
                          ds_vocab **out) {
    *out = NULL;
    ds_vocab *v = ds_vocab_new();
    if (!v) return -1;
    int rc = ds_vocab_add(v, "<unk>", 5, NULL);
    for (int i = 0; !rc && i < n_reserved; i++) {
        size_t len = strlen(reserved[i]);
        if (ds_vocab_find(v, reserved[i], len) >= 0) {
            rc = ag_error("reserved token \"%s\" given twice (or equal to <unk>)", reserved[i]);
            break;
        }
        rc = ds_vocab_add(v, reserved[i], len, NULL);
    }
    /* Only tokens that pass min_freq are sorted. */
    size_t m = 0;
    ranked *r = NULL;
    if (!rc) {
        for (size_t i = 0; i < types->n; i++) m += count[i] >= min_freq && count[i] > 0;
        r = malloc((m ? m : 1) * sizeof *r);
        if (!r) rc = ag_error("out of memory sorting %zu tokens", m);
    }
    if (!rc) {
        size_t k = 0;
        for (size_t i = 0; i < types->n; i++)
            if (count[i] >= min_freq && count[i] > 0)
                r[k++] = (ranked){count[i], rank[i], (int32_t)i};
        qsort(r, m, sizeof *r, cmp_ranked);
        for (size_t k2 = 0; !rc && k2 < m; k2++)
            rc = ds_vocab_add(v, types->ent[r[k2].id].str, types->ent[r[k2].id].len, NULL);
    }
    free(r);
    if (rc) {
        ds_vocab_free(v);
        return rc;
    }
    /* Frequencies of the new ids, from the counts given. */
    for (size_t id = 0; id < v->n; id++) {
        int32_t t = ds_vocab_find(types, v->ent[id].str, v->ent[id].len);
        v->ent[id].freq = t >= 0 ? count[t] : 0;
    }
    *out = v;
    return 0;
}

int ds_vocab_build(const ds_vocab *counts, int64_t min_freq, const char *const *reserved,
                   int n_reserved, ds_vocab **out) {
    int64_t *rank = malloc((counts->n ? counts->n : 1) * sizeof *rank);
    if (!rank) {
        *out = NULL;
        return ag_error("out of memory building a vocabulary");
    }
    for (size_t i = 0; i < counts->n; i++) rank[i] = (int64_t)i;
    int64_t *count = malloc((counts->n ? counts->n : 1) * sizeof *count);
    if (!count) {
        free(rank);
        *out = NULL;
        return ag_error("out of memory building a vocabulary");
    }
    for (size_t i = 0; i < counts->n; i++) count[i] = counts->ent[i].freq;
    int rc = ds_vocab_build_ranked(counts, count, rank, min_freq, reserved, n_reserved, out);
    free(rank);
    free(count);
    return rc;
}

int ds_vocab_check_reserved(const ds_vocab *v) {
    static const char *const want[4] = {"<unk>", "<pad>", "<bos>", "<eos>"};
    for (int i = 0; i < 4; i++) {
        if ((size_t)i >= v->n || strcmp(v->ent[i].str, want[i]) != 0)
            return ag_error("vocabulary id %d is %s%s%s, expected %s", i,
                            (size_t)i < v->n ? "\"" : "",
                            (size_t)i < v->n ? v->ent[i].str : "missing",
                            (size_t)i < v->n ? "\"" : "", want[i]);
    }
    return 0;
}

int ds_vocab_text(const ds_vocab *v, const char *name, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    size_t total = 1;
    for (size_t id = 0; id < v->n; id++) {
        if (memchr(v->ent[id].str, '\n', v->ent[id].len) ||
            memchr(v->ent[id].str, '\r', v->ent[id].len))
            return ag_error("%s: token %zu contains a line break; not representable", name, id);
        total += v->ent[id].len + 1;
    }
    char *s = malloc(total);
    if (!s) return ag_error("%s: out of memory", name);
    size_t n = 0;
    for (size_t id = 0; id < v->n; id++) {
        memcpy(s + n, v->ent[id].str, v->ent[id].len);
        n += v->ent[id].len;
        s[n++] = '\n';
    }
    s[n] = '\0';
    *out = s;
    *len = n;
    return 0;
}

int ds_vocab_save(const ds_vocab *v, const char *path) {
    char *text;
    size_t n;
    int rc = ds_vocab_text(v, path, &text, &n);
    if (rc) return rc;
    /* through a temporary file and a rename: a failed write (a full disk) keeps the old file */
    ag_file out;
    FILE *f = ag_file_open(&out, path);
    if (!f) {
        free(text);
        return -1;
    }
    bool bad = fwrite(text, 1, n, f) != n;
    free(text);
    if (bad) {
        ag_file_abort(&out);
        return ag_error("%s: write failed: %s (previous file kept)", path, strerror(errno));
    }
    return ag_file_commit(&out) ? -1 : 0;
}

int ds_vocab_parse(const char *data, size_t len, const char *name, ds_vocab **out) {
    *out = NULL;
    if (len == 0) return ag_error("%s: empty vocabulary file", name);
    ds_vocab *v = ds_vocab_new();
    if (!v) return -1;
    const unsigned char *s = (const unsigned char *)data;
    size_t pos = 0, line = 1;
    int rc = 0;
    while (pos < len && !rc) {
        const unsigned char *nl = memchr(s + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - s) : len, tend = end;
        if (nl && tend > pos && s[tend - 1] == '\r') tend--; /* CRLF */
        for (size_t i = pos; i < tend && !rc;) {
            uint32_t cp;
            int l = ds_utf8_decode(s + i, tend - i, &cp);
            if (l == 0)
                rc = ag_error("%s:%zu:%zu: invalid UTF-8 byte 0x%02X", name, line, i - pos + 1,
                              s[i]);
            else if (cp == 0)
                rc = ag_error("%s:%zu:%zu: NUL byte in a token", name, line, i - pos + 1);
            else if (cp == '\r')
                rc =
                    ag_error("%s:%zu:%zu: carriage return inside a token", name, line, i - pos + 1);
            i += l ? (size_t)l : 1;
        }
        if (!rc) {
            int32_t before = (int32_t)v->n, id;
            rc = ds_vocab_add(v, data + pos, tend - pos, &id);
            if (!rc && id < before)
                rc = ag_error("%s:%zu: duplicate token \"%.*s\" (first at line %d)", name, line,
                              (int)(tend - pos > 64 ? 64 : tend - pos), data + pos, (int)id + 1);
        }
        pos = end + 1;
        line++;
    }
    if (rc) {
        ds_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int ds_vocab_load(const char *path, ds_vocab **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ag_error("%s: cannot open vocabulary: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0;
    int rc = ds_read_fd(fd, path, &buf, &n);
    close(fd);
    if (!rc) rc = ds_vocab_parse(buf ? buf : "", n, path, out);
    free(buf);
    return rc;
}
