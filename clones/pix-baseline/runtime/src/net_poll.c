#define _GNU_SOURCE
/* net_poll.c - DITTO_NET_NONBLOCKING: one thread, non-blocking sockets, poll().
 *
 * The pollfd array is rebuilt in user space from each connection's state (reading or waiting to
 * write), so switching interest costs no system call; per request: one poll (fewer when events
 * batch), one receive, one send. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ditto_internal.h"

struct poll_set {
    struct pollfd *pfds;       /* [0] stop fd, [1] listening socket, [2..] connections */
    struct ditto_conn **conns; /* conns[i] belongs to pfds[2 + i] */
    size_t n, cap;
};

static int grow(struct poll_set *s)
{
    if (s->n < s->cap)
        return 0;
    size_t cap = s->cap ? s->cap * 2 : 64;
    struct pollfd *p = realloc(s->pfds, sizeof *p * (cap + 2));
    if (p == NULL)
        return -1;
    s->pfds = p;
    struct ditto_conn **c = realloc(s->conns, sizeof *c * cap);
    if (c == NULL)
        return -1;
    s->conns = c;
    s->cap = cap;
    return 0;
}

static void drop(struct poll_set *s, size_t i)
{
    ditto_conn_free(s->conns[i]);
    s->n--;
    /* Move the last connection into the hole, with its revents, so it is still handled. */
    s->conns[i] = s->conns[s->n];
    s->pfds[2 + i] = s->pfds[2 + s->n];
}

int ditto_net_poll(struct ditto_rt *rt)
{
    if (ditto_process_init(rt) != 0)
        return 1;
    struct ditto_worker w, acceptor;
    int have_acceptor = 0, status = 1;
    struct poll_set s;
    memset(&s, 0, sizeof s);
    struct ditto_background *bg = NULL;
    if (ditto_worker_init(&w, rt, rt->worker_cluster, 0, 1) != 0) {
        ditto_process_free(rt);
        return 1;
    }
    if (rt->acceptor_cluster != NULL) {
        if (ditto_worker_init(&acceptor, rt, rt->acceptor_cluster, 1u << 19, 0) != 0)
            goto out;
        have_acceptor = 1;
    }
    if (grow(&s) != 0)
        goto out;
    bg = ditto_background_start(rt);
    ditto_announce(rt);
    status = 0;
    for (;;) {
        s.pfds[0].fd = ditto_stop_fd();
        s.pfds[0].events = POLLIN;
        s.pfds[1].fd = rt->listen_fd;
        s.pfds[1].events = POLLIN;
        for (size_t i = 0; i < s.n; i++) {
            s.pfds[2 + i].fd = s.conns[i]->fd;
            s.pfds[2 + i].events = s.conns[i]->want_write ? POLLOUT : POLLIN;
            s.pfds[2 + i].revents = 0;
        }
        int r = poll(s.pfds, (nfds_t)(2 + s.n), -1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            ditto_warn("poll failed: %s", strerror(errno));
            status = 1;
            break;
        }
        if (s.pfds[0].revents)
            break;
        for (size_t i = 0; i < s.n;) {
            short re = s.pfds[2 + i].revents;
            struct ditto_conn *c = s.conns[i];
            int rc = 0;
            if (c->want_write && (re & (POLLOUT | POLLERR | POLLHUP)))
                rc = ditto_conn_on_writable(c, &w);
            else if (!c->want_write && (re & (POLLIN | POLLERR | POLLHUP)))
                rc = ditto_conn_on_readable(c, &w);
            if (rc != 0) {
                drop(&s, i);
                continue;
            }
            i++;
        }
        if (s.pfds[1].revents & POLLIN) {
            /* One accept per wakeup: poll is level-triggered, a backlog wakes it again. */
            int fd = ditto_accept(rt, 1);
            if (fd >= 0) {
                if (have_acceptor)
                    ditto_worker_body(&acceptor);
                struct ditto_conn *c = grow(&s) == 0 ? ditto_conn_new(&w, fd, 0) : NULL;
                if (c == NULL) {
                    close(fd);
                } else {
                    s.conns[s.n++] = c;
                }
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                ditto_warn("accept failed: %s", strerror(errno));
            }
        }
    }
out:
    ditto_background_stop(bg);
    for (size_t i = 0; i < s.n; i++)
        ditto_conn_free(s.conns[i]);
    free(s.conns);
    free(s.pfds);
    if (have_acceptor)
        ditto_worker_free(&acceptor);
    ditto_worker_free(&w);
    ditto_process_free(rt);
    return status;
}
