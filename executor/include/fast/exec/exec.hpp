#pragma once
/// \file exec.hpp
/// Umbrella header of the executor's core API (no MPI): status, config, communicator. Include
/// <fast/exec/mpi.hpp> as well to create communicators from MPI communicators.

#include "communicator.hpp"
#include "config.hpp"
#include "status.hpp"
