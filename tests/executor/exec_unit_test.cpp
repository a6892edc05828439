// Single-process tests of the executor: grouping ranks into servers, compiling plans into
// per-rank programs against arbitrary user layouts (checked by running every rank's program in
// one process, byte for byte), and the API on communicators without MPI (one rank, and several
// ranks as threads with an in-process allgather). The count agreement: count_agreement_test.cpp.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

#include <fast/baselines.hpp>
#include <fast/exec/exec.hpp>
#include <fast/layout.hpp>
#include <fast/planner.hpp>
#include <fast/verify.hpp>
#include <fast/workload.hpp>

#include "../unit/rank_program_check.hpp"
#include "exec_support.hpp"
#include "fabric_environment.hpp"
#include "hosts.hpp"
#include "program.hpp"
#include "worker.hpp"

using namespace fast::exec;
using namespace exec_test;

// Allocation failures on demand: with fail_countdown = n > 0, the n-th operator new from now on
// this thread fails (std::bad_alloc, or nullptr for nothrow). This binary's replacements, over
// malloc and free; every form that operator delete frees, so that sanitizers see matching pairs.
namespace {
thread_local long fail_countdown = 0;
} // namespace

void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    if (fail_countdown > 0 && --fail_countdown == 0) return nullptr;
    return std::malloc(n == 0 ? 1 : n);
}
void* operator new(std::size_t n) {
    if (void* p = operator new(n, std::nothrow)) return p;
    throw std::bad_alloc();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete" // free is this operator new's match
#endif
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

TEST_CASE("ranks group into servers by host or by gpus_per_server") {
    using detail::group_ranks;
    const std::vector<std::string> two_hosts{"a", "a", "a", "b", "b", "b"};
    auto g = group_ranks(two_hosts, 0);
    REQUIRE(g.error.empty());
    CHECK(g.servers == 2);
    CHECK(g.gpus_per_server == 3);

    g = group_ranks(two_hosts, 2); // explicit: emulate 3 servers of 2 on two hosts
    REQUIRE(g.error.empty());
    CHECK(g.servers == 3);

    g = group_ranks(two_hosts, 4);
    CHECK(g.error.find("does not divide") != std::string::npos);

    g = group_ranks({"a", "b", "a", "b"}, 0);
    CHECK(g.error.find("not contiguous") != std::string::npos);
    CHECK(g.error.find("rank 0 and rank 2") != std::string::npos);

    g = group_ranks({"a", "a", "b"}, 0);
    CHECK(g.error.find("different numbers of ranks") != std::string::npos);

    g = group_ranks({"a"}, 0);
    REQUIRE(g.error.empty());
    CHECK(g.servers == 1);
    CHECK(g.gpus_per_server == 1);

    CHECK(!detail::host_key().empty());
}

namespace {

// Runs every rank's compiled program (planner::make_rank, compiled against the rank's own
// layout) in one process: per step, local copies, then each send's bytes gathered from its
// segments and scattered into the matching receive's segments (matched by tag, checked against
// ranks and sizes). Returns "" if every receive buffer ends up exactly right. With
// `single_segments`, as the executor: the plan splits blocks unless every rank's layout is
// contiguous, and every message must be one segment on each side.
std::string run_in_process(const fast::topology& t, const fast::plan_options& o, const fast::traffic_matrix& m,
                           bool gapped, bool single_segments, std::uint64_t seed) {
    using namespace detail;
    const int r = static_cast<int>(m.rows());
    std::vector<rank_buffers> buf(static_cast<std::size_t>(r));
    bool contiguous = true;
    for (int k = 0; k < r; ++k) {
        const auto uk = static_cast<std::size_t>(k);
        buf[uk] = make_buffers(m, k, gapped, seed);
        contiguous = contiguous && contiguous_layout(buf[uk].send.counts, buf[uk].send.displs, buf[uk].recv.counts,
                                                     buf[uk].recv.displs) == (send_contiguous | recv_contiguous);
    }
    fast::plan_options options = o;
    options.split_blocks = single_segments && !contiguous;
    fast::planner planner(t, options);
    if (const fast::verification v = fast::verify(planner.make(m), m); !v.ok()) return "the whole plan: " + v.message();
    std::vector<std::vector<std::uint8_t>> scratch(static_cast<std::size_t>(r));
    std::vector<program> prog(static_cast<std::size_t>(r));
    std::vector<buffer_layout> send(static_cast<std::size_t>(r)), recv(static_cast<std::size_t>(r));
    std::uint64_t steps = 0;
    for (int k = 0; k < r; ++k) {
        const auto uk = static_cast<std::size_t>(k);
        const fast::rank_program& rp = planner.make_rank(m, k);
        scratch[uk].assign(static_cast<std::size_t>(rp.scratch_bytes) + 1, 0x5A);
        send[uk].assign(buf[uk].send.counts, buf[uk].send.displs);
        recv[uk].assign(buf[uk].recv.counts, buf[uk].recv.displs);
        const std::string e = compile_program(rp, send[uk], recv[uk], single_segments, prog[uk]);
        if (!e.empty()) return "compile rank " + std::to_string(k) + ": " + e;
        if (steps != 0 && prog[uk].plan_steps != steps) return "ranks disagree on the number of steps";
        steps = prog[uk].plan_steps;
    }
    auto address = [&](int k, const segment& s) -> std::uint8_t* {
        const auto uk = static_cast<std::size_t>(k);
        std::uint8_t* base = s.where == region::send   ? buf[uk].send_data.data()
                             : s.where == region::recv ? buf[uk].recv_data.data()
                                                       : scratch[uk].data();
        return base + s.offset;
    };
    std::vector<std::size_t> cursor(static_cast<std::size_t>(r), 0); // next program step per rank
    for (std::size_t step = 0; step < steps; ++step) {
        std::map<std::pair<std::uint64_t, int>, std::pair<int, const op*>> sends, recvs;
        for (int k = 0; k < r; ++k) {
            const program& pk = prog[static_cast<std::size_t>(k)];
            std::size_t& c = cursor[static_cast<std::size_t>(k)];
            if (c >= pk.steps() || pk.ops[pk.step_offsets[c]].step != step) continue;
            for (std::size_t i = pk.step_offsets[c]; i < pk.step_offsets[c + 1]; ++i) {
                const op& o = pk.ops[i];
                if (o.step != step) return "an op of the wrong step in a program step";
                if (o.kind == op_kind::copy) {
                    std::vector<std::uint8_t> bytes;
                    for (std::uint32_t s = 0; s < o.count; ++s) {
                        const segment& g = pk.segments[o.first + s];
                        bytes.insert(bytes.end(), address(k, g), address(k, g) + g.length);
                    }
                    if (bytes.size() != o.bytes) return "copy segments do not add up";
                    std::size_t at = 0;
                    for (std::uint32_t s = 0; s < o.dst_count; ++s) {
                        const segment& g = pk.segments[o.dst_first + s];
                        std::memcpy(address(k, g), bytes.data() + at, g.length);
                        at += g.length;
                    }
                    if (at != o.bytes) return "copy destination segments do not add up";
                } else {
                    // A tag is unique at its receiver (the sender is in it).
                    const int receiver = o.kind == op_kind::send ? o.peer : k;
                    auto& map = o.kind == op_kind::send ? sends : recvs;
                    if (!map.emplace(std::pair{o.tag, receiver}, std::pair{k, &o}).second)
                        return "two messages of one step to one rank share tag " + std::to_string(o.tag);
                }
            }
            ++c;
        }
        if (sends.size() != recvs.size()) return "step " + std::to_string(step) + ": sends and receives do not pair up";
        for (const auto& [tag, s] : sends) {
            const auto it = recvs.find(tag);
            if (it == recvs.end()) return "a send without a receive, tag " + std::to_string(tag.first);
            const auto [from, so] = s;
            const auto [to, ro] = it->second;
            if (so->peer != to || ro->peer != from || so->bytes != ro->bytes)
                return "tag " + std::to_string(tag.first) + " pairs the wrong ranks or sizes";
            std::vector<std::uint8_t> bytes;
            for (std::uint32_t k = 0; k < so->count; ++k) {
                const segment& g = prog[static_cast<std::size_t>(from)].segments[so->first + k];
                bytes.insert(bytes.end(), address(from, g), address(from, g) + g.length);
            }
            if (bytes.size() != so->bytes) return "send segments do not add up";
            std::size_t at = 0;
            for (std::uint32_t k = 0; k < ro->count; ++k) {
                const segment& g = prog[static_cast<std::size_t>(to)].segments[ro->first + k];
                std::memcpy(address(to, g), bytes.data() + at, g.length);
                at += g.length;
            }
            if (at != ro->bytes) return "receive segments do not add up";
            if (single_segments && (so->count != 1 || ro->count != 1)) return "a message with several segments";
        }
    }
    for (int k = 0; k < r; ++k) {
        const auto uk = static_cast<std::size_t>(k);
        if (cursor[uk] != prog[uk].steps()) return "rank " + std::to_string(k) + " has ops in no plan step";
        if (auto e = check_recv(m, k, buf[uk].recv, buf[uk].recv_data); !e.empty()) return e;
    }
    return {};
}

} // namespace

TEST_CASE("compiled programs deliver every byte for any layout") {
    struct shape {
        int servers, gpus;
    };
    const shape shapes[] = {{1, 1}, {1, 3}, {2, 1}, {2, 2}, {2, 4}, {4, 2}, {3, 3}, {4, 4}};
    int checked = 0;
    for (const shape sh : shapes) {
        const fast::topology t = fast::make_topology(sh.servers, sh.gpus);
        const int r = t.ranks();
        std::vector<fast::traffic_matrix> matrices = {
            random_skewed(r, 1, 3000), random_skewed(r, 2, 200, 50), fast::traffic_matrix::Zero(r, r),
            self_only(r, 100),         hot_pair(r, 0, r - 1, 12345), fast::make_uniform(t, 7000),
        };
        for (std::size_t mi = 0; mi < matrices.size(); ++mi) {
            const fast::traffic_matrix& m = matrices[mi];
            for (const auto sched : {fast::scheduler::fast, fast::scheduler::direct, fast::scheduler::spreadout}) {
                for (const auto pol : {fast::policy::rail_packed, fast::policy::exact}) {
                    if (sched != fast::scheduler::fast && pol != fast::policy::rail_packed) continue;
                    fast::plan_options o;
                    o.scheduler = sched;
                    o.policy = pol;
                    for (const bool gapped : {false, true})
                        for (const bool single : {false, true}) {
                            INFO(sh.servers << "x" << sh.gpus << " matrix " << mi << " " << fast::to_string(sched)
                                            << " " << fast::to_string(pol) << " gapped " << gapped
                                            << " single segments " << single);
                            CHECK(run_in_process(t, o, m, gapped, single, mi + 10) == "");
                            ++checked;
                        }
                }
            }
        }
    }
    CHECK(checked > 300);
}

TEST_CASE("a packed layout compiles to one segment per message") {
    const fast::topology t = fast::make_topology(2, 4);
    const fast::traffic_matrix m = random_skewed(t.ranks(), 5, 5000, 0);
    fast::planner planner(t);
    fast::test::check_rank_programs(planner, m); // the programs compiled below are the verified plan's parts
    for (int k = 0; k < t.ranks(); ++k) {
        const rank_buffers b = make_buffers(m, k, false, 1);
        detail::buffer_layout send, recv;
        send.assign(b.send.counts, b.send.displs);
        recv.assign(b.recv.counts, b.recv.displs);
        CHECK(detail::contiguous_layout(b.send.counts, b.send.displs, b.recv.counts, b.recv.displs) ==
              (detail::send_contiguous | detail::recv_contiguous));
        detail::program prog;
        const fast::rank_program& rp = planner.make_rank(m, k);
        REQUIRE(detail::compile_program(rp, send, recv, false, prog).empty());
        for (const detail::op& o : prog.ops)
            if (o.kind != detail::op_kind::copy) CHECK(o.count == 1);
        CHECK(prog.steps() <= rp.steps);
        // Single segments on packed layouts need no split blocks: the same messages.
        detail::program whole;
        REQUIRE(detail::compile_program(rp, send, recv, true, whole).empty());
        CHECK(whole.ops.size() == prog.ops.size());
    }
}

TEST_CASE("layout flags: blocks back to back in rank order, empty blocks ignored") {
    using detail::contiguous_layout;
    const std::vector<std::size_t> counts{4, 0, 3, 5}, packed{0, 99, 4, 7}, swapped{3, 0, 0, 7}, gap{0, 4, 5, 8};
    CHECK(contiguous_layout(counts, packed, counts, packed) == (detail::send_contiguous | detail::recv_contiguous));
    CHECK(contiguous_layout(counts, swapped, counts, packed) == detail::recv_contiguous);
    CHECK(contiguous_layout(counts, packed, counts, gap) == detail::send_contiguous);
    const std::vector<std::size_t> none{0, 0, 0, 0}, any{7, 1, 3, 2};
    CHECK(contiguous_layout(none, any, none, any) == (detail::send_contiguous | detail::recv_contiguous));
}

// --- communicators without MPI ------------------------------------------------------------------

namespace {

bootstrap single_rank() {
    return {0, 1, [](const void* s, void* r, std::size_t n) {
                std::memcpy(r, s, n);
                return status{};
            }};
}

} // namespace

TEST_CASE("status") {
    status ok;
    CHECK(ok.ok());
    CHECK(std::string(ok.message()) == "ok");
    status bad(errc::timeout, "rank 1: too slow");
    CHECK(!bad);
    CHECK(bad.code() == errc::timeout);
    CHECK(std::string(bad.message()) == "rank 1: too slow");
    const status copy = bad;
    CHECK(std::string(copy.message()) == "rank 1: too slow");
    CHECK(to_string(errc::count_mismatch) == "count_mismatch");
}

TEST_CASE("blocking progress: chosen by config or FAST_PROGRESS, a bad value named") {
    config cfg;
    cfg.timeout = std::chrono::milliseconds(10000);
    cfg.progress = progress::blocking;
    communicator comm;
    REQUIRE(create(single_rank(), cfg, comm).ok());
    fast::traffic_matrix m(1, 1);
    m(0, 0) = 5000;
    rank_buffers b = make_buffers(m, 0, false, 4);
    REQUIRE(comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), b.recv.counts,
                           b.recv.displs)
                .ok());
    CHECK(check_recv(m, 0, b.recv, b.recv_data) == "");
    ::setenv("FAST_PROGRESS", "sometimes", 1);
    communicator bad;
    const status s = create(single_rank(), config{}, bad);
    ::unsetenv("FAST_PROGRESS");
    CHECK(s.code() == errc::invalid_argument);
    CHECK(std::string(s.message()).find("FAST_PROGRESS must be polling or blocking, got 'sometimes'") !=
          std::string::npos);
}

TEST_CASE("the count agreement: chosen by config or FAST_AGREEMENT, automatic by the cost model, a bad value named") {
    fast::traffic_matrix m(1, 1);
    m(0, 0) = 3000;
    config cfg;
    cfg.timeout = std::chrono::milliseconds(10000);
    communicator comm;
    REQUIRE(create(single_rank(), cfg, comm).ok());
    CHECK(comm.agreement() == agreement::gather); // one rank: nothing to exchange, gather on ties
    ::setenv("FAST_AGREEMENT", "servers", 1);
    communicator servers;
    const status made = create(single_rank(), cfg, servers);
    ::setenv("FAST_AGREEMENT", "everyone", 1);
    communicator bad;
    const status refused = create(single_rank(), cfg, bad);
    ::unsetenv("FAST_AGREEMENT");
    REQUIRE(made.ok());
    CHECK(servers.agreement() == agreement::servers);
    rank_buffers b = make_buffers(m, 0, true, 4);
    REQUIRE(servers
                .alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), b.recv.counts,
                           b.recv.displs)
                .ok());
    CHECK(check_recv(m, 0, b.recv, b.recv_data) == "");
    CHECK(refused.code() == errc::invalid_argument);
    CHECK(std::string(refused.message()).find("FAST_AGREEMENT must be automatic, gather or servers, got 'everyone'") !=
          std::string::npos);
    cfg.agreement = static_cast<agreement>(7);
    CHECK(create(single_rank(), cfg, bad).code() == errc::invalid_argument);
}

TEST_CASE("FAST_FABRIC: a fabric file's figures, or one clear error at creation") {
    const std::string file = "/tmp/fast_exec_fabric_" + std::to_string(::getpid()) + ".json";
    const std::string head = R"({"format": "fast-fabric/1", "servers": 1, "gpus_per_server": 1, "scale_up_gbps": 300,
                                 "alpha_up_us": 2, "alpha_out_us": 7, "nics": )";
    auto create_with = [&](const std::string& text) {
        std::ofstream(file) << text;
        communicator comm;
        return create(single_rank(), config{}, comm);
    };
    ::setenv("FAST_FABRIC", file.c_str(), 1);
    std::ofstream(file) << head + R"({"gbps": 25}})";
    fabric figures;
    detail::fabric_shape shape;
    const std::string read = detail::fabric_from_environment(figures, shape);
    const status made = create_with(head + R"({"gbps": 25}})");
    const status bad = create_with(head + R"({"gbps": "fast"}})");
    const status two_nics = create_with(head + R"({"nics_per_gpu": 2, "gbps": 25}})"); // planned at 50
    const status two_servers = create_with(R"({"format": "fast-fabric/1", "servers": 2, "gpus_per_server": 1,
        "scale_up_gbps": 300, "alpha_up_us": 2, "alpha_out_us": 7, "nics": {"gbps": 25}})");
    ::unsetenv("FAST_FABRIC");
    std::remove(file.c_str());
    CHECK(read == "");
    CHECK(figures == fabric{300, 25, 2, 7});
    CHECK((shape.servers == 1 && shape.gpus_per_server == 1));
    CHECK(made.ok());
    CHECK(two_nics.ok());
    for (const status& s : {bad, two_servers}) CHECK(s.code() == errc::invalid_argument);
    CHECK_THAT(bad.message(),
               Catch::Contains("FAST_FABRIC: " + file + ": nics.gbps: expected a number >= 0, got \"fast\""));
    CHECK_THAT(two_servers.message(),
               Catch::Contains("FAST_FABRIC describes 2 servers x 1 GPUs, but the ranks form 1 servers x 1"));
}

TEST_CASE("a one-rank communicator copies, checks its arguments and stays usable") {
    config cfg;
    cfg.timeout = std::chrono::milliseconds(10000);
    communicator comm;
    CHECK(!comm.valid());
    CHECK(comm.alltoallv(nullptr, {}, {}, nullptr, {}, {}).code() == errc::invalid_argument);
    status s = create(single_rank(), cfg, comm);
    REQUIRE(s.ok());
    REQUIRE(comm.valid());
    CHECK(comm.size() == 1);
    CHECK(comm.servers() == 1);

    for (const bool gapped : {false, true}) {
        fast::traffic_matrix m(1, 1);
        m(0, 0) = 4099;
        rank_buffers b = make_buffers(m, 0, gapped, 3);
        s = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), b.recv.counts,
                           b.recv.displs);
        REQUIRE(s.ok());
        CHECK(check_recv(m, 0, b.recv, b.recv_data) == "");
    }
    CHECK(comm.stats().plans_made == 1);
    CHECK(comm.stats().plans_reused == 1);

    // Zero bytes, null buffers.
    const std::vector<std::size_t> zero{0};
    CHECK(comm.alltoallv(nullptr, zero, zero, nullptr, zero, zero).ok());

    // Invalid arguments: a clear status, and the communicator stays usable.
    const std::vector<std::size_t> two{1, 1}, one{8}, at{0};
    std::vector<char> data(64);
    s = comm.alltoallv(data.data(), two, at, data.data() + 32, one, at);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(std::string(s.message()).find("sendcounts has 2 entries, expected 1") != std::string::npos);
    s = comm.alltoallv(nullptr, one, at, data.data(), one, at);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(std::string(s.message()).find("send is null") != std::string::npos);
    s = comm.alltoallv(data.data(), one, at, data.data() + 4, one, at);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(std::string(s.message()).find("overlaps") != std::string::npos);
    const std::vector<std::size_t> huge{std::size_t{1} << 63};
    s = comm.alltoallv(data.data(), huge, at, data.data() + 32, huge, at);
    CHECK(s.code() == errc::invalid_argument);
    s = comm.alltoallv(data.data(), one, at, data.data() + 32, std::vector<std::size_t>{7}, at);
    CHECK(s.code() == errc::count_mismatch);
    CHECK(std::string(s.message()) == "alltoallv: rank 0 expects 7 bytes from rank 0, rank 0 sends 8");
    std::memset(data.data(), 3, 8);
    s = comm.alltoallv(data.data(), one, at, data.data() + 32, one, at);
    REQUIRE(s.ok());
    CHECK(data[32 + 7] == 3);

    // Persistent: init once, start/wait many times.
    fast::traffic_matrix m(1, 1);
    m(0, 0) = 777;
    rank_buffers b = make_buffers(m, 0, true, 9);
    alltoallv_request req;
    CHECK(req.start().code() == errc::invalid_argument);
    REQUIRE(comm.alltoallv_init(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(), b.recv.counts,
                                b.recv.displs, req)
                .ok());
    for (int k = 0; k < 5; ++k) {
        std::fill(b.recv_data.begin(), b.recv_data.end(), recv_sentinel);
        REQUIRE(req.start().ok());
        CHECK(req.active());
        CHECK(comm.alltoallv(nullptr, zero, zero, nullptr, zero, zero).code() == errc::busy);
        REQUIRE(req.wait().ok());
        CHECK(!req.active());
        CHECK(check_recv(m, 0, b.recv, b.recv_data) == "");
    }
}

TEST_CASE("an exception inside a call never leaves the communicator busy") {
    // Every allocation of a first call in turn throws: whatever the call returns, the next one
    // is not `busy` (an exception after the ranks agreed fails the communicator instead).
    fast::traffic_matrix m(1, 1);
    m(0, 0) = 4099;
    rank_buffers b = make_buffers(m, 0, true, 5);
    for (const bool persistent : {false, true}) {
        bool finished = false;
        long n = 1;
        for (; n < 20000 && !finished; ++n) {
            config cfg;
            cfg.timeout = std::chrono::milliseconds(10000);
            communicator comm;
            REQUIRE(create(single_rank(), cfg, comm).ok());
            alltoallv_request req;
            fail_countdown = n;
            const status s = persistent ? comm.alltoallv_init(b.send_data.data(), b.send.counts, b.send.displs,
                                                              b.recv_data.data(), b.recv.counts, b.recv.displs, req)
                                        : comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs,
                                                         b.recv_data.data(), b.recv.counts, b.recv.displs);
            finished = fail_countdown > 0; // the n-th allocation never came
            fail_countdown = 0;
            INFO("persistent " << persistent << ", allocation " << n << ": " << s.message());
            if (finished) {
                CHECK(s.ok());
                break;
            }
            const status next = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                               b.recv.counts, b.recv.displs);
            INFO("then: " << next.message());
            CHECK((next.ok() || (!s.ok() && next.code() == errc::comm_failed)));
        }
        CHECK(finished);
        CHECK(n > 10);
    }
}

TEST_CASE("creation reports bad configurations and missing device support") {
    communicator comm;
    config cfg;
    cfg.timeout = std::chrono::milliseconds(0);
    status s = create(single_rank(), cfg, comm);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(std::string(s.message()).find("timeout must be positive") != std::string::npos);
    CHECK(!comm.valid());

    cfg = config{};
    cfg.memory = memory::cuda;
    s = create(single_rank(), cfg, comm);
    CHECK(s.code() == errc::unsupported);
    CHECK(std::string(s.message()).find("rank 0") != std::string::npos);
    INFO(s.message());
    CHECK((std::string(s.message()).find("without CUDA") != std::string::npos ||
           std::string(s.message()).find("does not support cuda") != std::string::npos ||
           std::string(s.message()).find("CUDA device") != std::string::npos));

    cfg = config{};
    cfg.gpus_per_server = 2;
    s = create(single_rank(), cfg, comm);
    CHECK(s.code() == errc::invalid_argument);
    CHECK(std::string(s.message()).find("does not divide") != std::string::npos);

    CHECK(create(bootstrap{}, config{}, comm).code() == errc::invalid_argument);
}

TEST_CASE("a message nobody receives is found by its tag and stays queued") {
    using namespace fast::exec::detail;
    worker w[2];
    std::vector<unsigned char> address[2];
    for (int r = 0; r < 2; ++r) {
        REQUIRE(w[r].init(r, 2, UCS_MEMORY_TYPE_HOST, false) == "");
        REQUIRE(w[r].address(address[r]) == "");
    }
    for (int r = 0; r < 2; ++r) REQUIRE(w[r].connect({address[0].data(), address[1].data()}, {1, 1}, {0, 0}) == "");
    const std::uint64_t tag = make_tag(7, data_tag(1, 3));
    const char payload[] = "stray";
    op_slot sent;
    REQUIRE(w[0].send(1, payload, sizeof payload, false, tag, sent, true) != UCS_ERR_NO_MEMORY);
    std::uint64_t seen = 0;
    std::size_t length = 0;
    bool found = false;
    for (int k = 0; k < 1000000 && !(found && sent.done); ++k) {
        (void)w[0].progress();
        (void)w[1].progress();
        found = w[1].probe_unexpected(tag, ~std::uint64_t{0}, seen, length);
    }
    REQUIRE(found);
    CHECK(sent.status == UCS_OK);
    CHECK(seen == tag);
    CHECK(length == sizeof payload);
    CHECK(tag_seq(seen) == 7);
    CHECK(tag_sender(seen) == 1);
    CHECK(tag_pair_index(seen) == 3);
    // Any data tag finds it; another message, another call or a control tag does not.
    CHECK(w[1].probe_unexpected(0, tag_control, seen, length));
    CHECK_FALSE(w[1].probe_unexpected(tag + 1, ~std::uint64_t{0}, seen, length));
    CHECK_FALSE(w[1].probe_unexpected(make_tag(8, 0), tag_control | (tag_seq_mask << tag_seq_shift), seen, length));
    CHECK_FALSE(w[1].probe_unexpected(tag_control, tag_control, seen, length));
    // Probing leaves it queued: a receive still gets it.
    char got[sizeof payload] = {};
    op_slot received;
    (void)w[1].recv(got, sizeof got, false, tag, received, true);
    for (int k = 0; k < 1000000 && !received.done; ++k) (void)w[1].progress();
    REQUIRE(received.done);
    CHECK(received.status == UCS_OK);
    CHECK(std::string(got) == "stray");
    CHECK_FALSE(w[1].probe_unexpected(0, 0, seen, length));
}

TEST_CASE("ranks as threads: the callback bootstrap, both schedulers and agreements, skewed non-packed traffic") {
    constexpr int ranks = 4;
    for (const auto sched : {scheduler::fast, scheduler::direct})
        for (const auto agreed : {agreement::gather, agreement::servers}) {
            thread_allgather gather(ranks);
            std::vector<std::string> errors(ranks);
            std::vector<std::thread> threads;
            for (int k = 0; k < ranks; ++k)
                threads.emplace_back([&, k] {
                    config cfg;
                    cfg.gpus_per_server = 2;
                    cfg.scheduler = sched;
                    cfg.agreement = agreed;
                    cfg.timeout = std::chrono::milliseconds(20000);
                    communicator comm;
                    if (status s = create(gather.boot(k), cfg, comm); !s.ok()) {
                        errors[static_cast<std::size_t>(k)] = s.message();
                        return;
                    }
                    if (comm.agreement() != agreed) errors[static_cast<std::size_t>(k)] = "another agreement in force";
                    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
                        const fast::traffic_matrix m = random_skewed(ranks, seed, 20000);
                        rank_buffers b = make_buffers(m, k, seed % 2 == 0, seed);
                        status s = comm.alltoallv(b.send_data.data(), b.send.counts, b.send.displs, b.recv_data.data(),
                                                  b.recv.counts, b.recv.displs);
                        if (!s.ok()) {
                            errors[static_cast<std::size_t>(k)] = s.message();
                            return;
                        }
                        if (auto e = check_recv(m, k, b.recv, b.recv_data); !e.empty()) {
                            errors[static_cast<std::size_t>(k)] = e;
                            return;
                        }
                    }
                });
            for (auto& t : threads) t.join();
            for (int k = 0; k < ranks; ++k) CHECK(errors[static_cast<std::size_t>(k)] == "");
        }
}
