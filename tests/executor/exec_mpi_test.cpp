// Multi-process tests of the executor under mpirun (see mpirun.sh and meson.build):
//   exec_mpi_test patterns [--servers 1,2,4]   skewed, zero, self-only, hot-pair, uniform and
//                                              non-packed traffic; fast and direct schedulers,
//                                              iov and pieces; checked against the expected
//                                              layout and against MPI_Alltoallv
//   exec_mpi_test repeat [--calls 1000]        changing matrices, memory must stay flat
//   exec_mpi_test persistent                   init once, start/wait many times
//   exec_mpi_test errors                       mismatched counts, invalid arguments, huge counts,
//                                              bad configurations: same error on every rank
//   exec_mpi_test kill --out DIR [--mode M]    a rank dies mid-call; survivors report an error
//   exec_mpi_test megatron --file F [...]      real Megatron-LM MoE matrices
// Every scenario takes --flow rendezvous|credits (config.flow; rendezvous by default).
// Every rank checks its own results; the ranks agree on the outcome, rank 0 prints it, and the
// exit status is 0 only if every rank passed.

#include <malloc.h>
#include <mpi.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fast/exec/mpi.hpp>
#include <fast/matrix_io.hpp>

#include "exec_support.hpp"

using namespace fast::exec;
using namespace exec_test;
using clock_type = std::chrono::steady_clock;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool under_asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool under_asan = true;
#else
constexpr bool under_asan = false;
#endif
#else
constexpr bool under_asan = false;
#endif

int rank_ = 0;
int size_ = 1;
int failures_ = 0;
flow_control flow_ = flow_control::rendezvous; // --flow

void fail(const std::string& what) {
    ++failures_;
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank_, what.c_str());
}

bool all_ok(bool mine) {
    int v = mine ? 1 : 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}

std::string option(int argc, char** argv, const std::string& name, const std::string& fallback) {
    for (int k = 1; k + 1 < argc; ++k)
        if (argv[k] == name) return argv[k + 1];
    return fallback;
}

config make_config(int gpus_per_server, scheduler s = scheduler::fast, bool iov = true) {
    config c;
    c.gpus_per_server = gpus_per_server;
    c.scheduler = s;
    c.iov = iov;
    c.flow = flow_;
    c.timeout = std::chrono::milliseconds(30000);
    return c;
}

// create() on MPI_COMM_WORLD; a communicator must run the agreement FAST_AGREEMENT names, so that
// the runs with it set test what they claim to.
status create_comm(const config& c, communicator& comm) {
    const status s = create(MPI_COMM_WORLD, c, comm);
    const char* wanted = std::getenv("FAST_AGREEMENT");
    if (s.ok() && wanted != nullptr && std::string(wanted) != "automatic" && to_string(comm.agreement()) != wanted)
        fail("FAST_AGREEMENT=" + std::string(wanted) + " but the communicator runs " +
             std::string(to_string(comm.agreement())));
    return s;
}

// Whether every rank got the same message (and code).
bool same_everywhere(const status& s) {
    char mine[512] = {};
    std::snprintf(mine, sizeof mine, "%d|%s", static_cast<int>(s.code()), s.message());
    std::vector<char> all(512 * static_cast<std::size_t>(size_));
    MPI_Allgather(mine, 512, MPI_CHAR, all.data(), 512, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < size_; ++r)
        if (std::strncmp(all.data() + 512 * r, mine, 512) != 0) return false;
    return true;
}

// One alltoallv of matrix `m` with the given layout, checked byte for byte against the expected
// layout and against MPI_Alltoallv on the same input.
bool run_case(communicator& comm, const fast::traffic_matrix& m, bool gapped, std::uint64_t seed,
              const std::string& name, bool compare_with_mpi = true) {
    rank_buffers b = make_buffers(m, rank_, gapped, seed, seed);
    const status s = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), b.recv.counts,
                                    b.recv.displs);
    bool ok = true;
    if (!s.ok()) {
        fail(name + ": " + s.message());
        ok = false;
    } else if (auto e = check_recv(m, rank_, b.recv, b.recv_data, seed); !e.empty()) {
        fail(name + ": " + e);
        ok = false;
    }
    if (compare_with_mpi && ok) {
        std::vector<int> sc(static_cast<std::size_t>(size_)), sd(sc.size()), rc(sc.size()), rd(sc.size());
        bool fits = b.send.extent < INT_MAX && b.recv.extent < INT_MAX;
        for (std::size_t j = 0; j < sc.size(); ++j) {
            sc[j] = static_cast<int>(b.send.counts[j]);
            sd[j] = static_cast<int>(b.send.displs[j]);
            rc[j] = static_cast<int>(b.recv.counts[j]);
            rd[j] = static_cast<int>(b.recv.displs[j]);
        }
        if (fits) {
            std::vector<std::uint8_t> mpi_recv(b.recv_data.size(), recv_sentinel);
            MPI_Alltoallv(b.send_data.data(), sc.data(), sd.data(), MPI_BYTE, mpi_recv.data(), rc.data(), rd.data(),
                          MPI_BYTE, MPI_COMM_WORLD);
            if (mpi_recv != b.recv_data) {
                fail(name + ": differs from MPI_Alltoallv");
                ok = false;
            }
        }
    }
    return all_ok(ok);
}

std::vector<int> parse_list(const std::string& text) {
    std::vector<int> out;
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t comma = text.find(',', at);
        out.push_back(std::atoi(text.substr(at, comma - at).c_str()));
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

// --- scenarios ------------------------------------------------------------------------------------

void patterns(int argc, char** argv) {
    const std::vector<int> servers = parse_list(option(argc, argv, "--servers", "1,2,4"));
    const int r = size_;
    struct variant {
        scheduler sched;
        bool iov;
        const char* name;
    };
    const variant variants[] = {
        {scheduler::fast, true, "fast"}, {scheduler::direct, true, "direct"}, {scheduler::fast, false, "fast/pieces"}};
    for (const int s : servers) {
        if (s < 1 || r % s != 0) continue;
        for (const variant& v : variants) {
            if (!v.iov && s != servers.back()) continue; // pieces: on one server count
            communicator comm;
            const status cs = create_comm(make_config(r / s, v.sched, v.iov), comm);
            if (!cs.ok()) {
                fail(std::string("create: ") + cs.message());
                continue;
            }
            if (comm.servers() != s) fail("wrong server count");
            const std::string tag = std::to_string(s) + " servers, " + v.name + ": ";
            const std::uint64_t seed = 100 * static_cast<std::uint64_t>(s);
            bool ok = true;
            ok &= run_case(comm, random_skewed(r, seed + 1, 3000), false, seed + 1, tag + "skewed");
            ok &= run_case(comm, random_skewed(r, seed + 2, 3000), true, seed + 2,
                           tag + "skewed, gaps and permuted blocks");
            ok &= run_case(comm, random_skewed(r, seed + 3, 60000, 40), true, seed + 3, tag + "large skewed, gaps");
            ok &= run_case(comm, fast::traffic_matrix::Zero(r, r), false, seed + 4, tag + "all zero");
            ok &= run_case(comm, self_only(r, 5000), true, seed + 5, tag + "self only");
            ok &= run_case(comm, hot_pair(r, 0, r - 1, 300000), false, seed + 6, tag + "hot pair 0 -> last");
            ok &= run_case(comm, hot_pair(r, r - 1, 0, 77777), true, seed + 7, tag + "hot pair last -> 0, gaps");
            ok &= run_case(comm, fast::traffic_matrix::Constant(r, r, 20000), true, seed + 8, tag + "uniform, gaps");
            if (rank_ == 0) std::printf("%s%s\n", tag.c_str(), ok ? "ok" : "FAILED");
        }
    }
    // gpus_per_server = 0: all ranks on this host form one server.
    communicator comm;
    const status cs = create_comm(make_config(0), comm);
    if (!cs.ok()) fail(std::string("create (by host): ") + cs.message());
    else {
        if (comm.servers() != 1 || comm.gpus_per_server() != size_) fail("ranks of one host must form one server");
        (void)run_case(comm, random_skewed(r, 7, 2000), true, 7, "by host: skewed, gaps");
    }
}

long vm_rss_kib() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

void repeat(int argc, char** argv) {
    const int calls = std::atoi(option(argc, argv, "--calls", "1000").c_str());
    const int r = size_;
    communicator comm;
    if (status s = create_comm(make_config(r >= 4 ? r / 2 : r), comm); !s.ok()) {
        fail(std::string("create: ") + s.message());
        return;
    }
    // VmRSS and heap in use at the end of cycles: the smallest over the three cycles from the
    // warm-up point and over the last three, so that a transient at one sample point (a message
    // the transport holds for a receive not posted yet, 100 KiB seen once on a loaded machine)
    // does not read as growth; a leak raises every sample.
    long warm = LONG_MAX, warm_heap = LONG_MAX, end = LONG_MAX, end_heap = LONG_MAX;
    bool ok = true;
    const auto t0 = clock_type::now();
    // A new matrix every other call (the other reuses the plan), layouts changing too, cycling
    // through a fixed set so that memory is compared between like points of the cycle: buffer
    // high-water marks are reached in the first cycle, and what grows after that is a leak.
    constexpr int cycle = 20;
    const int warm_call = std::max(cycle, (calls / 4 + cycle - 1) / cycle * cycle) - 1;
    for (int k = 0; k < calls && ok; ++k) {
        const auto seed = static_cast<std::uint64_t>((k % cycle) / 2 + 1);
        const fast::traffic_matrix m = random_skewed(r, seed, 1500 + static_cast<std::int64_t>(seed % 5) * 1000);
        rank_buffers b = make_buffers(m, rank_, seed % 3 == 0, seed, static_cast<std::uint64_t>(k));
        const status s = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                        b.recv.counts, b.recv.displs);
        if (!s.ok()) {
            fail("call " + std::to_string(k) + ": " + s.message());
            ok = false;
        } else if (auto e = check_recv(m, rank_, b.recv, b.recv_data, static_cast<std::uint64_t>(k)); !e.empty()) {
            fail("call " + std::to_string(k) + ": " + e);
            ok = false;
        }
        if ((k + 1) % cycle == 0) {
            const long rss = vm_rss_kib();
            const auto heap = static_cast<long>(mallinfo2().uordblks / 1024);
            if (k >= warm_call && k < warm_call + 3 * cycle) {
                warm = std::min(warm, rss);
                warm_heap = std::min(warm_heap, heap);
            }
            if (k >= calls - 3 * cycle) {
                end = std::min(end, rss);
                end_heap = std::min(end_heap, heap);
            }
        }
        if (std::getenv("FAST_TEST_RSS") && k % 100 == 0)
            std::fprintf(stderr, "[rank %d] call %d VmRSS %ld KiB, heap in use %zu bytes\n", rank_, k, vm_rss_kib(),
                         mallinfo2().uordblks);
    }
    const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    const statistics st = comm.stats();
    if (ok && st.operations != static_cast<std::uint64_t>(calls)) fail("statistics count the wrong number of calls");
    if (ok && st.plans_reused < static_cast<std::uint64_t>(calls / 2 - 1)) fail("the plan cache was not used");
    // Flat from the cycles after a quarter of the calls to the last ones (samples above): VmRSS
    // within allocator noise, and the heap in use (glibc's count of allocated bytes), which
    // shows a leak of ninety bytes per call (measured here: within 128 KiB and 0 KiB).
    const long growth[2] = {end - warm, end_heap - warm_heap};
    // (Under AddressSanitizer freed memory sits in its quarantine and mallinfo2 means nothing:
    // the numbers are printed, not judged; LeakSanitizer checks leaks there.)
    if (ok && !under_asan && growth[0] > 1024)
        fail("VmRSS grew by " + std::to_string(growth[0]) + " KiB after warm-up");
    if (ok && !under_asan && growth[1] > 64)
        fail("the heap in use grew by " + std::to_string(growth[1]) + " KiB after warm-up");
    long worst[2] = {0, 0};
    MPI_Allreduce(growth, worst, 2, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (all_ok(failures_ == 0) && rank_ == 0)
        std::printf("%d calls in %.2f s (%.0f us per call), %llu plans made, %llu reused; from call %d to the end "
                    "VmRSS grew by at most %ld KiB, the heap in use by at most %ld KiB\n",
                    calls, seconds, 1e6 * seconds / calls, static_cast<unsigned long long>(st.plans_made),
                    static_cast<unsigned long long>(st.plans_reused), warm_call + 1, worst[0], worst[1]);
}

void persistent() {
    const int r = size_;
    communicator comm;
    if (status s = create_comm(make_config(r >= 4 ? r / 2 : r), comm); !s.ok()) {
        fail(std::string("create: ") + s.message());
        return;
    }
    const fast::traffic_matrix m = random_skewed(r, 42, 4000);
    rank_buffers b = make_buffers(m, rank_, true, 42);
    alltoallv_request req;
    if (status s = comm.alltoallv_init(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                       b.recv.counts, b.recv.displs, req);
        !s.ok()) {
        fail(std::string("init: ") + s.message());
        return;
    }
    for (int k = 0; k < 30; ++k) {
        // New data in the same buffers every time; scratch grows in between (a bigger matrix).
        for (std::size_t j = 0; j < b.send.counts.size(); ++j)
            for (std::size_t o = 0; o < b.send.counts[j]; ++o)
                b.send_data[b.send.displs[j] + o] =
                    pattern(rank_, static_cast<int>(j), o, static_cast<std::uint64_t>(k));
        std::fill(b.recv_data.begin(), b.recv_data.end(), recv_sentinel);
        if (status s = req.start(); !s.ok()) {
            fail("start " + std::to_string(k) + ": " + s.message());
            break;
        }
        status s;
        if (k % 2 == 0) {
            s = req.wait();
        } else {
            bool done = false;
            while (s.ok() && !done) s = req.test(done);
        }
        if (!s.ok()) {
            fail("run " + std::to_string(k) + ": " + s.message());
            break;
        }
        if (auto e = check_recv(m, rank_, b.recv, b.recv_data, static_cast<std::uint64_t>(k)); !e.empty()) {
            fail("run " + std::to_string(k) + ": " + e);
            break;
        }
        if (k % 10 == 5) // a blocking call in between, with a bigger matrix: scratch may move
            (void)run_case(comm, random_skewed(r, 1000 + static_cast<std::uint64_t>(k), 50000), true,
                           static_cast<std::uint64_t>(k), "alltoallv between persistent runs");
    }
    if (all_ok(failures_ == 0) && rank_ == 0) std::printf("persistent: 30 runs ok\n");
}

void errors() {
    const int r = size_;
    communicator comm;
    if (status s = create_comm(make_config(r >= 4 ? r / 2 : r), comm); !s.ok()) {
        fail(std::string("create: ") + s.message());
        return;
    }
    const fast::traffic_matrix m = random_skewed(r, 9, 1000, 0);
    auto expect = [&](const status& s, errc code, const std::string& fragment, const std::string& name) {
        if (s.code() != code)
            fail(name + ": expected " + std::string(to_string(code)) + ", got " + std::string(to_string(s.code())) +
                 ": " + s.message());
        else if (std::string(s.message()).find(fragment) == std::string::npos)
            fail(name + ": message '" + s.message() + "' lacks '" + fragment + "'");
        if (!same_everywhere(s)) fail(name + ": ranks report different errors: " + s.message());
        if (rank_ == 0) std::printf("%s: %s\n", name.c_str(), s.message());
    };
    { // Rank 3 (or the last) expects a different count from rank 1 than rank 1 sends.
        const int victim = std::min(3, r - 1);
        const int sender = 1 % r;
        rank_buffers b = make_buffers(m, rank_, false, 1);
        std::vector<std::size_t> rc = b.recv.counts;
        if (rank_ == victim) rc[static_cast<std::size_t>(sender)] -= 1;
        const status s =
            comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), rc, b.recv.displs);
        expect(s, errc::count_mismatch,
               "rank " + std::to_string(victim) + " expects " + std::to_string(m(sender, victim) - 1) +
                   " bytes from rank " + std::to_string(sender) + ", rank " + std::to_string(sender) + " sends " +
                   std::to_string(m(sender, victim)),
               "mismatched counts");
        (void)run_case(comm, m, false, 1, "a correct call after the mismatch");
    }
    if (r >= 4) { // Three mismatched pairs on ranks of both servers: the first by receiver, then
                  // sender, and how many.
        rank_buffers b = make_buffers(m, rank_, false, 1);
        std::vector<std::size_t> rc = b.recv.counts;
        if (rank_ == r - 1) rc[0] -= 5; // less: the blocks stay apart
        if (rank_ == 1) {
            rc[static_cast<std::size_t>(r - 1)] -= 7;
            rc[2] -= 1;
        }
        const status s =
            comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), rc, b.recv.displs);
        expect(s, errc::count_mismatch,
               "rank 1 expects " + std::to_string(m(2, 1) - 1) + " bytes from rank 2, rank 2 sends " +
                   std::to_string(m(2, 1)) + " (and 2 more mismatched pairs)",
               "three mismatched pairs");
    }
    if (r > 1) { // The last rank in another call (alltoallv_init) than the others (alltoallv).
        rank_buffers b = make_buffers(m, rank_, false, 8);
        alltoallv_request req;
        const status s = rank_ == r - 1 ? comm.alltoallv_init(b.send_data.data(), b.send.counts, b.send.displs,
                                                              b.recv_data.data(), b.recv.counts, b.recv.displs, req)
                                        : comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs,
                                                         b.recv_data.data(), b.recv.counts, b.recv.displs);
        const std::string call = std::to_string(r >= 4 ? 3 : 2); // the communicator's calls so far
        expect(s, errc::invalid_argument,
               "alltoallv: ranks are in different collective calls: rank 0 in call " + call + " (alltoallv), rank " +
                   std::to_string(r - 1) + " in call " + call + " (alltoallv_init)",
               "different collective calls");
        (void)run_case(comm, m, false, 8, "a correct call after the different calls");
    }
    { // Rank 2 passes too few displacements.
        rank_buffers b = make_buffers(m, rank_, false, 2);
        std::span<const std::size_t> sd(b.send.displs);
        if (rank_ == 2 % r) sd = sd.first(sd.size() - 1);
        const status s =
            comm.alltoallv(b.send_data.data(), b.send.counts, sd, b.recv_data.data(), b.recv.counts, b.recv.displs);
        expect(s, errc::invalid_argument, "rank " + std::to_string(2 % r) + ": sdispls has",
               "invalid arguments on one rank");
    }
    { // Overlapping receive blocks on rank 1.
        rank_buffers b = make_buffers(m, rank_, false, 3);
        std::vector<std::size_t> rd = b.recv.displs;
        if (rank_ == 1 % r && r > 1) rd[1] = rd[0];
        const status s =
            comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), b.recv.counts, rd);
        if (r > 1) expect(s, errc::invalid_argument, "overlap", "overlapping receive blocks");
    }
    { // Zero bytes everywhere, null buffers.
        const std::vector<std::size_t> zero(static_cast<std::size_t>(r), 0);
        const status s = comm.alltoallv(nullptr, zero, zero, nullptr, zero, zero);
        if (!s.ok()) fail(std::string("zero bytes: ") + s.message());
    }
    { // Counts too large to fit int64.
        std::vector<std::size_t> counts(static_cast<std::size_t>(r), 0), displs(counts.size(), 0);
        counts[static_cast<std::size_t>((rank_ + 1) % r)] = std::size_t{1} << 63;
        std::vector<std::size_t> rcounts(counts.size(), 0);
        rcounts[static_cast<std::size_t>((rank_ + r - 1) % r)] = std::size_t{1} << 63;
        char byte = 0;
        const status s = comm.alltoallv(&byte, counts, displs, &byte + 1, rcounts, displs);
        expect(s, errc::invalid_argument, "too large", "counts beyond int64");
    }
    { // Ranks that disagree on the configuration: every rank gets the same error.
        config c = make_config(r >= 4 ? r / 2 : r);
        if (rank_ == r - 1) c.scheduler = scheduler::direct;
        communicator other;
        const status s = create_comm(c, other);
        if (r > 1) expect(s, errc::invalid_argument, "different configurations", "configurations that differ");
        c.scheduler = scheduler::fast;
        if (rank_ == r - 1) c.scale_out_gbps = 0.0125;
        if (r > 1) expect(create_comm(c, other), errc::invalid_argument, "scale_out_gbps", "fabrics that differ");
        c.scale_out_gbps = 0;
        expect(create_comm(c, other), errc::invalid_argument, "config.scale_out_gbps must be positive",
               "a zero bandwidth");
        c.scale_out_gbps = 50;
        c.agreement = rank_ == r - 1 ? agreement::servers : agreement::gather;
        if (r > 1 && std::getenv("FAST_AGREEMENT") == nullptr) // which overrides config.agreement
            expect(create_comm(c, other), errc::invalid_argument,
                   "rank " + std::to_string(r - 1) + " has agreement (config.agreement or FAST_AGREEMENT) = servers",
                   "agreements that differ");
    }
    { // The planner plans for the fabric given: an emulated 100 Mbit/s cluster works as well.
        config c = make_config(r >= 4 ? r / 2 : r);
        c.scale_out_gbps = 0.0125;
        c.scale_up_gbps = 2.0;
        c.alpha_out_us = 50;
        communicator slow;
        if (status s = create_comm(c, slow); !s.ok()) fail(std::string("create with a slow fabric: ") + s.message());
        else (void)run_case(slow, m, true, 5, "a slow fabric");
    }
    { // Device memory this build or this UCX cannot serve.
        config c = make_config(r >= 4 ? r / 2 : r);
        c.memory = memory::cuda;
        communicator other;
        const status s = create_comm(c, other);
        expect(s, errc::unsupported, "cuda", "CUDA memory");
        c.memory = memory::hip;
        expect(create_comm(c, other), errc::unsupported, "HIP", "HIP memory");
    }
    { // gpus_per_server that does not divide the size.
        if (r > 2) {
            communicator other;
            expect(create_comm(make_config(r - 1), other), errc::invalid_argument, "does not divide",
                   "gpus_per_server not dividing the size");
        }
    }
    { // UCX cannot start (no usable transport): a clear status on every rank, and a later
        // creation with a working UCX succeeds in the same process.
        const char* saved = std::getenv("UCX_TLS");
        const std::string tls = saved != nullptr ? saved : "";
        setenv("UCX_TLS", "no_such_transport", 1);
        communicator broken;
        const status s = create_comm(make_config(r >= 4 ? r / 2 : r), broken);
        if (saved != nullptr) setenv("UCX_TLS", tls.c_str(), 1);
        else unsetenv("UCX_TLS");
        expect(s, errc::transport, "rank ", "UCX initialisation failure");
        if (broken.valid()) fail("a communicator whose UCX failed to start claims to be valid");
        communicator again;
        if (status t = create_comm(make_config(r >= 4 ? r / 2 : r), again); !t.ok())
            fail(std::string("creation after the UCX failure: ") + t.message());
        else (void)run_case(again, m, false, 6, "a call after the UCX failure");
    }
    if (r > 1) { // A rank that never arrives: the others fail within the timeout, naming it; the
        // communicator is then failed (a later call says so at once) and the process goes on.
        config c = make_config(r >= 4 ? r / 2 : r);
        c.timeout = std::chrono::milliseconds(2000);
        communicator lagging;
        if (status s = create_comm(c, lagging); !s.ok()) {
            fail(std::string("create: ") + s.message());
        } else if (rank_ != r - 1) {
            rank_buffers b = make_buffers(m, rank_, false, 7);
            auto call = [&] {
                return lagging.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                         b.recv.counts, b.recv.displs);
            };
            const auto t0 = clock_type::now();
            const status s = call();
            const double waited = std::chrono::duration<double>(clock_type::now() - t0).count();
            const std::string absent = "no message within 2000 ms from rank " + std::to_string(r - 1);
            if (s.code() != errc::timeout || std::string(s.message()).find(absent) == std::string::npos)
                fail("a rank that never arrives: expected a timeout naming rank " + std::to_string(r - 1) + ", got " +
                     std::string(to_string(s.code())) + ": " + s.message());
            if (waited > 2.0 + 3.0)
                fail("a rank that never arrives: the call returned after " + std::to_string(waited) + " s");
            if (rank_ == 0) std::printf("a rank that never arrives (after %.2f s): %s\n", waited, s.message());
            const auto t1 = clock_type::now();
            const status again = call();
            if (again.code() != errc::comm_failed || clock_type::now() - t1 > std::chrono::milliseconds(500))
                fail(std::string("the call after a timeout: expected comm_failed at once, got ") + again.message());
        }
        // The absent rank keeps its communicator (a rank that left would be a peer failure) and
        // waits in MPI, not in the executor, until the others are done.
        MPI_Barrier(MPI_COMM_WORLD);
    }
    (void)run_case(comm, m, false, 5, "a correct call at the end");
}

// A rank dies inside a call; every survivor must report an error within the timeout (plus
// slack), and a later call must fail at once. Results go to files in --out (mpirun cannot carry
// them: it is told not to abort the job when a rank exits early).
int kill_test(int argc, char** argv) {
    const std::string out = option(argc, argv, "--out", "");
    const std::string mode = option(argc, argv, "--mode", "persistent");
    const int victim = std::atoi(option(argc, argv, "--victim", "1").c_str());
    const int timeout_ms = 3000;
    auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream f(out + "/" + name);
        f << text << "\n";
    };
    config c = make_config(size_ >= 4 ? size_ / 2 : size_);
    c.timeout = std::chrono::milliseconds(timeout_ms);
    communicator comm;
    if (status s = create_comm(c, comm); !s.ok() || failures_ > 0) {
        write("rank-" + std::to_string(rank_),
              "fail create: " + std::string(s.ok() ? "not the agreement FAST_AGREEMENT names" : s.message()));
        return 1;
    }
    // Dense traffic: every survivor exchanges data with the victim in the plan.
    const fast::traffic_matrix m = fast::traffic_matrix::Constant(size_, size_, 200000);
    rank_buffers b = make_buffers(m, rank_, false, 1);
    for (int k = 0; k < 3; ++k) { // calls that work
        const status s = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                        b.recv.counts, b.recv.displs);
        if (!s.ok()) {
            write("rank-" + std::to_string(rank_), std::string("fail warm-up: ") + s.message());
            return 1;
        }
    }
    alltoallv_request req;
    if (mode == "persistent") {
        if (status s = comm.alltoallv_init(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                           b.recv.counts, b.recv.displs, req);
            !s.ok()) {
            write("rank-" + std::to_string(rank_), std::string("fail init: ") + s.message());
            return 1;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == victim) {
        write("victim", "started");
        if (mode == "persistent") (void)req.start(); // the run is in flight: sends posted
        _exit(0);                                    // and the process is gone
    }
    const auto t0 = clock_type::now();
    status s;
    if (mode == "persistent") {
        s = req.start();
        if (s.ok()) s = req.wait();
    } else {
        s = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), b.recv.counts,
                           b.recv.displs);
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count();
    const auto t1 = clock_type::now();
    const status again = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                        b.recv.counts, b.recv.displs);
    const auto again_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t1).count();
    // The error names the victim ("rank 1 failed", "from rank 1"), whoever saw it first.
    const std::string named = "rank " + std::to_string(victim);
    const std::string text = s.message();
    bool names_victim = false;
    for (std::size_t at = text.find(named); at != std::string::npos && !names_victim; at = text.find(named, at + 1))
        names_victim =
            at + named.size() == text.size() || std::isdigit(static_cast<unsigned char>(text[at + named.size()])) == 0;
    std::string verdict;
    if (s.ok()) verdict = "fail: the call succeeded although rank " + std::to_string(victim) + " died";
    else if (!names_victim) verdict = "fail: the error does not name rank " + std::to_string(victim) + ": " + text;
    else if (ms > timeout_ms + 5000) verdict = "fail: the error took " + std::to_string(ms) + " ms";
    else if (again.ok() || again_ms > timeout_ms + 5000) verdict = "fail: the next call did not fail at once";
    else
        verdict = "pass (" + std::string(to_string(comm.agreement())) + " agreement) " +
                  std::string(to_string(s.code())) + " after " + std::to_string(ms) + " ms: " + s.message() +
                  " | next call: " + again.message();
    write("rank-" + std::to_string(rank_), verdict);
    std::fflush(stdout);
    _exit(0); // MPI cannot be finalised with a dead rank
}

void megatron(int argc, char** argv) {
    const std::string file = option(argc, argv, "--file", "");
    const int count = std::atoi(option(argc, argv, "--matrices", "8").c_str());
    const std::int64_t unit = std::atoll(option(argc, argv, "--unit", "16").c_str());
    const int gpus = std::atoi(option(argc, argv, "--gpus-per-server", "0").c_str());
    std::vector<fast::traffic_matrix> all;
    try {
        all = fast::read_matrices_file(file, 32, unit);
    } catch (const std::exception& e) {
        fail(std::string("reading ") + file + ": " + e.what());
        return;
    }
    // The traces are 32 ranks (4 servers x 8 GPUs). With fewer ranks, GPU g of server s maps to
    // rank s * G' + g * G' / 8 and entries add up: the same servers, fewer GPUs each.
    const int r = size_;
    const int servers = 4;
    if (r % servers != 0) {
        fail("megatron needs a multiple of 4 ranks");
        return;
    }
    const int g2 = r / servers;
    auto fold = [&](int rank32) { return (rank32 / 8) * g2 + (rank32 % 8) * g2 / 8; };
    communicator comm;
    if (status s = create_comm(make_config(gpus > 0 ? gpus : g2), comm); !s.ok()) {
        fail(std::string("create: ") + s.message());
        return;
    }
    const std::size_t stride = std::max<std::size_t>(1, all.size() / static_cast<std::size_t>(std::max(1, count)));
    int done = 0;
    std::size_t steps = 0;
    for (std::size_t k = 0; k < all.size() && done < count; k += stride, ++done) {
        fast::traffic_matrix m = fast::traffic_matrix::Zero(r, r);
        for (int i = 0; i < 32; ++i)
            for (int j = 0; j < 32; ++j) m(fold(i), fold(j)) += all[k](i, j);
        if (!run_case(comm, m, k % 2 == 1, k, "megatron matrix " + std::to_string(k))) break;
        steps += comm.stats().last_plan_steps;
    }
    if (all_ok(failures_ == 0) && rank_ == 0)
        std::printf("megatron: %d matrices (%d ranks, 4 servers, %lld bytes per token), %.1f plan steps on average\n",
                    done, r, static_cast<long long>(unit), static_cast<double>(steps) / std::max(1, done));
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    const std::string scenario = argc > 1 ? argv[1] : "patterns";
    const std::string flow = option(argc, argv, "--flow", "rendezvous");
    if (flow == "credits") flow_ = flow_control::credits;
    else if (flow != "rendezvous") fail("unknown --flow " + flow);
    if (scenario == "kill") return kill_test(argc, argv);
    if (scenario == "patterns") patterns(argc, argv);
    else if (scenario == "repeat") repeat(argc, argv);
    else if (scenario == "persistent") persistent();
    else if (scenario == "errors") errors();
    else if (scenario == "megatron") megatron(argc, argv);
    else fail("unknown scenario " + scenario);
    const bool ok = all_ok(failures_ == 0);
    const char* agreement = std::getenv("FAST_AGREEMENT");
    if (rank_ == 0)
        std::printf("%s %s on %d ranks (agreement: %s)\n", scenario.c_str(), ok ? "passed" : "FAILED", size_,
                    agreement != nullptr ? agreement : "automatic");
    MPI_Finalize();
    return ok ? 0 : 1;
}
