#pragma once
// The plain UCX peak of the device perf harness: two processes, each with a UCP context of its
// own set up as the executor sets up its own (same memory type, UCX's new protocols for CUDA on
// UCX before 1.16), exchange tagged messages of one size both ways at once (each sends
// `messages` of them to the other, as a rank of the alltoallv sends one block to each peer),
// then flush, on the clock; the pattern is written and checked outside it. And which protocol
// UCX chose for a message size, from ucp_ep_print_info.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "perf_arena.hpp"
#include "perf_memory.hpp"

namespace fast_perf {

struct pair_options {
    std::vector<std::uint64_t> sizes; ///< message sizes, one measurement each
    int messages = 7;                 ///< messages each way per exchange
    int runs = 3;                     ///< exchanges per size (warm-up included)
    std::chrono::milliseconds timeout{60000};
};

/// Rank `rank` (0 or 1) of the pair. Values: times[size * runs + run] (seconds), then the wrong
/// bytes per size; rank 0's slot gets ucp_ep_print_info's text (length first, 8 bytes). ""
/// or what failed.
[[nodiscard]] std::string run_pair(perf_arena& arena, int rank, perf_memory& mem, const pair_options& o);

/// Whether this process's UCX supports `memory` ("host" or "cuda"): "" or why not.
[[nodiscard]] std::string ucx_supports(const std::string& memory);

/// One protocol UCX chose: the operation (and memory type) it was chosen for, the size range,
/// the protocol and its transports.
struct protocol_choice {
    std::string operation, range, protocol;
};

/// The choices for tagged sends of `bytes` in ucp_ep_print_info's text: the new protocols' tables
/// ("tagged message by ucp_tag_send* from cuda/GPU0" and the like) where UCX printed any, else
/// (the original protocols) the endpoint's tag_send thresholds, which are host memory's.
[[nodiscard]] std::vector<protocol_choice> protocols_for(const std::string& info, std::uint64_t bytes);

} // namespace fast_perf
