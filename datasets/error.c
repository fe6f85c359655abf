/* datasets/error.c -- small helpers: growing buffers, reading a file descriptor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/internal.h"

void *ds_regrow(void *buf, size_t *cap, size_t need, size_t elem) {
    if (buf && need <= *cap) return buf;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2) {
            ag_error("buffer of %zu elements too large", need);
            return NULL;
        }
        n *= 2;
    }
    if (n > SIZE_MAX / elem) {
        ag_error("buffer of %zu elements too large", need);
        return NULL;
    }
    void *p = realloc(buf, n * elem);
    if (!p) {
        ag_error("out of memory growing a buffer to %zu bytes", n * elem);
        return NULL;
    }
    *cap = n;
    return p;
}

int ds_read_fd(int fd, const char *path, char **out, size_t *len) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        char *nb = ds_regrow(buf, &cap, n + 65536, 1);
        if (!nb) {
            rc = -1;
            break;
        }
        buf = nb;
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR) continue;
            rc = ag_error("%s: read failed: %s", path, strerror(errno));
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
