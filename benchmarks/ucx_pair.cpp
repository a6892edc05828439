#include "ucx_pair.hpp"

#include <ucp/api/ucp.h>

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace fast_perf {

namespace {

using clock_type = std::chrono::steady_clock;

std::string ucx_error(const char* call, ucs_status_t s) {
    return std::string(call) + " failed: " + ucs_status_string(s);
}

ucs_memory_type_t memory_type_of(std::string_view kind) {
    return kind == "cuda" ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

// A context and worker set up like the executor's in rendezvous mode (worker.cpp).
struct ucx_endpoint {
    ucp_context_h context = nullptr;
    ucp_worker_h worker = nullptr;
    ucp_ep_h ep = nullptr;

    ucx_endpoint() = default;
    ucx_endpoint(const ucx_endpoint&) = delete;
    ucx_endpoint& operator=(const ucx_endpoint&) = delete;
    ~ucx_endpoint() {
        if (ep != nullptr) {
            ucp_request_param_t p{}; // a flushing close (FORCE needs peer error handling)
            void* r = ucp_ep_close_nbx(ep, &p);
            if (UCS_PTR_IS_PTR(r)) {
                const auto deadline = clock_type::now() + std::chrono::seconds(1);
                while (ucp_request_check_status(r) == UCS_INPROGRESS && clock_type::now() < deadline)
                    ucp_worker_progress(worker);
                ucp_request_free(r);
            }
        }
        if (worker != nullptr) ucp_worker_destroy(worker);
        if (context != nullptr) ucp_cleanup(context);
    }

    std::string init(ucs_memory_type_t type) {
        ucp_config_t* config = nullptr;
        if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
            return ucx_error("ucp_config_read", s);
        unsigned major = 0, minor = 0, release = 0;
        ucp_get_version(&major, &minor, &release);
        if (type == UCS_MEMORY_TYPE_CUDA && major == 1 && minor < 16 && std::getenv("UCX_PROTO_ENABLE") == nullptr)
            (void)ucp_config_modify(config, "PROTO_ENABLE", "y");
        ucp_params_t params{};
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features = UCP_FEATURE_TAG;
        const ucs_status_t s = ucp_init(&params, config, &context);
        ucp_config_release(config);
        if (s != UCS_OK) {
            context = nullptr;
            return ucx_error("ucp_init", s);
        }
        ucp_context_attr_t attr{};
        attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
        if (ucs_status_t q = ucp_context_query(context, &attr); q != UCS_OK) return ucx_error("ucp_context_query", q);
        if ((attr.memory_types & UCS_BIT(type)) == 0)
            return std::string("UCX ") + ucp_get_version_string() + " does not support " + ucs_memory_type_names[type] +
                   " memory";
        ucp_worker_params_t wp{};
        wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SINGLE;
        if (ucs_status_t w = ucp_worker_create(context, &wp, &worker); w != UCS_OK) {
            worker = nullptr;
            return ucx_error("ucp_worker_create", w);
        }
        return {};
    }

    // Endpoint to the other rank, addresses exchanged through the arena.
    std::string connect(perf_arena& arena, int rank, std::chrono::milliseconds timeout) {
        ucp_address_t* address = nullptr;
        std::size_t length = 0;
        if (ucs_status_t s = ucp_worker_get_address(worker, &address, &length); s != UCS_OK)
            return ucx_error("ucp_worker_get_address", s);
        std::vector<unsigned char> mine(reinterpret_cast<unsigned char*>(address),
                                        reinterpret_cast<unsigned char*>(address) + length);
        ucp_worker_release_address(worker, address);
        const fast::exec::bootstrap boot = arena.bootstrap(rank, timeout);
        std::uint64_t lengths[2] = {0, 0};
        const std::uint64_t n = mine.size();
        if (auto st = boot.allgather(&n, lengths, sizeof n); !st.ok()) return st.message();
        mine.resize(std::max(lengths[0], lengths[1]), 0);
        std::vector<unsigned char> both(2 * mine.size());
        if (auto st = boot.allgather(mine.data(), both.data(), mine.size()); !st.ok()) return st.message();
        ucp_ep_params_t ep_params{};
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep_params.address =
            reinterpret_cast<const ucp_address_t*>(both.data() + static_cast<std::size_t>(1 - rank) * mine.size());
        if (ucs_status_t s = ucp_ep_create(worker, &ep_params, &ep); s != UCS_OK) {
            ep = nullptr;
            return ucx_error("ucp_ep_create", s);
        }
        return {};
    }
};

struct completions {
    std::size_t done = 0;
    ucs_status_t status = UCS_OK;
};

void on_send(void* request, ucs_status_t status, void* user) {
    auto* c = static_cast<completions*>(user);
    ++c->done;
    if (status != UCS_OK) c->status = status;
    ucp_request_free(request);
}

void on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user) {
    on_send(request, status, user);
}

// Counts a request that completed at once; an error fails the exchange.
bool track(ucs_status_ptr_t r, completions& c) {
    if (r == nullptr) {
        ++c.done;
        return true;
    }
    if (UCS_PTR_IS_ERR(r)) {
        c.status = UCS_PTR_STATUS(r);
        return false;
    }
    return true;
}

// One exchange: every receive and send posted, then progress until all completed and flushed.
std::string exchange(ucx_endpoint& u, ucs_memory_type_t type, char* send, char* recv, std::uint64_t bytes, int messages,
                     std::uint64_t round, std::chrono::milliseconds timeout) {
    completions c;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.user_data = &c;
    p.memory_type = type;
    std::size_t posted = 0;
    for (int k = 0; k < messages; ++k) {
        p.cb.recv = &on_recv;
        const ucp_tag_t tag = (round << 16) | static_cast<ucp_tag_t>(k);
        if (!track(
                ucp_tag_recv_nbx(u.worker, recv + static_cast<std::uint64_t>(k) * bytes, bytes, tag, ~ucp_tag_t{0}, &p),
                c))
            return ucx_error("ucp_tag_recv_nbx", c.status);
        p.cb.send = &on_send;
        if (!track(ucp_tag_send_nbx(u.ep, send + static_cast<std::uint64_t>(k) * bytes, bytes, tag, &p), c))
            return ucx_error("ucp_tag_send_nbx", c.status);
        posted += 2;
    }
    ucp_request_param_t fp{};
    fp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    fp.cb.send = &on_send;
    fp.user_data = &c;
    const auto deadline = clock_type::now() + timeout;
    bool flushing = false;
    for (;;) {
        if (c.status != UCS_OK) return ucx_error("a message", c.status);
        if (!flushing && c.done == posted) {
            flushing = true;
            if (!track(ucp_worker_flush_nbx(u.worker, &fp), c)) return ucx_error("ucp_worker_flush_nbx", c.status);
        }
        if (flushing && c.done == posted + 1) return {};
        if (clock_type::now() > deadline)
            return "the exchange of " + std::to_string(messages) + " messages of " + std::to_string(bytes) +
                   " bytes each way did not complete within " + std::to_string(timeout.count()) + " ms";
        if (ucp_worker_progress(u.worker) == 0) sched_yield();
    }
}

block_table table_of(int sender, int messages, std::uint64_t bytes) {
    block_table t;
    for (int k = 0; k < messages; ++k) {
        t.displs.push_back(static_cast<std::uint64_t>(k) * bytes);
        t.counts.push_back(bytes);
        t.ids.push_back(static_cast<std::uint64_t>(sender * messages + k));
    }
    return t;
}

// The endpoint's description, into rank 0's slot.
void save_info(perf_arena& arena, ucp_ep_h ep) {
    char* text = nullptr;
    std::size_t length = 0;
    FILE* f = open_memstream(&text, &length);
    if (f == nullptr) return;
    ucp_ep_print_info(ep, f);
    std::fclose(f);
    const std::uint64_t n = std::min<std::uint64_t>(length, arena.slot_bytes());
    std::memcpy(arena.slot(0), &n, 8);
    std::memcpy(arena.slot(0) + 8, text, n);
    std::free(text);
}

} // namespace

std::string run_pair(perf_arena& arena, int rank, perf_memory& mem, const pair_options& o) {
    const ucs_memory_type_t type = memory_type_of(mem.kind());
    ucx_endpoint u;
    if (std::string e = u.init(type); !e.empty()) return e;
    if (std::string e = u.connect(arena, rank, o.timeout); !e.empty()) return e;
    const std::uint64_t largest = *std::max_element(o.sizes.begin(), o.sizes.end());
    const std::uint64_t extent = largest * static_cast<std::uint64_t>(o.messages);
    void* send = nullptr;
    void* recv = nullptr;
    std::string error = mem.allocate(send, extent);
    if (error.empty()) error = mem.allocate(recv, extent);
    double* values = arena.values(rank);
    std::uint64_t round = 0;
    for (std::size_t s = 0; s < o.sizes.size() && error.empty(); ++s) {
        const block_table mine = table_of(rank, o.messages, o.sizes[s]),
                          theirs = table_of(1 - rank, o.messages, o.sizes[s]);
        double wrong = 0;
        for (int run = 0; run < o.runs && error.empty(); ++run) {
            const auto key = static_cast<std::uint8_t>(++round * 0x5b);
            if (error = mem.fill(send, mine, key); !error.empty()) break;
            if (!arena.barrier(rank, o.timeout, error)) break;
            const auto t0 = clock_type::now();
            error = exchange(u, type, static_cast<char*>(send), static_cast<char*>(recv), o.sizes[s], o.messages, round,
                             o.timeout);
            values[s * static_cast<std::size_t>(o.runs) + static_cast<std::size_t>(run)] =
                std::chrono::duration<double>(clock_type::now() - t0).count();
            std::uint64_t bad = 0;
            if (error.empty()) error = mem.check(recv, theirs, key, bad);
            wrong += static_cast<double>(bad);
        }
        values[o.sizes.size() * static_cast<std::size_t>(o.runs) + s] = wrong;
    }
    if (error.empty() && rank == 0) save_info(arena, u.ep);
    if (error.empty()) (void)arena.barrier(rank, o.timeout, error); // both done before either closes
    mem.release(send);
    mem.release(recv);
    return error;
}

std::string ucx_supports(const std::string& memory) {
    ucx_endpoint u;
    return u.init(memory_type_of(memory));
}

namespace {

// "8185", "8K", "inf" as bytes.
std::uint64_t parse_units(const std::string& text) {
    if (text == "inf" || text == "(inf)") return UINT64_MAX;
    std::size_t used = 0;
    std::uint64_t v = 0;
    try {
        v = std::stoull(text, &used);
    } catch (...) {
        return UINT64_MAX;
    }
    const std::string unit = text.substr(used);
    static const char* const units[] = {"", "K", "M", "G", "T", "P", "E"};
    for (int k = 0; k < 7; ++k)
        if (unit == units[k]) return v << (10 * k);
    return v;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t#");
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// The cells of a table row "| a | b | c |".
std::vector<std::string> cells(const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line.substr(line.find('|') + 1));
    for (std::string cell; std::getline(ss, cell, '|');) out.push_back(trim(cell));
    if (!out.empty() && out.back().empty()) out.pop_back();
    return out;
}

// "0..<egr/short>..8185..<egr/bcopy>..8192..<rndv>..(inf)": the protocol for `bytes`.
protocol_choice original_choice(const std::string& thresholds, std::uint64_t bytes) {
    std::vector<std::string> parts;
    for (std::size_t at = 0; at <= thresholds.size();) {
        const std::size_t dots = std::min(thresholds.find("..", at), thresholds.size());
        parts.push_back(thresholds.substr(at, dots - at));
        at = dots + 2;
    }
    // number, <proto>, number, <proto>, ..., number
    for (std::size_t k = 1; k + 1 < parts.size(); k += 2)
        if (bytes >= parse_units(parts[k - 1]) && bytes < parse_units(parts[k + 1]))
            return {"tag_send (original protocols; host memory's thresholds)", parts[k - 1] + ".." + parts[k + 1],
                    parts[k].substr(1, parts[k].size() > 2 ? parts[k].size() - 2 : 0)};
    return {};
}

} // namespace

std::vector<protocol_choice> protocols_for(const std::string& info, std::uint64_t bytes) {
    std::vector<protocol_choice> out, original;
    std::stringstream ss(info);
    std::string operation;
    for (std::string line; std::getline(ss, line);) {
        if (const auto at = line.find("tag_send:"); at != std::string::npos) {
            if (protocol_choice c = original_choice(trim(line.substr(at + 9)), bytes); !c.protocol.empty())
                original.push_back(c);
            continue;
        }
        if (line.find('|') == std::string::npos) continue;
        const std::vector<std::string> row = cells(line);
        // A table's title: "context | operation" on one line, or (UCX 1.22) each on a line of its own.
        if (row.size() == 1 || row.size() == 2) operation = row.back();
        if (row.size() != 3 || operation.find("ucp_tag_send") == std::string::npos) continue;
        const std::size_t dots = row[0].find("..");
        const std::uint64_t lo = parse_units(row[0].substr(0, dots));
        const std::uint64_t hi = dots == std::string::npos ? lo : parse_units(row[0].substr(dots + 2));
        if (bytes >= lo && bytes <= hi) out.push_back({operation, row[0], row[1] + " via " + row[2]});
    }
    return out.empty() ? original : out; // with the new protocols, the original thresholds go unused
}

} // namespace fast_perf
