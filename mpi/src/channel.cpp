#include "channel.hpp"

#include "counters.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

namespace fast::mpi {

namespace {

using clock_type = std::chrono::steady_clock;
using fast::exec::errc;
using fast::exec::status;

// How often the application's thread drives MPI's progress while its channel runs a blocking
// call: soon after the call starts, then less and less often. At a fixed millisecond, 32 ranks'
// waking application threads starved the channel threads that run the calls for seconds on a
// 2-core machine (docs/mpi.md, "Measured example").
constexpr std::chrono::milliseconds first_progress_interval{1};
constexpr std::chrono::milliseconds longest_progress_interval{50};

// Polls `request` until it completes or `timeout` passes (then false: MPI may still use its
// buffers, which the caller must keep).
bool poll(MPI_Request& request, std::chrono::milliseconds timeout) {
    const auto deadline = clock_type::now() + timeout;
    for (;;) {
        int done = 0;
        if (PMPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
        if (done) return true;
        if (clock_type::now() > deadline) return false;
        sched_yield();
    }
}

// The ranks of each shared-memory node: equal in number everywhere and contiguous, else 0
// (the same answer on every rank). Collective over `comm`.
int ranks_per_node(MPI_Comm comm, std::string& why) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    MPI_Comm node = MPI_COMM_NULL;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
        why = "MPI_Comm_split_type failed";
        return 0;
    }
    int local = 0, local_size = 0;
    PMPI_Comm_rank(node, &local);
    PMPI_Comm_size(node, &local_size);
    // Ordered by rank, a node's ranks are contiguous if rank - local rank is the same for all.
    const int base = rank - local;
    int mine[2] = {base, -base}, node_max[2] = {0, 0};
    PMPI_Allreduce(mine, node_max, 2, MPI_INT, MPI_MAX, node);
    PMPI_Comm_free(&node);
    const int contiguous = node_max[0] == base && -node_max[1] == base && base % local_size == 0;
    int all[3] = {local_size, -local_size, -contiguous}, max[3] = {0, 0, 0};
    PMPI_Allreduce(all, max, 3, MPI_INT, MPI_MAX, comm);
    if (max[0] != -max[1] || max[2] != -1) {
        why = max[0] != -max[1] ? "nodes hold different numbers of ranks (" + std::to_string(-max[1]) + " to " +
                                      std::to_string(max[0]) + "); set FAST_MPI_GPUS_PER_SERVER"
                                : "the ranks of a node are not contiguous; set FAST_MPI_GPUS_PER_SERVER";
        return 0;
    }
    return local_size;
}

} // namespace

std::shared_ptr<channel> channel::open(MPI_Comm comm, const settings& s, std::string& why, bool& topology) {
    topology = false;
    std::shared_ptr<channel> ch(new channel());
    if (PMPI_Comm_dup(comm, &ch->dup_) != MPI_SUCCESS) {
        ch->dup_ = MPI_COMM_NULL;
        why = "MPI_Comm_dup failed";
        return nullptr;
    }
    PMPI_Comm_set_errhandler(ch->dup_, MPI_ERRORS_RETURN);
    int size = 0;
    PMPI_Comm_size(ch->dup_, &size);
    int gpus = s.exec.gpus_per_server;
    if (gpus == 0) gpus = ranks_per_node(ch->dup_, why);
    if (gpus <= 0 || size % gpus != 0) {
        if (gpus > 0)
            why =
                std::to_string(size) + " ranks do not form servers of FAST_MPI_GPUS_PER_SERVER=" + std::to_string(gpus);
        topology = true;
        return nullptr;
    }
    ch->gpus_ = gpus;
    ch->servers_ = size / gpus;
    const int mine = ch->start(s, why) ? 1 : 0;
    int all = 0;
    PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, ch->dup_);
    if (all == 0) {
        if (mine == 1) why = "the executor communicator could not be created on another rank";
        return nullptr;
    }
    return ch;
}

bool channel::start(const settings& s, std::string& why) {
    int rank = 0, size = 0;
    PMPI_Comm_rank(dup_, &rank);
    PMPI_Comm_size(dup_, &size);
    fast::exec::config cfg = s.exec;
    cfg.gpus_per_server = gpus_;
    try {
        thread_ = std::thread(&channel::thread_main, this, cfg, rank, size);
    } catch (...) {
        why = "cannot start the channel's thread";
        return false;
    }
    serve_bootstrap(cfg.timeout);
    std::lock_guard lock(mutex_);
    if (phase_ == phase::ready) return true;
    why = created_.message();
    return false;
}

// The application's thread: runs the allgathers the executor's creation asks for, until it ends.
void channel::serve_bootstrap(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    for (;;) {
        finished_.wait(lock, [&] { return gather_.pending || phase_ != phase::creating; });
        if (phase_ != phase::creating) return;
        const gather_request r = gather_;
        lock.unlock();
        status st;
        if (r.bytes > static_cast<std::size_t>(INT_MAX)) {
            st = status(errc::bootstrap, "allgather of " + std::to_string(r.bytes) + " bytes per rank is too large");
        } else {
            int size = 0;
            PMPI_Comm_size(dup_, &size);
            // Buffers of our own: after a timeout MPI may still write them, so they are kept.
            auto in = std::make_unique<std::vector<unsigned char>>(static_cast<const unsigned char*>(r.send),
                                                                   static_cast<const unsigned char*>(r.send) + r.bytes);
            auto out = std::make_unique<std::vector<unsigned char>>(r.bytes * static_cast<std::size_t>(size));
            MPI_Request request = MPI_REQUEST_NULL;
            const int n = static_cast<int>(r.bytes);
            if (PMPI_Iallgather(in->data(), n, MPI_BYTE, out->data(), n, MPI_BYTE, dup_, &request) != MPI_SUCCESS) {
                st = status(errc::bootstrap, "MPI_Iallgather failed");
            } else if (!poll(request, timeout)) {
                (void)in.release();
                (void)out.release();
                broken_ = true;
                st = status(errc::bootstrap, "no answer from every rank within " + std::to_string(timeout.count()) +
                                                 " ms while creating the executor communicator");
            } else if (!out->empty()) {
                std::memcpy(r.recv, out->data(), out->size());
            }
        }
        lock.lock();
        gather_.result = st;
        gather_.pending = false;
        wake_.notify_all();
    }
}

// The channel's thread: asks the application's thread for each allgather and waits for it.
status channel::allgather(const void* send, void* recv, std::size_t bytes) {
    std::unique_lock lock(mutex_);
    gather_ = gather_request{send, recv, bytes, true, {}};
    finished_.notify_all();
    wake_.wait(lock, [&] { return !gather_.pending; });
    return gather_.result;
}

void channel::thread_main(fast::exec::config cfg, int rank, int size) {
    fast::exec::bootstrap boot{rank, size,
                               [this](const void* s, void* r, std::size_t b) { return allgather(s, r, b); }};
    const status st = fast::exec::create(boot, cfg, comm_);
    {
        std::lock_guard lock(mutex_);
        created_ = st;
        phase_ = st.ok() ? phase::ready : phase::failed;
        finished_.notify_all();
    }
    for (;;) {
        std::shared_ptr<job> j;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) break;
            j = std::move(queue_.front());
            queue_.pop_front();
        }
        const auto t0 = clock_type::now();
        j->result = j->run(comm_);
        j->seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
        std::lock_guard lock(mutex_);
        executor_seconds_ += j->seconds;
        j->done = true;
        finished_.notify_all();
    }
    final_stats_ = comm_.stats();
    comm_ = fast::exec::communicator(); // destroyed on the thread that used it
}

std::shared_ptr<job> channel::submit(std::function<status(fast::exec::communicator&)> run) {
    auto j = std::make_shared<job>();
    j->run = std::move(run);
    std::lock_guard lock(mutex_);
    if (phase_ != phase::ready || stop_) {
        j->result = status(errc::comm_failed, "the executor communicator is closed");
        j->done = true;
        return j;
    }
    queue_.push_back(j);
    wake_.notify_all();
    return j;
}

void channel::wait(const job& j) {
    std::chrono::milliseconds interval = first_progress_interval;
    std::unique_lock lock(mutex_);
    while (!j.done) {
        finished_.wait_for(lock, interval); // the job's end wakes it at once
        if (j.done) break;
        lock.unlock();
        int flag = 0; // MPI's progress, for peers that need this rank before they reach the call
        PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, dup_, &flag, MPI_STATUS_IGNORE);
        lock.lock();
        interval = std::min(2 * interval, longest_progress_interval);
    }
}

void channel::close() noexcept {
    if (thread_.joinable()) {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
            wake_.notify_all();
        }
        thread_.join();
        if (phase_ == phase::ready) count_channel(final_stats_, executor_seconds_);
    }
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (dup_ != MPI_COMM_NULL && !finalized && !broken_) PMPI_Comm_free(&dup_);
    dup_ = MPI_COMM_NULL;
}

channel::~channel() {
    close();
}

} // namespace fast::mpi
