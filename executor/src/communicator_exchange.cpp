// The communicator's control exchange over UCX: the same number of bytes to and from every
// rank (the handshake at creation, the count agreement of every call), and the flush that ends
// both. Both are bounded by the timeout; a failure leaves the communicator unusable.

#include "communicator_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace fast::exec::detail {

namespace {

using clock = std::chrono::steady_clock;

} // namespace

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

} // namespace fast::exec::detail
