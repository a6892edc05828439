#pragma once
/// \file workload.hpp
/// Seeded traffic generators and the workload spec strings of the fast-plan CLI:
///   uniform                     every GPU sends bytes_per_gpu, evenly over the other R - 1 GPUs
///   zipf[:S]                    off-diagonal pair sizes i.i.d. Zipf(S) on {1..1000} (S = 0.8),
///                               scaled so the average GPU sends bytes_per_gpu
///   moe[:key=value,...]         MoE token dispatch; keys tokens (4096 per GPU), topk (2),
///                               zipf=S (expert popularity, 0.6) or lognormal=SIGMA, token_bytes
///                               (default: bytes_per_gpu / (tokens * topk)). Zipf 0.6 is
///                               calibrated on the real Megatron traces: at 32 GPUs the hottest
///                               expert receives about 3.8x the mean (traces: 2.3x-7.5x, median
///                               3.7x); the same law gives 8x at 128 GPUs and 18x at 512.
///                               tokens x topk is at most moe_max_routed (2^22) per GPU.
///   file:PATH[@INDEX]           matrix INDEX (0) of a matrix file (see matrix_io.hpp); the last
///                               '@' starts INDEX only if digits alone follow it, so a path may
///                               hold '@' (file:a@b/m.txt is the path a@b/m.txt)
/// The same spec, topology and seed give the same matrix on every platform.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "detail/random.hpp"
#include "error.hpp"
#include "matrix_io.hpp"
#include "topology.hpp"
#include "traffic.hpp"

namespace fast {

/// Expert popularity law of the moe generator.
enum class popularity { zipf, lognormal };

struct moe_options {
    std::int64_t tokens_per_gpu = 4096;
    int top_k = 2;
    popularity law = popularity::zipf;
    double skew = 0.6;            ///< Zipf exponent or log-normal sigma (see the file comment)
    std::int64_t token_bytes = 0; ///< 0: bytes_per_gpu / (tokens_per_gpu * top_k)
};

/// The most routed tokens (tokens x topk) one GPU may draw in make_moe: a bound per GPU, so any
/// number of GPUs fits, that keeps a typo from running for hours. Each draw takes 30 - 60 ns
/// (measured at 32 - 512 GPUs, -O3), so a GPU at the bound costs about 0.2 s; the default is
/// 4096 x 2, and 2^22 is 512x that.
inline constexpr std::int64_t moe_max_routed = std::int64_t{1} << 22;

enum class workload_kind { uniform, zipf, moe, file };

/// A parsed workload spec string.
struct workload_spec {
    workload_kind kind = workload_kind::zipf;
    double zipf_s = 0.8;
    moe_options moe;
    std::string path;
    std::size_t index = 0;
    bool indexed = false; ///< file: an @INDEX was given
};

namespace detail {
inline void check_bytes_per_gpu(std::int64_t bytes_per_gpu) {
    if (bytes_per_gpu < 0)
        throw invalid_argument("bytes per GPU must be non-negative, got " + std::to_string(bytes_per_gpu));
}

inline double parse_double(std::string_view text, const std::string& what) {
    const std::string s(text);
    std::size_t used = 0;
    double v = 0;
    try {
        v = std::stod(s, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != s.size() || s.empty() || !std::isfinite(v))
        throw invalid_argument(what + ": '" + s + "' is not a number");
    return v;
}

inline std::int64_t parse_count(std::string_view text, const std::string& what) {
    return parse_entry(text, 1, [&] { return what; });
}
} // namespace detail

/// Parses a workload spec (see the file comment). Throws fast::invalid_argument naming the part
/// that is wrong.
[[nodiscard]] inline workload_spec parse_workload(std::string_view text) {
    workload_spec spec;
    const std::size_t colon = text.find(':');
    const std::string_view name = text.substr(0, colon);
    const std::string_view args = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    const std::string where = "workload '" + std::string(text) + "'";
    if (name == "uniform") {
        spec.kind = workload_kind::uniform;
        if (colon != std::string_view::npos) throw invalid_argument(where + ": uniform takes no parameters");
    } else if (name == "zipf") {
        spec.kind = workload_kind::zipf;
        // "zipf:" with nothing after the colon is a typo, not the default exponent.
        if (colon != std::string_view::npos) spec.zipf_s = detail::parse_double(args, where + ": zipf exponent");
        if (spec.zipf_s < 0) throw invalid_argument(where + ": zipf exponent must be non-negative");
    } else if (name == "moe") {
        spec.kind = workload_kind::moe;
        std::string_view rest = args;
        while (!rest.empty()) {
            const std::size_t comma = rest.find(',');
            const std::string_view item = rest.substr(0, comma);
            rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
            const std::size_t eq = item.find('=');
            if (eq == std::string_view::npos)
                throw invalid_argument(where + ": '" + std::string(item) + "' is not key=value");
            const std::string_view key = item.substr(0, eq);
            const std::string_view value = item.substr(eq + 1);
            const std::string what = where + ": " + std::string(key);
            if (key == "tokens") {
                spec.moe.tokens_per_gpu = detail::parse_count(value, what);
                // Early, and before any product overflows; make_moe checks tokens x topk.
                if (spec.moe.tokens_per_gpu > moe_max_routed)
                    throw invalid_argument(what + " = " + std::to_string(spec.moe.tokens_per_gpu) +
                                           " is above the limit of " + std::to_string(moe_max_routed) +
                                           " routed tokens per GPU (tokens x topk)");
            } else if (key == "topk") {
                const std::int64_t k = detail::parse_count(value, what);
                if (k < 1 || k > 1'000'000)
                    throw invalid_argument(what +
                                           " must be between 1 and 1000000 (and at most the number "
                                           "of GPUs), got " +
                                           std::to_string(k));
                spec.moe.top_k = static_cast<int>(k);
            } else if (key == "zipf") {
                spec.moe.law = popularity::zipf;
                spec.moe.skew = detail::parse_double(value, what);
            } else if (key == "lognormal") {
                spec.moe.law = popularity::lognormal;
                spec.moe.skew = detail::parse_double(value, what);
            } else if (key == "token_bytes") {
                spec.moe.token_bytes = detail::parse_count(value, what);
            } else {
                throw invalid_argument(where + ": unknown moe parameter '" + std::string(key) +
                                       "' (expected tokens, topk, zipf, lognormal, token_bytes)");
            }
        }
        if (spec.moe.skew < 0) throw invalid_argument(where + ": skew must be non-negative");
    } else if (name == "file") {
        spec.kind = workload_kind::file;
        // The last '@' starts an index only if digits alone follow: a path may hold '@' itself.
        const std::size_t at = args.rfind('@');
        const std::string_view tail = at == std::string_view::npos ? std::string_view{} : args.substr(at + 1);
        spec.indexed = !tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c)) != 0;
        });
        spec.path = std::string(spec.indexed ? args.substr(0, at) : args);
        if (spec.indexed) spec.index = static_cast<std::size_t>(detail::parse_count(tail, where + ": matrix index"));
        if (spec.path.empty()) throw invalid_argument(where + ": file needs a path");
    } else {
        throw invalid_argument("unknown workload '" + std::string(name) +
                               "' (expected uniform, zipf[:S], moe[:...] or file:PATH[@INDEX])");
    }
    return spec;
}

/// Every GPU sends floor(bytes_per_gpu / (R - 1)) to every other GPU. O(R^2).
[[nodiscard]] inline traffic_matrix make_uniform(const topology& topo, std::int64_t bytes_per_gpu) {
    validate(topo);
    detail::check_bytes_per_gpu(bytes_per_gpu);
    const int r = topo.ranks();
    const std::int64_t each = r > 1 ? bytes_per_gpu / (r - 1) : 0;
    traffic_matrix m = traffic_matrix::Constant(r, r, each);
    m.diagonal().setZero();
    return m;
}

/// Off-diagonal pair sizes drawn i.i.d. from Zipf(s) on {1..1000}, scaled so that the average
/// GPU sends bytes_per_gpu. O(R^2 log 1000).
[[nodiscard]] inline traffic_matrix make_zipf(const topology& topo, double s, std::int64_t bytes_per_gpu,
                                              std::uint64_t seed) {
    validate(topo);
    detail::check_bytes_per_gpu(bytes_per_gpu);
    if (!(std::isfinite(s) && s >= 0))
        throw invalid_argument("zipf exponent must be non-negative, got " + detail::format_number(s));
    constexpr int support = 1000;
    std::vector<double> cdf(support);
    double acc = 0;
    for (int k = 1; k <= support; ++k) cdf[static_cast<std::size_t>(k - 1)] = acc += std::pow(k, -s);
    for (double& c : cdf) c /= acc;

    const int r = topo.ranks();
    detail::rng gen(seed);
    std::vector<int> draw(static_cast<std::size_t>(r) * static_cast<std::size_t>(r), 0);
    double sum = 0;
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r; ++j) {
            if (i == j) continue;
            const double u = gen.uniform();
            const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
            const int k = static_cast<int>(std::min<std::ptrdiff_t>(it - cdf.begin(), support - 1)) + 1;
            draw[static_cast<std::size_t>(i) * static_cast<std::size_t>(r) + static_cast<std::size_t>(j)] = k;
            sum += k;
        }
    traffic_matrix m = traffic_matrix::Zero(r, r);
    if (sum == 0) return m;
    const double scale = static_cast<double>(bytes_per_gpu) * r / sum;
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r; ++j)
            m(i, j) = static_cast<std::int64_t>(std::llround(
                draw[static_cast<std::size_t>(i) * static_cast<std::size_t>(r) + static_cast<std::size_t>(j)] * scale));
    validate_traffic(m, topo);
    return m;
}

/// MoE token dispatch with one expert (group) per GPU: every GPU routes tokens_per_gpu tokens,
/// each to top_k distinct GPUs drawn by expert popularity (Zipf over a seeded random ranking of
/// the experts, or log-normal weights), token_bytes per routed token, the local expert included.
/// O(R * tokens * top_k * log R); tokens * top_k must be at most moe_max_routed.
[[nodiscard]] inline traffic_matrix make_moe(const topology& topo, const moe_options& opt, std::int64_t bytes_per_gpu,
                                             std::uint64_t seed) {
    validate(topo);
    detail::check_bytes_per_gpu(bytes_per_gpu);
    const int r = topo.ranks();
    if (opt.tokens_per_gpu < 0)
        throw invalid_argument("moe tokens per GPU must be non-negative, got " + std::to_string(opt.tokens_per_gpu));
    if (opt.top_k < 1 || opt.top_k > r)
        throw invalid_argument("moe topk = " + std::to_string(opt.top_k) +
                               " must be between 1 and the number of GPUs (" + std::to_string(r) + ")");
    if (!(std::isfinite(opt.skew) && opt.skew >= 0))
        throw invalid_argument("moe skew must be non-negative, got " + detail::format_number(opt.skew));
    // Every routed token is one draw below (see moe_max_routed).
    const std::int64_t routed = detail::checked_mul(opt.tokens_per_gpu, opt.top_k, "moe tokens x topk");
    if (routed > moe_max_routed)
        throw invalid_argument("moe tokens = " + std::to_string(opt.tokens_per_gpu) + ": tokens x topk = " +
                               std::to_string(opt.tokens_per_gpu) + " x " + std::to_string(opt.top_k) +
                               " is above the limit of " + std::to_string(moe_max_routed) + " routed tokens per GPU");
    const std::int64_t token_bytes = opt.token_bytes > 0 ? opt.token_bytes : (routed > 0 ? bytes_per_gpu / routed : 0);

    detail::rng gen(seed);
    std::vector<double> weight(static_cast<std::size_t>(r));
    if (opt.law == popularity::zipf) {
        std::vector<int> order(static_cast<std::size_t>(r));
        std::iota(order.begin(), order.end(), 0);
        for (int k = r - 1; k > 0; --k)
            std::swap(order[static_cast<std::size_t>(k)], order[gen.below(static_cast<std::uint64_t>(k) + 1)]);
        for (int k = 0; k < r; ++k)
            weight[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = std::pow(k + 1, -opt.skew);
    } else {
        for (double& w : weight) w = std::exp(opt.skew * gen.normal());
    }
    std::vector<double> cdf(weight.size());
    std::partial_sum(weight.begin(), weight.end(), cdf.begin());
    const double total_weight = cdf.back();

    std::vector<std::int64_t> tokens(static_cast<std::size_t>(r) * static_cast<std::size_t>(r), 0);
    std::vector<int> chosen(static_cast<std::size_t>(opt.top_k));
    for (int src = 0; src < r; ++src) {
        for (std::int64_t t = 0; t < opt.tokens_per_gpu; ++t) {
            for (int k = 0; k < opt.top_k; ++k) {
                int pick = -1;
                for (int attempt = 0; attempt < 256 && pick < 0; ++attempt) {
                    const double u = gen.uniform() * total_weight;
                    int c = static_cast<int>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
                    c = std::min(c, r - 1);
                    if (std::find(chosen.begin(), chosen.begin() + k, c) == chosen.begin() + k) pick = c;
                }
                if (pick < 0) { // extreme skew: take the most popular expert not chosen yet
                    double best = -1;
                    for (int c = 0; c < r; ++c)
                        if (std::find(chosen.begin(), chosen.begin() + k, c) == chosen.begin() + k &&
                            weight[static_cast<std::size_t>(c)] > best) {
                            best = weight[static_cast<std::size_t>(c)];
                            pick = c;
                        }
                }
                chosen[static_cast<std::size_t>(k)] = pick;
                ++tokens[static_cast<std::size_t>(src) * static_cast<std::size_t>(r) + static_cast<std::size_t>(pick)];
            }
        }
    }
    traffic_matrix m(r, r);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r; ++j)
            m(i, j) = detail::checked_mul(
                tokens[static_cast<std::size_t>(i) * static_cast<std::size_t>(r) + static_cast<std::size_t>(j)],
                token_bytes, "moe traffic");
    validate_traffic(m, topo);
    return m;
}

/// Builds the matrix a spec describes. `unit_bytes` multiplies file entries (e.g. bytes per
/// token of a token-count trace); generators use bytes_per_gpu.
[[nodiscard]] inline traffic_matrix make_workload(const workload_spec& spec, const topology& topo,
                                                  std::int64_t bytes_per_gpu, std::uint64_t seed,
                                                  std::int64_t unit_bytes = 1) {
    switch (spec.kind) {
    case workload_kind::uniform: return make_uniform(topo, bytes_per_gpu);
    case workload_kind::zipf: return make_zipf(topo, spec.zipf_s, bytes_per_gpu, seed);
    case workload_kind::moe: return make_moe(topo, spec.moe, bytes_per_gpu, seed);
    case workload_kind::file: {
        traffic_matrix m = read_matrix_file(spec.path, topo.ranks(), spec.index, unit_bytes);
        validate_traffic(m, topo);
        return m;
    }
    }
    throw invalid_argument("unknown workload kind");
}

} // namespace fast
