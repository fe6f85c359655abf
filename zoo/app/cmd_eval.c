/* cmd_eval.c -- PROGRAM eval: corpus BLEU-4, chrF and mean d2l BLEU of a checkpoint on a split
 * of its run's data (cli.h); then the standard score (sacreBLEU and chrF with their
 * signatures, on detokenized output against the raw references) and, on a test split, how many
 * test pairs share their English side with training. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdbool.h>
#include <stdio.h>

#include "autograd/ag_file.h"
#include "datasets/metrics.h"
#include "zoo/app/decode.h"

int zoo__cmd_eval(zoo_cli *c) {
    zoo_loaded l;
    int rc = zoo__decode_threads(c);
    if (rc) return rc;
    rc = zoo__load(c, &l);
    if (rc) return rc;
    nn_ckpt *ck = l.ck;
    ds_fra *d = NULL;
    ds_fra_options o;
    /* the run's data and split, unless a flag says otherwise */
    static const char *const run_data[] = {"num-examples", "split-seed", "min-freq",  "valid-frac",
                                           "test-frac",    "num-steps",  "split-mode"};
    rc = zoo__run_options(c, ck, run_data, 7, &o);
    if (!rc) rc = zoo__check_steps(c, l.m->cfg, o.num_steps);
    if (!rc) rc = zoo__load_data(c, &o, &d);
    if (!rc && zoo__subword_data(c, ck, d)) rc = zoo__fail(c, ag_last_error());
    ds_part part = DS_TEST;
    int split = c->run.cfg.exec.split;
    if (!rc && split == ZOO_SPLIT_AUTO) {
        split = ds_fra_part_size(d, DS_TEST)    ? ZOO_SPLIT_TEST
                : ds_fra_part_size(d, DS_VALID) ? ZOO_SPLIT_VALID
                                                : ZOO_SPLIT_TRAIN;
        if (split == ZOO_SPLIT_TRAIN)
            fprintf(stderr, "note: this data has no held-out split (give --test-frac): scoring "
                            "the training pairs\n");
    }
    static const ds_part PARTS[] = {[ZOO_SPLIT_TEST] = DS_TEST,
                                    [ZOO_SPLIT_VALID] = DS_VALID,
                                    [ZOO_SPLIT_TRAIN] = DS_TRAIN,
                                    [ZOO_SPLIT_ALL] = DS_ALL};
    part = PARTS[split];
    const char *name = zoo_split_names[split];
    zoo_eval_result r;
    const zoo_exec *x = &c->run.cfg.exec;
    const char *out = c->run.cfg.files.out; /* the translations, written whole or not at all */
    ag_file af = {0};
    FILE *lines = !rc && out ? ag_file_open(&af, out) : NULL;
    if (!rc && out && !lines) rc = zoo__fail(c, ag_last_error());
    if (!rc && zoo_evaluate_beam(l.m, l.t, l.sv, l.tv, d, part, o.num_steps, x->beam, x->alpha,
                                 lines, &r))
        rc = zoo__fail(c, ag_last_error());
    if (lines && rc) ag_file_abort(&af);
    else if (lines && ag_file_commit(&af)) rc = zoo__fail(c, ag_last_error());
    bool subword = !rc && ds_vocab_codec(l.tv);
    if (!rc)
        printf("corpus BLEU-4 %.2f, chrF %.2f, mean d2l BLEU %.3f on %lld %s sentences%s\n",
               r.bleu4, r.chrf, r.d2l_bleu, (long long)r.sentences, name,
               subword ? " (lowercased, tokenized as d2l: the book's score)" : "");
    if (!rc) {
        char sb[128], sc[128];
        printf("sacreBLEU %.2f (%s), chrF %.2f (%s) on detokenized output against the raw "
               "references (%s)\n",
               r.sacrebleu, ds_sacrebleu_signature(1, sb, sizeof sb), r.sacre_chrf,
               ds_chrf_signature(1, sc, sizeof sc),
               subword ? "cased subword model: the standard score"
                       : "cased; the model is uncased, so this is low by construction");
        if (x->beam > 1) printf("decoding: beam search, --beam %d --alpha %g\n", x->beam, x->alpha);
        else printf("decoding: greedy (--beam 1)\n");
        if (part == DS_TEST)
            printf("%lld of the %lld test pairs share their English side with a training pair "
                   "(--split-mode %s)\n",
                   (long long)r.shared_src, (long long)r.sentences,
                   ds_split_mode_names[o.split_mode]);
        if (out) printf("translations: %s (source, reference, translation; tab-separated)\n", out);
    }
    ds_fra_free(d);
    zoo__unload(&l);
    return rc;
}
