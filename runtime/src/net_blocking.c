#define _GNU_SOURCE
/* net_blocking.c - DITTO_NET_THREAD_PER_CONN: the main thread blocks in accept() and starts one
 * thread per connection, which blocks in its receive call. Per request: one receive, one send.
 *
 * Connection threads are joinable and joined (finished ones at the next accept, the rest at
 * shutdown) so every thread's stack and buffers are released before exit; at shutdown the
 * main thread shuts the remaining sockets down, which returns their threads from recv. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ditto_internal.h"

struct conn_thread {
    pthread_t thread;
    struct ditto_rt *rt;
    int fd;
    uint64_t stream;
    int done; /* under mu: the thread no longer uses fd (it may already be closed) */
    struct conn_thread *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn_thread *threads;

static void *conn_main(void *arg)
{
    struct conn_thread *t = arg;
    const struct ditto_rt *rt = t->rt;
    ditto_set_thread_name(rt->worker_cluster != NULL ? rt->worker_cluster->name : "conn");
    struct ditto_worker w;
    struct ditto_conn *c = NULL;
    if (ditto_worker_init(&w, rt, rt->worker_cluster, t->stream, 1) == 0) {
        c = ditto_conn_new(&w, t->fd, 1);
        if (c != NULL)
            while (ditto_conn_on_readable(c, &w) == 0)
                ;
        ditto_worker_free(&w);
    }
    /* Mark done before closing, so the main thread never shuts down a reused fd number. */
    pthread_mutex_lock(&mu);
    t->done = 1;
    pthread_mutex_unlock(&mu);
    if (c != NULL)
        ditto_conn_free(c);
    else
        close(t->fd);
    return NULL;
}

/* Joins and frees the threads that have finished. */
static void reap(int all)
{
    pthread_mutex_lock(&mu);
    struct conn_thread **pp = &threads, *done = NULL;
    while (*pp != NULL) {
        struct conn_thread *t = *pp;
        if (all || t->done) {
            *pp = t->next;
            t->next = done;
            done = t;
        } else {
            pp = &t->next;
        }
    }
    pthread_mutex_unlock(&mu);
    while (done != NULL) {
        struct conn_thread *t = done;
        done = t->next;
        pthread_join(t->thread, NULL);
        free(t);
    }
}

int ditto_net_thread_per_conn(struct ditto_rt *rt)
{
    if (ditto_process_init(rt) != 0)
        return 1;
    struct ditto_worker acceptor;
    int have_acceptor = 0, status = 0;
    if (rt->acceptor_cluster != NULL) {
        if (ditto_worker_init(&acceptor, rt, rt->acceptor_cluster, 0, 0) != 0) {
            ditto_process_free(rt);
            return 1;
        }
        have_acceptor = 1;
    }
    struct ditto_background *bg = ditto_background_start(rt);
    ditto_signals_set_shutdown_fd(rt->listen_fd);
    ditto_announce(rt);
    uint64_t accepted = 0;
    while (!ditto_stopping) {
        int fd = ditto_accept(rt, 0);
        if (fd < 0) {
            if (ditto_stopping)
                break;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: wait for connections to end instead of spinning. */
                ditto_warn("accept failed: %s (raise ulimit -n)", strerror(errno));
                reap(0);
                struct timespec pause = {0, 10 * 1000 * 1000};
                nanosleep(&pause, NULL);
                continue;
            }
            ditto_warn("accept failed: %s", strerror(errno));
            status = 1;
            break;
        }
        if (have_acceptor)
            ditto_worker_body(&acceptor);
        reap(0);
        struct conn_thread *t = calloc(1, sizeof *t);
        if (t == NULL) {
            close(fd);
            continue;
        }
        t->rt = rt;
        t->fd = fd;
        t->stream = 1 + accepted++;
        pthread_mutex_lock(&mu);
        t->next = threads;
        threads = t;
        pthread_mutex_unlock(&mu);
        sigset_t old;
        ditto_block_stop_signals(&old);
        int err = pthread_create(&t->thread, NULL, conn_main, t);
        ditto_restore_signals(&old);
        if (err != 0) {
            ditto_warn("cannot start a connection thread: %s", strerror(err));
            pthread_mutex_lock(&mu);
            threads = t->next;
            pthread_mutex_unlock(&mu);
            close(fd);
            free(t);
        }
    }
    ditto_signals_set_shutdown_fd(-1);
    pthread_mutex_lock(&mu);
    for (struct conn_thread *t = threads; t != NULL; t = t->next)
        if (!t->done)
            shutdown(t->fd, SHUT_RDWR);
    pthread_mutex_unlock(&mu);
    reap(1);
    ditto_background_stop(bg);
    if (have_acceptor)
        ditto_worker_free(&acceptor);
    ditto_process_free(rt);
    return status;
}
