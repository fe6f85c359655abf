/* datasets/error.c -- status names, ds_fail on the shared error channel, small helpers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/internal.h"

const char *ds_status_name(int status) {
    switch (status) {
    case DS_OK: return "ok";
    case DS_EARG: return "bad argument";
    case DS_EIO: return "I/O error";
    case DS_EFORMAT: return "bad data";
    case DS_ENOMEM: return "out of memory";
    default: return "unknown status";
    }
}

int ds_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ag_verror(fmt, ap);
    va_end(ap);
    return status;
}

void *ds_regrow(void *buf, size_t *cap, size_t need, size_t elem) {
    if (buf && need <= *cap) return buf;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2) {
            ds_fail(DS_ENOMEM, "buffer of %zu elements too large", need);
            return NULL;
        }
        n *= 2;
    }
    if (n > SIZE_MAX / elem) {
        ds_fail(DS_ENOMEM, "buffer of %zu elements too large", need);
        return NULL;
    }
    void *p = realloc(buf, n * elem);
    if (!p) {
        ds_fail(DS_ENOMEM, "out of memory growing a buffer to %zu bytes", n * elem);
        return NULL;
    }
    *cap = n;
    return p;
}

int ds_read_fd(int fd, const char *path, char **out, size_t *len) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = DS_OK;
    for (;;) {
        char *nb = ds_regrow(buf, &cap, n + 65536, 1);
        if (!nb) {
            rc = DS_ENOMEM;
            break;
        }
        buf = nb;
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR) continue;
            rc = ds_fail(DS_EIO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    if (rc) {
        free(buf);
        buf = NULL;
        n = 0;
    }
    *out = buf;
    *len = n;
    return rc;
}
