#include "count_agreement.hpp"

#include <cstring>
#include <string>

#include "program.hpp" // contiguous_layout
#include "wire.hpp"

namespace fast::exec::detail {

namespace {

// The header of every rank's message; its 2R counts follow it (send counts, then receive counts).
struct call_header {
    std::uint64_t magic;
    std::uint64_t seq;
    std::int32_t kind;
    std::int32_t error;
    std::uint32_t layout; // contiguous_layout() of the sender's displacements
    std::uint32_t reserved;
    char text[240];
};

std::uint64_t load_u64(const unsigned char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

} // namespace

count_agreement::count_agreement(int size)
    : size_(static_cast<std::size_t>(size)), stride_(sizeof(call_header) + 2 * size_ * sizeof(std::uint64_t)),
      mine_(stride_), gathered_(stride_ * size_), matrix_(size_ * size_) {}

std::span<const unsigned char> count_agreement::message(call_kind kind, std::uint64_t seq, const call_args& a,
                                                        std::string_view local_error) {
    kind_ = kind;
    mine_.assign(stride_, 0);
    call_header h{};
    h.magic = wire_magic;
    h.seq = seq;
    h.kind = static_cast<std::int32_t>(kind);
    h.error = local_error.empty() ? 0 : static_cast<std::int32_t>(errc::invalid_argument);
    put_text(h.text, local_error);
    if (local_error.empty()) h.layout = contiguous_layout(a.sendcounts, a.sdispls, a.recvcounts, a.rdispls);
    std::memcpy(mine_.data(), &h, sizeof h);
    if (local_error.empty()) {
        unsigned char* counts = mine_.data() + sizeof h;
        for (std::size_t j = 0; j < size_; ++j) {
            const std::uint64_t s = a.sendcounts[j], r = a.recvcounts[j];
            std::memcpy(counts + 8 * j, &s, 8);
            std::memcpy(counts + 8 * (size_ + j), &r, 8);
        }
    }
    return mine_;
}

// "alltoallv: ": what every message of this call's agreement starts with.
std::string count_agreement::prefix() const {
    return std::string(kind_name(static_cast<std::int32_t>(kind_))) + ": ";
}

status count_agreement::check() {
    if (status s = check_same_call(); !s.ok()) return s;
    const int size = static_cast<int>(size_);
    if (status s = first_error<call_header>(gathered_, stride_, size, prefix().c_str()); !s.ok()) return s;
    // Plans need split blocks for single-segment messages unless every rank's blocks lie back to
    // back in both buffers (any packed range is then one user range).
    all_contiguous_ = true;
    for (int r = 0; r < size; ++r)
        all_contiguous_ =
            all_contiguous_ && entry<call_header>(gathered_, stride_, r).layout == (send_contiguous | recv_contiguous);
    return read_counts();
}

// Every rank is in the same call (sequence number and kind) as rank 0.
status count_agreement::check_same_call() const {
    const call_header h0 = entry<call_header>(gathered_, stride_, 0);
    for (int r = 0; r < static_cast<int>(size_); ++r) {
        const call_header e = entry<call_header>(gathered_, stride_, r);
        if (e.magic != wire_magic || e.seq != h0.seq || e.kind != h0.kind)
            return status(errc::invalid_argument,
                          prefix() + "ranks are in different collective calls: rank 0 in call " +
                              std::to_string(h0.seq) + " (" + kind_name(h0.kind) + "), rank " + std::to_string(r) +
                              " in call " + std::to_string(e.seq) + " (" + kind_name(e.kind) +
                              "); every rank must make the same calls in the same order");
    }
    return {};
}

// The matrix from every rank's send counts; every rank checks every rank's receive counts
// against what the senders send.
status count_agreement::read_counts() {
    const std::size_t ur = size_;
    std::size_t mismatches = 0;
    std::string first;
    for (std::size_t j = 0; j < ur; ++j) {
        const unsigned char* cj = gathered_.data() + j * stride_ + sizeof(call_header);
        for (std::size_t i = 0; i < ur; ++i) {
            const unsigned char* ci = gathered_.data() + i * stride_ + sizeof(call_header);
            const std::uint64_t sends = load_u64(ci + 8 * j);
            const std::uint64_t expects = load_u64(cj + 8 * (ur + i));
            matrix_[i * ur + j] = sends;
            if (sends != expects && mismatches++ == 0)
                first = "rank " + std::to_string(j) + " expects " + std::to_string(expects) + " bytes from rank " +
                        std::to_string(i) + ", rank " + std::to_string(i) + " sends " + std::to_string(sends);
        }
    }
    if (mismatches == 0) return {};
    return status(errc::count_mismatch,
                  prefix() + first +
                      (mismatches > 1 ? " (and " + std::to_string(mismatches - 1) + " more mismatched pair" +
                                            (mismatches > 2 ? "s)" : ")")
                                      : std::string()));
}

} // namespace fast::exec::detail
