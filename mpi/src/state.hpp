#pragma once
/// \file state.hpp
/// libfast_mpi's process-wide state, set at MPI_Init and cleared at MPI_Finalize.

#include <mpi.h>

#include "settings.hpp"

namespace fast::mpi {

struct process_state {
    settings config;
    /// MPI_Init went through libfast_mpi and MPI_Finalize has not begun: only then do calls go
    /// FAST (a call before, or during finalization, goes to the MPI library unchanged).
    bool active = false;
    /// A private duplicate of MPI_COMM_SELF that carries the requests of nonblocking and
    /// persistent FAST calls (requests.hpp).
    MPI_Comm self = MPI_COMM_NULL;
};

process_state& state() noexcept;

} // namespace fast::mpi
