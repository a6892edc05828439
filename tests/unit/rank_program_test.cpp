// Per-rank programs (planner::make_rank) against the whole plan they are parts of: every whole
// plan is verified, and every rank's program must equal it restricted to the rank.
#include "rank_program_check.hpp"

#include <fast/planner.hpp>
#include <fast/rank_program.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace fast;

namespace {

plan_options with(scheduler s, policy p = policy::rail_packed) {
    plan_options o;
    o.scheduler = s;
    o.policy = p;
    return o;
}

// The option sets a sweep runs: every policy (the exact one with a fixed order, emitted per rank,
// and with the automatic order, restricted from the whole plan), blocks split or not, and the
// baselines (restricted from their whole plans).
std::vector<plan_options> option_sets() {
    std::vector<plan_options> out;
    for (const policy p : {policy::rail_packed, policy::bottleneck, policy::exact})
        for (const bool split : {false, true}) {
            plan_options o = with(scheduler::fast, p);
            o.split_blocks = split;
            if (p == policy::exact) o.order = split ? stage_order::descending : stage_order::ascending;
            out.push_back(o);
        }
    out.push_back(with(scheduler::fast, policy::exact)); // automatic order
    for (const scheduler s :
         {scheduler::automatic, scheduler::direct, scheduler::spreadout, scheduler::fast_unbalanced})
        out.push_back(with(s));
    return out;
}

std::string describe(const plan_options& o) {
    return std::string(to_string(o.scheduler)) + " / " + std::string(to_string(o.policy)) +
           (o.split_blocks ? " / split blocks" : "");
}

} // namespace

TEST_CASE("every rank's program is the verified whole plan restricted to it: shapes, G = 1 and odd G") {
    // 17 x 2 and 20 x 1: beyond 16 servers the shared counts have no per-rail sums (estimates).
    for (const auto& [servers, g] :
         {std::pair{1, 4}, std::pair{2, 1}, std::pair{3, 3}, std::pair{4, 8}, std::pair{5, 5}, std::pair{7, 1},
          std::pair{8, 8}, std::pair{6, 3}, std::pair{17, 2}, std::pair{20, 1}}) {
        const topology t = make_topology(servers, g);
        for (const plan_options& o : option_sets())
            for (std::uint64_t seed = 1; seed <= 3; ++seed) {
                const traffic_matrix m = seed == 1   ? make_zipf(t, 0.8, 1 << 24, seed)
                                         : seed == 2 ? make_moe(t, moe_options{}, 1 << 24, seed)
                                                     : make_uniform(t, 1 << 18);
                INFO(servers << " x " << g << ", " << describe(o) << ", seed " << seed);
                planner p(t, o);
                test::check_rank_programs(p, m);
            }
    }
}

TEST_CASE("every rank's program is the verified whole plan restricted to it: 300 seeded random cases") {
    for (std::uint64_t seed = 0; seed < 300; ++seed) {
        const auto c = test::make_random_case(seed, 6, 5);
        const auto sets = option_sets();
        const plan_options& o = sets[seed % sets.size()];
        INFO("seed " << seed << ", " << c.topo.servers << " x " << c.topo.gpus_per_server << ", shape " << c.shape
                     << ", " << describe(o));
        planner p(c.topo, o);
        test::check_rank_programs(p, c.matrix);
    }
}

TEST_CASE("both ends of every transfer find it in the same step with the same pair index") {
    const topology t = make_topology(5, 4);
    const traffic_matrix m = make_moe(t, moe_options{}, 1 << 22, 9);
    planner p(t);
    test::check_rank_programs(p, m); // the programs below are the verified whole plan's parts
    std::vector<rank_program> all;
    for (int r = 0; r < t.ranks(); ++r) all.push_back(p.make_rank(m, r));
    std::size_t checked = 0;
    for (const rank_program& x : all)
        for (const rank_transfer& y : x.transfers) {
            if (y.transfer.src == y.transfer.dst || y.transfer.src != x.rank) continue;
            const rank_program& peer = all[static_cast<std::size_t>(y.transfer.dst)];
            const auto match = std::find_if(peer.transfers.begin(), peer.transfers.end(), [&](const rank_transfer& z) {
                return z.transfer.src == x.rank && z.pair_index == y.pair_index;
            });
            REQUIRE(match != peer.transfers.end());
            CHECK(match->step == y.step);
            CHECK(match->transfer.bytes == y.transfer.bytes);
            ++checked;
        }
    CHECK(checked > 0);
}

TEST_CASE("make_rank names a rank out of range") {
    const topology t = make_topology(3, 2);
    planner p(t);
    const traffic_matrix m = make_uniform(t, 1 << 20);
    CHECK_THROWS_WITH(p.make_rank(m, 6), Catch::Contains("rank 6 is not in 0 .. 5"));
    CHECK_THROWS_WITH(p.make_rank(m, -1), Catch::Contains("rank -1 is not in 0 .. 5"));
}

TEST_CASE("restrict_to_rank numbers each direction of each pair on its own, copies apart") {
    plan p;
    p.topology = make_topology(1, 3);
    p.scratch_bytes = {0, 16, 0};
    p.transfers = {test::out(0, 1, 4), test::out(1, 0, 4), test::out(0, 1, 4)};
    p.transfers[1].src_buffer = buffer::scratch; // rank 0's view: another rank's scratch reads 0
    p.transfers[1].src_offset = 8;
    p.end_step();
    p.transfers.push_back(test::out(0, 1, 4));
    p.transfers.push_back(test::out(0, 0, 4));
    p.end_step();
    const rank_program r0 = restrict_to_rank(p, 0);
    REQUIRE(r0.transfers.size() == 5);
    CHECK(r0.transfers[0].pair_index == 0);
    CHECK(r0.transfers[1].pair_index == 0); // 1 -> 0, its own direction
    CHECK(r0.transfers[1].transfer.src_offset == 0);
    CHECK(r0.transfers[2].pair_index == 1);
    CHECK(r0.transfers[3].pair_index == 2);
    CHECK(r0.transfers[3].step == 1);
    CHECK(r0.transfers[4].pair_index == 0); // the copy
    const rank_program r1 = restrict_to_rank(p, 1);
    CHECK(r1.scratch_bytes == 16);
    CHECK(r1.transfers[1].transfer.src_offset == 8); // its own scratch keeps its offset
    CHECK(restrict_to_rank(p, 2).transfers.empty());
}
