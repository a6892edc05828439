#pragma once
// Every tuned number of the planner, in one place, each with why it has its value and where
// that was measured. The defaults of fast::plan_options (plan_options.hpp) are the first group;
// the rest are fixed. docs/algorithm.md cites them by name ("Tuned parameters"). Figures are
// the cost model's predicted / T_lb on h200 (B_up 450 GB/s, B_out 50 GB/s, alpha_out 10 us)
// unless said otherwise; "Megatron" is the 600 matrices of megatron_moe_4x8.txt at 4 x 8,
// 8 KiB per token. Change one only with a sweep that shows why (fast-plan --compare, planner_test,
// planner_megatron_test).

#include <cstdint>

namespace fast::detail::tuning {

// --- Defaults of plan_options -----------------------------------------------------------------

/// The default quantum as a share of the busiest line's average entry per rail (L / (S G)).
/// Rounding costs about half a quantum per line (about 5% of an average entry), while a line
/// then needs far fewer stages than exact BvN: in the calibration prototype (zipf:0.8, 256 MiB
/// per GPU, 3 seeds) quantised bottleneck stages took 32 servers from 1.34 to 1.13, and rail
/// packing them to 1.031.
inline constexpr double quantum_fraction = 0.1;

/// Rail packing tries the default quantum times 1, 2 and 3: a coarser quantum leaves fewer
/// one-quantum tail stages (a step and its alpha_out each), which is what let zipf:0.8 at 64
/// and 128 servers meet 1.06 and 1.10; which factor wins depends on the traffic.
inline constexpr int quantum_choices = 3;

/// Then the best factor is refined twice by halving steps (f -/+ 1/2, then -/+ 1/4): the cost is
/// not smooth in the quantum (one tail stage more or less is a step). With them every zipf and
/// moe cell of the quality table (docs/performance.md) met its target at seeds 1 - 5; each
/// refinement costs one more decomposition.
inline constexpr int quantum_refinements = 2;

/// Sized effort (plan_options::effort): after the first, rail packing tries another quantum
/// only where the exchange is long enough for it to pay, each expected to save candidate_gain of
/// the exchange's lower bound T_lb. Measured with every candidate against the first alone
/// (zipf:0.8 and moe, 4 - 128 servers x 8, 256 MiB per GPU, seeds 1 - 5): 0.04% - 1% of the
/// exchange for six more candidates, about 0.1% each.
inline constexpr double candidate_gain = 0.001;

/// The refinements run up to 64 servers: from 32 servers up the candidates' decompositions are
/// most of the planning time, and at 128 x 8 the four refinement candidates gained under 1%
/// (zipf:0.8 seeds 1 - 5: worst 1.0882 with them, 1.0911 without, target 1.10).
inline constexpr int refine_max_servers = 64;

/// Share of a neighbouring step's scale-up room that a step's gathers may be expected to fill
/// (the ramps' growth factor follows from it, see growth_bounds). It leaves room because the
/// busiest GPU's average share misjudges a step's mix of server pairs; set with the first
/// rail-packing design, where ramps took 8 servers from 1.205 to 1.022 (zipf:0.8).
inline constexpr double ramp = 0.5;

/// Long calls use ramp times this (from long_call_alphas on): what runs over the room costs in
/// proportion to the bytes while a spare ramp step costs one alpha_out, so long calls keep more
/// spare. Over 40 seeds at 256 MiB per GPU it took the worst 4 x 8 plan from 1.043 to 1.028
/// (zipf:0.8) and 1.039 to 1.021 (moe); 0.4 for every call instead cost short calls (zipf:0.8 at
/// 4 x 8, 64 MiB per GPU: mean 1.054 -> 1.059 over 40 seeds).
inline constexpr double long_call_ramp_scale = 0.8;

/// The edge, the shortest step, in alpha_out worth of bytes: below it a step's alpha outweighs
/// keeping every rail busy, so pieces are not cut finer and the first and last steps are about
/// this long. Set with the first rail-packing design (zipf:0.8 and Megatron).
inline constexpr double min_step_alphas = 2.0;

/// No step longer than this share of the busiest NIC's bytes (1: no cap). Scratch holds about
/// two steps' balanced and landed bytes, so a smaller share bounds scratch at the price of
/// more steps; the default leaves the schedule alone (docs/performance.md, "Scratch").
inline constexpr double max_step_share = 1.0;

/// Steps before a step that may carry its gathers, and after it its redistribution. Two let a
/// step's scale-up work spread over both neighbours on the side it belongs to; the growth
/// factor scales with it. Set with the first rail-packing design.
inline constexpr int window = 2;

// --- Fixed ----------------------------------------------------------------------------------

/// The largest `window` accepted (a limit, not a tuned value): each placement of a gather or
/// redistribution scans up to `window` steps, so the limit bounds that scan.
inline constexpr int max_window = 64;

/// Call lengths (the busiest server's inter-server bytes / (G B_out), in alpha_out) between
/// which the ramp moves log-linearly from `ramp` to `ramp * long_call_ramp_scale`. Calls up to
/// 200 alpha_out (the Megatron calls among them) keep their plans; the scale pays from 400 on
/// (measured at 96 to 192 MiB per GPU).
inline constexpr double short_call_alphas = 200;
inline constexpr double long_call_alphas = 400;

/// Bounds of the ramps' growth factor (how much longer a step may be than its neighbour
/// towards the nearer end; growth_for in planner.hpp). The lower bound keeps a ramp from taking
/// many steps (an alpha_out each) where a GPU moves much of a step over scale-up, the upper one
/// keeps it from collapsing into one step where a GPU moves little (MI300X's B_up / B_out of 36
/// gives large factors). Set with the first rail-packing design.
inline constexpr double min_growth = 1.5;
inline constexpr double max_growth = 16.0;

/// Shaping keeps a step whole when it is at most 1 / ramp_slack_divisor over its limit (a
/// quarter): the ramp's share leaves that room, and a split costs an alpha_out. Part of the
/// change that took the Megatron mean from 1.067 to 1.056 (p95 1.088 -> 1.074).
inline constexpr std::int64_t ramp_slack_divisor = 4;

/// Rail assignment chooses rails for the steps after the longest that are at most
/// 1 / short_step_divisor of it (half): those hide little redistribution. Choosing for every
/// step after the longest measured worse (moe at 4 x 8, seed 2: 1.016 -> 1.023), since moving a
/// big step's slots moves its neighbours' scale-up work.
inline constexpr std::int64_t short_step_divisor = 2;

/// The planning cost model, in microseconds of one core, for the choices that weigh planning
/// against the exchange (sized effort, the automatic scheduler). It is counted in work (the
/// cluster's shape), never measured, so that every rank decides alike: a candidate decomposition
/// costs candidate_us_per_pair x S^2, the rest of the schedule (packing, shaping, rails)
/// schedule_us_per_pair x S^2, and a rank's own part emission_us_per_block x S G^2. Fitted to
/// callgrind's instruction counts of planner::make_rank at 4 - 128 servers x 8 GPUs (zipf:0.8,
/// 256 MiB per GPU) at 9 instructions per ns, the rate planner_bench shows on the 2-core EPYC
/// the docs' figures come from.
inline constexpr double candidate_us_per_pair = 0.08;
inline constexpr double schedule_us_per_pair = 0.085;
inline constexpr double emission_us_per_block = 0.07;
/// Direct's program: a pass over the rank's row and column (callgrind: about 30 instructions per
/// rank).
inline constexpr double direct_us_per_rank = 0.0035;

/// stable_sort_by sorts lists up to this long by insertion (a schedule step shortens only its
/// longest pieces, so the list is nearly sorted), longer ones with std::sort on keyed indices.
/// A speed constant: plans do not depend on it.
inline constexpr std::size_t insertion_sort_max = 32;

/// The bottleneck decomposition buckets entries by value when the largest entry is at most
/// bucket_values_per_entry * n^2 + bucket_values_extra (quantised matrices: entries are a few
/// tens of quanta); larger entries scan the matrix at each threshold drop instead. A speed and
/// memory constant (one list head per value): plans do not depend on it.
inline constexpr std::int64_t bucket_values_per_entry = 64;
inline constexpr std::int64_t bucket_values_extra = 1024;

} // namespace fast::detail::tuning
