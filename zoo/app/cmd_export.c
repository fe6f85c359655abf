/* cmd_export.c -- PROGRAM export: a checkpoint as a plain state_dict and its vocabularies, for
 * PyTorch (cli.h). */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/cli_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "autograd/ag_file.h"

/* The outputs in memory (the state_dict, the two vocabularies, and the subword models when
 * asked for), then written and committed together: all replaced, or none (ag_file_commit_all).
 * 0 or -1. */
static int write_all(const zoo_files *f, const nn_ckpt *plain, const ds_vocab *sv,
                     const ds_vocab *tv) {
    unsigned char *bytes[5] = {NULL};
    size_t len[5] = {0};
    const char *paths[5] = {f->out, f->src_vocab, f->tgt_vocab, f->src_spm, f->tgt_spm};
    const ds_codec *codec[2] = {ds_vocab_codec(sv), ds_vocab_codec(tv)};
    int n = 3;
    int rc = nn_ckpt_save_mem(plain, &bytes[0], &len[0]) ||
                     ds_vocab_text(sv, f->src_vocab, (char **)&bytes[1], &len[1]) ||
                     ds_vocab_text(tv, f->tgt_vocab, (char **)&bytes[2], &len[2])
                 ? -1
                 : 0;
    for (int i = 0; i < 2 && !rc; i++) { /* the model files, as they are: borrowed */
        if (!paths[3 + i]) continue;
        paths[n] = paths[3 + i];
        len[n] = codec[i]->model_len;
        bytes[n++] = (unsigned char *)codec[i]->model;
    }
    ag_file files[5] = {{0}};
    int opened = 0;
    for (; !rc && opened < n; opened++) {
        FILE *fp = ag_file_open(&files[opened], paths[opened]);
        if (!fp) rc = -1;
        else if (len[opened]) fwrite(bytes[opened], 1, len[opened], fp); /* checked on commit */
    }
    if (!rc) rc = ag_file_commit_all(files, n);
    else
        for (int i = 0; i < opened; i++) ag_file_abort(&files[i]);
    for (int i = 0; i < 3; i++) free(bytes[i]);
    return rc;
}

int zoo__cmd_export(zoo_cli *c) {
    const zoo_files *f = &c->run.cfg.files;
    if (!f->out || !f->src_vocab || !f->tgt_vocab)
        return zoo__usage(c, "--out, --src-vocab and --tgt-vocab are required");
    zoo_loaded l;
    int rc = zoo__load(c, &l);
    if (rc) return rc;
    if ((f->src_spm || f->tgt_spm) && !ds_vocab_codec(l.sv)) {
        zoo__unload(&l);
        return zoo__usage(c, "--%s: the checkpoint has word vocabularies, no subword model",
                          f->src_spm ? "src-spm" : "tgt-spm");
    }
    nn_ckpt *plain = nn_ckpt_new();
    if (!plain || nn_ckpt_set_borrow(plain, true) || nn_ckpt_add_params(plain, l.m->ps) ||
        zoo_ckpt_add_tied(plain, l.m) || write_all(f, plain, l.sv, l.tv))
        rc = zoo__fail(c, ag_last_error());
    if (!rc)
        printf("state_dict: %s (%zu tensors); vocabularies: %s, %s\n", f->out, nn_ckpt_count(plain),
               f->src_vocab, f->tgt_vocab);
    if (!rc && (f->src_spm || f->tgt_spm))
        printf("SentencePiece models (for spm_encode / spm_decode): %s%s%s\n",
               f->src_spm ? f->src_spm : "", f->src_spm && f->tgt_spm ? ", " : "",
               f->tgt_spm ? f->tgt_spm : "");
    nn_ckpt_free(plain);
    zoo__unload(&l);
    return rc;
}
