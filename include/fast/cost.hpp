#pragma once
/// \file cost.hpp
/// The alpha-beta two-tier cost model shared by planners, tools and docs.
///
/// Semantics (the executor's, see docs/architecture.md): each rank works through the steps in
/// order and starts step k when all of its own transfers of step k - 1 have finished; there is no
/// global barrier. A transfer can start when its sender and its receiver have both started its
/// step. Each rank has four ports: scale-out send, scale-out receive, scale-up send, scale-up
/// receive (a copy to itself uses both scale-up ports). A port's transfers of one step form one
/// batch that starts when the last of them can start and lasts alpha (of the tier) + bytes /
/// bandwidth. A transfer ends when the batches of both of its ports have ended. The predicted
/// completion is when the last rank finishes its last step. On an uneven fabric each rank's
/// scale-out ports run at its own rate (plan::nic_gbps); a batch on a NIC that is down never ends.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "counts.hpp"
#include "plan.hpp"
#include "traffic.hpp"

namespace fast {

enum class port : std::uint8_t { out_send, out_recv, up_send, up_recv };

/// One port's batch of one step, for timelines.
struct port_batch {
    std::uint32_t step = 0;
    int rank = 0;
    fast::port port = port::out_send;
    double start_us = 0;
    double end_us = 0;
    std::int64_t bytes = 0; ///< saturates at INT64_MAX (a plan may send more through a port)
};

struct prediction {
    double completion_us = 0;
    std::vector<double> rank_finish_us; ///< when each rank finished its last step
    std::vector<port_batch> batches;    ///< filled only when asked for (see simulate)
};

namespace detail {
/// Microseconds to move `bytes` at `gbps` (1 GB = 1e9 bytes).
[[nodiscard]] constexpr double transfer_us(std::int64_t bytes, double gbps) noexcept {
    return static_cast<double>(bytes) / (gbps * 1e3);
}

/// A port's bytes in one step: the sum of its transfers' bytes. Each is below 2^63 but a valid
/// plan may read the same bytes many times in one step (to several ranks), so the sum takes 128
/// bits: no plan of fewer than 2^64 transfers can overflow it. Below 2^63 it converts to the same
/// double as an int64 would, so predictions are those of an int64 sum wherever that fits.
__extension__ typedef __int128 batch_bytes;

/// The sum as int64 bytes, saturating at INT64_MAX (for port_batch::bytes).
[[nodiscard]] constexpr std::int64_t saturate_bytes(batch_bytes bytes) noexcept {
    return bytes > INT64_MAX ? INT64_MAX : static_cast<std::int64_t>(bytes);
}

inline constexpr std::size_t ports_per_rank = 4;

/// A rank's port for sending (receiving) over `t`.
[[nodiscard]] constexpr port sending_port(tier t) noexcept {
    return t == tier::scale_out ? port::out_send : port::up_send;
}
[[nodiscard]] constexpr port receiving_port(tier t) noexcept {
    return t == tier::scale_out ? port::out_recv : port::up_recv;
}
[[nodiscard]] constexpr bool is_scale_out(port p) noexcept {
    return p == port::out_send || p == port::out_recv;
}

/// The index of `rank`'s port `p` in per-port arrays.
[[nodiscard]] constexpr std::size_t port_index(int rank, port p) noexcept {
    return static_cast<std::size_t>(rank) * ports_per_rank + static_cast<std::size_t>(p);
}
} // namespace detail

/// Runs the model over `p`. With `record_batches`, also returns every port batch (for
/// timelines). O(transfers + R).
[[nodiscard]] inline prediction simulate(const plan& p, bool record_batches = false) {
    using detail::port_index;
    const topology& topo = p.topology;
    const auto r = static_cast<std::size_t>(topo.ranks());
    const std::size_t ports = r * detail::ports_per_rank;
    prediction out;
    std::vector<double> start(r, 0.0);
    std::vector<double> finish(r, 0.0);
    std::vector<double> batch_start(ports, 0.0);
    std::vector<double> batch_end(ports, 0.0);
    std::vector<detail::batch_bytes> batch_bytes(ports, 0);
    std::vector<std::size_t> batch_stamp(ports, SIZE_MAX);
    std::vector<std::size_t> touched_ports;
    std::vector<std::size_t> touched_ranks;
    std::vector<std::size_t> rank_stamp(r, SIZE_MAX);

    auto send_port = [](const transfer& t) { return port_index(t.src, detail::sending_port(t.tier)); };
    auto recv_port = [](const transfer& t) { return port_index(t.dst, detail::receiving_port(t.tier)); };

    for (std::size_t k = 0; k < p.steps(); ++k) {
        const auto transfers = p.step(k);
        touched_ports.clear();
        touched_ranks.clear();
        for (const transfer& t : transfers) {
            const double ready =
                std::max(start[static_cast<std::size_t>(t.src)], start[static_cast<std::size_t>(t.dst)]);
            for (const std::size_t q : {send_port(t), recv_port(t)}) {
                if (batch_stamp[q] != k) {
                    batch_stamp[q] = k;
                    batch_start[q] = ready;
                    batch_bytes[q] = t.bytes;
                    touched_ports.push_back(q);
                } else {
                    batch_start[q] = std::max(batch_start[q], ready);
                    batch_bytes[q] += t.bytes;
                }
            }
            for (const std::size_t rank : {static_cast<std::size_t>(t.src), static_cast<std::size_t>(t.dst)})
                if (rank_stamp[rank] != k) {
                    rank_stamp[rank] = k;
                    finish[rank] = start[rank];
                    touched_ranks.push_back(rank);
                }
        }
        for (const std::size_t q : touched_ports) {
            const auto which = static_cast<port>(q % detail::ports_per_rank);
            const bool out_tier = detail::is_scale_out(which);
            const int rank = static_cast<int>(q / detail::ports_per_rank);
            const double gbps = out_tier ? p.scale_out_gbps(rank) : topo.scale_up_gbps;
            batch_end[q] = gbps == 0 ? HUGE_VAL // a NIC that is down never ends a batch
                                     : batch_start[q] + (out_tier ? topo.alpha_out_us : topo.alpha_up_us) +
                                           static_cast<double>(batch_bytes[q]) / (gbps * 1e3);
            if (record_batches)
                out.batches.push_back({static_cast<std::uint32_t>(k), rank, which, batch_start[q], batch_end[q],
                                       detail::saturate_bytes(batch_bytes[q])});
        }
        for (const transfer& t : transfers) {
            const double end = std::max(batch_end[send_port(t)], batch_end[recv_port(t)]);
            auto& sender = finish[static_cast<std::size_t>(t.src)];
            auto& receiver = finish[static_cast<std::size_t>(t.dst)];
            sender = std::max(sender, end);
            receiver = std::max(receiver, end);
        }
        for (const std::size_t rank : touched_ranks) start[rank] = finish[rank];
    }
    out.rank_finish_us = start;
    for (const double f : start) out.completion_us = std::max(out.completion_us, f);
    return out;
}

/// Predicted completion time of `p` in microseconds. O(transfers + R).
[[nodiscard]] inline double predict_us(const plan& p) {
    return simulate(p).completion_us;
}

/// The universal lower bound in microseconds:
///   T_lb = alpha_out + max over servers s of max(out_s, in_s) / (G * B_out),
/// where out_s / in_s are server s's inter-server send / receive bytes (no plan can do better:
/// the server's G NICs must carry them). When there is no inter-server traffic, or the scale-up
/// fabric is the bottleneck, the bound is alpha_up + the busiest GPU's intra-server bytes / B_up
/// instead (the larger of the two). From the shared counts (counts.hpp), alike on every rank:
/// O(S^2 + R).
[[nodiscard]] inline double lower_bound_us(const shared_counts& c, const topology& topo) {
    const auto us = static_cast<std::size_t>(topo.servers);
    std::int64_t busiest = 0;
    for (std::size_t s = 0; s < us; ++s) {
        std::int64_t send = 0;
        std::int64_t recv = 0;
        for (std::size_t d = 0; d < us; ++d) {
            send += c.pair[s * us + d];
            recv += c.pair[d * us + s];
        }
        busiest = std::max({busiest, send, recv});
    }
    double bound = 0;
    if (busiest > 0)
        bound = topo.alpha_out_us + detail::transfer_us(busiest, topo.scale_out_gbps * topo.gpus_per_server);
    std::int64_t up = 0;
    for (const gpu_totals& g : c.gpus) up = std::max({up, g.up_sent, g.up_received});
    if (up > 0) bound = std::max(bound, topo.alpha_up_us + detail::transfer_us(up, topo.scale_up_gbps));
    return bound;
}

/// The same from the matrix. O(R^2).
[[nodiscard]] inline double lower_bound_us(const traffic_matrix& m, const topology& topo) {
    return lower_bound_us(make_shared_counts(m, topo), topo);
}

} // namespace fast
