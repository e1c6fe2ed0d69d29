/* config_extras.c - test clone with every extra op, single-threaded (DITTO_NET_EPOLL_SINGLE) so
 * the per-request counts are exact: validation/load/tests/clone_runtime.rs checks them under
 * strace against the table in docs/runtime.md. tcp_nodelay is off so that setsockopt counts only
 * the TCP_CORK pairs. Keep the per_request values in step with EXTRAS_EXPECTED in that test. */
#include "test_common.h"

/* sendfile: three quarters 1-2 KiB, a quarter 8-16 KiB. */
static const uint64_t sf_lo[] = {1024, 8192};
static const uint64_t sf_hi[] = {2048, 16384};
static const uint64_t sf_cum[] = {3, 4};
/* pread, pwrite, pipe: 512 B to 4 KiB. */
static const uint64_t io_lo[] = {512};
static const uint64_t io_hi[] = {4096};
static const uint64_t io_cum[] = {1};
#define SF {2, sf_lo, sf_hi, sf_cum}
#define IO {1, io_lo, io_hi, io_cum}
#define NONE {0, NULL, NULL, NULL}

static const struct ditto_extra test_extras[] = {
    {DITTO_OP_OPEN_FSTAT_CLOSE, 0.5, NONE, 0, -1.0, 0.0},
    {DITTO_OP_FILE_PREAD, 0.25, IO, 0, -1.0, 0.0},
    {DITTO_OP_FILE_PWRITE, 0.25, IO, 0, -1.0, 0.0},
    {DITTO_OP_SENDFILE, 1.0, SF, 0, -1.0, 0.0},
    {DITTO_OP_PIPE_RW, 0.3, IO, 0, -1.0, 0.0},
    {DITTO_OP_FUTEX_WAKE, 0.2, NONE, 0, -1.0, 0.0},
    {DITTO_OP_GETTIME, 1.5, NONE, 0, -1.0, 0.0},
    {DITTO_OP_FSYNC, 0.1, NONE, 0, -1.0, 0.0},
    {DITTO_OP_CORK, 1.0, NONE, 0, -1.0, 0.0},
    {DITTO_OP_SCHED_YIELD, 0.1, NONE, 0, -1.0, 0.0},
    {DITTO_OP_MPROTECT, 0.2, NONE, 0, -1.0, 0.0},
    {DITTO_OP_EVENTFD_WRITE, 0.1, NONE, 0, -1.0, 0.0},
    /* Totals: the loop's own one receive and (at most) one wakeup per request, topped up. */
    {DITTO_OP_RECV_TOPUP, 1.4, NONE, 0, -1.0, 0.0},
    {DITTO_OP_WAKEUP_TOPUP, 1.25, NONE, 0, -1.0, 0.0},
};

const struct ditto_config ditto_clone_config = {
    .abi = DITTO_RUNTIME_ABI,
    .clone_name = "test-extras",
    .net_model = DITTO_NET_EPOLL_SINGLE,
    .framing = TEST_FRAMING,
    .default_port = 21300,
    .processes = 1,
    .backlog = 128,
    .tcp_nodelay = 0,
    .recv_call = DITTO_IO_RECVFROM,
    .send_call = DITTO_IO_WRITEV,
    .response_bytes = TEST_RESPONSE_BYTES,
    .extras = test_extras,
    .n_extras = sizeof test_extras / sizeof test_extras[0],
    .clusters = test_clusters,
    .n_clusters = TEST_N_CLUSTERS,
    .priv_bytes = 4096,
    .shared_bytes = 4096,
    .data_file_bytes = 65536,
    .data_files = 4,
    .seed = 7,
};
