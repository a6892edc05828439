// Planner benchmarks (Google Benchmark): the planning time of the whole make_plan (balancing,
// decomposition, transfer list with offsets) with a reused planner, single thread, and beside it
// what the plan is worth: stages, steps and the cost model's predicted time over T_lb.
//
//   build/benchmarks/planner_bench --benchmark_filter=zipf
//   build/benchmarks/planner_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// FAST_MEGATRON=path/to/megatron_moe_4x8.txt adds the 600 real MoE matrices (every iteration
// plans the next matrix). decompose/{warm,cold} time the decomposition alone, with and without
// warm-started matchings; plan_fresh against plan_reused is what reusing a planner saves;
// plan_varied against plan_reused is what a new matrix on every call costs (as in MoE, where the
// branch predictor cannot learn one matrix's decisions); plan_slice is one server's part of the
// plan (planner::make_slice, what a runtime in which every server plans its own part pays);
// transfer_list_copy is the memory floor of materialising a plan's transfers (a copy, no planning).

#include <benchmark/benchmark.h>

#include <fast/fast.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t bytes_per_gpu = std::int64_t{256} << 20;

fast::traffic_matrix workload(const std::string& name, const fast::topology& t, std::uint64_t seed = 1) {
    if (name == "zipf") return fast::make_zipf(t, 0.8, bytes_per_gpu, seed);
    fast::moe_options o; // the defaults: top-2, Zipf(0.6) expert popularity (calibrated on Megatron)
    return fast::make_moe(t, o, bytes_per_gpu, seed);
}

// Counters of the last plan, after the verifier has passed it (a plan that fails is an error,
// not a figure).
void report(benchmark::State& state, const fast::plan& p, const fast::traffic_matrix& m) {
    if (const fast::verification v = fast::verify(p, m); !v.ok()) {
        state.SkipWithError(("the plan does not verify: " + v.message()).c_str());
        return;
    }
    state.counters["stages"] = static_cast<double>(fast::count_stages(p));
    state.counters["steps"] = static_cast<double>(p.steps());
    state.counters["transfers"] = static_cast<double>(p.transfers.size());
    state.counters["ratio"] = fast::predict_us(p) / fast::lower_bound_us(m, p.topology);
}

// The table of the issue: servers x 8 GPUs, h200, 256 MiB per GPU, a reused planner.
void plan_reused(benchmark::State& state, const std::string& name, fast::policy policy) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    const fast::traffic_matrix m = workload(name, t);
    fast::plan_options o;
    o.policy = policy;
    fast::planner planner(t, o);
    const fast::plan* p = &planner.make(m); // warm: buffers sized
    for (auto _ : state) {
        p = &planner.make(m);
        benchmark::DoNotOptimize(p);
    }
    report(state, *p, m);
}

// The same with a different matrix on every call: seeds 1 .. 8 in turn (the counters are the
// last plan's).
void plan_varied(benchmark::State& state, const std::string& name) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    std::vector<fast::traffic_matrix> all;
    for (std::uint64_t seed = 1; seed <= 8; ++seed) all.push_back(workload(name, t, seed));
    fast::planner planner(t);
    for (const auto& m : all) benchmark::DoNotOptimize(&planner.make(m)); // warm: buffers sized
    std::size_t k = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(&planner.make(all[k]));
        k = (k + 1) % all.size();
    }
    report(state, planner.make(all[k]), all[k]);
}

// One server's slice of the plan (planner::make_slice), the servers in turn; the counters are
// the slice's (transfers) and the whole plan's (ratio, stages: the slice has its schedule).
void plan_slice(benchmark::State& state, const std::string& name) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    const fast::traffic_matrix m = workload(name, t);
    fast::planner planner(t);
    for (int s = 0; s < t.servers; ++s) benchmark::DoNotOptimize(&planner.make_rank(m, s * 8)); // warm
    int s = 0;
    std::size_t transfers = 0;
    for (auto _ : state) {
        transfers = planner.make_rank(m, s * 8).transfers.size();
        s = (s + 1) % t.servers;
    }
    report(state, planner.make(m), m);
    state.counters["transfers"] = static_cast<double>(transfers);
}

// The same with a fresh planner per call (every buffer allocated again).
void plan_fresh(benchmark::State& state, const std::string& name) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    const fast::traffic_matrix m = workload(name, t);
    fast::plan p;
    for (auto _ : state) {
        p = fast::make_plan(m, t);
        benchmark::DoNotOptimize(p.transfers.data());
    }
    report(state, p, m);
}

void plan_megatron(benchmark::State& state, fast::policy policy) {
    const char* path = std::getenv("FAST_MEGATRON");
    if (path == nullptr || *path == '\0') {
        state.SkipWithError("FAST_MEGATRON is not set");
        return;
    }
    static const std::vector<fast::traffic_matrix> all = fast::read_matrices_file(path, 32, 8192);
    const fast::topology t = fast::make_topology(4, 8);
    fast::plan_options o;
    o.policy = policy;
    fast::planner planner(t, o);
    std::size_t k = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(&planner.make(all[k]));
        k = (k + 1) % all.size();
    }
    std::vector<double> ratios;
    double stages = 0;
    for (const auto& m : all) {
        const fast::plan& p = planner.make(m);
        ratios.push_back(fast::predict_us(p) / fast::lower_bound_us(m, t));
        stages += static_cast<double>(fast::count_stages(p));
    }
    std::sort(ratios.begin(), ratios.end());
    double mean = 0;
    for (const double r : ratios) mean += r;
    state.counters["ratio_mean"] = mean / static_cast<double>(ratios.size());
    state.counters["ratio_p95"] = ratios[(ratios.size() * 95 + 99) / 100 - 1]; // as fast-plan --all
    state.counters["ratio_max"] = ratios.back();
    state.counters["stages"] = stages / static_cast<double>(all.size());
}

// A floor under any planner that materialises the transfer list: copying a finished plan's
// transfers into a buffer of the same size, at memory speed, with no planning at all.
void transfer_list_copy(benchmark::State& state) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    const fast::traffic_matrix m = workload("zipf", t);
    const fast::plan p = fast::make_plan(m, t);
    std::vector<fast::transfer> copy(p.transfers.size());
    for (auto _ : state) {
        std::copy(p.transfers.begin(), p.transfers.end(), copy.begin());
        benchmark::DoNotOptimize(copy.data());
        benchmark::ClobberMemory();
    }
    state.counters["transfers"] = static_cast<double>(p.transfers.size());
    state.counters["ns_per_transfer"] = benchmark::Counter(
        static_cast<double>(p.transfers.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// The decomposition alone, on the exact policy's input (the balanced per-GPU server matrix,
// padded), where stages are many: warm-started matchings (each stage repairs the previous
// matching) against a fresh matching per stage.
void decompose(benchmark::State& state, fast::matching_rule rule, bool cold) {
    const fast::topology t = fast::make_topology(static_cast<int>(state.range(0)), 8);
    const fast::traffic_matrix m = workload("zipf", t);
    const std::vector<std::int64_t> input = fast::detail::to_flat(fast::pad_to_regular(fast::balance(m, t).server_matrix));
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

void sizes(benchmark::internal::Benchmark* b) {
    for (const int s : {4, 8, 16, 32, 64, 128}) b->Arg(s);
    b->Unit(benchmark::kMicrosecond);
}

} // namespace

BENCHMARK_CAPTURE(plan_reused, zipf, std::string("zipf"), fast::policy::rail_packed)->Apply(sizes);
BENCHMARK_CAPTURE(plan_reused, moe, std::string("moe"), fast::policy::rail_packed)->Apply(sizes);
BENCHMARK_CAPTURE(plan_varied, zipf, std::string("zipf"))->Apply(sizes);
BENCHMARK_CAPTURE(plan_varied, moe, std::string("moe"))->Apply(sizes);
BENCHMARK_CAPTURE(plan_slice, zipf, std::string("zipf"))->Apply(sizes);
BENCHMARK_CAPTURE(plan_slice, moe, std::string("moe"))->Apply(sizes);
BENCHMARK_CAPTURE(plan_fresh, zipf, std::string("zipf"))->Apply(sizes);
BENCHMARK(transfer_list_copy)->Apply(sizes);
BENCHMARK_CAPTURE(plan_reused, zipf_bottleneck, std::string("zipf"), fast::policy::bottleneck)
    ->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(plan_reused, zipf_exact, std::string("zipf"), fast::policy::exact)
    ->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(decompose, warm, fast::matching_rule::any, false)
    ->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(decompose, cold, fast::matching_rule::any, true)
    ->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(plan_megatron, rail_packed, fast::policy::rail_packed)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(plan_megatron, exact, fast::policy::exact)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
