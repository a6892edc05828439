#pragma once
/// \file baselines.hpp
/// The schedules FAST is measured against, as real plans in the same contract:
///  - direct: one step, every block straight from send to recv (what NCCL and MPI do): each
///    port carries everything at once; not incast-free.
///  - spreadout: R - 1 GPU-level shifted rounds (round k: rank i sends to rank i + k mod R) after
///    a self-copy step; each round is one-to-one.

#include <string>

#include "layout.hpp"
#include "plan.hpp"
#include "traffic.hpp"

namespace fast {

namespace detail {
inline transfer block_transfer(const alltoallv_layout& l, const topology& topo, int i, int j,
                               std::int64_t bytes) {
    transfer t;
    t.bytes = bytes;
    t.src = i;
    t.dst = j;
    t.src_offset = l.send_displ(i, j);
    t.dst_offset = l.recv_displ(i, j);
    t.src_buffer = buffer::send;
    t.dst_buffer = buffer::recv;
    t.tier = topo.same_server(i, j) ? tier::scale_up : tier::scale_out;
    return t;
}
} // namespace detail

/// Every block in one step, intra-server blocks over scale-up. O(R^2).
[[nodiscard]] inline plan make_direct_plan(const traffic_matrix& m, const topology& topo) {
    validate_traffic(m, topo);
    const alltoallv_layout l = make_packed_layout(m);
    plan p;
    p.topology = topo;
    p.scheduler = "direct";
    p.scratch_bytes.assign(static_cast<std::size_t>(topo.ranks()), 0);
    for (int i = 0; i < topo.ranks(); ++i)
        for (int j = 0; j < topo.ranks(); ++j)
            if (m(i, j) > 0) p.transfers.push_back(detail::block_transfer(l, topo, i, j, m(i, j)));
    if (!p.transfers.empty()) p.end_step();
    return p;
}

/// Self-copies, then rounds k = 1 .. R - 1 in which rank i sends block (i, i + k mod R); empty
/// rounds are skipped. Each round is a permutation, so scale-out is one-to-one. O(R^2).
[[nodiscard]] inline plan make_spreadout_plan(const traffic_matrix& m, const topology& topo) {
    validate_traffic(m, topo);
    const alltoallv_layout l = make_packed_layout(m);
    plan p;
    p.topology = topo;
    p.scheduler = "spreadout";
    p.one_to_one_scale_out = true;
    p.scratch_bytes.assign(static_cast<std::size_t>(topo.ranks()), 0);
    const int r = topo.ranks();
    for (int k = 0; k < r; ++k) {
        const std::size_t before = p.transfers.size();
        for (int i = 0; i < r; ++i) {
            const int j = (i + k) % r;
            if (m(i, j) > 0) p.transfers.push_back(detail::block_transfer(l, topo, i, j, m(i, j)));
        }
        if (p.transfers.size() > before) p.end_step();
    }
    return p;
}

} // namespace fast
