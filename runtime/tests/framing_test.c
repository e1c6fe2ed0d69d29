/* framing_test.c - the request parsers on their own: valid requests are recognised whole and
 * never early at any split point, malformed ones are refused, and random bytes never make a
 * parser read outside its buffer or claim more bytes than it was given (the ASan build checks
 * the reads). Exit status 0 when every check passes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ditto_internal.h"
#include "check.h"

/* Parses `text` from a heap copy of exactly its length, so ASan sees any overread. */
static int parse(enum ditto_framing f, const char *text, size_t len, struct ditto_req *req)
{
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, text, len);
    int r = ditto_frame_parse(f, copy, len, req);
    free(copy);
    return r;
}

struct valid {
    enum ditto_framing framing;
    const char *text;
    size_t len;
    enum ditto_req_kind kind;
    size_t head_len;
    uint64_t body_len;
    unsigned flags;
};

#define LIT(s) s, sizeof(s) - 1

static const struct valid valid[] = {
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("get key:0001\r\n"), DITTO_REQ_MC_GET, 14, 0, 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("gets a bb ccc\r\n"), DITTO_REQ_MC_GET, 15, 0, 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("get k\n"), DITTO_REQ_MC_GET, 6, 0, 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("set k 0 0 5\r\n"), DITTO_REQ_MC_STORE, 13, 7, 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("set k 1 2 0 noreply\r\n"), DITTO_REQ_MC_STORE, 21, 2,
     DITTO_REQF_NOREPLY},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("cas k 0 0 3 99\r\n"), DITTO_REQ_MC_STORE, 16, 5, 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("delete k\r\n"), DITTO_REQ_MC_DELETE, 10, 0, 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("version\r\n"), DITTO_REQ_MC_VERSION, 9, 0, 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("quit\r\n"), DITTO_REQ_MC_QUIT, 6, 0, 0},
    {DITTO_FRAME_HTTP1, LIT("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), DITTO_REQ_HTTP, 27, 0,
     DITTO_REQF_KEYED},
    {DITTO_FRAME_HTTP1, LIT("POST /a HTTP/1.1\r\ncontent-length: 12\r\n\r\n"), DITTO_REQ_HTTP, 40,
     12, DITTO_REQF_KEYED},
    {DITTO_FRAME_HTTP1, LIT("GET / HTTP/1.0\r\n\r\n"), DITTO_REQ_HTTP, 18, 0,
     DITTO_REQF_KEYED | DITTO_REQF_CLOSE | DITTO_REQF_HTTP10},
    {DITTO_FRAME_HTTP1, LIT("HEAD /x HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n"),
     DITTO_REQ_HTTP, 51, 0, DITTO_REQF_KEYED | DITTO_REQF_CLOSE | DITTO_REQF_HEAD},
    {DITTO_FRAME_LENGTH_PREFIXED, "\0\0\0\x05", 4, DITTO_REQ_LP, 4, 5, 0},
    {DITTO_FRAME_LENGTH_PREFIXED, "\0\0\0\0", 4, DITTO_REQ_LP, 4, 0, 0},
    /* HTTP/2: the preface, control frames, and the frame that ends a stream (the call). */
    {DITTO_FRAME_GRPC, LIT("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), DITTO_REQ_H2_CONTROL, 24, 0, 0},
    {DITTO_FRAME_GRPC, LIT("\0\0\0\x04\0\0\0\0\0"), DITTO_REQ_H2_CONTROL, 9, 0, 0},
    {DITTO_FRAME_GRPC, LIT("\0\0\x01\x01\x04\0\0\0\x01\x88"), DITTO_REQ_H2_CONTROL, 10, 0, 0},
    {DITTO_FRAME_GRPC, LIT("\0\0\x05\0\x01\0\0\0\x01\0\0\0\0\0"), DITTO_REQ_GRPC, 14, 0, 0},
    {DITTO_FRAME_GRPC, LIT("\0\0\0\x01\x05\0\0\0\x03"), DITTO_REQ_GRPC, 9, 0, 0},
    {DITTO_FRAME_GRPC, LIT("\0\0\x05\0\0\0\0\0\x01\0\0\0\0\0"), DITTO_REQ_H2_CONTROL, 14, 0, 0},
    {DITTO_FRAME_GRPC, LIT("\0\0\x08\x07\0\0\0\0\0\0\0\0\0\0\0\0\0"), DITTO_REQ_H2_CONTROL, 17, 0,
     DITTO_REQF_CLOSE},
};

static void test_valid(void)
{
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        const struct valid *v = &valid[i];
        struct ditto_req req;
        int r = parse(v->framing, v->text, v->len, &req);
        CHECK(r == 1, "case %zu: parse returned %d", i, r);
        CHECK(req.kind == v->kind, "case %zu: kind %d, want %d", i, req.kind, v->kind);
        CHECK(req.head_len == v->head_len, "case %zu: head_len %zu, want %zu", i, req.head_len,
              v->head_len);
        CHECK(req.body_len == v->body_len, "case %zu: body_len %llu, want %llu", i,
              (unsigned long long)req.body_len, (unsigned long long)v->body_len);
        CHECK(req.flags == v->flags, "case %zu: flags %u, want %u", i, req.flags, v->flags);
        for (size_t cut = 0; cut < v->head_len; cut++) {
            r = parse(v->framing, v->text, cut, &req);
            CHECK(r == 0, "case %zu: complete after %zu of %zu bytes (%d)", i, cut, v->head_len, r);
        }
    }
}

struct invalid {
    enum ditto_framing framing;
    const char *text;
    size_t len;
    int closes;
};

static const struct invalid invalid[] = {
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("bogus\r\n"), 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("get\r\n"), 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("set k 0 0\r\n"), 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("set k 0 0 -1\r\n"), 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("set k 0 0 5 noreply extra\r\n"), 0},
    {DITTO_FRAME_MEMCACHED_TEXT, LIT("set k 0 0 99999999999999999999999\r\n"), 0},
    {DITTO_FRAME_HTTP1, LIT("GET / HTTP/2.0\r\n\r\n"), 1},
    {DITTO_FRAME_HTTP1, LIT("GET /\r\n\r\n"), 1},
    {DITTO_FRAME_HTTP1, LIT("GET / HTTP/1.1\r\nno colon\r\n\r\n"), 1},
    {DITTO_FRAME_HTTP1, LIT("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 1},
    {DITTO_FRAME_HTTP1, LIT("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 1},
    {DITTO_FRAME_HTTP1, LIT("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 1},
    {DITTO_FRAME_LENGTH_PREFIXED, "\x7f\xff\xff\xff", 4, 1},
    {DITTO_FRAME_GRPC, LIT("PRI * HTTP/1.1\r\n"), 1},
    {DITTO_FRAME_GRPC, LIT("\0\x40\x01\0\0\0\0\0\x01"), 1}, /* 16,385 bytes: over the limit */
};

static void test_invalid(void)
{
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        const struct invalid *v = &invalid[i];
        struct ditto_req req;
        int r = parse(v->framing, v->text, v->len, &req);
        CHECK(r == -1, "invalid case %zu: parse returned %d", i, r);
        CHECK(req.kind == DITTO_REQ_ERROR, "invalid case %zu: kind %d", i, req.kind);
        CHECK(req.head_len > 0 && req.head_len <= v->len, "invalid case %zu: consumed %zu of %zu",
              i, req.head_len, v->len);
        CHECK(!!(req.flags & DITTO_REQF_CLOSE) == v->closes, "invalid case %zu: close flag", i);
    }
    /* Over-long heads are refused once the limit is buffered, not waited on forever. */
    size_t n = 20000;
    char *junk = malloc(n);
    memset(junk, 'a', n);
    struct ditto_req req;
    CHECK(parse(DITTO_FRAME_MEMCACHED_TEXT, junk, n, &req) == -1, "endless memcached line");
    CHECK(parse(DITTO_FRAME_HTTP1, junk, n, &req) == -1, "endless HTTP head");
    free(junk);
}

static void test_random(void)
{
    /* Bytes that steer the parsers into their deeper branches. */
    static const char *pieces[] = {"get ", "set ", "cas ", "k ", "0 ", "5 ", "noreply", "\r\n",
                                   "\n", " ", "GET ", "/ ", "HTTP/1.1", "HTTP/1.0", "\r\n\r\n",
                                   "Content-Length: ", "7", "Connection: close", ":", "\0\0\0\x02",
                                   "\xff", "delete ", "version", "9999999999", "PRI * HTTP/2.0"};
    uint64_t rng = 12345;
    uint8_t buf[400];
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = 0, target = (size_t)ditto_rng_below(&rng, sizeof buf);
        while (len < target) {
            const char *p = pieces[ditto_rng_below(&rng, sizeof pieces / sizeof pieces[0])];
            size_t pl = strcmp(p, "\0\0\0\x02") == 0 ? 4 : strlen(p);
            if (pl == 0)
                pl = 1;
            if (ditto_rng_below(&rng, 8) == 0) {
                buf[len++] = (uint8_t)ditto_splitmix64(&rng);
                continue;
            }
            for (size_t k = 0; k < pl && len < target; k++)
                buf[len++] = (uint8_t)p[k];
        }
        for (int f = 0; f <= DITTO_FRAME_GRPC; f++) {
            struct ditto_req req;
            int r = parse((enum ditto_framing)f, (const char *)buf, len, &req);
            CHECK(r >= -1 && r <= 1, "random: result %d", r);
            if (r != 0)
                CHECK(req.head_len > 0 && req.head_len <= len, "random: head %zu of %zu",
                      req.head_len, len);
            if (failures > 20)
                return;
        }
    }
}

/* The request target names the class, with the hash the profile uses (FNV-1a 64: the published
 * vector for "foobar"), and a class's quantile range picks its part of a size distribution. */
static void test_request_classes(void)
{
    CHECK(ditto_key_hash((const uint8_t *)"foobar", 6) == 0x85944171f73967e8ULL, "FNV-1a 64");
    struct ditto_req req;
    const char *get = "GET /photo.bin HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(parse(DITTO_FRAME_HTTP1, get, strlen(get), &req) == 1, "keyed GET parses");
    CHECK(req.key_hash == ditto_key_hash((const uint8_t *)"/photo.bin", 10), "target hashed");

    /* Sizes 100 (half), 200 (a fifth), 300 (the rest): a class at [0.5, 0.7) only ever gets 200,
     * one at [0, 0.5) only 100, and [0, 1) all three. */
    static const uint64_t lo[] = {100, 200, 300}, hi[] = {101, 201, 301}, cum[] = {50, 70, 100};
    struct ditto_dist d = {3, lo, hi, cum};
    uint64_t rng = 7;
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < 10000; i++) {
        CHECK(ditto_dist_sample_in(&d, &rng, 0.5, 0.7) == 200, "class [0.5, 0.7) draws 200");
        CHECK(ditto_dist_sample_in(&d, &rng, 0.0, 0.5) == 100, "class [0, 0.5) draws 100");
        uint64_t v = ditto_dist_sample(&d, &rng);
        seen[v / 100 - 1]++;
        if (failures > 20)
            return;
    }
    CHECK(seen[0] > 4700 && seen[0] < 5300 && seen[1] > 1800 && seen[1] < 2200,
          "whole range: %d %d %d", seen[0], seen[1], seen[2]);
    /* A range at the very end stays inside the distribution. */
    CHECK(ditto_dist_sample_in(&d, &rng, 1.0, 1.0) == 300, "empty range at the end");
}

int main(void)
{
    test_valid();
    test_request_classes();
    test_invalid();
    test_random();
    if (failures != 0) {
        fprintf(stderr, "framing_test: %d failures\n", failures);
        return 1;
    }
    printf("framing_test: all checks passed\n");
    return 0;
}
