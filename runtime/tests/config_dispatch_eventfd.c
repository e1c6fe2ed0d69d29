/* config_dispatch_eventfd.c - test clone for DITTO_NET_EPOLL_DISPATCH with eventfd writes: the
 * accept hand-overs write the notify eventfd, and DITTO_OP_EVENTFD_WRITE makes the process's total
 * of such writes per_request x requests served, the hand-overs included
 * (validation/load/tests/clone_runtime.rs checks it under strace). */
#include "test_common.h"

static const struct ditto_extra test_extras[] = {
    {DITTO_OP_EVENTFD_WRITE, 0.02, {0, NULL, NULL, NULL}, 0, -1.0, 0.0},
};

const struct ditto_config ditto_clone_config = {
    .abi = DITTO_RUNTIME_ABI,
    .clone_name = "test-dispatch-eventfd",
    .net_model = DITTO_NET_EPOLL_DISPATCH,
    .framing = TEST_FRAMING,
    .default_port = 21300,
    .processes = 1,
    .backlog = 128,
    .tcp_nodelay = 1,
    .recv_call = DITTO_IO_READ,
    .send_call = DITTO_IO_SENDMSG,
    .response_bytes = TEST_RESPONSE_BYTES,
    .extras = test_extras,
    .n_extras = sizeof test_extras / sizeof test_extras[0],
    .clusters = test_clusters,
    .n_clusters = TEST_N_CLUSTERS,
    .priv_bytes = 4096,
    .shared_bytes = 4096,
    .data_file_bytes = 0,
    .data_files = 0,
    .seed = 43,
};
