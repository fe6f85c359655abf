/* tg_test.c -- the shared harness of the CUnit test programs (tests/tg_test.h). */
#define _POSIX_C_SOURCE 200809L
#include "tests/tg_test.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autograd/ag_base.h"

int tg_test_main(const char *suite, const CU_TestInfo *tests) {
    CU_SuiteInfo suites[] = {{suite, NULL, NULL, NULL, NULL, (CU_TestInfo *)tests},
                             CU_SUITE_INFO_NULL};
    return tg_test_run(suites);
}

/* ---- assertions ---- */

/* CUnit keeps the condition string's pointer until the report: a ring of message buffers. */
static char msgs[64][1024];
static int next_msg;

static char *msg_buf(void) {
    char *m = msgs[next_msg];
    next_msg = (next_msg + 1) % 64;
    return m;
}

static void pass(const char *file, int line, const char *what) {
    CU_assertImplementation(CU_TRUE, (unsigned)line, what, file, "", CU_FALSE);
}

static void vfail(const char *file, int line, const char *fmt, va_list ap) {
    char *m = msg_buf();
    vsnprintf(m, sizeof msgs[0], fmt, ap);
    CU_assertImplementation(CU_FALSE, (unsigned)line, m, file, "", CU_FALSE);
}

void tg_fail_(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(file, line, fmt, ap);
    va_end(ap);
}

/* The first of the NULL-ended texts in ap that `text` lacks, or NULL. */
static const char *missing(const char *text, va_list ap) {
    for (const char *want; (want = va_arg(ap, const char *));)
        if (!text || !strstr(text, want)) return want;
    return NULL;
}

bool tg_has_(const char *file, int line, const char *what, const char *text, ...) {
    va_list ap;
    va_start(ap, text);
    const char *lack = missing(text, ap);
    va_end(ap);
    if (!lack) {
        pass(file, line, what);
        return true;
    }
    tg_fail_(file, line, "%s = \"%s\" lacks \"%s\"", what, text ? text : "(null)", lack);
    return false;
}

bool tg_ok_(const char *file, int line, const char *call, int got) {
    if (got == 0) {
        pass(file, line, call);
        return true;
    }
    tg_fail_(file, line, "%s returned %d, expected 0; ag_last_error: %s", call, got,
             ag_last_error());
    return false;
}

bool tg_expect_(const char *file, int line, const char *call, bool failed, const char *want, ...) {
    if (!failed) {
        tg_fail_(file, line, "%s did not return %s (ag_last_error: %s)", call, want,
                 ag_last_error());
        return false;
    }
    va_list ap;
    va_start(ap, want);
    const char *lack = missing(ag_last_error(), ap);
    va_end(ap);
    if (!lack) {
        pass(file, line, call);
        return true;
    }
    tg_fail_(file, line, "%s: its message \"%s\" lacks \"%s\"", call, ag_last_error(), lack);
    return false;
}

/* ---- the error handler ---- */

char tg_captured[512];
int tg_n_captured;

void tg_capture(const char *msg, void *user) {
    (void)user;
    snprintf(tg_captured, sizeof tg_captured, "%s", msg);
    tg_n_captured++;
}

/* ---- output captured into a string ---- */

FILE *tg_stream_open(tg_stream *s) {
    *s = (tg_stream){0};
    s->f = open_memstream(&s->buf, &s->len);
    if (!s->f) {
        perror("tg_stream_open");
        exit(2);
    }
    return s->f;
}

const char *tg_stream_text(tg_stream *s) {
    fflush(s->f);
    return s->buf ? s->buf : "";
}

void tg_stream_close(tg_stream *s) {
    if (s->f) fclose(s->f);
    free(s->buf);
    *s = (tg_stream){0};
}

void tg_fd_capture_begin(tg_fd_capture *c, int fd) {
    fflush(stdout);
    fflush(stderr);
    c->fd = fd;
    c->tmp = tmpfile();
    c->saved = c->tmp ? dup(fd) : -1;
    if (c->saved < 0 || dup2(fileno(c->tmp), fd) < 0) {
        perror("tg_fd_capture_begin");
        exit(2);
    }
}

char *tg_fd_capture_end(tg_fd_capture *c) {
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved, c->fd);
    close(c->saved);
    long n = fseek(c->tmp, 0, SEEK_END) ? -1 : ftell(c->tmp);
    char *text = malloc(n > 0 ? (size_t)n + 1 : 1);
    size_t got = 0;
    if (text && n > 0 && fseek(c->tmp, 0, SEEK_SET) == 0) got = fread(text, 1, (size_t)n, c->tmp);
    if (text) text[got] = '\0';
    fclose(c->tmp);
    *c = (tg_fd_capture){.fd = -1, .saved = -1};
    return text;
}

/* ---- temporary files and directories ---- */

static char *temp_template(void) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    size_t n = strlen(dir) + sizeof "/tg_test_XXXXXX";
    char *path = malloc(n);
    if (!path) {
        perror("tg_test");
        exit(2);
    }
    snprintf(path, n, "%s/tg_test_XXXXXX", dir);
    return path;
}

char *tg_temp_dir(void) {
    char *path = temp_template();
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        exit(2);
    }
    return path;
}

char *tg_temp_file(const void *data, size_t len) {
    char *path = temp_template();
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(2);
    }
    for (const char *p = data; len > 0;) {
        ssize_t w = write(fd, p, len);
        if (w <= 0) {
            perror("write");
            exit(2);
        }
        p += w;
        len -= (size_t)w;
    }
    close(fd);
    return path;
}

const char *tg_path(const char *dir, const char *name) {
    static char bufs[8][512];
    static int next;
    char *p = bufs[next];
    next = (next + 1) % 8;
    snprintf(p, sizeof bufs[0], "%s/%s", dir, name);
    return p;
}

int tg_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st)) return -1;
    if (!S_ISDIR(st.st_mode)) return unlink(path);
    DIR *d = opendir(path);
    if (!d) return -1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *p = malloc(n);
        if (!p) {
            rc = -1;
            continue;
        }
        snprintf(p, n, "%s/%s", path, e->d_name);
        rc |= tg_remove_tree(p);
        free(p);
    }
    closedir(d);
    return rmdir(path) | rc;
}

int tg_remove(char *path) {
    int rc = path ? tg_remove_tree(path) : 0;
    free(path);
    return rc;
}
