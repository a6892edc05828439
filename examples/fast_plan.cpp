// fast-plan: plans an All-to-All(v) traffic matrix on a two-tier cluster, verifies the plan and
// prints what the cost model predicts; exports plans as JSON and checks plan files.
//
//   fast-plan                                  the default: zipf:0.8, 4 x 8 GPUs, 256M per GPU
//   fast-plan --servers 32 --compare           FAST against the baselines
//   fast-plan --workload file:workloads/megatron_moe_4x8.txt@3 --unit-bytes 8K --json plan.json
//   fast-plan --compare --svg timeline.svg     the plans as timelines, one panel per scheduler
//   fast-plan --workload file:workloads/megatron_moe_4x8.txt --unit-bytes 8K --all
//                                              every matrix of a file, summarised
//   fast-plan verify plan.json                 OK with the predicted time, or the first violation
//   fast-plan fabric --preset mi300x --servers 2 > cluster.json
//                                              a preset's fabric file, to edit
//   fast-plan --fabric cluster.json            plans for the cluster that file describes
//   fast-plan bounds --fabric cluster.json     T_lb on that fabric (uneven too), and what each
//                                              GPU's own NICs allow (direct's best)
//
// Long runs show what they are doing on stderr when it is a terminal, and nothing otherwise.

#include <CLI/CLI.hpp>

#include <fast/detail/random.hpp>
#include <fast/fast.hpp>
#include <fast/plan_json.hpp>

#include "cluster_fabric.hpp"
#include "cluster_options.hpp"
#include "plan_file.hpp"
#include "timeline_svg.hpp"
#include "trace_tool.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace {

struct options : fast_tools::cluster_options {
    std::string scheduler = "automatic";
    std::string policy = "rail-packed";
    int quantum_choices = fast::plan_options{}.quantum_choices;
    int quantum_refinements = fast::plan_options{}.quantum_refinements;
    std::string effort = "sized";
    double ramp = fast::plan_options{}.ramp;
    double long_call_ramp_scale = fast::plan_options{}.long_call_ramp_scale;
    bool compare = false;
    std::string schedulers;
    int repeat = 1;
    std::string json;
    std::string svg;
    std::string svg_lanes = "auto";
    std::string verify_file;
    bool all = false;
};

// One line of progress on stderr, rewritten in place; only when stderr is a terminal. Updates
// within one task are throttled so that tight loops do not flood the terminal.
class progress {
public:
    progress() : enabled_(isatty(STDERR_FILENO) != 0) {}

    [[nodiscard]] bool enabled() const noexcept { return enabled_; }

    /// Shows "fast-plan: <what>" now.
    void show(const std::string& what) {
        if (!enabled_) return;
        last_ = clock::now();
        std::string line = "fast-plan: " + what;
        if (line.size() > 79) line.resize(79);
        const std::size_t pad = width_ > line.size() ? width_ - line.size() : 0;
        std::fprintf(stderr, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
        width_ = line.size();
        std::fflush(stderr);
    }

    /// Shows "<what> <done>/<total>" at most ten times a second (and always the last one).
    void count(const std::string& what, long long done, long long total) {
        if (!enabled_) return;
        if (done != total && clock::now() - last_ < std::chrono::milliseconds(100)) return;
        show(what + " " + std::to_string(done) + "/" + std::to_string(total));
    }

    /// Erases the line (before anything else is printed).
    void clear() {
        if (!enabled_ || width_ == 0) return;
        std::fprintf(stderr, "\r%*s\r", static_cast<int>(width_), "");
        std::fflush(stderr);
        width_ = 0;
    }

    ~progress() { clear(); }

private:
    using clock = std::chrono::steady_clock;
    bool enabled_;
    std::size_t width_ = 0;
    clock::time_point last_{};
};

// One row of the table: a scheduler (and policy) to run.
struct variant {
    std::string label;
    fast::plan_options options;
};

// "fast (rail-packed)" for FAST, the scheduler's name for the others.
// "fast (POLICY)", or on a fabric of uneven rates (`by_rate`), where every policy plans each
// pair's bytes over its rails by rate, "fast (by rail rate)".
std::string label_of(fast::scheduler s, fast::policy p, bool by_rate = false) {
    std::string label(fast::to_string(s));
    if (s == fast::scheduler::fast)
        label += " (" + (by_rate ? std::string("by rail rate") : std::string(fast::to_string(p))) + ")";
    return label;
}

variant variant_of(const fast::plan_options& x) {
    return {label_of(x.scheduler, x.policy), x};
}

std::vector<variant> variants_of(const options& o) {
    fast::plan_options base;
    base.scheduler = fast::parse_scheduler(o.scheduler);
    base.policy = fast::parse_policy(o.policy);
    base.quantum_choices = o.quantum_choices;
    base.quantum_refinements = o.quantum_refinements;
    base.effort = fast::parse_effort(o.effort);
    base.ramp = o.ramp;
    base.long_call_ramp_scale = o.long_call_ramp_scale;
    if (!o.schedulers.empty()) {
        // A comma-separated list: fast (with --policy), fast:POLICY, fast-unbalanced, direct, spreadout.
        std::vector<variant> out;
        std::size_t begin = 0;
        while (begin <= o.schedulers.size()) {
            std::size_t end = o.schedulers.find(',', begin);
            if (end == std::string::npos) end = o.schedulers.size();
            const std::string name = o.schedulers.substr(begin, end - begin);
            begin = end + 1;
            fast::plan_options x = base;
            x.scheduler = fast::scheduler::fast;
            if (name.rfind("fast:", 0) == 0) {
                x.policy = fast::parse_policy(name.substr(5));
            } else {
                x.scheduler = fast::parse_scheduler(name);
            }
            out.push_back(variant_of(x));
        }
        return out;
    }
    if (!o.compare) return {variant_of(base)};
    // --compare: every scheduler (the automatic choice is one of them).
    std::vector<variant> out;
    for (const fast::policy p : {fast::policy::rail_packed, fast::policy::bottleneck, fast::policy::exact}) {
        fast::plan_options x = base;
        x.scheduler = fast::scheduler::fast;
        x.policy = p;
        out.push_back(variant_of(x));
    }
    for (const fast::scheduler s :
         {fast::scheduler::fast_unbalanced, fast::scheduler::spreadout, fast::scheduler::direct}) {
        fast::plan_options x = base;
        x.scheduler = s;
        out.push_back(variant_of(x));
    }
    return out;
}

// Plans `repeat` times with the reused planner `p`; returns the plan and the median time in us.
std::pair<fast::plan, double> timed_plan(fast::planner& p, const fast::traffic_matrix& m, int repeat, progress& bar,
                                         const std::string& label) {
    std::vector<double> times;
    fast::plan result;
    bar.show("planning " + label + (repeat > 1 ? " 0/" + std::to_string(repeat) : std::string(" ...")));
    for (int k = 0; k < repeat; ++k) {
        const auto start = std::chrono::steady_clock::now();
        const fast::plan& made = p.make(m);
        const auto stop = std::chrono::steady_clock::now();
        times.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
        if (k + 1 == repeat) result = made;
        if (repeat > 1) bar.count("planning " + label, k + 1, repeat);
    }
    std::sort(times.begin(), times.end());
    return {std::move(result), times[times.size() / 2]};
}

// What one rank pays: planner::make_rank from the counts a runtime agrees on (shared counts and
// the rank's server's rows and columns, built before the clock starts: the agreement's work),
// or from the matrix where the options need it; the median of `repeat` calls. Returns the time
// and whether the program is the whole plan `whole` restricted to the rank.
std::pair<double, bool> timed_rank(fast::planner& p, const fast::traffic_matrix& m, const fast::shared_counts& all,
                                   const fast::plan& whole, int rank, int repeat) {
    const fast::topology& topo = whole.topology;
    const bool from_counts = p.plans_rank_from_counts();
    const fast::server_counts own =
        from_counts ? fast::make_server_counts(m, topo, topo.server_of(rank)) : fast::server_counts{};
    auto plan_rank = [&]() -> const fast::rank_program& {
        return from_counts ? p.make_rank(all, own, rank) : p.make_rank(m, rank);
    };
    std::vector<double> times;
    for (int k = 0; k < repeat; ++k) {
        const auto start = std::chrono::steady_clock::now();
        (void)plan_rank();
        times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    const fast::rank_program want = fast::restrict_to_rank(whole, rank);
    const fast::rank_program& got = plan_rank();
    bool same = want.transfers.size() == got.transfers.size() && want.scratch_bytes == got.scratch_bytes;
    for (std::size_t k = 0; same && k < got.transfers.size(); ++k)
        same = want.transfers[k].transfer == got.transfers[k].transfer &&
               want.transfers[k].pair_index == got.transfers[k].pair_index;
    return {times[times.size() / 2], same};
}

// The slowest of rank 0, the busiest rank (most bytes sent and received) and a rank drawn from
// `seed` (timed_rank each), and whether all their programs are their parts of `whole`.
std::pair<double, bool> timed_ranks(fast::planner& p, const fast::traffic_matrix& m, const fast::plan& whole,
                                    int repeat, std::uint64_t seed) {
    const int r = static_cast<int>(m.rows());
    fast::detail::rng gen(seed);
    const int drawn = static_cast<int>(gen.below(static_cast<std::uint64_t>(r)));
    const fast::shared_counts all = fast::make_shared_counts(m, whole.topology);
    double slowest = 0;
    bool equal = true;
    for (const int rank : {0, fast::busiest_rank(m), drawn}) {
        const auto [us, same] = timed_rank(p, m, all, whole, rank, repeat);
        slowest = std::max(slowest, us);
        equal = equal && same;
    }
    return {slowest, equal};
}

// The largest scratch buffer as a share of the largest receive buffer: what a rank must
// allocate beside recv, in the worst case over ranks. (Per rank, scratch / recv misleads: a cold
// GPU that receives little still relays its hot neighbours' bytes.)
double scratch_share(const fast::plan& p, const fast::traffic_matrix& m) {
    const auto recv = fast::recv_totals(m);
    const auto most_recv = recv.empty() ? 0 : *std::max_element(recv.begin(), recv.end());
    const auto most_scratch =
        p.scratch_bytes.empty() ? 0 : *std::max_element(p.scratch_bytes.begin(), p.scratch_bytes.end());
    return most_recv > 0 ? static_cast<double>(most_scratch) / static_cast<double>(most_recv) : 0.0;
}

fast_plan::lane_mode parse_lanes(const std::string& s) {
    if (s == "auto") return fast_plan::lane_mode::automatic;
    if (s == "rank") return fast_plan::lane_mode::rank;
    if (s == "server") return fast_plan::lane_mode::server;
    throw fast::invalid_argument("unknown --svg-lanes '" + s + "' (expected auto, rank or server)");
}

// The first line of every table.
void print_cluster(const options& o, const fast::topology& topo) {
    std::printf("fast-plan: %d servers x %d GPUs (%s)\n", topo.servers, topo.gpus_per_server,
                fast_tools::fabric_text(fast_tools::cluster_source(o), topo).c_str());
}

// The agreement every call of the cluster pays (agreement.hpp), one line.
void print_agreement(const fast::topology& topo) {
    const fast::agreement a = fast::plan_agreement(topo);
    std::printf("count agreement: %s, %d round%s, %s per rank over scale-out, %.1f us (cost model)\n",
                std::string(a.name()).c_str(), a.rounds, a.rounds == 1 ? "" : "s",
                fast_tools::human_bytes(static_cast<double>(a.network_bytes)).c_str(), a.us);
}

// Mean, p95 (the smallest value at least 95% do not exceed) and max of `v`, sorted in place.
struct spread {
    double mean = 0, p95 = 0, max = 0;
};
spread spread_of(std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    spread out;
    for (const double x : v) out.mean += x / static_cast<double>(v.size());
    out.p95 = v[(v.size() * 95 + 99) / 100 - 1];
    out.max = v.back();
    return out;
}

// --all: every matrix of a file, one summary line per scheduler: the exchange's predicted / T_lb
// and the end-to-end figure (agreement + the busiest rank's planning + exchange) / T_lb.
int run_all(const options& o, const fast::topology& topo, const fast::workload_spec& spec, std::int64_t unit) {
    progress bar;
    bar.show("reading " + spec.path + " ...");
    const std::vector<fast::traffic_matrix> all = fast::read_matrices_file(spec.path, topo.ranks(), unit);
    if (all.empty()) throw fast::invalid_argument("'" + spec.path + "' holds no matrix");
    const std::vector<variant> variants = variants_of(o);
    print_cluster(o, topo);
    std::printf("workload %s: all %zu matrices (x %s bytes per unit); planning times: median over matrices of "
                "the median of --repeat %d\n",
                o.workload.c_str(), all.size(), o.unit_bytes.c_str(), o.repeat);
    print_agreement(topo);
    std::printf("predicted / T_lb and end-to-end = (agreement + rank + predicted) / T_lb: mean, p95, max\n\n");
    std::printf("%-24s %8s %6s %11s %9s %9s %7s %7s %7s %7s %7s %7s %8s  %s\n", "scheduler", "matrices", "steps",
                "stages(max)", "plan(us)", "rank(us)", "mean", "p95", "max", "e2e", "p95", "max", "scratch",
                "verified");
    std::fflush(stdout);
    const double agreement_us = fast::plan_agreement(topo).us;
    int failures = 0;
    for (const variant& v : variants) {
        fast::planner planner(topo, v.options); // reused across matrices, as an MoE layer would
        std::vector<double> ratios, end_to_end, planning, rank_planning;
        double steps = 0, stages = 0, scratch = 0;
        std::size_t most_stages = 0, verified = 0;
        for (std::size_t k = 0; k < all.size(); ++k) {
            bar.count("planning " + v.label, static_cast<long long>(k), static_cast<long long>(all.size()));
            const auto [p, planning_us] = timed_plan(planner, all[k], o.repeat, bar, v.label);
            const fast::verification check = fast::verify(p, all[k]);
            const auto [rank_us, same] = timed_rank(planner, all[k], fast::make_shared_counts(all[k], topo), p,
                                                    fast::busiest_rank(all[k]), o.repeat);
            if (check.ok() && same) {
                ++verified;
            } else {
                bar.clear();
                std::fprintf(stderr, "fast-plan: %s, matrix %zu: %s\n", v.label.c_str(), k,
                             check.ok() ? "the busiest rank's program differs from its part of the plan"
                                        : check.message().c_str());
            }
            const double bound = fast::lower_bound_us(all[k], topo);
            const double predicted = fast::predict_us(p);
            ratios.push_back(bound > 0 ? predicted / bound : 1.0);
            end_to_end.push_back(bound > 0 ? (agreement_us + rank_us + predicted) / bound : 1.0);
            planning.push_back(planning_us);
            rank_planning.push_back(rank_us);
            steps += static_cast<double>(p.steps());
            stages += static_cast<double>(fast::count_stages(p));
            most_stages = std::max(most_stages, fast::count_stages(p));
            scratch = std::max(scratch, scratch_share(p, all[k]));
        }
        bar.clear();
        std::sort(planning.begin(), planning.end());
        std::sort(rank_planning.begin(), rank_planning.end());
        const spread exchange = spread_of(ratios);
        const spread whole = spread_of(end_to_end);
        const auto n = static_cast<double>(all.size());
        char stage_text[32];
        std::snprintf(stage_text, sizeof stage_text, "%.1f(%zu)", stages / n, most_stages);
        std::printf(
            "%-24s %8zu %6.1f %11s %9.1f %9.1f %7.4f %7.4f %7.4f %7.4f %7.4f %7.4f %7.0f%%  %s\n", v.label.c_str(),
            all.size(), steps / n, stage_text, planning[planning.size() / 2], rank_planning[rank_planning.size() / 2],
            exchange.mean, exchange.p95, exchange.max, whole.mean, whole.p95, whole.max, 100 * scratch,
            verified == all.size() ? "all" : (std::to_string(verified) + "/" + std::to_string(all.size())).c_str());
        std::fflush(stdout);
        if (verified != all.size()) ++failures;
    }
    return failures == 0 ? 0 : 1;
}

// The --workload file must hold matrices of the cluster's rank count; the error says which.
void check_matrix_file(const options& o, const fast::topology& topo, const fast::workload_spec& spec) {
    try {
        (void)fast::describe_matrix_file(spec.path, topo.ranks());
    } catch (const fast::invalid_argument& e) {
        const std::string cluster =
            fast_tools::fabric_file_of(o).empty()
                ? "--servers " + std::to_string(o.servers) + " x --gpus " + std::to_string(o.gpus)
                : std::to_string(topo.servers) + " servers x " + std::to_string(topo.gpus_per_server) + " GPUs";
        throw fast::invalid_argument(std::string(e.what()) + " (" + cluster + " = " + std::to_string(topo.ranks()) +
                                     " ranks)");
    }
}

// The traffic of one run, with the figures every row of its table divides by.
struct traffic_case {
    fast::fabric fabric; // what the planner plans on (uneven fabrics too)
    fast::topology topo; // its planning_topology
    fast::traffic_matrix matrix;
    double lower_bound_us = 0;
    double total_bytes = 0;
};

void print_table_head(const options& o, const traffic_case& c) {
    print_cluster(o, c.topo);
    const std::string why = fast::detail::uneven_reason(c.fabric);
    if (fast::has_uneven_rates(c.fabric))
        std::printf("fabric uneven: %s; T_lb from each server's NICs (fast-plan bounds)\n", why.c_str());
    else if (!why.empty())
        std::printf("fabric: %s; every GPU scales out at %g GB/s\n", why.c_str(), c.topo.scale_out_gbps);
    std::printf("workload %s: %s in all, %s per GPU on average; lower bound T_lb = %.2f us\n", o.workload.c_str(),
                fast_tools::human_bytes(c.total_bytes).c_str(),
                fast_tools::human_bytes(c.total_bytes / c.topo.ranks()).c_str(), c.lower_bound_us);
    print_agreement(c.topo);
    std::printf("end-to-end = (agreement + rank + predicted) / T_lb: what one call costs a rank\n\n");
    std::printf("%-32s %6s %6s %10s %10s %14s %7s %10s %11s %9s  %s\n", "scheduler", "steps", "stages", "plan(us)",
                "rank(us)", "predicted(us)", "/T_lb", "end-to-end", "algbw(GB/s)", "scratch", "verified");
    std::fflush(stdout);
}

// One row of the table: a scheduler's plan, its median planning time and whether it verified
// (and every rank's program equals its part of the plan); no plan where the scheduler cannot
// plan on the fabric (direct with a NIC down, the baselines without balancing on uneven ones).
struct row {
    fast::plan plan;
    double planning_us = 0;
    double rank_us = 0;
    bool ok = false;
    bool planned = true;
    std::string label; // as printed: the automatic choice, or the layout on uneven rates
};

// Whether `why` is what a scheduler says where the uneven fabric `f` leaves it no plan (direct
// through a NIC that is down, a baseline without balancing, servers whose rails never meet).
bool cannot_plan_on_fabric(const fast::fabric& f, const std::string& why) {
    if (!fast::has_uneven_rates(f)) return false;
    for (const char* known : {"direct cannot run", "plans for equal NICs", "no rail with both NICs up"})
        if (why.find(known) != std::string::npos) return true;
    return false;
}

row plan_row(const variant& v, const traffic_case& c, const options& o, progress& bar) {
    fast::planner planner(c.fabric, v.options);
    fast::plan p;
    double planning_us = 0;
    try {
        std::tie(p, planning_us) = timed_plan(planner, c.matrix, o.repeat, bar, v.label);
    } catch (const fast::invalid_argument& e) {
        if (!cannot_plan_on_fabric(c.fabric, e.what())) throw;
        bar.clear();
        std::printf("%-32s cannot plan on this fabric: %s\n", v.label.c_str(), e.what());
        return {{}, 0, 0, true, false, v.label};
    }
    const bool by_rate = !planner.nic_rates().empty();
    std::string label = v.options.scheduler == fast::scheduler::fast && by_rate
                            ? label_of(fast::scheduler::fast, v.options.policy, true)
                            : v.label;
    if (v.options.scheduler == fast::scheduler::automatic)
        label += ": " + label_of(planner.last_scheduler(), v.options.policy, by_rate);
    bar.show("planning " + label + " per rank ...");
    const auto [rank_us, programs_equal] = timed_ranks(planner, c.matrix, p, o.repeat, o.seed);
    bar.show("verifying " + label + " (" + std::to_string(p.transfers.size()) + " transfers) ...");
    const fast::verification check = fast::verify(p, c.matrix);
    bar.show("predicting " + label + " ...");
    const double predicted = fast::predict_us(p);
    const double algbw = predicted > 0 ? c.total_bytes / c.topo.ranks() / (predicted * 1e3) : 0.0;
    const double end_to_end = fast::plan_agreement(c.topo).us + rank_us + predicted;
    bar.clear();
    const bool ok = check.ok() && programs_equal;
    auto over_bound = [&](double us) { return c.lower_bound_us > 0 ? us / c.lower_bound_us : 0.0; };
    std::printf("%-32s %6zu %6zu %10.1f %10.1f %14.2f %7.4f %10.4f %11.2f %8.0f%%  %s\n", label.c_str(), p.steps(),
                fast::count_stages(p), planning_us, rank_us, predicted, over_bound(predicted), over_bound(end_to_end),
                algbw, 100 * scratch_share(p, c.matrix), ok ? "yes" : "NO");
    std::fflush(stdout);
    if (!check.ok()) std::fprintf(stderr, "fast-plan: %s: %s\n", label.c_str(), check.message().c_str());
    else if (!programs_equal)
        std::fprintf(stderr, "fast-plan: %s: a rank's program differs from the whole plan's part\n", label.c_str());
    return {std::move(p), planning_us, rank_us, ok, true, label};
}

// Writes `r`'s plan to --json (opened before any planning) and closes it.
void write_json(const options& o, std::ofstream& out, const row& r, const traffic_case& c, progress& bar) {
    bar.show("writing " + o.json + " ...");
    fast::write_plan_json(out, r.plan, c.matrix, fast::summarize(r.plan, c.matrix, r.planning_us, r.rank_us));
    out.close();
    if (!out) throw fast::invalid_argument("writing '" + o.json + "' failed");
    bar.clear();
}

// Draws the plans `kept` (one per variant) to --svg (opened before any planning) and closes it.
void write_svg(const options& o, std::ofstream& out, const std::vector<variant>& variants,
               const std::vector<fast::plan>& kept, const traffic_case& c, fast_plan::lane_mode lanes, progress& bar) {
    std::vector<fast_plan::timeline_panel> panels;
    for (std::size_t k = 0; k < kept.size(); ++k) {
        bar.show("timeline of " + variants[k].label + " ...");
        panels.push_back({variants[k].label, &kept[k], fast::simulate(kept[k], true)});
    }
    fast_plan::timeline_options to;
    to.title = "fast-plan: " + std::to_string(c.topo.servers) + " servers x " + std::to_string(c.topo.gpus_per_server) +
               " GPUs, " + o.workload +
               (o.unit_bytes != "1" ? " (" + o.unit_bytes + " bytes per unit)" : std::string());
    char bound[64];
    std::snprintf(bound, sizeof bound, "%.1f", c.lower_bound_us);
    const std::string uneven = fast::has_uneven_rates(c.fabric) ? fast::detail::uneven_reason(c.fabric) : "";
    to.subtitle = fast_tools::fabric_text(fast_tools::cluster_source(o), c.topo) +
                  (uneven.empty() ? "" : " (fastest NIC; " + uneven + ")") + "; " +
                  fast_tools::human_bytes(c.total_bytes) + " in all; cost model (fast::simulate); T_lb = " + bound +
                  " us";
    to.lower_bound_us = c.lower_bound_us;
    to.lanes = lanes;
    bar.show("writing " + o.svg + " ...");
    out << fast_plan::render_timeline_svg(panels, to);
    out.close();
    if (!out) throw fast::invalid_argument("writing '" + o.svg + "' failed");
    bar.clear();
    std::printf("%stimeline of %zu plan%s written to %s\n", o.json.empty() ? "\n" : "", panels.size(),
                panels.size() == 1 ? "" : "s", o.svg.c_str());
}

int run_plan(const options& o) {
    // --all reads many matrices for one uniform topology; one matrix may be planned on any fabric.
    const fast::fabric fabric = fast_tools::planning_fabric_of(o);
    if (o.all && fast::has_uneven_rates(fabric))
        throw fast::invalid_argument("--all plans a file's matrices on NICs of one rate; this fabric's differ (" +
                                     fast::detail::uneven_reason(fabric) + ")");
    const fast::topology topo = fast::planning_topology(fabric);
    const fast::workload_spec spec = fast::parse_workload(o.workload);
    const std::int64_t bytes_per_gpu = fast_tools::bytes_per_gpu_of(o);
    const std::int64_t unit = fast_tools::unit_of(o);
    if (spec.kind == fast::workload_kind::file) check_matrix_file(o, topo, spec);
    if (o.all) {
        if (spec.kind != fast::workload_kind::file || spec.indexed)
            throw fast::invalid_argument(
                "--all plans every matrix of a file: give --workload file:PATH without @INDEX");
        if (!o.json.empty() || !o.svg.empty()) throw fast::invalid_argument("--all writes no --json or --svg");
        return run_all(o, topo, spec, unit);
    }
    const std::vector<variant> variants = variants_of(o);
    traffic_case c{fabric, topo, fast::make_workload(spec, topo, bytes_per_gpu, o.seed, unit), 0, 0};
    c.lower_bound_us = fast::lower_bound(fast::make_shared_counts(c.matrix, topo), fabric).us;
    c.total_bytes = static_cast<double>(c.matrix.sum());
    const fast_plan::lane_mode lanes = parse_lanes(o.svg_lanes);
    // Opened now, so that a bad path fails before any planning.
    std::ofstream json_out = fast_tools::open_output(o.json), svg_out = fast_tools::open_output(o.svg);
    print_table_head(o, c);
    progress bar;
    int failures = 0;
    std::size_t planned = 0;      // variants that made a plan: none is a failure too
    std::vector<fast::plan> kept; // for --svg, with the variants that made them
    std::vector<variant> drawn;
    for (std::size_t k = 0; k < variants.size(); ++k) {
        row r = plan_row(variants[k], c, o, bar);
        if (!r.ok) ++failures;
        if (!r.planned) {
            if (k == 0 && !o.json.empty())
                throw fast::invalid_argument("--json: " + variants[k].label + " made no plan");
            continue;
        }
        ++planned;
        if (k == 0 && !o.json.empty()) write_json(o, json_out, r, c, bar);
        if (!o.svg.empty()) {
            kept.push_back(std::move(r.plan));
            drawn.push_back({r.label, variants[k].options});
        }
    }
    if (!o.json.empty()) std::printf("\nplan of %s written to %s\n", variants.front().label.c_str(), o.json.c_str());
    if (!o.svg.empty()) write_svg(o, svg_out, drawn, kept, c, lanes, bar);
    return failures == 0 && planned > 0 ? 0 : 1;
}

// fast-plan fabric: the cluster's fabric file on stdout.
int run_fabric(const options& o) {
    fast::write_fabric_json(std::cout, fast_tools::fabric_of(o));
    return 0;
}

// fast-plan bounds: for the workload on the cluster's fabric (uneven ones too, which the planner
// does not take yet), T_lb and the best a plan can do that keeps each GPU's bytes on its own NICs.
int run_bounds(const options& o) {
    const fast::fabric f = fast_tools::fabric_of(o);
    const fast::topology shape{f.servers, f.gpus_per_server, f.scale_up_gbps, 1.0, f.alpha_up_us, f.alpha_out_us};
    const fast::workload_spec spec = fast::parse_workload(o.workload);
    if (spec.kind == fast::workload_kind::file) check_matrix_file(o, shape, spec);
    const fast::traffic_matrix m =
        fast::make_workload(spec, shape, fast_tools::bytes_per_gpu_of(o), o.seed, fast_tools::unit_of(o));
    const fast::shared_counts c = fast::make_shared_counts(m, shape);
    const std::string uneven = fast::detail::uneven_reason(f);
    std::printf("%s on %d x %d GPUs, fabric %s\n", o.workload.c_str(), f.servers, f.gpus_per_server,
                uneven.empty() ? "uniform" : ("uneven: " + uneven).c_str());
    const fast::fabric_bound bound = fast::lower_bound(c, f), own = fast::own_nics_bound(c, f);
    std::printf("T_lb                    %12.2f us  (%s)\n", bound.us, bound.where.c_str());
    if (!std::isfinite(own.us)) std::printf("each GPU's own NICs     cannot finish  (%s)\n", own.where.c_str());
    else
        std::printf("each GPU's own NICs     %12.2f us  %.4f x T_lb (%s)\n", own.us, own.us / std::max(1e-12, bound.us),
                    own.where.c_str());
    return 0;
}

// fast-plan verify FILE: 0 and one line for a valid plan, 1 and the first violation (or why the
// file cannot be read as a plan) otherwise.
int run_verify(const options& o) {
    progress bar;
    bar.show("reading " + o.verify_file + " ...");
    const fast::plan_document doc = fast_tools::read_plan_file(o.verify_file);
    bar.show("verifying " + std::to_string(doc.plan.transfers.size()) + " transfers in " +
             std::to_string(doc.plan.steps()) + " steps ...");
    const fast::verification v = fast::verify(doc.plan, doc.matrix);
    bar.clear();
    if (!v.ok()) {
        std::printf("%s: %s\n", o.verify_file.c_str(), v.message().c_str());
        return 1;
    }
    const double predicted = fast::predict_us(doc.plan);
    const double bound = fast::plan_lower_bound_us(doc.plan, doc.matrix);
    std::printf("%s: OK: %s, %zu steps, %zu stages, %s delivered%s; predicted %.2f us, T_lb %.2f us (%.4f)\n",
                o.verify_file.c_str(), fast::detail::quote_input(doc.plan.scheduler).c_str(), doc.plan.steps(),
                fast::count_stages(doc.plan), fast_tools::human_bytes(static_cast<double>(v.delivered_bytes)).c_str(),
                v.one_to_one_scale_out ? ", incast-free" : "", predicted, bound, predicted / std::max(1e-12, bound));
    return 0;
}

void add_options(CLI::App& app, options& o) {
    fast_tools::add_cluster_options(app, o);
    app.add_option(
           "--scheduler", o.scheduler,
           "automatic (fast or direct, whichever costs less end to end, planning included) | fast | fast-unbalanced | "
           "direct | spreadout")
        ->capture_default_str();
    app.add_option("--policy", o.policy, "FAST's policy: rail-packed | bottleneck | exact (the paper)")
        ->capture_default_str();
    app.add_option("--quantum-choices", o.quantum_choices,
                   "rail-packed: quanta tried (the default quantum times 1 .. N); the fastest schedule is kept")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    app.add_option("--quantum-refinements", o.quantum_refinements,
                   "rail-packed: times the best factor is refined by -/+ 1/2, 1/4, ... (each one more schedule)")
        ->check(CLI::Range(0, 16))
        ->capture_default_str();
    app.add_option("--effort", o.effort,
                   "rail-packed: sized (further quanta only where the exchange pays for their planning) | full "
                   "(every quantum of --quantum-choices and --quantum-refinements)")
        ->capture_default_str();
    app.add_option("--ramp", o.ramp,
                   "bottleneck and rail-packed: the share of a neighbouring step's scale-up room that a "
                   "step's balancing may expect to fill (0: no ramps)")
        ->check(fast_tools::in_interval(0, 1e6))
        ->capture_default_str();
    app.add_option("--long-call-ramp-scale", o.long_call_ramp_scale,
                   "rail-packed: calls of 400 alpha_out and more use ramp times this (200 and less: ramp)")
        ->check(fast_tools::in_interval(0, 1e6, true))
        ->capture_default_str();
    app.add_flag("--compare", o.compare, "FAST's policies against fast-unbalanced, spreadout and direct");
    app.add_option("--schedulers", o.schedulers,
                   "compare these, in order: a comma-separated list of fast, fast:POLICY, fast-unbalanced, "
                   "direct, spreadout (e.g. fast,direct)");
    app.add_option("--repeat", o.repeat, "plan N times, report the median planning time")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    app.add_flag("--all", o.all,
                 "plan every matrix of --workload file:PATH; one line per scheduler: mean, p95 and max of "
                 "predicted / T_lb and of end-to-end / T_lb");
    app.add_option("--json", o.json, "write the (first) plan to FILE in the fast-plan/1 format");
    app.add_option("--svg", o.svg, "draw the plans as timelines (cost model) to FILE, one panel per scheduler");
    app.add_option("--svg-lanes", o.svg_lanes,
                   "timeline lanes: rank (one per GPU), server (one per server) or auto (server above 64 ranks)")
        ->capture_default_str();
}

} // namespace

int main(int argc, char** argv) {
    options o;
    CLI::App app{"fast-plan: balanced, incast-free All-to-All(v) schedules for two-tier GPU clusters.\n"
                 "Plans a traffic matrix, verifies the plan and prints the cost model's prediction."};
    app.set_version_flag("--version", "fast-plan 0.1.0");
    app.footer("Exit status: 0 every plan verified; 1 a plan did not verify; 2 bad options or input (one line on\n"
               "stderr says which). fast-plan verify FILE: 0 the plan is valid; 1 it is not, or FILE cannot be\n"
               "read as a plan (one line says why); 2 bad options. fast-plan fabric and fast-plan bounds: 0 printed;\n"
               "2 bad options or fabric file.");
    add_options(app, o);
    CLI::App* verify = app.add_subcommand("verify", "check a fast-plan/1 plan file with the verifier");
    verify->add_option("file", o.verify_file, "plan file (JSON)")->required();
    CLI::App* fabric = app.add_subcommand(
        "fabric", "print the cluster's fast-fabric/1 description (the preset's, with --servers, --gpus and the "
                  "overrides; or --fabric FILE's, checked) to start a fabric file from");
    fabric->fallthrough(); // the cluster options above apply
    CLI::App* bounds = app.add_subcommand(
        "bounds", "for the workload on the cluster's fabric (uneven ones too: --fabric FILE), T_lb and the best "
                  "time of a plan that keeps each GPU's bytes on its own NICs, as direct does");
    bounds->fallthrough();
    fast_plan::trace_options to;
    CLI::App* trace = app.add_subcommand(
        "trace", "an executor's execution traces (config.trace / FAST_TRACE) against the cost model: per call the "
                 "measured and predicted times, and with --svg the two timelines");
    trace->add_option("prefix", to.prefix, "the traces' prefix: PREFIX.rank<R>.json for every rank")->required();
    trace->add_option("--svg", to.svg, "draw one call's measured and predicted timelines to FILE");
    trace->add_option("--call", to.call, "the call --svg draws (default: the last)")->check(CLI::NonNegativeNumber);
    trace->add_option("--chrome", to.chrome,
                      "every rank's events in one Chrome trace FILE (Perfetto, chrome://tracing)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return 0;
    } catch (const CLI::CallForVersion&) {
        std::cout << "fast-plan 0.1.0\n";
        return 0;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "fast-plan: error: %s (see --help)\n", e.what());
        return 2;
    }
    // verify answers 0 (a valid plan) or 1 (anything else); planning fails with 2.
    const int failed = verify->parsed() ? 1 : 2;
    const char* prefix = verify->parsed() ? "fast-plan: " : "fast-plan: error: ";
    try {
        if (trace->parsed()) return fast_plan::run_trace(to);
        if (fabric->parsed()) return run_fabric(o);
        if (bounds->parsed()) return run_bounds(o);
        return verify->parsed() ? run_verify(o) : run_plan(o);
    } catch (const fast::invalid_argument& e) {
        std::fprintf(stderr, "%s%s\n", prefix, e.what());
    } catch (const std::bad_alloc&) {
        const long long ranks = static_cast<long long>(o.servers) * o.gpus;
        const std::string why = verify->parsed() || ranks <= 0 || ranks > INT_MAX
                                    ? "the plan is too large for this machine"
                                    : fast_tools::matrix_size_text(static_cast<int>(ranks));
        std::fprintf(stderr, "%sout of memory: %s\n", prefix, why.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s%s\n", prefix, e.what());
    }
    return failed;
}
