#pragma once
/// \file counts.hpp
/// What a rank knows of a call's traffic when a runtime cannot afford to send every rank the
/// whole R x R matrix: the counts every rank holds alike (shared_counts: the server matrix and
/// per-GPU totals, O(S^2 + R) numbers) and those of the rank's own server (server_counts: its
/// GPUs' rows and columns of the matrix, which the server's ranks share over scale-up).
/// planner::make_rank(shared, own, rank) plans a rank's program from these alone; the schedule
/// depends on the shared counts only, so every rank reaches the same one.
///
///     fast::shared_counts all = fast::make_shared_counts(m, topo); // tools: from the matrix
///     fast::server_counts mine = fast::make_server_counts(m, topo, topo.server_of(rank));
///     const fast::rank_program& p = planner.make_rank(all, mine, rank);
///
/// A runtime builds the shared counts without the matrix: each server writes its part from its
/// own rows and columns (write_server_part) and sends it to the other servers, each of which
/// reads every part into its shared counts (read_server_part). make_shared_counts is the same
/// code over every server of a matrix.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "error.hpp"
#include "topology.hpp"
#include "traffic.hpp"
#include "traffic_summary.hpp"

namespace fast {

/// One GPU's bytes: across servers sent and received, within its server sent and received (a
/// copy to itself counts in both).
struct gpu_totals {
    std::int64_t out = 0;
    std::int64_t in = 0;
    std::int64_t up_sent = 0;
    std::int64_t up_received = 0;
    friend bool operator==(const gpu_totals&, const gpu_totals&) = default;
};

/// Whether shared counts carry each (server pair, GPU) sum, which the planner uses to choose
/// which GPU's rail carries the first and the last steps: 2 S^2 G numbers more for every rank,
/// 32 KiB at 16 x 8; larger clusters use an estimate from the per-GPU totals. On the Megatron
/// trace (4 x 8) the sums take the mean predicted / T_lb from 1.052 to 1.043.
[[nodiscard]] inline bool wants_rail_detail(const topology& topo) noexcept {
    return topo.servers <= 16;
}

/// The counts every rank holds alike.
struct shared_counts {
    int servers = 0;
    int gpus_per_server = 0;
    /// S x S, s * S + d: what server s sends server d in all; the diagonal is 0 (gpus has it).
    std::vector<std::int64_t> pair;
    /// Per rank.
    std::vector<gpu_totals> gpus;
    /// wants_rail_detail: (s * S + d) * G + a, what GPU a of s sends to the GPUs of d; and
    /// (s * S + d) * G + b, what GPU b of d receives from the GPUs of s. Else empty.
    std::vector<std::int64_t> rail_sent;
    std::vector<std::int64_t> rail_received;
    friend bool operator==(const shared_counts&, const shared_counts&) = default;
};

/// One server's rows and columns of the traffic matrix.
struct server_counts {
    int server = 0;
    /// G x R: rows[a * R + j], what GPU a of the server sends rank j (its sendcounts).
    std::vector<std::int64_t> rows;
    /// R x G: cols[i * G + b], what rank i sends GPU b of the server (its recvcounts).
    std::vector<std::int64_t> cols;
    friend bool operator==(const server_counts&, const server_counts&) = default;
};

/// Numbers in one server's part of the shared counts: its row of the server matrix (S), its
/// GPUs' totals (4 G) and, with rail detail, its (pair, GPU) sums as sender and receiver (2 S G).
[[nodiscard]] inline std::size_t server_part_size(const topology& topo) noexcept {
    const auto s = static_cast<std::size_t>(topo.servers);
    const auto g = static_cast<std::size_t>(topo.gpus_per_server);
    return s + 4 * g + (wants_rail_detail(topo) ? 2 * s * g : 0);
}

namespace detail {
inline std::int64_t add_counted(std::int64_t a, std::int64_t b, int server) {
    std::int64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum))
        throw invalid_argument("the bytes of server " + std::to_string(server) + " overflow int64");
    return sum;
}
} // namespace detail

/// Checks `own` against the topology: sizes, and no negative count (naming the first).
inline void validate_server_counts(const server_counts& own, const topology& topo) {
    const auto r = static_cast<std::size_t>(topo.ranks());
    const auto g = static_cast<std::size_t>(topo.gpus_per_server);
    if (own.server < 0 || own.server >= topo.servers)
        throw invalid_argument("server counts of server " + std::to_string(own.server) + ", not in 0 .. " +
                               std::to_string(topo.servers - 1));
    if (own.rows.size() != g * r || own.cols.size() != r * g)
        throw invalid_argument("server counts of server " + std::to_string(own.server) + " have " +
                               std::to_string(own.rows.size()) + " row and " + std::to_string(own.cols.size()) +
                               " column entries, expected " + std::to_string(g * r) + " each");
    // Or-ed signs first (the common case, all fine, costs a pass); then the first negative named.
    std::int64_t signs = 0;
    for (std::size_t k = 0; k < g * r; ++k) signs |= own.rows[k] | own.cols[k];
    if (signs >= 0) return;
    const int first = own.server * topo.gpus_per_server;
    for (std::size_t k = 0; k < g * r; ++k) {
        if (own.rows[k] < 0)
            throw invalid_argument(
                detail::entry_name(first + static_cast<Eigen::Index>(k / r), static_cast<Eigen::Index>(k % r)) + " = " +
                std::to_string(own.rows[k]) + " is negative");
        if (own.cols[k] < 0)
            throw invalid_argument(
                detail::entry_name(static_cast<Eigen::Index>(k / g), first + static_cast<Eigen::Index>(k % g)) + " = " +
                std::to_string(own.cols[k]) + " is negative");
    }
}

/// Server `own.server`'s part of the shared counts, from its rows and columns, into `out`
/// (server_part_size numbers). O(R G). Throws fast::invalid_argument if a sum overflows.
inline void write_server_part(const server_counts& own, const topology& topo, std::span<std::int64_t> out) {
    const auto us = static_cast<std::size_t>(topo.servers);
    const auto ug = static_cast<std::size_t>(topo.gpus_per_server);
    const auto r = us * ug;
    const auto x = static_cast<std::size_t>(own.server);
    const bool detail = wants_rail_detail(topo);
    std::fill(out.begin(), out.end(), 0);
    std::int64_t* row = out.data();          // S: what the server sends each server
    std::int64_t* totals = row + us;         // 4 G: out, in, up_sent, up_received per GPU
    std::int64_t* sent = totals + 4 * ug;    // detail, S G: (d, a)
    std::int64_t* received = sent + us * ug; // detail, S G: (s, b)
    for (std::size_t a = 0; a < ug; ++a)
        for (std::size_t d = 0; d < us; ++d) {
            std::int64_t n = 0;
            for (std::size_t b = 0; b < ug; ++b) n = detail::add_counted(n, own.rows[a * r + d * ug + b], own.server);
            std::int64_t& total = d == x ? totals[4 * a + 2] : totals[4 * a];
            total = detail::add_counted(total, n, own.server);
            if (d != x) row[d] = detail::add_counted(row[d], n, own.server);
            if (detail) sent[d * ug + a] = n;
        }
    for (std::size_t b = 0; b < ug; ++b)
        for (std::size_t s = 0; s < us; ++s) {
            std::int64_t n = 0;
            for (std::size_t a = 0; a < ug; ++a)
                n = detail::add_counted(n, own.cols[(s * ug + a) * ug + b], own.server);
            std::int64_t& total = s == x ? totals[4 * b + 3] : totals[4 * b + 1];
            total = detail::add_counted(total, n, own.server);
            if (detail) received[s * ug + b] = n;
        }
}

/// Reads server `s`'s part (write_server_part) into `out`, which start_shared_counts sized.
inline void read_server_part(int s, std::span<const std::int64_t> part, const topology& topo, shared_counts& out) {
    const auto us = static_cast<std::size_t>(topo.servers);
    const auto ug = static_cast<std::size_t>(topo.gpus_per_server);
    const auto x = static_cast<std::size_t>(s);
    const std::int64_t* row = part.data();
    const std::int64_t* totals = row + us;
    std::copy(row, row + us, out.pair.begin() + static_cast<std::ptrdiff_t>(x * us));
    for (std::size_t a = 0; a < ug; ++a)
        out.gpus[x * ug + a] = {totals[4 * a], totals[4 * a + 1], totals[4 * a + 2], totals[4 * a + 3]};
    if (out.rail_sent.empty()) return;
    const std::int64_t* sent = totals + 4 * ug;
    const std::int64_t* received = sent + us * ug;
    for (std::size_t d = 0; d < us; ++d)
        for (std::size_t a = 0; a < ug; ++a) {
            out.rail_sent[(x * us + d) * ug + a] = sent[d * ug + a];
            out.rail_received[(d * us + x) * ug + a] = received[d * ug + a];
        }
}

/// Sizes `out` for `topo` (every number then comes from read_server_part).
inline void start_shared_counts(const topology& topo, shared_counts& out) {
    const auto us = static_cast<std::size_t>(topo.servers);
    const auto ug = static_cast<std::size_t>(topo.gpus_per_server);
    out.servers = topo.servers;
    out.gpus_per_server = topo.gpus_per_server;
    out.pair.assign(us * us, 0);
    out.gpus.assign(us * ug, gpu_totals{});
    const std::size_t detail = wants_rail_detail(topo) ? us * us * ug : 0;
    out.rail_sent.assign(detail, 0);
    out.rail_received.assign(detail, 0);
}

/// Server `server`'s rows and columns of `m` into `out`. O(R G).
inline void fill_server_counts(const traffic_matrix& m, const topology& topo, int server, server_counts& out) {
    const auto r = static_cast<std::size_t>(topo.ranks());
    const auto g = static_cast<std::size_t>(topo.gpus_per_server);
    const auto first = static_cast<std::size_t>(server) * g;
    out.server = server;
    out.rows.resize(g * r);
    out.cols.resize(r * g);
    for (std::size_t a = 0; a < g; ++a)
        for (std::size_t j = 0; j < r; ++j) out.rows[a * r + j] = m.data()[(first + a) * r + j];
    for (std::size_t i = 0; i < r; ++i)
        for (std::size_t b = 0; b < g; ++b) out.cols[i * g + b] = m.data()[i * r + first + b];
}

[[nodiscard]] inline server_counts make_server_counts(const traffic_matrix& m, const topology& topo, int server) {
    validate_traffic(m, topo);
    if (server < 0 || server >= topo.servers)
        throw invalid_argument("server " + std::to_string(server) + " is not in 0 .. " +
                               std::to_string(topo.servers - 1));
    server_counts out;
    fill_server_counts(m, topo, server, out);
    return out;
}

/// The shared counts of the validated matrix `m`, as a runtime assembles them: every server's
/// part written and read. `own` and `part` are workspaces. O(R^2).
inline void fill_shared_counts(const traffic_matrix& m, const topology& topo, shared_counts& out, server_counts& own,
                               std::vector<std::int64_t>& part) {
    start_shared_counts(topo, out);
    part.resize(server_part_size(topo));
    for (int s = 0; s < topo.servers; ++s) {
        fill_server_counts(m, topo, s, own);
        write_server_part(own, topo, part);
        read_server_part(s, part, topo, out);
    }
}

[[nodiscard]] inline shared_counts make_shared_counts(const traffic_matrix& m, const topology& topo) {
    validate_traffic(m, topo);
    shared_counts out;
    server_counts own;
    std::vector<std::int64_t> part;
    fill_shared_counts(m, topo, out, own, part);
    return out;
}

/// The shared counts from a summary of the whole matrix (what make_shared_counts gives, without
/// a second pass over the matrix). O(S^2 G).
inline void fill_shared_counts(const traffic_summary& sum, const topology& topo, shared_counts& out) {
    start_shared_counts(topo, out);
    const auto us = static_cast<std::size_t>(topo.servers);
    const auto ug = static_cast<std::size_t>(topo.gpus_per_server);
    for (std::size_t s = 0; s < us; ++s)
        for (std::size_t d = 0; d < us; ++d)
            for (std::size_t a = 0; a < ug; ++a) {
                const std::size_t k = (s * us + d) * ug + a;
                gpu_totals& sender = out.gpus[s * ug + a];
                gpu_totals& receiver = out.gpus[d * ug + a];
                if (s == d) {
                    sender.up_sent += sum.sent[k];
                    receiver.up_received += sum.received[k];
                } else {
                    sender.out += sum.sent[k];
                    receiver.in += sum.received[k];
                    out.pair[s * us + d] += sum.sent[k];
                }
            }
    if (out.rail_sent.empty()) return;
    std::copy(sum.sent.begin(), sum.sent.end(), out.rail_sent.begin());
    std::copy(sum.received.begin(), sum.received.end(), out.rail_received.begin());
}

} // namespace fast
