/* test_common.h - pieces every hand-written test config shares: the bodies from body.S, a
 * response-size distribution and the thread clusters. TEST_FRAMING is set by the Makefile, so
 * one config per model builds once per framing. */
#ifndef TEST_COMMON_H
#define TEST_COMMON_H

#include "ditto_runtime.h"

#ifndef TEST_FRAMING
#define TEST_FRAMING DITTO_FRAME_MEMCACHED_TEXT
#endif

void test_body(struct ditto_body_ctx *ctx);
void test_body_init(struct ditto_body_ctx *ctx);
void test_acceptor_body(struct ditto_body_ctx *ctx);
void test_background_body(struct ditto_body_ctx *ctx);

/* Response payloads: half 100-199 bytes, 30% 1000-1999, 20% exactly 4096. */
static const uint64_t test_resp_lo[] = {100, 1000, 4096};
static const uint64_t test_resp_hi[] = {200, 2000, 4097};
static const uint64_t test_resp_cum[] = {50, 80, 100};
#define TEST_RESPONSE_BYTES {3, test_resp_lo, test_resp_hi, test_resp_cum}

/* The workers' data regions, warmed at start (warm.c): the last of them ends at the buffers' last
 * byte (4096), so that a warm read one line past a region's end is outside the buffer. */
static const struct ditto_warm_region test_warm[] = {
    {0, 1024, 2.0, 0.5},
    {1024, 1024, 0.25, 1.0},
    {2048, 2048, 0.125, 0.0},
};

/* An acceptor, 2 workers (threads or processes: --threads overrides), a 10 Hz timer thread and
 * two idle threads, like memcached's. The workers' upper half stands for a first-touch stream, so
 * that their buffers are set up in the stream-first order (main.c) under memcheck and ASan. */
static const struct ditto_cluster test_clusters[] = {
    {"acceptor", DITTO_ROLE_ACCEPTOR, 1, test_acceptor_body, NULL, 0, 0.0, NULL, 0, 0, 0, 0},
    {"worker", DITTO_ROLE_WORKER, 2, test_body, test_body_init, 0, 0.0, test_warm, 3, 0, 2048, 2048},
    {"timer", DITTO_ROLE_BACKGROUND, 1, test_background_body, NULL, 100000, 0.0, NULL, 0, 0, 0, 0},
    {"idle", DITTO_ROLE_BACKGROUND, 2, NULL, NULL, 0, 0.0, NULL, 0, 0, 0, 0},
};
#define TEST_N_CLUSTERS (sizeof test_clusters / sizeof test_clusters[0])

#endif
