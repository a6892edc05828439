#pragma once
/// \file channel.hpp
/// One MPI communicator's FAST executor communicator and the thread that drives it.
///
/// Every executor call of a communicator runs on its channel's thread, in the order the calls
/// were submitted (the order of the MPI calls, the same on every rank). So a FAST call makes
/// progress while the application's thread does anything else, including blocking in other MPI
/// calls: nonblocking FAST calls overlap, and no rank stalls a peer's UCX traffic. The
/// application's thread keeps MPI progressing while it waits for a job (see wait()). UCX is
/// only ever touched from the channel's thread (its worker is UCS_THREAD_MODE_SINGLE), and the
/// channel's thread never calls MPI: the creation's allgathers are handed to the application's
/// thread.

#include <mpi.h>

#include <fast/exec/communicator.hpp>

#include "settings.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace fast::mpi {

/// A unit of work for a channel's thread, and its outcome.
struct job {
    std::function<fast::exec::status(fast::exec::communicator&)> run;
    fast::exec::status result;
    double seconds = 0; ///< time in run()
    std::atomic<bool> done{false};
};

class channel {
public:
    /// Collective over `comm` (the first FAST call on it): duplicates it, groups its ranks into
    /// servers and creates the executor communicator. Every rank gets a channel, or every rank
    /// gets null with `why` set (`topology`: the ranks do not form equal, contiguous servers).
    static std::shared_ptr<channel> open(MPI_Comm comm, const settings& s, std::string& why, bool& topology);

    ~channel();
    channel(const channel&) = delete;
    channel& operator=(const channel&) = delete;

    /// Queues `run` behind every earlier job.
    std::shared_ptr<job> submit(std::function<fast::exec::status(fast::exec::communicator&)> run);

    /// Waits for `j` on the application's thread, driving MPI's progress meanwhile (a peer may
    /// need it to reach this collective): after 1 ms, then at intervals doubling to 50 ms.
    void wait(const job& j);

    /// Waits for every job, ends the thread (which destroys the executor communicator) and
    /// frees the duplicate. Collective in spirit: call it on every rank.
    void close() noexcept;

    [[nodiscard]] MPI_Comm dup() const { return dup_; }
    [[nodiscard]] int servers() const { return servers_; }
    [[nodiscard]] int gpus_per_server() const { return gpus_; }

private:
    channel() = default;
    bool start(const settings& s, std::string& why);
    void serve_bootstrap(std::chrono::milliseconds timeout);
    void thread_main(fast::exec::config cfg, int rank, int size);
    fast::exec::status allgather(const void* send, void* recv, std::size_t bytes);

    MPI_Comm dup_ = MPI_COMM_NULL;
    int servers_ = 0, gpus_ = 0;
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_;     // the thread: a job, a stop, a bootstrap answer
    std::condition_variable finished_; // the application: a job done, a bootstrap request
    std::deque<std::shared_ptr<job>> queue_;
    bool stop_ = false;
    // Creation, handed between the threads.
    enum class phase { creating, ready, failed } phase_ = phase::creating;
    fast::exec::status created_;
    struct gather_request {
        const void* send = nullptr;
        void* recv = nullptr;
        std::size_t bytes = 0;
        bool pending = false;
        fast::exec::status result;
    } gather_;
    fast::exec::communicator comm_; // the thread's alone once created
    fast::exec::statistics final_stats_;
    double executor_seconds_ = 0;
    bool broken_ = false; // an allgather timed out: MPI may still use the duplicate
};

} // namespace fast::mpi
