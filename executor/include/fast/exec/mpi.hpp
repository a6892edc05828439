#pragma once
/// \file mpi.hpp
/// Creating a fast::exec::communicator from an MPI communicator. Header-only (inline functions
/// over the core API), so programs that do not use MPI never need it; compile with your MPI's
/// wrapper (mpicxx) or its include flags.
///
///     fast::exec::communicator comm;
///     fast::exec::status st = fast::exec::create(MPI_COMM_WORLD, cfg, comm);
///
/// The communicator works on a duplicate of the MPI communicator (its allgathers never mix with
/// the application's traffic), with MPI_ERRORS_RETURN, and every MPI wait is a non-blocking call
/// polled against config.timeout. Destroy executor communicators before MPI_Finalize.

#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"
#include "config.hpp"
#include "status.hpp"

namespace fast::exec {

namespace detail {

/// The MPI side of a communicator's bootstrap: a duplicated MPI communicator and the polling
/// allgather. After a timed-out allgather the MPI request stays pending inside MPI, which may
/// still write to its buffers: they (and the duplicate) are then deliberately kept for the rest
/// of the process; the executor communicator is unusable from then on anyway. So is the state
/// itself after a timed-out MPI_Comm_idup, which may still write the duplicate's handle.
struct mpi_bootstrap_state {
    MPI_Comm comm = MPI_COMM_NULL;
    std::chrono::milliseconds timeout{0};
    bool broken = false;

    mpi_bootstrap_state() = default;
    mpi_bootstrap_state(const mpi_bootstrap_state&) = delete;
    mpi_bootstrap_state& operator=(const mpi_bootstrap_state&) = delete;
    ~mpi_bootstrap_state() {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!broken && !finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
};

inline std::string mpi_error_text(int code) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int n = 0;
    if (MPI_Error_string(code, text, &n) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
    return std::string(text, static_cast<std::size_t>(n));
}

/// Polls `request` until it completes, yielding the processor between tests (ranks may share
/// cores); false if `timeout` passes first or MPI_Test fails (then `error` says which).
inline bool mpi_poll(MPI_Request& request, std::chrono::milliseconds timeout, std::string& error) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int done = 0;
        const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            error = "MPI_Test failed: " + mpi_error_text(rc);
            return false;
        }
        if (done) return true;
        if (std::chrono::steady_clock::now() > deadline) {
            error = "no answer from every rank within " + std::to_string(timeout.count()) +
                    " ms (a rank is missing, or stopped making this call)";
            return false;
        }
        sched_yield();
    }
}

inline status mpi_allgather(mpi_bootstrap_state& s, const void* send, void* recv, std::size_t bytes) {
    if (s.broken) return status(errc::bootstrap, "an earlier MPI allgather of this communicator timed out");
    if (bytes > static_cast<std::size_t>(INT_MAX))
        return status(errc::bootstrap, "MPI allgather of " + std::to_string(bytes) + " bytes per rank is too large");
    int size = 0;
    MPI_Comm_size(s.comm, &size);
    // Buffers of our own: if the allgather times out, MPI may still write to them later.
    auto in = std::make_unique<std::vector<unsigned char>>(static_cast<const unsigned char*>(send),
                                                           static_cast<const unsigned char*>(send) + bytes);
    auto out = std::make_unique<std::vector<unsigned char>>(bytes * static_cast<std::size_t>(size));
    MPI_Request request = MPI_REQUEST_NULL;
    const int n = static_cast<int>(bytes);
    const int rc = MPI_Iallgather(in->data(), n, MPI_BYTE, out->data(), n, MPI_BYTE, s.comm, &request);
    if (rc != MPI_SUCCESS) return status(errc::bootstrap, "MPI_Iallgather failed: " + mpi_error_text(rc));
    std::string error;
    if (!mpi_poll(request, s.timeout, error)) {
        s.broken = true;
        (void)in.release(); // still MPI's: see mpi_bootstrap_state
        (void)out.release();
        return status(errc::bootstrap, "MPI allgather: " + error);
    }
    if (!out->empty()) std::memcpy(recv, out->data(), out->size());
    return {};
}

} // namespace detail

/// A bootstrap over `comm` (duplicated with MPI_Comm_idup; every wait bounded by `timeout`).
/// Collective over `comm`.
inline status make_mpi_bootstrap(MPI_Comm comm, std::chrono::milliseconds timeout, bootstrap& out) noexcept {
    try {
        out = bootstrap{};
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (!initialized || finalized) return status(errc::bootstrap, "MPI is not initialised (or already finalised)");
        if (timeout.count() <= 0)
            return status(errc::invalid_argument,
                          "config.timeout must be positive, got " + std::to_string(timeout.count()) + " ms");
        auto state = std::make_unique<detail::mpi_bootstrap_state>();
        state->timeout = timeout;
        MPI_Request request = MPI_REQUEST_NULL;
        int rc = MPI_Comm_idup(comm, &state->comm, &request);
        if (rc != MPI_SUCCESS) {
            state->comm = MPI_COMM_NULL;
            return status(errc::bootstrap, "MPI_Comm_idup failed: " + detail::mpi_error_text(rc));
        }
        std::string error;
        if (!detail::mpi_poll(request, timeout, error)) {
            state->broken = true;
            (void)state.release(); // the idup may still complete and write state->comm: kept, as in mpi_allgather
            return status(errc::bootstrap, "MPI_Comm_idup: " + error);
        }
        std::shared_ptr<detail::mpi_bootstrap_state> shared(std::move(state));
        rc = MPI_Comm_set_errhandler(shared->comm, MPI_ERRORS_RETURN);
        if (rc != MPI_SUCCESS)
            return status(errc::bootstrap, "MPI_Comm_set_errhandler failed: " + detail::mpi_error_text(rc));
        MPI_Comm_rank(shared->comm, &out.rank);
        MPI_Comm_size(shared->comm, &out.size);
        out.allgather = [state = std::move(shared)](const void* send, void* recv, std::size_t bytes) {
            return detail::mpi_allgather(*state, send, recv, bytes);
        };
        return {};
    } catch (...) {
        out = bootstrap{};
        return status(errc::out_of_memory, "out of host memory creating the MPI bootstrap");
    }
}

/// Creates a communicator over the ranks of `comm` (collective over `comm`); rank i of the
/// communicator is rank i of `comm`.
inline status create(MPI_Comm comm, const config& cfg, communicator& out) noexcept {
    bootstrap boot;
    if (status s = make_mpi_bootstrap(comm, cfg.timeout, boot); !s.ok()) return s;
    return create(boot, cfg, out);
}

} // namespace fast::exec
