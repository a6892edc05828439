#pragma once
/// \file config.hpp
/// How a communicator runs: servers, schedule, memory kind, timeout.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace fast::exec {

/// Which plan the executor carries out.
enum class scheduler {
    automatic, ///< per call, fast or direct, whichever costs less end to end (planning included)
    fast,      ///< the FAST schedule: balanced, incast-free steps
    direct,    ///< every transfer posted at once, like NCCL's or MPI's alltoallv (the baseline)
};

/// How a receiver paces the messages sent to it, step by step. Either way a sender's bytes for
/// step k move only once the receiver has reached step k (no incast in time, no scratch
/// overwritten while it is read).
enum class flow_control {
    /// UCX's own protocols: large messages go by rendezvous, whose reply from the receiver starts
    /// the data. Over TCP that reply can wait behind the receiver's own outgoing data to the same
    /// peer (a pairwise exchange then runs one direction after the other).
    rendezvous,
    /// Explicit credits: having posted a step's receives, a rank sends each of that step's
    /// senders an 8-byte credit; a sender sends its data once the credit is in, eagerly for host
    /// memory (the executor's UCX context runs with RNDV_THRESH=inf), by UCX's rendezvous for
    /// device memory (eager device data moves in small fragments, each with a synchronous device
    /// copy). One small message per peer and step.
    credits,
};

/// What a rank does while it waits for the network.
enum class progress {
    /// Polls UCX, yielding the processor when nothing happened (lowest latency; the rank keeps
    /// its core busy).
    polling,
    /// Polls UCX, and when nothing happened sleeps on UCX's event file descriptor (armed with
    /// ucp_worker_arm) until an event or the wait's deadline, at most 10 ms at a time: cores
    /// stay free for other work (the kernel's TCP stack, the application), at the price of a
    /// wake-up per event. Device copies are polled.
    blocking,
};

/// How the ranks agree on a call's counts before planning it (<fast/agreement.hpp>): both check,
/// alike on every rank, that the ranks are in the same call, that no rank's arguments were
/// rejected and that every receive count matches its send count.
enum class agreement {
    automatic, ///< whichever of the two fast::plan_agreement predicts faster on the communicator's topology
    gather,    ///< every rank sends every other rank its counts (R^2 numbers to every rank)
    servers,   ///< rows and columns within a server, server summaries across servers (O(S (S + G)))
};

/// Where the user's buffers (and the executor's scratch) live.
enum class memory {
    host, ///< ordinary host memory
    cuda, ///< CUDA device memory (needs a build with -Dcuda=enabled and a CUDA-aware UCX)
    hip,  ///< HIP/ROCm device memory (needs a build with -Dhip=enabled and a ROCm-aware UCX)
};

[[nodiscard]] constexpr std::string_view to_string(scheduler s) noexcept {
    return s == scheduler::automatic ? "automatic" : s == scheduler::fast ? "fast" : "direct";
}

[[nodiscard]] constexpr std::string_view to_string(agreement a) noexcept {
    return a == agreement::automatic ? "automatic" : a == agreement::gather ? "gather" : "servers";
}

[[nodiscard]] constexpr std::string_view to_string(flow_control f) noexcept {
    return f == flow_control::rendezvous ? "rendezvous" : "credits";
}

[[nodiscard]] constexpr std::string_view to_string(progress p) noexcept {
    return p == progress::polling ? "polling" : "blocking";
}

[[nodiscard]] constexpr std::string_view to_string(memory m) noexcept {
    return m == memory::host ? "host" : m == memory::cuda ? "cuda" : "hip";
}

/// The fabric the planner plans for: fast::topology's bandwidths and latencies, with its
/// defaults (the h200 preset). Only the ratios and latencies shape the plan, so give the
/// network's real figures: an emulated cluster with 100 Mbit/s NICs plans differently from a
/// 400G one. Must be positive and finite (latencies non-negative) and equal on every rank.
struct fabric {
    double scale_up_gbps = 450.0; ///< per GPU, GB/s
    double scale_out_gbps = 50.0; ///< per GPU (its NIC), GB/s
    double alpha_up_us = 3.0;     ///< per step
    double alpha_out_us = 10.0;   ///< per step

    friend bool operator==(const fabric&, const fabric&) = default;
};

/// Every rank of a communicator must pass the same configuration (checked at creation). The
/// fabric's figures are its own fields too (config.scale_out_gbps).
struct config : fabric {
    /// Ranks per server (GPUs per server). 0: the ranks that share a host form a server; they must
    /// be contiguous ranks and every host must hold the same number of them. A positive value
    /// groups ranks [s * G, (s + 1) * G) into server s whatever their hosts are (emulation); the
    /// communicator size must be a multiple of it.
    int gpus_per_server = 0;
    exec::scheduler scheduler = exec::scheduler::automatic;
    exec::memory memory = exec::memory::host;
    exec::flow_control flow = exec::flow_control::rendezvous;
    /// The count agreement of every call (FAST_AGREEMENT=automatic|gather|servers overrides it);
    /// what is in force must be equal on every rank.
    exec::agreement agreement = exec::agreement::automatic;
    /// Polling or blocking waits (FAST_PROGRESS=blocking overrides polling); may differ between
    /// ranks.
    exec::progress progress = exec::progress::polling;
    /// Bound of every wait: each step's transfers, the end-of-call flush, cancellation, and (with
    /// <fast/exec/mpi.hpp>) each allgather. Must be positive.
    std::chrono::milliseconds timeout{60'000};
    /// A transfer whose bytes lie in several regions of a non-packed user layout goes as one UCX
    /// message with an iov datatype (true); or the plans split blocks so that every transfer is
    /// one contiguous region on both sides (false). Device memory always splits blocks.
    bool iov = true;
    /// Execution traces: a path prefix. Each rank records every call (its phases, steps and
    /// messages with their times) and writes PREFIX.c<K>.rank<R>.json ("fast-trace/1", which
    /// `fast-plan trace PREFIX.c<K>` draws beside the cost model's timeline) and
    /// PREFIX.c<K>.rank<R>.chrome.json (Perfetto, chrome://tracing) when the communicator is
    /// destroyed; K counts the rank's traced communicators in the process (0 for the first).
    /// Empty: the environment variable FAST_TRACE if set, else no trace (then the recording
    /// costs one branch per hook).
    std::string trace;
    /// Uneven fabrics: each rank's scale-out rate in GB/s (its share of its NICs; 0: its NIC is
    /// down), one per rank, equal on every rank. The planner then spreads each server pair's bytes
    /// over its rails by rate and sends nothing through a NIC that is down (its GPU's bytes go
    /// through its server peers); the direct scheduler cannot run where a rank with bytes to move
    /// across servers has its NIC down. Empty: scale_out_gbps for every rank. FAST_FABRIC's NICs
    /// replace it.
    std::vector<double> nic_gbps;
};

} // namespace fast::exec
