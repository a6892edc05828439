#include "../support.hpp"

#include <fast/baselines.hpp>

using namespace fast;

TEST_CASE("steps partition the transfer list; stages count scale-out steps per rank") {
    const topology t = make_topology(2, 2);
    traffic_matrix m = traffic_matrix::Constant(4, 4, 10);
    const plan direct = make_direct_plan(m, t);
    fast::test::check_plan(direct, m);
    CHECK(direct.steps() == 1);
    CHECK(direct.step(0).size() == 16);
    CHECK(count_stages(direct) == 1);
    const plan spread = make_spreadout_plan(m, t);
    CHECK(spread.steps() == 4);
    // Rank 0 sends over scale-out in rounds 2 and 3 (to ranks 2 and 3).
    CHECK(count_stages(spread) == 2);
    fast::test::check_plan(spread, m);
}

TEST_CASE("the rank view lists each rank's transfers in step order, self-copies once") {
    const topology t = make_topology(1, 3);
    traffic_matrix m = traffic_matrix::Constant(3, 3, 5);
    const plan p = make_spreadout_plan(m, t);
    fast::test::check_plan(p, m);
    const rank_view v = make_rank_view(p);
    // Rank 1: its self-copy, then one send and one receive in each of the two rounds.
    const auto mine = v.of(1);
    REQUIRE(mine.size() == 5);
    CHECK(mine[0].step == 0);
    CHECK(p.transfers[mine[0].index].src == 1);
    CHECK(p.transfers[mine[0].index].dst == 1);
    for (std::size_t k = 1; k < mine.size(); ++k) {
        CHECK(mine[k - 1].step <= mine[k].step);
        const transfer& x = p.transfers[mine[k].index];
        CHECK((x.src == 1 || x.dst == 1));
    }
    std::size_t total = 0;
    for (int r = 0; r < 3; ++r) total += v.of(r).size();
    CHECK(total == 3 + 2 * 6);
}
