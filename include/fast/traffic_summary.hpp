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

/// Summarises the traffic matrix `m`, which it validates (throws fast::invalid_argument naming
/// a bad entry, as validate_traffic). Reuses out's buffers. O(R^2): one pass over m, sums and
/// checks together (sums wrap until the check has passed: nothing is returned then).
inline void summarize(const traffic_matrix& m, const topology& topo, traffic_summary& out) {
    validate(topo);
    const auto r = static_cast<std::size_t>(topo.ranks());
    if (static_cast<std::size_t>(m.rows()) != r || static_cast<std::size_t>(m.cols()) != r) validate_traffic(m, topo);
    const auto us = static_cast<std::size_t>(topo.servers);
    const auto ug = static_cast<std::size_t>(topo.gpus_per_server);
    out.servers = topo.servers;
    out.gpus_per_server = topo.gpus_per_server;
    out.sent.resize(us * us * ug);
    out.received.resize(us * us * ug);
    const std::int64_t* data = m.data();
    // As detail::all_bytes_fit: signs or-ed, the total summed in 32-bit halves (exact for up to
    // 2^31 entries between carries: one row at a time).
    std::uint64_t signs = 0;
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    bool fits = true;
    for (std::size_t s = 0; s < us; ++s) {
        // received for source server s, (d, b) = column d * G + b: the sum of s's G rows.
        auto* received = reinterpret_cast<std::uint64_t*>(out.received.data() + s * r);
        for (std::size_t j = 0; j < r; ++j) received[j] = 0;
        for (std::size_t a = 0; a < ug; ++a) {
            const auto* row = reinterpret_cast<const std::uint64_t*>(data + (s * ug + a) * r);
            std::uint64_t row_high = 0;
            std::uint64_t row_low = 0;
            for (std::size_t j = 0; j < r; ++j) {
                const std::uint64_t x = row[j];
                received[j] += x;
                signs |= x;
                row_high += x >> 32;
                row_low += x & 0xffffffffu;
            }
            high += row_high + (row_low >> 32);
            low += row_low & 0xffffffffu;
            high += low >> 32;
            low &= 0xffffffffu;
            fits = fits && high < (std::uint64_t{1} << 31);
            for (std::size_t d = 0; d < us; ++d) {
                std::uint64_t n = 0;
                for (std::size_t b = 0; b < ug; ++b) n += row[d * ug + b];
                out.sent[(s * us + d) * ug + a] = static_cast<std::int64_t>(n);
            }
        }
    }
    if (!fits || (signs >> 63) != 0) validate_traffic(m, topo); // throws, naming the entry
    detail::fill_prefixes(out);
}

/// The summary of `m` as a new object. O(R^2).
[[nodiscard]] inline traffic_summary summarize(const traffic_matrix& m, const topology& topo) {
    traffic_summary out;
    summarize(m, topo, out);
    return out;
}

} // namespace fast
