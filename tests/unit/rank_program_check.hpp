#pragma once
// The check every per-rank test shares: each rank's program from make_rank equals the verified
// whole plan restricted to the rank, and so does the program planned from the rank's counts
// alone (counts.hpp), where the options allow it.

#include "../support.hpp"

#include <fast/counts.hpp>
#include <fast/planner.hpp>
#include <fast/rank_program.hpp>

#include <vector>

namespace fast::test {

/// Verifies p.make(m), then checks for every rank r that p.make_rank(m, r) has the whole plan's
/// transfers of r in the same order, sizes, offsets and pair indices, and r's scratch size; and
/// that one increasing map from the programs' steps to the plan's steps fits every rank (the
/// programs number steps alike; the whole plan leaves out steps nobody has transfers in). Where
/// the options plan from counts (planner::plans_rank_from_counts), make_rank(shared, own, r) must give the
/// same program as make_rank(m, r).
inline void check_rank_programs(planner& p, const traffic_matrix& m) {
    const plan whole = p.make(m);
    check_plan(whole, m);
    const bool from_counts = p.plans_rank_from_counts();
    const shared_counts all = make_shared_counts(m, whole.topology);
    std::vector<std::int64_t> plan_step_of; // per program step: the plan's step, or -1
    for (int r = 0; r < whole.topology.ranks(); ++r) {
        INFO("rank " << r);
        const rank_program want = restrict_to_rank(whole, r);
        if (from_counts) {
            const rank_program by_counts =
                p.make_rank(all, make_server_counts(m, whole.topology, whole.topology.server_of(r)), r);
            CHECK(by_counts == p.make_rank(m, r));
        }
        const rank_program& got = p.make_rank(m, r);
        REQUIRE(got.rank == r);
        CHECK(got.topology == whole.topology);
        CHECK(got.one_to_one_scale_out == whole.one_to_one_scale_out);
        CHECK(got.scratch_bytes == want.scratch_bytes);
        REQUIRE(got.transfers.size() == want.transfers.size());
        if (plan_step_of.empty()) plan_step_of.assign(got.steps, -1);
        REQUIRE(plan_step_of.size() == got.steps);
        for (std::size_t k = 0; k < got.transfers.size(); ++k) {
            INFO("transfer " << k << " of the rank's program");
            const rank_transfer& g = got.transfers[k];
            const rank_transfer& w = want.transfers[k];
            REQUIRE(g.transfer == w.transfer);
            REQUIRE(g.pair_index == w.pair_index);
            REQUIRE(g.step < got.steps);
            std::int64_t& mapped = plan_step_of[g.step];
            if (mapped < 0) mapped = w.step;
            REQUIRE(mapped == static_cast<std::int64_t>(w.step));
        }
    }
    std::int64_t previous = -1;
    for (const std::int64_t s : plan_step_of) {
        if (s < 0) continue;
        CHECK(s > previous);
        previous = s;
    }
}

} // namespace fast::test
