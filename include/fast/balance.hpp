#pragma once
/// \file balance.hpp
/// Intra-server balancing: for each pair of servers (s, d), decide which GPU of s carries which
/// bytes of the tile to d over its NIC, so that the G NICs carry equal shares, and record the
/// provenance of every byte range (origin GPU, final GPU, offset in the block).
///
/// GPU i of s sends only to GPU i of d (rail-aligned). A byte of block (a -> b) carried by GPU i
/// moves over scale-up at most twice: a -> i before it leaves s (balancing) and i -> b after it
/// lands in d (redistribution). Assignment prefers moves that cost less: a rail first takes its
/// own diagonal block (no move), then its own bytes (no balancing) and bytes whose final GPU is
/// on it (no redistribution), in the order the caller prefers.

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "detail/checked.hpp"
#include "traffic.hpp"

namespace fast {

/// A contiguous run of block (origin -> final) of one tile, carried over one rail. `origin` and
/// `final` are local GPU indices in the source and destination servers; `offset` is the byte
/// offset inside the block.
struct piece {
    std::int64_t offset = 0;
    std::int64_t bytes = 0;
    std::int32_t origin = 0;
    std::int32_t final = 0;

    friend bool operator==(const piece&, const piece&) = default;
};

namespace detail {

/// Position of a piece in a rail's stream for its server pair: own bytes that need
/// redistribution first (they need no balancing, so the first stage can start at once), then
/// bytes that need both moves, then bytes already on their final rail, and the rail's own
/// diagonal block last (the last stage then needs little redistribution, which would be
/// exposed). A stream without own bytes of the first kind (a rail that carries bytes for its
/// own hot GPU) has its diagonal block first instead: it needs no balancing either, and the
/// stream's end already needs no redistribution. Bytes that need redistribution go hottest
/// final GPU first (`heat`: how much each final GPU receives in all): a GPU that receives far
/// more than its share needs all the time the big middle stages give to take its bytes over
/// scale-up.
[[nodiscard]] constexpr int stream_rank(const piece& p, int rail, bool diagonal = false) noexcept {
    const bool own = p.origin == rail;
    const bool lands = p.final == rail;
    return own ? (lands ? (diagonal ? 0 : 4) : 1) : (lands ? 3 : 2);
}

/// Whether a rail's stream `pieces` puts its diagonal block first (see stream_rank).
template <class Pieces>
[[nodiscard]] bool diagonal_first(const Pieces& pieces, int rail) noexcept {
    for (const piece& p : pieces)
        if (stream_rank(p, rail) == 1) return false;
    return true;
}

[[nodiscard]] inline bool stream_before(const piece& x, const piece& y, int rail,
                                        std::span<const std::int64_t> heat = {},
                                        bool diagonal = false) noexcept {
    const int rx = stream_rank(x, rail, diagonal);
    const int ry = stream_rank(y, rail, diagonal);
    if (rx != ry) return rx < ry;
    if ((rx == 1 || rx == 2) && !heat.empty() && x.final != y.final) {
        const std::int64_t hx = heat[static_cast<std::size_t>(x.final)];
        const std::int64_t hy = heat[static_cast<std::size_t>(y.final)];
        if (hx != hy) return hx > hy;
        return x.final < y.final;
    }
    if (x.origin != y.origin) return x.origin < y.origin;
    if (x.final != y.final) return x.final < y.final;
    return x.offset < y.offset;
}

/// Position of each of `key`'s entries in descending order, ties by index: rank[i] counts the
/// entries ordered before entry i. G is small: counting needs no order buffer and no
/// comparator. O(G^2).
inline void descending_ranks(std::span<const std::int64_t> key, std::span<std::uint32_t> rank) noexcept {
    const std::size_t g = key.size();
    for (std::size_t i = 0; i < g; ++i) {
        std::uint32_t before = 0;
        for (std::size_t j = 0; j < g; ++j)
            before += static_cast<std::uint32_t>(key[j] > key[i]) + static_cast<std::uint32_t>(key[j] == key[i] && j < i);
        rank[i] = before;
    }
}

/// Shares of `total` bytes over G rails: each gets floor(total / G) or one more, the extra bytes
/// going to the GPUs that hold the most of their own (they then move less; ties by index). `own`
/// has G entries.
inline void balanced_shares(std::int64_t total, std::span<const std::int64_t> own,
                            std::span<std::int64_t> share, std::span<std::uint32_t> rank) {
    const auto g = static_cast<std::int64_t>(own.size());
    const std::int64_t extra = total % g;
    if (extra == 0) {
        std::fill(share.begin(), share.end(), total / g);
        return;
    }
    descending_ranks(own, rank);
    for (std::size_t i = 0; i < own.size(); ++i) share[i] = total / g + static_cast<std::int64_t>(rank[i] < extra);
}

/// Which cheap move a rail prefers after its own diagonal block.
enum class rail_preference {
    own_first,     ///< keep its own bytes (least balancing: the paper's up-front step is exposed)
    landing_first, ///< bytes whose final GPU is on the rail (least redistribution)
};

/// Buffers of assign_tile, reused across tiles, and its result: rail i's pieces in stream order
/// are stream(i).
struct tile_workspace {
    [[nodiscard]] std::span<const piece> stream(std::size_t rail) const noexcept {
        return {streams.data() + begin[rail], begin[rail + 1] - begin[rail]};
    }

    static constexpr std::uint32_t none = UINT32_MAX;
    void resize(std::size_t g) {
        if (left.size() == g * g) return;
        left.resize(g * g);
        last_piece.assign(g * g, none);
        room.resize(g);
        cursor.resize(g * 4);
        begin.resize(g + 1);
        by_heat.resize(g);
        // A take either empties a block or fills a rail.
        taken.resize(g * g + g);
        streams.resize(g * g + g);
    }
    // A piece as taken: its rail, and the piece of the same block taken before it.
    struct take {
        piece p;
        std::uint32_t rail;
        std::uint32_t previous;
    };
    std::vector<std::int64_t> left;        // G x G: bytes of each block not yet assigned
    std::vector<std::int64_t> room;        // G: bytes each rail can still take
    std::vector<std::uint32_t> last_piece; // G x G: the block's last piece taken (none: none yet)
    std::vector<take> taken;               // in the order taken
    std::vector<std::uint32_t> cursor;     // G x 4: pieces of each rail by kind, then where each kind goes
    std::vector<std::uint32_t> begin;      // G + 1
    std::vector<int> by_heat;              // final GPUs, hottest first
    std::vector<piece> streams;
};

/// Assigns the bytes of a G x G tile (block (a, b) at tile[a * stride + b]) to G rails with
/// capacities `capacity` (summing to the tile total); ws.stream(rail) is then the rail's pieces
/// in stream order: stream_before's order, with the final GPUs' heat given as their positions
/// `heat_rank` (descending_ranks of the heat; empty: no heat). Every byte is assigned exactly
/// once, and a rail gets at most one piece of a block. A rail with a `head` (bytes its stream sends before any step
/// could gather for it; empty: none) first covers it with bytes of its own GPU, as far as they
/// go: its diagonal block, which its stream then puts first, and whole own blocks, before
/// `preference` applies. O(G^2).
///
/// Greedy, cheap moves first: the diagonal block, the head, then the rail's own bytes and the
/// bytes landing on its GPU in the order of `preference`, then the rest fills the rails with
/// room in order. Stream order then needs no sort: within each kind of piece it does not depend
/// on the rail (own bytes by final heat, bytes that need both moves by final heat then origin,
/// bytes landing on the rail by origin), so one walk over the blocks in (final heat, origin)
/// order (without heat: (origin, final)) deals every piece to its rail's segment of its kind.
inline void assign_tile(const std::int64_t* tile, std::size_t stride, int g, std::span<const std::int64_t> capacity,
                        tile_workspace& ws, std::span<const std::uint32_t> heat_rank = {},
                        rail_preference preference = rail_preference::own_first,
                        std::span<const std::int64_t> head = {}) {
    const auto ug = static_cast<std::size_t>(g);
    ws.resize(ug);
    std::int64_t* left = ws.left.data();
    std::int64_t* room = ws.room.data();
    std::uint32_t* last = ws.last_piece.data();
    std::uint32_t* cursor = ws.cursor.data();
    // Plain loops: memcpy's size dispatch mispredicts on these short, varying lengths.
    for (std::size_t a = 0; a < ug; ++a)
        for (std::size_t b = 0; b < ug; ++b) left[a * ug + b] = tile[a * stride + b];
    for (std::size_t i = 0; i < ug; ++i) room[i] = capacity[i];
    std::fill(cursor, cursor + ug * 4, 0U);
    // Kinds of pieces, in stream order: 0 own bytes that need redistribution, 1 bytes that need
    // both moves, 2 bytes landing on the rail, 3 the diagonal block (first or last).
    const auto kind = [](std::size_t rail, std::size_t a, std::size_t b) -> std::size_t {
        return a == rail ? (b == rail ? 3 : 0) : (b == rail ? 2 : 1);
    };
    // The lambdas capture sizes and pointers by value: captured by reference, a size_t would
    // live in memory, and every store to the int64 arrays (which may alias it) would reload it.
    tile_workspace::take* const pieces = ws.taken.data();
    std::uint32_t taken = 0;
    auto take = [=, &taken](std::size_t rail, std::size_t a, std::size_t b) {
        const std::size_t k = a * ug + b;
        const std::int64_t n = std::min(left[k], room[rail]);
        if (n <= 0) return;
        // Blocks are taken from their start: what is assigned already is the offset.
        pieces[taken] = {piece{tile[a * stride + b] - left[k], n, static_cast<std::int32_t>(a),
                                 static_cast<std::int32_t>(b)},
                           static_cast<std::uint32_t>(rail), last[k]};
        last[k] = taken++;
        left[k] -= n;
        room[rail] -= n;
        ++cursor[rail * 4 + kind(rail, a, b)];
    };
    for (std::size_t i = 0; i < ug; ++i)
        if (room[i] > 0) take(i, i, i);
    // A head is covered by the diagonal block and then whole own blocks (a rail has at most one
    // piece of a block), which its stream puts first.
    if (!head.empty())
        for (std::size_t i = 0; i < ug; ++i)
            for (std::size_t b = 0; b < ug && room[i] > 0 && capacity[i] - room[i] < head[i]; ++b)
                if (b != i) take(i, i, b);
    auto take_own = [=, &take] {
        for (std::size_t i = 0; i < ug; ++i)
            for (std::size_t b = 0; b < ug && room[i] > 0; ++b)
                if (b != i) take(i, i, b);
    };
    auto take_landing = [=, &take] {
        for (std::size_t i = 0; i < ug; ++i)
            for (std::size_t a = 0; a < ug && room[i] > 0; ++a)
                if (a != i) take(i, a, i);
    };
    if (preference == rail_preference::own_first) {
        take_own();
        take_landing();
    } else {
        take_landing();
        take_own();
    }
    // The rest fills the rails with room, in order.
    std::size_t rail = 0;
    for (std::size_t k = 0; k < ug * ug; ++k) {
        while (left[k] > 0) {
            while (room[rail] == 0) ++rail;
            take(rail, k / ug, k % ug);
        }
    }
    // Each rail's segments; the diagonal block goes first when the rail has no own bytes that
    // need redistribution or has a head (stream_rank), else last. The counts become cursors.
    std::uint32_t at = 0;
    for (std::size_t i = 0; i < ug; ++i) {
        std::uint32_t* c = cursor + i * 4;
        ws.begin[i] = at;
        const std::uint32_t diagonal = c[3];
        const bool diagonal_first = c[0] == 0 || (!head.empty() && head[i] > 0);
        c[3] = diagonal_first ? at : at + c[0] + c[1] + c[2];
        if (diagonal_first) at += diagonal;
        for (std::size_t k = 0; k < 3; ++k) at += std::exchange(c[k], at);
        if (!diagonal_first) at += diagonal;
    }
    ws.begin[ug] = at;
    int* by_heat = ws.by_heat.data();
    for (std::size_t f = 0; f < ug; ++f) by_heat[f] = static_cast<int>(f);
    if (!heat_rank.empty())
        for (std::size_t f = 0; f < ug; ++f) by_heat[heat_rank[f]] = static_cast<int>(f);
    piece* const streams = ws.streams.data();
    auto deal = [=](std::size_t a, std::size_t b) {
        std::uint32_t& p = last[a * ug + b]; // ends as none, ready for the next tile
        for (; p != tile_workspace::none; p = pieces[p].previous) {
            const tile_workspace::take& t = pieces[p];
            streams[cursor[t.rail * 4 + kind(t.rail, a, b)]++] = t.p;
        }
    };
    if (heat_rank.empty()) {
        for (std::size_t a = 0; a < ug; ++a)
            for (std::size_t b = 0; b < ug; ++b) deal(a, b);
    } else {
        for (std::size_t k = 0; k < ug; ++k)
            for (std::size_t a = 0; a < ug; ++a) deal(a, static_cast<std::size_t>(by_heat[k]));
    }
}

} // namespace detail

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
        const std::size_t k = (static_cast<std::size_t>(s) * static_cast<std::size_t>(servers) +
                               static_cast<std::size_t>(d)) * static_cast<std::size_t>(gpus_per_server) +
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

/// Balances every inter-server tile of a validated traffic matrix: each GPU of s carries
/// floor(t / G) or ceil(t / G) of the t bytes s sends to d, rail-aligned. O(R^2 log G).
[[nodiscard]] inline balanced_traffic balance(const traffic_matrix& m, const topology& topo) {
    validate_traffic(m, topo);
    const int s_count = topo.servers;
    const int g = topo.gpus_per_server;
    const auto ug = static_cast<std::size_t>(g);
    balanced_traffic out;
    out.servers = s_count;
    out.gpus_per_server = g;
    out.server_matrix = traffic_matrix::Zero(s_count, s_count);
    out.offsets.assign(static_cast<std::size_t>(s_count) * static_cast<std::size_t>(s_count) * ug + 1, 0);
    std::vector<std::int64_t> own(ug);
    std::vector<std::int64_t> share(ug);
    std::vector<std::uint32_t> rank(ug);
    detail::tile_workspace ws;
    const std::int64_t* data = m.data();
    const auto stride = static_cast<std::size_t>(m.cols());
    for (int s = 0; s < s_count; ++s) {
        for (int d = 0; d < s_count; ++d) {
            const std::size_t base = (static_cast<std::size_t>(s) * static_cast<std::size_t>(s_count) +
                                      static_cast<std::size_t>(d)) * ug;
            if (s != d) {
                const std::int64_t* tile = data + static_cast<std::size_t>(s) * ug * stride +
                                           static_cast<std::size_t>(d) * ug;
                std::int64_t total = 0;
                for (std::size_t a = 0; a < ug; ++a) {
                    own[a] = 0;
                    for (std::size_t b = 0; b < ug; ++b) own[a] += tile[a * stride + b];
                    total += own[a];
                }
                detail::balanced_shares(total, own, share, rank);
                detail::assign_tile(tile, stride, g, std::span<const std::int64_t>(share), ws);
                out.server_matrix(s, d) = detail::ceil_div(total, g);
                for (std::size_t i = 0; i < ug; ++i) {
                    const auto stream = ws.stream(i);
                    out.pieces.insert(out.pieces.end(), stream.begin(), stream.end());
                    out.offsets[base + i + 1] = out.pieces.size();
                }
            } else {
                for (std::size_t i = 0; i < ug; ++i) out.offsets[base + i + 1] = out.pieces.size();
            }
        }
    }
    return out;
}

} // namespace fast
