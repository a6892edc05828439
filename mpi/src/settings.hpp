#pragma once
/// \file settings.hpp
/// libfast_mpi's configuration: the FAST_MPI_* environment variables, read once at MPI_Init.

#include <fast/exec/config.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fast::mpi {

struct settings {
    bool enable = true;
    /// A call goes FAST only when every rank sends or receives at least this many bytes.
    std::size_t threshold = 8 * 1024;
    /// The executor's configuration: scheduler, flow, servers, timeout, fabric figures.
    /// gpus_per_server = 0 here means: found with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
    fast::exec::config exec;
    /// "" (no summary), "stderr", or a file that rank 0 writes at MPI_Finalize.
    std::string summary;
};

/// One FAST_MPI_* variable: its name, its help line and its value in the environment (if set).
struct variable {
    const char* name;
    const char* help;
    const char* value;
};

/// Every variable libfast_mpi reads, with its value in this process's environment.
std::vector<variable> read_variables();

/// Names in the environment that start with FAST_MPI_ but are none of read_variables() (typos,
/// variables of another version): MPI_Init warns about them and goes on.
std::vector<std::string> unknown_variables();

/// Parses `vars` into `out`. On a bad value returns false and sets `error` to one line naming the
/// variable, its value and what is expected.
bool parse_settings(const std::vector<variable>& vars, settings& out, std::string& error);

/// A 64-bit digest of one variable's value (unset and empty differ), to compare ranks cheaply.
std::uint64_t digest(const variable& v);

} // namespace fast::mpi
