/* error.c -- the thread-local last-error message shared by nn/ and optim/ (see nn/nn.h). */
#include <stdarg.h>
#include <stdio.h>

#include "nn/base.h"

#define NN_ERR_LEN 1024

static _Thread_local char nn_err_buf[NN_ERR_LEN];

const char *nn_last_error(void) { return nn_err_buf; }

void *nn_forward_error(const nn_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nn_err_buf, sizeof nn_err_buf, fmt, ap);
    va_end(ap);
    return ag_report(c ? c->tape : NULL, "%s", nn_err_buf);
}

int nn_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nn_err_buf, sizeof nn_err_buf, fmt, ap);
    va_end(ap);
    return -1;
}
