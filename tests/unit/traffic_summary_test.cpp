#include "../support.hpp"

#include <fast/layout.hpp>
#include <fast/traffic_summary.hpp>
#include <fast/workload.hpp>

using namespace fast;

TEST_CASE("the summary holds every (server pair, GPU) sum and the packed displacements") {
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        const auto c = test::make_random_case(seed, 5, 4);
        INFO("seed " << seed << ", " << c.topo.servers << " x " << c.topo.gpus_per_server << ", shape " << c.shape);
        const traffic_summary sum = summarize(c.matrix, c.topo);
        const alltoallv_layout l = make_packed_layout(c.matrix);
        const int g = c.topo.gpus_per_server;
        for (int s = 0; s < c.topo.servers; ++s)
            for (int d = 0; d < c.topo.servers; ++d)
                for (int k = 0; k < g; ++k) {
                    const int src = s * g + k; // GPU k of s, sending
                    const int dst = d * g + k; // GPU k of d, receiving
                    std::int64_t sent = 0;
                    std::int64_t received = 0;
                    for (int j = 0; j < g; ++j) {
                        sent += c.matrix(src, d * g + j);
                        received += c.matrix(s * g + j, dst);
                    }
                    CHECK(sum.sent[sum.index(s, d, k)] == sent);
                    CHECK(sum.received[sum.index(s, d, k)] == received);
                    CHECK(sum.sent_before[sum.index(s, d, k)] == l.send_displ(src, d * g));
                    CHECK(sum.received_before[sum.index(s, d, k)] == l.recv_displ(s * g, dst));
                }
    }
}

TEST_CASE("summarize validates the matrix") {
    const topology t = make_topology(2, 2);
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(1, 2) = -5;
    CHECK_THROWS_WITH(summarize(m, t), Catch::Contains("traffic(1, 2) = -5 is negative"));
    CHECK_THROWS_WITH(summarize(traffic_matrix::Zero(3, 3), t), Catch::Contains("3 x 3"));
}
