/* datasets/text.c -- typed text <-> the word-level pipeline's tokens (text.h). */
#include "datasets/text.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ag_base.h"
#include "datasets/fra_eng.h"
#include "datasets/internal.h"
#include "datasets/unicode.h"

/* A growing NUL-terminated string. */
typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static int sb_put(sbuf *b, const char *p, size_t len) {
    if (b->n + len + 1 > b->cap) {
        char *s = ds_regrow(b->s, &b->cap, b->n + len + 1, 1);
        if (!s) return -1;
        b->s = s;
    }
    memcpy(b->s + b->n, p, len);
    b->n += len;
    b->s[b->n] = '\0';
    return 0;
}
static int sb_cp(sbuf *b, uint32_t cp) {
    unsigned char u[4];
    return sb_put(b, (const char *)u, (size_t)ds_utf8_encode(cp, u));
}
/* Hands the string over (an empty one if nothing was written). */
static int sb_done(sbuf *b, char **out) {
    if (!b->s && sb_put(b, "", 0)) return -1;
    *out = b->s;
    return 0;
}

/* Decodes the code point at s[i] (n bytes left in the string) or sets the error. */
static int decode_at(const unsigned char *s, size_t i, size_t n, uint32_t *cp) {
    int l = ds_utf8_decode(s + i, n - i, cp);
    if (!l) ag_error("invalid UTF-8 byte 0x%02X at byte %zu", s[i], i + 1);
    return l;
}

int ds__utf8_check(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = decode_at(u, i, n, &cp);
        if (!l) return -1;
        i += (size_t)l;
    }
    return 0;
}

/* What the normalizer makes of one code point: a replacement (NULL: keep it), or a blank. */
static const char *normal_form(uint32_t cp, bool *blank) {
    *blank = false;
    switch (cp) {
    case 0x2019:
    case 0x2018:
    case 0x201B:
    case 0x02BC: return "'";
    case 0x201C:
    case 0x201D:
    case 0x201E:
    case 0x201F: return "\"";
    case 0x2026: return "...";
    case 0x200B:
    case 0x2060:
    case 0xFEFF:
    case 0x00AD: return "";
    default: break;
    }
    *blank = ds_u_is_space(cp);
    return NULL;
}

int ds_text_normalize(const char *raw, char **out) {
    *out = NULL;
    const unsigned char *s = (const unsigned char *)raw;
    size_t n = strlen(raw);
    sbuf b = {0};
    bool space = false;        /* a blank is pending (written before the next character) */
    bool in_guillemet = false; /* after «: blanks before the next character are dropped */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = decode_at(s, i, n, &cp);
        if (!l) goto fail;
        bool blank;
        const char *rep = normal_form(cp, &blank);
        if (blank) {
            space = b.n > 0 && !in_guillemet;
        } else if (rep && !*rep) {
            /* removed: zero width, soft hyphen */
        } else {
            bool open = cp == 0xAB, close = cp == 0xBB;
            if (space && !close && sb_put(&b, " ", 1)) goto fail;
            space = false;
            in_guillemet = open;
            if (open || close ? sb_put(&b, "\"", 1)
                : rep         ? sb_put(&b, rep, strlen(rep))
                              : sb_put(&b, raw + i, (size_t)l))
                goto fail;
        }
        i += (size_t)l;
    }
    if (sb_done(&b, out)) goto fail;
    return 0;
fail:
    free(b.s);
    return -1;
}

/* ds_text_normalize's output with a space before each , . ! ? not preceded by one, but the
 * first character: ds_preprocess's splitting without its lowercasing. */
static int split_punct(const char *norm, char **out) {
    sbuf b = {0};
    for (size_t i = 0; norm[i]; i++) {
        char c = norm[i];
        bool punct = c == ',' || c == '.' || c == '!' || c == '?';
        if ((punct && i > 0 && norm[i - 1] != ' ' && sb_put(&b, " ", 1)) || sb_put(&b, &c, 1)) {
            free(b.s);
            return -1;
        }
    }
    return sb_done(&b, out);
}

int ds_text_source(const char *raw, const char *scheme, char **model, char **typed) {
    *model = NULL;
    if (typed) *typed = NULL;
    bool normalize = scheme && !strcmp(scheme, DS_PREPROCESS_NORMALIZE);
    if (scheme && strcmp(scheme, DS_PREPROCESS_D2L) && !normalize)
        return ag_error("preprocessing '%s' is unknown (this program knows '" DS_PREPROCESS_D2L
                        "' and '" DS_PREPROCESS_NORMALIZE "')",
                        scheme);
    if (normalize) { /* the text as typed: the model's codec normalizes it, once */
        if (ds__utf8_check(raw)) return -1;
        size_t len = strlen(raw) + 1;
        *model = malloc(len);
        if (typed) *typed = malloc(len);
        if (!*model || (typed && !*typed)) {
            free(*model);
            *model = NULL;
            if (typed) free(*typed), *typed = NULL;
            return ag_error("out of memory");
        }
        memcpy(*model, raw, len);
        if (typed) memcpy(*typed, raw, len);
        return 0;
    }
    char *norm;
    if (ds_text_normalize(raw, &norm)) return -1;
    int rc = ds_preprocess(norm, model);
    if (!rc && typed && (rc = split_punct(norm, typed))) {
        free(*model);
        *model = NULL;
    }
    free(norm);
    return rc;
}

/* The number of space-separated tokens of s (empty ones included, as ds_encode_sentence). */
static size_t count_tokens(const char *s) {
    size_t k = 1;
    for (; *s; s++) k += *s == ' ';
    return k;
}

/* Token j of s: its start, length in *len. */
static const char *token_at(const char *s, size_t j, size_t *len) {
    for (; j; s++)
        if (*s == ' ') j--;
    *len = strcspn(s, " ");
    return s;
}

int ds_text_unk_word(const ds_vocab *v, const char *model, const char *typed, char **word) {
    *word = NULL;
    size_t n = count_tokens(model), count = 0, which = 0;
    for (size_t j = 0; j < n; j++) {
        size_t len;
        const char *t = token_at(model, j, &len);
        if (ds_vocab_find(v, t, len) < 0 && !count++) which = j;
    }
    if (count != 1) return (int)(count > 1000000 ? 1000000 : count);
    const char *from = typed && count_tokens(typed) == n ? typed : model;
    size_t len;
    const char *t = token_at(from, which, &len);
    if (!(*word = malloc(len + 1))) return ag_error("out of memory");
    memcpy(*word, t, len);
    (*word)[len] = '\0';
    return 1;
}

/* ---- French detokenization ------------------------------------------------------------ */

/* The capital of a lowercase code point: the smallest code point whose lowercase (the
 * generated runs of datasets/unicode.h) it is; cp itself if there is none. */
static uint32_t upper_of(uint32_t cp) {
    uint32_t best = cp;
    for (size_t r = 0; r < ds_u_lower_runs_len; r++) {
        const ds_u_run *u = &ds_u_lower_runs[r];
        int64_t c = (int64_t)cp - u->delta;
        if (c < u->first || (c - u->first) % u->stride) continue;
        if ((c - u->first) / u->stride < u->count && (uint32_t)c < best) best = (uint32_t)c;
    }
    return best;
}

static bool tok_is(const char *t, size_t len, const char *w) {
    return len == strlen(w) && !memcmp(t, w, len);
}

/* Writes token t[0..len), its first letter capitalised when cap. */
static int put_token(sbuf *b, const char *t, size_t len, bool cap) {
    uint32_t cp;
    int l = len ? ds_utf8_decode((const unsigned char *)t, len, &cp) : 0;
    if (!cap || !l) return sb_put(b, t, len);
    return sb_cp(b, upper_of(cp)) || sb_put(b, t + l, len - (size_t)l);
}

int ds_detokenize_fr(const char *tokens, const char *unk_word, char **out) {
    *out = NULL;
    if (ds__utf8_check(tokens) || (unk_word && ds__utf8_check(unk_word))) return -1;
    sbuf b = {0};
    bool sentence_start = true, after_open = true, quote_open = false, unk_used = false;
    for (const char *p = tokens; *p;) {
        size_t len = strcspn(p, " ");
        const char *t = p;
        p += len + (p[len] == ' ');
        if (!len || tok_is(t, len, "<pad>") || tok_is(t, len, "<bos>") || tok_is(t, len, "<eos>"))
            continue;
        if (tok_is(t, len, "<unk>")) {
            if (unk_used || !unk_word || !*unk_word) continue;
            unk_used = true;
            t = unk_word;
            len = strlen(unk_word);
        }
        bool quote = tok_is(t, len, "\""), closing = quote && quote_open;
        bool glue = tok_is(t, len, ".") || tok_is(t, len, ",") || tok_is(t, len, ")") ||
                    tok_is(t, len, "...") || closing;
        if (b.n && !after_open && !glue && sb_put(&b, " ", 1)) goto fail;
        if (put_token(&b, t, len, sentence_start)) goto fail;
        if (quote) quote_open = !quote_open;
        after_open = tok_is(t, len, "(") || (quote && quote_open);
        bool end = tok_is(t, len, ".") || tok_is(t, len, "!") || tok_is(t, len, "?");
        /* capitalise the first word: opening marks ( " « do not use it up */
        sentence_start = end || (sentence_start && (after_open || tok_is(t, len, "\u00AB")));
    }
    if (sb_done(&b, out)) goto fail;
    return 0;
fail:
    free(b.s);
    return -1;
}

/* ---- sentences ---- */

static bool blank_byte(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The abbreviations (lowercase, without their last period) after which a period does not end
 * a sentence. */
static const char *const ABBREV[] = {
    "mr",  "mrs", "ms",  "dr",  "prof", "st",   "jr",   "sr",     "vs",   "etc", "e.g",
    "i.e", "a.m", "p.m", "no",  "mt",   "ft",   "gen",  "col",    "lt",   "sgt", "capt",
    "rev", "hon", "inc", "ltd", "co",   "corp", "dept", "approx", "fig",  "u.s", "u.k",
    "jan", "feb", "mar", "apr", "jun",  "jul",  "aug",  "sep",    "sept", "oct", "nov",
    "dec", "mon", "tue", "wed", "thu",  "fri",  "sat",  "sun",
};

/* True when the period at line[dot] ends an abbreviation or an initial: the word before it
 * (letters and periods back to a blank or the line's start). */
static bool abbreviation(const char *line, size_t dot) {
    size_t w = dot;
    while (w > 0 && !blank_byte(line[w - 1]) && line[w - 1] != '(' && line[w - 1] != '"') w--;
    const size_t len = dot - w;
    if (len == 1 && line[w] >= 'A' && line[w] <= 'Z' && line[w] != 'I') return true;
    if (len == 0 || len > 6) return false;
    char low[8];
    for (size_t i = 0; i < len; i++) {
        char c = line[w + i];
        low[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    low[len] = '\0';
    for (size_t i = 0; i < sizeof ABBREV / sizeof *ABBREV; i++)
        if (!strcmp(low, ABBREV[i])) return true;
    return false;
}

/* The bytes of an end mark at p (. ! ? or U+2026), else 0. */
static size_t end_mark(const char *p) {
    if (*p == '.' || *p == '!' || *p == '?') return 1;
    return (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x80 && (unsigned char)p[2] == 0xA6
               ? 3
               : 0;
}

/* The bytes of a closing quote or bracket at p (" ' ) ] U+00BB U+201D U+2019), else 0. */
static size_t closer(const char *p) {
    if (*p == '"' || *p == '\'' || *p == ')' || *p == ']') return 1;
    const unsigned char *u = (const unsigned char *)p;
    if (u[0] == 0xC2 && u[1] == 0xBB) return 2;
    if (u[0] == 0xE2 && u[1] == 0x80 && (u[2] == 0x9D || u[2] == 0x99)) return 3;
    return 0;
}

static bool starts_sentence(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '"' || c == '\'' || c == '(' ||
           c == '[' || (unsigned char)c >= 0x80;
}

static int push_sentence(const char *p, size_t len, char ***out, int *n, size_t *cap) {
    while (len && blank_byte(*p)) p++, len--;
    while (len && blank_byte(p[len - 1])) len--;
    if (!len) return 0;
    if ((size_t)*n == *cap) {
        char **g = ds_regrow(*out, cap, (size_t)*n + 1, sizeof **out);
        if (!g) return -1;
        *out = g;
    }
    char *s = malloc(len + 1);
    if (!s) return -1;
    memcpy(s, p, len);
    s[len] = '\0';
    (*out)[(*n)++] = s;
    return 0;
}

int ds_text_sentences(const char *line, char ***out) {
    *out = NULL;
    if (ds__utf8_check(line)) return -1;
    int n = 0;
    size_t cap = 0, start = 0, i = 0;
    const size_t len = strlen(line);
    while (i < len) {
        size_t m = end_mark(line + i);
        if (!m) {
            i++;
            continue;
        }
        const size_t mark = i;
        size_t end = i + m, k;
        while ((k = end_mark(line + end)) || (k = closer(line + end))) end += k;
        size_t next = end;
        while (next < len && blank_byte(line[next])) next++;
        i = end;
        if (next == end || next == len || !starts_sentence(line[next])) continue;
        if (line[mark] == '.' && end == mark + 1 && abbreviation(line, mark)) continue;
        if (push_sentence(line + start, end - start, out, &n, &cap)) goto oom;
        start = i = next;
    }
    if (push_sentence(line + start, len - start, out, &n, &cap)) goto oom;
    return n;
oom:
    for (int j = 0; j < n; j++) free((*out)[j]);
    free(*out);
    *out = NULL;
    return ag_error("ds_text_sentences: out of memory");
}
