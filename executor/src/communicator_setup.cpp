// Creating a communicator: this rank's own set-up (configuration, memory, UCX worker), then
// three rounds over the bootstrap's allgather (configurations, worker addresses, connection
// outcomes) with endpoints and a handshake in between. Every rank returns the same status.

#include "communicator_impl.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fast/error.hpp>

#include "hosts.hpp"
#include "wire.hpp"

namespace fast::exec::detail {

namespace {

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
    std::int32_t agreement;      // config.agreement, or FAST_AGREEMENT where set
    std::int32_t fabric_servers; // FAST_FABRIC's cluster, 0 where it is not set
    std::int32_t fabric_gpus_per_server;
    std::int32_t reserved;
    std::uint64_t fabric_rates; // rates_digest of the ranks' rates in force (FAST_FABRIC's, config.nic_gbps)
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

// FAST_AGREEMENT's agreement, or `fallback` where it is not set; false if it names none.
bool agreement_from_environment(exec::agreement fallback, exec::agreement& out) {
    const char* env = std::getenv("FAST_AGREEMENT");
    out = fallback;
    if (env == nullptr) return true;
    for (const exec::agreement a : {exec::agreement::automatic, exec::agreement::gather, exec::agreement::servers})
        if (to_string(a) == env) {
            out = a;
            return true;
        }
    return false;
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
    if (cfg.agreement != exec::agreement::automatic && cfg.agreement != exec::agreement::gather &&
        cfg.agreement != exec::agreement::servers)
        return "config.agreement is not a known agreement";
    if (exec::agreement a; !agreement_from_environment(cfg.agreement, a))
        return "FAST_AGREEMENT must be automatic, gather or servers, got '" +
               std::string(std::getenv("FAST_AGREEMENT")).substr(0, 40) + "'";
    return {};
}

// The agreement `a` runs on `t`: automatic is the one the cost model predicts faster.
fast::agreement_kind agreement_on(exec::agreement a, const fast::topology& t) {
    return a == exec::agreement::gather    ? fast::agreement_kind::gather
           : a == exec::agreement::servers ? fast::agreement_kind::servers
                                           : fast::plan_agreement(t).kind;
}

// The planner's scheduler for the executor's.
fast::scheduler planner_scheduler(exec::scheduler s) {
    return s == exec::scheduler::direct ? fast::scheduler::direct
           : s == exec::scheduler::fast ? fast::scheduler::fast
                                        : fast::scheduler::automatic;
}

// "2 x 4", or "none" where FAST_FABRIC is not set.
std::string shape_text(const hello& h) {
    return h.fabric_servers == 0 ? "none"
                                 : std::to_string(h.fabric_servers) + " x " + std::to_string(h.fabric_gpus_per_server);
}

// The error where FAST_FABRIC's file describes another cluster than the ranks form, or "".
std::string shape_error(const fabric_shape& file, const grouping& g) {
    if (file.servers == 0 || (file.servers == g.servers && file.gpus_per_server == g.gpus_per_server)) return {};
    return "FAST_FABRIC describes " + std::to_string(file.servers) + " servers x " +
           std::to_string(file.gpus_per_server) + " GPUs, but the ranks form " + std::to_string(g.servers) +
           " servers x " + std::to_string(g.gpus_per_server) + " (by host, or config.gpus_per_server)";
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
    auto agreement = [](std::int32_t v) { return std::string(to_string(static_cast<exec::agreement>(v))); };
    if (h.gpus_per_server != h0.gpus_per_server)
        return differs("gpus_per_server", std::to_string(h.gpus_per_server), std::to_string(h0.gpus_per_server));
    if (h.scheduler != h0.scheduler) return differs("scheduler", sched(h.scheduler), sched(h0.scheduler));
    if (h.memory != h0.memory) return differs("memory", mem(h.memory), mem(h0.memory));
    if (h.iov != h0.iov) return differs("iov", h.iov ? "true" : "false", h0.iov ? "true" : "false");
    if (h.flow != h0.flow) return differs("flow", flow(h.flow), flow(h0.flow));
    if (h.agreement != h0.agreement)
        return differs("agreement (config.agreement or FAST_AGREEMENT)", agreement(h.agreement),
                       agreement(h0.agreement));
    if (h.fabric_servers != h0.fabric_servers || h.fabric_gpus_per_server != h0.fabric_gpus_per_server)
        return differs("FAST_FABRIC's servers x GPUs", shape_text(h), shape_text(h0));
    if (h.fabric_rates != h0.fabric_rates)
        return differs("NIC rates (config.nic_gbps or FAST_FABRIC's; digest)", std::to_string(h.fabric_rates),
                       std::to_string(h0.fabric_rates));
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

} // namespace

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
    (void)agreement_from_environment(cfg.agreement, cfg_.agreement); // a bad value: config_error
    boot_ = boot;
    // A local failure is reported through the first allgather, so that all ranks agree.
    std::vector<unsigned char> address;
    const status local = set_up(address);
    std::vector<std::string> hosts;
    std::uint64_t longest = 0;
    if (status s = agree_on_configuration(local, address.size(), hosts, longest); !s.ok()) return s;
    const grouping g = group_ranks(hosts, cfg.gpus_per_server);
    if (!g.error.empty()) return status(errc::invalid_argument, "creating the communicator: " + g.error);
    if (std::string why = shape_error(fabric_shape_, g); !why.empty())
        return status(errc::invalid_argument, "creating the communicator: " + why);
    topo_ = topology_of(g.servers, g.gpus_per_server, cfg_); // FAST_FABRIC's figures, where set
    if (size_ > max_ranks)
        return status(errc::invalid_argument, "creating the communicator: " + std::to_string(size_) +
                                                  " ranks, more than the " + std::to_string(max_ranks) +
                                                  " a message tag can name");
    // The planners before any endpoint: a fabric they refuse fails every rank alike.
    if (status s = make_planners(); !s.ok()) return s;
    routes_ = control_routes(topo_, fabric_shape_.nic_rates);
    // Round 2: worker addresses; then endpoints and a handshake; round 3: did everyone connect?
    std::vector<unsigned char> padded(longest, 0);
    std::copy(address.begin(), address.end(), padded.begin());
    std::vector<unsigned char> addresses;
    if (status s = gather(padded.data(), longest, addresses); !s.ok()) return s;
    if (status s = report_connection(connect(addresses, longest, hosts)); !s.ok()) return s;
    open_trace();
    operation_ = std::make_unique<operation>(worker_, *memory_, cfg_.timeout, rank_, credits());
    counts_ = make_count_agreement(agreement_on(cfg_.agreement, topo_), topo_, rank_);
    return {};
}

// The planners of every call (and one with split blocks where messages must be single
// segments). Uneven rates (FAST_FABRIC's or config.nic_gbps): plans spread each server pair over
// its rails by rate.
status communicator_impl::make_planners() {
    fast::plan_options options;
    options.scheduler = planner_scheduler(cfg_.scheduler);
    const std::vector<double>& rates = fabric_shape_.nic_rates;
    auto make_planner = [&](const fast::plan_options& o) {
        return rates.empty() ? std::make_unique<fast::planner>(topo_, o)
                             : std::make_unique<fast::planner>(fast::fabric_of_rates(topo_, rates), o);
    };
    try {
        planner_ = make_planner(options);
        if (single_segments()) {
            options.split_blocks = true;
            split_planner_ = make_planner(options);
        }
    } catch (const fast::invalid_argument& e) { // a server with every NIC down
        return status(errc::invalid_argument, std::string("creating the communicator: config.nic_gbps: ") + e.what());
    }
    return {};
}

// This rank's own set-up: the configuration, the memory backend, the UCX worker and its
// address. Returns what failed (reported to every rank in the first round), or ok.
status communicator_impl::set_up(std::vector<unsigned char>& address) {
    if (std::string why = config_error(cfg_); !why.empty()) return status(errc::invalid_argument, why);
    // FAST_FABRIC's figures replace the configuration's (and so take part in its comparison).
    if (std::string why = fabric_from_environment(cfg_, fabric_shape_); !why.empty())
        return status(errc::invalid_argument, why);
    if (fabric_shape_.servers == 0 && !cfg_.nic_gbps.empty()) {
        if (cfg_.nic_gbps.size() != static_cast<std::size_t>(size_))
            return status(errc::invalid_argument, "config.nic_gbps has " + std::to_string(cfg_.nic_gbps.size()) +
                                                      " rates for " + std::to_string(size_) + " ranks");
        for (std::size_t r = 0; r < cfg_.nic_gbps.size(); ++r)
            if (const double v = cfg_.nic_gbps[r]; !(std::isfinite(v) && v >= 0))
                return status(errc::invalid_argument, "config.nic_gbps[" + std::to_string(r) +
                                                          "] must be >= 0 and finite, got " +
                                                          fast::detail::format_number(v));
        fabric_shape_.nic_rates = cfg_.nic_gbps;
    }
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
    mine.agreement = static_cast<std::int32_t>(cfg_.agreement);
    mine.fabric_servers = fabric_shape_.servers;
    mine.fabric_gpus_per_server = fabric_shape_.gpus_per_server;
    mine.fabric_rates = rates_digest(fabric_shape_.nic_rates);
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

// Endpoints to every rank not cut off by a NIC that is down (`addresses`: rank r's worker address
// at r * stride), a message to and from every peer, a flush, and the endpoints armed for aborts. Returns this rank's outcome
// (reported to every rank in round 3).
status communicator_impl::connect(const std::vector<unsigned char>& addresses, std::uint64_t stride,
                                  const std::vector<std::string>& hosts) {
    const auto ur = static_cast<std::size_t>(size_);
    std::vector<const unsigned char*> where(ur);
    std::vector<char> same_host(ur, 0), cut_off(ur, 0);
    for (std::size_t r = 0; r < ur; ++r) {
        where[r] = addresses.data() + r * stride;
        same_host[r] = hosts[r] == hosts[static_cast<std::size_t>(rank_)];
        cut_off[r] = routes_.cut_off(rank_, static_cast<int>(r));
    }
    if (std::string e = worker_.connect(where, same_host, cut_off); !e.empty()) return status(errc::transport, e);
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
    const std::uint64_t mine = wire_magic ^ static_cast<std::uint64_t>(rank_);
    std::vector<unsigned char> all(sizeof mine * static_cast<std::size_t>(size_));
    exchange_round round{control::hello,
                         0,
                         rank_group::all(size_),
                         sizeof mine,
                         reinterpret_cast<const unsigned char*>(&mine),
                         0,
                         all.data(),
                         "exchanging the first message with every peer"};
    if (status s = exchange(round); !s.ok()) return s;
    for (int r = 0; r < size_; ++r) {
        std::uint64_t v = 0;
        std::memcpy(&v, all.data() + static_cast<std::size_t>(r) * sizeof v, sizeof v);
        if (v != (wire_magic ^ static_cast<std::uint64_t>(r)))
            return status(errc::transport, "rank " + std::to_string(rank_) +
                                               ": received a garbled first message from rank " + std::to_string(r));
    }
    if (status s = flush(); !s.ok()) return s;
    round.kind = control::ready;
    round.what = "exchanging the second message with every peer";
    return exchange(round);
}

// The agreement in force, as the configuration names it.
exec::agreement communicator_impl::agreement() const noexcept {
    return counts_ && counts_->kind() == fast::agreement_kind::servers ? exec::agreement::servers
                                                                       : exec::agreement::gather;
}

} // namespace fast::exec::detail
