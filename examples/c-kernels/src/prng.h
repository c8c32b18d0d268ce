/* A seeded generator for the programs' inputs (splitmix64): the same numbers on every build and
 * host, so every arm computes on the same data. Named without the ck_ prefix on purpose: only
 * the library's kernels may match the compile stage's ck_* glob. */
#ifndef PRNG_H
#define PRNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t state;
} prng;

static inline uint64_t prng_next(prng *g)
{
    uint64_t z = (g->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi), from the top 24 bits: exactly representable as a float */
static inline float prng_uniform(prng *g, float lo, float hi)
{
    return lo + (hi - lo) * ((float)(prng_next(g) >> 40) * (1.0f / 16777216.0f));
}

static inline void prng_fill(prng *g, float *v, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = prng_uniform(g, lo, hi);
    }
}

#endif
