// Two planners in one process, timed alternately: the ratio of planning times that a noisy,
// shared machine cannot fake. benchmarks/planner_ab.sh builds it from two revisions, whose
// headers it renames to namespaces fast_a and fast_b.
//
//   planner_ab WORKLOAD REPS ROUNDS
//
// WORKLOAD: zS or mS (one zipf:0.8 or moe matrix on S x 8 GPUs, 256 MiB per GPU, planned REPS
// times), vS (zipf:0.8 seeds 1 - 8 in turn) or megatron=PATH (every matrix of the file, 8 KiB per
// token). Every round times A then B (odd rounds also B then A), REPS calls each; the line
// printed gives both medians and the median, min and max of the per-round ratios B / A. The two
// planners' plans are compared first, field by field: "identical plans" or how many differ; B's
// plans go through the verifier (exit 1 if one fails).

#include <fast_a/fast.hpp>
#include <fast_b/fast.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

template <class Planner, class Matrix>
__attribute__((noinline)) std::size_t plan_all(Planner& p, const std::vector<Matrix>& ms) {
    std::size_t n = 0;
    for (const Matrix& m : ms) n += p.make(m).transfers.size();
    return n;
}

template <class Planner, class Matrix>
double per_plan_us(Planner& p, const std::vector<Matrix>& ms, int reps) {
    const auto start = std::chrono::steady_clock::now();
    std::size_t sink = 0;
    for (int r = 0; r < reps; ++r) sink += plan_all(p, ms);
    const auto end = std::chrono::steady_clock::now();
    if (sink == 0) std::printf("(no transfers)\n");
    return std::chrono::duration<double, std::micro>(end - start).count() / (reps * static_cast<double>(ms.size()));
}

// Whether two plans of the two namespaces are the same, field by field.
template <class X, class Y>
bool same_plan(const X& x, const Y& y) {
    if (x.steps() != y.steps() || x.transfers.size() != y.transfers.size() || x.scratch_bytes != y.scratch_bytes ||
        x.step_offsets != y.step_offsets || x.one_to_one_scale_out != y.one_to_one_scale_out)
        return false;
    for (std::size_t k = 0; k < x.transfers.size(); ++k) {
        const auto& a = x.transfers[k];
        const auto& b = y.transfers[k];
        if (a.bytes != b.bytes || a.src_offset != b.src_offset || a.dst_offset != b.dst_offset || a.src != b.src ||
            a.dst != b.dst || static_cast<int>(a.tier) != static_cast<int>(b.tier) ||
            static_cast<int>(a.src_buffer) != static_cast<int>(b.src_buffer) ||
            static_cast<int>(a.dst_buffer) != static_cast<int>(b.dst_buffer))
            return false;
    }
    return true;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// A positive integer, all of `text`; throws naming `what` otherwise (atoi would take "x" as 0).
int positive(const std::string& text, const char* what) {
    int v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size() || v < 1)
        throw std::invalid_argument(std::string(what) + " must be a positive integer, got '" + text + "'");
    return v;
}

int run(char** argv) {
    const std::string what = argv[1];
    const int reps = positive(argv[2], "REPS");
    const int rounds = positive(argv[3], "ROUNDS");
    std::vector<fast_a::traffic_matrix> ms;
    int servers = 4;
    if (what.rfind("megatron=", 0) == 0) {
        ms = fast_a::read_matrices_file(what.substr(9), 32, 8192);
    } else if (what.size() > 1 && (what[0] == 'z' || what[0] == 'm' || what[0] == 'v')) {
        servers = positive(what.substr(1), "the S of WORKLOAD zS, mS or vS");
        const fast_a::topology t = fast_a::make_topology(servers, 8);
        const std::int64_t bytes = std::int64_t{256} << 20;
        if (what[0] == 'v')
            for (std::uint64_t seed = 1; seed <= 8; ++seed) ms.push_back(fast_a::make_zipf(t, 0.8, bytes, seed));
        else if (what[0] == 'm') ms.push_back(fast_a::make_moe(t, fast_a::moe_options{}, bytes, 1));
        else ms.push_back(fast_a::make_zipf(t, 0.8, bytes, 1));
    } else {
        throw std::invalid_argument("unknown workload '" + what + "' (expected zS, mS, vS or megatron=PATH)");
    }
    fast_a::planner a(fast_a::make_topology(servers, 8));
    fast_b::planner b(fast_b::make_topology(servers, 8));
    std::size_t differ = 0; // warm, and the plans compared; B's must verify
    for (const auto& m : ms) {
        const auto& y = b.make(m);
        if (const auto v = fast_b::verify(y, m); !v.ok()) {
            std::printf("%s: B's plan does not verify: %s\n", what.c_str(), v.message().c_str());
            return 1;
        }
        if (!same_plan(a.make(m), y)) ++differ;
    }
    if (differ == 0) std::printf("%s: identical plans\n", what.c_str());
    else std::printf("%s: %zu of %zu plans differ\n", what.c_str(), differ, ms.size());
    std::vector<double> ta, tb, ratio;
    for (int r = 0; r < rounds; ++r) {
        double x = per_plan_us(a, ms, reps);
        double y = per_plan_us(b, ms, reps);
        if (r % 2 == 1) { // the other order too, against drift within a round
            y = (y + per_plan_us(b, ms, reps)) / 2;
            x = (x + per_plan_us(a, ms, reps)) / 2;
        }
        ta.push_back(x);
        tb.push_back(y);
        ratio.push_back(y / x);
    }
    std::printf("%s: A %.2f us, B %.2f us per plan (medians of %d rounds); B / A median %.3f (min %.3f, max %.3f)\n",
                what.c_str(), median(ta), median(tb), rounds, median(ratio),
                *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s zS|mS|vS|megatron=PATH REPS ROUNDS\n", argv[0]);
        return 2;
    }
    try {
        return run(argv);
    } catch (const std::exception& e) { // bad arguments, an unreadable file: one line, not an abort
        std::fprintf(stderr, "planner_ab: error: %s\n", e.what());
        return 2;
    }
}
