#pragma once
// Shaping (the planner's stage 3, second part): the steps of a packed schedule ordered as a
// pyramid, short - long - short, with ramps, so that the scale-up work of each step hides under
// its neighbours.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "checked.hpp"
#include "schedule.hpp"
#include "sorting.hpp"
#include "tuning.hpp"

namespace fast::detail {

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
            while (growth > 1 && length(step) - limit > limit / tuning::ramp_slack_divisor && limit > 0) {
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
} // namespace fast::detail
