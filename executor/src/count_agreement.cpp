#include "count_agreement.hpp"

#include <cstring>

#include "gather_agreement.hpp"
#include "program.hpp" // contiguous_layout
#include "servers_agreement.hpp"
#include "wire.hpp"

namespace fast::exec::detail {

std::unique_ptr<count_agreement> make_count_agreement(fast::agreement_kind kind, const fast::topology& topo, int rank) {
    if (kind == fast::agreement_kind::servers) return std::make_unique<servers_agreement>(topo, rank);
    return std::make_unique<gather_agreement>(topo, rank);
}

received_bytes bytes_received(count_agreement& a, const fast::topology& topo, int rank) {
    received_bytes out;
    for (int n = 0; n < a.rounds(); ++n) {
        const exchange_round r = a.round(n);
        for (int k = 0; k < r.group.count; ++k) {
            const int peer = r.group.rank_at(k);
            if (peer == rank) continue;
            (topo.server_of(peer) == topo.server_of(rank) ? out.local : out.network) +=
                static_cast<std::int64_t>(r.bytes);
        }
    }
    return out;
}

void write_counts_message(std::span<unsigned char> out, int ranks, call_kind kind, std::uint64_t seq,
                          const call_args& a, std::string_view local_error) noexcept {
    std::memset(out.data(), 0, out.size());
    call_header h{};
    h.magic = wire_magic;
    h.seq = seq;
    h.kind = static_cast<std::int32_t>(kind);
    h.error = local_error.empty() ? 0 : static_cast<std::int32_t>(errc::invalid_argument);
    put_text(h.text, local_error);
    if (local_error.empty()) h.layout = contiguous_layout(a.sendcounts, a.sdispls, a.recvcounts, a.rdispls);
    std::memcpy(out.data(), &h, sizeof h);
    if (!local_error.empty()) return; // zeros: a rank whose arguments were rejected counts nothing
    unsigned char* counts = out.data() + sizeof h;
    const auto ur = static_cast<std::size_t>(ranks);
    for (std::size_t j = 0; j < ur; ++j) {
        const std::uint64_t s = a.sendcounts[j], r = a.recvcounts[j];
        std::memcpy(counts + 8 * j, &s, 8);
        std::memcpy(counts + 8 * (ur + j), &r, 8);
    }
}

std::uint64_t sent_count(const unsigned char* message, int j) noexcept {
    std::uint64_t v;
    std::memcpy(&v, message + sizeof(call_header) + 8 * static_cast<std::size_t>(j), 8);
    return v;
}

std::uint64_t received_count(const unsigned char* message, int ranks, int i) noexcept {
    return sent_count(message, ranks + i);
}

call_id call_of(const call_header& h) noexcept {
    return {h.seq, h.magic == wire_magic ? h.kind : 0};
}

std::string call_prefix(call_kind kind) {
    return std::string(kind_name(static_cast<std::int32_t>(kind))) + ": ";
}

status different_calls(call_id first, int rank, call_id other) {
    return status(errc::invalid_argument,
                  std::string(kind_name(first.kind)) + ": ranks are in different collective calls: rank 0 in call " +
                      std::to_string(first.seq) + " (" + kind_name(first.kind) + "), rank " + std::to_string(rank) +
                      " in call " + std::to_string(other.seq) + " (" + kind_name(other.kind) +
                      "); every rank must make the same calls in the same order");
}

void mismatches::check(int receiver_rank, int sender_rank, std::uint64_t expected, std::uint64_t sent) noexcept {
    if (expected == sent) return;
    if (count++ == 0) {
        receiver = receiver_rank;
        sender = sender_rank;
        expects = expected;
        sends = sent;
    }
}

void mismatches::add(const mismatches& later) noexcept {
    if (later.count == 0) return;
    if (count == 0) {
        receiver = later.receiver;
        sender = later.sender;
        expects = later.expects;
        sends = later.sends;
    }
    count += later.count;
}

status mismatch_status(call_kind kind, const mismatches& m) {
    if (m.count == 0) return {};
    std::string text = call_prefix(kind) + "rank " + std::to_string(m.receiver) + " expects " +
                       std::to_string(m.expects) + " bytes from rank " + std::to_string(m.sender) + ", rank " +
                       std::to_string(m.sender) + " sends " + std::to_string(m.sends);
    if (m.count > 1)
        text += " (and " + std::to_string(m.count - 1) + " more mismatched pair" + (m.count > 2 ? "s)" : ")");
    return status(errc::count_mismatch, text);
}

status planning_error(std::string_view why) {
    return status(errc::invalid_argument, "the traffic cannot be planned: " + std::string(why));
}

} // namespace fast::exec::detail
