/* transformer_nmt -- d2l's Transformer on English-French: train, translate, eval, stats.
 * See zoo/app/cli.h for the sub-commands and docs/zoo.md for a walk through. */
#include "zoo/app/cli.h"

int main(int argc, char **argv) { return zoo_cli_main(&zoo_transformer_kind, argc, argv); }
