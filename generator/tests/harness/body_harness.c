/* body_harness.c - calls every generated body of a clone many times on buffers of exactly the
 * configured sizes, outside the runtime, so that memory checkers see only the body.
 *
 *   body_harness ITERATIONS            buffers from aligned_alloc (run it under valgrind memcheck)
 *   body_harness ITERATIONS guard      each buffer ends at a PROT_NONE page (native overflow check)
 *   body_harness ITERATIONS streams A B
 *                                      per body: two runs on fresh buffers, as threads with streams A
 *                                      and B; prints "NAME: L lines written, D by only one run" (lines
 *                                      of the shared buffer; their values may differ, since a body
 *                                      may store values derived from its buffers' addresses)
 *   DITTO_HARNESS_ONLY=NAME            only the body of cluster NAME (e.g. to profile one cluster)
 *
 * Linked with the clone's src/config.c and src/body.S only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ditto_runtime.h"

static uint8_t *buffer(size_t n, int guard)
{
    if (!guard) {
        uint8_t *p = aligned_alloc(64, n < 64 ? 64 : n);
        if (p != NULL)
            memset(p, 0, n < 64 ? 64 : n);
        return p;
    }
    size_t page = 4096;
    size_t span = (n + page - 1) / page * page;
    uint8_t *m = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m + span, page, PROT_NONE) != 0)
        return NULL;
    /* n is a multiple of 64, so the buffer stays 64-byte aligned and ends at the guard page. */
    return m + span - n;
}

/* Calls body `cl` as its thread would: init once, then `iterations` requests. */
static void run_body(const struct ditto_cluster *cl, struct ditto_body_ctx *ctx, long iterations)
{
    if (cl->body_init != NULL)
        cl->body_init(ctx);
    for (long k = 0; k < iterations; k++) {
        cl->body(ctx);
        ctx->request++;
    }
}

/* What the shared buffer holds before a `streams` run: a line still holding it was not written. */
#define SENTINEL 0xA5

/* Runs body `cl` `iterations` times as a thread with stream `stream` on a fresh zeroed private
 * buffer and a shared one filled with SENTINEL (a body reads arbitrary bytes safely), and returns the
 * shared buffer (NULL when out of memory). */
static uint8_t *run_as_stream(const struct ditto_config *cfg, const struct ditto_cluster *cl,
                              long iterations, uint64_t stream)
{
    struct ditto_body_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.priv = buffer(cfg->priv_bytes, 0);
    ctx.shared = buffer(cfg->shared_bytes, 0);
    ctx.stream = stream;
    if (ctx.priv == NULL || ctx.shared == NULL)
        return NULL;
    memset(ctx.shared, SENTINEL, cfg->shared_bytes);
    run_body(cl, &ctx, iterations);
    free(ctx.priv);
    return ctx.shared;
}

static int line_written(const uint8_t *line)
{
    for (int i = 0; i < 64; i++)
        if (line[i] != SENTINEL)
            return 1;
    return 0;
}

/* Which lines of the shared buffer two threads of one body, with streams a and b, write. */
static int compare_streams(long iterations, uint64_t a, uint64_t b)
{
    const struct ditto_config *cfg = &ditto_clone_config;
    for (uint32_t i = 0; i < cfg->n_clusters; i++) {
        const struct ditto_cluster *cl = &cfg->clusters[i];
        if (cl->body == NULL)
            continue;
        uint8_t *sa = run_as_stream(cfg, cl, iterations, a);
        uint8_t *sb = run_as_stream(cfg, cl, iterations, b);
        if (sa == NULL || sb == NULL)
            return 3;
        size_t written = 0, only_one = 0;
        for (size_t off = 0; off + 64 <= cfg->shared_bytes; off += 64) {
            int wa = line_written(sa + off), wb = line_written(sb + off);
            written += (size_t)(wa | wb);
            only_one += (size_t)(wa ^ wb);
        }
        printf("%s: %zu lines written, %zu by only one run\n", cl->name, written, only_one);
        free(sa);
        free(sb);
    }
    return 0;
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 1000;
    int guard = argc > 2 && strcmp(argv[2], "guard") == 0;
    if (argc > 4 && strcmp(argv[2], "streams") == 0)
        return compare_streams(iterations, strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    const struct ditto_config *cfg = &ditto_clone_config;
    if (cfg->priv_bytes % 64 != 0 || cfg->shared_bytes % 64 != 0) {
        fprintf(stderr, "buffer sizes are not multiples of 64\n");
        return 2;
    }
    uint8_t *shared = buffer(cfg->shared_bytes, guard);
    if (shared == NULL)
        return 3;
    int bodies = 0;
    for (uint32_t i = 0; i < cfg->n_clusters; i++) {
        const struct ditto_cluster *cl = &cfg->clusters[i];
        const char *only = getenv("DITTO_HARNESS_ONLY");
        if (cl->body == NULL || (only != NULL && strcmp(only, cl->name) != 0))
            continue;
        struct ditto_body_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.priv = buffer(cfg->priv_bytes, guard);
        ctx.shared = shared;
        if (ctx.priv == NULL)
            return 3;
        run_body(cl, &ctx, iterations);
        bodies++;
    }
    printf("ok: %d bodies x %ld calls\n", bodies, iterations);
    return 0;
}
