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

/// Where a piece goes in a rail's stream for its server pair, in this order: own bytes that
/// need redistribution first (they need no balancing, so the first stage can start at once),
/// then bytes that need both moves, then bytes already on their final rail, and the rail's own
/// diagonal block last (the last stage then needs little redistribution, which would be
/// exposed). A stream without own bytes of the first kind (a rail that carries bytes for its
/// own hot GPU) has its diagonal block first instead: it needs no balancing either, and the
/// stream's end already needs no redistribution. Bytes that need redistribution go hottest
/// final GPU first (`heat`: how much each final GPU receives in all): a GPU that receives far
/// more than its share needs all the time the big middle stages give to take its bytes over
/// scale-up.
enum class stream_part {
    diagonal_first, ///< the rail's diagonal block, when it leads
    own,            ///< the rail's own GPU's bytes for other GPUs: no gather, a redistribution
    both_moves,     ///< other GPUs' bytes for other GPUs: a gather and a redistribution
    landing,        ///< other GPUs' bytes for the rail's GPU: a gather, no redistribution
    diagonal_last,  ///< the rail's diagonal block, when it ends the stream
};

[[nodiscard]] constexpr stream_part part_of(const piece& p, int rail, bool diagonal_leads = false) noexcept {
    const bool own = p.origin == rail;
    const bool lands = p.final == rail;
    if (own && lands) return diagonal_leads ? stream_part::diagonal_first : stream_part::diagonal_last;
    if (own) return stream_part::own;
    return lands ? stream_part::landing : stream_part::both_moves;
}

/// Whether a rail's stream `pieces` puts its diagonal block first (see stream_part).
template <class Pieces>
[[nodiscard]] bool diagonal_first(const Pieces& pieces, int rail) noexcept {
    for (const piece& p : pieces)
        if (part_of(p, rail) == stream_part::own) return false;
    return true;
}

/// Whether x goes before y in the stream of `rail` (stream_part, then hotter final GPUs first
/// among the bytes that need redistribution, then origin, final GPU and offset).
[[nodiscard]] inline bool stream_before(const piece& x, const piece& y, int rail,
                                        std::span<const std::int64_t> heat = {}, bool diagonal_leads = false) noexcept {
    const stream_part px = part_of(x, rail, diagonal_leads);
    const stream_part py = part_of(y, rail, diagonal_leads);
    if (px != py) return px < py;
    if ((px == stream_part::own || px == stream_part::both_moves) && !heat.empty() && x.final != y.final) {
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
            before +=
                static_cast<std::uint32_t>(key[j] > key[i]) + static_cast<std::uint32_t>(key[j] == key[i] && j < i);
        rank[i] = before;
    }
}

/// Shares of `total` bytes over G rails: each gets floor(total / G) or one more, the extra bytes
/// going to the GPUs that hold the most of their own (they then move less; ties by index). `own`
/// has G entries.
inline void balanced_shares(std::int64_t total, std::span<const std::int64_t> own, std::span<std::int64_t> share,
                            std::span<std::uint32_t> rank) {
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

/// What assign_tile assigns: a G x G tile (block (a, b) at tile[a * stride + b]) to G rails.
struct tile_request {
    const std::int64_t* tile = nullptr;
    std::size_t stride = 0;
    int gpus = 0;
    /// Per rail: the bytes it carries (summing to the tile's total).
    std::span<const std::int64_t> capacity;
    /// The final GPUs' heat as their positions (descending_ranks of the heat); empty: no heat.
    std::span<const std::uint32_t> heat_rank = {};
    rail_preference preference = rail_preference::own_first;
    /// Per rail: the bytes its stream sends before any step could gather for it; empty: none.
    std::span<const std::int64_t> head = {};
};

/// A rail's part of the tile's rests laid end to end: from byte `start`, over rows
/// first_row .. last_row.
struct rest_span {
    std::int64_t start = 0;
    std::size_t first_row = 0;
    std::size_t last_row = 0;
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
        spans.resize(g);
        own_mask.resize(g * words);
        landing_mask.resize(g * words);
        begin.resize(g + 1);
        by_heat.resize(g);
        // A rail has at most one piece of a block, and a take either empties a block or fills a
        // rail; one more slot takes the write past the end that dealing does without a branch.
        streams.resize(g * g + g + 1);
    }
    std::size_t words = 0;                   // 64-bit words of a mask of G bits
    std::vector<std::int64_t> left;          // G x G: bytes of each block not yet assigned
    std::vector<std::int64_t> own;           // G x G: bytes of block (a, b) its origin's rail a takes
    std::vector<std::int64_t> own_at;        // G x G: their offset in the block
    std::vector<std::int64_t> landing;       // G x G: bytes of block (a, b) its final's rail b takes
    std::vector<std::int64_t> landing_at;    // G x G: their offset in the block
    std::vector<std::int64_t> rest_at;       // G x G: where the block's rest starts in all blocks' rests
    std::vector<std::int64_t> room;          // G: bytes each rail can still take
    std::vector<std::int64_t> diagonal;      // G: bytes of its diagonal block each rail takes
    std::vector<rest_span> spans;            // G: each rail's part of the rests
    std::vector<std::uint64_t> own_mask;     // G masks: the heat positions of each rail's own pieces' finals
    std::vector<std::uint64_t> landing_mask; // G masks: the origins of the pieces landing on each rail
    std::vector<std::uint32_t> begin;        // G + 1
    std::vector<std::size_t> by_heat;        // final GPUs, hottest first
    std::vector<piece> streams;
};

namespace balancing {

// The arrays of one assign_tile call as plain pointers and sizes, passed by value: a size_t
// kept in memory could alias the uint64_t masks, and every store to them would reload it
// (this is the planner's innermost loop).
struct tile_arrays {
    const std::int64_t* tile;
    std::size_t stride;
    std::size_t g;
    std::size_t words;
    std::int64_t* left;
    std::int64_t* room;
    std::int64_t* own;
    std::int64_t* own_at;
    std::int64_t* landing;
    std::int64_t* landing_at;
    std::uint64_t* own_mask;
    std::uint64_t* landing_mask;
};

inline tile_arrays arrays_of(const tile_request& r, tile_workspace& ws) noexcept {
    return {r.tile,
            r.stride,
            static_cast<std::size_t>(r.gpus),
            ws.words,
            ws.left.data(),
            ws.room.data(),
            ws.own.data(),
            ws.own_at.data(),
            ws.landing.data(),
            ws.landing_at.data(),
            ws.own_mask.data(),
            ws.landing_mask.data()};
}

// Copies the tile into `left` (plain loops: memcpy's size dispatch mispredicts on these short,
// varying lengths) and gives every rail its diagonal block, as far as its capacity goes.
inline void take_diagonals(tile_arrays t, std::span<const std::int64_t> capacity, std::int64_t* diagonal) noexcept {
    for (std::size_t a = 0; a < t.g; ++a)
        for (std::size_t b = 0; b < t.g; ++b) t.left[a * t.g + b] = t.tile[a * t.stride + b];
    for (std::size_t i = 0; i < t.g; ++i) {
        const std::int64_t n = std::min(t.tile[i * t.stride + i], capacity[i]);
        diagonal[i] = n;
        t.left[i * t.g + i] -= n;
        t.room[i] = capacity[i] - n;
    }
}

// Rail i takes what it can of its own block for b, from where the block's assigned part ends,
// marked in its own mask at b's heat position (its stream order).
inline void take_own(tile_arrays t, std::span<const std::uint32_t> heat_rank, std::size_t i, std::size_t b) noexcept {
    const std::size_t k = i * t.g + b;
    const std::int64_t n = std::min(t.left[k], t.room[i]);
    if (n <= 0) return;
    const std::size_t h = heat_rank.empty() ? b : heat_rank[b];
    t.own_mask[i * t.words + h / 64] |= std::uint64_t{1} << (h % 64);
    t.own[k] = n;
    t.own_at[k] = t.tile[i * t.stride + b] - t.left[k];
    t.left[k] -= n;
    t.room[i] -= n;
}

// A rail with a head covers it with whole own blocks after its diagonal block (a rail has at
// most one piece of a block), which its stream puts first.
inline void cover_heads(tile_arrays t, const tile_request& r) noexcept {
    for (std::size_t i = 0; i < t.g; ++i)
        for (std::size_t b = 0; b < t.g && t.room[i] > 0 && r.capacity[i] - t.room[i] < r.head[i]; ++b)
            if (b != i) take_own(t, r.heat_rank, i, b);
}

inline void take_owns(tile_arrays t, std::span<const std::uint32_t> heat_rank) noexcept {
    for (std::size_t i = 0; i < t.g; ++i)
        for (std::size_t b = 0; b < t.g && t.room[i] > 0; ++b)
            if (b != i) take_own(t, heat_rank, i, b);
}

// Every rail takes what it can of the blocks landing on its GPU, marked by origin.
inline void take_landings(tile_arrays t) noexcept {
    for (std::size_t i = 0; i < t.g; ++i)
        for (std::size_t a = 0; a < t.g && t.room[i] > 0; ++a) {
            const std::size_t k = a * t.g + i;
            const std::int64_t n = std::min(t.left[k], t.room[i]);
            if (a == i || n <= 0) continue;
            t.landing_mask[i * t.words + a / 64] |= std::uint64_t{1} << (a % 64);
            t.landing[k] = n;
            t.landing_at[k] = t.tile[a * t.stride + i] - t.left[k];
            t.left[k] -= n;
            t.room[i] -= n;
        }
}

// The rest fills the rails with room in order: all blocks' rests laid end to end (rest_at) and
// each rail with room takes the next room[i] bytes of it (its span).
inline void lay_out_rests(tile_arrays t, std::int64_t* rest_at, rest_span* spans) noexcept {
    const std::size_t g = t.g;
    std::int64_t at = 0;
    for (std::size_t k = 0; k < g * g; ++k) {
        rest_at[k] = at;
        at += t.left[k];
    }
    at = 0;
    std::size_t row = 0;
    const auto row_end = [=](std::size_t a) {
        return a + 1 < g ? rest_at[(a + 1) * g] : rest_at[g * g - 1] + t.left[g * g - 1];
    };
    for (std::size_t i = 0; i < g; ++i) {
        if (t.room[i] == 0) continue;
        while (row + 1 < g && row_end(row) <= at) ++row;
        spans[i].start = at;
        spans[i].first_row = row;
        at += t.room[i];
        while (row + 1 < g && row_end(row) < at) ++row;
        spans[i].last_row = row;
    }
}

// Writes the streams: pieces are written unconditionally and kept when not empty.
struct stream_writer {
    piece* streams;
    std::uint32_t end = 0;

    void put(std::int64_t offset, std::int64_t n, std::size_t a, std::size_t b) noexcept {
        streams[end] = piece{offset, n, static_cast<std::int32_t>(a), static_cast<std::int32_t>(b)};
        end += static_cast<std::uint32_t>(n > 0);
    }
};

// Rail i's own pieces, hottest final GPU first (their mask, cleared for the next tile).
inline void put_owns(tile_arrays t, std::size_t i, const std::size_t* by_heat, stream_writer& out) noexcept {
    for (std::size_t w = 0; w < t.words; ++w)
        for (std::uint64_t m = std::exchange(t.own_mask[i * t.words + w], 0); m != 0; m &= m - 1) {
            const std::size_t b = by_heat[w * 64 + static_cast<std::size_t>(std::countr_zero(m))];
            out.put(t.own_at[i * t.g + b], t.own[i * t.g + b], i, b);
        }
}

// Rail i's part of the rests: the blocks of its rows (by final heat when there is heat, then
// origin) cut to its span.
inline void put_rests(tile_arrays t, std::size_t i, const rest_span& span, const std::int64_t* rest_at,
                      const std::size_t* by_heat, bool heat, stream_writer& out) noexcept {
    const std::int64_t from = span.start;
    const std::int64_t to = from + t.room[i];
    // The part of block (a, b)'s rest in the span; blocks outside it give none.
    const auto rest = [=, &out](std::size_t a, std::size_t b) {
        const std::size_t k = a * t.g + b;
        const std::int64_t lo = std::max(rest_at[k], from);
        const std::int64_t hi = std::min(rest_at[k] + t.left[k], to);
        out.put(t.tile[a * t.stride + b] - t.left[k] + (lo - rest_at[k]), hi - lo, a, b);
    };
    if (!heat) {
        for (std::size_t a = span.first_row; a <= span.last_row; ++a)
            for (std::size_t b = 0; b < t.g; ++b) rest(a, b);
    } else {
        for (std::size_t h = 0; h < t.g; ++h)
            for (std::size_t a = span.first_row; a <= span.last_row; ++a) rest(a, by_heat[h]);
    }
}

// Rail i's landing pieces, by origin (their mask, cleared for the next tile).
inline void put_landings(tile_arrays t, std::size_t i, stream_writer& out) noexcept {
    for (std::size_t w = 0; w < t.words; ++w)
        for (std::uint64_t m = std::exchange(t.landing_mask[i * t.words + w], 0); m != 0; m &= m - 1) {
            const std::size_t a = w * 64 + static_cast<std::size_t>(std::countr_zero(m));
            out.put(t.landing_at[a * t.g + i], t.landing[a * t.g + i], a, i);
        }
}

// Every rail's stream in stream_part order; ws.begin marks where each starts.
inline void write_streams(tile_arrays t, const tile_request& r, tile_workspace& ws) noexcept {
    std::size_t* by_heat = ws.by_heat.data();
    for (std::size_t f = 0; f < t.g; ++f) by_heat[f] = f;
    if (!r.heat_rank.empty())
        for (std::size_t f = 0; f < t.g; ++f) by_heat[r.heat_rank[f]] = f;
    stream_writer out{ws.streams.data()};
    for (std::size_t i = 0; i < t.g; ++i) {
        ws.begin[i] = out.end;
        // The diagonal block goes first when the rail has a head or no own bytes that need
        // redistribution (stream_part), else last.
        bool diagonal_pending = true;
        if (!r.head.empty() && r.head[i] > 0) {
            out.put(0, ws.diagonal[i], i, i);
            diagonal_pending = false;
        }
        put_owns(t, i, by_heat, out);
        if (diagonal_pending && out.end == ws.begin[i]) {
            out.put(0, ws.diagonal[i], i, i);
            diagonal_pending = false;
        }
        if (t.room[i] > 0) put_rests(t, i, ws.spans[i], ws.rest_at.data(), by_heat, !r.heat_rank.empty(), out);
        put_landings(t, i, out);
        if (diagonal_pending) out.put(0, ws.diagonal[i], i, i);
    }
    ws.begin[t.g] = out.end;
}

} // namespace balancing

/// Assigns the bytes of the tile of `r` to its G rails; ws.stream(rail) is then the rail's
/// pieces in stream order: stream_before's order, with the final GPUs' heat given as their
/// positions r.heat_rank. Every byte is assigned exactly once, and a rail gets at most one piece
/// of a block. A rail with a head first covers it with bytes of its own GPU, as far as they go:
/// its diagonal block, which its stream then puts first, and whole own blocks, before
/// r.preference applies. O(G^2).
///
/// Greedy, cheap moves first: the diagonal block, the head, then the rail's own bytes and the
/// bytes landing on its GPU in the order of the preference, then the rest fills the rails with
/// room in order. After the cheap moves a rail with room has none of its own bytes and none
/// landing on it left, so each kind of piece comes from one step: own bytes (a rail's own blocks
/// by final heat), bytes landing on the rail (by origin) and the rest (the bytes that need both
/// moves: by final heat, then origin). Each rail's stream is then written in order, a kind at a
/// time, with no sort and no record of the takes (the own and landing pieces are marked in
/// masks, in their stream order; writing clears them for the next tile).
inline void assign_tile(const tile_request& r, tile_workspace& ws) {
    ws.resize(static_cast<std::size_t>(r.gpus));
    const balancing::tile_arrays t = balancing::arrays_of(r, ws);
    balancing::take_diagonals(t, r.capacity, ws.diagonal.data());
    if (!r.head.empty()) balancing::cover_heads(t, r);
    if (r.preference == rail_preference::own_first) {
        balancing::take_owns(t, r.heat_rank);
        balancing::take_landings(t);
    } else {
        balancing::take_landings(t);
        balancing::take_owns(t, r.heat_rank);
    }
    balancing::lay_out_rests(t, ws.rest_at.data(), ws.spans.data());
    balancing::write_streams(t, r, ws);
}

} // namespace fast::detail
