#pragma once
// Carrying out a compiled program: step by step, receives and sends over UCX tags and local
// copies, a non-blocking progress loop with deadlines, an end-of-call flush, and cancellation.

#include <chrono>
#include <cstdint>
#include <vector>

#include <fast/exec/status.hpp>

#include "memory.hpp"
#include "program.hpp"
#include "worker.hpp"

namespace fast::exec::detail {

/// The base addresses of the three buffers of the plan contract.
struct bases {
    const void* send = nullptr;
    void* recv = nullptr;
    void* scratch = nullptr;
};

/// One run of a program. Not copyable or movable while active (UCX holds pointers to its
/// slots). Steps: start() posts the first step; test() / wait() make progress; each step starts
/// when this rank's transfers of the previous one have completed; after the last step the
/// worker is flushed, so that nothing this rank owes a peer is left in UCX's queues when the
/// call returns (the caller may then block, e.g. in MPI, without progressing UCX).
class operation {
public:
    operation(worker& w, memory_backend& mem, std::chrono::milliseconds timeout, int rank) noexcept
        : worker_(w), mem_(mem), timeout_(timeout), rank_(rank) {}
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

    [[nodiscard]] bool active() const noexcept { return phase_ == phase::steps || phase_ == phase::flush; }
    /// True after a failure that leaves the communicator unusable (a timeout, a failed peer, a
    /// cancelled request or closed endpoint).
    [[nodiscard]] bool broke_communicator() const noexcept { return broken_; }

private:
    enum class phase { idle, steps, flush, done };

    status post_step() noexcept;
    status post_flush() noexcept;
    status advance(bool& done) noexcept;
    status step_outcome() noexcept;
    status fail(errc code, const std::string& what) noexcept;
    status fail_aborted() noexcept;
    [[nodiscard]] std::string pending_summary() const;

    worker& worker_;
    memory_backend& mem_;
    std::chrono::milliseconds timeout_;
    int rank_ = 0;

    const program* prog_ = nullptr;
    std::uint64_t seq_ = 0;
    std::size_t step_ = 0;
    phase phase_ = phase::idle;
    bool broken_ = false;
    bool copies_pending_ = false;
    std::size_t expected_ = 0; ///< callbacks this step (or flush) is waiting for
    std::size_t seen_errors_ = 0; ///< the worker's endpoint error count when last checked
    std::chrono::steady_clock::time_point deadline_{};
    slot_block block_;                 ///< the current step's slots (one per op), or the flush's
    std::vector<ucp_dt_iov_t> iov_;    ///< the program's segments, resolved to addresses
};

} // namespace fast::exec::detail
