#pragma once
// Execution traces (config.trace, FAST_TRACE): what one rank did in every call, with steady-clock
// times in nanoseconds: the call, its phases (the agreement on counts, planning, compiling),
// every step's start and end, and every message's post and completion with its bytes, peer and
// tier. Kept in memory while the communicator lives (a bounded number of records) and written
// when it is destroyed, in two files per rank: PREFIX.rank<R>.json in the project's own format
// ("fast-trace/1", docs/executor.md), which `fast-plan trace` reads to draw the measured timeline
// beside the cost model's, and PREFIX.rank<R>.chrome.json in the Chrome trace event format
// (Perfetto, chrome://tracing). Off by default, and then each hook is one branch.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace fast::exec::detail {

[[nodiscard]] inline std::uint64_t clock_ns() noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

/// What a traced message or copy was.
enum class trace_kind : std::uint8_t { send, recv, copy };

struct trace_op {
    std::uint64_t call = 0; ///< index of the call in calls()
    std::uint64_t bytes = 0;
    std::uint64_t post_ns = 0;
    std::uint64_t done_ns = 0;
    std::int32_t peer = -1;
    std::uint32_t step = 0;
    trace_kind kind = trace_kind::copy;
    bool scale_out = false;
};

struct trace_step {
    std::uint64_t call = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::uint32_t step = 0;
};

/// One alltoallv, or one run of a persistent request.
struct trace_call {
    std::uint64_t seq = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t agreed_ns = 0;   ///< the counts agreed (0: a persistent run, agreed at init)
    std::uint64_t planned_ns = 0;  ///< the rank's program planned (or the cached one found)
    std::uint64_t compiled_ns = 0; ///< compiled against the user's layout; the steps start
    std::uint64_t end_ns = 0;
    std::uint64_t plan_steps = 0;
    std::size_t sendcounts = 0; ///< offset of its sendcounts (size() entries) in counts
    bool persistent = false;    ///< a run of a persistent request
    bool init = false;          ///< alltoallv_init (agreement and planning, no data)
    bool planned = false;       ///< a new plan (not the previous call's)
    bool direct = false;        ///< the automatic scheduler chose direct
    bool split = false;         ///< the plan splits blocks
    bool ok = false;
};

/// What the trace file says about the communicator (the planner's inputs).
struct trace_setup {
    int rank = 0;
    int size = 0;
    int servers = 0;
    int gpus_per_server = 0;
    std::string scheduler, flow, memory, progress, host;
    double scale_up_gbps = 0, scale_out_gbps = 0, alpha_up_us = 0, alpha_out_us = 0;
    std::vector<double> nic_gbps; ///< every rank's NIC rate where they differ (the planner's fabric), else empty
    bool split_blocks_when_needed = false;
};

class tracer {
public:
    /// Records while `prefix` is not empty, at most `limit` messages (then it stops recording
    /// them and says so in the file).
    void open(std::string prefix, std::size_t limit = 4'000'000) {
        prefix_ = std::move(prefix);
        limit_ = limit;
    }
    [[nodiscard]] bool on() const noexcept { return !prefix_.empty(); }
    [[nodiscard]] const std::string& prefix() const noexcept { return prefix_; }

    /// Starts a call; returns its index. `sendcounts` are this rank's counts (R entries).
    std::size_t begin_call(std::uint64_t seq, bool persistent, std::span<const std::size_t> sendcounts,
                           bool init = false);
    [[nodiscard]] trace_call& call(std::size_t k) noexcept { return calls_[k]; }
    [[nodiscard]] std::size_t current() const noexcept { return calls_.size() - 1; }
    void step(std::uint32_t step, std::uint64_t start_ns, std::uint64_t end_ns) {
        steps_.push_back({current(), start_ns, end_ns, step});
    }
    void op(const trace_op& o) {
        if (ops_.size() < limit_) ops_.push_back(o);
        else ++dropped_;
    }
    /// Writes both files; "" or what failed.
    [[nodiscard]] std::string write(const trace_setup& setup) const;

private:
    [[nodiscard]] std::string write_own(const trace_setup& setup, const std::string& path) const;
    [[nodiscard]] std::string write_chrome(const trace_setup& setup, const std::string& path) const;

    std::string prefix_;
    std::size_t limit_ = 0;
    std::size_t dropped_ = 0;
    std::vector<trace_call> calls_;
    std::vector<trace_step> steps_;
    std::vector<trace_op> ops_;
    std::vector<std::uint64_t> counts_; ///< every call's sendcounts, in call order
};

} // namespace fast::exec::detail
