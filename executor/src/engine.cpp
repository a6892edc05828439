#include "engine.hpp"

#include <sched.h>

#include <algorithm>
#include <new>
#include <string>

namespace fast::exec::detail {

namespace {

using clock = std::chrono::steady_clock;

std::string describe(const op& o) {
    std::string s = o.kind == op_kind::send ? "send of " : o.kind == op_kind::recv ? "receive of " : "copy of ";
    s += std::to_string(o.bytes) + " bytes";
    if (o.kind == op_kind::send) s += " to rank " + std::to_string(o.peer);
    if (o.kind == op_kind::recv) s += " from rank " + std::to_string(o.peer);
    return s + " (message " + std::to_string(tag_pair_index(o.tag)) + " from rank " +
           std::to_string(tag_sender(o.tag)) + ")";
}

} // namespace

operation::~operation() {
    if (active()) (void)cancel(status(errc::internal, "operation destroyed while in progress"));
}

status operation::start(const program& p, const bases& b, std::uint64_t seq) noexcept {
    if (active()) return status(errc::busy, "rank " + std::to_string(rank_) + ": the operation is already in progress");
    try {
        prog_ = &p;
        seq_ = seq;
        step_ = 0;
        broken_ = false;
        copies_pending_ = false;
        iov_.resize(p.segments.size());
        for (std::size_t k = 0; k < p.segments.size(); ++k) {
            const segment& s = p.segments[k];
            char* base = s.where == region::send   ? static_cast<char*>(const_cast<void*>(b.send))
                         : s.where == region::recv ? static_cast<char*>(b.recv)
                                                   : static_cast<char*>(b.scratch);
            iov_[k].buffer = base + s.offset;
            iov_[k].length = s.length;
        }
        phase_ = phase::steps;
        return p.steps() == 0 ? post_closing() : post_step();
    } catch (...) {
        phase_ = phase::done;
        return status(errc::out_of_memory,
                      "rank " + std::to_string(rank_) + ": out of host memory starting the operation");
    }
}

status operation::post_step() noexcept {
    try {
        const std::size_t first = prog_->step_offsets[step_];
        const std::size_t n = prog_->step_offsets[step_ + 1] - first;
        ops_in_step_ = n;
        find_credit_peers(first, n);
        credit_out_.assign(credit_out_peer_.size(), prog_->ops[first].step);
        credit_in_.assign(credit_in_peer_.size(), 0);
        credit_taken_.assign(credit_in_peer_.size(), 0);
        credits_missing_ = credit_in_peer_.size();
        block_.slots.assign(n + credit_out_peer_.size() + credit_in_peer_.size(), op_slot{});
        block_.completed = 0;
        block_.trace = trace_ != nullptr;
        if (trace_ != nullptr) {
            step_start_ns_ = clock_ns();
            post_ns_.assign(n, 0);
        }
        expected_ = 0;
        seen_errors_ = worker_.error_events();
        deadline_ = clock::now() + timeout_;
        grace_ = false;
        for (std::size_t k = 0; k < n; ++k) {
            const op& o = prog_->ops[first + k];
            op_slot& s = block_.slots[k];
            s.block = &block_;
            if (o.kind == op_kind::copy) {
                if (status st = copy_local(o, s); !st.ok()) return st;
                if (trace_ != nullptr) post_ns_[k] = clock_ns(); // device copies end with the step
                continue;
            }
            if (o.kind == op_kind::send && paced(o)) continue; // posted when the credit is in
            if (status st = post_message(o, s); !st.ok()) return st;
        }
        if (status st = post_control(n, control::credit); !st.ok()) return st;
        return take_credits();
    } catch (...) {
        return fail(errc::out_of_memory, "out of host memory posting a step");
    }
}

void operation::find_credit_peers(std::size_t first, std::size_t n) {
    credit_out_peer_.clear();
    credit_in_peer_.clear();
    if (!credits_) return;
    for (std::size_t k = 0; k < n; ++k) {
        const op& o = prog_->ops[first + k];
        if (!paced(o)) continue;
        if (o.kind == op_kind::recv) credit_out_peer_.push_back(o.peer);
        if (o.kind == op_kind::send) credit_in_peer_.push_back(o.peer);
    }
    for (std::vector<int>* v : {&credit_out_peer_, &credit_in_peer_}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
    }
}

status operation::copy_local(const op& o, op_slot& s) noexcept {
    // Segment lists of both sides may be cut differently: copy the overlaps.
    std::size_t i = 0, j = 0, si = 0, dj = 0;
    std::string error;
    while (i < o.count && j < o.dst_count) {
        const ucp_dt_iov_t& src = iov_[o.first + i];
        const ucp_dt_iov_t& dst = iov_[o.dst_first + j];
        const std::size_t len = std::min(src.length - si, dst.length - dj);
        if (!mem_.copy(static_cast<char*>(dst.buffer) + dj, static_cast<const char*>(src.buffer) + si, len, error))
            return fail(errc::transport, "local copy failed: " + error);
        si += len;
        dj += len;
        if (si == src.length) {
            ++i;
            si = 0;
        }
        if (dj == dst.length) {
            ++j;
            dj = 0;
        }
    }
    copies_pending_ = true;
    s.done = true;
    s.status = UCS_OK;
    s.length = o.bytes;
    return {};
}

// Posts the control messages of a step (credits) or of the closing: slots [n, n + out) send
// credit_out_ to credit_out_peer_, the next credit_in_peer_.size() receive into credit_in_;
// the receives first (a peer's message may be waiting already), then ours.
status operation::post_control(std::size_t n, control kind) noexcept {
    const char* what = kind == control::credit ? "the credit" : "the closing message";
    for (std::size_t k = 0; k < credit_in_peer_.size(); ++k) {
        op_slot& s = block_.slots[n + credit_out_peer_.size() + k];
        s.block = &block_;
        const ucs_status_t st = worker_.recv(&credit_in_[k], sizeof(std::uint64_t), false,
                                             make_control_tag(kind, seq_, credit_in_peer_[k]), s, true);
        if (st == UCS_INPROGRESS) ++expected_;
        else if (st != UCS_OK)
            return fail(errc::transport, std::string("receiving ") + what + " of rank " +
                                             std::to_string(credit_in_peer_[k]) + " failed: " + ucx_error(st));
    }
    for (std::size_t k = 0; k < credit_out_peer_.size(); ++k) {
        op_slot& s = block_.slots[n + k];
        s.block = &block_;
        const int peer = credit_out_peer_[k];
        const ucs_status_t st = worker_.send(peer, &credit_out_[k], sizeof(std::uint64_t), false,
                                             make_control_tag(kind, seq_, rank_), s, true);
        if (st == UCS_INPROGRESS) {
            ++expected_;
        } else if (st != UCS_OK) {
            if (worker_.peer(peer).error != UCS_OK)
                return fail(errc::peer_failure, "rank " + std::to_string(peer) + " failed (" +
                                                    ucx_error(worker_.peer(peer).error) + "); sending it " + what +
                                                    " impossible");
            return fail(errc::transport, std::string("sending ") + what + " to rank " + std::to_string(peer) +
                                             " failed: " + ucx_error(st));
        }
    }
    return {};
}

status operation::post_message(const op& o, op_slot& s) noexcept {
    if (trace_ != nullptr) post_ns_[static_cast<std::size_t>(&s - block_.slots.data())] = clock_ns();
    void* buffer = nullptr;
    std::size_t count = 0;
    const bool iov = o.count > 1;
    if (iov) {
        buffer = &iov_[o.first];
        count = o.count;
    } else {
        buffer = iov_[o.first].buffer;
        count = iov_[o.first].length;
    }
    const std::uint64_t tag = make_tag(seq_, o.tag);
    const ucs_status_t st = o.kind == op_kind::send ? worker_.send(o.peer, buffer, count, iov, tag, s)
                                                    : worker_.recv(buffer, count, iov, tag, s);
    if (st == UCS_INPROGRESS) {
        ++expected_;
    } else if (st != UCS_OK) {
        if (worker_.peer(o.peer).error != UCS_OK)
            return fail(errc::peer_failure, "rank " + std::to_string(o.peer) + " failed (" +
                                                ucx_error(worker_.peer(o.peer).error) + "); " + describe(o) +
                                                " impossible");
        return fail(errc::transport, describe(o) + " failed: " + ucx_error(st));
    }
    return {};
}

// Posts the sends to every peer whose credit for this step has arrived.
status operation::take_credits() noexcept {
    if (credits_missing_ == 0) return {};
    const std::size_t first = prog_->step_offsets[step_];
    const std::size_t base = ops_in_step_ + credit_out_peer_.size();
    for (std::size_t k = 0; k < credit_in_peer_.size(); ++k) {
        const op_slot& c = block_.slots[base + k];
        if (credit_taken_[k] || !c.done) continue;
        const int peer = credit_in_peer_[k];
        if (c.status != UCS_OK) {
            if (worker_.peer(peer).error != UCS_OK)
                return fail(errc::peer_failure, "rank " + std::to_string(peer) + " failed (" +
                                                    ucx_error(worker_.peer(peer).error) +
                                                    ") before sending its credit");
            return fail(errc::transport,
                        "receiving the credit of rank " + std::to_string(peer) + " failed: " + ucx_error(c.status));
        }
        if (credit_in_[k] != prog_->ops[first].step) // credits of one peer arrive in step order
            return fail(errc::internal, "rank " + std::to_string(peer) + " sent a credit for step " +
                                            std::to_string(credit_in_[k] + 1) + " in step " +
                                            std::to_string(prog_->ops[first].step + 1));
        credit_taken_[k] = 1;
        --credits_missing_;
        for (std::size_t j = 0; j < ops_in_step_; ++j) {
            const op& o = prog_->ops[first + j];
            if (o.kind == op_kind::send && o.peer == peer && paced(o))
                if (status st = post_message(o, block_.slots[j]); !st.ok()) return st;
        }
    }
    return {};
}

// The op behind a slot of the current step, or nullptr for a credit slot.
const op* operation::op_of(std::size_t slot) const noexcept {
    return slot < ops_in_step_ ? &prog_->ops[prog_->step_offsets[step_] + slot] : nullptr;
}

// After the last step, a closing message to and from every rank this one exchanged data with:
// UCX completes a request before its protocol's last reply has left (UCX 1.13 reports a flush
// done while a rendezvous receiver's acknowledgement still waits behind a full shared-memory
// FIFO), and once the call returns nothing here progresses the worker; a peer whose send waits
// for that reply would wait for good while this rank blocks elsewhere (in MPI, say). A rank
// sends its closing messages when its own transfers are complete, so receiving them from every
// partner means nobody still waits on this rank. Eager-only workers owe no replies: no closing.
status operation::post_closing() noexcept {
    try {
        phase_ = phase::closing;
        ops_in_step_ = 0;
        if (worker_.eager_only()) credit_out_peer_.clear();
        else credit_out_peer_ = prog_->peers; // compiled once per program
        credit_in_peer_ = credit_out_peer_;
        credit_out_.assign(credit_out_peer_.size(), seq_);
        credit_in_.assign(credit_in_peer_.size(), 0);
        credit_taken_.clear();
        credits_missing_ = 0;
        block_.slots.assign(2 * credit_out_peer_.size(), op_slot{});
        block_.completed = 0;
        block_.trace = false;
        expected_ = 0;
        seen_errors_ = worker_.error_events();
        deadline_ = clock::now() + timeout_;
        grace_ = false;
        return post_control(0, control::closing);
    } catch (...) {
        return fail(errc::out_of_memory, "out of host memory closing the call");
    }
}

status operation::post_flush() noexcept {
    try {
        phase_ = phase::flush;
        block_.slots.assign(1, op_slot{});
        block_.completed = 0;
        block_.slots[0].block = &block_;
        expected_ = 0;
        seen_errors_ = worker_.error_events();
        deadline_ = clock::now() + timeout_;
        grace_ = false;
        const ucs_status_t st = worker_.flush_all(block_.slots[0]);
        if (st == UCS_INPROGRESS) ++expected_;
        return {};
    } catch (...) {
        return fail(errc::out_of_memory, "out of host memory flushing");
    }
}

status operation::step_outcome() noexcept {
    for (std::size_t k = 0; k < block_.slots.size(); ++k) {
        const op_slot& s = block_.slots[k];
        const int peer = peer_of(k);
        if (s.status != UCS_OK) {
            if (peer != rank_ && worker_.peer(peer).error != UCS_OK)
                return fail(errc::peer_failure, "rank " + std::to_string(peer) + " failed (" +
                                                    ucx_error(worker_.peer(peer).error) + ") during " +
                                                    describe_slot(k));
            return fail(errc::transport, describe_slot(k) + " failed: " + ucx_error(s.status));
        }
        if (const op* o = op_of(k); o != nullptr && o->kind == op_kind::recv && s.length != o->bytes)
            return fail(errc::internal, describe(*o) + " received " + std::to_string(s.length) + " bytes");
    }
    return {};
}

int operation::peer_of(std::size_t slot) const noexcept {
    if (const op* o = op_of(slot)) return o->peer;
    const std::size_t k = slot - ops_in_step_;
    return k < credit_out_peer_.size() ? credit_out_peer_[k] : credit_in_peer_[k - credit_out_peer_.size()];
}

std::string operation::describe_slot(std::size_t slot) const {
    if (const op* o = op_of(slot)) return describe(*o);
    const std::size_t k = slot - ops_in_step_;
    const std::string what = phase_ == phase::closing ? "the closing message" : "the credit";
    return k < credit_out_peer_.size()
               ? what + " to rank " + std::to_string(credit_out_peer_[k])
               : what + " from rank " + std::to_string(credit_in_peer_[k - credit_out_peer_.size()]);
}

// A peer failed: does the current step (or closing) wait on it?
status operation::check_peers() noexcept {
    if (worker_.error_events() == seen_errors_) return {};
    seen_errors_ = worker_.error_events();
    for (std::size_t k = 0; k < block_.slots.size(); ++k) {
        const int peer = peer_of(k);
        const bool waiting = !block_.slots[k].done || (k >= ops_in_step_ && credits_missing_ > 0);
        if (waiting && peer != rank_ && worker_.peer(peer).error != UCS_OK)
            return fail(errc::peer_failure, "rank " + std::to_string(peer) + " failed (" +
                                                ucx_error(worker_.peer(peer).error) + ") during " + describe_slot(k));
    }
    return {};
}

status operation::advance(bool& done) noexcept {
    done = false;
    if (worker_.aborted() && active()) return fail_aborted();
    for (;;) {
        if (phase_ == phase::steps) {
            if (status st = take_credits(); !st.ok()) return st;
            if (block_.completed < expected_ || credits_missing_ > 0) return check_peers();
            if (copies_pending_) {
                bool finished = false;
                std::string error;
                if (!mem_.poll(finished, error)) return fail(errc::transport, "local copy failed: " + error);
                if (!finished) return {};
                copies_pending_ = false;
            }
            if (status s = step_outcome(); !s.ok()) return s;
            if (trace_ != nullptr) trace_step();
            ++step_;
            if (status s = step_ < prog_->steps() ? post_step() : post_closing(); !s.ok()) return s;
            continue;
        }
        if (phase_ == phase::closing) {
            if (block_.completed < expected_) return check_peers();
            if (status s = step_outcome(); !s.ok()) return s;
            for (std::size_t k = 0; k < credit_in_peer_.size(); ++k)
                if (credit_in_[k] != seq_)
                    return fail(errc::internal, "rank " + std::to_string(credit_in_peer_[k]) +
                                                    " sent the closing message of call " +
                                                    std::to_string(credit_in_[k]) + " in call " + std::to_string(seq_));
            if (status s = post_flush(); !s.ok()) return s;
            continue;
        }
        if (phase_ == phase::flush) {
            if (block_.completed < expected_) return {};
            // A flush fails where an endpoint failed; a peer that went away after its part of the
            // call was done owes nothing, so that is only an error if no endpoint reported one.
            if (block_.slots[0].status != UCS_OK && worker_.error_events() == 0)
                return fail(errc::transport, "flushing the endpoints failed: " + ucx_error(block_.slots[0].status));
            phase_ = phase::done;
        }
        done = true;
        return {};
    }
}

status operation::test(bool& done) noexcept {
    if (status s = advance(done); !s.ok() || done) return s;
    (void)worker_.progress();
    if (status s = advance(done); !s.ok() || done) return s;
    if (past_deadline()) return fail(errc::timeout, "timeout: " + pending_summary());
    return {};
}

// Whether the current step, closing or flush ran out of time. After the call's first step a
// timeout first waits a little longer for an abort: a peer this rank waits on may itself wait for
// a rank that is gone, and that peer's own timeout, whose abort names the rank, comes about as
// soon as this one.
bool operation::past_deadline() noexcept {
    if (clock::now() <= deadline_) return false;
    if (grace_ || (phase_ == phase::steps && step_ == 0)) return true;
    grace_ = true;
    deadline_ = clock::now() + std::min(timeout_ / 4, std::chrono::milliseconds(1000));
    return false;
}

status operation::wait() noexcept {
    if (!active()) return {};
    deadline_ = std::max(deadline_, clock::now() + timeout_);
    for (;;) {
        bool done = false;
        if (status s = advance(done); !s.ok() || done) return s;
        if (worker_.progress() == 0) {
            if (past_deadline()) return fail(errc::timeout, "timeout: " + pending_summary());
            // Device copies complete outside UCX: no event wakes a blocked worker for them.
            if (copies_pending_ && mem_.name() != "host") sched_yield();
            else worker_.idle(deadline_);
        } else if (past_deadline()) {
            return fail(errc::timeout, "timeout: " + pending_summary());
        }
    }
}

std::string operation::pending_summary() const {
    try {
        const auto ms = std::to_string(timeout_.count());
        if (phase_ == phase::flush)
            return "flushing the endpoints at the end of the call did not complete within " + ms + " ms";
        std::size_t open = 0;
        std::string list;
        int stalled_out = -1; // the peer of the first open scale-out message
        const std::size_t first = prog_->step_offsets[step_];
        for (std::size_t k = 0; k < block_.slots.size(); ++k) {
            // A send still waiting for its credit is open too (its slot was never posted).
            bool waiting = !block_.slots[k].done;
            if (const op* o = op_of(k); o != nullptr && o->kind == op_kind::send && paced(*o))
                for (std::size_t j = 0; j < credit_in_peer_.size(); ++j)
                    waiting = waiting || (credit_in_peer_[j] == o->peer && !credit_taken_[j]);
            if (const op* o = op_of(k); waiting && o != nullptr && o->scale_out && stalled_out < 0)
                stalled_out = o->peer;
            if (waiting && ++open <= 3) {
                list += (open > 1 ? "; " : "") + describe_slot(k);
                // A receive whose message sits unmatched would be UCX's fault, not the peer's.
                std::uint64_t tag = 0;
                std::size_t length = 0;
                if (const op* o = op_of(k);
                    o != nullptr && o->kind == op_kind::recv &&
                    worker_.probe_unexpected(make_tag(seq_, o->tag), ~std::uint64_t{0}, tag, length))
                    list += " [its message arrived and waits unmatched]";
            }
        }
        if (open == 0 && copies_pending_) list = "local device copies";
        // A data message nobody here asked for: a peer running another plan or call, or a tag
        // the two sides computed differently.
        std::string stray;
        std::uint64_t tag = 0;
        std::size_t length = 0;
        if (worker_.probe_unexpected(0, tag_control, tag, length)) {
            const std::uint64_t seq = tag_seq(tag);
            stray = "; unmatched here: message " + std::to_string(tag_pair_index(tag)) + " from rank " +
                    std::to_string(tag_sender(tag)) + ", " + std::to_string(length) + " bytes," +
                    (seq == tag_seq(make_tag(seq_, 0)) ? " of this call"
                                                       : " of call " + std::to_string(seq) + " (mod 256)");
        }
        if (phase_ == phase::closing)
            return "closing the call did not complete within " + ms + " ms; waiting for " + std::to_string(open) +
                   " of " + std::to_string(block_.slots.size()) + " closing messages: " + list +
                   (open > 3 ? "; ..." : "");
        // First, so that an abort's short text still names the NICs that may have failed.
        const std::string nics = stalled_out < 0 ? std::string()
                                                 : ", stalled over scale-out with rank " + std::to_string(stalled_out) +
                                                       " (its NIC or this rank's may be down)";
        return "step " + std::to_string(prog_->ops[first].step + 1) + " of " + std::to_string(prog_->plan_steps) +
               " did not complete within " + ms + " ms" + nics + "; waiting for " + std::to_string(open) + " of " +
               std::to_string(block_.slots.size()) + " messages: " + list + (open > 3 ? "; ..." : "") + stray;
    } catch (...) {
        return "(out of memory describing the pending transfers)";
    }
}

// Records the step that has just completed and its ops (a completion without a callback, or a
// copy, ends when it was posted or, for device copies, with the step).
void operation::trace_step() noexcept {
    try {
        const std::uint64_t now = clock_ns();
        const std::size_t first = prog_->step_offsets[step_];
        for (std::size_t k = 0; k < ops_in_step_; ++k) {
            const op& o = prog_->ops[first + k];
            const op_slot& s = block_.slots[k];
            const bool device_copy = o.kind == op_kind::copy && mem_.name() != "host";
            const std::uint64_t done = s.done_ns != 0 ? s.done_ns : device_copy ? now : post_ns_[k];
            trace_->op({trace_->current(), o.bytes, post_ns_[k], done, o.peer, o.step,
                        o.kind == op_kind::send   ? trace_kind::send
                        : o.kind == op_kind::recv ? trace_kind::recv
                                                  : trace_kind::copy,
                        o.scale_out});
        }
        trace_->step(prog_->ops[first].step, step_start_ns_, now);
    } catch (...) {
        trace_ = nullptr; // out of memory: stop tracing rather than fail the call
    }
}

status operation::fail_aborted() noexcept {
    errc code = static_cast<errc>(worker_.abort_code());
    if (code <= errc::ok || code > errc::internal) code = errc::peer_failure;
    try {
        return fail(code, "rank " + std::to_string(worker_.abort_sender()) +
                              " gave up on the call: " + worker_.abort_message());
    } catch (...) {
        return fail(code, "a peer gave up on the call");
    }
}

status operation::fail(errc code, const std::string& what) noexcept {
    status result;
    try {
        result = status(code, "rank " + std::to_string(rank_) + ": " + what);
    } catch (...) {
        result = status(code, "");
    }
    // Tell the peers first (cancelling may close endpoints), so that they fail now rather than
    // at their own timeouts; no-op if this failure came from a peer's abort.
    worker_.send_abort(static_cast<int>(code), result.message(), std::min(timeout_, std::chrono::milliseconds(1000)));
    return cancel(result);
}

status operation::cancel(status reason) noexcept {
    broken_ = true;
    if (!active()) {
        phase_ = phase::done;
        return reason;
    }
    if (phase_ == phase::flush) { // a flush holds no user buffer: give up on it
        for (op_slot& s : block_.slots) worker::abandon(s);
        phase_ = phase::done;
        return reason;
    }
    // Receives are cancelled. What is still outstanding then (sends, and receives already
    // matched to a rendezvous) goes by closing its peer's endpoint: by force where the endpoint
    // has peer error handling, which completes the requests with UCS_ERR_CANCELED, else by a
    // flush. Then drain, briefly: over endpoints without it (same host, shared memory) UCX 1.13
    // cannot purge requests, and a failed peer never answers them; those are abandoned (no
    // callback any more).
    std::vector<op_slot> closing;
    try {
        const std::size_t credit_recvs = ops_in_step_ + credit_out_peer_.size();
        for (std::size_t k = 0; k < block_.slots.size(); ++k) {
            const op* o = op_of(k);
            const bool receive = o != nullptr ? o->kind == op_kind::recv : k >= credit_recvs;
            if (!block_.slots[k].done && receive) worker_.cancel(block_.slots[k]);
        }
        std::vector<int> close;
        for (std::size_t k = 0; k < block_.slots.size(); ++k)
            if (!block_.slots[k].done) close.push_back(peer_of(k));
        std::sort(close.begin(), close.end());
        close.erase(std::unique(close.begin(), close.end()), close.end());
        closing.resize(close.size());
        for (std::size_t k = 0; k < close.size(); ++k) (void)worker_.force_close(close[k], closing[k]);
    } catch (...) {
        // Out of memory: whatever was not cancelled is abandoned below.
    }
    worker_.drain(block_, expected_, closing, std::min(timeout_, std::chrono::milliseconds(200)));
    // Device copies cannot be cancelled and write to the user's buffers: wait for them (bounded).
    const auto copies_deadline = clock::now() + timeout_;
    for (bool finished = !copies_pending_; !finished && clock::now() < copies_deadline;) {
        std::string error;
        if (!mem_.poll(finished, error)) break;
        if (!finished) sched_yield();
    }
    copies_pending_ = false;
    phase_ = phase::done;
    return reason;
}

} // namespace fast::exec::detail
