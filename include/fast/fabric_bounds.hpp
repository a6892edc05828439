#pragma once
/// \file fabric_bounds.hpp
/// Bounds on a fabric that may be uneven (fabric.hpp), from the shared counts (counts.hpp):
/// - lower_bound_us: no plan does better. A server's scale-out bytes leave (and arrive) through
///   its NICs together, whichever GPU holds them, so T_lb uses each server's summed NIC rates;
///   on a uniform fabric it equals lower_bound_us of the topology (cost.hpp).
/// - own_nics_bound: the best a plan can do that keeps every GPU's scale-out bytes on the NICs
///   it hangs off, as `direct` does: per group of GPUs and the NICs they share, its bytes over
///   its NICs' rates. Where a GPU's NICs are down and it has bytes to move, no such plan
///   finishes. The gap between the two is what moving bytes to a peer's NIC can win.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "cost.hpp"
#include "counts.hpp"
#include "fabric.hpp"

namespace fast {

/// A bound and what sets it ("server 2's NICs", "NIC 1 of server 0").
struct fabric_bound {
    double us = 0;     ///< +infinity: no plan of that kind finishes
    std::string where; ///< empty when nothing moves at all
};

namespace detail {

/// `b` or, where it is larger, the scale-up part of T_lb: the busiest GPU's intra-server bytes
/// (cost.hpp's term).
[[nodiscard]] inline fabric_bound with_scale_up(fabric_bound b, const shared_counts& c, const fabric& f) {
    std::int64_t up = 0;
    for (const gpu_totals& g : c.gpus) up = std::max({up, g.up_sent, g.up_received});
    const double t = up > 0 ? f.alpha_up_us + transfer_us(up, f.scale_up_gbps) : 0.0;
    return t > b.us ? fabric_bound{t, "the scale-up fabric"} : b;
}

/// Groups of a server's GPUs that share NICs: root[g] for each local GPU (union of each NIC's
/// GPUs).
[[nodiscard]] inline std::vector<int> nic_groups(const fabric& f, int server) {
    std::vector<int> root(static_cast<std::size_t>(f.gpus_per_server));
    std::iota(root.begin(), root.end(), 0);
    auto find = [&](int g) {
        while (root[static_cast<std::size_t>(g)] != g) g = root[static_cast<std::size_t>(g)];
        return g;
    };
    for (const nic& n : f.nics)
        if (n.server == server)
            for (const int g : n.gpus) root[static_cast<std::size_t>(find(g))] = find(n.gpus.front());
    for (int g = 0; g < f.gpus_per_server; ++g) root[static_cast<std::size_t>(g)] = find(g);
    return root;
}

} // namespace detail

/// T_lb on `f` (validate(f) first; `c` of f's shape). O(S^2 + R + NICs).
[[nodiscard]] inline fabric_bound lower_bound(const shared_counts& c, const fabric& f) {
    const auto us = static_cast<std::size_t>(f.servers);
    std::vector<double> rate(us, 0.0);
    for (const nic& n : f.nics) rate[static_cast<std::size_t>(n.server)] += n.gbps;
    fabric_bound out;
    for (std::size_t s = 0; s < us; ++s) {
        std::int64_t send = 0, recv = 0;
        for (std::size_t d = 0; d < us; ++d) send += c.pair[s * us + d], recv += c.pair[d * us + s];
        if (send == 0 && recv == 0) continue;
        const double t = f.alpha_out_us + detail::transfer_us(std::max(send, recv), rate[s]);
        if (out.where.empty() || t > out.us) out = {t, "server " + std::to_string(s) + "'s NICs"};
    }
    return detail::with_scale_up(out, c, f);
}

/// The best plan that keeps each GPU's scale-out bytes on its own NICs (see the file's comment).
/// O(R + NICs).
[[nodiscard]] inline fabric_bound own_nics_bound(const shared_counts& c, const fabric& f) {
    const std::vector<int> index = detail::nic_index_in_server(f);
    const auto g = static_cast<std::size_t>(f.gpus_per_server);
    fabric_bound out;
    for (int s = 0; s < f.servers; ++s) {
        const std::vector<int> root = detail::nic_groups(f, s);
        std::vector<double> rate(g, 0.0);
        std::vector<int> first_nic(g, -1);
        for (std::size_t k = 0; k < f.nics.size(); ++k) {
            const nic& n = f.nics[k];
            if (n.server != s) continue;
            const auto r = static_cast<std::size_t>(root[static_cast<std::size_t>(n.gpus.front())]);
            rate[r] += n.gbps;
            if (first_nic[r] < 0) first_nic[r] = index[k];
        }
        std::vector<std::int64_t> sent(g, 0), received(g, 0);
        for (std::size_t a = 0; a < g; ++a) {
            const gpu_totals& t = c.gpus[static_cast<std::size_t>(s) * g + a];
            sent[static_cast<std::size_t>(root[a])] += t.out;
            received[static_cast<std::size_t>(root[a])] += t.in;
        }
        for (std::size_t r = 0; r < g; ++r) {
            const std::int64_t bytes = std::max(sent[r], received[r]);
            if (bytes == 0) continue;
            const double t = rate[r] > 0 ? f.alpha_out_us + detail::transfer_us(bytes, rate[r])
                                         : std::numeric_limits<double>::infinity();
            if (out.where.empty() || t > out.us)
                out = {t, "NIC " + std::to_string(first_nic[r]) + " of server " + std::to_string(s) +
                              (rate[r] > 0 ? "" : ", down, with bytes to move")};
        }
    }
    return detail::with_scale_up(out, c, f);
}

} // namespace fast
