/* buffer_test.c - the buffers' set-up order (main.c): a first-touch stream's region is written
 * first, then the lines below it, then those above; the three parts cover the buffer once, whatever
 * the region says (none, past the end, longer than the buffer, not on a line), and a buffer set up
 * that way comes back zeroed over its whole length. Exit status 0 when every check passes. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ditto_internal.h"
#include "check.h"

/* The parts cover [0, n) in order-independent pieces, each inside the buffer, without overlap. */
static void check_cover(const char *what, size_t n, const struct ditto_range r[3])
{
    size_t total = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(r[i].lo <= r[i].hi && r[i].hi <= n, "%s: part %d [%zu, %zu) of a %zu-byte buffer", what,
              i, r[i].lo, r[i].hi, n);
        total += r[i].hi - r[i].lo;
    }
    CHECK(total == n, "%s: the parts cover %zu of %zu bytes", what, total, n);
    CHECK(r[1].lo == 0 && r[1].hi == r[0].lo && r[2].lo == r[0].hi && r[2].hi == n,
          "%s: [%zu, %zu) [%zu, %zu) [%zu, %zu) are not the region, below it and above it", what,
          r[0].lo, r[0].hi, r[1].lo, r[1].hi, r[2].lo, r[2].hi);
}

int main(void)
{
    struct ditto_range r[3];
    const size_t mib = (size_t)1 << 20;
    /* The generator's case: a 64 MiB buffer plus its header, the stream in [32, 64) MiB. */
    size_t n = 64 * mib + 8192;
    ditto_buffer_order(n, 32 * mib, 32 * mib, r);
    check_cover("stream in the upper half", n, r);
    CHECK(r[0].lo == 32 * mib && r[0].hi == 64 * mib, "the stream's region is [%zu, %zu)", r[0].lo,
          r[0].hi);

    /* No stream: one pass in address order. */
    ditto_buffer_order(n, 0, 0, r);
    check_cover("no stream", n, r);
    CHECK(r[0].lo == r[0].hi && r[2].lo == 0 && r[2].hi == n, "no stream: [%zu, %zu) then [%zu, %zu)",
          r[0].lo, r[0].hi, r[2].lo, r[2].hi);

    /* A region past the end or longer than the buffer is clipped; one off a line starts on it. */
    ditto_buffer_order(4096, 8192, 64, r);
    check_cover("region past the end", 4096, r);
    CHECK(r[0].lo == r[0].hi, "a region past the end writes [%zu, %zu) first", r[0].lo, r[0].hi);
    ditto_buffer_order(4096, 1024, UINT64_MAX, r);
    check_cover("region longer than the buffer", 4096, r);
    CHECK(r[0].lo == 1024 && r[0].hi == 4096, "clipped to [%zu, %zu)", r[0].lo, r[0].hi);
    ditto_buffer_order(4096, 1000, 128, r);
    check_cover("region off a line", 4096, r);
    CHECK(r[0].lo == 960 && r[0].hi == 1088, "off a line: [%zu, %zu)", r[0].lo, r[0].hi);

    /* Set up in that order, a buffer is zero over its whole length (under ASan, a write outside it
     * would be reported). */
    size_t bytes = 3 * 4096 + 64;
    const struct ditto_cluster stream = {.first_touch_lo = 4096, .first_touch_bytes = 4096};
    uint8_t *p = ditto_buffer_alloc(bytes, &stream);
    CHECK(p != NULL, "ditto_buffer_alloc(%zu) failed", bytes);
    if (p != NULL) {
        size_t nonzero = 0;
        for (size_t i = 0; i < bytes; i++)
            nonzero += p[i] != 0;
        CHECK(nonzero == 0, "%zu of %zu bytes are not zero", nonzero, bytes);
        ditto_buffer_free(p, bytes);
    }

    if (failures == 0)
        printf("buffer_test: every check passed\n");
    return failures == 0 ? 0 : 1;
}
