#pragma once
// Carrying out a compiled program: step by step, receives and sends over UCX tags and local
// copies, a non-blocking progress loop with deadlines, an end-of-call flush, and cancellation.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <fast/exec/status.hpp>

#include "memory.hpp"
#include "program.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace fast::exec::detail {

/// Under credit flow control, the smallest message that waits for its receiver's credit.
inline constexpr std::uint64_t credit_min_bytes = 64 * 1024;

/// The base addresses of the three buffers of the plan contract.
struct bases {
    const void* send = nullptr;
    void* recv = nullptr;
    void* scratch = nullptr;
};

/// One run of a program. Not copyable or movable while active (UCX holds pointers to its
/// slots). Steps: start() posts the first step; test() / wait() make progress; each step starts
/// when this rank's transfers of the previous one have completed; after the last step each rank
/// exchanges a closing message with every rank it exchanged data with, then flushes the worker,
/// so that no peer still waits on this rank when the call returns (the caller may then block,
/// e.g. in MPI, without progressing UCX).
class operation {
public:
    /// `credits`: the credit flow control of config.hpp (else UCX's rendezvous paces senders).
    operation(worker& w, memory_backend& mem, std::chrono::milliseconds timeout, int rank, bool credits) noexcept
        : worker_(w), mem_(mem), timeout_(timeout), rank_(rank), credits_(credits) {}
    ~operation();
    operation(const operation&) = delete;
    operation& operator=(const operation&) = delete;

    /// Resolves the program's segments against `b` and posts its first step.
    status start(const program& p, const bases& b, std::uint64_t seq) noexcept;
    /// Progress without blocking; `done` when the run has finished (status = its outcome).
    status test(bool& done) noexcept;
    /// Runs to the end (every wait bounded by the timeout).
    status wait() noexcept;
    /// Cancels an active run (cancel receives, close endpoints with sends in flight, drain).
    status cancel(status reason) noexcept;

    [[nodiscard]] bool active() const noexcept {
        return phase_ == phase::steps || phase_ == phase::closing || phase_ == phase::flush;
    }
    /// Records steps and messages into `t` while it is on (its current call).
    void set_tracer(tracer* t) noexcept { trace_ = t != nullptr && t->on() ? t : nullptr; }
    /// True after a failure that leaves the communicator unusable (a timeout, a failed peer, a
    /// cancelled request or closed endpoint).
    [[nodiscard]] bool broke_communicator() const noexcept { return broken_; }

private:
    enum class phase { idle, steps, closing, flush, done };

    status post_step() noexcept;
    void find_credit_peers(std::size_t first, std::size_t n); // may throw bad_alloc (post_step catches)
    status copy_local(const op& o, op_slot& s) noexcept;
    status post_control(std::size_t n, control kind) noexcept;
    status post_message(const op& o, op_slot& s) noexcept;
    status take_credits() noexcept;
    [[nodiscard]] const op* op_of(std::size_t slot) const noexcept;
    /// Whether message `o` waits for a credit: under credit flow control, messages between
    /// ranks of at least credit_min_bytes (both ends see the same sizes, so they agree). A
    /// smaller one goes at once: it costs less than the credit's round trip.
    [[nodiscard]] bool paced(const op& o) const noexcept {
        return credits_ && o.kind != op_kind::copy && o.peer != rank_ && o.bytes >= credit_min_bytes;
    }
    [[nodiscard]] int peer_of(std::size_t slot) const noexcept;
    [[nodiscard]] std::string describe_slot(std::size_t slot) const;
    status post_closing() noexcept;
    status post_flush() noexcept;
    status check_peers() noexcept;
    status advance(bool& done) noexcept;
    status step_outcome() noexcept;
    status fail(errc code, const std::string& what) noexcept;
    void trace_step() noexcept;
    status fail_aborted() noexcept;
    [[nodiscard]] std::string pending_summary() const;
    [[nodiscard]] bool past_deadline() noexcept;

    worker& worker_;
    memory_backend& mem_;
    std::chrono::milliseconds timeout_;
    int rank_ = 0;
    bool credits_ = false;

    const program* prog_ = nullptr;
    std::uint64_t seq_ = 0;
    std::size_t step_ = 0;
    phase phase_ = phase::idle;
    bool broken_ = false;
    bool copies_pending_ = false;
    std::size_t expected_ = 0;    ///< callbacks this step (or flush) is waiting for
    std::size_t seen_errors_ = 0; ///< the worker's endpoint error count when last checked
    std::chrono::steady_clock::time_point deadline_{};
    bool grace_ = false; ///< the deadline was extended once for a peer's abort (past_deadline)
    slot_block block_; ///< the current step's slots (one per op, then credits), or the flush's
    // Credit flow control, per step: slots [ops, ops + credit_out_.size()) send this rank's
    // credits to the ranks it receives from; the next credit_in_.size() slots receive the
    // credits of the ranks it sends to, whose sends wait until theirs is in. The closing uses
    // the same slots for its messages (no ops; the call's sequence number as payload).
    std::size_t ops_in_step_ = 0;
    std::vector<int> credit_out_peer_, credit_in_peer_;
    std::vector<std::uint64_t> credit_out_, credit_in_;
    std::vector<char> credit_taken_;
    std::size_t credits_missing_ = 0;
    std::vector<ucp_dt_iov_t> iov_; ///< the program's segments, resolved to addresses
    // Tracing (trace_ set): when the step started and when each of its ops was posted.
    tracer* trace_ = nullptr;
    std::uint64_t step_start_ns_ = 0;
    std::vector<std::uint64_t> post_ns_;
};

} // namespace fast::exec::detail
