#pragma once
/// \file plan.hpp
/// The plan: the contract between planners and everyone else (verifier, cost model, exporters,
/// executor, simulators).
///
/// A plan is an ordered list of steps; a step is a set of transfers that may run concurrently.
/// Each rank has three buffers: `send` (the user's, read-only, packed MPI_Alltoallv layout),
/// `recv` (the user's; the block from rank j lands at its packed displacement) and `scratch`
/// (staging, plan.scratch_bytes[rank] bytes). A transfer in step k reads only bytes that were in
/// `send` at the start or were written by steps before k. Each rank works through the steps in
/// order and starts step k when its own transfers of step k - 1 have finished; there is no
/// global barrier.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topology.hpp"

namespace fast {

/// Which fabric a transfer uses. A copy from a rank to itself is scale_up.
enum class tier : std::uint8_t { scale_up, scale_out };

/// Which of a rank's buffers a transfer reads or writes.
enum class buffer : std::uint8_t { send, recv, scratch };

[[nodiscard]] constexpr std::string_view to_string(tier t) noexcept {
    return t == tier::scale_up ? "scale_up" : "scale_out";
}

[[nodiscard]] constexpr std::string_view to_string(buffer b) noexcept {
    return b == buffer::send ? "send" : b == buffer::recv ? "recv" : "scratch";
}

/// `bytes` bytes from src's `src_buffer` at `src_offset` to dst's `dst_buffer` at `dst_offset`.
struct transfer {
    std::int64_t bytes = 0;
    std::int64_t src_offset = 0;
    std::int64_t dst_offset = 0;
    std::int32_t src = 0;
    std::int32_t dst = 0;
    fast::tier tier = fast::tier::scale_up;
    buffer src_buffer = buffer::send;
    buffer dst_buffer = buffer::recv;

    friend bool operator==(const transfer&, const transfer&) = default;
};

/// An ordered list of steps of transfers (stored flat: step k is
/// transfers[step_offsets[k], step_offsets[k + 1])).
struct plan {
    fast::topology topology;
    std::string scheduler;
    /// The plan claims that within every step each rank sends to at most one rank and receives
    /// from at most one rank over scale-out (incast-free); the verifier checks the claim.
    bool one_to_one_scale_out = false;
    /// Per rank: its scale-out rate in GB/s on an uneven fabric (its share of its NICs; 0: its
    /// NIC is down, so no scale-out transfer may touch it). Empty: topology.scale_out_gbps for all.
    std::vector<double> nic_gbps;
    std::vector<std::int64_t> scratch_bytes; ///< per rank
    std::vector<transfer> transfers;
    std::vector<std::size_t> step_offsets{0};

    [[nodiscard]] std::size_t steps() const noexcept { return step_offsets.size() - 1; }

    /// Rank `rank`'s scale-out rate in GB/s (nic_gbps, or the topology's).
    [[nodiscard]] double scale_out_gbps(int rank) const noexcept {
        return nic_gbps.empty() ? topology.scale_out_gbps : nic_gbps[static_cast<std::size_t>(rank)];
    }

    [[nodiscard]] std::span<const transfer> step(std::size_t k) const noexcept {
        return {transfers.data() + step_offsets[k], step_offsets[k + 1] - step_offsets[k]};
    }

    /// Closes the current step: the transfers added since the last call form the next step.
    void end_step() { step_offsets.push_back(transfers.size()); }

    friend bool operator==(const plan&, const plan&) = default;
};

/// Number of scale-out stages: the largest number of steps in which one rank sends over
/// scale-out. For FAST plans this is the stage count per rail. O(transfers).
[[nodiscard]] inline std::size_t count_stages(const plan& p) {
    std::vector<std::size_t> count(static_cast<std::size_t>(p.topology.ranks()), 0);
    std::vector<std::size_t> last(count.size(), static_cast<std::size_t>(-1));
    std::size_t best = 0;
    for (std::size_t k = 0; k < p.steps(); ++k)
        for (const transfer& t : p.step(k))
            if (t.tier == tier::scale_out) {
                const auto s = static_cast<std::size_t>(t.src);
                if (last[s] != k) {
                    last[s] = k;
                    best = std::max(best, ++count[s]);
                }
            }
    return best;
}

/// One entry of a rank's program: transfer `index` (into plan.transfers) of step `step`.
struct rank_entry {
    std::uint32_t step = 0;
    std::size_t index = 0;
};

/// Per-rank view of a plan: for each rank, the transfers it takes part in (as sender or
/// receiver), in step order. What an executor or a simulator's per-rank actor walks.
struct rank_view {
    std::vector<std::size_t> offsets; ///< R + 1: rank r's entries are [offsets[r], offsets[r+1])
    std::vector<rank_entry> entries;

    [[nodiscard]] std::span<const rank_entry> of(int rank) const noexcept {
        const auto r = static_cast<std::size_t>(rank);
        return {entries.data() + offsets[r], offsets[r + 1] - offsets[r]};
    }
};

/// Builds the per-rank view. A copy to itself appears once. O(transfers + R).
[[nodiscard]] inline rank_view make_rank_view(const plan& p) {
    const auto r = static_cast<std::size_t>(p.topology.ranks());
    rank_view v;
    v.offsets.assign(r + 1, 0);
    for (const transfer& t : p.transfers) {
        ++v.offsets[static_cast<std::size_t>(t.src) + 1];
        if (t.dst != t.src) ++v.offsets[static_cast<std::size_t>(t.dst) + 1];
    }
    for (std::size_t k = 0; k < r; ++k) v.offsets[k + 1] += v.offsets[k];
    v.entries.resize(v.offsets[r]);
    std::vector<std::size_t> fill(v.offsets.begin(), v.offsets.end() - 1);
    for (std::size_t k = 0; k < p.steps(); ++k)
        for (std::size_t i = p.step_offsets[k]; i < p.step_offsets[k + 1]; ++i) {
            const transfer& t = p.transfers[i];
            v.entries[fill[static_cast<std::size_t>(t.src)]++] = {static_cast<std::uint32_t>(k), i};
            if (t.dst != t.src) v.entries[fill[static_cast<std::size_t>(t.dst)]++] = {static_cast<std::uint32_t>(k), i};
        }
    return v;
}

} // namespace fast
