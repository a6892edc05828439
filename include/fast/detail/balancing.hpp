#pragma once
// Balancing (the planner's stage 4): for one server pair's tile, which rail carries which bytes
// (assign_tile), in stream order. GPU i of server s sends only to GPU i of server d
// (rail-aligned), so a byte of block (a -> b) carried by rail i moves over scale-up at most
// twice: a -> i before it leaves s (a gather) and i -> b after it lands in d (a
// redistribution). assign_tile prefers the cheap moves: a rail first takes its own diagonal
// block (no move), then its own bytes (no gather) and bytes whose final GPU is on it (no
// redistribution), in the order the caller prefers.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "../piece.hpp"

namespace fast::detail {

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

    void resize(std::size_t g) {
        if (left.size() == g * g) return;
        words = (g + 63) / 64;
        left.resize(g * g);
        own.resize(g * g);
        own_at.resize(g * g);
        landing.resize(g * g);
        landing_at.resize(g * g);
        rest_at.resize(g * g);
        room.resize(g);
        diagonal.resize(g);
        span.resize(g * 3);
        own_mask.resize(g * words);
        landing_mask.resize(g * words);
        begin.resize(g + 1);
        by_heat.resize(g);
        // A rail has at most one piece of a block, and a take either empties a block or fills a
        // rail; one more slot takes the write past the end that dealing does without a branch.
        streams.resize(g * g + g + 1);
    }
    std::size_t words = 0;                 // 64-bit words of a mask of G bits
    std::vector<std::int64_t> left;       // G x G: bytes of each block not yet assigned
    std::vector<std::int64_t> own;        // G x G: bytes of block (a, b) its origin's rail a takes
    std::vector<std::int64_t> own_at;     // G x G: their offset in the block
    std::vector<std::int64_t> landing;    // G x G: bytes of block (a, b) its final's rail b takes
    std::vector<std::int64_t> landing_at; // G x G: their offset in the block
    std::vector<std::int64_t> rest_at;    // G x G: where the block's rest starts in all blocks' rests
    std::vector<std::int64_t> room;       // G: bytes each rail can still take
    std::vector<std::int64_t> diagonal;   // G: bytes of its diagonal block each rail takes
    std::vector<std::int64_t> span;       // G x 3: each rail's part of the rests (see assign_tile)
    std::vector<std::uint64_t> own_mask;     // G masks: the heat positions of each rail's own pieces' finals
    std::vector<std::uint64_t> landing_mask; // G masks: the origins of the pieces landing on each rail
    std::vector<std::uint32_t> begin;     // G + 1
    std::vector<std::size_t> by_heat;     // final GPUs, hottest first
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
/// room in order. After the cheap moves a rail with room has none of its own bytes and none
/// landing on it left, so each kind of piece comes from one step: own bytes (a rail's own blocks
/// by final heat), bytes landing on the rail (by origin) and the rest (the bytes that need both
/// moves: by final heat, then origin). Each rail's stream is then written in order, a kind at a
/// time, with no sort and no record of the takes.
inline void assign_tile(const std::int64_t* tile, std::size_t stride, int g, std::span<const std::int64_t> capacity,
                        tile_workspace& ws, std::span<const std::uint32_t> heat_rank = {},
                        rail_preference preference = rail_preference::own_first,
                        std::span<const std::int64_t> head = {}) {
    const auto ug = static_cast<std::size_t>(g);
    ws.resize(ug);
    std::int64_t* left = ws.left.data();
    std::int64_t* room = ws.room.data();
    std::int64_t* own = ws.own.data();
    std::int64_t* own_at = ws.own_at.data();
    std::int64_t* landing = ws.landing.data();
    std::int64_t* landing_at = ws.landing_at.data();
    // Plain loops: memcpy's size dispatch mispredicts on these short, varying lengths.
    for (std::size_t a = 0; a < ug; ++a)
        for (std::size_t b = 0; b < ug; ++b) left[a * ug + b] = tile[a * stride + b];
    // A rail's own and landing pieces are marked in masks, in their stream order, so that
    // writing the streams visits only the blocks taken; it clears them for the next tile.
    const std::size_t words = ws.words;
    std::uint64_t* own_mask = ws.own_mask.data();
    std::uint64_t* landing_mask = ws.landing_mask.data();
    for (std::size_t i = 0; i < ug; ++i) {
        const std::int64_t n = std::min(tile[i * stride + i], capacity[i]);
        ws.diagonal[i] = n;
        left[i * ug + i] -= n;
        room[i] = capacity[i] - n;
    }
    // Blocks are taken from their start: what is assigned already is the offset. The lambdas
    // capture sizes and pointers by value: captured by reference, a size_t would live in
    // memory, and every store to the int64 arrays (which may alias it) would reload it.
    auto take_own = [=](std::size_t i, std::size_t b) {
        const std::size_t k = i * ug + b;
        const std::int64_t n = std::min(left[k], room[i]);
        if (n <= 0) return;
        const std::size_t h = heat_rank.empty() ? b : heat_rank[b];
        own_mask[i * words + h / 64] |= std::uint64_t{1} << (h % 64);
        own[k] = n;
        own_at[k] = tile[i * stride + b] - left[k];
        left[k] -= n;
        room[i] -= n;
    };
    // A head is covered by the diagonal block and then whole own blocks (a rail has at most one
    // piece of a block), which its stream puts first.
    if (!head.empty())
        for (std::size_t i = 0; i < ug; ++i)
            for (std::size_t b = 0; b < ug && room[i] > 0 && capacity[i] - room[i] < head[i]; ++b)
                if (b != i) take_own(i, b);
    auto take_owns = [=] {
        for (std::size_t i = 0; i < ug; ++i)
            for (std::size_t b = 0; b < ug && room[i] > 0; ++b)
                if (b != i) take_own(i, b);
    };
    auto take_landings = [=] {
        for (std::size_t i = 0; i < ug; ++i)
            for (std::size_t a = 0; a < ug && room[i] > 0; ++a) {
                const std::size_t k = a * ug + i;
                const std::int64_t n = std::min(left[k], room[i]);
                if (a == i || n <= 0) continue;
                landing_mask[i * words + a / 64] |= std::uint64_t{1} << (a % 64);
                landing[k] = n;
                landing_at[k] = tile[a * stride + i] - left[k];
                left[k] -= n;
                room[i] -= n;
            }
    };
    if (preference == rail_preference::own_first) {
        take_owns();
        take_landings();
    } else {
        take_landings();
        take_owns();
    }
    // The rest fills the rails with room in order: lay all blocks' rests end to end (rest_at)
    // and each rail with room takes the next room[i] bytes of it.
    std::int64_t* rest_at = ws.rest_at.data();
    std::int64_t at = 0;
    for (std::size_t k = 0; k < ug * ug; ++k) {
        rest_at[k] = at;
        at += left[k];
    }
    // rail i's span starts at span[i * 3] and meets rows span[i * 3 + 1] .. span[i * 3 + 2].
    std::int64_t* span = ws.span.data();
    at = 0;
    std::size_t row = 0;
    const auto row_end = [=](std::size_t a) { return a + 1 < ug ? rest_at[(a + 1) * ug] : rest_at[ug * ug - 1] + left[ug * ug - 1]; };
    for (std::size_t i = 0; i < ug; ++i) {
        if (room[i] == 0) continue;
        while (row + 1 < ug && row_end(row) <= at) ++row;
        span[i * 3] = at;
        span[i * 3 + 1] = static_cast<std::int64_t>(row);
        at += room[i];
        while (row + 1 < ug && row_end(row) < at) ++row;
        span[i * 3 + 2] = static_cast<std::int64_t>(row);
    }
    std::size_t* by_heat = ws.by_heat.data();
    for (std::size_t f = 0; f < ug; ++f) by_heat[f] = f;
    if (!heat_rank.empty())
        for (std::size_t f = 0; f < ug; ++f) by_heat[heat_rank[f]] = f;
    // Each rail's stream: pieces are written unconditionally and kept when not empty.
    piece* const streams = ws.streams.data();
    std::uint32_t end = 0;
    const auto put = [=, &end](std::int64_t offset, std::int64_t n, std::size_t a, std::size_t b) {
        streams[end] = piece{offset, n, static_cast<std::int32_t>(a), static_cast<std::int32_t>(b)};
        end += static_cast<std::uint32_t>(n > 0);
    };
    for (std::size_t i = 0; i < ug; ++i) {
        ws.begin[i] = end;
        // The diagonal block goes first when the rail has no own bytes that need
        // redistribution or has a head (stream_rank), else last.
        bool diagonal_pending = true;
        if (!head.empty() && head[i] > 0) {
            put(0, ws.diagonal[i], i, i);
            diagonal_pending = false;
        }
        for (std::size_t w = 0; w < words; ++w)
            for (std::uint64_t m = std::exchange(own_mask[i * words + w], 0); m != 0; m &= m - 1) {
                const std::size_t b = by_heat[w * 64 + static_cast<std::size_t>(std::countr_zero(m))];
                put(own_at[i * ug + b], own[i * ug + b], i, b);
            }
        if (diagonal_pending && end == ws.begin[i]) {
            put(0, ws.diagonal[i], i, i);
            diagonal_pending = false;
        }
        if (room[i] > 0) {
            const std::int64_t from = span[i * 3];
            const std::int64_t to = from + room[i];
            const auto first = static_cast<std::size_t>(span[i * 3 + 1]);
            const auto final_row = static_cast<std::size_t>(span[i * 3 + 2]);
            // The part of block (a, b)'s rest in the span; blocks outside it give none.
            const auto rest = [=, &put](std::size_t a, std::size_t b) {
                const std::size_t r = a * ug + b;
                const std::int64_t lo = std::max(rest_at[r], from);
                const std::int64_t hi = std::min(rest_at[r] + left[r], to);
                put(tile[a * stride + b] - left[r] + (lo - rest_at[r]), hi - lo, a, b);
            };
            if (heat_rank.empty()) {
                for (std::size_t a = first; a <= final_row; ++a)
                    for (std::size_t b = 0; b < ug; ++b) rest(a, b);
            } else {
                for (std::size_t h = 0; h < ug; ++h)
                    for (std::size_t a = first; a <= final_row; ++a) rest(a, by_heat[h]);
            }
        }
        for (std::size_t w = 0; w < words; ++w)
            for (std::uint64_t m = std::exchange(landing_mask[i * words + w], 0); m != 0; m &= m - 1) {
                const std::size_t a = w * 64 + static_cast<std::size_t>(std::countr_zero(m));
                put(landing_at[a * ug + i], landing[a * ug + i], a, i);
            }
        if (diagonal_pending) put(0, ws.diagonal[i], i, i);
    }
    ws.begin[ug] = end;
}

} // namespace fast::detail
