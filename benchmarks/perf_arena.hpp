#pragma once
// Where the ranks of the device perf harness meet, as threads of one process or as processes:
// one region of shared memory (a file every process maps, or anonymous memory for threads) that
// holds a barrier which names the ranks it waits for, an allgather that bootstraps the
// executor, a flag any rank sets when it fails, each rank's error message, a text slot per rank
// and each rank's row of results (doubles) for the parent to read. No MPI: the GPU machine has
// only its driver.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <fast/exec/exec.hpp>

namespace fast_perf {

class perf_arena {
public:
    /// A region for `ranks` ranks, each with a slot of `slot_bytes` (allgather, text) and
    /// `values` doubles. In the file `path` (created, for processes to open) or, when `path` is
    /// empty, in anonymous memory (threads). nullptr with `error` set on failure.
    static std::unique_ptr<perf_arena> create(int ranks, std::size_t slot_bytes, std::size_t values,
                                              const std::string& path, std::string& error);
    /// The region a parent created in `path`.
    static std::unique_ptr<perf_arena> open(const std::string& path, std::string& error);
    ~perf_arena();
    perf_arena(const perf_arena&) = delete;
    perf_arena& operator=(const perf_arena&) = delete;

    [[nodiscard]] int ranks() const noexcept;
    /// Returns when every rank has called barrier() as often as `rank` has; false, with `error`
    /// naming the ranks still missing, after `timeout` or once a rank has failed.
    [[nodiscard]] bool barrier(int rank, std::chrono::milliseconds timeout, std::string& error) noexcept;
    /// The executor's bootstrap for `rank`: an allgather through the slots, bounded by `timeout`.
    [[nodiscard]] fast::exec::bootstrap bootstrap(int rank, std::chrono::milliseconds timeout);
    /// Rank `rank`'s row of values, and its slot.
    [[nodiscard]] double* values(int rank) noexcept;
    [[nodiscard]] char* slot(int rank) noexcept;
    [[nodiscard]] std::size_t slot_bytes() const noexcept;
    /// Records rank `rank`'s failure (its first message is kept) and stops every barrier.
    void fail(int rank, std::string_view message) noexcept;
    /// Stops every barrier (the parent, when a process died).
    void stop() noexcept;
    [[nodiscard]] bool failed() const noexcept;
    /// Rank `rank`'s error message, "" if none.
    [[nodiscard]] std::string error(int rank) const;

private:
    struct header;
    perf_arena(void* base, std::size_t bytes) noexcept : base_(base), bytes_(bytes) {}
    [[nodiscard]] header& head() const noexcept;
    [[nodiscard]] std::atomic<std::uint64_t>& arrivals(int rank) const noexcept;
    void* base_;
    std::size_t bytes_;
};

} // namespace fast_perf
