/*
 * ditto_runtime.h - the contract between a generated clone and the ditto runtime.
 *
 * A clone is this runtime (network model, request framing, syscall emitters, background threads)
 * plus two generated files:
 *   src/config.c  defines `const struct ditto_config ditto_clone_config` from the profile;
 *   src/body.S    defines one body function per thread cluster (and its init function).
 * The runtime owns every buffer the body touches; the body only reads and writes inside
 * [ctx->priv, ctx->priv + config->priv_bytes) and [ctx->shared, ctx->shared + config->shared_bytes)
 * and its own stack. That is what makes clones memory-safe by construction.
 */
#ifndef DITTO_RUNTIME_H
#define DITTO_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#define DITTO_RUNTIME_ABI 6

/* How the server side handles connections (profile: network.model / threads.process_model). */
enum ditto_net_model {
    DITTO_NET_THREAD_PER_CONN = 0, /* blocking accept loop, one thread per connection */
    DITTO_NET_NONBLOCKING = 1,     /* one thread, non-blocking sockets, poll() */
    DITTO_NET_EPOLL_DISPATCH = 2,  /* acceptor thread hands connections to N epoll workers */
    DITTO_NET_EPOLL_SINGLE = 3,    /* one epoll thread does everything */
    DITTO_NET_PREFORK = 4,         /* master process + N worker processes, workers accept (nginx) */
};

/* How requests are delimited on the wire, so original and clone take the same load generator. */
enum ditto_framing {
    DITTO_FRAME_MEMCACHED_TEXT = 0, /* line-delimited memcached text protocol: get/set */
    DITTO_FRAME_HTTP1 = 1,          /* HTTP/1.1 keep-alive, GET/POST with Content-Length */
    DITTO_FRAME_LENGTH_PREFIXED = 2, /* u32 big-endian length + payload, both directions */
    DITTO_FRAME_GRPC = 3             /* unary gRPC over HTTP/2 (prior knowledge, no TLS) */
};

/* Which system call moves request and response bytes (the profile's per-request syscall names). */
enum ditto_io_call {
    DITTO_IO_READ = 0,
    DITTO_IO_RECVFROM = 1,
    DITTO_IO_RECVMSG = 2,
    DITTO_IO_WRITE = 3,
    DITTO_IO_SENDTO = 4,
    DITTO_IO_SENDMSG = 5,
    DITTO_IO_WRITEV = 6,
};

/* A distribution as explicit bins [lo, hi) with cumulative counts; sampled deterministically. */
struct ditto_dist {
    uint32_t bins;
    const uint64_t *lo;
    const uint64_t *hi;
    const uint64_t *cumulative; /* cumulative[i] = sum of counts of bins 0..=i */
};

/* Extra per-request system calls beyond receiving and sending on the connection socket. */
enum ditto_extra_op {
    DITTO_OP_OPEN_FSTAT_CLOSE = 0, /* openat + newfstatat (+ close) on a file in the clone's data dir */
    DITTO_OP_FILE_PREAD = 1,       /* pread of `bytes` from a data file */
    DITTO_OP_FILE_PWRITE = 2,      /* pwrite of `bytes` to a data file */
    DITTO_OP_SENDFILE = 3,         /* sendfile of `bytes` from a data file to the connection */
    DITTO_OP_PIPE_RW = 4,          /* write + read of `bytes` through a pipe */
    DITTO_OP_FUTEX_WAKE = 5,       /* a futex wake (a condition-variable signal with no waiter) */
    DITTO_OP_GETTIME = 6,          /* clock_gettime (vDSO-free: a real syscall) */
    DITTO_OP_FSYNC = 7,            /* fdatasync of a data file */
    /* Added after ABI 1 was first published; appended so existing values keep their meaning. */
    DITTO_OP_CORK = 8,             /* setsockopt TCP_CORK on before the response, off after it (2 calls) */
    DITTO_OP_SCHED_YIELD = 9,      /* sched_yield */
    DITTO_OP_MPROTECT = 10,        /* mprotect of a page the thread owns, protection unchanged */
    DITTO_OP_EVENTFD_WRITE = 11,   /* write of 8 bytes to an eventfd nobody reads (a wakeup of an idle peer) */
    /* Top-ups: per_request is the thread's *total* count of a call the network model makes by
     * itself. After each request the thread makes more of them until its count reaches
     * per_request x requests served; when the model already makes as many, these cost nothing. So
     * the count follows the original's (a server that reads until EAGAIN, an event loop that wakes
     * more often than once per request) whatever the load does to the model's own count. */
    DITTO_OP_RECV_TOPUP = 12,      /* the config's receive call, non-blocking and non-consuming
                                    * (MSG_PEEK | MSG_DONTWAIT) on the request's connection;
                                    * recvfrom when the receive call is read, which cannot peek */
    DITTO_OP_WAKEUP_TOPUP = 13,    /* epoll_wait with timeout 0 on an empty epoll instance */
};

/* One extra op per entry. per_request counts executions of the op, not system calls: one
 * OPEN_FSTAT_CLOSE is 3 calls, one PIPE_RW and one CORK are 2, every other op is 1 (docs/runtime.md). */
struct ditto_extra {
    enum ditto_extra_op op;
    double per_request;        /* mean count per request; fractions realised by an accumulator */
    struct ditto_dist bytes;   /* size per call where the op moves bytes (bins == 0: 4096) */
    /* Nonzero: the op is a synchronisation between threads (a wake, a yield), which the original
     * makes when requests overlap, so per_request holds at the profiled load only and scales with
     * the share of requests that find another in flight (ditto_config.in_flight_s). */
    int contended;
    /* Read only when ditto_config.second_rate > 0: the mean count per request at that load
     * (negative: not measured). The runtime then draws the line through (share at profiled_rate,
     * per_request) and (share at second_rate, per_request_second), with share = 1 - exp(-r *
     * in_flight_s), and runs the count it gives at the current rate; contended or not. */
    double per_request_second;
    /* Calls per accepted connection on top of the counts per request (ABI 6): added to the
     * serving thread's accumulator when it takes the connection, and made with the requests that
     * follow (top-ups count the thread's own calls towards them). */
    double per_connection;
};

struct ditto_body_ctx {
    uint8_t *priv;        /* this thread's private buffer, config->priv_bytes long, 64-byte aligned */
    uint8_t *shared;      /* the process-wide shared buffer, config->shared_bytes long, 64-byte aligned */
    uint64_t request;     /* requests this thread has served so far */
    uint64_t state[8];    /* scratch the body may keep across calls (branch pattern counters, ...) */
    /* Distinct for every thread of the process. A body starts its walks over its regions at a phase
     * drawn from it: threads that walked a shared region from the same offset would touch each
     * line one after another, and all but the first would hit where the original's threads,
     * touching unrelated items, miss. The generated init reads it at a fixed offset. */
    uint64_t stream;
};
_Static_assert(offsetof(struct ditto_body_ctx, stream) == 88, "body.S reads ctx->stream at 88");

typedef void (*ditto_body_fn)(struct ditto_body_ctx *ctx);

/* One data region of a body (the same offsets in the private and the shared buffer) and how often
 * one call of the body touches it, so that the runtime can leave it as the body's steady state
 * would (warm.c): a thread's private copy gets private_per_call accesses per call of that thread,
 * the shared copy shared_per_call per call of every thread of the cluster. */
struct ditto_warm_region {
    uint64_t offset;
    uint64_t bytes;
    double private_per_call;
    double shared_per_call;
};

/* One thread cluster of the original: what its threads do. */
enum ditto_role { DITTO_ROLE_WORKER = 0, DITTO_ROLE_ACCEPTOR = 1, DITTO_ROLE_BACKGROUND = 2 };

struct ditto_cluster {
    const char *name;        /* e.g. "worker" (the thread name is set to "ditto-<name>") */
    enum ditto_role role;
    uint32_t threads;        /* threads per process */
    ditto_body_fn body;      /* called once per request (workers) or per wakeup (background) */
    ditto_body_fn body_init; /* called once per thread before the first body call, on zeroed
                              * buffers (it does not clear them itself); may be NULL */
    uint32_t period_us;      /* background threads: wake every period_us */
    /* Background threads: body calls per request the process served (over all threads of the
     * cluster). A wakeup runs the body once per whole call owed, so background work follows the load
     * as in the original (e.g. an LRU maintainer that backs off when idle). 0: once every wakeup. */
    double calls_per_request;
    /* The body's data regions (warm.c); may be NULL (then n_warm is 0). */
    const struct ditto_warm_region *warm;
    uint32_t n_warm;
    /* Background threads: the period at ditto_config.second_rate (0: period_us at every load).
     * The wakeup rate then follows the line through both points in the process's request rate,
     * kept within half the lower and twice the higher of the two. */
    uint32_t period_us_second;
    /* The body's first-touch stream: its region of the private and shared buffers (the same offsets
     * in both), written before the rest of them at set-up so that it starts out of every cache
     * (main.c). 0 bytes: the body has no stream. */
    uint64_t first_touch_lo;
    uint64_t first_touch_bytes;
};

/* A request class (an HTTP request target, by hash): its responses draw their sizes at quantiles
 * in [lo, hi) of every size distribution, so that each class gets the sizes the original gave it
 * (the generator lays the classes out in order of their mean response size). */
struct ditto_request_class {
    uint64_t key_hash; /* 64-bit FNV-1a of the key's bytes */
    double lo, hi;     /* 0 <= lo <= hi <= 1 */
};

/* Calls the original made once or more per accepted connection (as servers log or check the
 * addresses, and shut a socket down before closing it): made after accept and before close. */
struct ditto_conn_calls {
    uint32_t peer_names; /* getpeername */
    uint32_t sock_names; /* getsockname */
    uint32_t shutdowns;  /* shutdown(SHUT_RDWR) */
};

struct ditto_config {
    uint32_t abi;                      /* DITTO_RUNTIME_ABI */
    const char *clone_name;
    enum ditto_net_model net_model;
    enum ditto_framing framing;
    uint16_t default_port;
    uint32_t processes;                /* worker processes (DITTO_NET_PREFORK), else 1 */
    uint32_t backlog;
    int tcp_nodelay;
    enum ditto_io_call recv_call;
    enum ditto_io_call send_call;
    struct ditto_dist response_bytes;  /* response payload size per request, framing excluded */
    const struct ditto_extra *extras;
    uint32_t n_extras;
    const struct ditto_cluster *clusters;
    uint32_t n_clusters;
    size_t priv_bytes;
    size_t shared_bytes;
    uint64_t data_file_bytes;          /* size of each file created in the data dir at start */
    uint32_t data_files;
    uint64_t seed;
    const struct ditto_request_class *request_classes; /* NULL: every request draws from all */
    uint32_t n_request_classes;
    /* The profiled load, for the contended extras: its request rate (all processes together) and
     * how long a request was in flight (its median latency). A request arriving at rate r finds
     * another in flight with probability 1 - exp(-r * in_flight_s) (Poisson arrivals); a contended
     * extra runs per_request times that share at the current rate over that share at
     * profiled_rate. 0: no scaling. */
    double profiled_rate;
    double in_flight_s;
    struct ditto_conn_calls conn_calls;
    /* The profile's second load (requests per second, all processes): the extras'
     * per_request_second and the clusters' period_us_second hold at it. 0: none. */
    double second_rate;
};

/* Defined by the generated src/config.c. */
extern const struct ditto_config ditto_clone_config;

/* Runs the clone: parses argv (--port, --data-dir, --threads, --bind, --help), serves until
 * SIGINT/SIGTERM, then returns 0; returns 2 on bad flags and 1 when it cannot start. */
int ditto_main(int argc, char **argv, const struct ditto_config *config);

#endif
