#pragma once
// Stage schedules: which server sends how many bytes to which server, on which rail, in which
// scale-out step. Rails (GPU i of every server) are independent one-to-one fabrics, so each
// rail has its own sequence of slots; in a slot, every server sends to at most one server and
// receives from at most one (a permutation).
//
// Builders:
//  - uniform rails (the paper): every stage runs on all G rails in the same step, each GPU
//    sending its balanced share;
//  - rail packing: the stages of the server-level matrix are dealt to rails so that each rail
//    carries 1/G of the volume with about 1/G of the stages;
// and ramps, which split each rail's first and last slot so that the balancing before the first
// stage and the redistribution after the last one are small.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <vector>

#include "../bvn.hpp"
#include "assignment.hpp"
#include "checked.hpp"
#include "plan_builder.hpp"

namespace fast::detail {

struct stage_schedule {
    int servers = 0;
    int rails = 0;
    std::int32_t last_step = 0; ///< the last scale-out step (steps are 1-based)
    std::vector<std::int32_t> perms; ///< permutations, `servers` entries each
    struct slot {
        std::int32_t rail = 0;
        std::int32_t step = 0;
        std::size_t perm = 0;  ///< index of the permutation
        std::size_t bytes = 0; ///< index of the slot's bytes (servers entries)
    };
    std::vector<slot> slots;
    std::vector<std::int64_t> bytes; ///< per slot and server: bytes it sends in the slot

    void clear(int s, int g) {
        servers = s;
        rails = g;
        last_step = 0;
        perms.clear();
        slots.clear();
        bytes.clear();
    }
    [[nodiscard]] std::span<const std::int32_t> perm_of(const slot& x) const noexcept {
        return {perms.data() + x.perm * static_cast<std::size_t>(servers), static_cast<std::size_t>(servers)};
    }
    [[nodiscard]] std::span<const std::int64_t> bytes_of(const slot& x) const noexcept {
        return {bytes.data() + x.bytes * static_cast<std::size_t>(servers), static_cast<std::size_t>(servers)};
    }
    [[nodiscard]] std::span<std::int64_t> bytes_of(const slot& x) noexcept {
        return {bytes.data() + x.bytes * static_cast<std::size_t>(servers), static_cast<std::size_t>(servers)};
    }
    /// The slot's duration in bytes: its busiest sender's bytes.
    [[nodiscard]] std::int64_t longest(const slot& x) const noexcept {
        std::int64_t n = 0;
        for (const std::int64_t b : bytes_of(x)) n = std::max(n, b);
        return n;
    }
    std::size_t add_perm(std::span<const std::int32_t> p) {
        perms.insert(perms.end(), p.begin(), p.end());
        return perms.size() / static_cast<std::size_t>(servers) - 1;
    }
    std::size_t add_bytes() {
        bytes.resize(bytes.size() + static_cast<std::size_t>(servers), 0);
        return bytes.size() / static_cast<std::size_t>(servers) - 1;
    }
};

/// Groups the slots by step, keeping their order within a step (a counting sort): the slots of
/// step k are members[begin[k], begin[k + 1]).
inline void slots_by_step(const stage_schedule& sc, std::vector<std::size_t>& begin,
                          std::vector<std::size_t>& members) {
    std::int32_t top = 0;
    for (const auto& x : sc.slots) top = std::max(top, x.step);
    begin.assign(static_cast<std::size_t>(top) + 2, 0);
    for (const auto& x : sc.slots) ++begin[static_cast<std::size_t>(x.step) + 1];
    std::partial_sum(begin.begin(), begin.end(), begin.begin());
    members.resize(sc.slots.size());
    for (std::size_t j = 0; j < sc.slots.size(); ++j) members[begin[static_cast<std::size_t>(sc.slots[j].step)]++] = j;
    for (std::size_t k = begin.size() - 1; k > 0; --k) begin[k] = begin[k - 1]; // back to the starts
    begin[0] = 0;
}

/// Per (server pair, rail), the slots that carry it, in step order (CSR, key (s * S + d) * G + i).
class stream_slots {
public:
    void build(const stage_schedule& sc) {
        const auto s = static_cast<std::size_t>(sc.servers);
        const auto g = static_cast<std::size_t>(sc.rails);
        offsets_.assign(s * s * g + 1, 0);
        slots_by_step(sc, by_step_, order_);
        auto key = [&](std::size_t src, std::int32_t dst, std::int32_t rail) {
            return (src * s + static_cast<std::size_t>(dst)) * g + static_cast<std::size_t>(rail);
        };
        for (const auto& x : sc.slots) {
            const auto perm = sc.perm_of(x);
            const auto bytes = sc.bytes_of(x);
            for (std::size_t src = 0; src < s; ++src)
                if (bytes[src] > 0) ++offsets_[key(src, perm[src], x.rail) + 1];
        }
        std::partial_sum(offsets_.begin(), offsets_.end(), offsets_.begin());
        entries_.resize(offsets_.back());
        fill_.assign(offsets_.begin(), offsets_.end() - 1);
        for (const std::size_t k : order_) {
            const auto& x = sc.slots[k];
            const auto perm = sc.perm_of(x);
            const auto bytes = sc.bytes_of(x);
            for (std::size_t src = 0; src < s; ++src)
                if (bytes[src] > 0) entries_[fill_[key(src, perm[src], x.rail)]++] = stream_slot{x.step, bytes[src]};
        }
    }
    [[nodiscard]] std::span<const stream_slot> of(std::size_t key) const noexcept {
        return {entries_.data() + offsets_[key], offsets_[key + 1] - offsets_[key]};
    }
    /// Total bytes of the (pair, rail) stream `key`.
    [[nodiscard]] std::int64_t bytes(std::size_t key) const noexcept {
        std::int64_t n = 0;
        for (const stream_slot& x : of(key)) n += x.bytes;
        return n;
    }

private:
    std::vector<std::size_t> offsets_;
    std::vector<stream_slot> entries_;
    std::vector<std::size_t> fill_;
    std::vector<std::size_t> by_step_;
    std::vector<std::size_t> order_;
};

/// A piece while finding the water level: it fills `cells` cells of the current length, one
/// more from length `next` = floor(bytes / (cells + 1)) down.
struct level_cursor {
    std::int64_t bytes;
    std::int64_t cells;
    std::int64_t next;
};

/// Buffers of build_rail_packed, shape_steps and assign_rails, kept between plans so that
/// planning again allocates nothing.
struct schedule_workspace {
    std::vector<std::int64_t> left;     // per server pair: bytes not yet in a stage
    std::vector<std::int64_t> real;     // per stage and server: real bytes not yet in a slot
    std::vector<std::int64_t> duration; // per stage: its busiest server's real bytes left
    std::vector<std::size_t> perm_of;   // per stage: its permutation in the schedule
    std::vector<std::size_t> order;     // stages (build_rail_packed) or steps (shape_steps)
    std::vector<std::pair<std::int64_t, std::size_t>> keys; // for sorting `order` stably
    std::vector<std::size_t> members;   // shape_steps, assign_rails: slots grouped by step (slots_by_step)
    std::vector<std::size_t> begin;     // step k's slots are members[begin[k], begin[k + 1])
    std::vector<std::int64_t> length;   // build_rail_packed<false>, shape_steps: per step, its length
    std::vector<std::size_t> rising;    // shape_steps: steps of the pyramid's two sides
    std::vector<std::size_t> falling;
    std::vector<level_cursor> levels;   // build_rail_packed: finding a step's water level
    std::vector<std::int64_t> pieces;   // build_rail_packed: the stages' durations left, longest first
    std::vector<std::int64_t> cover;    // assign_rails: per (pair, rail), the bytes a slot there may still cover
    std::vector<std::int64_t> score;    // assign_rails: per (slot of the step, rail), the bytes it would cover
    std::vector<std::int64_t> cost;     // assign_rails: the scores as costs
    std::vector<std::size_t> rail_of;   // assign_rails: per slot of the step, its rail
    std::vector<std::uint8_t> taken;    // assign_rails: per rail, whether a slot has it
    std::vector<std::size_t> rows;      // assign_rails: the slots whose rail matters
    std::vector<std::uint8_t> varies;   // assign_rails: per slot of the step, whether its rail matters
    std::vector<std::size_t> pick;      // assign_rails: their rails
    assignment_workspace assignment;
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

/// Sorts `order` by key(x) ascending, keeping the current order among equal keys, without
/// allocating (std::stable_sort takes a temporary buffer). Short lists, often nearly sorted
/// (a schedule step shortens only its longest pieces), take an insertion sort.
template <class Key>
void stable_sort_by(std::vector<std::size_t>& order, std::vector<std::pair<std::int64_t, std::size_t>>& keys,
                    Key key) {
    keys.resize(order.size());
    for (std::size_t j = 0; j < order.size(); ++j) keys[j] = {key(order[j]), order[j]};
    if (order.size() <= 32) {
        for (std::size_t j = 1; j < keys.size(); ++j) {
            const auto x = keys[j];
            std::size_t at = j;
            for (; at > 0 && x.first < keys[at - 1].first; --at) keys[at] = keys[at - 1];
            keys[at] = x;
        }
    } else {
        for (std::size_t j = 0; j < order.size(); ++j) keys[j].second = j;
        std::sort(keys.begin(), keys.end());
        for (std::size_t j = 0; j < order.size(); ++j) keys[j].second = order[keys[j].second];
    }
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = keys[j].second;
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

/// The longest slot of each step, in bytes (index 0 unused).
inline void step_lengths(const stage_schedule& sc, std::vector<std::int64_t>& length) {
    length.assign(static_cast<std::size_t>(sc.last_step) + 1, 0);
    for (const auto& x : sc.slots)
        length[static_cast<std::size_t>(x.step)] = std::max(length[static_cast<std::size_t>(x.step)], sc.longest(x));
}

/// Orders the steps as a pyramid and adds ramps.
///
/// During step k a GPU's scale-up fabric balances the bytes of step k + 1 and redistributes
/// those of step k - 1 at B_up / B_out times the scale-out rate; only the balancing before the
/// first step and the redistribution after the last one are exposed. So: the longest steps go
/// in the middle and the shortest at both ends (a pyramid), then every step on the rising side
/// is at most `growth` times its predecessor (balancing for the next step must fit under it)
/// and every step on the falling side at most `growth` times its successor (redistribution of
/// the previous step must fit under it), with the last step at most `edge` bytes and the first
/// at most `growth` times `edge`; longer steps are split (the split-off part keeps the slot's
/// permutation, each server sending min(part, its bytes)). The first step starts as if an
/// `edge`-long step came before it: its rails carry their own GPUs' bytes first (assign_rails,
/// and own-first streams), which need no balancing, so an `edge`-long step before it would hide
/// little and cost an alpha. For the same reason a step shorter than `edge` (a decomposition's
/// last stage can leave one) ends the schedule rather than starting it, where a longer step can
/// start it. A step up to a quarter over its limit stays whole (the ramp's share leaves that
/// room; a split costs an alpha), and one shorter than `edge` lets the next grow as much as an
/// `edge`-long one would (a few exposed bytes cost less than further splits).
///
/// With `drop` > 0 the receivers are hotter than the senders. Streams carry the bytes of hot
/// receivers first, so the early steps are the ones with redistribution to expose: the longest
/// step then comes first, after its rising ramp, and every other step follows it, longest first;
/// the step after it must be at least 1 / `drop` of it (parts of the longest step are split off
/// after it until it is). Steps are renumbered 1, 2, ...
///
/// `first` > 0 sets the first step's limit instead of `growth` times `edge` (the planner lowers
/// it where the first step's rails hold too few own bytes; see cover_of_first_step).
///
/// With `materialise` false the shape is only counted, from the step lengths in ws.length
/// (index 0 unused, every step non-empty: build_rail_packed<false>), and `sc` is left alone.
/// Returns the number of steps.
template <bool materialise = true>
std::int32_t shape_steps(stage_schedule& sc, double growth, std::int64_t edge, double drop, schedule_workspace& ws,
                         std::int64_t first = 0) {
    const auto us = static_cast<std::size_t>(sc.servers);
    ws.order.clear();
    if constexpr (materialise) {
        if (sc.slots.empty()) return sc.last_step;
        slots_by_step(sc, ws.begin, ws.members);
        // Every slot gets its new step from the side it ends up on (see below); 0 until then.
        for (auto& x : sc.slots) x.step = 0;
        // Step lengths, computed once: a carve of `amount` shortens a step of length L to
        // max(0, L - amount) exactly (every slot gives min(amount, its bytes) per server).
        ws.length.assign(ws.begin.size(), 0);
        for (std::size_t k = 0; k + 1 < ws.begin.size(); ++k)
            for (std::size_t j = ws.begin[k]; j < ws.begin[k + 1]; ++j)
                ws.length[k] = std::max(ws.length[k], sc.longest(sc.slots[ws.members[j]]));
        for (std::size_t k = 0; k + 1 < ws.begin.size(); ++k)
            if (ws.begin[k + 1] > ws.begin[k]) ws.order.push_back(k);
    } else {
        for (std::size_t k = 1; k < ws.length.size(); ++k) ws.order.push_back(k);
        if (ws.order.empty()) return 0;
    }
    auto length = [&](std::size_t step) { return ws.length[step]; };
    stable_sort_by(ws.order, ws.keys, length);
    ws.rising.clear();
    ws.falling.clear();
    if (drop > 0) {
        ws.rising.push_back(ws.order.back());
        ws.falling.assign(ws.order.begin(), ws.order.end() - 1);
    } else {
        for (std::size_t j = 0; j < ws.order.size(); ++j) (j % 2 == 0 ? ws.rising : ws.falling).push_back(ws.order[j]);
        // A step shorter than `edge` ends the schedule rather than starting it: first, it would
        // leave the next step's balancing a step too short to hide it; last, it exposes at most
        // its own few bytes.
        if (ws.rising.size() > 1 && length(ws.rising.front()) < edge) {
            ws.falling.insert(ws.falling.begin(), ws.rising.front());
            ws.rising.erase(ws.rising.begin());
        }
    }
    // rising is ascending; falling (ascending too) is walked from the end backwards.
    // The peak (the longest step) belongs to the rising side; the falling side ramps towards the
    // end, so it is built ascending from the last step backwards.
    if (!ws.falling.empty() && !ws.rising.empty() && length(ws.falling.back()) > length(ws.rising.back()))
        std::swap(ws.falling.back(), ws.rising.back());
    // Splits `amount` off every slot of `step` into new slots numbered `step_number`; the part
    // keeps each slot's permutation, each server sending min(amount, its bytes).
    auto carve = [&](std::size_t step, std::int64_t amount, std::int32_t step_number) {
        if constexpr (materialise) {
            for (std::size_t j = ws.begin[step]; j < ws.begin[step + 1]; ++j) {
                const auto x = sc.slots[ws.members[j]];
                const std::size_t b = sc.add_bytes();
                std::int64_t* nb = sc.bytes.data() + b * us;
                std::int64_t* xb = sc.bytes.data() + x.bytes * us;
                for (std::size_t s = 0; s < us; ++s) {
                    nb[s] = std::min(amount, xb[s]);
                    xb[s] -= nb[s];
                }
                sc.slots.push_back({x.rail, step_number, x.perm, b});
            }
        } else {
            (void)step_number;
        }
        ws.length[step] -= std::min(amount, ws.length[step]);
    };
    // Makes an ascending list of steps grow by at most `growth` from `first` bytes: the steps of
    // a side are numbered 1, 2, ... in order (`sign` tells the sides apart until both are known).
    // Returns how many there are and the length of the last.
    auto ramp = [&](const std::vector<std::size_t>& side, std::int32_t sign, std::int64_t first) {
        std::int32_t number = 0;
        std::int64_t last = 0;
        std::int64_t limit = first;
        for (const std::size_t step : side) {
            while (growth > 1 && length(step) - limit > limit / 4 && limit > 0) {
                // Carve `limit` off unless that would leave a shorter remainder behind it; then
                // cut the step in two equal halves instead (each under the limit).
                const std::int64_t n = length(step);
                const std::int64_t cut = n - limit >= limit ? limit : n / 2;
                carve(step, cut, sign * ++number);
                last = cut;
                // Strictly growing, even where rounding would keep a tiny limit in place.
                limit = std::max(cut + 1, saturate(growth * static_cast<double>(cut)));
            }
            const std::int64_t n = length(step);
            if (n > 0) {
                ++number;
                last = n;
                if constexpr (materialise)
                    for (std::size_t j = ws.begin[step]; j < ws.begin[step + 1]; ++j)
                        sc.slots[ws.members[j]].step = sign * number;
            }
            limit = std::max(limit, saturate(growth * static_cast<double>(std::max(n, edge))));
        }
        return std::pair(number, last);
    };
    if (first <= 0) first = std::max(edge, saturate(growth * static_cast<double>(edge)));
    const std::int32_t rising = ramp(ws.rising, 1, first).first;
    auto [falling, next] = ramp(ws.falling, -1, edge);
    if (falling == 0) next = edge;
    // With `drop`, the rising side ends with what is left of the longest step (never empty: a
    // carve leaves a remainder). The step after it takes its redistribution: split parts off
    // it, each the next step after it, until that holds.
    while (drop > 0 && rising > 0) {
        const std::int64_t peak = length(ws.rising.back());
        // Strictly growing, even where rounding would keep a tiny `next` in place.
        const std::int64_t allowed = next == 0 ? 0 : std::max(next + 1, saturate(drop * static_cast<double>(next)));
        if (peak <= allowed || allowed == 0 || peak < 2) break;
        next = std::min(allowed, peak / 2);
        carve(ws.rising.back(), next, -++falling);
    }
    if constexpr (materialise) {
        sc.slots.erase(std::remove_if(sc.slots.begin(), sc.slots.end(),
                                      [&](const stage_schedule::slot& x) { return sc.longest(x) == 0; }),
                       sc.slots.end());
        // Rising steps keep their numbers; the falling side follows, its last-built step first.
        for (auto& x : sc.slots)
            if (x.step < 0) x.step = rising + falling + 1 + x.step;
        sc.last_step = rising + falling;
    }
    return rising + falling;
}

/// Which steps assign_rails chooses rails for.
enum class rail_steps { all, first, falling };

/// Chooses which rail carries which slot in some steps of a rail-packed schedule. Within a step
/// every rail is an independent one-to-one fabric and the slots have one length, so any
/// one-to-one choice keeps the step's scale-out time and every pair's bytes; what it changes is
/// which GPUs' bytes can travel without a scale-up move (a rail's stream starts with its own
/// GPU's bytes and ends with the bytes that land on its GPU, see balance.hpp):
///  - in the first step, rail i of server s should carry what GPU i of s sends itself (`sent`):
///    no step before it hides a gather;
///  - in the steps after the longest one and at most half as long, from the last back, rail i
///    should carry what GPU i of the destination receives (`received`): these short steps hide
///    little redistribution, and nothing hides the last step's. (A step nearly as long as the
///    longest hides its own; moving its slots only moves balancing and redistribution around,
///    which measured worse.)
/// Each such step takes the choice that covers the most of those bytes, a (pair, rail) counting
/// only what the steps chosen before left of it (an assignment problem, solved exactly by
/// min_cost_assignment; O(G^3 + G^2 S) per step). A step keeps its rails unless another choice
/// covers more. `lengths` are the steps' (step_lengths); `sent` and `received` have an entry
/// per (s * S + d) * G + i. `which` picks the steps: both kinds, or the first or the falling
/// side's only (the choices are independent: each kind starts from its own bytes).
inline void assign_rails(stage_schedule& sc, std::span<const std::int64_t> lengths,
                         std::span<const std::int64_t> sent, std::span<const std::int64_t> received,
                         schedule_workspace& ws, rail_steps which = rail_steps::all) {
    if (sc.slots.empty()) return;
    const auto us = static_cast<std::size_t>(sc.servers);
    const auto ug = static_cast<std::size_t>(sc.rails);
    slots_by_step(sc, ws.begin, ws.members);
    const auto peak = static_cast<std::size_t>(std::max_element(lengths.begin(), lengths.end()) - lengths.begin());
    const auto choose = [&](std::size_t step) {
        const std::size_t first = ws.begin[step];
        const std::size_t count = ws.begin[step + 1] - first;
        if (count == 0) return;
        ws.score.assign(count * ug, 0);
        ws.varies.resize(count);
        std::int64_t now = 0;   // what the slots cover on their rails
        std::int64_t bound = 0; // what they would cover each on its best rail
        std::int64_t top = 0;
        for (std::size_t x = 0; x < count; ++x) {
            const auto& slot = sc.slots[ws.members[first + x]];
            const auto perm = sc.perm_of(slot);
            const auto bytes = sc.bytes_of(slot);
            std::int64_t* score = ws.score.data() + x * ug;
            for (std::size_t s = 0; s < us; ++s) {
                const auto d = static_cast<std::size_t>(perm[s]);
                if (d == s || bytes[s] == 0) continue;
                const std::int64_t* cover = ws.cover.data() + (s * us + d) * ug;
                for (std::size_t r = 0; r < ug; ++r) score[r] += std::min(bytes[s], cover[r]);
            }
            now += score[static_cast<std::size_t>(slot.rail)];
            std::int64_t most = score[0];
            std::int64_t least = score[0];
            for (std::size_t r = 1; r < ug; ++r) {
                most = std::max(most, score[r]);
                least = std::min(least, score[r]);
            }
            ws.varies[x] = most != least;
            bound += most;
            top = std::max(top, most);
        }
        if (now < bound) { // else the slots' rails are a best choice already
            // Every slot on its best rail (its own on a tie) is a best choice when no two slots
            // want the same rail. Else the assignment problem decides, among the slots whose
            // rail matters; those that cover as much anywhere take the rails left.
            ws.rail_of.resize(count);
            ws.taken.assign(ug, 0);
            bool clash = false;
            for (std::size_t x = 0; x < count; ++x) {
                const std::int64_t* score = ws.score.data() + x * ug;
                auto rail = static_cast<std::size_t>(sc.slots[ws.members[first + x]].rail);
                const std::size_t best = static_cast<std::size_t>(std::max_element(score, score + ug) - score);
                if (score[best] > score[rail]) rail = best;
                clash = clash || ws.taken[rail] != 0;
                ws.taken[rail] = 1;
                ws.rail_of[x] = rail;
            }
            if (clash) {
                ws.rows.clear();
                for (std::size_t x = 0; x < count; ++x)
                    if (ws.varies[x]) ws.rows.push_back(x);
                // Costs are what a choice leaves uncovered, scaled down where G of them could
                // overflow.
                int shift = 0;
                while ((top >> shift) > (std::int64_t{1} << 60) / static_cast<std::int64_t>(ug)) ++shift;
                ws.cost.resize(ws.rows.size() * ug);
                for (std::size_t i = 0; i < ws.rows.size(); ++i)
                    for (std::size_t r = 0; r < ug; ++r)
                        ws.cost[i * ug + r] = (top - ws.score[ws.rows[i] * ug + r]) >> shift;
                ws.pick.resize(ws.rows.size());
                min_cost_assignment(ws.cost, ws.rows.size(), ug, ws.pick, ws.assignment);
                ws.taken.assign(ug, 0);
                for (std::size_t i = 0; i < ws.rows.size(); ++i) {
                    ws.rail_of[ws.rows[i]] = ws.pick[i];
                    ws.taken[ws.pick[i]] = 1;
                }
                for (std::size_t x = 0, i = 0, free = 0; x < count; ++x) {
                    if (i < ws.rows.size() && ws.rows[i] == x) {
                        ++i;
                        continue;
                    }
                    auto rail = static_cast<std::size_t>(sc.slots[ws.members[first + x]].rail);
                    if (ws.taken[rail] != 0) {
                        while (ws.taken[free] != 0) ++free;
                        rail = free;
                    }
                    ws.taken[rail] = 1;
                    ws.rail_of[x] = rail;
                }
            }
            std::int64_t best = 0;
            for (std::size_t x = 0; x < count; ++x) best += ws.score[x * ug + ws.rail_of[x]];
            if (best > now)
                for (std::size_t x = 0; x < count; ++x)
                    sc.slots[ws.members[first + x]].rail = static_cast<std::int32_t>(ws.rail_of[x]);
        }
        for (std::size_t x = 0; x < count; ++x) {
            const auto& slot = sc.slots[ws.members[first + x]];
            const auto perm = sc.perm_of(slot);
            const auto bytes = sc.bytes_of(slot);
            for (std::size_t s = 0; s < us; ++s) {
                const auto d = static_cast<std::size_t>(perm[s]);
                if (d == s) continue;
                std::int64_t& left = ws.cover[(s * us + d) * ug + static_cast<std::size_t>(slot.rail)];
                left -= std::min(left, bytes[s]);
            }
        }
    };
    if (which != rail_steps::first) {
        ws.cover.assign(received.begin(), received.end());
        for (std::size_t k = ws.begin.size() - 2; k > peak; --k)
            if (lengths[k] <= lengths[peak] / 2) choose(k);
    }
    if (which != rail_steps::falling) {
        ws.cover.assign(sent.begin(), sent.end());
        choose(1);
    }
}

/// What the first step's rails can send without a gather before it: the least, over its slots
/// and the servers that send in them, of what the slot's GPU itself sends to the slot's
/// destination (`sent`, as for assign_rails), and the step's length. A slot longer than its
/// GPU's own bytes gathers the rest before the first step, where nothing hides it.
struct first_step_cover {
    std::int64_t own = INT64_MAX;
    std::int64_t length = 0;
};

inline first_step_cover cover_of_first_step(const stage_schedule& sc, std::span<const std::int64_t> sent) {
    const auto us = static_cast<std::size_t>(sc.servers);
    const auto ug = static_cast<std::size_t>(sc.rails);
    first_step_cover c;
    for (const auto& x : sc.slots) {
        if (x.step != 1) continue;
        const auto perm = sc.perm_of(x);
        const auto bytes = sc.bytes_of(x);
        for (std::size_t s = 0; s < us; ++s) {
            if (bytes[s] == 0) continue;
            c.length = std::max(c.length, bytes[s]);
            const std::size_t pair = s * us + static_cast<std::size_t>(perm[s]);
            c.own = std::min(c.own, sent[pair * ug + static_cast<std::size_t>(x.rail)]);
        }
    }
    return c;
}

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

} // namespace fast::detail
