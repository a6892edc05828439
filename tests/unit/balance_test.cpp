#include "../support.hpp"

#include <fast/balance.hpp>

#include <random>

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
                    const bool diagonal = detail::diagonal_first(pieces, i);
                    for (std::size_t k = 0; k < pieces.size(); ++k) {
                        const piece& p = pieces[k];
                        CHECK(p.bytes > 0);
                        // Pieces of one block are disjoint and consecutive coverage adds up.
                        CHECK(p.offset + p.bytes <= t(p.origin, p.final));
                        covered(p.origin, p.final) += p.bytes;
                        if (k > 0) CHECK(detail::stream_before(pieces[k - 1], p, i, {}, diagonal));
                    }
                }
                CHECK(covered == t);
            }
    }
}

TEST_CASE("a GPU keeps its own bytes up to its share; moves go to rails of their final GPU") {
    // Server 0 (2 GPUs) sends to server 1: GPU 0 has 10 bytes for GPU 1 of server 1, GPU 1 has 2.
    const topology t = make_topology(2, 2);
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(0, 3) = 10;
    m(1, 3) = 2;
    const balanced_traffic b = balance(m, t);
    CHECK(b.server_matrix(0, 1) == 6);
    // Rail 0 keeps 6 of its own 10; the other 4 move to rail 1, which is the final GPU's rail,
    // so nothing needs redistribution there.
    const auto rail0 = b.carried(0, 1, 0);
    REQUIRE(rail0.size() == 1);
    CHECK(rail0[0] == piece{0, 6, 0, 1});
    // Rail 1 has no own bytes that need redistribution, so its diagonal block goes first.
    const auto rail1 = b.carried(0, 1, 1);
    REQUIRE(rail1.size() == 2);
    CHECK(rail1[0] == piece{0, 2, 1, 1}); // its own, on its own rail: no move at all
    CHECK(rail1[1] == piece{6, 4, 0, 1}); // moved: needs balancing, lands on its final GPU
}

TEST_CASE("with landing_first a rail takes the bytes that land on its GPU before its own") {
    const std::int64_t tile[4] = {0, 10, 0, 2}; // 2 x 2 tile: GPU 0 -> 1: 10 bytes, GPU 1 -> 1: 2
    const std::int64_t capacity[2] = {6, 6};
    detail::tile_workspace ws;
    detail::assign_tile({tile, 2, 2, capacity, {}, detail::rail_preference::landing_first}, ws);
    REQUIRE(ws.stream(1).size() == 2); // no own bytes that need redistribution: the diagonal block first
    CHECK(ws.stream(1)[0] == piece{0, 2, 1, 1});
    CHECK(ws.stream(1)[1] == piece{0, 4, 0, 1});
    REQUIRE(ws.stream(0).size() == 1);
    CHECK(ws.stream(0)[0] == piece{4, 6, 0, 1});
}

TEST_CASE("a rail with a head starts its stream with its own GPU's bytes, diagonal block first") {
    // 2 x 2 tile: GPU 0 -> 0: 3 bytes, GPU 0 -> 1: 10, GPU 1 -> 0: 10. Landing first alone would
    // make rail 0 carry GPU 1's bytes (a gather before its first step); its head keeps its own.
    const std::int64_t tile[4] = {3, 10, 10, 0};
    const std::int64_t capacity[2] = {13, 10};
    const std::int64_t head[2] = {8, 0};
    detail::tile_workspace ws;
    detail::assign_tile({tile, 2, 2, capacity, {}, detail::rail_preference::landing_first, head}, ws);
    REQUIRE(ws.stream(0).size() == 2);
    CHECK(ws.stream(0)[0] == piece{0, 3, 0, 0});  // the diagonal block first: no move at all
    CHECK(ws.stream(0)[1] == piece{0, 10, 0, 1}); // then a whole own block: redistributed, not gathered
    REQUIRE(ws.stream(1).size() == 1);
    CHECK(ws.stream(1)[0] == piece{0, 10, 1, 0});
    // Without the head, rail 0 takes the block that lands on it.
    const std::int64_t none[2] = {0, 0};
    detail::assign_tile({tile, 2, 2, capacity, {}, detail::rail_preference::landing_first, none}, ws);
    CHECK(ws.stream(0).back() == piece{0, 10, 1, 0});
}

TEST_CASE("heads: every byte once, and each head covered by own bytes as far as they go") {
    std::mt19937_64 rng(7);
    for (int round = 0; round < 2000; ++round) {
        const int g = 1 + static_cast<int>(rng() % 9);
        const auto ug = static_cast<std::size_t>(g);
        std::vector<std::int64_t> tile(ug * ug);
        std::int64_t total = 0;
        for (auto& v : tile) total += v = rng() % 3 == 0 ? 0 : static_cast<std::int64_t>(rng() % 1000);
        // Random capacities that add up to the tile, random heads up to them.
        std::vector<std::int64_t> capacity(ug, 0), head(ug, 0);
        for (std::int64_t left = total; left > 0;) {
            const std::int64_t n = std::min<std::int64_t>(left, 1 + static_cast<std::int64_t>(rng() % 700));
            capacity[rng() % ug] += n;
            left -= n;
        }
        for (std::size_t i = 0; i < ug; ++i)
            head[i] =
                capacity[i] == 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(capacity[i] + 1));
        detail::tile_workspace ws;
        detail::assign_tile({tile.data(), ug, g, capacity, {}, detail::rail_preference::landing_first, head}, ws);
        INFO("round " << round << ", g " << g);
        std::vector<std::int64_t> covered(ug * ug, 0);
        for (std::size_t i = 0; i < ug; ++i) {
            std::int64_t carried = 0;
            std::int64_t own_head = 0; // own bytes before the first piece of another GPU
            bool own_prefix = true;
            for (const piece& p : ws.stream(i)) {
                CHECK(p.bytes > 0);
                covered[static_cast<std::size_t>(p.origin) * ug + static_cast<std::size_t>(p.final)] += p.bytes;
                carried += p.bytes;
                own_prefix = own_prefix && p.origin == static_cast<int>(i);
                if (own_prefix) own_head += p.bytes;
            }
            CHECK(carried == capacity[i]);
            std::int64_t own = 0;
            for (std::size_t b = 0; b < ug; ++b) own += tile[i * ug + b];
            CHECK(own_head >= std::min(head[i], own));
        }
        CHECK(covered == tile);
    }
}

TEST_CASE("streams come out in stream order with heat, one piece per block and rail, with either preference") {
    std::mt19937_64 rng(11);
    detail::tile_workspace ws; // reused across tiles of every size, as the planner does
    for (int round = 0; round < 2000; ++round) {
        const int g = 1 + static_cast<int>(rng() % 10);
        const auto ug = static_cast<std::size_t>(g);
        const std::size_t stride = ug + rng() % 3; // a tile inside a wider matrix
        std::vector<std::int64_t> tile(ug * stride, -1);
        std::int64_t total = 0;
        for (std::size_t a = 0; a < ug; ++a)
            for (std::size_t b = 0; b < ug; ++b)
                total += tile[a * stride + b] = rng() % 3 == 0 ? 0 : static_cast<std::int64_t>(rng() % 1000);
        std::vector<std::int64_t> capacity(ug, 0), head(ug, 0), heat(ug);
        for (std::int64_t left = total; left > 0;) {
            const std::int64_t n = std::min<std::int64_t>(left, 1 + static_cast<std::int64_t>(rng() % 700));
            capacity[rng() % ug] += n;
            left -= n;
        }
        const bool heads = rng() % 2 == 0;
        for (std::size_t i = 0; i < ug && heads; ++i)
            head[i] =
                capacity[i] == 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(capacity[i] + 1));
        for (auto& h : heat) h = static_cast<std::int64_t>(rng() % 4); // ties are ordered by index
        std::vector<std::uint32_t> heat_rank(ug);
        detail::descending_ranks(heat, heat_rank);
        const auto preference =
            rng() % 2 == 0 ? detail::rail_preference::own_first : detail::rail_preference::landing_first;
        detail::assign_tile({tile.data(), stride, g, capacity, heat_rank, preference,
                             heads ? std::span<const std::int64_t>(head) : std::span<const std::int64_t>()},
                            ws);
        INFO("round " << round << ", g " << g);
        std::vector<std::int64_t> covered(ug * ug, 0);
        for (std::size_t i = 0; i < ug; ++i) {
            const auto stream = ws.stream(i);
            const bool diagonal = detail::diagonal_first(stream, static_cast<int>(i)) || (heads && head[i] > 0);
            std::vector<int> pieces_of_block(ug * ug, 0);
            std::int64_t carried = 0;
            for (std::size_t k = 0; k < stream.size(); ++k) {
                const piece& p = stream[k];
                const std::size_t block = static_cast<std::size_t>(p.origin) * ug + static_cast<std::size_t>(p.final);
                CHECK(p.bytes > 0);
                CHECK(++pieces_of_block[block] == 1);
                CHECK(p.offset + p.bytes <=
                      tile[static_cast<std::size_t>(p.origin) * stride + static_cast<std::size_t>(p.final)]);
                covered[block] += p.bytes;
                carried += p.bytes;
                if (k > 0) CHECK(detail::stream_before(stream[k - 1], p, static_cast<int>(i), heat, diagonal));
            }
            CHECK(carried == capacity[i]);
        }
        for (std::size_t a = 0; a < ug; ++a)
            for (std::size_t b = 0; b < ug; ++b) CHECK(covered[a * ug + b] == tile[a * stride + b]);
    }
}
