/* zoo/app/dist.h -- data-parallel training over several processes (docs/distributed.md).
 *
 * A zoo_dist is the group of processes ("ranks") one training run is spread over: its rank and
 * size, and the few collective operations the trainer and the programs need. Every rank holds
 * the whole model and the whole data, takes its part of every global batch, and the gradients
 * are summed over the ranks before clipping and the update, which every rank then applies to
 * the same bits (zoo_trainer_set_dist, trainer.h).
 *
 * The libraries hold no MPI. The transport is a table of functions the program passes to
 * zoo_dist_open; the zoo's programs pass Open MPI's (zoo_dist_mpi(), zoo/app/dist_mpi.h, built
 * into the programs only, when CMake finds MPI: -DTG_MPI). Without a transport, or when the
 * program was not started by an MPI launcher (mpirun), the group is this process alone: rank 0
 * of 1, and every collective returns at once with its buffer unchanged. Every function accepts
 * d == NULL as that group of one.
 *
 * Collectives (every function below but rank, size, local_size, set_timeout and abort) must be
 * called by every rank of the group, in the same order, with the same sizes: MPI's rule. A rank
 * that fails between two collectives must not leave the others waiting in the next one: it ends
 * the whole group with zoo_dist_abort. The transport reports its own failures (a lost rank, a
 * broken link) by ending the job (MPI's default error handler), so collectives return -1 only
 * for errors found before any communication.
 *
 * A rank that neither fails nor dies but stops (SIGSTOP, a hung machine) is caught by a
 * deadline (zoo_dist_set_timeout; train's --dist-timeout): a collective that waits longer ends
 * the job on every rank, with one message naming the ranks that did not answer. Waiting does not
 * burn a core: over a transport with start and test (Open MPI's has them), a rank waiting for
 * the others sleeps between polls (after 200 us: an eighth of the time waited so far, 50 us to
 * 10 ms), and spins only once every rank has arrived and the data moves (which needs its polls),
 * for up to 4 times the run's longest transfer so far plus 10 ms, at most 1 s; beyond that (a
 * rank stopped during the transfer) it sleeps again. The deadline counts the time this rank was
 * awake: a rank resumed after a stop of its own (SIGCONT) blames no one for the time it slept.
 *
 * Like every library, this one never prints: what a hold kept back is written by
 * zoo_dist_write_held and the timing line by zoo_dist_report, each to the FILE* the program
 * passes; failures are -1 / NULL with ag_last_error(). (The exceptions are a rank that must end
 * the group itself, out of memory in the start check or at a collective's deadline: no caller
 * sees a return, so its message goes to the error handler, ag_set_error_handler.)
 */
#ifndef TG_ZOO_DIST_H
#define TG_ZOO_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../autograd/ag.h"
#include "trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the transport: what a program provides ----
 * Every function returns 0 or -1 (after ag_error). ctx is what init set. */

/* The collectives, for a transport's start (the arguments of the blocking functions). */
typedef enum zoo_dist_op {
    ZOO_DIST_SUM_F32,  /* buf: n floats, summed in place */
    ZOO_DIST_SUM_F64,  /* buf: n doubles, summed in place */
    ZOO_DIST_MAX_I32,  /* buf: n int32_t, their maximum in place */
    ZOO_DIST_BCAST,    /* buf: n bytes, rank 0's to every rank */
    ZOO_DIST_ALLGATHER /* mine: n bytes; buf: size x n bytes, every rank's in rank order */
} zoo_dist_op;

/* Where a started collective is (a transport's test). */
typedef enum zoo_dist_state {
    ZOO_DIST_WAITING, /* some rank has not started it yet (or the transport cannot tell) */
    ZOO_DIST_MOVING,  /* every rank has started it: the data is under way */
    ZOO_DIST_DONE     /* complete: the result is in buf, the handle is freed */
} zoo_dist_state;

typedef struct zoo_dist_transport {
    const char *name; /* "Open MPI 4.1.4" */
    /* Joins the group when this process was started as one of several (by a launcher): sets
     * *rank, *size, *local_size (ranks on this machine) and *ctx, and returns 1. Returns 0,
     * touching nothing, when the process runs alone (no launcher); -1 on an error. */
    int (*init)(void **ctx, int *rank, int *size, int *local_size);
    /* Element-wise sums over the ranks, in place; every rank receives the same bits. */
    int (*sum_f32)(void *ctx, float *buf, size_t n);
    int (*sum_f64)(void *ctx, double *buf, size_t n);
    /* Element-wise maximum over the ranks, in place. */
    int (*max_i32)(void *ctx, int32_t *buf, size_t n);
    /* Rank 0's `bytes` bytes of buf into every rank's buf. */
    int (*bcast)(void *ctx, void *buf, size_t bytes);
    /* Every rank's `bytes` bytes of mine, in rank order, into all (size x bytes). */
    int (*allgather)(void *ctx, const void *mine, void *all, size_t bytes);
    /* Ends every rank of the group (the launcher exits with status). Does not return. */
    void (*abort)(void *ctx, int status);
    /* Leaves the group (a collective: every rank calls it last). */
    void (*finalize)(void *ctx);

    /* ---- optional: collectives that can be waited for with a deadline ----
     * Without start and test (NULL), the blocking functions above run and a collective waits
     * for ever (zoo_dist_set_timeout has no effect). */
    /* Starts collective op on the arguments of its blocking function (zoo_dist_op) and returns
     * without waiting: *req is its handle, owned by the transport until test says DONE. Every
     * rank starts the same collectives in the same order. 0 or -1. */
    int (*start)(void *ctx, zoo_dist_op op, const void *mine, void *buf, size_t n, void **req);
    /* Advances req and sets *state (zoo_dist_state); DONE frees req. 0 or -1. */
    int (*test)(void *ctx, void *req, zoo_dist_state *state);
    /* Optional (NULL: the ranks cannot tell who is late). note tells every other rank, without
     * waiting, that this rank waits in collective number seq (counted from 0, in the order
     * every rank calls them); heard sets heard[r] to the largest seq rank r has noted so far
     * (-1: none) for every rank r, its own entry left as it is. 0 or -1. */
    int (*note)(void *ctx, int64_t seq);
    int (*heard)(void *ctx, int64_t *heard);
} zoo_dist_transport;

typedef struct zoo_dist zoo_dist;

/* Joins the group t says this process belongs to (t NULL: none, this process alone). Returns
 * the group, owned by the caller (zoo_dist_close), or NULL with ag_last_error(). The
 * environment variable TG_DIST_CHECK=1 makes every sum compare the hash of its result across
 * the ranks and fail when they differ (a check of the transport; costs a hash and an
 * all-gather per sum); TG_DIST_TIMING=1 makes zoo_dist_report print. */
zoo_dist *zoo_dist_open(const zoo_dist_transport *t);
/* Leaves the group (a collective) and frees d. What a hold kept back and was not written with
 * zoo_dist_write_held is dropped. NULL: nothing. */
void zoo_dist_close(zoo_dist *d);

/* The deadline of every collective from now on: one that has waited `seconds` for the other
 * ranks ends the job on every rank (zoo_dist_abort, exit status 1), after one message, passed to
 * the error handler (ag_set_error_handler; no caller sees a return) by the lowest rank that
 * waited: "rank 1 did not answer within 300 s (--dist-timeout): ending the job", naming every
 * rank that did not say it was waiting too (or, over a transport without note, "a rank did not
 * answer ..." and the ranks that did; when every rank said it waited, a rank stopped or cut off
 * during the transfer: "a collective did not complete ..."). The other ranks that waited stay
 * silent, and end the job themselves 5 s later if it still runs. The deadline must exceed the
 * longest time one rank works while the others wait for it (rank 0 saving a checkpoint). 0 (the
 * default): wait for ever (still sleeping while waiting). Over a transport without start and
 * test: no effect. Not a collective (each rank may have its own). Returns 0, or -1 for a
 * negative or not-a-number `seconds`. d NULL: 0. */
int zoo_dist_set_timeout(zoo_dist *d, double seconds);

int zoo_dist_rank(const zoo_dist *d);         /* 0 .. size-1; 0 for NULL */
int zoo_dist_size(const zoo_dist *d);         /* ranks; 1 for NULL */
int zoo_dist_local_size(const zoo_dist *d);   /* ranks on this machine (this one included) */
const char *zoo_dist_name(const zoo_dist *d); /* the transport's name, "none" alone */

/* ---- collectives ---- */

/* buf[0..n) = its sum over the ranks, element-wise, the same bits on every rank (ag_real: float
 * in the float32 library, double in its float64 twin). With 2 ranks the sum is a + b whichever
 * rank computes it, so it has the bits of one process adding the two in either order. Timed
 * for zoo_dist_report. Returns 0 or -1. */
int zoo_dist_sum(zoo_dist *d, ag_real *buf, size_t n);
/* The same for doubles (a step's loss), untimed. */
int zoo_dist_sum_f64(zoo_dist *d, double *buf, size_t n);
/* flags[0..n) = their maximum over the ranks (any rank's 1 makes every rank's 1). 0 or -1. */
int zoo_dist_max(zoo_dist *d, int32_t *flags, size_t n);
/* Rank 0's bytes of buf into every rank's buf. 0 or -1. */
int zoo_dist_share(zoo_dist *d, void *buf, size_t bytes);

/* "Rank 0 computes, everyone gets the decision", in one call: fn(ctx, out) runs on rank 0 only
 * (e.g. a validation pass, or whether to stop early), then its status and *out reach every
 * rank. Returns fn's status on every rank: 0 with *out set to rank 0's value, or -1 (rank 0's
 * ag_last_error() says why; the other ranks' says that rank 0 failed), so that every rank
 * takes the same branch and none is left waiting. A flag is a double 0 or 1. */
int zoo_dist_on_root(zoo_dist *d, int (*fn)(void *ctx, double *out), void *ctx, double *out);

/* ---- the start of a run ---- */

/* From now until zoo_dist_check_start, ranks other than 0 keep back what they write to stderr
 * (in a temporary file), and their stdout goes nowhere for good: rank 0 alone prints. (Rank 0's
 * stderr is held too, and shown by zoo_dist_write_held after the check.) A group of one:
 * nothing. Returns 0 or -1. */
int zoo_dist_hold_output(zoo_dist *d);

/* The text of a run, as every rank of a group must share it: one "name value" line per item the
 * results depend on (the model's config, the recipe, the data options, the learning rate,
 * clipping, the global shard count; an XXH3 hash of the data's arrays (the pairs, the split,
 * the vocabulary sizes) and of the model's values; the RNG and the step, epoch and batch
 * counts) followed by the caller's `extra` lines (may be NULL). Data paths, thread counts and
 * output options are not in it: they may differ between machines. Returns a malloc'd string
 * (the caller frees it), or NULL with ag_last_error(). */
char *zoo_dist_run_text(const zoo_trainer *tr, const ds_fra *data, const char *extra);

/* Every rank calls it once, with its status (0: ready to train; else the exit status of a
 * failure it reported on stderr) and its run's text (NULL after a failure). Ends the hold of
 * zoo_dist_hold_output and keeps what this rank must show for zoo_dist_write_held: on rank 0
 * what it held back; on another rank what it held back (each line prefixed "rank R: ") only
 * when that differs from rank 0's. Prints nothing. Returns 0 when every
 * rank is ready and every text equals rank 0's; else the status for every rank to exit with:
 * the largest failure status, or 2 when the texts differ: then rank 0's ag_last_error() names
 * the first line that differs and the rank ("the ranks disagree: rank 1 runs --seed 1, rank 0
 * --seed 0 ..."), *report is true on rank 0 only (it prints that one message), and every rank
 * has ag_last_error() set. A group of one: status. */
int zoo_dist_check_start(zoo_dist *d, int status, const char *text, bool *report);
/* Whether zoo_dist_check_start has run (a program calls it once on every path). */
bool zoo_dist_started(const zoo_dist *d);
/* Writes to f what the hold kept back for this rank to show (see zoo_dist_check_start; the
 * program calls it with stderr right after the check), then forgets it. A hold still running
 * (never checked) is ended here: rank 0's text as it is, another rank's prefixed "rank R: ".
 * Nothing kept, d NULL or f NULL: writes nothing (f NULL drops the text). Not a collective. */
void zoo_dist_write_held(zoo_dist *d, FILE *f);

/* ---- ending ---- */

/* A group of more than one: ends a hold still running (its text is dropped: write it first with
 * zoo_dist_write_held), flushes stdout and stderr and ends every rank, through the launcher,
 * which exits with status; does not return. Alone: returns (the caller exits as usual). */
void zoo_dist_abort(zoo_dist *d, int status);

/* With TG_DIST_TIMING=1 in the environment, on rank 0, a line to f: ranks, the sums of
 * zoo_dist_sum done (how many, of how many elements), their mean time and their share of
 * `seconds` (the training time), and the mean time the ranks waited for the slowest one before
 * each sum (TG_DIST_TIMING makes the ranks meet before each sum, so that its time is the
 * transfer's alone). Otherwise nothing. */
void zoo_dist_report(const zoo_dist *d, FILE *f, double seconds);

#ifdef __cplusplus
}
#endif

#endif
