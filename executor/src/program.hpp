#pragma once
// A rank's part of a plan, compiled against the user's displacements: per step, the receives,
// sends and self-copies this rank performs, each as a list of segments (buffer + offset +
// length). Segments are relative to the buffers' bases, so a program survives a new scratch
// allocation and new buffer addresses; the executor resolves them to pointers when it starts.
// No UCX types here, so that tests can run programs in one process.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <fast/layout.hpp>
#include <fast/plan.hpp>

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
    std::uint64_t tag = 0;   ///< low 48 bits of the UCX tag: transfer index << 16 | piece
    std::uint64_t bytes = 0;
    std::uint32_t first = 0; ///< segments [first, first + count): the message, or a copy's source
    std::uint32_t count = 0;
    std::uint32_t dst_first = 0; ///< a copy's destination segments
    std::uint32_t dst_count = 0;
    std::int32_t peer = -1;      ///< the other rank (this rank for copies)
    std::uint32_t step = 0;      ///< the plan's step (for messages)
    op_kind kind = op_kind::copy;
};

/// Tag layout (64 bits). Data (bit 63 clear): bits 48..62 the call's sequence number, bits
/// 16..47 the transfer's index in the plan, bits 0..15 the piece. Control (bit 63 set): bits
/// 56..62 the kind (handshake, counts, scratch report, abort, credit), bits 32..55 the sequence number,
/// bits 0..31 the sender.
inline constexpr int tag_piece_bits = 16;
inline constexpr int tag_transfer_bits = 32;
inline constexpr int tag_seq_shift = tag_piece_bits + tag_transfer_bits; // 48
inline constexpr std::uint64_t tag_seq_mask = (std::uint64_t{1} << 15) - 1;
inline constexpr std::uint64_t tag_control = std::uint64_t{1} << 63;

enum class control : std::uint64_t { hello = 1, ready = 2, counts = 3, scratch = 4, abort = 5, credit = 6 };

[[nodiscard]] constexpr std::uint64_t make_tag(std::uint64_t seq, std::uint64_t low) noexcept {
    return ((seq & tag_seq_mask) << tag_seq_shift) | low;
}

// The fields of a data tag (make_tag), for messages that name it.
[[nodiscard]] constexpr std::uint64_t tag_seq(std::uint64_t tag) noexcept { return (tag >> tag_seq_shift) & tag_seq_mask; }
[[nodiscard]] constexpr std::uint64_t tag_transfer(std::uint64_t tag) noexcept {
    return (tag >> tag_piece_bits) & ((std::uint64_t{1} << tag_transfer_bits) - 1);
}
[[nodiscard]] constexpr std::uint64_t tag_piece(std::uint64_t tag) noexcept {
    return tag & ((std::uint64_t{1} << tag_piece_bits) - 1);
}

[[nodiscard]] constexpr std::uint64_t make_control_tag(control kind, std::uint64_t seq, int sender) noexcept {
    return tag_control | (static_cast<std::uint64_t>(kind) << 56) | ((seq & 0xffffff) << 32) |
           static_cast<std::uint32_t>(sender);
}

/// Ops of this rank, step by step (only the steps in which it takes part).
struct program {
    std::vector<op> ops;
    std::vector<segment> segments;
    std::vector<std::size_t> step_offsets{0}; ///< step k: ops [step_offsets[k], step_offsets[k+1])
    std::vector<int> peers;                   ///< distinct ranks this rank exchanges messages with
    std::uint64_t scratch_bytes = 0;          ///< this rank's scratch need
    std::uint64_t plan_steps = 0;             ///< steps of the whole plan

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

/// Compiles rank `me`'s part of `p` (whose per-rank view is `v` and whose packed layout is `l`)
/// against this rank's displacements. `pieces`: split every message at the block boundaries of
/// both ends so that each message is one contiguous region on both sides (else a message may
/// have several segments, sent as an iov); the boundaries of a side whose rank has that buffer
/// contiguous (`contiguous[rank]`, the same on every rank) are not cut, so on packed layouts a
/// message stays whole. Returns "" on success, else what is wrong (a plan that does not fit the
/// layout, or too many transfers or pieces for the tag). O(ops * log R + pieces).
[[nodiscard]] std::string compile_program(const fast::plan& p, const fast::rank_view& v,
                                          const fast::alltoallv_layout& l, int me,
                                          std::span<const std::size_t> sdispls,
                                          std::span<const std::size_t> rdispls, bool pieces,
                                          std::span<const std::uint8_t> contiguous, program& out);

} // namespace fast::exec::detail
