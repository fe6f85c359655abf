/* ckpt_map.c -- a checkpoint file mapped read-only (nn_ckpt_load_opts.map): the mapping, and
 * the pages a load is done with given back as it goes, so that reading a checkpoint holds
 * about one tensor of it in memory at a time (madvise is Linux's and the BSDs', not POSIX's). */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/io/ckpt_internal.h"

int ck_map(int fd, const char *path, size_t size, unsigned char **base) {
    *base = NULL;
    if (size == 0) return 0; /* nothing to map: the reader refuses the empty file by its rules */
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return ag_error("%s: cannot map the file: %s", path, strerror(errno));
    *base = p;
    return 0;
}

void ck_unmap(unsigned char *base, size_t size) {
    if (base) munmap(base, size);
}

void ck_release(const nn_ckpt *ck, size_t begin, size_t end) {
    if (!ck->map || end <= begin) return;
    long page = sysconf(_SC_PAGESIZE);
    size_t ps = page > 0 ? (size_t)page : 4096;
    /* the whole pages inside [begin, end) of the data section; the two at its edges, which
     * the neighbouring tensors share, stay */
    uintptr_t a = (uintptr_t)(ck->data + begin), b = (uintptr_t)(ck->data + end);
    a = (a + ps - 1) / ps * ps;
    b = b / ps * ps;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}
