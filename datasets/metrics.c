/* datasets/metrics.c -- d2l BLEU, sacreBLEU-style corpus BLEU and chrF (see metrics.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "datasets/internal.h"
#include "datasets/metrics.h"
#include "datasets/unicode.h"
#include "datasets/vocab.h"

/* ---- clipped n-gram matching over uint32 sequences ------------------------------------
 * A hash table of the references' n-grams (XXH3 of the n values, linear probing, exact
 * comparison on equal hashes). For each reference the count of every n-gram is rebuilt
 * (`cur`, reset when `stamp` changes) and `max` keeps the largest count over references;
 * then every hypothesis n-gram found with max > 0 is a match and decrements max -- which
 * sums min(count_hyp, max_ref count) over the distinct n-grams, as d2l and sacreBLEU do. */

typedef struct {
    const uint32_t *key;
    uint64_t h;
    int64_t cur, max;
    size_t stamp;
} ng_ent;

typedef struct {
    ng_ent *e;
    int32_t *slot; /* entry index + 1, 0 = empty */
    size_t cap;    /* slots, a power of two >= 2 * entries */
} ng_tab;

static int ng_reserve(ng_tab *t, size_t entries) {
    size_t cap = 16;
    while (cap < 2 * entries + 2) cap *= 2;
    if (cap > ((size_t)1 << 31)) return ag_error("sentence of %zu n-grams too long", entries);
    t->e = malloc(cap / 2 * sizeof *t->e);
    t->slot = malloc(cap * sizeof *t->slot);
    t->cap = cap;
    if (!t->e || !t->slot) return ag_error("out of memory for %zu n-grams", entries);
    return 0;
}

static void ng_release(ng_tab *t) {
    free(t->e);
    free(t->slot);
}

static ng_ent *ng_find(ng_tab *t, const uint32_t *key, size_t n, uint64_t h, size_t *slot) {
    size_t mask = t->cap - 1, i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        int32_t s = t->slot[i];
        if (!s) {
            *slot = i;
            return NULL;
        }
        ng_ent *e = &t->e[s - 1];
        if (e->h == h && memcmp(e->key, key, n * sizeof *key) == 0) return e;
    }
}

/* Matches of order n of hyp against refs; t must have room for every reference n-gram. */
static int64_t ng_match(ng_tab *t, const uint32_t *hyp, size_t hl, const uint32_t *const *refs,
                        const size_t *rl, size_t nr, size_t n) {
    memset(t->slot, 0, t->cap * sizeof *t->slot);
    size_t ne = 0;
    for (size_t r = 0; r < nr; r++) {
        for (size_t i = 0; i + n <= rl[r]; i++) {
            const uint32_t *key = refs[r] + i;
            uint64_t h = XXH3_64bits(key, n * sizeof *key);
            size_t slot;
            ng_ent *e = ng_find(t, key, n, h, &slot);
            if (!e) {
                e = &t->e[ne++];
                *e = (ng_ent){.key = key, .h = h, .stamp = r};
                t->slot[slot] = (int32_t)ne;
            }
            if (e->stamp != r) {
                e->stamp = r;
                e->cur = 0;
            }
            if (++e->cur > e->max) e->max = e->cur;
        }
    }
    int64_t m = 0;
    for (size_t i = 0; i + n <= hl; i++) {
        size_t slot;
        ng_ent *e = ng_find(t, hyp + i, n, XXH3_64bits(hyp + i, n * sizeof *hyp), &slot);
        if (e && e->max > 0) {
            e->max--;
            m++;
        }
    }
    return m;
}

/* ---- tokenization ---------------------------------------------------------------------- */

typedef struct {
    uint32_t *v;
    size_t n, cap;
} u32buf;

static int push(u32buf *b, uint32_t x) {
    if (b->n == b->cap) {
        uint32_t *v = ds_regrow(b->v, &b->cap, b->n + 1, sizeof *b->v);
        if (!v) return -1;
        b->v = v;
    }
    b->v[b->n++] = x;
    return 0;
}

static int intern(ds_vocab *voc, const char *s, size_t len, u32buf *out) {
    int32_t id;
    if (ds_vocab_add(voc, s, len, &id)) return -1;
    return push(out, (uint32_t)id);
}

/* d2l: s.split(' ') -> ids (shared vocabulary voc). */
static int split_spaces(ds_vocab *voc, const char *s, u32buf *out) {
    for (;;) {
        const char *sp = strchr(s, ' ');
        size_t len = sp ? (size_t)(sp - s) : strlen(s);
        if (intern(voc, s, len, out)) return -1;
        if (!sp) return 0;
        s = sp + 1;
    }
}

static int bad_utf8(const char *what, const unsigned char *s, size_t i, uint32_t cp, int len) {
    if (len == 0)
        return ag_error("%s: invalid UTF-8 byte 0x%02X at byte offset %zu", what, s[i], i);
    (void)cp;
    return ag_error("%s: NUL byte at byte offset %zu", what, i);
}

/* Python s.split() (runs of Unicode whitespace) -> ids. */
static int split_whitespace(ds_vocab *voc, const char *str, const char *what, u32buf *out) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), start = 0;
    bool in_tok = false;
    for (size_t i = 0; i <= n;) {
        uint32_t cp = 0;
        int len = 1;
        if (i < n) {
            len = ds_utf8_decode(s + i, n - i, &cp);
            if (len == 0) return bad_utf8(what, s, i, cp, len);
        }
        bool sp = i == n || ds_u_is_space(cp);
        if (sp && in_tok && intern(voc, str + start, i - start, out)) return -1;
        if (!sp && !in_tok) start = i;
        in_tok = !sp;
        i += (size_t)len;
    }
    return 0;
}

/* Code points of s without its Unicode whitespace (sacreBLEU chrF: ''.join(s.split())). */
static int chars_no_space(const char *str, const char *what, u32buf *out) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = ds_utf8_decode(s + i, n - i, &cp);
        if (len == 0) return bad_utf8(what, s, i, cp, len);
        if (!ds_u_is_space(cp) && push(out, cp)) return -1;
        i += (size_t)len;
    }
    return 0;
}

/* ---- d2l BLEU ------------------------------------------------------------------------- */

int ds_bleu_d2l(const char *pred, const char *label, int k, double *score) {
    if (!pred || !label || !score) return ag_error("ds_bleu_d2l: NULL argument");
    if (k < 1) return ag_error("ds_bleu_d2l: k = %d, expected >= 1", k);
    *score = 0.0;
    if (*pred == 0) return 0; /* empty prediction */
    ds_vocab *voc = ds_vocab_new();
    if (!voc) return -1;
    u32buf p = {0}, l = {0};
    ng_tab t = {0};
    int rc = split_spaces(voc, pred, &p);
    if (!rc) rc = split_spaces(voc, label, &l);
    if (!rc) rc = ng_reserve(&t, l.n);
    if (!rc) {
        double lp = (double)p.n, ll = (double)l.n;
        double s = exp(fmin(0.0, 1.0 - ll / lp));
        for (int n = 1; n <= k; n++) {
            if ((int64_t)p.n - n + 1 <= 0) { /* shorter than n: 0 (d2l divides by zero) */
                s = 0.0;
                break;
            }
            const uint32_t *refs[1] = {l.v};
            int64_t m = ng_match(&t, p.v, p.n, refs, &l.n, 1, (size_t)n);
            s *= pow((double)m / (double)(p.n - (size_t)n + 1), pow(0.5, n));
        }
        *score = s;
    }
    ng_release(&t);
    free(p.v);
    free(l.v);
    ds_vocab_free(voc);
    return rc;
}

/* ---- corpus BLEU ---------------------------------------------------------------------- */

static int bleu_add_seqs(ds_bleu_stats *s, const uint32_t *h, size_t hl,
                         const uint32_t *const *refs, const size_t *rl, size_t nr) {
    size_t ref_len = rl[0], most = 0;
    for (size_t r = 0; r < nr; r++) {
        size_t d = rl[r] > hl ? rl[r] - hl : hl - rl[r],
               best = ref_len > hl ? ref_len - hl : hl - ref_len;
        if (d < best || (d == best && rl[r] < ref_len)) ref_len = rl[r];
        most += rl[r];
    }
    ng_tab t = {0};
    int rc = ng_reserve(&t, most);
    if (!rc) {
        for (size_t n = 1; n <= DS_BLEU_ORDER; n++) {
            s->correct[n - 1] += ng_match(&t, h, hl, refs, rl, nr, n);
            s->total[n - 1] += hl >= n ? (int64_t)(hl - n + 1) : 0;
        }
        s->sys_len += (int64_t)hl;
        s->ref_len += (int64_t)ref_len;
        s->sentences++;
    }
    ng_release(&t);
    return rc;
}

int ds_bleu_add_ids(ds_bleu_stats *s, const int32_t *hyp, size_t hyp_len, const int32_t *ref,
                    size_t ref_len) {
    /* int32_t and uint32_t may alias; only the bit patterns are compared and hashed. */
    const uint32_t *refs[1] = {(const uint32_t *)ref};
    return bleu_add_seqs(s, (const uint32_t *)hyp, hyp_len, refs, &ref_len, 1);
}

int ds_bleu_add(ds_bleu_stats *s, const char *hyp, const char *const *refs, size_t n_refs) {
    if (!s || !hyp || !refs || n_refs < 1)
        return ag_error("ds_bleu_add: NULL argument or no reference");
    for (size_t r = 0; r < n_refs; r++)
        if (!refs[r]) return ag_error("ds_bleu_add: reference %zu is NULL", r);
    ds_vocab *voc = ds_vocab_new();
    u32buf h = {0};
    u32buf *rb = calloc(n_refs, sizeof *rb);
    const uint32_t **rv = calloc(n_refs, sizeof *rv);
    size_t *rl = calloc(n_refs, sizeof *rl);
    int rc = (!voc || !rb || !rv || !rl) ? ag_error("out of memory") : 0;
    if (!rc) rc = split_whitespace(voc, hyp, "hypothesis", &h);
    for (size_t r = 0; r < n_refs && !rc; r++) {
        rc = split_whitespace(voc, refs[r], "reference", &rb[r]);
        rv[r] = rb[r].v;
        rl[r] = rb[r].n;
    }
    if (!rc) rc = bleu_add_seqs(s, h.v, h.n, rv, rl, n_refs);
    for (size_t r = 0; rb && r < n_refs; r++) free(rb[r].v);
    free(rb);
    free(rv);
    free(rl);
    free(h.v);
    ds_vocab_free(voc);
    return rc;
}

static double my_log(double p) { return p == 0.0 ? -9999999999.0 : log(p); }

ds_bleu_score ds_bleu_compute(const ds_bleu_stats *s) { return ds_bleu_compute_eff(s, false); }

ds_bleu_score ds_bleu_compute_eff(const ds_bleu_stats *s, bool effective_order) {
    ds_bleu_score r = {0};
    r.sys_len = s->sys_len;
    r.ref_len = s->ref_len;
    if (s->sys_len < s->ref_len)
        r.bp = s->sys_len > 0 ? exp(1.0 - (double)s->ref_len / (double)s->sys_len) : 0.0;
    else r.bp = 1.0;
    bool any = false;
    for (int n = 0; n < DS_BLEU_ORDER; n++) any = any || s->correct[n] > 0;
    if (!any) return r; /* sacreBLEU 2.x: no match at all -> 0 */
    double smooth = 1.0;
    int eff = DS_BLEU_ORDER;
    for (int n = 0; n < DS_BLEU_ORDER; n++) {
        if (s->total[n] == 0) break;
        if (effective_order) eff = n + 1;
        if (s->correct[n] == 0) {
            smooth *= 2;
            r.precisions[n] = 100.0 / (smooth * (double)s->total[n]);
        } else {
            r.precisions[n] = 100.0 * (double)s->correct[n] / (double)s->total[n];
        }
    }
    double sum = 0.0;
    for (int n = 0; n < eff; n++) sum += my_log(r.precisions[n]);
    r.score = r.bp * exp(sum / eff);
    return r;
}

int ds_corpus_bleu(const char *const *hyps, const char *const *refs, size_t n, ds_bleu_score *out) {
    ds_bleu_stats s = {0};
    for (size_t i = 0; i < n; i++) {
        int rc = ds_bleu_add(&s, hyps[i], &refs[i], 1);
        if (rc) return rc;
    }
    *out = ds_bleu_compute(&s);
    return 0;
}

/* ---- chrF ----------------------------------------------------------------------------- */

int ds_chrf_add(ds_chrf_stats *s, const char *hyp, const char *ref) {
    if (!s || !hyp || !ref) return ag_error("ds_chrf_add: NULL argument");
    u32buf h = {0}, r = {0};
    ng_tab t = {0};
    int rc = chars_no_space(hyp, "hypothesis", &h);
    if (!rc) rc = chars_no_space(ref, "reference", &r);
    if (!rc) rc = ng_reserve(&t, r.n);
    if (!rc) {
        const uint32_t *refs[1] = {r.v};
        for (size_t n = 1; n <= DS_CHRF_ORDER; n++) {
            int64_t nh = h.n >= n ? (int64_t)(h.n - n + 1) : 0,
                    nr = r.n >= n ? (int64_t)(r.n - n + 1) : 0;
            s->hyp[n - 1] +=
                nr ? nh
                   : 0; /* sacreBLEU: hypothesis n-grams count only if the reference has some */
            s->ref[n - 1] += nr;
            s->match[n - 1] += nr ? ng_match(&t, h.v, h.n, refs, &r.n, 1, n) : 0;
        }
        s->sentences++;
    }
    ng_release(&t);
    free(h.v);
    free(r.v);
    return rc;
}

double ds_chrf_compute(const ds_chrf_stats *s) {
    const double factor = DS_CHRF_BETA * DS_CHRF_BETA;
    double avg_prec = 0.0, avg_rec = 0.0;
    int eff = 0;
    for (int n = 0; n < DS_CHRF_ORDER; n++) {
        if (s->hyp[n] > 0 && s->ref[n] > 0) {
            avg_prec += (double)s->match[n] / (double)s->hyp[n];
            avg_rec += (double)s->match[n] / (double)s->ref[n];
            eff++;
        }
    }
    if (eff == 0) return 0.0;
    avg_prec /= eff;
    avg_rec /= eff;
    if (avg_prec + avg_rec == 0.0) return 0.0;
    double score = (1 + factor) * avg_prec * avg_rec;
    score /= (factor * avg_prec) + avg_rec;
    return 100 * score;
}

int ds_corpus_chrf(const char *const *hyps, const char *const *refs, size_t n, double *out) {
    ds_chrf_stats s = {0};
    for (size_t i = 0; i < n; i++) {
        int rc = ds_chrf_add(&s, hyps[i], refs[i]);
        if (rc) return rc;
    }
    *out = ds_chrf_compute(&s);
    return 0;
}
