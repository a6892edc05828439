#include "../support.hpp"
#include "rank_program_check.hpp"

#include <fast/agreement.hpp>
#include <fast/detail/random.hpp>
#include <fast/detail/uneven_rails.hpp>
#include <fast/fabric.hpp>
#include <fast/fabric_bounds.hpp>
#include <fast/matrix_io.hpp>
#include <fast/planner.hpp>
#include <fast/workload.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace fast;
using fast::test::check_plan;
using fast::test::check_rank_programs;

namespace {

const scheduler all_schedulers[] = {scheduler::fast, scheduler::fast_unbalanced, scheduler::direct,
                                    scheduler::spreadout};
const policy all_policies[] = {policy::rail_packed, policy::bottleneck, policy::exact};

plan_options with(scheduler s, policy p = policy::rail_packed) {
    plan_options o;
    o.scheduler = s;
    o.policy = p;
    return o;
}

// Sum over steps of the largest scale-out bytes any one rank sends in the step.
std::int64_t scale_out_volume(const plan& p) {
    std::int64_t total = 0;
    std::vector<std::int64_t> sent(static_cast<std::size_t>(p.topology.ranks()));
    for (std::size_t k = 0; k < p.steps(); ++k) {
        std::fill(sent.begin(), sent.end(), 0);
        std::int64_t most = 0;
        for (const transfer& t : p.step(k))
            if (t.tier == tier::scale_out) most = std::max(most, sent[static_cast<std::size_t>(t.src)] += t.bytes);
        total += most;
    }
    return total;
}

// The largest line sum of the per-GPU server matrix ceil(tile / G).
std::int64_t per_gpu_bound(const traffic_matrix& m, const topology& topo) {
    traffic_matrix sm = server_matrix(m, topo);
    sm.diagonal().setZero();
    const std::int64_t g = topo.gpus_per_server;
    const traffic_matrix per_gpu = sm.unaryExpr([g](std::int64_t v) { return (v + g - 1) / g; });
    std::int64_t l = 0;
    for (int s = 0; s < topo.servers; ++s) l = std::max({l, per_gpu.row(s).sum(), per_gpu.col(s).sum()});
    return l;
}

// The quantised bottleneck stages of m's server-level pair totals, as the rail-packed policy
// decomposes them (quantum: a tenth of the busiest line's average entry per GPU), with those
// totals (row-major, zero diagonal) and the busiest line.
struct server_stages {
    std::vector<std::int64_t> pair;
    std::int64_t line = 0;
    decomposition stages;
};

server_stages quantised_stages(const traffic_matrix& m, const topology& t) {
    const int servers = t.servers;
    traffic_matrix sm = server_matrix(m, t);
    sm.diagonal().setZero();
    server_stages out;
    out.pair.assign(sm.data(), sm.data() + sm.size());
    for (int s = 0; s < servers; ++s) out.line = std::max({out.line, sm.row(s).sum(), sm.col(s).sum()});
    const std::int64_t q = std::max<std::int64_t>(1, out.line / (servers * t.gpus_per_server * 10));
    std::vector<std::int64_t> a = out.pair;
    detail::padding_workspace ws;
    detail::decompose_quantised(a, servers, q, out.stages, ws);
    return out;
}

} // namespace

TEST_CASE("every scheduler and policy verifies, incast-free, on 1000 seeded matrices of every shape") {
    for (std::uint64_t seed = 0; seed < 1000; ++seed) {
        const auto c = fast::test::make_random_case(seed);
        INFO("seed " << seed << ", " << c.topo.servers << " x " << c.topo.gpus_per_server << ", shape " << c.shape);
        for (const scheduler s : all_schedulers) {
            if (s == scheduler::fast) {
                for (const policy p : all_policies) {
                    INFO("policy " << to_string(p));
                    const plan pl = make_plan(c.matrix, c.topo, with(s, p));
                    const verification v = fast::test::check_plan(pl, c.matrix);
                    CHECK(v.one_to_one_scale_out);
                    CHECK(pl.scheduler == "fast");
                }
            } else {
                INFO("scheduler " << to_string(s));
                fast::test::check_plan(make_plan(c.matrix, c.topo, with(s)), c.matrix);
            }
        }
    }
}

TEST_CASE("exact policy: volume-optimal stages, at most S^2 - 2S + 2 of them") {
    for (std::uint64_t seed = 0; seed < 1000; ++seed) {
        const auto c = fast::test::make_random_case(seed, 6, 4);
        INFO("seed " << seed << ", " << c.topo.servers << " x " << c.topo.gpus_per_server << ", shape " << c.shape);
        const plan p = make_plan(c.matrix, c.topo, with(scheduler::fast, policy::exact));
        fast::test::check_plan(p, c.matrix);
        const int s = c.topo.servers;
        CHECK(count_stages(p) <= static_cast<std::size_t>(s * s - 2 * s + 2));
        // The busiest GPU is busy in every stage: the stages' largest scale-out transfers add up
        // to the per-GPU bound L exactly.
        CHECK(scale_out_volume(p) == per_gpu_bound(c.matrix, c.topo));
    }
}

TEST_CASE("exact policy: with infinitely fast scale-up and no alpha, the plan meets the lower bound") {
    for (std::uint64_t seed = 0; seed < 1000; ++seed) {
        auto c = fast::test::make_random_case(seed, 6, 4);
        if (c.shape == "near int64 limit") continue; // microsecond doubles lose the byte rounding
        c.topo.scale_up_gbps = 1e15;
        c.topo.alpha_up_us = 0;
        c.topo.alpha_out_us = 0;
        const plan p = make_plan(c.matrix, c.topo, with(scheduler::fast, policy::exact));
        fast::test::check_plan(p, c.matrix);
        const double predicted = predict_us(p);
        const double bound = lower_bound_us(c.matrix, c.topo);
        // Balancing rounds each server pair up to a multiple of G bytes: at most S - 1 bytes per
        // line, plus floating point.
        const double rounding = (c.topo.servers - 1) / (c.topo.scale_out_gbps * 1e3);
        INFO("seed " << seed << ", shape " << c.shape << ": predicted " << predicted << " bound " << bound);
        CHECK(predicted <= bound + rounding + 1e-9 * bound + 1e-9);
        CHECK(predicted >= bound - 1e-9 * bound - 1e-9);
    }
}

TEST_CASE("exact policy: an already balanced uniform matrix needs S - 1 stages") {
    for (int s = 2; s <= 12; ++s)
        for (int g : {1, 2, 8}) {
            const topology t = make_topology(s, g);
            const traffic_matrix m = make_uniform(t, 1 << 20);
            const plan p = make_plan(m, t, with(scheduler::fast, policy::exact));
            fast::test::check_plan(p, m);
            INFO(s << " x " << g);
            CHECK(count_stages(p) == static_cast<std::size_t>(s - 1));
        }
}

TEST_CASE("the hand example as a 4 x 1 cluster: 12 units of scale-out against SpreadOut's 14") {
    traffic_matrix m(4, 4);
    m << 0, 5, 2, 3, 2, 0, 4, 1, 5, 1, 0, 6, 4, 3, 2, 0;
    m *= 1'000'000;
    topology t = make_topology(4, 1);
    t.alpha_out_us = 0;
    const plan exact = make_plan(m, t, with(scheduler::fast, policy::exact));
    fast::test::check_plan(exact, m);
    CHECK(scale_out_volume(exact) == 12'000'000);
    CHECK(predict_us(exact) == Approx(12e6 / 50e3));
    const plan spread = make_plan(m, t, with(scheduler::spreadout));
    fast::test::check_plan(spread, m);
    CHECK(scale_out_volume(spread) == 14'000'000);
    CHECK(predict_us(spread) == Approx(14e6 / 50e3));
    CHECK(lower_bound_us(m, t) == Approx(12e6 / 50e3));
}

TEST_CASE("a planner reused across calls gives the same plans as fresh ones") {
    const topology t = make_topology(4, 4);
    for (const policy p : all_policies) {
        planner reused(t, with(scheduler::fast, p));
        for (std::uint64_t seed = 0; seed < 20; ++seed) {
            const traffic_matrix m = seed % 3 == 0 ? make_uniform(t, 1 << 20) : make_zipf(t, 0.8, 1 << 24, seed);
            const plan fresh = make_plan(m, t, with(scheduler::fast, p));
            fast::test::check_plan(fresh, m);
            CHECK(reused.make(m) == fresh);
        }
    }
}

TEST_CASE("last_scheduler names the scheduler the last plan used") {
    const topology t = make_topology(3, 2);
    const traffic_matrix m = make_zipf(t, 0.8, 1 << 20, 1);
    for (scheduler s : {scheduler::fast, scheduler::direct, scheduler::spreadout, scheduler::fast_unbalanced}) {
        INFO(to_string(s));
        planner p(t, with(s));
        test::check_plan(p.make(m), m);
        CHECK(p.last_scheduler() == s);
        (void)p.make_rank(m, 1);
        CHECK(p.last_scheduler() == s);
    }
}

TEST_CASE("the default's end-to-end time is the better of fast's and direct's, from 4 KiB to 1 GiB per GPU") {
    // End to end: the agreement, one rank's planning (the planning cost model, counted alike on
    // every rank) and the predicted exchange. The automatic scheduler decides from an estimate
    // before it plans FAST; where that lets it plan FAST's schedule and direct then wins, it has
    // spent the schedule: that, and 1%, is all it may lose.
    int fast_chosen = 0;
    int cases = 0;
    int lost = 0; // cases that lost more than 1% (each within the schedule it spent)
    for (const auto& [servers, g] : {std::pair{2, 4}, std::pair{3, 2}, std::pair{4, 8}, std::pair{8, 8},
                                     std::pair{16, 8}, std::pair{32, 8}, std::pair{4, 4}, std::pair{8, 2}}) {
        if (test::sanitized && servers * g > 128) continue;
        for (int w = 0; w < 3; ++w)
            for (std::int64_t bytes = 4096; bytes <= (std::int64_t{1} << 30); bytes *= 4) {
                const topology t = make_topology(servers, g);
                const traffic_matrix m = w == 0   ? make_zipf(t, 0.8, bytes, 1)
                                         : w == 1 ? make_moe(t, moe_options{}, bytes, 1)
                                                  : make_uniform(t, bytes / t.ranks());
                INFO(servers << " x " << g << ", workload " << w << ", " << bytes << " bytes per GPU");
                const double agreement = plan_agreement(t).us;
                auto end_to_end = [&](scheduler s, scheduler* chose = nullptr) {
                    plan_options o;
                    o.scheduler = s;
                    planner p(t, o);
                    const plan& made = p.make(m);
                    test::check_plan(made, m);
                    CHECK(made.scheduler == to_string(p.last_scheduler()));
                    if (chose != nullptr) *chose = p.last_scheduler();
                    return agreement + p.planning_work_us() + predict_us(made);
                };
                scheduler chose = scheduler::automatic;
                const double automatic = end_to_end(scheduler::automatic, &chose);
                const double fast = end_to_end(scheduler::fast);
                const double direct = end_to_end(scheduler::direct);
                const double best = std::min(fast, direct);
                // What a schedule costs before the choice: every candidate sized effort tries and
                // the rest of the schedule (fast's own planning less its emission).
                plan_options o;
                o.scheduler = scheduler::fast;
                planner schedule_only(t, o);
                (void)schedule_only.make_schedule(m);
                const double spent = chose == scheduler::direct ? schedule_only.planning_work_us() : 0.0;
                CHECK(automatic <= 1.01 * best + spent);
                lost += automatic > 1.01 * best;
                fast_chosen += chose == scheduler::fast;
                ++cases;
            }
    }
    INFO(lost << " of " << cases << " cases lost more than 1% (within the schedule spent)");
    CHECK(lost * 20 < cases);       // under 5% of the sweep
    CHECK(fast_chosen > cases / 5); // FAST wherever it pays
    const topology t = make_topology(4, 8);
    const traffic_matrix m = make_zipf(t, 0.8, std::int64_t{256} << 20, 1);
    planner p(t);
    const plan& chosen = p.make(m);
    test::check_plan(chosen, m);
    CHECK(chosen.scheduler == "fast");
    const plan direct = make_direct_plan(m, t);
    test::check_plan(direct, m);
    CHECK(predict_us(chosen) < 0.9 * predict_us(direct));
}

TEST_CASE("bad options and mismatched matrices are named") {
    // Every option's message: plan_options_test.cpp. The planner validates its options.
    const topology t = make_topology(2, 2);
    plan_options o;
    o.chunks = 0;
    CHECK_THROWS_WITH(planner(t, o), Catch::Contains("chunks must be at least 1, got 0"));
    CHECK_THROWS_WITH(make_plan(traffic_matrix::Zero(3, 3), t),
                      Catch::Contains("3 x 3 but the topology has 2 x 2 = 4 ranks"));
}

TEST_CASE("long calls ramp with ramp times long_call_ramp_scale, short ones with ramp as given") {
    // 4 x 8 on h200: an alpha_out is 500 KB per NIC, so 16 MiB per GPU is a call of about 30
    // alpha_out (under 200: the ramp as given), 192 MiB one of about 330 (between: some of the
    // scale) and 1 GiB one of about 1,800 (over 400: all of it).
    const topology t = make_topology(4, 8);
    const plan_options defaults;
    plan_options unscaled;
    unscaled.long_call_ramp_scale = 1.0;
    plan_options scaled_ramp = unscaled; // what the planner computes for a long call
    scaled_ramp.ramp = defaults.ramp * (1.0 + (defaults.long_call_ramp_scale - 1.0));
    int long_calls_changed = 0;
    int middle_calls_between = 0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const traffic_matrix short_call = make_zipf(t, 0.8, std::int64_t{16} << 20, seed);
        const plan by_default = make_plan(short_call, t);
        fast::test::check_plan(by_default, short_call);
        CHECK(by_default == make_plan(short_call, t, unscaled));
        const traffic_matrix long_call = make_zipf(t, 0.8, std::int64_t{1} << 30, seed);
        const plan scaled = make_plan(long_call, t);
        const plan as_given = make_plan(long_call, t, unscaled);
        fast::test::check_plan(scaled, long_call);
        fast::test::check_plan(as_given, long_call);
        CHECK(scaled == make_plan(long_call, t, scaled_ramp));
        long_calls_changed += scaled == as_given ? 0 : 1;
        const traffic_matrix middle_call = make_zipf(t, 0.8, std::int64_t{192} << 20, seed);
        const plan middle = make_plan(middle_call, t);
        const plan middle_as_given = make_plan(middle_call, t, unscaled);
        const plan middle_fully_scaled = make_plan(middle_call, t, scaled_ramp);
        fast::test::check_plan(middle, middle_call);
        fast::test::check_plan(middle_as_given, middle_call);
        fast::test::check_plan(middle_fully_scaled, middle_call);
        middle_calls_between += middle != middle_as_given && middle != middle_fully_scaled ? 1 : 0;
    }
    CHECK(long_calls_changed > 0);
    CHECK(middle_calls_between > 0);
}

TEST_CASE("chunks split every exact stage into consecutive stages") {
    const topology t = make_topology(4, 2);
    const traffic_matrix m = make_zipf(t, 0.8, 1 << 24, 3);
    plan_options o = with(scheduler::fast, policy::exact);
    const plan one = make_plan(m, t, o);
    fast::test::check_plan(one, m);
    o.chunks = 3;
    const plan three = make_plan(m, t, o);
    fast::test::check_plan(three, m);
    CHECK(count_stages(three) > count_stages(one));
    CHECK(count_stages(three) <= 3 * count_stages(one));
}

TEST_CASE("rail packing keeps the quantum candidate whose schedule predicts fastest") {
    // The candidates are the default quantum times 1, 2 and 3, then refined by -/+ 1/2 and -/+ 1/4
    // around the best: the plan must be one of the plans made with such a quantum fixed, and
    // predict about as fast as the best of the integer factors (all of which are tried).
    for (const int servers : {8, 16}) {
        const topology t = make_topology(servers, 4);
        for (std::uint64_t seed = 1; seed <= 3; ++seed) {
            const traffic_matrix m = make_zipf(t, 0.8, 1 << 26, seed);
            std::int64_t line = 0;
            for (int s = 0; s < servers; ++s) {
                std::int64_t row = 0;
                std::int64_t col = 0;
                for (int d = 0; d < servers; ++d)
                    if (d != s) {
                        row += tile(m, t, s, d).sum();
                        col += tile(m, t, d, s).sum();
                    }
                line = std::max({line, row, col});
            }
            const std::int64_t q =
                std::max<std::int64_t>(1, static_cast<std::int64_t>(0.1 * (static_cast<double>(line) / (servers * 4))));
            const plan chosen = make_plan(m, t);
            fast::test::check_plan(chosen, m);
            bool found = false;
            double best = 1e300;
            for (int quarters = 4; quarters <= 15; ++quarters) {
                plan_options o;
                o.quantum = detail::saturate(static_cast<double>(q) * quarters / 4);
                const plan fixed = make_plan(m, t, o);
                fast::test::check_plan(fixed, m);
                found = found || fixed == chosen;
                if (quarters % 4 == 0) best = std::min(best, predict_us(fixed));
            }
            INFO(servers << " servers, seed " << seed);
            CHECK(found);
            CHECK(predict_us(chosen) <= best * 1.01);
        }
    }
}

TEST_CASE("stable_sort_by orders by key and keeps the order of equal keys, short lists and long") {
    std::mt19937_64 rng(5);
    std::vector<std::pair<std::int64_t, std::size_t>> keys;
    for (int round = 0; round < 500; ++round) {
        const std::size_t n = rng() % 80; // both sides of the insertion-sort cut
        std::vector<std::int64_t> key(n + 10);
        for (auto& k : key) k = static_cast<std::int64_t>(rng() % 6);
        std::vector<std::size_t> order(n);
        for (auto& x : order) x = rng() % key.size();
        std::vector<std::size_t> expected = order;
        std::stable_sort(expected.begin(), expected.end(),
                         [&](std::size_t x, std::size_t y) { return key[x] < key[y]; });
        detail::stable_sort_by(order, keys, [&](std::size_t x) { return key[x]; });
        INFO("round " << round << ", n " << n);
        CHECK(order == expected);
    }
}

TEST_CASE("the water level is the largest step length at which the pieces fill G cells") {
    std::mt19937_64 rng(11);
    std::vector<detail::level_cursor> levels;
    for (int round = 0; round < 3000; ++round) {
        const int g = 1 + static_cast<int>(rng() % 9);
        std::vector<std::int64_t> duration(rng() % 12);
        for (auto& w : duration) w = static_cast<std::int64_t>(rng() % (round % 2 == 0 ? 50 : 2000));
        std::sort(duration.begin(), duration.end(), std::greater<>());
        // By the definition: the largest D with sum of floor(w / D) >= g, 0 if none.
        std::int64_t expected = 0;
        for (std::int64_t d = 2000; d >= 1 && expected == 0; --d) {
            std::int64_t cells = 0;
            for (const std::int64_t w : duration) cells += w / d;
            if (cells >= g) expected = d;
        }
        INFO("round " << round << ", g " << g);
        CHECK(detail::water_level(duration, g, levels) == expected);
    }
}

TEST_CASE("a packed step is the last when the pieces fit G cells, and then as short as they fit") {
    std::mt19937_64 rng(12);
    std::vector<detail::level_cursor> levels;
    for (int round = 0; round < 3000; ++round) {
        const int g = 1 + static_cast<int>(rng() % 9);
        std::vector<std::int64_t> pieces(1 + rng() % 10);
        for (auto& w : pieces) w = 1 + static_cast<std::int64_t>(rng() % (round % 2 == 0 ? 50 : 2000));
        std::sort(pieces.begin(), pieces.end(), std::greater<>());
        const std::int64_t min_step = static_cast<std::int64_t>(rng() % 300);
        const std::int64_t max_step = round % 3 == 0 ? INT64_MAX : 1 + static_cast<std::int64_t>(rng() % 2000);
        const auto cells = [&](std::int64_t d) {
            std::int64_t n = 0;
            for (const std::int64_t w : pieces) n += (w + d - 1) / d;
            return n;
        };
        const detail::packed_step got = detail::plan_packed_step(pieces, {g, min_step, max_step}, levels);
        const std::int64_t lo = std::max<std::int64_t>(1, detail::water_level(pieces, g, levels));
        const std::int64_t level = std::min(std::max(lo, std::min(min_step, pieces.front())), max_step);
        INFO("round " << round << ", g " << g << ", min_step " << min_step << ", max_step " << max_step);
        REQUIRE(got.last == (cells(level) <= g));
        if (!got.last) {
            CHECK(got.level == level);
            CHECK(got.water == lo);
            continue;
        }
        // By the definition: the least D >= lo at which the pieces fit G cells.
        std::int64_t expected = lo;
        while (cells(expected) > g) ++expected;
        CHECK(got.level == expected);
        CHECK(got.water == expected);
    }
}

TEST_CASE(
    "a rail-packed candidate stops at its budget, is costed from its step lengths alone, and shaping keeps their sum") {
    // The quantum choice prunes a candidate once its rail-packed steps cost the best so far:
    // sound only because shape_steps splits steps without changing their lengths' sum.
    for (const int servers : {4, 8, 16}) {
        const topology t = make_topology(servers, 8);
        for (std::uint64_t seed = 1; seed <= 3; ++seed) {
            const auto [pair, line, stages] = quantised_stages(make_zipf(t, 0.8, 1 << 26, seed), t);
            const std::int64_t alpha = line / 1000 + 1;
            const detail::packing_limits limits{8, 2 * alpha, line / 8};
            detail::packing_workspace ws;
            detail::shaping_workspace shaping;
            detail::stage_schedule whole;
            detail::pack_rails(stages, pair, limits, whole, ws);
            std::vector<std::int64_t> lengths;
            detail::step_lengths(whole, lengths);
            const std::int64_t sum = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
            const double cost = static_cast<double>(sum) + static_cast<double>(alpha) * whole.last_step;
            INFO(servers << " servers, seed " << seed);
            // Candidates are costed without building their slots: the same step lengths, and
            // the same step count after shaping (with and without a receiver-side drop).
            std::vector<std::int64_t> counted;
            REQUIRE(detail::packed_step_lengths(stages, pair, limits, {}, ws, counted));
            CHECK(counted == lengths);
            CHECK(detail::packed_step_lengths(stages, pair, limits, {cost + 1, alpha}, ws, counted));
            CHECK(counted == lengths);
            CHECK_FALSE(detail::packed_step_lengths(stages, pair, limits, {cost, alpha}, ws, counted));
            REQUIRE(detail::packed_step_lengths(stages, pair, limits, {}, ws, counted));
            for (const double drop : {0.0, 2.0}) {
                INFO("drop " << drop);
                detail::stage_schedule shaped = whole;
                const detail::shape_params shape{1.5, 2 * alpha, drop, 0};
                const std::int32_t steps = detail::count_shaped_steps(counted, shape, shaping);
                detail::shape_steps(shaped, shape, shaping);
                CHECK(steps == shaped.last_step);
                CHECK(steps > whole.last_step); // the ramps split steps, so the check has teeth
            }
            detail::shape_steps(whole, {1.5, 2 * alpha, 0, 0}, shaping);
            detail::step_lengths(whole, lengths);
            CHECK(std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0}) == sum);
            CHECK(static_cast<std::size_t>(whole.last_step) + 1 == lengths.size());
        }
    }
}

namespace {

// Shapes a schedule of 2 servers swapping over 2 rails whose steps have the given lengths
// (index 0 unused), after checking that counting the shape (count_shaped_steps) gives the same
// step count; returns the shaped steps' lengths (index 0 unused).
std::vector<std::int64_t> shaped_two_server_lengths(const std::vector<std::int64_t>& unshaped, double growth,
                                                    std::int64_t edge, double drop) {
    detail::stage_schedule sc;
    sc.clear(2, 2);
    const std::size_t swap = sc.add_perm(std::vector<std::int32_t>{1, 0});
    for (std::size_t step = 1; step < unshaped.size(); ++step)
        for (std::int32_t rail = 0; rail < 2; ++rail) {
            const std::size_t b = sc.add_bytes();
            sc.bytes_of(detail::stage_schedule::slot{0, 0, swap, b})[0] = unshaped[step];
            sc.bytes_of(detail::stage_schedule::slot{0, 0, swap, b})[1] = unshaped[step];
            sc.slots.push_back({rail, static_cast<std::int32_t>(step), swap, b});
        }
    sc.last_step = static_cast<std::int32_t>(unshaped.size() - 1);
    detail::shaping_workspace ws;
    const std::int32_t steps = detail::count_shaped_steps(unshaped, {growth, edge, drop, 0}, ws);
    detail::shape_steps(sc, {growth, edge, drop, 0}, ws);
    REQUIRE(steps == sc.last_step);
    std::vector<std::int64_t> lengths;
    detail::step_lengths(sc, lengths);
    return lengths;
}

} // namespace

TEST_CASE("shaping starts the first step at growth times the edge and ends the last at the edge") {
    // The first step carries its rails' own bytes, so no edge-long step goes before it; the
    // last step's redistribution is exposed, so the falling side still ends at the edge.
    const double growth = 4;
    const std::int64_t edge = 100;
    for (const double drop : {0.0, 2.0}) {
        INFO("drop " << drop);
        const std::vector<std::int64_t> lengths = shaped_two_server_lengths({0, 10000, 9000}, growth, edge, drop);
        CHECK(std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0}) == 19000);
        CHECK(lengths[1] == 400); // growth * edge, where an edge-long first step would be 100
        CHECK(lengths.back() == edge);
        // Rising: each step at most growth times the one before (a quarter over stays whole).
        const auto peak = static_cast<std::size_t>(std::max_element(lengths.begin(), lengths.end()) - lengths.begin());
        for (std::size_t k = 2; k <= peak; ++k)
            CHECK(static_cast<double>(lengths[k]) <= 1.25 * growth * static_cast<double>(lengths[k - 1]));
        for (std::size_t k = peak + 1; k + 1 < lengths.size(); ++k)
            CHECK(static_cast<double>(lengths[k]) <= 1.25 * growth * static_cast<double>(lengths[k + 1]));
    }
}

TEST_CASE("shaping ends the schedule with a step shorter than the edge instead of starting with it") {
    // A decomposition's last stage can leave a step far shorter than the edge. First, it would
    // leave the step after it no room to hide that step's balancing; last, it costs the same
    // alpha and exposes only its own bytes.
    const std::vector<std::int64_t> lengths = shaped_two_server_lengths({0, 10000, 9000, 30}, 4, 100, 0.0);
    CHECK(std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0}) == 19030);
    CHECK(lengths[1] == 400); // growth * edge: the short step is not first
    CHECK(lengths.back() == 30);
}

TEST_CASE("zipf:0.8 plans predict within 1.03 of the bound at 4 x 8 and 8 x 8, on 40 seeds each") {
    // The quality targets for these sizes, beyond the one seed fast-plan uses by
    // default: a short first step once left seed 30 at 8 x 8 at 1.037.
    for (const int servers : {4, 8}) {
        const topology t = make_topology(servers, 8);
        planner p(t);
        for (std::uint64_t seed = 1; seed <= 40; ++seed) {
            const traffic_matrix m = make_zipf(t, 0.8, std::int64_t{1} << 28, seed);
            const plan& got = p.make(m);
            fast::test::check_plan(got, m);
            INFO(servers << " servers, seed " << seed);
            CHECK(predict_us(got) / lower_bound_us(m, t) <= 1.03);
        }
    }
}

TEST_CASE("the first step is no longer than its rails' own bytes cover and never below the edge") {
    // Each GPU sends to each server what (i * 7 + d * 3 + j) % 5 gives, but three of a server's
    // eight GPUs hold a sixteenth of that for some destinations (as MoE experts' locality
    // does): a first step as long as growth times the edge would gather for them before it,
    // where nothing hides a gather.
    const topology t = make_topology(4, 8);
    traffic_matrix m(32, 32);
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) {
            const int i = r % 8;
            const int d = c / 8;
            std::int64_t v = std::int64_t{1 << 20} * (1 + (i * 7 + d * 3 + c % 8) % 5);
            if ((i + d * 5) % 8 < 3) v /= 16;
            m(r, c) = v;
        }
    planner p(t);
    const plan& got = p.make(m);
    fast::test::check_plan(got, m);
    // The first step is a scale-out step, and everything it sends comes from its senders' own
    // send buffers.
    bool any = false;
    for (const transfer& x : got.step(0))
        if (x.tier == tier::scale_out) {
            any = true;
            CHECK(x.src_buffer == buffer::send);
        }
    CHECK(any);
}

TEST_CASE("min_cost_assignment finds the least total cost, as every assignment does") {
    std::mt19937_64 rng(21);
    detail::assignment_workspace ws;
    for (int round = 0; round < 4000; ++round) {
        const std::size_t cols = static_cast<std::size_t>(round % 8);
        const std::size_t rows = round % 3 == 0 && cols > 0 ? rng() % (cols + 1) : cols;
        // Few distinct values half of the time: ties everywhere.
        const std::uint64_t range = round % 2 == 0 ? 4 : 1000000;
        std::vector<std::int64_t> cost(rows * cols);
        for (auto& c : cost) c = static_cast<std::int64_t>(rng() % range);
        std::vector<std::size_t> col_of_row(rows);
        detail::min_cost_assignment(cost, rows, cols, col_of_row, ws);
        // By the definition: the first `rows` entries of every permutation of the columns.
        std::vector<std::size_t> perm(cols);
        std::iota(perm.begin(), perm.end(), std::size_t{0});
        std::int64_t best = INT64_MAX;
        do {
            std::int64_t total = 0;
            for (std::size_t r = 0; r < rows; ++r) total += cost[r * cols + perm[r]];
            best = std::min(best, total);
        } while (std::next_permutation(perm.begin(), perm.end()));
        INFO("round " << round << ", " << rows << " x " << cols);
        std::set<std::size_t> used;
        std::int64_t total = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            REQUIRE(col_of_row[r] < cols);
            CHECK(used.insert(col_of_row[r]).second);
            total += cost[r * cols + col_of_row[r]];
        }
        CHECK(total == best);
    }
    // Its preconditions are assertions (the planner's own costs always fit); costs_fit is what
    // they check.
    CHECK_FALSE(detail::costs_fit(std::vector<std::int64_t>{0, -1, 2, 3}, 2));
    CHECK_FALSE(detail::costs_fit(std::vector<std::int64_t>{INT64_MAX, 0, 0, 0}, 2));
    CHECK(detail::costs_fit(std::vector<std::int64_t>{detail::max_cost_sum / 2, 0, 0, 0}, 2));
}

TEST_CASE("assign_rails only relabels rails, and covers the most own bytes in the first step and received bytes in the "
          "last") {
    std::mt19937_64 rng(5);
    for (int round = 0; round < 120; ++round) {
        const int servers = 2 + round % 4;
        const int g = 2 + round % 4;
        const auto us = static_cast<std::size_t>(servers);
        const auto ug = static_cast<std::size_t>(g);
        const topology t = make_topology(servers, g);
        const auto [pair, line, stages] =
            quantised_stages(make_zipf(t, 0.8, 1 << 22, static_cast<std::uint64_t>(round + 1)), t);
        detail::packing_workspace packing;
        detail::shaping_workspace shaping;
        detail::rail_workspace ws;
        detail::stage_schedule before;
        detail::pack_rails(stages, pair, {g, line / 500 + 1, line}, before, packing);
        detail::shape_steps(before, {4.0, line / 500 + 1, round % 3 == 0 ? 2.0 : 0.0, 0}, shaping);
        // What each GPU sends to and receives from each server pair (a random stand-in is as
        // good as the matrix's: assign_rails must cover the most of whatever it is given).
        std::vector<std::int64_t> sent(us * us * ug);
        std::vector<std::int64_t> received(us * us * ug);
        for (auto* by : {&sent, &received})
            for (auto& x : *by)
                x = rng() % 2 == 0 ? 0 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(line / 4 + 1));
        std::vector<std::int64_t> lengths;
        detail::step_lengths(before, lengths);
        detail::stage_schedule after = before;
        shared_counts counts; // the exact sums (rail detail)
        counts.servers = servers;
        counts.gpus_per_server = g;
        counts.pair.assign(us * us, 0);
        counts.gpus.assign(us * ug, gpu_totals{});
        counts.rail_sent = sent;
        counts.rail_received = received;
        detail::rail_bytes by_rail;
        by_rail.reset(counts);
        detail::assign_rails(after, lengths, by_rail, ws);
        INFO("round " << round << ", " << servers << " servers, G " << g);
        // The same slots, only their rails changed, still one slot per rail and step.
        REQUIRE(after.slots.size() == before.slots.size());
        CHECK(after.perms == before.perms);
        CHECK(after.bytes == before.bytes);
        CHECK(after.last_step == before.last_step);
        std::set<std::pair<std::int32_t, std::int32_t>> taken;
        for (std::size_t j = 0; j < after.slots.size(); ++j) {
            const auto& x = after.slots[j];
            CHECK(x.step == before.slots[j].step);
            CHECK(x.perm == before.slots[j].perm);
            CHECK(x.bytes == before.slots[j].bytes);
            CHECK(x.rail >= 0);
            CHECK(x.rail < g);
            CHECK(taken.insert({x.step, x.rail}).second);
        }
        // The bytes the slots of `step` cover on the rails `rail_of` gives them.
        const auto covered = [&](const detail::stage_schedule& sc, std::int32_t step,
                                 const std::vector<std::int64_t>& by,
                                 const std::function<std::size_t(std::size_t)>& rail_of) {
            std::int64_t total = 0;
            for (std::size_t j = 0; j < sc.slots.size(); ++j) {
                const auto& x = sc.slots[j];
                if (x.step != step) continue;
                const auto perm = sc.perm_of(x);
                const auto bytes = sc.bytes_of(x);
                for (std::size_t s = 0; s < us; ++s)
                    if (static_cast<std::size_t>(perm[s]) != s)
                        total += std::min(bytes[s], by[(s * us + static_cast<std::size_t>(perm[s])) * ug + rail_of(j)]);
            }
            return total;
        };
        // By the definition: the best of every assignment of the step's slots to rails.
        const auto best_cover = [&](std::int32_t step, const std::vector<std::int64_t>& by) {
            std::vector<std::size_t> in_step;
            for (std::size_t j = 0; j < before.slots.size(); ++j)
                if (before.slots[j].step == step) in_step.push_back(j);
            std::vector<std::size_t> rails(ug);
            std::iota(rails.begin(), rails.end(), std::size_t{0});
            std::int64_t best = 0;
            do {
                best = std::max(best, covered(before, step, by, [&](std::size_t j) {
                                    return rails[static_cast<std::size_t>(std::find(in_step.begin(), in_step.end(), j) -
                                                                          in_step.begin())];
                                }));
            } while (std::next_permutation(rails.begin(), rails.end()));
            return best;
        };
        const auto rail_after = [&](std::size_t j) { return static_cast<std::size_t>(after.slots[j].rail); };
        CHECK(covered(after, 1, sent, rail_after) == best_cover(1, sent));
        const auto peak = std::max_element(lengths.begin(), lengths.end()) - lengths.begin();
        const std::int32_t last = before.last_step;
        const bool falling =
            last > peak && lengths[static_cast<std::size_t>(last)] <= lengths[static_cast<std::size_t>(peak)] / 2;
        if (falling) CHECK(covered(after, last, received, rail_after) == best_cover(last, received));
        // The steps up to the peak but the first, and those after it longer than half of it, keep
        // their rails.
        for (std::size_t j = 0; j < after.slots.size(); ++j) {
            const auto k = static_cast<std::size_t>(after.slots[j].step);
            if (k > 1 &&
                (k <= static_cast<std::size_t>(peak) || lengths[k] > lengths[static_cast<std::size_t>(peak)] / 2))
                CHECK(after.slots[j].rail == before.slots[j].rail);
        }
    }
}

// --- Uneven fabrics (planner(fabric), detail/uneven_rails.hpp) ------------------------------------
// Each server pair's bytes over its rails in proportion to their rates, nothing through a NIC that
// is down. Every plan goes through the verifier against the ranks' rates, every rank's program is
// its part of the whole plan (from counts too), and no plan beats the fabric's T_lb.

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
    check_plan(from_fabric.make(m), m);
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
