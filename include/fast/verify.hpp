#pragma once
/// \file verify.hpp
/// The verifier: replays a plan on byte ranges and proves that every byte of every block
/// (i, j) ends at its packed displacement in rank j's `recv`, exactly once, and that nothing is
/// read before it was written. It works on intervals, never on bytes, so a plan that moves
/// gigabytes verifies as fast as one that moves kilobytes. It reports the first violation with
/// its step, transfer, rank and offset.

#include <algorithm>
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
    std::optional<violation> error; ///< the first violation, if any
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

} // namespace detail

/// Replays `p` against the traffic it claims to carry and returns the first violation, if any.
/// O((T + P) log T) for T transfers and P pieces of blocks moved, independent of byte counts.
[[nodiscard]] inline verification verify(const plan& p, const traffic_matrix& m) {
    verification out;
    const topology& topo = p.topology;
    auto fail = [&](violation_kind kind, std::size_t step, std::size_t index, int rank,
                    std::int64_t offset, const std::string& what) {
        violation v{kind, step, index, rank, offset, {}};
        v.message = std::string(to_string(kind)) + ": step " + std::to_string(step);
        if (index < p.transfers.size()) {
            const transfer& t = p.transfers[index];
            v.message += ", transfer " + std::to_string(index) + " (rank " + std::to_string(t.src) +
                         " " + std::string(to_string(t.src_buffer)) + "+" +
                         std::to_string(t.src_offset) + " -> rank " + std::to_string(t.dst) + " " +
                         std::string(to_string(t.dst_buffer)) + "+" +
                         std::to_string(t.dst_offset) + ", " + std::to_string(t.bytes) +
                         " bytes, " + std::string(to_string(t.tier)) + ")";
        }
        v.message += ": " + what;
        out.error = std::move(v);
        return out;
    };

    // Structure.
    try {
        validate(topo);
    } catch (const invalid_argument& e) {
        return fail(violation_kind::malformed, 0, p.transfers.size(), -1, 0,
                    std::string("topology: ") + e.what());
    }
    const int r = topo.ranks();
    if (m.rows() != r || m.cols() != r)
        return fail(violation_kind::malformed, 0, p.transfers.size(), -1, 0,
                    "the matrix is " + std::to_string(m.rows()) + " x " + std::to_string(m.cols()) +
                        " but the plan's topology has " + std::to_string(r) + " ranks");
    if ((m.array() < 0).any())
        return fail(violation_kind::malformed, 0, p.transfers.size(), -1, 0,
                    "the matrix has a negative entry");
    if (p.scratch_bytes.size() != static_cast<std::size_t>(r))
        return fail(violation_kind::malformed, 0, p.transfers.size(), -1, 0,
                    "scratch_bytes has " + std::to_string(p.scratch_bytes.size()) +
                        " entries, expected one per rank (" + std::to_string(r) + ")");
    for (int k = 0; k < r; ++k)
        if (p.scratch_bytes[static_cast<std::size_t>(k)] < 0)
            return fail(violation_kind::malformed, 0, p.transfers.size(), k, 0,
                        "scratch_bytes of rank " + std::to_string(k) + " is negative");
    if (p.step_offsets.empty() || p.step_offsets.front() != 0 ||
        p.step_offsets.back() != p.transfers.size() ||
        !std::is_sorted(p.step_offsets.begin(), p.step_offsets.end()))
        return fail(violation_kind::malformed, 0, p.transfers.size(), -1, 0,
                    "step offsets do not partition the transfer list");

    const alltoallv_layout layout = make_packed_layout(m);
    auto buffer_size = [&](int rank, buffer b) -> std::int64_t {
        const auto k = static_cast<std::size_t>(rank);
        return b == buffer::send ? layout.send_size[k]
             : b == buffer::recv ? layout.recv_size[k]
                                 : p.scratch_bytes[k];
    };

    std::vector<detail::scratch_map> scratch(static_cast<std::size_t>(r));
    std::vector<std::map<std::int64_t, std::int64_t>> delivered(static_cast<std::size_t>(r));
    std::vector<std::size_t> out_peer_step(static_cast<std::size_t>(r), SIZE_MAX);
    std::vector<std::size_t> in_peer_step(static_cast<std::size_t>(r), SIZE_MAX);
    std::vector<int> out_peer(static_cast<std::size_t>(r), -1);
    std::vector<int> in_peer(static_cast<std::size_t>(r), -1);
    std::vector<detail::block_run> pieces;
    std::vector<std::size_t> piece_begin;
    std::vector<detail::access> accesses;

    for (std::size_t step = 0; step < p.steps(); ++step) {
        const std::size_t first = p.step_offsets[step];
        const std::size_t last = p.step_offsets[step + 1];
        pieces.clear();
        piece_begin.clear();
        accesses.clear();

        // Phase 1: checks and reads, against the state at the start of the step.
        for (std::size_t i = first; i < last; ++i) {
            const transfer& t = p.transfers[i];
            if (t.src < 0 || t.src >= r || t.dst < 0 || t.dst >= r)
                return fail(violation_kind::malformed, step, i, -1, 0, "rank index out of range");
            if (t.bytes <= 0)
                return fail(violation_kind::malformed, step, i, t.src, 0,
                            "a transfer must move at least one byte");
            if (t.src_offset < 0 || t.dst_offset < 0)
                return fail(violation_kind::malformed, step, i, t.src, 0, "negative offset");
            if (t.src_buffer == buffer::recv)
                return fail(violation_kind::bad_buffer, step, i, t.src, t.src_offset,
                            "transfers read only send or scratch");
            if (t.dst_buffer == buffer::send)
                return fail(violation_kind::bad_buffer, step, i, t.dst, t.dst_offset,
                            "the send buffer is read-only");
            const bool same = topo.same_server(t.src, t.dst);
            if (t.tier == tier::scale_up && !same)
                return fail(violation_kind::tier_mismatch, step, i, t.src, 0,
                            "scale-up transfer between servers " +
                                std::to_string(topo.server_of(t.src)) + " and " +
                                std::to_string(topo.server_of(t.dst)));
            if (t.tier == tier::scale_out && same)
                return fail(violation_kind::tier_mismatch, step, i, t.src, 0,
                            "scale-out transfer inside server " +
                                std::to_string(topo.server_of(t.src)));
            std::int64_t src_end = 0;
            std::int64_t dst_end = 0;
            if (__builtin_add_overflow(t.src_offset, t.bytes, &src_end) ||
                src_end > buffer_size(t.src, t.src_buffer))
                return fail(violation_kind::out_of_bounds, step, i, t.src, t.src_offset,
                            "reads past the end of rank " + std::to_string(t.src) + "'s " +
                                std::string(to_string(t.src_buffer)) + " (" +
                                std::to_string(buffer_size(t.src, t.src_buffer)) + " bytes)");
            if (__builtin_add_overflow(t.dst_offset, t.bytes, &dst_end) ||
                dst_end > buffer_size(t.dst, t.dst_buffer))
                return fail(violation_kind::out_of_bounds, step, i, t.dst, t.dst_offset,
                            "writes past the end of rank " + std::to_string(t.dst) + "'s " +
                                std::string(to_string(t.dst_buffer)) + " (" +
                                std::to_string(buffer_size(t.dst, t.dst_buffer)) + " bytes)");
            if (t.tier == tier::scale_out) {
                const auto s = static_cast<std::size_t>(t.src);
                const auto d = static_cast<std::size_t>(t.dst);
                if (out_peer_step[s] == step && out_peer[s] != t.dst) {
                    out.one_to_one_scale_out = false;
                    if (p.one_to_one_scale_out)
                        return fail(violation_kind::fan_out, step, i, t.src, 0,
                                    "rank " + std::to_string(t.src) +
                                        " sends over scale-out to ranks " +
                                        std::to_string(out_peer[s]) + " and " +
                                        std::to_string(t.dst) + " in one step");
                }
                if (in_peer_step[d] == step && in_peer[d] != t.src) {
                    out.one_to_one_scale_out = false;
                    if (p.one_to_one_scale_out)
                        return fail(violation_kind::incast, step, i, t.dst, 0,
                                    "rank " + std::to_string(t.dst) +
                                        " receives over scale-out from ranks " +
                                        std::to_string(in_peer[d]) + " and " +
                                        std::to_string(t.src) + " in one step");
                }
                out_peer_step[s] = step;
                out_peer[s] = t.dst;
                in_peer_step[d] = step;
                in_peer[d] = t.src;
            }

            // Read the source range as pieces of blocks.
            piece_begin.push_back(pieces.size());
            if (t.src_buffer == buffer::send) {
                const std::int64_t* row =
                    layout.send_displs.data() + static_cast<std::size_t>(t.src) * static_cast<std::size_t>(r);
                std::int64_t pos = t.src_offset;
                // The block holding `pos`: the last destination j whose displacement is <= pos
                // and whose block is non-empty.
                int j = static_cast<int>(std::upper_bound(row, row + r, pos) - row) - 1;
                while (pos < src_end) {
                    while (m(t.src, j) == 0 || row[j] + m(t.src, j) <= pos) ++j;
                    const std::int64_t block_end = row[j] + m(t.src, j);
                    const std::int64_t take = std::min(block_end, src_end) - pos;
                    pieces.push_back({take, pos - row[j], t.src, j});
                    pos += take;
                }
            } else {
                const detail::scratch_map& sm = scratch[static_cast<std::size_t>(t.src)];
                std::int64_t pos = t.src_offset;
                auto it = sm.upper_bound(pos);
                if (it != sm.begin()) --it;
                while (pos < src_end) {
                    if (it == sm.end() || it->first > pos || it->second.end <= pos)
                        return fail(violation_kind::read_before_written, step, i, t.src, pos,
                                    "rank " + std::to_string(t.src) + "'s scratch at offset " +
                                        std::to_string(pos) +
                                        " holds no data at the start of this step");
                    const std::int64_t take = std::min(it->second.end, src_end) - pos;
                    pieces.push_back({take, it->second.block_offset + (pos - it->first),
                                      it->second.origin, it->second.final});
                    pos += take;
                    ++it;
                }
            }
            accesses.push_back({t.src, t.src_buffer, t.src_offset, src_end, i, false});
            accesses.push_back({t.dst, t.dst_buffer, t.dst_offset, dst_end, i, true});
        }
        piece_begin.push_back(pieces.size());

        // Phase 2: no range is written twice, or written and read, at one rank in this step.
        std::sort(accesses.begin(), accesses.end(), [](const detail::access& a, const detail::access& b) {
            if (a.rank != b.rank) return a.rank < b.rank;
            if (a.buf != b.buf) return a.buf < b.buf;
            return a.begin < b.begin;
        });
        for (std::size_t k = 0; k < accesses.size();) {
            std::size_t e = k;
            std::int64_t write_end = INT64_MIN;
            std::int64_t read_end = INT64_MIN;
            std::size_t writer = 0;
            std::size_t reader = 0;
            while (e < accesses.size() && accesses[e].rank == accesses[k].rank &&
                   accesses[e].buf == accesses[k].buf) {
                const detail::access& a = accesses[e];
                auto where = [&a] {
                    return "rank " + std::to_string(a.rank) + "'s " +
                           std::string(to_string(a.buf)) + " at offset " + std::to_string(a.begin);
                };
                if (a.write && a.begin < write_end)
                    return fail(violation_kind::overlapping_writes, step, a.transfer, a.rank,
                                a.begin, where() + " is also written by transfer " +
                                             std::to_string(writer) + " in this step");
                if (a.write && a.begin < read_end)
                    return fail(violation_kind::read_write_conflict, step, a.transfer, a.rank,
                                a.begin, where() + " is also read by transfer " +
                                             std::to_string(reader) + " in this step");
                if (!a.write && a.begin < write_end)
                    return fail(violation_kind::read_write_conflict, step, a.transfer, a.rank,
                                a.begin, where() + " is also written by transfer " +
                                             std::to_string(writer) + " in this step");
                if (a.write && a.end > write_end) {
                    write_end = a.end;
                    writer = a.transfer;
                }
                if (!a.write && a.end > read_end) {
                    read_end = a.end;
                    reader = a.transfer;
                }
                ++e;
            }
            k = e;
        }

        // Phase 3: writes.
        for (std::size_t i = first; i < last; ++i) {
            const transfer& t = p.transfers[i];
            std::int64_t pos = t.dst_offset;
            for (std::size_t q = piece_begin[i - first]; q < piece_begin[i - first + 1]; ++q) {
                const detail::block_run& pc = pieces[q];
                if (t.dst_buffer == buffer::recv) {
                    const std::int64_t want = layout.recv_displ(pc.origin, pc.final) + pc.block_offset;
                    if (pc.final != t.dst || want != pos)
                        return fail(violation_kind::wrong_place, step, i, t.dst, pos,
                                    "writes bytes of block " + std::to_string(pc.origin) + "->" +
                                        std::to_string(pc.final) + " (block offset " +
                                        std::to_string(pc.block_offset) + ") to rank " +
                                        std::to_string(t.dst) + "'s recv at offset " +
                                        std::to_string(pos) + "; they belong to rank " +
                                        std::to_string(pc.final) + "'s recv at offset " +
                                        std::to_string(want));
                    auto& cov = delivered[static_cast<std::size_t>(t.dst)];
                    const std::int64_t end = pos + pc.length;
                    auto it = cov.upper_bound(pos);
                    if ((it != cov.end() && it->first < end) ||
                        (it != cov.begin() && std::prev(it)->second > pos))
                        return fail(violation_kind::delivered_twice, step, i, t.dst, pos,
                                    "bytes of block " + std::to_string(pc.origin) + "->" +
                                        std::to_string(pc.final) + " at block offset " +
                                        std::to_string(pc.block_offset) +
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
                    out.delivered_bytes += pc.length;
                } else {
                    auto& sm = scratch[static_cast<std::size_t>(t.dst)];
                    detail::erase_range(sm, pos, pos + pc.length);
                    sm.emplace(pos, detail::scratch_segment{pos + pc.length, pc.block_offset,
                                                            pc.origin, pc.final});
                }
                pos += pc.length;
            }
        }
    }

    // Everything arrived: each rank's recv is covered from 0 to its size.
    for (int j = 0; j < r; ++j) {
        const auto& cov = delivered[static_cast<std::size_t>(j)];
        const std::int64_t size = layout.recv_size[static_cast<std::size_t>(j)];
        std::int64_t gap = 0;
        if (!cov.empty() && cov.begin()->first == 0) gap = cov.begin()->second;
        if (gap < size) {
            // Name the block whose bytes are missing at `gap`.
            int origin = 0;
            for (int i = 0; i < r; ++i)
                if (m(i, j) > 0 && layout.recv_displ(i, j) <= gap) origin = i;
            return fail(violation_kind::not_delivered, p.steps(), p.transfers.size(), j, gap,
                        "rank " + std::to_string(j) + "'s recv at offset " + std::to_string(gap) +
                            " (block " + std::to_string(origin) + "->" + std::to_string(j) +
                            ", block offset " +
                            std::to_string(gap - layout.recv_displ(origin, j)) +
                            ") is never written");
        }
    }
    return out;
}

} // namespace fast
