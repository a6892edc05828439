// The communicator's control exchange over UCX: rounds of messages of one size among a group of
// ranks (the handshake at creation among all, the count agreement's rounds of every call), and
// the flush that ends both. Both are bounded by the timeout; a failure leaves the communicator
// unusable.

#include "communicator_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace fast::exec::detail {

namespace {

using clock = std::chrono::steady_clock;

} // namespace

// One round of the control exchange (exchange_round.hpp): every member of the round's group
// sends each other member a message of the same size and receives one from each, over UCX, so
// that it makes progress for everything else in flight; messages to or from a rank whose NIC is
// down go through stand-ins (control_routes.hpp), and this rank carries those of its own server's
// such ranks. Bounded by the timeout; a failure leaves the communicator unusable (the ranks no
// longer agree where they are). Allocates nothing once the slots have grown to the largest group
// (the handshake's: every rank).
status communicator_impl::exchange(const exchange_round& r) {
    const auto n = static_cast<std::size_t>(r.group.count);
    const auto me = static_cast<std::size_t>(r.group.index_of(rank_));
    std::memcpy(r.recv + me * r.bytes, r.send + me * r.send_stride, r.bytes);
    relays_.clear();
    routes_.for_each_carried(rank_, r.group, [&](int from, int to) {
        relays_.push_back({from, to, routes_.next_hop(rank_, from, to), false});
    });
    relay_buffer_.resize(std::max(relay_buffer_.size(), relays_.size() * r.bytes));
    slot_block& b = exchange_slots_;
    b.slots.assign(2 * n + 2 * relays_.size(), op_slot{});
    b.completed = 0;
    // Sized before anything is posted (cancelling must not allocate), and kept.
    exchange_closing_.assign(static_cast<std::size_t>(size_), op_slot{});
    exchange_state x;
    try {
        post_exchange(r, x);
        if (x.error.empty()) wait_exchange(r, x);
        if (x.error.empty()) check_exchange(r, x);
        if (x.error.empty()) return {};
        const status failure(x.code, "rank " + std::to_string(rank_) + ": " + r.what + ": " + x.error);
        mark_failed(failure); // tells the peers before the endpoints are closed
        cancel_exchange(r.group, x.expected);
        return failure;
    } catch (...) {
        // Out of memory building a message: handled here, while the round's buffers are still
        // alive under UCX, not by unwinding past them.
        const status failure = fail_thrown(); // tells the peers before the endpoints are closed
        cancel_exchange(r.group, x.expected);
        return failure;
    }
}

// Posts a receive from every other member (slot k) and of every message this rank carries (slot
// 2n + j), then a send to every other member (slot n + k), to its first stand-in where the route
// has one; stops at the first that fails.
void communicator_impl::post_exchange(const exchange_round& r, exchange_state& x) {
    const auto n = static_cast<std::size_t>(r.group.count);
    slot_block& b = exchange_slots_;
    for (std::size_t k = 0; k < n && x.error.empty(); ++k) {
        const int peer = r.group.rank_at(static_cast<int>(k));
        if (peer == rank_) continue;
        op_slot& s = b.slots[k];
        s.block = &b;
        const ucs_status_t st =
            worker_.recv(r.recv + k * r.bytes, r.bytes, false, make_control_tag(r.kind, r.seq, peer), s, true);
        if (st == UCS_INPROGRESS) ++x.expected;
        else if (st != UCS_OK) x.error = "receiving from rank " + std::to_string(peer) + ": " + ucx_error(st);
    }
    for (std::size_t j = 0; j < relays_.size() && x.error.empty(); ++j) {
        const relay& c = relays_[j];
        op_slot& s = b.slots[2 * n + j];
        s.block = &b;
        const ucs_status_t st = worker_.recv(relay_buffer_.data() + j * r.bytes, r.bytes, false,
                                             make_relay_tag(r.kind, r.seq, c.from, c.to), s, true);
        if (st == UCS_INPROGRESS) ++x.expected;
        else if (st != UCS_OK) x.error = "receiving rank " + std::to_string(c.from) + "'s message for rank " +
                                         std::to_string(c.to) + ": " + ucx_error(st);
    }
    for (std::size_t k = 0; k < n && x.error.empty(); ++k) {
        const int peer = r.group.rank_at(static_cast<int>(k));
        if (peer == rank_) continue;
        const int hop = routes_.next_hop(rank_, rank_, peer);
        const std::uint64_t tag =
            hop == peer ? make_control_tag(r.kind, r.seq, rank_) : make_relay_tag(r.kind, r.seq, rank_, peer);
        send_control(hop, r.send + k * r.send_stride, r.bytes, tag, b.slots[n + k], x);
    }
}

// Posts one control message of this round; an error that UCX reports at once ends the round.
void communicator_impl::send_control(int hop, const unsigned char* message, std::size_t bytes, std::uint64_t tag,
                                     op_slot& s, exchange_state& x) {
    s.block = &exchange_slots_;
    const ucs_status_t st = worker_.send(hop, message, bytes, false, tag, s, true);
    if (st == UCS_INPROGRESS) ++x.expected;
    else if (st != UCS_OK) {
        x.code = worker_.peer(hop).error != UCS_OK ? errc::peer_failure : errc::transport;
        x.error = "sending to rank " + std::to_string(hop) + ": " + ucx_error(st);
    }
}

// Passes on every carried message that has arrived (slot 2n + j) and not yet been passed on: to
// its receiver with its sender's plain tag, or to the receiver's stand-in (slot 2n + m + j).
void communicator_impl::forward_relays(const exchange_round& r, exchange_state& x) {
    const auto n = static_cast<std::size_t>(r.group.count), m = relays_.size();
    for (std::size_t j = 0; j < m && x.error.empty(); ++j) {
        relay& c = relays_[j];
        const op_slot& in = exchange_slots_.slots[2 * n + j];
        if (c.forwarded || !in.done || in.status != UCS_OK || in.length != r.bytes) continue; // check_exchange says
        c.forwarded = true;
        const std::uint64_t tag = c.next == c.to ? make_control_tag(r.kind, r.seq, c.from)
                                                 : make_relay_tag(r.kind, r.seq, c.from, c.to);
        send_control(c.next, relay_buffer_.data() + j * r.bytes, r.bytes, tag, exchange_slots_.slots[2 * n + m + j], x);
    }
}

// Progresses until every posted message completed, a peer gave up or failed, or the timeout. In
// a later round of a protocol (r.follows) a timeout first waits a little longer for an abort:
// a silent member may be stuck in an earlier round behind a rank that is gone, and its own
// timeout, which names that rank, comes about as soon as this one.
void communicator_impl::wait_exchange(const exchange_round& r, exchange_state& x) {
    const slot_block& b = exchange_slots_;
    auto deadline = clock::now() + cfg_.timeout;
    bool grace = !r.follows;
    std::size_t seen = worker_.error_events();
    for (;;) {
        forward_relays(r, x);
        if (!x.error.empty() || b.completed >= x.expected) return;
        if (worker_.aborted()) {
            x.code = static_cast<errc>(worker_.abort_code());
            if (x.code <= errc::ok || x.code > errc::internal) x.code = errc::peer_failure;
            x.error =
                "rank " + std::to_string(worker_.abort_sender()) + " gave up on the call: " + worker_.abort_message();
            return;
        }
        if (worker_.error_events() != seen) {
            seen = worker_.error_events();
            if (const int failed = failed_member(r.group); failed >= 0) {
                x.code = errc::peer_failure;
                x.error = "rank " + std::to_string(failed) + " failed (" + ucx_error(worker_.peer(failed).error) + ")";
                return;
            }
        }
        // The deadline every round, not only when progress runs dry: it may never do.
        const bool idle = worker_.progress() == 0;
        if (b.completed < x.expected && clock::now() > deadline) {
            if (!grace) {
                grace = true;
                deadline = clock::now() + std::min(cfg_.timeout / 4, std::chrono::milliseconds(1000));
                continue;
            }
            x.code = errc::timeout;
            x.error = "no message within " + std::to_string(cfg_.timeout.count()) + " ms from " + silent_ranks(r.group);
            return;
        }
        if (idle) worker_.idle(deadline);
    }
}

// The first rank with a failed endpoint that an outstanding message of the current round passes
// through (a member, or a stand-in on the way), or -1.
int communicator_impl::failed_member(const rank_group& g) const {
    const auto n = static_cast<std::size_t>(g.count), m = relays_.size();
    const std::vector<op_slot>& slots = exchange_slots_.slots;
    auto failed = [&](int r) { return r != rank_ && worker_.peer(r).error != UCS_OK; };
    for (std::size_t k = 0; k < n; ++k) {
        const int peer = g.rank_at(static_cast<int>(k));
        if (peer == rank_) continue;
        if (const int from = routes_.previous_hop(rank_, peer, rank_); !slots[k].done && failed(from)) return from;
        if (const int to = routes_.next_hop(rank_, rank_, peer); !slots[n + k].done && failed(to)) return to;
    }
    for (std::size_t j = 0; j < m; ++j) {
        const relay& c = relays_[j];
        if (const int from = routes_.previous_hop(rank_, c.from, c.to); !slots[2 * n + j].done && failed(from))
            return from;
        if (!slots[2 * n + m + j].done && failed(c.next)) return c.next;
    }
    return -1;
}

// "ranks 2, 5" (at most 8 named): the members whose message of the current round has not come.
std::string communicator_impl::silent_ranks(const rank_group& g) const {
    std::string missing;
    int count = 0;
    for (int k = 0; k < g.count; ++k)
        if (g.rank_at(k) != rank_ && !exchange_slots_.slots[static_cast<std::size_t>(k)].done && ++count <= 8)
            missing += (count > 1 ? ", " : "") + std::to_string(g.rank_at(k));
    std::string carried; // the first message this rank carries that has not come
    for (std::size_t j = 0; j < relays_.size() && carried.empty(); ++j)
        if (!exchange_slots_.slots[2 * static_cast<std::size_t>(g.count) + j].done)
            carried = "; rank " + std::to_string(relays_[j].from) + "'s for rank " + std::to_string(relays_[j].to) +
                      " that this rank carries";
    return std::string("rank") + (count > 1 ? "s " : " ") +
           (missing.empty() ? carried.empty() ? "(none: sends pending)" : "(none)" : missing) +
           (count > 8 ? ", ..." : "") + carried;
}

// Every message of a completed round succeeded and brought r.bytes bytes.
void communicator_impl::check_exchange(const exchange_round& r, exchange_state& x) {
    const auto n = static_cast<std::size_t>(r.group.count);
    for (std::size_t k = 0; k < n; ++k) {
        const int peer = r.group.rank_at(static_cast<int>(k));
        if (peer == rank_) continue;
        const op_slot& in = exchange_slots_.slots[k];
        const op_slot& outgoing = exchange_slots_.slots[n + k];
        const int from = routes_.previous_hop(rank_, peer, rank_), to = routes_.next_hop(rank_, rank_, peer);
        const ucs_status_t peer_error =
            worker_.peer(from).error != UCS_OK ? worker_.peer(from).error : worker_.peer(to).error;
        if (in.status != UCS_OK || outgoing.status != UCS_OK) {
            x.code = peer_error != UCS_OK ? errc::peer_failure : errc::transport;
            x.error = "with rank " + std::to_string(peer) + ": " +
                      ucx_error(peer_error != UCS_OK  ? peer_error
                                : in.status != UCS_OK ? in.status
                                                      : outgoing.status);
            return;
        }
        if (in.length != r.bytes) { // both ends agree on the size of every round: a bug
            x.code = errc::internal;
            x.error = "rank " + std::to_string(peer) + " sent " + std::to_string(in.length) + " bytes, expected " +
                      std::to_string(r.bytes);
            return;
        }
    }
    for (std::size_t j = 0; j < relays_.size(); ++j) {
        const op_slot& in = exchange_slots_.slots[2 * n + j];
        const op_slot& onward = exchange_slots_.slots[2 * n + relays_.size() + j];
        if (in.status == UCS_OK && onward.status == UCS_OK && in.length == r.bytes) continue;
        const bool peer_failed = worker_.peer(relays_[j].next).error != UCS_OK ||
                                 worker_.peer(routes_.previous_hop(rank_, relays_[j].from, relays_[j].to)).error != UCS_OK;
        x.code = in.status == UCS_OK && onward.status == UCS_OK ? errc::internal
                 : peer_failed                                 ? errc::peer_failure
                                                               : errc::transport;
        x.error = "carrying rank " + std::to_string(relays_[j].from) + "'s message for rank " +
                  std::to_string(relays_[j].to) + ": " +
                  (in.status != UCS_OK       ? ucx_error(in.status)
                   : onward.status != UCS_OK ? ucx_error(onward.status)
                                             : std::to_string(in.length) + " bytes, expected " + std::to_string(r.bytes));
        return;
    }
}

// Cancels what a round posted: receives directly, sends by closing their endpoints. Never
// throws, so it also runs when a message cannot be built for lack of memory.
void communicator_impl::cancel_exchange(const rank_group& g, std::size_t expected) noexcept {
    const auto n = static_cast<std::size_t>(g.count);
    slot_block& b = exchange_slots_;
    for (std::size_t k = 0; k < n; ++k) {
        const int peer = g.rank_at(static_cast<int>(k));
        if (peer == rank_) continue;
        worker_.cancel(b.slots[k]);
        const int hop = routes_.next_hop(rank_, rank_, peer);
        if (!b.slots[n + k].done) (void)worker_.force_close(hop, exchange_closing_[static_cast<std::size_t>(hop)]);
    }
    for (std::size_t j = 0; j < relays_.size(); ++j) {
        worker_.cancel(b.slots[2 * n + j]);
        const int hop = relays_[j].next;
        if (!b.slots[2 * n + relays_.size() + j].done)
            (void)worker_.force_close(hop, exchange_closing_[static_cast<std::size_t>(hop)]);
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
