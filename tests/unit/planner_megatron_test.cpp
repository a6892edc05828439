// The real Megatron-LM MoE traces (workloads/megatron_moe_4x8.txt, FAST_MEGATRON set by meson).
#include "../support.hpp"
#include "rank_program_check.hpp"

#include <fast/agreement.hpp>
#include <fast/matrix_io.hpp>
#include <fast/planner.hpp>

#include <algorithm>
#include <cstdlib>

using namespace fast;

TEST_CASE("all 600 real Megatron matrices: every plan verifies; FAST stays near the bound") {
    const char* path = std::getenv("FAST_MEGATRON");
    REQUIRE(path != nullptr);
    const auto all = read_matrices_file(path, 32, 8192); // 8 KiB per token
    REQUIRE(all.size() == 600);
    for (const preset pr : {preset::h200, preset::mi300x}) {
        const topology t = make_topology(4, 8, pr);
        const double agreement = plan_agreement(t).us;
        planner fast_planner(t);
        plan_options exact_options;
        exact_options.policy = policy::exact;
        planner exact_planner(t, exact_options);
        std::vector<double> ratios;
        double end_to_end = 0;
        double direct_sum = 0;
        for (std::size_t k = 0; k < all.size(); ++k) {
            INFO("matrix " << k << ", preset " << to_string(pr));
            const traffic_matrix& m = all[k];
            const double bound = lower_bound_us(m, t);
            const plan& p = fast_planner.make(m);
            fast::test::check_plan(p, m);
            ratios.push_back(predict_us(p) / bound);
            end_to_end += (agreement + fast_planner.planning_work_us() + predict_us(p)) / bound;
            fast::test::check_plan(exact_planner.make(m), m);
            const plan direct = make_direct_plan(m, t);
            fast::test::check_plan(direct, m);
            direct_sum += predict_us(direct) / bound;
        }
        std::sort(ratios.begin(), ratios.end());
        double mean = 0;
        for (const double r : ratios) mean += r;
        mean /= static_cast<double>(ratios.size());
        end_to_end /= static_cast<double>(ratios.size());
        INFO("preset " << to_string(pr) << ": FAST mean " << mean << ", max " << ratios.back() << ", end to end "
                       << end_to_end << "; direct mean " << direct_sum / 600);
        // h200, the exchange (the default, its effort sized to these 1.4 ms calls): mean 1.046,
        // p95 1.064, worst 1.081; end to end (agreement, planning, exchange) 1.069, against the
        // target 1.05 (docs/performance.md). mi300x: guards a margin above what it reaches.
        const double p95 = ratios[(ratios.size() * 95 + 99) / 100 - 1]; // as fast-plan --all
        CHECK(mean <= (pr == preset::h200 ? 1.05 : 1.025));
        CHECK(p95 <= (pr == preset::h200 ? 1.07 : 1.03));
        CHECK(ratios.back() <= (pr == preset::h200 ? 1.10 : 1.04));
        CHECK(end_to_end <= (pr == preset::h200 ? 1.08 : 1.04));
        CHECK(direct_sum / 600 > 2.0); // direct pays for the skew
    }
}

TEST_CASE("every 25th real Megatron matrix: every rank's program is the verified whole plan restricted to it") {
    const char* path = std::getenv("FAST_MEGATRON");
    REQUIRE(path != nullptr);
    const auto all = read_matrices_file(path, 32, 8192);
    REQUIRE(all.size() == 600);
    const topology t = make_topology(4, 8);
    planner p(t); // reused across matrices, as a rank reuses it across layer calls
    for (std::size_t k = 0; k < all.size(); k += 25) {
        INFO("matrix " << k);
        fast::test::check_rank_programs(p, all[k]);
    }
}
