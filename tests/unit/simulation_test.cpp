#include "../support.hpp"

#include <fast/planner.hpp>
#include <fast/simulation.hpp>

#include <algorithm>
#include <array>
#include <set>

using namespace fast;
using fast::test::out;

namespace {

// The contract spelled out naively, O(T^2): the transfers of the last step before t's in which
// t.src (t.dst) takes part.
std::vector<std::size_t> naive_dependencies(const plan& p, std::size_t index, std::uint32_t step) {
    const transfer& t = p.transfers[index];
    std::set<std::size_t> out;
    for (const int rank : {t.src, t.dst}) {
        long last = -1;
        for (std::size_t k = 0; k < step; ++k)
            for (const transfer& x : p.step(k))
                if (x.src == rank || x.dst == rank) last = static_cast<long>(k);
        if (last < 0) continue;
        const auto k = static_cast<std::size_t>(last);
        for (std::size_t i = p.step_offsets[k]; i < p.step_offsets[k + 1]; ++i)
            if (p.transfers[i].src == rank || p.transfers[i].dst == rank) out.insert(i);
    }
    return {out.begin(), out.end()};
}

// The cost model of cost.hpp driven by the dependency graph alone: a transfer is ready when its
// dependencies have ended; a port's batch starts when its last transfer is ready. Must equal
// fast::simulate exactly if the graph is the contract.
double model_from_graph(const plan& p, const dependency_graph& g) {
    const topology& topo = p.topology;
    const auto r = static_cast<std::size_t>(topo.ranks());
    std::vector<double> end(p.transfers.size(), 0.0);
    std::vector<double> ready(p.transfers.size(), 0.0);
    std::vector<double> batch_start(r * 4);
    std::vector<std::int64_t> batch_bytes(r * 4);
    std::vector<double> batch_end(r * 4);
    auto ports = [](const transfer& t) {
        const std::size_t o = t.tier == tier::scale_out ? 0 : 2;
        return std::array<std::size_t, 2>{static_cast<std::size_t>(t.src) * 4 + o,
                                          static_cast<std::size_t>(t.dst) * 4 + o + 1};
    };
    double completion = 0;
    for (std::size_t k = 0; k < p.steps(); ++k) {
        std::fill(batch_start.begin(), batch_start.end(), 0.0);
        std::fill(batch_bytes.begin(), batch_bytes.end(), 0);
        for (std::size_t i = p.step_offsets[k]; i < p.step_offsets[k + 1]; ++i) {
            for (const std::size_t d : g.of(i)) ready[i] = std::max(ready[i], end[d]);
            for (const std::size_t q : ports(p.transfers[i])) {
                batch_start[q] = std::max(batch_start[q], ready[i]);
                batch_bytes[q] += p.transfers[i].bytes;
            }
        }
        for (std::size_t i = p.step_offsets[k]; i < p.step_offsets[k + 1]; ++i)
            for (const std::size_t q : ports(p.transfers[i])) {
                const bool out_tier = q % 4 < 2;
                batch_end[q] = batch_start[q] + (out_tier ? topo.alpha_out_us : topo.alpha_up_us) +
                               detail::transfer_us(batch_bytes[q], out_tier ? topo.scale_out_gbps : topo.scale_up_gbps);
            }
        for (std::size_t i = p.step_offsets[k]; i < p.step_offsets[k + 1]; ++i) {
            const auto q = ports(p.transfers[i]);
            end[i] = std::max(batch_end[q[0]], batch_end[q[1]]);
            completion = std::max(completion, end[i]);
        }
    }
    return completion;
}

void check_graph(const plan& p) {
    const dependency_graph g = make_dependency_graph(p);
    REQUIRE(g.size() == p.transfers.size());
    REQUIRE(g.offsets.size() == p.transfers.size() + 1);
    for (std::size_t k = 0; k < p.steps(); ++k)
        for (std::size_t i = p.step_offsets[k]; i < p.step_offsets[k + 1]; ++i) {
            INFO("transfer " << i << " of step " << k);
            REQUIRE(g.step[i] == k);
            const auto deps = g.of(i);
            CHECK(std::is_sorted(deps.begin(), deps.end()));
            CHECK(std::adjacent_find(deps.begin(), deps.end()) == deps.end());
            for (const std::size_t d : deps) CHECK(g.step[d] < k);
            const std::vector<std::size_t> expected = naive_dependencies(p, i, static_cast<std::uint32_t>(k));
            CHECK(std::vector<std::size_t>(deps.begin(), deps.end()) == expected);
        }
    CHECK(model_from_graph(p, g) == Approx(predict_us(p)).epsilon(1e-12).margin(1e-9));
}

} // namespace

TEST_CASE("dependencies: the previous step of the sender and of the receiver, looking past idle steps") {
    const topology t = make_topology(4, 1);
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(0, 1) = 100;
    m(2, 3) = 100;
    m(1, 2) = 100;
    m(3, 0) = 100;
    plan p;
    p.topology = t;
    p.scratch_bytes.assign(4, 0);
    p.transfers = {out(0, 1, 100), out(2, 3, 100)}; // step 0: transfers 0, 1
    p.end_step();
    p.transfers.push_back(out(1, 2, 100)); // step 1: transfer 2 waits for 0 (rank 1) and 1 (rank 2)
    p.end_step();
    p.transfers.push_back(out(3, 0, 100, 0, 0)); // step 2: transfer 3; ranks 3 and 0 sat out step 1
    p.end_step();
    fast::test::check_plan(p, m);
    const dependency_graph g = make_dependency_graph(p);
    CHECK(g.of(0).empty());
    CHECK(g.of(1).empty());
    CHECK(std::vector<std::size_t>(g.of(2).begin(), g.of(2).end()) == std::vector<std::size_t>{0, 1});
    // Rank 3's last step is 0 (transfer 1), rank 0's last step is 0 (transfer 0): not transfer 2.
    CHECK(std::vector<std::size_t>(g.of(3).begin(), g.of(3).end()) == std::vector<std::size_t>{0, 1});

    const rank_steps program = make_rank_steps(p);
    REQUIRE(program.of(0).size() == 2);
    CHECK(program.of(0)[0].step == 0);
    CHECK(program.of(0)[1].step == 2);
    REQUIRE(program.of(1).size() == 2);
    CHECK(program.entries(1, program.of(1)[1])[0].index == 2);
    check_graph(p);
}

TEST_CASE("a transfer shared by both ranks' previous steps is listed once") {
    const topology t = make_topology(2, 1);
    traffic_matrix m = traffic_matrix::Zero(2, 2);
    m(0, 1) = 300;
    m(1, 0) = 100;
    plan p;
    p.topology = t;
    p.scratch_bytes.assign(2, 0);
    p.transfers = {out(0, 1, 200)};
    p.end_step();
    p.transfers.push_back(out(0, 1, 100, 200, 200));
    p.transfers.push_back(out(1, 0, 100));
    p.end_step();
    fast::test::check_plan(p, m);
    const dependency_graph g = make_dependency_graph(p);
    CHECK(std::vector<std::size_t>(g.of(1).begin(), g.of(1).end()) == std::vector<std::size_t>{0});
    CHECK(std::vector<std::size_t>(g.of(2).begin(), g.of(2).end()) == std::vector<std::size_t>{0});
    check_graph(p);
}

TEST_CASE("direct plans have no dependencies; every step of a rank program holds its own transfers") {
    const topology t = make_topology(3, 2);
    const traffic_matrix m = make_zipf(t, 1.0, 1 << 20, 5);
    const plan p = make_direct_plan(m, t);
    fast::test::check_plan(p, m);
    const dependency_graph g = make_dependency_graph(p);
    CHECK(g.dependencies.empty());
    const rank_steps program = make_rank_steps(p);
    for (int r = 0; r < t.ranks(); ++r) {
        REQUIRE(program.of(r).size() == 1);
        for (const rank_entry& e : program.entries(r, program.of(r)[0]))
            CHECK((p.transfers[e.index].src == r || p.transfers[e.index].dst == r));
    }
}

TEST_CASE("property: the graph is the contract and drives the cost model to the same prediction") {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        const fast::test::random_case c = fast::test::make_random_case(seed);
        INFO("seed " << seed << ", " << c.shape << ", " << c.topo.servers << " x " << c.topo.gpus_per_server);
        for (const scheduler s :
             {scheduler::fast, scheduler::fast_unbalanced, scheduler::direct, scheduler::spreadout}) {
            for (const policy pol : {policy::rail_packed, policy::bottleneck, policy::exact}) {
                plan_options o;
                o.scheduler = s;
                o.policy = pol;
                const plan p = make_plan(c.matrix, c.topo, o);
                INFO(to_string(s) << " " << to_string(pol));
                fast::test::check_plan(p, c.matrix);
                check_graph(p);
                if (s != scheduler::fast) break;
            }
        }
    }
}

TEST_CASE("skewed Megatron-sized case: FAST's graph at 8 x 8") {
    const topology t = make_topology(8, 8);
    const traffic_matrix m = make_zipf(t, 1.2, 64 << 20, 3);
    const plan p = make_plan(m, t);
    fast::test::check_plan(p, m);
    check_graph(p);
}
