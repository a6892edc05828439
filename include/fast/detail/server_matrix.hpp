#pragma once
// The server matrix (the planner's stage 1). GPU i of server s sends only to GPU i of server d
// (rail-aligned), so the G rails are G independent one-to-one fabrics between servers and what
// crosses scale-out is decided per server pair: from the traffic summary, the bytes each pair
// sends in all, what each GPU sends and receives across servers (how unevenly the ramps must
// allow for), and for the paper's layout each rail's balanced share of every pair. O(S^2 G).

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "../counts.hpp"
#include "../traffic_summary.hpp"
#include "balancing.hpp"
#include "checked.hpp"

namespace fast::detail {

/// Whether server_traffic also holds the balanced shares (the exact and bottleneck policies'
/// rails carry equal shares; rail packing gives rails what its schedule says).
enum class rail_shares { skip, compute };

/// What crosses between servers. Pairs are s * S + d; (pair, rail) entries (s * S + d) * G + i.
struct server_traffic {
    std::vector<std::int64_t> pair;      ///< S x S: what s sends d in all (tile (s, d)'s sum); diagonal 0
    std::vector<std::int64_t> gpu_out;   ///< per GPU: its inter-server bytes sent
    std::vector<std::int64_t> gpu_in;    ///< per GPU: its inter-server bytes received
    std::vector<std::int64_t> share;     ///< with shares, per (pair, rail): the rail's balanced share
    std::vector<std::int64_t> server;    ///< with shares, S x S: ceil(pair / G), the per-GPU server matrix
    std::vector<std::uint32_t> own_rank; // balanced_shares' workspace
};

/// Fills `out` from the summary `sum` (buffers reused). O(S^2 G).
inline void summarize_servers(const traffic_summary& sum, rail_shares shares, server_traffic& out) {
    const auto us = static_cast<std::size_t>(sum.servers);
    const auto ug = static_cast<std::size_t>(sum.gpus_per_server);
    const bool with_shares = shares == rail_shares::compute;
    if (with_shares) {
        out.share.assign(us * us * ug, 0);
        out.server.assign(us * us, 0);
    }
    out.pair.assign(us * us, 0);
    out.gpu_out.assign(us * ug, 0);
    out.gpu_in.assign(us * ug, 0);
    out.own_rank.resize(ug);
    for (std::size_t s = 0; s < us; ++s)
        for (std::size_t d = 0; d < us; ++d) {
            if (s == d) continue;
            const std::size_t at = (s * us + d) * ug;
            const std::int64_t* sent = sum.sent.data() + at;
            const std::int64_t* received = sum.received.data() + at;
            std::int64_t total = 0;
            for (std::size_t a = 0; a < ug; ++a) {
                total += sent[a];
                out.gpu_out[s * ug + a] += sent[a];
                out.gpu_in[d * ug + a] += received[a];
            }
            if (with_shares) {
                balanced_shares(total, std::span<const std::int64_t>(sent, ug),
                                std::span<std::int64_t>(out.share.data() + at, ug), out.own_rank);
                out.server[s * us + d] = ceil_div(total, static_cast<std::int64_t>(ug));
            }
            out.pair[s * us + d] = total;
        }
}

/// Fills the pair matrix and the per-GPU bytes across servers of `out` from the shared counts
/// (what rail packing uses; no shares). O(S^2 + R).
inline void servers_from_counts(const shared_counts& c, server_traffic& out) {
    out.pair.assign(c.pair.begin(), c.pair.end());
    out.gpu_out.resize(c.gpus.size());
    out.gpu_in.resize(c.gpus.size());
    for (std::size_t k = 0; k < c.gpus.size(); ++k) {
        out.gpu_out[k] = c.gpus[k].out;
        out.gpu_in[k] = c.gpus[k].in;
    }
}

/// The largest line sum (row or column) of the n x n row-major matrix `a`, whose total fits
/// in int64. O(n^2).
[[nodiscard]] inline std::int64_t largest_line(std::span<const std::int64_t> a, std::size_t n) noexcept {
    std::int64_t best = 0;
    for (std::size_t k = 0; k < n; ++k) {
        std::int64_t row = 0;
        std::int64_t col = 0;
        for (std::size_t j = 0; j < n; ++j) {
            row += a[k * n + j];
            col += a[j * n + k];
        }
        best = std::max({best, row, col});
    }
    return best;
}

/// The largest share of its server's inter-server bytes that one GPU has in `bytes` (per GPU,
/// `servers` servers of `g`), at least 1 / g. O(S G).
[[nodiscard]] inline double busiest_share(std::span<const std::int64_t> bytes, int servers, int g) noexcept {
    const auto us = static_cast<std::size_t>(servers);
    const auto ug = static_cast<std::size_t>(g);
    double f = 1.0 / static_cast<double>(ug);
    for (std::size_t s = 0; s < us; ++s) {
        std::int64_t all = 0;
        for (std::size_t a = 0; a < ug; ++a) all += bytes[s * ug + a];
        if (all > 0)
            for (std::size_t a = 0; a < ug; ++a)
                f = std::max(f, static_cast<double>(bytes[s * ug + a]) / static_cast<double>(all));
    }
    return f;
}

} // namespace fast::detail
