#pragma once
/// \file communicator.hpp
/// fast::exec::communicator: MPI_Alltoallv-shaped All-to-All(v) carried out with FAST plans over
/// UCX. No UCX, MPI or CUDA types appear here; <fast/exec/mpi.hpp> adds creation from an MPI
/// communicator.
///
/// Every call is collective: all ranks of the communicator make the same calls in the same
/// order. A communicator (and its requests) may be used by one thread at a time.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "config.hpp"
#include "export.hpp"
#include "status.hpp"

namespace fast::exec {

/// Gathers `bytes_per_rank` bytes from every rank into `recv` (rank r's bytes at
/// recv + r * bytes_per_rank), like MPI_Allgather on bytes. Collective. Used only while creating
/// a communicator (three times: configuration and host, UCX worker addresses, outcome); every
/// later exchange goes over UCX. Should return an error status rather than block forever.
using allgather_fn = std::function<status(const void* send, void* recv, std::size_t bytes_per_rank)>;

/// How a communicator finds its peers without MPI: this rank, the number of ranks, and an
/// allgather over them (e.g. over a key-value store, a file system, or another runtime's
/// collectives).
struct bootstrap {
    int rank = -1;
    int size = 0;
    allgather_fn allgather;
};

/// Counters of one rank's communicator.
struct statistics {
    std::uint64_t operations = 0;   ///< alltoallv calls and persistent starts that ran to the end
    std::uint64_t failures = 0;     ///< calls and starts that returned an error
    std::uint64_t plans_made = 0;   ///< times the planner ran (a new traffic matrix)
    std::uint64_t plans_reused = 0; ///< calls whose matrix equalled the previous one
    std::size_t last_plan_steps =
        0; ///< steps of the most recent plan, as its schedule numbers them (alike on every rank)
    std::size_t scratch_bytes = 0; ///< this rank's scratch allocation
};

namespace detail {
class communicator_impl;
class request_impl;
} // namespace detail

class communicator;
class alltoallv_request;

/// Creates a communicator over the ranks of `boot` (collective: every rank calls it with the same
/// configuration). It connects a UCX endpoint to every other rank, exchanges a message with each
/// and groups ranks into servers (config::gpus_per_server). On error `out` is left empty and
/// every rank gets the same code and message where the error can be known to all. O(R) time and
/// endpoints per rank.
FAST_EXEC_API status create(const bootstrap& boot, const config& cfg, communicator& out) noexcept;

/// A persistent All-to-All(v) (like MPI_Alltoallv_init): arguments, plan, program and scratch are
/// fixed at init; start() and wait() run it any number of times. Only one operation of a
/// communicator may be in progress at a time. Between start() and wait() the executor makes
/// progress only inside test() and wait(): do not block on other ranks in between (e.g. in
/// MPI_Barrier), or the ranks waiting for this one time out.
class FAST_EXEC_API alltoallv_request {
public:
    alltoallv_request() noexcept;
    /// An active request is cancelled (bounded by the timeout), which leaves the communicator
    /// unusable (the other ranks are told to give up).
    ~alltoallv_request();
    alltoallv_request(alltoallv_request&&) noexcept;
    alltoallv_request& operator=(alltoallv_request&&) noexcept;
    alltoallv_request(const alltoallv_request&) = delete;
    alltoallv_request& operator=(const alltoallv_request&) = delete;

    [[nodiscard]] bool valid() const noexcept;
    /// Started and not yet completed by wait() or test().
    [[nodiscard]] bool active() const noexcept;

    /// Starts one run (collective in the sense that every rank must start it, in the same order
    /// relative to the communicator's other calls). Does not wait for other ranks.
    status start() noexcept;
    /// Makes progress without blocking; `done` becomes true when the run has completed (then the
    /// status is the run's outcome).
    status test(bool& done) noexcept;
    /// Completes the run.
    status wait() noexcept;

private:
    friend class communicator;
    std::unique_ptr<detail::request_impl> impl_;
};

/// A group of ranks with UCX endpoints between all of them, a planner and a plan cache. Create
/// with create(); destroy collectively (and, with MPI, before MPI_Finalize): destruction closes
/// the endpoints, gracefully where the peer is healthy, waiting at most a second.
class FAST_EXEC_API communicator {
public:
    communicator() noexcept;
    ~communicator();
    communicator(communicator&&) noexcept;
    communicator& operator=(communicator&&) noexcept;
    communicator(const communicator&) = delete;
    communicator& operator=(const communicator&) = delete;

    /// True once create() succeeded.
    [[nodiscard]] bool valid() const noexcept;
    [[nodiscard]] int rank() const noexcept;
    [[nodiscard]] int size() const noexcept;
    [[nodiscard]] int servers() const noexcept;
    [[nodiscard]] int gpus_per_server() const noexcept;
    /// The count agreement its calls run (config::agreement resolved: gather or servers;
    /// automatic on an invalid communicator).
    [[nodiscard]] exec::agreement agreement() const noexcept;

    /// All-to-All(v), like MPI_Alltoallv with MPI_BYTE (or MPI_Alltoallv_c): the block for rank j
    /// is sendcounts[j] bytes at send + sdispls[j]; the block from rank i lands at
    /// recv + rdispls[i] and is recvcounts[i] bytes. Any layout; receive blocks must not overlap
    /// each other or any send block. Every span has size() entries. Collective; returns when this
    /// rank's part is complete. Counts are checked against each other on all ranks first, so a
    /// mismatch gives every rank the same error instead of a hang.
    status alltoallv(const void* send, std::span<const std::size_t> sendcounts, std::span<const std::size_t> sdispls,
                     void* recv, std::span<const std::size_t> recvcounts,
                     std::span<const std::size_t> rdispls) noexcept;

    /// Prepares a persistent alltoallv with these arguments (collective; the same checks as
    /// alltoallv). The buffers must stay valid while the request lives; the count and
    /// displacement arrays are copied.
    status alltoallv_init(const void* send, std::span<const std::size_t> sendcounts,
                          std::span<const std::size_t> sdispls, void* recv, std::span<const std::size_t> recvcounts,
                          std::span<const std::size_t> rdispls, alltoallv_request& request) noexcept;

    [[nodiscard]] statistics stats() const noexcept;

private:
    friend FAST_EXEC_API status create(const bootstrap&, const config&, communicator&) noexcept;
    std::shared_ptr<detail::communicator_impl> impl_;
};

} // namespace fast::exec
