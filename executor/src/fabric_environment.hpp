#pragma once
// FAST_FABRIC: a fast-fabric/1 file (docs/formats.md) whose figures replace the configuration's
// fabric at a communicator's creation, and whose servers and GPUs the ranks must form.

#include <cstdint>
#include <string>
#include <vector>

#include <fast/exec/config.hpp>

namespace fast::exec::detail {

/// The cluster a fabric file describes; 0 servers: no file.
struct fabric_shape {
    std::int32_t servers = 0;
    std::int32_t gpus_per_server = 0;
    std::vector<double>
        nic_rates; ///< per rank: the rates in force (the file's where they differ, else config.nic_gbps)
};

/// A digest of `rates` that ranks compare (0 for none): every rank must plan on the same rates.
[[nodiscard]] std::uint64_t rates_digest(const std::vector<double>& rates) noexcept;

/// Where FAST_FABRIC is set: the file's figures into `figures` and its servers and GPUs into
/// `shape` (an uneven fabric's ranks' rates too: the planner plans around slow and down NICs).
/// Returns the error (naming the variable, the file and the field), or "". A bad file is an
/// error: nothing runs on a half-read fabric.
[[nodiscard]] std::string fabric_from_environment(exec::fabric& figures, fabric_shape& shape);

} // namespace fast::exec::detail
