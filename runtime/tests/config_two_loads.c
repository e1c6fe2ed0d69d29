/* config_two_loads.c - test clone for a profile measured at two loads (DITTO_NET_EPOLL_DISPATCH,
 * two workers): an mprotect extra at 0.1 per request at the profiled 1000 req/s and 0.6 at the
 * second load's 250 req/s, with requests 1 ms in flight, and a timer thread that woke 50 times a
 * second at the profiled load (period 20 ms) and 200 at the second (5 ms). At either load the clone
 * makes that load's counts; at others, the mprotects follow the line through both in the share of
 * requests that overlap, 1 - exp(-rate x 1 ms), and the wakeups the line in the rate
 * (validation/load/tests/clone_runtime.rs checks both loads under strace). */
#include "test_common.h"

static const struct ditto_extra test_extras[] = {
    {DITTO_OP_MPROTECT, 0.1, {0, NULL, NULL, NULL}, 0, 0.6, 0.0},
};

static const struct ditto_cluster two_load_clusters[] = {
    {"acceptor", DITTO_ROLE_ACCEPTOR, 1, test_acceptor_body, NULL, 0, 0.0, NULL, 0, 0, 0, 0},
    {"worker", DITTO_ROLE_WORKER, 2, test_body, test_body_init, 0, 0.0, test_warm, 3, 0, 2048, 2048},
    {"timer", DITTO_ROLE_BACKGROUND, 1, test_background_body, NULL, 20000, 0.0, NULL, 0, 5000, 0, 0},
};

const struct ditto_config ditto_clone_config = {
    .abi = DITTO_RUNTIME_ABI,
    .clone_name = "test-two-loads",
    .net_model = DITTO_NET_EPOLL_DISPATCH,
    .framing = TEST_FRAMING,
    .default_port = 21410,
    .processes = 1,
    .backlog = 128,
    .tcp_nodelay = 1,
    .recv_call = DITTO_IO_READ,
    .send_call = DITTO_IO_SENDMSG,
    .response_bytes = TEST_RESPONSE_BYTES,
    .extras = test_extras,
    .n_extras = sizeof test_extras / sizeof test_extras[0],
    .clusters = two_load_clusters,
    .n_clusters = sizeof two_load_clusters / sizeof two_load_clusters[0],
    .priv_bytes = 4096,
    .shared_bytes = 4096,
    .data_file_bytes = 0,
    .data_files = 0,
    .seed = 45,
    .profiled_rate = 1000.0,
    .in_flight_s = 0.001,
    .conn_calls = {0, 0, 0},
    .second_rate = 250.0,
};
