/* warm_test.c - the start-up warm schedule (warm.c) on its own: every line of every region is read
 * exactly once, the slowest region first and the fastest last (each over its own period at the end
 * of one clock), power-of-two regions in a scrambled order, others in address order. Exit status 0
 * when every check passes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ditto_internal.h"
#include "check.h"

#define MAX_VISITS 4096

struct log {
    uint32_t n;
    uint32_t stream[MAX_VISITS];
    uint64_t line[MAX_VISITS];
};

static void record(void *arg, uint32_t stream, uint64_t line)
{
    struct log *l = arg;
    if (l->n < MAX_VISITS) {
        l->stream[l->n] = stream;
        l->line[l->n] = line;
    }
    l->n++;
}

int main(void)
{
    /* A slow region (1,024 lines, 1 access a call: a period of 1,024 calls), a fast one (16 lines,
     * 8 a call: 2 calls) and a region of 24 lines (not a power of two, 3 a call: 8 calls). */
    static const uint8_t buf[1] = {0};
    const struct ditto_warm_stream s[3] = {
        {buf, 1024, 1.0},
        {buf, 16, 8.0},
        {buf, 24, 3.0},
    };
    struct log *l = calloc(1, sizeof *l);
    if (l == NULL)
        return 2;
    ditto_warm_schedule(s, 3, record, l);
    CHECK(l->n == 1024 + 16 + 24, "%u visits, expected %u", l->n, 1024 + 16 + 24);

    uint32_t seen[3][1024];
    memset(seen, 0, sizeof seen);
    uint32_t first[3] = {UINT32_MAX, UINT32_MAX, UINT32_MAX};
    uint32_t slow_before[3] = {0, 0, 0};
    uint32_t slow_done = 0;
    for (uint32_t i = 0; i < l->n && i < MAX_VISITS; i++) {
        uint32_t k = l->stream[i];
        CHECK(k < 3, "visit %u of stream %u", i, k);
        if (k >= 3)
            continue;
        CHECK(l->line[i] < s[k].lines, "stream %u: line %llu of %llu", k,
              (unsigned long long)l->line[i], (unsigned long long)s[k].lines);
        if (l->line[i] < s[k].lines)
            seen[k][l->line[i]]++;
        if (first[k] == UINT32_MAX) {
            first[k] = i;
            slow_before[k] = slow_done;
        }
        if (k == 0)
            slow_done++;
    }
    for (uint32_t k = 0; k < 3; k++)
        for (uint64_t j = 0; j < s[k].lines; j++)
            CHECK(seen[k][j] == 1, "stream %u line %llu read %u times", k, (unsigned long long)j,
                  seen[k][j]);

    /* The fast region starts 2 calls before the end (the slow one has read 1,022 lines by then),
     * the 24-line one 8 calls before (1,016); a step of the clock moves a quarter line. */
    CHECK(slow_before[1] >= 1020, "the fast region started after %u slow lines, expected 1,022",
          slow_before[1]);
    CHECK(slow_before[2] >= 1014 && slow_before[2] <= 1018,
          "the 24-line region started after %u slow lines, expected 1,016", slow_before[2]);

    /* Power-of-two regions are scrambled (a pass in address order would be the walk of one
     * particular window); the 24-line region is in address order. */
    uint32_t in_order = 0, prev = UINT32_MAX;
    for (uint32_t i = 0; i < l->n && i < MAX_VISITS; i++) {
        if (l->stream[i] != 0)
            continue;
        if (prev != UINT32_MAX && l->line[i] == l->line[prev] + 1)
            in_order++;
        prev = i;
    }
    CHECK(in_order < 16, "the slow region was read in address order at %u of 1,023 steps", in_order);
    uint64_t next = 0;
    for (uint32_t i = 0; i < l->n && i < MAX_VISITS; i++)
        if (l->stream[i] == 2) {
            CHECK(l->line[i] == next, "24-line region: line %llu read where %llu was due",
                  (unsigned long long)l->line[i], (unsigned long long)next);
            next++;
        }

    /* Nothing to read: no visit. */
    struct log *empty = calloc(1, sizeof *empty);
    if (empty == NULL)
        return 2;
    const struct ditto_warm_stream none[1] = {{buf, 0, 1.0}};
    ditto_warm_schedule(none, 1, record, empty);
    CHECK(empty->n == 0, "an empty region had %u visits", empty->n);
    free(empty);
    free(l);
    if (failures) {
        fprintf(stderr, "warm_test: %d checks failed\n", failures);
        return 1;
    }
    printf("warm_test: all checks passed\n");
    return 0;
}
