#pragma once
/// \file counters.hpp
/// What libfast_mpi did, per rank: calls, bytes and time per MPI function, FAST or fallback, and
/// why each fallback happened. Summed over ranks and printed at MPI_Finalize (FAST_MPI_SUMMARY).

#include <mpi.h>

#include <fast/exec/communicator.hpp>

#include <cstdint>
#include <string>

namespace fast::mpi {

/// The intercepted MPI functions.
enum class op_kind : int { alltoall, alltoallv, ialltoall, ialltoallv, alltoall_init, alltoallv_init, count };

/// Why a call went to the MPI library instead of the FAST executor.
enum class reason : int {
    disabled,        ///< FAST_MPI_ENABLE=0
    intercomm,       ///< an intercommunicator
    in_place,        ///< MPI_IN_PLACE
    below_threshold, ///< some rank sends and receives less than FAST_MPI_THRESHOLD
    datatype,        ///< a datatype that is not contiguous (type size, extent, true extent, lb)
    arguments,       ///< this rank's counts or displacements do not describe byte blocks (negative)
    other_rank,      ///< another rank declined the call for one of the reasons above
    topology,        ///< the ranks do not form equal servers of contiguous ranks
    unavailable,     ///< the executor communicator could not be created (UCX)
    count,
};

const char* name(op_kind k) noexcept;
const char* name(reason r) noexcept;

void count_fast(op_kind k, std::uint64_t bytes, double seconds) noexcept;
void count_fallback(op_kind k, reason r, std::uint64_t bytes, double seconds) noexcept;
void count_error(op_kind k) noexcept;
/// A persistent request started, and a call whose data went through a packing buffer.
void count_start() noexcept;
void count_packed() noexcept;
/// An executor communicator closed: its statistics and the time its thread spent in calls.
void count_channel(const fast::exec::statistics& s, double executor_seconds) noexcept;

/// Sums every rank's counters on rank 0 (collective over `world`) and writes the summary there:
/// `where` is "stderr" or a file name. `context` is a line about the configuration.
void write_summary(MPI_Comm world, const std::string& where, const std::string& context) noexcept;

} // namespace fast::mpi
