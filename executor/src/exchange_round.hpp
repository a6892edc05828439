#pragma once
// One round of the communicator's control exchange (communicator_exchange.cpp): a group of ranks
// each of which sends every other member one message of the same size and receives one from
// each. Groups are arithmetic progressions of ranks (all ranks, a server's ranks, a rail: the
// ranks with the same local index on every server), so describing one allocates nothing.

#include <cstddef>
#include <cstdint>

#include "program.hpp" // control

namespace fast::exec::detail {

/// Ranks first, first + step, ..., first + (count - 1) * step, in that order.
struct rank_group {
    int first = 0;
    int step = 1;
    int count = 0;

    [[nodiscard]] constexpr int rank_at(int index) const noexcept { return first + index * step; }
    /// The position of member `rank` (which must be a member).
    [[nodiscard]] constexpr int index_of(int rank) const noexcept { return (rank - first) / step; }

    [[nodiscard]] static constexpr rank_group all(int ranks) noexcept { return {0, 1, ranks}; }
    /// The G ranks of server `server`.
    [[nodiscard]] static constexpr rank_group server(int server, int gpus_per_server) noexcept {
        return {server * gpus_per_server, 1, gpus_per_server};
    }
    /// The ranks of local index `local` on each of `servers` servers (rank (s, local) at position s).
    [[nodiscard]] static constexpr rank_group rail(int local, int gpus_per_server, int servers) noexcept {
        return {local, gpus_per_server, servers};
    }
};

/// A round: every member sends member k the message at send + k * send_stride (send_stride 0:
/// the same message to all) and receives member k's at recv + k * bytes; its own message to itself
/// is copied to its own position. Messages carry control tags of `kind` and `seq`.
struct exchange_round {
    control kind = control::counts;
    std::uint64_t seq = 0;
    rank_group group;
    std::size_t bytes = 0;
    const unsigned char* send = nullptr;
    std::size_t send_stride = 0;
    unsigned char* recv = nullptr;
    const char* what = "";
    /// A later round of a protocol: a silent member may itself be waiting for a rank that is
    /// gone, whose own timeout names that rank; a timeout here waits a little for its abort.
    bool follows = false;
};

} // namespace fast::exec::detail
