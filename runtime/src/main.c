#define _GNU_SOURCE
/* main.c - ditto_main: checks the generated config, parses flags, sets up what every model
 * shares (pattern bytes, data files, listening socket, signals) and hands over to the model. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ditto_internal.h"

/* Anonymous mappings, each line then written once (one byte per 64): the first-touch stream's
 * region of `stream` (a cluster, or NULL for none) first, then the rest in address order.
 *
 * Why the writes: they leave the caches and the resident pages as a memset would (every line touched,
 * every page faulted in before the first request), so a simulated cache sees the buffers as warm as
 * before. Without them, the lines a measured window touched first were compulsory misses: Pix
 * optimized's untuned clone measured an LLC miss rate of 0.695 against 0.368.
 * Why the stream's region first: its lines stand for the original's first touches, which miss every
 * cache. Written last in address order, the upper half of a 64 MiB buffer was what a 32 MiB last
 * level held when the first request came, and the private stream hit it on 37-45 % of its accesses
 * (Pix optimized, validation/bench/miss-attribution.sh), a share that moved with whatever else the
 * clone touched: the tuner then inflated the stream to make up its misses, and the L2's with it.
 * Written first, every other line of the buffer is younger than the stream's.
 * Why not memset: under cachegrind glibc's memset (`rep stosb` at these sizes) is one simulated store
 * per byte, 360 M instructions before the memcached clone listened on every simulated run; the line
 * writes are 1/64 of the stores.
 * Under AddressSanitizer the buffers stay heap blocks, so that an access one byte outside either end
 * is reported (a mapping has no redzones). */

void ditto_buffer_order(size_t n, uint64_t first_lo, uint64_t first_bytes, struct ditto_range out[3])
{
    size_t lo = first_lo < n ? (size_t)first_lo & ~(size_t)63 : n;
    size_t hi = first_bytes < n - lo ? lo + (size_t)first_bytes : n;
    out[0] = (struct ditto_range){lo, hi};
    out[1] = (struct ditto_range){0, lo};
    out[2] = (struct ditto_range){hi, n};
}

static void buffer_order(size_t n, const struct ditto_cluster *stream, struct ditto_range out[3])
{
    ditto_buffer_order(n, stream != NULL ? stream->first_touch_lo : 0,
                       stream != NULL ? stream->first_touch_bytes : 0, out);
}

#if defined(__SANITIZE_ADDRESS__)
void *ditto_buffer_alloc(size_t bytes, const struct ditto_cluster *stream)
{
    if (bytes > SIZE_MAX - 64)
        return NULL;
    size_t n = bytes < 64 ? 64 : (bytes + 63) & ~(size_t)63;
    uint8_t *p = aligned_alloc(64, n);
    if (p == NULL)
        return NULL;
    struct ditto_range order[3];
    buffer_order(n, stream, order);
    for (int i = 0; i < 3; i++)
        memset(p + order[i].lo, 0, order[i].hi - order[i].lo);
    return p;
}

void ditto_buffer_free(void *p, size_t bytes)
{
    (void)bytes;
    free(p);
}
#else
void *ditto_buffer_alloc(size_t bytes, const struct ditto_cluster *stream)
{
    size_t n = bytes < 64 ? 64 : bytes;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct ditto_range order[3];
    buffer_order(n, stream, order);
    for (int i = 0; i < 3; i++) {
        for (size_t off = order[i].lo; off < order[i].hi; off += 64)
            ((volatile uint8_t *)p)[off] = 0;
    }
    return p;
}

void ditto_buffer_free(void *p, size_t bytes)
{
    if (p != NULL)
        munmap(p, bytes < 64 ? 64 : bytes);
}
#endif

/* The first-touch stream's region of the shared buffer: every body with a stream has it at the
 * same place (the upper half of the largest buffer), so the first cluster that has one says. */
static const struct ditto_cluster *stream_cluster(const struct ditto_config *cfg)
{
    for (uint32_t i = 0; i < cfg->n_clusters; i++) {
        if (cfg->clusters[i].first_touch_bytes > 0)
            return &cfg->clusters[i];
    }
    return NULL;
}

int ditto_process_init(struct ditto_rt *rt)
{
    rt->shared = ditto_buffer_alloc(rt->cfg->shared_bytes, stream_cluster(rt->cfg));
    if (rt->shared == NULL) {
        ditto_warn("out of memory for the %zu-byte shared buffer", rt->cfg->shared_bytes);
        return -1;
    }
    return 0;
}

void ditto_process_free(struct ditto_rt *rt)
{
    ditto_buffer_free(rt->shared, rt->cfg->shared_bytes);
    rt->shared = NULL;
}

static int op_needs_files(enum ditto_extra_op op)
{
    return op == DITTO_OP_OPEN_FSTAT_CLOSE || op == DITTO_OP_FILE_PREAD ||
           op == DITTO_OP_FILE_PWRITE || op == DITTO_OP_SENDFILE || op == DITTO_OP_FSYNC;
}

static uint64_t op_max_bytes(const struct ditto_extra *e)
{
    uint64_t m = e->bytes.bins ? ditto_dist_max(&e->bytes) : DITTO_DEFAULT_OP_BYTES;
    return m > DITTO_MAX_PAYLOAD ? DITTO_MAX_PAYLOAD : m;
}

/* Why the generated config cannot run, or NULL. A message here is a generator bug. */
static const char *check_config(const struct ditto_config *cfg, char *buf, size_t len)
{
    if ((unsigned)cfg->net_model > DITTO_NET_PREFORK)
        return "net_model is not a known enum ditto_net_model value";
    if ((unsigned)cfg->framing > DITTO_FRAME_GRPC)
        return "framing is not a known enum ditto_framing value";
    if (cfg->recv_call != DITTO_IO_READ && cfg->recv_call != DITTO_IO_RECVFROM &&
        cfg->recv_call != DITTO_IO_RECVMSG)
        return "recv_call must be read, recvfrom or recvmsg";
    if (cfg->send_call != DITTO_IO_WRITE && cfg->send_call != DITTO_IO_SENDTO &&
        cfg->send_call != DITTO_IO_SENDMSG && cfg->send_call != DITTO_IO_WRITEV)
        return "send_call must be write, sendto, sendmsg or writev";
    const char *why = ditto_dist_check(&cfg->response_bytes);
    if (why != NULL) {
        snprintf(buf, len, "response_bytes: %s", why);
        return buf;
    }
    if (cfg->n_clusters > 0 && cfg->clusters == NULL)
        return "n_clusters > 0 but clusters is NULL";
    for (uint32_t i = 0; i < cfg->n_clusters; i++) {
        const struct ditto_cluster *cl = &cfg->clusters[i];
        if ((unsigned)cl->role > DITTO_ROLE_BACKGROUND) {
            snprintf(buf, len, "cluster %u has an unknown role", i);
            return buf;
        }
        if (cl->role == DITTO_ROLE_BACKGROUND && cl->threads > 1024) {
            snprintf(buf, len, "cluster %u asks for %u background threads (at most 1024)", i,
                     cl->threads);
            return buf;
        }
    }
    if (cfg->n_request_classes > 0 && cfg->request_classes == NULL)
        return "n_request_classes > 0 but request_classes is NULL";
    for (uint32_t i = 0; i < cfg->n_request_classes; i++) {
        const struct ditto_request_class *rc = &cfg->request_classes[i];
        if (!(rc->lo >= 0.0 && rc->lo <= rc->hi && rc->hi <= 1.0)) {
            snprintf(buf, len, "request class %u: its range must satisfy 0 <= lo <= hi <= 1", i);
            return buf;
        }
    }
    if (cfg->n_extras > 0 && cfg->extras == NULL)
        return "n_extras > 0 but extras is NULL";
    if (!isfinite(cfg->second_rate) || cfg->second_rate < 0)
        return "second_rate must be a non-negative number";
    for (uint32_t i = 0; i < cfg->n_extras; i++) {
        const struct ditto_extra *e = &cfg->extras[i];
        if ((unsigned)e->op > DITTO_OP_WAKEUP_TOPUP) {
            snprintf(buf, len, "extra %u has an unknown op %u", i, (unsigned)e->op);
            return buf;
        }
        if (!isfinite(e->per_request) || e->per_request < 0 ||
            e->per_request > DITTO_MAX_OPS_PER_REQUEST) {
            snprintf(buf, len, "extra %u: per_request must be within 0..%d", i,
                     DITTO_MAX_OPS_PER_REQUEST);
            return buf;
        }
        if (cfg->second_rate > 0 && (!isfinite(e->per_request_second) ||
                                     e->per_request_second > DITTO_MAX_OPS_PER_REQUEST)) {
            snprintf(buf, len, "extra %u: per_request_second must be at most %d (negative: none)",
                     i, DITTO_MAX_OPS_PER_REQUEST);
            return buf;
        }
        if ((why = ditto_dist_check(&e->bytes)) != NULL) {
            snprintf(buf, len, "extra %u bytes: %s", i, why);
            return buf;
        }
        /* An op counts as used when it runs at either load. */
        int used = e->per_request > 0 || (cfg->second_rate > 0 && e->per_request_second > 0);
        if (op_needs_files(e->op) && used &&
            (cfg->data_files == 0 || cfg->data_file_bytes == 0)) {
            snprintf(buf, len, "extra %u uses data files but data_files or data_file_bytes is 0",
                     i);
            return buf;
        }
        if (e->op == DITTO_OP_SENDFILE && used &&
            cfg->framing == DITTO_FRAME_MEMCACHED_TEXT &&
            cfg->data_file_bytes <= DITTO_MEMCACHED_TRAILER_LEN) {
            snprintf(buf, len, "extra %u: sendfile with memcached framing needs data files of at "
                               "least 8 bytes", i);
            return buf;
        }
    }
    return NULL;
}

/* The line through the profiled and the second load (rt->share_profiled, share_span_inv), where
 * the config has both. */
static void set_load_line(struct ditto_rt *rt)
{
    const struct ditto_config *cfg = rt->cfg;
    if (!(cfg->second_rate > 0.0 && cfg->profiled_rate > 0.0 && cfg->in_flight_s > 0.0))
        return;
    double at_profile = ditto_overlap_share(cfg->profiled_rate, cfg->in_flight_s);
    double at_second = ditto_overlap_share(cfg->second_rate, cfg->in_flight_s);
    /* Two loads with the same share give no line (and a division by almost nothing). */
    if (fabs(at_second - at_profile) > 1e-3) {
        rt->share_profiled = at_profile;
        rt->share_span_inv = 1.0 / (at_second - at_profile);
    }
}

/* Sizes of the shared pattern and of each thread's scratch buffer, from the distributions, and
 * what the extras need (pipe, eventfd, rate estimate, ...). After set_load_line. */
static void size_buffers(struct ditto_rt *rt)
{
    const struct ditto_config *cfg = rt->cfg;
    uint64_t pattern = ditto_dist_max(&cfg->response_bytes);
    for (uint32_t i = 0; i < cfg->n_extras; i++) {
        const struct ditto_extra *e = &cfg->extras[i];
        int has_second = ditto_extra_has_second(rt, e);
        if (e->per_request <= 0 && !(has_second && e->per_request_second > 0))
            continue;
        uint64_t m = op_max_bytes(e);
        if (has_second || (e->contended && cfg->in_flight_s > 0.0 && cfg->profiled_rate > 0.0))
            rt->need_rate = 1;
        switch (e->op) {
        case DITTO_OP_FILE_PWRITE:
            if (m > pattern)
                pattern = m;
            break;
        case DITTO_OP_PIPE_RW: {
            /* A pipe op moves at most what the pipe holds (64 KiB by default, 1 MiB at most
             * without privileges), so the buffers need no more. */
            uint64_t r = m < (1u << 20) ? m : (1u << 20);
            rt->need_pipe = 1;
            if (r > pattern)
                pattern = r;
            if (r > rt->max_scratch_bytes)
                rt->max_scratch_bytes = r;
            break;
        }
        case DITTO_OP_FILE_PREAD: {
            uint64_t r = m < cfg->data_file_bytes ? m : cfg->data_file_bytes;
            if (r > rt->max_scratch_bytes)
                rt->max_scratch_bytes = r;
            break;
        }
        case DITTO_OP_EVENTFD_WRITE:
            rt->need_eventfd = 1;
            break;
        case DITTO_OP_WAKEUP_TOPUP:
            rt->need_epoll = 1;
            break;
        case DITTO_OP_MPROTECT:
            rt->need_mprotect = 1;
            break;
        default:
            break;
        }
    }
    if (pattern > DITTO_MAX_PAYLOAD)
        pattern = DITTO_MAX_PAYLOAD;
    if (pattern < 4096)
        pattern = 4096;
    rt->pattern_len = (size_t)pattern;
}

static void fill_pattern(uint8_t *p, size_t n)
{
    /* Printable bytes, the same for every clone: responses are inspectable and compress like
     * text, and nothing of the original's data is ever needed. */
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)('a' + i % 26);
}

static void pick_clusters(struct ditto_rt *rt)
{
    const struct ditto_config *cfg = rt->cfg;
    for (uint32_t i = 0; i < cfg->n_clusters; i++) {
        const struct ditto_cluster *cl = &cfg->clusters[i];
        if (cl->role == DITTO_ROLE_WORKER && rt->worker_cluster == NULL)
            rt->worker_cluster = cl;
        if (cl->role == DITTO_ROLE_ACCEPTOR && rt->acceptor_cluster == NULL)
            rt->acceptor_cluster = cl;
    }
    uint32_t n;
    if (cfg->net_model == DITTO_NET_PREFORK)
        n = cfg->processes;
    else
        n = rt->worker_cluster != NULL ? rt->worker_cluster->threads : 1;
    if (rt->opts.threads > 0)
        n = rt->opts.threads;
    rt->workers = n == 0 ? 1 : n;
}

static int run_model(struct ditto_rt *rt)
{
    switch (rt->cfg->net_model) {
    case DITTO_NET_THREAD_PER_CONN:
        return ditto_net_thread_per_conn(rt);
    case DITTO_NET_NONBLOCKING:
        return ditto_net_poll(rt);
    case DITTO_NET_EPOLL_DISPATCH:
        return ditto_net_epoll_dispatch(rt);
    case DITTO_NET_EPOLL_SINGLE:
        return ditto_net_epoll_single(rt);
    case DITTO_NET_PREFORK:
        return ditto_net_prefork(rt);
    }
    return 1;
}

int ditto_main(int argc, char **argv, const struct ditto_config *config)
{
    const struct ditto_config *cfg = config;
    ditto_log_init(cfg->clone_name);
    if (cfg->abi != DITTO_RUNTIME_ABI) {
        ditto_warn("the config was generated for runtime ABI %u but this runtime is ABI %u: "
                   "regenerate the clone with the same ditto version",
                   cfg->abi, DITTO_RUNTIME_ABI);
        return 1;
    }
    char why_buf[256];
    const char *why = check_config(cfg, why_buf, sizeof why_buf);
    if (why != NULL) {
        ditto_warn("invalid generated config: %s (regenerate the clone; report this as a bug)", why);
        return 1;
    }
    struct ditto_rt rt;
    memset(&rt, 0, sizeof rt);
    rt.cfg = cfg;
    rt.listen_fd = -1;
    rt.data.dir_fd = -1;
    int r = ditto_cli_parse(argc, argv, cfg, &rt.opts);
    if (r == 1)
        return 0;
    if (r != 0)
        return 2;
    pick_clusters(&rt);
    set_load_line(&rt);
    size_buffers(&rt);

    int status = 1;
    rt.pattern = malloc(rt.pattern_len);
    if (rt.pattern == NULL) {
        ditto_warn("out of memory for %zu pattern bytes", rt.pattern_len);
        return 1;
    }
    fill_pattern(rt.pattern, rt.pattern_len);
    if (ditto_signals_init() != 0) {
        ditto_warn("cannot set up signal handling: %s", strerror(errno));
        goto out;
    }
    if (ditto_datadir_create(&rt.data, rt.opts.data_dir, cfg->clone_name, cfg->data_files,
                             cfg->data_file_bytes, rt.pattern, rt.pattern_len) != 0)
        goto out;
    /* Only the thread-per-connection model blocks in accept(); every other model multiplexes
     * the listening socket with its connections. */
    if (ditto_listen(&rt, cfg->net_model != DITTO_NET_THREAD_PER_CONN) != 0)
        goto out;
    status = run_model(&rt);
out:
    if (rt.listen_fd >= 0)
        close(rt.listen_fd);
    ditto_datadir_destroy(&rt.data, 1);
    ditto_signals_close();
    free(rt.pattern);
    return status;
}

/* Printed once the clone accepts connections; scripts and tests wait for this line. */
void ditto_announce(const struct ditto_rt *rt)
{
    fprintf(stderr, "listening on %s:%u\n", rt->opts.bind, (unsigned)rt->port);
}
