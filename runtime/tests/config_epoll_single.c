/* config_epoll_single.c - test clone for DITTO_NET_EPOLL_SINGLE: what the generator would write for a
 * profile of that model (receiving with recvmsg, sending with writev). */
#include "test_common.h"

const struct ditto_config ditto_clone_config = {
    .abi = DITTO_RUNTIME_ABI,
    .clone_name = "test-epoll-single",
    .net_model = DITTO_NET_EPOLL_SINGLE,
    .framing = TEST_FRAMING,
    .default_port = 21300,
    .processes = 2,
    .backlog = 128,
    .tcp_nodelay = 1,
    .recv_call = DITTO_IO_RECVMSG,
    .send_call = DITTO_IO_WRITEV,
    .response_bytes = TEST_RESPONSE_BYTES,
    .extras = NULL,
    .n_extras = 0,
    .clusters = test_clusters,
    .n_clusters = TEST_N_CLUSTERS,
    .priv_bytes = 4096,
    .shared_bytes = 4096,
    .data_file_bytes = 0,
    .data_files = 0,
    .seed = 42,
};
