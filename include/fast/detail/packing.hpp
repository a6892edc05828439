#pragma once
// Quantising and packing (the planner's stage 3, first half): the server matrix rounded up to a
// quantum (quantise; the decomposition's weights scaled back, scale_weights), and the stages of
// its decomposition laid out as a schedule: the paper's uniform rails (every stage on all G
// rails in its own step) or rail packing (stages dealt to the G rails in time-aligned steps of
// G equal slots, the water level).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "../decomposition.hpp"
#include "bvn_decomposition.hpp"
#include "checked.hpp"
#include "schedule.hpp"
#include "sorting.hpp"

namespace fast::detail {

/// Divides every entry of the n x n matrix `a` by `quantum`, rounding up.
inline void quantise(std::vector<std::int64_t>& a, std::int64_t quantum) {
    for (std::int64_t& v : a) v = v / quantum + (v % quantum != 0 ? 1 : 0);
}

/// Multiplies every stage weight by `quantum` (weights of a quantised decomposition).
inline void scale_weights(decomposition& d, std::int64_t quantum) {
    for (std::int64_t& w : d.weights) {
        if (__builtin_mul_overflow(w, quantum, &w)) w = INT64_MAX;
    }
}

/// The bottleneck stages of the n x n matrix `a` (consumed) rounded up to multiples of
/// `quantum` (the slack is padding, never sent), with their weights in bytes again.
inline void decompose_quantised(std::vector<std::int64_t>& a, int n, std::int64_t quantum, decomposition& out,
                                padding_workspace& ws) {
    quantise(a, quantum);
    decompose_padded(a, n, matching_rule::bottleneck, out, ws);
    scale_weights(out, quantum);
}

/// A piece while finding the water level: it fills `cells` cells of the current length, one
/// more from length `next` = floor(bytes / (cells + 1)) down.
struct level_cursor {
    std::int64_t bytes;
    std::int64_t cells;
    std::int64_t next;
};

/// The water level of pieces with durations `pieces` (longest first): the largest D at which
/// they fill at least g cells, a piece of duration w filling floor(w / D) of them; 0 if none.
/// That is the g-th largest of floor(w / c) over the pieces and c = 1 .. g; only the g longest
/// pieces can hold one of those. Their S bytes fill at most S / D cells, so D <= S / g; from
/// there D walks down the lengths at which some piece fills a cell more until they fill g.
/// Flooring loses less than a cell per piece, so that takes fewer rounds than there are pieces,
/// each a pass over them; no more divisions than cells gained.
inline std::int64_t water_level(std::span<const std::int64_t> pieces, int g, std::vector<level_cursor>& at) {
    at.clear();
    std::int64_t total = 0;
    bool overflow = false;
    for (std::size_t j = 0; j < std::min(pieces.size(), static_cast<std::size_t>(g)) && pieces[j] > 0; ++j) {
        at.push_back({pieces[j], 0, 0});
        overflow = overflow || __builtin_add_overflow(total, pieces[j], &total);
    }
    if (at.empty()) return 0;
    // The longest piece bounds D too (and S / g <= it).
    std::int64_t d = overflow ? at.front().bytes : total / g;
    if (d == 0) return 0; // fewer than g bytes: fewer than g cells at any D >= 1
    std::int64_t cells = 0;
    std::int64_t next = 0; // the next length down at which some piece fills a cell more
    for (level_cursor& x : at) {
        x.cells = x.bytes / d;
        x.next = x.bytes / (x.cells + 1);
        cells += x.cells;
        next = std::max(next, x.next);
    }
    // next > 0 while cells < g: at next = 0 every piece would fill a cell per byte.
    while (cells < g) {
        d = next;
        next = 0;
        for (level_cursor& x : at) {
            if (x.next == d) {
                const std::int64_t c = x.bytes / d;
                cells += c - x.cells;
                x.cells = c;
                x.next = x.bytes / (c + 1);
            }
            next = std::max(next, x.next);
        }
    }
    return d;
}

/// What bounds the steps of rail packing (see pack_rails): G rails, pieces not cut below
/// `min_step` bytes, no step longer than `max_step` bytes.
struct packing_limits {
    int rails = 1;
    std::int64_t min_step = 0;
    std::int64_t max_step = 0;
};

/// A rail-packed step (see pack_rails) from the durations of the pieces left, longest first:
/// the water level (at least 1), the cell length `level`, and whether the step is the last.
struct packed_step {
    std::int64_t water;
    std::int64_t level;
    bool last;
};

inline packed_step plan_packed_step(std::span<const std::int64_t> pieces, const packing_limits& limits,
                                    std::vector<level_cursor>& levels) {
    const int g = limits.rails;
    // The water level: the largest D with at least G cells.
    const std::int64_t water = std::max<std::int64_t>(1, water_level(pieces, g, levels));
    const std::int64_t level = std::min(std::max(water, std::min(limits.min_step, pieces.front())),
                                        std::max<std::int64_t>(limits.max_step, 1));
    // The last step: every piece fits in G cells of at most `level`, counted only until they
    // exceed G (the sum could overflow with huge pieces and a tiny level).
    std::int64_t cells = 0;
    std::int64_t total = 0;
    for (const std::int64_t w : pieces) {
        if ((cells += std::min<std::int64_t>(ceil_div(w, level), g + 1)) > g) return {water, level, false};
        if (__builtin_add_overflow(total, w, &total)) total = INT64_MAX; // a lower bound still
    }
    // Then the shortest such D. G cells hold at most G D bytes, so none is below
    // ceil(total / G), where the pieces need fewer than G + (pieces) cells; from there D jumps
    // to the next length at which some piece needs a cell fewer until they fit (the cell count
    // only falls as D grows, so this is the least D >= the water level that fits).
    std::int64_t d = std::max(water, ceil_div(total, g));
    for (;;) {
        cells = 0;
        std::int64_t next = INT64_MAX;
        for (const std::int64_t w : pieces) {
            const std::int64_t c = ceil_div(w, d);
            cells += c;
            if (c > 1) next = std::min(next, ceil_div(w, c - 1));
        }
        if (cells <= g) return {d, d, true};
        d = next;
    }
}

/// The paper's layout of a decomposition's stages (see build_uniform_rails).
struct uniform_layout {
    std::span<const std::size_t> sequence; ///< the stages in step order
    std::span<const std::int64_t> share;   ///< per (pair, rail), (s * S + d) * G + i: what the rail carries
    int rails = 1;                         ///< G
    int chunks = 1;                        ///< consecutive steps per stage
};

/// The paper's layout: stage k of `stages` (taken in layout.sequence order, each split into
/// layout.chunks consecutive parts) runs on every rail in its own step; rail i of server s
/// sends min(part, what it still carries to P(s)) of its share. Slots in which a rail sends
/// nothing are left out. `left` is a workspace.
inline void build_uniform_rails(const decomposition& stages, const uniform_layout& layout,
                                std::vector<std::int64_t>& left, stage_schedule& out) {
    const int s_count = stages.rows;
    const auto us = static_cast<std::size_t>(s_count);
    const auto ug = static_cast<std::size_t>(layout.rails);
    const int chunks = layout.chunks;
    out.clear(s_count, layout.rails);
    left.assign(layout.share.begin(), layout.share.end());
    std::int32_t step = 0;
    for (const std::size_t k : layout.sequence) {
        const auto perm = stages.perm(k);
        const std::size_t perm_index = out.add_perm(perm);
        const std::int64_t w = stages.weights[k];
        const std::int64_t parts = std::min<std::int64_t>(chunks, w);
        for (std::int64_t c = 0; c < parts; ++c) {
            const std::int64_t part = w / parts + (c < w % parts ? 1 : 0);
            ++step;
            for (std::size_t rail = 0; rail < ug; ++rail) {
                const std::size_t b = out.add_bytes();
                bool any = false;
                for (std::size_t s = 0; s < us; ++s) {
                    const auto d = static_cast<std::size_t>(perm[s]);
                    if (d == s) continue;
                    std::int64_t& l = left[(s * us + d) * ug + rail];
                    const std::int64_t n = std::min(part, l);
                    l -= n;
                    out.bytes[b * us + s] = n;
                    any = any || n > 0;
                }
                if (!any) {
                    out.bytes.resize(b * us);
                    continue;
                }
                out.slots.push_back({static_cast<std::int32_t>(rail), step, perm_index, b});
            }
        }
    }
    out.last_step = step;
}

/// How many cells a piece of duration w takes in `step`, given the rails left: floor(w / level),
/// or in the last step ceil(w / level); below the water level (a step held at min_step) a piece
/// shorter than a cell takes one whole. 0: the piece waits for a later, shorter step.
[[nodiscard]] inline std::int64_t cells_for(std::int64_t w, int rails_left, const packed_step& step) noexcept {
    std::int64_t cells = std::min<std::int64_t>(step.last ? ceil_div(w, step.level) : w / step.level, rails_left);
    if (cells == 0 && step.level != step.water) cells = 1;
    return cells;
}

/// Buffers of pack_rails and packed_step_lengths, kept between plans so that planning again
/// allocates nothing.
struct packing_workspace {
    std::vector<std::int64_t> left;     // per server pair: bytes not yet in a stage
    std::vector<std::int64_t> real;     // pack_rails: per stage and server, real bytes not yet in a slot
    std::vector<std::int64_t> duration; // per stage: its busiest server's real bytes left
    std::vector<std::size_t> perm_of;   // pack_rails: per stage, its permutation in the schedule
    std::vector<std::size_t> order;     // pack_rails: the stages with bytes left, longest first
    std::vector<std::pair<std::int64_t, std::size_t>> keys; // for sorting `order` stably
    std::vector<level_cursor> levels;                       // finding a step's water level
    std::vector<std::int64_t> pieces;                       // the stages' durations left, longest first
};

/// Pours each server pair's bytes (`pair_bytes`, s * S + d) into the stages in order, min(weight,
/// what is left): ws.duration gets each stage's busiest server's real bytes and, unless `real`
/// is empty, real[k * S + s] server s's real bytes in stage k.
inline void pour_pairs(const decomposition& stages, std::span<const std::int64_t> pair_bytes, packing_workspace& ws,
                       std::span<std::int64_t> real) {
    const auto us = static_cast<std::size_t>(stages.rows);
    ws.left.assign(pair_bytes.begin(), pair_bytes.end());
    ws.duration.assign(stages.size(), 0);
    for (std::size_t k = 0; k < stages.size(); ++k) {
        const auto perm = stages.perm(k);
        for (std::size_t s = 0; s < us; ++s) {
            const auto d = static_cast<std::size_t>(perm[s]);
            if (d == s) continue;
            const std::int64_t n = std::min(stages.weights[k], ws.left[s * us + d]);
            ws.left[s * us + d] -= n;
            if (!real.empty()) real[k * us + s] = n;
            ws.duration[k] = std::max(ws.duration[k], n);
        }
    }
}

/// Fills one packed step of `out` (numbered `number`): the stages of ws.order, longest first,
/// take their cells (cells_for) until the G rails are used; every cell takes min(level, its
/// bytes) from each server of its stage. Returns the step's length, its busiest sender's bytes.
inline std::int64_t fill_packed_step(const packed_step& step, std::int32_t number, int g, stage_schedule& out,
                                     packing_workspace& ws) {
    const auto us = static_cast<std::size_t>(out.servers);
    int rail = 0;
    std::int64_t length = 0;
    for (const std::size_t k : ws.order) {
        if (rail >= g) break;
        const std::int64_t cells = cells_for(ws.duration[k], g - rail, step);
        for (std::int64_t c = 0; c < cells; ++c) {
            std::int64_t* stage_real = ws.real.data() + k * us;
            const std::size_t b = out.add_bytes();
            std::int64_t longest = 0;
            for (std::size_t s = 0; s < us; ++s) {
                const std::int64_t n = std::min(step.level, stage_real[s]);
                stage_real[s] -= n;
                out.bytes[b * us + s] = n;
                length = std::max(length, n);
                longest = std::max(longest, stage_real[s]);
            }
            ws.duration[k] = longest;
            out.slots.push_back({static_cast<std::int32_t>(rail), number, ws.perm_of[k], b});
            ++rail;
            if (ws.duration[k] == 0) break;
        }
    }
    return length;
}

/// Rail packing. `stages` decompose the server-level matrix (total bytes per server pair,
/// `pair_bytes`, s * S + d), largest stages first. Each pair's bytes fill its stages in that
/// order (min(weight, what is left)); a stage lasts as long as its busiest server's bytes.
///
/// Steps are time-aligned across rails: balancing and redistribution are scale-up transfers
/// between GPUs of different rails, which couples the rails at every step, so a rail running a
/// short slot would only wait for the others. Each step therefore gives all G rails a slot of the
/// same duration D: the largest D at which the remaining stage pieces fill G cells (a piece of
/// duration w fills floor(w / D) of them, a "water level"). Below `min_step` bytes a step's alpha
/// outweighs keeping every rail busy: pieces are then not split finer, each takes a cell whole
/// and some rails may idle. When every remaining piece fits in G cells no longer than the step
/// would be anyway, the step ends the schedule: each piece takes ceil(w / D) cells at the
/// shortest such D (a ragged tail of short steps would cost an alpha each and leave rails
/// idle). No step is longer than `max_step` bytes, which bounds scratch: a step's gathered and
/// landed bytes are staged. Steps come out longest first, numbered from 1.
inline void pack_rails(const decomposition& stages, std::span<const std::int64_t> pair_bytes,
                       const packing_limits& limits, stage_schedule& out, packing_workspace& ws) {
    const auto us = static_cast<std::size_t>(stages.rows);
    out.clear(stages.rows, limits.rails);
    ws.real.assign(stages.size() * us, 0);
    pour_pairs(stages, pair_bytes, ws, ws.real);
    ws.perm_of.resize(stages.size());
    ws.order.clear();
    for (std::size_t k = 0; k < stages.size(); ++k) {
        ws.perm_of[k] = out.add_perm(stages.perm(k));
        if (ws.duration[k] > 0) ws.order.push_back(k);
    }
    std::int32_t step = 0;
    while (!ws.order.empty()) {
        stable_sort_by(ws.order, ws.keys, [&](std::size_t k) { return -ws.duration[k]; });
        ws.pieces.resize(ws.order.size());
        for (std::size_t j = 0; j < ws.order.size(); ++j) ws.pieces[j] = ws.duration[ws.order[j]];
        fill_packed_step(plan_packed_step(ws.pieces, limits, ws.levels), ++step, limits.rails, out, ws);
        std::erase_if(ws.order, [&](std::size_t k) { return ws.duration[k] == 0; });
    }
    out.last_step = step;
}

/// A bound on a schedule's cost, its step lengths plus `step_cost` per step: packed_step_lengths
/// gives up once the steps built reach `limit`.
struct packing_budget {
    double limit = HUGE_VAL;
    std::int64_t step_cost = 0;
};

/// The step lengths pack_rails would give (`lengths`, index 0 unused), without building the
/// schedule. Every cell takes min(D, its bytes) from every server of its stage, so a stage's
/// duration after a cell is exactly max(0, duration - D): the steps follow from the stage
/// durations alone, kept as pieces, longest first (which stage has which does not matter).
/// Returns false, leaving `lengths` partial, once the steps reach the budget: a caller comparing
/// schedules by cost passes the best so far (shaping only splits steps, keeping their lengths'
/// sum, so such a schedule cannot end below it).
inline bool packed_step_lengths(const decomposition& stages, std::span<const std::int64_t> pair_bytes,
                                const packing_limits& limits, const packing_budget& budget, packing_workspace& ws,
                                std::vector<std::int64_t>& lengths) {
    pour_pairs(stages, pair_bytes, ws, {});
    std::vector<std::int64_t>& pieces = ws.pieces;
    pieces.clear();
    for (const std::int64_t w : ws.duration)
        if (w > 0) pieces.push_back(w);
    std::sort(pieces.begin(), pieces.end(), std::greater<>());
    lengths.assign(1, 0);
    double cost = 0;
    while (!pieces.empty()) {
        const packed_step step = plan_packed_step(pieces, limits, ws.levels);
        // Each cell takes min(level, w): the first the most; the cells past the piece's end
        // stay free.
        int rail = 0;
        std::int64_t length = 0;
        for (std::int64_t& w : pieces) {
            if (rail >= limits.rails) break;
            const std::int64_t cells = cells_for(w, limits.rails - rail, step);
            if (cells == 0) continue;
            const std::int64_t needed = ceil_div(w, step.level);
            length = std::max(length, std::min(step.level, w));
            w = cells >= needed ? 0 : w - cells * step.level;
            rail += static_cast<int>(std::min(cells, needed));
        }
        lengths.push_back(length);
        cost += static_cast<double>(length) + static_cast<double>(budget.step_cost);
        if (cost >= budget.limit) return false;
        // Only the pieces that got cells shortened: an insertion sort restores the order.
        std::erase(pieces, std::int64_t{0});
        insertion_sort(pieces.begin(), pieces.end(), std::greater<>());
    }
    return true;
}

} // namespace fast::detail
