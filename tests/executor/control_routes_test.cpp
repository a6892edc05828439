// Routes of control messages around NICs that are down (executor/src/control_routes.hpp), on
// random clusters and random NICs down: every message of every round reaches its receiver in at
// most three hops, each hop between ranks that have an endpoint (same server, or both NICs up),
// and every rank in the middle of a route carries exactly the messages that pass through it.

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "control_routes.hpp"

using fast::exec::detail::control_routes;
using fast::exec::detail::rank_group;

namespace {

// The ranks a's message for b passes through, a and b included.
std::vector<int> route(const control_routes& routes, int a, int b) {
    std::vector<int> hops{a};
    while (hops.back() != b && hops.size() <= 4) hops.push_back(routes.next_hop(hops.back(), a, b));
    return hops;
}

// The groups of a round: all ranks, or every rail.
std::vector<rank_group> groups_of(bool all, const fast::topology& t) {
    if (all) return {rank_group::all(t.ranks())};
    std::vector<rank_group> out;
    for (int k = 0; k < t.gpus_per_server; ++k) out.push_back(rank_group::rail(k, t.gpus_per_server, t.servers));
    return out;
}

} // namespace

TEST_CASE("control routes: every message reaches its receiver through ranks that have endpoints") {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        const fast::topology t{1 + static_cast<int>(rng() % 5), 1 + static_cast<int>(rng() % 4)};
        std::vector<double> rates(static_cast<std::size_t>(t.ranks()), 1.0);
        for (int s = 0; s < t.servers; ++s) // every server keeps one NIC up
            for (int k = 1; k < t.gpus_per_server; ++k)
                if (rng() % 3 == 0) rates[static_cast<std::size_t>(t.rank_of(s, (k + trial) % t.gpus_per_server))] = 0;
        const control_routes routes(t, rates);
        auto up = [&](int r) { return rates[static_cast<std::size_t>(r)] > 0; };
        for (const bool all : {true, false}) {
            std::map<std::pair<int, int>, std::vector<int>> through; // (a, b) -> ranks in the middle
            for (const rank_group& g : groups_of(all, t))
                for (int i = 0; i < g.count; ++i)
                    for (int j = 0; j < g.count; ++j) {
                        const int a = g.rank_at(i), b = g.rank_at(j);
                        if (a == b) continue;
                        const std::vector<int> hops = route(routes, a, b);
                        INFO("trial " << trial << ": " << a << " -> " << b);
                        REQUIRE(hops.back() == b);
                        REQUIRE(hops.size() <= 4);
                        REQUIRE(routes.cut_off(a, b) == (hops.size() > 2));
                        for (std::size_t h = 0; h + 1 < hops.size(); ++h)
                            CHECK((t.same_server(hops[h], hops[h + 1]) || (up(hops[h]) && up(hops[h + 1]))));
                        for (std::size_t h = 1; h + 1 < hops.size(); ++h) through[{a, b}].push_back(hops[h]);
                        for (std::size_t h = 1; h < hops.size(); ++h)
                            CHECK(routes.previous_hop(hops[h], a, b) == hops[h - 1]);
                    }
            std::map<std::pair<int, int>, std::vector<int>> carried;
            for (int me = 0; me < t.ranks(); ++me) {
                const rank_group mine = groups_of(all, t)[all ? 0 : static_cast<std::size_t>(t.local_of(me))];
                routes.for_each_carried(me, mine, [&](int a, int b) { carried[{a, b}].push_back(me); });
            }
            for (auto& [pair, ranks] : carried) std::sort(ranks.begin(), ranks.end());
            for (auto& [pair, ranks] : through) std::sort(ranks.begin(), ranks.end());
            INFO("trial " << trial << (all ? ", all ranks" : ", rails"));
            CHECK(carried == through);
        }
    }
}

TEST_CASE("control routes: without a NIC down every pair is direct") {
    const fast::topology t{3, 4};
    for (const control_routes& routes : {control_routes(), control_routes(t, {}), control_routes(t, std::vector<double>(12, 2.0))}) {
        CHECK_FALSE(routes.any());
        CHECK(routes.next_hop(0, 0, 11) == 11);
        CHECK_FALSE(routes.cut_off(0, 11));
    }
    const control_routes down(t, {1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0});
    CHECK(down.stand_in(1) == 2);
    CHECK(down.stand_in(9) == 8); // the next up NIC of server 2, cyclically: 10 and 11 are down
    CHECK(down.stand_in(8) == 8);
    CHECK(down.next_hop(1, 1, 9) == 2);
    CHECK(down.next_hop(2, 1, 9) == 8);
    CHECK(down.next_hop(8, 1, 9) == 9);
    CHECK(down.previous_hop(9, 1, 9) == 8);
    CHECK(down.previous_hop(8, 1, 9) == 2);
    CHECK(down.previous_hop(2, 1, 9) == 1);
    CHECK(down.previous_hop(4, 0, 4) == 0); // direct
    CHECK_FALSE(down.cut_off(1, 3)); // same server
}
