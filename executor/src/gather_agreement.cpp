#include "gather_agreement.hpp"

#include "wire.hpp"

namespace fast::exec::detail {

namespace {

// One server's rows and columns, sized for `topo`.
void size_server_counts(const fast::topology& topo, fast::server_counts& c) {
    const auto cells = static_cast<std::size_t>(topo.ranks()) * static_cast<std::size_t>(topo.gpus_per_server);
    c.rows.assign(cells, 0);
    c.cols.assign(cells, 0);
}

} // namespace

gather_agreement::gather_agreement(const fast::topology& topo, int rank)
    : topo_(topo), rank_(rank), stride_(counts_message_bytes(topo.ranks())), mine_(stride_),
      gathered_(stride_ * static_cast<std::size_t>(topo.ranks())), part_(fast::server_part_size(topo)) {
    fast::start_shared_counts(topo_, shared_);
    size_server_counts(topo_, own_);
    size_server_counts(topo_, server_);
}

void gather_agreement::start(call_kind kind, std::uint64_t seq, const call_args& a, std::string_view local_error) {
    kind_ = kind;
    seq_ = seq;
    write_counts_message(mine_, topo_.ranks(), kind, seq, a, local_error);
}

exchange_round gather_agreement::round(int) noexcept {
    return {control::counts,         seq_, rank_group::all(topo_.ranks()), stride_, mine_.data(), 0, gathered_.data(),
            "exchanging the counts", false};
}

status gather_agreement::received(int) {
    if (status s = check_same_call(); !s.ok()) return s;
    if (status s = first_error<call_header>(gathered_, stride_, topo_.ranks(), call_prefix(kind_).c_str()); !s.ok())
        return s;
    // Plans need split blocks for single-segment messages unless every rank's blocks lie back to
    // back in both buffers (any packed range is then one user range).
    all_contiguous_ = true;
    for (int r = 0; r < topo_.ranks(); ++r)
        all_contiguous_ =
            all_contiguous_ && entry<call_header>(gathered_, stride_, r).layout == (send_contiguous | recv_contiguous);
    if (status s = check_counts(); !s.ok()) return s;
    return read_counts();
}

// Every rank is in the same call (sequence number and kind) as rank 0.
status gather_agreement::check_same_call() const {
    const call_id first = call_of(entry<call_header>(gathered_, stride_, 0));
    for (int r = 1; r < topo_.ranks(); ++r)
        if (const call_id c = call_of(entry<call_header>(gathered_, stride_, r)); c != first)
            return different_calls(first, r, c);
    return {};
}

// Every rank's receive counts against what the senders send, receiver by receiver.
status gather_agreement::check_counts() const {
    const int ranks = topo_.ranks();
    mismatches m;
    for (int j = 0; j < ranks; ++j)
        for (int i = 0; i < ranks; ++i)
            m.check(j, i, received_count(message_of(j), ranks, i), sent_count(message_of(i), j));
    return mismatch_status(kind_, m);
}

// The shared counts from every server's part, as the servers agreement assembles them; this
// rank's server's rows and columns.
status gather_agreement::read_counts() {
    fast::start_shared_counts(topo_, shared_);
    const int own = topo_.server_of(rank_);
    for (int s = 0; s < topo_.servers; ++s) {
        fast::server_counts& c = s == own ? own_ : server_;
        read_server(s, c);
        try {
            fast::write_server_part(c, topo_, part_);
        } catch (const fast::invalid_argument& e) {
            return planning_error(e.what()); // alike on every rank: all read every server
        }
        fast::read_server_part(s, part_, topo_, shared_);
    }
    return {};
}

// Server s's rows (its ranks' send counts) and columns (what every rank sends its ranks).
void gather_agreement::read_server(int s, fast::server_counts& out) const {
    const int ranks = topo_.ranks();
    const int g = topo_.gpus_per_server;
    out.server = s;
    for (int a = 0; a < g; ++a)
        for (int j = 0; j < ranks; ++j)
            out.rows[static_cast<std::size_t>(a * ranks + j)] =
                static_cast<std::int64_t>(sent_count(message_of(s * g + a), j));
    for (int i = 0; i < ranks; ++i)
        for (int b = 0; b < g; ++b)
            out.cols[static_cast<std::size_t>(i * g + b)] =
                static_cast<std::int64_t>(sent_count(message_of(i), s * g + b));
}

} // namespace fast::exec::detail
