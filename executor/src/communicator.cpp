#include "communicator_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <string_view>
#include <type_traits>

#include <fast/error.hpp>

#include "hosts.hpp"

namespace fast::exec {

namespace detail {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::uint64_t wire_magic = 0x4641535445584543ull; // "FASTEXEC"
constexpr std::uint32_t wire_version = 3;

template <std::size_t N>
void put_text(char (&dst)[N], std::string_view s) noexcept {
    const std::size_t n = std::min(s.size(), N - 1);
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

template <std::size_t N>
std::string get_text(const char (&src)[N]) {
    return std::string(src, strnlen(src, N));
}

// What every rank contributes at creation (first round).
struct hello {
    std::uint64_t magic;
    std::uint32_t version;
    std::int32_t error; // errc of a local failure, 0 if none
    std::int32_t size;
    std::int32_t gpus_per_server;
    std::int32_t scheduler;
    std::int32_t memory;
    std::int32_t iov;
    std::int32_t flow;
    exec::fabric fabric;
    std::uint64_t address_bytes;
    char host[320];
    char text[256];
};

// The fabric's figures by name, for messages that compare them field by field.
struct fabric_field {
    const char* name;
    double exec::fabric::*value;
};
constexpr fabric_field fabric_fields[] = {{"scale_up_gbps", &exec::fabric::scale_up_gbps},
                                          {"scale_out_gbps", &exec::fabric::scale_out_gbps},
                                          {"alpha_up_us", &exec::fabric::alpha_up_us},
                                          {"alpha_out_us", &exec::fabric::alpha_out_us}};

// The executor's defaults are the planner's (both the h200 preset).
static_assert(exec::fabric{}.scale_up_gbps == fast::topology{}.scale_up_gbps &&
              exec::fabric{}.scale_out_gbps == fast::topology{}.scale_out_gbps &&
              exec::fabric{}.alpha_up_us == fast::topology{}.alpha_up_us &&
              exec::fabric{}.alpha_out_us == fast::topology{}.alpha_out_us);

// The planner's topology of `servers` x `gpus_per_server` ranks on fabric `f`.
fast::topology topology_of(int servers, int gpus_per_server, const exec::fabric& f) {
    return fast::topology{servers, gpus_per_server, f.scale_up_gbps, f.scale_out_gbps, f.alpha_up_us, f.alpha_out_us};
}

// The planner's topology check, in the executor's words.
std::string fabric_error(const exec::fabric& f) {
    try {
        fast::validate(topology_of(1, 1, f));
    } catch (const std::exception& e) {
        return std::string("config.") + e.what();
    }
    return {};
}

// What is wrong with `cfg` on its own, or "".
std::string config_error(const config& cfg) {
    if (cfg.timeout.count() <= 0)
        return "config.timeout must be positive, got " + std::to_string(cfg.timeout.count()) + " ms";
    if (cfg.gpus_per_server < 0)
        return "config.gpus_per_server must be non-negative, got " + std::to_string(cfg.gpus_per_server);
    if (std::string why = fabric_error(cfg); !why.empty()) return why;
    if (cfg.flow != exec::flow_control::rendezvous && cfg.flow != exec::flow_control::credits)
        return "config.flow is not a known flow control";
    if (cfg.progress != exec::progress::polling && cfg.progress != exec::progress::blocking)
        return "config.progress is not a known progress mode";
    if (const char* env = std::getenv("FAST_PROGRESS");
        env != nullptr && std::string_view(env) != "polling" && std::string_view(env) != "blocking")
        return "FAST_PROGRESS must be polling or blocking, got '" + std::string(env).substr(0, 40) + "'";
    if (cfg.scheduler != exec::scheduler::automatic && cfg.scheduler != exec::scheduler::fast &&
        cfg.scheduler != exec::scheduler::direct)
        return "config.scheduler is not a known scheduler";
    return {};
}

// The planner's scheduler for the executor's.
fast::scheduler planner_scheduler(exec::scheduler s) {
    return s == exec::scheduler::direct ? fast::scheduler::direct
           : s == exec::scheduler::fast ? fast::scheduler::fast
                                        : fast::scheduler::automatic;
}

// Where rank `r`'s configuration differs from rank 0's, as the status every rank returns; ok if
// nowhere.
status compare_configurations(const hello& h, const hello& h0, int r, const std::string& prefix) {
    auto differs = [&](const char* field, const std::string& a, const std::string& b) {
        return status(errc::invalid_argument, prefix + "ranks pass different configurations: rank " +
                                                  std::to_string(r) + " has " + field + " = " + a + ", rank 0 has " +
                                                  b);
    };
    auto sched = [](std::int32_t v) { return std::string(to_string(static_cast<exec::scheduler>(v))); };
    auto mem = [](std::int32_t v) { return std::string(to_string(static_cast<exec::memory>(v))); };
    auto flow = [](std::int32_t v) { return std::string(to_string(static_cast<exec::flow_control>(v))); };
    if (h.gpus_per_server != h0.gpus_per_server)
        return differs("gpus_per_server", std::to_string(h.gpus_per_server), std::to_string(h0.gpus_per_server));
    if (h.scheduler != h0.scheduler) return differs("scheduler", sched(h.scheduler), sched(h0.scheduler));
    if (h.memory != h0.memory) return differs("memory", mem(h.memory), mem(h0.memory));
    if (h.iov != h0.iov) return differs("iov", h.iov ? "true" : "false", h0.iov ? "true" : "false");
    if (h.flow != h0.flow) return differs("flow", flow(h.flow), flow(h0.flow));
    for (const fabric_field& f : fabric_fields)
        if (h.fabric.*f.value != h0.fabric.*f.value)
            return differs(f.name, fast::detail::format_number(h.fabric.*f.value),
                           fast::detail::format_number(h0.fabric.*f.value));
    return {};
}

// The outcome of a local step every rank reports (connection, scratch growth).
struct report {
    std::uint64_t capacity;
    std::int32_t error;
    std::int32_t reserved;
    char text[240];
};

// The header of every call's allgather; the counts follow it.
struct call_header {
    std::uint64_t magic;
    std::uint64_t seq;
    std::int32_t kind;
    std::int32_t error;
    std::uint32_t layout; // contiguous_layout() of the sender's displacements
    std::uint32_t reserved;
    char text[240];
};

// Rank r's record in a gathered buffer (copied out: the buffer holds bytes, not objects).
template <class T>
T entry(const std::vector<unsigned char>& all, std::size_t stride, int r) {
    static_assert(std::is_trivially_copyable_v<T>);
    T out;
    std::memcpy(&out, all.data() + static_cast<std::size_t>(r) * stride, sizeof out);
    return out;
}

std::uint64_t load_u64(const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

const char* kind_name(std::int32_t k) {
    return k == static_cast<std::int32_t>(call_kind::alltoallv)        ? "alltoallv"
           : k == static_cast<std::int32_t>(call_kind::alltoallv_init) ? "alltoallv_init"
                                                                       : "an unknown call";
}

// The first rank that reported an error, as one message every rank builds the same way.
template <class T>
status first_error(const std::vector<unsigned char>& all, std::size_t stride, int size, const char* context) {
    int first = -1;
    int count = 0;
    for (int r = 0; r < size; ++r)
        if (entry<T>(all, stride, r).error != 0) {
            if (first < 0) first = r;
            ++count;
        }
    if (first < 0) return {};
    const T e = entry<T>(all, stride, first);
    std::string msg = std::string(context) + "rank " + std::to_string(first) + ": " + get_text(e.text);
    if (count > 1) msg += " (and " + std::to_string(count - 1) + " more rank" + (count > 2 ? "s" : "") + ")";
    const auto code = static_cast<errc>(e.error);
    return status(code > errc::ok && code <= errc::internal ? code : errc::internal, msg);
}

} // namespace

// --- creation ----------------------------------------------------------------------------------

status communicator_impl::gather(const void* send, std::size_t bytes, std::vector<unsigned char>& out) {
    out.resize(bytes * static_cast<std::size_t>(size_));
    status s;
    try {
        s = boot_.allgather(send, out.data(), bytes);
    } catch (...) {
        s = status(errc::bootstrap, "the allgather callback threw an exception");
    }
    if (!s.ok()) {
        const status failure(errc::bootstrap, "rank " + std::to_string(rank_) + ": allgather failed: " + s.message());
        mark_failed(failure);
        return failure;
    }
    return {};
}

status communicator_impl::create(const bootstrap& boot, const config& cfg) {
    rank_ = boot.rank;
    size_ = boot.size;
    cfg_ = cfg;
    boot_ = boot;
    // A local failure is reported through the first allgather, so that all ranks agree.
    std::vector<unsigned char> address;
    const status local = set_up(address);
    std::vector<std::string> hosts;
    std::uint64_t longest = 0;
    if (status s = agree_on_configuration(local, address.size(), hosts, longest); !s.ok()) return s;
    const grouping g = group_ranks(hosts, cfg.gpus_per_server);
    if (!g.error.empty()) return status(errc::invalid_argument, "creating the communicator: " + g.error);
    topo_ = topology_of(g.servers, g.gpus_per_server, cfg);
    // Round 2: worker addresses; then endpoints and a handshake; round 3: did everyone connect?
    std::vector<unsigned char> padded(longest, 0);
    std::copy(address.begin(), address.end(), padded.begin());
    std::vector<unsigned char> addresses;
    if (status s = gather(padded.data(), longest, addresses); !s.ok()) return s;
    if (status s = report_connection(connect(addresses, longest, hosts)); !s.ok()) return s;
    if (size_ > max_ranks)
        return status(errc::invalid_argument, "creating the communicator: " + std::to_string(size_) +
                                                  " ranks, more than the " + std::to_string(max_ranks) +
                                                  " a message tag can name");
    fast::plan_options options;
    options.scheduler = planner_scheduler(cfg.scheduler);
    open_trace();
    planner_ = std::make_unique<fast::planner>(topo_, options);
    if (single_segments()) {
        options.split_blocks = true;
        split_planner_ = std::make_unique<fast::planner>(topo_, options);
    }
    operation_ = std::make_unique<operation>(worker_, *memory_, cfg_.timeout, rank_, credits());
    const auto ur = static_cast<std::size_t>(size_);
    sendcounts_of_.resize(ur * ur);
    return {};
}

// This rank's own set-up: the configuration, the memory backend, the UCX worker and its
// address. Returns what failed (reported to every rank in the first round), or ok.
status communicator_impl::set_up(std::vector<unsigned char>& address) {
    if (std::string why = config_error(cfg_); !why.empty()) return status(errc::invalid_argument, why);
    ucs_memory_type_t memory_type = UCS_MEMORY_TYPE_HOST;
    std::string why;
    switch (cfg_.memory) {
    case exec::memory::host: memory_ = make_host_backend(); break;
    case exec::memory::cuda:
        memory_ = make_cuda_backend(why);
        memory_type = UCS_MEMORY_TYPE_CUDA;
        break;
    case exec::memory::hip:
        memory_ = make_hip_backend(why);
        memory_type = UCS_MEMORY_TYPE_ROCM;
        break;
    default: why = "config.memory is not a known memory kind";
    }
    if (!memory_)
        return why.empty() ? status(errc::out_of_memory, "out of host memory") : status(errc::unsupported, why);
    const char* env = std::getenv("FAST_PROGRESS");
    const bool blocking =
        env != nullptr ? std::string_view(env) == "blocking" : cfg_.progress == exec::progress::blocking;
    if (std::string e = worker_.init(rank_, size_, memory_type, credits(), blocking); !e.empty())
        return status(e.find("does not support") != std::string::npos ? errc::unsupported : errc::transport, e);
    if (std::string e = worker_.address(address); !e.empty()) return status(errc::transport, e);
    return {};
}

// Round 1: who we are, how we are configured, how long our addresses are. Every rank checks
// that all ranks run this executor with the same size and configuration and that none failed
// locally; `hosts` gets each rank's host, `longest` the longest worker address.
status communicator_impl::agree_on_configuration(const status& local, std::size_t address_bytes,
                                                 std::vector<std::string>& hosts, std::uint64_t& longest) {
    hello mine{};
    mine.magic = wire_magic;
    mine.version = wire_version;
    mine.error = static_cast<std::int32_t>(local.code());
    mine.size = size_;
    mine.gpus_per_server = cfg_.gpus_per_server;
    mine.scheduler = static_cast<std::int32_t>(cfg_.scheduler);
    mine.memory = static_cast<std::int32_t>(cfg_.memory);
    mine.iov = cfg_.iov ? 1 : 0;
    mine.flow = static_cast<std::int32_t>(cfg_.flow);
    mine.fabric = cfg_;
    mine.address_bytes = address_bytes;
    put_text(mine.host, host_key());
    put_text(mine.text, local.ok() ? "" : local.message());
    std::vector<unsigned char> all;
    if (status s = gather(&mine, sizeof mine, all); !s.ok()) return s;
    const std::string prefix = "creating the communicator: ";
    for (int r = 0; r < size_; ++r) {
        const hello h = entry<hello>(all, sizeof(hello), r);
        if (h.magic != wire_magic || h.version != wire_version)
            return status(errc::invalid_argument,
                          prefix + "rank " + std::to_string(r) +
                              " runs an incompatible fast executor (or the allgather is broken)");
        if (h.size != size_)
            return status(errc::invalid_argument, prefix + "rank " + std::to_string(r) + " was given size " +
                                                      std::to_string(h.size) + ", rank " + std::to_string(rank_) +
                                                      " size " + std::to_string(size_));
    }
    if (status s = first_error<hello>(all, sizeof(hello), size_, prefix.c_str()); !s.ok()) return s;
    longest = 0;
    hosts.assign(static_cast<std::size_t>(size_), {});
    const hello h0 = entry<hello>(all, sizeof(hello), 0);
    for (int r = 0; r < size_; ++r) {
        const hello h = entry<hello>(all, sizeof(hello), r);
        if (status s = compare_configurations(h, h0, r, prefix); !s.ok()) return s;
        longest = std::max(longest, h.address_bytes);
        hosts[static_cast<std::size_t>(r)] = get_text(h.host);
    }
    return {};
}

// Endpoints to every rank (`addresses`: rank r's worker address at r * stride), a message to
// and from every peer, a flush, and the endpoints armed for aborts. Returns this rank's outcome
// (reported to every rank in round 3).
status communicator_impl::connect(const std::vector<unsigned char>& addresses, std::uint64_t stride,
                                  const std::vector<std::string>& hosts) {
    const auto ur = static_cast<std::size_t>(size_);
    std::vector<const unsigned char*> where(ur);
    std::vector<char> same_host(ur, 0);
    for (std::size_t r = 0; r < ur; ++r) {
        where[r] = addresses.data() + r * stride;
        same_host[r] = hosts[r] == hosts[static_cast<std::size_t>(rank_)];
    }
    if (std::string e = worker_.connect(where, same_host); !e.empty()) return status(errc::transport, e);
    if (status s = handshake(); !s.ok()) return s;
    if (std::string e = worker_.arm_abort(); !e.empty()) return status(errc::transport, e);
    return {};
}

// Round 3: did everyone connect? The first rank that did not names the error every rank returns.
status communicator_impl::report_connection(const status& connected) {
    report rep{};
    rep.error = static_cast<std::int32_t>(connected.code());
    std::string_view why = connected.ok() ? "" : connected.message();
    if (const std::string self = "rank " + std::to_string(rank_) + ": "; why.substr(0, self.size()) == self)
        why.remove_prefix(self.size()); // first_error names the rank
    put_text(rep.text, why);
    std::vector<unsigned char> all;
    if (status s = gather(&rep, sizeof rep, all); !s.ok()) return s;
    return first_error<report>(all, sizeof(report), size_, "creating the communicator: ");
}

// Wires up every endpoint before the first call, in two rounds with every peer: a message
// (proving each peer reachable), a flush of the worker, a second message. A rank leaves only
// after every peer has finished its flush, so no flush waits on a rank that has gone on to block
// outside UCX (in the bootstrap's allgather, or in MPI).
status communicator_impl::handshake() {
    std::uint64_t mine = wire_magic ^ static_cast<std::uint64_t>(rank_);
    std::vector<unsigned char> all;
    if (status s = exchange(control::hello, 0, &mine, sizeof mine, all, "exchanging the first message with every peer");
        !s.ok())
        return s;
    for (int r = 0; r < size_; ++r) {
        std::uint64_t v = 0;
        std::memcpy(&v, all.data() + static_cast<std::size_t>(r) * sizeof v, sizeof v);
        if (v != (wire_magic ^ static_cast<std::uint64_t>(r)))
            return status(errc::transport, "rank " + std::to_string(rank_) +
                                               ": received a garbled first message from rank " + std::to_string(r));
    }
    if (status s = flush(); !s.ok()) return s;
    return exchange(control::ready, 0, &mine, sizeof mine, all, "exchanging the second message with every peer");
}

// Sends `bytes` bytes to every other rank and receives as many from each (rank r's at
// out + r * bytes): the allgather of every call, over UCX, so that it makes progress for
// everything else in flight. Bounded by the timeout; a failure leaves the communicator
// unusable (the ranks no longer agree where they are).
status communicator_impl::exchange(control kind, std::uint64_t seq, const void* mine, std::size_t bytes,
                                   std::vector<unsigned char>& out, const char* what) {
    const auto ur = static_cast<std::size_t>(size_);
    out.resize(bytes * ur);
    std::memcpy(out.data() + static_cast<std::size_t>(rank_) * bytes, mine, bytes);
    slot_block& b = exchange_slots_;
    b.slots.assign(2 * ur, op_slot{});
    b.completed = 0;
    // Sized before anything is posted (cancelling must not allocate), and kept: no allocation
    // per call once the size is known.
    exchange_closing_.assign(ur, op_slot{});
    exchange_state x;
    try {
        post_exchange(kind, seq, mine, bytes, out, x);
        if (x.error.empty()) wait_exchange(x);
        if (x.error.empty()) check_exchange(bytes, x);
        if (x.error.empty()) return {};
        const status failure(x.code, "rank " + std::to_string(rank_) + ": " + what + ": " + x.error);
        mark_failed(failure); // tells the peers before the endpoints are closed
        cancel_exchange(x.expected);
        return failure;
    } catch (...) {
        // Out of memory building a message: handled here, while `out` and `mine` are still
        // alive under UCX, not by unwinding past them.
        const status failure = fail_thrown(); // tells the peers before the endpoints are closed
        cancel_exchange(x.expected);
        return failure;
    }
}

// Posts a receive from every other rank (slot r), then a send to every other rank (slot R + r);
// stops at the first that fails.
void communicator_impl::post_exchange(control kind, std::uint64_t seq, const void* mine, std::size_t bytes,
                                      std::vector<unsigned char>& out, exchange_state& x) {
    const auto ur = static_cast<std::size_t>(size_);
    slot_block& b = exchange_slots_;
    for (int r = 0; r < size_ && x.error.empty(); ++r) {
        if (r == rank_) continue;
        op_slot& s = b.slots[static_cast<std::size_t>(r)];
        s.block = &b;
        const ucs_status_t st = worker_.recv(out.data() + static_cast<std::size_t>(r) * bytes, bytes, false,
                                             make_control_tag(kind, seq, r), s, true);
        if (st == UCS_INPROGRESS) ++x.expected;
        else if (st != UCS_OK) x.error = "receiving from rank " + std::to_string(r) + ": " + ucx_error(st);
    }
    for (int r = 0; r < size_ && x.error.empty(); ++r) {
        if (r == rank_) continue;
        op_slot& s = b.slots[ur + static_cast<std::size_t>(r)];
        s.block = &b;
        const ucs_status_t st = worker_.send(r, mine, bytes, false, make_control_tag(kind, seq, rank_), s, true);
        if (st == UCS_INPROGRESS) ++x.expected;
        else if (st != UCS_OK) {
            x.code = worker_.peer(r).error != UCS_OK ? errc::peer_failure : errc::transport;
            x.error = "sending to rank " + std::to_string(r) + ": " + ucx_error(st);
        }
    }
}

// Progresses until every posted message completed, a peer gave up or failed, or the timeout.
void communicator_impl::wait_exchange(exchange_state& x) {
    const auto ur = static_cast<std::size_t>(size_);
    const slot_block& b = exchange_slots_;
    const auto deadline = clock::now() + cfg_.timeout;
    std::size_t seen = worker_.error_events();
    while (b.completed < x.expected) {
        if (worker_.aborted()) {
            x.code = static_cast<errc>(worker_.abort_code());
            if (x.code <= errc::ok || x.code > errc::internal) x.code = errc::peer_failure;
            x.error =
                "rank " + std::to_string(worker_.abort_sender()) + " gave up on the call: " + worker_.abort_message();
            return;
        }
        if (worker_.error_events() != seen) {
            seen = worker_.error_events();
            for (int r = 0; r < size_; ++r)
                if (r != rank_ && worker_.peer(r).error != UCS_OK &&
                    (!b.slots[static_cast<std::size_t>(r)].done || !b.slots[ur + static_cast<std::size_t>(r)].done)) {
                    x.code = errc::peer_failure;
                    x.error = "rank " + std::to_string(r) + " failed (" + ucx_error(worker_.peer(r).error) + ")";
                    return;
                }
        }
        // The deadline every round, not only when progress runs dry: it may never do.
        const bool idle = worker_.progress() == 0;
        if (b.completed < x.expected && clock::now() > deadline) {
            x.code = errc::timeout;
            x.error = "no message within " + std::to_string(cfg_.timeout.count()) + " ms from " + silent_ranks();
            return;
        }
        if (idle) worker_.idle(deadline);
    }
}

// "ranks 2, 5" (at most 8 named): the ranks whose message of the current exchange has not come.
std::string communicator_impl::silent_ranks() const {
    std::string missing;
    int count = 0;
    for (int r = 0; r < size_; ++r)
        if (r != rank_ && !exchange_slots_.slots[static_cast<std::size_t>(r)].done && ++count <= 8)
            missing += (count > 1 ? ", " : "") + std::to_string(r);
    return std::string("rank") + (count > 1 ? "s " : " ") + (missing.empty() ? "(none: sends pending)" : missing) +
           (count > 8 ? ", ..." : "");
}

// Every message of a completed exchange succeeded and brought `bytes` bytes.
void communicator_impl::check_exchange(std::size_t bytes, exchange_state& x) {
    const auto ur = static_cast<std::size_t>(size_);
    for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        const op_slot& in = exchange_slots_.slots[static_cast<std::size_t>(r)];
        const op_slot& outgoing = exchange_slots_.slots[ur + static_cast<std::size_t>(r)];
        const ucs_status_t peer_error = worker_.peer(r).error;
        if (in.status != UCS_OK || outgoing.status != UCS_OK) {
            x.code = peer_error != UCS_OK ? errc::peer_failure : errc::transport;
            x.error = "with rank " + std::to_string(r) + ": " +
                      ucx_error(peer_error != UCS_OK  ? peer_error
                                : in.status != UCS_OK ? in.status
                                                      : outgoing.status);
            return;
        }
        if (in.length != bytes) { // both ends agree on the size of every exchange: a bug
            x.code = errc::internal;
            x.error = "rank " + std::to_string(r) + " sent " + std::to_string(in.length) + " bytes, expected " +
                      std::to_string(bytes);
            return;
        }
    }
}

// Cancels what an exchange posted: receives directly, sends by closing their endpoints. Never
// throws, so it also runs when a message cannot be built for lack of memory.
void communicator_impl::cancel_exchange(std::size_t expected) noexcept {
    const auto ur = static_cast<std::size_t>(size_);
    slot_block& b = exchange_slots_;
    for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        worker_.cancel(b.slots[static_cast<std::size_t>(r)]);
        if (!b.slots[ur + static_cast<std::size_t>(r)].done)
            (void)worker_.force_close(r, exchange_closing_[static_cast<std::size_t>(r)]);
    }
    worker_.drain(b, expected, exchange_closing_, std::min(cfg_.timeout, std::chrono::milliseconds(200)));
}

// Flushes the worker (bounded by the timeout), so that nothing this rank owes a peer is left in
// UCX's queues before it returns to the caller.
status communicator_impl::flush() {
    slot_block& b = exchange_slots_;
    b.slots.assign(1, op_slot{});
    b.completed = 0;
    b.slots[0].block = &b;
    const ucs_status_t st = worker_.flush_all(b.slots[0]);
    const auto deadline = clock::now() + cfg_.timeout;
    while (st == UCS_INPROGRESS && b.completed < 1) {
        const bool idle = worker_.progress() == 0;
        if (b.completed < 1 && clock::now() > deadline) { // every round (see exchange)
            worker::abandon(b.slots[0]);
            const status failure(errc::timeout, "rank " + std::to_string(rank_) +
                                                    ": flushing the endpoints did not complete within " +
                                                    std::to_string(cfg_.timeout.count()) + " ms");
            mark_failed(failure);
            return failure;
        }
        if (idle) worker_.idle(deadline);
    }
    if (b.slots[0].status != UCS_OK && worker_.error_events() == 0) {
        const status failure(errc::transport, "rank " + std::to_string(rank_) +
                                                  ": flushing the endpoints failed: " + ucx_error(b.slots[0].status));
        mark_failed(failure);
        return failure;
    }
    return {};
}

communicator_impl::~communicator_impl() {
    write_trace();
    operation_.reset();
    // The worker first: closing it progresses UCX, and a receive abandoned after a failure may
    // still write into scratch (or use the device stream) until the worker is gone.
    worker_.close();
    if (scratch_ != nullptr && memory_) memory_->release(scratch_);
    memory_.reset();
}

// Traces go to config.trace, else FAST_TRACE, with ".c<K>" added: the K-th traced communicator
// of this rank in this process (every rank creates its communicators in the same order, so K
// names the same communicator on every rank).
void communicator_impl::open_trace() {
    std::string prefix = cfg_.trace;
    if (const char* env = std::getenv("FAST_TRACE"); prefix.empty() && env != nullptr) prefix = env;
    if (prefix.empty()) return;
    static std::mutex mutex;
    static std::map<int, int> created; // per rank
    int k = 0;
    {
        const std::lock_guard<std::mutex> lock(mutex);
        k = created[rank_]++;
    }
    trace_.open(prefix + ".c" + std::to_string(k));
}

// Writes this rank's trace files (config.trace); a failure is one line on stderr (a destructor
// has no status to return).
void communicator_impl::write_trace() noexcept {
    if (!trace_.on()) return;
    try {
        trace_setup s;
        s.rank = rank_;
        s.size = size_;
        s.servers = topo_.servers;
        s.gpus_per_server = topo_.gpus_per_server;
        s.scheduler = std::string(to_string(cfg_.scheduler));
        s.flow = std::string(to_string(cfg_.flow));
        s.memory = std::string(to_string(cfg_.memory));
        s.progress = worker_.blocking() ? "blocking" : "polling";
        s.host = host_key();
        s.scale_up_gbps = cfg_.scale_up_gbps;
        s.scale_out_gbps = cfg_.scale_out_gbps;
        s.alpha_up_us = cfg_.alpha_up_us;
        s.alpha_out_us = cfg_.alpha_out_us;
        s.split_blocks_when_needed = single_segments();
        if (const std::string e = trace_.write(s); !e.empty())
            std::fprintf(stderr, "fast executor: rank %d: %s\n", rank_, e.c_str());
    } catch (...) {
        std::fprintf(stderr, "fast executor: rank %d: out of memory writing the trace\n", rank_);
    }
}

// The end of a traced call: its outcome, and whether it planned a new matrix.
void communicator_impl::trace_call_end(const status& s, bool planned) noexcept {
    if (!trace_.on()) return;
    trace_call& c = trace_.call(trace_.current());
    c.end_ns = clock_ns();
    c.ok = s.ok();
    c.planned = planned;
    c.plan_steps = stats_.last_plan_steps;
    c.direct = planner_->last_scheduler() == fast::scheduler::direct;
    c.split = plan_split_;
}

void communicator_impl::mark_failed(const status& s) noexcept {
    if (!failed_.ok()) return;
    failed_ = s.ok() ? status(errc::internal, "unknown failure") : s;
    // Tell the peers (unless they were told already, or told us).
    if (size_ > 1)
        worker_.send_abort(static_cast<int>(failed_.code()), failed_.message(),
                           std::min(cfg_.timeout, std::chrono::milliseconds(1000)));
}

status communicator_impl::check_usable(const char* what) const {
    if (!failed_.ok())
        return status(errc::comm_failed,
                      "rank " + std::to_string(rank_) + ": " + what +
                          " on a communicator that failed earlier (destroy it): " + failed_.message());
    if (busy_)
        return status(errc::busy, "rank " + std::to_string(rank_) + ": " + what +
                                      " while another operation of this communicator is in progress");
    return {};
}

// --- calls -------------------------------------------------------------------------------------

std::string communicator_impl::validate(const call_args& a) const {
    const auto ur = static_cast<std::size_t>(size_);
    auto wrong_size = [&](const char* name, std::size_t n) {
        return std::string(name) + " has " + std::to_string(n) + " entries, expected " + std::to_string(ur) +
               " (one per rank)";
    };
    if (a.sendcounts.size() != ur) return wrong_size("sendcounts", a.sendcounts.size());
    if (a.sdispls.size() != ur) return wrong_size("sdispls", a.sdispls.size());
    if (a.recvcounts.size() != ur) return wrong_size("recvcounts", a.recvcounts.size());
    if (a.rdispls.size() != ur) return wrong_size("rdispls", a.rdispls.size());
    constexpr auto max_bytes = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
    struct interval {
        std::uintptr_t begin, end;
        std::size_t rank;
    };
    std::vector<interval> recv_blocks, send_blocks;
    for (int side = 0; side < 2; ++side) {
        const auto counts = side == 0 ? a.sendcounts : a.recvcounts;
        const auto displs = side == 0 ? a.sdispls : a.rdispls;
        const char* cname = side == 0 ? "sendcounts" : "recvcounts";
        const char* dname = side == 0 ? "sdispls" : "rdispls";
        const auto base = reinterpret_cast<std::uintptr_t>(side == 0 ? a.send : a.recv);
        std::size_t total = 0;
        for (std::size_t j = 0; j < ur; ++j) {
            const std::size_t c = counts[j];
            if (c == 0) continue;
            if (c > max_bytes)
                return std::string(cname) + "[" + std::to_string(j) + "] = " + std::to_string(c) + " is too large";
            if (displs[j] > max_bytes - c)
                return std::string(dname) + "[" + std::to_string(j) + "] + " + cname + "[" + std::to_string(j) +
                       "] = " + std::to_string(displs[j]) + " + " + std::to_string(c) + " is too large";
            if (total > max_bytes - c) return std::string("the ") + cname + " add up to more than 2^63 bytes";
            total += c;
            if (base == 0)
                return std::string(side == 0 ? "send" : "recv") + " is null but " + cname + "[" + std::to_string(j) +
                       "] = " + std::to_string(c);
            if (base > std::numeric_limits<std::uintptr_t>::max() - displs[j] - c)
                return std::string(dname) + "[" + std::to_string(j) + "] points past the end of the address space";
            (side == 0 ? send_blocks : recv_blocks).push_back({base + displs[j], base + displs[j] + c, j});
        }
    }
    auto by_begin = [](const interval& x, const interval& y) { return x.begin < y.begin; };
    std::sort(recv_blocks.begin(), recv_blocks.end(), by_begin);
    for (std::size_t k = 1; k < recv_blocks.size(); ++k)
        if (recv_blocks[k].begin < recv_blocks[k - 1].end)
            return "the receive blocks from rank " + std::to_string(recv_blocks[k - 1].rank) + " and rank " +
                   std::to_string(recv_blocks[k].rank) + " overlap";
    for (const interval& s : send_blocks) {
        // Receive blocks are disjoint: only the last one starting before s ends can overlap s.
        auto hit = std::lower_bound(recv_blocks.begin(), recv_blocks.end(), interval{s.end, 0, 0}, by_begin);
        if (hit != recv_blocks.begin() && std::prev(hit)->end > s.begin)
            return "the send block for rank " + std::to_string(s.rank) + " overlaps the receive block from rank " +
                   std::to_string(std::prev(hit)->rank) + " (in-place alltoallv is not supported)";
    }
    return {};
}

status communicator_impl::agree(call_kind kind, std::uint64_t seq, const call_args& a, std::string local_error) {
    const auto ur = static_cast<std::size_t>(size_);
    const std::size_t stride = sizeof(call_header) + 2 * ur * sizeof(std::uint64_t);
    gather_send_.assign(stride, 0);
    call_header h{};
    h.magic = wire_magic;
    h.seq = seq;
    h.kind = static_cast<std::int32_t>(kind);
    h.error = local_error.empty() ? 0 : static_cast<std::int32_t>(errc::invalid_argument);
    put_text(h.text, local_error);
    if (local_error.empty()) h.layout = contiguous_layout(a.sendcounts, a.sdispls, a.recvcounts, a.rdispls);
    std::memcpy(gather_send_.data(), &h, sizeof h);
    if (local_error.empty()) {
        unsigned char* counts = gather_send_.data() + sizeof h;
        for (std::size_t j = 0; j < ur; ++j) {
            const std::uint64_t s = a.sendcounts[j], r = a.recvcounts[j];
            std::memcpy(counts + 8 * j, &s, 8);
            std::memcpy(counts + 8 * (ur + j), &r, 8);
        }
    }
    const char* what = kind_name(static_cast<std::int32_t>(kind));
    if (status s = exchange(control::counts, seq, gather_send_.data(), stride, gather_recv_, "exchanging the counts");
        !s.ok())
        return s;
    const std::string prefix = std::string(what) + ": ";
    const call_header h0 = entry<call_header>(gather_recv_, stride, 0);
    for (int r = 0; r < size_; ++r) {
        const call_header e = entry<call_header>(gather_recv_, stride, r);
        if (e.magic != wire_magic || e.seq != h0.seq || e.kind != h0.kind)
            return status(errc::invalid_argument, prefix + "ranks are in different collective calls: rank 0 in call " +
                                                      std::to_string(h0.seq) + " (" + kind_name(h0.kind) + "), rank " +
                                                      std::to_string(r) + " in call " + std::to_string(e.seq) + " (" +
                                                      kind_name(e.kind) +
                                                      "); every rank must make the same calls in the same order");
    }
    if (status s = first_error<call_header>(gather_recv_, stride, size_, prefix.c_str()); !s.ok()) return s;
    // Plans need split blocks for single-segment messages unless every rank's blocks lie back to
    // back in both buffers (any packed range is then one user range).
    all_contiguous_ = true;
    for (int r = 0; r < size_; ++r)
        all_contiguous_ = all_contiguous_ &&
                          entry<call_header>(gather_recv_, stride, r).layout == (send_contiguous | recv_contiguous);
    // Every rank checks every rank's recvcounts against what the senders send.
    std::size_t mismatches = 0;
    std::string first;
    for (std::size_t j = 0; j < ur; ++j) {
        const unsigned char* cj = gather_recv_.data() + j * stride + sizeof(call_header);
        for (std::size_t i = 0; i < ur; ++i) {
            const unsigned char* ci = gather_recv_.data() + i * stride + sizeof(call_header);
            const std::uint64_t sends = load_u64(ci + 8 * j);
            const std::uint64_t expects = load_u64(cj + 8 * (ur + i));
            sendcounts_of_[i * ur + j] = sends;
            if (sends != expects && mismatches++ == 0)
                first = "rank " + std::to_string(j) + " expects " + std::to_string(expects) + " bytes from rank " +
                        std::to_string(i) + ", rank " + std::to_string(i) + " sends " + std::to_string(sends);
        }
    }
    if (mismatches > 0)
        return status(errc::count_mismatch,
                      prefix + first +
                          (mismatches > 1 ? " (and " + std::to_string(mismatches - 1) + " more mismatched pair" +
                                                (mismatches > 2 ? "s)" : ")")
                                          : std::string()));
    return {};
}

status communicator_impl::plan_matrix() {
    const auto ur = static_cast<std::size_t>(size_);
    const bool split = single_segments() && !all_contiguous_;
    if (have_plan_ && split == plan_split_) {
        bool same = true;
        for (std::size_t i = 0; i < ur && same; ++i)
            for (std::size_t j = 0; j < ur; ++j)
                if (static_cast<std::uint64_t>(matrix_(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j))) !=
                    sendcounts_of_[i * ur + j]) {
                    same = false;
                    break;
                }
        if (same) {
            ++stats_.plans_reused;
            return {};
        }
    }
    have_plan_ = false;
    have_program_ = false;
    matrix_.resize(static_cast<Eigen::Index>(ur), static_cast<Eigen::Index>(ur));
    for (std::size_t i = 0; i < ur; ++i)
        for (std::size_t j = 0; j < ur; ++j)
            matrix_(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
                static_cast<std::int64_t>(sendcounts_of_[i * ur + j]);
    try {
        rank_plan_ = &(split ? *split_planner_ : *planner_).make_rank(matrix_, rank_);
        plan_split_ = split;
    } catch (const fast::invalid_argument& e) {
        return status(errc::invalid_argument, std::string("the traffic cannot be planned: ") + e.what());
    }
    have_plan_ = true;
    ++stats_.plans_made;
    stats_.last_plan_steps = rank_plan_->steps;
    return {};
}

// Grows this rank's scratch where its program needs more (by at least half, to settle after a
// few calls; else exactly). A rank that cannot allocate tells its peers, which then fail instead
// of waiting for it.
status communicator_impl::ensure_scratch() {
    const auto need = static_cast<std::uint64_t>(rank_plan_->scratch_bytes);
    if (need <= scratch_capacity_) return {};
    const std::uint64_t grown = scratch_capacity_ + scratch_capacity_ / 2;
    std::string error;
    void* p = nullptr;
    std::uint64_t size = need;
    if (grown > need) {
        size = grown;
        p = memory_->allocate(static_cast<std::size_t>(grown), error);
    }
    if (p == nullptr) {
        size = need;
        p = need > std::numeric_limits<std::size_t>::max() ? nullptr
                                                           : memory_->allocate(static_cast<std::size_t>(need), error);
    }
    if (p == nullptr) {
        const status failure(errc::out_of_memory, "rank " + std::to_string(rank_) + ": cannot allocate the plan's " +
                                                      std::to_string(need) + " bytes of scratch: " + error);
        mark_failed(failure);
        return failure;
    }
    worker_.map_scratch(p, static_cast<std::size_t>(size)); // unregisters the old scratch first
    if (scratch_ != nullptr) memory_->release(scratch_);
    scratch_ = p;
    scratch_capacity_ = size;
    stats_.scratch_bytes = scratch_capacity_;
    return {};
}

// An exception in the middle of a call (out of host memory) leaves this rank out of step with
// its peers, which wait for it in an exchange or a step: the communicator fails, and they are
// told. Call from a catch block.
status communicator_impl::fail_thrown() noexcept {
    errc code = errc::internal;
    try {
        throw;
    } catch (const std::bad_alloc&) {
        code = errc::out_of_memory;
    } catch (...) {}
    const char* what = code == errc::out_of_memory ? "out of host memory" : "unexpected exception inside the executor";
    status failure(code, what);
    try {
        failure = status(code, "rank " + std::to_string(rank_) + ": " + what);
    } catch (...) {}
    mark_failed(failure);
    return failure;
}

status communicator_impl::prepare(call_kind kind, const call_args& a, std::uint64_t& seq) {
    try {
        return prepare_steps(kind, a, seq);
    } catch (...) {
        return fail_thrown();
    }
}

status communicator_impl::prepare_steps(call_kind kind, const call_args& a, std::uint64_t& seq) {
    seq = next_seq();
    std::string local;
    try {
        local = validate(a);
    } catch (...) {
        local = "out of host memory checking the arguments";
    }
    if (status s = agree(kind, seq, a, std::move(local)); !s.ok()) return s;
    if (trace_.on()) trace_.call(trace_.current()).agreed_ns = clock_ns();
    if (status s = plan_matrix(); !s.ok()) return s;
    if (status s = ensure_scratch(); !s.ok()) return s;
    if (trace_.on()) trace_.call(trace_.current()).planned_ns = clock_ns();
    // This rank's program; reused while the plan and the counts and displacements stay the same.
    auto same = [](std::span<const std::size_t> a, const std::vector<std::size_t>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end());
    };
    if (!have_program_ || !same(a.sendcounts, program_sendcounts_) || !same(a.sdispls, program_sdispls_) ||
        !same(a.recvcounts, program_recvcounts_) || !same(a.rdispls, program_rdispls_)) {
        have_program_ = false;
        program_sendcounts_.assign(a.sendcounts.begin(), a.sendcounts.end());
        program_sdispls_.assign(a.sdispls.begin(), a.sdispls.end());
        program_recvcounts_.assign(a.recvcounts.begin(), a.recvcounts.end());
        program_rdispls_.assign(a.rdispls.begin(), a.rdispls.end());
        send_layout_.assign(program_sendcounts_, program_sdispls_);
        recv_layout_.assign(program_recvcounts_, program_rdispls_);
        const std::string e = compile_program(*rank_plan_, send_layout_, recv_layout_, single_segments(), program_);
        if (!e.empty()) {
            // The peers compiled theirs and go on to the steps: tell them.
            const status failure(errc::internal, "rank " + std::to_string(rank_) + ": " + e);
            mark_failed(failure);
            return failure;
        }
        have_program_ = true;
    }
    if (trace_.on()) trace_.call(trace_.current()).compiled_ns = clock_ns();
    return {};
}

namespace {

// Clears the busy flag however a call leaves (an exception included).
struct busy_scope {
    bool& busy;
    explicit busy_scope(bool& b) noexcept : busy(b) { busy = true; }
    ~busy_scope() { busy = false; }
    busy_scope(const busy_scope&) = delete;
    busy_scope& operator=(const busy_scope&) = delete;
};

} // namespace

status communicator_impl::alltoallv(const call_args& a) {
    if (status s = check_usable("alltoallv"); !s.ok()) return s;
    const busy_scope busy(busy_);
    std::uint64_t seq = 0;
    const std::uint64_t plans_before = stats_.plans_made;
    try {
        if (trace_.on()) trace_.begin_call(seq_, false, a.sendcounts);
    } catch (...) {
        trace_.open({}); // out of memory: no trace rather than a failed call
    }
    operation_->set_tracer(&trace_);
    status s = prepare(call_kind::alltoallv, a, seq);
    if (s.ok()) {
        s = operation_->start(program_, {a.send, a.recv, scratch_}, seq); // ends with a flush
        if (s.ok()) s = operation_->wait();
        if (operation_->broke_communicator()) mark_failed(s);
    } else if (failed_.ok()) {
        if (status f = flush(); !f.ok()) s = f; // the exchanges' messages must be out too
    }
    ++(s.ok() ? stats_.operations : stats_.failures);
    trace_call_end(s, stats_.plans_made != plans_before);
    return s;
}

status communicator_impl::init(const call_args& a, program& out) {
    if (status s = check_usable("alltoallv_init"); !s.ok()) return s;
    const busy_scope busy(busy_);
    std::uint64_t seq = 0;
    const std::uint64_t plans_before = stats_.plans_made;
    try {
        if (trace_.on()) trace_.begin_call(seq_, false, a.sendcounts, true);
    } catch (...) {
        trace_.open({});
    }
    status s = prepare(call_kind::alltoallv_init, a, seq);
    trace_call_end(s, stats_.plans_made != plans_before);
    if (failed_.ok())
        if (status f = flush(); !f.ok()) s = f;
    if (s.ok()) {
        try {
            out = program_;
        } catch (...) {
            s = fail_thrown(); // the peers have their requests, this rank has none
        }
    }
    if (!s.ok()) ++stats_.failures;
    return s;
}

// --- persistent requests -------------------------------------------------------------------------

request_impl::~request_impl() {
    if (active && execution) {
        // Tell the peers first: cancelling closes the endpoints of exactly those that wait on
        // this rank, and no abort goes over a closed endpoint.
        comm->mark_failed(status(errc::comm_failed, "a persistent request was destroyed while active"));
        (void)execution->cancel(status(errc::internal, "the request was destroyed while active"));
        comm->set_busy(false);
    }
}

status request_impl::start() {
    if (active) return status(errc::busy, "rank " + std::to_string(comm->rank()) + ": the request is already active");
    if (status s = comm->check_usable("start"); !s.ok()) return s;
    if (comm->scratch_capacity() < compiled.scratch_bytes) {
        // The peers start and wait for this rank: tell them.
        const status failure(errc::internal, "rank " + std::to_string(comm->rank()) +
                                                 ": scratch smaller than the request's plan needs");
        comm->mark_failed(failure);
        return failure;
    }
    const std::uint64_t seq = comm->next_seq();
    comm->set_busy(true);
    active = true;
    if (tracer& t = comm->trace(); t.on()) {
        try {
            const std::size_t k = t.begin_call(seq, true, sendcounts);
            t.call(k).agreed_ns = t.call(k).planned_ns = t.call(k).compiled_ns = t.call(k).start_ns;
            t.call(k).plan_steps = compiled.plan_steps;
        } catch (...) {
            t.open({});
        }
    }
    execution->set_tracer(&comm->trace());
    status s = execution->start(compiled, {send, recv, comm->scratch()}, seq);
    if (!s.ok()) return finish(s);
    return {};
}

status request_impl::finish(status s) {
    active = false;
    comm->set_busy(false);
    if (tracer& t = comm->trace(); t.on()) {
        t.call(t.current()).end_ns = clock_ns();
        t.call(t.current()).ok = s.ok();
    }
    if (execution->broke_communicator()) comm->mark_failed(s);
    ++(s.ok() ? comm->stats().operations : comm->stats().failures);
    return s;
}

status request_impl::test(bool& done) {
    if (!active) {
        done = true;
        return {};
    }
    status s = execution->test(done);
    if (!s.ok() || done) {
        done = true;
        return finish(s);
    }
    return {};
}

status request_impl::wait() {
    if (!active) return {};
    return finish(execution->wait());
}

} // namespace detail

// --- public API ---------------------------------------------------------------------------------

namespace {

status out_of_memory() noexcept {
    return status(errc::out_of_memory, "out of host memory");
}
status unexpected() noexcept {
    return status(errc::internal, "unexpected exception inside the executor");
}
status not_created() noexcept {
    return status(errc::invalid_argument, "the communicator was not created (or was moved from)");
}
status not_initialised() noexcept {
    return status(errc::invalid_argument, "the request was not initialised by alltoallv_init");
}

// The public API never throws: whatever `body` throws becomes a status.
template <class Body>
status guarded(Body&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return out_of_memory();
    } catch (...) {
        return unexpected();
    }
}

} // namespace

status create(const bootstrap& boot, const config& cfg, communicator& out) noexcept {
    return guarded([&] {
        out.impl_.reset();
        if (boot.size < 1 || boot.rank < 0 || boot.rank >= boot.size)
            return status(errc::invalid_argument, "bootstrap: rank " + std::to_string(boot.rank) + " of size " +
                                                      std::to_string(boot.size) + " is not a valid rank");
        if (!boot.allgather) return status(errc::invalid_argument, "bootstrap: no allgather function");
        auto impl = std::make_shared<detail::communicator_impl>();
        status s = impl->create(boot, cfg);
        if (s.ok()) out.impl_ = std::move(impl);
        return s;
    });
}

communicator::communicator() noexcept = default;
communicator::~communicator() = default;
communicator::communicator(communicator&&) noexcept = default;
communicator& communicator::operator=(communicator&&) noexcept = default;

bool communicator::valid() const noexcept {
    return impl_ != nullptr;
}
int communicator::rank() const noexcept {
    return impl_ ? impl_->rank() : -1;
}
int communicator::size() const noexcept {
    return impl_ ? impl_->size() : 0;
}
int communicator::servers() const noexcept {
    return impl_ ? impl_->servers() : 0;
}
int communicator::gpus_per_server() const noexcept {
    return impl_ ? impl_->gpus_per_server() : 0;
}
statistics communicator::stats() const noexcept {
    return impl_ ? impl_->stats() : statistics{};
}

status communicator::alltoallv(const void* send, std::span<const std::size_t> sendcounts,
                               std::span<const std::size_t> sdispls, void* recv,
                               std::span<const std::size_t> recvcounts, std::span<const std::size_t> rdispls) noexcept {
    if (!impl_) return not_created();
    return guarded([&] { return impl_->alltoallv({send, sendcounts, sdispls, recv, recvcounts, rdispls}); });
}

status communicator::alltoallv_init(const void* send, std::span<const std::size_t> sendcounts,
                                    std::span<const std::size_t> sdispls, void* recv,
                                    std::span<const std::size_t> recvcounts, std::span<const std::size_t> rdispls,
                                    alltoallv_request& request) noexcept {
    if (!impl_) return not_created();
    return guarded([&] {
        request.impl_.reset();
        // Everything this rank allocates comes before init, which agrees with the peers: after it,
        // running out of memory would leave them a request this rank does not have.
        auto r = std::make_unique<detail::request_impl>();
        r->execution = std::make_unique<detail::operation>(impl_->transport(), impl_->memory(), impl_->timeout(),
                                                           impl_->rank(), impl_->credits());
        if (impl_->trace().on()) r->sendcounts.assign(sendcounts.begin(), sendcounts.end());
        if (status s = impl_->init({send, sendcounts, sdispls, recv, recvcounts, rdispls}, r->compiled); !s.ok())
            return s;
        r->comm = impl_;
        r->send = send;
        r->recv = recv;
        request.impl_ = std::move(r);
        return status{};
    });
}

alltoallv_request::alltoallv_request() noexcept = default;
alltoallv_request::~alltoallv_request() = default;
alltoallv_request::alltoallv_request(alltoallv_request&&) noexcept = default;
alltoallv_request& alltoallv_request::operator=(alltoallv_request&&) noexcept = default;

bool alltoallv_request::valid() const noexcept {
    return impl_ != nullptr;
}
bool alltoallv_request::active() const noexcept {
    return impl_ && impl_->active;
}

status alltoallv_request::start() noexcept {
    if (!impl_) return not_initialised();
    return guarded([&] { return impl_->start(); });
}

status alltoallv_request::test(bool& done) noexcept {
    done = true;
    if (!impl_) return not_initialised();
    return guarded([&] { return impl_->test(done); });
}

status alltoallv_request::wait() noexcept {
    if (!impl_) return not_initialised();
    return guarded([&] { return impl_->wait(); });
}

} // namespace fast::exec
