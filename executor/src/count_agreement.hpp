#pragma once
// The count agreement of every call (<fast/agreement.hpp> defines the protocols and their cost):
// before planning, every rank learns what its plan depends on (the shared counts and its
// server's rows and columns, <fast/counts.hpp>) and all ranks find, alike, whether they are in
// the same call, whether a rank's arguments were rejected and whether every receive count
// matches its send count; an error gives every rank the same status.
//
// An agreement is a fixed sequence of rounds of the control exchange (exchange_round.hpp):
// communicator_impl::agree starts it, exchanges round(n) and hands it to received(n), round by
// round. The kinds (gather_agreement.hpp, servers_agreement.hpp) only build and read messages;
// they never touch UCX, so tests can run every rank's side in one process.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <fast/agreement.hpp>
#include <fast/counts.hpp>
#include <fast/exec/status.hpp>
#include <fast/topology.hpp>

#include "call_args.hpp"
#include "exchange_round.hpp"

namespace fast::exec::detail {

class count_agreement {
public:
    virtual ~count_agreement() = default;

    [[nodiscard]] virtual fast::agreement_kind kind() const noexcept = 0;
    /// Begins call `seq`: this rank's call kind, `local_error` (its own arguments' problem, or
    /// "", then its counts and layout are read from `a`). Allocates nothing.
    virtual void start(call_kind kind, std::uint64_t seq, const call_args& a, std::string_view local_error) = 0;
    [[nodiscard]] virtual int rounds() const noexcept = 0;
    /// Round n's group, message size and buffers (kind and seq of its tags included).
    [[nodiscard]] virtual exchange_round round(int n) noexcept = 0;
    /// Reads round n's messages once they are all in. An error ends the agreement; it is the
    /// same on every rank, except `internal` (a garbled message, seen by this rank alone).
    [[nodiscard]] virtual status received(int n) = 0;

    /// After the last round succeeded: what every rank holds alike, this rank's server's rows
    /// and columns, and whether every rank's blocks lie back to back in both its buffers.
    [[nodiscard]] const fast::shared_counts& shared() const noexcept { return shared_; }
    [[nodiscard]] const fast::server_counts& own() const noexcept { return own_; }
    [[nodiscard]] bool all_contiguous() const noexcept { return all_contiguous_; }

protected:
    fast::shared_counts shared_;
    fast::server_counts own_;
    bool all_contiguous_ = false;
};

/// The agreement of kind `kind` for rank `rank` of `topo`, its buffers sized for every call.
[[nodiscard]] std::unique_ptr<count_agreement> make_count_agreement(fast::agreement_kind kind,
                                                                    const fast::topology& topo, int rank);

/// The bytes rank `rank` receives in all of `a`'s rounds from ranks of other servers (network)
/// and of its own (local): what fast::agreement_of models. Reads round(n), nothing else.
struct received_bytes {
    std::int64_t network = 0;
    std::int64_t local = 0;
};
[[nodiscard]] received_bytes bytes_received(count_agreement& a, const fast::topology& topo, int rank);

// --- What both kinds send and say ---------------------------------------------------------------

/// The header of a rank's counts message (agreement_header_bytes); its R send counts and R
/// receive counts follow it (zeros after a local error).
struct call_header {
    std::uint64_t magic;
    std::uint64_t seq;
    std::int32_t kind;
    std::int32_t error;   // errc of the rank's local error, 0 if none
    std::uint32_t layout; // contiguous_layout() of the sender's displacements
    std::uint32_t reserved;
    char text[240];
};
static_assert(sizeof(call_header) == fast::agreement_header_bytes);

/// Bytes of a counts message for `ranks` ranks (fast::agreement_row_message_bytes).
[[nodiscard]] constexpr std::size_t counts_message_bytes(int ranks) noexcept {
    return sizeof(call_header) + 16 * static_cast<std::size_t>(ranks);
}

/// Writes this rank's counts message for `ranks` ranks into `out` (counts_message_bytes).
void write_counts_message(std::span<unsigned char> out, int ranks, call_kind kind, std::uint64_t seq,
                          const call_args& a, std::string_view local_error) noexcept;

/// Send count j (or receive count j) of a counts message for `ranks` ranks.
[[nodiscard]] std::uint64_t sent_count(const unsigned char* message, int j) noexcept;
[[nodiscard]] std::uint64_t received_count(const unsigned char* message, int ranks, int i) noexcept;

/// A call as a header names it: its sequence number and kind (0 where the magic is wrong).
struct call_id {
    std::uint64_t seq = 0;
    std::int32_t kind = 0;
    friend bool operator==(const call_id&, const call_id&) = default;
};
[[nodiscard]] call_id call_of(const call_header& h) noexcept;

/// "alltoallv: ": what every status of the agreement of a call of kind `kind` starts with.
[[nodiscard]] std::string call_prefix(call_kind kind);

/// Rank `rank` is in call `other`, rank 0 in `first` (whose kind starts the message, so that
/// every rank says the same).
[[nodiscard]] status different_calls(call_id first, int rank, call_id other);

/// Mismatched pairs: how many, and the first in order of receiving rank, then sending rank.
struct mismatches {
    std::uint64_t count = 0;
    std::int32_t receiver = -1;
    std::int32_t sender = -1;
    std::uint64_t expects = 0;
    std::uint64_t sends = 0;

    /// Counts pair (sender -> receiver) if it mismatches; pairs come in that order.
    void check(int receiver_rank, int sender_rank, std::uint64_t expected, std::uint64_t sent) noexcept;
    /// Adds `later`, whose pairs all come after this one's.
    void add(const mismatches& later) noexcept;
};
/// ok without mismatches; else count_mismatch naming the first and how many more.
[[nodiscard]] status mismatch_status(call_kind kind, const mismatches& m);

/// The counts cannot be planned (a sum overflows int64, say): `why`.
[[nodiscard]] status planning_error(std::string_view why);

} // namespace fast::exec::detail
