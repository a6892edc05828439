#pragma once
/// \file cluster_options.hpp
/// The command-line options the tools share (fast-plan, fast-simgrid, alltoallv_perf): the
/// cluster (servers, GPUs, a preset and overrides of its figures) and the workload, with the
/// byte counts they describe. Same names, same help, same errors everywhere. The cluster they
/// describe (a preset's or a fabric file's): cluster_fabric.hpp.

#include <CLI/CLI.hpp>

#include <fast/fast.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

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
    std::string fabric; ///< a fast-fabric/1 file; empty: FAST_FABRIC, if set
    /// Whether these were given on the command line (a fabric file must not be contradicted).
    const CLI::Option* servers_option = nullptr;
    const CLI::Option* gpus_option = nullptr;
    const CLI::Option* preset_option = nullptr;
};

/// A check that a number lies in [min, max], or (min, max] with `open_min`; its message states
/// the interval ("must be in (0, 1e+06], got 0"), in a few digits (CLI11's own ranges print
/// doubles in full: 300 digits for the largest).
inline CLI::Validator in_interval(double min, double max, bool open_min = false) {
    const std::string interval =
        (open_min ? "(" : "[") + fast::detail::format_number(min) + ", " + fast::detail::format_number(max) + "]";
    return CLI::Validator(
        [=](std::string& text) {
            double v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return std::string(); // the conversion names it
            const bool inside = (open_min ? v > min : v >= min) && v <= max;
            return inside ? std::string() : "must be in " + interval + ", got " + fast::detail::quote_input(text);
        },
        interval);
}

/// CLI11 reads "-1" into an unsigned option as 2^64 - 1 (and size_t counts alike): such options
/// take this check, which rejects a sign before the value is converted.
inline const CLI::Validator non_negative(
    [](std::string& text) {
        return !text.empty() && text.front() == '-' ? "must be non-negative, got " + text : std::string();
    },
    "NONNEGATIVE");

inline void add_cluster_options(CLI::App& app, cluster_options& o) {
    o.servers_option = app.add_option("--servers", o.servers, "servers in the cluster")->capture_default_str();
    o.gpus_option = app.add_option("--gpus", o.gpus, "GPUs per server")->capture_default_str();
    app.add_option(
           "--workload", o.workload,
           "uniform | zipf[:S] | moe[:tokens=N,topk=K,zipf=S|lognormal=SIGMA,token_bytes=B] | file:PATH[@INDEX]")
        ->capture_default_str();
    app.add_option("--bytes-per-gpu", o.bytes_per_gpu, "bytes each GPU sends on average (suffixes K, M, G, T)")
        ->capture_default_str();
    app.add_option("--unit-bytes", o.unit_bytes, "multiplier of matrix file entries, e.g. bytes per token")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the generators")->check(non_negative)->capture_default_str();
    o.preset_option =
        app.add_option("--preset", o.preset, "h200 (450 / 50 GB/s) or mi300x (448 / 12.5 GB/s)")->capture_default_str();
    app.add_option("--fabric", o.fabric,
                   "the cluster from a fast-fabric/1 file (docs/formats.md): servers, GPUs, NICs and figures, "
                   "instead of --servers, --gpus and --preset (default: $FAST_FABRIC, if set)")
        ->type_name("FILE");
    app.add_option("--scale-up-gbps", o.scale_up_gbps, "override: scale-up bandwidth per GPU, GB/s");
    app.add_option("--scale-out-gbps", o.scale_out_gbps, "override: scale-out (NIC) bandwidth per GPU, GB/s");
    app.add_option("--alpha-up-us", o.alpha_up_us, "override: scale-up latency per step, us");
    app.add_option("--alpha-out-us", o.alpha_out_us, "override: scale-out latency per step, us");
}

/// "256M" -> 268435456; errors name the option.
[[nodiscard]] inline std::int64_t parse_bytes(const std::string& text, const char* option) {
    return fast::detail::parse_entry(text, 1, [&] { return std::string(option); });
}

[[nodiscard]] inline std::int64_t bytes_per_gpu_of(const cluster_options& o) {
    return parse_bytes(o.bytes_per_gpu, "--bytes-per-gpu");
}

/// "1.5 GiB": bytes for people.
[[nodiscard]] inline std::string human_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5) {
        b /= 1024;
        ++u;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%.1f %s", b, units[u]);
    return text;
}

/// "h200: scale-up 450 GB/s, scale-out 50 GB/s, alpha 3/10 us": where the figures of `t` come
/// from (a preset, a plan file) and what they are, for the first line of a tool's table.
[[nodiscard]] inline std::string fabric_text(const std::string& source, const fast::topology& t) {
    char text[256];
    std::snprintf(text, sizeof text, "%s: scale-up %g GB/s, scale-out %g GB/s, alpha %g/%g us", source.c_str(),
                  t.scale_up_gbps, t.scale_out_gbps, t.alpha_up_us, t.alpha_out_us);
    return text;
}

/// What an R x R traffic matrix of `ranks` takes, for messages: "the 160000 x 160000 traffic
/// matrix alone takes 190.7 GiB".
[[nodiscard]] inline std::string matrix_size_text(int ranks) {
    const double bytes = static_cast<double>(ranks) * static_cast<double>(ranks) * sizeof(std::int64_t);
    return "the " + std::to_string(ranks) + " x " + std::to_string(ranks) + " traffic matrix alone takes " +
           human_bytes(bytes);
}

/// Throws fast::invalid_argument, naming the sizes, when the traffic matrix of `t` alone needs
/// more than this machine's memory (else it would end in std::bad_alloc, or the OOM killer).
inline void check_matrix_fits(const fast::topology& t) {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return; // unknown: try
    const double memory = static_cast<double>(pages) * static_cast<double>(page_size);
    const double ranks = static_cast<double>(t.ranks());
    if (ranks * ranks * sizeof(std::int64_t) > memory)
        throw fast::invalid_argument(std::to_string(t.servers) + " servers x " + std::to_string(t.gpus_per_server) +
                                     " GPUs: " + matrix_size_text(t.ranks()) + ", more than this machine's " +
                                     human_bytes(memory) + " of memory");
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

/// The median of `v` (the mean of the middle two where their number is even); 0 when empty.
[[nodiscard]] inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

[[nodiscard]] inline std::int64_t unit_of(const cluster_options& o) {
    const std::int64_t unit = parse_bytes(o.unit_bytes, "--unit-bytes");
    if (unit < 1) throw fast::invalid_argument("--unit-bytes must be at least 1");
    return unit;
}

} // namespace fast_tools
