#pragma once
// The servers agreement (fast::agreement_kind::servers), four rounds, each waiting for the last:
//  1. within each server every rank sends its G - 1 peers its counts message (as gather's);
//     each then holds its server's rows and columns, and sums them into its server's part of the
//     shared counts (every rank of the server computes the same part);
//  2. rank (s, k) sends rank (d, k) of every other server d a summary of its server (call,
//     first local error and their number, layout, overflow), its server's part, and the G
//     counts of tile (s -> d) that rank (d, k) receives: every rank now holds the shared counts,
//     every server's summary, and what every rank sends it, so it checks its own column;
//  3. within each server every rank sends its peers its findings (mismatches and the first);
//  4. rank (s, k) sends rank (d, k) of every other server its server's findings.
// After round 2 every rank knows, alike, whether the ranks are in the same call and whether any
// rank's arguments were rejected (the agreement ends there if so); after round 4 how many pairs
// mismatch and the first in order of receiver, then sender: the same status on every rank.
// O(G R + S (S + G)) memory and numbers per rank; no R x R matrix anywhere.

#include <vector>

#include "count_agreement.hpp"

namespace fast::exec::detail {

class servers_agreement final : public count_agreement {
public:
    /// Every buffer sized once, so that calls do not allocate.
    servers_agreement(const fast::topology& topo, int rank);

    [[nodiscard]] fast::agreement_kind kind() const noexcept override { return fast::agreement_kind::servers; }
    void start(call_kind kind, std::uint64_t seq, const call_args& a, std::string_view local_error) override;
    [[nodiscard]] int rounds() const noexcept override { return 4; }
    [[nodiscard]] exchange_round round(int n) noexcept override;
    [[nodiscard]] status received(int n) override;

private:
    void read_rows();
    void write_parts(const void* summary);
    [[nodiscard]] status read_parts();
    [[nodiscard]] status read_summaries();
    void check_column();
    [[nodiscard]] status read_findings();
    [[nodiscard]] status read_verdicts();
    [[nodiscard]] status add_findings(const std::vector<unsigned char>& in, const rank_group& from,
                                      mismatches& out) const;
    [[nodiscard]] status garbled(int peer) const;

    fast::topology topo_;
    int rank_ = 0;
    int server_ = 0;
    int local_ = 0;
    std::size_t row_bytes_ = 0;  ///< round 1's messages
    std::size_t part_bytes_ = 0; ///< round 2's messages
    call_kind kind_ = call_kind::alltoallv;
    std::uint64_t seq_ = 0;
    int overflow_server_ = -1;                         ///< the first server whose part overflowed (round 2 on)
    std::vector<unsigned char> mine_, rows_in_;        ///< round 1
    std::vector<unsigned char> parts_out_, parts_in_;  ///< round 2: one per server
    std::vector<unsigned char> finding_, findings_in_; ///< round 3
    std::vector<unsigned char> verdict_, verdicts_in_; ///< round 4
    std::vector<std::int64_t> part_;                   ///< a server's part
};

} // namespace fast::exec::detail
