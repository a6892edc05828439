#pragma once
/// \file topology.hpp
/// A two-tier GPU cluster: `servers` servers of `gpus_per_server` GPUs each, a fast scale-up
/// fabric inside a server and one scale-out NIC per GPU. Ranks are server-major:
/// rank = server * gpus_per_server + local.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "error.hpp"

namespace fast {

/// Bandwidths are per GPU in GB/s (1 GB = 1e9 bytes); latencies (alpha) in microseconds.
struct topology {
    int servers = 1;
    int gpus_per_server = 1;
    double scale_up_gbps = 450.0;
    double scale_out_gbps = 50.0;
    double alpha_up_us = 3.0;
    double alpha_out_us = 10.0;

    [[nodiscard]] constexpr int ranks() const noexcept { return servers * gpus_per_server; }
    [[nodiscard]] constexpr int server_of(int rank) const noexcept { return rank / gpus_per_server; }
    [[nodiscard]] constexpr int local_of(int rank) const noexcept { return rank % gpus_per_server; }
    [[nodiscard]] constexpr int rank_of(int server, int local) const noexcept {
        return server * gpus_per_server + local;
    }
    [[nodiscard]] constexpr bool same_server(int a, int b) const noexcept { return server_of(a) == server_of(b); }

    friend bool operator==(const topology&, const topology&) = default;
};

/// Bandwidth and latency presets of real clusters.
enum class preset {
    h200,   ///< NVLink 450 GB/s per GPU, 400G NIC (50 GB/s) per GPU
    mi300x, ///< xGMI 448 GB/s per GPU, 100G RoCE NIC (12.5 GB/s) per GPU
};

[[nodiscard]] inline std::string_view to_string(preset p) noexcept {
    return p == preset::h200 ? "h200" : "mi300x";
}

/// Parses "h200" or "mi300x"; throws fast::invalid_argument naming the value otherwise.
[[nodiscard]] inline preset parse_preset(std::string_view name) {
    if (name == "h200") return preset::h200;
    if (name == "mi300x") return preset::mi300x;
    throw invalid_argument("unknown preset '" + std::string(name) + "' (expected h200 or mi300x)");
}

/// Throws fast::invalid_argument naming the field and value if `t` is not a usable topology:
/// positive server and GPU counts whose product fits in int, positive finite bandwidths,
/// non-negative finite latencies.
inline void validate(const topology& t) {
    if (t.servers < 1) throw invalid_argument("servers must be at least 1, got " + std::to_string(t.servers));
    if (t.gpus_per_server < 1)
        throw invalid_argument("gpus_per_server must be at least 1, got " + std::to_string(t.gpus_per_server));
    if (t.servers > std::numeric_limits<int>::max() / t.gpus_per_server)
        throw invalid_argument("servers * gpus_per_server = " + std::to_string(t.servers) + " * " +
                               std::to_string(t.gpus_per_server) + " does not fit in int");
    auto positive = [](double v, const char* name) {
        if (!(std::isfinite(v) && v > 0))
            throw invalid_argument(std::string(name) + " must be positive and finite, got " + detail::format_number(v));
    };
    auto non_negative = [](double v, const char* name) {
        if (!(std::isfinite(v) && v >= 0))
            throw invalid_argument(std::string(name) + " must be non-negative and finite, got " +
                                   detail::format_number(v));
    };
    positive(t.scale_up_gbps, "scale_up_gbps");
    positive(t.scale_out_gbps, "scale_out_gbps");
    non_negative(t.alpha_up_us, "alpha_up_us");
    non_negative(t.alpha_out_us, "alpha_out_us");
}

/// A validated topology with a preset's bandwidths, alpha_up 3 us and alpha_out 10 us.
[[nodiscard]] inline topology make_topology(int servers, int gpus_per_server, preset p = preset::h200) {
    topology t;
    t.servers = servers;
    t.gpus_per_server = gpus_per_server;
    if (p == preset::h200) {
        t.scale_up_gbps = 450.0;
        t.scale_out_gbps = 50.0;
    } else {
        t.scale_up_gbps = 448.0;
        t.scale_out_gbps = 12.5;
    }
    validate(t);
    return t;
}

} // namespace fast
