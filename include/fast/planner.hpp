#pragma once
/// \file planner.hpp
/// make_plan(traffic, topology, options): the FAST schedule and the baselines, as plans in the
/// contract of plan.hpp. A `planner` keeps its buffers between calls (MoE plans on every layer
/// call), so repeated planning allocates nothing once the sizes have been seen. Its make_rank
/// plans only one rank's part (rank_program.hpp): the schedule every rank shares, then the
/// rank's own transfers, what a runtime pays on each rank; make builds the whole plan, for tools.
///
/// FAST (docs/algorithm.md):
///  1. balancing: the GPUs of server s share what s sends to server d, rail-aligned (GPU i of s
///     sends only to GPU i of d);
///  2. stages: a server matrix padded to equal line sums and decomposed into weighted
///     permutations (Birkhoff-von Neumann), so every stage is one-to-one on every rail;
///  3. pipelining: bytes that land on the wrong GPU are redistributed over scale-up during the
///     next stage, balancing for a stage happens during the previous one.
/// Policies (plan_options::policy):
///  - exact: the paper. Exact BvN of the balanced per-GPU server matrix, the same stages on all
///    rails, an up-front balancing step, intra-server traffic under the first stage.
///  - bottleneck: the paper's layout with the per-GPU server matrix rounded up to a quantum and
///    bottleneck matchings (largest stages first), ramps, scale-up work in windows.
///  - rail_packed (default): the server-level matrix decomposed the same way and its stages dealt
///    to the G rails in time-aligned steps (every rail is an independent one-to-one fabric), so
///    a step serves up to G destinations per server; ramps; scale-up work in windows. It predicts
///    fastest at every size measured (docs/performance.md).

#include <algorithm>
#include <cmath>
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
#include "detail/balancing.hpp"
#include "detail/bvn_decomposition.hpp"
#include "detail/emission.hpp"
#include "detail/packing.hpp"
#include "detail/rail_assignment.hpp"
#include "detail/schedule.hpp"
#include "detail/shaping.hpp"
#include "detail/sorting.hpp"
#include "detail/sorting.hpp"
#include "error.hpp"
#include "plan.hpp"
#include "plan_options.hpp"
#include "rank_program.hpp"
#include "traffic.hpp"
#include "traffic_summary.hpp"

namespace fast {

/// Plans All-to-All(v) traffic on one topology, reusing its buffers from call to call.
class planner {
public:
    explicit planner(const fast::topology& topo, plan_options options = {})
        : topo_(topo), options_(options) {
        validate(topo_);
        validate(options_);
    }

    [[nodiscard]] const fast::topology& topology() const noexcept { return topo_; }
    [[nodiscard]] const plan_options& options() const noexcept { return options_; }

    /// Plans `m` (validated against the topology): the whole plan. The reference stays valid
    /// until the next call.
    const plan& make(const traffic_matrix& m) {
        focus_ = -1;
        switch (options_.scheduler) {
        case scheduler::direct: plan_ = make_direct_plan(m, topo_); break;
        case scheduler::spreadout: plan_ = make_spreadout_plan(m, topo_); break;
        case scheduler::fast_unbalanced:
            validate_traffic(m, topo_);
            make_unbalanced(m);
            break;
        case scheduler::automatic:
        case scheduler::fast:
            summarize(m, topo_, summary_);
            make_fast(m);
            break;
        }
        return plan_;
    }

    /// Rank `rank`'s part of make(m) (rank_program.hpp): the same transfers in the same order,
    /// sizes and offsets as the whole plan has for it, except that other ranks' scratch offsets
    /// read 0, stepped in the schedule's numbering (0 .. last scale-out step + 1, alike on every
    /// rank; the whole plan leaves out the steps nobody has transfers in). The FAST schedule is
    /// computed whole (every rank computes the same one); then only the tiles with an end in
    /// the rank's server are balanced and walked, placing that server's scale-up moves and
    /// keeping the rank's transfers. Cost: the summary (O(R^2) here, one pass over m), the
    /// schedule, and O(S G^2 + the server's pieces) for the rank; a direct program O(R G).
    /// Spreadout, FAST without balancing and the exact policy with an automatic order (chosen by
    /// predicting whole plans) build the whole plan and restrict it. The reference stays valid
    /// until the next call.
    const rank_program& make_rank(const traffic_matrix& m, int rank) {
        if (rank < 0 || rank >= topo_.ranks())
            throw invalid_argument("rank " + std::to_string(rank) + " is not in 0 .. " + std::to_string(topo_.ranks() - 1));
        const bool whole = options_.scheduler == scheduler::spreadout || options_.scheduler == scheduler::fast_unbalanced ||
                           (options_.scheduler != scheduler::direct && options_.policy == policy::exact &&
                            options_.order == stage_order::automatic);
        if (whole) {
            rank_ = restrict_to_rank(make(m), rank);
            return rank_;
        }
        summarize(m, topo_, summary_);
        focus_ = rank;
        if (options_.scheduler == scheduler::direct) make_direct_rank(m);
        else make_fast(m);
        focus_ = -1;
        return rank_;
    }

    /// The FAST schedule alone, as every rank computes it before its own transfers (make_rank
    /// without the emission; the automatic choice is not made): the length in bytes of each
    /// scale-out step, the longest slot of the step, in step order. For benchmarks and for
    /// runtimes that want the shape of a call. The span stays valid until the next call.
    std::span<const std::int64_t> make_schedule(const traffic_matrix& m) {
        summarize(m, topo_, summary_);
        schedule_only_ = true;
        const plan_options saved = options_;
        if (options_.policy == policy::exact) options_.order = stage_order::ascending; // no whole plans to predict
        try {
            make_fast(m);
        } catch (...) {
            schedule_only_ = false;
            options_ = saved;
            throw;
        }
        schedule_only_ = false;
        options_ = saved;
        if (step_bytes_.empty()) return {};
        return {step_bytes_.data() + 1, step_bytes_.size() - 1};
    }

    /// What the last make or make_rank chose: fast or direct with the automatic scheduler, else
    /// the scheduler of the options.
    [[nodiscard]] fast::scheduler last_scheduler() const noexcept { return last_scheduler_; }

private:
    void make_fast(const traffic_matrix& m) {
        last_scheduler_ = scheduler::fast;
        switch (options_.policy) {
        case policy::exact: make_exact(m); break;
        case policy::bottleneck: make_bottleneck(m); break;
        case policy::rail_packed: make_rail_packed(m); break;
        }
        if (focus_ < 0 && last_scheduler_ == scheduler::fast) plan_.scheduler = "fast";
    }

    // --- direct, and the automatic choice ---------------------------------------------------

    // The cost model's time of the direct plan, from the summary: one step in which every port
    // carries all its bytes at once, so the call ends with the busiest port. O(S^2 G).
    [[nodiscard]] double direct_us() const {
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        double worst = 0;
        auto port = [&](std::int64_t bytes, double alpha, double gbps) {
            if (bytes > 0) worst = std::max(worst, alpha + detail::transfer_us(bytes, gbps));
        };
        for (std::size_t s = 0; s < us; ++s)
            for (std::size_t k = 0; k < ug; ++k) {
                std::int64_t out = 0;
                std::int64_t in = 0;
                for (std::size_t d = 0; d < us; ++d) {
                    if (d == s) continue;
                    out += summary_.sent[(s * us + d) * ug + k];
                    in += summary_.received[(d * us + s) * ug + k];
                }
                port(out, topo_.alpha_out_us, topo_.scale_out_gbps);
                port(in, topo_.alpha_out_us, topo_.scale_out_gbps);
                port(summary_.sent[(s * us + s) * ug + k], topo_.alpha_up_us, topo_.scale_up_gbps);
                port(summary_.received[(s * us + s) * ug + k], topo_.alpha_up_us, topo_.scale_up_gbps);
            }
        return worst;
    }

    // The schedule's time in the model where its ramps hide the scale-up work: per scale-out
    // step alpha_out and its longest slot, and alpha_up for the balancing before the first
    // step and the redistribution after the last. O(steps).
    [[nodiscard]] double schedule_us() const {
        double t = topo_.gpus_per_server > 1 ? 2 * topo_.alpha_up_us : 0.0;
        for (std::size_t k = 1; k < step_bytes_.size(); ++k)
            t += topo_.alpha_out_us + detail::transfer_us(step_bytes_[k], topo_.scale_out_gbps);
        return t;
    }

    // With the automatic scheduler, once the schedule is known: whether direct is predicted at
    // least as fast (then it is built instead of emitting the schedule). The schedule's time
    // leaves out scale-up work its ramps do not hide (up to 9% of the plan's predicted time
    // over the sizes and shapes of planner_test's sweep, most with few servers and many GPUs),
    // so FAST must win by a margin that covers it.
    [[nodiscard]] bool direct_wins() const {
        return options_.scheduler == scheduler::automatic &&
               schedule_us() * detail::tuning::automatic_margin >= direct_us();
    }

    // The direct plan, or the focus rank's program of it.
    void make_direct(const traffic_matrix& m) {
        last_scheduler_ = scheduler::direct;
        if (focus_ >= 0) {
            make_direct_rank(m);
            return;
        }
        // make_direct_plan's plan, in plan_'s buffers (planning again allocates nothing).
        const int r = topo_.ranks();
        plan_.topology = topo_;
        plan_.scheduler = "direct";
        plan_.one_to_one_scale_out = false;
        plan_.scratch_bytes.assign(static_cast<std::size_t>(r), 0);
        plan_.transfers.clear();
        plan_.step_offsets.assign(1, 0);
        received_at_.assign(static_cast<std::size_t>(r), 0);
        for (int i = 0; i < r; ++i) {
            std::int64_t sent = 0;
            for (int j = 0; j < r; ++j) {
                const std::int64_t n = m(i, j);
                if (n == 0) continue;
                std::int64_t& received = received_at_[static_cast<std::size_t>(j)];
                plan_.transfers.push_back({n, sent, received, i, j, topo_.same_server(i, j) ? tier::scale_up : tier::scale_out,
                                           buffer::send, buffer::recv});
                sent += n;
                received += n;
            }
        }
        if (!plan_.transfers.empty()) plan_.end_step();
    }

    // The focus rank's part of make_direct_plan(m) (its blocks in row-major order: those it
    // receives from lower ranks, its own row, those it receives from higher ranks), with both
    // ends' packed offsets from the summary and the tiles of its server. O(R G).
    void make_direct_rank(const traffic_matrix& m) {
        last_scheduler_ = scheduler::direct;
        const int me = focus_;
        const int g = topo_.gpus_per_server;
        const int x = topo_.server_of(me);
        const int r = topo_.ranks();
        rank_.rank = me;
        rank_.topology = topo_;
        rank_.steps = 1;
        rank_.scratch_bytes = 0;
        rank_.one_to_one_scale_out = false;
        rank_.transfers.clear();
        auto block = [&](int i, int j, std::int64_t src_offset, std::int64_t dst_offset) {
            transfer t{m(i, j), src_offset, dst_offset, i, j, topo_.same_server(i, j) ? tier::scale_up : tier::scale_out,
                       buffer::send, buffer::recv};
            rank_.transfers.push_back({t, 0, 0});
        };
        // Block (i, me): at i's send offset for me, at my receive offset for i.
        std::int64_t received = 0;
        auto receive = [&](int i) {
            const std::int64_t n = m(i, me);
            if (n == 0) return;
            std::int64_t at = summary_.sent_before[summary_.index(topo_.server_of(i), x, topo_.local_of(i))];
            for (int b = x * g; b < me; ++b) at += m(i, b);
            block(i, me, at, received);
            received += n;
        };
        for (int i = 0; i < me; ++i) receive(i);
        std::int64_t sent = 0;
        for (int j = 0; j < r; ++j) {
            const std::int64_t n = m(me, j);
            if (n == 0) continue;
            if (j == me) {
                block(me, me, sent, received);
                received += n;
            } else {
                // My block at j: after what j receives from servers before mine and from the
                // GPUs of my server before me.
                std::int64_t at = summary_.received_before[summary_.index(x, topo_.server_of(j), topo_.local_of(j))];
                for (int a = x * g; a < me; ++a) at += m(a, j);
                block(me, j, sent, at);
            }
            sent += n;
        }
        for (int i = me + 1; i < r; ++i) receive(i);
    }


    // --- the paper ----------------------------------------------------------------------------

    void make_exact(const traffic_matrix& m) {
        compute_shares();
        padded_ = server_;
        detail::pad_flat(padded_, topo_.servers, row_deficit_, col_deficit_);
        detail::decompose_flat(padded_, topo_.servers, matching_rule::any, stages_, decompose_ws_);
        auto build = [&](stage_order order) {
            order_stages(order);
            detail::build_uniform_rails(stages_, sequence_, share_, topo_.gpus_per_server,
                                        options_.chunks, left_, schedule_);
            slots_of_.build(schedule_);
            detail::step_lengths(schedule_, step_bytes_);
            emit(m, detail::gather_timing::up_front, share_, detail::rail_preference::own_first);
        };
        if (options_.order == stage_order::automatic) {
            build(stage_order::ascending);
            const double ascending = predict_us(plan_);
            build(stage_order::descending);
            if (ascending < predict_us(plan_)) build(stage_order::ascending);
        } else {
            build(options_.order);
        }
    }

    void order_stages(stage_order order) {
        sequence_.resize(stages_.size());
        std::iota(sequence_.begin(), sequence_.end(), std::size_t{0});
        detail::stable_sort_by(sequence_, schedule_ws_.keys, [&](std::size_t k) {
            return order == stage_order::ascending ? stages_.weights[k] : -stages_.weights[k];
        });
    }

    // From the summary: the pair totals t(s, d), each GPU's inter-server bytes sent and
    // received, in all and per server pair; with `shares`, also the balanced shares per
    // (s, d, rail) and the per-GPU server matrix M(s, d) = ceil(t / G). O(S^2 G).
    void compute_shares(bool shares = true) {
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        if (shares) {
            share_.assign(us * us * ug, 0);
            server_.assign(us * us, 0);
        }
        pair_.assign(us * us, 0);
        gpu_out_.assign(us * ug, 0);
        gpu_in_.assign(us * ug, 0);
        own_rank_.resize(ug);
        for (std::size_t s = 0; s < us; ++s)
            for (std::size_t d = 0; d < us; ++d) {
                if (s == d) continue;
                const std::size_t at = (s * us + d) * ug;
                const std::int64_t* sent = summary_.sent.data() + at;
                const std::int64_t* received = summary_.received.data() + at;
                std::int64_t total = 0;
                for (std::size_t a = 0; a < ug; ++a) {
                    total += sent[a];
                    gpu_out_[s * ug + a] += sent[a];
                    gpu_in_[d * ug + a] += received[a];
                }
                if (shares) {
                    detail::balanced_shares(total, std::span<const std::int64_t>(sent, ug),
                                            std::span<std::int64_t>(share_.data() + at, ug), own_rank_);
                    server_[s * us + d] = detail::ceil_div(total, static_cast<std::int64_t>(ug));
                }
                pair_[s * us + d] = total;
            }
    }

    // The ramp growth factor. A step of D bytes per NIC makes the busiest sending GPU of a
    // server (share f of the server's outbound bytes) move about f (G - 1) D bytes over scale-up
    // before it; spread over `window` neighbouring steps of D' bytes each with room
    // D' B_up / B_out, that is at most `ramp` of the room when
    // D / D' <= ramp * window * (B_up / B_out) / (f (G - 1)). The falling side uses the same
    // factor: the busiest receiving GPU can be far hotter (MoE experts), but streams carry the
    // bytes for hot receivers first, so the last, shrinking steps hold bytes for cold ones.
    [[nodiscard]] double ramp_growth(double ramp) const {
        return growth_for(busiest_share(gpu_out_) * std::max(1, topo_.gpus_per_server - 1), ramp);
    }

    // The factor for the busiest receiving GPU (share f of its server's inbound bytes): of a
    // step's G D landed bytes, f G D are its own and D arrive on its own rail, so f G D - D come
    // over scale-up after the step. 0 unless that is more than the senders' factor allows: then
    // the receivers decide the shape (see shape_steps).
    [[nodiscard]] double drop_growth(double ramp) const {
        const double drop = growth_for(busiest_share(gpu_in_) * topo_.gpus_per_server - 1, ramp);
        return drop < ramp_growth(ramp) ? drop : 0.0;
    }

    // The largest share of its server's inter-server bytes that one GPU has in `bytes` (per GPU).
    [[nodiscard]] double busiest_share(const std::vector<std::int64_t>& bytes) const {
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        double f = 1.0 / static_cast<double>(ug);
        for (std::size_t s = 0; s < us; ++s) {
            std::int64_t all = 0;
            for (std::size_t a = 0; a < ug; ++a) all += bytes[s * ug + a];
            if (all > 0)
                for (std::size_t a = 0; a < ug; ++a)
                    f = std::max(f, static_cast<double>(bytes[s * ug + a]) / static_cast<double>(all));
        }
        return f;
    }

    // How much longer a step may be than its neighbour when `moved` times its bytes cross
    // scale-up during the `window` steps beside it, at most `ramp` of their room.
    [[nodiscard]] double growth_for(double moved, double ramp) const {
        if (ramp <= 0) return 0.0;
        const double room = ramp * options_.window * topo_.scale_up_gbps / topo_.scale_out_gbps;
        return std::clamp(room / std::max(moved, 1e-3), detail::tuning::min_growth, detail::tuning::max_growth);
    }

    // --- beyond the paper ---------------------------------------------------------------------

    // The largest line sum of an S x S matrix.
    [[nodiscard]] std::int64_t largest_line(const std::vector<std::int64_t>& a) const {
        const auto us = static_cast<std::size_t>(topo_.servers);
        std::int64_t best = 0;
        for (std::size_t k = 0; k < us; ++k) {
            std::int64_t row = 0;
            std::int64_t col = 0;
            for (std::size_t j = 0; j < us; ++j) {
                row += a[k * us + j];
                col += a[j * us + k];
            }
            best = std::max({best, row, col});
        }
        return best;
    }

    // The quantum for a matrix whose busiest line is `line`, shared by `lanes` rails.
    [[nodiscard]] std::int64_t choose_quantum(std::int64_t line, int lanes) const {
        if (options_.quantum > 0) return options_.quantum;
        const double entry = static_cast<double>(line) / (std::max(1, topo_.servers) * lanes);
        return std::max<std::int64_t>(1, detail::saturate(options_.quantum_fraction * entry));
    }

    // The ramp for a call whose balanced NICs carry `nic_bytes` each (long_call_ramp_scale).
    [[nodiscard]] double ramp_for(std::int64_t nic_bytes) const {
        const double alphas =
            static_cast<double>(nic_bytes) / static_cast<double>(std::max<std::int64_t>(1, alpha_bytes(1.0)));
        // Up to short_call_alphas: `ramp`; from long_call_alphas: `ramp * long_call_ramp_scale`.
        using detail::tuning::long_call_alphas;
        using detail::tuning::short_call_alphas;
        const double toward_long = std::clamp(std::log2(std::max(alphas, 1.0) / short_call_alphas) /
                                                  std::log2(long_call_alphas / short_call_alphas),
                                              0.0, 1.0);
        return options_.ramp * (1.0 + toward_long * (options_.long_call_ramp_scale - 1.0));
    }

    [[nodiscard]] std::int64_t alpha_bytes(double alphas) const {
        return detail::saturate(alphas * topo_.alpha_out_us * topo_.scale_out_gbps * 1e3);
    }

    void make_bottleneck(const traffic_matrix& m) {
        compute_shares();
        const std::int64_t q = choose_quantum(largest_line(server_), 1);
        padded_ = server_;
        detail::quantise(padded_, q);
        detail::pad_flat(padded_, topo_.servers, row_deficit_, col_deficit_);
        detail::decompose_flat(padded_, topo_.servers, matching_rule::bottleneck, stages_, decompose_ws_);
        detail::scale_weights(stages_, q);
        sequence_.resize(stages_.size());
        std::iota(sequence_.begin(), sequence_.end(), std::size_t{0});
        detail::build_uniform_rails(stages_, sequence_, share_, topo_.gpus_per_server, 1, left_, schedule_);
        const double growth = ramp_growth(options_.ramp);
        detail::shape_steps(schedule_, growth, alpha_bytes(options_.min_step_alphas), 0, schedule_ws_);
        slots_of_.build(schedule_);
        detail::step_lengths(schedule_, step_bytes_);
        emit(m, detail::gather_timing::windowed, share_, detail::rail_preference::own_first);
    }

    void make_rail_packed(const traffic_matrix& m) {
        compute_shares(false);
        const int g = topo_.gpus_per_server;
        const std::int64_t line = largest_line(pair_);
        const std::int64_t min_step = alpha_bytes(options_.min_step_alphas);
        const std::int64_t max_step = detail::saturate(options_.max_step_share * static_cast<double>(line) / g);
        // Quantum candidates: a coarser quantum pads more but leaves fewer small stages, each
        // a step with its alpha_out; which wins depends on the traffic. The schedule kept is the
        // one whose step lengths plus alpha_out per step add up to the least (the cost model's
        // time without scale-up exposure, which the ramps keep small; no emission needed).
        // Candidates are costed from their step lengths alone (shaping keeps the lengths' sum
        // and only adds steps); only the winner's slots are built.
        const std::int64_t alpha = alpha_bytes(1.0);
        const int choices = options_.quantum > 0 ? 1 : options_.quantum_choices;
        const std::int64_t quantum = choose_quantum(line, g);
        const double ramp = ramp_for(detail::ceil_div(line, static_cast<std::int64_t>(g)));
        const double growth = ramp_growth(ramp);
        const double drop = drop_growth(ramp);
        double best = 0;
        double best_factor = 1;
        bool first = true;
        auto try_factor = [&](double factor) {
            const std::int64_t q = detail::saturate(static_cast<double>(quantum) * factor);
            padded_ = pair_;
            detail::quantise(padded_, q);
            detail::pad_flat(padded_, topo_.servers, row_deficit_, col_deficit_);
            detail::decompose_flat(padded_, topo_.servers, matching_rule::bottleneck, stages_, decompose_ws_);
            detail::scale_weights(stages_, q);
            if (!detail::build_rail_packed<false>(stages_, pair_, g, min_step, max_step, candidate_, schedule_ws_,
                                                  first ? HUGE_VAL : best, alpha))
                return;
            std::int64_t bytes = 0;
            for (const std::int64_t n : schedule_ws_.length) bytes = detail::checked_add(bytes, n, "step lengths");
            const std::int32_t steps = detail::shape_steps<false>(candidate_, growth, min_step, drop, schedule_ws_);
            const double cost = static_cast<double>(bytes) + static_cast<double>(steps) * static_cast<double>(alpha);
            if (first || cost < best) {
                best = cost;
                best_factor = factor;
                first = false;
                std::swap(stages_, best_stages_);
            }
        };
        for (int factor = 1; factor <= choices; ++factor) try_factor(factor);
        // The cost is not smooth in the quantum (one tail stage more or less is a step), so the
        // best factor is refined by halving steps around it; never below the default quantum.
        const int refinements =
            options_.quantum > 0 || topo_.servers > options_.refine_max_servers ? 0 : options_.quantum_refinements;
        double radius = 1.0;
        for (int k = 0; k < refinements; ++k) {
            radius /= 2;
            const double center = best_factor;
            if (center - radius >= 1.0) try_factor(center - radius);
            try_factor(center + radius);
        }
        detail::build_rail_packed(best_stages_, pair_, g, min_step, max_step, schedule_, schedule_ws_);
        unshaped_ = schedule_;
        detail::shape_steps(schedule_, growth, min_step, drop, schedule_ws_);
        // Which rail carries which slot of a step is free: the first step goes to the rails whose
        // GPUs hold its bytes, the falling side's steps to those whose GPUs receive them.
        detail::step_lengths(schedule_, step_bytes_);
        // The first step needs no balancing before it only as far as its rails' own bytes
        // cover its slots: where they fall short, it is shaped again no longer than they cover
        // (never below the edge), since nothing hides a gather before it.
        detail::assign_rails(schedule_, step_bytes_, summary_.sent, summary_.received, schedule_ws_,
                             detail::rail_steps::first);
        const detail::first_step_cover cover = detail::cover_of_first_step(schedule_, summary_.sent);
        if (const std::int64_t cap = std::max(cover.own, min_step); cap < cover.length) {
            schedule_ = unshaped_;
            detail::shape_steps(schedule_, growth, min_step, drop, schedule_ws_, cap);
            detail::step_lengths(schedule_, step_bytes_);
            detail::assign_rails(schedule_, step_bytes_, summary_.sent, summary_.received, schedule_ws_);
        } else {
            detail::assign_rails(schedule_, step_bytes_, summary_.sent, summary_.received, schedule_ws_,
                                 detail::rail_steps::falling);
        }
        // What each rail carries for each pair follows from the schedule.
        slots_of_.build(schedule_);
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto ug = static_cast<std::size_t>(g);
        capacity_.assign(us * us * ug, 0);
        for (std::size_t k = 0; k < capacity_.size(); ++k) capacity_[k] = slots_of_.bytes(k);
        emit(m, detail::gather_timing::windowed, capacity_, detail::rail_preference::landing_first);
    }

    // Turns the schedule into transfers: per server pair, assign the tile to rails with the
    // given capacities and walk each rail's stream over its slots (slots_of_ and step_bytes_,
    // built from the schedule by the caller); then the intra-server blocks. The whole plan, or
    // with a focus rank the tiles with an end in its server and the rank's program.
    void emit(const traffic_matrix& m, detail::gather_timing timing,
              std::span<const std::int64_t> capacity, detail::rail_preference preference) {
        if (schedule_only_) return;
        if (direct_wins()) {
            make_direct(m);
            return;
        }
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        const auto ur = static_cast<std::size_t>(topo_.ranks());
        builder_.start(summary_, topo_, schedule_.last_step, timing, options_.window, step_bytes_, focus_,
                       options_.split_blocks);
        head_.assign(ug, 0);
        const std::size_t only = focus_ < 0 ? us : static_cast<std::size_t>(topo_.server_of(focus_));
        for (std::size_t s = 0; s < us; ++s)
            for (std::size_t d = 0; d < us; ++d) {
                if (s == d || (only < us && s != only && d != only)) continue;
                builder_.load_tile(static_cast<int>(s), static_cast<int>(d), m.data() + s * ug * ur + d * ug, ur);
                // Nothing hides a gather before the first scale-out step: a rail's bytes in it
                // should be its own GPU's (own-first rails start with them anyway).
                if (timing == detail::gather_timing::windowed && preference == detail::rail_preference::landing_first)
                    for (std::size_t i = 0; i < ug; ++i) {
                        const auto slots = slots_of_.of((s * us + d) * ug + i);
                        head_[i] = !slots.empty() && slots.front().step == 1 ? slots.front().bytes : 0;
                    }
                detail::assign_tile(builder_.tile(), builder_.tile_stride(), topo_.gpus_per_server,
                                    capacity.subspan((s * us + d) * ug, ug), tile_ws_,
                                    builder_.destination_heat(), preference, std::span<const std::int64_t>(head_));
                for (std::size_t rail = 0; rail < ug; ++rail)
                    builder_.emit_stream(static_cast<int>(rail), tile_ws_.stream(rail),
                                         slots_of_.of((s * us + d) * ug + rail));
            }
        for (std::size_t s = 0; s < us; ++s) {
            if (only < us && s != only) continue;
            builder_.load_tile(static_cast<int>(s), static_cast<int>(s), m.data() + s * ug * ur + s * ug, ur);
            builder_.emit_intra_tile();
        }
        if (focus_ >= 0) {
            builder_.finish(rank_, pair_counts_);
            return;
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
        // The same quantised bottleneck decomposition as FAST's, on the GPU-level matrix.
        std::int64_t line = 0;
        for (std::size_t i = 0; i < ur; ++i) {
            std::int64_t row = 0;
            std::int64_t col = 0;
            for (std::size_t j = 0; j < ur; ++j) {
                row += a[i * ur + j];
                col += a[j * ur + i];
            }
            line = std::max({line, row, col});
        }
        const std::int64_t q = options_.quantum > 0
                                   ? options_.quantum
                                   : std::max<std::int64_t>(1, detail::saturate(options_.quantum_fraction *
                                                                                static_cast<double>(line) / r));
        detail::quantise(a, q);
        detail::pad_flat(a, r, row_deficit_, col_deficit_);
        detail::decompose_flat(a, r, matching_rule::bottleneck, stages_, decompose_ws_);
        detail::scale_weights(stages_, q);
        // Blocks go straight from send to recv, min(w, left) per stage, largest stages first;
        // intra-server blocks during the first stage.
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
        auto add_intra = [&] {
            for (std::size_t i = 0; i < ur; ++i)
                for (std::size_t j = 0; j < ur; ++j)
                    if (topo_.same_server(static_cast<int>(i), static_cast<int>(j)) && left_[i * ur + j] > 0) {
                        plan_.transfers.push_back(detail::block_transfer(
                            l, topo_, static_cast<int>(i), static_cast<int>(j), left_[i * ur + j]));
                        left_[i * ur + j] = 0;
                    }
        };
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
            if (plan_.transfers.size() > before) {
                if (first) add_intra();
                plan_.end_step();
                first = false;
            }
        }
        if (first) { // no inter-server traffic at all
            add_intra();
            if (!plan_.transfers.empty()) plan_.end_step();
        }
    }

    fast::topology topo_;
    plan_options options_;
    plan plan_;
    int focus_ = -1; // make_rank: the rank whose program is being emitted
    fast::scheduler last_scheduler_ = scheduler::fast;
    bool schedule_only_ = false; // make_schedule: stop before the emission
    std::vector<std::int64_t> received_at_; // make_direct: per rank, its receive offset so far
    rank_program rank_;
    traffic_summary summary_;
    std::vector<std::uint32_t> pair_counts_; // number_pairs' workspace
    // Buffers kept between calls.
    std::vector<std::int64_t> share_;
    std::vector<std::int64_t> server_;
    std::vector<std::int64_t> pair_;
    std::vector<std::int64_t> gpu_out_; // per GPU: inter-server bytes sent
    std::vector<std::int64_t> gpu_in_;  // per GPU: inter-server bytes received
    std::vector<std::int64_t> capacity_;
    std::vector<std::uint32_t> own_rank_; // balanced_shares: each GPU's rank by its own bytes
    std::vector<std::int64_t> padded_;
    std::vector<std::int64_t> row_deficit_;
    std::vector<std::int64_t> col_deficit_;
    std::vector<std::int64_t> left_;
    detail::decompose_workspace decompose_ws_;
    decomposition stages_;
    decomposition best_stages_; // rail packing: the decomposition of the best quantum so far
    std::vector<std::size_t> sequence_;
    std::vector<std::int64_t> step_bytes_;
    detail::stage_schedule schedule_;
    detail::stage_schedule unshaped_; // the winner's schedule before shaping, to shape again
    detail::stage_schedule candidate_;
    detail::schedule_workspace schedule_ws_;
    detail::stream_slots slots_of_;
    detail::plan_builder builder_;
    detail::tile_workspace tile_ws_;
    std::vector<std::int64_t> head_; // per rail of the tile being emitted: its bytes in the first step
};

/// Plans `m` on `topo`. Throws fast::invalid_argument on invalid input.
[[nodiscard]] inline plan make_plan(const traffic_matrix& m, const topology& topo,
                                    const plan_options& options = {}) {
    planner p(topo, options);
    return p.make(m);
}

} // namespace fast
