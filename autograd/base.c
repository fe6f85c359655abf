/* base.c -- the error channel, the internal-invariant check and the random-number generator
 * every library shares. */
#include "autograd/ag_base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

static void default_handler(const char *msg, void *user) {
    (void)user;
    fprintf(stderr, "tapegrad: %s\n", msg);
}

static ag_error_fn handler = default_handler;
static void *handler_user;
static _Thread_local char last_error[1024];

void ag_set_error_handler(ag_error_fn fn, void *user) {
    handler = fn ? fn : default_handler;
    handler_user = fn ? user : NULL;
}

const char *ag_last_error(void) { return last_error; }

void ag_error_raise(void) { handler(last_error, handler_user); }

int ag_verror(const char *fmt, va_list ap) {
    char msg[sizeof last_error];
    vsnprintf(msg, sizeof msg, fmt, ap); /* fmt's arguments may point into last_error */
    memcpy(last_error, msg, sizeof msg);
    return -1;
}

int ag_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ag_verror(fmt, ap);
    va_end(ap);
    return -1;
}

int ag_error_context(const char *fmt, ...) {
    char ctx[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    return ag_error("%s: %s", ctx, last_error[0] ? last_error : "unknown error");
}

void ag_assert_fail(const char *cond, const char *file, int line) {
    fflush(stdout);
    fprintf(stderr, "tapegrad: internal error: %s:%d: assertion failed: %s\n", file, line, cond);
    abort();
}

/* ---- RNG: xoshiro256** seeded through splitmix64 ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ag_rng_seed(ag_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ag_rng_next(ag_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double ag_rng_uniform(ag_rng *r) { return (double)(ag_rng_next(r) >> 11) * 0x1.0p-53; }

double ag_rng_normal(ag_rng *r) {
    double u1 = 1.0 - ag_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = ag_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint32_t ag_rng_below(ag_rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (ag_rng_next(r) >> 32) * n;
    if ((uint32_t)m < n) {
        uint32_t floor = (uint32_t)(-n) % n;
        while ((uint32_t)m < floor) m = (ag_rng_next(r) >> 32) * n;
    }
    return (uint32_t)(m >> 32);
}


void ag_rng_seed_stream(ag_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t y = stream;
    uint64_t x = seed ^ splitmix64(&y);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t ag_rng_below64(ag_rng *r, uint64_t n) {
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n: drawing below it would bias the result */
    for (;;) {
        uint64_t x = ag_rng_next(r);
        if (x >= threshold) return x % n;
    }
}

void ag_rng_permutation(int64_t *p, int64_t n, uint64_t seed, uint64_t stream) {
    ag_rng r;
    ag_rng_seed_stream(&r, seed, stream);
    for (int64_t i = 0; i < n; i++) p[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)ag_rng_below64(&r, (uint64_t)i + 1);
        int64_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}
