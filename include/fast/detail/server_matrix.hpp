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
    out.own_rank.resize(ug);
    for (std::size_t s = 0; s < us; ++s)
        for (std::size_t d = 0; d < us; ++d) {
            if (s == d) continue;
            const std::size_t at = (s * us + d) * ug;
            const std::int64_t* sent = sum.sent.data() + at;
            std::int64_t total = 0;
            for (std::size_t a = 0; a < ug; ++a) total += sent[a];
            if (with_shares) {
                balanced_shares(total, std::span<const std::int64_t>(sent, ug),
                                std::span<std::int64_t>(out.share.data() + at, ug), out.own_rank);
                out.server[s * us + d] = ceil_div(total, static_cast<std::int64_t>(ug));
            }
            out.pair[s * us + d] = total;
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

/// The busiest line of an n x n row-major matrix: its largest line sum (row or column) and the
/// most positive entries in one line. One pass in row order; `col_sum` and `col_count` are
/// workspaces. O(n^2).
struct line_summary {
    std::int64_t line = 0;
    std::int64_t entries = 0;
};

inline line_summary summarize_lines(std::span<const std::int64_t> a, std::size_t n, std::vector<std::int64_t>& col_sum,
                                    std::vector<std::int64_t>& col_count) {
    col_sum.assign(n, 0);
    col_count.assign(n, 0);
    line_summary out;
    for (std::size_t r = 0; r < n; ++r) {
        const std::int64_t* row = a.data() + r * n;
        std::int64_t sum = 0;
        std::int64_t count = 0;
        for (std::size_t c = 0; c < n; ++c) {
            sum += row[c];
            count += row[c] > 0;
            col_sum[c] += row[c];
            col_count[c] += row[c] > 0;
        }
        out.line = std::max(out.line, sum);
        out.entries = std::max(out.entries, count);
    }
    for (std::size_t c = 0; c < n; ++c) {
        out.line = std::max(out.line, col_sum[c]);
        out.entries = std::max(out.entries, col_count[c]);
    }
    return out;
}

/// The largest share of its server's bytes across servers that one GPU sends (`sending`) or
/// receives, from every GPU's totals (`servers` servers of `g`), at least 1 / g. O(R).
[[nodiscard]] inline double busiest_share(std::span<const gpu_totals> gpus, int servers, int g, bool sending) noexcept {
    const auto us = static_cast<std::size_t>(servers);
    const auto ug = static_cast<std::size_t>(g);
    auto bytes = [&](std::size_t k) { return sending ? gpus[k].out : gpus[k].in; };
    double f = 1.0 / static_cast<double>(ug);
    for (std::size_t s = 0; s < us; ++s) {
        std::int64_t all = 0;
        for (std::size_t a = 0; a < ug; ++a) all += bytes(s * ug + a);
        if (all > 0)
            for (std::size_t a = 0; a < ug; ++a)
                f = std::max(f, static_cast<double>(bytes(s * ug + a)) / static_cast<double>(all));
    }
    return f;
}

} // namespace fast::detail
