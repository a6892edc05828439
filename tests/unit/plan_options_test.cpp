// plan_options.hpp: scheduler and policy names, the defaults, and validation naming each bad
// option with its value and what it must be.
#include <fast/plan_options.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace fast;

TEST_CASE("scheduler and policy names round-trip, and unknown ones list the valid ones") {
    for (const scheduler s :
         {scheduler::automatic, scheduler::fast, scheduler::fast_unbalanced, scheduler::direct, scheduler::spreadout})
        CHECK(parse_scheduler(to_string(s)) == s);
    for (const policy p : {policy::rail_packed, policy::bottleneck, policy::exact})
        CHECK(parse_policy(to_string(p)) == p);
    CHECK_THROWS_WITH(parse_scheduler("fastest"),
                      "unknown scheduler 'fastest' (expected automatic, fast, fast-unbalanced, direct or spreadout)");
    CHECK_THROWS_WITH(parse_policy("greedy"), "unknown policy 'greedy' (expected rail-packed, bottleneck or exact)");
}

TEST_CASE("the defaults are the tuned constants, and they validate") {
    const plan_options o;
    CHECK(o.scheduler == scheduler::automatic);
    CHECK(o.policy == policy::rail_packed);
    CHECK(o.quantum_fraction == detail::tuning::quantum_fraction);
    CHECK(o.quantum_choices == detail::tuning::quantum_choices);
    CHECK(o.quantum_refinements == detail::tuning::quantum_refinements);
    CHECK(o.refine_max_servers == detail::tuning::refine_max_servers);
    CHECK(o.ramp == detail::tuning::ramp);
    CHECK(o.long_call_ramp_scale == detail::tuning::long_call_ramp_scale);
    CHECK(o.min_step_alphas == detail::tuning::min_step_alphas);
    CHECK(o.max_step_share == detail::tuning::max_step_share);
    CHECK(o.window == detail::tuning::window);
    CHECK_NOTHROW(validate(o));
}

TEST_CASE("every bad option is named with its value and what it must be") {
    struct bad_case {
        std::function<void(plan_options&)> change;
        std::string message;
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<bad_case> cases = {
        {[](plan_options& o) { o.chunks = 0; }, "chunks must be at least 1, got 0"},
        {[](plan_options& o) { o.window = 0; }, "window must be between 1 and 64, got 0"},
        {[](plan_options& o) { o.window = detail::tuning::max_window + 1; }, "window must be between 1 and 64, got 65"},
        {[](plan_options& o) { o.ramp = -1; }, "ramp must be in [0, 1e+06], got -1"},
        {[&](plan_options& o) { o.ramp = nan; }, "ramp must be in [0, 1e+06], got nan"},
        {[](plan_options& o) { o.ramp = 2e6; }, "ramp must be in [0, 1e+06], got 2e+06"},
        {[](plan_options& o) { o.quantum_fraction = 0; }, "quantum_fraction must be in (0, 1e+06], got 0"},
        {[](plan_options& o) { o.long_call_ramp_scale = 0; }, "long_call_ramp_scale must be in (0, 1e+06], got 0"},
        {[](plan_options& o) { o.min_step_alphas = -1; }, "min_step_alphas must be in [0, 1e+06], got -1"},
        {[](plan_options& o) { o.max_step_share = 0; }, "max_step_share must be in (0, 1e+06], got 0"},
        {[](plan_options& o) { o.quantum = -3; }, "quantum must be non-negative, got -3"},
        {[](plan_options& o) { o.quantum_choices = 0; }, "quantum_choices must be between 1 and 64, got 0"},
        {[](plan_options& o) { o.quantum_choices = 65; }, "quantum_choices must be between 1 and 64, got 65"},
        {[](plan_options& o) { o.quantum_refinements = -1; }, "quantum_refinements must be between 0 and 16, got -1"},
        {[](plan_options& o) { o.quantum_refinements = 17; }, "quantum_refinements must be between 0 and 16, got 17"},
        {[](plan_options& o) { o.refine_max_servers = -1; }, "refine_max_servers must be non-negative, got -1"},
    };
    for (const bad_case& c : cases) {
        plan_options o;
        c.change(o);
        INFO(c.message);
        CHECK_THROWS_WITH(validate(o), c.message);
    }
}
