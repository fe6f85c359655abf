/* dist.c -- the process group of a data-parallel run, over a transport the program provides
 * (zoo/app/dist.h): its collectives and their deadline, the start check, the held output. No MPI
 * here: zoo/app/dist_mpi.c is the Open MPI transport; dist_text.c the text of a run. */
#define _POSIX_C_SOURCE 200809L
#include "zoo/app/dist.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

struct zoo_dist {
    const zoo_dist_transport *t; /* NULL: this process alone */
    void *ctx;
    int rank, size, local_size;
    bool check, timing;  /* TG_DIST_CHECK, TG_DIST_TIMING */
    bool started;        /* zoo_dist_check_start has run */
    int real_stderr;     /* while holding: the stderr to restore (else -1) */
    FILE *held;          /* while holding: where stderr goes */
    char *shown;         /* what the hold kept back that this rank must show, for */
    size_t shown_len;    /*   zoo_dist_write_held (malloc'd; NULL: nothing) */
    double sum_seconds;  /* zoo_dist_sum: time, calls, elements of the last */
    double wait_seconds; /* TG_DIST_TIMING: time waiting for the last rank before each sum */
    int64_t sums;
    size_t sum_n;
    double timeout;    /* zoo_dist_set_timeout (0: none) */
    int64_t seq;       /* collectives started so far */
    double moving_max; /* the longest a collective's data moved, seconds (wait_for) */
};

static bool env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

zoo_dist *zoo_dist_open(const zoo_dist_transport *t) {
    zoo_dist *d = calloc(1, sizeof *d);
    if (!d) {
        ag_error("dist: out of memory");
        return NULL;
    }
    *d = (zoo_dist){.size = 1, .local_size = 1, .real_stderr = -1};
    int joined = t ? t->init(&d->ctx, &d->rank, &d->size, &d->local_size) : 0;
    if (joined < 0) {
        free(d);
        return NULL;
    }
    if (joined) d->t = t;
    d->check = env_on("TG_DIST_CHECK");
    d->timing = env_on("TG_DIST_TIMING");
    return d;
}

/* Ends a hold: stderr is the real one again; the held bytes are returned (malloc'd, *len). */
static char *unhold(zoo_dist *d, size_t *len) {
    *len = 0;
    if (d->real_stderr < 0) return NULL;
    fflush(stderr);
    int fd = fileno(d->held);
    off_t end = lseek(fd, 0, SEEK_END);
    char *text = malloc(end > 0 ? (size_t)end + 1 : 1);
    if (text && end > 0 && pread(fd, text, (size_t)end, 0) == (ssize_t)end) *len = (size_t)end;
    if (text) text[*len] = '\0';
    dup2(d->real_stderr, STDERR_FILENO);
    close(d->real_stderr);
    fclose(d->held);
    d->real_stderr = -1;
    d->held = NULL;
    return text;
}

void zoo_dist_close(zoo_dist *d) {
    if (!d) return;
    size_t len;
    free(unhold(d, &len)); /* what was not written with zoo_dist_write_held is dropped */
    free(d->shown);
    if (d->t) d->t->finalize(d->ctx);
    free(d);
}

int zoo_dist_set_timeout(zoo_dist *d, double seconds) {
    if (!(seconds >= 0)) return ag_error("dist: a deadline of %g s (expected 0 or more)", seconds);
    if (d) d->timeout = seconds;
    return 0;
}

int zoo_dist_rank(const zoo_dist *d) { return d ? d->rank : 0; }
int zoo_dist_size(const zoo_dist *d) { return d ? d->size : 1; }
int zoo_dist_local_size(const zoo_dist *d) { return d ? d->local_size : 1; }
const char *zoo_dist_name(const zoo_dist *d) { return d && d->t ? d->t->name : "none"; }

static bool group(const zoo_dist *d) { return d && d->t; }

/* ---- waiting for a collective, with the deadline ---- */

/* Ranks named in the deadline's message, at most; the silence of a rank that waited but is
 * not the lowest of those (seconds); polling: spinning first, then sleeping (seconds). */
enum { NAMED = 8 };
static const double GRACE = 5, SPIN = 200e-6, NAP_MIN = 50e-6, NAP_MAX = 10e-3;

/* "r0, r1, ..." of the ranks r that answered (want) or did not: itself, and those that noted
 * collective d->seq (heard[r], NULL: none), into s, at most NAMED; returns how many there are. */
static int list_ranks(const zoo_dist *d, const int64_t *heard, bool want, char *s, size_t cap) {
    int k = 0;
    size_t n = 0;
    s[0] = '\0';
    for (int r = 0; r < d->size; r++) {
        bool answered = r == d->rank || (heard && heard[r] >= d->seq);
        if (answered != want) continue;
        if (k < NAMED && n < cap) n += (size_t)snprintf(s + n, cap - n, "%s%d", k ? ", " : "", r);
        k++;
    }
    if (k > NAMED && n < cap) snprintf(s + n, cap - n, " and %d more", k - NAMED);
    return k;
}

/* The deadline has passed after `waited` seconds in collective d->seq. The lowest rank of those
 * that waited (itself and those whose note came) says which ranks did not answer and ends the
 * job. Another returns the time to wait on, in silence, for that rank to end it (GRACE), after
 * which (`grace_over`) it ends the job itself. */
static double expire(zoo_dist *d, double waited, bool grace_over) {
    int64_t *heard = d->t->note && d->t->heard ? malloc(sizeof *heard * (size_t)d->size) : NULL;
    for (int r = 0; heard && r < d->size; r++) heard[r] = -1;
    if (heard && d->t->heard(d->ctx, heard)) { /* cannot tell who answered */
        free(heard);
        heard = NULL;
    }
    bool lowest = true;
    for (int r = 0; heard && r < d->rank; r++) lowest &= heard[r] < d->seq;
    char absent[160], present[160];
    int n_absent = list_ranks(d, heard, false, absent, sizeof absent);
    int n_present = list_ranks(d, heard, true, present, sizeof present);
    bool known = heard != NULL;
    free(heard);
    if (!lowest && !grace_over) return waited + GRACE;
    size_t len;
    free(unhold(d, &len)); /* the message goes to the real stderr */
    if (!known)
        ag_error("a rank did not answer within %g s (--dist-timeout) (rank%s %s did): ending "
                 "the job",
                 d->timeout, n_present > 1 ? "s" : "", present);
    else if (n_absent)
        ag_error("rank%s %s did not answer within %g s (--dist-timeout): ending the job",
                 n_absent > 1 ? "s" : "", absent, d->timeout);
    else
        ag_error("a collective did not complete within %g s (--dist-timeout) though every rank "
                 "answered (one stopped or lost its link during the transfer): ending the job",
                 d->timeout);
    ag_error_raise();
    zoo_dist_abort(d, 1);
    return waited; /* not reached (a transport's abort does not return) */
}

/* How long to sleep before the next poll, from the time waited so far: while some rank has not
 * arrived, nothing for the first SPIN seconds, then an eighth of the time waited; while the
 * data moves (every rank has arrived), nothing for the first `spin` seconds (this run's longest
 * transfer so far, 4 times, plus 10 ms, at most 1 s: the transfer needs this rank's polls to
 * move), then an eighth of the time beyond it (a rank stopped during the transfer). Naps are
 * NAP_MIN to NAP_MAX. */
static double nap_for(zoo_dist_state state, double waited, double moving, double spin) {
    double s = state == ZOO_DIST_MOVING ? (moving < spin ? 0 : (moving - spin) / 8)
               : waited < SPIN          ? 0
                                        : waited / 8;
    return s <= 0 ? 0 : s < NAP_MIN ? NAP_MIN : s > NAP_MAX ? NAP_MAX : s;
}

/* Polls the started collective req until it is done (0), the transport fails (-1) or the
 * deadline passes (the job ends). The clock is this rank's time awake: a gap between two polls
 * longer than the nap by over a second (this rank was stopped, or starved of the processor)
 * counts as nap + 1 s, so that a rank resumed after a stop blames no one. */
static int wait_for(zoo_dist *d, void *req) {
    double prev = now(), waited = 0, moving = -1, slept = 0;
    double give_up = d->timeout > 0 ? d->timeout : INFINITY;
    double note_at = d->timeout > 0 && d->t->note ? fmin(1, d->timeout / 4) : INFINITY;
    double spin = fmin(1, 4 * d->moving_max + 0.01); /* the first collective: up to 1 s */
    for (;;) {
        zoo_dist_state state = ZOO_DIST_WAITING;
        if (d->t->test(d->ctx, req, &state)) return -1;
        double t = now(), step = fmin(t - prev, slept + 1);
        prev = t;
        waited += step;
        if (moving >= 0 || state != ZOO_DIST_WAITING) moving = moving < 0 ? 0 : moving + step;
        if (state == ZOO_DIST_DONE) {
            d->moving_max = fmax(d->moving_max, moving);
            return 0;
        }
        if (waited >= note_at) { /* the others may ask who waited: say so, once (a failure */
            note_at = INFINITY;  /* makes the deadline's message vaguer, nothing else) */
            (void)d->t->note(d->ctx, d->seq);
        }
        if (waited >= give_up) give_up = expire(d, waited, give_up > d->timeout);
        slept = nap_for(state, waited, moving, spin);
        if (slept > 0) nanosleep(&(struct timespec){0, (long)(1e9 * slept)}, NULL);
    }
}

/* One collective (zoo_dist_op): started and waited for with the deadline when the transport
 * can, else its blocking function. 0 or -1. */
static int collective(zoo_dist *d, zoo_dist_op op, const void *mine, void *buf, size_t n) {
    const zoo_dist_transport *t = d->t;
    int rc = 0;
    if (t->start && t->test) {
        void *req = NULL;
        rc = t->start(d->ctx, op, mine, buf, n, &req);
        if (!rc) rc = wait_for(d, req);
    } else {
        switch (op) {
        case ZOO_DIST_SUM_F32: rc = t->sum_f32(d->ctx, buf, n); break;
        case ZOO_DIST_SUM_F64: rc = t->sum_f64(d->ctx, buf, n); break;
        case ZOO_DIST_MAX_I32: rc = t->max_i32(d->ctx, buf, n); break;
        case ZOO_DIST_BCAST: rc = t->bcast(d->ctx, buf, n); break;
        case ZOO_DIST_ALLGATHER: rc = t->allgather(d->ctx, mine, buf, n); break;
        }
    }
    d->seq++;
    return rc;
}

/* ---- collectives ---- */

/* TG_DIST_CHECK: every rank's hash of buf against rank 0's (on every rank, so that all fail
 * together). */
static int check_same(zoo_dist *d, const void *buf, size_t bytes, const char *what) {
    uint64_t mine = XXH3_64bits(buf, bytes);
    uint64_t *all = malloc(sizeof *all * (size_t)d->size);
    if (!all) return ag_error("dist: out of memory");
    int rc = collective(d, ZOO_DIST_ALLGATHER, &mine, all, sizeof mine);
    for (int r = 1; r < d->size && !rc; r++)
        if (all[r] != all[0])
            rc = ag_error("dist: TG_DIST_CHECK: the %s on rank %d differs from rank 0's (the "
                          "transport did not give every rank the same bits)",
                          what, r);
    free(all);
    return rc;
}

int zoo_dist_sum(zoo_dist *d, ag_real *buf, size_t n) {
    if (!group(d)) return 0;
    double t0 = now();
    if (d->timing) { /* the ranks meet first, so that the sum's time is its own */
        int32_t one = 1;
        if (collective(d, ZOO_DIST_MAX_I32, NULL, &one, 1)) return -1;
        double t1 = now();
        d->wait_seconds += t1 - t0;
        t0 = t1;
    }
#ifdef TG_DOUBLE
    int rc = collective(d, ZOO_DIST_SUM_F64, NULL, buf, n);
#else
    int rc = collective(d, ZOO_DIST_SUM_F32, NULL, buf, n);
#endif
    d->sum_seconds += now() - t0;
    d->sums++;
    d->sum_n = n;
    if (!rc && d->check) rc = check_same(d, buf, sizeof *buf * n, "sum");
    return rc;
}

int zoo_dist_sum_f64(zoo_dist *d, double *buf, size_t n) {
    if (!group(d)) return 0;
    int rc = collective(d, ZOO_DIST_SUM_F64, NULL, buf, n);
    if (!rc && d->check) rc = check_same(d, buf, sizeof *buf * n, "sum");
    return rc;
}

int zoo_dist_max(zoo_dist *d, int32_t *flags, size_t n) {
    return group(d) ? collective(d, ZOO_DIST_MAX_I32, NULL, flags, n) : 0;
}

int zoo_dist_share(zoo_dist *d, void *buf, size_t bytes) {
    return group(d) ? collective(d, ZOO_DIST_BCAST, NULL, buf, bytes) : 0;
}

int zoo_dist_on_root(zoo_dist *d, int (*fn)(void *ctx, double *out), void *ctx, double *out) {
    if (!group(d)) return fn(ctx, out);
    double msg[2] = {0, 0}; /* status, value */
    if (d->rank == 0) {
        msg[0] = fn(ctx, out) ? -1 : 0;
        if (!msg[0]) msg[1] = *out;
    }
    if (collective(d, ZOO_DIST_BCAST, NULL, msg, sizeof msg)) return -1;
    if (msg[0]) return d->rank == 0 ? -1 : ag_error("rank 0 failed (its message is on its stderr)");
    *out = msg[1];
    return 0;
}

/* ---- the start of a run ---- */

int zoo_dist_hold_output(zoo_dist *d) {
    if (!group(d) || d->size == 1 || d->real_stderr >= 0) return 0;
    fflush(stdout);
    fflush(stderr);
    if (d->rank) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, STDOUT_FILENO) < 0) {
            if (null >= 0) close(null);
            return ag_error("dist: cannot send stdout to /dev/null");
        }
        close(null);
    }
    d->held = tmpfile();
    d->real_stderr = d->held ? dup(STDERR_FILENO) : -1;
    if (d->real_stderr < 0 || dup2(fileno(d->held), STDERR_FILENO) < 0) {
        if (d->real_stderr >= 0) close(d->real_stderr);
        if (d->held) fclose(d->held);
        d->real_stderr = -1;
        d->held = NULL;
        return ag_error("dist: cannot hold stderr back in a temporary file");
    }
    return 0;
}

/* Line k of s (0-based), its length in *len; NULL past the last. */
static const char *line_at(const char *s, int k, int *len) {
    for (; k > 0 && s; k--) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s || !*s) return NULL;
    const char *e = strchr(s, '\n');
    *len = e ? (int)(e - s) : (int)strlen(s);
    return s;
}

/* Keeps held text s[0..len) (malloc'd, taken) as what this rank shows (zoo_dist_write_held):
 * as it is, or each line prefixed by "rank R: " when `prefix`. On a failed malloc the text is
 * kept without prefixes. */
static void keep_shown(zoo_dist *d, char *s, size_t len, bool prefix) {
    free(d->shown);
    d->shown = NULL;
    d->shown_len = 0;
    if (!s || !len) {
        free(s);
        return;
    }
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += s[i] == '\n';
    char *out = prefix ? malloc(len + lines * 24 + 1) : NULL;
    if (!out) {
        d->shown = s;
        d->shown_len = len;
        return;
    }
    size_t n = 0;
    for (const char *p = s, *end = s + len; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t k = e ? (size_t)(e - p) : (size_t)(end - p);
        n += (size_t)sprintf(out + n, "rank %d: ", d->rank);
        memcpy(out + n, p, k);
        n += k;
        out[n++] = '\n';
        p += k + (e ? 1 : 0);
    }
    out[n] = '\0';
    free(s);
    d->shown = out;
    d->shown_len = n;
}

void zoo_dist_write_held(zoo_dist *d, FILE *f) {
    if (!d) return;
    if (d->real_stderr >= 0) { /* a hold never checked: ended here */
        size_t len;
        char *held = unhold(d, &len);
        keep_shown(d, held, len, d->rank != 0);
    }
    if (d->shown && f) {
        fwrite(d->shown, 1, d->shown_len, f);
        fflush(f);
    }
    free(d->shown);
    d->shown = NULL;
    d->shown_len = 0;
}

/* What each rank says at the start (gathered). */
typedef struct start_note {
    int32_t status, has_text;
    uint64_t text_hash, held_hash, held_len, text_len;
} start_note;

/* The first difference between rank 0's text a and rank r's b, as rank 0's message. */
static int disagree(int r, const char *a, const char *b) {
    for (int k = 0;; k++) {
        int la = 0, lb = 0;
        const char *x = line_at(a, k, &la), *y = line_at(b, k, &lb);
        if (!x && !y) break;
        if (x && y && la == lb && !memcmp(x, y, (size_t)la)) continue;
        return ag_error("the ranks disagree: rank %d runs %.*s, rank 0 %.*s; every rank must run "
                        "the same command on the same data (and with --resume the same "
                        "checkpoint)",
                        r, y ? lb : 9, y ? y : "(nothing)", x ? la : 9, x ? x : "(nothing)");
    }
    return ag_error("the ranks disagree: rank %d's run differs from rank 0's", r);
}

/* A rank that cannot take part in the start check (out of memory) ends the group: the others
 * would wait for it for ever. No caller sees a return then, so the message also goes to the
 * error handler (ag_set_error_handler; by default the program's stderr). A group of one
 * (zoo_dist_abort returns): 1, the message in ag_last_error(). */
static int out_of_memory_abort(zoo_dist *d) {
    ag_error("rank %d: dist: out of memory at the start check", d->rank);
    if (d->size > 1) ag_error_raise();
    zoo_dist_abort(d, 1);
    return 1;
}

int zoo_dist_check_start(zoo_dist *d, int status, const char *txt, bool *report) {
    *report = false;
    if (!d) return status;
    d->started = true;
    size_t held_len = 0;
    char *held = unhold(d, &held_len);
    if (!group(d)) {
        free(held);
        return status;
    }
    start_note mine = {.status = status,
                       .has_text = txt != NULL,
                       .text_hash = txt ? XXH3_64bits(txt, strlen(txt)) : 0,
                       .held_hash = XXH3_64bits(held ? held : "", held_len),
                       .held_len = held_len,
                       .text_len = txt ? strlen(txt) : 0};
    start_note *all = calloc((size_t)d->size, sizeof *all);
    if (!all) { /* cannot take part: the others would wait for ever */
        free(held);
        return out_of_memory_abort(d);
    }
    if (collective(d, ZOO_DIST_ALLGATHER, &mine, all, sizeof mine)) zoo_dist_abort(d, 1);
    /* what was held back, for zoo_dist_write_held: rank 0's, and another rank's where it says
     * something else */
    if (held_len &&
        (d->rank == 0 || all[0].held_hash != mine.held_hash || all[0].held_len != mine.held_len))
        keep_shown(d, held, held_len, d->rank != 0);
    else free(held);
    int rc = 0;
    size_t longest = 0;
    bool same = true;
    for (int r = 0; r < d->size; r++) {
        if (all[r].status > rc) rc = all[r].status;
        if (all[r].text_len > longest) longest = (size_t)all[r].text_len;
        same &= all[r].has_text == all[0].has_text && all[r].text_hash == all[0].text_hash &&
                all[r].text_len == all[0].text_len;
    }
    if (rc || same) {
        free(all);
        return rc;
    }
    /* texts differ: gather them (the same size on every rank, from the notes) */
    size_t w = longest + 1;
    char *mine_txt = calloc(w, 1), *texts = malloc(w * (size_t)d->size);
    if (!mine_txt || !texts) {
        free(mine_txt);
        free(texts);
        free(all);
        return out_of_memory_abort(d);
    }
    if (txt) memcpy(mine_txt, txt, mine.text_len);
    if (collective(d, ZOO_DIST_ALLGATHER, mine_txt, texts, w)) zoo_dist_abort(d, 1);
    int r = 1;
    while (r < d->size && all[r].text_hash == all[0].text_hash &&
           all[r].has_text == all[0].has_text)
        r++;
    if (d->rank == 0) {
        disagree(r, texts, texts + (size_t)r * w);
        *report = true;
    } else {
        ag_error("the ranks disagree (rank 0 says how)");
    }
    free(mine_txt);
    free(texts);
    free(all);
    return 2;
}

bool zoo_dist_started(const zoo_dist *d) { return d && d->started; }

/* ---- ending ---- */

void zoo_dist_abort(zoo_dist *d, int status) {
    if (!group(d) || d->size == 1) return;
    size_t len;
    free(unhold(d, &len)); /* stderr is the real one again for the launcher's last words */
    fflush(stdout);
    fflush(stderr);
    d->t->abort(d->ctx, status);
}

void zoo_dist_report(const zoo_dist *d, FILE *f, double seconds) {
    if (!d || !d->timing || d->rank || !f) return;
    double k = d->sums ? (double)d->sums : 1;
    fprintf(f,
            "dist: %d rank%s (%s), %d on this machine; %lld gradient sums of %zu values "
            "(%.2f MB): %.3f ms each (%.1f%% of %.2f s of training), after %.3f ms waiting for "
            "the slowest rank (%.1f%%)\n",
            d->size, d->size == 1 ? "" : "s", zoo_dist_name(d), d->local_size, (long long)d->sums,
            d->sum_n, (double)(d->sum_n * sizeof(ag_real)) / 1e6, 1e3 * d->sum_seconds / k,
            seconds > 0 ? 100 * d->sum_seconds / seconds : 0, seconds, 1e3 * d->wait_seconds / k,
            seconds > 0 ? 100 * d->wait_seconds / seconds : 0);
    fflush(f);
}
