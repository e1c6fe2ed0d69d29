#define _GNU_SOURCE
/* signals.c - turns SIGINT/SIGTERM into a stop every serving loop notices.
 *
 * The handler only sets a flag and writes an eventfd (both async-signal-safe). Every epoll or
 * poll set holds that eventfd; it is never read, so once written it stays readable and wakes
 * every loop that waits on it, now or later: no lost-wakeup race between checking the flag and
 * going to sleep. A blocking accept() cannot wait on an fd, so for that model the handler also
 * shuts the listening socket down, which makes accept() return at once. Serving threads block the
 * signals, so only the main thread is ever interrupted. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ditto_internal.h"

volatile sig_atomic_t ditto_stopping = 0;
static volatile sig_atomic_t stop_fd = -1;
static volatile sig_atomic_t shutdown_fd = -1;

static void notify(void)
{
    int saved = errno;
    ditto_stopping = 1;
    uint64_t one = 1;
    if (stop_fd >= 0) {
        ssize_t r = write(stop_fd, &one, sizeof one);
        (void)r; /* nothing to do if the counter is full: it is readable already */
    }
    if (shutdown_fd >= 0)
        shutdown(shutdown_fd, SHUT_RDWR);
    errno = saved;
}

static void on_signal(int sig)
{
    (void)sig;
    notify();
}

void ditto_request_stop(void)
{
    notify();
}

int ditto_signals_init(void)
{
    ditto_stopping = 0;
    shutdown_fd = -1;
    if (stop_fd >= 0)
        close(stop_fd);
    stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a blocked accept()/waitpid() in the main thread must return EINTR. */
    sa.sa_flags = 0;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    /* A peer that closes early must cost a failed send, not the whole process. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGPIPE, &ign, NULL) != 0)
        return -1;
    return 0;
}

int ditto_stop_fd(void)
{
    return stop_fd;
}

void ditto_signals_set_shutdown_fd(int fd)
{
    shutdown_fd = fd;
    if (ditto_stopping && fd >= 0)
        shutdown(fd, SHUT_RDWR);
}

void ditto_block_stop_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void ditto_restore_signals(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

void ditto_signals_close(void)
{
    if (stop_fd >= 0) {
        int fd = stop_fd;
        stop_fd = -1;
        close(fd);
    }
}
