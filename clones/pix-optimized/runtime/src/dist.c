#define _GNU_SOURCE
/* dist.c - deterministic sampling from struct ditto_dist.
 *
 * splitmix64 is used because it is tiny, has no bad seeds (a thread seeded with 0 is fine) and
 * passes BigCrush; one state per thread keeps runs reproducible for a given seed and thread
 * number without any locking. */
#include <stddef.h>

#include "ditto_internal.h"

uint64_t ditto_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t ditto_rng_seed(uint64_t config_seed, uint64_t stream)
{
    /* Mix both so that streams of neighbouring seeds do not overlap. */
    uint64_t s = config_seed ^ (stream * 0xd1b54a32d192ed03ULL);
    (void)ditto_splitmix64(&s);
    return s;
}

uint64_t ditto_rng_below(uint64_t *state, uint64_t n)
{
    if (n == 0)
        return 0;
    /* Multiply-high maps 64 random bits onto [0, n) with a bias below n / 2^64: negligible for
     * any count a profile holds, and it avoids a division. */
    return (uint64_t)(((unsigned __int128)ditto_splitmix64(state) * n) >> 64);
}

uint64_t ditto_key_hash(const uint8_t *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ key[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t ditto_dist_sample(const struct ditto_dist *d, uint64_t *state)
{
    return ditto_dist_sample_in(d, state, 0.0, 1.0);
}

uint64_t ditto_dist_sample_in(const struct ditto_dist *d, uint64_t *state, double lo_q,
                              double hi_q)
{
    if (d->bins == 0 || d->cumulative == NULL)
        return 0;
    uint64_t total = d->cumulative[d->bins - 1];
    if (total == 0)
        return 0;
    uint64_t r;
    if (lo_q <= 0.0 && hi_q >= 1.0) {
        r = ditto_rng_below(state, total);
    } else {
        /* Counts are far below 2^53, so the products are exact enough; the clamp keeps r a valid
         * rank whatever the rounding. */
        uint64_t first = (uint64_t)(lo_q * (double)total);
        uint64_t last = (uint64_t)(hi_q * (double)total);
        if (first >= total)
            first = total - 1;
        r = first + ditto_rng_below(state, last > first ? last - first : 1);
        if (r >= total)
            r = total - 1;
    }
    /* First bin whose cumulative count exceeds r. */
    uint32_t lo = 0, hi = d->bins - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->cumulative[mid] > r)
            hi = mid;
        else
            lo = mid + 1;
    }
    uint64_t a = d->lo[lo], b = d->hi[lo];
    if (b <= a + 1)
        return a;
    return a + ditto_rng_below(state, b - a);
}

uint64_t ditto_dist_max(const struct ditto_dist *d)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < d->bins; i++) {
        uint64_t count = d->cumulative[i] - (i > 0 ? d->cumulative[i - 1] : 0);
        if (count == 0)
            continue;
        uint64_t v = d->hi[i] > d->lo[i] + 1 ? d->hi[i] - 1 : d->lo[i];
        if (v > m)
            m = v;
    }
    return m;
}

const char *ditto_dist_check(const struct ditto_dist *d)
{
    if (d->bins == 0)
        return NULL;
    if (d->lo == NULL || d->hi == NULL || d->cumulative == NULL)
        return "bins > 0 but lo, hi or cumulative is NULL";
    for (uint32_t i = 0; i < d->bins; i++) {
        if (d->hi[i] < d->lo[i])
            return "a bin has hi < lo";
        if (i > 0 && d->cumulative[i] < d->cumulative[i - 1])
            return "cumulative counts decrease";
    }
    return NULL;
}
