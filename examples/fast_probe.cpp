// fast-probe: measures a cluster's fabric through the executor and writes its fast-fabric/1
// file, for fast-plan --fabric, FAST_FABRIC (the executor, libfast_mpi, fast_torch) and
// alltoallv_perf --fabric.
//
//   mpirun -np 8 fast-probe -g 4 -o cluster.json
//
// Every figure is the calls' own: the executor's direct scheduler on its own transport, one
// transfer per pair, the median of -n calls after --warmup untimed ones, each call started
// after a barrier and every received byte checked (docs/fabrics.md#measuring-a-fabric).

#include <mpi.h>

#include <CLI/CLI.hpp>

#include <fast/exec/mpi.hpp>
#include <fast/fabric_json.hpp>

#include "../benchmarks/perf_pattern.hpp"
#include "cluster_options.hpp"
#include "mpi_tool.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct options {
    int gpus_per_server = 0;
    std::string bytes = "4M";
    std::string up_bytes = "16M";
    std::string small_bytes = "64";
    int warmup = 1;
    int iters = 5;
    double tolerance = 0.1;
    std::string flow = "rendezvous";
    double timeout_s = 120;
    std::string output;
};

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "fast-probe: error: %s\n", what.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::exit(2); // not reached
}

// printf into a string, for the progress lines.
template <class... Args>
std::string printed(const char* format, Args... args) {
    char text[256];
    std::snprintf(text, sizeof text, format, args...);
    return text;
}

// Rank 0 says what it is doing, on stderr (the fabric may go to stdout).
void progress(int me, const std::string& what) {
    if (me == 0) std::fprintf(stderr, "fast-probe: %s\n", what.c_str());
}

/// One rank's buffers for a call: counts and displacements in bytes, its send data filled with
/// the harness pattern (block src * R + dst).
struct exchange {
    std::vector<std::size_t> scount, sdispl, rcount, rdispl;
    std::vector<std::uint8_t> send, recv;
};

// `me` sends `bytes` to every rank in `to` and receives as much from every rank in `from`.
exchange make_exchange(int ranks, int me, const std::vector<int>& to, const std::vector<int>& from,
                       std::size_t bytes) {
    exchange x;
    const auto n = static_cast<std::size_t>(ranks);
    x.scount.assign(n, 0);
    x.rcount.assign(n, 0);
    for (const int d : to) x.scount[static_cast<std::size_t>(d)] = bytes;
    for (const int s : from) x.rcount[static_cast<std::size_t>(s)] = bytes;
    std::size_t sent = 0, received = 0;
    for (std::size_t j = 0; j < n; ++j) {
        x.sdispl.push_back(sent);
        x.rdispl.push_back(received);
        sent += x.scount[j];
        received += x.rcount[j];
    }
    x.send.resize(sent);
    x.recv.resize(received);
    for (const int d : to)
        fast_perf::fill_block(x.send.data() + x.sdispl[static_cast<std::size_t>(d)], bytes,
                              static_cast<std::uint64_t>(me) * n + static_cast<std::uint64_t>(d));
    return x;
}

std::int64_t wrong_bytes(const exchange& x, int me) {
    const auto n = x.rcount.size();
    std::int64_t wrong = 0;
    for (std::size_t s = 0; s < n; ++s)
        if (x.rcount[s] > 0)
            wrong += fast_perf::count_wrong(x.recv.data() + x.rdispl[s], x.rcount[s],
                                            s * n + static_cast<std::uint64_t>(me), 0);
    return wrong;
}

/// This rank's time (seconds) of each of o.iters calls of `x`, after o.warmup untimed ones.
std::vector<double> time_calls(fast::exec::communicator& comm, exchange& x, const options& o, int me) {
    std::vector<double> times;
    for (int k = 0; k < o.warmup + o.iters; ++k) {
        std::fill(x.recv.begin(), x.recv.end(), std::uint8_t{0});
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        const fast::exec::status st =
            comm.alltoallv(x.send.data(), x.scount, x.sdispl, x.recv.data(), x.rcount, x.rdispl);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!st.ok()) die("rank " + std::to_string(me) + ": " + st.message());
        if (const std::int64_t w = wrong_bytes(x, me); w != 0)
            die("rank " + std::to_string(me) + " received " + std::to_string(w) + " wrong bytes");
        if (k >= o.warmup) times.push_back(s);
    }
    return times;
}

/// The median over calls of the slowest rank's time: what one step of this pattern costs.
double slowest_median(std::vector<double> times) {
    MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return fast_tools::median(times);
}

/// Rank (s + ds, g + dg), both modulo the cluster's shape.
int shifted(int rank, int ds, int dg, int servers, int g) {
    const int s = rank / g, l = rank % g;
    return ((s + ds) % servers + servers) % servers * g + ((l + dg) % g + g) % g;
}

struct shape {
    int servers = 0, g = 0, me = 0;
    [[nodiscard]] int ranks() const { return servers * g; }
};

// One pair across servers (every rank to the next server's GPU dg further on): a call's bytes
// per NIC each way, all NICs at once.
exchange cross_servers(const shape& c, int dg, std::size_t bytes) {
    return make_exchange(c.ranks(), c.me, {shifted(c.me, 1, dg, c.servers, c.g)},
                         {shifted(c.me, -1, -dg, c.servers, c.g)}, bytes);
}

// Every rank to each of its server peers, `bytes` in all.
exchange within_server(const shape& c, std::size_t bytes) {
    std::vector<int> peers;
    for (int dg = 1; dg < c.g; ++dg) peers.push_back(shifted(c.me, 0, dg, c.servers, c.g));
    const std::size_t each = std::max<std::size_t>(1, bytes / peers.size());
    return make_exchange(c.ranks(), c.me, peers, peers, each);
}

/// The rate in GB/s between a call of `small` bytes taking `small_s` seconds and one of `large`
/// taking `large_s`: the slope, free of the latency and of whatever a link lets through at once
/// (a token bucket's burst); 0 where the larger call was no slower (noise swamped the sizes).
double slope_gbps(double small, double small_s, double large, double large_s) {
    const double us = (large_s - small_s) * 1e6;
    return us > 0 ? (large - small) / us / 1e3 : 0.0;
}

// Dies naming the option to raise where a figure could not be measured.
void check_measured(double gbps, std::size_t bytes, const char* what, const char* option) {
    if (!(gbps > 0))
        die(std::string(what) + ": calls of " + fast_tools::human_bytes(static_cast<double>(bytes)) +
            " were no slower than smaller ones: raise " + option);
}

// Each rank's scale-out rate in GB/s, on rank 0 (empty elsewhere): over G rounds, the best of the
// rank's slopes between median calls of --bytes / 4 and --bytes. A round's time is bounded by the
// rank's NIC and its two partners'; some round pairs it with NICs no slower than its own unless
// all G of them are.
std::vector<double> nic_rates(fast::exec::communicator& comm, const shape& c, const options& o) {
    const auto bytes = static_cast<std::size_t>(fast_tools::parse_bytes(o.bytes, "--bytes"));
    const std::size_t quarter = std::max<std::size_t>(1, bytes / 4);
    double best = 0;
    for (int dg = 0; dg < c.g; ++dg) {
        exchange small = cross_servers(c, dg, quarter), large = cross_servers(c, dg, bytes);
        const double small_s = fast_tools::median(time_calls(comm, small, o, c.me));
        const double large_s = fast_tools::median(time_calls(comm, large, o, c.me));
        best = std::max(best, slope_gbps(static_cast<double>(quarter), small_s, static_cast<double>(bytes), large_s));
        progress(c.me, "scale-out round " + std::to_string(dg + 1) + " of " + std::to_string(c.g) + " done");
    }
    std::vector<double> all(c.me == 0 ? static_cast<std::size_t>(c.ranks()) : 0);
    MPI_Gather(&best, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (std::size_t r = 0; r < all.size(); ++r)
        check_measured(all[r], bytes, ("rank " + std::to_string(r) + "'s NIC").c_str(), "--bytes");
    return all;
}

double four_digits(double v) {
    return std::stod(printed("%.4g", v));
}

// Rates within `tolerance` of the median become the median, so that measurement noise leaves a
// uniform cluster uniform (the planner packs rails only at one rate).
std::vector<double> settle_rates(std::vector<double> rates, double tolerance) {
    const double usual = fast_tools::median(rates);
    for (double& r : rates) r = four_digits(std::abs(r - usual) <= tolerance * usual ? usual : r);
    return rates;
}

// The usual rate, and every rank whose NIC is not at it.
void report_rates(const std::vector<double>& measured, const std::vector<double>& rates, double tolerance) {
    const double usual = four_digits(fast_tools::median(measured));
    const auto n = std::count(rates.begin(), rates.end(), usual);
    progress(0, printed("NICs: %zd of %zu within %g%% of the median, %.4g GB/s (measured %.4g - %.4g)", n,
                        rates.size(), tolerance * 100, usual, *std::min_element(measured.begin(), measured.end()),
                        *std::max_element(measured.begin(), measured.end())));
    for (std::size_t r = 0; r < rates.size(); ++r)
        if (rates[r] != usual) progress(0, printed("rank %zu: NIC %.4g GB/s", r, rates[r]));
}

fast::exec::config probe_config(const options& o) {
    fast::exec::config cfg;
    cfg.gpus_per_server = o.gpus_per_server;
    cfg.scheduler = fast::exec::scheduler::direct;
    cfg.flow = o.flow == "credits" ? fast::exec::flow_control::credits : fast::exec::flow_control::rendezvous;
    cfg.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1e3));
    return cfg;
}

fast::fabric probe(const options& o, fast::exec::communicator& comm) {
    const shape c{comm.servers(), comm.gpus_per_server(), comm.rank()};
    if (c.servers < 2)
        throw fast::invalid_argument("one server of " + std::to_string(c.g) + " GPUs: no NIC to measure (see -g)");
    progress(c.me, printed("%d ranks = %d servers x %d GPUs, %s, %d calls per figure", c.ranks(), c.servers, c.g,
                           o.flow.c_str(), o.iters));
    const auto small = static_cast<std::size_t>(fast_tools::parse_bytes(o.small_bytes, "--small-bytes"));
    exchange out_small = cross_servers(c, 0, small);
    const double alpha_out_us = slowest_median(time_calls(comm, out_small, o, c.me)) * 1e6;
    progress(c.me, printed("alpha_out %.4g us (a call of %zu bytes to the next server)", alpha_out_us, small));
    fast::fabric f{c.servers, c.g, fast::exec::config{}.scale_up_gbps, fast::exec::config{}.alpha_up_us, alpha_out_us, {}};
    if (c.g > 1) {
        exchange up_small = within_server(c, small * static_cast<std::size_t>(c.g - 1));
        const double up_small_s = slowest_median(time_calls(comm, up_small, o, c.me));
        f.alpha_up_us = up_small_s * 1e6;
        const auto up_bytes = static_cast<std::size_t>(fast_tools::parse_bytes(o.up_bytes, "--up-bytes"));
        exchange up = within_server(c, up_bytes);
        f.scale_up_gbps = slope_gbps(static_cast<double>(up_small.send.size()), up_small_s,
                                     static_cast<double>(up.send.size()), slowest_median(time_calls(comm, up, o, c.me)));
        check_measured(f.scale_up_gbps, up.send.size(), "scale-up", "--up-bytes"); // alike on every rank
        progress(c.me, printed("alpha_up %.4g us, scale-up %.4g GB/s per GPU", f.alpha_up_us,
                                          f.scale_up_gbps));
    } else {
        progress(c.me, "one GPU per server: no scale-up to measure, the executor's defaults written");
    }
    const std::vector<double> measured = nic_rates(comm, c, o);
    if (c.me != 0) return f;
    const std::vector<double> rates = settle_rates(measured, o.tolerance);
    report_rates(measured, rates, o.tolerance);
    f.scale_up_gbps = four_digits(f.scale_up_gbps);
    f.alpha_up_us = four_digits(f.alpha_up_us);
    f.alpha_out_us = four_digits(f.alpha_out_us);
    const fast::topology t{c.servers, c.g, f.scale_up_gbps, rates.front(), f.alpha_up_us, f.alpha_out_us};
    f.nics = fast::fabric_of_rates(t, rates).nics;
    fast::validate(f);
    return f;
}

void check(const options& o) {
    if (o.flow != "credits" && o.flow != "rendezvous")
        throw fast::invalid_argument("--flow must be credits or rendezvous, got '" + o.flow + "'");
    for (const auto& [text, option] :
         {std::pair{o.bytes, "--bytes"}, std::pair{o.up_bytes, "--up-bytes"}, std::pair{o.small_bytes, "--small-bytes"}})
        if (fast_tools::parse_bytes(text, option) < 1) throw fast::invalid_argument(std::string(option) + " must be at least 1");
}

int run(const options& o, int me) {
    check(o);
    std::ofstream file = me == 0 ? fast_tools::open_output(o.output) : std::ofstream{};
    unsetenv("FAST_FABRIC"); // measure the fabric as it is, not as an earlier file says
    fast::exec::communicator comm;
    if (const fast::exec::status st = fast::exec::create(MPI_COMM_WORLD, probe_config(o), comm); !st.ok()) {
        if (st.code() == fast::exec::errc::invalid_argument) throw fast::invalid_argument(st.message());
        die("rank " + std::to_string(me) + ": creating the communicator: " + st.message());
    }
    const fast::fabric f = probe(o, comm);
    if (me != 0) return 0;
    fast::write_fabric_json(o.output.empty() ? std::cout : file, f);
    if (!o.output.empty() && !(file << std::flush)) throw fast::invalid_argument("cannot write '" + o.output + "'");
    if (!o.output.empty()) progress(me, "wrote " + o.output);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    options o;
    CLI::App app{"fast-probe: measures the fabric through the fast executor (each NIC's rate, the scale-up rate,\n"
                 "the per-step latencies) and writes its fast-fabric/1 file. Run under mpirun, one rank per GPU."};
    app.footer("Example: mpirun -np 8 fast-probe -g 4 -o cluster.json, then FAST_FABRIC=cluster.json for the executor,\n"
               "libfast_mpi and fast_torch, or fast-plan --fabric cluster.json (docs/fabrics.md#measuring-a-fabric).\n"
               "Exit status: 0 written; 2 bad options, or a figure the calls could not measure (raise --bytes).");
    app.add_option("-g,--gpus-per-server", o.gpus_per_server, "ranks per server: 0 (the default): the ranks of each host form a server")
        ->check(fast_tools::non_negative);
    app.add_option("-o,--output", o.output, "write the fabric file here (default: stdout)");
    app.add_option("-b,--bytes", o.bytes, "bytes each NIC carries each way in the larger scale-out call (the smaller: a quarter; suffixes K, M, G)")
        ->capture_default_str();
    app.add_option("--up-bytes", o.up_bytes, "bytes each GPU sends its server peers per scale-up call")
        ->capture_default_str();
    app.add_option("--small-bytes", o.small_bytes, "bytes per pair of the latency calls")->capture_default_str();
    app.add_option("-w,--warmup", o.warmup, "untimed calls before each figure")
        ->check(fast_tools::non_negative)
        ->capture_default_str();
    app.add_option("-n,--iters", o.iters, "timed calls per figure (their median)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--tolerance", o.tolerance, "NIC rates within this fraction of the median are written as it")
        ->check(fast_tools::in_interval(0, 1))
        ->capture_default_str();
    app.add_option("--flow", o.flow, "executor flow control: rendezvous or credits (as the calls to be planned)")
        ->capture_default_str();
    app.add_option("--timeout", o.timeout_s, "executor: bound of every wait, seconds")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    return fast_tools::run_mpi_tool("fast-probe", app, argc, argv, me, [&] { return run(o, me); });
}
