#pragma once
/// \file balance.hpp
/// Intra-server balancing: for each pair of servers (s, d), decide which GPU of s carries which
/// bytes of the tile to d over its NIC, so that the G NICs carry equal shares, and record the
/// provenance of every byte range (origin GPU, final GPU, offset in the block). How the bytes
/// are chosen (cheap moves first, stream order) is detail/balancing.hpp's assign_tile, which
/// the planner runs with the capacities of its schedule instead of equal shares.
///
///     const fast::balanced_traffic b = fast::balance(m, topo);
///     for (const fast::piece& p : b.carried(0, 1, 2)) ... // what GPU 2 of server 0 carries to server 1

#include <cstdint>
#include <span>
#include <vector>

#include "detail/balancing.hpp"
#include "detail/server_matrix.hpp"
#include "piece.hpp"
#include "traffic.hpp"
#include "traffic_summary.hpp"

namespace fast {

/// The result of balancing: what every GPU carries to every other server, and from where.
struct balanced_traffic {
    int servers = 0;
    int gpus_per_server = 0;
    /// S x S: the most bytes any one GPU of s carries to d (ceil(tile total / G)); the diagonal
    /// is zero. This is the matrix the inter-server stages decompose.
    traffic_matrix server_matrix;
    /// pieces of rail i for pair (s, d): pieces[offsets[k], offsets[k + 1]) with
    /// k = (s * S + d) * G + i, in stream order.
    std::vector<std::size_t> offsets;
    std::vector<piece> pieces;

    [[nodiscard]] std::span<const piece> carried(int s, int d, int rail) const noexcept {
        const std::size_t k =
            (static_cast<std::size_t>(s) * static_cast<std::size_t>(servers) + static_cast<std::size_t>(d)) *
                static_cast<std::size_t>(gpus_per_server) +
            static_cast<std::size_t>(rail);
        return {pieces.data() + offsets[k], offsets[k + 1] - offsets[k]};
    }
    /// Bytes GPU `rail` of s carries to d.
    [[nodiscard]] std::int64_t carried_bytes(int s, int d, int rail) const noexcept {
        std::int64_t n = 0;
        for (const piece& p : carried(s, d, rail)) n += p.bytes;
        return n;
    }
};

/// Balances every inter-server tile of a traffic matrix (validated here): each GPU of s
/// carries floor(t / G) or ceil(t / G) of the t bytes s sends to d, rail-aligned (the shares of
/// detail/server_matrix.hpp), the bytes chosen by detail::assign_tile. O(R^2).
[[nodiscard]] inline balanced_traffic balance(const traffic_matrix& m, const topology& topo) {
    validate_traffic(m, topo);
    const int s_count = topo.servers;
    const int g = topo.gpus_per_server;
    const auto us = static_cast<std::size_t>(s_count);
    const auto ug = static_cast<std::size_t>(g);
    detail::server_traffic servers;
    detail::summarize_servers(summarize(m, topo), detail::rail_shares::compute, servers);
    balanced_traffic out;
    out.servers = s_count;
    out.gpus_per_server = g;
    out.server_matrix = traffic_matrix::Zero(s_count, s_count);
    out.offsets.assign(us * us * ug + 1, 0);
    detail::tile_workspace ws;
    const auto stride = static_cast<std::size_t>(m.cols());
    for (std::size_t s = 0; s < us; ++s)
        for (std::size_t d = 0; d < us; ++d) {
            const std::size_t pair = (s * us + d) * ug;
            if (s != d) {
                detail::assign_tile({m.data() + s * ug * stride + d * ug, stride, g,
                                     std::span<const std::int64_t>(servers.share).subspan(pair, ug)},
                                    ws);
                out.server_matrix(static_cast<Eigen::Index>(s), static_cast<Eigen::Index>(d)) =
                    servers.server[s * us + d];
            }
            for (std::size_t i = 0; i < ug; ++i) {
                if (s != d) {
                    const auto stream = ws.stream(i);
                    out.pieces.insert(out.pieces.end(), stream.begin(), stream.end());
                }
                out.offsets[pair + i + 1] = out.pieces.size();
            }
        }
    return out;
}

} // namespace fast
