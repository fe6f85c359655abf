/* datasets/fra_eng.c -- reading fra.txt, d2l preprocessing and tokenization in one pass,
 * the split, the vocabularies and the padded arrays. Batches, prediction helpers and the
 * data path are in fra_batches.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/fra_internal.h"
#include "datasets/internal.h"
#include "autograd/ag_base.h"
#include "datasets/unicode.h"

ds_fra_options ds_fra_defaults(void) {
    return (ds_fra_options){.num_examples = 600,
                            .num_steps = 10,
                            .min_freq = 2,
                            .batch_size = 64,
                            .seed = 0,
                            .valid_frac = 0,
                            .test_frac = 0,
                            .split_seed = 0,
                            .batch_tokens = 0,
                            .split_mode = DS_SPLIT_RANDOM};
}

void ds_fra_free(ds_fra *d) {
    if (!d) return;
    for (int s = 0; s < 2; s++) {
        ds_fra_side *sd = &d->side[s];
        ds_vocab_free(sd->types);
        ds_vocab_free(sd->vocab);
        free(sd->tok);
        free(sd->off);
        free(sd->ids);
        free(sd->valid_len);
    }
    free(d->line_of_pair);
    free(d->raw);
    free(d->raw_off);
    for (int p = 0; p < 4; p++)
        if (p == DS_ALL || d->part[p] != d->part[DS_ALL]) free(d->part[p]);
    free(d);
}

/* ---- one pass: lines -> preprocessed line buffer -> tokens ---------------------------- */

typedef struct {
    const unsigned char *s;
    size_t n;
    const char *name;
    unsigned char *lb; /* the current line, preprocessed */
    size_t lbcap;
    bool first; /* at the file's first character, which gets no space */
} parser;

/* Splits lb[a..b) on single spaces and appends the tokens' type ids to one side. */
static int add_sentence(ds_fra_side *sd, const unsigned char *lb, size_t a, size_t b) {
    for (;;) {
        const unsigned char *sp = memchr(lb + a, ' ', b - a);
        size_t e = sp ? (size_t)(sp - lb) : b;
        if (sd->ntok == sd->captok) {
            int32_t *t = ds_regrow(sd->tok, &sd->captok, sd->ntok + 1, sizeof *sd->tok);
            if (!t) return -1;
            sd->tok = t;
        }
        int32_t id;
        if (ds_vocab_count(sd->types, (const char *)lb + a, e - a, 1, &id)) return -1;
        sd->tok[sd->ntok++] = id;
        if (!sp) return 0;
        a = e + 1;
    }
}

/* Keeps the raw line raw[0..n) (exactly one tab) as two NUL-terminated sides. */
static int add_raw(ds_fra *d, const unsigned char *raw, size_t n) {
    size_t np = (size_t)d->n_pairs;
    char *r = ds_regrow(d->raw, &d->raw_cap, d->raw_n + n + 1, 1);
    if (!r) return -1;
    d->raw = r;
    int64_t *o = ds_regrow(d->raw_off, &d->raw_off_cap, 2 * np + 2, sizeof *o);
    if (!o) return -1;
    d->raw_off = o;
    const unsigned char *tab = memchr(raw, '\t', n);
    memcpy(r + d->raw_n, raw, n);
    r[d->raw_n + n] = 0;
    o[2 * np] = (int64_t)d->raw_n;
    o[2 * np + 1] = (int64_t)(d->raw_n + (size_t)(tab - raw) + 1);
    r[d->raw_n + (size_t)(tab - raw)] = 0;
    d->raw_n += n + 1;
    return 0;
}

static int add_pair(ds_fra *d, const unsigned char *lb, size_t tab, size_t k, int64_t line) {
    size_t np = (size_t)d->n_pairs;
    if (np + 2 > d->cap_pairs) {
        /* line_of_pair and both off[] share one capacity: grow all three from it. */
        size_t cap = d->cap_pairs, c2;
        int64_t *l = ds_regrow(d->line_of_pair, &cap, np + 2, sizeof *l);
        if (!l) return -1;
        d->line_of_pair = l;
        for (int s = 0; s < 2; s++) {
            c2 = d->cap_pairs;
            int64_t *o = ds_regrow(d->side[s].off, &c2, np + 2, sizeof *o);
            if (!o) return -1;
            d->side[s].off = o;
        }
        d->cap_pairs = cap;
    }
    if (add_sentence(&d->side[DS_SRC], lb, 0, tab) ||
        add_sentence(&d->side[DS_TGT], lb, tab + 1, k))
        return -1;
    d->line_of_pair[np] = line;
    d->side[DS_SRC].off[np + 1] = (int64_t)d->side[DS_SRC].ntok;
    d->side[DS_TGT].off[np + 1] = (int64_t)d->side[DS_TGT].ntok;
    d->n_pairs++;
    return 0;
}

/* Byte classes of the preprocessing loop. */
enum { C_COPY = 0, C_UPPER = 1, C_PUNCT = 2, C_OTHER = 3 };
static const uint8_t byte_class[256] = {
    [0] = C_OTHER,   ['\t'] = C_OTHER, ['A'] = C_UPPER, ['B'] = C_UPPER, ['C'] = C_UPPER,
    ['D'] = C_UPPER, ['E'] = C_UPPER,  ['F'] = C_UPPER, ['G'] = C_UPPER, ['H'] = C_UPPER,
    ['I'] = C_UPPER, ['J'] = C_UPPER,  ['K'] = C_UPPER, ['L'] = C_UPPER, ['M'] = C_UPPER,
    ['N'] = C_UPPER, ['O'] = C_UPPER,  ['P'] = C_UPPER, ['Q'] = C_UPPER, ['R'] = C_UPPER,
    ['S'] = C_UPPER, ['T'] = C_UPPER,  ['U'] = C_UPPER, ['V'] = C_UPPER, ['W'] = C_UPPER,
    ['X'] = C_UPPER, ['Y'] = C_UPPER,  ['Z'] = C_UPPER, [','] = C_PUNCT, ['.'] = C_PUNCT,
    ['!'] = C_PUNCT, ['?'] = C_PUNCT,
#define X16(a)                                                                                     \
    [a] = C_OTHER, [a + 1] = C_OTHER, [a + 2] = C_OTHER, [a + 3] = C_OTHER, [a + 4] = C_OTHER,     \
    [a + 5] = C_OTHER, [a + 6] = C_OTHER, [a + 7] = C_OTHER, [a + 8] = C_OTHER, [a + 9] = C_OTHER, \
    [a + 10] = C_OTHER, [a + 11] = C_OTHER, [a + 12] = C_OTHER, [a + 13] = C_OTHER,                \
    [a + 14] = C_OTHER, [a + 15] = C_OTHER
    X16(0x80),       X16(0x90),        X16(0xA0),       X16(0xB0),       X16(0xC0),
    X16(0xD0),       X16(0xE0),        X16(0xF0),
#undef X16
};

/* Preprocesses the line s[start..end) into p->lb (d2l's preprocess_nmt on one line); returns
 * its length in *len, the number of tabs in *tabs and the position of the first tab in *tab.
 * The previous character of the line's first character is the line break (not a space),
 * except for the file's very first character, which never gets a space (d2l's i > 0). The
 * previous character of any other position is the last byte written (inserted spaces only
 * precede punctuation, so "previous input character is a space" = "last output byte is a
 * space"). */
static int preprocess_line(parser *p, size_t start, size_t end, int64_t line, size_t *len,
                           int *tabs, size_t *tab) {
    /* Worst case per input byte: 2 output bytes (space + punctuation); 2-byte code points
     * grow to at most 3. */
    unsigned char *lb = ds_regrow(p->lb, &p->lbcap, 2 * (end - start) + 8, 1);
    if (!lb) return -1;
    p->lb = lb;
    const unsigned char *s = p->s;
    unsigned char *o = p->lb;
    size_t k = 0;
    int ntabs = 0;
    for (size_t i = start; i < end;) {
        unsigned c = s[i];
        switch (byte_class[c]) {
        case C_COPY:
            o[k++] = (unsigned char)c;
            i++;
            continue;
        case C_UPPER:
            o[k++] = (unsigned char)(c + 32);
            i++;
            continue;
        case C_PUNCT:
            if (k == 0 ? !p->first : o[k - 1] != ' ') o[k++] = ' ';
            o[k++] = (unsigned char)c;
            i++;
            continue;
        default: break;
        }
        if (c == '\t') {
            if (ntabs++ == 0) *tab = k;
            o[k++] = '\t';
            i++;
            continue;
        }
        if (c == 0)
            return ag_error("%s:%lld:%zu: NUL byte", p->name, (long long)line + 1, i - start + 1);
        uint32_t cp, low[2];
        int l = ds_utf8_decode(s + i, p->n - i, &cp);
        if (l == 0 || i + (size_t)l > end)
            return ag_error("%s:%lld:%zu: invalid UTF-8 byte 0x%02X", p->name, (long long)line + 1,
                            i - start + 1, s[i]);
        if (cp == 0xA0 || cp == 0x202F) { /* no-break spaces -> ' ' (before lowercasing) */
            o[k++] = ' ';
        } else {
            /* Lowercase letters are never ' ' or , . ! ? so no rule applies to them. */
            int m = cp == 0x3A3 ? (low[0] = ds_u_sigma_lower(s, start, i, p->n), 1)
                                : ds_u_lower(cp, low);
            for (int t = 0; t < m; t++) k += (size_t)ds_utf8_encode(low[t], o + k);
        }
        i += (size_t)l;
    }
    p->first = false; /* the first character is consumed, or a line break follows */
    *len = k;
    *tabs = ntabs;
    return 0;
}

int ds_preprocess(const char *raw, char **out) {
    *out = NULL;
    size_t n = strlen(raw), len = 0, tab = 0;
    int tabs = 0;
    /* first = true: a leading , . ! ? gets no space (no empty first token), as the file's
     * first character. */
    parser p = {.s = (const unsigned char *)raw, .n = n, .name = "sentence", .first = true};
    if (preprocess_line(&p, 0, n, 0, &len, &tabs, &tab)) {
        free(p.lb);
        return -1;
    }
    char *s = realloc(p.lb, len + 1); /* lb holds at least 2 n + 8 bytes */
    if (!s) s = (char *)p.lb;
    s[len] = '\0';
    *out = s;
    return 0;
}

static int parse(ds_fra *d, const char *data, size_t n, const char *name) {
    parser p = {.s = (const unsigned char *)data, .n = n, .name = name, .first = true};
    const int64_t limit = d->opt.num_examples;
    ds_fra_stats *st = &d->stats;
    size_t pos = 0;
    int64_t line = 0;
    int rc = 0;
    for (int s = 0; s < 2; s++) {
        d->side[s].types = ds_vocab_new();
        if (!d->side[s].types) return -1;
    }
    while (pos < n && (limit == 0 || line <= limit)) {
        /* The line ends at the first "\n" or "\r" (Python's universal newlines). */
        const unsigned char *nl = memchr(p.s + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - p.s) : n;
        const unsigned char *cr = memchr(p.s + pos, '\r', end - pos);
        if (cr) end = (size_t)(cr - p.s);
        size_t k = 0, tab = 0;
        int tabs = 0;
        if ((rc = preprocess_line(&p, pos, end, line, &k, &tabs, &tab))) break;
        if (tabs == 1) {
            if ((rc = add_raw(d, p.s + pos, end - pos))) break;
            if ((rc = add_pair(d, p.lb, tab, k, line))) break;
        } else {
            if (tabs == 0) st->skipped_no_tab++;
            else st->skipped_many_tabs++;
            if (!st->first_skipped) st->first_skipped = line + 1;
        }
        if (end < n) {
            pos = end + 1 + (p.s[end] == '\r' && end + 1 < n && p.s[end + 1] == '\n');
        } else {
            pos = n;
        }
        line++;
    }
    free(p.lb);
    st->lines = line;
    st->pairs = d->n_pairs;
    st->tokens[0] = (int64_t)d->side[0].ntok;
    st->tokens[1] = (int64_t)d->side[1].ntok;
    if (rc) return rc;
    if (n == 0) return ag_error("%s: empty file", name);
    if (d->n_pairs == 0)
        return ag_error("%s: no sentence pair: none of the %lld lines read has exactly one tab",
                        name, (long long)line);
    return 0;
}

/* ---- split, vocabularies, arrays ------------------------------------------------------ */

/* d2l's Vocab over the training pairs (ascending), then build_array_nmt over every pair. */
static int build_side(ds_fra *d, ds_fra_side *sd, int64_t *truncated) {
    size_t nt = (size_t)ds_vocab_size(sd->types);
    int64_t *count = calloc(nt + 1, sizeof *count), *rank = malloc((nt + 1) * sizeof *rank);
    int32_t *map = malloc((nt + 1) * sizeof *map);
    const int T = d->opt.num_steps;
    int rc = 0;
    if (!count || !rank || !map) rc = ag_error("out of memory counting %zu token types", nt);
    if (!rc) {
        int64_t r = 0;
        for (int64_t q = 0; q < d->part_n[DS_TRAIN]; q++) {
            int64_t p = d->part[DS_TRAIN][q];
            for (int64_t j = sd->off[p]; j < sd->off[p + 1]; j++) {
                int32_t t = sd->tok[j];
                if (count[t]++ == 0) rank[t] = r++;
            }
        }
        rc = ds_vocab_build_ranked(sd->types, count, rank, d->opt.min_freq, ds_reserved_tokens, 3,
                                   &sd->vocab);
    }
    if (!rc) { /* type id -> vocabulary id (or <unk>): one lookup per type, not per token */
        for (size_t t = 0; t < nt; t++) {
            size_t len;
            const char *str = ds_vocab_token(sd->types, (int32_t)t, &len);
            int32_t id = ds_vocab_find(sd->vocab, str, len);
            map[t] = id < 0 ? DS_UNK : id;
        }
        sd->ids = malloc((size_t)d->n_pairs * (size_t)T * sizeof *sd->ids);
        sd->valid_len = malloc((size_t)d->n_pairs * sizeof *sd->valid_len);
        if (!sd->ids || !sd->valid_len)
            rc = ag_error("out of memory for %lld x %d ids", (long long)d->n_pairs, T);
    }
    for (int64_t p = 0; !rc && p < d->n_pairs; p++) {
        int32_t *row = sd->ids + p * T;
        int64_t len = sd->off[p + 1] - sd->off[p];
        const int32_t *tk = sd->tok + sd->off[p];
        int j = 0;
        for (; j < T && j < len; j++) row[j] = map[tk[j]];
        if (j < T) row[j++] = DS_EOS;
        else (*truncated)++; /* len + 1 > T: the <eos> is cut off */
        for (; j < T; j++) row[j] = DS_PAD;
        int32_t v =
            0; /* d2l: (array != <pad>).sum(1) -- a literal "<pad>" token counts as padding too */
        for (j = 0; j < T; j++) v += row[j] != DS_PAD;
        sd->valid_len[p] = v;
    }
    free(count);
    free(rank);
    free(map);
    return rc;
}

static int check_options(const ds_fra_options *o) {
    if (o->num_examples < 0)
        return ag_error("num_examples = %lld, expected >= 0", (long long)o->num_examples);
    if (o->num_steps < 1) return ag_error("num_steps = %d, expected >= 1", (int)o->num_steps);
    if (o->batch_size < 1) return ag_error("batch_size = %d, expected >= 1", (int)o->batch_size);
    if (o->batch_tokens < 0)
        return ag_error("batch_tokens = %d, expected >= 0", (int)o->batch_tokens);
    if (!(o->valid_frac >= 0 && o->valid_frac <= DS_MAX_FRAC) ||
        !(o->test_frac >= 0 && o->test_frac <= DS_MAX_FRAC) || !(o->valid_frac + o->test_frac < 1))
        return ag_error(
            "valid_frac = %g, test_frac = %g: expected each in [0, %g] and a sum below 1",
            o->valid_frac, o->test_frac, DS_MAX_FRAC);
    if (o->split_mode != DS_SPLIT_RANDOM && o->split_mode != DS_SPLIT_DISJOINT)
        return ag_error("split_mode = %d, expected 0 (random) or 1 (disjoint)", (int)o->split_mode);
    return 0;
}

int ds_fra_load_mem(const char *data, size_t len, const char *name, const ds_fra_options *opt,
                    ds_fra **out) {
    *out = NULL;
    ds_fra_options o = opt ? *opt : ds_fra_defaults();
    if (!name) name = "<memory>";
    int rc = check_options(&o);
    if (rc) return rc;
    if ((size_t)o.num_steps > SIZE_MAX / 4 / 2)
        return ag_error("num_steps = %d too large", (int)o.num_steps);
    ds_fra *d = calloc(1, sizeof *d);
    if (!d) return ag_error("out of memory");
    d->opt = o;
    d->cap_pairs = 64;
    d->line_of_pair = malloc(d->cap_pairs * sizeof *d->line_of_pair);
    if (!d->line_of_pair) rc = ag_error("out of memory");
    if (!rc) {
        for (int s = 0; s < 2 && !rc; s++) {
            d->side[s].off = calloc(d->cap_pairs, sizeof(int64_t));
            if (!d->side[s].off) rc = ag_error("out of memory");
        }
    }
    if (!rc) rc = parse(d, data, len, name);
    if (!rc && (size_t)d->n_pairs > SIZE_MAX / sizeof(int32_t) / (size_t)o.num_steps)
        rc = ag_error("%lld pairs x %d steps too large", (long long)d->n_pairs, (int)o.num_steps);
    if (!rc) rc = ds__fra_make_parts(d);
    for (int s = 0; s < 2 && !rc; s++) rc = build_side(d, &d->side[s], &d->stats.truncated[s]);
    if (rc) {
        ds_fra_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int ds_fra_load(const char *path, const ds_fra_options *opt, ds_fra **out) {
    *out = NULL;
    if (!path) return ag_error("ds_fra_load: path is NULL");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ag_error("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ag_error("%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return ag_error("%s: is a directory, expected fra.txt", path);
    }
    int rc;
    if (S_ISREG(sb.st_mode) && sb.st_size > 0) {
        /* Map the file: pages are read on demand, so the default run (first 601 lines)
         * touches only the start of the file. */
        size_t n = (size_t)sb.st_size;
        void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            close(fd);
            posix_madvise(m, n, POSIX_MADV_SEQUENTIAL);
            rc = ds_fra_load_mem(m, n, path, opt, out);
            munmap(m, n);
            return rc;
        }
    }
    /* Pipes, character devices, empty files, or mmap refused: read() it all. */
    char *buf = NULL;
    size_t n = 0;
    rc = ds_read_fd(fd, path, &buf, &n);
    close(fd);
    if (!rc) rc = ds_fra_load_mem(buf ? buf : "", n, path, opt, out);
    free(buf);
    return rc;
}

/* ---- accessors ------------------------------------------------------------------------ */

const ds_fra_options *ds_fra_opts(const ds_fra *d) { return &d->opt; }
const ds_fra_stats *ds_fra_get_stats(const ds_fra *d) { return &d->stats; }
int64_t ds_fra_num_pairs(const ds_fra *d) { return d->n_pairs; }
int32_t ds_fra_num_steps(const ds_fra *d) { return d->opt.num_steps; }
const ds_vocab *ds_fra_vocab(const ds_fra *d, ds_side side) { return d->side[side].vocab; }
const int32_t *ds_fra_ids(const ds_fra *d, ds_side side) { return d->side[side].ids; }
const int32_t *ds_fra_valid_len(const ds_fra *d, ds_side side) { return d->side[side].valid_len; }
const int64_t *ds_fra_part_pairs(const ds_fra *d, ds_part part) { return d->part[part]; }
int64_t ds_fra_part_size(const ds_fra *d, ds_part part) { return d->part_n[part]; }

const char *ds_fra_raw(const ds_fra *d, ds_side side, int64_t pair, size_t *len) {
    if (pair < 0 || pair >= d->n_pairs) return NULL;
    const char *r = d->raw + d->raw_off[2 * pair + (int)side];
    if (len) *len = strlen(r);
    return r;
}

int64_t ds_fra_shared_src_test(const ds_fra *d) { return d->shared_src_test; }

int64_t ds_fra_line_of_pair(const ds_fra *d, int64_t pair) {
    return pair >= 0 && pair < d->n_pairs ? d->line_of_pair[pair] : -1;
}

int32_t ds_fra_sentence_len(const ds_fra *d, ds_side side, int64_t pair) {
    if (pair < 0 || pair >= d->n_pairs) return -1;
    return (int32_t)(d->side[side].off[pair + 1] - d->side[side].off[pair]);
}

const char *ds_fra_token(const ds_fra *d, ds_side side, int64_t pair, int32_t j, size_t *len) {
    int32_t n = ds_fra_sentence_len(d, side, pair);
    if (j < 0 || j >= n) return NULL;
    const ds_fra_side *sd = &d->side[side];
    return ds_vocab_token(sd->types, sd->tok[sd->off[pair] + j], len);
}

int ds_fra_sentence(const ds_fra *d, ds_side side, int64_t pair, char **out) {
    *out = NULL;
    int32_t n = ds_fra_sentence_len(d, side, pair);
    if (n < 0)
        return ag_error("pair %lld out of range (%lld pairs)", (long long)pair,
                        (long long)d->n_pairs);
    size_t total = 1;
    for (int32_t j = 0; j < n; j++) {
        size_t len = 0;
        ds_fra_token(d, side, pair, j, &len);
        total += len + 1;
    }
    char *s = malloc(total);
    if (!s) return ag_error("out of memory");
    size_t k = 0;
    for (int32_t j = 0; j < n; j++) {
        size_t len = 0;
        const char *t = ds_fra_token(d, side, pair, j, &len);
        if (j) s[k++] = ' ';
        memcpy(s + k, t, len);
        k += len;
    }
    s[k] = 0;
    *out = s;
    return 0;
}
