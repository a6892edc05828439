#pragma once
/// \file worker.hpp
/// The thread that runs a process group's collective calls, one at a time, in the order they
/// were made: the only thread that touches the group's executor communicators after creation
/// (a communicator may be used by one thread at a time), and one that keeps UCX progressing while
/// Python does other work (async_op=True).

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace fast_torch {

class worker {
public:
    worker() : thread_([this] { loop(); }) {}
    /// Runs what is queued (each call is bounded by the group's timeout), then stops.
    ~worker() {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        ready_.notify_one();
        thread_.join();
    }
    worker(const worker&) = delete;
    worker& operator=(const worker&) = delete;

    /// Queues `job` behind the jobs already queued. `job` must not throw.
    void submit(std::function<void()> job) {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            jobs_.push_back(std::move(job));
        }
        ready_.notify_one();
    }

private:
    void loop() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
                if (jobs_.empty()) return; // stopping, nothing left
                job = std::move(jobs_.front());
                jobs_.pop_front();
            }
            job();
        }
    }

    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> jobs_;
    bool stopping_ = false;
    std::thread thread_; // last: starts once the members above exist
};

} // namespace fast_torch
