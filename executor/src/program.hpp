#pragma once
// A rank's program (fast::rank_program), compiled against the user's displacements: per step,
// the receives, sends and self-copies this rank performs, each as a list of segments (buffer +
// offset + length). Segments are relative to the buffers' bases, so a program survives a new scratch
// allocation and new buffer addresses; the executor resolves them to pointers when it starts.
// No UCX types here, so that tests can run programs in one process.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <fast/rank_program.hpp>

namespace fast::exec::detail {

enum class region : std::uint8_t { send, recv, scratch };

struct segment {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    region where = region::send;
};

enum class op_kind : std::uint8_t { recv, send, copy };

/// One message (send or receive) or one self-copy.
struct op {
    std::uint64_t tag = 0; ///< the data tag's low bits: sender and pair index (make_tag adds the call)
    std::uint64_t bytes = 0;
    std::uint32_t first = 0; ///< segments [first, first + count): the message, or a copy's source
    std::uint32_t count = 0;
    std::uint32_t dst_first = 0; ///< a copy's destination segments
    std::uint32_t dst_count = 0;
    std::int32_t peer = -1; ///< the other rank (this rank for copies)
    std::uint32_t step = 0; ///< the schedule's step (numbered alike on every rank)
    op_kind kind = op_kind::copy;
    bool scale_out = false; ///< the transfer's tier (for traces)
};

/// Tag layout (64 bits). Data (bit 63 clear): bits 55..62 the call's sequence number, bits
/// 32..54 the sending rank, bits 0..31 the transfer's pair index (the how-many-th transfer from
/// that sender to this receiver in the call: both ends number them alike, rank_program.hpp).
/// Control (bit 63 set): bits 56..62 the kind (handshake, agreement, abort, credit), bits 32..55
/// the sequence number, bits 0..31 the sender.
inline constexpr int tag_sender_shift = 32;
inline constexpr int tag_seq_shift = 55;
inline constexpr std::uint64_t tag_seq_mask = (std::uint64_t{1} << 8) - 1;
inline constexpr std::uint64_t tag_sender_mask = (std::uint64_t{1} << 23) - 1;
inline constexpr std::uint64_t tag_control = std::uint64_t{1} << 63;
/// Ranks a data tag can name.
inline constexpr int max_ranks = static_cast<int>(tag_sender_mask) + 1;

/// counts: the gather agreement, and the servers agreement's rows and columns within a server;
/// parts, findings, verdicts: the servers agreement's later rounds (servers_agreement.hpp).
enum class control : std::uint64_t {
    hello = 1,
    ready = 2,
    counts = 3,
    abort = 5,
    credit = 6,
    parts = 7,
    findings = 8,
    verdicts = 9,
    closing = 10
};

/// The low bits of a data tag: transfer `pair_index` from rank `sender`.
[[nodiscard]] constexpr std::uint64_t data_tag(int sender, std::uint32_t pair_index) noexcept {
    return (static_cast<std::uint64_t>(sender) & tag_sender_mask) << tag_sender_shift | pair_index;
}

[[nodiscard]] constexpr std::uint64_t make_tag(std::uint64_t seq, std::uint64_t low) noexcept {
    return ((seq & tag_seq_mask) << tag_seq_shift) | low;
}

// The fields of a data tag (make_tag), for messages that name it.
[[nodiscard]] constexpr std::uint64_t tag_seq(std::uint64_t tag) noexcept {
    return (tag >> tag_seq_shift) & tag_seq_mask;
}
[[nodiscard]] constexpr int tag_sender(std::uint64_t tag) noexcept {
    return static_cast<int>((tag >> tag_sender_shift) & tag_sender_mask);
}
[[nodiscard]] constexpr std::uint32_t tag_pair_index(std::uint64_t tag) noexcept {
    return static_cast<std::uint32_t>(tag);
}

inline constexpr int tag_control_kind_shift = 56;
inline constexpr int tag_control_seq_shift = 32;
inline constexpr std::uint64_t tag_control_seq_mask = (std::uint64_t{1} << 24) - 1;

[[nodiscard]] constexpr std::uint64_t make_control_tag(control kind, std::uint64_t seq, int sender) noexcept {
    return tag_control | (static_cast<std::uint64_t>(kind) << tag_control_kind_shift) |
           ((seq & tag_control_seq_mask) << tag_control_seq_shift) | static_cast<std::uint32_t>(sender);
}

/// A control message on its way through a stand-in (control_routes.hpp): bit 62 set in the kind,
/// bits 46..55 the sequence number's low bits, bits 23..45 its sender, bits 0..22 its receiver.
/// The last hop delivers it with the plain control tag (make_control_tag) of its sender.
inline constexpr std::uint64_t tag_relay = std::uint64_t{1} << 62;
inline constexpr int tag_relay_seq_shift = 46;
inline constexpr std::uint64_t tag_relay_seq_mask = (std::uint64_t{1} << 10) - 1;
static_assert(static_cast<std::uint64_t>(control::closing) < (tag_relay >> tag_control_kind_shift));

[[nodiscard]] constexpr std::uint64_t make_relay_tag(control kind, std::uint64_t seq, int sender, int receiver) noexcept {
    return tag_control | tag_relay | (static_cast<std::uint64_t>(kind) << tag_control_kind_shift) |
           ((seq & tag_relay_seq_mask) << tag_relay_seq_shift) |
           (static_cast<std::uint64_t>(sender) & tag_sender_mask) << 23 |
           (static_cast<std::uint64_t>(receiver) & tag_sender_mask);
}

/// Ops of this rank, step by step (only the steps in which it takes part).
struct program {
    std::vector<op> ops;
    std::vector<segment> segments;
    std::vector<std::size_t> step_offsets{0}; ///< step k: ops [step_offsets[k], step_offsets[k+1])
    std::vector<int> peers;                   ///< distinct ranks this rank exchanges messages with
    std::uint64_t scratch_bytes = 0;          ///< this rank's scratch need
    std::uint64_t plan_steps = 0;             ///< steps of the schedule

    [[nodiscard]] std::size_t steps() const noexcept { return step_offsets.size() - 1; }
    void clear() {
        ops.clear();
        segments.clear();
        step_offsets.assign(1, 0);
        peers.clear();
        scratch_bytes = 0;
        plan_steps = 0;
    }
};

/// A rank's layout flags: its send (receive) blocks lie back to back in rank order, as in the
/// packed layout, so any packed range of that buffer is one region of the user's buffer.
inline constexpr std::uint8_t send_contiguous = 1;
inline constexpr std::uint8_t recv_contiguous = 2;

/// The flags of one rank's counts and displacements (blocks without bytes do not count). O(R).
[[nodiscard]] std::uint8_t contiguous_layout(std::span<const std::size_t> sendcounts,
                                             std::span<const std::size_t> sdispls,
                                             std::span<const std::size_t> recvcounts,
                                             std::span<const std::size_t> rdispls) noexcept;

/// One rank's send or receive buffer: the packed start of each rank's block (the exclusive
/// prefix sums of its counts), the packed total, and where the user put each block.
struct buffer_layout {
    std::vector<std::int64_t> starts;
    std::int64_t total = 0;
    std::span<const std::size_t> displs;

    /// From the rank's counts (R entries) and the user's displacements. O(R).
    void assign(std::span<const std::size_t> counts, std::span<const std::size_t> user_displs);
};

/// Compiles the rank program `p` against this rank's buffer layouts. `single_segments`: every
/// message must be one contiguous range in the user's buffers (the plan was made with
/// split_blocks; else a message may have several segments, sent as an iov). Returns "" on
/// success, else what is wrong (a program that does not fit the layout). O(ops * log R).
[[nodiscard]] std::string compile_program(const fast::rank_program& p, const buffer_layout& send,
                                          const buffer_layout& recv, bool single_segments, program& out);

} // namespace fast::exec::detail
