#include "store_bootstrap.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <memory>
#include <vector>

namespace fast_torch {
namespace {

using fast::exec::errc;
using fast::exec::status;

struct store_state {
    c10::intrusive_ptr<c10d::Store> store;
    std::string prefix;
    int rank = 0;
    int size = 0;
    std::chrono::milliseconds timeout{0};
    int round = 0;
};

// c10::Error's what() carries a C++ backtrace: one line is enough here.
std::string text_of(const std::exception& e) {
    if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
    return e.what();
}

// "ranks 1, 3" of the keys still missing (the store answers each check at once).
std::string missing_ranks(c10d::Store& store, const std::vector<std::string>& keys) {
    std::string out;
    for (std::size_t r = 0; r < keys.size(); ++r) {
        bool present = false;
        try {
            present = store.check({keys[r]});
        } catch (const std::exception&) {}
        if (!present) out += (out.empty() ? "" : ", ") + std::to_string(r);
    }
    return out;
}

status store_allgather(store_state& s, const void* send, void* recv, std::size_t bytes) {
    const std::string base = s.prefix + "/" + std::to_string(s.round++) + "/";
    std::vector<std::string> keys;
    for (int r = 0; r < s.size; ++r) keys.push_back(base + std::to_string(r));
    const auto* in = static_cast<const std::uint8_t*>(send);
    try {
        s.store->set(keys[static_cast<std::size_t>(s.rank)], std::vector<std::uint8_t>(in, in + bytes));
    } catch (const std::exception& e) {
        return status(errc::bootstrap,
                      "rank " + std::to_string(s.rank) + " cannot write the c10d store: " + text_of(e));
    }
    try {
        s.store->wait(keys, s.timeout);
    } catch (const std::exception& e) {
        return status(errc::bootstrap, "rank " + std::to_string(s.rank) + ": the keys of rank(s) " +
                                           missing_ranks(*s.store, keys) + " did not appear in the c10d store within " +
                                           std::to_string(s.timeout.count()) +
                                           " ms (a rank is missing or stopped creating the group): " + text_of(e));
    }
    auto* out = static_cast<std::uint8_t*>(recv);
    for (std::size_t r = 0; r < keys.size(); ++r) {
        std::vector<std::uint8_t> value;
        try {
            value = s.store->get(keys[r]);
        } catch (const std::exception& e) {
            return status(errc::bootstrap, "rank " + std::to_string(s.rank) + " cannot read key " + keys[r] +
                                               " of the c10d store: " + text_of(e));
        }
        if (value.size() != bytes)
            return status(errc::bootstrap, "key " + keys[r] + " of the c10d store holds " +
                                               std::to_string(value.size()) + " bytes, expected " +
                                               std::to_string(bytes) + " (another group uses the same store prefix?)");
        if (bytes > 0) std::memcpy(out + r * bytes, value.data(), bytes);
    }
    return {};
}

} // namespace

fast::exec::bootstrap make_store_bootstrap(c10::intrusive_ptr<c10d::Store> store, std::string prefix, int rank,
                                           int size, std::chrono::milliseconds timeout) {
    auto state = std::make_shared<store_state>();
    state->store = std::move(store);
    state->prefix = std::move(prefix);
    state->rank = rank;
    state->size = size;
    state->timeout = timeout;
    fast::exec::bootstrap boot;
    boot.rank = rank;
    boot.size = size;
    boot.allgather = [state](const void* send, void* recv, std::size_t bytes) {
        try {
            return store_allgather(*state, send, recv, bytes);
        } catch (const std::bad_alloc&) {
            return status(errc::out_of_memory, "out of host memory in the c10d store allgather");
        }
    };
    return boot;
}

void publish_error(c10d::Store& store, const std::string& prefix, std::uint64_t call, int rank,
                   const std::string& text) {
    try {
        store.set(prefix + "/" + std::to_string(call) + "/" + std::to_string(rank),
                  std::vector<std::uint8_t>(text.begin(), text.end()));
    } catch (const std::exception&) {
        // The peers then report the executor's own message, which names this rank.
    }
}

std::string find_error(c10d::Store& store, const std::string& prefix, std::uint64_t call, int size) {
    for (int r = 0; r < size; ++r) {
        const std::string key = prefix + "/" + std::to_string(call) + "/" + std::to_string(r);
        try {
            if (!store.check({key})) continue;
            const std::vector<std::uint8_t> value = store.get(key);
            return std::string(value.begin(), value.end());
        } catch (const std::exception&) {
            return {};
        }
    }
    return {};
}

} // namespace fast_torch
