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

/* ---- Errors: one channel for every library of tapegrad ---------------------------------
 *
 * Every failing function of autograd, nn, optim, datasets and the zoo leaves one line in a
 * thread-local buffer, read with ag_last_error(): what failed (op, file, line, field, flag) and
 * what was expected. Successful calls do not clear it (like errno). Usage errors of a forward
 * pass are also passed to a process-wide handler (ag_report). */

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
