/* cmd_translate.c -- PROGRAM translate: sentences from the command line or stdin, with a
 * checkpoint (cli.h). Text in: each sentence is put in the form of the model's training data
 * (the checkpoint's data.preprocess, d2l's when absent: datasets/text.h ds_text_source). Text
 * out: French text (ds_detokenize_fr), or the model's tokens with --raw-output. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/text.h"
#include "zoo/app/decode.h"

/* The text printed for one translation: the model's tokens with --raw-output, else French
 * text (ds_detokenize_fr) whose first <unk> is the source's one unknown word, if it has
 * exactly one (ds_text_unk_word). *text is malloc'd. Returns 0 or -1 (ag_last_error). */
static int text_out(const zoo_cli *c, const zoo_loaded *l, const char *model, const char *typed,
                    const char *tokens, char **text) {
    if (c->run.cfg.exec.raw_output || ds_vocab_codec(l->tv)) { /* subword: spm_decode's text, or
                                                                 * the pieces (--raw-output) */
        *text = strdup(tokens);
        return *text ? 0 : ag_error("out of memory");
    }
    char *word = NULL;
    int rc =
        ds_text_unk_word(l->sv, model, typed, &word) < 0 || ds_detokenize_fr(tokens, word, text);
    free(word);
    return rc ? -1 : 0;
}

/* --raw-output of a subword model: its pieces, spaced (spm_decode --input_format=piece reads
 * them back): the target vocabulary without its codec. 0 or -1. */
static int pieces_vocab(zoo_loaded *l) {
    if (!(l->out_tv = ds_vocab_new())) return -1;
    for (int32_t id = 0; id < ds_vocab_size(l->tv); id++) {
        size_t len;
        const char *t = ds_vocab_token(l->tv, id, &len);
        if (ds_vocab_add(l->out_tv, t, len, NULL)) return -1;
    }
    return 0;
}

/* The largest limit in [lo, hi] the model takes, fits(lo) given. */
static int largest_fit(int (*fits)(const void *, int), const void *cfg, int lo, int hi) {
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (fits(cfg, mid)) hi = mid - 1;
        else lo = mid;
    }
    return lo;
}

/* The limit for a sentence of `need` tokens (its <eos> included) longer than the checkpoint's
 * --num-steps: its own call, the source whole and room for a translation twice as long, 10
 * more, within what the model takes (the Transformer's positional-encoding table). Returns the
 * limit, or -1 (reported) when the model cannot take the source at all. */
static int long_steps(const zoo_cli *c, const zoo_loaded *l, int need) {
    int (*fits)(const void *, int) = c->run.kind->check_steps; /* 0 when it fits */
    int hi = need <= (INT_MAX - 10) / 2 ? 2 * need + 10 : INT_MAX;
    if (!fits || !fits(l->m->cfg, hi)) return hi;
    if (fits(l->m->cfg, need))
        return ag_error("%d tokens with <eos>, more than this model's %d positions: split the "
                        "sentence",
                        need, largest_fit(fits, l->m->cfg, 1, need));
    return largest_fit(fits, l->m->cfg, need, hi);
}

/* The sentences of lines[0..n) (ds_text_sentences), in order, into *sent (malloc'd): line i's
 * are first[i] .. first[i + 1] - 1. A line holding a NUL byte (lens) or invalid UTF-8 is
 * reported with its number and marked bad (no sentences). Returns their number, or -1 (out of
 * memory). */
static int split_lines(const zoo_cli *c, char **lines, const size_t *lens, int n, long first_line,
                       bool numbered, int *first, bool *bad, char ***sent) {
    size_t cap = 0;
    int ns = 0;
    *sent = NULL;
    for (int i = 0; i < n; i++) {
        first[i] = ns;
        char **ss = NULL;
        size_t text = strlen(lines[i]);
        int k = lens && lens[i] != text
                    ? ag_error("a NUL byte at byte %zu: not a line of text", text + 1)
                    : ds_text_sentences(lines[i], &ss);
        if (k < 0) {
            bad[i] = true;
            fprintf(stderr, "%s %s: %s %ld: %s\n", c->run.program, c->run.cmd,
                    numbered ? "line" : "sentence", first_line + i, ag_last_error());
            continue;
        }
        char **g = (size_t)(ns + k) > cap
                       ? realloc(*sent, sizeof **sent * (cap = 2 * cap + (size_t)k))
                       : *sent;
        if (!g) {
            for (int j = 0; j < k; j++) free(ss[j]);
            for (int j = 0; j < ns; j++) free((*sent)[j]);
            free(ss), free(*sent);
            *sent = NULL;
            return -1;
        }
        *sent = g;
        for (int j = 0; j < k; j++) g[ns++] = ss[j];
        free(ss);
    }
    first[n] = ns;
    return ns;
}

/* What a sentence is once encoded: on a bad line, <eos> alone, within --num-steps, longer. */
enum { BAD, EMPTY, FITS, LONG };

/* Puts sentences [s0, s1) of one line in the model's form (model[s], typed[s]: ds_text_source),
 * sets their kind and the positions a LONG one needs (need[s]), and appends those that FIT to
 * ok[*n_ok ..]. When one cannot be encoded, the line's sentences are all BAD (none of the line
 * is translated, *n_ok is as it was) and -1 is returned with ag_last_error(). ids: steps
 * values of scratch. */
static int encode_line(const zoo_cli *c, const zoo_loaded *l, const char *scheme, int steps,
                       char **sent, int s0, int s1, char **model, char **typed, int *kind,
                       int *need, int32_t *ids, const char **ok, int *n_ok) {
    const int n0 = *n_ok;
    for (int s = s0; s < s1; s++) {
        int32_t len = 0;
        if (ds_text_source(sent[s], scheme, &model[s], &typed[s]) ||
            ds_encode_sentence(l->sv, model[s], steps, ids, &len) ||
            (len > steps && (need[s] = long_steps(c, l, len)) < 0)) {
            for (int r = s0; r < s; r++) kind[r] = BAD;
            *n_ok = n0;
            return -1;
        }
        kind[s] = len <= 1 ? EMPTY : len > steps ? LONG : FITS;
        if (kind[s] == FITS) ok[(*n_ok)++] = model[s];
    }
    return 0;
}

/* Translates lines[0..n) and prints every line's translation in order. A line is cut into its
 * sentences (ds_text_sentences), each translated alone and their translations joined by a
 * space; a line with nothing to translate (empty, blank, or nothing left once preprocessed:
 * <eos> alone) gives an empty line, and so does a bad one, whose error is
 * reported with its number (first_line is the number of lines[0]). Each sentence is first put
 * in the form the model's data had (ds_text_source with the checkpoint's preprocessing
 * `scheme`). Those that fit the checkpoint's --num-steps (`steps`, their <eos> included) are
 * translated in one batched call within it; a longer one in a call of its own, whole
 * (long_steps). lens: the lines' lengths as read (NULL: their strlen), so that a line holding a
 * NUL byte is refused, not cut. Returns 0, 1 when a line was bad (reported), or -1 after
 * printing the error that stopped it. */
static int translate_lines(const zoo_cli *c, zoo_loaded *l, const char *scheme, int steps,
                           char **lines, const size_t *lens, int n, long first_line,
                           bool numbered) {
    int *first = malloc(sizeof *first * ((size_t)n + 1)); /* line i: sentences first[i] .. */
    bool *bad = calloc((size_t)n, sizeof *bad);
    char **sent = NULL; /* every line's sentences, in order */
    int ns =
        first && bad ? split_lines(c, lines, lens, n, first_line, numbered, first, bad, &sent) : -1;
    int rc = ns < 0 ? -1 : 0;
    if (ns < 0) ns = 0;
    char **outs = calloc((size_t)ns + 1, sizeof *outs),
         **model = calloc((size_t)ns + 1, sizeof *model),
         **typed = calloc((size_t)ns + 1, sizeof *typed),
         **text = calloc((size_t)ns + 1, sizeof *text);
    const char **ok = malloc(sizeof *ok * ((size_t)ns + 1));
    int *kind = calloc((size_t)ns + 1, sizeof *kind), *need = calloc((size_t)ns + 1, sizeof *need);
    int32_t *ids = malloc(sizeof *ids * (size_t)steps);
    int n_ok = 0;
    const ds_vocab *tv = l->out_tv ? l->out_tv : l->tv;
    if (rc || !outs || !model || !typed || !text || !ok || !kind || !need || !ids) {
        zoo__fail(c, "out of memory");
        rc = -1;
    }
    for (int i = 0; i < n && rc >= 0; i++) {
        if (!bad[i] && encode_line(c, l, scheme, steps, sent, first[i], first[i + 1], model, typed,
                                   kind, need, ids, ok, &n_ok)) {
            bad[i] = true;
            rc = 1;
            fprintf(stderr, "%s %s: %s %ld: %s\n", c->run.program, c->run.cmd,
                    numbered ? "line" : "sentence", first_line + i, ag_last_error());
        }
    }
    for (int i = 0; i < n && rc == 0; i++) rc = bad[i]; /* a NUL or UTF-8 error above */
    if (rc >= 0 && n_ok &&
        zoo_translate_batch(l->m, l->t, l->sv, tv, ok, n_ok, steps, c->run.cfg.exec.beam,
                            c->run.cfg.exec.alpha, outs)) {
        zoo__fail(c, ag_last_error());
        rc = -1;
    }
    /* outs[0 .. n_ok) hold the batch's translations, in the order of the sentences that fit;
     * each sentence's text goes to text[s] */
    for (int i = 0, k = 0; i < n && rc >= 0; i++)
        for (int s = first[i]; s < first[i + 1] && rc >= 0; s++) {
            if (kind[s] == BAD || kind[s] == EMPTY) continue; /* a bad line; nothing to say */
            char *tokens = NULL;
            if (kind[s] == FITS) tokens = outs[k++];
            else if (zoo_translate_batch(l->m, l->t, l->sv, tv, (const char *const *)&model[s], 1,
                                         need[s], c->run.cfg.exec.beam, c->run.cfg.exec.alpha,
                                         &tokens)) {
                zoo__fail(c, ag_last_error());
                rc = -1;
                break;
            }
            if (text_out(c, l, model[s], typed[s], tokens, &text[s])) {
                zoo__fail(c, ag_last_error());
                rc = -1;
            }
            if (kind[s] == LONG) free(tokens);
        }
    for (int i = 0; i < n && rc >= 0; i++) {
        bool any = false;
        for (int s = first[i]; s < first[i + 1] && !bad[i]; s++)
            if (text[s] && *text[s]) printf("%s%s", any ? " " : "", text[s]), any = true;
        putchar('\n');
    }
    for (int s = 0; s < ns; s++) {
        free(sent[s]), free(model[s]), free(typed[s]), free(text[s]);
        if (s < n_ok) free(outs[s]);
    }
    free(sent), free(first), free(bad);
    free(outs), free(model), free(typed), free(text), free(ok), free(kind), free(need), free(ids);
    return rc < 0 ? -1 : rc;
}

/* ---- standard input ----
 * Lines are read with read(2) into a buffer of our own, so that the program can tell whether
 * more input is there at once: a batch takes up to ZOO_DECODE_ROWS lines, but no more than
 * have arrived, so a person typing at a terminal (or a program writing one line and waiting)
 * gets each translation at once, and a file is decoded in full batches. */
typedef struct line_in {
    char *buf;
    size_t cap, start, end; /* the unread bytes are buf[start, end) */
    bool eof, failed;
} line_in;

/* Whether a line can be had without waiting: a whole one in the buffer, the last one at end of
 * input, or bytes ready on stdin (poll, no timeout). */
static bool line_ready(const line_in *r) {
    if (r->start < r->end && memchr(r->buf + r->start, '\n', r->end - r->start)) return true;
    if (r->eof) return r->start < r->end;
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* The next line, without its "\n" or "\r\n", copied into *line (grown as getline does), its
 * length in *len. Returns 1, 0 at the end of input, -1 on a read error or out of memory. */
static int next_line(line_in *r, char **line, size_t *cap, size_t *len) {
    for (;;) {
        char *nl = r->start < r->end ? memchr(r->buf + r->start, '\n', r->end - r->start) : NULL;
        if (nl || (r->eof && r->start < r->end)) {
            size_t n = nl ? (size_t)(nl - (r->buf + r->start)) : r->end - r->start;
            if (n + 1 > *cap) {
                char *g = realloc(*line, n + 1);
                if (!g) return -1;
                *line = g, *cap = n + 1;
            }
            memcpy(*line, r->buf + r->start, n);
            r->start += n + (nl != NULL);
            while (n > 0 && (*line)[n - 1] == '\r') n--;
            (*line)[n] = '\0';
            *len = n;
            return 1;
        }
        if (r->eof) return 0;
        if (r->start > 0) { /* keep the partial line at the front */
            memmove(r->buf, r->buf + r->start, r->end - r->start);
            r->end -= r->start, r->start = 0;
        }
        if (r->end == r->cap) {
            size_t cap2 = r->cap ? 2 * r->cap : 65536;
            char *g = realloc(r->buf, cap2);
            if (!g) return -1;
            r->buf = g, r->cap = cap2;
        }
        ssize_t got = read(STDIN_FILENO, r->buf + r->end, r->cap - r->end);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            r->failed = true;
            return -1;
        }
        if (got == 0) r->eof = true;
        r->end += (size_t)got;
    }
}

/* translate_lines over stdin, batch by batch (above). Returns as translate_lines. */
static int translate_stdin(const zoo_cli *c, zoo_loaded *l, const char *scheme, int steps) {
    enum { BATCH = ZOO_DECODE_ROWS };
    char **lines = calloc(BATCH, sizeof *lines);
    size_t *caps = calloc(BATCH, sizeof *caps), *lens = calloc(BATCH, sizeof *lens);
    line_in r = {0};
    long line_no = 0;
    int rc = lines && caps && lens ? 0 : (zoo__fail(c, "out of memory"), -1), any_bad = 0;
    for (bool end = false; !end && !rc;) {
        int n = 0, got = 1;
        while (n < BATCH && (n == 0 || line_ready(&r)) &&
               (got = next_line(&r, &lines[n], &caps[n], &lens[n])) == 1)
            n++;
        end = got < 1;
        if (got < 0)
            rc = (zoo__fail(c, r.failed ? "reading standard input failed" : "out of memory"), -1);
        if (n && !rc) {
            int t = translate_lines(c, l, scheme, steps, lines, lens, n, line_no + 1, true);
            any_bad |= t > 0;
            if (t < 0) rc = -1;
            fflush(stdout);
        }
        line_no += n;
    }
    for (int i = 0; lines && i < BATCH; i++) free(lines[i]);
    free(lines), free(caps), free(lens), free(r.buf);
    return rc ? rc : any_bad;
}

/* Sentences from the command line, or every line of stdin, translated in batches. A line that
 * cannot be read (invalid UTF-8, a NUL) is reported with its number and printed as an empty
 * line; the others are translated, and the exit status is then 1. */
int zoo__cmd_translate(zoo_cli *c) {
    zoo_loaded l;
    int rc = zoo__decode_threads(c);
    if (rc) return rc;
    rc = zoo__load(c, &l);
    if (rc) return rc;
    ds_fra_options o;
    if ((rc = zoo__run_options(c, l.ck, (const char *const[]){"num-steps"}, 1, &o))) {
        zoo__unload(&l);
        return rc;
    }
    int steps = o.num_steps;
    if ((rc = zoo__check_steps(c, l.m->cfg, steps))) {
        zoo__unload(&l);
        return rc;
    }
    /* the checkpoint's preprocessing (absent: d2l's, as every checkpoint made before the key) */
    const char *scheme = nn_ckpt_meta(l.ck, DS_PREPROCESS_KEY);
    char *probe = NULL;
    if (ds_text_source("", scheme, &probe, NULL)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: metadata " DS_PREPROCESS_KEY ": %s", nn_ckpt_source(l.ck),
                 ag_last_error());
        rc = zoo__fail(c, msg);
        zoo__unload(&l);
        return rc;
    }
    free(probe);
    if (c->run.cfg.exec.raw_output && ds_vocab_codec(l.tv) && pieces_vocab(&l)) {
        rc = zoo__fail(c, ag_last_error());
        zoo__unload(&l);
        return rc;
    }
    bool any_bad = false;
    if (c->run.n_pos) {
        int r = translate_lines(c, &l, scheme, steps, c->run.pos, NULL, c->run.n_pos, 1, false);
        any_bad = r > 0;
        if (r < 0) rc = ZOO_EXIT_RUNTIME;
    } else {
        int r = translate_stdin(c, &l, scheme, steps);
        any_bad = r > 0;
        if (r < 0) rc = ZOO_EXIT_RUNTIME;
    }
    if (!rc && any_bad) rc = ZOO_EXIT_RUNTIME;
    zoo__unload(&l);
    return rc;
}
