#pragma once
// FAST without balancing (scheduler::fast_unbalanced), a baseline: the quantised bottleneck
// decomposition of the GPU-level matrix (no rails, no scale-up moves), each block sent straight
// from send to recv, min(stage weight, what is left) per stage, largest stages first, and the
// intra-server blocks during the first stage.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../baselines.hpp"
#include "../decomposition.hpp"
#include "../layout.hpp"
#include "../plan.hpp"
#include "../traffic.hpp"

namespace fast::detail {

/// Buffers of the unbalanced baseline.
struct unbalanced_workspace {
    std::vector<std::int64_t> left; // per block (i * R + j): bytes not yet sent
    std::vector<std::int64_t> sent; // per block: bytes sent so far
};

/// The R x R matrix of `m`'s inter-server blocks (intra-server ones 0), row-major. O(R^2).
inline void inter_server_blocks(const traffic_matrix& m, const topology& topo, std::vector<std::int64_t>& out) {
    const auto ur = static_cast<std::size_t>(topo.ranks());
    out.assign(ur * ur, 0);
    for (std::size_t i = 0; i < ur; ++i)
        for (std::size_t j = 0; j < ur; ++j)
            if (!topo.same_server(static_cast<int>(i), static_cast<int>(j)))
                out[i * ur + j] = m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
}

namespace unbalanced {

// Every intra-server block not sent yet, whole, into the current step.
inline void add_intra_blocks(const alltoallv_layout& l, const topology& topo, unbalanced_workspace& ws, plan& out) {
    const auto ur = static_cast<std::size_t>(topo.ranks());
    for (std::size_t i = 0; i < ur; ++i)
        for (std::size_t j = 0; j < ur; ++j)
            if (topo.same_server(static_cast<int>(i), static_cast<int>(j)) && ws.left[i * ur + j] > 0) {
                out.transfers.push_back(
                    block_transfer(l, topo, static_cast<int>(i), static_cast<int>(j), ws.left[i * ur + j]));
                ws.left[i * ur + j] = 0;
            }
}

// Stage `k`'s inter-server transfers into the current step: rank i sends min(weight, what is
// left) of its block for perm(k)[i], continuing where the last stage stopped.
inline void add_stage(const decomposition& stages, std::size_t k, const alltoallv_layout& l, const topology& topo,
                      unbalanced_workspace& ws, plan& out) {
    const auto ur = static_cast<std::size_t>(topo.ranks());
    const auto perm = stages.perm(k);
    for (std::size_t i = 0; i < ur; ++i) {
        const auto j = static_cast<std::size_t>(perm[i]);
        if (topo.same_server(static_cast<int>(i), static_cast<int>(j))) continue;
        const std::int64_t n = std::min(stages.weights[k], ws.left[i * ur + j]);
        if (n == 0) continue;
        transfer t = block_transfer(l, topo, static_cast<int>(i), static_cast<int>(j), n);
        t.src_offset += ws.sent[i * ur + j];
        t.dst_offset += ws.sent[i * ur + j];
        ws.sent[i * ur + j] += n;
        ws.left[i * ur + j] -= n;
        out.transfers.push_back(t);
    }
}

} // namespace unbalanced

/// The unbalanced plan of the validated matrix `m` whose GPU-level decomposition is `stages`
/// (decompose_quantised of inter_server_blocks). A step per stage that sends anything.
/// O(R^2 + stages R).
inline void fill_unbalanced_plan(const traffic_matrix& m, const topology& topo, const decomposition& stages, plan& out,
                                 unbalanced_workspace& ws) {
    const auto ur = static_cast<std::size_t>(topo.ranks());
    const alltoallv_layout l = make_packed_layout(m);
    out = plan{};
    out.topology = topo;
    out.scheduler = "fast-unbalanced";
    out.one_to_one_scale_out = true;
    out.scratch_bytes.assign(ur, 0);
    ws.left.assign(m.data(), m.data() + ur * ur);
    ws.sent.assign(ur * ur, 0);
    bool first = true;
    for (std::size_t k = 0; k < stages.size(); ++k) {
        const std::size_t before = out.transfers.size();
        unbalanced::add_stage(stages, k, l, topo, ws, out);
        if (out.transfers.size() > before) {
            if (first) unbalanced::add_intra_blocks(l, topo, ws, out);
            out.end_step();
            first = false;
        }
    }
    if (first) { // no inter-server traffic at all
        unbalanced::add_intra_blocks(l, topo, ws, out);
        if (!out.transfers.empty()) out.end_step();
    }
}

} // namespace fast::detail
