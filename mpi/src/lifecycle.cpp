// MPI_Init, MPI_Init_thread and MPI_Finalize: the settings are read and checked when MPI starts,
// and every channel is closed (and the summary written) before MPI finalizes.

#include <mpi.h>

#include "counters.hpp"
#include "errors.hpp"
#include "registry.hpp"
#include "requests.hpp"
#include "settings.hpp"
#include "state.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace fast::mpi {

process_state& state() noexcept {
    static process_state s;
    return s;
}

namespace {

// Collective: the first variable whose value differs between ranks, or "".
std::string differing_variable(const std::vector<variable>& vars) {
    std::vector<std::uint64_t> mine, max(2 * vars.size());
    for (const variable& v : vars) mine.push_back(digest(v));
    for (const variable& v : vars) mine.push_back(~digest(v)); // the maximum of ~x gives the minimum of x
    PMPI_Allreduce(mine.data(), max.data(), static_cast<int>(mine.size()), MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    for (std::size_t i = 0; i < vars.size(); ++i)
        if (max[i] != ~max[vars.size() + i]) return vars[i].name;
    return {};
}

std::string known_names(const std::vector<variable>& vars) {
    std::string out;
    for (const variable& v : vars) out += (out.empty() ? "" : ", ") + std::string(v.name);
    return out;
}

// Unknown FAST_MPI_* names (a typo, a variable of another version) are ignored with one line
// from rank 0, as MPI implementations and UCX do with theirs: a warning, not a stopped job.
void warn_unknown(int rank, const std::vector<variable>& vars) {
    if (rank != 0) return;
    const std::vector<std::string> unknown = unknown_variables();
    if (unknown.empty()) return;
    std::string names;
    for (const std::string& n : unknown) names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "fast_mpi: warning: ignoring %s: not a fast_mpi variable (known: %s)\n", names.c_str(),
                 known_names(vars).c_str());
}

// Reads the settings; a bad value of a known one is an MPI error on MPI_COMM_WORLD naming the
// variable.
int configure() {
    process_state& s = state();
    const std::vector<variable> vars = read_variables();
    const std::string differing = differing_variable(vars); // every rank takes part
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    warn_unknown(rank, vars);
    std::string error;
    if (!parse_settings(vars, s.config, error))
        ;
    else if (!differing.empty())
        error = differing + " differs between ranks; every rank must see the same FAST_MPI_* values";
    if (error.empty()) {
        PMPI_Comm_dup(MPI_COMM_SELF, &s.self);
        s.active = true;
        return MPI_SUCCESS;
    }
    s.config.enable = false;
    std::fprintf(stderr, "fast_mpi: rank %d: %s\n", rank, error.c_str());
    return raise(MPI_COMM_WORLD, error_code(MPI_ERR_ARG, "MPI_Init", error));
}

std::string describe_config() {
    const settings& c = state().config;
    const std::string servers = c.exec.gpus_per_server > 0
                                    ? std::to_string(c.exec.gpus_per_server) + " ranks per server"
                                    : "one server per shared-memory node";
    return std::string(c.enable ? "enabled" : "disabled") + ", threshold " + std::to_string(c.threshold) +
           " bytes, scheduler " + std::string(fast::exec::to_string(c.exec.scheduler)) + ", flow " +
           std::string(fast::exec::to_string(c.exec.flow)) + ", " + servers;
}

} // namespace

} // namespace fast::mpi

using namespace fast::mpi;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
    const int rc = PMPI_Init(argc, argv);
    return rc == MPI_SUCCESS ? configure() : rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    const int rc = PMPI_Init_thread(argc, argv, required, provided);
    return rc == MPI_SUCCESS ? configure() : rc;
}

int MPI_Finalize(void) {
    process_state& s = state();
    if (s.active) {
        s.active = false; // from here on every call goes to MPI unchanged
        requests::release_all();
        close_all();
        if (!s.config.summary.empty()) write_summary(MPI_COMM_WORLD, s.config.summary, describe_config());
        PMPI_Comm_free(&s.self);
    }
    return PMPI_Finalize();
}

} // extern "C"
