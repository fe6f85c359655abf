/* test_dist_deadline.c -- the deadline of zoo_dist's collectives (zoo_dist_set_timeout,
 * zoo/app/dist.h; train's --dist-timeout), over the polled transport of threads
 * (tests/zoo/dist_threads.h), which starts and tests its collectives as Open MPI's does: a rank
 * that never comes ends the job with one message, from the lowest rank that waited, naming the
 * ranks that did not say they waited (or, without notes, those that did); a late rank within
 * the deadline changes nothing (the same bits). The job's end (abort) jumps back to each rank's
 * function. No assertion is on time: the deadlines are short, and the notes, sent after a
 * quarter of the deadline, have the other three quarters to arrive. The same over Open MPI with
 * a stopped process: ctest e2e_mpi. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>

#include "tests/tg_test.h"
#include "tests/zoo/dist_threads.h"
#include "zoo/app/dist.h"

/* ---- the deadline (zoo_dist_set_timeout) ---- */

/* A group where rank `stopped` never comes (it waits until the job ends) and rank `late` comes
 * after rank 0 has polled 50 times; the others sum at once. */
typedef struct stop_case {
    const zoo_dist_transport *t;
    int size, stopped, late;
    double timeout;
    int rc[MAX_RANKS], end[MAX_RANKS]; /* end: 0 returned, 1 ended the job, 2 ended by another */
    float f[MAX_RANKS][2];
} stop_case;

static void stop_rank(int r, void *arg) {
    stop_case *c = arg;
    zoo_dist *d = zoo_dist_open(c->t);
    if (!d) return;
    zoo_dist_set_timeout(d, c->timeout);
    jmp_buf jump;
    rank_jump = &jump;
    int end = setjmp(jump);
    if (!end && r == c->stopped) {
        nb_wait_for(0);
    } else if (!end) {
        if (r == c->late) nb_wait_for(50);
        float f[2] = {0.1f * (float)(r + 1), 1e8f};
        c->rc[r] = zoo_dist_sum(d, f, 2);
        memcpy(c->f[r], f, sizeof f);
    }
    c->end[r] = end;
    free(my_req.out); /* a collective the job's end left under way */
    my_req.out = NULL;
    zoo_dist_close(d);
}

/* Runs the case with the error handler captured; returns the number of messages. */
static int run_stop_case(stop_case *c) {
    nb_reset();
    tg_n_captured = 0;
    tg_captured[0] = '\0';
    ag_set_error_handler(tg_capture, NULL);
    run_group(c->size, stop_rank, c);
    ag_set_error_handler(NULL, NULL);
    return tg_n_captured;
}

static void test_deadline_names_the_stopped_rank(void) {
    stop_case c = {.t = &polled, .size = 2, .stopped = 1, .late = -1, .timeout = 0.25};
    CU_ASSERT_EQUAL(run_stop_case(&c), 1); /* one message */
    TG_CAPTURED_HAS("rank 1 did not answer within 0.25 s (--dist-timeout): ending the job");
    CU_ASSERT_EQUAL(nb.aborted, 1); /* rank 0 ended the job, status 1 */
    CU_ASSERT_EQUAL(nb.status, 1);
    CU_ASSERT_EQUAL(c.end[0], 1);
}

/* 3 ranks, rank 2 stopped: ranks 0 and 1 wait; rank 0, the lowest, names rank 2 alone (rank 1
 * said it waited) and rank 1 stays silent. Rank 0 stopped: rank 1 names it. (The deadline is
 * long enough for the notes, sent after a quarter of it, to arrive on a loaded machine.) */
static void test_deadline_one_message_of_the_lowest_waiting_rank(void) {
    stop_case c = {.t = &polled, .size = 3, .stopped = 2, .late = -1, .timeout = 2};
    CU_ASSERT_EQUAL(run_stop_case(&c), 1);
    TG_CAPTURED_HAS("rank 2 did not answer within 2 s (--dist-timeout): ending the job");
    CU_ASSERT_EQUAL(nb.aborted, 1);
    CU_ASSERT_EQUAL(c.end[0], 1);
    CU_ASSERT_EQUAL(c.end[1], 2); /* ended by rank 0's abort, without a word */
    stop_case c0 = {.t = &polled, .size = 3, .stopped = 0, .late = -1, .timeout = 2};
    CU_ASSERT_EQUAL(run_stop_case(&c0), 1);
    TG_CAPTURED_HAS("rank 0 did not answer within 2 s (--dist-timeout): ending the job");
    CU_ASSERT_EQUAL(nb.aborted, 2); /* by rank 1 */
    CU_ASSERT_EQUAL(c0.end[2], 2);
}

/* A transport without notes: the message names the ranks that did answer (this one). */
static void test_deadline_without_notes(void) {
    stop_case c = {.t = &polled_mute, .size = 2, .stopped = 0, .late = -1, .timeout = 0.25};
    CU_ASSERT_EQUAL(run_stop_case(&c), 1);
    TG_CAPTURED_HAS("a rank did not answer within 0.25 s (--dist-timeout) (rank 1 did): ending "
                    "the job");
    CU_ASSERT_EQUAL(nb.aborted, 2);
}

/* A rank that comes late, while rank 0 polls (no deadline, or one far off): the sums of the
 * blocking transport, to the bit, and no end. */
static void test_late_rank_within_the_deadline(void) {
    for (int k = 0; k < 2; k++) {
        stop_case c = {.t = &polled, .size = 3, .stopped = -1, .late = 2, .timeout = k ? 600 : 0};
        CU_ASSERT_EQUAL(run_stop_case(&c), 0);
        CU_ASSERT_EQUAL(nb.aborted, 0);
        CU_ASSERT(nb.polls[0] >= 50);
        for (int r = 0; r < 3; r++) {
            CU_ASSERT_EQUAL(c.rc[r], 0);
            CU_ASSERT_EQUAL(c.end[r], 0);
            CU_ASSERT_EQUAL(c.f[r][0], (0.1f + 0.2f) + 0.3f);
            CU_ASSERT_EQUAL(c.f[r][1], (1e8f + 1e8f) + 1e8f);
        }
    }
}

static void test_set_timeout(void) {
    zoo_dist *d = zoo_dist_open(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    TG_OK(zoo_dist_set_timeout(d, 0));
    TG_OK(zoo_dist_set_timeout(d, 300));
    TG_EXPECT_ERROR(zoo_dist_set_timeout(d, -1), "dist: a deadline of -1 s");
    TG_EXPECT_ERROR(zoo_dist_set_timeout(d, NAN), "a deadline of");
    TG_OK(zoo_dist_set_timeout(NULL, 5));
    ag_real x[1] = {2}; /* alone: no wait at all */
    TG_OK(zoo_dist_sum(d, x, 1));
    zoo_dist_close(d);
}

static CU_TestInfo tests[] = {
    {"one message names the stopped rank", test_deadline_names_the_stopped_rank},
    {"the lowest waiting rank speaks, once", test_deadline_one_message_of_the_lowest_waiting_rank},
    {"without notes: names who answered", test_deadline_without_notes},
    {"a late rank within the deadline: the same bits", test_late_rank_within_the_deadline},
    {"zoo_dist_set_timeout: 0 or more", test_set_timeout},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"dist deadline", NULL, NULL, NULL, NULL, tests},
                                CU_SUITE_INFO_NULL};

int main(void) { return tg_test_run(suites); }
