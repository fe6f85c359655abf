/* file.c -- atomic output files: temporary file + fsync + rename (see ag_file.h). */
#include "autograd/ag_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "autograd/ag_base.h"

#define MAX_LINKS 40  /* symlinks followed, as Linux's ELOOP limit */
#define NAME_KEEP 200 /* bytes of the target's name kept in the temporary's name */
#define SUFFIX_LEN 6  /* random characters at the end of the temporary's name */

static char *dup_str(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

/* Frees f's strings and marks it closed. */
static void reset(ag_file *f) {
    free(f->path);
    free(f->target);
    free(f->tmp);
    *f = (ag_file){0};
}

/* Length of p's directory with its trailing slash ("a/b/c" -> 4, "/c" -> 1, "c" -> 0). */
static size_t head_len(const char *p) {
    const char *slash = strrchr(p, '/');
    return slash ? (size_t)(slash - p) + 1 : 0;
}

/* The first n bytes of s as a new string; NULL when out of memory. */
static char *dup_head(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Follows the symlinks of path's last component. Returns the final name (new string; it may
 * not exist yet), or NULL with a message. */
static char *resolve_links(const char *path) {
    char *cur = dup_str(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno == ENOENT) return cur; /* a new file (or a dangling link's target) */
            ag_error("%s: cannot stat %s: %s", path, cur, strerror(errno));
            break;
        }
        if (!S_ISLNK(st.st_mode)) return cur;
        if (hops == MAX_LINKS) {
            ag_error("%s: more than %d levels of symbolic links", path, MAX_LINKS);
            break;
        }
        size_t cap = (size_t)st.st_size + 1 > 256 ? (size_t)st.st_size + 1 : 256;
        char *link = malloc(cap);
        ssize_t n = link ? readlink(cur, link, cap) : -1;
        if (n < 0 || (size_t)n >= cap) {
            int e = link ? (n < 0 ? errno : ENAMETOOLONG) : ENOMEM;
            free(link);
            ag_error("%s: cannot read the symbolic link %s: %s", path, cur, strerror(e));
            break;
        }
        link[n] = '\0';
        char *next = link;
        size_t hl = head_len(cur);
        if (link[0] != '/' && hl > 0) { /* relative to the link's directory */
            next = malloc(hl + (size_t)n + 1);
            if (next) {
                memcpy(next, cur, hl);
                memcpy(next + hl, link, (size_t)n + 1);
            }
            free(link);
        }
        free(cur);
        cur = next;
    }
    if (!cur) ag_error("%s: out of memory", path);
    free(cur);
    return NULL;
}

/* If name is "<prefix><pid>.<SUFFIX_LEN chars>", returns the pid, else 0. */
static long temp_pid(const char *name, const char *prefix) {
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0) return 0;
    const char *p = name + pl;
    long pid = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (pid > 100000000) return 0;
        pid = pid * 10 + (*p - '0');
    }
    if (p == name + pl || *p != '.' || strlen(p + 1) != SUFFIX_LEN) return 0;
    return pid;
}

/* Removes "<head><prefix><pid>.XXXXXX" files (head: a directory with its trailing slash, or
 * "" for the current one) whose pid is another process that no longer exists. Best effort:
 * errors are ignored (the open that follows reports what matters). */
static void remove_stale(const char *head, const char *prefix) {
    DIR *d = opendir(head[0] ? head : ".");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = temp_pid(e->d_name, prefix);
        if (pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours */
        char *p = malloc(strlen(head) + strlen(e->d_name) + 1);
        if (!p) break;
        sprintf(p, "%s%s", head, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) unlink(p);
        free(p);
    }
    closedir(d);
}

/* SUFFIX_LEN random characters [A-Za-z0-9] into s (not a secret: O_EXCL makes it safe). */
static void random_suffix(char *s) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static _Thread_local uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 40) ^
                 (++counter * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uintptr_t)&counter;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; /* splitmix64's finalizer */
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (int i = 0; i < SUFFIX_LEN; i++, z /= 62) s[i] = alphabet[z % 62];
    s[SUFFIX_LEN] = '\0';
}

/* Creates the temporary file of f->target (O_EXCL, mode 0666 & ~umask). Returns its fd and
 * sets f->tmp, or returns -1 with a message. */
static int create_temp(ag_file *f) {
    size_t hl = head_len(f->target);
    char prefix[NAME_KEEP + 8];
    snprintf(prefix, sizeof prefix, ".%.*s.tmp.", NAME_KEEP, f->target + hl);
    char *head = dup_head(f->target, hl); /* "dir/" or "" */
    char *tmp = head ? malloc(hl + strlen(prefix) + 24 + SUFFIX_LEN + 1) : NULL;
    if (!tmp) {
        free(head);
        return ag_error("%s: out of memory", f->path);
    }
    remove_stale(head, prefix);
    int fd = -1, e = 0;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        char suffix[SUFFIX_LEN + 1];
        random_suffix(suffix);
        sprintf(tmp, "%s%s%ld.%s", head, prefix, (long)getpid(), suffix);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    free(head);
    if (fd < 0) {
        free(tmp);
        return ag_error("%s: cannot create a temporary file beside it: %s", f->path, strerror(e));
    }
    f->tmp = tmp;
    return fd;
}

FILE *ag_file_open(ag_file *f, const char *path) {
    if (!f) {
        ag_error("ag_file_open: f is NULL");
        return NULL;
    }
    *f = (ag_file){0};
    if (!path || !path[0]) {
        ag_error("ag_file_open: empty path");
        return NULL;
    }
    f->path = dup_str(path);
    if (!f->path) {
        ag_error("%s: out of memory", path);
        return NULL;
    }
    f->target = resolve_links(path);
    if (!f->target) {
        reset(f);
        return NULL;
    }
    size_t tl = strlen(f->target);
    if (f->target[tl - 1] == '/') {
        ag_error("%s: names a directory, expected a file", path);
        reset(f);
        return NULL;
    }
    struct stat st;
    bool exists = stat(f->target, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        ag_error("%s: is a directory, expected a file (nothing written)", path);
        reset(f);
        return NULL;
    }
    if (exists && !S_ISREG(st.st_mode)) { /* FIFO, device: written in place */
        f->fp = fopen(f->target, "wb");
        if (!f->fp) {
            ag_error("%s: cannot open: %s", path, strerror(errno));
            reset(f);
        }
        return f->fp;
    }
    int fd = create_temp(f);
    if (fd < 0) {
        reset(f);
        return NULL;
    }
    if (exists) { /* the target's owner (best effort), then its permission bits */
        if ((st.st_uid != geteuid() || st.st_gid != getegid()) &&
            fchown(fd, st.st_uid, st.st_gid) != 0) {
            /* not permitted: the new file is the writer's, as a copy would be */
        }
        if (fchmod(fd, st.st_mode & 07777) != 0) {
            int e = errno;
            close(fd);
            unlink(f->tmp);
            ag_error("%s: cannot set the mode of the temporary file %s: %s", path, f->tmp,
                     strerror(e));
            reset(f);
            return NULL;
        }
    }
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        int e = errno;
        close(fd);
        unlink(f->tmp);
        ag_error("%s: cannot open a stream on the temporary file: %s", path, strerror(e));
        reset(f);
    }
    return f->fp;
}

/* fsyncs the directory holding path so that a rename into it is durable (best effort). */
static void sync_dir(const char *path) {
    size_t hl = head_len(path);
    char *dir = hl ? dup_head(path, hl) : dup_head(".", 1);
    int fd = dir ? open(dir, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

/* Flushes, fsyncs and closes f's stream, keeping the temporary. 0, or -1 with the message (the
 * temporary removed, f reset). A target written in place is done (f reset) either way. */
static int finish(ag_file *f) {
    const char *step = NULL;
    int e = 0;
    if (fflush(f->fp) != 0) step = "writing", e = errno;
    else if (ferror(f->fp)) step = "writing";
    else if (f->tmp && fsync(fileno(f->fp)) != 0) step = "fsync of", e = errno;
    if (fclose(f->fp) != 0 && !step) step = "closing", e = errno;
    f->fp = NULL;
    if (!f->tmp) { /* written in place */
        int rc =
            step ? ag_error("%s: %s it failed: %s", f->path, step, e ? strerror(e) : "write error")
                 : 0;
        reset(f);
        return rc;
    }
    if (!step) return 0;
    unlink(f->tmp);
    if (strcmp(f->path, f->target) != 0)
        ag_error("%s (a link to %s): %s the temporary file failed: %s (previous file kept)",
                 f->path, f->target, step, e ? strerror(e) : "write error");
    else
        ag_error("%s: %s the temporary file failed: %s (previous file kept)", f->path, step,
                 e ? strerror(e) : "write error");
    reset(f);
    return -1;
}

/* Renames the finished temporary over the target and fsyncs its directory; f reset. 0 or -1. */
static int publish(ag_file *f) {
    int rc = 0;
    if (!f->tmp) return reset(f), 0;
    if (rename(f->tmp, f->target) != 0) {
        int e = errno;
        unlink(f->tmp);
        rc = ag_error("%s: renaming the temporary file failed: %s (previous file kept)", f->path,
                      strerror(e));
    } else {
        sync_dir(f->target);
    }
    reset(f);
    return rc;
}

int ag_file_commit(ag_file *f) {
    if (!f || !f->fp) return ag_error("ag_file_commit: the file is not open");
    if (finish(f)) return -1;
    return publish(f);
}

int ag_file_commit_all(ag_file *fs, int n) {
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (!fs[i].fp ? ag_error("ag_file_commit_all: file %d is not open", i) : finish(&fs[i]))
            bad = i;
    if (bad >= 0) { /* none is renamed: the others' temporaries go too */
        for (int i = 0; i < n; i++) {
            if (i == bad) continue;
            if (fs[i].fp) ag_file_abort(&fs[i]);
            else if (fs[i].tmp) unlink(fs[i].tmp), reset(&fs[i]);
        }
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) rc |= publish(&fs[i]);
    return rc ? -1 : 0;
}

void ag_file_abort(ag_file *f) {
    if (!f || !f->fp) return;
    fclose(f->fp);
    if (f->tmp) unlink(f->tmp);
    reset(f);
}
