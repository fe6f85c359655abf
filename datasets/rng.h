/* datasets/rng.h -- the library's own seeded RNG (shuffles and the train/valid/test split).
 *
 * Algorithm (documented so other tools can reproduce a shuffle exactly; the Python script
 * tests/datasets/ref_numbers.py does):
 *   splitmix64(x): x += 0x9E3779B97F4A7C15; z = x; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
 *                  z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31   (all mod 2^64)
 *   seeding (seed, stream): y = stream; x = seed XOR splitmix64(y);
 *                  state s[0..3] = four successive splitmix64(x) outputs
 *   generator:     xoshiro256** (Blackman & Vigna 2018)
 *   below(n):      unbiased integer in [0, n): t = (2^64 - n) mod n; draw x until x >= t;
 *                  return x mod n
 *   permutation(n, seed, stream): p = 0..n-1; for i = n-1 down to 1: j = below(i + 1);
 *                  swap p[i], p[j]   (Fisher-Yates)
 * Streams: epoch e of a batch iterator uses stream e; the split uses DS_RNG_SPLIT_STREAM. */
#ifndef DS_RNG_H
#define DS_RNG_H

#include <stddef.h>
#include <stdint.h>

#define DS_RNG_SPLIT_STREAM 0x53504C4954ULL /* "SPLIT" */

typedef struct {
    uint64_t s[4];
} ds_rng;

/* Seeds `r` from (seed, stream); every pair gives an independent-looking sequence. */
void ds_rng_seed(ds_rng *r, uint64_t seed, uint64_t stream);
/* Next 64 random bits. */
uint64_t ds_rng_next(ds_rng *r);
/* Uniform integer in [0, n); n must be >= 1. */
uint64_t ds_rng_below(ds_rng *r, uint64_t n);
/* Writes the permutation(n, seed, stream) defined above into p[0..n). */
void ds_rng_permutation(int64_t *p, int64_t n, uint64_t seed, uint64_t stream);

#endif
