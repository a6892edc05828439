#pragma once
// The gather agreement (fast::agreement_kind::gather): one round in which every rank sends every
// other rank its counts message (a header and its 2R counts). Every rank then holds the whole
// matrix and checks every column itself. O(R^2) memory and work per rank.

#include <vector>

#include "count_agreement.hpp"

namespace fast::exec::detail {

class gather_agreement final : public count_agreement {
public:
    /// Every buffer sized once, so that calls do not allocate. O(R^2) memory.
    gather_agreement(const fast::topology& topo, int rank);

    [[nodiscard]] fast::agreement_kind kind() const noexcept override { return fast::agreement_kind::gather; }
    void start(call_kind kind, std::uint64_t seq, const call_args& a, std::string_view local_error) override;
    [[nodiscard]] int rounds() const noexcept override { return 1; }
    [[nodiscard]] exchange_round round(int n) noexcept override;
    /// Checks the gathered messages: the same call everywhere, no rank's error, receive counts
    /// equal to send counts; then the counts for planning. Errors name the ranks and counts. O(R^2).
    [[nodiscard]] status received(int n) override;

private:
    [[nodiscard]] const unsigned char* message_of(int r) const noexcept {
        return gathered_.data() + static_cast<std::size_t>(r) * stride_;
    }
    [[nodiscard]] status check_same_call() const;
    [[nodiscard]] status check_counts() const;
    [[nodiscard]] status read_counts();
    void read_server(int s, fast::server_counts& out) const;

    fast::topology topo_;
    int rank_ = 0;
    std::size_t stride_ = 0;
    call_kind kind_ = call_kind::alltoallv; ///< this rank's call, for messages
    std::uint64_t seq_ = 0;
    std::vector<unsigned char> mine_, gathered_;
    fast::server_counts server_; ///< workspace: one server's rows and columns at a time
    std::vector<std::int64_t> part_;
};

} // namespace fast::exec::detail
