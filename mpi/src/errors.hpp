#pragma once
/// \file errors.hpp
/// Failures the MPI way: an executor status becomes an MPI error code of a standard class whose
/// MPI_Error_string is the executor's message, and the communicator's error handler is invoked.

#include <mpi.h>

#include <fast/exec/status.hpp>

#include <string>

namespace fast::mpi {

/// The MPI error class of an executor error code (count_mismatch: MPI_ERR_TRUNCATE, timeout and
/// peer failures: MPI_ERR_OTHER, out_of_memory: MPI_ERR_NO_MEM, ...).
int error_class(fast::exec::errc code) noexcept;

/// An error code of class `mpi_class` whose MPI_Error_string is "fast_mpi: <what>: <message>"
/// (one code per class, added with MPI_Add_error_code; its string is the latest message).
int error_code(int mpi_class, const std::string& what, const std::string& message) noexcept;

/// error_code() for an executor status.
int error_code(const fast::exec::status& st, const char* what) noexcept;

/// Invokes `comm`'s error handler with `code` (MPI_ERRORS_ARE_FATAL ends the job there) and
/// returns `code`, which the MPI call then returns (MPI_ERRORS_RETURN or a handler that returns).
int raise(MPI_Comm comm, int code) noexcept;

} // namespace fast::mpi
