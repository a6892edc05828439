// The communicator's traces (config.trace / FAST_TRACE): which files, what each call records,
// and the set-up written with them.

#include "communicator_impl.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "hosts.hpp"

namespace fast::exec::detail {

// Traces go to config.trace, else FAST_TRACE, with ".c<K>" added: the K-th traced communicator
// of this rank in this process (every rank creates its communicators in the same order, so K
// names the same communicator on every rank).
void communicator_impl::open_trace() {
    std::string prefix = cfg_.trace;
    if (const char* env = std::getenv("FAST_TRACE"); prefix.empty() && env != nullptr) prefix = env;
    if (prefix.empty()) return;
    static std::mutex mutex;
    static std::map<int, int> created; // per rank
    int k = 0;
    {
        const std::lock_guard<std::mutex> lock(mutex);
        k = created[rank_]++;
    }
    trace_.open(prefix + ".c" + std::to_string(k));
}

// Writes this rank's trace files (config.trace); a failure is one line on stderr (a destructor
// has no status to return).
void communicator_impl::write_trace() noexcept {
    if (!trace_.on()) return;
    try {
        trace_setup s;
        s.rank = rank_;
        s.size = size_;
        s.servers = topo_.servers;
        s.gpus_per_server = topo_.gpus_per_server;
        s.scheduler = std::string(to_string(cfg_.scheduler));
        s.flow = std::string(to_string(cfg_.flow));
        s.memory = std::string(to_string(cfg_.memory));
        s.progress = worker_.blocking() ? "blocking" : "polling";
        s.host = host_key();
        s.scale_up_gbps = cfg_.scale_up_gbps;
        s.scale_out_gbps = cfg_.scale_out_gbps;
        s.alpha_up_us = cfg_.alpha_up_us;
        s.alpha_out_us = cfg_.alpha_out_us;
        s.nic_gbps = fabric_shape_.nic_rates;
        s.split_blocks_when_needed = single_segments();
        if (const std::string e = trace_.write(s); !e.empty())
            std::fprintf(stderr, "fast executor: rank %d: %s\n", rank_, e.c_str());
    } catch (...) {
        std::fprintf(stderr, "fast executor: rank %d: out of memory writing the trace\n", rank_);
    }
}

// The end of a traced call: its outcome, and whether it planned a new matrix.
void communicator_impl::trace_call_end(const status& s, bool planned) noexcept {
    if (!trace_.on()) return;
    trace_call& c = trace_.call(trace_.current());
    c.end_ns = clock_ns();
    c.ok = s.ok();
    c.planned = planned;
    c.plan_steps = stats_.last_plan_steps;
    c.direct = planner_->last_scheduler() == fast::scheduler::direct;
    c.split = plan_split_;
}

} // namespace fast::exec::detail
