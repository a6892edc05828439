#include <catch2/catch.hpp>

#include <fast/detail/random.hpp>
#include <fast/matching.hpp>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/max_cardinality_matching.hpp>

#include <vector>

using namespace fast;

namespace {
// Maximum matching size of the bipartite graph by Boost.Graph (rows 0..n-1, columns n..2n-1).
std::size_t boost_matching_size(const std::vector<char>& edge, int n) {
    using graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
    graph g(static_cast<std::size_t>(2 * n));
    for (int r = 0; r < n; ++r)
        for (int c = 0; c < n; ++c)
            if (edge[static_cast<std::size_t>(r * n + c)])
                boost::add_edge(static_cast<std::size_t>(r), static_cast<std::size_t>(n + c), g);
    std::vector<boost::graph_traits<graph>::vertex_descriptor> mate(static_cast<std::size_t>(2 * n));
    boost::edmonds_maximum_cardinality_matching(g, &mate[0]);
    return boost::matching_size(g, &mate[0]);
}
} // namespace

TEST_CASE("Hopcroft-Karp finds a perfect matching exactly when Boost.Graph's Edmonds does") {
    detail::rng gen(42);
    int perfect = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const int n = 1 + static_cast<int>(gen.below(24));
        const double density = 0.05 + 0.5 * gen.uniform();
        std::vector<char> edge(static_cast<std::size_t>(n * n));
        for (auto& e : edge) e = gen.uniform() < density ? 1 : 0;
        bipartite_matching m(n);
        const bool found = m.complete([&](int r, int c) { return edge[static_cast<std::size_t>(r * n + c)] != 0; });
        const std::size_t best = boost_matching_size(edge, n);
        INFO("trial " << trial << ", n " << n);
        CHECK(found == (best == static_cast<std::size_t>(n)));
        if (found) {
            ++perfect;
            std::vector<char> used(static_cast<std::size_t>(n), 0);
            for (int r = 0; r < n; ++r) {
                const int c = m.col_of(r);
                REQUIRE(c >= 0);
                CHECK(edge[static_cast<std::size_t>(r * n + c)]);
                CHECK_FALSE(used[static_cast<std::size_t>(c)]);
                used[static_cast<std::size_t>(c)] = 1;
                CHECK(m.row_of(c) == r);
            }
        } else {
            // The matching it keeps is maximum.
            std::size_t size = 0;
            for (int r = 0; r < n; ++r) size += m.col_of(r) >= 0 ? 1 : 0;
            CHECK(size == best);
        }
    }
    CHECK(perfect > 50);
}

TEST_CASE("warm start: only rows whose edge disappeared are rematched") {
    const int n = 6;
    std::vector<char> edge(n * n, 1);
    bipartite_matching m(n);
    auto has = [&](int r, int c) { return edge[static_cast<std::size_t>(r * n + c)] != 0; };
    REQUIRE(m.complete(has));
    const std::vector<int> before = m.cols();
    // Remove the edge of row 2 only.
    edge[static_cast<std::size_t>(2 * n + before[2])] = 0;
    REQUIRE(m.complete(has));
    int changed = 0;
    for (int r = 0; r < n; ++r) changed += m.col_of(r) != before[static_cast<std::size_t>(r)] ? 1 : 0;
    CHECK(changed >= 1);
    CHECK(changed <= 3); // one augmenting path
    CHECK(has(2, m.col_of(2)));
}

TEST_CASE(
    "bit rows: perfect exactly when Boost.Graph finds one; a failed search repeats itself until an edge can grow it") {
    detail::rng gen(7);
    int failed = 0;
    int skipped = 0;
    for (int trial = 0; trial < 600; ++trial) {
        // Up to 130 columns: one word per row and several.
        const int n = 1 + static_cast<int>(gen.below(trial % 3 == 0 ? 130 : 20));
        const double density = (trial % 3 == 0 ? 0.01 : 0.05) + 0.3 * gen.uniform();
        std::vector<char> edge(static_cast<std::size_t>(n * n));
        bit_rows g;
        g.reset(n);
        for (int r = 0; r < n; ++r)
            for (int c = 0; c < n; ++c)
                if (gen.uniform() < density) {
                    edge[static_cast<std::size_t>(r * n + c)] = 1;
                    g.set(r, c);
                }
        bipartite_matching m(n);
        INFO("trial " << trial << ", n " << n);
        const bool found = m.complete(g);
        CHECK(found == (boost_matching_size(edge, n) == static_cast<std::size_t>(n)));
        for (int round = 0; !found && round < 8; ++round) {
            ++failed;
            // Add a few edges; without one that can grow the failed search, searching again
            // fails and changes nothing.
            bool grows = false;
            for (int k = 0; k < 3; ++k) {
                const int r = static_cast<int>(gen.below(static_cast<std::uint64_t>(n)));
                const int c = static_cast<int>(gen.below(static_cast<std::uint64_t>(n)));
                grows = grows || m.can_grow(r, c);
                edge[static_cast<std::size_t>(r * n + c)] = 1;
                g.set(r, c);
            }
            const std::vector<int> before = m.cols();
            const bool now = m.complete(g);
            CHECK(now == (boost_matching_size(edge, n) == static_cast<std::size_t>(n)));
            if (!grows) {
                ++skipped;
                CHECK_FALSE(now);
                CHECK(m.cols() == before);
            }
            if (now) break;
        }
    }
    CHECK(failed > 100);
    CHECK(skipped > 50);
}
