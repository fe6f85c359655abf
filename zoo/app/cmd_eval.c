/* cmd_eval.c -- PROGRAM eval: corpus BLEU-4, chrF and mean d2l BLEU of a checkpoint on a split
 * of its run's data (cli.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdio.h>

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
    static const char *const run_data[] = {"num-examples", "split-seed", "min-freq",
                                           "valid-frac",   "test-frac",  "num-steps"};
    rc = zoo__run_options(c, ck, run_data, 6, &o);
    if (!rc) rc = zoo__check_steps(c, l.m->cfg, o.num_steps);
    if (!rc) rc = zoo__load_data(c, &o, &d);
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
    if (!rc && zoo_evaluate(l.m, l.t, l.sv, l.tv, d, part, o.num_steps, &r))
        rc = zoo__fail(c, ag_last_error());
    if (!rc)
        printf("corpus BLEU-4 %.2f, chrF %.2f, mean d2l BLEU %.3f on %lld %s sentences\n", r.bleu4,
               r.chrf, r.d2l_bleu, (long long)r.sentences, name);
    ds_fra_free(d);
    zoo__unload(&l);
    return rc;
}
