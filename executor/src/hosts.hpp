#pragma once
// Grouping ranks into servers, and the identity of this rank's host.

#include <string>
#include <vector>

namespace fast::exec::detail {

struct grouping {
    int servers = 0;
    int gpus_per_server = 0;
    std::string error; ///< empty on success
};

/// `requested` > 0: ranks [s * requested, (s + 1) * requested) form server s (the size must be a
/// multiple). 0: ranks with equal host keys form a server; each host's ranks must be contiguous
/// and all hosts must hold the same number of ranks. O(R).
[[nodiscard]] grouping group_ranks(const std::vector<std::string>& host_of_rank, int requested);

/// This host's identity: the host name and the kernel's boot id (UCX decides shared-memory
/// reachability by the boot id, so namespaces with their own boot id count as separate hosts).
[[nodiscard]] std::string host_key();

} // namespace fast::exec::detail
