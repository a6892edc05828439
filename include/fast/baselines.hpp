#pragma once
/// \file baselines.hpp
/// The schedules FAST is measured against, as real plans in the same contract:
///  - direct: one step, every block straight from send to recv (what NCCL and MPI do): each
///    port carries everything at once; not incast-free.
///  - spreadout: R - 1 GPU-level shifted rounds (round k: rank i sends to rank i + k mod R) after
///    a self-copy step; each round is one-to-one.

#include <cstdint>
#include <string>
#include <vector>

#include "layout.hpp"
#include "plan.hpp"
#include "rank_program.hpp"
#include "traffic.hpp"

namespace fast {

namespace detail {
inline transfer block_transfer(const alltoallv_layout& l, const topology& topo, int i, int j, std::int64_t bytes) {
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

/// The direct plan of the validated matrix `m` (see make_direct_plan) in `out`'s buffers, so
/// that planning again allocates nothing; `received_at` is a workspace. O(R^2).
inline void fill_direct_plan(const traffic_matrix& m, const topology& topo, plan& out,
                             std::vector<std::int64_t>& received_at) {
    const int r = topo.ranks();
    out.topology = topo;
    out.scheduler = "direct";
    out.one_to_one_scale_out = false;
    out.scratch_bytes.assign(static_cast<std::size_t>(r), 0);
    out.transfers.clear();
    out.step_offsets.assign(1, 0);
    received_at.assign(static_cast<std::size_t>(r), 0); // per rank: its receive offset so far
    for (int i = 0; i < r; ++i) {
        std::int64_t sent = 0;
        for (int j = 0; j < r; ++j) {
            const std::int64_t n = m(i, j);
            if (n == 0) continue;
            std::int64_t& received = received_at[static_cast<std::size_t>(j)];
            out.transfers.push_back({n, sent, received, i, j, topo.same_server(i, j) ? tier::scale_up : tier::scale_out,
                                     buffer::send, buffer::recv});
            sent += n;
            received += n;
        }
    }
    if (!out.transfers.empty()) out.end_step();
}

/// Rank `me`'s program of the direct plan (its blocks in the plan's row-major order: those it
/// receives from lower ranks, its own row, those it receives from higher ranks) from its own
/// row (`row[j * row_stride]`: what it sends rank j) and column (`col[i * col_stride]`: what
/// rank i sends it); its offsets packed, the other ends' 0 (rank_program). O(R).
inline void fill_direct_program(const std::int64_t* row, std::size_t row_stride, const std::int64_t* col,
                                std::size_t col_stride, const topology& topo, int me, rank_program& out) {
    out.rank = me;
    out.topology = topo;
    out.steps = 1;
    out.scratch_bytes = 0;
    out.one_to_one_scale_out = false;
    out.transfers.clear();
    auto block = [&](int i, int j, std::int64_t n, std::int64_t src_offset, std::int64_t dst_offset) {
        const tier t = topo.same_server(i, j) ? tier::scale_up : tier::scale_out;
        out.transfers.push_back({transfer{n, src_offset, dst_offset, i, j, t, buffer::send, buffer::recv}, 0, 0});
    };
    std::int64_t received = 0;
    auto receive = [&](int i) {
        const std::int64_t n = col[static_cast<std::size_t>(i) * col_stride];
        if (n == 0) return;
        block(i, me, n, 0, received);
        received += n;
    };
    for (int i = 0; i < me; ++i) receive(i);
    std::int64_t sent = 0;
    for (int j = 0; j < topo.ranks(); ++j) {
        const std::int64_t n = row[static_cast<std::size_t>(j) * row_stride];
        if (n == 0) continue;
        if (j == me) {
            block(me, me, n, sent, received);
            received += n;
        } else {
            block(me, j, n, sent, 0);
        }
        sent += n;
    }
    for (int i = me + 1; i < topo.ranks(); ++i) receive(i);
}
} // namespace detail

/// Every block in one step, intra-server blocks over scale-up. O(R^2).
[[nodiscard]] inline plan make_direct_plan(const traffic_matrix& m, const topology& topo) {
    validate_traffic(m, topo);
    plan p;
    std::vector<std::int64_t> received_at;
    detail::fill_direct_plan(m, topo, p, received_at);
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
