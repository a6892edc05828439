#include "servers_agreement.hpp"

#include <algorithm>
#include <cstring>

#include "program.hpp" // contiguous_layout's flags
#include "wire.hpp"

namespace fast::exec::detail {

namespace {

// What a server's ranks found in round 1, as rank (s, k) tells rank (d, k) in round 2 ahead of
// the server's part (the header of agreement_part_message_bytes).
struct server_summary {
    std::uint64_t magic;
    std::uint64_t seq;       // the call of the server's first rank
    std::int32_t kind;       // (0: its header was garbled)
    std::int32_t error;      // errc of the server's first rank with a local error, 0 if none
    std::int32_t error_rank; // that rank, -1 if none
    std::int32_t errors;     // ranks of the server with a local error
    std::int32_t other_rank; // the server's first rank in another call than its first rank, -1 if none
    std::int32_t other_kind; // that rank's call
    std::uint64_t other_seq;
    std::uint32_t layout;  // AND of the server's ranks' layout flags
    std::int32_t overflow; // the server's part overflowed int64 (text says how; the part is zeros)
    char text[216];        // the first local error's text, or the overflow's
};
static_assert(sizeof(server_summary) == fast::agreement_header_bytes);

// A rank's findings (round 3), or its server's (round 4).
struct finding {
    std::uint64_t magic;
    std::uint64_t seq;
    std::uint64_t count; // mismatched pairs
    std::uint64_t expects;
    std::uint64_t sends;
    std::int32_t receiver; // the first mismatched pair, if any
    std::int32_t sender;
};
static_assert(sizeof(finding) == fast::agreement_finding_bytes);

template <class T>
T read_at(const unsigned char* p) noexcept {
    T out;
    std::memcpy(&out, p, sizeof out);
    return out;
}

finding finding_of(const mismatches& m, std::uint64_t seq) noexcept {
    return {wire_magic, seq, m.count, m.expects, m.sends, m.receiver, m.sender};
}

mismatches mismatches_of(const finding& f) noexcept {
    return {f.count, f.receiver, f.sender, f.expects, f.sends};
}

} // namespace

servers_agreement::servers_agreement(const fast::topology& topo, int rank)
    : topo_(topo), rank_(rank), server_(topo.server_of(rank)), local_(rank % topo.gpus_per_server),
      row_bytes_(counts_message_bytes(topo.ranks())),
      part_bytes_(static_cast<std::size_t>(fast::agreement_part_message_bytes(topo))), mine_(row_bytes_),
      rows_in_(row_bytes_ * static_cast<std::size_t>(topo.gpus_per_server)),
      parts_out_(part_bytes_ * static_cast<std::size_t>(topo.servers)), parts_in_(parts_out_.size()),
      finding_(sizeof(finding)), findings_in_(sizeof(finding) * static_cast<std::size_t>(topo.gpus_per_server)),
      verdict_(sizeof(finding)), verdicts_in_(sizeof(finding) * static_cast<std::size_t>(topo.servers)),
      part_(fast::server_part_size(topo)) {
    const auto cells = static_cast<std::size_t>(topo.ranks()) * static_cast<std::size_t>(topo.gpus_per_server);
    own_.server = server_;
    own_.rows.assign(cells, 0);
    own_.cols.assign(cells, 0);
    fast::start_shared_counts(topo_, shared_);
}

void servers_agreement::start(call_kind kind, std::uint64_t seq, const call_args& a, std::string_view local_error) {
    kind_ = kind;
    seq_ = seq;
    overflow_server_ = -1;
    write_counts_message(mine_, topo_.ranks(), kind, seq, a, local_error);
}

exchange_round servers_agreement::round(int n) noexcept {
    const rank_group server = rank_group::server(server_, topo_.gpus_per_server);
    const rank_group rail = rank_group::rail(local_, topo_.gpus_per_server, topo_.servers);
    exchange_round r;
    switch (n) {
    case 0: r = {control::counts, 0, server, row_bytes_, mine_.data(), 0, rows_in_.data()}; break;
    case 1: r = {control::parts, 0, rail, part_bytes_, parts_out_.data(), part_bytes_, parts_in_.data()}; break;
    case 2: r = {control::findings, 0, server, sizeof(finding), finding_.data(), 0, findings_in_.data()}; break;
    default: r = {control::verdicts, 0, rail, sizeof(finding), verdict_.data(), 0, verdicts_in_.data()};
    }
    constexpr const char* what[] = {
        "exchanging the counts within the server", "exchanging the server parts across servers",
        "exchanging the findings within the server", "exchanging the servers' findings across servers"};
    r.seq = seq_;
    r.what = what[std::min(n, 3)];
    r.follows = n > 0;
    return r;
}

status servers_agreement::received(int n) {
    switch (n) {
    case 0: read_rows(); return {};
    case 1: return read_parts();
    case 2: return read_findings();
    default: return read_verdicts();
    }
}

// Round 1 in: the server's rows and columns, its summary and part, round 2's messages.
void servers_agreement::read_rows() {
    const int ranks = topo_.ranks();
    const int g = topo_.gpus_per_server;
    const int first_rank = server_ * g;
    const call_id first = call_of(read_at<call_header>(rows_in_.data()));
    server_summary h{};
    h.magic = wire_magic;
    h.seq = first.seq;
    h.kind = first.kind;
    h.error_rank = h.other_rank = -1;
    h.layout = send_contiguous | recv_contiguous;
    for (int k = 0; k < g; ++k) {
        const unsigned char* message = rows_in_.data() + static_cast<std::size_t>(k) * row_bytes_;
        const auto e = read_at<call_header>(message);
        if (const call_id c = call_of(e); h.other_rank < 0 && c != first) {
            h.other_rank = first_rank + k;
            h.other_kind = c.kind;
            h.other_seq = c.seq;
        }
        if (e.error != 0 && h.errors++ == 0) {
            h.error = e.error;
            h.error_rank = first_rank + k;
            put_text(h.text, get_text(e.text));
        }
        h.layout &= e.layout;
        for (int j = 0; j < ranks; ++j) {
            own_.rows[static_cast<std::size_t>(k * ranks + j)] = static_cast<std::int64_t>(sent_count(message, j));
            own_.cols[static_cast<std::size_t>(j * g + k)] =
                static_cast<std::int64_t>(received_count(message, ranks, j));
        }
    }
    std::fill(part_.begin(), part_.end(), 0);
    if (h.errors == 0) { // else zeros: nobody plans this call
        try {
            fast::write_server_part(own_, topo_, part_);
        } catch (const fast::invalid_argument& e) {
            h.overflow = 1;
            put_text(h.text, e.what());
            std::fill(part_.begin(), part_.end(), 0);
        }
    }
    write_parts(&h);
}

// Round 2 out: to rank (d, k) the summary, the part and what GPU a of this server sends (d, k).
void servers_agreement::write_parts(const void* summary) {
    const int ranks = topo_.ranks();
    const int g = topo_.gpus_per_server;
    for (int d = 0; d < topo_.servers; ++d) {
        unsigned char* out = parts_out_.data() + static_cast<std::size_t>(d) * part_bytes_;
        std::memcpy(out, summary, sizeof(server_summary));
        out += sizeof(server_summary);
        std::memcpy(out, part_.data(), part_.size() * sizeof(std::int64_t));
        out += part_.size() * sizeof(std::int64_t);
        for (int a = 0; a < g; ++a) {
            const std::int64_t sends = own_.rows[static_cast<std::size_t>(a * ranks + d * g + local_)];
            std::memcpy(out + 8 * static_cast<std::size_t>(a), &sends, 8);
        }
    }
}

// Round 2 in: the same call everywhere and nobody's arguments rejected (then the agreement ends,
// alike on every rank); the layout, the shared counts, and this rank's column checked.
status servers_agreement::read_parts() {
    if (status s = read_summaries(); !s.ok()) return s;
    fast::start_shared_counts(topo_, shared_);
    for (int s = 0; s < topo_.servers; ++s) {
        const unsigned char* part =
            parts_in_.data() + static_cast<std::size_t>(s) * part_bytes_ + sizeof(server_summary);
        std::memcpy(part_.data(), part, part_.size() * sizeof(std::int64_t));
        fast::read_server_part(s, part_, topo_, shared_);
    }
    check_column();
    return {};
}

// Every server's summary: calls (the first rank in another call than rank 0's, in rank order),
// local errors (the first, in rank order, and how many), layouts, overflows.
status servers_agreement::read_summaries() {
    const auto at = [&](int s) {
        return read_at<server_summary>(parts_in_.data() + static_cast<std::size_t>(s) * part_bytes_);
    };
    const server_summary h0 = at(0);
    const call_id first{h0.seq, h0.kind};
    int errors = 0, error_server = -1;
    all_contiguous_ = true;
    for (int s = 0; s < topo_.servers; ++s) {
        const server_summary h = at(s);
        if (h.magic != wire_magic) return garbled(s * topo_.gpus_per_server + local_);
        if (const call_id c{h.seq, h.kind}; c != first) return different_calls(first, s * topo_.gpus_per_server, c);
        if (h.other_rank >= 0) return different_calls(first, h.other_rank, {h.other_seq, h.other_kind});
        if (h.errors > 0 && error_server < 0) error_server = s;
        errors += h.errors;
        all_contiguous_ = all_contiguous_ && h.layout == (send_contiguous | recv_contiguous);
        if (h.overflow != 0 && overflow_server_ < 0) overflow_server_ = s;
    }
    if (error_server < 0) return {};
    const server_summary h = at(error_server);
    return rank_error(call_prefix(kind_).c_str(), h.error, h.error_rank, get_text(h.text), errors);
}

// What every rank sends this one (tile counts of round 2) against its receive counts: round 3's
// message.
void servers_agreement::check_column() {
    const int g = topo_.gpus_per_server;
    mismatches m;
    for (int s = 0; s < topo_.servers; ++s) {
        const unsigned char* tile =
            parts_in_.data() + (static_cast<std::size_t>(s) + 1) * part_bytes_ - 8 * static_cast<std::size_t>(g);
        for (int a = 0; a < g; ++a) {
            const int sender = s * g + a;
            m.check(rank_, sender, received_count(mine_.data(), topo_.ranks(), sender),
                    read_at<std::uint64_t>(tile + 8 * static_cast<std::size_t>(a)));
        }
    }
    const finding f = finding_of(m, seq_);
    std::memcpy(finding_.data(), &f, sizeof f);
}

// Round 3 in: the server's findings, receiver by receiver: round 4's message.
status servers_agreement::read_findings() {
    mismatches m;
    if (status s = add_findings(findings_in_, rank_group::server(server_, topo_.gpus_per_server), m); !s.ok()) return s;
    const finding f = finding_of(m, seq_);
    std::memcpy(verdict_.data(), &f, sizeof f);
    return {};
}

// Round 4 in: every server's findings, server by server: the outcome.
status servers_agreement::read_verdicts() {
    mismatches m;
    if (status s = add_findings(verdicts_in_, rank_group::rail(local_, topo_.gpus_per_server, topo_.servers), m);
        !s.ok())
        return s;
    if (m.count > 0) return mismatch_status(kind_, m);
    if (overflow_server_ < 0) return {};
    const auto h = read_at<server_summary>(parts_in_.data() + static_cast<std::size_t>(overflow_server_) * part_bytes_);
    return planning_error(get_text(h.text));
}

// Adds the findings of `from`'s members (member k's at k * sizeof(finding) of `in`) in order.
status servers_agreement::add_findings(const std::vector<unsigned char>& in, const rank_group& from,
                                       mismatches& out) const {
    for (int k = 0; k < from.count; ++k) {
        const auto f = read_at<finding>(in.data() + static_cast<std::size_t>(k) * sizeof(finding));
        if (f.magic != wire_magic || f.seq != seq_) return garbled(from.rank_at(k));
        out.add(mismatches_of(f));
    }
    return {};
}

status servers_agreement::garbled(int peer) const {
    return status(errc::internal,
                  "rank " + std::to_string(rank_) + ": a garbled agreement message from rank " + std::to_string(peer));
}

} // namespace fast::exec::detail
