/* zoo/app/cli.h -- the command line shared by the zoo's programs (transformer_nmt, bahdanau_nmt):
 *
 *     PROGRAM train      [flags]              train on fra-eng, report, translate, checkpoint
 *     PROGRAM translate  --checkpoint PATH [--beam N] [SENTENCE ...]   (stdin without any)
 *     PROGRAM eval       --checkpoint PATH    corpus BLEU-4, chrF, mean d2l BLEU on a split
 *     PROGRAM stats      [flags]              pairs, vocabularies, lengths, length histogram
 *     PROGRAM export     --checkpoint PATH --out FILE --src-vocab F --tgt-vocab F
 *                                             a plain state_dict + vocabularies, for PyTorch
 *     PROGRAM average    --out FILE CHECKPOINT ... | --last N --checkpoint PATH
 *                                             the mean of checkpoints' parameters, for decoding
 *
 * Every sub-command takes --help. The model's hyperparameters are flags too (from its kind's
 * table). Exit status: 0 success, 1 a runtime failure (data, checkpoint, training), 2 a usage
 * error (unknown flag, bad value); one line on stderr says what and where, and nothing already
 * written is overwritten by a failed run (checkpoints are replaced atomically).
 */
#ifndef TG_ZOO_CLI_H
#define TG_ZOO_CLI_H

#include "../models/seq2seq.h"

#ifdef __cplusplus
extern "C" {
#endif

int zoo_cli_main(const zoo_model_kind *kind, int argc, char **argv);

/* The same, `train` spread over the processes an MPI launcher started (docs/distributed.md):
 * transport is the program's (zoo_dist_mpi() for the zoo's programs; NULL: zoo_cli_main). Under
 * several processes, `train` trains one model on all of them and rank 0 alone prints and writes
 * files; the other sub-commands refuse to run as several processes. */
struct zoo_dist_transport;
int zoo_cli_main_dist(const zoo_model_kind *kind, const struct zoo_dist_transport *transport,
                      int argc, char **argv);

/* The same with subword vocabularies (train --vocab subword, and translate / eval of their
 * checkpoints): subword is SentencePiece's (zoo_subword_spm(), zoo/app/subword.h, linked by the
 * program). NULL (what zoo_cli_main and zoo_cli_main_dist pass): those refuse, naming the
 * missing support. */
struct zoo_subword_ops;
int zoo_cli_main_subword(const zoo_model_kind *kind, const struct zoo_dist_transport *transport,
                         const struct zoo_subword_ops *subword, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
