#define _GNU_SOURCE
/* syscalls.c - the extra per-request system calls (one emitter per enum ditto_extra_op) and the
 * calls that move request and response bytes.
 *
 * Each emitter makes exactly the calls its op names and nothing else, so the clone's count per
 * request is the configured per_request times the op's call count. Where glibc might pick a
 * different system call from one version to the next (fstat, clock_gettime through the vDSO),
 * the call is made with syscall(2) so the count does not depend on the libc. Failures are not
 * retried: the call has been made, which is what is being reproduced. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>

#include "ditto_internal.h"

__thread uint64_t ditto_recv_calls;
__thread uint64_t ditto_wait_calls;

static uint64_t op_bytes(struct ditto_worker *w, const struct ditto_extra *e)
{
    return e->bytes.bins ? ditto_dist_sample(&e->bytes, &w->rng) : DITTO_DEFAULT_OP_BYTES;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* A random offset at which `len` bytes fit below `limit`, 512-aligned like most file I/O. */
static uint64_t pick_offset(struct ditto_worker *w, uint64_t limit, uint64_t len)
{
    if (len >= limit)
        return 0;
    uint64_t off = ditto_rng_below(&w->rng, limit - len + 1);
    return off & ~(uint64_t)511;
}

static int pick_file(struct ditto_worker *w)
{
    const struct ditto_datadir *dd = &w->rt->data;
    return (int)ditto_rng_below(&w->rng, dd->nfiles);
}

void ditto_op_sendfile_seg(struct ditto_worker *w, uint64_t len, int tail, struct ditto_file_seg *seg)
{
    const struct ditto_datadir *dd = &w->rt->data;
    int i = pick_file(w);
    seg->fd = dd->fds[i];
    seg->len = min_u64(len, dd->file_bytes);
    seg->off = tail ? dd->file_bytes - seg->len : pick_offset(w, dd->file_bytes, seg->len);
}

static void op_open_fstat_close(struct ditto_worker *w)
{
    const struct ditto_datadir *dd = &w->rt->data;
    int fd = openat(dd->dir_fd, dd->names[pick_file(w)], O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    (void)syscall(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH);
    close(fd);
}

static void op_pread(struct ditto_worker *w, const struct ditto_extra *e)
{
    const struct ditto_datadir *dd = &w->rt->data;
    uint64_t len = min_u64(min_u64(op_bytes(w, e), dd->file_bytes), w->scratch_len);
    int fd = dd->fds[pick_file(w)];
    ssize_t r = pread(fd, w->scratch, (size_t)len, (off_t)pick_offset(w, dd->file_bytes, len));
    (void)r;
}

static void op_pwrite(struct ditto_worker *w, const struct ditto_extra *e)
{
    const struct ditto_datadir *dd = &w->rt->data;
    /* Never overwrite the memcached trailer at the end of each file. */
    uint64_t limit = dd->file_bytes > DITTO_MEMCACHED_TRAILER_LEN
                         ? dd->file_bytes - DITTO_MEMCACHED_TRAILER_LEN
                         : 0;
    uint64_t len = min_u64(min_u64(op_bytes(w, e), limit), w->rt->pattern_len);
    int fd = dd->fds[pick_file(w)];
    ssize_t r = pwrite(fd, w->rt->pattern, (size_t)len, (off_t)pick_offset(w, limit, len));
    (void)r;
}

static void op_pipe_rw(struct ditto_worker *w, const struct ditto_extra *e)
{
    uint64_t len = min_u64(min_u64(op_bytes(w, e), w->pipe_cap), w->scratch_len);
    len = min_u64(len, w->rt->pattern_len);
    ssize_t put = write(w->pipe_wr, w->rt->pattern, (size_t)len);
    /* Read back exactly what went in, so the pipe is empty again for the next op. A zero-byte
     * write still gets its read, to keep the pair. */
    size_t want = put > 0 ? (size_t)put : 0;
    ssize_t got = read(w->pipe_rd, w->scratch, want);
    (void)got;
}

void ditto_op_run(struct ditto_worker *w, const struct ditto_extra *e, uint64_t n)
{
    const struct ditto_datadir *dd = &w->rt->data;
    for (uint64_t k = 0; k < n; k++) {
        switch (e->op) {
        case DITTO_OP_OPEN_FSTAT_CLOSE:
            op_open_fstat_close(w);
            break;
        case DITTO_OP_FILE_PREAD:
            op_pread(w, e);
            break;
        case DITTO_OP_FILE_PWRITE:
            op_pwrite(w, e);
            break;
        case DITTO_OP_PIPE_RW:
            op_pipe_rw(w, e);
            break;
        case DITTO_OP_FUTEX_WAKE:
            /* What pthread_cond_signal costs when it has to wake the kernel; glibc skips the
             * syscall when it knows there is no waiter, so it is made directly. */
            (void)syscall(SYS_futex, &w->futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
            break;
        case DITTO_OP_GETTIME: {
            struct timespec ts;
            (void)syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
            break;
        }
        case DITTO_OP_FSYNC:
            (void)fdatasync(dd->fds[pick_file(w)]);
            break;
        case DITTO_OP_SCHED_YIELD:
            (void)sched_yield();
            break;
        case DITTO_OP_MPROTECT:
            (void)mprotect(w->page, (size_t)w->page_size, PROT_READ | PROT_WRITE);
            break;
        case DITTO_OP_EVENTFD_WRITE: {
            uint64_t one = 1;
            ssize_t r = write(w->event_fd, &one, sizeof one);
            (void)r;
            break;
        }
        case DITTO_OP_WAKEUP_TOPUP: {
            struct epoll_event ev;
            (void)epoll_wait(w->epoll_fd, &ev, 1, 0);
            ditto_wait_calls++;
            break;
        }
        case DITTO_OP_SENDFILE:
        case DITTO_OP_CORK:
        case DITTO_OP_RECV_TOPUP:
            /* Part of the response: the connection makes these calls (conn.c). */
            break;
        }
    }
}

int ditto_set_cork(int fd, int on)
{
    return setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

ssize_t ditto_io_recv(enum ditto_io_call call, int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n;
        ditto_recv_calls++;
        if (call == DITTO_IO_RECVFROM) {
            n = recvfrom(fd, buf, len, 0, NULL, NULL);
        } else if (call == DITTO_IO_RECVMSG) {
            struct iovec iov = {.iov_base = buf, .iov_len = len};
            struct msghdr m;
            memset(&m, 0, sizeof m);
            m.msg_iov = &iov;
            m.msg_iovlen = 1;
            n = recvmsg(fd, &m, 0);
        } else {
            n = read(fd, buf, len);
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n;
    }
}

void ditto_io_peeks(enum ditto_io_call call, int fd, uint32_t n)
{
    uint8_t byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    for (uint32_t i = 0; i < n; i++) {
        ditto_recv_calls++;
        if (call == DITTO_IO_RECVMSG)
            (void)recvmsg(fd, &m, MSG_PEEK | MSG_DONTWAIT);
        else
            (void)recvfrom(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT, NULL, NULL);
    }
}

/* write and sendto take one buffer: several pieces are copied into the thread's staging buffer
 * so that one response still costs one call. */
static const void *contiguous(struct ditto_worker *w, const struct iovec *iov, int iovcnt,
                              size_t *len)
{
    if (iovcnt == 1) {
        *len = iov[0].iov_len;
        return iov[0].iov_base;
    }
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total > w->stage_cap) {
        size_t cap = w->stage_cap ? w->stage_cap : 4096;
        while (cap < total)
            cap *= 2;
        uint8_t *p = realloc(w->stage, cap);
        if (p == NULL) {
            /* Fall back to the first piece: correct, one more call later. */
            *len = iov[0].iov_len;
            return iov[0].iov_base;
        }
        w->stage = p;
        w->stage_cap = cap;
    }
    size_t at = 0;
    for (int i = 0; i < iovcnt; i++) {
        memcpy(w->stage + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    *len = total;
    return w->stage;
}

ssize_t ditto_io_send(struct ditto_worker *w, enum ditto_io_call call, int fd,
                      const struct iovec *iov, int iovcnt)
{
    for (;;) {
        ssize_t n;
        if (call == DITTO_IO_WRITEV) {
            n = writev(fd, iov, iovcnt);
        } else if (call == DITTO_IO_SENDMSG) {
            struct msghdr m;
            memset(&m, 0, sizeof m);
            m.msg_iov = (struct iovec *)iov;
            m.msg_iovlen = (size_t)iovcnt;
            n = sendmsg(fd, &m, MSG_NOSIGNAL);
        } else {
            size_t len;
            const void *p = contiguous(w, iov, iovcnt, &len);
            n = call == DITTO_IO_SENDTO ? sendto(fd, p, len, MSG_NOSIGNAL, NULL, 0)
                                        : write(fd, p, len);
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n;
    }
}
