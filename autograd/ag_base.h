/* ag_base.h -- what every library of tapegrad shares, precision-independent (the `ag_base`
 * library, linked by the float32 and float64 engines and by datasets alike): the one error
 * channel and the one random-number generator.
 * Included by autograd/ag.h; datasets includes it alone. */
#ifndef TG_AG_BASE_H
#define TG_AG_BASE_H

#include <stdarg.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors: one contract, one channel, for every library of tapegrad ------------------
 *
 * The contract (autograd, nn, optim, datasets and the zoo's libraries alike):
 *  - a function that can fail returns -1 (an int status; 0 is success) or NULL (a pointer it
 *    makes); a query that answers a question returns its answer (a bool "is there a next
 *    batch", a count, -1 for "not found" where its header says so), never an error;
 *  - on failure it leaves one line in the one store, read with ag_last_error(): what failed
 *    (op, file, line, field, flag), the values and shapes involved, and what was expected. A
 *    caller that must tell failures apart reads the message or asks a separate query; there
 *    are no status codes;
 *  - the libraries never print, never exit() and never abort() on anything a user can cause
 *    (input, files, options, memory). Text meant for people goes to a FILE* the program passes
 *    in (a report function) or comes back as a string; the one process-wide output is the
 *    error handler below, which a program replaces with ag_set_error_handler;
 *  - a broken internal invariant is a bug, not an error: TG_ASSERT (below) aborts with file:line
 *    in debug and sanitizer builds and costs nothing in a release build.
 *
 * The store is a thread-local buffer; successful calls do not clear it (like errno). Usage
 * errors of a forward pass (ag_report) are also passed to a process-wide handler. */

/* Receives every usage error message (one line, no newline). The default prints it to stderr
 * prefixed with "tapegrad: ". Pass NULL to restore the default. Process-wide. */
typedef void (*ag_error_fn)(const char *msg, void *user);
void ag_set_error_handler(ag_error_fn fn, void *user);
/* The last message recorded on this thread ("" if none). Owned by the library; valid until the
 * next failure on this thread. */
const char *ag_last_error(void);
/* Records a printf-style message as this thread's last error (the arguments may point into the
 * current message) and returns -1, so `return ag_error("...", ...);`. At most 1023 bytes. */
int ag_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int ag_verror(const char *fmt, va_list ap);
/* Passes the current message to the handler (what ag_report does after recording it). */
void ag_error_raise(void);
/* Puts context in front of the current message: "<context>: <message>". Returns -1. */
int ag_error_context(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* ---- Internal invariants ------------------------------------------------------------------
 *
 * TG_ASSERT(cond): a condition the library's own code guarantees (arena bookkeeping, a shape
 * already validated, an index already in range) -- never a check of user input, which fails
 * with -1 / NULL and a message. Defined as a check when TG_DEBUG_ASSERTS is defined (CMake
 * defines it in Debug builds and with -DTG_SANITIZE=ON): on failure it prints
 * "tapegrad: internal error: FILE:LINE: assertion failed: COND" to stderr and aborts -- the one
 * place the libraries abort. Otherwise it compiles to nothing (cond is not evaluated). */
#ifdef TG_DEBUG_ASSERTS
#define TG_ASSERT(cond) ((cond) ? (void)0 : ag_assert_fail(#cond, __FILE__, __LINE__))
#else
#define TG_ASSERT(cond) ((void)sizeof(!(cond)))
#endif
/* Prints the broken invariant and aborts (what TG_ASSERT calls; always in the library, so a
 * debug build of a program can link a release build of the libraries). */
void ag_assert_fail(const char *cond, const char *file, int line)
#if defined(__GNUC__)
    __attribute__((noreturn, cold))
#endif
    ;

/* ---- Random numbers (xoshiro256**; same seed, same stream on every machine) --------------- */

typedef struct ag_rng {
    uint64_t s[4];
} ag_rng;
void ag_rng_seed(ag_rng *r, uint64_t seed);
uint64_t ag_rng_next(ag_rng *r);
double ag_rng_uniform(ag_rng *r);             /* [0, 1), 53 random bits */
double ag_rng_normal(ag_rng *r);              /* N(0, 1), Box-Muller */
uint32_t ag_rng_below(ag_rng *r, uint32_t n); /* uniform integer in [0, n), n > 0, unbiased */

/* Streams, for shuffles and data splits that other tools must reproduce exactly:
 *   splitmix64(x): x += 0x9E3779B97F4A7C15; z = x; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
 *                  z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31   (all mod 2^64)
 *   seed_stream(seed, stream): y = stream; x = seed XOR splitmix64(y);
 *                  state s[0..3] = four successive splitmix64(x) outputs
 *   below64(n):    t = (2^64 - n) mod n; draw x until x >= t; return x mod n   (unbiased)
 *   permutation(n, seed, stream): p = 0..n-1; for i = n-1 down to 1: j = below64(i + 1);
 *                  swap p[i], p[j]   (Fisher-Yates)
 * (ag_rng_seed(r, seed) is the state of four successive splitmix64(seed) outputs.) */
void ag_rng_seed_stream(ag_rng *r, uint64_t seed, uint64_t stream);
uint64_t ag_rng_below64(ag_rng *r, uint64_t n); /* n >= 1 */
void ag_rng_permutation(int64_t *p, int64_t n, uint64_t seed, uint64_t stream);

#ifdef __cplusplus
}
#endif

#endif
