#pragma once
/// \file fabric.hpp
/// A cluster's fabric as it is built: servers of GPUs on a scale-up fabric, and each server's
/// scale-out NICs, which GPUs each hangs off and its rate. Real clusters are uneven: two GPUs
/// may share a NIC, a GPU may have two, a NIC may run slower or be down. The planner plans for a
/// `topology` (one NIC per GPU, all at one rate); to_topology says why a fabric is not one.
/// The file format "fast-fabric/1" is in fabric_json.hpp (docs/formats.md).

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "error.hpp"
#include "topology.hpp"

namespace fast {

/// One scale-out NIC.
struct nic {
    int server = 0;
    std::vector<int> gpus; ///< the server's local GPU indices that send and receive through it
    double gbps = 50.0;    ///< GB/s each way; 0: down

    friend bool operator==(const nic&, const nic&) = default;
};

/// Bandwidths in GB/s (1 GB = 1e9 bytes), latencies (per step) in microseconds.
struct fabric {
    int servers = 1;
    int gpus_per_server = 1;
    double scale_up_gbps = 450.0; ///< per GPU
    double alpha_up_us = 3.0;
    double alpha_out_us = 10.0;
    std::vector<nic> nics; ///< every server's NICs; "NIC k of server s" is the k-th listed with server s

    friend bool operator==(const fabric&, const fabric&) = default;
};

/// The same NICs on every server: each NIC serves `gpus_per_nic` consecutive GPUs, or each GPU
/// has `nics_per_gpu` NICs of its own (at most one of the two above 1), all at `gbps`.
struct nic_layout {
    int gpus_per_nic = 1;
    int nics_per_gpu = 1;
    double gbps = 50.0;

    friend bool operator==(const nic_layout&, const nic_layout&) = default;
};

namespace detail {

[[nodiscard]] inline std::string nic_path(std::size_t index) {
    return "nics[" + std::to_string(index) + "]";
}

/// Throws naming nics[index] if `n` is not a NIC of a server of `f`. `listed` (a flag per local
/// GPU, all false: one allocation for all NICs) is left all false.
inline void validate_nic(const fabric& f, const nic& n, std::size_t index, std::vector<bool>& listed) {
    const std::string where = nic_path(index);
    if (n.server < 0 || n.server >= f.servers)
        throw invalid_argument(where + ".server: " + std::to_string(n.server) + " is not a server (0 to " +
                               std::to_string(f.servers - 1) + ")");
    if (n.gpus.empty()) throw invalid_argument(where + ".gpus: a NIC serves at least one GPU");
    auto gpu_error = [&](std::size_t k, const std::string& what) {
        return invalid_argument(where + ".gpus[" + std::to_string(k) + "]: " + what);
    };
    for (std::size_t k = 0; k < n.gpus.size(); ++k) {
        const int g = n.gpus[k];
        if (g < 0 || g >= f.gpus_per_server)
            throw gpu_error(k, std::to_string(g) + " is not a GPU of the server (0 to " +
                                   std::to_string(f.gpus_per_server - 1) + ")");
        if (listed[static_cast<std::size_t>(g)]) throw gpu_error(k, "GPU " + std::to_string(g) + " twice");
        listed[static_cast<std::size_t>(g)] = true;
    }
    for (const int g : n.gpus) listed[static_cast<std::size_t>(g)] = false;
    if (!(std::isfinite(n.gbps) && n.gbps >= 0))
        throw invalid_argument(where + ".gbps: expected a number >= 0, got " + format_number(n.gbps));
}

/// Per server: how many NICs each local GPU hangs off, and whether one of its NICs is up.
struct server_reach {
    std::vector<int> nics_of_gpu;
    bool any_up = false;
};

[[nodiscard]] inline std::vector<server_reach> reach_of(const fabric& f) {
    std::vector<server_reach> out(static_cast<std::size_t>(f.servers));
    for (server_reach& r : out) r.nics_of_gpu.assign(static_cast<std::size_t>(f.gpus_per_server), 0);
    for (const nic& n : f.nics) {
        server_reach& r = out[static_cast<std::size_t>(n.server)];
        r.any_up = r.any_up || n.gbps > 0;
        for (const int g : n.gpus) ++r.nics_of_gpu[static_cast<std::size_t>(g)];
    }
    return out;
}

} // namespace detail

/// Throws fast::invalid_argument with the first problem of `f`, naming the field, index and
/// value: the topology's own figures (servers, GPUs, scale-up rate, alphas; as validate(topology)),
/// every NIC on a server and on GPUs of it, rates >= 0, every GPU hanging off a NIC and, where
/// there are several servers, every server with a NIC up (else it cannot reach the others).
inline void validate(const fabric& f) {
    validate(topology{f.servers, f.gpus_per_server, f.scale_up_gbps, 1.0, f.alpha_up_us, f.alpha_out_us});
    std::vector<bool> listed(static_cast<std::size_t>(f.gpus_per_server), false);
    for (std::size_t i = 0; i < f.nics.size(); ++i) detail::validate_nic(f, f.nics[i], i, listed);
    const std::vector<detail::server_reach> reach = detail::reach_of(f);
    for (int s = 0; s < f.servers; ++s) {
        const detail::server_reach& r = reach[static_cast<std::size_t>(s)];
        for (int g = 0; g < f.gpus_per_server; ++g)
            if (r.nics_of_gpu[static_cast<std::size_t>(g)] == 0)
                throw invalid_argument("nics: GPU " + std::to_string(g) + " of server " + std::to_string(s) +
                                       " hangs off no NIC");
        if (f.servers > 1 && !r.any_up)
            throw invalid_argument("nics: every NIC of server " + std::to_string(s) +
                                   " is down: it cannot reach the other servers");
    }
}

/// The NICs of `servers` servers of `gpus_per_server` GPUs laid out as `l`, server by server.
/// Throws naming the field where gpus_per_nic does not divide the GPUs, or both counts exceed 1.
[[nodiscard]] inline std::vector<nic> layout_nics(int servers, int gpus_per_server, const nic_layout& l) {
    if (l.gpus_per_nic < 1 || l.nics_per_gpu < 1 || (l.gpus_per_nic > 1 && l.nics_per_gpu > 1))
        throw invalid_argument("gpus_per_nic " + std::to_string(l.gpus_per_nic) + " and nics_per_gpu " +
                               std::to_string(l.nics_per_gpu) + ": both at least 1, at most one above 1");
    if (gpus_per_server % l.gpus_per_nic != 0)
        throw invalid_argument("gpus_per_nic: " + std::to_string(l.gpus_per_nic) + " does not divide gpus_per_server " +
                               std::to_string(gpus_per_server));
    std::vector<nic> out;
    for (int s = 0; s < servers; ++s)
        for (int g = 0; g < gpus_per_server; g += l.gpus_per_nic)
            for (int copy = 0; copy < l.nics_per_gpu; ++copy) {
                nic n{s, {}, l.gbps};
                for (int k = 0; k < l.gpus_per_nic; ++k) n.gpus.push_back(g + k);
                out.push_back(std::move(n));
            }
    return out;
}

/// The fabric a topology stands for: one NIC per GPU at scale_out_gbps.
[[nodiscard]] inline fabric uniform_fabric(const topology& t) {
    fabric f{t.servers, t.gpus_per_server, t.scale_up_gbps, t.alpha_up_us, t.alpha_out_us, {}};
    f.nics = layout_nics(t.servers, t.gpus_per_server, {1, 1, t.scale_out_gbps});
    return f;
}

/// A preset as a fabric: `servers` x `gpus_per_server` GPUs with the preset's figures.
[[nodiscard]] inline fabric preset_fabric(preset p, int servers, int gpus_per_server) {
    return uniform_fabric(make_topology(servers, gpus_per_server, p));
}

namespace detail {

/// The rate most NICs run at (the lowest of the most common), the one others are compared with.
[[nodiscard]] inline double usual_rate(const fabric& f) {
    std::map<double, int> count;
    for (const nic& n : f.nics) ++count[n.gbps];
    double usual = 0;
    int most = 0;
    for (const auto& [gbps, times] : count)
        if (times > most) usual = gbps, most = times;
    return usual;
}

/// Each NIC's index among its server's NICs ("NIC k of server s").
[[nodiscard]] inline std::vector<int> nic_index_in_server(const fabric& f) {
    std::vector<int> next(static_cast<std::size_t>(f.servers), 0), out;
    out.reserve(f.nics.size());
    for (const nic& n : f.nics) out.push_back(next[static_cast<std::size_t>(n.server)]++);
    return out;
}

/// Why the planner cannot plan for the valid fabric `f` (one NIC per GPU at equal rates, none
/// down), naming the first NIC or GPU that breaks it; "" if it can.
[[nodiscard]] inline std::string uneven_reason(const fabric& f) {
    const double usual = usual_rate(f);
    const std::vector<int> index = nic_index_in_server(f);
    for (std::size_t k = 0; k < f.nics.size(); ++k) {
        const nic& n = f.nics[k];
        const std::string name = "NIC " + std::to_string(index[k]) + " of server " + std::to_string(n.server);
        if (n.gpus.size() != 1) return name + " serves " + std::to_string(n.gpus.size()) + " GPUs";
        if (n.gbps == 0) return name + " is down";
        if (n.gbps != usual)
            return name + " runs at " + format_number(n.gbps) + " GB/s, others at " + format_number(usual);
    }
    const std::vector<server_reach> reach = reach_of(f);
    for (int s = 0; s < f.servers; ++s)
        for (int g = 0; g < f.gpus_per_server; ++g)
            if (const int count = reach[static_cast<std::size_t>(s)].nics_of_gpu[static_cast<std::size_t>(g)];
                count != 1)
                return "GPU " + std::to_string(g) + " of server " + std::to_string(s) + " has " +
                       std::to_string(count) + " NICs";
    return {};
}

} // namespace detail

/// Whether the valid fabric `f` is one NIC per GPU, all at one rate above 0: what the planner
/// plans for.
[[nodiscard]] inline bool is_uniform(const fabric& f) {
    return detail::uneven_reason(f).empty();
}

/// Each rank's scale-out rate on `f` (valid), in GB/s: its share of every NIC it hangs off (a
/// NIC's rate split evenly among its GPUs), 0 where its only NIC is down. Rank order as topology.
[[nodiscard]] inline std::vector<double> nic_rates(const fabric& f) {
    std::vector<double> out(static_cast<std::size_t>(f.servers) * static_cast<std::size_t>(f.gpus_per_server), 0.0);
    for (const nic& n : f.nics)
        for (const int g : n.gpus)
            out[static_cast<std::size_t>(n.server * f.gpus_per_server + g)] +=
                n.gbps / static_cast<double>(n.gpus.size());
    return out;
}

/// The topology the planner plans `f` on (validated): its shape, scale-up figures and alphas,
/// and as scale-out rate the fastest rank's (nic_rates). Where every rank's rate is the same
/// (one NIC per GPU, or the same sharing everywhere) it is the whole story; otherwise the
/// planner also takes the ranks' rates (planner(fabric)).
[[nodiscard]] inline topology planning_topology(const fabric& f) {
    validate(f);
    const std::vector<double> rates = nic_rates(f);
    const double fastest = *std::max_element(rates.begin(), rates.end());
    // Every NIC down (one server: nothing leaves it): the rate has no use; the scale-up one stands in.
    return {f.servers,     f.gpus_per_server, f.scale_up_gbps, fastest > 0 ? fastest : f.scale_up_gbps,
            f.alpha_up_us, f.alpha_out_us};
}

/// Whether ranks of `f` (valid) scale out at different rates: the planner then plans each
/// server pair's bytes over its rails in proportion to their rates.
[[nodiscard]] inline bool has_uneven_rates(const fabric& f) {
    const std::vector<double> rates = nic_rates(f);
    return std::adjacent_find(rates.begin(), rates.end(), std::not_equal_to<>()) != rates.end();
}

/// A fabric of topology `t` with one NIC per rank at `rates[rank]` GB/s: the same ranks' rates
/// (nic_rates) as any fabric they came from, so a planner on it plans alike.
[[nodiscard]] inline fabric fabric_of_rates(const topology& t, const std::vector<double>& rates) {
    if (rates.size() != static_cast<std::size_t>(t.ranks()))
        throw invalid_argument(std::to_string(rates.size()) + " NIC rates for " + std::to_string(t.ranks()) + " ranks");
    fabric f{t.servers, t.gpus_per_server, t.scale_up_gbps, t.alpha_up_us, t.alpha_out_us, {}};
    f.nics.reserve(rates.size());
    for (int r = 0; r < t.ranks(); ++r)
        f.nics.push_back({t.server_of(r), {t.local_of(r)}, rates[static_cast<std::size_t>(r)]});
    return f;
}

/// The topology of `f`, where it is one NIC per GPU at equal rates. Throws
/// fast::invalid_argument for an invalid fabric (validate) and for an uneven one, saying which
/// NIC or GPU makes it so (planner(fabric) plans those).
[[nodiscard]] inline topology to_topology(const fabric& f) {
    validate(f);
    if (const std::string why = detail::uneven_reason(f); !why.empty())
        throw invalid_argument("fabric: " + why +
                               ": a topology is one NIC per GPU at equal rates (planner(fabric) plans uneven ones)");
    return {f.servers, f.gpus_per_server, f.scale_up_gbps, f.nics.front().gbps, f.alpha_up_us, f.alpha_out_us};
}

} // namespace fast
