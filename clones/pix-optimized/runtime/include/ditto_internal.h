/*
 * ditto_internal.h - declarations shared by the runtime's own source files; not part of the
 * contract with generated code (that is ditto_runtime.h). It lives in include/ because the
 * generator copies the headers of include/ and the sources of src/ into every clone.
 */
#ifndef DITTO_INTERNAL_H
#define DITTO_INTERNAL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "ditto_runtime.h"

/* Limits that keep every buffer bounded; each is documented in docs/runtime.md. */
#define DITTO_MAX_PAYLOAD ((uint64_t)64 << 20)   /* largest response payload or extra-op byte count */
#define DITTO_MAX_OPS_PER_REQUEST 64             /* largest per_request of one extra op */
#define DITTO_RATE_WINDOW_NS 250000000u          /* shortest window of a request-rate estimate */
#define DITTO_RATE_CHECK 8u                      /* a thread's requests between clock reads */
#define DITTO_MAX_FILE_SEGS 64                   /* sendfile calls one response can carry */
#define DITTO_DEFAULT_OP_BYTES 4096              /* bytes of an op whose distribution is empty */
#define DITTO_IN_BUFFER (64 * 1024)              /* per-connection read buffer */
#define DITTO_MEMCACHED_TRAILER "\r\nEND\r\n"
#define DITTO_MEMCACHED_TRAILER_LEN 7

/* ---- log.c: one-line messages on stderr ---- */
void ditto_log_init(const char *clone_name);
void ditto_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints one line and exits the process with `code`; for start-up failures only. */
_Noreturn void ditto_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- dist.c: deterministic sampling ---- */
uint64_t ditto_splitmix64(uint64_t *state);
uint64_t ditto_rng_seed(uint64_t config_seed, uint64_t stream);
uint64_t ditto_rng_below(uint64_t *state, uint64_t n); /* uniform in [0, n); 0 when n == 0 */
uint64_t ditto_dist_sample(const struct ditto_dist *d, uint64_t *state);
/* A sample at a quantile drawn uniformly in [lo, hi) (0 <= lo <= hi <= 1): the request classes'
 * share of a distribution. ditto_dist_sample is the same with [0, 1). */
uint64_t ditto_dist_sample_in(const struct ditto_dist *d, uint64_t *state, double lo, double hi);
/* 64-bit FNV-1a, the hash that names a request key (ditto_profile::request_key_hash). */
uint64_t ditto_key_hash(const uint8_t *key, size_t len);
uint64_t ditto_dist_max(const struct ditto_dist *d); /* largest value sample() can return */
const char *ditto_dist_check(const struct ditto_dist *d); /* NULL when well formed, else why not */

/* ---- cli.c ---- */
struct ditto_opts {
    uint16_t port;
    char bind[64];
    const char *data_dir; /* NULL: a fresh mkdtemp under /tmp */
    uint32_t threads;     /* 0: from the config */
};
/* Returns 0 to run, 1 after --help (exit 0), 2 on a bad flag (message already printed). */
int ditto_cli_parse(int argc, char **argv, const struct ditto_config *cfg, struct ditto_opts *out);

/* ---- datadir.c ---- */
struct ditto_datadir {
    char path[4096];
    int dir_fd;
    int created_dir;   /* we made the directory, so we remove it */
    uint32_t nfiles;
    uint64_t file_bytes;
    int *fds;          /* O_RDWR, one per file */
    char (*names)[32]; /* relative to dir_fd */
};
int ditto_datadir_create(struct ditto_datadir *dd, const char *requested, const char *clone_name,
                         uint32_t nfiles, uint64_t file_bytes, const uint8_t *pattern,
                         size_t pattern_len);
/* Closes the files; removes them (and the directory if we created it) when `remove` is set. */
void ditto_datadir_destroy(struct ditto_datadir *dd, int remove);

/* ---- signals.c: how SIGINT/SIGTERM reach the serving loops ---- */
extern volatile sig_atomic_t ditto_stopping;
/* Creates the stop eventfd and installs the handlers in the calling (main) thread. */
int ditto_signals_init(void);
/* Fd that becomes readable (and stays readable: nobody reads it) once a stop was requested. */
int ditto_stop_fd(void);
/* A listening socket the handler shuts down so a blocking accept() returns (thread-per-conn). */
void ditto_signals_set_shutdown_fd(int fd);
/* Requests a stop from inside the process (as the handler would). */
void ditto_request_stop(void);
/* Blocks SIGINT/SIGTERM in the calling thread; threads created afterwards inherit the mask. */
void ditto_block_stop_signals(sigset_t *old);
void ditto_restore_signals(const sigset_t *old);
void ditto_signals_close(void);

/* ---- the process: what every thread of one (worker) process shares ---- */
struct ditto_rt {
    const struct ditto_config *cfg;
    struct ditto_opts opts;
    int listen_fd;
    uint16_t port;
    const struct ditto_cluster *worker_cluster;   /* may be NULL: no body per request */
    const struct ditto_cluster *acceptor_cluster; /* may be NULL */
    uint32_t workers;                             /* epoll worker threads or prefork processes */
    uint32_t process_index;                       /* prefork worker number, else 0 */
    uint8_t *shared;                              /* config->shared_bytes, 64-byte aligned */
    uint8_t *pattern;                             /* payload bytes every response is cut from */
    size_t pattern_len;
    struct ditto_datadir data;
    uint64_t max_pipe_bytes, max_scratch_bytes;   /* from the extras' distributions */
    int need_pipe, need_eventfd, need_mprotect, need_epoll;
    /* A contended extra with a profiled load to scale it by, or an extra measured at a second load:
     * the workers estimate the request rate (worker.c, update_load); without one they never read
     * the clock for it. */
    int need_rate;
    /* The line through the profiled and second loads (ditto_config.second_rate): the overlap share
     * at the profiled load, and 1 / (share at the second - share at the profiled); 0: no line. */
    double share_profiled, share_span_inv;
};

/* This thread's receive calls on connections and the epoll_wait calls of its event loop, what the
 * top-up ops (DITTO_OP_RECV_TOPUP, DITTO_OP_WAKEUP_TOPUP) compare with requests served. */
extern __thread uint64_t ditto_recv_calls;
extern __thread uint64_t ditto_wait_calls;

/* ---- worker.c: one serving (or background) thread's state ---- */

/* The share of requests arriving at `rate` per second that find another in flight for in_flight_s. */
double ditto_overlap_share(double rate, double in_flight_s);

/* A window over which a thread estimates the process's request rate (ditto_requests_served). */
struct ditto_rate_window {
    uint64_t mark_ns, mark_served;
};

/* The request rate since the window's mark, times `processes` (each process serves its share of the
 * load), once the window spans DITTO_RATE_WINDOW_NS; the next window then starts at now_ns. Negative
 * while the window is shorter, and on the first call, which only sets the mark. */
double ditto_rate_window_update(struct ditto_rate_window *r, uint64_t now_ns, double processes);

/* Whether the extra follows the line through the profiled and the second load. */
static inline int ditto_extra_has_second(const struct ditto_rt *rt, const struct ditto_extra *e)
{
    return rt->share_span_inv != 0.0 && e->per_request_second >= 0.0;
}
struct ditto_file_seg {
    int fd;
    uint64_t off;
    uint64_t len;
};

/* What one response carries besides its framing: a payload cut from the pattern, then sendfile
 * segments; corks = how many TCP_CORK on/off pairs wrap it. */
struct ditto_plan {
    uint64_t payload;
    uint32_t n_files;
    uint32_t corks;
    uint32_t peeks; /* DITTO_OP_RECV_TOPUP receives owed on the connection */
    struct ditto_file_seg files[DITTO_MAX_FILE_SEGS];
};

struct ditto_worker {
    const struct ditto_rt *rt;
    const struct ditto_cluster *cluster;
    struct ditto_body_ctx ctx;
    uint64_t rng;
    double *acc; /* one accumulator per config extra */
    int pipe_rd, pipe_wr;
    uint64_t pipe_cap;
    int event_fd;
    int epoll_fd; /* DITTO_OP_WAKEUP_TOPUP: an epoll instance with nothing in it */
    void *page;  /* DITTO_OP_MPROTECT target */
    long page_size;
    uint32_t futex_word;
    uint8_t *scratch; /* pread and pipe-read destination */
    size_t scratch_len;
    uint8_t *stage; /* contiguous copy for write/sendto of several pieces */
    size_t stage_cap;
    /* The contended extras' scale (ditto_config.in_flight_s), where on the line from the profiled
     * load (0) to the second load (1) the current rate's overlap share lies, and the window of the
     * process's request rate they were last estimated over. */
    double contention_scale;
    double load_t;
    struct ditto_rate_window rate;
    uint32_t rate_tick;
};

struct ditto_req;

/* Called by the thread itself: sets up its buffers, then calls the cluster's body_init.
 * stream: a number unique among this process's threads (seeds the thread's sampler).
 * serving: the thread serves requests, so it needs the extras' pipe, eventfd, page, scratch. */
int ditto_worker_init(struct ditto_worker *w, const struct ditto_rt *rt,
                      const struct ditto_cluster *cluster, uint64_t stream, int serving);
void ditto_worker_free(struct ditto_worker *w);
/* warm.c: reads every line of the cluster's data regions in this thread's private buffer (and, for
 * the first of its threads to call, in the shared buffer) in the order a long run of the body would
 * have left them, so that a measurement right after start-up sees the body's steady state. */
void ditto_warm_regions(const struct ditto_rt *rt, const struct ditto_cluster *cluster, uint8_t *priv);
/* The schedule behind it, apart for tests: stream i has `lines` lines read at `rate` per call of
 * the thread; visit(arg, i, line) is called once for every line of every stream, in clock order. */
struct ditto_warm_stream {
    const volatile uint8_t *base;
    uint64_t lines;
    double rate;
};
void ditto_warm_schedule(const struct ditto_warm_stream *s, uint32_t n,
                         void (*visit)(void *arg, uint32_t stream, uint64_t line), void *arg);
/* Calls the cluster body once (no-op without a body). */
void ditto_worker_body(struct ditto_worker *w);
/* The thread took a new connection: its extras' calls per connection are owed. */
void ditto_worker_conn_start(struct ditto_worker *w);
/* Requests this process has served (all workers); background threads pace themselves on it. */
extern uint64_t ditto_requests_served;
/* Writes to an eventfd this process has made: the accept hand-overs of epoll dispatch and the
 * DITTO_OP_EVENTFD_WRITE ops. The op tops this total up to per_request x ditto_requests_served, so
 * the hand-overs count toward it as the original's wakeups on accept counted toward its profile. */
extern uint64_t ditto_eventfd_writes;
/* One request: body, then the extras due now; fills the plan of the response. cls is the
 * request's class (ditto_request_class_of), whose quantile range its response sizes are drawn
 * from, or NULL for all of each distribution. can_carry says whether this response can carry
 * sendfile segments (a memcached `set` reply cannot: its sendfiles wait for the next request that
 * can). */
void ditto_worker_serve(struct ditto_worker *w, const struct ditto_request_class *cls,
                        int can_carry, struct ditto_plan *plan);
/* The config's class of a request with a key (DITTO_REQF_KEYED), or NULL. */
const struct ditto_request_class *ditto_request_class_of(const struct ditto_config *cfg,
                                                        const struct ditto_req *req);
/* Payload of one more value in the same response (memcached multi-key get). */
uint64_t ditto_worker_payload(struct ditto_worker *w);
void ditto_set_thread_name(const char *cluster_name);

/* ---- syscalls.c: the extra-op emitters and the receive/send calls ---- */
/* Runs `n` executions of extra `e` that do not touch the connection. */
void ditto_op_run(struct ditto_worker *w, const struct ditto_extra *e, uint64_t n);
/* Picks a sendfile segment of `len` bytes; tail=1 makes it end at the file's end (memcached). */
void ditto_op_sendfile_seg(struct ditto_worker *w, uint64_t len, int tail, struct ditto_file_seg *seg);
ssize_t ditto_io_recv(enum ditto_io_call call, int fd, void *buf, size_t len);
/* n non-blocking receives that leave any data in the socket (DITTO_OP_RECV_TOPUP). */
void ditto_io_peeks(enum ditto_io_call call, int fd, uint32_t n);
/* Sends the pieces with one call of `call`; write/sendto copy several pieces into w->stage. */
ssize_t ditto_io_send(struct ditto_worker *w, enum ditto_io_call call, int fd,
                      const struct iovec *iov, int iovcnt);
int ditto_set_cork(int fd, int on);

/* ---- conn.c: one client connection's buffers and request loop ---- */
enum ditto_seg_kind { DITTO_SEG_ARENA, DITTO_SEG_PTR, DITTO_SEG_FILE, DITTO_SEG_UNCORK };

struct ditto_seg {
    uint8_t kind;
    int fd;               /* FILE */
    uint64_t off;         /* ARENA: offset in the arena; FILE: offset in the file */
    const uint8_t *ptr;   /* PTR: stable bytes (pattern, literals) */
    uint64_t len;
};

struct ditto_conn {
    int fd;
    int blocking;
    uint8_t *in;
    size_t in_len;
    uint64_t discard;     /* body bytes still to skip before `pending` completes */
    int has_pending;
    int pending_kind;
    int pending_flags;
    struct ditto_seg *segs;
    uint32_t n_segs, head, segs_cap;
    uint8_t *arena;       /* response heads, built per request */
    size_t arena_len, arena_cap;
    int close_after;      /* close once the output has drained */
    int h2_indexed;       /* HTTP/2: the response headers are in the client's HPACK table */
    uint64_t h2_unacked;  /* HTTP/2: request DATA bytes received since the last WINDOW_UPDATE */
    int want_write;       /* output is blocked until the socket is writable */
    struct ditto_conn *prev, *next; /* the owning loop's list */
    size_t slot;          /* the owning loop's index (poll model) */
    uint32_t shutdowns;   /* shutdown() calls before close (ditto_config.conn_calls) */
};

enum ditto_flush { DITTO_FLUSH_DONE = 0, DITTO_FLUSH_WAIT = 1, DITTO_FLUSH_ERROR = -1 };

/* A connection on `fd`, served by `w`'s thread, which owes its calls per connection from now. */
struct ditto_conn *ditto_conn_new(struct ditto_worker *w, int fd, int blocking);
/* Shuts the socket down as often as the config's conn_calls say, then closes it. */
void ditto_conn_free(struct ditto_conn *c);
/* One receive call. Returns bytes read, 0 at end of stream, -1 on error, -2 for EAGAIN. */
ssize_t ditto_conn_read(struct ditto_conn *c, const struct ditto_rt *rt);
/* Parses every complete request in the buffer and queues its response. Returns -1 when the
 * connection must be closed right away. */
int ditto_conn_process(struct ditto_conn *c, struct ditto_worker *w);
/* Sends what is queued. Blocking connections send everything or fail. */
enum ditto_flush ditto_conn_flush(struct ditto_conn *c, struct ditto_worker *w);
/* Read, process, flush: what a blocking thread or a readiness event does. Returns 0 to keep the
 * connection, -1 to close it. */
int ditto_conn_on_readable(struct ditto_conn *c, struct ditto_worker *w);
int ditto_conn_on_writable(struct ditto_conn *c, struct ditto_worker *w);
/* Output queue, used by framing.c. */
int ditto_conn_push_arena(struct ditto_conn *c, const char *bytes, size_t len);
int ditto_conn_push_ptr(struct ditto_conn *c, const uint8_t *ptr, uint64_t len);
int ditto_conn_push_file(struct ditto_conn *c, const struct ditto_file_seg *seg);
int ditto_conn_push_uncork(struct ditto_conn *c);

/* ---- framing.c ---- */
enum ditto_req_kind {
    DITTO_REQ_MC_GET,     /* get/gets: one VALUE per key, then END */
    DITTO_REQ_MC_STORE,   /* set/add/replace/append/prepend/cas: body, then STORED */
    DITTO_REQ_MC_DELETE,
    DITTO_REQ_MC_VERSION,
    DITTO_REQ_MC_QUIT,
    DITTO_REQ_HTTP,
    DITTO_REQ_LP,
    DITTO_REQ_GRPC,       /* an HTTP/2 frame that ends a request stream: a unary gRPC call */
    DITTO_REQ_H2_CONTROL, /* any other HTTP/2 frame, or the preface: answered, not served */
    DITTO_REQ_ERROR,      /* a malformed request: reply `error_reply`, maybe close */
};

#define DITTO_REQF_NOREPLY 1u  /* memcached noreply */
#define DITTO_REQF_CLOSE 2u    /* close after the reply */
#define DITTO_REQF_HEAD 4u     /* HTTP HEAD: no body */
#define DITTO_REQF_HTTP10 8u   /* HTTP/1.0: keep-alive must be said explicitly */
#define DITTO_REQF_KEYED 16u   /* key_hash holds the request's class key (HTTP: the target) */

struct ditto_req {
    enum ditto_req_kind kind;
    unsigned flags;
    size_t head_len;      /* bytes of the head in the buffer */
    uint64_t body_len;    /* bytes after the head that belong to the request */
    size_t args_off, args_len; /* memcached get: the keys, within the head */
    const char *error_reply;
    /* HTTP/2: the frame's type (DITTO_H2_PREFACE for the connection preface), flags, stream and
     * payload length. The whole frame is the head. */
    uint8_t h2_type, h2_flags;
    uint32_t h2_stream, h2_len;
    uint64_t key_hash; /* with DITTO_REQF_KEYED */
};

#define DITTO_H2_PREFACE 0xffu

/* Returns 1 when a request head is complete (req filled), 0 when more bytes are needed,
 * -1 for a malformed request (req->kind == DITTO_REQ_ERROR). */
int ditto_frame_parse(enum ditto_framing framing, const uint8_t *buf, size_t len,
                      struct ditto_req *req);
/* Whether this request's response can carry sendfile segments. */
int ditto_frame_can_carry(const struct ditto_req *req);
/* Queues the response to `req`; `head` is the request head (still in the buffer). */
int ditto_frame_respond(struct ditto_conn *c, struct ditto_worker *w, const struct ditto_req *req,
                        const uint8_t *head, const struct ditto_plan *plan);

/* ---- listen.c ---- */
int ditto_listen(struct ditto_rt *rt, int nonblocking);
/* accept4 + TCP_NODELAY when configured. Returns the fd, -1 on error (errno set). */
int ditto_accept(const struct ditto_rt *rt, int nonblocking);

/* ---- net_*.c: each returns the process exit status ---- */
int ditto_net_thread_per_conn(struct ditto_rt *rt);
int ditto_net_poll(struct ditto_rt *rt);
int ditto_net_epoll_dispatch(struct ditto_rt *rt);
int ditto_net_epoll_single(struct ditto_rt *rt);
int ditto_net_prefork(struct ditto_rt *rt);
/* One thread serving the listening socket and its connections with epoll (the single model, and
 * each prefork worker process; exclusive: EPOLLEXCLUSIVE on the shared listening socket). */
int ditto_epoll_serve(struct ditto_rt *rt, int exclusive_accept);

/* ---- background.c ---- */
struct ditto_background;
struct ditto_background *ditto_background_start(const struct ditto_rt *rt);
void ditto_background_stop(struct ditto_background *bg);

/* ---- main.c: helpers shared by the models ---- */
/* A zeroed, page-aligned buffer of `bytes` (at least 64), every line written once, those of
 * `stream`'s first-touch region (struct ditto_cluster; NULL or 0 bytes: none) before the others;
 * NULL on failure. Freed with ditto_buffer_free and the same size. */
void *ditto_buffer_alloc(size_t bytes, const struct ditto_cluster *stream);
/* The parts of a buffer of n bytes in the order its set-up writes them: the stream's region
 * [first_lo rounded down to a line, + first_bytes) clipped to the buffer, then the lines below it,
 * then those above. The three cover [0, n) once; the first is empty where there is no stream. */
struct ditto_range {
    size_t lo, hi;
};
void ditto_buffer_order(size_t n, uint64_t first_lo, uint64_t first_bytes, struct ditto_range out[3]);
void ditto_buffer_free(void *p, size_t bytes);
/* Per-process setup after a prefork fork() or at start: shared buffer. */
int ditto_process_init(struct ditto_rt *rt);
void ditto_process_free(struct ditto_rt *rt);
/* Prints the "listening on ADDR:PORT" line scripts wait for. */
void ditto_announce(const struct ditto_rt *rt);

#endif
