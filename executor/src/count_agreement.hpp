#pragma once
// The count agreement of every call: before planning, every rank learns the traffic matrix
// (every rank's send counts to every rank) and all ranks check, alike, that they are in the same
// call, that no rank's arguments were rejected, and that every receive count matches its send.
// This file encodes and checks the messages; communicator_impl::agree carries them (an
// all-to-all exchange of message_bytes() per rank) and the call path reads only matrix() and
// all_contiguous(), so what is exchanged can change here and in agree() alone.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fast/exec/status.hpp>

#include "call_args.hpp"

namespace fast::exec::detail {

class count_agreement {
public:
    /// For `size` ranks: every buffer sized once, so that calls do not allocate. O(R^2) memory.
    explicit count_agreement(int size = 0);

    /// The bytes each rank sends every other rank: a header and its 2R counts. O(1).
    [[nodiscard]] std::size_t message_bytes() const noexcept { return stride_; }

    /// This rank's message for call `seq`: the call's kind, `local_error` (its own arguments'
    /// problem, or ""), its layout flags and its send and receive counts. O(R).
    [[nodiscard]] std::span<const unsigned char> message(call_kind kind, std::uint64_t seq, const call_args& a,
                                                         std::string_view local_error);

    /// Where the exchange puts every rank's message: rank r's at r * message_bytes().
    [[nodiscard]] std::vector<unsigned char>& gathered() noexcept { return gathered_; }

    /// Checks the gathered messages, the same way on every rank: the same call everywhere, no
    /// rank's error, receive counts equal to send counts. On success matrix() and
    /// all_contiguous() describe the call. Errors name the ranks and counts. O(R^2).
    [[nodiscard]] status check();

    /// R x R, row-major: the bytes rank i sends to rank j (after a successful check()).
    [[nodiscard]] std::span<const std::uint64_t> matrix() const noexcept { return matrix_; }

    /// Every rank's blocks lie back to back in both its buffers (after a successful check()).
    [[nodiscard]] bool all_contiguous() const noexcept { return all_contiguous_; }

private:
    [[nodiscard]] std::string prefix() const;
    [[nodiscard]] status check_same_call() const;
    [[nodiscard]] status read_counts();

    std::size_t size_ = 0;
    std::size_t stride_ = 0;
    call_kind kind_ = call_kind::alltoallv; ///< this rank's call, for messages
    std::vector<unsigned char> mine_, gathered_;
    std::vector<std::uint64_t> matrix_;
    bool all_contiguous_ = false;
};

} // namespace fast::exec::detail
