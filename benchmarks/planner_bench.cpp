// Planner benchmarks (Google Benchmark), single thread, a reused planner (no allocation once
// warm), h200:
//   plan_rank/SCHEDULER/WORKLOAD/MIB/SERVERS/SEED
//       what one rank pays on every call: planner::make_rank from the counts a runtime agrees on
//       (the shared counts and the rank's server's rows and columns, counts.hpp), for the busiest
//       rank (most bytes sent and received); SCHEDULER fast | automatic | direct, WORKLOAD zipf
//       (zipf:0.8) | moe, MIB per GPU. Counters: t_lb_us, predicted_us (the exchange: the whole
//       plan's predicted time), agreement_us and agreement_bytes (the count agreement's model,
//       agreement.hpp), work_us (the planning cost model), fast (1 where FAST was chosen), steps;
//       end to end = (agreement_us + the measured time + predicted_us) / t_lb_us.
//   plan_schedule/WORKLOAD/SERVERS/SEED    FAST's shared schedule alone (make_schedule), 256 MiB
//   plan_whole/WORKLOAD/SERVERS/SEED       FAST's whole plan (planner::make), what tools build
//   plan_varied/WORKLOAD/SERVERS           the whole plan of a new matrix (seeds 1 .. 8 in turn)
//   plan_megatron_rank, plan_megatron_whole
//       the 600 real Megatron-LM matrices (FAST_MEGATRON=path), the next one on every call, the
//       default (automatic) scheduler, each matrix's busiest rank
// Every case's whole plan is verified and the timed rank's program checked against it, outside
// the timing.
//
//   build/benchmarks/planner_bench --benchmark_filter='plan_rank/(fast|automatic)/zipf/256/(4|8)/1$'
//   scripts/docs-tables --only planning      (the tables and plot of docs/performance.md)

#include <benchmark/benchmark.h>

#include <fast/agreement.hpp>
#include <fast/fast.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t mib = std::int64_t{1} << 20;

fast::traffic_matrix workload(const std::string& name, const fast::topology& t, std::uint64_t seed,
                              std::int64_t bytes_per_gpu = 256 * mib) {
    if (name == "zipf") return fast::make_zipf(t, 0.8, bytes_per_gpu, seed);
    fast::moe_options o; // the defaults: top-2, Zipf(0.6) expert popularity (calibrated on Megatron)
    return fast::make_moe(t, o, bytes_per_gpu, seed);
}

fast::plan_options options_for(fast::scheduler s) {
    fast::plan_options o;
    o.scheduler = s;
    return o;
}

fast::plan_options fast_options() {
    return options_for(fast::scheduler::fast);
}

// One case: the cluster, its matrix and the scheduler's checked whole plan, made once per
// process (the larger ones take seconds), with what a runtime's rank gets from the agreement.
struct case_key {
    fast::scheduler scheduler = fast::scheduler::fast;
    std::string workload;
    std::int64_t mib = 256;
    int servers = 4;
    std::uint64_t seed = 1;
    friend auto operator<=>(const case_key&, const case_key&) = default;
};

struct prepared {
    fast::topology topo;
    fast::traffic_matrix m;
    fast::plan whole;
    bool chose_fast = false;
    std::string error; // the whole plan does not verify
    double ratio = 0;  // its predicted / T_lb
    double t_lb_us = 0;
    fast::shared_counts shared;
    int rank = 0; // the busiest
    fast::server_counts own;
};

const prepared& prepare(const case_key& k) {
    static std::map<case_key, std::unique_ptr<prepared>> cache;
    auto& slot = cache[k];
    if (!slot) {
        slot = std::make_unique<prepared>();
        slot->topo = fast::make_topology(k.servers, 8);
        slot->m = workload(k.workload, slot->topo, k.seed, k.mib * mib);
        fast::planner p(slot->topo, options_for(k.scheduler));
        slot->whole = p.make(slot->m);
        slot->chose_fast = p.last_scheduler() == fast::scheduler::fast;
        if (const fast::verification v = fast::verify(slot->whole, slot->m); !v.ok()) slot->error = v.message();
        slot->t_lb_us = fast::lower_bound_us(slot->m, slot->topo);
        slot->ratio = fast::predict_us(slot->whole) / slot->t_lb_us;
        slot->shared = fast::make_shared_counts(slot->m, slot->topo);
        slot->rank = fast::busiest_rank(slot->m);
        slot->own = fast::make_server_counts(slot->m, slot->topo, slot->topo.server_of(slot->rank));
    }
    return *slot;
}

const prepared& prepare(const std::string& name, int servers, std::uint64_t seed) {
    return prepare({fast::scheduler::fast, name, 256, servers, seed});
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

void plan_rank(benchmark::State& state, const case_key& k) {
    const prepared& c = prepare(k);
    if (!c.error.empty()) return state.SkipWithError(("the plan does not verify: " + c.error).c_str());
    fast::planner planner(c.topo, options_for(k.scheduler));
    (void)planner.make_rank(c.shared, c.own, c.rank); // warm: buffers sized
    std::size_t transfers = 0;
    for (auto _ : state) {
        const fast::rank_program& p = planner.make_rank(c.shared, c.own, c.rank);
        transfers = p.transfers.size();
        benchmark::DoNotOptimize(&p);
    }
    if (const std::string e = differs(planner.make_rank(c.shared, c.own, c.rank), c.whole); !e.empty())
        return state.SkipWithError(e.c_str());
    quality(state, c);
    const fast::agreement a = fast::plan_agreement(c.topo);
    state.counters["predicted_us"] = fast::predict_us(c.whole);
    state.counters["agreement_us"] = a.us;
    state.counters["agreement_bytes"] = static_cast<double>(a.network_bytes);
    state.counters["work_us"] = planner.planning_work_us();
    state.counters["fast"] = c.chose_fast ? 1 : 0;
    state.counters["rank"] = c.rank;
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

// The default's quality over the 600 matrices (mean, p95 as fast-plan --all, max), every plan
// verified. The mean end to end is ratio_mean + (agreement_us + the per-call time) * inv_t_lb_mean
// (the mean of 1 / T_lb).
void megatron_quality(benchmark::State& state, const std::vector<fast::traffic_matrix>& all) {
    const fast::topology t = fast::make_topology(4, 8);
    const double agreement_us = fast::plan_agreement(t).us;
    fast::planner planner(t);
    std::vector<double> ratios;
    double stages = 0, inverse_bound = 0;
    for (const auto& m : all) {
        const fast::plan& p = planner.make(m);
        if (const fast::verification v = fast::verify(p, m); !v.ok()) return state.SkipWithError(v.message().c_str());
        const double bound = fast::lower_bound_us(m, t);
        ratios.push_back(fast::predict_us(p) / bound);
        inverse_bound += 1 / bound;
        stages += static_cast<double>(fast::count_stages(p));
    }
    std::sort(ratios.begin(), ratios.end());
    double mean = 0;
    for (const double r : ratios) mean += r;
    const auto n = static_cast<double>(ratios.size());
    state.counters["ratio_mean"] = mean / n;
    state.counters["ratio_p95"] = ratios[(ratios.size() * 95 + 99) / 100 - 1];
    state.counters["ratio_max"] = ratios.back();
    state.counters["inv_t_lb_mean"] = inverse_bound / n;
    state.counters["agreement_us"] = agreement_us;
    state.counters["stages"] = stages / n;
}

// Each matrix's busiest rank, from counts, the next matrix on every call.
void plan_megatron_rank(benchmark::State& state) {
    const auto* all = megatron();
    if (all == nullptr) return state.SkipWithError("FAST_MEGATRON is not set");
    const fast::topology t = fast::make_topology(4, 8);
    std::vector<int> ranks;
    std::vector<fast::shared_counts> shared;
    std::vector<fast::server_counts> own;
    for (const auto& m : *all) {
        ranks.push_back(fast::busiest_rank(m));
        shared.push_back(fast::make_shared_counts(m, t));
        own.push_back(fast::make_server_counts(m, t, t.server_of(ranks.back())));
    }
    fast::planner planner(t);
    for (std::size_t k = 0; k < all->size(); ++k) (void)planner.make_rank(shared[k], own[k], ranks[k]); // warm
    std::size_t k = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(&planner.make_rank(shared[k], own[k], ranks[k]));
        k = (k + 1) % all->size();
    }
    for (std::size_t j = 0; j < all->size(); j += 37) {
        fast::planner whole(t);
        if (const std::string e = differs(planner.make_rank(shared[j], own[j], ranks[j]), whole.make((*all)[j]));
            !e.empty())
            return state.SkipWithError(e.c_str());
    }
    megatron_quality(state, *all);
}

void plan_megatron_whole(benchmark::State& state) {
    const auto* all = megatron();
    if (all == nullptr) return state.SkipWithError("FAST_MEGATRON is not set");
    fast::planner planner(fast::make_topology(4, 8));
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

// SERVERS x SEED: the sizes of the planning tables and 256.
void cases(benchmark::internal::Benchmark* b) {
    for (const int s : {4, 8, 16, 32, 64, 128, 256})
        for (int seed = 1; seed <= 5; ++seed) b->Args({s, seed});
    b->Unit(benchmark::kMicrosecond);
}

// plan_varied's sizes; the whole plan at 256 servers is plan_whole's.
void varied_cases(benchmark::internal::Benchmark* b) {
    for (const int s : {4, 8, 16, 32, 64, 128}) b->Arg(s);
    b->Unit(benchmark::kMicrosecond);
}

// plan_rank's cases: every scheduler on zipf:0.8 at 256 and 16 MiB per GPU and moe at 256 MiB,
// 4 - 128 servers, seeds 1 - 5.
void register_rank_cases() {
    for (const fast::scheduler sch : {fast::scheduler::fast, fast::scheduler::automatic, fast::scheduler::direct})
        for (const auto& [wl, size] : {std::pair<std::string, std::int64_t>{"zipf", 256}, {"zipf", 16}, {"moe", 256}})
            for (const int s : {4, 8, 16, 32, 64, 128})
                for (std::uint64_t seed = 1; seed <= 5; ++seed) {
                    const case_key k{sch, wl, size, s, seed};
                    const std::string name = "plan_rank/" + std::string(fast::to_string(sch)) + "/" + wl + "/" +
                                             std::to_string(size) + "/" + std::to_string(s) + "/" +
                                             std::to_string(seed);
                    benchmark::RegisterBenchmark(name.c_str(), [k](benchmark::State& st) {
                        plan_rank(st, k);
                    })->Unit(benchmark::kMicrosecond);
                }
}

} // namespace

BENCHMARK_CAPTURE(plan_schedule, zipf, std::string("zipf"))->Apply(cases);
BENCHMARK_CAPTURE(plan_schedule, moe, std::string("moe"))->Apply(cases);
BENCHMARK_CAPTURE(plan_whole, zipf, std::string("zipf"))->Apply(cases);
BENCHMARK_CAPTURE(plan_whole, moe, std::string("moe"))->Apply(cases);
BENCHMARK_CAPTURE(plan_varied, zipf, std::string("zipf"))->Apply(varied_cases);
BENCHMARK_CAPTURE(plan_varied, moe, std::string("moe"))->Apply(varied_cases);
BENCHMARK(plan_megatron_rank)->Unit(benchmark::kMicrosecond);
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

int main(int argc, char** argv) {
    register_rank_cases();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
