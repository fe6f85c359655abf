/* seq2seq_nmt -- d2l's plain RNN encoder-decoder (an LSTM by default, --cell gru: the book's)
 * on English-French: train, translate, eval, stats. See zoo/app/cli.h for the sub-commands and
 * docs/zoo.md for a walk through; under mpirun, train runs on every process
 * (docs/distributed.md). */
#include "zoo/app/cli.h"
#include "zoo/app/dist_mpi_internal.h"
#include "zoo/app/subword.h"
#include "zoo/models/encdec.h"

int main(int argc, char **argv) {
    return zoo_cli_main_subword(&zoo_encdec_kind, zoo_dist_mpi(), zoo_subword_spm(), argc, argv);
}
