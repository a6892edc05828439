// Planner benchmarks (Google Benchmark), single thread, a reused planner (no allocation once
// warm), h200, 256 MiB per GPU:
//   plan_rank/WORKLOAD/SERVERS/SEED/WHICH  what one rank pays on every call (planner::make_rank:
//                                          the summary of the matrix, the shared schedule, the
//                                          rank's own transfers); WHICH: 0 rank 0, 1 the busiest
//                                          rank (most bytes sent and received), 2 a rank drawn
//                                          from the seed. The per-rank figure is the slowest of
//                                          the three.
//   plan_schedule/WORKLOAD/SERVERS/SEED    the shared schedule alone (planner::make_schedule)
//   plan_whole/WORKLOAD/SERVERS/SEED       the whole plan (planner::make), what tools build
//   plan_varied/WORKLOAD/SERVERS           the whole plan of a new matrix (seeds 1 .. 8 in turn)
//   plan_megatron_rank/WHICH, plan_megatron_whole
//                                          the 600 real Megatron-LM matrices (FAST_MEGATRON=path),
//                                          the next one on every call
// The FAST scheduler throughout (the quality table is FAST's); every case's whole plan is
// verified and its programs of the timed ranks checked against it, outside the timing, and its
// counters are the whole plan's stages, steps and predicted / T_lb, and the transfers of what was
// timed.
//
//   build/benchmarks/planner_bench --benchmark_filter='plan_rank/zipf/(4|8)/1/' --benchmark_min_time=0.2
//   scripts/docs-tables --only planning      (the table and plot of docs/performance.md)

#include <benchmark/benchmark.h>

#include <fast/detail/random.hpp>
#include <fast/fast.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t bytes_per_gpu = std::int64_t{256} << 20;

fast::traffic_matrix workload(const std::string& name, const fast::topology& t, std::uint64_t seed) {
    if (name == "zipf") return fast::make_zipf(t, 0.8, bytes_per_gpu, seed);
    fast::moe_options o; // the defaults: top-2, Zipf(0.6) expert popularity (calibrated on Megatron)
    return fast::make_moe(t, o, bytes_per_gpu, seed);
}

fast::plan_options fast_options() {
    fast::plan_options o;
    o.scheduler = fast::scheduler::fast;
    return o;
}

// A case's matrix and checked whole plan, made once per process (the larger ones take seconds).
struct prepared {
    fast::topology topo;
    fast::traffic_matrix m;
    fast::plan whole;
    std::string error; // the whole plan does not verify
    double ratio = 0;  // its predicted / T_lb
    double t_lb_us = 0;
};

const prepared& prepare(const std::string& name, int servers, std::uint64_t seed) {
    static std::map<std::tuple<std::string, int, std::uint64_t>, std::unique_ptr<prepared>> cache;
    auto& slot = cache[{name, servers, seed}];
    if (!slot) {
        slot = std::make_unique<prepared>();
        slot->topo = fast::make_topology(servers, 8);
        slot->m = workload(name, slot->topo, seed);
        slot->whole = fast::make_plan(slot->m, slot->topo, fast_options());
        if (const fast::verification v = fast::verify(slot->whole, slot->m); !v.ok()) slot->error = v.message();
        slot->t_lb_us = fast::lower_bound_us(slot->m, slot->topo);
        slot->ratio = fast::predict_us(slot->whole) / slot->t_lb_us;
    }
    return *slot;
}

// The rank a WHICH argument names: 0, the busiest (most bytes sent and received), or one drawn
// from the seed.
int pick_rank(const fast::traffic_matrix& m, int which, std::uint64_t seed) {
    const int r = static_cast<int>(m.rows());
    if (which == 0) return 0;
    if (which == 2) return static_cast<int>(fast::detail::rng(seed * 7919 + 1).below(static_cast<std::uint64_t>(r)));
    return fast::busiest_rank(m);
}

// The whole plan's counters (what the timed planning is worth).
void quality(benchmark::State& state, const prepared& c) {
    state.counters["stages"] = static_cast<double>(fast::count_stages(c.whole));
    state.counters["steps"] = static_cast<double>(c.whole.steps());
    state.counters["ratio"] = c.ratio;
    state.counters["t_lb_us"] = c.t_lb_us;
}

// A rank's program against the whole plan restricted to it; "" when equal.
std::string differs(const fast::rank_program& got, const fast::plan& whole) {
    const fast::rank_program want = fast::restrict_to_rank(whole, got.rank);
    if (got.transfers.size() != want.transfers.size() || got.scratch_bytes != want.scratch_bytes)
        return "rank " + std::to_string(got.rank) + "'s program differs from the whole plan's part";
    for (std::size_t k = 0; k < got.transfers.size(); ++k)
        if (!(got.transfers[k].transfer == want.transfers[k].transfer) ||
            got.transfers[k].pair_index != want.transfers[k].pair_index)
            return "rank " + std::to_string(got.rank) + "'s transfer " + std::to_string(k) +
                   " differs from the whole plan's";
    return {};
}

void plan_rank(benchmark::State& state, const std::string& name) {
    const auto seed = static_cast<std::uint64_t>(state.range(1));
    const prepared& c = prepare(name, static_cast<int>(state.range(0)), seed);
    if (!c.error.empty()) return state.SkipWithError(("the plan does not verify: " + c.error).c_str());
    const int rank = pick_rank(c.m, static_cast<int>(state.range(2)), seed);
    fast::planner planner(c.topo, fast_options());
    (void)planner.make_rank(c.m, rank); // warm: buffers sized
    std::size_t transfers = 0;
    for (auto _ : state) {
        const fast::rank_program& p = planner.make_rank(c.m, rank);
        transfers = p.transfers.size();
        benchmark::DoNotOptimize(&p);
    }
    if (const std::string e = differs(planner.make_rank(c.m, rank), c.whole); !e.empty())
        return state.SkipWithError(e.c_str());
    quality(state, c);
    state.counters["rank"] = rank;
    state.counters["transfers"] = static_cast<double>(transfers);
}

void plan_schedule(benchmark::State& state, const std::string& name) {
    const prepared& c = prepare(name, static_cast<int>(state.range(0)), static_cast<std::uint64_t>(state.range(1)));
    if (!c.error.empty()) return state.SkipWithError(("the plan does not verify: " + c.error).c_str());
    fast::planner planner(c.topo, fast_options());
    (void)planner.make_schedule(c.m);
    for (auto _ : state) benchmark::DoNotOptimize(planner.make_schedule(c.m).data());
    quality(state, c);
    state.counters["transfers"] = 0;
}

void plan_whole(benchmark::State& state, const std::string& name) {
    const prepared& c = prepare(name, static_cast<int>(state.range(0)), static_cast<std::uint64_t>(state.range(1)));
    if (!c.error.empty()) return state.SkipWithError(("the plan does not verify: " + c.error).c_str());
    fast::planner planner(c.topo, fast_options());
    (void)planner.make(c.m);
    for (auto _ : state) benchmark::DoNotOptimize(&planner.make(c.m));
    if (!(planner.make(c.m) == c.whole)) return state.SkipWithError("a reused planner planned another plan");
    quality(state, c);
    state.counters["transfers"] = static_cast<double>(c.whole.transfers.size());
}

// The whole plan with a different matrix on every call: seeds 1 .. 8 in turn (the counters are
// the last plan's).
void plan_varied(benchmark::State& state, const std::string& name) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    std::vector<fast::traffic_matrix> all;
    for (std::uint64_t seed = 1; seed <= 8; ++seed) all.push_back(workload(name, t, seed));
    fast::planner planner(t, fast_options());
    for (const auto& m : all) benchmark::DoNotOptimize(&planner.make(m)); // warm: buffers sized
    std::size_t k = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(&planner.make(all[k]));
        k = (k + 1) % all.size();
    }
    const fast::plan& p = planner.make(all[k]);
    if (const fast::verification v = fast::verify(p, all[k]); !v.ok()) return state.SkipWithError(v.message().c_str());
    state.counters["stages"] = static_cast<double>(fast::count_stages(p));
    state.counters["ratio"] = fast::predict_us(p) / fast::lower_bound_us(all[k], t);
}

const std::vector<fast::traffic_matrix>* megatron() {
    const char* path = std::getenv("FAST_MEGATRON");
    if (path == nullptr || *path == '\0') return nullptr;
    static const std::vector<fast::traffic_matrix> all = fast::read_matrices_file(path, 32, 8192); // 8 KiB per token
    return &all;
}

// The quality of FAST over the 600 matrices (mean, p95 as fast-plan --all, max), every plan
// verified.
void megatron_quality(benchmark::State& state, const std::vector<fast::traffic_matrix>& all) {
    const fast::topology t = fast::make_topology(4, 8);
    fast::planner planner(t, fast_options());
    std::vector<double> ratios;
    double stages = 0;
    for (const auto& m : all) {
        const fast::plan& p = planner.make(m);
        if (const fast::verification v = fast::verify(p, m); !v.ok()) return state.SkipWithError(v.message().c_str());
        ratios.push_back(fast::predict_us(p) / fast::lower_bound_us(m, t));
        stages += static_cast<double>(fast::count_stages(p));
    }
    std::sort(ratios.begin(), ratios.end());
    double mean = 0;
    for (const double r : ratios) mean += r;
    state.counters["ratio_mean"] = mean / static_cast<double>(ratios.size());
    state.counters["ratio_p95"] = ratios[(ratios.size() * 95 + 99) / 100 - 1];
    state.counters["ratio_max"] = ratios.back();
    state.counters["stages"] = stages / static_cast<double>(all.size());
}

void plan_megatron_rank(benchmark::State& state) {
    const auto* all = megatron();
    if (all == nullptr) return state.SkipWithError("FAST_MEGATRON is not set");
    const int which = static_cast<int>(state.range(0));
    std::vector<int> ranks;
    for (std::size_t k = 0; k < all->size(); ++k) ranks.push_back(pick_rank((*all)[k], which, k + 1));
    const fast::topology t = fast::make_topology(4, 8);
    fast::planner planner(t, fast_options());
    for (std::size_t k = 0; k < all->size(); ++k) (void)planner.make_rank((*all)[k], ranks[k]); // warm
    std::size_t k = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(&planner.make_rank((*all)[k], ranks[k]));
        k = (k + 1) % all->size();
    }
    for (std::size_t j = 0; j < all->size(); j += 37) {
        fast::planner whole(t, fast_options());
        if (const std::string e = differs(planner.make_rank((*all)[j], ranks[j]), whole.make((*all)[j])); !e.empty())
            return state.SkipWithError(e.c_str());
    }
    megatron_quality(state, *all);
}

void plan_megatron_whole(benchmark::State& state) {
    const auto* all = megatron();
    if (all == nullptr) return state.SkipWithError("FAST_MEGATRON is not set");
    fast::planner planner(fast::make_topology(4, 8), fast_options());
    std::size_t k = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(&planner.make((*all)[k]));
        k = (k + 1) % all->size();
    }
    megatron_quality(state, *all);
}

// The decomposition alone, on the exact policy's input (the balanced per-GPU server matrix,
// padded), where stages are many: warm-started matchings (each stage repairs the previous
// matching) against a fresh matching per stage.
void decompose(benchmark::State& state, fast::matching_rule rule, bool cold) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    const fast::traffic_matrix m = workload("zipf", t, 1);
    const std::vector<std::int64_t> input =
        fast::detail::to_flat(fast::pad_to_regular(fast::balance(m, t).server_matrix));
    fast::detail::decompose_workspace ws;
    ws.cold_starts = cold;
    fast::decomposition out;
    std::vector<std::int64_t> a;
    for (auto _ : state) {
        a = input;
        fast::detail::decompose_flat(a, t.servers, rule, out, ws);
        benchmark::DoNotOptimize(out.weights.data());
    }
    state.counters["stages"] = static_cast<double>(out.size());
}

// SERVERS x SEED (x WHICH): the sizes of the table and 256.
void cases(benchmark::internal::Benchmark* b, bool ranks) {
    for (const int s : {4, 8, 16, 32, 64, 128, 256})
        for (int seed = 1; seed <= 5; ++seed) {
            if (!ranks) b->Args({s, seed});
            else
                for (int which = 0; which < 3; ++which) b->Args({s, seed, which});
        }
    b->Unit(benchmark::kMicrosecond);
}

// plan_varied's sizes; the whole plan at 256 servers is plan_whole's.
void varied_cases(benchmark::internal::Benchmark* b) {
    for (const int s : {4, 8, 16, 32, 64, 128}) b->Arg(s);
    b->Unit(benchmark::kMicrosecond);
}

} // namespace

BENCHMARK_CAPTURE(plan_rank, zipf, std::string("zipf"))->Apply([](auto* b) { cases(b, true); });
BENCHMARK_CAPTURE(plan_rank, moe, std::string("moe"))->Apply([](auto* b) { cases(b, true); });
BENCHMARK_CAPTURE(plan_schedule, zipf, std::string("zipf"))->Apply([](auto* b) { cases(b, false); });
BENCHMARK_CAPTURE(plan_schedule, moe, std::string("moe"))->Apply([](auto* b) { cases(b, false); });
BENCHMARK_CAPTURE(plan_whole, zipf, std::string("zipf"))->Apply([](auto* b) { cases(b, false); });
BENCHMARK_CAPTURE(plan_whole, moe, std::string("moe"))->Apply([](auto* b) { cases(b, false); });
BENCHMARK_CAPTURE(plan_varied, zipf, std::string("zipf"))->Apply(varied_cases);
BENCHMARK_CAPTURE(plan_varied, moe, std::string("moe"))->Apply(varied_cases);
BENCHMARK(plan_megatron_rank)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);
BENCHMARK(plan_megatron_whole)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(decompose, warm, fast::matching_rule::any, false)
    ->Arg(16)
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(decompose, cold, fast::matching_rule::any, true)
    ->Arg(16)
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
