#pragma once
/// \file rank_program.hpp
/// One rank's part of a plan: the transfers it takes part in (as sender, receiver, or both for
/// a copy to itself), step by step, in plan order, with what it needs to run them. This is what
/// a runtime carries out on each rank (fast::planner::make_rank computes it without the whole
/// plan); the whole plan stays for tools and is what proves each rank's program right
/// (restrict_to_rank below, tests/unit/rank_program_test.cpp).
///
/// Matching: a message is named by its two ranks and its `pair_index`, the how-many-th
/// transfer between those two ranks (in that direction) in plan order; both ends compute the same
/// index from their own programs, so tags need no whole-plan transfer numbers.

#include <cstdint>
#include <span>
#include <vector>

#include "plan.hpp"

namespace fast {

struct rank_transfer {
    /// The transfer as in the whole plan, except that the other rank's offset reads 0 (each side
    /// posts its own buffer, so a rank's program needs no other rank's layout).
    fast::transfer transfer;
    /// Its step. Steps are numbered alike on every rank (a rank takes part in some of them).
    std::uint32_t step = 0;
    /// How many transfers from transfer.src to transfer.dst come before it in plan order.
    std::uint32_t pair_index = 0;

    friend bool operator==(const rank_transfer&, const rank_transfer&) = default;
};

struct rank_program {
    int rank = 0;
    fast::topology topology;
    /// Steps in the shared numbering: every step of every rank's program is below it.
    std::uint32_t steps = 0;
    /// This rank's scratch, in bytes.
    std::int64_t scratch_bytes = 0;
    /// The plan is incast-free: in each step every rank sends to at most one rank and receives
    /// from at most one rank over scale-out.
    bool one_to_one_scale_out = false;
    /// Step order, plan order within a step.
    std::vector<rank_transfer> transfers;

    friend bool operator==(const rank_program&, const rank_program&) = default;
};

namespace detail {
/// Numbers the transfers of `p` between each pair of ranks (pair_index), in order. `counts`
/// is a workspace of 2 R + 1 zeros (sends by destination, receives by source, copies), left zero.
/// O(transfers).
inline void number_pairs(rank_program& p, std::vector<std::uint32_t>& counts) {
    const auto r = static_cast<std::size_t>(p.topology.ranks());
    if (counts.size() < 2 * r + 1) counts.assign(2 * r + 1, 0);
    auto slot = [&](const transfer& t) -> std::uint32_t& {
        if (t.src == t.dst) return counts[2 * r];
        return t.src == p.rank ? counts[static_cast<std::size_t>(t.dst)] : counts[r + static_cast<std::size_t>(t.src)];
    };
    for (rank_transfer& x : p.transfers) x.pair_index = slot(x.transfer)++;
    for (const rank_transfer& x : p.transfers) slot(x.transfer) = 0;
}
} // namespace detail

/// Rank `rank`'s part of the whole plan `p`: its transfers in step order (the plan's step
/// indices), with other ranks' offsets read as 0. O(transfers + R).
[[nodiscard]] inline rank_program restrict_to_rank(const plan& p, int rank) {
    rank_program out;
    out.rank = rank;
    out.topology = p.topology;
    out.steps = static_cast<std::uint32_t>(p.steps());
    out.one_to_one_scale_out = p.one_to_one_scale_out;
    if (rank >= 0 && static_cast<std::size_t>(rank) < p.scratch_bytes.size())
        out.scratch_bytes = p.scratch_bytes[static_cast<std::size_t>(rank)];
    for (std::size_t k = 0; k < p.steps(); ++k)
        for (const transfer& t : p.step(k)) {
            if (t.src != rank && t.dst != rank) continue;
            rank_transfer x{t, static_cast<std::uint32_t>(k), 0};
            if (t.src != rank) x.transfer.src_offset = 0;
            if (t.dst != rank) x.transfer.dst_offset = 0;
            out.transfers.push_back(x);
        }
    std::vector<std::uint32_t> counts;
    detail::number_pairs(out, counts);
    return out;
}

} // namespace fast
