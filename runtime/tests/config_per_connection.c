/* config_per_connection.c - test clone whose extras have calls per connection besides their
 * calls per request (DITTO_NET_EPOLL_DISPATCH, two workers, receives by recvfrom): a sched_yield at
 * 0.1 per request and 5 per connection, and receives topped up to 1 per request and 10 per
 * connection, the worker's own receives included (the one per request, the end-of-stream one at
 * close). Runs with the same requests over more connections make more of both
 * (validation/load/tests/clone_runtime.rs checks them under strace). */
#include "test_common.h"

static const struct ditto_extra test_extras[] = {
    {DITTO_OP_SCHED_YIELD, 0.1, {0, NULL, NULL, NULL}, 0, -1.0, 5.0},
    {DITTO_OP_RECV_TOPUP, 1.0, {0, NULL, NULL, NULL}, 0, -1.0, 10.0},
};

static const struct ditto_cluster per_connection_clusters[] = {
    {"acceptor", DITTO_ROLE_ACCEPTOR, 1, test_acceptor_body, NULL, 0, 0.0, NULL, 0, 0, 0, 0},
    {"worker", DITTO_ROLE_WORKER, 2, test_body, test_body_init, 0, 0.0, test_warm, 3, 0, 2048, 2048},
};

const struct ditto_config ditto_clone_config = {
    .abi = DITTO_RUNTIME_ABI,
    .clone_name = "test-per-connection",
    .net_model = DITTO_NET_EPOLL_DISPATCH,
    .framing = TEST_FRAMING,
    .default_port = 21411,
    .processes = 1,
    .backlog = 128,
    .tcp_nodelay = 1,
    .recv_call = DITTO_IO_RECVFROM,
    .send_call = DITTO_IO_SENDMSG,
    .response_bytes = TEST_RESPONSE_BYTES,
    .extras = test_extras,
    .n_extras = sizeof test_extras / sizeof test_extras[0],
    .clusters = per_connection_clusters,
    .n_clusters = sizeof per_connection_clusters / sizeof per_connection_clusters[0],
    .priv_bytes = 4096,
    .shared_bytes = 4096,
    .data_file_bytes = 0,
    .data_files = 0,
    .seed = 46,
    .conn_calls = {0, 0, 0},
};
