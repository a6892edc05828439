// fast-simgrid: replays fast plans in SimGrid (S4U) on a two-tier platform built in code and
// compares SimGrid's simulated completion time with the cost model's prediction.
//
//   fast-simgrid                                        zipf:0.8, 4 x 8 GPUs, fast/direct/spreadout
//   fast-simgrid --servers 16 --workload zipf:0.8
//   fast-simgrid --workload file:workloads/megatron_moe_4x8.txt --unit-bytes 8K --every 60 --csv out.csv
//   fast-simgrid --plan plan.json                       replay a fast-plan/1 file (any planner's)
//   fast-simgrid --cfg=network/model:LV08               any SimGrid option (after ours)
//
// Platform: one host per GPU. Each GPU has four links, the four ports of the cost model: a
// scale-up transmit and receive link (B_up, latency alpha_up on transmit) into a non-blocking
// scale-up switch, and a NIC transmit and receive link (B_out, latency alpha_out on transmit)
// into a non-blocking core (a FATPIPE link). Routes: same server [nvl-tx(i), nvl-rx(j)] (a copy
// to oneself included), across servers [nic-tx(i), core, nic-rx(j)].
//
// Replay: one actor per rank walks its steps (fast::make_rank_steps): it posts a put_async for
// each transfer it sends and a get_async for each it receives (one mailbox per transfer), waits
// for all of them, and goes on to its next step. A comm starts when both ends have posted it:
// exactly the plan's execution contract. Plans are replayed one after the other in one engine;
// each one's time is the clock from its start to the end of its last actor.
//
// Defaults chosen so that SimGrid and the cost model describe the same fabric (see
// docs/simulators.md): network/model:CM02 (no latency or bandwidth correction factors),
// network/crosstraffic:0 (no reverse-path acknowledgement traffic), network/TCP-gamma:0 (no
// window-based rate cap). Flows then share links max-min fairly, which is where SimGrid and the
// cost model's per-port batches differ.

#include <simgrid/s4u.hpp>
#include <simgrid/version.h>
#include <xbt/config.hpp>

#include <CLI/CLI.hpp>

#include <fast/fast.hpp>
#include <fast/plan_json.hpp>
#include <fast/simulation.hpp>

#include "../cluster_fabric.hpp"
#include "../cluster_options.hpp"
#include "../plan_file.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

struct options : fast_tools::cluster_options {
    std::string schedulers = "fast,direct,spreadout";
    int every = 0;
    std::string csv;
    std::string trace;
    std::string plan_file;
};

// One plan to replay and what became of it.
struct job {
    std::string workload;
    std::string scheduler;
    fast::plan plan;
    fast::rank_steps program;
    double lower_bound_us = 0;
    double model_us = 0;
    bool verified = false;
    double simulated_us = 0;
    std::vector<std::pair<double, double>> times; ///< per transfer: SimGrid's start and end, s
};

// The platform's hosts, one per rank.
std::vector<sg4::Host*> build_platform(const fast::topology& t) {
    auto* zone = sg4::create_full_zone("cluster");
    const int r = t.ranks();
    std::vector<sg4::Host*> hosts;
    std::vector<const sg4::Link*> up_tx, up_rx, out_tx, out_rx;
    for (int k = 0; k < r; ++k) {
        const std::string id = std::to_string(t.server_of(k)) + "-" + std::to_string(t.local_of(k));
        hosts.push_back(zone->create_host("gpu-" + id, 1e12)->seal());
        up_tx.push_back(
            zone->create_link("nvl-tx-" + id, t.scale_up_gbps * 1e9)->set_latency(t.alpha_up_us * 1e-6)->seal());
        up_rx.push_back(zone->create_link("nvl-rx-" + id, t.scale_up_gbps * 1e9)->set_latency(0)->seal());
        out_tx.push_back(
            zone->create_link("nic-tx-" + id, t.scale_out_gbps * 1e9)->set_latency(t.alpha_out_us * 1e-6)->seal());
        out_rx.push_back(zone->create_link("nic-rx-" + id, t.scale_out_gbps * 1e9)->set_latency(0)->seal());
    }
    // Non-blocking core: every flow may use the full capacity.
    const sg4::Link* core =
        zone->create_link("core", 1e15)->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->set_latency(0)->seal();
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r; ++j) {
            std::vector<sg4::LinkInRoute> links;
            if (t.same_server(i, j)) {
                links = {sg4::LinkInRoute(up_tx[static_cast<std::size_t>(i)]),
                         sg4::LinkInRoute(up_rx[static_cast<std::size_t>(j)])};
            } else {
                links = {sg4::LinkInRoute(out_tx[static_cast<std::size_t>(i)]), sg4::LinkInRoute(core),
                         sg4::LinkInRoute(out_rx[static_cast<std::size_t>(j)])};
            }
            zone->add_route(hosts[static_cast<std::size_t>(i)]->get_netpoint(),
                            hosts[static_cast<std::size_t>(j)]->get_netpoint(), nullptr, nullptr, links, false);
        }
    zone->seal();
    return hosts;
}

// One rank's program: its steps in order; in each, a put per transfer it sends, a get per
// transfer it receives (both for a copy to itself), then wait for all of them.
void rank_actor(job& j, int rank, const std::vector<sg4::Mailbox*>& mailboxes) {
    static char payload = 0;
    std::vector<sg4::CommPtr> comms;
    std::vector<std::size_t> sent; // per comm: its transfer if it is a put, SIZE_MAX for a get
    std::vector<void*> landed;
    for (const fast::rank_step& s : j.program.of(rank)) {
        const auto entries = j.program.entries(rank, s);
        comms.clear();
        sent.clear();
        landed.assign(entries.size(), nullptr);
        for (std::size_t k = 0; k < entries.size(); ++k) {
            const fast::transfer& t = j.plan.transfers[entries[k].index];
            sg4::Mailbox* box = mailboxes[entries[k].index];
            if (t.src == rank) {
                comms.push_back(box->put_async(&payload, static_cast<std::uint64_t>(t.bytes)));
                sent.push_back(entries[k].index);
            }
            if (t.dst == rank) {
                comms.push_back(box->get_async<void>(&landed[k]));
                sent.push_back(SIZE_MAX);
            }
        }
        sg4::Comm::wait_all(comms);
        if (!j.times.empty()) // --trace: the sender records each transfer's start and end
            for (std::size_t k = 0; k < comms.size(); ++k)
                if (sent[k] != SIZE_MAX) j.times[sent[k]] = {comms[k]->get_start_time(), comms[k]->get_finish_time()};
    }
}

std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::size_t begin = 0;
    while (begin <= list.size()) {
        std::size_t end = list.find(',', begin);
        if (end == std::string::npos) end = list.size();
        out.push_back(list.substr(begin, end - begin));
        begin = end + 1;
    }
    return out;
}

fast::plan make(const std::string& scheduler, const fast::traffic_matrix& m, const fast::topology& t) {
    fast::plan_options o;
    if (scheduler.rfind("fast:", 0) == 0) {
        o.policy = fast::parse_policy(scheduler.substr(5));
    } else {
        o.scheduler = fast::parse_scheduler(scheduler);
    }
    return fast::make_plan(m, t, o);
}

// The job of `m` planned by `scheduler`, verified; with room for a --trace.
job plan_job(const std::string& label, const fast::traffic_matrix& m, const std::string& scheduler,
             const fast::topology& topo, bool traced) {
    job j;
    j.workload = label;
    j.plan = make(scheduler, m, topo);
    j.scheduler = scheduler;
    const fast::verification v = fast::verify(j.plan, m);
    j.verified = v.ok() && v.delivered_bytes == m.sum();
    if (!v.ok())
        std::fprintf(stderr, "fast-simgrid: %s %s: %s\n", label.c_str(), scheduler.c_str(), v.message().c_str());
    j.model_us = fast::predict_us(j.plan);
    j.lower_bound_us = fast::lower_bound_us(m, topo);
    j.program = fast::make_rank_steps(j.plan);
    if (traced) j.times.assign(j.plan.transfers.size(), {0.0, 0.0});
    return j;
}

// The job of a plan read from a fast-plan/1 file: its own topology, verified against its matrix.
job job_from_file(const std::string& path, bool traced) {
    fast::plan_document doc = fast_tools::read_plan_file(path);
    job j;
    j.workload = "plan";
    j.scheduler = fast::detail::quote_input(doc.plan.scheduler);
    const fast::verification v = fast::verify(doc.plan, doc.matrix);
    if (!v.ok()) throw fast::invalid_argument(path + ": " + v.message());
    j.verified = v.delivered_bytes == doc.matrix.sum();
    j.plan = std::move(doc.plan);
    j.model_us = fast::predict_us(j.plan);
    j.lower_bound_us = fast::lower_bound_us(doc.matrix, j.plan.topology);
    j.program = fast::make_rank_steps(j.plan);
    if (traced) j.times.assign(j.plan.transfers.size(), {0.0, 0.0});
    return j;
}

using labelled_matrices = std::vector<std::pair<std::string, fast::traffic_matrix>>;

// The matrices to plan, each with its label: the workload's one, or every --every-th of a file
// from INDEX on.
labelled_matrices load_matrices(const options& o, const fast::topology& topo, const fast::workload_spec& spec,
                                std::int64_t bytes_per_gpu, std::int64_t unit) {
    labelled_matrices out;
    if (spec.kind == fast::workload_kind::file && o.every > 0) {
        const fast::matrix_file_info info = fast::describe_matrix_file(spec.path, topo.ranks());
        fast::check_matrix_index(info, spec.index, spec.path); // as without --every, not zero matrices
        const std::vector<fast::traffic_matrix> all = fast::read_matrices_file(spec.path, topo.ranks(), unit);
        for (std::size_t k = spec.index; k < info.matrices; k += static_cast<std::size_t>(o.every)) {
            fast::validate_traffic(all[k], topo);
            out.emplace_back("@" + std::to_string(k), all[k]);
        }
        return out;
    }
    const std::string label = spec.kind == fast::workload_kind::file ? "@" + std::to_string(spec.index) : o.workload;
    out.emplace_back(label, fast::make_workload(spec, topo, bytes_per_gpu, o.seed, unit));
    return out;
}

// Replays every job in one engine, one after the other, on the platform of `topo`.
void replay(std::vector<job>& jobs, const fast::topology& topo) {
    const std::vector<sg4::Host*> hosts = build_platform(topo);
    std::size_t most = 0;
    for (const job& j : jobs) most = std::max(most, j.plan.transfers.size());
    std::vector<sg4::Mailbox*> mailboxes;
    for (std::size_t k = 0; k < most; ++k) mailboxes.push_back(sg4::Mailbox::by_name("t" + std::to_string(k)));

    sg4::Actor::create("replay", hosts.front(), [&] {
        for (job& j : jobs) {
            const double start = sg4::Engine::get_clock();
            std::vector<sg4::ActorPtr> ranks;
            for (int r = 0; r < topo.ranks(); ++r)
                ranks.push_back(sg4::Actor::create("rank-" + std::to_string(r), hosts[static_cast<std::size_t>(r)],
                                                   [&j, r, &mailboxes] { rank_actor(j, r, mailboxes); }));
            for (const sg4::ActorPtr& a : ranks) a->join();
            j.simulated_us = (sg4::Engine::get_clock() - start) * 1e6;
            for (auto& [from, to] : j.times) {
                from -= start;
                to -= start;
            }
        }
    });
    sg4::Engine::get_instance()->run();
}

// The header and one line per job (and --csv); returns how many jobs failed verification.
int print_jobs(const options& o, const fast::topology& topo, const std::vector<job>& jobs, std::ofstream& csv) {
    std::printf(
        "fast-simgrid: %d servers x %d GPUs (%s)\n", topo.servers, topo.gpus_per_server,
        fast_tools::fabric_text(o.plan_file.empty() ? fast_tools::cluster_source(o) : "plan file", topo).c_str());
    std::printf("SimGrid %d.%d: network/model %s, crosstraffic %s, TCP-gamma %g\n", SIMGRID_VERSION_MAJOR,
                SIMGRID_VERSION_MINOR, simgrid::config::get_value<std::string>("network/model").c_str(),
                simgrid::config::get_value<bool>("network/crosstraffic") ? "on" : "off",
                simgrid::config::get_value<double>("network/TCP-gamma"));
    std::printf("workload %s\n\n", o.plan_file.empty() ? o.workload.c_str() : o.plan_file.c_str());
    std::printf("%-10s %-18s %6s %9s %12s %12s %9s %8s %8s  %s\n", "matrix", "scheduler", "steps", "transfers",
                "model(us)", "simgrid(us)", "sim/model", "model/lb", "sim/lb", "verified");
    if (csv.is_open()) csv << "matrix,scheduler,steps,transfers,lower_bound_us,model_us,simgrid_us,verified\n";
    int failures = 0;
    for (const job& j : jobs) {
        std::printf("%-10s %-18s %6zu %9zu %12.2f %12.2f %9.4f %8.4f %8.4f  %s\n", j.workload.c_str(),
                    j.scheduler.c_str(), j.plan.steps(), j.plan.transfers.size(), j.model_us, j.simulated_us,
                    j.simulated_us / j.model_us, j.model_us / j.lower_bound_us, j.simulated_us / j.lower_bound_us,
                    j.verified ? "yes" : "NO");
        if (csv.is_open()) {
            char line[512];
            std::snprintf(line, sizeof line, "%s,%s,%zu,%zu,%.3f,%.3f,%.3f,%s\n", j.workload.c_str(),
                          j.scheduler.c_str(), j.plan.steps(), j.plan.transfers.size(), j.lower_bound_us, j.model_us,
                          j.simulated_us, j.verified ? "yes" : "no");
            csv << line;
        }
        failures += j.verified ? 0 : 1;
    }
    return failures;
}

// --trace: per transfer, SimGrid's start and end against the cost model's batches of its two
// ports.
void write_trace(std::ofstream& trace, const std::vector<job>& jobs) {
    trace << "matrix,scheduler,transfer,step,src,dst,tier,bytes,simgrid_start_us,simgrid_end_us,model_start_us,"
             "model_end_us\n";
    for (const job& j : jobs) {
        const fast::prediction model = fast::simulate(j.plan, true);
        // The model's batch of (step, rank, port).
        std::map<std::tuple<std::uint32_t, int, fast::port>, const fast::port_batch*> batch;
        for (const fast::port_batch& b : model.batches) batch[{b.step, b.rank, b.port}] = &b;
        for (std::size_t k = 0; k < j.plan.steps(); ++k)
            for (std::size_t i = j.plan.step_offsets[k]; i < j.plan.step_offsets[k + 1]; ++i) {
                const fast::transfer& t = j.plan.transfers[i];
                const auto step = static_cast<std::uint32_t>(k);
                const fast::port_batch* sent = batch.at({step, t.src, fast::detail::sending_port(t.tier)});
                const fast::port_batch* received = batch.at({step, t.dst, fast::detail::receiving_port(t.tier)});
                char line[512];
                std::snprintf(line, sizeof line, "%s,%s,%zu,%zu,%d,%d,%s,%lld,%.3f,%.3f,%.3f,%.3f\n",
                              j.workload.c_str(), j.scheduler.c_str(), i, k, t.src, t.dst,
                              std::string(fast::to_string(t.tier)).c_str(), static_cast<long long>(t.bytes),
                              j.times[i].first * 1e6, j.times[i].second * 1e6,
                              std::max(sent->start_us, received->start_us), std::max(sent->end_us, received->end_us));
                trace << line;
            }
    }
}

// Per scheduler over all matrices: sim/model and both against T_lb.
void print_summary(const std::vector<std::string>& schedulers, const std::vector<job>& jobs) {
    std::printf("\n%-18s %9s %9s %9s %10s %10s\n", "scheduler", "sim/model", "min", "max", "model/lb", "sim/lb");
    for (const std::string& s : schedulers) {
        double sum = 0, lo = 1e300, hi = 0, model_lb = 0, sim_lb = 0;
        int n = 0;
        for (const job& j : jobs)
            if (j.scheduler == s) {
                const double x = j.simulated_us / j.model_us;
                sum += x;
                lo = std::min(lo, x);
                hi = std::max(hi, x);
                model_lb += j.model_us / j.lower_bound_us;
                sim_lb += j.simulated_us / j.lower_bound_us;
                ++n;
            }
        std::printf("%-18s %9.4f %9.4f %9.4f %10.4f %10.4f\n", s.c_str(), sum / n, lo, hi, model_lb / n, sim_lb / n);
    }
}

// Do SimGrid and the model rank the schedulers the same way on each matrix?
void print_agreement(const labelled_matrices& matrices, const std::vector<job>& jobs) {
    std::size_t same = 0;
    for (const auto& [label, m] : matrices) {
        std::vector<const job*> row;
        for (const job& j : jobs)
            if (j.workload == label) row.push_back(&j);
        auto by_model = row;
        auto by_sim = row;
        std::stable_sort(by_model.begin(), by_model.end(),
                         [](const job* a, const job* b) { return a->model_us < b->model_us; });
        std::stable_sort(by_sim.begin(), by_sim.end(),
                         [](const job* a, const job* b) { return a->simulated_us < b->simulated_us; });
        same += by_model == by_sim ? 1 : 0;
    }
    std::printf("\nscheduler order: SimGrid agrees with the cost model on %zu of %zu matri%s\n", same, matrices.size(),
                matrices.size() == 1 ? "x" : "ces");
}

int run(const options& o) {
    // Output files are opened first, so that a bad path fails before any planning or replay.
    std::ofstream csv = fast_tools::open_output(o.csv), trace = fast_tools::open_output(o.trace);
    fast::topology topo = fast_tools::topology_of(o);
    const fast::workload_spec spec = fast::parse_workload(o.workload);
    const std::int64_t bytes_per_gpu = fast_tools::bytes_per_gpu_of(o);
    const std::int64_t unit = fast_tools::unit_of(o);
    std::vector<std::string> schedulers = split(o.schedulers);
    for (const std::string& s : schedulers) (void)make(s, fast::traffic_matrix::Zero(topo.ranks(), topo.ranks()), topo);

    // The jobs: every scheduler on one matrix, or on every N-th of a file; or a plan file.
    labelled_matrices matrices;
    std::vector<job> jobs;
    if (!o.plan_file.empty()) {
        jobs.push_back(job_from_file(o.plan_file, !o.trace.empty()));
        topo = jobs.front().plan.topology;
        schedulers = {jobs.front().scheduler};
        matrices.emplace_back("plan", fast::traffic_matrix());
    } else {
        matrices = load_matrices(o, topo, spec, bytes_per_gpu, unit);
        for (const auto& [label, m] : matrices)
            for (const std::string& s : schedulers) jobs.push_back(plan_job(label, m, s, topo, !o.trace.empty()));
    }
    replay(jobs, topo);
    const int failures = print_jobs(o, topo, jobs, csv);
    if (!o.trace.empty()) write_trace(trace, jobs);
    if (matrices.size() > 1) print_summary(schedulers, jobs);
    print_agreement(matrices, jobs);
    return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    options o;
    CLI::App app{"fast-simgrid: replays fast plans in SimGrid on a two-tier platform and compares the simulated\n"
                 "completion time with the cost model's prediction. SimGrid options: --cfg=NAME:VALUE\n"
                 "(--cfg-help lists them)."};
    fast_tools::add_cluster_options(app, o);
    app.add_option("--every", o.every, "file workloads: replay every N-th matrix from INDEX on (0: only INDEX)")
        ->check(fast_tools::non_negative);
    app.add_option(
           "--schedulers", o.schedulers,
           "comma-separated: fast, fast:POLICY (rail-packed, bottleneck, exact), fast-unbalanced, direct, spreadout")
        ->capture_default_str();
    app.add_option("--csv", o.csv, "also write the results to FILE as CSV");
    app.add_option("--plan", o.plan_file, "replay this fast-plan/1 file (its topology) instead of planning");
    app.add_option("--trace", o.trace, "write every transfer's SimGrid and cost-model start and end to FILE (CSV)");
    // SimGrid's engine answers --help itself (with its configuration list): ours goes first.
    for (int k = 1; k < argc; ++k)
        if (std::string_view(argv[k]) == "--help" || std::string_view(argv[k]) == "-h") {
            std::cout << app.name(argv[0])->help();
            return 0;
        }

    // Our defaults first, so that the user's --cfg options (parsed in order) override them.
    std::vector<char*> args{argv[0]};
    std::string defaults[] = {"--cfg=network/model:CM02", "--cfg=network/crosstraffic:0", "--cfg=network/TCP-gamma:0",
                              "--log=xbt_cfg.thres:warning"};
    for (std::string& d : defaults) args.push_back(d.data());
    for (int k = 1; k < argc; ++k) args.push_back(argv[k]);
    int count = static_cast<int>(args.size());
    args.push_back(nullptr);
    std::optional<sg4::Engine> engine;
    try {
        engine.emplace(&count, args.data());
    } catch (const std::exception& e) {
        // A bad --cfg key or value (SimGrid aborts by itself on some others, e.g. an unknown model).
        std::string given;
        for (int k = 1; k < argc; ++k)
            if (std::string_view(argv[k]).starts_with("--cfg=") || std::string_view(argv[k]).starts_with("--log="))
                given += std::string(given.empty() ? "" : " ") + argv[k];
        const std::string what = e.what();
        std::fprintf(stderr, "fast-simgrid: error: SimGrid rejected %s: %s (see --cfg-help)\n",
                     given.empty() ? "its options" : given.c_str(),
                     what.substr(0, what.find('\n')).c_str()); // the first line: a list of keys follows
        return 2;
    }

    try {
        app.parse(count, args.data());
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return 0;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "fast-simgrid: error: %s (see --help)\n", e.what());
        return 2;
    }
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fast-simgrid: error: %s\n", e.what());
        return 2;
    }
}
