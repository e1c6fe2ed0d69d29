#define _GNU_SOURCE
/* background.c - threads of BACKGROUND clusters: wake every period_us on an absolute monotonic
 * schedule (clock_nanosleep, like a timer thread of the original) and run their body. A period of
 * 0 makes an idle thread that only exists, like the idle helper threads many servers keep.
 *
 * They stop by cancellation: clock_nanosleep is a cancellation point and the only place the
 * thread blocks, so no wakeup fd or extra per-period system call is needed. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ditto_internal.h"

/* A background period that follows the load (ditto_cluster.period_us_second): the wakeup rate on
 * the line through the profiled and second loads' rates, re-estimated from the process's request
 * rate over windows of at least DITTO_RATE_WINDOW_NS. */
struct bg_pace {
    double hz_profiled, slope, hz_min, hz_max, profiled_rate, processes;
    struct ditto_rate_window window;
};

struct bg_thread {
    pthread_t thread;
    int started;
    const struct ditto_rt *rt;
    const struct ditto_cluster *cluster;
    uint64_t stream;
    struct ditto_worker w;
    int have_worker;
    /* In the thread's struct, not on its stack: bg_main's locals live across the cancellation
     * handler's setjmp. */
    struct bg_pace pace;
    int paced;
};

struct ditto_background {
    size_t n;
    struct bg_thread *threads;
};

static void free_worker(void *arg)
{
    struct bg_thread *t = arg;
    if (t->have_worker) {
        ditto_worker_free(&t->w);
        t->have_worker = 0;
    }
}

static int bg_pace_init(struct bg_pace *p, const struct ditto_config *cfg,
                        const struct ditto_cluster *cl)
{
    if (cl->period_us == 0 || cl->period_us_second == 0 || !(cfg->second_rate > 0.0) ||
        !(cfg->profiled_rate > 0.0) || cfg->second_rate == cfg->profiled_rate)
        return 0;
    double a = 1e6 / cl->period_us, b = 1e6 / cl->period_us_second;
    p->hz_profiled = a;
    p->slope = (b - a) / (cfg->second_rate - cfg->profiled_rate);
    /* Beyond the two loads the line is a guess: kept within half the lower rate and twice the
     * higher, so an idle or overloaded process neither stops its timer nor spins. */
    p->hz_min = 0.5 * (a < b ? a : b);
    p->hz_max = 2.0 * (a > b ? a : b);
    p->profiled_rate = cfg->profiled_rate;
    p->processes = cfg->processes > 0 ? (double)cfg->processes : 1.0;
    p->window.mark_ns = 0;
    return 1;
}

/* The period for the rate measured up to `now_ns`; `period_ns` unchanged until a window is full. */
static uint64_t bg_pace_period(struct bg_pace *p, uint64_t now_ns, uint64_t period_ns)
{
    double rate = ditto_rate_window_update(&p->window, now_ns, p->processes);
    if (rate < 0.0)
        return period_ns;
    double hz = p->hz_profiled + p->slope * (rate - p->profiled_rate);
    hz = hz < p->hz_min ? p->hz_min : hz > p->hz_max ? p->hz_max : hz;
    return (uint64_t)(1e9 / hz);
}

static void *bg_main(void *arg)
{
    struct bg_thread *t = arg;
    ditto_set_thread_name(t->cluster->name);
    /* No cancellation while the buffers are half made: the cleanup handler frees whole ones. */
    int old_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_state);
    int ok = ditto_worker_init(&t->w, t->rt, t->cluster, t->stream, 0) == 0;
    t->have_worker = ok;
    pthread_setcancelstate(old_state, NULL);
    pthread_cleanup_push(free_worker, t);
    if (ok) {
        uint64_t period_ns = (uint64_t)t->cluster->period_us * 1000u;
        t->paced = bg_pace_init(&t->pace, t->rt->cfg, t->cluster);
        double per_thread = t->cluster->calls_per_request / (double)(t->cluster->threads ? t->cluster->threads : 1);
        uint64_t seen = __atomic_load_n(&ditto_requests_served, __ATOMIC_RELAXED);
        double owed = 0.0;
        struct timespec next;
        clock_gettime(CLOCK_MONOTONIC, &next);
        for (;;) {
            if (period_ns == 0) {
                next.tv_sec += 3600;
            } else {
                uint64_t ns = (uint64_t)next.tv_nsec + period_ns;
                next.tv_sec += (time_t)(ns / 1000000000u);
                next.tv_nsec = (long)(ns % 1000000000u);
            }
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
                ;
            if (period_ns == 0)
                continue;
            if (t->paced)
                period_ns = bg_pace_period(
                    &t->pace, (uint64_t)next.tv_sec * 1000000000u + (uint64_t)next.tv_nsec, period_ns);
            if (per_thread <= 0.0) {
                ditto_worker_body(&t->w);
                continue;
            }
            /* Calls owed for the requests served since the last wakeup; bounded so that a burst
             * cannot make one wakeup run for long. */
            uint64_t now = __atomic_load_n(&ditto_requests_served, __ATOMIC_RELAXED);
            owed += (double)(int64_t)(now - seen) * per_thread; /* signed: a plain cvtsi2sd */
            seen = now;
            for (int n = 0; owed >= 1.0 && n < 64; n++) {
                ditto_worker_body(&t->w);
                owed -= 1.0;
            }
        }
    } else {
        ditto_warn("background thread of cluster '%s' could not start", t->cluster->name);
    }
    pthread_cleanup_pop(1);
    return NULL;
}

struct ditto_background *ditto_background_start(const struct ditto_rt *rt)
{
    const struct ditto_config *cfg = rt->cfg;
    struct ditto_background *bg = calloc(1, sizeof *bg);
    if (bg == NULL)
        return NULL;
    size_t total = 0;
    for (uint32_t i = 0; i < cfg->n_clusters; i++)
        if (cfg->clusters[i].role == DITTO_ROLE_BACKGROUND)
            total += cfg->clusters[i].threads;
    if (total == 0)
        return bg;
    bg->threads = calloc(total, sizeof *bg->threads);
    if (bg->threads == NULL) {
        free(bg);
        return NULL;
    }
    sigset_t old;
    ditto_block_stop_signals(&old);
    uint64_t stream = 1u << 20; /* apart from the serving threads' streams */
    for (uint32_t i = 0; i < cfg->n_clusters; i++) {
        const struct ditto_cluster *cl = &cfg->clusters[i];
        if (cl->role != DITTO_ROLE_BACKGROUND)
            continue;
        for (uint32_t k = 0; k < cl->threads; k++) {
            struct bg_thread *t = &bg->threads[bg->n++];
            t->rt = rt;
            t->cluster = cl;
            t->stream = stream++;
            if (pthread_create(&t->thread, NULL, bg_main, t) == 0)
                t->started = 1;
            else
                ditto_warn("cannot start background thread %u of '%s'", k, cl->name);
        }
    }
    ditto_restore_signals(&old);
    return bg;
}

void ditto_background_stop(struct ditto_background *bg)
{
    if (bg == NULL)
        return;
    for (size_t i = 0; i < bg->n; i++)
        if (bg->threads[i].started)
            pthread_cancel(bg->threads[i].thread);
    for (size_t i = 0; i < bg->n; i++)
        if (bg->threads[i].started)
            pthread_join(bg->threads[i].thread, NULL);
    free(bg->threads);
    free(bg);
}
