#include "dispatch.hpp"

#include "errors.hpp"
#include "registry.hpp"
#include "requests.hpp"
#include "state.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

namespace fast::mpi {

namespace {

using clock_type = std::chrono::steady_clock;
using fast::exec::errc;
using fast::exec::status;

double since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// This rank's send bytes, for the counters (0 where the arguments are invalid).
std::uint64_t send_bytes(const call& c) {
    const type_info t = describe(c.sendtype);
    std::uint64_t sum = 0;
    for (int j = 0; j < c.send.ranks; ++j) sum += static_cast<std::uint64_t>(std::max(c.send.count(j), 0)) * t.size;
    return sum;
}

// The reasons every rank finds alike, without asking the others.
std::optional<reason> local_reason(const call& c) {
    const process_state& s = state();
    if (!s.active || !s.config.enable) return reason::disabled;
    if (c.comm == MPI_COMM_NULL) return reason::arguments; // MPI reports it
    if (c.sendbuf == MPI_IN_PLACE) return reason::in_place;
    int inter = 0;
    if (PMPI_Comm_test_inter(c.comm, &inter) != MPI_SUCCESS || inter) return reason::intercomm;
    const bool uniform =
        c.kind == op_kind::alltoall || c.kind == op_kind::ialltoall || c.kind == op_kind::alltoall_init;
    if (uniform && send_bytes(c) < s.config.threshold) return reason::below_threshold;
    return std::nullopt;
}

int fall_back(const call& c, reason r, const pmpi_call& fallback, clock_type::time_point t0) {
    const int rc = fallback();
    count_fallback(c.kind, r, send_bytes(c), since(t0));
    return rc;
}

// Why this rank's arguments cannot go to the executor as they are.
reason decline_reason(const call& c) {
    return describe(c.sendtype).contiguous && describe(c.recvtype).contiguous ? reason::arguments : reason::datatype;
}

} // namespace

int ranks_of(MPI_Comm comm) noexcept {
    int size = 0;
    if (comm != MPI_COMM_NULL) PMPI_Comm_size(comm, &size);
    return size;
}

int run_blocking(const call& c, const pmpi_call& fallback) {
    const auto t0 = clock_type::now();
    if (auto r = local_reason(c)) return fall_back(c, *r, fallback, t0);
    const std::shared_ptr<comm_entry> e = entry_for(c.comm);
    if (!e->ch) return fall_back(c, e->why, fallback, t0);
    byte_side send, recv;
    std::optional<reason> decline;
    if (!make_side(c.sendbuf, c.send, c.sendtype, false, send) ||
        !make_side(c.recvbuf, c.recv, c.recvtype, false, recv))
        decline = decline_reason(c);
    else if (std::max(send.total, recv.total) < state().config.threshold) decline = reason::below_threshold;
    auto j = e->ch->submit([&](fast::exec::communicator& comm) {
        if (decline) return comm.alltoallv(nullptr, {}, {}, nullptr, {}, {}); // refused by every rank
        return comm.alltoallv(send.data(), send.counts, send.displs, recv.data(), recv.counts, recv.displs);
    });
    e->ch->wait(*j);
    if (j->result.ok()) {
        count_fast(c.kind, send.total, since(t0));
        return MPI_SUCCESS;
    }
    if (j->result.code() == errc::invalid_argument)
        return fall_back(c, decline.value_or(reason::other_rank), fallback, t0);
    count_error(c.kind);
    return raise(c.comm, error_code(j->result, name(c.kind)));
}

int run_nonblocking(const call& c, bool persistent, MPI_Request* request, const pmpi_call& fallback) {
    const auto t0 = clock_type::now();
    if (auto r = local_reason(c)) return fall_back(c, *r, fallback, t0);
    const std::shared_ptr<comm_entry> e = entry_for(c.comm);
    if (!e->ch) return fall_back(c, e->why, fallback, t0);
    auto op = std::make_unique<operation>();
    op->comm = c.comm;
    op->kind = c.kind;
    op->persistent = persistent;
    op->ch = e->ch;
    op->user_send = mpi_side(const_cast<void*>(c.sendbuf), c.send, c.sendtype);
    op->user_recv = mpi_side(c.recvbuf, c.recv, c.recvtype);
    if (!make_side(c.sendbuf, c.send, c.sendtype, true, op->send) ||
        !make_side(c.recvbuf, c.recv, c.recvtype, true, op->recv)) {
        op->decline = true; // the others learn it at the agreement and fail alike
        op->local_error = error_code(MPI_ERR_COUNT, name(c.kind), "a count is negative or a block exceeds 2 GiB");
    } else if (op->send.packed() || op->recv.packed()) {
        count_packed();
        if (!persistent && op->send.packed())
            op->decline = (op->local_error = pack(c.sendbuf, c.send, c.sendtype, c.comm, op->send)) != MPI_SUCCESS;
    }
    op->bytes = op->send.total;
    op->seconds = since(t0);
    const int rc = requests::launch(std::move(op), request);
    return rc == MPI_SUCCESS ? rc : raise(c.comm, rc);
}

} // namespace fast::mpi
