#include "registry.hpp"

#include "state.hpp"

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

namespace fast::mpi {

namespace {

std::mutex mutex;
int keyval = MPI_KEYVAL_INVALID;
// The attribute's value is the key of the communicator's entry here.
std::map<const comm_entry*, std::shared_ptr<comm_entry>> entries;

int on_delete(MPI_Comm, int, void* value, void*) {
    std::shared_ptr<comm_entry> e;
    {
        std::lock_guard lock(mutex);
        auto it = entries.find(static_cast<const comm_entry*>(value));
        if (it == entries.end()) return MPI_SUCCESS; // closed at MPI_Finalize already
        e = std::move(it->second);
        entries.erase(it);
    }
    if (e->ch) e->ch->close();
    return MPI_SUCCESS;
}

std::shared_ptr<comm_entry> open_entry(MPI_Comm comm) {
    auto e = std::make_shared<comm_entry>();
    std::string why;
    bool topology = false;
    e->ch = channel::open(comm, state().config, why, topology);
    if (!e->ch) {
        e->why = topology ? reason::topology : reason::unavailable;
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        if (rank == 0 || !topology) // the topology's reason is the same on every rank
            std::fprintf(stderr, "fast_mpi: rank %d of a communicator: its all-to-alls go to MPI: %s\n", rank,
                         why.c_str());
    }
    return e;
}

} // namespace

std::shared_ptr<comm_entry> entry_for(MPI_Comm comm) {
    {
        std::lock_guard lock(mutex);
        if (keyval == MPI_KEYVAL_INVALID &&
            PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_delete, &keyval, nullptr) != MPI_SUCCESS)
            keyval = MPI_KEYVAL_INVALID;
    }
    void* value = nullptr;
    int found = 0;
    if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_get_attr(comm, keyval, &value, &found);
    if (found) {
        std::lock_guard lock(mutex);
        auto it = entries.find(static_cast<const comm_entry*>(value));
        if (it != entries.end()) return it->second;
    }
    std::shared_ptr<comm_entry> e = open_entry(comm);
    {
        std::lock_guard lock(mutex);
        entries.emplace(e.get(), e);
    }
    if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_set_attr(comm, keyval, e.get());
    return e;
}

void close_all() noexcept {
    std::vector<std::shared_ptr<comm_entry>> all;
    {
        std::lock_guard lock(mutex);
        for (auto& [key, e] : entries) all.push_back(std::move(e));
        entries.clear();
    }
    // All barriers at once: ranks may have opened their channels in different orders.
    std::vector<MPI_Request> barriers;
    for (const auto& e : all) {
        MPI_Request r = MPI_REQUEST_NULL;
        if (e->ch && PMPI_Ibarrier(e->ch->dup(), &r) == MPI_SUCCESS) barriers.push_back(r);
    }
    const auto deadline = std::chrono::steady_clock::now() + state().config.exec.timeout;
    int done = 0;
    while (!barriers.empty() &&
           PMPI_Testall(static_cast<int>(barriers.size()), barriers.data(), &done, MPI_STATUSES_IGNORE) ==
               MPI_SUCCESS &&
           !done) {
        if (std::chrono::steady_clock::now() > deadline) break;
        sched_yield();
    }
    for (const auto& e : all)
        if (e->ch) e->ch->close();
}

} // namespace fast::mpi
