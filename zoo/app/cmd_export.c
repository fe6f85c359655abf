/* cmd_export.c -- PROGRAM export: a checkpoint as a plain state_dict and its vocabularies, for
 * PyTorch (cli.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdio.h>

int zoo__cmd_export(zoo_cli *c) {
    if (!c->run.cfg.files.out || !c->run.cfg.files.src_vocab || !c->run.cfg.files.tgt_vocab)
        return zoo__usage(c, "--out, --src-vocab and --tgt-vocab are required");
    zoo_loaded l;
    int rc = zoo__load(c, &l);
    if (rc) return rc;
    nn_ckpt *plain = nn_ckpt_new();
    if (!plain || nn_ckpt_set_borrow(plain, true) || nn_ckpt_add_params(plain, l.m->ps) ||
        nn_ckpt_save(plain, c->run.cfg.files.out))
        rc = zoo__fail(c, ag_last_error());
    if (!rc && (ds_vocab_save(l.sv, c->run.cfg.files.src_vocab) ||
                ds_vocab_save(l.tv, c->run.cfg.files.tgt_vocab)))
        rc = zoo__fail(c, ag_last_error());
    if (!rc)
        printf("state_dict: %s (%zu tensors); vocabularies: %s, %s\n", c->run.cfg.files.out,
               nn_ckpt_count(plain), c->run.cfg.files.src_vocab, c->run.cfg.files.tgt_vocab);
    nn_ckpt_free(plain);
    zoo__unload(&l);
    return rc;
}
