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

/// A rail-packed step (see build_rail_packed) from the durations of the pieces left, longest
/// first: the water level `lo` (at least 1), the cell length `level`, and whether the step is
/// the last.
struct packed_step {
    std::int64_t lo;
    std::int64_t level;
    bool last;
};

inline packed_step plan_packed_step(std::span<const std::int64_t> pieces, int g, std::int64_t min_step,
                                    std::int64_t max_step, std::vector<level_cursor>& levels) {
    // The water level: the largest D with at least G cells.
    const std::int64_t lo = std::max<std::int64_t>(1, water_level(pieces, g, levels));
    const std::int64_t level =
        std::min(std::max(lo, std::min(min_step, pieces.front())), std::max<std::int64_t>(max_step, 1));
    // The last step: every piece fits in G cells of at most `level`, counted only until they
    // exceed G (the sum could overflow with huge pieces and a tiny level).
    std::int64_t cells = 0;
    std::int64_t total = 0;
    for (const std::int64_t w : pieces) {
        if ((cells += std::min<std::int64_t>(ceil_div(w, level), g + 1)) > g) return {lo, level, false};
        if (__builtin_add_overflow(total, w, &total)) total = INT64_MAX; // a lower bound still
    }
    // Then the shortest such D. G cells hold at most G D bytes, so none is below
    // ceil(total / G), where the pieces need fewer than G + (pieces) cells; from there D jumps
    // to the next length at which some piece needs a cell fewer until they fit (the cell count
    // only falls as D grows, so this is the least D >= lo that fits).
    std::int64_t d = std::max(lo, ceil_div(total, g));
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

/// The paper's layout: stage k of `stages` (taken in `sequence` order, each split into
/// `chunks` consecutive parts) runs on every rail in its own step; rail i of server s sends
/// min(part, what it still carries to P(s)), from the per-rail budgets `share`
/// ((s * S + d) * G + i). Slots in which a rail sends nothing are left out.
inline void build_uniform_rails(const decomposition& stages, std::span<const std::size_t> sequence,
                                std::span<const std::int64_t> share, int g, int chunks,
                                std::vector<std::int64_t>& left, stage_schedule& out) {
    const int s_count = stages.n;
    const auto us = static_cast<std::size_t>(s_count);
    const auto ug = static_cast<std::size_t>(g);
    out.clear(s_count, g);
    left.assign(share.begin(), share.end());
    std::int32_t step = 0;
    for (const std::size_t k : sequence) {
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
///
/// A caller comparing schedules by their step lengths plus `step_cost` per step may pass the
/// best such cost so far as `budget`: the build stops, returning false, once the steps built
/// reach it. shape_steps only splits steps (their lengths keep their sum), so such a schedule
/// cannot end below the budget.
///
/// Every cell takes min(D, its bytes) from every server of its stage, so a stage's duration
/// after a cell is exactly max(0, duration - D): the steps follow from the stage durations
/// alone. With `materialise` false nothing is written to `out` but its step count
/// (out.last_step), and ws.length holds each step's length (index 0 unused): what
/// shape_steps<false> needs to cost the schedule without building it.
template <bool materialise = true>
bool build_rail_packed(const decomposition& stages, std::span<const std::int64_t> pair_bytes,
                       int g, std::int64_t min_step, std::int64_t max_step, stage_schedule& out,
                       schedule_workspace& ws, double budget = HUGE_VAL, std::int64_t step_cost = 0) {
    const int s_count = stages.n;
    const auto us = static_cast<std::size_t>(s_count);
    const std::size_t k_count = stages.size();
    out.clear(s_count, g);
    if constexpr (!materialise) ws.length.assign(1, 0);
    std::vector<std::int64_t>& left = ws.left;
    std::vector<std::int64_t>& real = ws.real;
    std::vector<std::int64_t>& duration = ws.duration;
    std::vector<std::size_t>& order = ws.order;
    std::vector<std::int64_t>& pieces = ws.pieces;
    left.assign(pair_bytes.begin(), pair_bytes.end());
    if constexpr (materialise) real.assign(k_count * us, 0);
    duration.assign(k_count, 0);
    for (std::size_t k = 0; k < k_count; ++k) {
        const auto perm = stages.perm(k);
        for (std::size_t s = 0; s < us; ++s) {
            const auto d = static_cast<std::size_t>(perm[s]);
            if (d == s) continue;
            const std::int64_t n = std::min(stages.weights[k], left[s * us + d]);
            left[s * us + d] -= n;
            if constexpr (materialise) real[k * us + s] = n;
            duration[k] = std::max(duration[k], n);
        }
    }
    std::vector<std::size_t>& perm_of = ws.perm_of;
    if constexpr (materialise) {
        perm_of.resize(k_count);
        for (std::size_t k = 0; k < k_count; ++k) perm_of[k] = out.add_perm(stages.perm(k));
        order.clear();
        for (std::size_t k = 0; k < k_count; ++k)
            if (duration[k] > 0) order.push_back(k);
    } else {
        // The steps depend on the durations alone, not on which stage has which: the pieces
        // are kept as durations, longest first.
        pieces.clear();
        for (const std::int64_t w : duration)
            if (w > 0) pieces.push_back(w);
        std::sort(pieces.begin(), pieces.end(), std::greater<>());
    }
    std::int32_t step = 0;
    double cost = 0;
    while (materialise ? !order.empty() : !pieces.empty()) {
        if constexpr (materialise) {
            stable_sort_by(order, ws.keys, [&](std::size_t k) { return -duration[k]; });
            pieces.resize(order.size());
            for (std::size_t j = 0; j < order.size(); ++j) pieces[j] = duration[order[j]];
        }
        // Named, not a structured binding: clang 14 cannot capture bindings in the lambda below.
        const packed_step next_step = plan_packed_step(pieces, g, min_step, max_step, ws.levels);
        const std::int64_t lo = next_step.lo;
        const std::int64_t level = next_step.level;
        const bool last = next_step.last;
        // Cells for a piece of duration w, given the rails left.
        const auto cells_for = [&](std::int64_t w, int rails_left) {
            std::int64_t cells = std::min<std::int64_t>(last ? ceil_div(w, level) : w / level, rails_left);
            if (cells == 0 && level != lo) cells = 1; // below min_step: takes a cell whole
            return cells; // 0: shorter than a full cell, for a later, shorter step
        };
        ++step;
        int rail = 0;
        std::int64_t length = 0; // the step's busiest sender's bytes
        if constexpr (materialise) {
            for (const std::size_t k : order) {
                if (rail >= g) break;
                const std::int64_t cells = cells_for(duration[k], g - rail);
                for (std::int64_t c = 0; c < cells; ++c) {
                    std::int64_t* stage_real = real.data() + k * us;
                    const std::size_t b = out.add_bytes();
                    std::int64_t longest = 0;
                    for (std::size_t s = 0; s < us; ++s) {
                        const std::int64_t n = std::min(level, stage_real[s]);
                        stage_real[s] -= n;
                        out.bytes[b * us + s] = n;
                        length = std::max(length, n);
                        longest = std::max(longest, stage_real[s]);
                    }
                    duration[k] = longest;
                    out.slots.push_back({static_cast<std::int32_t>(rail), step, perm_of[k], b});
                    ++rail;
                    if (duration[k] == 0) break;
                }
            }
        } else {
            // Each cell takes min(level, w): the first the most; the cells past the piece's end
            // stay free.
            for (std::int64_t& w : pieces) {
                if (rail >= g) break;
                const std::int64_t cells = cells_for(w, g - rail);
                if (cells == 0) continue;
                const std::int64_t needed = ceil_div(w, level);
                length = std::max(length, std::min(level, w));
                w = cells >= needed ? 0 : w - cells * level;
                rail += static_cast<int>(std::min(cells, needed));
            }
            ws.length.push_back(length);
        }
        cost += static_cast<double>(length) + static_cast<double>(step_cost);
        if (cost >= budget) return false;
        if constexpr (materialise) {
            order.erase(std::remove_if(order.begin(), order.end(), [&](std::size_t k) { return duration[k] == 0; }),
                        order.end());
        } else {
            // Only the pieces that got cells shortened: an insertion sort restores the order.
            pieces.erase(std::remove(pieces.begin(), pieces.end(), std::int64_t{0}), pieces.end());
            for (std::size_t j = 1; j < pieces.size(); ++j) {
                const std::int64_t w = pieces[j];
                std::size_t at = j;
                for (; at > 0 && pieces[at - 1] < w; --at) pieces[at] = pieces[at - 1];
                pieces[at] = w;
            }
        }
    }
    out.last_step = step;
    return true;
}
} // namespace fast::detail
