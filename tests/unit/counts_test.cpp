#include "../support.hpp"

#include <fast/counts.hpp>
#include <fast/planner.hpp>
#include <fast/traffic_summary.hpp>
#include <fast/workload.hpp>

using namespace fast;

TEST_CASE("shared counts assembled from every server's part equal those of the whole summary") {
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        // Up to 20 servers: with and without the per-rail sums (wants_rail_detail).
        const auto c = test::make_random_case(seed, seed % 2 == 0 ? 5 : 20, 4);
        INFO("seed " << seed << ", " << c.topo.servers << " x " << c.topo.gpus_per_server << ", shape " << c.shape);
        const shared_counts parts = make_shared_counts(c.matrix, c.topo);
        shared_counts whole;
        fill_shared_counts(summarize(c.matrix, c.topo), c.topo, whole);
        CHECK(parts == whole);
        CHECK(parts.rail_sent.empty() == !wants_rail_detail(c.topo));
        const int g = c.topo.gpus_per_server;
        for (int s = 0; s < c.topo.servers; ++s)
            for (int d = 0; d < c.topo.servers; ++d) {
                std::int64_t n = 0;
                for (int a = 0; a < g; ++a)
                    for (int b = 0; b < g; ++b) n += c.matrix(s * g + a, d * g + b);
                CHECK(parts.pair[static_cast<std::size_t>(s * c.topo.servers + d)] == (s == d ? 0 : n));
            }
        for (int i = 0; i < c.topo.ranks(); ++i) {
            gpu_totals t;
            for (int j = 0; j < c.topo.ranks(); ++j) {
                (c.topo.same_server(i, j) ? t.up_sent : t.out) += c.matrix(i, j);
                (c.topo.same_server(i, j) ? t.up_received : t.in) += c.matrix(j, i);
            }
            CHECK(parts.gpus[static_cast<std::size_t>(i)] == t);
        }
    }
}

TEST_CASE("a server's counts are its rows and columns, and bad ones are named") {
    const topology t = make_topology(3, 2);
    const traffic_matrix m = make_zipf(t, 0.8, 1 << 20, 3);
    const server_counts own = make_server_counts(m, t, 1);
    CHECK(own.rows[1 * 6 + 4] == m(3, 4));
    CHECK(own.cols[5 * 2 + 0] == m(5, 2));
    CHECK_NOTHROW(validate_server_counts(own, t));
    server_counts bad = own;
    bad.rows[7] = -3;
    CHECK_THROWS_WITH(validate_server_counts(bad, t), Catch::Contains("traffic(3, 1) = -3 is negative"));
    bad = own;
    bad.cols[4 * 2 + 1] = -1;
    CHECK_THROWS_WITH(validate_server_counts(bad, t), Catch::Contains("traffic(4, 3) = -1 is negative"));
    bad = own;
    bad.rows.pop_back();
    CHECK_THROWS_WITH(validate_server_counts(bad, t), Catch::Contains("expected 12 each"));
    CHECK_THROWS_WITH(make_server_counts(m, t, 3), Catch::Contains("server 3 is not in 0 .. 2"));
}

TEST_CASE("make_rank from counts names what does not fit") {
    const topology t = make_topology(3, 2);
    const traffic_matrix m = make_zipf(t, 0.8, 1 << 20, 3);
    const shared_counts all = make_shared_counts(m, t);
    planner p(t);
    CHECK_THROWS_WITH(p.make_rank(all, make_server_counts(m, t, 0), 3),
                      Catch::Contains("server counts of server 0 for rank 3, which is on server 1"));
    const shared_counts other = make_shared_counts(traffic_matrix::Zero(2, 2), make_topology(1, 2));
    CHECK_THROWS_WITH(p.make_rank(other, make_server_counts(m, t, 1), 3), Catch::Contains("shared counts for 1 x 2"));
    plan_options o;
    o.policy = policy::exact;
    planner exact(t, o);
    CHECK_THROWS_WITH(exact.make_rank(all, make_server_counts(m, t, 1), 3),
                      Catch::Contains("policy 'exact' needs the traffic matrix"));
}

TEST_CASE("a server part overflowing int64 is named") {
    // A runtime's counts come from its ranks, not from a validated matrix.
    const topology t = make_topology(2, 2);
    server_counts own;
    own.rows.assign(8, 0);
    own.cols.assign(8, 0);
    own.rows[2] = INT64_MAX / 2 + 1;
    own.rows[3] = INT64_MAX / 2 + 1;
    std::vector<std::int64_t> part(server_part_size(t));
    CHECK_THROWS_WITH(write_server_part(own, t, part), Catch::Contains("the bytes of server 0 overflow int64"));
}
