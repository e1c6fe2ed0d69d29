/* body_harness.c - calls every generated body of a clone many times on buffers of exactly the
 * configured sizes, outside the runtime, so that memory checkers see only the body.
 *
 *   body_harness ITERATIONS            buffers from aligned_alloc (run it under valgrind memcheck)
 *   body_harness ITERATIONS guard      each buffer ends at a PROT_NONE page (native overflow check)
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

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 1000;
    int guard = argc > 2 && strcmp(argv[2], "guard") == 0;
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
        if (cl->body_init != NULL)
            cl->body_init(&ctx);
        for (long k = 0; k < iterations; k++) {
            cl->body(&ctx);
            ctx.request++;
        }
        bodies++;
    }
    printf("ok: %d bodies x %ld calls\n", bodies, iterations);
    return 0;
}
