/* zoo/app/model_io.h -- a zoo model in a checkpoint: its parameters, its vocabularies and its
 * config (the trainer adds the training state), and the import of a plain PyTorch state_dict. */
#ifndef TG_ZOO_MODEL_IO_H
#define TG_ZOO_MODEL_IO_H

#include "../../datasets/vocab.h"
#include "../../nn/io/checkpoint.h"
#include "../models/seq2seq.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checkpoints: a model, its vocabularies, its config, and optionally the training state ----
 * Metadata keys: tapegrad.model (kind name), config.<hparam>, vocab.src / vocab.tgt (the
 * vocabulary text format of datasets/vocab.h: one token per line), plus what the caller adds
 * (the trainer adds train.* and data.*); tensors: the parameters (docs/spec.md section 6 names) and
 * the optimizer state (optim.*). */

/* Adds the model's parameters and metadata to ck. Returns 0 or -1 (ag_last_error). */
int zoo_ckpt_add_model(nn_ckpt *ck, const zoo_model *m, const ds_vocab *src, const ds_vocab *tgt);
/* Adds the model's tied weights (zoo_model_ops.tied) under their other names, as PyTorch's
 * state_dict has them (borrowed when ck borrows). 0 or -1. */
int zoo_ckpt_add_tied(nn_ckpt *ck, const zoo_model *m);
/* Adds the model bytes of the vocabularies that carry a codec (subword models, datasets/vocab.h)
 * as metadata vocab.src_model / vocab.tgt_model (base64 of the model file), and
 * vocab.number_tags = "1" when their text carries number tags (ds_vocab_number_tags); nothing
 * for a word-level vocabulary. Called by zoo_ckpt_add_model. 0 or -1. (zoo/app/subword_run.c) */
int zoo_ckpt_add_codecs(nn_ckpt *ck, const ds_vocab *src, const ds_vocab *tgt);
/* The subword vocabularies a checkpoint holds (metadata vocab.src_model, vocab.tgt_model), with
 * their models as codecs, made by ops (SentencePiece's, zoo/app/subword.h), number tags on
 * both when vocab.number_tags is "1": *sv, *tv the caller's; both NULL for a word-level
 * checkpoint. 0, or -1 naming the file and the key (not base64, not a model, one side only,
 * number tags without models or not "1", ops NULL: a program without SentencePiece).
 * (zoo/app/subword_run.c) */
struct zoo_subword_ops;
int zoo_ckpt_subword(const struct zoo_subword_ops *ops, const nn_ckpt *ck, ds_vocab **sv,
                     ds_vocab **tv);
/* Rebuilds a model from a checkpoint written by zoo_ckpt_add_model, checking that it is of
 * kind `kind` (a checkpoint of another model is an error naming both), and its vocabularies.
 * Returns 0 with *m, *src, *tgt owned by the caller, or -1 with ag_last_error(). */
int zoo_ckpt_load_model(const nn_ckpt *ck, const zoo_model_kind *kind, zoo_model **m,
                        ds_vocab **src, ds_vocab **tgt);
/* A plain state_dict (e.g. safetensors.torch.save_file(net.state_dict(), ...)): builds the
 * model from the given config (of kind `kind`) and vocabulary files and loads the tensors.
 * A tied weight may come under its other names too (zoo_ckpt_add_tied), each then equal to it
 * (an error names both tensors otherwise). */
int zoo_ckpt_import_state_dict(const nn_ckpt *ck, const zoo_model_kind *kind, const void *cfg,
                               const char *src_vocab_path, const char *tgt_vocab_path,
                               zoo_model **m, ds_vocab **src, ds_vocab **tgt);

#ifdef __cplusplus
}
#endif

#endif
