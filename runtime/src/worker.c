#define _GNU_SOURCE
/* worker.c - the state one thread keeps (body context, private buffer, sampler, extra-op
 * accumulators) and what it does per request: body, extras, response plan. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ditto_internal.h"

void ditto_set_thread_name(const char *cluster_name)
{
    /* The kernel keeps 15 characters; the name is only for people reading top or perf. */
    char name[16];
    snprintf(name, sizeof name, "ditto-%s", cluster_name != NULL ? cluster_name : "thread");
    pthread_setname_np(pthread_self(), name);
}

int ditto_worker_init(struct ditto_worker *w, const struct ditto_rt *rt,
                      const struct ditto_cluster *cluster, uint64_t stream, int serving)
{
    const struct ditto_config *cfg = rt->cfg;
    memset(w, 0, sizeof *w);
    w->rt = rt;
    w->cluster = cluster;
    w->pipe_rd = w->pipe_wr = w->event_fd = w->epoll_fd = -1;
    w->rng = ditto_rng_seed(cfg->seed, stream);
    w->contention_scale = 1.0; /* the profiled load's, until a rate is measured */
    w->ctx.shared = rt->shared;
    w->ctx.stream = stream;
    w->ctx.priv = ditto_buffer_alloc(cfg->priv_bytes, cluster);
    if (w->ctx.priv == NULL) {
        ditto_warn("out of memory for a %zu-byte private buffer", cfg->priv_bytes);
        goto fail;
    }
    if (serving && cfg->n_extras > 0) {
        w->acc = calloc(cfg->n_extras, sizeof *w->acc);
        if (w->acc == NULL)
            goto fail;
        if (rt->need_pipe) {
            int p[2];
            if (pipe2(p, O_CLOEXEC) != 0) {
                ditto_warn("cannot create a pipe: %s", strerror(errno));
                goto fail;
            }
            w->pipe_rd = p[0];
            w->pipe_wr = p[1];
            /* The pipe is blocking and only this thread uses it: a write must fit whole, or the
             * thread would wait for itself. */
            int cap = fcntl(w->pipe_wr, F_GETPIPE_SZ);
            w->pipe_cap = cap > 0 ? (uint64_t)cap : 4096;
        }
        if (rt->need_eventfd) {
            w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            if (w->event_fd < 0) {
                ditto_warn("cannot create an eventfd: %s", strerror(errno));
                goto fail;
            }
        }
        if (rt->need_epoll) {
            w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
            if (w->epoll_fd < 0) {
                ditto_warn("cannot create an epoll instance: %s", strerror(errno));
                goto fail;
            }
        }
        if (rt->need_mprotect) {
            w->page_size = sysconf(_SC_PAGESIZE);
            w->page = mmap(NULL, (size_t)w->page_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (w->page == MAP_FAILED) {
                w->page = NULL;
                ditto_warn("cannot map a page: %s", strerror(errno));
                goto fail;
            }
        }
        if (rt->max_scratch_bytes > 0) {
            w->scratch_len = (size_t)rt->max_scratch_bytes;
            w->scratch = malloc(w->scratch_len);
            if (w->scratch == NULL) {
                ditto_warn("out of memory for a %zu-byte read buffer", w->scratch_len);
                goto fail;
            }
        }
    }
    if (cluster != NULL && cluster->body_init != NULL)
        cluster->body_init(&w->ctx);
    if (cluster != NULL && cluster->body != NULL)
        ditto_warm_regions(rt, cluster, w->ctx.priv);
    return 0;
fail:
    ditto_worker_free(w);
    return -1;
}

void ditto_worker_free(struct ditto_worker *w)
{
    if (w->ctx.priv != NULL)
        ditto_buffer_free(w->ctx.priv, w->rt->cfg->priv_bytes);
    free(w->acc);
    free(w->scratch);
    free(w->stage);
    if (w->pipe_rd >= 0)
        close(w->pipe_rd);
    if (w->pipe_wr >= 0)
        close(w->pipe_wr);
    if (w->event_fd >= 0)
        close(w->event_fd);
    if (w->epoll_fd >= 0)
        close(w->epoll_fd);
    if (w->page != NULL)
        munmap(w->page, (size_t)w->page_size);
    memset(w, 0, sizeof *w);
    w->pipe_rd = w->pipe_wr = w->event_fd = w->epoll_fd = -1;
}

uint64_t ditto_requests_served;
uint64_t ditto_eventfd_writes;

/* Counts stay far below 2^63, so they convert as signed: one cvtsi2sd. The unsigned conversion is a
 * compiler idiom (shift, or, convert, double) common enough that originals contain it byte for byte,
 * and the confidentiality check rejected a clone for it (nginx, 26-34 byte runs). */
static inline double count_to_double(uint64_t n)
{
    return (double)(int64_t)n;
}

/* Calls owed to bring `made` up to `want`, at most DITTO_MAX_OPS_PER_REQUEST at once. The epsilon
 * absorbs binary rounding of the product per_request x requests. */
static uint64_t owed_calls(double want, uint64_t made)
{
    double have = count_to_double(made);
    uint64_t owed = want > have ? (uint64_t)(want - have + 1e-9) : 0;
    return owed > DITTO_MAX_OPS_PER_REQUEST ? DITTO_MAX_OPS_PER_REQUEST : owed;
}

/* Eventfd writes owed now by the process (see ditto_eventfd_writes), claimed by this thread. The
 * compare-and-swap keeps two workers that compute the same debt from both paying it. */
static uint64_t claim_eventfd_writes(double per_request)
{
    double want =
        per_request * count_to_double(__atomic_load_n(&ditto_requests_served, __ATOMIC_RELAXED));
    uint64_t made = __atomic_load_n(&ditto_eventfd_writes, __ATOMIC_RELAXED);
    for (;;) {
        uint64_t owed = owed_calls(want, made);
        if (owed == 0)
            return 0;
        if (__atomic_compare_exchange_n(&ditto_eventfd_writes, &made, made + owed, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return owed;
    }
}

double ditto_overlap_share(double rate, double in_flight_s)
{
    return 1.0 - exp(-rate * in_flight_s);
}

/* Re-estimates the contended extras' scale and the position on the two loads' line from the
 * process's request rate over the last window of at least DITTO_RATE_WINDOW_NS (checked every
 * DITTO_RATE_CHECK requests of this thread, so the clock is read rarely). The window starts at this
 * thread's first request, not at start-up, so that the idle time before a load does not count as a
 * low rate. Each process serves its share of the load: its rate times the processes is the total
 * the profiled rate was. */
double ditto_rate_window_update(struct ditto_rate_window *r, uint64_t now_ns, double processes)
{
    uint64_t served = __atomic_load_n(&ditto_requests_served, __ATOMIC_RELAXED);
    if (r->mark_ns == 0 || now_ns < r->mark_ns) {
        r->mark_ns = now_ns;
        r->mark_served = served;
        return -1.0;
    }
    uint64_t elapsed = now_ns - r->mark_ns;
    if (elapsed < DITTO_RATE_WINDOW_NS)
        return -1.0;
    double rate = count_to_double(served - r->mark_served) * processes /
                  (count_to_double(elapsed) * 1e-9);
    r->mark_ns = now_ns;
    r->mark_served = served;
    return rate;
}

static void update_load(struct ditto_worker *w, const struct ditto_config *cfg)
{
    if (!w->rt->need_rate)
        return;
    if (w->rate.mark_ns != 0 && (++w->rate_tick % DITTO_RATE_CHECK) != 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    double rate = ditto_rate_window_update(&w->rate, now,
                                           cfg->processes > 0 ? (double)cfg->processes : 1.0);
    if (rate < 0.0)
        return;
    /* need_rate: both profiled figures are positive, so the share at the profile is too. */
    double share = ditto_overlap_share(rate, cfg->in_flight_s);
    w->contention_scale = share / ditto_overlap_share(cfg->profiled_rate, cfg->in_flight_s);
    w->load_t = (share - w->rt->share_profiled) * w->rt->share_span_inv;
}

/* The extra's count per request at the current load: on the line through the two loads where the
 * profile measured both, else the profiled count (scaled by the overlap share if contended). */
static double extra_per_request(const struct ditto_worker *w, const struct ditto_extra *e)
{
    if (ditto_extra_has_second(w->rt, e)) {
        double v = e->per_request + (e->per_request_second - e->per_request) * w->load_t;
        return v < 0.0 ? 0.0 : v > DITTO_MAX_OPS_PER_REQUEST ? DITTO_MAX_OPS_PER_REQUEST : v;
    }
    return e->contended ? e->per_request * w->contention_scale : e->per_request;
}

void ditto_worker_conn_start(struct ditto_worker *w)
{
    /* A top-up's count includes the connection's own end-of-stream receive or wake, which comes
     * after its last request's top-up: it counts towards the next connections' calls instead, so a
     * thread's first connections make one call more each and every later run as many as wanted. */
    const struct ditto_config *cfg = w->rt->cfg;
    for (uint32_t i = 0; i < cfg->n_extras; i++)
        w->acc[i] += cfg->extras[i].per_connection;
}

void ditto_worker_body(struct ditto_worker *w)
{
    if (w->cluster != NULL && w->cluster->body != NULL)
        w->cluster->body(&w->ctx);
    w->ctx.request++;
}

const struct ditto_request_class *ditto_request_class_of(const struct ditto_config *cfg,
                                                        const struct ditto_req *req)
{
    if (!(req->flags & DITTO_REQF_KEYED))
        return NULL;
    for (uint32_t i = 0; i < cfg->n_request_classes; i++)
        if (cfg->request_classes[i].key_hash == req->key_hash)
            return &cfg->request_classes[i];
    return NULL;
}

/* A payload drawn at a quantile in [lo, hi), cut to the pattern buffer. */
static uint64_t payload_in(struct ditto_worker *w, double lo, double hi)
{
    uint64_t n = ditto_dist_sample_in(&w->rt->cfg->response_bytes, &w->rng, lo, hi);
    return n > w->rt->pattern_len ? w->rt->pattern_len : n;
}

uint64_t ditto_worker_payload(struct ditto_worker *w)
{
    return payload_in(w, 0.0, 1.0);
}

void ditto_worker_serve(struct ditto_worker *w, const struct ditto_request_class *cls,
                        int can_carry, struct ditto_plan *plan)
{
    const struct ditto_config *cfg = w->rt->cfg;
    /* The request's class draws its sizes from its own quantile range; others from all. */
    double lo = cls != NULL ? cls->lo : 0.0, hi = cls != NULL ? cls->hi : 1.0;
    plan->payload = 0;
    plan->n_files = 0;
    plan->corks = 0;
    plan->peeks = 0;
    __atomic_fetch_add(&ditto_requests_served, 1, __ATOMIC_RELAXED);
    update_load(w, cfg);
    ditto_worker_body(w);
    plan->payload = payload_in(w, lo, hi);
    uint64_t body_room = UINT32_MAX - plan->payload;
    for (uint32_t i = 0; i < cfg->n_extras; i++) {
        const struct ditto_extra *e = &cfg->extras[i];
        double per = extra_per_request(w, e);
        if (e->op == DITTO_OP_RECV_TOPUP || e->op == DITTO_OP_WAKEUP_TOPUP) {
            /* Top-ups compare totals: the accumulator holds the calls this thread's requests want,
             * and the model's own calls count towards them. The connection makes the receives
             * after the response is queued (conn.c). */
            w->acc[i] += per;
            uint64_t made = e->op == DITTO_OP_RECV_TOPUP ? ditto_recv_calls : ditto_wait_calls;
            uint64_t owed = owed_calls(w->acc[i], made);
            if (e->op == DITTO_OP_RECV_TOPUP)
                plan->peeks += (uint32_t)owed;
            else
                ditto_op_run(w, e, owed);
            continue;
        }
        if (e->op == DITTO_OP_EVENTFD_WRITE) {
            ditto_op_run(w, e, claim_eventfd_writes(per));
            continue;
        }
        /* The accumulator realises fractional means exactly over a run: with 0.25 per request
         * every fourth request does the op. The epsilon absorbs binary rounding of sums such as
         * 0.1 + 0.1 + ... so that ten of them make one op, not zero. */
        w->acc[i] += per;
        uint64_t n = (uint64_t)(w->acc[i] + 1e-9);
        if (n == 0)
            continue;
        if (e->op == DITTO_OP_SENDFILE) {
            if (!can_carry) {
                /* Deferred to the next response that can carry it; bounded so a long run of
                 * such requests cannot build an unbounded backlog. */
                if (w->acc[i] > DITTO_MAX_FILE_SEGS)
                    w->acc[i] = DITTO_MAX_FILE_SEGS;
                continue;
            }
            uint32_t room = DITTO_MAX_FILE_SEGS - plan->n_files;
            if (n > room)
                n = room;
            for (uint64_t k = 0; k < n; k++) {
                uint64_t len = e->bytes.bins ? ditto_dist_sample_in(&e->bytes, &w->rng, lo, hi)
                                             : DITTO_DEFAULT_OP_BYTES;
                struct ditto_file_seg *seg = &plan->files[plan->n_files];
                ditto_op_sendfile_seg(w, len, 0, seg);
                /* A length prefix is 32 bits: a response must stay below 4 GiB. */
                if (body_room < seg->len)
                    break;
                body_room -= seg->len;
                plan->n_files++;
            }
        } else if (e->op == DITTO_OP_CORK) {
            plan->corks += (uint32_t)n;
        } else {
            ditto_op_run(w, e, n);
        }
        w->acc[i] -= (double)(int64_t)n;
    }
    if (plan->n_files > 0 && cfg->framing == DITTO_FRAME_MEMCACHED_TEXT) {
        /* The value must end with the file's last bytes, which hold "\r\nEND\r\n". */
        struct ditto_file_seg *last = &plan->files[plan->n_files - 1];
        uint64_t len = last->len < DITTO_MEMCACHED_TRAILER_LEN ? DITTO_MEMCACHED_TRAILER_LEN
                                                               : last->len;
        ditto_op_sendfile_seg(w, len, 1, last);
    }
}
