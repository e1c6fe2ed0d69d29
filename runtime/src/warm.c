/* warm.c - leaves a body's data regions as a long run of the body would leave them, before the
 * thread serves its first request.
 *
 * Why: a large region comes back slowly. memcached's request workers touch their 2 MiB region of
 * the 32 MiB class about four times a call, so a thread returns to one of its lines once every
 * 8,400 of its calls, and a simulated window of 21,000 requests over four threads never does.
 * Each first access of the window then found its line as the buffer set-up left it (every line
 * written once, in address order, tens of MiB before), and missed the last-level cache where the
 * original, which had been serving long before the window, reuses its data within it: the untuned
 * clone's LLC missed on 0.79 of its L2 misses against the original's 0.18.
 *
 * What: every region of the generated table (the body's classes, config.c) gets each of its lines
 * read once, at an age spread evenly over the region's period (its lines over its accesses per
 * call), all regions of the thread interleaved on one clock of its calls, so that the region that
 * comes back most slowly is read first and the small hot ones last, as after a long run.
 * Why in a pseudo-random order within a region: the body comes back to a line about once a period,
 * but in an order its code path sets (every window moves with one walk counter, at its own scale),
 * which the runtime does not know; an order of its own would be wrong at every line where it
 * differed.
 * Reads only: the body's data stays as the runtime handed it over (zeroed). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ditto_internal.h"

/* Steps of the clock: enough that a step moves few lines of any region; each costs one pass over
 * the streams. */
#define WARM_STEPS 4096u
#define WARM_MAX_STREAMS 256u
#define LINE 64u

/* The clusters (by index, up to 64) whose shared regions some thread of this process has warmed. */
static _Atomic uint64_t shared_claimed;

/* Line k of a region of `lines` lines in the warm order. */
static uint64_t warm_line(uint64_t k, uint64_t lines)
{
    /* A multiplicative permutation where the region is a power of two of lines (the generator's
     * regions are), address order otherwise. */
    if (lines > 0 && (lines & (lines - 1)) == 0)
        return (k * UINT64_C(0x9E3779B97F4A7C15)) & (lines - 1);
    return k;
}

void ditto_warm_schedule(const struct ditto_warm_stream *s, uint32_t n,
                         void (*visit)(void *arg, uint32_t stream, uint64_t line), void *arg)
{
    /* Stream i reads its lines over the last lines_i / rate_i calls of a clock that ends when the
     * slowest stream's period does. */
    double horizon = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        if (s[i].lines > 0 && s[i].rate > 0.0 && (double)s[i].lines / s[i].rate > horizon)
            horizon = (double)s[i].lines / s[i].rate;
    }
    uint64_t done[WARM_MAX_STREAMS] = {0};
    if (n > WARM_MAX_STREAMS)
        n = WARM_MAX_STREAMS;
    for (uint32_t step = 1; step <= WARM_STEPS; step++) {
        double now = horizon * (double)step / (double)WARM_STEPS;
        for (uint32_t i = 0; i < n; i++) {
            if (s[i].lines == 0 || !(s[i].rate > 0.0))
                continue;
            double start = horizon - (double)s[i].lines / s[i].rate;
            if (now <= start && step < WARM_STEPS)
                continue;
            double due_f = (now - start) * s[i].rate;
            uint64_t due = step == WARM_STEPS || due_f >= (double)s[i].lines ? s[i].lines : (uint64_t)due_f;
            for (; done[i] < due; done[i]++)
                visit(arg, i, warm_line(done[i], s[i].lines));
        }
    }
}

static void add_stream(struct ditto_warm_stream *s, uint32_t *n, const uint8_t *buffer,
                       size_t buffer_bytes, const struct ditto_warm_region *r, double rate)
{
    if (buffer == NULL || *n >= WARM_MAX_STREAMS || !(rate > 0.0))
        return;
    if (r->offset > buffer_bytes || r->bytes > buffer_bytes - r->offset)
        return;
    uint64_t lines = r->bytes / LINE;
    if (lines < 2)
        return;
    s[*n] = (struct ditto_warm_stream){.base = buffer + r->offset, .lines = lines, .rate = rate};
    (*n)++;
}

static void read_line(void *arg, uint32_t stream, uint64_t line)
{
    const struct ditto_warm_stream *s = arg;
    (void)s[stream].base[line * LINE];
}

void ditto_warm_regions(const struct ditto_rt *rt, const struct ditto_cluster *cluster, uint8_t *priv)
{
    if (cluster == NULL || cluster->warm == NULL || cluster->n_warm == 0)
        return;
    const struct ditto_config *cfg = rt->cfg;
    /* One thread per cluster warms the shared regions: the first to get here. */
    int with_shared = 0;
    ptrdiff_t index = cluster - cfg->clusters;
    if (rt->shared != NULL && index >= 0 && index < 64) {
        uint64_t bit = UINT64_C(1) << index;
        with_shared = (atomic_fetch_or(&shared_claimed, bit) & bit) == 0;
    }
    struct ditto_warm_stream s[WARM_MAX_STREAMS];
    uint32_t n = 0;
    double threads = cluster->threads > 0 ? (double)cluster->threads : 1.0;
    for (uint32_t i = 0; i < cluster->n_warm; i++) {
        const struct ditto_warm_region *r = &cluster->warm[i];
        add_stream(s, &n, priv, cfg->priv_bytes, r, r->private_per_call);
        if (with_shared)
            add_stream(s, &n, rt->shared, cfg->shared_bytes, r, r->shared_per_call * threads);
    }
    ditto_warm_schedule(s, n, read_line, s);
}
