/* bahdanau_nmt -- d2l's GRU encoder-decoder with Bahdanau attention on English-French: train,
 * translate, eval, stats. See zoo/app/cli.h for the sub-commands and docs/zoo.md for a walk
 * through. */
#include "zoo/app/cli.h"

int main(int argc, char **argv) { return zoo_cli_main(&zoo_bahdanau_kind, argc, argv); }
