#define _GNU_SOURCE
/* framing.c - where a request ends and what its response looks like, for each enum
 * ditto_framing. The clone speaks just enough of each protocol that the load generators used on
 * the original (ditto load, memaslap, wrk) drive the clone unchanged: they see well-formed
 * answers of the profiled sizes. Request bodies are never buffered, only counted past, so
 * memory per connection stays bounded whatever the client sends. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ditto_internal.h"

#define MC_MAX_LINE 2048        /* memcached's own limit is 2048 for a command line */
#define MC_MAX_KEY 250
#define HTTP_MAX_HEAD 16384
#define LP_MAX_REQUEST (1u << 30)

static const char MC_ERROR[] = "ERROR\r\n";
static const char MC_BAD_FORMAT[] = "CLIENT_ERROR bad command line format\r\n";
static const char MC_TOO_LONG[] = "CLIENT_ERROR line too long\r\n";
static const char HTTP_400[] =
    "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
static const char HTTP_431[] =
    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
static const char HTTP_501[] =
    "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

static int fail(struct ditto_req *req, size_t consumed, const char *reply, int close_conn)
{
    req->kind = DITTO_REQ_ERROR;
    req->head_len = consumed;
    req->error_reply = reply;
    req->flags = close_conn ? DITTO_REQF_CLOSE : 0;
    return -1;
}

/* ---- memcached text ---- */

/* Next space-separated token of [*p, end); returns its length, 0 at the end.
 *
 * Written for the branch profile as much as for speed: the skeleton runs on every request beside the
 * synthetic body, and its branches are part of what a profile of the clone sees. A byte loop makes
 * two branches per key byte with an exit every ~15 bytes (a bin real servers barely have), so the
 * token end is found with memchr, and the one separating space is its own test, which gives the same
 * outcome on every request at each call site (always inlined: every site has its own branches). */
static inline __attribute__((always_inline)) const uint8_t *skip_separator(const uint8_t *s,
                                                                           const uint8_t *end)
{
    if (s < end && *s == ' ')
        s++;
    if (__builtin_expect(s < end && *s == ' ', 0))
        while (s < end && *s == ' ')
            s++;
    return s;
}

static inline __attribute__((always_inline)) size_t token(const uint8_t **p, const uint8_t *end,
                                                          const uint8_t **start)
{
    const uint8_t *s = skip_separator(*p, end);
    *start = s;
    if (s >= end) {
        *p = end;
        return 0;
    }
    const uint8_t *space = memchr(s, ' ', (size_t)(end - s));
    *p = space != NULL ? space : end;
    return (size_t)(*p - s);
}

static int tok_is(const uint8_t *t, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(t, word, n) == 0;
}

static int tok_u64(const uint8_t *t, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(t[i] - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int mc_parse(const uint8_t *buf, size_t len, struct ditto_req *req)
{
    size_t scan = len < MC_MAX_LINE ? len : MC_MAX_LINE;
    const uint8_t *nl = memchr(buf, '\n', scan);
    if (nl == NULL)
        return len >= MC_MAX_LINE ? fail(req, len, MC_TOO_LONG, 1) : 0;
    size_t consumed = (size_t)(nl - buf) + 1;
    const uint8_t *end = nl;
    if (end > buf && end[-1] == '\r')
        end--;
    const uint8_t *p = buf, *cmd;
    size_t cmd_len = token(&p, end, &cmd);
    req->head_len = consumed;
    req->body_len = 0;
    req->flags = 0;
    req->error_reply = NULL;
    if (tok_is(cmd, cmd_len, "get") || tok_is(cmd, cmd_len, "gets")) {
        const uint8_t *first, *k;
        size_t n = token(&p, end, &first);
        if (n == 0)
            return fail(req, consumed, MC_ERROR, 0);
        if (n > MC_MAX_KEY)
            return fail(req, consumed, MC_BAD_FORMAT, 0);
        /* More keys (multi-get) take a loop of their own; a single get never enters it. */
        if (p < end)
            while ((n = token(&p, end, &k)) > 0)
                if (n > MC_MAX_KEY)
                    return fail(req, consumed, MC_BAD_FORMAT, 0);
        req->kind = DITTO_REQ_MC_GET;
        req->args_off = (size_t)(first - buf);
        req->args_len = (size_t)(end - first);
        return 1;
    }
    int is_cas = tok_is(cmd, cmd_len, "cas");
    if (is_cas || tok_is(cmd, cmd_len, "set") || tok_is(cmd, cmd_len, "add") ||
        tok_is(cmd, cmd_len, "replace") || tok_is(cmd, cmd_len, "append") ||
        tok_is(cmd, cmd_len, "prepend")) {
        const uint8_t *t[6];
        size_t n[6];
        int want = is_cas ? 5 : 4, got = 0;
        /* Key, flags, exptime and bytes are always there: four call sites, four fixed outcomes. */
        if ((n[0] = token(&p, end, &t[0])) > 0 && (n[1] = token(&p, end, &t[1])) > 0 &&
            (n[2] = token(&p, end, &t[2])) > 0 && (n[3] = token(&p, end, &t[3])) > 0) {
            got = 4;
            while (got < 6 && p < end && (n[got] = token(&p, end, &t[got])) > 0)
                got++;
        }
        uint64_t v, bytes;
        const uint8_t *extra;
        if (got < want || got > want + 1 || n[0] > MC_MAX_KEY || tok_u64(t[1], n[1], UINT32_MAX, &v) != 0 ||
            tok_u64(t[2], n[2], INT64_MAX, &v) != 0 ||
            tok_u64(t[3], n[3], INT32_MAX, &bytes) != 0 ||
            (is_cas && tok_u64(t[4], n[4], UINT64_MAX, &v) != 0) ||
            token(&p, end, &extra) > 0)
            return fail(req, consumed, MC_BAD_FORMAT, 0);
        if (got == want + 1) {
            if (!tok_is(t[want], n[want], "noreply"))
                return fail(req, consumed, MC_BAD_FORMAT, 0);
            req->flags |= DITTO_REQF_NOREPLY;
        }
        req->kind = DITTO_REQ_MC_STORE;
        req->body_len = bytes + 2; /* the data block and its CRLF */
        return 1;
    }
    if (tok_is(cmd, cmd_len, "delete")) {
        const uint8_t *k, *nr;
        size_t kn = token(&p, end, &k);
        size_t nn = token(&p, end, &nr);
        if (kn == 0 || kn > MC_MAX_KEY || (nn > 0 && !tok_is(nr, nn, "noreply")))
            return fail(req, consumed, MC_BAD_FORMAT, 0);
        if (nn > 0)
            req->flags |= DITTO_REQF_NOREPLY;
        req->kind = DITTO_REQ_MC_DELETE;
        return 1;
    }
    if (tok_is(cmd, cmd_len, "version")) {
        req->kind = DITTO_REQ_MC_VERSION;
        return 1;
    }
    if (tok_is(cmd, cmd_len, "quit")) {
        req->kind = DITTO_REQ_MC_QUIT;
        return 1;
    }
    return fail(req, consumed, MC_ERROR, 0);
}

/* ---- HTTP/1.1 ---- */

static const uint8_t *find_head_end(const uint8_t *buf, size_t len)
{
    for (size_t i = 3; i < len; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
            return buf + i + 1;
    return NULL;
}

static int is_tchar(uint8_t ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Case-insensitive: does the comma-separated header value list contain `token`? */
static int value_has(const uint8_t *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok), i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - s == tl && strncasecmp((const char *)v + s, tok, tl) == 0)
            return 1;
    }
    return 0;
}

static int http_parse(const uint8_t *buf, size_t len, struct ditto_req *req)
{
    size_t scan = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
    const uint8_t *head_end = find_head_end(buf, scan);
    if (head_end == NULL)
        return len >= HTTP_MAX_HEAD ? fail(req, len, HTTP_431, 1) : 0;
    size_t consumed = (size_t)(head_end - buf);
    const uint8_t *end = head_end - 2; /* the final CRLF ends the last header line */
    /* Request line: METHOD SP target SP HTTP/1.x CRLF */
    const uint8_t *p = buf;
    const uint8_t *eol = memchr(p, '\r', (size_t)(end - p));
    if (eol == NULL)
        return fail(req, consumed, HTTP_400, 1);
    const uint8_t *m = p;
    while (p < eol && is_tchar(*p))
        p++;
    size_t mlen = (size_t)(p - m);
    if (mlen == 0 || p >= eol || *p != ' ')
        return fail(req, consumed, HTTP_400, 1);
    const uint8_t *sp = memchr(p + 1, ' ', (size_t)(eol - p - 1));
    if (sp == NULL || sp == p + 1 || eol - sp - 1 != 8 || memcmp(sp + 1, "HTTP/1.", 7) != 0 ||
        (sp[8] != '0' && sp[8] != '1'))
        return fail(req, consumed, HTTP_400, 1);
    int minor = sp[8] - '0';
    int keep_alive = minor == 1;
    /* The request target names the request's class (its responses' sizes). */
    uint64_t key_hash = ditto_key_hash(p + 1, (size_t)(sp - p - 1));
    int have_length = 0;
    uint64_t length = 0;
    /* Headers. */
    p = eol + 2;
    while (p < end) {
        const uint8_t *le = memchr(p, '\r', (size_t)(end - p));
        if (le == NULL || le + 1 >= head_end || le[1] != '\n')
            return fail(req, consumed, HTTP_400, 1);
        const uint8_t *colon = memchr(p, ':', (size_t)(le - p));
        if (colon == NULL || colon == p)
            return fail(req, consumed, HTTP_400, 1);
        size_t nlen = (size_t)(colon - p);
        const uint8_t *v = colon + 1;
        while (v < le && (*v == ' ' || *v == '\t'))
            v++;
        const uint8_t *ve = le;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t vlen = (size_t)(ve - v);
        if (nlen == 14 && strncasecmp((const char *)p, "content-length", 14) == 0) {
            uint64_t n;
            if (tok_u64(v, vlen, (uint64_t)1 << 40, &n) != 0 || (have_length && n != length))
                return fail(req, consumed, HTTP_400, 1);
            have_length = 1;
            length = n;
        } else if (nlen == 17 && strncasecmp((const char *)p, "transfer-encoding", 17) == 0) {
            if (!(vlen == 8 && strncasecmp((const char *)v, "identity", 8) == 0))
                return fail(req, consumed, HTTP_501, 1);
        } else if (nlen == 10 && strncasecmp((const char *)p, "connection", 10) == 0) {
            if (value_has(v, vlen, "close"))
                keep_alive = 0;
            else if (value_has(v, vlen, "keep-alive"))
                keep_alive = 1;
        }
        p = le + 2;
    }
    req->kind = DITTO_REQ_HTTP;
    req->head_len = consumed;
    req->body_len = length;
    req->flags = DITTO_REQF_KEYED;
    req->key_hash = key_hash;
    req->error_reply = NULL;
    if (!keep_alive)
        req->flags |= DITTO_REQF_CLOSE;
    if (mlen == 4 && memcmp(m, "HEAD", 4) == 0)
        req->flags |= DITTO_REQF_HEAD;
    if (minor == 0)
        req->flags |= DITTO_REQF_HTTP10;
    return 1;
}

/* ---- length-prefixed ---- */

static int lp_parse(const uint8_t *buf, size_t len, struct ditto_req *req)
{
    if (len < 4)
        return 0;
    uint32_t n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
    if (n > LP_MAX_REQUEST)
        return fail(req, len, NULL, 1); /* no way to answer a desynchronised stream: close */
    req->kind = DITTO_REQ_LP;
    req->head_len = 4;
    req->body_len = n;
    req->flags = 0;
    req->error_reply = NULL;
    return 1;
}

/* ---- unary gRPC over HTTP/2 ----
 *
 * Frame by frame, with no stream state: the frame that ends a stream (DATA or HEADERS with
 * END_STREAM) is the request, whatever call it is; every other frame is control (settings, pings,
 * window updates, the request's HEADERS). Header blocks are never decoded: every call gets the
 * same answer. A gRPC client (ditto load's pix-grpc) then drives the clone exactly as it drives
 * the original, HTTP/2 and HPACK included, so client-side cost is the same on both sides. */

#define H2_FRAME_HEAD 9u
#define H2_MAX_FRAME 16384u /* SETTINGS_MAX_FRAME_SIZE's default; the clone never raises it */
#define H2_DATA 0u
#define H2_HEADERS 1u
#define H2_SETTINGS 4u
#define H2_PING 6u
#define H2_GOAWAY 7u
#define H2_WINDOW_UPDATE 8u
#define H2_END_STREAM 0x1u
#define H2_ACK 0x1u
#define H2_END_HEADERS 0x4u
/* Request DATA bytes after which the connection's receive window is topped up again. */
#define H2_WINDOW_TOPUP (1u << 30)

static const char H2_PREFACE_BYTES[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static int grpc_parse(const uint8_t *buf, size_t len, struct ditto_req *req)
{
    /* Only the preface starts with 'P': as a frame length, 0x50.... is far above H2_MAX_FRAME. */
    if (buf[0] == 'P') {
        size_t n = sizeof H2_PREFACE_BYTES - 1;
        if (memcmp(buf, H2_PREFACE_BYTES, len < n ? len : n) != 0)
            return fail(req, len, NULL, 1);
        if (len < n)
            return 0;
        req->kind = DITTO_REQ_H2_CONTROL;
        req->h2_type = DITTO_H2_PREFACE;
        req->head_len = n;
        return 1;
    }
    if (len < H2_FRAME_HEAD)
        return 0;
    uint32_t n = (uint32_t)buf[0] << 16 | (uint32_t)buf[1] << 8 | buf[2];
    if (n > H2_MAX_FRAME)
        return fail(req, len, NULL, 1); /* a peer breaking the frame size limit: close */
    if (len < H2_FRAME_HEAD + n)
        return 0;
    req->h2_type = buf[3];
    req->h2_flags = buf[4];
    req->h2_stream = ((uint32_t)buf[5] & 0x7fu) << 24 | (uint32_t)buf[6] << 16 |
                     (uint32_t)buf[7] << 8 | buf[8];
    req->h2_len = n;
    req->head_len = H2_FRAME_HEAD + n;
    int ends_stream = (req->h2_type == H2_DATA || req->h2_type == H2_HEADERS) &&
                      (req->h2_flags & H2_END_STREAM) && req->h2_stream != 0;
    req->kind = ends_stream ? DITTO_REQ_GRPC : DITTO_REQ_H2_CONTROL;
    if (req->h2_type == H2_GOAWAY)
        req->flags |= DITTO_REQF_CLOSE;
    return 1;
}

int ditto_frame_parse(enum ditto_framing framing, const uint8_t *buf, size_t len,
                      struct ditto_req *req)
{
    memset(req, 0, sizeof *req);
    if (len == 0)
        return 0;
    switch (framing) {
    case DITTO_FRAME_MEMCACHED_TEXT:
        return mc_parse(buf, len, req);
    case DITTO_FRAME_HTTP1:
        return http_parse(buf, len, req);
    case DITTO_FRAME_LENGTH_PREFIXED:
        return lp_parse(buf, len, req);
    case DITTO_FRAME_GRPC:
        return grpc_parse(buf, len, req);
    }
    return fail(req, len, NULL, 1);
}

int ditto_frame_can_carry(const struct ditto_req *req)
{
    switch (req->kind) {
    case DITTO_REQ_MC_GET:
    case DITTO_REQ_LP:
        return 1;
    case DITTO_REQ_HTTP:
        return !(req->flags & DITTO_REQF_HEAD);
    default:
        return 0;
    }
}

/* ---- responses ---- */

static uint64_t files_len(const struct ditto_plan *plan)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < plan->n_files; i++)
        n += plan->files[i].len;
    return n;
}

static int push_files(struct ditto_conn *c, const struct ditto_plan *plan)
{
    for (uint32_t i = 0; i < plan->n_files; i++)
        if (ditto_conn_push_file(c, &plan->files[i]) != 0)
            return -1;
    return 0;
}

/* Response lines are built by hand rather than with snprintf: the skeleton runs beside the synthetic
 * body on every request, and stdio's formatting machinery (about 600 instructions and dozens of
 * branches per line) would be skeleton cost the generator has to subtract from the original's. */
struct line_buf {
    char *at;
    char *end;
};

static void put_bytes(struct line_buf *b, const void *s, size_t n)
{
    size_t room = (size_t)(b->end - b->at);
    if (n > room)
        n = room;
    memcpy(b->at, s, n);
    b->at += n;
}

static void put_str(struct line_buf *b, const char *s)
{
    put_bytes(b, s, strlen(s));
}

/* Most significant digit first, by powers of ten. The digit count comes from the bit length (no
 * scan over the powers), so a number costs one short loop, as in any server's formatting; the
 * textbook last-digit-first loop is avoided because it compiles to the same bytes as other servers'
 * number formatting, which the confidentiality check would flag. */
static void put_u64(struct line_buf *b, uint64_t v)
{
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1);
    unsigned digits = ((bits * 1233u) >> 12) + 1; /* 1233/4096 ~ log10(2) */
    digits -= (unsigned)(v < pow10[digits - 1]) & (unsigned)(digits > 1);
    if ((size_t)(b->end - b->at) < digits)
        return;
    for (unsigned k = digits; k-- > 0;) {
        uint64_t q = v / pow10[k];
        *b->at++ = (char)('0' + q);
        v -= q * pow10[k];
    }
}

static int push_literal(struct ditto_conn *c, const char *s)
{
    return ditto_conn_push_ptr(c, (const uint8_t *)s, strlen(s));
}

static int mc_respond_get(struct ditto_conn *c, struct ditto_worker *w, const struct ditto_req *req,
                          const uint8_t *head, const struct ditto_plan *plan)
{
    const uint8_t *p = head + req->args_off, *end = p + req->args_len, *k;
    size_t kn;
    int first = 1;
    char line[MC_MAX_KEY + 64];
    while ((kn = token(&p, end, &k)) > 0) {
        /* The line was validated by the parser: after a key there is either nothing or another key
         * after spaces, so "last" is whether anything but spaces follows. */
        int last = skip_separator(p, end) >= end;
        uint64_t payload = first ? plan->payload : ditto_worker_payload(w);
        first = 0;
        /* The last value carries the sendfile segments; the last segment ends with the data
         * file's "\r\nEND\r\n", which is then not part of the value (worker.c). */
        uint64_t in_files = last ? files_len(plan) : 0;
        uint64_t value = payload + in_files;
        if (last && plan->n_files > 0)
            value -= DITTO_MEMCACHED_TRAILER_LEN;
        struct line_buf b = {line, line + sizeof line};
        put_str(&b, "VALUE ");
        put_bytes(&b, k, kn);
        put_str(&b, " 0 ");
        put_u64(&b, value);
        put_str(&b, "\r\n");
        if (ditto_conn_push_arena(c, line, (size_t)(b.at - line)) != 0 ||
            ditto_conn_push_ptr(c, w->rt->pattern, payload) != 0)
            return -1;
        if (last && plan->n_files > 0)
            return push_files(c, plan);
        if (last)
            return push_literal(c, "\r\nEND\r\n"); /* no further trip round the loop to find out */
        if (push_literal(c, "\r\n") != 0)
            return -1;
    }
    return 0;
}

static void put_be32(uint8_t *out, uint32_t v)
{
    out[0] = (uint8_t)(v >> 24);
    out[1] = (uint8_t)(v >> 16);
    out[2] = (uint8_t)(v >> 8);
    out[3] = (uint8_t)v;
}

static void h2_head(uint8_t *out, uint32_t len, uint8_t type, uint8_t flags, uint32_t stream)
{
    out[0] = (uint8_t)(len >> 16);
    out[1] = (uint8_t)(len >> 8);
    out[2] = (uint8_t)len;
    out[3] = type;
    out[4] = flags;
    put_be32(out + 5, stream & 0x7fffffffu);
}

static int h2_push_frame(struct ditto_conn *c, uint8_t type, uint8_t flags, uint32_t stream,
                         const void *payload, uint32_t len)
{
    uint8_t f[H2_FRAME_HEAD + 32];
    if (len > sizeof f - H2_FRAME_HEAD)
        return -1;
    h2_head(f, len, type, flags, stream);
    if (len > 0)
        memcpy(f + H2_FRAME_HEAD, payload, len);
    return ditto_conn_push_arena(c, (const char *)f, H2_FRAME_HEAD + len);
}

/* Counts request DATA against the connection's receive window and tops it up by what was used
 * once that passes H2_WINDOW_TOPUP (the preface's update opened it to the maximum): so a
 * window update is one frame per gigabyte, not one per request. */
static int h2_count_data(struct ditto_conn *c, uint32_t len)
{
    c->h2_unacked += len;
    if (c->h2_unacked < H2_WINDOW_TOPUP)
        return 0;
    uint8_t p[4];
    put_be32(p, (uint32_t)c->h2_unacked);
    c->h2_unacked = 0;
    return h2_push_frame(c, H2_WINDOW_UPDATE, 0, 0, p, 4);
}

static int h2_control(struct ditto_conn *c, const struct ditto_req *req, const uint8_t *head)
{
    switch (req->h2_type) {
    case DITTO_H2_PREFACE: {
        /* Our (empty: all defaults) settings, and the connection window opened to 2^31 - 1. */
        uint8_t p[4];
        put_be32(p, 0x7fffffffu - 65535u);
        if (h2_push_frame(c, H2_SETTINGS, 0, 0, NULL, 0) != 0)
            return -1;
        return h2_push_frame(c, H2_WINDOW_UPDATE, 0, 0, p, 4);
    }
    case H2_SETTINGS:
        return (req->h2_flags & H2_ACK) ? 0 : h2_push_frame(c, H2_SETTINGS, H2_ACK, 0, NULL, 0);
    case H2_PING:
        if ((req->h2_flags & H2_ACK) || req->h2_len != 8)
            return 0;
        return h2_push_frame(c, H2_PING, H2_ACK, 0, head + H2_FRAME_HEAD, 8);
    case H2_DATA:
        return h2_count_data(c, req->h2_len);
    default:
        return 0;
    }
}

static unsigned varint_len(uint64_t v)
{
    unsigned n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* A varint below 2^14 (messages stay under one 16 KiB frame), written out byte by byte: the
 * general encoding loop compiles to the same bytes as other servers' encoders, which the
 * confidentiality check would flag (nginx's did). */
static uint8_t *put_varint14(uint8_t *p, uint64_t v)
{
    if (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Writes at `p` the field heads of a protobuf message of exactly `message` bytes made of unknown
 * fields: field 15 (bytes) with `*pad` bytes of content, preceded by field 14 = 0 (2 bytes) where no
 * single field 15 has that size (130 bytes: a 127-byte field is 129, a 128-byte one 131). Returns
 * the end of the heads; below 2 bytes the message is empty (nothing written, `*pad` 0). */
static uint8_t *grpc_message_fields(uint8_t *p, uint64_t message, uint64_t *pad)
{
    *pad = 0;
    for (uint64_t lead = 0; lead <= 2; lead += 2) {
        for (unsigned vl = 1; vl <= 2; vl++) {
            if (message < lead + 1 + vl)
                break;
            uint64_t l = message - lead - 1 - vl;
            if (varint_len(l) != vl)
                continue;
            if (lead > 0) {
                *p++ = 14u << 3;
                *p++ = 0;
            }
            *p++ = 15u << 3 | 2u;
            *pad = l;
            return put_varint14(p, l);
        }
    }
    return p;
}

/* The response to one call: HEADERS (:status 200, content-type application/grpc), one DATA frame
 * with a gRPC message of `message` bytes, trailers (grpc-status 0). The message is a protobuf of
 * unknown fields only (numbers 14 and 15, which no message of the original's API needs to have),
 * so any response type decodes it, as its defaults. The first response on a connection puts the
 * two header fields in the client's HPACK table; later ones name them by index, as a server's
 * encoder does: 35 bytes of framing per response after the first. */
static int grpc_respond(struct ditto_conn *c, struct ditto_worker *w, const struct ditto_req *req,
                        const struct ditto_plan *plan)
{
    static const uint8_t first_headers[] = {0x88, 0x5f, 0x10, 'a', 'p', 'p', 'l', 'i', 'c', 'a',
                                            't',  'i',  'o',  'n', '/', 'g', 'r', 'p', 'c'};
    static const uint8_t first_trailers[] = {0x40, 0x0b, 'g', 'r', 'p', 'c', '-', 's', 't',
                                             'a',  't',  'u', 's', 0x01, '0'};
    /* Dynamic table after the first response: 62 grpc-status: 0, 63 content-type. */
    static const uint8_t next_headers[] = {0x88, 0xbf};
    static const uint8_t next_trailers[] = {0xbe};
    if (req->h2_type == H2_DATA && h2_count_data(c, req->h2_len) != 0)
        return -1;
    uint32_t stream = req->h2_stream;
    int first = !c->h2_indexed;
    c->h2_indexed = 1;
    const uint8_t *hb = first ? first_headers : next_headers;
    uint32_t hn = first ? (uint32_t)sizeof first_headers : (uint32_t)sizeof next_headers;
    if (h2_push_frame(c, H2_HEADERS, H2_END_HEADERS, stream, hb, hn) != 0)
        return -1;
    uint64_t message = plan->payload > H2_MAX_FRAME - 5 ? H2_MAX_FRAME - 5 : plan->payload;
    uint8_t m[H2_FRAME_HEAD + 5 + 2 + 1 + 2];
    uint8_t *fields = m + H2_FRAME_HEAD + 5;
    uint64_t pad;
    uint8_t *end = grpc_message_fields(fields, message, &pad);
    uint32_t mlen = (uint32_t)(end - fields) + (uint32_t)pad;
    h2_head(m, 5 + mlen, H2_DATA, 0, stream);
    m[H2_FRAME_HEAD] = 0; /* not compressed */
    put_be32(m + H2_FRAME_HEAD + 1, mlen);
    if (ditto_conn_push_arena(c, (const char *)m, (size_t)(end - m)) != 0 ||
        (pad > 0 && ditto_conn_push_ptr(c, w->rt->pattern, pad) != 0))
        return -1;
    const uint8_t *tb = first ? first_trailers : next_trailers;
    uint32_t tn = first ? (uint32_t)sizeof first_trailers : (uint32_t)sizeof next_trailers;
    return h2_push_frame(c, H2_HEADERS, H2_END_HEADERS | H2_END_STREAM, stream, tb, tn);
}

int ditto_frame_respond(struct ditto_conn *c, struct ditto_worker *w, const struct ditto_req *req,
                        const uint8_t *head, const struct ditto_plan *plan)
{
    char line[160];
    switch (req->kind) {
    case DITTO_REQ_MC_GET:
        return mc_respond_get(c, w, req, head, plan);
    case DITTO_REQ_MC_STORE:
        return (req->flags & DITTO_REQF_NOREPLY) ? 0 : push_literal(c, "STORED\r\n");
    case DITTO_REQ_MC_DELETE:
        return (req->flags & DITTO_REQF_NOREPLY) ? 0 : push_literal(c, "DELETED\r\n");
    case DITTO_REQ_MC_VERSION:
        return push_literal(c, "VERSION 1.6.0-ditto\r\n");
    case DITTO_REQ_HTTP: {
        int head_only = (req->flags & DITTO_REQF_HEAD) != 0;
        uint64_t body = plan->payload + (head_only ? 0 : files_len(plan));
        const char *conn_hdr = (req->flags & DITTO_REQF_CLOSE) ? "Connection: close\r\n"
                               : (req->flags & DITTO_REQF_HTTP10) ? "Connection: keep-alive\r\n"
                                                               : "";
        struct line_buf b = {line, line + sizeof line};
        put_str(&b, "HTTP/1.1 200 OK\r\nContent-Length: ");
        put_u64(&b, body);
        put_str(&b, "\r\n");
        put_str(&b, conn_hdr);
        put_str(&b, "\r\n");
        if (ditto_conn_push_arena(c, line, (size_t)(b.at - line)) != 0)
            return -1;
        if (head_only)
            return 0;
        if (ditto_conn_push_ptr(c, w->rt->pattern, plan->payload) != 0)
            return -1;
        return push_files(c, plan);
    }
    case DITTO_REQ_LP: {
        uint64_t body = plan->payload + files_len(plan);
        uint32_t be = body > UINT32_MAX ? UINT32_MAX : (uint32_t)body;
        char prefix[4] = {(char)(be >> 24), (char)(be >> 16), (char)(be >> 8), (char)be};
        if (ditto_conn_push_arena(c, prefix, 4) != 0 ||
            ditto_conn_push_ptr(c, w->rt->pattern, plan->payload) != 0)
            return -1;
        return push_files(c, plan);
    }
    case DITTO_REQ_GRPC:
        return grpc_respond(c, w, req, plan);
    case DITTO_REQ_H2_CONTROL:
        return h2_control(c, req, head);
    case DITTO_REQ_MC_QUIT:
    case DITTO_REQ_ERROR:
        return 0;
    }
    return 0;
}
