#pragma once
// Shaping (the planner's stage 3, second part): the steps of a packed schedule ordered as a
// pyramid, short - long - short, with ramps, so that the scale-up work of each step hides under
// its neighbours.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "checked.hpp"
#include "schedule.hpp"
#include "sorting.hpp"
#include "tuning.hpp"

namespace fast::detail {

/// What shapes a schedule's steps (see shape_steps).
struct shape_params {
    double growth = 0;      ///< the most a step may grow over its neighbour towards the nearer end
    std::int64_t edge = 0;  ///< the last step's limit, and the shortest step worth a split
    double drop = 0;        ///< > 0: hot receivers, the longest step first (see shape_steps)
    std::int64_t first = 0; ///< > 0: the first step's limit instead of growth times edge
};

/// Buffers of shape_steps and count_shaped_steps, kept between plans.
struct shaping_workspace {
    std::vector<std::int64_t> length;                       // per step: its length, shortened by every carve
    std::vector<std::size_t> order;                         // the steps, by length
    std::vector<std::pair<std::int64_t, std::size_t>> keys; // for sorting `order` stably
    std::vector<std::size_t> rising;                        // the steps of the pyramid's two sides, ascending
    std::vector<std::size_t> falling;
    std::vector<std::size_t> begin; // shape_steps: step k's slots are members[begin[k], begin[k + 1])
    std::vector<std::size_t> members;
};

namespace shaping {

// The shaping decisions below work on step lengths alone; what they mean for a schedule's
// slots is up to a `Slots` object: carve(step, amount, number) splits `amount` off every slot of
// `step` into new slots numbered `number`, number(step, number) numbers the step's slots.
// Numbers are 1, 2, ... on the rising side, -1, -2, ... from the end on the falling side until
// both sides are known.

// Sorts ws.order by length and deals it to the two sides: alternately into a pyramid, or with
// hot receivers (drop > 0) the longest step alone rising and every other falling.
inline void split_sides(const shape_params& p, shaping_workspace& ws) {
    const auto length = [&](std::size_t step) { return ws.length[step]; };
    stable_sort_by(ws.order, ws.keys, length);
    ws.rising.clear();
    ws.falling.clear();
    if (p.drop > 0) {
        ws.rising.push_back(ws.order.back());
        ws.falling.assign(ws.order.begin(), ws.order.end() - 1);
    } else {
        for (std::size_t j = 0; j < ws.order.size(); ++j) (j % 2 == 0 ? ws.rising : ws.falling).push_back(ws.order[j]);
        // A step shorter than `edge` ends the schedule rather than starting it: first, it would
        // leave the next step's balancing a step too short to hide it; last, it exposes at most
        // its own few bytes.
        if (ws.rising.size() > 1 && length(ws.rising.front()) < p.edge) {
            ws.falling.insert(ws.falling.begin(), ws.rising.front());
            ws.rising.erase(ws.rising.begin());
        }
    }
    // rising is ascending; falling (ascending too) is walked from the end backwards.
    // The peak (the longest step) belongs to the rising side; the falling side ramps towards the
    // end, so it is built ascending from the last step backwards.
    if (!ws.falling.empty() && !ws.rising.empty() && length(ws.falling.back()) > length(ws.rising.back()))
        std::swap(ws.falling.back(), ws.rising.back());
}

// Splits `amount` off `step`: its length falls by as much (every slot gives min(amount, its
// bytes) per server, so a step of length L keeps max(0, L - amount)).
template <class Slots>
void carve(std::size_t step, std::int64_t amount, std::int32_t number, shaping_workspace& ws, Slots& slots) {
    slots.carve(step, amount, number);
    ws.length[step] -= std::min(amount, ws.length[step]);
}

struct side_shape {
    std::int32_t steps = 0; // how many the side has
    std::int64_t last = 0;  // the length of its last-built (longest) step
};

// Makes an ascending list of steps grow by at most `growth` from `limit` bytes, splitting the
// longer ones: the steps of a side are numbered 1, 2, ... in order (`sign` tells the sides
// apart until both are known).
template <class Slots>
side_shape ramp_side(const std::vector<std::size_t>& side, std::int32_t sign, std::int64_t limit, const shape_params& p,
                     shaping_workspace& ws, Slots& slots) {
    side_shape out;
    for (const std::size_t step : side) {
        while (p.growth > 1 && ws.length[step] - limit > limit / tuning::ramp_slack_divisor && limit > 0) {
            // Carve `limit` off unless that would leave a shorter remainder behind it; then
            // cut the step in two equal halves instead (each under the limit).
            const std::int64_t n = ws.length[step];
            const std::int64_t cut = n - limit >= limit ? limit : n / 2;
            carve(step, cut, sign * ++out.steps, ws, slots);
            out.last = cut;
            // Strictly growing, even where rounding would keep a tiny limit in place.
            limit = std::max(cut + 1, saturate(p.growth * static_cast<double>(cut)));
        }
        const std::int64_t n = ws.length[step];
        if (n > 0) {
            ++out.steps;
            out.last = n;
            slots.number(step, sign * out.steps);
        }
        limit = std::max(limit, saturate(p.growth * static_cast<double>(std::max(n, p.edge))));
    }
    return out;
}

// With `drop`, the rising side ends with what is left of the longest step (never empty: a carve
// leaves a remainder). The step after it takes its redistribution: parts are split off it,
// each the next step after it, until that step is at least 1 / drop of it. `falling` is the
// falling side as ramp_side left it; returns its new step count.
template <class Slots>
std::int32_t drop_after_peak(side_shape falling, const shape_params& p, shaping_workspace& ws, Slots& slots) {
    std::int64_t next = falling.steps == 0 ? p.edge : falling.last;
    for (;;) {
        const std::int64_t peak = ws.length[ws.rising.back()];
        // Strictly growing, even where rounding would keep a tiny `next` in place.
        const std::int64_t allowed = next == 0 ? 0 : std::max(next + 1, saturate(p.drop * static_cast<double>(next)));
        if (peak <= allowed || allowed == 0 || peak < 2) break;
        next = std::min(allowed, peak / 2);
        carve(ws.rising.back(), next, -++falling.steps, ws, slots);
    }
    return falling.steps;
}

// The shape of the steps ws.order with lengths ws.length, told to `slots`. Returns how many
// steps the rising and the falling side have.
template <class Slots>
std::pair<std::int32_t, std::int32_t> shape(const shape_params& p, shaping_workspace& ws, Slots& slots) {
    split_sides(p, ws);
    const std::int64_t first =
        p.first > 0 ? p.first : std::max(p.edge, saturate(p.growth * static_cast<double>(p.edge)));
    const std::int32_t rising = ramp_side(ws.rising, 1, first, p, ws, slots).steps;
    side_shape falling = ramp_side(ws.falling, -1, p.edge, p, ws, slots);
    if (p.drop > 0 && rising > 0) falling.steps = drop_after_peak(falling, p, ws, slots);
    return {rising, falling.steps};
}

// shape_steps' hands on the schedule.
struct slot_shaper {
    stage_schedule& sc;
    const shaping_workspace& ws;

    // Every slot of `step` gives min(amount, its bytes) per server to a new slot numbered
    // `number` with its rail and permutation.
    void carve(std::size_t step, std::int64_t amount, std::int32_t number) {
        const auto us = static_cast<std::size_t>(sc.servers);
        for (std::size_t j = ws.begin[step]; j < ws.begin[step + 1]; ++j) {
            const auto x = sc.slots[ws.members[j]]; // a copy: push_back below may move the slots
            const std::size_t b = sc.add_bytes();
            std::int64_t* part = sc.bytes.data() + b * us;
            std::int64_t* rest = sc.bytes.data() + x.bytes * us;
            for (std::size_t s = 0; s < us; ++s) {
                part[s] = std::min(amount, rest[s]);
                rest[s] -= part[s];
            }
            sc.slots.push_back({x.rail, number, x.perm, b});
        }
    }
    void number(std::size_t step, std::int32_t number) {
        for (std::size_t j = ws.begin[step]; j < ws.begin[step + 1]; ++j) sc.slots[ws.members[j]].step = number;
    }
};

// count_shaped_steps' hands: nothing to change, only lengths.
struct step_counter {
    void carve(std::size_t, std::int64_t, std::int32_t) noexcept {}
    void number(std::size_t, std::int32_t) noexcept {}
};

} // namespace shaping

/// Orders the steps of `sc` as a pyramid and adds ramps.
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
/// Returns the number of steps. O(slots + steps log steps).
inline std::int32_t shape_steps(stage_schedule& sc, const shape_params& p, shaping_workspace& ws) {
    if (sc.slots.empty()) return sc.last_step;
    slots_by_step(sc, ws.begin, ws.members);
    // Every slot gets its new step from the side it ends up on; 0 until then.
    for (auto& x : sc.slots) x.step = 0;
    // Step lengths, computed once: carves keep them (shaping::carve).
    ws.length.assign(ws.begin.size(), 0);
    ws.order.clear();
    for (std::size_t k = 0; k + 1 < ws.begin.size(); ++k) {
        for (std::size_t j = ws.begin[k]; j < ws.begin[k + 1]; ++j)
            ws.length[k] = std::max(ws.length[k], sc.longest(sc.slots[ws.members[j]]));
        if (ws.begin[k + 1] > ws.begin[k]) ws.order.push_back(k);
    }
    shaping::slot_shaper slots{sc, ws};
    const auto [rising, falling] = shaping::shape(p, ws, slots);
    std::erase_if(sc.slots, [&](const stage_schedule::slot& x) { return sc.longest(x) == 0; });
    // Rising steps keep their numbers; the falling side follows, its last-built step first.
    for (auto& x : sc.slots)
        if (x.step < 0) x.step = rising + falling + 1 + x.step;
    sc.last_step = rising + falling;
    return sc.last_step;
}

/// The number of steps shape_steps would give a schedule whose steps have `lengths` (index 0
/// unused, every step non-empty: packed_step_lengths), without the schedule. O(steps log steps).
inline std::int32_t count_shaped_steps(std::span<const std::int64_t> lengths, const shape_params& p,
                                       shaping_workspace& ws) {
    if (lengths.size() <= 1) return 0;
    ws.length.assign(lengths.begin(), lengths.end());
    ws.order.resize(lengths.size() - 1);
    std::iota(ws.order.begin(), ws.order.end(), std::size_t{1});
    shaping::step_counter counter;
    const auto [rising, falling] = shaping::shape(p, ws, counter);
    return rising + falling;
}

} // namespace fast::detail
