// alltoallv_perf: All-to-All(v) timings in the style of nccl-tests, for the FAST executor
// (schedulers `fast` and `direct`) against MPI_Alltoallv on the same buffers.
//
//   mpirun -np 8 alltoallv_perf -g 4 -W uniform -W zipf:1.2 -b 1M -e 16M -f 4 -w 2 -n 10
//   mpirun -np 32 alltoallv_perf -g 8 -W file:workloads/megatron_moe_4x8.txt -u 4K --every 60 --csv out.csv
//
// Every iteration's received bytes are checked against a deterministic pattern (#wrong: wrong
// bytes plus ranks whose call failed, summed over ranks and iterations; must be 0). Schedulers
// run interleaved (iteration k of each before iteration k + 1 of any), so that noise on a shared
// machine hits them alike. Time is the slowest rank's time of a call (each rank starts its clock
// when it leaves a barrier); rows show the median over iterations. T_lb is the emulated bound
// max over servers of max(inter-server send, receive) / (the server's NIC rates): no scheduler
// can beat it when every GPU's NIC runs at --nic-gbit, or at its --nic-rate. --nic-rate tells
// the executor's planner (config.nic_gbps) and the model alike.

#include <mpi.h>
#include <sched.h>

#include <CLI/CLI.hpp>

#include <fast/cost.hpp>
#include <fast/exec/mpi.hpp>
#include <fast/fabric_bounds.hpp>
#include <fast/fabric_json.hpp>
#include <fast/layout.hpp>
#include <fast/matrix_io.hpp>
#include <fast/planner.hpp>
#include <fast/topology.hpp>
#include <fast/traffic.hpp>
#include <fast/workload.hpp>

#include "../examples/cluster_options.hpp" // fast_tools::non_negative, median
#include "../examples/mpi_tool.hpp"
#include "perf_pattern.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
    int gpus_per_server = 0;
    std::vector<std::string> workloads{"uniform"};
    std::string min_bytes = "1M";
    std::string max_bytes;
    double step_factor = 2;
    std::string unit = "1";
    std::size_t every = 1;
    std::size_t max_matrices = 0;
    std::string schedulers = "fast,direct,mpi";
    int warmup = 1;
    int iters = 5;
    std::uint64_t seed = 1;
    double nic_gbit = 0.1;
    std::vector<std::string> nic_rates; ///< RANK=GBIT: a NIC at its own rate (0: down)
    int gpus_per_nic = 1;
    std::string fabric; ///< a fast-fabric/1 file the planner and the model use instead
    int mark_down_on_failure = -1; ///< a rank whose NIC is marked down after a failed call
    std::optional<double> scale_up_gbps;
    double alpha_up_us = 50;
    double alpha_out_us = 500;
    double timeout_s = 120;
    std::string flow = "rendezvous";
    std::string csv;
    bool summary_only = false;
};

/// One thing to time: a traffic matrix and where it came from.
struct test_case {
    std::string workload; ///< the spec as given
    std::string matrix;   ///< index in its file, "-" for generators
    fast::traffic_matrix m;
};

enum class sched { fast, direct, mpi };

const char* name_of(sched s) {
    return s == sched::fast ? "fast" : s == sched::direct ? "direct" : "mpi";
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "alltoallv_perf: error: %s\n", what.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::exit(2); // not reached
}

using fast_tools::parse_bytes;

// --- the data pattern ---------------------------------------------------------------------------
// Byte k of block (src -> dst) is byte k % 8 of word(src, dst, k / 8), XORed with the run's key in
// every byte. The send buffer is XORed with old ^ new key between runs, so every run (each
// scheduler, each iteration) expects different bytes and stale data from an earlier run is caught.

using fast_perf::count_wrong;
using fast_perf::fill_block;
using fast_perf::spread;

void xor_buffer(std::vector<std::uint8_t>& buf, std::uint8_t key) {
    const std::uint64_t mask = spread(key);
    std::size_t k = 0;
    for (; k + 8 <= buf.size(); k += 8) {
        std::uint64_t w = 0;
        std::memcpy(&w, buf.data() + k, 8);
        w ^= mask;
        std::memcpy(buf.data() + k, &w, 8);
    }
    for (; k < buf.size(); ++k) buf[k] ^= key;
}

// --- bounds ---------------------------------------------------------------------------------------

struct bounds {
    double tlb_s = 0;  ///< balanced bound: busiest server's inter-server bytes over its G NICs
    double tnic_s = 0; ///< busiest single NIC's own inter-server bytes (what rail-unaware schedulers face)
};

// Without alphas (fabric_bounds.hpp's, less alpha_out): the emulated bounds on `f`.
bounds bounds_of(const fast::traffic_matrix& m, const fast::fabric& f) {
    fast::fabric bare = f;
    bare.alpha_out_us = 0;
    bare.alpha_up_us = 0;
    const fast::shared_counts c = fast::make_shared_counts(m, fast::planning_topology(bare));
    return {fast::lower_bound(c, bare).us * 1e-6, fast::own_nics_bound(c, bare).us * 1e-6};
}

// The wire: NICs of --gpus-per-nic ranks each at --nic-gbit, the NIC of a --nic-rate RANK=GBIT
// rank at GBIT (0: down).
fast::fabric wire_of(const options& o, const fast::topology& topo) {
    fast::fabric f = fast::uniform_fabric(topo);
    f.nics = fast::layout_nics(topo.servers, topo.gpus_per_server, {o.gpus_per_nic, 1, o.nic_gbit / 8});
    const int ranks = topo.ranks();
    for (const std::string& item : o.nic_rates) {
        const std::size_t eq = item.find('=');
        std::size_t used = 0;
        int rank = -1;
        double gbit = -1;
        try {
            rank = std::stoi(item.substr(0, eq), &used);
            if (used == eq) gbit = std::stod(item.substr(eq + 1), &used);
        } catch (const std::exception&) {}
        if (eq == std::string::npos || rank < 0 || rank >= ranks || !(gbit >= 0 && std::isfinite(gbit)) ||
            used != item.size() - eq - 1)
            throw fast::invalid_argument("--nic-rate needs RANK=GBIT with a rank below " + std::to_string(ranks) +
                                         " and a rate >= 0, got '" + item.substr(0, 40) + "'");
        f.nics[static_cast<std::size_t>(rank / o.gpus_per_nic)].gbps = gbit / 8; // NICs are listed rank by rank
    }
    fast::validate(f);
    return f;
}

// What the planner and the model plan for: --fabric's file (its shape must be the run's), else
// the wire with the planner's scale-up rate and alphas.
fast::fabric planner_fabric_of(const options& o, const fast::fabric& wire) {
    if (o.fabric.empty()) return wire;
    const fast::fabric f = fast::read_fabric_file(o.fabric);
    if (f.servers != wire.servers || f.gpus_per_server != wire.gpus_per_server)
        throw fast::invalid_argument("--fabric '" + o.fabric + "' describes " + std::to_string(f.servers) + " x " +
                                     std::to_string(f.gpus_per_server) + " GPUs, the run is " +
                                     std::to_string(wire.servers) + " x " + std::to_string(wire.gpus_per_server));
    return f;
}

// --- the cases, built on rank 0 and broadcast -----------------------------------------------------

std::vector<std::int64_t> sizes_of(const options& o) {
    const std::int64_t lo = parse_bytes(o.min_bytes, "--minbytes");
    const std::int64_t hi = o.max_bytes.empty() ? lo : parse_bytes(o.max_bytes, "--maxbytes");
    if (hi < lo)
        throw fast::invalid_argument("--maxbytes (" + o.max_bytes + ") is below --minbytes (" + o.min_bytes + ")");
    if (!(o.step_factor > 1) && hi > lo) throw fast::invalid_argument("--stepfactor must be above 1");
    std::vector<std::int64_t> out;
    for (double b = static_cast<double>(lo); b <= static_cast<double>(hi) * (1 + 1e-9); b *= o.step_factor) {
        out.push_back(static_cast<std::int64_t>(std::llround(b)));
        if (hi == lo) break;
    }
    return out;
}

std::vector<test_case> make_cases(const options& o, const fast::topology& topo) {
    std::vector<test_case> cases;
    const std::int64_t unit = parse_bytes(o.unit, "--unit");
    for (const std::string& text : o.workloads) {
        const fast::workload_spec spec = fast::parse_workload(text);
        if (spec.kind != fast::workload_kind::file) {
            for (const std::int64_t bytes : sizes_of(o))
                cases.push_back({text, "-", fast::make_workload(spec, topo, bytes, o.seed)});
            continue;
        }
        // file:PATH@I is matrix I; file:PATH is every --every-th matrix of the file.
        if (spec.indexed) {
            cases.push_back({text, std::to_string(spec.index), fast::make_workload(spec, topo, 0, o.seed, unit)});
            continue;
        }
        std::vector<fast::traffic_matrix> all = fast::read_matrices_file(spec.path, topo.ranks(), unit);
        std::size_t taken = 0;
        for (std::size_t k = 0; k < all.size(); k += o.every) {
            if (o.max_matrices > 0 && taken == o.max_matrices) break;
            fast::validate_traffic(all[k], topo);
            cases.push_back({text, std::to_string(k), std::move(all[k])});
            ++taken;
        }
    }
    return cases;
}

void bcast_string(std::string& s) {
    unsigned long long n = s.size();
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    s.resize(n);
    MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
}

// Rank 0 builds the cases (one file read, one generator run) and sends them to everyone; an error
// there ends every rank with rank 0's message.
std::vector<test_case> share_cases(const options& o, const fast::topology& topo, int rank) {
    std::vector<test_case> cases;
    std::string error;
    if (rank == 0) {
        try {
            cases = make_cases(o, topo);
            if (cases.empty()) error = "no traffic matrices to run (check --every and --max-matrices)";
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    bcast_string(error);
    if (!error.empty()) {
        if (rank == 0) std::fprintf(stderr, "alltoallv_perf: error: %s\n", error.c_str());
        MPI_Finalize();
        std::exit(2);
    }
    unsigned long long count = cases.size();
    MPI_Bcast(&count, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    cases.resize(count);
    const int r = topo.ranks();
    for (test_case& c : cases) {
        bcast_string(c.workload);
        bcast_string(c.matrix);
        if (rank != 0) c.m.resize(r, r);
        MPI_Bcast(c.m.data(), r * r, MPI_INT64_T, 0, MPI_COMM_WORLD);
    }
    return cases;
}

// --- the fabric the planner plans for ---------------------------------------------------------------

// Scale-up of the emulation: memcpy between two buffers larger than the caches, shared by the ranks
// of this host that run on the same cores (every rank of a server copies at once while scale-out
// runs).
double measured_scale_up_gbps(MPI_Comm world) {
    MPI_Comm local = MPI_COMM_NULL;
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int local_ranks = 1;
    MPI_Comm_size(local, &local_ranks);
    MPI_Comm_free(&local);
    constexpr std::size_t bytes = std::size_t{32} << 20;
    std::vector<std::uint8_t> a(bytes, 1), b(bytes, 2);
    double best_s = 1e30;
    for (int k = 0; k < 5; ++k) {
        const auto t0 = clock_type::now();
        std::memcpy((k % 2 ? a : b).data(), (k % 2 ? b : a).data(), bytes);
        best_s = std::min(best_s, std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    const double share = std::min(1.0, cores / local_ranks);
    return static_cast<double>(bytes) / best_s * share / 1e9;
}

// --- one case ---------------------------------------------------------------------------------------

struct rank_buffers {
    std::vector<std::uint8_t> send, recv;
    std::vector<std::size_t> scount, sdispl, rcount, rdispl;
    std::vector<int> scount_i, sdispl_i, rcount_i, rdispl_i; // MPI_Alltoallv's ints
    bool fits_int = true;
};

rank_buffers make_buffers(const fast::traffic_matrix& m, int me) {
    const fast::alltoallv_layout layout = fast::make_packed_layout(m);
    const int r = static_cast<int>(m.rows());
    rank_buffers b;
    b.send.resize(static_cast<std::size_t>(layout.send_size[static_cast<std::size_t>(me)]));
    b.recv.resize(static_cast<std::size_t>(layout.recv_size[static_cast<std::size_t>(me)]));
    for (int j = 0; j < r; ++j) {
        b.scount.push_back(static_cast<std::size_t>(m(me, j)));
        b.sdispl.push_back(static_cast<std::size_t>(layout.send_displ(me, j)));
        b.rcount.push_back(static_cast<std::size_t>(m(j, me)));
        b.rdispl.push_back(static_cast<std::size_t>(layout.recv_displ(j, me)));
        fill_block(b.send.data() + b.sdispl.back(), b.scount.back(), static_cast<std::uint64_t>(me) * r + j);
    }
    b.fits_int = b.send.size() <= INT_MAX && b.recv.size() <= INT_MAX;
    if (b.fits_int)
        for (int j = 0; j < r; ++j) {
            const auto k = static_cast<std::size_t>(j);
            b.scount_i.push_back(static_cast<int>(b.scount[k]));
            b.sdispl_i.push_back(static_cast<int>(b.sdispl[k]));
            b.rcount_i.push_back(static_cast<int>(b.rcount[k]));
            b.rdispl_i.push_back(static_cast<int>(b.rdispl[k]));
        }
    return b;
}

struct result {
    std::vector<double> times_s; ///< slowest rank's time per timed iteration
    std::int64_t wrong = 0;
    std::size_t steps = 0; ///< the executor's plan (0 for MPI)
};

struct executors {
    std::unique_ptr<fast::exec::communicator> fast, direct;
};

// The communicators of `scheds` on `cfg`, created collectively.
executors make_executors(fast::exec::config cfg, const std::vector<sched>& scheds) {
    executors ex;
    for (const sched s : scheds) {
        if (s == sched::mpi) continue;
        auto& slot = s == sched::fast ? ex.fast : ex.direct;
        if (slot) continue;
        cfg.scheduler = s == sched::fast ? fast::exec::scheduler::fast : fast::exec::scheduler::direct;
        slot = std::make_unique<fast::exec::communicator>();
        if (const fast::exec::status st = fast::exec::create(MPI_COMM_WORLD, cfg, *slot); !st.ok())
            die(std::string("creating the ") + name_of(s) + " communicator: " + st.message());
    }
    return ex;
}

// Whether the call (this rank's: `ok`, `error`, `seconds`) failed on some rank (collective; only
// with --mark-down-on-failure, whose recovery every rank must take alike). Rank 0 says on how
// many, when the last returned, and the first failed rank's error.
bool failed_somewhere(bool ok, const std::string& error, double seconds, const char* scheduler, int me, int size) {
    int failed = ok ? 0 : 1, count = 0, first = ok ? INT_MAX : me;
    MPI_Allreduce(&failed, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (count == 0) return false;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    char text[240] = {};
    if (me == first) std::snprintf(text, sizeof text, "%s", error.c_str());
    MPI_Bcast(text, sizeof text, MPI_CHAR, first, MPI_COMM_WORLD);
    if (me == 0)
        std::printf("# %s: the call failed on %d of %d ranks, the last returned after %.1f s; %s\n", scheduler, count,
                    size, seconds, text);
    return true;
}

// After a failed call: --mark-down-on-failure's NIC at 0 in the wire and the planner's fabric,
// and new communicators that plan around it (the failed ones are destroyed first).
struct recovery {
    const options& o;
    const std::vector<sched>& scheds;
    fast::exec::config& cfg;
    fast::fabric& wire;
    fast::fabric& planner_fabric;
    executors& ex;
    bool done = false;

    void mark_down(int me) {
        done = true;
        wire.nics[static_cast<std::size_t>(o.mark_down_on_failure / o.gpus_per_nic)].gbps = 0;
        std::vector<double> rates = fast::nic_rates(planner_fabric);
        for (int r = 0; r < wire.gpus_per_server * wire.servers; ++r)
            if (r / o.gpus_per_nic == o.mark_down_on_failure / o.gpus_per_nic) rates[static_cast<std::size_t>(r)] = 0;
        planner_fabric = fast::fabric_of_rates(fast::planning_topology(planner_fabric), rates);
        cfg.nic_gbps = rates;
        ex = {};
        ex = make_executors(cfg, scheds);
        if (me == 0)
            std::printf("# rank %d's NIC marked down; new communicators plan around it\n", o.mark_down_on_failure);
    }
};

// One call of `scheduler` on `b` after a barrier: this rank's time into `seconds`; false (and
// the error) where it failed.
bool timed_call(sched scheduler, rank_buffers& b, executors& ex, double& seconds, std::string& error) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = clock_type::now();
    bool ok = true;
    if (scheduler == sched::mpi) {
        if (!b.fits_int) die("the mpi scheduler needs counts and displacements below INT_MAX bytes");
        const int rc = MPI_Alltoallv(b.send.data(), b.scount_i.data(), b.sdispl_i.data(), MPI_BYTE, b.recv.data(),
                                     b.rcount_i.data(), b.rdispl_i.data(), MPI_BYTE, MPI_COMM_WORLD);
        ok = rc == MPI_SUCCESS;
        if (!ok) error = "MPI_Alltoallv failed";
    } else {
        fast::exec::communicator& comm = scheduler == sched::fast ? *ex.fast : *ex.direct;
        const fast::exec::status st =
            comm.alltoallv(b.send.data(), b.scount, b.sdispl, b.recv.data(), b.rcount, b.rdispl);
        ok = st.ok();
        if (!ok) error = st.message();
    }
    seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    return ok;
}

std::vector<result> run_case(const test_case& c, const std::vector<sched>& scheds, executors& ex, const options& o,
                             int me, recovery& recover) {
    const int r = static_cast<int>(c.m.rows());
    rank_buffers b = make_buffers(c.m, me);
    const int runs = o.warmup + o.iters;
    std::vector<double> local(static_cast<std::size_t>(runs) * scheds.size(), 0);
    std::vector<long long> wrong(scheds.size(), 0);
    std::vector<result> out(scheds.size());
    std::uint8_t key = 0;
    int counted_from = o.warmup; // after a recovery: its calls only, on the fabric as it now is
    for (int it = 0; it < runs; ++it) {
        for (std::size_t s = 0; s < scheds.size(); ++s) {
            const auto next = static_cast<std::uint8_t>(key + 0x5b); // odd step: every key differs from the last
            xor_buffer(b.send, static_cast<std::uint8_t>(key ^ next));
            key = next;
            std::string error;
            double& seconds = local[static_cast<std::size_t>(it) * scheds.size() + s];
            bool ok = timed_call(scheds[s], b, ex, seconds, error);
            if (o.mark_down_on_failure >= 0 && !recover.done &&
                failed_somewhere(ok, error, seconds, name_of(scheds[s]), me, r)) {
                recover.mark_down(me);
                counted_from = std::max(counted_from, s > 0 ? it + 1 : it); // its earlier schedulers: before
                ok = timed_call(scheds[s], b, ex, seconds, error);
            }
            if (!ok) die(std::string(name_of(scheds[s])) + ": " + error);
            std::int64_t bad = 0;
            for (int j = 0; j < r; ++j) {
                const auto k = static_cast<std::size_t>(j);
                bad +=
                    count_wrong(b.recv.data() + b.rdispl[k], b.rcount[k], static_cast<std::uint64_t>(j) * r + me, key);
            }
            wrong[s] += bad;
        }
    }
    std::vector<double> slowest(local.size(), 0);
    MPI_Reduce(local.data(), slowest.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    std::vector<long long> wrong_all(wrong.size(), 0);
    MPI_Reduce(wrong.data(), wrong_all.data(), static_cast<int>(wrong.size()), MPI_LONG_LONG, MPI_SUM, 0,
               MPI_COMM_WORLD);
    for (std::size_t s = 0; s < scheds.size(); ++s) {
        for (int it = counted_from; it < runs; ++it)
            out[s].times_s.push_back(slowest[static_cast<std::size_t>(it) * scheds.size() + s]);
        out[s].wrong = wrong_all[s];
        if (scheds[s] == sched::fast) out[s].steps = ex.fast->stats().last_plan_steps;
        if (scheds[s] == sched::direct) out[s].steps = ex.direct->stats().last_plan_steps;
    }
    return out;
}

// --- output -------------------------------------------------------------------------------------------

struct row {
    std::string workload, matrix, scheduler;
    double size_bytes = 0; ///< average bytes a GPU sends (matrix total / R)
    double time_s = 0, min_s = 0, max_s = 0;
    double tlb_s = 0, tnic_s = 0;
    double predicted_s = 0; ///< the cost model's time of the executor's plan at the planner's fabric (0: MPI)
    long long wrong = 0;
    std::size_t steps = 0;
    std::size_t samples = 0;

    [[nodiscard]] double algbw_mbps() const { return time_s > 0 ? size_bytes / time_s / 1e6 : 0; }
};

void print_header() {
    std::printf("#\n# %-28s %8s %-7s %12s %10s %10s %10s %10s %8s %8s %9s %8s %6s %7s\n", "workload", "matrix", "sched",
                "size(B)", "time(ms)", "algbw(MB/s)", "T_lb(ms)", "time/T_lb", "T_nic", "t/T_nic", "pred(ms)", "t/pred",
                "steps", "#wrong");
}

void print_row(const row& w) {
    char pred[32] = "-", ratio[32] = "-";
    if (w.predicted_s > 0) {
        std::snprintf(pred, sizeof pred, "%.1f", w.predicted_s * 1e3);
        std::snprintf(ratio, sizeof ratio, "%.2f", w.time_s / w.predicted_s);
    }
    std::printf("  %-28s %8s %-7s %12.0f %10.1f %10.3f %10.1f %10.2f %8.1f %8.2f %9s %8s %6s %7lld\n",
                w.workload.c_str(), w.matrix.c_str(), w.scheduler.c_str(), w.size_bytes, w.time_s * 1e3, w.algbw_mbps(),
                w.tlb_s * 1e3, w.tlb_s > 0 ? w.time_s / w.tlb_s : 0.0, w.tnic_s * 1e3,
                w.tnic_s > 0 ? w.time_s / w.tnic_s : 0.0, pred, ratio, w.steps ? std::to_string(w.steps).c_str() : "-",
                w.wrong);
    std::fflush(stdout);
}

void csv_row(std::FILE* f, const row& w) {
    std::fprintf(f, "%s,%s,%s,%.0f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.4f,%zu,%lld,%zu,%.6f,%.4f\n",
                 w.workload.c_str(), w.matrix.c_str(), w.scheduler.c_str(), w.size_bytes, w.time_s * 1e3, w.min_s * 1e3,
                 w.max_s * 1e3, w.algbw_mbps(), w.tlb_s * 1e3, w.tlb_s > 0 ? w.time_s / w.tlb_s : 0.0, w.tnic_s * 1e3,
                 w.tnic_s > 0 ? w.time_s / w.tnic_s : 0.0, w.steps, w.wrong, w.samples, w.predicted_s * 1e3,
                 w.predicted_s > 0 ? w.time_s / w.predicted_s : 0.0);
}

// The cost model's time of the plan the executor runs for `m` with `scheduler` (seconds).
// Infinite where the scheduler cannot run on the fabric (direct through a NIC that is down).
double predicted_s(const fast::traffic_matrix& m, const fast::fabric& f, sched scheduler) {
    fast::plan_options po;
    po.scheduler = scheduler == sched::fast ? fast::scheduler::fast : fast::scheduler::direct;
    fast::planner p(f, po);
    try {
        return fast::predict_us(p.make(m)) * 1e-6;
    } catch (const fast::invalid_argument&) {
        return HUGE_VAL;
    }
}

// A workload with several matrices also gets one summary row per scheduler: the median over its
// matrices of the per-matrix medians (time, size, bounds and ratios alike).
row summarise(const std::vector<row>& rows, const std::string& workload, const std::string& scheduler) {
    std::vector<double> time, size, tlb, tnic, predicted, ratio, ratio_nic, bw;
    row s;
    s.workload = workload;
    s.scheduler = scheduler;
    for (const row& w : rows) {
        if (w.workload != workload || w.scheduler != scheduler) continue;
        time.push_back(w.time_s);
        size.push_back(w.size_bytes);
        tlb.push_back(w.tlb_s);
        tnic.push_back(w.tnic_s);
        predicted.push_back(w.predicted_s);
        s.wrong += w.wrong;
        s.steps = std::max(s.steps, w.steps);
        s.samples += w.samples;
    }
    s.matrix = "med/" + std::to_string(time.size());
    s.time_s = fast_tools::median(time);
    s.size_bytes = fast_tools::median(size);
    s.tlb_s = fast_tools::median(tlb);
    s.tnic_s = fast_tools::median(tnic);
    s.predicted_s = fast_tools::median(predicted);
    s.min_s = time.empty() ? 0 : *std::min_element(time.begin(), time.end());
    s.max_s = time.empty() ? 0 : *std::max_element(time.begin(), time.end());
    return s;
}

std::vector<sched> parse_schedulers(const std::string& text) {
    std::vector<sched> out;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        const std::string name = text.substr(at, comma - at);
        if (name == "fast") out.push_back(sched::fast);
        else if (name == "direct") out.push_back(sched::direct);
        else if (name == "mpi") out.push_back(sched::mpi);
        else throw fast::invalid_argument("unknown scheduler '" + name + "' (expected fast, direct or mpi)");
        at = comma + 1;
    }
    return out;
}

int run(const options& o, int me, int size) {
    const int g = o.gpus_per_server > 0 ? o.gpus_per_server : size;
    if (size % g != 0)
        throw fast::invalid_argument("-g " + std::to_string(g) + " does not divide the " + std::to_string(size) +
                                     " ranks");
    if (!(o.nic_gbit > 0 && std::isfinite(o.nic_gbit))) throw fast::invalid_argument("--nic-gbit must be positive");
    if (o.every < 1) throw fast::invalid_argument("--every must be at least 1");
    const std::vector<sched> scheds = parse_schedulers(o.schedulers);
    const double nic_bytes_per_s = o.nic_gbit * 1e9 / 8;

    double up = 0;
    if (o.scale_up_gbps) up = *o.scale_up_gbps;
    else if (o.fabric.empty()) {
        const double mine = measured_scale_up_gbps(MPI_COMM_WORLD);
        up = mine;
        MPI_Bcast(&up, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); // one value: every rank must plan alike
    }
    fast::topology wire_topo{size / g, g, up > 0 ? up : 1, nic_bytes_per_s / 1e9, o.alpha_up_us, o.alpha_out_us};
    fast::validate(wire_topo);
    fast::fabric wire = wire_of(o, wire_topo);
    fast::fabric fabric = planner_fabric_of(o, wire);
    if (o.mark_down_on_failure >= size)
        throw fast::invalid_argument("--mark-down-on-failure " + std::to_string(o.mark_down_on_failure) +
                                     " is not one of the " + std::to_string(size) + " ranks");
    const fast::topology topo = fast::planning_topology(fabric);
    const std::vector<test_case> cases = share_cases(o, topo, me);

    fast::exec::config cfg;
    cfg.gpus_per_server = g;
    cfg.scale_up_gbps = topo.scale_up_gbps;
    cfg.scale_out_gbps = topo.scale_out_gbps;
    cfg.alpha_up_us = topo.alpha_up_us;
    cfg.alpha_out_us = topo.alpha_out_us;
    if (fast::has_uneven_rates(fabric)) cfg.nic_gbps = fast::nic_rates(fabric);
    cfg.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1e3));
    cfg.flow = o.flow == "credits" ? fast::exec::flow_control::credits : fast::exec::flow_control::rendezvous;
    executors ex = make_executors(cfg, scheds);
    recovery recover{o, scheds, cfg, wire, fabric, ex};

    std::FILE* csv = nullptr;
    if (me == 0) {
        std::printf("# alltoallv_perf: %d ranks = %d servers x %d GPUs, NIC %.4g Gbit/s, warm-up %d, iterations %d\n"
                    "# planner fabric: scale-up %.3g GB/s%s, scale-out %.6g GB/s, alpha_up %g us, alpha_out %g us; "
                    "executor flow control: %s\n"
                    "# time: median of the slowest rank's time per call; algbw = size / time; size = bytes per GPU;\n"
                    "# pred: the cost model's time of the executor's plan at the planner's fabric (t/pred: measured / "
                    "predicted)\n",
                    size, topo.servers, g, o.nic_gbit, o.warmup, o.iters, topo.scale_up_gbps,
                    !o.fabric.empty()   ? (" from " + o.fabric).c_str()
                    : o.scale_up_gbps ? ""
                                      : " (measured memcpy share)",
                    topo.scale_out_gbps, topo.alpha_up_us, topo.alpha_out_us, o.flow.c_str());
        print_header();
        if (!o.csv.empty()) {
            csv = std::fopen(o.csv.c_str(), "w");
            if (!csv) die("cannot write --csv file '" + o.csv + "'");
            std::fprintf(csv,
                         "workload,matrix,scheduler,size_bytes,time_ms,min_ms,max_ms,algbw_MBps,tlb_ms,time_over_tlb,"
                         "tnic_ms,time_over_tnic,steps,wrong,samples,predicted_ms,time_over_predicted\n");
        }
    }

    std::vector<row> rows;
    long long total_wrong = 0;
    for (const test_case& c : cases) {
        const std::vector<result> res = run_case(c, scheds, ex, o, me, recover);
        if (me != 0) continue;
        const bounds bd = bounds_of(c.m, wire);
        for (std::size_t s = 0; s < scheds.size(); ++s) {
            row w;
            w.workload = c.workload;
            w.matrix = c.matrix;
            w.scheduler = name_of(scheds[s]);
            w.size_bytes = static_cast<double>(fast::total_bytes(c.m)) / size;
            w.time_s = fast_tools::median(res[s].times_s);
            w.min_s = *std::min_element(res[s].times_s.begin(), res[s].times_s.end());
            w.max_s = *std::max_element(res[s].times_s.begin(), res[s].times_s.end());
            w.tlb_s = bd.tlb_s;
            w.tnic_s = bd.tnic_s;
            if (scheds[s] != sched::mpi) w.predicted_s = predicted_s(c.m, fabric, scheds[s]);
            w.wrong = res[s].wrong;
            w.steps = res[s].steps;
            w.samples = res[s].times_s.size();
            total_wrong += w.wrong;
            rows.push_back(w);
            if (!o.summary_only) print_row(w);
            if (csv) csv_row(csv, w);
        }
    }
    if (me == 0) {
        std::vector<std::string> seen;
        for (const test_case& c : cases) {
            if (std::find(seen.begin(), seen.end(), c.workload) != seen.end()) continue;
            seen.push_back(c.workload);
            const auto n =
                std::count_if(cases.begin(), cases.end(), [&](const test_case& x) { return x.workload == c.workload; });
            if (c.matrix == "-" || n < 2) continue;
            for (const sched s : scheds) {
                const row w = summarise(rows, c.workload, name_of(s));
                print_row(w);
                if (csv) csv_row(csv, w);
            }
        }
        std::printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
        if (csv && std::fclose(csv) != 0) die("cannot write --csv file '" + o.csv + "'");
    }
    long long all_wrong = total_wrong;
    MPI_Bcast(&all_wrong, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    // Communicators are destroyed collectively, before MPI_Finalize (in main).
    return all_wrong == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int me = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    options o;
    CLI::App app{"alltoallv_perf: All-to-All(v) timings of the FAST executor (fast, direct) against MPI_Alltoallv,\n"
                 "in the style of nccl-tests. Run under mpirun; every received byte is checked."};
    app.add_option("-g,--gpus-per-server", o.gpus_per_server,
                   "ranks per (emulated) server; 0: all ranks form one server")
        ->check(fast_tools::non_negative)
        ->capture_default_str();
    app.add_option("-W,--workload", o.workloads,
                   "repeatable: uniform | zipf[:S] | moe[:tokens=N,topk=K,zipf=S|lognormal=SIGMA,token_bytes=B] (sized "
                   "by -b/-e/-f) | "
                   "file:PATH (every --every-th matrix) | file:PATH@I (matrix I); entries times --unit")
        ->capture_default_str();
    app.add_option("-b,--minbytes", o.min_bytes, "generators: bytes each GPU sends on average (suffixes K, M, G, T)")
        ->capture_default_str();
    app.add_option("-e,--maxbytes", o.max_bytes, "generators: largest size of the sweep (default: --minbytes)");
    app.add_option("-f,--stepfactor", o.step_factor, "generators: size multiplier between sweep points")
        ->capture_default_str();
    app.add_option("-u,--unit", o.unit, "bytes per matrix file entry, e.g. bytes per token (suffixes K, M, G, T)")
        ->capture_default_str();
    app.add_option("--every", o.every, "file:PATH: take matrices 0, K, 2K, ...")
        ->check(fast_tools::non_negative)
        ->capture_default_str();
    app.add_option("--max-matrices", o.max_matrices, "file:PATH: at most this many matrices (0: no limit)")
        ->check(fast_tools::non_negative)
        ->capture_default_str();
    app.add_option("-s,--schedulers", o.schedulers,
                   "comma-separated, run interleaved: fast, direct (the executor), mpi (MPI_Alltoallv)")
        ->capture_default_str();
    app.add_option("-w,--warmup", o.warmup, "untimed calls per scheduler and matrix")
        ->capture_default_str()
        ->check(CLI::Range(0, 1000000));
    app.add_option("-n,--iters", o.iters, "timed calls per scheduler and matrix")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    app.add_option("--seed", o.seed, "seed of the generators")->check(fast_tools::non_negative)->capture_default_str();
    app.add_option("--nic-gbit", o.nic_gbit, "per-GPU NIC rate in Gbit/s: T_lb and the planner's scale-out bandwidth")
        ->capture_default_str();
    app.add_option("--nic-rate", o.nic_rates,
                   "RANK=GBIT: that rank's NIC at its own rate in Gbit/s (0: down), told to the executor's planner "
                   "(config.nic_gbps) and used in T_lb, T_nic and pred; repeatable");
    app.add_option("--gpus-per-nic", o.gpus_per_nic,
                   "ranks sharing each NIC (consecutive ranks of a server), for T_lb, T_nic and the planner")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--fabric", o.fabric,
                   "plan and predict (pred) with this fast-fabric/1 file's figures (fast-probe's, say) instead of "
                   "the options'; T_lb and T_nic stay the wire's (--nic-gbit, --nic-rate, --gpus-per-nic)")
        ->type_name("FILE");
    app.add_option("--mark-down-on-failure", o.mark_down_on_failure,
                   "RANK: when a call fails (a NIC failed), mark RANK's NIC down, as a health check that found it "
                   "would, and repeat the call on new communicators that plan around it (once)")
        ->check(fast_tools::non_negative);
    app.add_option("--scale-up-gbps", o.scale_up_gbps,
                   "planner's scale-up bandwidth per GPU in GB/s (default: memcpy rate x cores / ranks on this host)");
    app.add_option("--alpha-up-us", o.alpha_up_us, "planner's per-step scale-up latency, us")->capture_default_str();
    app.add_option("--alpha-out-us", o.alpha_out_us, "planner's per-step scale-out latency, us")->capture_default_str();
    app.add_option("--flow", o.flow,
                   "the executor's flow control: rendezvous (UCX's protocols) or credits (docs/executor.md)")
        ->check(CLI::IsMember({"rendezvous", "credits"}))
        ->capture_default_str();
    app.add_option("--timeout", o.timeout_s, "executor: bound of every wait, seconds")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 1e6));
    app.add_option("--csv", o.csv, "also write one line per row to FILE (rank 0)");
    app.add_flag("--summary-only", o.summary_only,
                 "print only the summary rows of multi-matrix workloads (CSV keeps all)");
    return fast_tools::run_mpi_tool("alltoallv_perf", app, argc, argv, me, [&] { return run(o, me, size); });
}
