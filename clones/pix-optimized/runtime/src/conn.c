#define _GNU_SOURCE
/* conn.c - one client connection: the read buffer, the request loop and the output queue.
 *
 * Every model drives connections through the same three entry points (readable, writable,
 * flush), so framing, body, extras and sends behave identically whichever model carries them.
 *
 * Per request the fast path makes one receive call and one send call: one read per readiness
 * event (no second read to see EAGAIN), all complete requests in the buffer are answered, and
 * their responses leave in one send of the configured kind (writev/sendmsg take the pieces as
 * they are; write/sendto get them copied together). Sendfile segments and cork toggles are queue
 * entries, so they happen in order with the bytes around them even when the socket is full. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ditto_internal.h"

#define MAX_IOV 64

struct ditto_conn *ditto_conn_new(struct ditto_worker *w, int fd, int blocking)
{
    const struct ditto_config *cfg = w->rt->cfg;
    struct ditto_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->fd = fd;
    c->blocking = blocking;
    c->shutdowns = cfg->conn_calls.shutdowns;
    c->in = malloc(DITTO_IN_BUFFER);
    c->segs_cap = 16;
    c->segs = malloc(sizeof *c->segs * c->segs_cap);
    c->arena_cap = 512;
    c->arena = malloc(c->arena_cap);
    if (c->in == NULL || c->segs == NULL || c->arena == NULL) {
        free(c->in);
        free(c->segs);
        free(c->arena);
        free(c);
        return NULL;
    }
    ditto_worker_conn_start(w);
    return c;
}

void ditto_conn_free(struct ditto_conn *c)
{
    if (c == NULL)
        return;
    for (uint32_t i = 0; i < c->shutdowns; i++)
        shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
    free(c->in);
    free(c->segs);
    free(c->arena);
    free(c);
}

static struct ditto_seg *new_seg(struct ditto_conn *c)
{
    if (c->n_segs == c->segs_cap) {
        uint32_t cap = c->segs_cap * 2;
        struct ditto_seg *s = realloc(c->segs, sizeof *s * cap);
        if (s == NULL)
            return NULL;
        c->segs = s;
        c->segs_cap = cap;
    }
    struct ditto_seg *s = &c->segs[c->n_segs++];
    memset(s, 0, sizeof *s);
    return s;
}

int ditto_conn_push_arena(struct ditto_conn *c, const char *bytes, size_t len)
{
    if (len == 0)
        return 0;
    if (c->arena_len + len > c->arena_cap) {
        size_t cap = c->arena_cap;
        while (cap < c->arena_len + len)
            cap *= 2;
        uint8_t *a = realloc(c->arena, cap);
        if (a == NULL)
            return -1;
        c->arena = a;
        c->arena_cap = cap;
    }
    memcpy(c->arena + c->arena_len, bytes, len);
    /* Extend the previous arena piece when contiguous: fewer iovecs per send. */
    struct ditto_seg *last = c->n_segs > c->head ? &c->segs[c->n_segs - 1] : NULL;
    if (last != NULL && last->kind == DITTO_SEG_ARENA && last->off + last->len == c->arena_len) {
        last->len += len;
    } else {
        struct ditto_seg *s = new_seg(c);
        if (s == NULL)
            return -1;
        s->kind = DITTO_SEG_ARENA;
        s->off = c->arena_len;
        s->len = len;
    }
    c->arena_len += len;
    return 0;
}

int ditto_conn_push_ptr(struct ditto_conn *c, const uint8_t *ptr, uint64_t len)
{
    if (len == 0)
        return 0;
    struct ditto_seg *s = new_seg(c);
    if (s == NULL)
        return -1;
    s->kind = DITTO_SEG_PTR;
    s->ptr = ptr;
    s->len = len;
    return 0;
}

int ditto_conn_push_file(struct ditto_conn *c, const struct ditto_file_seg *seg)
{
    struct ditto_seg *s = new_seg(c);
    if (s == NULL)
        return -1;
    s->kind = DITTO_SEG_FILE;
    s->fd = seg->fd;
    s->off = seg->off;
    s->len = seg->len;
    return 0;
}

int ditto_conn_push_uncork(struct ditto_conn *c)
{
    struct ditto_seg *s = new_seg(c);
    if (s == NULL)
        return -1;
    s->kind = DITTO_SEG_UNCORK;
    return 0;
}

ssize_t ditto_conn_read(struct ditto_conn *c, const struct ditto_rt *rt)
{
    /* Cannot happen: parsers refuse heads longer than the buffer and bodies are skipped as they
     * arrive, so processing always frees space. Treated as an error rather than a zero read. */
    if (c->in_len >= DITTO_IN_BUFFER)
        return -1;
    ssize_t n = ditto_io_recv(rt->cfg->recv_call, c->fd, c->in + c->in_len,
                              DITTO_IN_BUFFER - c->in_len);
    if (n > 0) {
        c->in_len += (size_t)n;
        return n;
    }
    if (n == 0)
        return 0;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return -2;
    return -1;
}

/* One complete request: body, extras, response. */
static int handle(struct ditto_conn *c, struct ditto_worker *w, const struct ditto_req *req,
                  const uint8_t *head)
{
    if (req->kind == DITTO_REQ_MC_QUIT) {
        c->close_after = 1;
        return 0;
    }
    if (req->kind == DITTO_REQ_H2_CONTROL) {
        if (req->flags & DITTO_REQF_CLOSE)
            c->close_after = 1;
        return ditto_frame_respond(c, w, req, head, NULL);
    }
    struct ditto_plan plan;
    ditto_worker_serve(w, ditto_request_class_of(w->rt->cfg, req), ditto_frame_can_carry(req),
                       &plan);
    for (uint32_t i = 0; i < plan.corks; i++)
        (void)ditto_set_cork(c->fd, 1);
    if (ditto_frame_respond(c, w, req, head, &plan) != 0)
        return -1;
    for (uint32_t i = 0; i < plan.corks; i++)
        if (ditto_conn_push_uncork(c) != 0)
            return -1;
    if (plan.peeks > 0)
        ditto_io_peeks(w->rt->cfg->recv_call, c->fd, plan.peeks);
    if (req->flags & DITTO_REQF_CLOSE)
        c->close_after = 1;
    return 0;
}

int ditto_conn_process(struct ditto_conn *c, struct ditto_worker *w)
{
    enum ditto_framing framing = w->rt->cfg->framing;
    size_t pos = 0;
    int rc = 0;
    while (!c->close_after) {
        if (c->has_pending) {
            uint64_t avail = c->in_len - pos;
            uint64_t take = c->discard < avail ? c->discard : avail;
            pos += (size_t)take;
            c->discard -= take;
            if (c->discard > 0)
                break;
            c->has_pending = 0;
            struct ditto_req req;
            memset(&req, 0, sizeof req);
            req.kind = (enum ditto_req_kind)c->pending_kind;
            req.flags = (unsigned)c->pending_flags;
            if (handle(c, w, &req, NULL) != 0) {
                rc = -1;
                break;
            }
            continue;
        }
        struct ditto_req req;
        int r = ditto_frame_parse(framing, c->in + pos, c->in_len - pos, &req);
        if (r == 0)
            break;
        if (r < 0) {
            if (req.error_reply != NULL &&
                ditto_conn_push_ptr(c, (const uint8_t *)req.error_reply,
                                    strlen(req.error_reply)) != 0) {
                rc = -1;
                break;
            }
            if (req.flags & DITTO_REQF_CLOSE)
                c->close_after = 1;
            pos += req.head_len;
            continue;
        }
        if (req.body_len > 0) {
            pos += req.head_len;
            c->has_pending = 1;
            c->pending_kind = (int)req.kind;
            c->pending_flags = (int)req.flags;
            c->discard = req.body_len;
            continue;
        }
        if (handle(c, w, &req, c->in + pos) != 0) {
            rc = -1;
            break;
        }
        pos += req.head_len;
        /* One request per read is the usual case: stop here instead of asking the parser about an
         * empty buffer, which would add a branch that flips on every request to the skeleton. */
        if (pos == c->in_len)
            break;
    }
    if (pos > 0) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
    return rc;
}

/* Drops `n` sent bytes from the front of the memory pieces starting at the queue head. */
static void advance(struct ditto_conn *c, size_t n)
{
    while (n > 0 && c->head < c->n_segs) {
        struct ditto_seg *s = &c->segs[c->head];
        size_t take = s->len < n ? (size_t)s->len : n;
        if (s->kind == DITTO_SEG_ARENA)
            s->off += take;
        else
            s->ptr += take;
        s->len -= take;
        n -= take;
        if (s->len == 0)
            c->head++;
    }
}

enum ditto_flush ditto_conn_flush(struct ditto_conn *c, struct ditto_worker *w)
{
    enum ditto_io_call call = w->rt->cfg->send_call;
    while (c->head < c->n_segs) {
        struct ditto_seg *s = &c->segs[c->head];
        if (s->kind == DITTO_SEG_UNCORK) {
            (void)ditto_set_cork(c->fd, 0);
            c->head++;
            continue;
        }
        if (s->kind == DITTO_SEG_FILE) {
            off_t off = (off_t)s->off;
            ssize_t n = sendfile(c->fd, s->fd, &off, (size_t)s->len);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return DITTO_FLUSH_WAIT;
                return DITTO_FLUSH_ERROR;
            }
            if (n == 0 && s->len > 0)
                return DITTO_FLUSH_ERROR; /* the file is shorter than it was made: give up */
            s->off += (uint64_t)n;
            s->len -= (uint64_t)n;
            if (s->len == 0)
                c->head++;
            else if (!c->blocking)
                return DITTO_FLUSH_WAIT; /* a short send means the socket buffer is full */
            continue;
        }
        struct iovec iov[MAX_IOV];
        int cnt = 0;
        size_t total = 0;
        for (uint32_t i = c->head; i < c->n_segs && cnt < MAX_IOV; i++) {
            const struct ditto_seg *p = &c->segs[i];
            if (p->kind != DITTO_SEG_ARENA && p->kind != DITTO_SEG_PTR)
                break;
            iov[cnt].iov_base = p->kind == DITTO_SEG_ARENA ? (void *)(c->arena + p->off)
                                                           : (void *)p->ptr;
            iov[cnt].iov_len = (size_t)p->len;
            total += (size_t)p->len;
            cnt++;
        }
        ssize_t n = ditto_io_send(w, call, c->fd, iov, cnt);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return DITTO_FLUSH_WAIT;
            return DITTO_FLUSH_ERROR;
        }
        if ((size_t)n == total && c->head + (uint32_t)cnt == c->n_segs)
            break; /* everything went out in one call, the usual case: no walk over the pieces */
        advance(c, (size_t)n);
        if ((size_t)n < total && !c->blocking)
            return DITTO_FLUSH_WAIT;
    }
    c->head = c->n_segs = 0;
    c->arena_len = 0;
    return DITTO_FLUSH_DONE;
}

static int after_output(struct ditto_conn *c, struct ditto_worker *w)
{
    enum ditto_flush f = ditto_conn_flush(c, w);
    if (f == DITTO_FLUSH_ERROR)
        return -1;
    c->want_write = f == DITTO_FLUSH_WAIT;
    if (!c->want_write && c->close_after)
        return -1;
    return 0;
}

int ditto_conn_on_readable(struct ditto_conn *c, struct ditto_worker *w)
{
    ssize_t n = ditto_conn_read(c, w->rt);
    if (n == -2)
        return 0;
    if (n <= 0)
        return -1;
    if (ditto_conn_process(c, w) != 0)
        return -1;
    return after_output(c, w);
}

int ditto_conn_on_writable(struct ditto_conn *c, struct ditto_worker *w)
{
    if (after_output(c, w) != 0)
        return -1;
    if (c->want_write)
        return 0;
    /* Requests may have arrived complete while we could not answer them. */
    if (c->in_len > 0) {
        if (ditto_conn_process(c, w) != 0)
            return -1;
        return after_output(c, w);
    }
    return 0;
}
