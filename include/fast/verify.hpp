#pragma once
/// \file verify.hpp
/// The verifier: replays a plan on byte ranges and proves that every byte of every block
/// (i, j) ends at its packed displacement in rank j's `recv`, exactly once, and that nothing is
/// read before it was written. It works on intervals, never on bytes, so a plan that moves
/// gigabytes verifies as fast as one that moves kilobytes. It reports the first violation with
/// its step, transfer, rank and offset.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "layout.hpp"
#include "plan.hpp"
#include "traffic.hpp"

namespace fast {

/// What went wrong. Every kind has a test that builds a plan breaking exactly that rule.
enum class violation_kind {
    malformed,           ///< broken structure: step offsets, rank index, bytes <= 0, offset < 0
    bad_buffer,          ///< reads `recv`, or writes `send`
    out_of_bounds,       ///< a range outside its buffer
    tier_mismatch,       ///< scale-up across servers, or scale-out inside one server
    read_before_written, ///< reads scratch that holds no data at the start of the step
    read_write_conflict, ///< a range written and read at the same rank in one step
    overlapping_writes,  ///< two transfers of one step write overlapping ranges
    wrong_place,         ///< bytes written to `recv` where they do not belong
    delivered_twice,     ///< bytes written to `recv` a second time
    not_delivered,       ///< bytes of a block that never reach their place in `recv`
    incast,              ///< (one-to-one plans) a rank receives from two ranks over scale-out
    fan_out,             ///< (one-to-one plans) a rank sends to two ranks over scale-out
    down_nic,            ///< a scale-out transfer from or to a rank whose NIC is down (plan::nic_gbps 0)
};

[[nodiscard]] constexpr const char* to_string(violation_kind k) noexcept {
    switch (k) {
    case violation_kind::malformed: return "malformed";
    case violation_kind::bad_buffer: return "bad buffer";
    case violation_kind::out_of_bounds: return "out of bounds";
    case violation_kind::tier_mismatch: return "tier mismatch";
    case violation_kind::read_before_written: return "read before written";
    case violation_kind::read_write_conflict: return "read/write conflict";
    case violation_kind::overlapping_writes: return "overlapping writes";
    case violation_kind::wrong_place: return "wrong place";
    case violation_kind::delivered_twice: return "delivered twice";
    case violation_kind::not_delivered: return "not delivered";
    case violation_kind::incast: return "incast";
    case violation_kind::fan_out: return "fan-out";
    case violation_kind::down_nic: return "down NIC";
    }
    return "unknown";
}

struct violation {
    violation_kind kind = violation_kind::malformed;
    std::size_t step = 0;
    std::size_t transfer = 0; ///< index into plan.transfers (or transfers.size() if none)
    int rank = -1;
    std::int64_t offset = 0;
    std::string message; ///< one line naming all of the above
};

struct verification {
    std::optional<violation> error;   ///< the first violation, if any
    bool one_to_one_scale_out = true; ///< measured: no rank has two scale-out peers in a step
    std::int64_t delivered_bytes = 0;

    [[nodiscard]] bool ok() const noexcept { return !error.has_value(); }
    /// "OK" or the violation's message.
    [[nodiscard]] std::string message() const { return error ? error->message : "OK"; }
};

namespace detail {

/// A contiguous run of one block's bytes: block (origin -> final), starting at block_offset.
struct block_run {
    std::int64_t length = 0;
    std::int64_t block_offset = 0;
    int origin = 0;
    int final = 0;
};

struct scratch_segment {
    std::int64_t end = 0;
    std::int64_t block_offset = 0;
    int origin = 0;
    int final = 0;
};

/// A rank's scratch contents: disjoint segments keyed by start offset.
using scratch_map = std::map<std::int64_t, scratch_segment>;

inline void erase_range(scratch_map& m, std::int64_t a, std::int64_t b) {
    auto it = m.lower_bound(a);
    if (it != m.begin()) {
        auto prev = std::prev(it);
        if (prev->second.end > a) {
            scratch_segment tail = prev->second;
            const std::int64_t prev_begin = prev->first;
            prev->second.end = a;
            if (tail.end > b) { // the old segment covers [a, b) entirely: keep its right part
                tail.block_offset += b - prev_begin;
                m.emplace(b, tail);
                return;
            }
        }
    }
    while (it != m.end() && it->first < b) {
        if (it->second.end > b) {
            scratch_segment tail = it->second;
            tail.block_offset += b - it->first;
            m.erase(it);
            m.emplace(b, tail);
            return;
        }
        it = m.erase(it);
    }
}

struct access {
    int rank;
    buffer buf;
    std::int64_t begin;
    std::int64_t end;
    std::size_t transfer;
    bool write;
};

/// A rank's scale-out peer in the step it last had one (one-to-one checks).
struct scale_out_peer {
    std::size_t step = SIZE_MAX;
    int rank = -1;
};

/// The ends of a transfer's source and destination ranges (checked: they fit in int64).
struct transfer_ends {
    std::int64_t src = 0;
    std::int64_t dst = 0;
};

/// The verifier's replay of one plan: what each rank's scratch holds, which recv ranges have
/// been delivered, each rank's scale-out peers, and the pieces of blocks the current step moves.
/// Every check returns the violation it finds, or nothing.
class plan_replay {
public:
    plan_replay(const plan& p, const traffic_matrix& m, verification& out)
        : plan_(p), matrix_(m), topo_(p.topology), out_(out) {}

    /// The topology, the matrix's shape and entries, scratch sizes and step offsets; then sets
    /// up the replay. Call first: the other checks rely on it.
    [[nodiscard]] std::optional<violation> check_structure() {
        try {
            validate(topo_);
        } catch (const invalid_argument& e) {
            return fail(violation_kind::malformed, 0, none(), -1, 0, std::string("topology: ") + e.what());
        }
        ranks_ = topo_.ranks();
        const int r = ranks_;
        if (matrix_.rows() != r || matrix_.cols() != r)
            return fail(violation_kind::malformed, 0, none(), -1, 0,
                        "the matrix is " + std::to_string(matrix_.rows()) + " x " + std::to_string(matrix_.cols()) +
                            " but the plan's topology has " + std::to_string(r) + " ranks");
        if ((matrix_.array() < 0).any())
            return fail(violation_kind::malformed, 0, none(), -1, 0, "the matrix has a negative entry");
        try { // the packed layout's displacements must fit in int64
            validate_traffic(matrix_, topo_);
        } catch (const invalid_argument& e) {
            return fail(violation_kind::malformed, 0, none(), -1, 0, std::string("the matrix: ") + e.what());
        }
        if (plan_.scratch_bytes.size() != static_cast<std::size_t>(r))
            return fail(violation_kind::malformed, 0, none(), -1, 0,
                        "scratch_bytes has " + std::to_string(plan_.scratch_bytes.size()) +
                            " entries, expected one per rank (" + std::to_string(r) + ")");
        for (int k = 0; k < r; ++k)
            if (plan_.scratch_bytes[static_cast<std::size_t>(k)] < 0)
                return fail(violation_kind::malformed, 0, none(), k, 0,
                            "scratch_bytes of rank " + std::to_string(k) + " is negative");
        if (!plan_.nic_gbps.empty() && plan_.nic_gbps.size() != static_cast<std::size_t>(r))
            return fail(violation_kind::malformed, 0, none(), -1, 0,
                        "nic_gbps has " + std::to_string(plan_.nic_gbps.size()) +
                            " entries, expected none or one per rank (" + std::to_string(r) + ")");
        for (int k = 0; k < static_cast<int>(plan_.nic_gbps.size()); ++k)
            if (const double v = plan_.nic_gbps[static_cast<std::size_t>(k)]; !(std::isfinite(v) && v >= 0))
                return fail(violation_kind::malformed, 0, none(), k, 0,
                            "nic_gbps of rank " + std::to_string(k) + " is " + detail::format_number(v) +
                                ", expected a number >= 0");
        const std::vector<std::size_t>& offsets = plan_.step_offsets;
        if (offsets.empty() || offsets.front() != 0 || offsets.back() != plan_.transfers.size() ||
            !std::is_sorted(offsets.begin(), offsets.end()))
            return fail(violation_kind::malformed, 0, none(), -1, 0, "step offsets do not partition the transfer list");
        layout_ = make_packed_layout(matrix_);
        const auto ur = static_cast<std::size_t>(r);
        scratch_.assign(ur, {});
        delivered_.assign(ur, {});
        out_peers_.assign(ur, {});
        in_peers_.assign(ur, {});
        return {};
    }

    /// Step `step`: each transfer's own rules and its reads, against the state at the start of
    /// the step; then the conflicts between its transfers; then its writes.
    [[nodiscard]] std::optional<violation> replay_step(std::size_t step) {
        const std::size_t first = plan_.step_offsets[step];
        const std::size_t last = plan_.step_offsets[step + 1];
        pieces_.clear();
        piece_begin_.clear();
        accesses_.clear();
        for (std::size_t i = first; i < last; ++i) {
            const transfer& t = plan_.transfers[i];
            transfer_ends ends;
            if (auto v = check_transfer(step, i, ends)) return v;
            if (t.tier == tier::scale_out)
                if (auto v = check_scale_out_peers(step, i)) return v;
            piece_begin_.push_back(pieces_.size());
            if (t.src_buffer == buffer::send) {
                read_send(t, ends.src);
            } else if (auto v = read_scratch(step, i, ends.src)) {
                return v;
            }
            accesses_.push_back({t.src, t.src_buffer, t.src_offset, ends.src, i, false});
            accesses_.push_back({t.dst, t.dst_buffer, t.dst_offset, ends.dst, i, true});
        }
        piece_begin_.push_back(pieces_.size());
        if (auto v = check_conflicts(step)) return v;
        for (std::size_t i = first; i < last; ++i)
            if (auto v = write(step, i, piece_begin_[i - first], piece_begin_[i - first + 1])) return v;
        return {};
    }

    /// After the last step: each rank's recv is covered from 0 to its size.
    [[nodiscard]] std::optional<violation> check_coverage() const {
        for (int j = 0; j < ranks_; ++j) {
            const auto& cov = delivered_[static_cast<std::size_t>(j)];
            const std::int64_t size = layout_.recv_size[static_cast<std::size_t>(j)];
            std::int64_t gap = 0;
            if (!cov.empty() && cov.begin()->first == 0) gap = cov.begin()->second;
            if (gap >= size) continue;
            // Name the block whose bytes are missing at `gap`.
            int origin = 0;
            for (int i = 0; i < ranks_; ++i)
                if (matrix_(i, j) > 0 && layout_.recv_displ(i, j) <= gap) origin = i;
            return fail(violation_kind::not_delivered, plan_.steps(), none(), j, gap,
                        "rank " + std::to_string(j) + "'s recv at offset " + std::to_string(gap) + " (block " +
                            std::to_string(origin) + "->" + std::to_string(j) + ", block offset " +
                            std::to_string(gap - layout_.recv_displ(origin, j)) + ") is never written");
        }
        return {};
    }

private:
    /// The transfer index that names no transfer (structure and coverage violations).
    [[nodiscard]] std::size_t none() const noexcept { return plan_.transfers.size(); }

    /// The violation, with one line naming the step, the transfer and `what`.
    [[nodiscard]] violation fail(violation_kind kind, std::size_t step, std::size_t index, int rank,
                                 std::int64_t offset, const std::string& what) const {
        violation v{kind, step, index, rank, offset, {}};
        v.message = std::string(to_string(kind)) + ": step " + std::to_string(step);
        if (index < plan_.transfers.size()) {
            const transfer& t = plan_.transfers[index];
            v.message += ", transfer " + std::to_string(index) + " (rank " + std::to_string(t.src) + " " +
                         std::string(to_string(t.src_buffer)) + "+" + std::to_string(t.src_offset) + " -> rank " +
                         std::to_string(t.dst) + " " + std::string(to_string(t.dst_buffer)) + "+" +
                         std::to_string(t.dst_offset) + ", " + std::to_string(t.bytes) + " bytes, " +
                         std::string(to_string(t.tier)) + ")";
        }
        v.message += ": " + what;
        return v;
    }

    [[nodiscard]] std::int64_t buffer_size(int rank, buffer b) const {
        const auto k = static_cast<std::size_t>(rank);
        return b == buffer::send   ? layout_.send_size[k]
               : b == buffer::recv ? layout_.recv_size[k]
                                   : plan_.scratch_bytes[k];
    }

    /// Transfer `i` on its own: ranks, bytes, offsets, buffers, tier and bounds. Sets `ends`.
    [[nodiscard]] std::optional<violation> check_transfer(std::size_t step, std::size_t i, transfer_ends& ends) const {
        const transfer& t = plan_.transfers[i];
        const int r = ranks_;
        if (t.src < 0 || t.src >= r || t.dst < 0 || t.dst >= r)
            return fail(violation_kind::malformed, step, i, -1, 0, "rank index out of range");
        if (t.bytes <= 0)
            return fail(violation_kind::malformed, step, i, t.src, 0, "a transfer must move at least one byte");
        if (t.src_offset < 0 || t.dst_offset < 0)
            return fail(violation_kind::malformed, step, i, t.src, 0, "negative offset");
        if (t.src_buffer == buffer::recv)
            return fail(violation_kind::bad_buffer, step, i, t.src, t.src_offset,
                        "transfers read only send or scratch");
        if (t.dst_buffer == buffer::send)
            return fail(violation_kind::bad_buffer, step, i, t.dst, t.dst_offset, "the send buffer is read-only");
        const bool same = topo_.same_server(t.src, t.dst);
        if (t.tier == tier::scale_up && !same)
            return fail(violation_kind::tier_mismatch, step, i, t.src, 0,
                        "scale-up transfer between servers " + std::to_string(topo_.server_of(t.src)) + " and " +
                            std::to_string(topo_.server_of(t.dst)));
        if (t.tier == tier::scale_out && same)
            return fail(violation_kind::tier_mismatch, step, i, t.src, 0,
                        "scale-out transfer inside server " + std::to_string(topo_.server_of(t.src)));
        if (t.tier == tier::scale_out)
            for (const int end : {t.src, t.dst})
                if (plan_.scale_out_gbps(end) == 0)
                    return fail(violation_kind::down_nic, step, i, end, 0,
                                "scale-out transfer " + std::to_string(t.src) + " -> " + std::to_string(t.dst) +
                                    " through rank " + std::to_string(end) + "'s NIC, which is down");
        if (__builtin_add_overflow(t.src_offset, t.bytes, &ends.src) || ends.src > buffer_size(t.src, t.src_buffer))
            return fail(violation_kind::out_of_bounds, step, i, t.src, t.src_offset,
                        "reads past the end of rank " + std::to_string(t.src) + "'s " +
                            std::string(to_string(t.src_buffer)) + " (" +
                            std::to_string(buffer_size(t.src, t.src_buffer)) + " bytes)");
        if (__builtin_add_overflow(t.dst_offset, t.bytes, &ends.dst) || ends.dst > buffer_size(t.dst, t.dst_buffer))
            return fail(violation_kind::out_of_bounds, step, i, t.dst, t.dst_offset,
                        "writes past the end of rank " + std::to_string(t.dst) + "'s " +
                            std::string(to_string(t.dst_buffer)) + " (" +
                            std::to_string(buffer_size(t.dst, t.dst_buffer)) + " bytes)");
        return {};
    }

    /// Scale-out transfer `i`: a second peer of its sender or receiver in this step makes the
    /// plan not one-to-one, a violation if the plan claims to be.
    [[nodiscard]] std::optional<violation> check_scale_out_peers(std::size_t step, std::size_t i) {
        const transfer& t = plan_.transfers[i];
        scale_out_peer& sender = out_peers_[static_cast<std::size_t>(t.src)];
        scale_out_peer& receiver = in_peers_[static_cast<std::size_t>(t.dst)];
        // `rank` had `earlier` as its peer in this step and now has `peer`.
        auto second_peer = [&](const scale_out_peer& earlier, int rank, int peer, violation_kind kind,
                               const char* does) -> std::optional<violation> {
            if (earlier.step != step || earlier.rank == peer) return {};
            out_.one_to_one_scale_out = false;
            if (!plan_.one_to_one_scale_out) return {};
            return fail(kind, step, i, rank, 0,
                        "rank " + std::to_string(rank) + does + std::to_string(earlier.rank) + " and " +
                            std::to_string(peer) + " in one step");
        };
        if (auto v = second_peer(sender, t.src, t.dst, violation_kind::fan_out, " sends over scale-out to ranks "))
            return v;
        if (auto v =
                second_peer(receiver, t.dst, t.src, violation_kind::incast, " receives over scale-out from ranks "))
            return v;
        sender = {step, t.dst};
        receiver = {step, t.src};
        return {};
    }

    /// Reads [t.src_offset, src_end) of the sender's send buffer as pieces of its blocks.
    void read_send(const transfer& t, std::int64_t src_end) {
        const std::int64_t* row =
            layout_.send_displs.data() + static_cast<std::size_t>(t.src) * static_cast<std::size_t>(ranks_);
        std::int64_t pos = t.src_offset;
        // The block holding `pos`: the last destination j whose displacement is <= pos and
        // whose block is non-empty.
        int j = static_cast<int>(std::upper_bound(row, row + ranks_, pos) - row) - 1;
        while (pos < src_end) {
            while (matrix_(t.src, j) == 0 || row[j] + matrix_(t.src, j) <= pos) ++j;
            const std::int64_t block_end = row[j] + matrix_(t.src, j);
            const std::int64_t take = std::min(block_end, src_end) - pos;
            pieces_.push_back({take, pos - row[j], t.src, j});
            pos += take;
        }
    }

    /// Reads [t.src_offset, src_end) of the sender's scratch as the pieces it holds; every byte
    /// must hold data at the start of the step.
    [[nodiscard]] std::optional<violation> read_scratch(std::size_t step, std::size_t i, std::int64_t src_end) {
        const transfer& t = plan_.transfers[i];
        const scratch_map& held = scratch_[static_cast<std::size_t>(t.src)];
        std::int64_t pos = t.src_offset;
        auto it = held.upper_bound(pos);
        if (it != held.begin()) --it;
        while (pos < src_end) {
            if (it == held.end() || it->first > pos || it->second.end <= pos)
                return fail(violation_kind::read_before_written, step, i, t.src, pos,
                            "rank " + std::to_string(t.src) + "'s scratch at offset " + std::to_string(pos) +
                                " holds no data at the start of this step");
            const std::int64_t take = std::min(it->second.end, src_end) - pos;
            pieces_.push_back({take, it->second.block_offset + (pos - it->first), it->second.origin, it->second.final});
            pos += take;
            ++it;
        }
        return {};
    }

    /// No range is written twice, or written and read, at one rank in this step.
    [[nodiscard]] std::optional<violation> check_conflicts(std::size_t step) {
        std::sort(accesses_.begin(), accesses_.end(), [](const access& a, const access& b) {
            if (a.rank != b.rank) return a.rank < b.rank;
            if (a.buf != b.buf) return a.buf < b.buf;
            return a.begin < b.begin;
        });
        for (std::size_t k = 0; k < accesses_.size();) {
            std::int64_t write_end = INT64_MIN;
            std::int64_t read_end = INT64_MIN;
            std::size_t writer = 0;
            std::size_t reader = 0;
            std::size_t e = k;
            for (;
                 e < accesses_.size() && accesses_[e].rank == accesses_[k].rank && accesses_[e].buf == accesses_[k].buf;
                 ++e) {
                const access& a = accesses_[e];
                auto clash = [&](violation_kind kind, const char* how, std::size_t other) {
                    return fail(kind, step, a.transfer, a.rank, a.begin,
                                "rank " + std::to_string(a.rank) + "'s " + std::string(to_string(a.buf)) +
                                    " at offset " + std::to_string(a.begin) + " is also " + how + " by transfer " +
                                    std::to_string(other) + " in this step");
                };
                if (a.write && a.begin < write_end) return clash(violation_kind::overlapping_writes, "written", writer);
                if (a.write && a.begin < read_end) return clash(violation_kind::read_write_conflict, "read", reader);
                if (!a.write && a.begin < write_end)
                    return clash(violation_kind::read_write_conflict, "written", writer);
                if (a.write && a.end > write_end) {
                    write_end = a.end;
                    writer = a.transfer;
                }
                if (!a.write && a.end > read_end) {
                    read_end = a.end;
                    reader = a.transfer;
                }
            }
            k = e;
        }
        return {};
    }

    /// Writes the pieces [begin, end) that transfer `i` read, in order, from its destination
    /// offset on: into recv (delivery) or into scratch.
    [[nodiscard]] std::optional<violation> write(std::size_t step, std::size_t i, std::size_t begin, std::size_t end) {
        const transfer& t = plan_.transfers[i];
        std::int64_t pos = t.dst_offset;
        for (std::size_t q = begin; q < end; ++q) {
            const block_run& piece = pieces_[q];
            if (t.dst_buffer == buffer::recv) {
                if (auto v = deliver(step, i, piece, pos)) return v;
            } else {
                scratch_map& held = scratch_[static_cast<std::size_t>(t.dst)];
                erase_range(held, pos, pos + piece.length);
                held.emplace(pos, scratch_segment{pos + piece.length, piece.block_offset, piece.origin, piece.final});
            }
            pos += piece.length;
        }
        return {};
    }

    /// `piece` written to the receiver's recv at `pos`: it must be its place, and the first time
    /// those bytes arrive. Delivered ranges are kept merged.
    [[nodiscard]] std::optional<violation> deliver(std::size_t step, std::size_t i, const block_run& piece,
                                                   std::int64_t pos) {
        const transfer& t = plan_.transfers[i];
        const std::int64_t want = layout_.recv_displ(piece.origin, piece.final) + piece.block_offset;
        const std::string block = std::to_string(piece.origin) + "->" + std::to_string(piece.final);
        if (piece.final != t.dst || want != pos)
            return fail(violation_kind::wrong_place, step, i, t.dst, pos,
                        "writes bytes of block " + block + " (block offset " + std::to_string(piece.block_offset) +
                            ") to rank " + std::to_string(t.dst) + "'s recv at offset " + std::to_string(pos) +
                            "; they belong to rank " + std::to_string(piece.final) + "'s recv at offset " +
                            std::to_string(want));
        auto& cov = delivered_[static_cast<std::size_t>(t.dst)];
        const std::int64_t end = pos + piece.length;
        auto it = cov.upper_bound(pos);
        if ((it != cov.end() && it->first < end) || (it != cov.begin() && std::prev(it)->second > pos))
            return fail(violation_kind::delivered_twice, step, i, t.dst, pos,
                        "bytes of block " + block + " at block offset " + std::to_string(piece.block_offset) +
                            " were already delivered");
        std::int64_t begin = pos;
        std::int64_t stop = end;
        if (it != cov.begin() && std::prev(it)->second == pos) {
            begin = std::prev(it)->first;
            cov.erase(std::prev(it));
        }
        if (it != cov.end() && it->first == end) {
            stop = it->second;
            cov.erase(it);
        }
        cov.emplace(begin, stop);
        out_.delivered_bytes += piece.length;
        return {};
    }

    const plan& plan_;
    const traffic_matrix& matrix_;
    const topology& topo_;
    verification& out_;
    int ranks_ = 0;
    alltoallv_layout layout_;
    std::vector<scratch_map> scratch_;                            ///< per rank
    std::vector<std::map<std::int64_t, std::int64_t>> delivered_; ///< per rank: recv ranges, merged
    std::vector<scale_out_peer> out_peers_;                       ///< per rank, as a sender
    std::vector<scale_out_peer> in_peers_;                        ///< per rank, as a receiver
    std::vector<block_run> pieces_;                               ///< this step: what each transfer read, in order
    std::vector<std::size_t> piece_begin_;                        ///< this step: transfer k's pieces start here
    std::vector<access> accesses_;                                ///< this step: every range read or written
};

} // namespace detail

/// Replays `p` against the traffic it claims to carry and returns the first violation, if any:
/// the structure, then step by step each transfer's rules and reads, the conflicts within the
/// step and its writes, then the coverage of every recv.
/// O((T + P) log T) for T transfers and P pieces of blocks moved, independent of byte counts.
[[nodiscard]] inline verification verify(const plan& p, const traffic_matrix& m) {
    verification out;
    detail::plan_replay replay(p, m, out);
    std::optional<violation> error = replay.check_structure();
    for (std::size_t step = 0; !error && step < p.steps(); ++step) error = replay.replay_step(step);
    if (!error) error = replay.check_coverage();
    out.error = std::move(error);
    return out;
}

} // namespace fast
