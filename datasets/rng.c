/* datasets/rng.c -- splitmix64-seeded xoshiro256** (see rng.h for the exact definition). */
#include "datasets/rng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void ds_rng_seed(ds_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t y = stream;
    uint64_t x = seed ^ splitmix64(&y);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

uint64_t ds_rng_next(ds_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t ds_rng_below(ds_rng *r, uint64_t n) {
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n: drawing below it would bias the result */
    for (;;) {
        uint64_t x = ds_rng_next(r);
        if (x >= threshold) return x % n;
    }
}

void ds_rng_permutation(int64_t *p, int64_t n, uint64_t seed, uint64_t stream) {
    ds_rng r;
    ds_rng_seed(&r, seed, stream);
    for (int64_t i = 0; i < n; i++) p[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)ds_rng_below(&r, (uint64_t)i + 1);
        int64_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}
