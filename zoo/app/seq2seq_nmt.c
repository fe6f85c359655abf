/* seq2seq_nmt -- d2l's plain RNN encoder-decoder (an LSTM by default, --cell gru: the book's)
 * on English-French: train, translate, eval, stats. See zoo/app/cli.h for the sub-commands and
 * docs/zoo.md for a walk through. */
#include "zoo/app/cli.h"
#include "zoo/models/encdec.h"

int main(int argc, char **argv) { return zoo_cli_main(&zoo_encdec_kind, argc, argv); }
