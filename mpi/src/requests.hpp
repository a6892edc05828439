#pragma once
/// \file requests.hpp
/// Nonblocking and persistent FAST calls, and the MPI requests the application holds for them.
///
/// The application gets a real MPI request, a "carrier": a zero-byte receive from this rank on
/// a private duplicate of MPI_COMM_SELF with a tag of its own (MPI_Irecv for MPI_Ialltoall(v),
/// MPI_Recv_init for the persistent forms). The FAST call runs on its communicator's channel
/// thread; once it is done, the next completion call the library intercepts (MPI_Wait, MPI_Test
/// and their any/some/all forms, MPI_Request_get_status) unpacks what needs it and sends the
/// matching zero-byte message, so the carrier completes inside MPI like any other request: it
/// mixes with the application's own requests in one MPI_Waitall, and those keep progressing
/// while the application waits. An error of the FAST call comes back from that completion call
/// (status.MPI_ERROR, MPI_ERR_IN_STATUS for the array forms) and goes to the communicator's
/// error handler.

#include <mpi.h>

#include "channel.hpp"
#include "counters.hpp"
#include "layout.hpp"

#include <fast/exec/communicator.hpp>

#include <memory>
#include <vector>

namespace fast::mpi {

/// One side's MPI arguments, kept for packing and unpacking later: counts and displacements
/// copied, a non-contiguous datatype duplicated (the application may free its own meanwhile).
struct mpi_side {
    void* buf = nullptr;
    std::vector<int> counts, displs;
    int uniform = 0;
    int ranks = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    bool owns_type = false;

    mpi_side() = default;
    mpi_side(void* buffer, const block_list& b, MPI_Datatype t);
    ~mpi_side();
    mpi_side(mpi_side&& o) noexcept { *this = std::move(o); }
    mpi_side& operator=(mpi_side&& o) noexcept;
    mpi_side(const mpi_side&) = delete;
    mpi_side& operator=(const mpi_side&) = delete;

    void free_type() noexcept;
    [[nodiscard]] block_list blocks() const {
        return {counts.empty() ? nullptr : counts.data(), displs.empty() ? nullptr : displs.data(), uniform, ranks};
    }
};

/// A nonblocking or persistent FAST all-to-all.
struct operation {
    MPI_Comm comm = MPI_COMM_NULL;
    op_kind kind = op_kind::ialltoallv;
    bool persistent = false;
    std::shared_ptr<channel> ch;
    byte_side send, recv; ///< what the executor gets
    mpi_side user_send, user_recv;
    bool decline = false; ///< this rank's arguments are invalid: it tells the others, fails locally
    int local_error = MPI_SUCCESS;
    std::uint64_t bytes = 0; ///< this rank's send bytes
    double seconds = 0;      ///< time in the initiating call
    // The channel's side.
    std::shared_ptr<job> init, current;
    std::shared_ptr<fast::exec::alltoallv_request> preq;
    // The carrier's side.
    int tag = 0;
    bool active = false;    ///< started and not yet completed through MPI
    bool signalled = false; ///< its zero-byte message was sent
    bool orphan = false;    ///< MPI_Request_free'd while active
    int code = MPI_SUCCESS; ///< the outcome, set when signalled
};

namespace requests {

/// Posts `op`'s carrier into `request` and submits its work (a one-shot call, or a persistent
/// call's init). Returns an MPI error code if the carrier cannot be posted.
int launch(std::unique_ptr<operation> op, MPI_Request* request);

/// Whether `r` is one of the carriers.
bool is_ours(MPI_Request r);

/// Sends the zero-byte message of every operation that finished since the last look (so that
/// MPI completes their carriers), after unpacking; frees orphans that are done.
void signal_done();

/// Called right after MPI reported carrier `key` (its value before the call) complete: counts
/// the call, fills `st` (may be MPI_STATUS_IGNORE), forgets one-shot operations. Returns the
/// call's MPI code and, on failure, sets `comm` to the communicator whose handler should run.
int finish(MPI_Request key, MPI_Status* st, MPI_Comm& comm);

/// While the carrier is complete but not yet finished (MPI_Request_get_status): its code.
int peek_code(MPI_Request key);

/// MPI_Start of a persistent carrier: starts its carrier and submits its run. On failure `comm`
/// is the communicator whose handler should run.
int start(MPI_Request* r, MPI_Comm& comm);

/// The communicator of carrier `r`.
MPI_Comm comm_of(MPI_Request r);

/// MPI_Request_free of a carrier: a persistent one's executor request is destroyed on its
/// channel; an active one is completed in the background and freed then.
int release(MPI_Request* r);

/// MPI_Finalize: waits for running operations and frees every carrier left.
void release_all() noexcept;

} // namespace requests

} // namespace fast::mpi
