#pragma once
/// \file mpi_tool.hpp
/// The main of the tools that run under mpirun (fast-probe, alltoallv_perf): one rank speaks
/// for all where all ranks see the same thing (help, bad arguments), every rank for itself
/// otherwise.

#include <mpi.h>

#include <CLI/CLI.hpp>

#include <fast/error.hpp>

#include <cstdio>
#include <exception>

namespace fast_tools {

/// Parses `app` on rank `me` and returns run()'s exit status, after MPI_Finalize. Rank 0 prints
/// the help (exit 0), parse errors and fast::invalid_argument (found alike on every rank; exit
/// 2); any other exception ends the job (MPI_Abort) after its rank printed it.
template <class Run>
int run_mpi_tool(const char* name, CLI::App& app, int argc, char** argv, int me, Run&& run) {
    int rc = 0;
    try {
        app.parse(argc, argv);
        rc = run();
    } catch (const CLI::CallForHelp&) {
        if (me == 0) std::printf("%s", app.help().c_str());
    } catch (const CLI::ParseError& e) {
        if (me == 0) std::fprintf(stderr, "%s: error: %s (see --help)\n", name, e.what());
        rc = 2;
    } catch (const fast::invalid_argument& e) {
        if (me == 0) std::fprintf(stderr, "%s: error: %s\n", name, e.what());
        rc = 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: rank %d: %s\n", name, me, e.what());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return rc;
}

} // namespace fast_tools
