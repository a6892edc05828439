#include "../support.hpp"

#include <fast/balance.hpp>

using namespace fast;

TEST_CASE("every byte of every inter-server tile is carried exactly once, in equal shares") {
    for (std::uint64_t seed = 0; seed < 300; ++seed) {
        const auto c = fast::test::make_random_case(seed, 4, 6);
        const balanced_traffic b = balance(c.matrix, c.topo);
        const int g = c.topo.gpus_per_server;
        INFO("seed " << seed << ", shape " << c.shape);
        for (int s = 0; s < c.topo.servers; ++s)
            for (int d = 0; d < c.topo.servers; ++d) {
                const traffic_matrix t = tile(c.matrix, c.topo, s, d);
                if (s == d) {
                    for (int i = 0; i < g; ++i) CHECK(b.carried(s, d, i).empty());
                    CHECK(b.server_matrix(s, d) == 0);
                    continue;
                }
                const std::int64_t total = t.sum();
                CHECK(b.server_matrix(s, d) == (total + g - 1) / g);
                traffic_matrix covered = traffic_matrix::Zero(g, g);
                for (int i = 0; i < g; ++i) {
                    const std::int64_t share = b.carried_bytes(s, d, i);
                    CHECK((share == total / g || share == total / g + 1));
                    const auto pieces = b.carried(s, d, i);
                    for (std::size_t k = 0; k < pieces.size(); ++k) {
                        const piece& p = pieces[k];
                        CHECK(p.bytes > 0);
                        // Pieces of one block are disjoint and consecutive coverage adds up.
                        CHECK(p.offset + p.bytes <= t(p.origin, p.final));
                        covered(p.origin, p.final) += p.bytes;
                        if (k > 0) CHECK(detail::stream_before(pieces[k - 1], p, i));
                    }
                }
                CHECK(covered == t);
            }
    }
}

TEST_CASE("a rail first takes the bytes that land on its own GPU, then keeps its own") {
    // Server 0 (2 GPUs) sends to server 1: GPU 0 has 10 bytes for GPU 1 of server 1, GPU 1 has 2.
    const topology t = make_topology(2, 2);
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(0, 3) = 10;
    m(1, 3) = 2;
    const balanced_traffic b = balance(m, t);
    CHECK(b.server_matrix(0, 1) == 6);
    // Rail 1 (share 6) keeps its own 2 bytes, which are on their final rail, and takes 4 of
    // GPU 0's bytes, which land on their final GPU too: no redistribution for rail 1 at all.
    const auto rail1 = b.carried(0, 1, 1);
    REQUIRE(rail1.size() == 2);
    CHECK(rail1[0] == piece{0, 4, 0, 1}); // moved over scale-up, lands on its final GPU
    CHECK(rail1[1] == piece{0, 2, 1, 1}); // its own, on its own rail: no move at all
    // Rail 0 keeps the other 6 of its own bytes; they are redistributed after landing.
    const auto rail0 = b.carried(0, 1, 0);
    REQUIRE(rail0.size() == 1);
    CHECK(rail0[0] == piece{4, 6, 0, 1});
}
