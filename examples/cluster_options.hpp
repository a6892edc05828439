#pragma once
/// \file cluster_options.hpp
/// The command-line options the tools share (fast-plan, fast-simgrid, alltoallv_perf): the
/// cluster (servers, GPUs, a preset and overrides of its figures) and the workload, with the
/// topology and byte counts they describe. Same names, same help, same errors everywhere.

#include <CLI/CLI.hpp>

#include <fast/fast.hpp>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace fast_tools {

struct cluster_options {
    int servers = 4;
    int gpus = 8;
    std::string workload = "zipf:0.8";
    std::string bytes_per_gpu = "256M";
    std::string unit_bytes = "1";
    std::uint64_t seed = 1;
    std::string preset = "h200";
    std::optional<double> scale_up_gbps;
    std::optional<double> scale_out_gbps;
    std::optional<double> alpha_up_us;
    std::optional<double> alpha_out_us;
};

/// CLI11 reads "-1" into an unsigned option as 2^64 - 1 (and size_t counts alike): such options
/// take this check, which rejects a sign before the value is converted.
inline const CLI::Validator non_negative(
    [](std::string& text) {
        return !text.empty() && text.front() == '-' ? "must be non-negative, got " + text : std::string();
    },
    "NONNEGATIVE");

inline void add_cluster_options(CLI::App& app, cluster_options& o) {
    app.add_option("--servers", o.servers, "servers in the cluster")->capture_default_str();
    app.add_option("--gpus", o.gpus, "GPUs per server")->capture_default_str();
    app.add_option("--workload", o.workload,
                   "uniform | zipf[:S] | moe[:tokens=N,topk=K,zipf=S|lognormal=SIGMA,token_bytes=B] | file:PATH[@INDEX]")
        ->capture_default_str();
    app.add_option("--bytes-per-gpu", o.bytes_per_gpu, "bytes each GPU sends on average (suffixes K, M, G, T)")
        ->capture_default_str();
    app.add_option("--unit-bytes", o.unit_bytes, "multiplier of matrix file entries, e.g. bytes per token")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the generators")->check(non_negative)->capture_default_str();
    app.add_option("--preset", o.preset, "h200 (450 / 50 GB/s) or mi300x (448 / 12.5 GB/s)")->capture_default_str();
    app.add_option("--scale-up-gbps", o.scale_up_gbps, "override: scale-up bandwidth per GPU, GB/s");
    app.add_option("--scale-out-gbps", o.scale_out_gbps, "override: scale-out (NIC) bandwidth per GPU, GB/s");
    app.add_option("--alpha-up-us", o.alpha_up_us, "override: scale-up latency per step, us");
    app.add_option("--alpha-out-us", o.alpha_out_us, "override: scale-out latency per step, us");
}

/// "256M" -> 268435456; errors name the option.
[[nodiscard]] inline std::int64_t parse_bytes(const std::string& text, const char* option) {
    return fast::detail::parse_entry(text, 1, [&] { return std::string(option); });
}

/// The preset with the overrides, validated.
[[nodiscard]] inline fast::topology topology_of(const cluster_options& o) {
    fast::topology t = fast::make_topology(o.servers, o.gpus, fast::parse_preset(o.preset));
    if (o.scale_up_gbps) t.scale_up_gbps = *o.scale_up_gbps;
    if (o.scale_out_gbps) t.scale_out_gbps = *o.scale_out_gbps;
    if (o.alpha_up_us) t.alpha_up_us = *o.alpha_up_us;
    if (o.alpha_out_us) t.alpha_out_us = *o.alpha_out_us;
    fast::validate(t);
    return t;
}

[[nodiscard]] inline std::int64_t bytes_per_gpu_of(const cluster_options& o) {
    return parse_bytes(o.bytes_per_gpu, "--bytes-per-gpu");
}

/// `path` opened for writing, or a closed stream when it is empty. The tools open their output
/// files before any work, so that a bad path fails at once.
[[nodiscard]] inline std::ofstream open_output(const std::string& path) {
    std::ofstream out;
    if (path.empty()) return out;
    out.open(path);
    if (!out) throw fast::invalid_argument("cannot write '" + path + "'");
    return out;
}

[[nodiscard]] inline std::int64_t unit_of(const cluster_options& o) {
    const std::int64_t unit = parse_bytes(o.unit_bytes, "--unit-bytes");
    if (unit < 1) throw fast::invalid_argument("--unit-bytes must be at least 1");
    return unit;
}

} // namespace fast_tools
