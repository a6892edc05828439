// fast-plan: plans an All-to-All(v) traffic matrix on a two-tier cluster, verifies the plan and
// prints what the cost model predicts; exports plans as JSON and checks plan files.
//
//   fast-plan                                  the default: zipf:0.8, 4 x 8 GPUs, 256M per GPU
//   fast-plan --servers 32 --compare           FAST against the baselines
//   fast-plan --workload file:trace.txt@3 --unit-bytes 8K --json plan.json
//   fast-plan verify plan.json                 OK with the predicted time, or the first violation

#include <CLI/CLI.hpp>

#include <fast/fast.hpp>
#include <fast/plan_json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

struct options {
    int servers = 4;
    int gpus = 8;
    std::string workload = "zipf:0.8";
    std::string bytes_per_gpu = "256M";
    std::string unit_bytes = "1";
    std::uint64_t seed = 1;
    std::string preset = "h200";
    std::optional<double> scale_up_gbps;
    std::optional<double> scale_out_gbps;
    std::optional<double> alpha_up_us;
    std::optional<double> alpha_out_us;
    std::string scheduler = "fast";
    std::string policy = "rail-packed";
    bool compare = false;
    int repeat = 1;
    std::string json;
    std::string verify_file;
};

std::int64_t parse_bytes(const std::string& text, const char* option) {
    return fast::detail::parse_entry(text, 1, [&] { return std::string(option); });
}

std::string human_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
    return buf;
}

// One row of the table: a scheduler (and policy) to run.
struct variant {
    std::string label;
    fast::plan_options options;
};

std::vector<variant> variants_of(const options& o) {
    fast::plan_options base;
    base.scheduler = fast::parse_scheduler(o.scheduler);
    base.policy = fast::parse_policy(o.policy);
    if (!o.compare) {
        std::string label(fast::to_string(base.scheduler));
        if (base.scheduler == fast::scheduler::fast) label += " (" + std::string(fast::to_string(base.policy)) + ")";
        return {{label, base}};
    }
    std::vector<variant> out;
    for (const fast::policy p : {fast::policy::rail_packed, fast::policy::bottleneck, fast::policy::exact}) {
        fast::plan_options x;
        x.policy = p;
        out.push_back({"fast (" + std::string(fast::to_string(p)) + ")", x});
    }
    for (const fast::scheduler s : {fast::scheduler::fast_unbalanced, fast::scheduler::spreadout, fast::scheduler::direct}) {
        fast::plan_options x;
        x.scheduler = s;
        out.push_back({std::string(fast::to_string(s)), x});
    }
    return out;
}

// Plans `repeat` times with one reused planner; returns the plan and the median time in us.
std::pair<fast::plan, double> timed_plan(const fast::traffic_matrix& m, const fast::topology& t,
                                         const fast::plan_options& po, int repeat, bool show_progress,
                                         const std::string& label) {
    fast::planner p(t, po);
    std::vector<double> times;
    fast::plan result;
    for (int k = 0; k < repeat; ++k) {
        const auto start = std::chrono::steady_clock::now();
        const fast::plan& made = p.make(m);
        const auto stop = std::chrono::steady_clock::now();
        times.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
        if (k + 1 == repeat) result = made;
        if (show_progress && repeat > 1)
            std::fprintf(stderr, "\r  planning %-24s %d/%d", label.c_str(), k + 1, repeat);
    }
    if (show_progress && repeat > 1) std::fprintf(stderr, "\r%60s\r", "");
    std::sort(times.begin(), times.end());
    return {std::move(result), times[times.size() / 2]};
}

int run_plan(const options& o) {
    fast::topology topo = fast::make_topology(o.servers, o.gpus, fast::parse_preset(o.preset));
    if (o.scale_up_gbps) topo.scale_up_gbps = *o.scale_up_gbps;
    if (o.scale_out_gbps) topo.scale_out_gbps = *o.scale_out_gbps;
    if (o.alpha_up_us) topo.alpha_up_us = *o.alpha_up_us;
    if (o.alpha_out_us) topo.alpha_out_us = *o.alpha_out_us;
    fast::validate(topo);
    const fast::workload_spec spec = fast::parse_workload(o.workload);
    const std::int64_t bytes_per_gpu = parse_bytes(o.bytes_per_gpu, "--bytes-per-gpu");
    const std::int64_t unit = parse_bytes(o.unit_bytes, "--unit-bytes");
    if (unit < 1) throw fast::invalid_argument("--unit-bytes must be at least 1");
    if (spec.kind == fast::workload_kind::file) {
        try {
            (void)fast::describe_matrix_file(spec.path, topo.ranks());
        } catch (const fast::invalid_argument& e) {
            throw fast::invalid_argument(std::string(e.what()) + " (--servers " + std::to_string(o.servers) +
                                         " x --gpus " + std::to_string(o.gpus) + " = " +
                                         std::to_string(topo.ranks()) + " ranks)");
        }
    }
    const std::vector<variant> variants = variants_of(o);
    const fast::traffic_matrix m = fast::make_workload(spec, topo, bytes_per_gpu, o.seed, unit);
    const double bound = fast::lower_bound_us(m, topo);
    const double total = static_cast<double>(m.sum());
    const bool tty = isatty(STDERR_FILENO) != 0;

    std::printf("fast-plan: %d servers x %d GPUs (%s: scale-up %g GB/s, scale-out %g GB/s, alpha %g/%g us)\n",
                topo.servers, topo.gpus_per_server, o.preset.c_str(), topo.scale_up_gbps,
                topo.scale_out_gbps, topo.alpha_up_us, topo.alpha_out_us);
    std::printf("workload %s: %s in all, %s per GPU on average; lower bound T_lb = %.2f us\n\n",
                o.workload.c_str(), human_bytes(total).c_str(),
                human_bytes(total / topo.ranks()).c_str(), bound);
    std::printf("%-24s %6s %6s %10s %14s %7s %11s %9s  %s\n", "scheduler", "steps", "stages",
                "plan(us)", "predicted(us)", "/T_lb", "algbw(GB/s)", "scratch", "verified");
    int failures = 0;
    for (std::size_t k = 0; k < variants.size(); ++k) {
        const variant& v = variants[k];
        auto [p, planning_us] = timed_plan(m, topo, v.options, o.repeat, tty, v.label);
        if (tty) std::fprintf(stderr, "\r  verifying %-24s", v.label.c_str());
        const fast::verification check = fast::verify(p, m);
        if (tty) std::fprintf(stderr, "\r%60s\r", "");
        const double predicted = fast::predict_us(p);
        // Scratch as a share of the largest receive buffer it serves.
        const auto recv = fast::recv_totals(m);
        double scratch = 0;
        for (std::size_t r = 0; r < recv.size(); ++r)
            if (recv[r] > 0) scratch = std::max(scratch, static_cast<double>(p.scratch_bytes[r]) / static_cast<double>(recv[r]));
        const double algbw = predicted > 0 ? total / topo.ranks() / (predicted * 1e3) : 0.0;
        std::printf("%-24s %6zu %6zu %10.1f %14.2f %7.4f %11.2f %8.0f%%  %s\n", v.label.c_str(), p.steps(),
                    fast::count_stages(p), planning_us, predicted, bound > 0 ? predicted / bound : 0.0,
                    algbw, 100 * scratch, check.ok() ? "yes" : "NO");
        if (!check.ok()) {
            std::fprintf(stderr, "fast-plan: %s: %s\n", v.label.c_str(), check.message().c_str());
            ++failures;
        }
        if (k == 0 && !o.json.empty()) {
            std::ofstream out(o.json);
            if (!out) throw fast::invalid_argument("cannot write '" + o.json + "'");
            fast::write_plan_json(out, p, m, fast::summarize(p, m, planning_us));
            if (!out) throw fast::invalid_argument("writing '" + o.json + "' failed");
        }
    }
    if (!o.json.empty()) std::printf("\nplan of %s written to %s\n", variants.front().label.c_str(), o.json.c_str());
    return failures == 0 ? 0 : 1;
}

int run_verify(const options& o) {
    std::ifstream in(o.verify_file);
    if (!in) throw fast::invalid_argument("cannot open plan file '" + o.verify_file + "'");
    const bool tty = isatty(STDERR_FILENO) != 0;
    if (tty) std::fprintf(stderr, "reading %s ...", o.verify_file.c_str());
    const fast::plan_document doc = fast::read_plan_json(in, o.verify_file);
    if (tty) std::fprintf(stderr, "\rverifying %zu transfers in %zu steps ...", doc.plan.transfers.size(), doc.plan.steps());
    const fast::verification v = fast::verify(doc.plan, doc.matrix);
    if (tty) std::fprintf(stderr, "\r%70s\r", "");
    if (!v.ok()) {
        std::printf("%s: %s\n", o.verify_file.c_str(), v.message().c_str());
        return 1;
    }
    std::printf("%s: OK: %s, %zu steps, %zu stages, %s delivered%s; predicted %.2f us, T_lb %.2f us (%.4f)\n",
                o.verify_file.c_str(), doc.plan.scheduler.c_str(), doc.plan.steps(), fast::count_stages(doc.plan),
                human_bytes(static_cast<double>(v.delivered_bytes)).c_str(),
                v.one_to_one_scale_out ? ", incast-free" : "", fast::predict_us(doc.plan),
                fast::lower_bound_us(doc.matrix, doc.plan.topology),
                fast::predict_us(doc.plan) / std::max(1e-12, fast::lower_bound_us(doc.matrix, doc.plan.topology)));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    options o;
    CLI::App app{"fast-plan: balanced, incast-free All-to-All(v) schedules for two-tier GPU clusters.\n"
                 "Plans a traffic matrix, verifies the plan and prints the cost model's prediction."};
    app.set_version_flag("--version", "fast-plan 0.1.0");
    app.add_option("--servers", o.servers, "servers in the cluster")->capture_default_str();
    app.add_option("--gpus", o.gpus, "GPUs per server")->capture_default_str();
    app.add_option("--workload", o.workload,
                   "uniform | zipf[:S] | moe[:tokens=N,topk=K,zipf=S|lognormal=SIGMA,token_bytes=B] | file:PATH[@INDEX]")
        ->capture_default_str();
    app.add_option("--bytes-per-gpu", o.bytes_per_gpu, "bytes each GPU sends on average (suffixes K, M, G, T)")
        ->capture_default_str();
    app.add_option("--unit-bytes", o.unit_bytes, "multiplier of matrix file entries, e.g. bytes per token")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the generators")->capture_default_str();
    app.add_option("--preset", o.preset, "h200 (450 / 50 GB/s) or mi300x (448 / 12.5 GB/s)")->capture_default_str();
    app.add_option("--scale-up-gbps", o.scale_up_gbps, "override: scale-up bandwidth per GPU, GB/s");
    app.add_option("--scale-out-gbps", o.scale_out_gbps, "override: scale-out (NIC) bandwidth per GPU, GB/s");
    app.add_option("--alpha-up-us", o.alpha_up_us, "override: scale-up latency per step, us");
    app.add_option("--alpha-out-us", o.alpha_out_us, "override: scale-out latency per step, us");
    app.add_option("--scheduler", o.scheduler, "fast | fast-unbalanced | direct | spreadout")->capture_default_str();
    app.add_option("--policy", o.policy, "FAST's policy: rail-packed | bottleneck | exact (the paper)")
        ->capture_default_str();
    app.add_flag("--compare", o.compare, "FAST's policies against fast-unbalanced, spreadout and direct");
    app.add_option("--repeat", o.repeat, "plan N times, report the median planning time")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    app.add_option("--json", o.json, "write the (first) plan to FILE in the fast-plan/1 format");
    CLI::App* verify = app.add_subcommand("verify", "check a fast-plan/1 plan file with the verifier");
    verify->add_option("file", o.verify_file, "plan file (JSON)")->required();
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
    try {
        return verify->parsed() ? run_verify(o) : run_plan(o);
    } catch (const fast::invalid_argument& e) {
        if (verify->parsed()) { // verify answers 0 (a valid plan) or 1 (anything else)
            std::fprintf(stderr, "fast-plan: %s\n", e.what());
            return 1;
        }
        std::fprintf(stderr, "fast-plan: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fast-plan: error: %s\n", e.what());
        return 2;
    }
}
