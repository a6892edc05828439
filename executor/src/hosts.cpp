#include "hosts.hpp"

#include <unistd.h>

#include <fstream>
#include <unordered_map>

namespace fast::exec::detail {

grouping group_ranks(const std::vector<std::string>& host_of_rank, int requested) {
    grouping g;
    const int size = static_cast<int>(host_of_rank.size());
    if (size < 1) {
        g.error = "no ranks";
        return g;
    }
    if (requested < 0) {
        g.error = "gpus_per_server must be non-negative, got " + std::to_string(requested);
        return g;
    }
    if (requested > 0) {
        if (size % requested != 0) {
            g.error = "gpus_per_server = " + std::to_string(requested) + " does not divide the communicator size " +
                      std::to_string(size);
            return g;
        }
        g.gpus_per_server = requested;
        g.servers = size / requested;
        return g;
    }
    // One server per host, in rank order; a host's ranks must form one contiguous run.
    std::unordered_map<std::string, int> first_rank; // host -> its first rank
    int run_start = 0;
    int run_size = -1;
    for (int k = 0; k <= size; ++k) {
        if (k < size && k > run_start &&
            host_of_rank[static_cast<std::size_t>(k)] == host_of_rank[static_cast<std::size_t>(run_start)])
            continue;
        if (k > 0) { // the run [run_start, k) ended
            const int n = k - run_start;
            if (run_size < 0) {
                run_size = n;
            } else if (n != run_size) {
                g.error = "hosts hold different numbers of ranks (" + host_of_rank[0] + ": " +
                          std::to_string(run_size) + ", " + host_of_rank[static_cast<std::size_t>(run_start)] + ": " +
                          std::to_string(n) + "); the planner needs equal servers: set config.gpus_per_server";
                return g;
            }
        }
        if (k == size) break;
        const std::string& h = host_of_rank[static_cast<std::size_t>(k)];
        if (auto it = first_rank.find(h); it != first_rank.end()) {
            g.error = "the ranks of host " + h + " are not contiguous (rank " + std::to_string(it->second) +
                      " and rank " + std::to_string(k) + " are on it, rank " + std::to_string(k - 1) + " is on " +
                      host_of_rank[static_cast<std::size_t>(k - 1)] +
                      "); place ranks host by host (e.g. mpirun --map-by slot) or set "
                      "config.gpus_per_server";
            return g;
        }
        first_rank.emplace(h, k);
        run_start = k;
    }
    g.gpus_per_server = run_size;
    g.servers = size / run_size;
    return g;
}

std::string host_key() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
    std::string key = name[0] ? name : "unknown-host";
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (boot && std::getline(boot, id) && !id.empty()) key += "/" + id;
    return key;
}

} // namespace fast::exec::detail
