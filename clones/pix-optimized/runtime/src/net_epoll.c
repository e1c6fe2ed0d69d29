#define _GNU_SOURCE
/* net_epoll.c - the epoll models: one thread doing everything (DITTO_NET_EPOLL_SINGLE, and each
 * prefork worker process), or an acceptor thread handing connections round-robin to N epoll
 * worker threads (DITTO_NET_EPOLL_DISPATCH, memcached's model).
 *
 * Level-triggered, EPOLLIN only while a connection has nothing pending to send: per request the
 * loop makes at most one epoll_wait (fewer when events batch), one receive and one send, and no
 * epoll_ctl. Only a full socket buffer switches a connection to EPOLLOUT and back (two
 * epoll_ctl), as memcached does. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ditto_internal.h"

#define MAX_EVENTS 64

/* Tags in epoll_event.data.ptr for the fds that are not connections. */
static char tag_stop, tag_listen, tag_notify;

struct loop {
    struct ditto_rt *rt;
    int epfd;
    struct ditto_worker w;
    int have_worker;
    struct ditto_conn *conns; /* every open connection of this loop */
    /* DITTO_NET_EPOLL_DISPATCH: connections handed over by the acceptor. */
    int notify_fd;
    pthread_mutex_t mu;
    int *queue;
    size_t qlen, qcap;
    pthread_t thread;
    int started;
    uint32_t index;
    int failed;
};

static int ctl(int epfd, int op, int fd, uint32_t events, void *tag)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.ptr = tag;
    return epoll_ctl(epfd, op, fd, &ev);
}

static void link_conn(struct loop *L, struct ditto_conn *c)
{
    c->prev = NULL;
    c->next = L->conns;
    if (L->conns != NULL)
        L->conns->prev = c;
    L->conns = c;
}

static void close_conn(struct loop *L, struct ditto_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        L->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    /* close() also removes the fd from the epoll set: no epoll_ctl(DEL) needed. */
    ditto_conn_free(c);
}

static void add_conn(struct loop *L, int fd)
{
    struct ditto_conn *c = ditto_conn_new(&L->w, fd, 0);
    if (c == NULL) {
        close(fd);
        return;
    }
    if (ctl(L->epfd, EPOLL_CTL_ADD, fd, EPOLLIN, c) != 0) {
        ditto_conn_free(c);
        return;
    }
    link_conn(L, c);
}

static void on_conn_event(struct loop *L, struct ditto_conn *c, uint32_t events)
{
    int was_waiting = c->want_write;
    int rc;
    if (was_waiting) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        rc = ditto_conn_on_writable(c, &L->w);
    } else {
        if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)))
            return;
        rc = ditto_conn_on_readable(c, &L->w);
    }
    if (rc != 0) {
        close_conn(L, c);
        return;
    }
    if (c->want_write != was_waiting &&
        ctl(L->epfd, EPOLL_CTL_MOD, c->fd, c->want_write ? EPOLLOUT : EPOLLIN, c) != 0)
        close_conn(L, c);
}

static void take_handoffs(struct loop *L)
{
    uint64_t n;
    ssize_t r = read(L->notify_fd, &n, sizeof n);
    (void)r;
    pthread_mutex_lock(&L->mu);
    int *q = L->queue;
    size_t len = L->qlen;
    L->queue = NULL;
    L->qlen = L->qcap = 0;
    pthread_mutex_unlock(&L->mu);
    for (size_t i = 0; i < len; i++)
        add_conn(L, q[i]);
    free(q);
}

/* Accepts one connection per readiness event: the socket is level-triggered, so a backlog
 * wakes the loop again without a trailing accept() that fails with EAGAIN. */
static void accept_one(struct loop *L, struct ditto_worker *acceptor)
{
    int fd = ditto_accept(L->rt, 1);
    if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            ditto_warn("accept failed: %s", strerror(errno));
        return;
    }
    if (acceptor != NULL)
        ditto_worker_body(acceptor);
    add_conn(L, fd);
}

/* Serves until the stop fd fires. acceptor: body of the ACCEPTOR cluster when this loop also
 * accepts (NULL otherwise). */
static void serve(struct loop *L, struct ditto_worker *acceptor)
{
    struct epoll_event evs[MAX_EVENTS];
    int stop = 0;
    while (!stop) {
        int n = epoll_wait(L->epfd, evs, MAX_EVENTS, -1);
        ditto_wait_calls++;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            ditto_warn("epoll_wait failed: %s", strerror(errno));
            L->failed = 1;
            break;
        }
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &tag_stop)
                stop = 1;
            else if (tag == &tag_listen)
                accept_one(L, acceptor);
            else if (tag == &tag_notify)
                take_handoffs(L);
            else
                on_conn_event(L, tag, evs[i].events);
        }
    }
    while (L->conns != NULL)
        close_conn(L, L->conns);
}

static int loop_init(struct loop *L, struct ditto_rt *rt, uint32_t index)
{
    /* After this call loop_free() is always safe, whether or not the rest succeeded. */
    memset(L, 0, sizeof *L);
    L->rt = rt;
    L->index = index;
    L->notify_fd = -1;
    pthread_mutex_init(&L->mu, NULL);
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L->epfd < 0 || ctl(L->epfd, EPOLL_CTL_ADD, ditto_stop_fd(), EPOLLIN, &tag_stop) != 0) {
        ditto_warn("cannot set up epoll: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static void loop_free(struct loop *L)
{
    for (size_t i = 0; i < L->qlen; i++)
        close(L->queue[i]);
    free(L->queue);
    if (L->notify_fd >= 0)
        close(L->notify_fd);
    if (L->epfd >= 0)
        close(L->epfd);
    pthread_mutex_destroy(&L->mu);
}

int ditto_epoll_serve(struct ditto_rt *rt, int exclusive_accept)
{
    struct loop L;
    if (loop_init(&L, rt, 0) != 0) {
        loop_free(&L);
        return 1;
    }
    uint32_t lev = EPOLLIN | (exclusive_accept ? EPOLLEXCLUSIVE : 0);
    if (ctl(L.epfd, EPOLL_CTL_ADD, rt->listen_fd, lev, &tag_listen) != 0) {
        ditto_warn("cannot watch the listening socket: %s", strerror(errno));
        loop_free(&L);
        return 1;
    }
    struct ditto_worker acceptor;
    int have_acceptor = 0;
    int status = 1;
    if (ditto_worker_init(&L.w, rt, rt->worker_cluster, rt->process_index, 1) != 0)
        goto out;
    L.have_worker = 1;
    if (rt->acceptor_cluster != NULL) {
        if (ditto_worker_init(&acceptor, rt, rt->acceptor_cluster, 1u << 19, 0) != 0)
            goto out;
        have_acceptor = 1;
    }
    serve(&L, have_acceptor ? &acceptor : NULL);
    status = L.failed ? 1 : 0;
out:
    if (have_acceptor)
        ditto_worker_free(&acceptor);
    if (L.have_worker)
        ditto_worker_free(&L.w);
    loop_free(&L);
    return status;
}

int ditto_net_epoll_single(struct ditto_rt *rt)
{
    if (ditto_process_init(rt) != 0)
        return 1;
    struct ditto_background *bg = ditto_background_start(rt);
    ditto_announce(rt);
    int status = ditto_epoll_serve(rt, 0);
    ditto_background_stop(bg);
    ditto_process_free(rt);
    return status;
}

/* ---- DITTO_NET_EPOLL_DISPATCH ---- */

static void *worker_main(void *arg)
{
    struct loop *L = arg;
    ditto_set_thread_name(L->rt->worker_cluster != NULL ? L->rt->worker_cluster->name : "worker");
    if (ditto_worker_init(&L->w, L->rt, L->rt->worker_cluster, 1 + L->index, 1) != 0) {
        L->failed = 1;
        ditto_request_stop();
        return NULL;
    }
    L->have_worker = 1;
    serve(L, NULL);
    ditto_worker_free(&L->w);
    L->have_worker = 0;
    return NULL;
}

static int hand_over(struct loop *L, int fd)
{
    pthread_mutex_lock(&L->mu);
    if (L->qlen == L->qcap) {
        size_t cap = L->qcap ? L->qcap * 2 : 16;
        int *q = realloc(L->queue, sizeof *q * cap);
        if (q == NULL) {
            pthread_mutex_unlock(&L->mu);
            return -1;
        }
        L->queue = q;
        L->qcap = cap;
    }
    L->queue[L->qlen++] = fd;
    pthread_mutex_unlock(&L->mu);
    uint64_t one = 1;
    /* The eventfd wakes the worker, as memcached's notify pipe does (one write per accept). */
    ssize_t r = write(L->notify_fd, &one, sizeof one);
    (void)r;
    __atomic_fetch_add(&ditto_eventfd_writes, 1, __ATOMIC_RELAXED);
    return 0;
}

int ditto_net_epoll_dispatch(struct ditto_rt *rt)
{
    if (ditto_process_init(rt) != 0)
        return 1;
    uint32_t n = rt->workers;
    struct loop *loops = calloc(n, sizeof *loops);
    int status = 1;
    int acc_epfd = -1;
    struct ditto_worker acceptor;
    int have_acceptor = 0;
    struct ditto_background *bg = NULL;
    uint32_t ready = 0;
    if (loops == NULL)
        goto out;
    while (ready < n) {
        struct loop *L = &loops[ready++];
        if (loop_init(L, rt, ready - 1) != 0)
            goto out;
        L->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (L->notify_fd < 0 || ctl(L->epfd, EPOLL_CTL_ADD, L->notify_fd, EPOLLIN, &tag_notify) != 0) {
            ditto_warn("cannot set up worker %u: %s", ready - 1, strerror(errno));
            goto out;
        }
    }
    acc_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (acc_epfd < 0 || ctl(acc_epfd, EPOLL_CTL_ADD, ditto_stop_fd(), EPOLLIN, &tag_stop) != 0 ||
        ctl(acc_epfd, EPOLL_CTL_ADD, rt->listen_fd, EPOLLIN, &tag_listen) != 0) {
        ditto_warn("cannot set up the acceptor's epoll: %s", strerror(errno));
        goto out;
    }
    if (rt->acceptor_cluster != NULL) {
        if (ditto_worker_init(&acceptor, rt, rt->acceptor_cluster, 0, 0) != 0)
            goto out;
        have_acceptor = 1;
    }
    sigset_t old;
    ditto_block_stop_signals(&old);
    for (uint32_t i = 0; i < n; i++) {
        if (pthread_create(&loops[i].thread, NULL, worker_main, &loops[i]) != 0) {
            ditto_warn("cannot start worker thread %u of %u", i, n);
            ditto_request_stop();
            break;
        }
        loops[i].started = 1;
    }
    ditto_restore_signals(&old);
    bg = ditto_background_start(rt);
    ditto_announce(rt);

    /* The acceptor: the main thread, like memcached's. */
    struct epoll_event evs[8];
    uint32_t next = 0;
    int stop = 0;
    status = 0;
    while (!stop) {
        int k = epoll_wait(acc_epfd, evs, 8, -1);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            ditto_warn("epoll_wait failed: %s", strerror(errno));
            status = 1;
            break;
        }
        for (int i = 0; i < k; i++) {
            if (evs[i].data.ptr == &tag_stop) {
                stop = 1;
                continue;
            }
            int fd = ditto_accept(rt, 1);
            if (fd < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    ditto_warn("accept failed: %s", strerror(errno));
                continue;
            }
            if (have_acceptor)
                ditto_worker_body(&acceptor);
            if (hand_over(&loops[next], fd) != 0)
                close(fd);
            next = (next + 1) % n;
        }
    }
    /* Workers see the same stop fd; make sure it has fired even if we stopped on an error. */
    ditto_request_stop();
out:
    if (loops != NULL) {
        for (uint32_t i = 0; i < n; i++) {
            if (loops[i].started) {
                pthread_join(loops[i].thread, NULL);
                if (loops[i].failed)
                    status = 1;
            }
        }
        for (uint32_t i = 0; i < ready; i++)
            loop_free(&loops[i]);
        free(loops);
    }
    ditto_background_stop(bg);
    if (have_acceptor)
        ditto_worker_free(&acceptor);
    if (acc_epfd >= 0)
        close(acc_epfd);
    ditto_process_free(rt);
    return status;
}
