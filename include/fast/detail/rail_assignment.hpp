#pragma once
// Rail assignment (the planner's stage 3, last part): which rail carries which slot of a step,
// chosen where it decides whose bytes need no scale-up move (the first step, the short steps at
// the end), as an assignment problem (assignment.hpp).

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "../counts.hpp"
#include "assignment.hpp"
#include "schedule.hpp"
#include "tuning.hpp"

namespace fast::detail {

/// What each GPU sends to and receives from each server pair, as rail assignment weighs it:
/// the exact sums where the shared counts have them (rail detail), else an estimate from the
/// pair's bytes and the GPU's share of its server's bytes across servers (every rank has those).
class rail_bytes {
public:
    void reset(const shared_counts& c) {
        c_ = &c;
        const auto us = static_cast<std::size_t>(c.servers);
        const auto ug = static_cast<std::size_t>(c.gpus_per_server);
        out_share_.resize(us * ug);
        in_share_.resize(us * ug);
        for (std::size_t s = 0; s < us; ++s) {
            std::int64_t out = 0;
            std::int64_t in = 0;
            for (std::size_t a = 0; a < ug; ++a) {
                out += c.gpus[s * ug + a].out;
                in += c.gpus[s * ug + a].in;
            }
            for (std::size_t a = 0; a < ug; ++a) {
                out_share_[s * ug + a] =
                    out > 0 ? static_cast<double>(c.gpus[s * ug + a].out) / static_cast<double>(out) : 0;
                in_share_[s * ug + a] =
                    in > 0 ? static_cast<double>(c.gpus[s * ug + a].in) / static_cast<double>(in) : 0;
            }
        }
    }
    /// What GPU a of server s sends to the GPUs of server d.
    [[nodiscard]] std::int64_t sent(std::size_t s, std::size_t d, std::size_t a) const noexcept {
        const auto us = static_cast<std::size_t>(c_->servers);
        const auto ug = static_cast<std::size_t>(c_->gpus_per_server);
        if (!c_->rail_sent.empty()) return c_->rail_sent[(s * us + d) * ug + a];
        return share(c_->pair[s * us + d], out_share_[s * ug + a]);
    }
    /// What GPU b of server d receives from the GPUs of server s.
    [[nodiscard]] std::int64_t received(std::size_t s, std::size_t d, std::size_t b) const noexcept {
        const auto us = static_cast<std::size_t>(c_->servers);
        const auto ug = static_cast<std::size_t>(c_->gpus_per_server);
        if (!c_->rail_received.empty()) return c_->rail_received[(s * us + d) * ug + b];
        return share(c_->pair[s * us + d], in_share_[d * ug + b]);
    }

private:
    // One IEEE product and a truncation: the same on every rank and compiler.
    static std::int64_t share(std::int64_t bytes, double fraction) noexcept {
        return static_cast<std::int64_t>(static_cast<double>(bytes) * fraction);
    }

    const shared_counts* c_ = nullptr;
    std::vector<double> out_share_; // per GPU: its share of its server's bytes sent across servers
    std::vector<double> in_share_;  // likewise received
};

/// Which steps assign_rails chooses rails for.
enum class rail_steps { all, first, falling };

/// Buffers of assign_rails, kept between plans.
struct rail_workspace {
    std::vector<std::size_t> begin; // step k's slots are members[begin[k], begin[k + 1]) (slots_by_step)
    std::vector<std::size_t> members;
    std::vector<std::int64_t> cover;        // per (pair, rail): the bytes a slot there may still cover
    std::vector<std::uint32_t> cover_stamp; // per pair: the pass whose bytes cover holds
    std::uint32_t pass = 0;                 // filled lazily: a step touches few pairs
    bool cover_received = false;            // this pass covers received bytes (else sent)
    const rail_bytes* source = nullptr;
    std::vector<std::int64_t> score;  // per (slot of the step, rail): the bytes it would cover
    std::vector<std::uint8_t> varies; // per slot of the step: whether its rail matters
    std::vector<std::size_t> rail_of; // per slot of the step: its rail
    std::vector<std::uint8_t> taken;  // per rail: whether a slot has it
    std::vector<std::size_t> rows;    // the slots whose rail matters
    std::vector<std::int64_t> cost;   // their scores as costs
    std::vector<std::size_t> pick;    // their rails
    assignment_workspace assignment;
};

namespace rails {

// The slots of one step: sc.slots[ws.members[first + x]] for x < count.
struct step_slots {
    std::size_t first = 0;
    std::size_t count = 0;
};

struct step_scores {
    std::int64_t now = 0;   // what the slots cover on their rails
    std::int64_t bound = 0; // what they would cover each on its best rail
    std::int64_t top = 0;   // the most one slot would cover on one rail
};

[[nodiscard]] inline const stage_schedule::slot& slot_of(const stage_schedule& sc, step_slots step, std::size_t x,
                                                         const rail_workspace& ws) noexcept {
    return sc.slots[ws.members[step.first + x]];
}

// The cover of pair (s, d), G entries: filled from the pass's bytes on first use.
inline std::int64_t* cover_of(std::size_t s, std::size_t d, std::size_t us, std::size_t ug, rail_workspace& ws) {
    const std::size_t pair = s * us + d;
    std::int64_t* cover = ws.cover.data() + pair * ug;
    if (ws.cover_stamp[pair] != ws.pass) {
        ws.cover_stamp[pair] = ws.pass;
        for (std::size_t r = 0; r < ug; ++r)
            cover[r] = ws.cover_received ? ws.source->received(s, d, r) : ws.source->sent(s, d, r);
    }
    return cover;
}

// Starts a pass whose cover is what GPUs receive (`received`) or send.
inline void start_pass(std::size_t us, std::size_t ug, bool received, rail_workspace& ws) {
    ws.cover.resize(us * us * ug);
    if (ws.cover_stamp.size() != us * us || ws.pass == UINT32_MAX) {
        ws.cover_stamp.assign(us * us, 0);
        ws.pass = 0;
    }
    ++ws.pass;
    ws.cover_received = received;
}

// ws.score[x * G + r]: what slot x would cover on rail r, for each pair it serves the smaller of
// its bytes and what ws.cover has left; ws.varies[x]: whether that differs between rails.
inline step_scores score_step(const stage_schedule& sc, step_slots step, rail_workspace& ws) {
    const auto us = static_cast<std::size_t>(sc.servers);
    const auto ug = static_cast<std::size_t>(sc.rails);
    ws.score.assign(step.count * ug, 0);
    ws.varies.resize(step.count);
    step_scores out;
    for (std::size_t x = 0; x < step.count; ++x) {
        const auto& slot = slot_of(sc, step, x, ws);
        const auto perm = sc.perm_of(slot);
        const auto bytes = sc.bytes_of(slot);
        std::int64_t* score = ws.score.data() + x * ug;
        for (std::size_t s = 0; s < us; ++s) {
            const auto d = static_cast<std::size_t>(perm[s]);
            if (d == s || bytes[s] == 0) continue;
            const std::int64_t* cover = cover_of(s, d, us, ug, ws);
            for (std::size_t r = 0; r < ug; ++r) score[r] += std::min(bytes[s], cover[r]);
        }
        out.now += score[static_cast<std::size_t>(slot.rail)];
        const auto [least, most] = std::minmax_element(score, score + ug);
        ws.varies[x] = *most != *least;
        out.bound += *most;
        out.top = std::max(out.top, *most);
    }
    return out;
}

// Every slot on its best rail, its own on a tie (ws.rail_of); returns whether two slots want
// the same rail.
inline bool best_rails(const stage_schedule& sc, step_slots step, rail_workspace& ws) {
    const auto ug = static_cast<std::size_t>(sc.rails);
    ws.rail_of.resize(step.count);
    ws.taken.assign(ug, 0);
    bool clash = false;
    for (std::size_t x = 0; x < step.count; ++x) {
        const std::int64_t* score = ws.score.data() + x * ug;
        auto rail = static_cast<std::size_t>(slot_of(sc, step, x, ws).rail);
        const auto best = static_cast<std::size_t>(std::max_element(score, score + ug) - score);
        if (score[best] > score[rail]) rail = best;
        clash = clash || ws.taken[rail] != 0;
        ws.taken[rail] = 1;
        ws.rail_of[x] = rail;
    }
    return clash;
}

// The assignment problem decides the rails of the slots whose rail matters (costs: what a
// choice leaves uncovered of `top`, scaled down to half of what min_cost_assignment accepts);
// the others keep their rails where free, else take the first rails left.
inline void assign_clashing(const stage_schedule& sc, step_slots step, std::int64_t top, rail_workspace& ws) {
    const auto ug = static_cast<std::size_t>(sc.rails);
    ws.rows.clear();
    for (std::size_t x = 0; x < step.count; ++x)
        if (ws.varies[x]) ws.rows.push_back(x);
    int shift = 0;
    while ((top >> shift) > (max_cost_sum / 2) / static_cast<std::int64_t>(ug)) ++shift;
    ws.cost.resize(ws.rows.size() * ug);
    for (std::size_t i = 0; i < ws.rows.size(); ++i)
        for (std::size_t r = 0; r < ug; ++r) ws.cost[i * ug + r] = (top - ws.score[ws.rows[i] * ug + r]) >> shift;
    ws.pick.resize(ws.rows.size());
    min_cost_assignment(ws.cost, ws.rows.size(), ug, ws.pick, ws.assignment);
    ws.taken.assign(ug, 0);
    for (std::size_t i = 0; i < ws.rows.size(); ++i) {
        ws.rail_of[ws.rows[i]] = ws.pick[i];
        ws.taken[ws.pick[i]] = 1;
    }
    for (std::size_t x = 0, i = 0, free = 0; x < step.count; ++x) {
        if (i < ws.rows.size() && ws.rows[i] == x) {
            ++i;
            continue;
        }
        auto rail = static_cast<std::size_t>(slot_of(sc, step, x, ws).rail);
        if (ws.taken[rail] != 0) {
            while (ws.taken[free] != 0) ++free;
            rail = free;
        }
        ws.taken[rail] = 1;
        ws.rail_of[x] = rail;
    }
}

// Takes what the step's slots cover on their rails off ws.cover.
inline void consume_cover(const stage_schedule& sc, step_slots step, rail_workspace& ws) {
    const auto us = static_cast<std::size_t>(sc.servers);
    const auto ug = static_cast<std::size_t>(sc.rails);
    for (std::size_t x = 0; x < step.count; ++x) {
        const auto& slot = slot_of(sc, step, x, ws);
        const auto perm = sc.perm_of(slot);
        const auto bytes = sc.bytes_of(slot);
        for (std::size_t s = 0; s < us; ++s) {
            const auto d = static_cast<std::size_t>(perm[s]);
            if (d == s) continue;
            std::int64_t& left = cover_of(s, d, us, ug, ws)[static_cast<std::size_t>(slot.rail)];
            left -= std::min(left, bytes[s]);
        }
    }
}

// Step k takes the rails that cover the most of ws.cover, unless its own rails cover as much.
inline void choose_step(stage_schedule& sc, std::size_t k, rail_workspace& ws) {
    const step_slots step{ws.begin[k], ws.begin[k + 1] - ws.begin[k]};
    if (step.count == 0) return;
    const step_scores scores = score_step(sc, step, ws);
    if (scores.now < scores.bound) { // else the slots' rails are a best choice already
        // Every slot on its best rail is a best choice when no two slots want the same rail.
        if (best_rails(sc, step, ws)) assign_clashing(sc, step, scores.top, ws);
        std::int64_t best = 0;
        for (std::size_t x = 0; x < step.count; ++x)
            best += ws.score[x * static_cast<std::size_t>(sc.rails) + ws.rail_of[x]];
        if (best > scores.now)
            for (std::size_t x = 0; x < step.count; ++x)
                sc.slots[ws.members[step.first + x]].rail = static_cast<std::int32_t>(ws.rail_of[x]);
    }
    consume_cover(sc, step, ws);
}

} // namespace rails

/// Chooses which rail carries which slot in some steps of a rail-packed schedule. Within a step
/// every rail is an independent one-to-one fabric and the slots have one length, so any
/// one-to-one choice keeps the step's scale-out time and every pair's bytes; what it changes is
/// which GPUs' bytes can travel without a scale-up move (a rail's stream starts with its own
/// GPU's bytes and ends with the bytes that land on its GPU, see balancing.hpp):
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
/// covers more. `lengths` are the steps' (step_lengths); `bytes` says what GPUs send and
/// receive. `which` picks the steps: both kinds, or the first or the falling side's only (the
/// choices are independent: each kind starts from its own bytes).
inline void assign_rails(stage_schedule& sc, std::span<const std::int64_t> lengths, const rail_bytes& bytes,
                         rail_workspace& ws, rail_steps which = rail_steps::all) {
    if (sc.slots.empty()) return;
    slots_by_step(sc, ws.begin, ws.members);
    const auto us = static_cast<std::size_t>(sc.servers);
    const auto ug = static_cast<std::size_t>(sc.rails);
    ws.source = &bytes;
    const auto peak = static_cast<std::size_t>(std::max_element(lengths.begin(), lengths.end()) - lengths.begin());
    if (which != rail_steps::first) {
        rails::start_pass(us, ug, true, ws);
        for (std::size_t k = ws.begin.size() - 2; k > peak; --k)
            if (lengths[k] <= lengths[peak] / tuning::short_step_divisor) rails::choose_step(sc, k, ws);
    }
    if (which != rail_steps::falling) {
        rails::start_pass(us, ug, false, ws);
        rails::choose_step(sc, 1, ws);
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

inline first_step_cover cover_of_first_step(const stage_schedule& sc, const rail_bytes& sent) {
    const auto us = static_cast<std::size_t>(sc.servers);
    first_step_cover c;
    for (const auto& x : sc.slots) {
        if (x.step != 1) continue;
        const auto perm = sc.perm_of(x);
        const auto bytes = sc.bytes_of(x);
        for (std::size_t s = 0; s < us; ++s) {
            if (bytes[s] == 0) continue;
            c.length = std::max(c.length, bytes[s]);
            c.own = std::min(c.own, sent.sent(s, static_cast<std::size_t>(perm[s]), static_cast<std::size_t>(x.rail)));
        }
    }
    return c;
}
} // namespace fast::detail
