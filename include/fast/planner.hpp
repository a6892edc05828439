#pragma once
/// \file planner.hpp
/// make_plan(traffic, topology, options): the FAST schedule and the baselines, as verified-ready
/// plans. A `planner` object keeps its buffers between calls (MoE plans on every layer call).
///
/// FAST (DESIGN.md, docs/algorithm.md):
///  1. balancing: each GPU of server s carries an equal share of what s sends to server d, and
///     sends it rail-aligned (GPU i of s to GPU i of d);
///  2. stages: the server matrix is padded to equal line sums and decomposed into weighted
///     permutations (Birkhoff-von Neumann), so every stage is one-to-one on every rail;
///  3. pipelining: bytes that land on the wrong GPU are redistributed over scale-up during the
///     next stage; intra-server traffic runs during the first stage.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "balance.hpp"
#include "baselines.hpp"
#include "bvn.hpp"
#include "cost.hpp"
#include "detail/plan_builder.hpp"
#include "error.hpp"
#include "plan.hpp"
#include "traffic.hpp"

namespace fast {

/// What make_plan builds.
enum class scheduler {
    fast,            ///< FAST with the policy of plan_options::policy
    fast_unbalanced, ///< stages of the GPU-level matrix, without intra-server balancing
    direct,          ///< everything at once (NCCL / MPI style)
    spreadout,       ///< R - 1 GPU-level shifted rounds
};

[[nodiscard]] inline std::string_view to_string(scheduler s) noexcept {
    switch (s) {
    case scheduler::fast: return "fast";
    case scheduler::fast_unbalanced: return "fast-unbalanced";
    case scheduler::direct: return "direct";
    case scheduler::spreadout: return "spreadout";
    }
    return "?";
}

/// Parses a scheduler name; throws fast::invalid_argument listing the valid ones.
[[nodiscard]] inline scheduler parse_scheduler(std::string_view name) {
    for (const scheduler s : {scheduler::fast, scheduler::fast_unbalanced, scheduler::direct,
                              scheduler::spreadout})
        if (name == to_string(s)) return s;
    throw invalid_argument("unknown scheduler '" + std::string(name) +
                           "' (expected fast, fast-unbalanced, direct or spreadout)");
}

/// How FAST decomposes the server matrix.
enum class policy {
    exact, ///< the paper: exact BvN of the balanced server matrix, the same stages on all rails
};

/// Order of the stages of the exact policy.
enum class stage_order {
    automatic,  ///< whichever of the two the cost model predicts faster
    ascending,  ///< smallest first (the paper's analysis: redistribution hides under the next)
    descending, ///< largest first (hides the intra-server traffic under the first stage)
};

struct plan_options {
    fast::scheduler scheduler = scheduler::fast;
    fast::policy policy = policy::exact;
    stage_order order = stage_order::automatic;
    /// Split every stage into this many equal consecutive stages, so that redistribution
    /// overlaps at a finer grain (1 = off).
    int chunks = 1;
};

namespace detail {

/// A stage schedule: on each rail, a sequence of slots; in a slot, server s sends bytes(s)
/// to server perm(s) (perm(s) == s: idle). Slots are kept sorted by step.
struct stage_schedule {
    int servers = 0;
    int rails = 0;
    std::int32_t last_step = 0; ///< the last scale-out step (steps are 1-based)
    std::vector<std::int32_t> perms; ///< permutations, servers each
    struct slot {
        std::int32_t rail = 0;
        std::int32_t step = 0;
        std::size_t perm = 0; ///< index of the permutation
    };
    std::vector<slot> slots;
    std::vector<std::int64_t> bytes; ///< servers per slot

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
    [[nodiscard]] std::span<const std::int64_t> bytes_of(std::size_t k) const noexcept {
        return {bytes.data() + k * static_cast<std::size_t>(servers), static_cast<std::size_t>(servers)};
    }
};

/// Per (server pair, rail) list of the slots that carry it, in step order (CSR).
struct stream_slots {
    std::vector<std::size_t> offsets;
    std::vector<stream_slot> entries;

    void build(const stage_schedule& sc) {
        const auto s = static_cast<std::size_t>(sc.servers);
        const auto g = static_cast<std::size_t>(sc.rails);
        offsets.assign(s * s * g + 1, 0);
        auto key = [&](std::size_t src, std::size_t dst, std::size_t rail) {
            return (src * s + dst) * g + rail;
        };
        for (std::size_t k = 0; k < sc.slots.size(); ++k) {
            const auto perm = sc.perm_of(sc.slots[k]);
            const auto bytes = sc.bytes_of(k);
            for (std::size_t src = 0; src < s; ++src)
                if (bytes[src] > 0)
                    ++offsets[key(src, static_cast<std::size_t>(perm[src]), static_cast<std::size_t>(sc.slots[k].rail)) + 1];
        }
        std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
        entries.resize(offsets.back());
        fill_.assign(offsets.begin(), offsets.end() - 1);
        for (std::size_t k = 0; k < sc.slots.size(); ++k) {
            const auto perm = sc.perm_of(sc.slots[k]);
            const auto bytes = sc.bytes_of(k);
            for (std::size_t src = 0; src < s; ++src)
                if (bytes[src] > 0)
                    entries[fill_[key(src, static_cast<std::size_t>(perm[src]), static_cast<std::size_t>(sc.slots[k].rail))]++] =
                        stream_slot{sc.slots[k].step, bytes[src]};
        }
    }
    [[nodiscard]] std::span<const stream_slot> of(std::size_t key) const noexcept {
        return {entries.data() + offsets[key], offsets[key + 1] - offsets[key]};
    }

private:
    std::vector<std::size_t> fill_;
};

} // namespace detail

/// Plans All-to-All(v) traffic on one topology, reusing its buffers from call to call.
class planner {
public:
    planner(const fast::topology& topo, plan_options options = {}) : topo_(topo), options_(options) {
        validate(topo_);
        if (options_.chunks < 1)
            throw invalid_argument("chunks must be at least 1, got " + std::to_string(options_.chunks));
    }

    [[nodiscard]] const fast::topology& topology() const noexcept { return topo_; }
    [[nodiscard]] const plan_options& options() const noexcept { return options_; }

    /// Plans `m` (validated against the topology). The returned reference stays valid until
    /// the next call.
    const plan& make(const traffic_matrix& m) {
        validate_traffic(m, topo_);
        switch (options_.scheduler) {
        case scheduler::direct: plan_ = make_direct_plan(m, topo_); break;
        case scheduler::spreadout: plan_ = make_spreadout_plan(m, topo_); break;
        case scheduler::fast_unbalanced: make_unbalanced(m); break;
        case scheduler::fast: make_fast(m); break;
        }
        return plan_;
    }

private:
    // --- FAST, exact policy ----------------------------------------------------------------

    void make_fast(const traffic_matrix& m) {
        compute_shares(m);
        decompose_server_matrix();
        if (options_.order == stage_order::automatic) {
            order_stages(stage_order::ascending);
            build_fast_plan(m);
            const double ascending = predict_us(plan_);
            order_stages(stage_order::descending);
            build_fast_plan(m);
            if (ascending < predict_us(plan_)) {
                order_stages(stage_order::ascending);
                build_fast_plan(m);
            }
        } else {
            order_stages(options_.order);
            build_fast_plan(m);
        }
    }

    // Balanced shares per (s, d, rail) and the per-GPU server matrix M(s, d) = ceil(t / G).
    void compute_shares(const traffic_matrix& m) {
        const int s_count = topo_.servers;
        const auto us = static_cast<std::size_t>(s_count);
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        const auto stride = static_cast<std::size_t>(topo_.ranks());
        share_.assign(us * us * ug, 0);
        server_.assign(us * us, 0);
        own_.resize(ug);
        order_.resize(ug);
        for (std::size_t s = 0; s < us; ++s)
            for (std::size_t d = 0; d < us; ++d) {
                if (s == d) continue;
                const std::int64_t* tile = m.data() + s * ug * stride + d * ug;
                std::int64_t total = 0;
                for (std::size_t a = 0; a < ug; ++a) {
                    own_[a] = 0;
                    for (std::size_t b = 0; b < ug; ++b) own_[a] += tile[a * stride + b];
                    total += own_[a];
                }
                detail::balanced_shares(total, own_,
                                        std::span<std::int64_t>(share_.data() + (s * us + d) * ug, ug),
                                        order_);
                server_[s * us + d] = detail::ceil_div(total, static_cast<std::int64_t>(ug));
            }
    }

    void decompose_server_matrix() {
        std::vector<std::int64_t>& a = padded_;
        a = server_;
        detail::pad_flat(a, topo_.servers, row_deficit_, col_deficit_);
        detail::decompose_flat(a, topo_.servers, matching_rule::any, matching_, stages_);
        base_order_.resize(stages_.size());
        std::iota(base_order_.begin(), base_order_.end(), std::size_t{0});
    }

    void order_stages(stage_order order) {
        stage_sequence_ = base_order_;
        std::stable_sort(stage_sequence_.begin(), stage_sequence_.end(), [&](std::size_t x, std::size_t y) {
            return order == stage_order::ascending ? stages_.weights[x] < stages_.weights[y]
                                                   : stages_.weights[x] > stages_.weights[y];
        });
    }

    // The paper's schedule: stage k (optionally in chunks) runs on every rail in step k + 1;
    // each rail's GPU sends min(w_k, what it still carries to that server).
    void build_exact_schedule() {
        const int s_count = topo_.servers;
        const int g = topo_.gpus_per_server;
        const auto us = static_cast<std::size_t>(s_count);
        const auto ug = static_cast<std::size_t>(g);
        schedule_.clear(s_count, g);
        left_ = share_;
        std::int32_t step = 0;
        for (const std::size_t k : stage_sequence_) {
            const auto perm = stages_.perm(k);
            const std::size_t perm_index = schedule_.perms.size() / us;
            schedule_.perms.insert(schedule_.perms.end(), perm.begin(), perm.end());
            const std::int64_t w = stages_.weights[k];
            const auto chunks = static_cast<std::int64_t>(std::min<std::int64_t>(options_.chunks, w));
            for (std::int64_t c = 0; c < chunks; ++c) {
                const std::int64_t part = w / chunks + (c < w % chunks ? 1 : 0);
                ++step;
                for (std::size_t rail = 0; rail < ug; ++rail) {
                    const std::size_t at = schedule_.bytes.size();
                    schedule_.bytes.resize(at + us, 0);
                    bool any = false;
                    for (std::size_t s = 0; s < us; ++s) {
                        const auto d = static_cast<std::size_t>(perm[s]);
                        if (d == s) continue;
                        std::int64_t& left = left_[(s * us + d) * ug + rail];
                        const std::int64_t n = std::min(part, left);
                        left -= n;
                        schedule_.bytes[at + s] = n;
                        any = any || n > 0;
                    }
                    if (!any) {
                        schedule_.bytes.resize(at);
                        continue;
                    }
                    schedule_.slots.push_back({static_cast<std::int32_t>(rail), step, perm_index});
                }
            }
        }
        schedule_.last_step = step;
    }

    void build_fast_plan(const traffic_matrix& m) {
        build_exact_schedule();
        emit(m, detail::gather_timing::up_front, std::span<const std::int64_t>(share_));
        plan_.scheduler = "fast";
    }

    // Turns the schedule into transfers: per server pair, assign the tile to rails with the
    // given capacities and walk each rail's stream over its slots.
    void emit(const traffic_matrix& m, detail::gather_timing timing,
              std::span<const std::int64_t> capacity) {
        const int s_count = topo_.servers;
        const auto us = static_cast<std::size_t>(s_count);
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        slots_of_.build(schedule_);
        builder_.start(m, topo_, schedule_.last_step + 1);
        rails_.resize(ug);
        for (std::size_t s = 0; s < us; ++s)
            for (std::size_t d = 0; d < us; ++d) {
                builder_.load_tile(static_cast<int>(s), static_cast<int>(d));
                if (s == d) {
                    builder_.emit_intra_tile(1);
                    continue;
                }
                for (auto& r : rails_) r.clear();
                detail::assign_tile(builder_.tile(), builder_.tile_stride(), topo_.gpus_per_server,
                                    capacity.subspan((s * us + d) * ug, ug), tile_ws_,
                                    std::span<std::vector<piece>>(rails_));
                for (std::size_t rail = 0; rail < ug; ++rail)
                    builder_.emit_stream(static_cast<int>(rail), rails_[rail],
                                         slots_of_.of((s * us + d) * ug + rail), timing);
            }
        plan_.topology = topo_;
        plan_.one_to_one_scale_out = true;
        builder_.finish(plan_);
    }

    // --- FAST without balancing: stages of the GPU-level matrix ------------------------------

    void make_unbalanced(const traffic_matrix& m) {
        const int r = topo_.ranks();
        const auto ur = static_cast<std::size_t>(r);
        std::vector<std::int64_t>& a = padded_;
        a.assign(ur * ur, 0);
        for (std::size_t i = 0; i < ur; ++i)
            for (std::size_t j = 0; j < ur; ++j)
                if (!topo_.same_server(static_cast<int>(i), static_cast<int>(j)))
                    a[i * ur + j] = m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
        detail::pad_flat(a, r, row_deficit_, col_deficit_);
        detail::decompose_flat(a, r, matching_rule::bottleneck, matching_, stages_);
        // Every rank is its own "server" with one rail: reuse the stream machinery with G = 1.
        // Blocks go straight from send to recv, min(w, left) per stage, largest stages first.
        const alltoallv_layout l = make_packed_layout(m);
        plan_ = plan{};
        plan_.topology = topo_;
        plan_.scheduler = "fast-unbalanced";
        plan_.one_to_one_scale_out = true;
        plan_.scratch_bytes.assign(ur, 0);
        left_.assign(ur * ur, 0);
        std::vector<std::int64_t> sent(ur * ur, 0);
        for (std::size_t i = 0; i < ur; ++i)
            for (std::size_t j = 0; j < ur; ++j)
                left_[i * ur + j] = m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
        // Step 1 also carries the intra-server blocks.
        bool first = true;
        for (std::size_t k = 0; k < stages_.size(); ++k) {
            const auto perm = stages_.perm(k);
            const std::size_t before = plan_.transfers.size();
            for (std::size_t i = 0; i < ur; ++i) {
                const auto j = static_cast<std::size_t>(perm[i]);
                if (topo_.same_server(static_cast<int>(i), static_cast<int>(j))) continue;
                const std::int64_t n = std::min(stages_.weights[k], left_[i * ur + j]);
                if (n == 0) continue;
                transfer t = detail::block_transfer(l, topo_, static_cast<int>(i), static_cast<int>(j), n);
                t.src_offset += sent[i * ur + j];
                t.dst_offset += sent[i * ur + j];
                sent[i * ur + j] += n;
                left_[i * ur + j] -= n;
                plan_.transfers.push_back(t);
            }
            if (first) {
                for (std::size_t i = 0; i < ur; ++i)
                    for (std::size_t j = 0; j < ur; ++j)
                        if (topo_.same_server(static_cast<int>(i), static_cast<int>(j)) && left_[i * ur + j] > 0) {
                            plan_.transfers.push_back(detail::block_transfer(
                                l, topo_, static_cast<int>(i), static_cast<int>(j), left_[i * ur + j]));
                            left_[i * ur + j] = 0;
                        }
            }
            if (plan_.transfers.size() > before) {
                plan_.end_step();
                first = false;
            }
        }
        if (first) { // no inter-server traffic at all
            const std::size_t before = plan_.transfers.size();
            for (std::size_t i = 0; i < ur; ++i)
                for (std::size_t j = 0; j < ur; ++j)
                    if (left_[i * ur + j] > 0)
                        plan_.transfers.push_back(detail::block_transfer(
                            l, topo_, static_cast<int>(i), static_cast<int>(j), left_[i * ur + j]));
            if (plan_.transfers.size() > before) plan_.end_step();
        }
    }

    fast::topology topo_;
    plan_options options_;
    plan plan_;
    // Buffers kept between calls.
    std::vector<std::int64_t> share_;
    std::vector<std::int64_t> server_;
    std::vector<std::int64_t> own_;
    std::vector<int> order_;
    std::vector<std::int64_t> padded_;
    std::vector<std::int64_t> row_deficit_;
    std::vector<std::int64_t> col_deficit_;
    std::vector<std::int64_t> left_;
    bipartite_matching matching_;
    decomposition stages_;
    std::vector<std::size_t> base_order_;
    std::vector<std::size_t> stage_sequence_;
    detail::stage_schedule schedule_;
    detail::stream_slots slots_of_;
    detail::plan_builder builder_;
    detail::tile_workspace tile_ws_;
    std::vector<std::vector<piece>> rails_;
};

/// Plans `m` on `topo`. Throws fast::invalid_argument on invalid input.
[[nodiscard]] inline plan make_plan(const traffic_matrix& m, const topology& topo,
                                    const plan_options& options = {}) {
    planner p(topo, options);
    return p.make(m);
}

} // namespace fast
