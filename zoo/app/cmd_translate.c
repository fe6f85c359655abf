/* cmd_translate.c -- PROGRAM translate: sentences from the command line or stdin, with a
 * checkpoint (cli.h). Text in: each sentence is put in the form of the model's training data
 * (the checkpoint's data.preprocess, d2l's when absent: datasets/text.h ds_text_source). Text
 * out: French text (ds_detokenize_fr), or the model's tokens with --raw-output. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Translates the valid sentences of lines[0..n) in one batched call and prints every line's
 * translation in order (an empty line for a bad one, whose error was reported with its line
 * number: first_line is the number of lines[0]). Each line is first put in the form the
 * model's data had (ds_text_source with the checkpoint's preprocessing `scheme`). lens: the
 * lines' lengths as read (NULL: their strlen), so that a line holding a NUL byte is refused,
 * not cut. Returns 0, or -1 after printing a line's or the decoder's error. */
static int translate_lines(const zoo_cli *c, zoo_loaded *l, const char *scheme, int steps,
                           char **lines, const size_t *lens, int n, long first_line,
                           bool numbered) {
    char **outs = calloc((size_t)n, sizeof *outs), **model = calloc((size_t)n, sizeof *model),
         **typed = calloc((size_t)n, sizeof *typed);
    const char **ok = malloc(sizeof *ok * (size_t)n);
    bool *bad = calloc((size_t)n, sizeof *bad);
    int32_t *ids = malloc(sizeof *ids * (size_t)steps);
    int rc = 0, n_ok = 0;
    if (!outs || !model || !typed || !ok || !bad || !ids) {
        zoo__fail(c, "out of memory");
        rc = -1;
    }
    for (int i = 0; i < n && rc >= 0;
         i++) { /* a line that cannot be encoded is reported, not fatal */
        int32_t len;
        size_t text = strlen(lines[i]);
        if (lens && lens[i] != text)
            ag_error("a NUL byte at byte %zu: not a line of text", text + 1);
        if ((lens && lens[i] != text) || ds_text_source(lines[i], scheme, &model[i], &typed[i]) ||
            ds_encode_sentence(l->sv, model[i], steps, ids, &len)) {
            bad[i] = true;
            rc = 1;
            if (numbered)
                fprintf(stderr, "%s %s: line %ld: %s\n", c->run.program, c->run.cmd, first_line + i,
                        ag_last_error());
            else
                fprintf(stderr, "%s %s: sentence %ld: %s\n", c->run.program, c->run.cmd,
                        first_line + i, ag_last_error());
        } else {
            ok[n_ok++] = model[i];
        }
    }
    if (rc >= 0 && n_ok &&
        zoo_translate_batch(l->m, l->t, l->sv, l->out_tv ? l->out_tv : l->tv, ok, n_ok, steps,
                            c->run.cfg.exec.beam, c->run.cfg.exec.alpha, outs)) {
        zoo__fail(c, ag_last_error());
        rc = -1;
    }
    for (int i = 0, k = 0; i < n && rc >= 0; i++) {
        char *text = NULL;
        if (!bad[i] && text_out(c, l, model[i], typed[i], outs[k++], &text)) {
            zoo__fail(c, ag_last_error());
            rc = -1;
            break;
        }
        printf("%s\n", bad[i] ? "" : text);
        free(text);
    }
    for (int i = 0; i < n_ok; i++) free(outs[i]);
    for (int i = 0; model && typed && i < n; i++) free(model[i]), free(typed[i]);
    free(outs), free(model), free(typed);
    free(ok);
    free(bad);
    free(ids);
    return rc < 0 ? -1 : rc;
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
        /* stdin, in batches of ZOO_DECODE_ROWS lines (so a long stream starts printing early) */
        enum { BATCH = ZOO_DECODE_ROWS };
        char *lines[BATCH] = {0};
        size_t caps[BATCH] = {0}, lens[BATCH];
        long line_no = 0;
        for (bool eof = false; !eof && !rc;) {
            int n = 0;
            while (n < BATCH) {
                ssize_t got = getline(&lines[n], &caps[n], stdin);
                if (got < 0) {
                    eof = true;
                    break;
                }
                while (got > 0 && (lines[n][got - 1] == '\n' || lines[n][got - 1] == '\r'))
                    lines[n][--got] = '\0';
                lens[n++] = (size_t)got;
            }
            if (n) {
                int r = translate_lines(c, &l, scheme, steps, lines, lens, n, line_no + 1, true);
                any_bad |= r > 0;
                if (r < 0) rc = ZOO_EXIT_RUNTIME;
                fflush(stdout);
            }
            line_no += n;
        }
        if (ferror(stdin)) rc = zoo__fail(c, "reading standard input failed");
        for (int i = 0; i < BATCH; i++) free(lines[i]);
    }
    if (!rc && any_bad) rc = ZOO_EXIT_RUNTIME;
    zoo__unload(&l);
    return rc;
}
