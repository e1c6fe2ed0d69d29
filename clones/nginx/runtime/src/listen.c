#define _GNU_SOURCE
/* listen.c - the listening socket and accepting connections. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ditto_internal.h"

int ditto_listen(struct ditto_rt *rt, int nonblocking)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) {
        ditto_warn("cannot create a socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    /* Restarting a clone right after stopping it must not fail on TIME_WAIT connections. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(rt->opts.port);
    inet_pton(AF_INET, rt->opts.bind, &addr.sin_addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        ditto_warn("cannot listen on %s:%u: %s (pick another --port, or stop what uses it)",
                   rt->opts.bind, (unsigned)rt->opts.port, strerror(errno));
        close(fd);
        return -1;
    }
    int backlog = rt->cfg->backlog > 0 ? (int)rt->cfg->backlog : 1024;
    if (listen(fd, backlog) != 0) {
        ditto_warn("cannot listen on %s:%u: %s", rt->opts.bind, (unsigned)rt->opts.port,
                   strerror(errno));
        close(fd);
        return -1;
    }
    socklen_t len = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        rt->port = ntohs(addr.sin_port);
    else
        rt->port = rt->opts.port;
    rt->listen_fd = fd;
    return 0;
}

int ditto_accept(const struct ditto_rt *rt, int nonblocking)
{
    for (;;) {
        int fd = accept4(rt->listen_fd, NULL, NULL, SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0));
        if (fd < 0) {
            /* A connection reset before we got to it is the client's business, not an error. */
            if (errno == EINTR && !ditto_stopping)
                continue;
            if (errno == ECONNABORTED)
                continue;
            return -1;
        }
        if (rt->cfg->tcp_nodelay) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        struct sockaddr_storage name;
        for (uint32_t i = 0; i < rt->cfg->conn_calls.peer_names; i++) {
            socklen_t len = sizeof name;
            (void)getpeername(fd, (struct sockaddr *)&name, &len);
        }
        for (uint32_t i = 0; i < rt->cfg->conn_calls.sock_names; i++) {
            socklen_t len = sizeof name;
            (void)getsockname(fd, (struct sockaddr *)&name, &len);
        }
        return fd;
    }
}
