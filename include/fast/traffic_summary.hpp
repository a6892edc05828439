#pragma once
/// \file traffic_summary.hpp
/// What every rank needs of a traffic matrix to compute the shared FAST schedule and to place
/// its own transfers: per pair of servers (s, d) and GPU, the bytes each GPU of s sends to d and
/// the bytes each GPU of d receives from s, with their prefix sums (the packed MPI_Alltoallv
/// displacements at server granularity). It is S^2 G numbers each, G times fewer than the
/// R x R matrix, and what a runtime exchanges instead of every rank's counts.
///
///     fast::traffic_summary sum;
///     fast::summarize(m, topo, sum); // O(R^2), validates m

#include <cstdint>
#include <vector>

#include "topology.hpp"
#include "traffic.hpp"

namespace fast {

/// Per (source server s, destination server d, GPU) byte counts; entry (s, d, g) is at
/// (s * S + d) * G + g. The diagonal pairs (s == s) hold the intra-server traffic.
struct traffic_summary {
    int servers = 0;
    int gpus_per_server = 0;
    /// (s, d, a): bytes GPU a of s sends to the GPUs of d (its row of the matrix, per server).
    std::vector<std::int64_t> sent;
    /// (s, d, b): bytes GPU b of d receives from the GPUs of s (its column, per server).
    std::vector<std::int64_t> received;
    /// (s, d, a): bytes GPU a of s sends to servers before d: in its packed send buffer, the
    /// offset of its first block for server d.
    std::vector<std::int64_t> sent_before;
    /// (s, d, b): bytes GPU b of d receives from servers before s: in its packed receive buffer,
    /// the offset of its first block from server s.
    std::vector<std::int64_t> received_before;

    [[nodiscard]] std::size_t index(int s, int d, int gpu) const noexcept {
        return (static_cast<std::size_t>(s) * static_cast<std::size_t>(servers) + static_cast<std::size_t>(d)) *
                   static_cast<std::size_t>(gpus_per_server) +
               static_cast<std::size_t>(gpu);
    }
};

namespace detail {
/// Fills the prefix sums of `out` from its `sent` and `received`. O(S^2 G).
inline void fill_prefixes(traffic_summary& out) {
    const auto us = static_cast<std::size_t>(out.servers);
    const auto ug = static_cast<std::size_t>(out.gpus_per_server);
    out.sent_before.resize(out.sent.size());
    out.received_before.resize(out.received.size());
    for (std::size_t s = 0; s < us; ++s)
        for (std::size_t a = 0; a < ug; ++a) {
            std::int64_t at = 0;
            for (std::size_t d = 0; d < us; ++d) {
                out.sent_before[(s * us + d) * ug + a] = at;
                at += out.sent[(s * us + d) * ug + a];
            }
        }
    const std::size_t row = us * ug; // one source server's entries, (d, b)
    for (std::size_t k = 0; k < row; ++k) out.received_before[k] = 0;
    for (std::size_t s = 1; s < us; ++s)
        for (std::size_t k = 0; k < row; ++k)
            out.received_before[s * row + k] = out.received_before[(s - 1) * row + k] + out.received[(s - 1) * row + k];
}
} // namespace detail

/// Summarises the valid traffic matrix `m` (validated first: throws fast::invalid_argument
/// naming a bad entry). Reuses out's buffers. O(R^2), one pass over m.
inline void summarize(const traffic_matrix& m, const topology& topo, traffic_summary& out) {
    validate_traffic(m, topo);
    const auto us = static_cast<std::size_t>(topo.servers);
    const auto ug = static_cast<std::size_t>(topo.gpus_per_server);
    const std::size_t r = us * ug;
    out.servers = topo.servers;
    out.gpus_per_server = topo.gpus_per_server;
    out.sent.resize(us * us * ug);
    out.received.resize(us * us * ug);
    const std::int64_t* data = m.data();
    for (std::size_t s = 0; s < us; ++s) {
        // received for source server s, (d, b) = column d * G + b: the sum of s's G rows.
        std::int64_t* received = out.received.data() + s * r;
        for (std::size_t j = 0; j < r; ++j) received[j] = 0;
        for (std::size_t a = 0; a < ug; ++a) {
            const std::int64_t* row = data + (s * ug + a) * r;
            for (std::size_t j = 0; j < r; ++j) received[j] += row[j];
            for (std::size_t d = 0; d < us; ++d) {
                std::int64_t n = 0;
                for (std::size_t b = 0; b < ug; ++b) n += row[d * ug + b];
                out.sent[(s * us + d) * ug + a] = n;
            }
        }
    }
    detail::fill_prefixes(out);
}

/// The summary of `m` as a new object. O(R^2).
[[nodiscard]] inline traffic_summary summarize(const traffic_matrix& m, const topology& topo) {
    traffic_summary out;
    summarize(m, topo, out);
    return out;
}

} // namespace fast
