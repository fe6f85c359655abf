/* zoo/app/run_cfg_internal.h -- what run_cfg.c (the groups, items, metadata) and run_args.c (the
 * command line, files, help) share. Not installed. */
#ifndef TG_ZOO_RUN_CFG_INTERNAL_H
#define TG_ZOO_RUN_CFG_INTERNAL_H

#include "zoo/app/run_cfg.h"

/* Whether the sub-command of r takes the item. */
bool zoo__takes(const zoo_run *r, const zoo_cfg_item *it);
/* The index of the item called name that the sub-command takes, or -1. */
int zoo__item_index(const zoo_run *r, const char *name);
/* Sets item i from text and marks it given (what: how an error names it: "--epochs",
 * "FILE:LINE: epochs"). 0, or -1 with ag_last_error(). */
int zoo__set_item(zoo_run *r, int i, const char *text, const char *what);

#endif
