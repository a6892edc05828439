#include "requests.hpp"

#include "errors.hpp"
#include "state.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace fast::mpi {

mpi_side::mpi_side(void* buffer, const block_list& b, MPI_Datatype t)
    : buf(buffer), uniform(b.uniform), ranks(b.ranks), type(t) {
    if (b.counts != nullptr) counts.assign(b.counts, b.counts + b.ranks);
    if (b.displs != nullptr) displs.assign(b.displs, b.displs + b.ranks);
    if (t != MPI_DATATYPE_NULL && !describe(t).contiguous && PMPI_Type_dup(t, &type) == MPI_SUCCESS) owns_type = true;
}

mpi_side::~mpi_side() {
    free_type();
}

void mpi_side::free_type() noexcept {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (owns_type && !finalized) PMPI_Type_free(&type);
    owns_type = false;
}

mpi_side& mpi_side::operator=(mpi_side&& o) noexcept {
    if (this == &o) return *this;
    free_type();
    buf = o.buf;
    counts = std::move(o.counts);
    displs = std::move(o.displs);
    uniform = o.uniform;
    ranks = o.ranks;
    type = o.type;
    owns_type = std::exchange(o.owns_type, false);
    return *this;
}

} // namespace fast::mpi

namespace fast::mpi::requests {

namespace {

using fast::exec::status;

std::mutex mutex; // guards everything below and every operation's carrier fields
std::map<MPI_Request, std::unique_ptr<operation>> table;
std::vector<std::unique_ptr<operation>> orphans; // freed by the application, still running
std::set<int> tags_in_use;
int next_tag = 0;
std::atomic<std::size_t> operations{0}; // table.size(), read without the lock by is_ours

int take_tag() {
    int* ub = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(state().self, MPI_TAG_UB, &ub, &found);
    const int limit = found && ub != nullptr ? *ub : 32767;
    while (tags_in_use.count(next_tag) != 0) next_tag = next_tag >= limit ? 0 : next_tag + 1;
    const int tag = next_tag;
    next_tag = next_tag >= limit ? 0 : next_tag + 1;
    tags_in_use.insert(tag);
    return tag;
}

std::function<status(fast::exec::communicator&)> run_once(operation* op) {
    return [op](fast::exec::communicator& c) {
        if (op->decline) return c.alltoallv(nullptr, {}, {}, nullptr, {}, {});
        return c.alltoallv(op->send.data(), op->send.counts, op->send.displs, op->recv.data(), op->recv.counts,
                           op->recv.displs);
    };
}

std::function<status(fast::exec::communicator&)> run_init(operation* op) {
    return [op](fast::exec::communicator& c) {
        if (op->decline) return c.alltoallv_init(nullptr, {}, {}, nullptr, {}, {}, *op->preq);
        return c.alltoallv_init(op->send.data(), op->send.counts, op->send.displs, op->recv.data(), op->recv.counts,
                                op->recv.displs, *op->preq);
    };
}

std::function<status(fast::exec::communicator&)> run_start(operation* op) {
    return [op, init = op->init](fast::exec::communicator&) {
        if (!init->result.ok()) return init->result;
        status st = op->preq->start();
        return st.ok() ? op->preq->wait() : st;
    };
}

// Destroys a persistent operation's executor request on its channel's thread.
void destroy_on_channel(operation& op) {
    if (!op.preq) return;
    op.ch->submit([p = std::move(op.preq)](fast::exec::communicator&) mutable {
        p.reset();
        return status{};
    });
}

// The outcome of a finished run, with the receive side unpacked (the application may read it
// as soon as MPI reports the carrier complete).
int outcome(operation& op) {
    if (op.local_error != MPI_SUCCESS) return op.local_error;
    const status& r = op.current->result;
    if (!r.ok()) return error_code(r, name(op.kind));
    if (op.recv.packed()) {
        const int rc = unpack(op.recv, op.user_recv.buf, op.user_recv.blocks(), op.user_recv.type, op.comm);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

void send_signal(const operation& op) {
    PMPI_Send(nullptr, 0, MPI_BYTE, 0, op.tag, state().self);
}

} // namespace

int launch(std::unique_ptr<operation> op, MPI_Request* request) {
    std::lock_guard lock(mutex);
    op->tag = take_tag();
    const int rc = op->persistent ? PMPI_Recv_init(nullptr, 0, MPI_BYTE, 0, op->tag, state().self, request)
                                  : PMPI_Irecv(nullptr, 0, MPI_BYTE, 0, op->tag, state().self, request);
    if (rc != MPI_SUCCESS) {
        tags_in_use.erase(op->tag);
        return rc;
    }
    operation* p = op.get();
    if (op->persistent) {
        op->preq = std::make_shared<fast::exec::alltoallv_request>();
        op->init = op->ch->submit(run_init(p));
    } else {
        op->active = true;
        op->current = op->ch->submit(run_once(p));
    }
    table.emplace(*request, std::move(op));
    operations = table.size();
    return MPI_SUCCESS;
}

bool is_ours(MPI_Request r) {
    if (r == MPI_REQUEST_NULL || operations.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard lock(mutex);
    return table.count(r) != 0;
}

void signal_done() {
    std::lock_guard lock(mutex);
    for (auto& [key, op] : table) {
        if (!op->active || op->signalled || !op->current->done) continue;
        op->code = outcome(*op);
        op->signalled = true;
        send_signal(*op);
    }
    for (auto it = orphans.begin(); it != orphans.end();) {
        operation& op = **it;
        if (!op.current->done) {
            ++it;
            continue;
        }
        if (!op.signalled) send_signal(op); // completes the freed carrier inside MPI
        destroy_on_channel(op);
        tags_in_use.erase(op.tag);
        it = orphans.erase(it);
    }
}

int finish(MPI_Request key, MPI_Status* st, MPI_Comm& comm) {
    std::lock_guard lock(mutex);
    auto it = table.find(key);
    if (it == table.end() || !it->second->active) return MPI_SUCCESS; // an inactive persistent one
    operation& op = *it->second;
    const int code = op.code;
    op.active = op.signalled = false;
    if (code == MPI_SUCCESS) {
        count_fast(op.kind, op.bytes, op.seconds);
    } else {
        count_error(op.kind);
        comm = op.comm;
    }
    if (st != MPI_STATUS_IGNORE) {
        st->MPI_SOURCE = MPI_ANY_SOURCE;
        st->MPI_TAG = MPI_ANY_TAG;
        st->MPI_ERROR = code;
    }
    if (!op.persistent) {
        tags_in_use.erase(op.tag);
        table.erase(it);
        operations = table.size();
    }
    return code;
}

int peek_code(MPI_Request key) {
    std::lock_guard lock(mutex);
    auto it = table.find(key);
    return it != table.end() && it->second->active ? it->second->code : MPI_SUCCESS;
}

MPI_Comm comm_of(MPI_Request r) {
    std::lock_guard lock(mutex);
    auto it = table.find(r);
    return it == table.end() ? MPI_COMM_WORLD : it->second->comm;
}

int start(MPI_Request* r, MPI_Comm& comm) {
    std::lock_guard lock(mutex);
    operation& op = *table.at(*r);
    comm = op.comm;
    if (op.active) return error_code(MPI_ERR_REQUEST, name(op.kind), "MPI_Start of a request that is still active");
    if (op.send.packed() && op.local_error == MPI_SUCCESS)
        op.local_error = pack(op.user_send.buf, op.user_send.blocks(), op.user_send.type, op.comm, op.send);
    const int rc = PMPI_Start(r);
    if (rc != MPI_SUCCESS) return rc;
    op.active = true;
    op.code = MPI_SUCCESS;
    op.current = op.ch->submit(run_start(&op));
    count_start();
    return MPI_SUCCESS;
}

int release(MPI_Request* r) {
    std::unique_lock lock(mutex);
    auto it = table.find(*r);
    std::unique_ptr<operation> op = std::move(it->second);
    table.erase(it);
    operations = table.size();
    const int rc = PMPI_Request_free(r); // an active carrier is freed by MPI once it completes
    if (op->active && !op->current->done) {
        op->orphan = true;
        orphans.push_back(std::move(op));
        return rc;
    }
    if (op->active && !op->signalled) send_signal(*op);
    destroy_on_channel(*op);
    tags_in_use.erase(op->tag);
    return rc;
}

void release_all() noexcept {
    std::vector<std::unique_ptr<operation>> all;
    {
        std::lock_guard lock(mutex);
        for (auto& [key, op] : table) all.push_back(std::move(op));
        table.clear();
        operations = 0;
        for (auto& op : orphans) all.push_back(std::move(op));
        orphans.clear();
    }
    for (auto& op : all) {
        // A run still going (the application never waited for it) uses the operation's buffers.
        if (op->current) op->ch->wait(*op->current);
        if (op->init) op->ch->wait(*op->init);
        destroy_on_channel(*op);
    }
}

} // namespace fast::mpi::requests
