#pragma once
/// \file dispatch.hpp
/// Where an intercepted all-to-all goes: the FAST executor or the MPI library (PMPI_*), decided
/// identically on every rank without a round trip of its own.
///
/// Decided locally, because MPI's rules make the inputs equal on every rank: FAST_MPI_ENABLE
/// (checked equal at MPI_Init), intercommunicators, MPI_IN_PLACE (all ranks or none), and for
/// MPI_Alltoall forms the threshold (every rank sends and receives count x type size per peer).
/// What may differ between ranks (a datatype's layout, MPI_Alltoallv's byte totals, invalid
/// counts) is settled inside the executor's agreement, which every FAST call begins with: a
/// blocking call whose rank-local check fails enters the executor declining (arguments the
/// executor refuses), so every rank gets invalid_argument at the agreement, before any byte
/// moves, and all call PMPI_* instead. A nonblocking or persistent call cannot fall back that
/// late (the PMPI call would start at a later completion call, and a peer blocked elsewhere in
/// MPI could wait for it forever), so those go FAST whatever their layout (non-contiguous
/// datatypes through a packing buffer) and MPI_Ialltoallv ignores the threshold.

#include <mpi.h>

#include "counters.hpp"
#include "layout.hpp"

#include <functional>

namespace fast::mpi {

/// An intercepted call's arguments.
struct call {
    op_kind kind = op_kind::alltoallv;
    const void* sendbuf = nullptr;
    block_list send;
    MPI_Datatype sendtype = MPI_DATATYPE_NULL;
    void* recvbuf = nullptr;
    block_list recv;
    MPI_Datatype recvtype = MPI_DATATYPE_NULL;
    MPI_Comm comm = MPI_COMM_NULL;
};

/// The same call through the MPI library.
using pmpi_call = std::function<int()>;

/// MPI_Alltoall(v): FAST or `fallback`; returns the MPI code (after the error handler ran).
int run_blocking(const call& c, const pmpi_call& fallback);

/// MPI_Ialltoall(v) and the persistent inits: a carrier request for a FAST call, or `fallback`.
int run_nonblocking(const call& c, bool persistent, MPI_Request* request, const pmpi_call& fallback);

/// A call's number of ranks (0 for MPI_COMM_NULL), for block_list::ranks.
int ranks_of(MPI_Comm comm) noexcept;

} // namespace fast::mpi
