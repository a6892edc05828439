// The executor on CUDA device memory: ranks as threads of one process or as processes (then
// UCX may use CUDA IPC between them), all on one device, each with its own communicator, UCX
// context and CUDA stream; skewed traffic in packed and gapped layouts, both schedulers and both
// flow controls, blocking calls and a persistent request. Every receive buffer is copied back
// and checked byte for byte, and every send buffer must come back unchanged. Exit 77 (skipped)
// without a CUDA device or without a CUDA-aware UCX, unless --require. Built only with
// -Dcuda=enabled.

#include <cuda_runtime.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fast/exec/exec.hpp>

#include "exec_support.hpp"

using namespace fast::exec;
using namespace exec_test;

namespace {

constexpr char usage[] =
    "usage: exec_cuda_test [--require] [--processes] [--host] [--ranks R] [--gpus-per-server G]\n"
    "                      [--mean BYTES] [--seeds N] [--device D] [--limit SECONDS]\n"
    "  Runs alltoallv on CUDA device memory with R ranks (default 8, as servers of G = 4) as threads,\n"
    "  or as processes bootstrapped over files with --processes, skewed traffic of about BYTES per\n"
    "  block (default 262144), seeds 1..N (default 3), on device D (default 0), and checks every byte.\n"
    "  Exit 77 without a device or a CUDA-aware UCX, unless --require (then 1). --host: host memory\n"
    "  instead, which checks this harness where there is no GPU. --limit: the whole run's bound in\n"
    "  seconds (default 100); past it the run fails, naming the ranks still busy. With --processes the\n"
    "  ranks are then killed, and also 10 s after the first one fails.\n";

using clock_type = std::chrono::steady_clock;
constexpr std::chrono::milliseconds bootstrap_timeout{60000};

struct options {
    bool require = false;
    bool processes = false;
    bool host = false; ///< host memory instead: checks this harness where there is no GPU
    int rank = -1;     ///< a child process: its rank (internal)
    std::string dir;   ///< a child process: the folder of the file allgather (internal)
    int ranks = 8;
    int gpus_per_server = 4;
    std::int64_t mean = 262144;
    int seeds = 3;
    int device = 0;
    int limit_s = 100; ///< the whole run's bound
};

std::string cuda_error(cudaError_t e, const char* what) {
    return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

/// A rank's buffers on the device (or, with --host, in host memory), with their host images.
class device_buffers {
public:
    explicit device_buffers(bool on_device) : on_device_(on_device) {}
    device_buffers(const device_buffers&) = delete;
    device_buffers& operator=(const device_buffers&) = delete;
    ~device_buffers() {
        release(send);
        release(recv);
    }
    rank_buffers host;
    void* send = nullptr;
    void* recv = nullptr;

    /// "" or what failed.
    std::string upload() {
        if (std::string e = allocate(send, host.send_data.size(), "send"); !e.empty()) return e;
        if (std::string e = allocate(recv, host.recv_data.size(), "recv"); !e.empty()) return e;
        if (std::string e = copy(send, host.send_data.data(), host.send_data.size(), "send"); !e.empty()) return e;
        return reset_recv();
    }
    std::string reset_recv() {
        if (!on_device_) {
            std::memset(recv, recv_sentinel, host.recv_data.size());
            return {};
        }
        if (cudaError_t e = cudaMemset(recv, recv_sentinel, host.recv_data.size()); e != cudaSuccess)
            return cuda_error(e, "cudaMemset(recv)");
        // cudaMemset may still be running when it returns, and the executor's copies run on a
        // non-blocking stream of its own, unordered with it: the buffer must be ready before the
        // call (docs/executor.md, Rules). Without this the self-copies raced with the memset.
        if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return cuda_error(e, "cudaDeviceSynchronize");
        return {};
    }
    /// Copies both buffers back and checks them against the matrix.
    std::string check(const fast::traffic_matrix& m, int me) {
        std::vector<std::uint8_t> got(host.recv_data.size());
        if (std::string e = copy(got.data(), recv, got.size(), "recv back"); !e.empty()) return e;
        if (std::string e = check_recv(m, me, host.recv, got); !e.empty()) return e;
        std::vector<std::uint8_t> sent(host.send_data.size());
        if (std::string e = copy(sent.data(), send, sent.size(), "send back"); !e.empty()) return e;
        if (sent != host.send_data) return "rank " + std::to_string(me) + ": the send buffer changed";
        return {};
    }

private:
    std::string allocate(void*& p, std::size_t bytes, const char* what) {
        if (!on_device_) {
            p = std::malloc(bytes);
            return p != nullptr ? std::string() : std::string("malloc(") + what + ") failed";
        }
        if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess)
            return cuda_error(e, (std::string("cudaMalloc(") + what + ")").c_str());
        return {};
    }
    std::string copy(void* dst, const void* src, std::size_t bytes, const char* what) {
        if (!on_device_) {
            std::memcpy(dst, src, bytes);
            return {};
        }
        if (cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault); e != cudaSuccess)
            return cuda_error(e, (std::string("cudaMemcpy(") + what + ")").c_str());
        return {};
    }
    void release(void* p) {
        if (on_device_) cudaFree(p);
        else std::free(p);
    }
    bool on_device_;
};

struct run_result {
    std::string error;
    bool unsupported = false;
};

/// An allgather among processes over a folder (one per case, so a rank that gives up on a case
/// never reads another case's parts): each round, every rank writes its part to a file of its
/// own (renamed into place, so never read half-written) and reads everyone's.
class file_allgather {
public:
    file_allgather(std::string dir, int rank, int size) : dir_(std::move(dir)), rank_(rank), size_(size) {
        std::error_code ignored; // every rank makes it; the others' attempts fail harmlessly
        std::filesystem::create_directories(dir_, ignored);
    }
    bootstrap boot() {
        return {rank_, size_, [this](const void* s, void* r, std::size_t n) { return gather(s, r, n); }};
    }

private:
    std::string part(int k) const { return dir_ + "/" + std::to_string(round_) + "." + std::to_string(k); }
    status gather(const void* s, void* r, std::size_t n) {
        const status result = gather_round(s, r, n);
        ++round_;
        return result;
    }
    status gather_round(const void* s, void* r, std::size_t n) {
        const std::string mine = part(rank_);
        {
            std::ofstream f(mine + ".tmp", std::ios::binary);
            f.write(static_cast<const char*>(s), static_cast<std::streamsize>(n));
            if (!f.flush()) return status(errc::bootstrap, "rank " + std::to_string(rank_) + ": cannot write " + mine);
        }
        if (std::rename((mine + ".tmp").c_str(), mine.c_str()) != 0)
            return status(errc::bootstrap, "rank " + std::to_string(rank_) + ": cannot rename " + mine);
        const auto deadline = clock_type::now() + bootstrap_timeout;
        for (int k = 0; k < size_; ++k) {
            std::ifstream f;
            while (f.open(part(k), std::ios::binary), !f) {
                if (clock_type::now() > deadline)
                    return status(errc::bootstrap, "rank " + std::to_string(rank_) + ": no part from rank " +
                                                       std::to_string(k) + " in allgather round " +
                                                       std::to_string(round_) + " within " +
                                                       std::to_string(bootstrap_timeout.count()) + " ms");
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            const std::vector<char> got{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
            if (got.size() != n)
                return status(errc::bootstrap, "rank " + std::to_string(k) + " gathers " + std::to_string(got.size()) +
                                                   " bytes, rank " + std::to_string(rank_) + " " + std::to_string(n));
            std::memcpy(static_cast<char*>(r) + static_cast<std::size_t>(k) * n, got.data(), n);
        }
        return {};
    }
    std::string dir_;
    int rank_;
    int size_;
    int round_ = 0;
};

std::string describe(scheduler s, flow_control f) {
    return std::string(to_string(s)) + "/" + std::string(to_string(f));
}

/// The calls of one case on a created communicator: the error, or empty.
std::string run_calls(const options& o, communicator& comm, int me, scheduler sched, flow_control flow) {
    const std::string label = describe(sched, flow);
    for (int seed = 1; seed <= o.seeds; ++seed) {
        const auto useed = static_cast<std::uint64_t>(seed);
        const fast::traffic_matrix m = random_skewed(o.ranks, useed, o.mean);
        device_buffers b(!o.host);
        b.host = make_buffers(m, me, seed % 2 == 0, useed);
        if (std::string e = b.upload(); !e.empty()) return e;
        status s = comm.alltoallv(b.send, b.host.send.counts, b.host.send.displs, b.recv, b.host.recv.counts,
                                  b.host.recv.displs);
        if (!s.ok()) return label + " seed " + std::to_string(seed) + ": " + s.message();
        if (std::string e = b.check(m, me); !e.empty()) return label + " seed " + std::to_string(seed) + ": " + e;
    }
    // A persistent request run several times; the receive buffer is reset in between, so every
    // run must write all of it.
    const fast::traffic_matrix m = random_skewed(o.ranks, 99, o.mean);
    device_buffers b(!o.host);
    b.host = make_buffers(m, me, true, 99);
    if (std::string e = b.upload(); !e.empty()) return e;
    alltoallv_request req;
    if (status s = comm.alltoallv_init(b.send, b.host.send.counts, b.host.send.displs, b.recv, b.host.recv.counts,
                                       b.host.recv.displs, req);
        !s.ok())
        return label + " persistent init: " + s.message();
    for (int run = 0; run < 4; ++run) {
        status s = req.start();
        if (s.ok()) {
            if (run % 2 == 0) {
                s = req.wait();
            } else {
                bool done = false;
                while (s.ok() && !done) s = req.test(done);
            }
        }
        if (!s.ok()) return label + " persistent run " + std::to_string(run) + ": " + s.message();
        if (std::string e = b.check(m, me); !e.empty())
            return label + " persistent run " + std::to_string(run) + ": " + e;
        if (std::string e = b.reset_recv(); !e.empty()) return e;
    }
    const statistics st = comm.stats();
    if (st.failures != 0) return label + ": stats().failures = " + std::to_string(st.failures);
    return {};
}

/// Rank `me`'s part of one case.
run_result run_rank(const options& o, const bootstrap& boot, int me, scheduler sched, flow_control flow) {
    run_result out;
    if (cudaError_t e = o.host ? cudaSuccess : cudaSetDevice(o.device); e != cudaSuccess) {
        out.error = cuda_error(e, "cudaSetDevice");
        return out;
    }
    config cfg;
    cfg.gpus_per_server = o.gpus_per_server;
    cfg.scheduler = sched;
    cfg.flow = flow;
    cfg.memory = o.host ? memory::host : memory::cuda;
    cfg.timeout = std::chrono::milliseconds(60000);
    communicator comm;
    if (status s = create(boot, cfg, comm); !s.ok()) {
        out.unsupported = s.code() == errc::unsupported;
        out.error = std::string("create: ") + std::string(to_string(s.code())) + ": " + s.message();
        return out;
    }
    out.error = run_calls(o, comm, me, sched, flow);
    // Communicators are destroyed collectively, after a failed call too (the others wait here):
    // nobody closes its endpoints while a peer is still checking its buffers and not progressing UCX.
    char one = 1;
    std::vector<char> all(static_cast<std::size_t>(o.ranks));
    if (status s = boot.allgather(&one, all.data(), 1); !s.ok() && out.error.empty())
        out.error = describe(sched, flow) + ": " + s.message();
    return out;
}

bool parse(int argc, char** argv, options& o) {
    for (int k = 1; k < argc; ++k) {
        const std::string a = argv[k];
        auto value = [&](std::int64_t lo, std::int64_t& v) {
            if (k + 1 >= argc) return false;
            char* end = nullptr;
            const long long x = std::strtoll(argv[++k], &end, 10);
            if (*end != '\0' || x < lo) return false;
            v = x;
            return true;
        };
        std::int64_t v = 0;
        if (a == "--help" || a == "-h") {
            std::fputs(usage, stdout);
            std::exit(0);
        } else if (a == "--require") {
            o.require = true;
        } else if (a == "--processes") {
            o.processes = true;
        } else if (a == "--host") {
            o.host = true;
        } else if (a == "--rank" && value(0, v)) {
            o.rank = static_cast<int>(std::min<std::int64_t>(v, 1 << 20));
        } else if (a == "--dir" && k + 1 < argc) {
            o.dir = argv[++k];
        } else if (a == "--ranks" && value(1, v)) {
            o.ranks = static_cast<int>(std::min<std::int64_t>(v, 256));
        } else if (a == "--gpus-per-server" && value(1, v)) {
            o.gpus_per_server = static_cast<int>(std::min<std::int64_t>(v, 256));
        } else if (a == "--mean" && value(1, v)) {
            o.mean = v;
        } else if (a == "--seeds" && value(1, v)) {
            o.seeds = static_cast<int>(std::min<std::int64_t>(v, 1000));
        } else if (a == "--limit" && value(1, v)) {
            o.limit_s = static_cast<int>(std::min<std::int64_t>(v, 86400));
        } else if (a == "--device" && value(0, v)) {
            o.device = static_cast<int>(std::min<std::int64_t>(v, 1024));
        } else {
            std::fprintf(stderr, "exec_cuda_test: bad argument '%s'\n%s", a.c_str(), usage);
            return false;
        }
    }
    if (o.rank >= o.ranks || (o.rank >= 0) != !o.dir.empty()) {
        std::fprintf(stderr, "exec_cuda_test: --rank and --dir go together, with a rank below --ranks\n");
        return false;
    }
    if (o.ranks % o.gpus_per_server != 0) {
        std::fprintf(stderr, "exec_cuda_test: --gpus-per-server %d does not divide --ranks %d\n", o.gpus_per_server,
                     o.ranks);
        return false;
    }
    return true;
}

constexpr scheduler schedulers[] = {scheduler::fast, scheduler::direct};
constexpr flow_control flows[] = {flow_control::rendezvous, flow_control::credits};

/// The case's line, with its wall time (a slow case near the run's timeout shows here).
void print_case(const options& o, const char* how, scheduler sched, flow_control flow, const char* verdict,
                clock_type::time_point start) {
    const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    std::printf("%-20s %d ranks as %d servers (%s): %s (%d blocking calls and 4 persistent runs) in %.1f s\n",
                describe(sched, flow).c_str(), o.ranks, o.ranks / o.gpus_per_server, how, verdict, o.seeds, seconds);
}

/// Prints every failing rank's error and the case's line; true if all passed.
bool report(const options& o, scheduler sched, flow_control flow, const std::vector<run_result>& results,
            clock_type::time_point start) {
    bool ok = true;
    for (std::size_t k = 0; k < results.size(); ++k)
        if (!results[k].error.empty()) {
            std::printf("rank %zu: %s\n", k, results[k].error.c_str());
            ok = false;
        }
    print_case(o, "threads", sched, flow, ok ? "ok" : "FAILED", start);
    return ok;
}

/// Every case with the ranks as threads: 0, 1 (failed) or 77 (unsupported). Past --limit the
/// process ends at once (stuck threads cannot be stopped), naming the ranks still busy and what
/// the others reported.
int run_threads(const options& o) {
    const auto stop_at = clock_type::now() + std::chrono::seconds(o.limit_s);
    int failed = 0;
    for (const auto sched : schedulers)
        for (const auto flow : flows) {
            const auto start = clock_type::now();
            thread_allgather gather(o.ranks);
            std::vector<run_result> results(static_cast<std::size_t>(o.ranks));
            const auto done = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(o.ranks));
            std::vector<std::thread> threads;
            for (int k = 0; k < o.ranks; ++k)
                threads.emplace_back([&, k] {
                    results[static_cast<std::size_t>(k)] = run_rank(o, gather.boot(k), k, sched, flow);
                    done[static_cast<std::size_t>(k)].store(true, std::memory_order_release);
                });
            auto all_done = [&] {
                for (int k = 0; k < o.ranks; ++k)
                    if (!done[static_cast<std::size_t>(k)].load(std::memory_order_acquire)) return false;
                return true;
            };
            while (!all_done() && clock_type::now() < stop_at)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (!all_done()) {
                std::string busy;
                for (int k = 0; k < o.ranks; ++k) {
                    const auto uk = static_cast<std::size_t>(k);
                    if (!done[uk].load(std::memory_order_acquire)) busy.append(" ").append(std::to_string(k));
                    else if (!results[uk].error.empty()) std::printf("rank %d: %s\n", k, results[uk].error.c_str());
                }
                std::printf("the run took over %d s; ranks still busy:%s\n", o.limit_s, busy.c_str());
                print_case(o, "threads", sched, flow, "FAILED", start);
                std::printf("FAILED\n");
                std::_Exit(1);
            }
            for (auto& t : threads) t.join();
            if (results[0].unsupported) {
                std::printf("%s\n", results[0].error.c_str());
                return 77;
            }
            failed += report(o, sched, flow, results, start) ? 0 : 1;
        }
    return failed ? 1 : 0;
}

/// One rank's every case, in a child process; stops at the first failing case (the parent then
/// stops the others).
int run_child(const options& o) {
    int index = 0;
    for (const auto sched : schedulers)
        for (const auto flow : flows) {
            const auto start = clock_type::now();
            file_allgather gather(o.dir + "/case-" + std::to_string(index++), o.rank, o.ranks);
            const run_result r = run_rank(o, gather.boot(), o.rank, sched, flow);
            if (r.unsupported) {
                if (o.rank == 0) std::printf("%s\n", r.error.c_str());
                return 77;
            }
            if (!r.error.empty()) {
                std::printf("rank %d: %s\n", o.rank, r.error.c_str());
                return 1;
            }
            if (o.rank == 0) print_case(o, "processes", sched, flow, "rank 0 ok", start);
        }
    return 0;
}

volatile std::sig_atomic_t stop_signal = 0;

/// Every case with the ranks as processes (this program again, with --rank and --dir), bounded
/// in time: 0, 1 or 77 (every rank unsupported). A failing rank stops the others 10 s later
/// (time to report what they saw), as does SIGINT or SIGTERM at once; the folder is removed.
int run_processes(const options& o, int argc, char** argv) {
    char tmpl[] = "/tmp/exec_cuda_test.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        std::printf("cannot make a temporary folder: %s\n", std::strerror(errno));
        return 1;
    }
    const std::string dir = tmpl;
    std::signal(SIGINT, [](int) { stop_signal = 1; });
    std::signal(SIGTERM, [](int) { stop_signal = 1; });
    std::vector<pid_t> running(static_cast<std::size_t>(o.ranks), 0); // 0: not started or reaped
    int failed = 0;
    int unsupported = 0;
    for (int k = 0; k < o.ranks && failed == 0; ++k) {
        std::vector<std::string> args(argv, argv + argc);
        args.insert(args.end(), {"--rank", std::to_string(k), "--dir", dir});
        std::vector<char*> cargs;
        for (auto& a : args) cargs.push_back(a.data());
        cargs.push_back(nullptr);
        if (const int e = posix_spawn(&running[static_cast<std::size_t>(k)], "/proc/self/exe", nullptr, nullptr,
                                      cargs.data(), environ);
            e != 0) {
            std::printf("cannot start rank %d: %s\n", k, std::strerror(e));
            running[static_cast<std::size_t>(k)] = 0;
            ++failed;
        }
    }
    auto kill_all = [&] {
        for (const pid_t pid : running)
            if (pid > 0) kill(pid, SIGKILL);
    };
    if (failed) kill_all();
    auto stop_at = clock_type::now() + std::chrono::seconds(o.limit_s);
    bool killed = false;
    while (std::any_of(running.begin(), running.end(), [](pid_t p) { return p > 0; })) {
        int st = 0;
        const pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            const auto rank = std::find(running.begin(), running.end(), pid) - running.begin();
            if (rank == static_cast<std::ptrdiff_t>(running.size())) continue;
            running[static_cast<std::size_t>(rank)] = 0;
            const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
            if (code == 77) {
                ++unsupported;
            } else if (code != 0) {
                if (!killed) std::printf("rank %td exited %d\n", rank, code);
                if (failed++ == 0) stop_at = std::min(stop_at, clock_type::now() + std::chrono::seconds(10));
            }
            continue;
        }
        if (!killed && (stop_signal != 0 || clock_type::now() > stop_at)) {
            std::printf("%s: the ranks still running are killed\n",
                        stop_signal != 0 ? "interrupted"
                        : failed != 0    ? "a rank failed 10 s ago"
                                         : ("the run took over " + std::to_string(o.limit_s) + " s").c_str());
            kill_all();
            killed = true;
            ++failed;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    if (failed == 0 && unsupported == o.ranks) return 77;
    return failed || unsupported ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // what a killed run printed still reaches its log
    options o;
    if (!parse(argc, argv, o)) return 2;
    if (o.rank >= 0) return run_child(o);
    const int skipped = o.require ? 1 : 77;
    if (!o.host) {
        int devices = 0;
        if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices <= o.device) {
            std::printf("no CUDA device %d (%s): %s\n", o.device,
                        e == cudaSuccess ? (std::to_string(devices) + " found").c_str() : cudaGetErrorName(e),
                        o.require ? "failed" : "skipped");
            return skipped;
        }
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, o.device) == cudaSuccess)
            std::printf("device %d: %s\n", o.device, prop.name);
    }
    const int rc = o.processes ? run_processes(o, argc, argv) : run_threads(o);
    if (rc == 77) {
        std::printf("%s\n", o.require ? "failed: no CUDA-aware UCX" : "skipped: no CUDA-aware UCX");
        return skipped;
    }
    std::printf("%s\n", rc ? "FAILED" : o.host ? "all bytes checked (host memory)" : "all bytes checked");
    return rc;
}
