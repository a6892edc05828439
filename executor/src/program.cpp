#include "program.hpp"

#include <algorithm>

namespace fast::exec::detail {

void buffer_layout::assign(std::span<const std::size_t> counts, std::span<const std::size_t> user_displs) {
    starts.resize(counts.size());
    total = 0;
    for (std::size_t k = 0; k < counts.size(); ++k) {
        starts[k] = total;
        total += static_cast<std::int64_t>(counts[k]);
    }
    displs = user_displs;
}

namespace {

std::string range_error(const char* buffer, int rank, std::int64_t off, std::int64_t n, std::int64_t size) {
    return "plan range [" + std::to_string(off) + ", " + std::to_string(off + n) + ") of rank " + std::to_string(rank) +
           "'s " + buffer + " buffer lies outside its " + std::to_string(size) + " bytes";
}

// Appends the user segments of packed range [off, off + n) of `b`.
std::string map_blocks(const buffer_layout& b, region where, int rank, std::int64_t off, std::int64_t n,
                       std::vector<segment>& out) {
    if (off < 0 || n <= 0 || off > b.total - n)
        return range_error(where == region::send ? "send" : "receive", rank, off, n, b.total);
    const std::size_t first = out.size();
    const auto count = b.starts.size();
    // The non-empty block that holds `off`: the last start at or before it.
    std::size_t k =
        static_cast<std::size_t>(std::upper_bound(b.starts.begin(), b.starts.end(), off) - b.starts.begin()) - 1;
    for (; n > 0; ++k) {
        if (k >= count) return "internal: block walk ran past the last block";
        const std::int64_t end = k + 1 < count ? b.starts[k + 1] : b.total;
        const std::int64_t take = std::min(n, end - off);
        if (take <= 0) continue; // an empty block
        const std::uint64_t user = b.displs[k] + static_cast<std::uint64_t>(off - b.starts[k]);
        if (out.size() > first && out.back().offset + out.back().length == user)
            out.back().length += static_cast<std::uint64_t>(take); // contiguous in the user layout
        else out.push_back({user, static_cast<std::uint64_t>(take), where});
        off += take;
        n -= take;
    }
    return {};
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

namespace {

// Compiles a rank program into `out`, one transfer at a time, step by step.
class program_compiler {
public:
    program_compiler(const fast::rank_program& p, const buffer_layout& send, const buffer_layout& recv,
                     bool single_segments, program& out)
        : p_(p), send_(send), recv_(recv), single_segments_(single_segments), out_(out),
          seen_(static_cast<std::size_t>(p.topology.ranks()), 0) {}

    /// Transfer `i` of the program as an op of the current step.
    [[nodiscard]] std::string add(std::size_t i) {
        const rank_transfer& rt = p_.transfers[i];
        const transfer& t = rt.transfer;
        const int me = p_.rank;
        if (t.bytes <= 0)
            return "plan transfer " + std::to_string(i) + " of rank " + std::to_string(me) + " has no bytes";
        op o;
        o.bytes = static_cast<std::uint64_t>(t.bytes);
        o.step = rt.step;
        o.scale_out = t.tier == tier::scale_out;
        o.first = static_cast<std::uint32_t>(out_.segments.size());
        if (t.src == me && t.dst == me) {
            o.kind = op_kind::copy;
            o.peer = me;
            if (auto e = map_side(t, true); !e.empty()) return e;
            o.count = static_cast<std::uint32_t>(out_.segments.size() - o.first);
            o.dst_first = static_cast<std::uint32_t>(out_.segments.size());
            if (auto e = map_side(t, false); !e.empty()) return e;
            o.dst_count = static_cast<std::uint32_t>(out_.segments.size() - o.dst_first);
            copies_.push_back(o);
            return {};
        }
        const bool sending = t.src == me;
        o.kind = sending ? op_kind::send : op_kind::recv;
        o.peer = sending ? t.dst : t.src;
        if (o.peer < 0 || o.peer >= p_.topology.ranks() || (t.src != me && t.dst != me))
            return "plan transfer " + std::to_string(i) + " of rank " + std::to_string(me) +
                   " names a rank out of range";
        seen_[static_cast<std::size_t>(o.peer)] = 1;
        o.tag = data_tag(t.src, rt.pair_index);
        if (auto e = map_side(t, sending); !e.empty()) return e;
        o.count = static_cast<std::uint32_t>(out_.segments.size() - o.first);
        (sending ? sends_ : recvs_).push_back(o);
        return {};
    }

    /// Closes the step: receives first (incoming data lands in place), then sends, then local
    /// copies, which overlap with the messages in flight.
    void end_step() {
        for (std::vector<op>* ops : {&recvs_, &sends_, &copies_}) {
            out_.ops.insert(out_.ops.end(), ops->begin(), ops->end());
            ops->clear();
        }
        out_.step_offsets.push_back(out_.ops.size());
    }

    /// The distinct ranks this rank exchanges messages with, in order.
    void list_peers() {
        for (std::size_t k = 0; k < seen_.size(); ++k)
            if (seen_[k]) out_.peers.push_back(static_cast<int>(k));
    }

private:
    // The segments of this rank's side of `t` (the source side if `source`).
    [[nodiscard]] std::string map_side(const transfer& t, bool source) {
        const buffer b = source ? t.src_buffer : t.dst_buffer;
        const std::int64_t off = source ? t.src_offset : t.dst_offset;
        const std::int64_t scratch = p_.scratch_bytes;
        const std::size_t first = out_.segments.size();
        std::string e;
        if (b == buffer::scratch) {
            if (off < 0 || off > scratch - t.bytes) return range_error("scratch", p_.rank, off, t.bytes, scratch);
            out_.segments.push_back(
                {static_cast<std::uint64_t>(off), static_cast<std::uint64_t>(t.bytes), region::scratch});
        } else if (source && b == buffer::send) {
            e = map_blocks(send_, region::send, p_.rank, off, t.bytes, out_.segments);
        } else if (!source && b == buffer::recv) {
            e = map_blocks(recv_, region::recv, p_.rank, off, t.bytes, out_.segments);
        } else {
            return std::string("plan reads a ") + (source ? "receive" : "send") + " buffer or writes the wrong buffer";
        }
        if (e.empty() && single_segments_ && out_.segments.size() - first != 1)
            return "internal: a transfer of " + std::to_string(t.bytes) + " bytes spans " +
                   std::to_string(out_.segments.size() - first) + " user ranges in a plan whose blocks are split";
        return e;
    }

    const fast::rank_program& p_;
    const buffer_layout& send_;
    const buffer_layout& recv_;
    bool single_segments_;
    program& out_;
    std::vector<op> recvs_, sends_, copies_; ///< the current step's ops, by kind
    std::vector<char> seen_;                 ///< per rank: a peer of this rank
};

} // namespace

std::string compile_program(const fast::rank_program& p, const buffer_layout& send, const buffer_layout& recv,
                            bool single_segments, program& out) {
    out.clear();
    const int r = p.topology.ranks();
    const auto ur = static_cast<std::size_t>(r);
    if (p.rank < 0 || p.rank >= r || send.starts.size() != ur || recv.starts.size() != ur || send.displs.size() != ur ||
        recv.displs.size() != ur)
        return "internal: program and layouts disagree on the rank count";
    if (r > max_ranks) return "more than " + std::to_string(max_ranks) + " ranks, more than a message tag can name";
    out.scratch_bytes = static_cast<std::uint64_t>(p.scratch_bytes);
    out.plan_steps = p.steps;
    program_compiler compiler(p, send, recv, single_segments, out);
    const auto& transfers = p.transfers;
    for (std::size_t i = 0; i < transfers.size();) {
        const std::uint32_t step = transfers[i].step;
        for (; i < transfers.size() && transfers[i].step == step; ++i)
            if (std::string e = compiler.add(i); !e.empty()) return e;
        compiler.end_step();
    }
    if (out.segments.size() >= (std::size_t{1} << 32)) return "the program has more than 2^32 segments";
    compiler.list_peers();
    return {};
}

} // namespace fast::exec::detail
