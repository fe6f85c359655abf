/* datasets/fra_batches.c -- shuffled batches, the split file, d2l's predict-side helpers and
 * locating fra.txt. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/fra_internal.h"
#include "datasets/internal.h"
#include "autograd/ag_base.h"
#include "autograd/ag_file.h"
#include "datasets/text.h"
#include "datasets/unicode.h"

/* ---- batches -------------------------------------------------------------------------- */

struct ds_batches {
    const ds_fra *d;
    const int64_t *rows; /* the part's pairs, ascending */
    int64_t n;
    int32_t B, T;
    bool shuffle;
    int64_t *order; /* this epoch's visiting order (pair indices) */
    int64_t *perm;  /* scratch for the permutation */
    int64_t pos;
    int32_t *src, *src_len, *tgt, *tgt_len;
    int64_t *pairs;
    /* token batches (B = 0): nb batches; batch k is sorted[start[k] .. start[k + 1]), its
     * arrays cut to len[k] steps; visited in the order border; lens: a pair's length */
    int64_t nb, *start, *sorted, *border, *count;
    int32_t *len;
};

void ds_batches_free(ds_batches *it) {
    if (!it) return;
    free(it->order);
    free(it->perm);
    free(it->src);
    free(it->src_len);
    free(it->tgt);
    free(it->tgt_len);
    free(it->pairs);
    free(it->start);
    free(it->sorted);
    free(it->border);
    free(it->count);
    free(it->len);
    free(it);
}

/* A pair's length in a token batch: its longer side, <eos> included (<= num_steps); and its
 * source's. */
static int32_t pair_len(const ds_fra *d, int64_t p) {
    int32_t s = d->side[DS_SRC].valid_len[p], t = d->side[DS_TGT].valid_len[p];
    return s > t ? s : t;
}
static int32_t src_len(const ds_fra *d, int64_t p) { return d->side[DS_SRC].valid_len[p]; }

/* out = in (n pairs) sorted stably by key, a length in 0..T (a counting sort). */
static void count_sort(ds_batches *it, const int64_t *in, int64_t *out, int64_t n,
                       int32_t (*key)(const ds_fra *, int64_t)) {
    int64_t *count = it->count;
    memset(count, 0, sizeof *count * (size_t)(it->T + 2));
    for (int64_t i = 0; i < n; i++) count[key(it->d, in[i]) + 1]++;
    for (int32_t l = 1; l <= it->T + 1; l++) count[l] += count[l - 1];
    for (int64_t i = 0; i < n; i++) out[count[key(it->d, in[i])]++] = in[i];
}

/* it->sorted = it->order sorted stably by pair_len. */
static void sort_by_len(ds_batches *it) { count_sort(it, it->order, it->sorted, it->n, pair_len); }

/* Each batch's rows sorted stably by source length (it->order the scratch): the same pairs in
 * every batch, but a shard of a batch's rows (the trainer's) then holds sources of about one
 * length, so cutting it to its longest leaves less padding. */
static void sort_rows_by_src(ds_batches *it) {
    for (int64_t k = 0; k < it->nb; k++) {
        int64_t i0 = it->start[k], n = it->start[k + 1] - i0;
        count_sort(it, it->sorted + i0, it->order + i0, n, src_len);
        memcpy(it->sorted + i0, it->order + i0, sizeof *it->sorted * (size_t)n);
    }
}

/* Token batches: cuts the sorted lengths greedily (rows x the last, longest, length <= max).
 * Sets nb, start, len; buffers sized for the largest batch. Returns 0, or -1 (batch_tokens below the
 * longest pair, out of memory). */
static int plan_token_batches(ds_batches *it, int32_t max) {
    sort_by_len(it); /* the lengths in sorted order are the same in every epoch */
    int32_t longest = pair_len(it->d, it->sorted[it->n - 1]);
    if (longest > max)
        return ag_error("batch_tokens = %d is below the longest pair (%d tokens with <eos>, "
                        "num_steps %d): a batch must hold one pair",
                        (int)max, (int)longest, (int)it->T);
    it->start = malloc(sizeof *it->start * (size_t)(it->n + 1));
    it->len = malloc(sizeof *it->len * (size_t)it->n);
    if (!it->start || !it->len) return ag_error("out of memory");
    int64_t rows_max = 0;
    for (int64_t i = 0; i < it->n;) {
        int64_t r = 1;
        while (i + r < it->n && (r + 1) * pair_len(it->d, it->sorted[i + r]) <= max) r++;
        it->start[it->nb] = i;
        it->len[it->nb++] = pair_len(it->d, it->sorted[i + r - 1]);
        if (r > rows_max) rows_max = r;
        i += r;
    }
    it->start[it->nb] = it->n;
    it->border = malloc(sizeof *it->border * (size_t)it->nb);
    it->src = malloc(sizeof *it->src * (size_t)max);
    it->tgt = malloc(sizeof *it->tgt * (size_t)max);
    it->src_len = malloc(sizeof *it->src_len * (size_t)rows_max);
    it->tgt_len = malloc(sizeof *it->tgt_len * (size_t)rows_max);
    it->pairs = malloc(sizeof *it->pairs * (size_t)rows_max);
    if (!it->border || !it->src || !it->tgt || !it->src_len || !it->tgt_len || !it->pairs)
        return ag_error("out of memory for token batches of %d tokens", (int)max);
    return 0;
}

int ds_batches_new(const ds_fra *d, ds_part part, bool shuffle, ds_batches **out) {
    return ds_batches_new_sized(d, part, shuffle, 0, out);
}

int ds_batches_new_sized(const ds_fra *d, ds_part part, bool shuffle, int32_t batch_size,
                         ds_batches **out) {
    *out = NULL;
    if ((unsigned)part > DS_ALL)
        return ag_error("ds_batches_new: part %d is not a ds_part", (int)part);
    if (batch_size < 0)
        return ag_error("ds_batches_new: batch_size = %d, expected >= 0", (int)batch_size);
    int64_t n = d->part_n[part];
    static const char *const names[] = {"train", "valid", "test", "all"};
    if (n == 0) return ag_error("ds_batches_new: the %s part is empty", names[part]);
    ds_batches *it = calloc(1, sizeof *it);
    if (!it) return ag_error("out of memory");
    it->d = d;
    it->rows = d->part[part];
    it->n = n;
    it->B = batch_size ? batch_size : d->opt.batch_tokens > 0 ? 0 : d->opt.batch_size;
    it->T = d->opt.num_steps;
    it->shuffle = shuffle;
    size_t B = (size_t)(it->B < n ? it->B : n), T = (size_t)it->T;
    it->order = malloc((size_t)n * sizeof *it->order);
    it->perm = shuffle ? malloc((size_t)n * sizeof *it->perm) : NULL;
    if (!it->B) { /* token batches */
        it->sorted = malloc((size_t)n * sizeof *it->sorted);
        it->count = malloc(((size_t)it->T + 2) * sizeof *it->count);
        int rc = -1;
        if (it->order && (!shuffle || it->perm) && it->sorted && it->count) {
            memcpy(it->order, it->rows, (size_t)n * sizeof *it->order);
            rc = plan_token_batches(it, d->opt.batch_tokens);
        } else {
            ag_error("out of memory for a batch iterator over %lld pairs", (long long)n);
        }
        if (rc) {
            ds_batches_free(it);
            return rc;
        }
        ds_batches_epoch(it, 0);
        *out = it;
        return 0;
    }
    it->src = malloc(B * T * sizeof *it->src);
    it->tgt = malloc(B * T * sizeof *it->tgt);
    it->src_len = malloc(B * sizeof *it->src_len);
    it->tgt_len = malloc(B * sizeof *it->tgt_len);
    it->pairs = malloc(B * sizeof *it->pairs);
    if (!it->order || (shuffle && !it->perm) || !it->src || !it->tgt || !it->src_len ||
        !it->tgt_len || !it->pairs) {
        ds_batches_free(it);
        return ag_error("out of memory for a batch iterator over %lld pairs", (long long)n);
    }
    ds_batches_epoch(it, 0);
    *out = it;
    return 0;
}

void ds_batches_epoch(ds_batches *it, int64_t epoch) {
    if (it->shuffle) {
        ag_rng_permutation(it->perm, it->n, it->d->opt.seed, (uint64_t)epoch);
        for (int64_t i = 0; i < it->n; i++) it->order[i] = it->rows[it->perm[i]];
    } else {
        memcpy(it->order, it->rows, (size_t)it->n * sizeof *it->order);
    }
    it->pos = 0;
    if (it->B) return;
    sort_by_len(it);
    sort_rows_by_src(it);
    if (it->shuffle) {
        ag_rng_permutation(it->border, it->nb, it->d->opt.seed, (uint64_t)epoch ^ DS_BATCH_STREAM);
    } else {
        for (int64_t k = 0; k < it->nb; k++) it->border[k] = k;
    }
}

/* Fills *b with the pairs pairs[0..B), their arrays cut to their first L steps. */
static void gather(ds_batches *it, const int64_t *pairs, int32_t B, int32_t L, ds_batch *b) {
    const ds_fra_side *s = &it->d->side[DS_SRC], *t = &it->d->side[DS_TGT];
    int32_t T = it->T;
    TG_ASSERT(B >= 1 && L >= 1 && L <= T);
    for (int32_t r = 0; r < B; r++) {
        int64_t p = pairs[r];
        TG_ASSERT(p >= 0 && p < it->d->n_pairs);
        it->pairs[r] = p;
        memcpy(it->src + (size_t)r * L, s->ids + p * T, (size_t)L * sizeof(int32_t));
        memcpy(it->tgt + (size_t)r * L, t->ids + p * T, (size_t)L * sizeof(int32_t));
        it->src_len[r] = s->valid_len[p];
        it->tgt_len[r] = t->valid_len[p];
    }
    *b = (ds_batch){.size = B,
                    .num_steps = L,
                    .full_steps = T,
                    .src = it->src,
                    .src_valid_len = it->src_len,
                    .tgt = it->tgt,
                    .tgt_valid_len = it->tgt_len,
                    .pairs = it->pairs};
}

bool ds_batches_next(ds_batches *it, ds_batch *b) {
    if (!it->B) { /* token batches: it->pos counts batches */
        if (it->pos >= it->nb) return false;
        int64_t k = it->border[it->pos++], i0 = it->start[k];
        TG_ASSERT(k >= 0 && k < it->nb && it->start[k + 1] - i0 <= it->n);
        gather(it, it->sorted + i0, (int32_t)(it->start[k + 1] - i0), it->len[k], b);
        b->by_tokens = true;
        return true;
    }
    if (it->pos >= it->n) return false;
    int64_t m = it->n - it->pos;
    int32_t B = (int32_t)(m < it->B ? m : it->B);
    gather(it, it->order + it->pos, B, it->T, b);
    it->pos += B;
    return true;
}

int64_t ds_batches_count(const ds_batches *it) {
    return it->B ? (it->n + it->B - 1) / it->B : it->nb;
}

/* ---- the split file ------------------------------------------------------------------- */

int ds_fra_write_split(const ds_fra *d, const char *path) {
    char *part = malloc((size_t)(d->n_pairs ? d->n_pairs : 1));
    if (!part) return ag_error("out of memory");
    ag_file out; /* through a temporary file and a rename */
    FILE *f = ag_file_open(&out, path);
    if (!f) {
        free(part);
        return -1;
    }
    memset(part, DS_TRAIN, (size_t)d->n_pairs);
    for (int p = DS_VALID; p <= DS_TEST; p++)
        if (d->part[p] != d->part[DS_ALL])
            for (int64_t i = 0; i < d->part_n[p]; i++) part[d->part[p][i]] = (char)p;
    static const char *const names[] = {"train", "valid", "test"};
    fprintf(f,
            "# tapegrad fra-eng split: pairs=%lld num_examples=%lld valid_frac=%.17g "
            "test_frac=%.17g split_seed=%llu\n",
            (long long)d->n_pairs, (long long)d->opt.num_examples, d->opt.valid_frac,
            d->opt.test_frac, (unsigned long long)d->opt.split_seed);
    fprintf(f, "# pair\tline\tpart\n");
    for (int64_t i = 0; i < d->n_pairs; i++)
        fprintf(f, "%lld\t%lld\t%s\n", (long long)i, (long long)d->line_of_pair[i],
                names[(int)part[i]]);
    free(part);
    return ag_file_commit(&out) ? -1 : 0;
}

/* ---- prediction helpers --------------------------------------------------------------- */

/* ds_encode_sentence through a codec: its ids + <eos>, truncated or padded. */
static int encode_codec(const ds_codec *c, const char *sentence, int32_t num_steps, int32_t *ids,
                        int32_t *valid_len) {
    int32_t *got = NULL;
    size_t n = 0;
    if (c->encode(c->ctx, sentence, &got, &n)) return -1;
    size_t j = 0;
    for (; j < n && j < (size_t)num_steps; j++) ids[j] = got[j];
    if (j < (size_t)num_steps) ids[j++] = DS_EOS;
    for (; j < (size_t)num_steps; j++) ids[j] = DS_PAD;
    free(got);
    *valid_len = n + 1 > INT32_MAX ? INT32_MAX : (int32_t)(n + 1);
    return 0;
}

int ds_encode_sentence(const ds_vocab *v, const char *sentence, int32_t num_steps, int32_t *ids,
                       int32_t *valid_len) {
    if (num_steps < 1)
        return ag_error("ds_encode_sentence: num_steps = %d, expected >= 1", (int)num_steps);
    const ds_codec *codec = ds_vocab_codec(v);
    if (codec && ds_vocab_number_tags(v)) {
        char *tagged;
        if (ds_numtag_source(sentence, 0, &tagged)) return -1;
        int rc = encode_codec(codec, tagged, num_steps, ids, valid_len);
        free(tagged);
        return rc;
    }
    if (codec) return encode_codec(codec, sentence, num_steps, ids, valid_len);
    char *low;
    size_t n;
    int rc = ds_utf8_lower(sentence, strlen(sentence), &low, &n);
    if (rc) return rc;
    int64_t count = 0; /* tokens seen, including those past num_steps */
    size_t a = 0;
    for (;;) {
        char *sp = memchr(low + a, ' ', n - a);
        size_t e = sp ? (size_t)(sp - low) : n;
        if (count < num_steps) {
            int32_t id = ds_vocab_find(v, low + a, e - a);
            ids[count] = id < 0 ? DS_UNK : id;
        }
        count++;
        if (!sp) break;
        a = e + 1;
    }
    free(low);
    if (count < num_steps) ids[count] = DS_EOS;
    for (int64_t j = count + 1; j < num_steps; j++) ids[j] = DS_PAD;
    count++; /* + <eos> */
    *valid_len = count > INT32_MAX ? INT32_MAX : (int32_t)count;
    return 0;
}

int ds_decode_ids(const ds_vocab *v, const int32_t *ids, size_t n, char **out) {
    *out = NULL;
    size_t total = 1, m = 0;
    const ds_codec *codec = ds_vocab_codec(v);
    if (codec) {
        while (m < n && ids[m] != DS_EOS) m++;
        for (size_t i = 0; i < m; i++)
            if (ids[i] < 0 || ids[i] >= ds_vocab_size(v))
                return ag_error("ids[%zu] = %d is not an id of this vocabulary (size %d)", i,
                                (int)ids[i], (int)ds_vocab_size(v));
        return codec->decode(codec->ctx, ids, m, out);
    }
    for (; m < n && ids[m] != DS_EOS; m++) {
        size_t len;
        if (!ds_vocab_token(v, ids[m], &len))
            return ag_error("ids[%zu] = %d is not an id of this vocabulary (size %d)", m,
                            (int)ids[m], (int)ds_vocab_size(v));
        total += len + 1;
    }
    char *s = malloc(total);
    if (!s) return ag_error("out of memory");
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        size_t len;
        const char *t = ds_vocab_token(v, ids[i], &len);
        if (i) s[k++] = ' ';
        memcpy(s + k, t, len);
        k += len;
    }
    s[k] = 0;
    *out = s;
    return 0;
}

/* ---- locating fra.txt ----------------------------------------------------------------- */

static bool readable_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && access(p, R_OK) == 0;
}

/* Why p is not a readable regular file: strerror of stat or access (e.g. "Permission denied"),
 * or "not a regular file". */
static const char *why_unreadable(const char *p) {
    struct stat sb;
    if (stat(p, &sb)) return strerror(errno);
    if (!S_ISREG(sb.st_mode)) return S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file";
    if (access(p, R_OK)) return strerror(errno);
    return "not readable";
}

static int use_path(const char *p, char *out, size_t cap) {
    size_t n = strlen(p);
    if (n + 1 > cap)
        return ag_error("data path of %zu bytes does not fit the %zu-byte buffer: %s", n, cap, p);
    memcpy(out, p, n + 1);
    return 0;
}

int ds_resolve_data_path(const char *flag_value, const char *source_dir, char *out, size_t cap) {
    if (flag_value && *flag_value) {
        if (readable_file(flag_value)) return use_path(flag_value, out, cap);
        return ag_error("%s (given explicitly): %s", flag_value, why_unreadable(flag_value));
    }
    const char *env = getenv("TG_FRA_ENG");
    if (env && *env) {
        if (readable_file(env)) return use_path(env, out, cap);
        return ag_error("%s (from TG_FRA_ENG): %s", env, why_unreadable(env));
    }
    char tried[3][4096];
    int nt = 0;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(tried[nt++], sizeof tried[0], "%s/tapegrad/fra-eng/fra.txt", xdg);
    else if (home && *home)
        snprintf(tried[nt++], sizeof tried[0], "%s/.cache/tapegrad/fra-eng/fra.txt", home);
    snprintf(tried[nt++], sizeof tried[0], "../shared/data/fra-eng/fra.txt");
    if (source_dir && *source_dir)
        snprintf(tried[nt++], sizeof tried[0], "%s/../shared/data/fra-eng/fra.txt", source_dir);
    for (int i = 0; i < nt; i++)
        if (readable_file(tried[i])) return use_path(tried[i], out, cap);
    /* 1 <= nt <= 3 */
    return ag_error(
        "fra.txt not found; tried (TG_FRA_ENG unset): %s%s%s%s%s. Get it: see docs/datasets.md "
        "(unzip d2l's fra-eng.zip into ~/.cache/tapegrad/)",
        tried[0], nt > 1 ? ", " : "", nt > 1 ? tried[1] : "", nt > 2 ? ", " : "",
        nt > 2 ? tried[2] : "");
}

int ds_decode_translation(const ds_vocab *v, const int32_t *ids, size_t n, const char *source,
                          char **out) {
    char *text;
    if (ds_decode_ids(v, ids, n, &text)) return -1;
    if (!ds_vocab_number_tags(v)) {
        *out = text;
        return 0;
    }
    int rc = ds_numtag_restore(source, text, out);
    free(text);
    return rc;
}
