#include "program.hpp"

#include <algorithm>

namespace fast::exec::detail {

namespace {

// One rank's blocks in its send or receive buffer: packed starts (exclusive prefix sums, R
// entries), the packed total, and where the user put each block (null when only the block
// boundaries are needed).
struct blocks {
    const std::int64_t* starts = nullptr;
    std::int64_t total = 0;
    const std::size_t* displs = nullptr;
    int count = 0;

    [[nodiscard]] std::int64_t end(int b) const noexcept {
        return b + 1 < count ? starts[b + 1] : total;
    }
    // The non-empty block that holds packed offset `off` (0 <= off < total).
    [[nodiscard]] int find(std::int64_t off) const noexcept {
        return static_cast<int>(std::upper_bound(starts, starts + count, off) - starts) - 1;
    }
};

std::string range_error(const char* buffer, int rank, std::int64_t off, std::int64_t n,
                        std::int64_t size) {
    return "plan range [" + std::to_string(off) + ", " + std::to_string(off + n) + ") of rank " +
           std::to_string(rank) + "'s " + buffer + " buffer lies outside its " +
           std::to_string(size) + " bytes";
}

// Appends the user segments of packed range [off, off + n) of `b`.
std::string map_blocks(const blocks& b, region where, int rank, std::int64_t off, std::int64_t n,
                       std::vector<segment>& out) {
    if (off < 0 || n <= 0 || off > b.total - n)
        return range_error(where == region::send ? "send" : "receive", rank, off, n, b.total);
    const std::size_t first = out.size();
    for (int k = b.find(off); n > 0; ++k) {
        if (k >= b.count) return "internal: block walk ran past the last block";
        const std::int64_t take = std::min(n, b.end(k) - off);
        if (take <= 0) continue; // an empty block
        const std::uint64_t user =
            b.displs[k] + static_cast<std::uint64_t>(off - b.starts[k]);
        if (out.size() > first && out.back().offset + out.back().length == user)
            out.back().length += static_cast<std::uint64_t>(take); // contiguous in the user layout
        else
            out.push_back({user, static_cast<std::uint64_t>(take), where});
        off += take;
        n -= take;
    }
    return {};
}

// Appends the block ends strictly inside packed range [off, off + n) of `b`, relative to off.
void block_boundaries(const blocks& b, std::int64_t off, std::int64_t n,
                      std::vector<std::uint64_t>& out) {
    for (int k = b.find(off); k < b.count; ++k) {
        const std::int64_t e = b.end(k);
        if (e >= off + n) break;
        if (e > off) out.push_back(static_cast<std::uint64_t>(e - off));
    }
}

// Whether the non-empty blocks lie back to back in rank order.
bool back_to_back(std::span<const std::size_t> counts, std::span<const std::size_t> displs) noexcept {
    bool first = true;
    std::size_t end = 0;
    for (std::size_t j = 0; j < counts.size() && j < displs.size(); ++j) {
        if (counts[j] == 0) continue;
        if (!first && displs[j] != end) return false;
        first = false;
        end = displs[j] + counts[j];
    }
    return true;
}

} // namespace

std::uint8_t contiguous_layout(std::span<const std::size_t> sendcounts, std::span<const std::size_t> sdispls,
                               std::span<const std::size_t> recvcounts, std::span<const std::size_t> rdispls) noexcept {
    return static_cast<std::uint8_t>((back_to_back(sendcounts, sdispls) ? send_contiguous : 0) |
                                     (back_to_back(recvcounts, rdispls) ? recv_contiguous : 0));
}

std::string compile_program(const fast::plan& p, const fast::rank_view& v,
                            const fast::alltoallv_layout& l, int me,
                            std::span<const std::size_t> sdispls,
                            std::span<const std::size_t> rdispls, bool pieces,
                            std::span<const std::uint8_t> contiguous, program& out) {
    out.clear();
    const int r = l.ranks;
    const auto ur = static_cast<std::size_t>(r);
    if (me < 0 || me >= r || p.topology.ranks() != r || v.offsets.size() != ur + 1 ||
        p.scratch_bytes.size() != ur || sdispls.size() != ur || rdispls.size() != ur || contiguous.size() != ur)
        return "internal: plan, view, layout and displacements disagree on the rank count";
    const auto um = static_cast<std::size_t>(me);
    const blocks mine_send{l.send_displs.data() + um * ur, l.send_size[um], sdispls.data(), r};
    const blocks mine_recv{l.recv_displs.data() + um * ur, l.recv_size[um], rdispls.data(), r};
    const std::int64_t scratch = p.scratch_bytes[um];
    out.scratch_bytes = static_cast<std::uint64_t>(scratch);
    out.plan_steps = p.steps();

    std::vector<op> recvs, sends, copies;
    std::vector<std::uint64_t> cuts;
    std::vector<char> seen(ur, 0);

    // Segments of this rank's side of transfer t ([off, off + n) relative to the transfer).
    auto map_side = [&](const transfer& t, bool source, std::int64_t rel, std::int64_t n) -> std::string {
        const buffer b = source ? t.src_buffer : t.dst_buffer;
        const std::int64_t off = (source ? t.src_offset : t.dst_offset) + rel;
        if (b == buffer::scratch) {
            if (off < 0 || n <= 0 || off > scratch - n)
                return range_error("scratch", me, off, n, scratch);
            out.segments.push_back({static_cast<std::uint64_t>(off), static_cast<std::uint64_t>(n),
                                    region::scratch});
            return {};
        }
        if (source && b == buffer::send) return map_blocks(mine_send, region::send, me, off, n, out.segments);
        if (!source && b == buffer::recv) return map_blocks(mine_recv, region::recv, me, off, n, out.segments);
        return std::string("plan reads a ") + (source ? "receive" : "send") +
               " buffer or writes the wrong buffer";
    };

    const auto entries = v.of(me);
    std::size_t i = 0;
    while (i < entries.size()) {
        const std::uint32_t step = entries[i].step;
        recvs.clear();
        sends.clear();
        copies.clear();
        for (; i < entries.size() && entries[i].step == step; ++i) {
            const std::size_t index = entries[i].index;
            const transfer& t = p.transfers[index];
            if (t.bytes <= 0) return "plan transfer " + std::to_string(index) + " has no bytes";
            if (index >= (std::size_t{1} << tag_transfer_bits))
                return "the plan has more than 2^32 transfers, more than the tag can name";
            op o;
            o.bytes = static_cast<std::uint64_t>(t.bytes);
            o.step = step;
            if (t.src == me && t.dst == me) {
                o.kind = op_kind::copy;
                o.peer = me;
                o.first = static_cast<std::uint32_t>(out.segments.size());
                if (auto e = map_side(t, true, 0, t.bytes); !e.empty()) return e;
                o.count = static_cast<std::uint32_t>(out.segments.size() - o.first);
                o.dst_first = static_cast<std::uint32_t>(out.segments.size());
                if (auto e = map_side(t, false, 0, t.bytes); !e.empty()) return e;
                o.dst_count = static_cast<std::uint32_t>(out.segments.size() - o.dst_first);
                copies.push_back(o);
                continue;
            }
            const bool sending = t.src == me;
            o.kind = sending ? op_kind::send : op_kind::recv;
            o.peer = sending ? t.dst : t.src;
            if (o.peer < 0 || o.peer >= r || (t.src != me && t.dst != me))
                return "plan transfer " + std::to_string(index) + " names a rank out of range";
            seen[static_cast<std::size_t>(o.peer)] = 1;
            const std::uint64_t base_tag = static_cast<std::uint64_t>(index) << tag_piece_bits;
            if (!pieces) {
                o.tag = base_tag;
                o.first = static_cast<std::uint32_t>(out.segments.size());
                if (auto e = map_side(t, sending, 0, t.bytes); !e.empty()) return e;
                o.count = static_cast<std::uint32_t>(out.segments.size() - o.first);
                (sending ? sends : recvs).push_back(o);
                continue;
            }
            // Cut at the block boundaries of both ends; both ranks compute the same cuts.
            cuts.clear();
            if (t.src_buffer == buffer::send && !(contiguous[static_cast<std::size_t>(t.src)] & send_contiguous)) {
                const auto s = static_cast<std::size_t>(t.src);
                block_boundaries({l.send_displs.data() + s * ur, l.send_size[s], nullptr, r},
                                 t.src_offset, t.bytes, cuts);
            }
            if (t.dst_buffer == buffer::recv && !(contiguous[static_cast<std::size_t>(t.dst)] & recv_contiguous)) {
                const auto d = static_cast<std::size_t>(t.dst);
                block_boundaries({l.recv_displs.data() + d * ur, l.recv_size[d], nullptr, r},
                                 t.dst_offset, t.bytes, cuts);
            }
            std::sort(cuts.begin(), cuts.end());
            cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
            cuts.push_back(static_cast<std::uint64_t>(t.bytes));
            if (cuts.size() > (std::size_t{1} << tag_piece_bits))
                return "plan transfer " + std::to_string(index) + " spans more than 65536 pieces";
            std::uint64_t at = 0;
            for (std::size_t k = 0; k < cuts.size(); ++k) {
                op piece = o;
                piece.tag = base_tag | k;
                piece.bytes = cuts[k] - at;
                piece.first = static_cast<std::uint32_t>(out.segments.size());
                if (auto e = map_side(t, sending, static_cast<std::int64_t>(at),
                                      static_cast<std::int64_t>(piece.bytes));
                    !e.empty())
                    return e;
                piece.count = static_cast<std::uint32_t>(out.segments.size() - piece.first);
                if (piece.count != 1) return "internal: a piece maps to several regions";
                (sending ? sends : recvs).push_back(piece);
                at = cuts[k];
            }
        }
        // Receives first (incoming data lands in place), then sends, then local copies, which
        // overlap with the messages in flight.
        out.ops.insert(out.ops.end(), recvs.begin(), recvs.end());
        out.ops.insert(out.ops.end(), sends.begin(), sends.end());
        out.ops.insert(out.ops.end(), copies.begin(), copies.end());
        out.step_offsets.push_back(out.ops.size());
    }
    if (out.segments.size() >= (std::size_t{1} << 32))
        return "the program has more than 2^32 segments";
    for (int k = 0; k < r; ++k)
        if (seen[static_cast<std::size_t>(k)]) out.peers.push_back(k);
    return {};
}

} // namespace fast::exec::detail
