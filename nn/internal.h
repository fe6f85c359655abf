/* internal.h -- helpers shared by the nn/ sources; not part of the public API. */
#ifndef TG_NN_INTERNAL_H
#define TG_NN_INTERNAL_H

#include <stddef.h>

#include "nn/nn.h"

/* Checks that init is valid for a parameter of this shape; on failure writes a message that
 * names the parameter into msg and returns -1. */
int nn_init_check(nn_init init, const char *pname, int ndim, const int *shape, char *msg,
                  size_t msglen);

/* Writes "[2, 3]" for (ndim, shape) into buf (always NUL-terminated); returns buf. */
char *nn_shape_fmt(char *buf, size_t len, int ndim, const int *shape);

#endif
