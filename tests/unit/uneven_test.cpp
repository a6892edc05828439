// The planner on uneven fabrics (planner(fabric), detail/uneven_rails.hpp): each server pair's
// bytes over its rails in proportion to their rates, nothing through a NIC that is down. Every
// plan goes through the verifier against the ranks' rates, every rank's program is its part of
// the whole plan (from counts too), and no plan beats the fabric's T_lb.

#include "../support.hpp"
#include "rank_program_check.hpp"

#include <fast/detail/random.hpp>
#include <fast/detail/uneven_rails.hpp>
#include <fast/fabric.hpp>
#include <fast/fabric_bounds.hpp>
#include <fast/planner.hpp>
#include <fast/workload.hpp>

#include <string>
#include <vector>

using namespace fast;
using fast::test::check_plan;
using fast::test::check_rank_programs;

namespace {

// Bytes through rank `r`'s NIC (sent and received over scale-out).
std::int64_t nic_bytes(const plan& p, int r) {
    std::int64_t n = 0;
    for (const transfer& t : p.transfers)
        if (t.tier == tier::scale_out && (t.src == r || t.dst == r)) n += t.bytes;
    return n;
}

double over_bound(const plan& p, const traffic_matrix& m, const fabric& f) {
    return predict_us(p) / lower_bound(make_shared_counts(m, p.topology), f).us;
}

// Two servers of four GPUs (h200 figures), changed by `change`.
template <class Change>
fabric two_by_four(Change change) {
    fabric f = preset_fabric(preset::h200, 2, 4);
    change(f);
    validate(f);
    return f;
}

} // namespace

TEST_CASE("proportional shares follow the rails' rates, add up, and leave a down rail empty") {
    const std::vector<double> rate{50, 12.5, 0, 50};
    std::vector<std::int64_t> share(4);
    for (const std::int64_t total :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, std::int64_t{1000003}, std::int64_t{1} << 62}) {
        INFO(total);
        detail::proportional_shares(total, rate, share);
        CHECK(share[0] + share[1] + share[2] + share[3] == total);
        CHECK(share[2] == 0);
        CHECK(share[1] <= share[0]);
        CHECK(share[0] - share[3] <= 1);
        // Proportional to the precision of the arithmetic (long double where it is wider).
        CHECK(static_cast<long double>(share[1]) <=
              static_cast<long double>(total) * 12.5L / 112.5L * (1 + 1e-15L) + 1);
    }
}

TEST_CASE("a slow, a down and a shared NIC: FAST balances around them, close to the fabric's T_lb") {
    struct named {
        const char* name;
        fabric f;
    };
    const named cases[] = {
        {"NIC 1 of server 0 at a quarter", two_by_four([](fabric& f) { f.nics[1].gbps = 12.5; })},
        {"NIC 1 of server 0 down", two_by_four([](fabric& f) { f.nics[1].gbps = 0; })},
        {"two GPUs per NIC, one NIC at half", two_by_four([](fabric& f) {
             f.nics = layout_nics(2, 4, {2, 1, 50});
             f.nics[0].gbps = 25;
         })},
    };
    for (const named& c : cases)
        for (const char* workload : {"uniform", "zipf:0.8"}) {
            INFO(c.name << ", " << workload);
            const topology t = planning_topology(c.f);
            const traffic_matrix m = make_workload(parse_workload(workload), t, std::int64_t{256} << 20, 1);
            planner fast_planner(c.f);
            check_rank_programs(fast_planner, m);
            const plan p = fast_planner.make(m);
            CHECK(fast_planner.last_scheduler() == scheduler::fast);
            CHECK(p.nic_gbps == nic_rates(c.f));
            const double ratio = over_bound(p, m, c.f);
            CHECK(ratio >= 1.0);
            CHECK(ratio <= 1.10);
            if (c.f.nics[1].gbps == 0) {
                CHECK(nic_bytes(p, 1) == 0);
                planner direct(c.f, {.scheduler = scheduler::direct});
                CHECK_THROWS_WITH(direct.make(m), Catch::Contains("direct cannot run: rank 1's NIC is down"));
            } else {
                // Direct keeps each GPU's bytes on its own NIC and waits for the slow one.
                planner direct(c.f, {.scheduler = scheduler::direct});
                const plan d = direct.make(m);
                check_plan(d, m);
                CHECK(predict_us(d) > 1.3 * predict_us(p));
            }
        }
}

TEST_CASE("equal rates plan as the topology does; baselines without balancing refuse uneven ones") {
    // Two NICs per GPU or two GPUs per NIC, the same everywhere: every rank has one rate.
    const fabric doubled = two_by_four([](fabric& f) { f.nics = layout_nics(2, 4, {1, 2, 25}); });
    CHECK_FALSE(has_uneven_rates(doubled));
    CHECK(planning_topology(doubled) == make_topology(2, 4));
    const traffic_matrix m = make_zipf(make_topology(2, 4), 0.8, 1 << 24, 3);
    planner from_fabric(doubled), from_topology(make_topology(2, 4));
    CHECK(from_fabric.make(m) == from_topology.make(m));
    CHECK(from_fabric.nic_rates().empty());

    const fabric slow = two_by_four([](fabric& f) { f.nics[5].gbps = 40; });
    for (const scheduler s : {scheduler::spreadout, scheduler::fast_unbalanced}) {
        planner p(slow, {.scheduler = s});
        CHECK_THROWS_WITH(p.make(m), Catch::Contains("plans for equal NICs"));
    }
}

TEST_CASE("servers with no rail up between them: one line naming them") {
    fabric f = preset_fabric(preset::h200, 2, 2);
    f.nics[0].gbps = 0; // server 0: only rail 1 up
    f.nics[3].gbps = 0; // server 1: only rail 0 up
    const traffic_matrix m = make_uniform(planning_topology(f), 1 << 20);
    planner p(f);
    CHECK_THROWS_WITH(p.make(m), Catch::Contains("servers 0 and 1 have no rail with both NICs up"));
    // Only GPUs with their NICs up send across: FAST still has no rail, the automatic scheduler
    // sends direct.
    traffic_matrix up = traffic_matrix::Zero(4, 4);
    up(1, 2) = 1000;
    up(2, 1) = 500;
    planner fast_only(f, {.scheduler = scheduler::fast});
    CHECK_THROWS_WITH(fast_only.make(up), Catch::Contains("no rail with both NICs up"));
    check_rank_programs(p, up);
    CHECK(p.last_scheduler() == scheduler::direct);
}

TEST_CASE("random uneven fabrics: every plan verified, every rank's program its part, none below T_lb") {
    const int cases = test::sanitized ? 200 : 600;
    int planned = 0, refused = 0;
    for (int seed = 0; seed < cases; ++seed) {
        const test::random_case c = test::make_random_case(static_cast<std::uint64_t>(seed), 5, 4);
        detail::rng gen(static_cast<std::uint64_t>(seed) * 31 + 5);
        fabric f = uniform_fabric(c.topo);
        const int g = c.topo.gpus_per_server;
        const int layout = static_cast<int>(gen.below(3));
        if (layout == 1 && g % 2 == 0) f.nics = layout_nics(c.topo.servers, g, {2, 1, c.topo.scale_out_gbps});
        if (layout == 2) f.nics = layout_nics(c.topo.servers, g, {1, 2, c.topo.scale_out_gbps});
        const double factors[] = {0.0, 0.25, 0.5, 1.0, 2.0};
        for (nic& n : f.nics) n.gbps *= factors[gen.below(5)];
        for (int s = 0; s < f.servers; ++s) // every server keeps a NIC up
            for (nic& n : f.nics)
                if (n.server == s) {
                    n.gbps = std::max(n.gbps, c.topo.scale_out_gbps);
                    break;
                }
        REQUIRE_NOTHROW(validate(f));
        for (const scheduler s : {scheduler::automatic, scheduler::fast, scheduler::direct}) {
            INFO("seed " << seed << ", " << c.shape << ", " << f.servers << " x " << g << ", layout " << layout
                         << ", scheduler " << to_string(s));
            planner p(f, {.scheduler = s});
            try {
                check_rank_programs(p, c.matrix);
            } catch (const invalid_argument& e) {
                // Only what the fabric makes impossible, each where it can happen: direct through a
                // down NIC, FAST between servers whose rails never meet (the automatic scheduler
                // sends direct there unless a down NIC blocks that too), a near-2^63-byte call
                // slowed beyond int64's count.
                const std::string why = e.what();
                auto says = [&](const char* what) { return why.find(what) != std::string::npos; };
                CHECK(((says("direct cannot run") && s == scheduler::direct) ||
                       (says("no rail with both NICs up") && s != scheduler::direct) ||
                       (says("too long on its slow rails") && c.shape == "near int64 limit")));
                ++refused;
                continue;
            }
            const plan whole = p.make(c.matrix);
            if (whole.transfers.empty()) continue;
            ++planned;
            CHECK(predict_us(whole) >= lower_bound(make_shared_counts(c.matrix, whole.topology), f).us * (1 - 1e-9));
        }
    }
    INFO(planned << " planned, " << refused << " refused of " << 3 * cases);
    CHECK(planned > 2 * cases); // most plan (the rest: zero matrices, and the refusals above)
    CHECK(refused > 0);
}
