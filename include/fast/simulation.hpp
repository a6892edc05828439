#pragma once
/// \file simulation.hpp
/// Walking a plan in a simulator (SimGrid, ns-3, ASTRA-sim, an in-house flow model): the
/// transfers as a dependency graph, and the per-rank programs (plan.hpp's rank_view) grouped
/// into steps.
///
/// The execution contract (docs/architecture.md): each rank works through the steps in order and
/// starts step k when all of its own transfers of its previous step (as sender or receiver) have
/// finished; a transfer starts when both its sender and its receiver have started its step. So a
/// transfer of step k depends exactly on the transfers of the last step before k in which its
/// source takes part and of the last step before k in which its destination takes part (a rank
/// that sits out steps waits on nothing from them). A simulator can honour the contract either
/// way:
///  - event-driven, per transfer: start a transfer once all of dependencies(t) have finished
///    (make_dependency_graph);
///  - one actor per rank: post the rank's transfers of one step, wait for all of them, go on to
///    its next step (make_rank_steps); a transfer runs once both of its ends have posted it.
/// Both give the same start times. Everything here is deterministic: the same plan gives the
/// same graph, byte for byte.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "plan.hpp"

namespace fast {

/// The transfers of a plan as a directed acyclic graph.
///
/// Guarantees: transfer indices are those of plan.transfers; every dependency of transfer t lies
/// in an earlier step than t (so it has a smaller index, and plan order is a topological order);
/// each transfer's dependencies are sorted ascending and free of duplicates; a transfer in the
/// first step in which both of its ranks take part has none.
struct dependency_graph {
    std::vector<std::uint32_t> step;  ///< per transfer: its step
    std::vector<std::size_t> offsets; ///< T + 1: transfer t's dependencies are [offsets[t], offsets[t+1])
    std::vector<std::size_t> dependencies;

    [[nodiscard]] std::size_t size() const noexcept { return step.size(); }

    /// The transfers that must have finished before transfer `t` may start.
    [[nodiscard]] std::span<const std::size_t> of(std::size_t t) const noexcept {
        return {dependencies.data() + offsets[t], offsets[t + 1] - offsets[t]};
    }
};

/// One step of one rank's program: the entries [first, last) of rank_view::of(rank), all of
/// step `step`.
struct rank_step {
    std::uint32_t step = 0;
    std::size_t first = 0;
    std::size_t last = 0;
};

/// Each rank's program as the steps it takes part in, in order; what a per-rank actor walks.
struct rank_steps {
    fast::rank_view view;             ///< the rank's transfers (a self-copy appears once)
    std::vector<std::size_t> offsets; ///< R + 1: rank r's steps are [offsets[r], offsets[r+1])
    std::vector<rank_step> steps;

    /// The steps rank `rank` takes part in, in plan order.
    [[nodiscard]] std::span<const rank_step> of(int rank) const noexcept {
        const auto r = static_cast<std::size_t>(rank);
        return {steps.data() + offsets[r], offsets[r + 1] - offsets[r]};
    }

    /// The entries of one of rank `rank`'s steps (indices into plan.transfers with their step).
    [[nodiscard]] std::span<const rank_entry> entries(int rank, const rank_step& s) const noexcept {
        return view.of(rank).subspan(s.first, s.last - s.first);
    }
};

/// Groups make_rank_view(p) by step. O(transfers + R).
[[nodiscard]] inline rank_steps make_rank_steps(const plan& p) {
    rank_steps out;
    out.view = make_rank_view(p);
    const auto r = static_cast<std::size_t>(p.topology.ranks());
    out.offsets.assign(r + 1, 0);
    for (std::size_t rank = 0; rank < r; ++rank) {
        const auto entries = out.view.of(static_cast<int>(rank));
        for (std::size_t k = 0; k < entries.size();) {
            std::size_t end = k + 1;
            while (end < entries.size() && entries[end].step == entries[k].step) ++end;
            out.steps.push_back({entries[k].step, k, end});
            k = end;
        }
        out.offsets[rank + 1] = out.steps.size();
    }
    return out;
}

/// Builds the dependency graph of `p`: transfer t of step k depends on every transfer of the
/// last step before k in which t.src takes part, and of the last step before k in which t.dst
/// takes part (the union; a transfer in both appears once). O(transfers + sum over transfers of
/// the sizes of those two steps at its two ranks) time and output.
[[nodiscard]] inline dependency_graph make_dependency_graph(const plan& p) {
    const rank_steps program = make_rank_steps(p);
    const std::size_t n = p.transfers.size();
    dependency_graph g;
    g.step.assign(n, 0);
    g.offsets.assign(n + 1, 0);
    // For each transfer and each of its (one or two) ranks: that rank's step index within its own
    // program. Walk each rank's program once.
    std::vector<std::size_t> src_step(n, 0);
    std::vector<std::size_t> dst_step(n, 0);
    for (int rank = 0; rank < p.topology.ranks(); ++rank) {
        const auto steps = program.of(rank);
        const std::size_t base = program.offsets[static_cast<std::size_t>(rank)];
        for (std::size_t s = 0; s < steps.size(); ++s)
            for (const rank_entry& e : program.entries(rank, steps[s])) {
                const transfer& t = p.transfers[e.index];
                g.step[e.index] = e.step;
                if (t.src == rank) src_step[e.index] = base + s;
                if (t.dst == rank) dst_step[e.index] = base + s;
            }
    }
    // The previous step of a rank's program step, or none at a rank's first step.
    auto previous = [&](int rank, std::size_t global) -> const rank_step* {
        return global == program.offsets[static_cast<std::size_t>(rank)] ? nullptr : &program.steps[global - 1];
    };
    std::vector<std::size_t> scratch;
    for (std::size_t i = 0; i < n; ++i) {
        const transfer& t = p.transfers[i];
        scratch.clear();
        if (const rank_step* s = previous(t.src, src_step[i]))
            for (const rank_entry& e : program.entries(t.src, *s)) scratch.push_back(e.index);
        const std::size_t from_src = scratch.size();
        if (t.dst != t.src)
            if (const rank_step* s = previous(t.dst, dst_step[i]))
                for (const rank_entry& e : program.entries(t.dst, *s)) scratch.push_back(e.index);
        // Both halves are ascending (a rank's entries of one step are in plan order): merge and
        // drop the transfers the two ranks shared.
        std::inplace_merge(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(from_src), scratch.end());
        scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
        g.dependencies.insert(g.dependencies.end(), scratch.begin(), scratch.end());
        g.offsets[i + 1] = g.dependencies.size();
    }
    return g;
}

} // namespace fast
