// alltoallv_device_perf: the executor's speed on one machine, on device (CUDA) or host memory,
// without MPI (a GPU machine may have only its driver). Ranks run as processes (UCX may then
// use CUDA IPC between them) or as threads of one process, meeting in shared memory
// (perf_arena.hpp). Buffers are allocated once; the pattern is written and checked where the
// memory is (kernels on the device, perf_memory.hpp), outside the clock, like set-up and
// warm-up. Per call: a barrier, then each rank times its own alltoallv; a row shows the median
// over calls of the slowest rank's time. Every plan is made here too and verified, its
// message bytes (bytes through UCX) and steps reported. With --peaks, in the same run: the copy
// peak (one cudaMemcpyAsync device to device of the whole matrix's bytes, or memcpy) and the
// plain UCX peak of two processes exchanging tagged messages of the block size both ways
// (ucx_pair.hpp), with the protocol UCX chose per size and memory type.
//
//   alltoallv_device_perf --memory cuda --ranks 8 -g 4 -b 256K -b 4M --modes processes,threads --peaks --csv out.csv

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <fast/exec/exec.hpp>
#include <fast/layout.hpp>
#include <fast/planner.hpp>
#include <fast/topology.hpp>
#include <fast/traffic.hpp>
#include <fast/verify.hpp>
#include <fast/workload.hpp>

#include <ucp/api/ucp.h>

#include "../examples/cluster_options.hpp" // fast_tools::parse_bytes
#include "perf_arena.hpp"
#include "perf_memory.hpp"
#include "ucx_pair.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace fast_perf;

struct options {
    std::string memory = "host";
    int ranks = 8;
    int gpus_per_server = 4;
    std::vector<std::string> workloads{"uniform"};
    std::vector<std::string> blocks{"256K"};
    std::vector<std::string> schedulers{"fast", "direct"};
    std::vector<std::string> flows{"rendezvous", "credits"};
    std::vector<std::string> modes{"processes"};
    int warmup = 2;
    int iters = 10;
    bool peaks = false;
    int device = 0;
    double timeout_s = 60;
    double limit_s = 600;
    std::uint64_t seed = 1;
    std::string csv;
    std::string label;
    // A child process (internal).
    std::string role;
    int rank = -1;
    std::string arena;
};

/// One traffic matrix: a workload at a mean block size.
struct test_case {
    std::string workload;
    std::int64_t block = 0; ///< mean bytes a rank sends to each rank
    fast::traffic_matrix m;
};

/// One communicator configuration.
struct setup {
    fast::exec::scheduler scheduler;
    fast::exec::flow_control flow;
};

std::vector<test_case> make_cases(const options& o) {
    const fast::topology topo = fast::make_topology(o.ranks / o.gpus_per_server, o.gpus_per_server);
    std::vector<test_case> out;
    for (const std::string& w : o.workloads)
        for (const std::string& b : o.blocks) {
            const std::int64_t block = fast_tools::parse_bytes(b, "--block");
            if (block < 1) throw fast::invalid_argument("--block must be at least 1 byte, got " + b);
            const fast::workload_spec spec = fast::parse_workload(w);
            if (spec.kind == fast::workload_kind::file)
                throw fast::invalid_argument("-W " + w + ": use a generator (uniform, zipf, moe)");
            out.push_back({w, block, fast::make_workload(spec, topo, block * o.ranks, o.seed)});
        }
    return out;
}

std::vector<setup> make_setups(const options& o) {
    std::vector<setup> out;
    for (const std::string& s : o.schedulers)
        for (const std::string& f : o.flows)
            out.push_back({s == "fast" ? fast::exec::scheduler::fast : fast::exec::scheduler::direct,
                           f == "credits" ? fast::exec::flow_control::credits : fast::exec::flow_control::rendezvous});
    return out;
}

std::chrono::milliseconds timeout_of(const options& o) {
    return std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1e3));
}

std::unique_ptr<perf_memory> make_memory(const options& o, std::string& error) {
    if (o.memory == "cuda") return make_cuda_memory(o.device, error);
    return make_host_memory();
}

// --- one rank ----------------------------------------------------------------------------------

/// Rank `me`'s buffers' blocks for matrix `m` in the packed layout.
void tables_of(const fast::traffic_matrix& m, int me, block_table& send, block_table& recv) {
    const fast::alltoallv_layout l = fast::make_packed_layout(m);
    const int r = static_cast<int>(m.rows());
    send = {};
    recv = {};
    for (int j = 0; j < r; ++j) {
        send.displs.push_back(static_cast<std::uint64_t>(l.send_displ(me, j)));
        send.counts.push_back(static_cast<std::uint64_t>(m(me, j)));
        send.ids.push_back(static_cast<std::uint64_t>(me) * static_cast<std::uint64_t>(r) +
                           static_cast<std::uint64_t>(j));
        recv.displs.push_back(static_cast<std::uint64_t>(l.recv_displ(j, me)));
        recv.counts.push_back(static_cast<std::uint64_t>(m(j, me)));
        recv.ids.push_back(static_cast<std::uint64_t>(j) * static_cast<std::uint64_t>(r) +
                           static_cast<std::uint64_t>(me));
    }
}

/// Where a rank's results lie in its row of the arena.
struct value_index {
    std::size_t cases, setups, runs;
    [[nodiscard]] std::size_t time(std::size_t c, std::size_t s, std::size_t run) const {
        return (c * setups + s) * runs + run;
    }
    [[nodiscard]] std::size_t wrong(std::size_t c, std::size_t s) const {
        return cases * setups * runs + c * setups + s;
    }
    [[nodiscard]] std::size_t steps(std::size_t c, std::size_t s) const {
        return cases * setups * (runs + 1) + c * setups + s;
    }
    [[nodiscard]] std::size_t count() const { return cases * setups * (runs + 2); }
};

std::vector<std::unique_ptr<fast::exec::communicator>> make_communicators(const options& o, perf_arena& arena, int me,
                                                                          std::string& error) {
    std::vector<std::unique_ptr<fast::exec::communicator>> out;
    for (const setup& s : make_setups(o)) {
        fast::exec::config cfg;
        cfg.gpus_per_server = o.gpus_per_server;
        cfg.scheduler = s.scheduler;
        cfg.flow = s.flow;
        cfg.memory = o.memory == "cuda" ? fast::exec::memory::cuda : fast::exec::memory::host;
        cfg.timeout = timeout_of(o);
        auto comm = std::make_unique<fast::exec::communicator>();
        if (const fast::exec::status st = fast::exec::create(arena.bootstrap(me, timeout_of(o)), cfg, *comm);
            !st.ok()) {
            error = "creating the " + std::string(to_string(s.scheduler)) + "/" + std::string(to_string(s.flow)) +
                    " communicator: " + st.message();
            return {};
        }
        out.push_back(std::move(comm));
    }
    return out;
}

/// One timed call (barrier first) and its check; "" or what failed.
std::string timed_call(perf_arena& arena, int me, const options& o, fast::exec::communicator& comm, perf_memory& mem,
                       void* send, void* recv, const block_table& st, const block_table& rt, std::uint8_t key,
                       double& seconds, double& wrong) {
    if (std::string e = mem.fill(send, st, key); !e.empty()) return e;
    std::string error;
    if (!arena.barrier(me, timeout_of(o), error)) return error;
    const auto t0 = clock_type::now();
    const fast::exec::status s = comm.alltoallv(send, st.counts, st.displs, recv, rt.counts, rt.displs);
    seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (!s.ok()) return s.message();
    std::uint64_t bad = 0;
    if (std::string e = mem.check(recv, rt, key, bad); !e.empty()) return e;
    wrong += static_cast<double>(bad);
    return {};
}

std::string rank_calls(const options& o, const std::vector<test_case>& cases, perf_arena& arena, int me,
                       perf_memory& mem, std::vector<std::unique_ptr<fast::exec::communicator>>& comms, void* send,
                       void* recv) {
    const std::size_t runs = static_cast<std::size_t>(o.warmup + o.iters);
    const value_index at{cases.size(), comms.size(), runs};
    double* values = arena.values(me);
    std::uint8_t key = 0;
    for (std::size_t c = 0; c < cases.size(); ++c) {
        block_table st, rt;
        tables_of(cases[c].m, me, st, rt);
        for (std::size_t run = 0; run < runs; ++run) // every setup's call k before any's call k + 1
            for (std::size_t s = 0; s < comms.size(); ++s) {
                key = static_cast<std::uint8_t>(key + 0x5b); // odd step: every key differs from the last
                if (std::string e = timed_call(arena, me, o, *comms[s], mem, send, recv, st, rt, key,
                                               values[at.time(c, s, run)], values[at.wrong(c, s)]);
                    !e.empty())
                    return e;
                values[at.steps(c, s)] = static_cast<double>(comms[s]->stats().last_plan_steps);
            }
    }
    return {};
}

std::string rank_main(const options& o, const std::vector<test_case>& cases, perf_arena& arena, int me) {
    std::string error;
    const std::unique_ptr<perf_memory> mem = make_memory(o, error);
    if (!mem) return error;
    std::uint64_t send_bytes = 1, recv_bytes = 1;
    for (const test_case& c : cases) {
        send_bytes = std::max<std::uint64_t>(send_bytes, static_cast<std::uint64_t>(c.m.row(me).sum()));
        recv_bytes = std::max<std::uint64_t>(recv_bytes, static_cast<std::uint64_t>(c.m.col(me).sum()));
    }
    void* send = nullptr;
    void* recv = nullptr;
    if (error = mem->allocate(send, send_bytes); error.empty()) error = mem->allocate(recv, recv_bytes);
    if (error.empty()) {
        auto comms = make_communicators(o, arena, me, error);
        if (error.empty()) error = rank_calls(o, cases, arena, me, *mem, comms, send, recv);
        // Communicators are destroyed collectively, once every rank is done with its calls.
        if (std::string e; error.empty() && !arena.barrier(me, timeout_of(o), e)) error = e;
    }
    mem->release(send);
    mem->release(recv);
    return error;
}

// --- the parent ---------------------------------------------------------------------------------

/// Runs `count` copies of this program with `extra(k)` appended, bounded by --limit; a failing
/// one stops the others' barriers, and 10 s later they are killed. "" or what went wrong.
template <class Extra>
std::string run_children(const options& o, int argc, char** argv, int count, perf_arena& arena, Extra extra) {
    std::vector<pid_t> running(static_cast<std::size_t>(count), 0);
    std::string error;
    for (int k = 0; k < count && error.empty(); ++k) {
        std::vector<std::string> args(argv, argv + argc);
        for (const std::string& a : extra(k)) args.push_back(a);
        std::vector<char*> cargs;
        for (auto& a : args) cargs.push_back(a.data());
        cargs.push_back(nullptr);
        if (const int e = posix_spawn(&running[static_cast<std::size_t>(k)], "/proc/self/exe", nullptr, nullptr,
                                      cargs.data(), environ);
            e != 0) {
            running[static_cast<std::size_t>(k)] = 0;
            error = "cannot start process " + std::to_string(k) + ": " + std::strerror(e);
            arena.stop();
        }
    }
    auto stop_at = clock_type::now() + std::chrono::milliseconds(static_cast<long long>(o.limit_s * 1e3));
    bool killed = false;
    while (std::any_of(running.begin(), running.end(), [](pid_t p) { return p > 0; })) {
        int st = 0;
        if (const pid_t pid = waitpid(-1, &st, WNOHANG); pid > 0) {
            const auto k = std::find(running.begin(), running.end(), pid) - running.begin();
            if (k == static_cast<std::ptrdiff_t>(running.size())) continue;
            running[static_cast<std::size_t>(k)] = 0;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                if (error.empty()) stop_at = std::min(stop_at, clock_type::now() + std::chrono::seconds(10));
                error += (error.empty() ? "" : "; ") + std::string("process ") + std::to_string(k) +
                         (WIFEXITED(st) ? " exited " + std::to_string(WEXITSTATUS(st))
                                        : " was killed by signal " + std::to_string(WTERMSIG(st)));
                arena.stop();
            }
            continue;
        }
        if (!killed && clock_type::now() > stop_at) {
            for (const pid_t p : running)
                if (p > 0) kill(p, SIGKILL);
            killed = true;
            error += (error.empty() ? "" : "; ") +
                     std::string("the processes still running were killed (--limit or 10 s after a failure)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return error;
}

/// Every rank as a thread of this process; past --limit the process ends (threads cannot be
/// stopped), naming the ranks still busy.
std::string run_threads(const options& o, const std::vector<test_case>& cases, perf_arena& arena) {
    std::vector<std::thread> threads;
    auto done = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(o.ranks));
    for (int k = 0; k < o.ranks; ++k)
        threads.emplace_back([&, k] {
            if (std::string e = rank_main(o, cases, arena, k); !e.empty()) arena.fail(k, e);
            done[static_cast<std::size_t>(k)] = true;
        });
    const auto stop_at = clock_type::now() + std::chrono::milliseconds(static_cast<long long>(o.limit_s * 1e3));
    for (;;) {
        std::string busy;
        for (int k = 0; k < o.ranks; ++k)
            if (!done[static_cast<std::size_t>(k)]) busy.append(" ").append(std::to_string(k));
        if (busy.empty()) break;
        if (clock_type::now() > stop_at) {
            std::fprintf(stderr, "alltoallv_device_perf: the threads run took over %.0f s; ranks still busy:%s\n",
                         o.limit_s, busy.c_str());
            std::fflush(nullptr);
            std::_Exit(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& t : threads) t.join();
    return {};
}

std::string arena_path() {
    char path[] = "/dev/shm/fast-perf.XXXXXX";
    char fallback[] = "/tmp/fast-perf.XXXXXX";
    char* chosen = access("/dev/shm", W_OK) == 0 ? path : fallback;
    const int fd = mkstemp(chosen);
    if (fd < 0) return {};
    close(fd);
    unlink(chosen); // perf_arena::create makes it afresh (O_EXCL)
    return chosen;
}

/// Every rank's errors, or "".
std::string rank_errors(perf_arena& arena) {
    std::string out;
    for (int k = 0; k < arena.ranks(); ++k)
        if (std::string e = arena.error(k); !e.empty()) out += "\n  rank " + std::to_string(k) + ": " + e;
    return out;
}

// --- plans, peaks and rows ----------------------------------------------------------------------

/// What the plan of a case under a scheduler is: made and verified here as the executor makes it.
struct plan_info {
    std::size_t steps = 0;
    double ucx_bytes = 0; ///< bytes of its transfers between different ranks (UCX messages)
};

plan_info plan_of(const test_case& c, const options& o, fast::exec::scheduler s) {
    const fast::exec::config defaults; // the executor's planner fabric
    const fast::topology topo{o.ranks / o.gpus_per_server, o.gpus_per_server,    defaults.scale_up_gbps,
                              defaults.scale_out_gbps,     defaults.alpha_up_us, defaults.alpha_out_us};
    fast::plan_options po;
    po.scheduler = s == fast::exec::scheduler::direct ? fast::scheduler::direct : fast::scheduler::fast;
    const fast::plan p = fast::make_plan(c.m, topo, po);
    if (const auto v = fast::verify(p, c.m); !v.ok())
        throw std::runtime_error("the " + std::string(to_string(s)) + " plan of " + c.workload +
                                 " does not verify: " + v.message());
    // The executor counts steps as the schedule numbers them (every rank alike): a rank's program.
    fast::planner planner(topo, po);
    plan_info out{planner.make_rank(c.m, 0).steps, 0};
    for (const fast::transfer& t : p.transfers)
        if (t.src != t.dst) out.ucx_bytes += static_cast<double>(t.bytes);
    return out;
}

struct row {
    row(std::string kind_, std::string mode_, std::string workload_, std::string scheduler_ = "-",
        std::string flow_ = "-")
        : kind(std::move(kind_)), mode(std::move(mode_)), workload(std::move(workload_)),
          scheduler(std::move(scheduler_)), flow(std::move(flow_)) {}
    std::string kind, mode, workload, scheduler, flow, protocol;
    std::int64_t block = 0;
    int ranks = 0;
    double size_bytes = 0, ucx_bytes = 0, time_s = 0, min_s = 0, max_s = 0;
    double of_copy = NAN, of_ucx = NAN;
    double steps = 0, wrong = 0;
    std::size_t samples = 0;
    [[nodiscard]] double algbw() const { return time_s > 0 ? size_bytes / time_s / 1e9 : 0; }
};

/// Median, minimum and maximum of the timed samples (warm-up excluded) into `w`.
void summarise(std::vector<double> v, row& w) {
    w.samples = v.size();
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    w.time_s = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    w.min_s = v.front();
    w.max_s = v.back();
}

/// The copy peak of each case: one copy of the whole matrix's bytes, --warmup + --iters times.
std::string copy_peaks(const options& o, const std::vector<test_case>& cases, perf_memory& mem, std::vector<row>& out) {
    std::uint64_t largest = 1;
    for (const test_case& c : cases) largest = std::max<std::uint64_t>(largest, static_cast<std::uint64_t>(c.m.sum()));
    void* a = nullptr;
    void* b = nullptr;
    std::string error = mem.allocate(a, largest);
    if (error.empty()) error = mem.allocate(b, largest);
    for (const test_case& c : cases) {
        if (!error.empty()) break;
        const auto bytes = static_cast<std::size_t>(c.m.sum());
        std::vector<double> times;
        for (int run = 0; run < o.warmup + o.iters && error.empty(); ++run) {
            double seconds = 0;
            error = mem.timed_copy(b, a, bytes, seconds);
            if (run >= o.warmup) times.push_back(seconds);
        }
        row w{o.memory == "cuda" ? "d2d_copy" : "memcpy", "-", c.workload};
        w.block = c.block;
        w.ranks = 1;
        w.size_bytes = static_cast<double>(bytes) / o.ranks;
        summarise(times, w);
        out.push_back(w);
    }
    mem.release(a);
    mem.release(b);
    return error;
}

std::vector<std::uint64_t> distinct_blocks(const std::vector<test_case>& cases) {
    std::vector<std::uint64_t> out;
    for (const test_case& c : cases)
        if (std::find(out.begin(), out.end(), static_cast<std::uint64_t>(c.block)) == out.end())
            out.push_back(static_cast<std::uint64_t>(c.block));
    return out;
}

/// The plain UCX peak (two processes) per block size, and the protocols UCX chose.
std::string pair_peaks(const options& o, int argc, char** argv, const std::vector<test_case>& cases,
                       std::vector<row>& out) {
    pair_options po;
    po.sizes = distinct_blocks(cases);
    po.messages = std::max(1, o.ranks - 1);
    po.runs = o.warmup + o.iters;
    po.timeout = timeout_of(o);
    const std::size_t runs = static_cast<std::size_t>(po.runs);
    std::string error;
    const std::string path = arena_path();
    auto arena = perf_arena::create(2, 256 * 1024, po.sizes.size() * (runs + 1), path, error);
    if (!arena) return error;
    error = run_children(o, argc, argv, 2, *arena, [&](int k) {
        return std::vector<std::string>{"--role", "pair", "--rank", std::to_string(k), "--arena", path};
    });
    unlink(path.c_str());
    if (!error.empty()) return error + rank_errors(*arena);
    std::uint64_t length = 0;
    std::memcpy(&length, arena->slot(0), 8);
    const std::string info(arena->slot(0) + 8, std::min<std::uint64_t>(length, arena->slot_bytes()));
    for (std::size_t s = 0; s < po.sizes.size(); ++s) {
        std::vector<double> times;
        for (std::size_t run = static_cast<std::size_t>(o.warmup); run < runs; ++run)
            times.push_back(std::max(arena->values(0)[s * runs + run], arena->values(1)[s * runs + run]));
        row w{"ucx_pair", "processes", "-"};
        w.block = static_cast<std::int64_t>(po.sizes[s]);
        w.ranks = 2;
        w.size_bytes = static_cast<double>(po.sizes[s]) * po.messages;
        w.ucx_bytes = 2 * w.size_bytes;
        w.wrong = arena->values(0)[po.sizes.size() * runs + s] + arena->values(1)[po.sizes.size() * runs + s];
        summarise(times, w);
        out.push_back(w);
        for (const protocol_choice& p : protocols_for(info, po.sizes[s])) {
            row q{"protocol", "-", "-"};
            q.protocol = p.protocol + " [" + p.operation + ", " + p.range + "]";
            q.block = w.block;
            out.push_back(q);
        }
    }
    return {};
}

/// One mode's rows (processes or threads): every case and setup.
std::string run_mode(const options& o, int argc, char** argv, const std::string& mode,
                     const std::vector<test_case>& cases, std::vector<row>& out) {
    const std::vector<setup> setups = make_setups(o);
    const std::size_t runs = static_cast<std::size_t>(o.warmup + o.iters);
    const value_index at{cases.size(), setups.size(), runs};
    std::string error;
    const std::string path = mode == "processes" ? arena_path() : std::string();
    auto arena = perf_arena::create(o.ranks, 64 * 1024, at.count(), path, error);
    if (!arena) return error;
    if (mode == "processes") {
        error = run_children(o, argc, argv, o.ranks, *arena, [&](int k) {
            return std::vector<std::string>{"--role", "rank", "--rank", std::to_string(k), "--arena", path};
        });
        unlink(path.c_str());
    } else {
        error = run_threads(o, cases, *arena);
    }
    if (std::string e = rank_errors(*arena); !e.empty() || !error.empty()) return error + e;
    std::string mismatch; // the rows stay: they are measured; their bytes through UCX may not be the executor's
    for (std::size_t c = 0; c < cases.size(); ++c)
        for (std::size_t s = 0; s < setups.size(); ++s) {
            row w{"alltoallv", mode, cases[c].workload, std::string(to_string(setups[s].scheduler)),
                  std::string(to_string(setups[s].flow))};
            w.block = cases[c].block;
            w.ranks = o.ranks;
            w.size_bytes = static_cast<double>(cases[c].m.sum()) / o.ranks;
            const plan_info p = plan_of(cases[c], o, setups[s].scheduler);
            w.ucx_bytes = p.ucx_bytes;
            w.steps = arena->values(0)[at.steps(c, s)];
            if (w.steps != static_cast<double>(p.steps) && mismatch.empty())
                mismatch = "the executor's " + w.scheduler + " plan of " + w.workload + " has " +
                           std::to_string(static_cast<long long>(w.steps)) + " steps, the plan verified here " +
                           std::to_string(p.steps);
            std::vector<double> times;
            for (std::size_t run = static_cast<std::size_t>(o.warmup); run < runs; ++run) {
                double slowest = 0;
                for (int k = 0; k < o.ranks; ++k) slowest = std::max(slowest, arena->values(k)[at.time(c, s, run)]);
                times.push_back(slowest);
            }
            for (int k = 0; k < o.ranks; ++k) w.wrong += arena->values(k)[at.wrong(c, s)];
            summarise(times, w);
            out.push_back(w);
        }
    return mismatch;
}

/// Each row's algbw as a fraction of its case's copy peak and of the UCX peak of its block size.
void add_fractions(std::vector<row>& rows) {
    for (row& w : rows) {
        if (w.kind != "alltoallv") continue;
        for (const row& p : rows) {
            if ((p.kind == "d2d_copy" || p.kind == "memcpy") && p.workload == w.workload && p.block == w.block &&
                p.algbw() > 0)
                w.of_copy = w.algbw() / p.algbw();
            if (p.kind == "ucx_pair" && p.block == w.block && p.algbw() > 0) w.of_ucx = w.algbw() / p.algbw();
        }
    }
}

// A fraction, empty (CSV) or "-" (table) where there is no peak to compare with.
std::string fraction(double x, const char* none) {
    if (std::isnan(x)) return none;
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", x);
    return text;
}

void print_header() {
    std::printf("# %-9s %-9s %-10s %9s %-6s %-10s %12s %12s %10s %9s %7s %7s %5s %6s\n", "kind", "mode", "workload",
                "block", "sched", "flow", "size(B)", "ucx(B)", "time(ms)", "algbw", "of_copy", "of_ucx", "steps",
                "wrong");
}

void print_rows(const std::vector<row>& rows) {
    for (const row& w : rows) {
        if (w.kind == "protocol") {
            std::printf("  protocol for %lld-byte messages: %s\n", static_cast<long long>(w.block), w.protocol.c_str());
            continue;
        }
        std::printf("  %-9s %-9s %-10s %9lld %-6s %-10s %12.0f %12.0f %10.3f %9.3f %7s %7s %5.0f %6.0f\n",
                    w.kind.c_str(), w.mode.c_str(), w.workload.c_str(), static_cast<long long>(w.block),
                    w.scheduler.c_str(), w.flow.c_str(), w.size_bytes, w.ucx_bytes, w.time_s * 1e3, w.algbw(),
                    fraction(w.of_copy, "-").substr(0, 7).c_str(), fraction(w.of_ucx, "-").substr(0, 7).c_str(),
                    w.steps, w.wrong);
    }
}

std::string csv_text(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (const char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
}

/// Appends the rows to --csv (with the header when the file is new or empty).
std::string write_csv(const options& o, const std::string& label, const std::string& device,
                      const std::vector<row>& rows) {
    std::FILE* probe = std::fopen(o.csv.c_str(), "r");
    const bool fresh = probe == nullptr || std::fgetc(probe) == EOF;
    if (probe) std::fclose(probe);
    std::FILE* f = std::fopen(o.csv.c_str(), "a");
    if (!f) return "cannot write --csv file '" + o.csv + "'";
    if (fresh)
        std::fprintf(f, "kind,label,device,memory,mode,workload,block_bytes,ranks,gpus_per_server,scheduler,flow,size_"
                        "bytes,ucx_bytes,"
                        "time_ms,min_ms,max_ms,algbw_GBps,of_copy,of_ucx,steps,wrong,samples,protocol\n");
    for (const row& w : rows)
        std::fprintf(f, "%s,%s,%s,%s,%s,%s,%lld,%d,%d,%s,%s,%.0f,%.0f,%.6f,%.6f,%.6f,%.6f,%s,%s,%.0f,%.0f,%zu,%s\n",
                     w.kind.c_str(), csv_text(label).c_str(), csv_text(device).c_str(), o.memory.c_str(),
                     w.mode.c_str(), csv_text(w.workload).c_str(), static_cast<long long>(w.block), w.ranks,
                     w.kind == "alltoallv" ? o.gpus_per_server : 0, w.scheduler.c_str(), w.flow.c_str(), w.size_bytes,
                     w.ucx_bytes, w.time_s * 1e3, w.min_s * 1e3, w.max_s * 1e3, w.algbw(),
                     fraction(w.of_copy, "").c_str(), fraction(w.of_ucx, "").c_str(), w.steps, w.wrong, w.samples,
                     csv_text(w.protocol).c_str());
    return std::fclose(f) == 0 ? std::string() : "cannot write --csv file '" + o.csv + "'";
}

std::string default_label() {
    const char* tls = std::getenv("UCX_TLS");
    return std::string("UCX ") + ucp_get_version_string() + (tls ? std::string(" UCX_TLS=") + tls : std::string());
}

/// The parent: plans, peaks, every mode; 0, 1 (a failure or a wrong byte) or 77 (no device).
int run_parent(const options& o, int argc, char** argv) {
    const std::vector<test_case> cases = make_cases(o);
    for (const test_case& c : cases)
        for (const setup& s : make_setups(o))
            (void)plan_of(c, o, s.scheduler); // every plan verified before anything runs
    std::string error;
    const std::unique_ptr<perf_memory> mem = make_memory(o, error);
    if (!mem) {
        std::printf("alltoallv_device_perf: skipped: %s\n", error.c_str());
        return 77;
    }
    if (error = ucx_supports(o.memory); !error.empty()) {
        std::printf("alltoallv_device_perf: skipped: %s\n", error.c_str());
        return 77;
    }
    const std::string label = o.label.empty() ? default_label() : o.label;
    const std::string device = mem->device();
    std::printf("# alltoallv_device_perf: %s; %s; %s memory; %d ranks as %d servers x %d; warm-up %d, timed calls %d\n"
                "# time: median over calls of the slowest rank's time per call (buffers, fills, checks and warm-up "
                "outside the clock)\n"
                "# algbw = size / time in GB/s, size = bytes per rank; of_copy, of_ucx: algbw over the copy peak and "
                "the UCX pair peak\n",
                device.c_str(), label.c_str(), o.memory.c_str(), o.ranks, o.ranks / o.gpus_per_server,
                o.gpus_per_server, o.warmup, o.iters);
    std::fflush(stdout);
    // Each phase's rows are shown and appended to the CSV as soon as it ends, and a failing phase
    // does not stop the next: a run cut short (a stuck threads run ends the process) keeps what
    // it measured.
    print_header();
    std::vector<row> rows;
    std::size_t shown = 0;
    auto phase = [&](const std::string& name, const std::string& failure) {
        if (!failure.empty()) error += (error.empty() ? "" : "; ") + name + ": " + failure;
        add_fractions(rows);
        const std::vector<row> fresh(rows.begin() + static_cast<std::ptrdiff_t>(shown), rows.end());
        print_rows(fresh);
        if (!o.csv.empty())
            if (std::string e = write_csv(o, label, device, fresh); !e.empty())
                error += (error.empty() ? "" : "; ") + e;
        shown = rows.size();
    };
    if (o.peaks) {
        phase("copy peak", copy_peaks(o, cases, *mem, rows));
        phase("UCX pair peak", pair_peaks(o, argc, argv, cases, rows));
    }
    for (const std::string& mode : o.modes) phase(mode, run_mode(o, argc, argv, mode, cases, rows));
    double wrong = 0;
    for (const row& w : rows) wrong += w.wrong;
    std::printf("# wrong bytes: %.0f %s\n", wrong, wrong == 0 && error.empty() ? "OK" : "FAILED");
    if (!error.empty()) std::fprintf(stderr, "alltoallv_device_perf: error: %s\n", error.c_str());
    return error.empty() && wrong == 0 ? 0 : 1;
}

/// A child process: a rank (--role rank) or one side of the UCX pair (--role pair).
int run_child(const options& o) {
    std::string error;
    const std::unique_ptr<perf_arena> arena = perf_arena::open(o.arena, error);
    if (!arena) {
        std::fprintf(stderr, "alltoallv_device_perf: %s\n", error.c_str());
        return 1;
    }
    try {
        if (o.role == "rank") {
            error = rank_main(o, make_cases(o), *arena, o.rank);
        } else {
            pair_options po;
            po.sizes = distinct_blocks(make_cases(o));
            po.messages = std::max(1, o.ranks - 1);
            po.runs = o.warmup + o.iters;
            po.timeout = timeout_of(o);
            const std::unique_ptr<perf_memory> mem = make_memory(o, error);
            if (mem) error = run_pair(*arena, o.rank, *mem, po);
        }
    } catch (const std::exception& e) {
        error = e.what();
    }
    if (error.empty()) return 0;
    arena->fail(o.rank, error);
    return 1;
}

void add_options(CLI::App& app, options& o) {
    app.add_option("--memory", o.memory, "where the buffers live: host or cuda")
        ->check(CLI::IsMember({"host", "cuda"}))
        ->capture_default_str();
    app.add_option("--ranks", o.ranks, "ranks (all on this machine, on one device)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("-g,--gpus-per-server", o.gpus_per_server, "ranks per emulated server (must divide --ranks)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("-W,--workload", o.workloads, "repeatable: uniform | zipf[:S] | moe[:...] (fast::parse_workload)")
        ->capture_default_str();
    app.add_option("-b,--block", o.blocks, "repeatable: mean bytes each rank sends each rank (suffixes K, M, G)")
        ->capture_default_str();
    app.add_option("-s,--schedulers", o.schedulers, "fast, direct")
        ->delimiter(',')
        ->check(CLI::IsMember({"fast", "direct"}))
        ->capture_default_str();
    app.add_option("--flows", o.flows, "rendezvous, credits")
        ->delimiter(',')
        ->check(CLI::IsMember({"rendezvous", "credits"}))
        ->capture_default_str();
    app.add_option("--modes", o.modes, "processes (UCX may use CUDA IPC), threads (one process)")
        ->delimiter(',')
        ->check(CLI::IsMember({"processes", "threads"}))
        ->capture_default_str();
    app.add_option("-w,--warmup", o.warmup, "untimed calls per case and setup")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();
    app.add_option("-n,--iters", o.iters, "timed calls per case and setup")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    app.add_flag("--peaks", o.peaks,
                 "also measure the copy peak and the plain UCX two-process peak, with UCX's protocol choices");
    app.add_option("--device", o.device, "CUDA device")->check(CLI::Range(0, 1024))->capture_default_str();
    app.add_option("--timeout", o.timeout_s, "bound of every executor wait and barrier, seconds")
        ->check(CLI::Range(0.001, 1e6))
        ->capture_default_str();
    app.add_option("--limit", o.limit_s, "bound of each mode's whole run, seconds")
        ->check(CLI::Range(1.0, 1e6))
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the generators")->capture_default_str();
    app.add_option("--csv", o.csv, "append the rows to FILE (a header first when it is new)");
    app.add_option("--label", o.label, "the CSV's label column (default: the UCX version and UCX_TLS)");
    app.add_option("--role", o.role, "internal: a child process")->check(CLI::IsMember({"rank", "pair"}))->group("");
    app.add_option("--rank", o.rank, "internal")->group("");
    app.add_option("--arena", o.arena, "internal")->group("");
}

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    options o;
    CLI::App app{
        "alltoallv_device_perf: the executor's alltoallv timed on device (CUDA) or host memory, ranks as processes or\n"
        "threads on one machine, without MPI; every byte checked where it lies, every plan verified."};
    add_options(app, o);
    try {
        app.parse(argc, argv);
        if (o.ranks % o.gpus_per_server != 0)
            throw fast::invalid_argument("-g " + std::to_string(o.gpus_per_server) + " does not divide --ranks " +
                                         std::to_string(o.ranks));
        if (!o.role.empty()) return run_child(o);
        // Children get the same arguments: the internal ones follow.
        return run_parent(o, argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::printf("%s", app.help().c_str());
        return 0;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "alltoallv_device_perf: error: %s (see --help)\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "alltoallv_device_perf: error: %s\n", e.what());
        return 2;
    }
}
