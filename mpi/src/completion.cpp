// The completion calls, intercepted so that carriers of FAST calls complete (requests.hpp).
// Arrays without a carrier go to the MPI library directly. A wait polls the MPI library's test
// (yielding the processor between tests) while the FAST calls run on their channels' threads.

#include <mpi.h>
#include <sched.h>

#include "errors.hpp"
#include "requests.hpp"

#include <utility>
#include <vector>

using namespace fast::mpi;

namespace {

using positions = std::vector<std::pair<int, MPI_Request>>; // index in the array, carrier handle

positions find_ours(int n, const MPI_Request* reqs) {
    positions out;
    for (int i = 0; i < n; ++i)
        if (requests::is_ours(reqs[i])) out.emplace_back(i, reqs[i]);
    return out;
}

MPI_Status* status_at(MPI_Status* statuses, int i) {
    return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : statuses + i;
}

// One carrier that MPI completed: its code, with the error handler run on failure.
int finish_one(MPI_Request key, MPI_Status* st) {
    MPI_Comm comm = MPI_COMM_NULL;
    const int code = requests::finish(key, st, comm);
    return code == MPI_SUCCESS ? code : raise(comm, code);
}

// The carriers among `done` (positions whose requests MPI completed; statuses at `slot`).
// `rc` is what MPI returned. A failed FAST call makes it MPI_ERR_IN_STATUS where there are
// statuses (every entry's MPI_ERROR then set), else the call's code.
template <class Slot>
int finish_many(const positions& done, MPI_Status* sts, int count, int rc, Slot slot) {
    int first = MPI_SUCCESS;
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<bool> set(static_cast<std::size_t>(count), false);
    for (const auto& [i, key] : done) {
        const int k = slot(i);
        MPI_Comm c = MPI_COMM_NULL;
        const int code = requests::finish(key, status_at(sts, k), c);
        set[static_cast<std::size_t>(k)] = true;
        if (code != MPI_SUCCESS && first == MPI_SUCCESS) first = code, comm = c;
    }
    if (first == MPI_SUCCESS) return rc;
    raise(comm, first);
    if (sts == MPI_STATUSES_IGNORE) return first;
    if (rc == MPI_SUCCESS)
        for (int k = 0; k < count; ++k)
            if (!set[static_cast<std::size_t>(k)]) sts[k].MPI_ERROR = MPI_SUCCESS;
    return MPI_ERR_IN_STATUS;
}

bool completed(int rc) {
    return rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS;
}

int testall(int n, MPI_Request reqs[], int* flag, MPI_Status sts[], const positions& mine) {
    requests::signal_done();
    const int rc = PMPI_Testall(n, reqs, flag, sts);
    if (!completed(rc) || !*flag) return rc;
    return finish_many(mine, sts, n, rc, [](int i) { return i; });
}

int testany(int n, MPI_Request reqs[], int* index, int* flag, MPI_Status* st, const positions& mine) {
    requests::signal_done();
    const int rc = PMPI_Testany(n, reqs, index, flag, st);
    if (rc != MPI_SUCCESS || !*flag || *index == MPI_UNDEFINED) return rc;
    for (const auto& [i, key] : mine)
        if (i == *index) return finish_one(key, st);
    return rc;
}

int testsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status sts[], const positions& mine) {
    requests::signal_done();
    const int rc = PMPI_Testsome(n, reqs, outcount, indices, sts);
    if (!completed(rc) || *outcount == MPI_UNDEFINED || *outcount == 0) return rc;
    positions done;
    std::vector<int> slot_of(static_cast<std::size_t>(n), 0);
    for (int k = 0; k < *outcount; ++k) {
        slot_of[static_cast<std::size_t>(indices[k])] = k;
        for (const auto& [i, key] : mine)
            if (i == indices[k]) done.emplace_back(i, key);
    }
    return finish_many(done, sts, *outcount, rc, [&](int i) { return slot_of[static_cast<std::size_t>(i)]; });
}

} // namespace

extern "C" {

int MPI_Test(MPI_Request* r, int* flag, MPI_Status* st) {
    if (!requests::is_ours(*r)) return PMPI_Test(r, flag, st);
    const MPI_Request key = *r;
    requests::signal_done();
    const int rc = PMPI_Test(r, flag, st);
    return rc == MPI_SUCCESS && *flag ? finish_one(key, st) : rc;
}

int MPI_Wait(MPI_Request* r, MPI_Status* st) {
    if (!requests::is_ours(*r)) return PMPI_Wait(r, st);
    int flag = 0;
    for (;;) {
        const int rc = MPI_Test(r, &flag, st);
        if (rc != MPI_SUCCESS || flag) return rc;
        sched_yield();
    }
}

int MPI_Testall(int n, MPI_Request reqs[], int* flag, MPI_Status sts[]) {
    const positions mine = find_ours(n, reqs);
    return mine.empty() ? PMPI_Testall(n, reqs, flag, sts) : testall(n, reqs, flag, sts, mine);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    const positions mine = find_ours(n, reqs);
    if (mine.empty()) return PMPI_Waitall(n, reqs, sts);
    int flag = 0;
    for (;;) {
        const int rc = testall(n, reqs, &flag, sts, mine);
        if (!completed(rc) || flag) return rc;
        sched_yield();
    }
}

int MPI_Testany(int n, MPI_Request reqs[], int* index, int* flag, MPI_Status* st) {
    const positions mine = find_ours(n, reqs);
    return mine.empty() ? PMPI_Testany(n, reqs, index, flag, st) : testany(n, reqs, index, flag, st, mine);
}

int MPI_Waitany(int n, MPI_Request reqs[], int* index, MPI_Status* st) {
    const positions mine = find_ours(n, reqs);
    if (mine.empty()) return PMPI_Waitany(n, reqs, index, st);
    int flag = 0;
    for (;;) {
        const int rc = testany(n, reqs, index, &flag, st, mine);
        if (rc != MPI_SUCCESS || flag) return rc;
        sched_yield();
    }
}

int MPI_Testsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status sts[]) {
    const positions mine = find_ours(n, reqs);
    return mine.empty() ? PMPI_Testsome(n, reqs, outcount, indices, sts)
                        : testsome(n, reqs, outcount, indices, sts, mine);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status sts[]) {
    const positions mine = find_ours(n, reqs);
    if (mine.empty()) return PMPI_Waitsome(n, reqs, outcount, indices, sts);
    for (;;) {
        const int rc = testsome(n, reqs, outcount, indices, sts, mine);
        if (!completed(rc) || *outcount != 0) return rc;
        sched_yield();
    }
}

int MPI_Request_get_status(MPI_Request r, int* flag, MPI_Status* st) {
    if (!requests::is_ours(r)) return PMPI_Request_get_status(r, flag, st);
    requests::signal_done();
    const int rc = PMPI_Request_get_status(r, flag, st);
    if (rc == MPI_SUCCESS && *flag && st != MPI_STATUS_IGNORE) {
        st->MPI_SOURCE = MPI_ANY_SOURCE;
        st->MPI_TAG = MPI_ANY_TAG;
        st->MPI_ERROR = requests::peek_code(r);
    }
    return rc;
}

int MPI_Start(MPI_Request* r) {
    if (!requests::is_ours(*r)) return PMPI_Start(r);
    MPI_Comm comm = MPI_COMM_NULL;
    const int rc = requests::start(r, comm);
    return rc == MPI_SUCCESS ? rc : raise(comm, rc);
}

int MPI_Startall(int n, MPI_Request reqs[]) {
    for (int i = 0; i < n; ++i)
        if (const int rc = MPI_Start(&reqs[i]); rc != MPI_SUCCESS) return rc;
    return MPI_SUCCESS;
}

int MPI_Request_free(MPI_Request* r) {
    return requests::is_ours(*r) ? requests::release(r) : PMPI_Request_free(r);
}

int MPI_Cancel(MPI_Request* r) {
    if (!requests::is_ours(*r)) return PMPI_Cancel(r);
    return raise(requests::comm_of(*r),
                 error_code(MPI_ERR_REQUEST, "MPI_Cancel", "a FAST all-to-all cannot be cancelled"));
}

} // extern "C"
