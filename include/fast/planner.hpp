#pragma once
/// \file planner.hpp
/// make_plan(traffic, topology, options): the FAST schedule and the baselines, as plans in the
/// contract of plan.hpp. A `planner` keeps its buffers between calls (MoE plans on every layer
/// call), so repeated planning allocates nothing once the sizes have been seen. Its make_rank
/// plans only one rank's part (rank_program.hpp): the schedule every rank shares, then the
/// rank's own transfers, what a runtime pays on each rank; make builds the whole plan, for tools.
///
///     fast::planner p(fast::make_topology(4, 8));
///     const fast::plan& whole = p.make(m);              // for tools: verify, JSON, simulators
///     const fast::rank_program& mine = p.make_rank(m, 5); // what rank 5 runs
///
/// The pipeline of the default policy (rail_packed; docs/algorithm.md), a stage per header:
///  1. the server matrix: what each server pair sends (detail/server_matrix.hpp);
///  2. decomposition into one-to-one stages, quantised (detail/bvn_decomposition.hpp,
///     detail/packing.hpp's decompose_quantised), the quantum chosen by costing candidates;
///  3. the schedule: stages packed into time-aligned steps of G equal slots
///     (detail/packing.hpp), shaped into a pyramid with ramps (detail/shaping.hpp), rails
///     chosen for the first and last steps (detail/rail_assignment.hpp);
///  4. balancing: which bytes of each tile each rail carries (detail/balancing.hpp);
///  5. emission: gathers, scale-out, redistribution, scratch (detail/emission.hpp).
/// The other policies (plan_options::policy): exact, the paper (exact BvN of the balanced
/// per-GPU server matrix, the same stage on every rail, balancing up front); bottleneck, the
/// paper's layout on a quantised bottleneck decomposition with ramps. With the automatic
/// scheduler (the default) the schedule's predicted time decides between it and direct
/// (baselines.hpp) before the emission. Tuned numbers: detail/tuning.hpp.
///
/// On a fabric whose ranks scale out at different rates (planner(fabric); fabric.hpp) every
/// policy plans the paper's layout in time: each server pair's bytes over its rails in
/// proportion to their rates, nothing on a NIC that is down (detail/uneven_rails.hpp).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "baselines.hpp"
#include "cost.hpp"
#include "counts.hpp"
#include "decomposition.hpp"
#include "detail/balancing.hpp"
#include "detail/bvn_decomposition.hpp"
#include "detail/checked.hpp"
#include "detail/emission.hpp"
#include "detail/packing.hpp"
#include "detail/rail_assignment.hpp"
#include "detail/schedule.hpp"
#include "detail/server_matrix.hpp"
#include "detail/shaping.hpp"
#include "detail/sorting.hpp"
#include "detail/tuning.hpp"
#include "detail/unbalanced.hpp"
#include "detail/uneven_rails.hpp"
#include "error.hpp"
#include "fabric.hpp"
#include "plan.hpp"
#include "plan_options.hpp"
#include "rank_program.hpp"
#include "traffic.hpp"
#include "traffic_summary.hpp"

namespace fast {

/// Plans All-to-All(v) traffic on one topology, reusing its buffers from call to call.
class planner {
public:
    explicit planner(const fast::topology& topo, plan_options options = {}) : topo_(topo), options_(options) {
        validate(topo_);
        validate(options_);
    }

    /// Plans on the fabric `f` (validated): on its planning_topology, and where its ranks scale
    /// out at different rates, with each rank's rate (nic_rates): every plan then carries them
    /// (plan::nic_gbps) and its scale-out avoids NICs that are down.
    explicit planner(const fabric& f, plan_options options = {}) : planner(planning_topology(f), options) {
        if (has_uneven_rates(f)) rates_ = fast::nic_rates(f);
    }

    [[nodiscard]] const fast::topology& topology() const noexcept { return topo_; }
    [[nodiscard]] const plan_options& options() const noexcept { return options_; }
    /// Whether make_rank(shared, own, rank) plans with these options (a runtime's rank plans from
    /// the counts it agreed on): direct, and FAST's rail packing or uneven layout.
    [[nodiscard]] bool plans_rank_from_counts() const noexcept {
        return options_.scheduler == scheduler::direct ||
               ((options_.scheduler == scheduler::fast || options_.scheduler == scheduler::automatic) &&
                plans_from_counts());
    }
    /// Each rank's scale-out rate where the fabric's differ (planner(fabric)); empty where all
    /// run at topology().scale_out_gbps.
    [[nodiscard]] std::span<const double> nic_rates() const noexcept { return rates_; }

    /// Plans `m` (validated against the topology): the whole plan. The reference stays valid
    /// until the next call.
    const plan& make(const traffic_matrix& m) {
        focus_ = -1;
        work_us_ = 0;
        last_scheduler_ = options_.scheduler; // automatic: make_fast says which it chose
        check_scheduler_fits_rates();
        switch (options_.scheduler) {
        case scheduler::direct:
            validate_traffic(m, topo_);
            if (!rates_.empty()) {
                fill_shared_counts(m, topo_, own_shared_, own_, part_);
                counts_ = &own_shared_;
                check_direct_reaches();
            }
            detail::fill_direct_plan(m, topo_, plan_, received_at_);
            work_us_ = direct_planning_us();
            break;
        case scheduler::spreadout: plan_ = make_spreadout_plan(m, topo_); break;
        case scheduler::fast_unbalanced:
            validate_traffic(m, topo_);
            make_unbalanced(m);
            break;
        case scheduler::automatic:
        case scheduler::fast:
            use_matrix(m);
            make_fast();
            break;
        }
        plan_.nic_gbps = rates_;
        return plan_;
    }

    /// Rank `rank`'s part of make(m) (rank_program.hpp): the same transfers in the same order,
    /// sizes and own offsets as the whole plan has for it (other ranks' offsets read 0), stepped
    /// in the schedule's numbering (0 .. last scale-out step + 1, alike on every rank; the whole
    /// plan leaves out the steps nobody has transfers in). The FAST schedule is computed whole
    /// (every rank computes the same one); then only the tiles with an end in the rank's server
    /// are balanced and walked, placing that server's scale-up moves and keeping the rank's
    /// transfers. Cost: one pass over m (its shared counts), the schedule, and O(S G^2 + the
    /// server's pieces) for the rank. Spreadout, FAST without balancing and the exact policy with
    /// an automatic order (chosen by predicting whole plans) build the whole plan and restrict
    /// it. The reference stays valid until the next call.
    const rank_program& make_rank(const traffic_matrix& m, int rank) {
        check_rank(rank);
        if (needs_whole_plan()) {
            rank_ = restrict_to_rank(make(m), rank);
            return rank_;
        }
        check_scheduler_fits_rates();
        if (options_.scheduler != scheduler::direct && !plans_from_counts()) {
            // The paper's layouts balance every pair up front: their shares come from the summary.
            use_matrix(m);
            focus_ = rank;
            make_fast();
            focus_ = -1;
            return rank_;
        }
        validate_traffic(m, topo_);
        fill_shared_counts(m, topo_, own_shared_, own_, part_);
        fill_server_counts(m, topo_, topo_.server_of(rank), own_);
        plan_rank(own_shared_, own_, rank);
        return rank_;
    }

    /// Rank `rank`'s part of the plan of the call whose shared counts are `all` and whose
    /// server's rows and columns are `own` (counts.hpp): what a runtime computes on each rank
    /// after agreeing on the counts, without the matrix; equal to make_rank(m, rank). Plans the
    /// rail-packed policy, every policy on uneven rates, and direct (the others need the matrix:
    /// throws fast::invalid_argument; plans_rank_from_counts says which). Cost: O(S^2 + R G) for the counts, the
    /// schedule, and the rank's own part; a direct program O(R).
    const rank_program& make_rank(const shared_counts& all, const server_counts& own, int rank) {
        check_rank(rank);
        check_scheduler_fits_rates();
        if (needs_whole_plan() || (options_.scheduler != scheduler::direct && !plans_from_counts()))
            throw invalid_argument("make_rank from counts plans the rail-packed policy, uneven rates and direct; "
                                   "scheduler '" +
                                   std::string(to_string(options_.scheduler)) + "' with policy '" +
                                   std::string(to_string(options_.policy)) + "' needs the traffic matrix");
        validate_counts(all, own, rank);
        plan_rank(all, own, rank);
        return rank_;
    }

    /// The FAST schedule alone, as every rank computes it before its own transfers (make_rank
    /// without the emission; the automatic choice is not made): the length in bytes of each
    /// scale-out step, the longest slot of the step, in step order. For benchmarks and for
    /// runtimes that want the shape of a call (on uneven rates, in bytes at the fastest rank's
    /// rate: the steps' durations). The span stays valid until the next call.
    std::span<const std::int64_t> make_schedule(const traffic_matrix& m) {
        work_us_ = 0;
        use_matrix(m);
        schedule_only_ = true;
        const plan_options saved = options_;
        if (options_.policy == policy::exact) options_.order = stage_order::ascending; // no whole plans to predict
        try {
            make_fast();
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

    /// What the last make or make_rank cost one rank in the planning cost model (tuning.hpp):
    /// the candidates it decomposed, the rest of the schedule, the rank's own part (or direct's
    /// program), in microseconds of one core. Counted, not measured: the same on every machine
    /// and rank, the figure the automatic scheduler and sized effort weigh against the exchange.
    /// Rail packing and direct only (0 for the other policies and schedulers).
    [[nodiscard]] double planning_work_us() const noexcept { return work_us_; }

private:
    // --- The call's inputs ----------------------------------------------------------------------

    void check_rank(int rank) const {
        if (rank < 0 || rank >= topo_.ranks())
            throw invalid_argument("rank " + std::to_string(rank) + " is not in 0 .. " +
                                   std::to_string(topo_.ranks() - 1));
    }

    [[nodiscard]] bool needs_whole_plan() const noexcept {
        return options_.scheduler == scheduler::spreadout || options_.scheduler == scheduler::fast_unbalanced ||
               (options_.scheduler != scheduler::direct && !plans_from_counts() && options_.policy == policy::exact &&
                options_.order == stage_order::automatic);
    }

    // Whether FAST's schedule needs only the shared counts: rail packing, and the uneven layout.
    [[nodiscard]] bool plans_from_counts() const noexcept {
        return options_.policy == policy::rail_packed || !rates_.empty();
    }

    // Spreadout and FAST without balancing plan for equal NICs.
    void check_scheduler_fits_rates() const {
        if (!rates_.empty() &&
            (options_.scheduler == scheduler::spreadout || options_.scheduler == scheduler::fast_unbalanced))
            throw invalid_argument("scheduler '" + std::string(to_string(options_.scheduler)) +
                                   "' plans for equal NICs; this fabric's ranks scale out at different rates");
    }

    // Direct sends each rank's bytes through its own NIC: where one is down and has bytes to
    // move across servers, it cannot run (from the shared counts): the first such rank, or -1.
    [[nodiscard]] int direct_blocked_at() const noexcept {
        for (std::size_t k = 0; k < rates_.size(); ++k)
            if (rates_[k] == 0 && (counts_->gpus[k].out > 0 || counts_->gpus[k].in > 0)) return static_cast<int>(k);
        return -1;
    }
    [[nodiscard]] bool direct_reaches() const noexcept { return direct_blocked_at() < 0; }
    void check_direct_reaches() const {
        if (const int k = direct_blocked_at(); k >= 0) {
            const gpu_totals& x = counts_->gpus[static_cast<std::size_t>(k)];
            throw invalid_argument("direct cannot run: rank " + std::to_string(k) + "'s NIC is down and it has " +
                                   std::to_string(x.out) + " bytes to send and " + std::to_string(x.in) +
                                   " to receive across servers");
        }
    }

    // Plans from the matrix: its summary (validating it), the shared counts from the summary.
    void use_matrix(const traffic_matrix& m) {
        summarize(m, topo_, summary_);
        fill_shared_counts(summary_, topo_, own_shared_);
        m_ = &m;
        counts_ = &own_shared_;
        own_counts_ = nullptr;
    }

    void validate_counts(const shared_counts& all, const server_counts& own, int rank) const {
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto r = static_cast<std::size_t>(topo_.ranks());
        const std::size_t detail =
            wants_rail_detail(topo_) ? us * us * static_cast<std::size_t>(topo_.gpus_per_server) : 0;
        if (all.servers != topo_.servers || all.gpus_per_server != topo_.gpus_per_server ||
            all.pair.size() != us * us || all.gpus.size() != r || all.rail_sent.size() != detail ||
            all.rail_received.size() != detail)
            throw invalid_argument("shared counts for " + std::to_string(all.servers) + " x " +
                                   std::to_string(all.gpus_per_server) + " (or of the wrong sizes) on a " +
                                   std::to_string(topo_.servers) + " x " + std::to_string(topo_.gpus_per_server) +
                                   " topology");
        validate_server_counts(own, topo_);
        if (own.server != topo_.server_of(rank))
            throw invalid_argument("server counts of server " + std::to_string(own.server) + " for rank " +
                                   std::to_string(rank) + ", which is on server " +
                                   std::to_string(topo_.server_of(rank)));
    }

    // One rank's program from counts: direct from its row and column, FAST from the shared
    // counts' schedule and its server's tiles.
    void plan_rank(const shared_counts& all, const server_counts& own, int rank) {
        work_us_ = 0;
        m_ = nullptr;
        counts_ = &all;
        own_counts_ = &own;
        focus_ = rank;
        last_scheduler_ = options_.scheduler;
        if (options_.scheduler == scheduler::direct) make_direct();
        else make_fast();
        focus_ = -1;
    }

    // The packed offsets of the focus server's GPUs, from its rows and columns: where GPU a's
    // blocks for server d start in its send buffer, GPU b's from server s in its receive buffer.
    void own_bases() {
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        const auto r = us * ug;
        own_send_base_.resize(us * ug);
        own_recv_base_.resize(us * ug);
        for (std::size_t a = 0; a < ug; ++a) {
            std::int64_t at = 0;
            for (std::size_t d = 0; d < us; ++d) {
                own_send_base_[d * ug + a] = at;
                for (std::size_t b = 0; b < ug; ++b) at += own_counts_->rows[a * r + d * ug + b];
            }
        }
        for (std::size_t b = 0; b < ug; ++b) {
            std::int64_t at = 0;
            for (std::size_t s = 0; s < us; ++s) {
                own_recv_base_[s * ug + b] = at;
                for (std::size_t a = 0; a < ug; ++a) at += own_counts_->cols[(s * ug + a) * ug + b];
            }
        }
    }

    // Tile (s, d): block (a, b) at tile[a * stride + b], from the matrix or the focus server's
    // rows (s is it) or columns (d is it).
    [[nodiscard]] std::pair<const std::int64_t*, std::size_t> tile_of(int s, int d) const noexcept {
        const auto g = static_cast<std::size_t>(topo_.gpus_per_server);
        const auto r = static_cast<std::size_t>(topo_.ranks());
        if (m_ != nullptr)
            return {m_->data() + static_cast<std::size_t>(s) * g * r + static_cast<std::size_t>(d) * g, r};
        if (s == own_counts_->server) return {own_counts_->rows.data() + static_cast<std::size_t>(d) * g, r};
        return {own_counts_->cols.data() + static_cast<std::size_t>(s) * g * g, g};
    }

    // The packed offsets of tile (s, d)'s rows and columns (load_tile): from the summary, or
    // the focus server's own with the other server's read as 0 (a rank's program has no other
    // rank's offsets).
    void tile_bases(int s, int d) {
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        send_base_.assign(ug, 0);
        recv_base_.assign(ug, 0);
        for (std::size_t k = 0; k < ug; ++k) {
            if (m_ != nullptr) {
                send_base_[k] = summary_.sent_before[summary_.index(s, d, static_cast<int>(k))];
                recv_base_[k] = summary_.received_before[summary_.index(s, d, static_cast<int>(k))];
                continue;
            }
            if (s == own_counts_->server) send_base_[k] = own_send_base_[static_cast<std::size_t>(d) * ug + k];
            if (d == own_counts_->server) recv_base_[k] = own_recv_base_[static_cast<std::size_t>(s) * ug + k];
        }
    }

    // --- FAST: the pipeline --------------------------------------------------------------------

    void make_fast() {
        last_scheduler_ = scheduler::fast;
        out_share_ = detail::busiest_share(counts_->gpus, topo_.servers, topo_.gpus_per_server, true);
        in_share_ = detail::busiest_share(counts_->gpus, topo_.servers, topo_.gpus_per_server, false);
        if (!rates_.empty()) make_uneven();
        else switch (options_.policy) {
            case policy::exact: make_exact(); break;
            case policy::bottleneck: make_bottleneck(); break;
            case policy::rail_packed: make_rail_packed(); break;
            }
        if (focus_ < 0 && last_scheduler_ == scheduler::fast) plan_.scheduler = "fast";
    }

    // The default policy: the server-level matrix decomposed at the best of several quanta,
    // its stages packed into steps of G equal slots, shaped and given rails; each rail carries
    // what its slots hold for each pair. Only the shared counts decide the schedule.
    void make_rail_packed() {
        lines_ = detail::summarize_lines(counts_->pair, static_cast<std::size_t>(topo_.servers), line_ws_, entries_ws_);
        if (!schedule_only_ && fast_not_expected_to_win()) {
            make_direct();
            return;
        }
        rail_bytes_.reset(*counts_);
        work_us_ += schedule_rest_us();
        const rail_packing setup = rail_packing_setup();
        choose_stages(setup);
        schedule_rail_packed(setup);
        if (schedule_only_) return;
        slots_of_.build(schedule_, focus_ < 0 ? -1 : topo_.server_of(focus_));
        capacity_.resize(slots_of_.keys());
        for (std::size_t k = 0; k < capacity_.size(); ++k) capacity_[k] = slots_of_.bytes(k);
        emit(detail::gather_timing::windowed, capacity_, capacity_by::stream, detail::rail_preference::landing_first);
    }

    // Rail packing's bounds for this call: the steps' limits (the edge, and max_step_share of
    // the busiest NIC's bytes), the shape (the ramps for this call's length) and the default
    // quantum.
    struct rail_packing {
        detail::packing_limits limits;
        detail::shape_params shape;
        std::int64_t quantum = 1;
    };

    [[nodiscard]] rail_packing rail_packing_setup() const {
        const int g = topo_.gpus_per_server;
        const std::int64_t line = lines_.line;
        const std::int64_t min_step = alpha_bytes(options_.min_step_alphas);
        const double ramp = ramp_for(detail::ceil_div(line, static_cast<std::int64_t>(g)));
        return {{g, min_step, detail::saturate(options_.max_step_share * static_cast<double>(line) / g)},
                {ramp_growth(ramp), min_step, drop_growth(ramp), 0},
                choose_quantum(line, g)};
    }

    // The quantum search so far: the cheapest schedule's cost and quantum factor.
    struct quantum_search {
        bool found = false;
        double cost = 0;
        double factor = 1;
    };

    // Leaves in best_stages_ the decomposition whose schedule costs least: step lengths plus
    // alpha_out per step (the cost model's time without scale-up exposure, which the ramps keep
    // small), over quanta of 1 .. quantum_choices times the default, the best factor then
    // refined by halving steps around it (the cost is not smooth in the quantum: one tail stage
    // more or less is a step), never below the default; with sized effort only as many
    // candidates as candidate_budget allows, in that order.
    void choose_stages(const rail_packing& setup) {
        quantum_search best;
        int budget = candidate_budget();
        const int choices = options_.quantum > 0 ? 1 : std::min(options_.quantum_choices, budget);
        for (int factor = 1; factor <= choices; ++factor) try_quantum(setup, factor, best);
        budget -= choices;
        const int refinements =
            options_.quantum > 0 || topo_.servers > options_.refine_max_servers ? 0 : options_.quantum_refinements;
        double radius = 1.0;
        for (int k = 0; k < refinements && budget > 0; ++k) {
            radius /= 2;
            const double center = best.factor;
            if (center - radius >= 1.0) {
                try_quantum(setup, center - radius, best);
                --budget;
            }
            if (budget == 0) break;
            try_quantum(setup, center + radius, best);
            --budget;
        }
        // The next call decomposes into stages_ first: as large as the kept one, so that a warm
        // planner allocates nothing whatever number of candidates each call tries.
        stages_.perms.reserve(best_stages_.perms.capacity());
        stages_.weights.reserve(best_stages_.weights.capacity());
    }

    // Decomposes the server matrix at `factor` times the default quantum and costs its schedule
    // from the step lengths alone (shaping keeps their sum and only adds steps), giving up once
    // it costs as much as the best; a cheaper one goes to best_stages_.
    void try_quantum(const rail_packing& setup, double factor, quantum_search& best) {
        work_us_ += candidate_us();
        const std::int64_t q = detail::saturate(static_cast<double>(setup.quantum) * factor);
        matrix_.assign(counts_->pair.begin(), counts_->pair.end());
        detail::decompose_quantised(matrix_, topo_.servers, q, stages_, padding_);
        const detail::packing_budget budget{best.found ? best.cost : HUGE_VAL, alpha_bytes(1.0)};
        if (!detail::packed_step_lengths(stages_, counts_->pair, setup.limits, budget, packing_ws_, lengths_)) return;
        std::int64_t bytes = 0;
        for (const std::int64_t n : lengths_) {
            const bool overflow = __builtin_add_overflow(bytes, n, &bytes);
            FAST_ASSERT(!overflow, "step lengths add up to at most the busiest line");
        }
        const std::int32_t steps = detail::count_shaped_steps(lengths_, setup.shape, shaping_ws_);
        const double cost =
            static_cast<double>(bytes) + static_cast<double>(steps) * static_cast<double>(budget.step_cost);
        if (!best.found || cost < best.cost) {
            best = {true, cost, factor};
            std::swap(stages_, best_stages_);
        }
    }

    // The winner's schedule: packed, shaped, and its rails chosen. Which rail carries which slot
    // of a step is free: the first step goes to the rails whose GPUs hold its bytes, the falling
    // side's steps to those whose GPUs receive them. The first step needs no balancing before it
    // only as far as its rails' own bytes cover its slots: where they fall short, it is shaped
    // again no longer than they cover (never below the edge), since nothing hides a gather
    // before it.
    void schedule_rail_packed(const rail_packing& setup) {
        detail::pack_rails(best_stages_, counts_->pair, setup.limits, schedule_, packing_ws_);
        unshaped_ = schedule_;
        detail::shape_steps(schedule_, setup.shape, shaping_ws_);
        detail::step_lengths(schedule_, step_bytes_);
        assign_rails(detail::rail_steps::first);
        const detail::first_step_cover cover = detail::cover_of_first_step(schedule_, rail_bytes_);
        if (const std::int64_t cap = std::max(cover.own, setup.limits.min_step); cap < cover.length) {
            detail::shape_params capped = setup.shape;
            capped.first = cap;
            schedule_ = unshaped_;
            detail::shape_steps(schedule_, capped, shaping_ws_);
            detail::step_lengths(schedule_, step_bytes_);
            assign_rails(detail::rail_steps::all);
        } else {
            assign_rails(detail::rail_steps::falling);
        }
    }

    void assign_rails(detail::rail_steps which) {
        detail::assign_rails(schedule_, step_bytes_, rail_bytes_, rail_ws_, which);
    }

    // The paper: exact BvN of the per-GPU server matrix, every stage on all rails in its own
    // step, balancing up front; the stage order the options say or the one predicted faster.
    void make_exact() {
        detail::summarize_servers(summary_, detail::rail_shares::compute, servers_);
        matrix_ = servers_.server;
        detail::decompose_padded(matrix_, topo_.servers, matching_rule::any, stages_, padding_);
        if (options_.order == stage_order::automatic) {
            emit_exact(stage_order::ascending);
            const double ascending = predict_us(plan_);
            emit_exact(stage_order::descending);
            if (ascending < predict_us(plan_)) emit_exact(stage_order::ascending);
        } else {
            emit_exact(options_.order);
        }
    }

    void emit_exact(stage_order order) {
        sequence_.resize(stages_.size());
        std::iota(sequence_.begin(), sequence_.end(), std::size_t{0});
        detail::stable_sort_by(sequence_, sort_keys_, [&](std::size_t k) {
            return order == stage_order::ascending ? stages_.weights[k] : -stages_.weights[k];
        });
        detail::build_uniform_rails(stages_, {sequence_, servers_.share, topo_.gpus_per_server, options_.chunks}, left_,
                                    schedule_);
        slots_of_.build(schedule_, focus_ < 0 ? -1 : topo_.server_of(focus_));
        detail::step_lengths(schedule_, step_bytes_);
        emit(detail::gather_timing::up_front, servers_.share, capacity_by::pair, detail::rail_preference::own_first);
    }

    // The paper's layout on the quantised bottleneck decomposition of the per-GPU server matrix
    // (largest stages first), with ramps and scale-up work in windows.
    void make_bottleneck() {
        detail::summarize_servers(summary_, detail::rail_shares::compute, servers_);
        schedule_bottleneck(servers_.server, servers_.share);
        slots_of_.build(schedule_, focus_ < 0 ? -1 : topo_.server_of(focus_));
        emit(detail::gather_timing::windowed, servers_.share, capacity_by::pair, detail::rail_preference::own_first);
    }

    // The bottleneck layout's schedule: the quantised bottleneck stages of the S x S `server`
    // matrix (per rail), every stage on all rails with each (pair, rail) carrying `share`,
    // shaped with ramps; step_bytes_ its step lengths.
    void schedule_bottleneck(std::span<const std::int64_t> server, std::span<const std::int64_t> share) {
        const auto us = static_cast<std::size_t>(topo_.servers);
        matrix_.assign(server.begin(), server.end());
        detail::decompose_quantised(matrix_, topo_.servers, choose_quantum(detail::largest_line(server, us), 1),
                                    stages_, padding_);
        sequence_.resize(stages_.size());
        std::iota(sequence_.begin(), sequence_.end(), std::size_t{0});
        detail::build_uniform_rails(stages_, {sequence_, share, topo_.gpus_per_server, 1}, left_, schedule_);
        detail::shape_steps(schedule_, {ramp_growth(options_.ramp), alpha_bytes(options_.min_step_alphas), 0, 0},
                            shaping_ws_);
        detail::step_lengths(schedule_, step_bytes_);
    }

    // Uneven rates: the bottleneck layout in time (bytes at the fastest rank's rate), each pair's
    // bytes over its rails in proportion to their rates; then each slot's time in its rail's
    // bytes. From the pair matrix alone, so a rank plans it from the shared counts. The step
    // lengths stay in time: what emission and the automatic choice weigh.
    void make_uneven() {
        work_us_ += candidate_us() + schedule_rest_us();
        try {
            detail::summarize_uneven(counts_->pair, topo_.servers, topo_.gpus_per_server, rates_, topo_.scale_out_gbps,
                                     uneven_);
        } catch (const invalid_argument&) {
            // Servers whose rails never meet: the automatic scheduler sends direct where it can.
            if (options_.scheduler != scheduler::automatic || schedule_only_ || !direct_reaches()) throw;
            make_direct();
            return;
        }
        schedule_bottleneck(uneven_.server, uneven_.time);
        if (schedule_only_) return;
        detail::time_to_bytes(schedule_, uneven_, done_time_, done_bytes_, shaping_ws_.begin, shaping_ws_.members);
        slots_of_.build(schedule_, focus_ < 0 ? -1 : topo_.server_of(focus_));
        emit(detail::gather_timing::windowed, uneven_.share, capacity_by::pair, detail::rail_preference::own_first);
    }

    // How emit finds a (pair, rail)'s capacity: keyed like the stream slots (rail packing), or
    // per (s * S + d) * G + rail (the balanced shares of the paper's layouts).
    enum class capacity_by { stream, pair };

    // Turns the schedule into transfers: per server pair, assign the tile to rails with the
    // given capacities and walk each rail's stream over its slots (slots_of_ and step_bytes_,
    // built from the schedule by the caller); then the intra-server blocks. The whole plan, or
    // with a focus rank the tiles with an end in its server and the rank's program. With the
    // automatic scheduler, direct instead where it is predicted faster.
    void emit(detail::gather_timing timing, std::span<const std::int64_t> capacity, capacity_by keyed,
              detail::rail_preference preference) {
        if (schedule_only_) return;
        if (direct_wins()) {
            make_direct();
            return;
        }
        work_us_ += emission_us();
        if (own_counts_ != nullptr) own_bases();
        const int servers = topo_.servers;
        builder_.start(counts_->gpus, topo_, step_bytes_, schedule_.last_step,
                       {timing, options_.window, focus_, options_.split_blocks});
        // Nothing hides a gather before the first scale-out step: a rail's bytes in it should be
        // its own GPU's (own-first rails start with them anyway).
        const bool heads =
            timing == detail::gather_timing::windowed && preference == detail::rail_preference::landing_first;
        head_.assign(static_cast<std::size_t>(topo_.gpus_per_server), 0);
        const int only = focus_ < 0 ? -1 : topo_.server_of(focus_); // a focus rank: its server's tiles only
        for (int s = 0; s < servers; ++s)
            for (int d = 0; d < servers; ++d)
                if (s != d && (only < 0 || s == only || d == only)) {
                    const std::size_t key = keyed == capacity_by::stream
                                                ? slots_of_.key(static_cast<std::size_t>(s), d, 0)
                                                : (static_cast<std::size_t>(s) * static_cast<std::size_t>(servers) +
                                                   static_cast<std::size_t>(d)) *
                                                      static_cast<std::size_t>(topo_.gpus_per_server);
                    emit_pair(s, d, capacity.subspan(key, static_cast<std::size_t>(topo_.gpus_per_server)), preference,
                              heads);
                }
        for (int s = 0; s < servers; ++s)
            if (only < 0 || s == only) {
                load_tile(s, s);
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

    void load_tile(int s, int d) {
        const auto [tile, stride] = tile_of(s, d);
        tile_bases(s, d);
        builder_.load_tile(s, d, tile, stride, send_base_, recv_base_);
    }

    // Tile (s, d) balanced onto the rails (capacities `capacity`, one per rail; with `heads`, a
    // rail first covers its first-step bytes with its own GPU's), each rail's stream walked
    // over its slots.
    void emit_pair(int s, int d, std::span<const std::int64_t> capacity, detail::rail_preference preference,
                   bool heads) {
        const auto ug = static_cast<std::size_t>(topo_.gpus_per_server);
        const std::size_t key = slots_of_.key(static_cast<std::size_t>(s), d, 0);
        load_tile(s, d);
        if (heads)
            for (std::size_t i = 0; i < ug; ++i) {
                const auto slots = slots_of_.of(key + i);
                head_[i] = !slots.empty() && slots.front().step == 1 ? slots.front().bytes : 0;
            }
        detail::assign_tile({builder_.tile(), builder_.tile_stride(), topo_.gpus_per_server, capacity,
                             builder_.destination_heat(), preference, head_},
                            tile_ws_);
        for (std::size_t rail = 0; rail < ug; ++rail)
            builder_.emit_stream(static_cast<int>(rail), tile_ws_.stream(rail), slots_of_.of(key + rail));
    }

    // --- Policies ------------------------------------------------------------------------------

    // The cost model's time of the direct plan, from the shared counts: one step in which every
    // port carries all its bytes at once, so the call ends with the busiest port. O(R).
    [[nodiscard]] double direct_us() const {
        double worst = 0;
        auto port = [&](std::int64_t bytes, double alpha, double gbps) {
            if (bytes > 0) worst = std::max(worst, alpha + detail::transfer_us(bytes, gbps));
        };
        for (std::size_t k = 0; k < counts_->gpus.size(); ++k) {
            const gpu_totals& x = counts_->gpus[k];
            const double out = rates_.empty() ? topo_.scale_out_gbps : rates_[k]; // 0: never ends
            port(x.out, topo_.alpha_out_us, out);
            port(x.in, topo_.alpha_out_us, out);
            port(x.up_sent, topo_.alpha_up_us, topo_.scale_up_gbps);
            port(x.up_received, topo_.alpha_up_us, topo_.scale_up_gbps);
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
    // least as fast, its program included, as the schedule's time and the rank's own part (then
    // it is built instead of emitting the schedule; the schedule's cost is spent either way). The
    // schedule's time leaves out scale-up work its ramps do not hide (under 4% of the plan's time
    // for nine in ten of planner_test's sizes and shapes, up to 13% with two servers), yet a
    // margin for it measured worse: over that sweep (4 KiB - 1 GiB per GPU, 2 - 64 servers) a
    // margin of 1.10 chose the slower of the two, end to end, by more than 1% in 66 of 288 cases,
    // none in 59 of them without.
    [[nodiscard]] bool direct_wins() const {
        return options_.scheduler == scheduler::automatic &&
               schedule_us() + emission_us() >= direct_us() + direct_planning_us();
    }

    // --- Planning effort, counted in work ---------------------------------------------------------

    // The planning cost model (tuning.hpp): one candidate decomposition, the rest of the
    // schedule with `candidates` of them, and one rank's part.
    [[nodiscard]] double candidate_us() const noexcept {
        const double s = topo_.servers;
        return detail::tuning::candidate_us_per_pair * s * s;
    }
    [[nodiscard]] double schedule_rest_us() const noexcept {
        const double s = topo_.servers;
        return detail::tuning::schedule_us_per_pair * s * s;
    }
    [[nodiscard]] double emission_us() const noexcept {
        const double s = topo_.servers;
        const double g = topo_.gpus_per_server;
        return detail::tuning::emission_us_per_block * s * g * g;
    }
    [[nodiscard]] double fast_planning_us(int candidates) const noexcept {
        return candidates * candidate_us() + schedule_rest_us() + emission_us();
    }
    [[nodiscard]] double direct_planning_us() const noexcept {
        return detail::tuning::direct_us_per_rank * topo_.ranks();
    }

    // How many quanta rail packing tries: all with full effort; with sized effort the first and
    // then one more for every candidate_us that candidate_gain of the exchange's lower bound pays.
    [[nodiscard]] int candidate_budget() const {
        const int all = options_.quantum_choices + 2 * options_.quantum_refinements;
        if (options_.effort == effort::full) return all;
        const double extra = detail::tuning::candidate_gain * lower_bound_us(*counts_, topo_) / candidate_us();
        return 1 + static_cast<int>(std::clamp(extra, 0.0, static_cast<double>(all - 1)));
    }

    // The automatic scheduler before it plans FAST: whether FAST is not expected to beat direct,
    // with its planning. FAST's expected time: the busiest line's bytes on its G NICs, in the
    // fewest steps that can carry them (a stage per server pair of the line with the most, G
    // stages a step) shaped into ramps as shape_steps would, plus the balancing and
    // redistribution alphas; against direct's predicted time and program. Needs lines_ of the
    // pair matrix. O(R).
    [[nodiscard]] bool fast_not_expected_to_win() {
        if (options_.scheduler != scheduler::automatic) return false;
        const std::int64_t g = topo_.gpus_per_server;
        const std::int64_t line = lines_.line;
        const std::int64_t pairs = lines_.entries;
        if (line == 0) return true; // nothing crosses servers: FAST has no steps to win with
        const std::int64_t nic = detail::ceil_div(line, g);
        const std::int64_t core = (pairs + g - 1) / g;
        lengths_.assign(static_cast<std::size_t>(core) + 1, detail::ceil_div(nic, core));
        lengths_[0] = 0;
        const std::int32_t steps = detail::count_shaped_steps(lengths_, rail_packing_setup().shape, shaping_ws_);
        const double expected = (g > 1 ? 2 * topo_.alpha_up_us : 0.0) + steps * topo_.alpha_out_us +
                                detail::transfer_us(nic, topo_.scale_out_gbps);
        return expected + fast_planning_us(1) >= direct_us() + direct_planning_us();
    }

    // The ramp growth factor. A step of D bytes per NIC makes the busiest sending GPU of a
    // server (share f of the server's outbound bytes) move about f (G - 1) D bytes over scale-up
    // before it; spread over `window` neighbouring steps of D' bytes each with room
    // D' B_up / B_out, that is at most `ramp` of the room when
    // D / D' <= ramp * window * (B_up / B_out) / (f (G - 1)). The falling side uses the same
    // factor: the busiest receiving GPU can be far hotter (MoE experts), but streams carry the
    // bytes for hot receivers first, so the last, shrinking steps hold bytes for cold ones.
    [[nodiscard]] double ramp_growth(double ramp) const {
        return growth_for(out_share_ * std::max(1, topo_.gpus_per_server - 1), ramp);
    }

    // The factor for the busiest receiving GPU (share f of its server's inbound bytes): of a
    // step's G D landed bytes, f G D are its own and D arrive on its own rail, so f G D - D come
    // over scale-up after the step. 0 unless that is more than the senders' factor allows: then
    // the receivers decide the shape (see shape_steps).
    [[nodiscard]] double drop_growth(double ramp) const {
        const double drop = growth_for(in_share_ * topo_.gpus_per_server - 1, ramp);
        return drop < ramp_growth(ramp) ? drop : 0.0;
    }

    // How much longer a step may be than its neighbour when `moved` times its bytes cross
    // scale-up during the `window` steps beside it, at most `ramp` of their room.
    [[nodiscard]] double growth_for(double moved, double ramp) const {
        if (ramp <= 0) return 0.0;
        const double room = ramp * options_.window * topo_.scale_up_gbps / topo_.scale_out_gbps;
        return std::clamp(room / std::max(moved, 1e-3), detail::tuning::min_growth, detail::tuning::max_growth);
    }

    // The quantum `options_.quantum`, or else `default_bytes` (at least 1).
    [[nodiscard]] std::int64_t quantum_or(double default_bytes) const {
        return options_.quantum > 0 ? options_.quantum : std::max<std::int64_t>(1, detail::saturate(default_bytes));
    }

    // The quantum for a matrix whose busiest line is `line`, shared by `lanes` rails:
    // quantum_fraction of the busiest line's average entry per lane.
    [[nodiscard]] std::int64_t choose_quantum(std::int64_t line, int lanes) const {
        const double entry = static_cast<double>(line) / (std::max(1, topo_.servers) * lanes);
        return quantum_or(options_.quantum_fraction * entry);
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

    // --- Baselines ------------------------------------------------------------------------------

    // The direct plan, or the focus rank's program of it (from its row and column).
    void make_direct() {
        if (!rates_.empty()) check_direct_reaches();
        last_scheduler_ = scheduler::direct;
        work_us_ += direct_planning_us();
        const auto r = static_cast<std::size_t>(topo_.ranks());
        const auto g = static_cast<std::size_t>(topo_.gpus_per_server);
        if (focus_ < 0) {
            detail::fill_direct_plan(*m_, topo_, plan_, received_at_);
        } else if (m_ != nullptr) {
            const std::int64_t* data = m_->data();
            const auto me = static_cast<std::size_t>(focus_);
            detail::fill_direct_program(data + me * r, 1, data + me, r, topo_, focus_, rank_);
        } else {
            const auto local = static_cast<std::size_t>(topo_.local_of(focus_));
            detail::fill_direct_program(own_counts_->rows.data() + local * r, 1, own_counts_->cols.data() + local, g,
                                        topo_, focus_, rank_);
        }
    }

    // FAST without balancing: the quantised bottleneck stages of the GPU-level matrix. Its
    // quantum is quantum_fraction of the busiest line's average entry too, computed as
    // fraction * line / R (the association decides the last bit, and with it some plans).
    void make_unbalanced(const traffic_matrix& m) {
        const int r = topo_.ranks();
        detail::inter_server_blocks(m, topo_, matrix_);
        const std::int64_t line = detail::largest_line(matrix_, static_cast<std::size_t>(r));
        detail::decompose_quantised(matrix_, r, quantum_or(options_.quantum_fraction * static_cast<double>(line) / r),
                                    stages_, padding_);
        detail::fill_unbalanced_plan(m, topo_, stages_, plan_, unbalanced_ws_);
    }

    fast::topology topo_;
    plan_options options_;
    std::vector<double> rates_; // per rank, its scale-out rate where they differ; empty: all topo_'s
    plan plan_;
    // The call's inputs: the matrix (whole plans, and make_rank(m, rank) of the paper's layouts)
    // or the focus server's counts; the shared counts either way.
    const traffic_matrix* m_ = nullptr;
    const shared_counts* counts_ = nullptr;
    const server_counts* own_counts_ = nullptr;
    shared_counts own_shared_; // from the matrix
    server_counts own_;        // likewise
    std::vector<std::int64_t> part_;
    std::vector<std::int64_t> own_send_base_; // (d, a): GPU a of the focus server's offset for server d
    std::vector<std::int64_t> own_recv_base_; // (s, b): GPU b's offset for server s
    std::vector<std::int64_t> send_base_;     // per GPU: the loaded tile's offsets (tile_bases)
    std::vector<std::int64_t> recv_base_;
    detail::rail_bytes rail_bytes_;
    detail::line_summary lines_; // rail packing: the pair matrix's busiest line
    std::vector<std::int64_t> line_ws_;
    std::vector<std::int64_t> entries_ws_;
    double out_share_ = 0; // the largest share of its server's bytes across servers one GPU sends
    double in_share_ = 0;  // likewise receives
    int focus_ = -1;       // make_rank: the rank whose program is being emitted
    double work_us_ = 0;   // planning_work_us of this call so far
    fast::scheduler last_scheduler_ = scheduler::fast;
    bool schedule_only_ = false; // make_schedule: stop before the emission
    rank_program rank_;
    // Buffers kept between calls, in pipeline order.
    traffic_summary summary_;
    detail::server_traffic servers_;
    std::vector<std::int64_t> matrix_; // the matrix being decomposed (consumed)
    detail::padding_workspace padding_;
    decomposition stages_;
    decomposition best_stages_;         // rail packing: the decomposition of the best quantum so far
    std::vector<std::int64_t> lengths_; // rail packing: a candidate's step lengths
    std::vector<std::size_t> sequence_; // the paper's layout: the stages in step order
    std::vector<std::pair<std::int64_t, std::size_t>> sort_keys_;
    std::vector<std::int64_t> left_; // build_uniform_rails' workspace
    detail::packing_workspace packing_ws_;
    detail::shaping_workspace shaping_ws_;
    detail::rail_workspace rail_ws_;
    detail::stage_schedule schedule_;
    detail::stage_schedule unshaped_; // the winner's schedule before shaping, to shape again
    std::vector<std::int64_t> step_bytes_;
    detail::stream_slots slots_of_;
    std::vector<std::int64_t> capacity_; // rail packing: per (pair, rail), what its slots carry
    detail::tile_workspace tile_ws_;
    detail::uneven_traffic uneven_;       // uneven rates: each (pair, rail)'s bytes, time and rate
    std::vector<std::int64_t> done_time_; // time_to_bytes' workspaces
    std::vector<std::int64_t> done_bytes_;
    std::vector<std::int64_t> head_; // per rail of the tile being emitted: its bytes in the first step
    detail::plan_builder builder_;
    std::vector<std::uint32_t> pair_counts_; // number_pairs' workspace
    std::vector<std::int64_t> received_at_;  // direct plans: per rank, its receive offset so far
    detail::unbalanced_workspace unbalanced_ws_;
};

/// Plans `m` on `topo`. Throws fast::invalid_argument on invalid input.
[[nodiscard]] inline plan make_plan(const traffic_matrix& m, const topology& topo, const plan_options& options = {}) {
    planner p(topo, options);
    return p.make(m);
}

} // namespace fast
