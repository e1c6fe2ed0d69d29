/* config_contended.c - test clone for contended extras (DITTO_NET_EPOLL_DISPATCH, two workers): a
 * futex wake configured at 0.5 per request at a profiled 1000 req/s with requests 1 ms in flight,
 * where 1 - exp(-1) of them overlap. At 250 req/s, 1 - exp(-0.25) overlap, so the wakes fall to
 * 0.5 x 0.221 / 0.632 = 0.175 per request; at 1000 req/s they stay at 0.5
 * (validation/load/tests/clone_runtime.rs checks both under strace). Each connection also gets one
 * getpeername and getsockname after accept and one shutdown before close. */
#include "test_common.h"

static const struct ditto_extra test_extras[] = {
    {DITTO_OP_FUTEX_WAKE, 0.5, {0, NULL, NULL, NULL}, 1, -1.0, 0.0},
};

const struct ditto_config ditto_clone_config = {
    .abi = DITTO_RUNTIME_ABI,
    .clone_name = "test-contended",
    .net_model = DITTO_NET_EPOLL_DISPATCH,
    .framing = TEST_FRAMING,
    .default_port = 21400,
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
    .seed = 44,
    .profiled_rate = 1000.0,
    .in_flight_s = 0.001,
    .conn_calls = {1, 1, 1},
};
