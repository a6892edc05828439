#pragma once
/// \file plan_options.hpp
/// What a planner builds and how: the scheduler (FAST, the automatic choice, the baselines),
/// FAST's policy, and the options of each stage (docs/algorithm.md). The tuned defaults, and why
/// they are what they are, are detail/tuning.hpp.
///
///     fast::plan_options o;
///     o.scheduler = fast::parse_scheduler("fast");
///     o.split_blocks = true;
///     fast::planner p(topo, o); // validates o

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "detail/tuning.hpp"
#include "error.hpp"

namespace fast {

/// What make_plan builds.
enum class scheduler {
    automatic,       ///< per call, fast or direct, whichever costs less end to end, planning included
    fast,            ///< FAST with the policy of plan_options::policy
    fast_unbalanced, ///< stages of the GPU-level matrix, without intra-server balancing
    direct,          ///< everything at once (NCCL / MPI style)
    spreadout,       ///< R - 1 GPU-level shifted rounds
};

[[nodiscard]] inline std::string_view to_string(scheduler s) noexcept {
    switch (s) {
    case scheduler::automatic: return "automatic";
    case scheduler::fast: return "fast";
    case scheduler::fast_unbalanced: return "fast-unbalanced";
    case scheduler::direct: return "direct";
    case scheduler::spreadout: return "spreadout";
    }
    return "?";
}

/// Parses a scheduler name; throws fast::invalid_argument listing the valid ones.
[[nodiscard]] inline scheduler parse_scheduler(std::string_view name) {
    for (const scheduler s :
         {scheduler::automatic, scheduler::fast, scheduler::fast_unbalanced, scheduler::direct, scheduler::spreadout})
        if (name == to_string(s)) return s;
    throw invalid_argument("unknown scheduler '" + std::string(name) +
                           "' (expected automatic, fast, fast-unbalanced, direct or spreadout)");
}

/// How FAST decomposes the traffic into stages (see the file comment).
enum class policy { rail_packed, bottleneck, exact };

[[nodiscard]] inline std::string_view to_string(policy p) noexcept {
    switch (p) {
    case policy::exact: return "exact";
    case policy::bottleneck: return "bottleneck";
    case policy::rail_packed: return "rail-packed";
    }
    return "?";
}

[[nodiscard]] inline policy parse_policy(std::string_view name) {
    for (const policy p : {policy::rail_packed, policy::bottleneck, policy::exact})
        if (name == to_string(p)) return p;
    throw invalid_argument("unknown policy '" + std::string(name) + "' (expected rail-packed, bottleneck or exact)");
}

/// How much schedule search rail packing spends (plan_options::effort).
enum class effort {
    sized, ///< quanta tried while each is expected to save more than it costs (tuning::candidate_gain)
    full,  ///< every quantum of quantum_choices and quantum_refinements, whatever the exchange
};

[[nodiscard]] inline std::string_view to_string(effort e) noexcept {
    return e == effort::sized ? "sized" : "full";
}

[[nodiscard]] inline effort parse_effort(std::string_view name) {
    if (name == "sized") return effort::sized;
    if (name == "full") return effort::full;
    throw invalid_argument("unknown effort '" + std::string(name) + "' (expected sized or full)");
}

/// Order of the stages of the exact policy.
enum class stage_order {
    automatic,  ///< whichever of the two the cost model predicts faster
    ascending,  ///< smallest first (the paper's analysis: redistribution hides under the next)
    descending, ///< largest first (hides the intra-server traffic under the first stage)
};

struct plan_options {
    /// automatic: FAST where it costs less than direct end to end, its planning counted in work
    /// (docs/algorithm.md, "The automatic scheduler"); direct where not (small calls).
    fast::scheduler scheduler = scheduler::automatic;
    fast::policy policy = policy::rail_packed;
    /// Stage order of the exact policy.
    stage_order order = stage_order::automatic;
    /// Exact policy: split every stage into this many consecutive stages, so that
    /// redistribution overlaps at a finer grain (1 = off).
    int chunks = 1;
    /// Quantum in bytes of the bottleneck and rail-packed policies: the matrix they decompose is
    /// rounded up to multiples of it (the slack is padding, never sent). 0: quantum_fraction.
    std::int64_t quantum = 0;
    /// The default quantum: this fraction of the busiest line's average entry. Rounding then
    /// costs about half of it per line, while a line needs far fewer stages than exact BvN.
    double quantum_fraction = detail::tuning::quantum_fraction;
    /// Rail-packed policy without a fixed `quantum`: the quanta tried, quantum_fraction times 1,
    /// 2, ..., quantum_choices; the schedule predicted fastest is kept (docs/algorithm.md). With
    /// sized effort, only as many as the exchange pays for.
    int quantum_choices = detail::tuning::quantum_choices;
    /// Sized: the quanta tried (choices, then refinements) stop where one more is not expected to
    /// save its planning time (a 300 us exchange gets one, a 5 ms one at 4 x 8 all of them);
    /// full: all. The budget is counted in work from the cluster's shape and the exchange's
    /// lower bound, so every rank plans the same schedule.
    fast::effort effort = effort::sized;
    /// Rail-packed policy without a fixed `quantum`: after the integer factors, the best factor
    /// f is refined this many times, trying f -/+ 1/2, then -/+ 1/4 around the best so far, ...
    /// (never below 1); each try is one more schedule (no transfers).
    int quantum_refinements = detail::tuning::quantum_refinements;
    /// The refinements run up to this many servers. Each is a decomposition of the S x S
    /// matrix, most of the planning time from 32 servers up; beyond 64 servers the integer
    /// factors alone keep predicted / T_lb within its target (1.10 at 128 x 8; refinements
    /// gain under 1% there, docs/performance.md).
    int refine_max_servers = detail::tuning::refine_max_servers;
    /// Ramps of the bottleneck and rail-packed policies (0: none). Balancing for a step and
    /// redistribution after it run during the neighbouring steps; ramps keep consecutive steps
    /// close enough in length that this scale-up work is expected to fill at most this share of
    /// a neighbour's scale-up time, given the busiest sending GPU's share of its server's
    /// traffic. Long rail-packed calls use less (long_call_ramp_scale).
    double ramp = detail::tuning::ramp;
    /// Rail-packed policy: long calls use `ramp` times this. A ramp step costs one alpha_out
    /// whatever the call's size, while balancing or redistribution that runs over its neighbours'
    /// room (the busiest GPU's share misjudges a step's mix of server pairs) exposes time in
    /// proportion to the bytes; so the longer the call, the more room the ramps keep spare. The
    /// call's length is the busiest server's inter-server bytes / (G B_out), its balanced NICs'
    /// time: up to 200 alpha_out the ramp is `ramp`, from 400 alpha_out
    /// `ramp * long_call_ramp_scale`, log-linear between (docs/algorithm.md).
    double long_call_ramp_scale = detail::tuning::long_call_ramp_scale;
    /// Steps are not cut shorter than this many alpha_out worth of bytes; the first and last
    /// steps are about that long.
    double min_step_alphas = detail::tuning::min_step_alphas;
    /// Rail packing: no step is longer than this share of the busiest NIC's bytes. Scratch
    /// holds about two steps' balanced and landed bytes, so this bounds it; smaller means more
    /// steps (alpha_out each).
    double max_step_share = detail::tuning::max_step_share;
    /// Bottleneck and rail-packed policies: balancing for step k may happen in any of the
    /// `window` steps before it, redistribution in any of the `window` steps after it.
    int window = detail::tuning::window;
    /// No transfer carries bytes of two blocks, so that each transfer is one contiguous range
    /// in whichever user buffer it reads or writes (runtimes that cannot send scattered
    /// ranges as one message, such as device memory over UCX). More transfers, same steps.
    bool split_blocks = false;
};

namespace detail {
// The largest values validate(plan_options) accepts: limits on the work one call may ask for
// (each quantum choice or refinement is a decomposition) and on factors that would only
// overflow byte counts.
inline constexpr int max_quantum_refinements = 16;
inline constexpr int max_quantum_choices = 64;
inline constexpr double max_option_factor = 1e6;

// Throws fast::invalid_argument "NAME must be RULE, got VALUE" unless `ok`.
template <class Value>
void require_option(bool ok, std::string_view name, std::string_view rule, Value value) {
    if (ok) return;
    std::string text;
    if constexpr (std::is_floating_point_v<Value>) text = format_number(static_cast<double>(value));
    else text = std::to_string(value);
    throw invalid_argument(std::string(name) + " must be " + std::string(rule) + ", got " + text);
}
} // namespace detail

/// Checks every field of `o`; throws fast::invalid_argument naming the first bad one, its
/// value and what it must be.
inline void validate(const plan_options& o) {
    using detail::require_option;
    const double most = detail::max_option_factor;
    require_option(o.chunks >= 1, "chunks", "at least 1", o.chunks);
    require_option(o.quantum_refinements >= 0 && o.quantum_refinements <= detail::max_quantum_refinements,
                   "quantum_refinements", "between 0 and " + std::to_string(detail::max_quantum_refinements),
                   o.quantum_refinements);
    require_option(o.refine_max_servers >= 0, "refine_max_servers", "non-negative", o.refine_max_servers);
    require_option(o.quantum_choices >= 1 && o.quantum_choices <= detail::max_quantum_choices, "quantum_choices",
                   "between 1 and " + std::to_string(detail::max_quantum_choices), o.quantum_choices);
    require_option(o.quantum >= 0, "quantum", "non-negative", o.quantum);
    require_option(o.ramp >= 0 && o.ramp <= most, "ramp", "in [0, 1e+06]", o.ramp);
    require_option(o.quantum_fraction > 0 && o.quantum_fraction <= most, "quantum_fraction", "in (0, 1e+06]",
                   o.quantum_fraction);
    require_option(o.long_call_ramp_scale > 0 && o.long_call_ramp_scale <= most, "long_call_ramp_scale",
                   "in (0, 1e+06]", o.long_call_ramp_scale);
    require_option(o.min_step_alphas >= 0 && o.min_step_alphas <= most, "min_step_alphas", "in [0, 1e+06]",
                   o.min_step_alphas);
    require_option(o.max_step_share > 0 && o.max_step_share <= most, "max_step_share", "in (0, 1e+06]",
                   o.max_step_share);
    require_option(o.window >= 1 && o.window <= detail::tuning::max_window, "window",
                   "between 1 and " + std::to_string(detail::tuning::max_window), o.window);
}

} // namespace fast
