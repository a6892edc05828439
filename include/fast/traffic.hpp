#pragma once
/// \file traffic.hpp
/// Traffic matrices: entry (i, j) is the number of bytes rank i sends to rank j in one
/// All-to-All(v). Validation, tiles and the server-level aggregates the planners start from.

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "detail/checked.hpp"
#include "error.hpp"
#include "topology.hpp"

namespace fast {

/// A traffic matrix with any scalar (validation and conversion accept integer or floating point).
template <class Scalar = std::int64_t>
using basic_traffic_matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// The planners' matrix: exact integer bytes, row = source rank.
using traffic_matrix = basic_traffic_matrix<std::int64_t>;

namespace detail {
inline std::string entry_name(Eigen::Index i, Eigen::Index j) {
    return "traffic(" + std::to_string(i) + ", " + std::to_string(j) + ")";
}

/// Whether `n` int64 entries are all non-negative with a sum that fits in int64, without a
/// branch per entry (planners validate on every call): the sign bits are or-ed and the high and
/// low 32-bit halves summed apart, each sum exact for up to 2^31 entries at a time.
inline bool all_bytes_fit(const std::int64_t* v, std::size_t n) {
    std::uint64_t signs = 0;
    std::uint64_t high = 0; // the sum is high * 2^32 + low, low < 2^32 between chunks
    std::uint64_t low = 0;
    for (std::size_t at = 0; at < n;) {
        const std::size_t end = at + std::min<std::size_t>(n - at, std::size_t{1} << 31);
        for (; at < end; ++at) {
            const auto x = static_cast<std::uint64_t>(v[at]);
            signs |= x;
            high += x >> 32;
            low += x & 0xffffffffu;
        }
        high += low >> 32;
        low &= 0xffffffffu;
        if (high >= (std::uint64_t{1} << 31)) return false; // over INT64_MAX (or negatives)
    }
    return (signs >> 63) == 0;
}
} // namespace detail

/// Checks that `m` is a valid R x R traffic matrix for `topo` (R = topo.ranks()): entries are
/// finite, non-negative whole numbers that fit in int64, and the total (hence every row, column
/// and tile sum) fits in int64. Throws fast::invalid_argument naming the first bad index and
/// value. O(R^2).
template <class Derived>
void validate_traffic(const Eigen::MatrixBase<Derived>& m, const topology& topo) {
    using scalar = typename Derived::Scalar;
    static_assert(std::is_arithmetic_v<scalar>, "traffic matrices hold arithmetic scalars");
    validate(topo);
    const Eigen::Index r = topo.ranks();
    if (m.rows() != r || m.cols() != r)
        throw invalid_argument("traffic matrix is " + std::to_string(m.rows()) + " x " + std::to_string(m.cols()) +
                               " but the topology has " + std::to_string(topo.servers) + " x " +
                               std::to_string(topo.gpus_per_server) + " = " + std::to_string(r) + " ranks");
    if constexpr (std::is_same_v<Derived, basic_traffic_matrix<std::int64_t>>) {
        // The planners' own matrices: one branch-free pass; the entry-by-entry pass below
        // names the first bad entry when there is one.
        if (detail::all_bytes_fit(m.derived().data(), static_cast<std::size_t>(r) * static_cast<std::size_t>(r)))
            return;
    }
    std::int64_t total = 0;
    for (Eigen::Index i = 0; i < r; ++i) {
        for (Eigen::Index j = 0; j < r; ++j) {
            const scalar v = m(i, j);
            std::int64_t bytes = 0;
            if constexpr (std::is_floating_point_v<scalar>) {
                if (!std::isfinite(v)) throw invalid_argument(detail::entry_name(i, j) + " is not finite");
                if (v < 0)
                    throw invalid_argument(detail::entry_name(i, j) + " = " +
                                           detail::format_number(static_cast<double>(v)) + " is negative");
                if (v != std::floor(v))
                    throw invalid_argument(detail::entry_name(i, j) + " = " +
                                           detail::format_number(static_cast<double>(v)) +
                                           " is not a whole number of bytes");
                if (v >= 9.2233720368547758e18)
                    throw invalid_argument(detail::entry_name(i, j) + " = " +
                                           detail::format_number(static_cast<double>(v)) +
                                           " does not fit in int64 bytes");
                bytes = static_cast<std::int64_t>(v);
            } else {
                if constexpr (std::is_signed_v<scalar>) {
                    if (v < 0)
                        throw invalid_argument(detail::entry_name(i, j) + " = " + std::to_string(v) + " is negative");
                }
                if constexpr (sizeof(scalar) >= sizeof(std::int64_t) && !std::is_signed_v<scalar>) {
                    if (v > static_cast<scalar>(std::numeric_limits<std::int64_t>::max()))
                        throw invalid_argument(detail::entry_name(i, j) + " = " + std::to_string(v) +
                                               " does not fit in int64 bytes");
                }
                bytes = static_cast<std::int64_t>(v);
            }
            total = detail::checked_add(total, bytes, "total traffic");
        }
    }
}

/// Validates `m` against `topo` and returns it as exact int64 bytes. O(R^2).
template <class Derived>
[[nodiscard]] traffic_matrix make_traffic(const Eigen::MatrixBase<Derived>& m, const topology& topo) {
    validate_traffic(m, topo);
    return m.template cast<std::int64_t>();
}

/// Tile (s, d): the G x G block of bytes that server s's GPUs send to server d's GPUs.
[[nodiscard]] inline traffic_matrix tile(const traffic_matrix& m, const topology& topo, int s, int d) {
    const int g = topo.gpus_per_server;
    return m.block(Eigen::Index{s} * g, Eigen::Index{d} * g, g, g);
}

/// Bytes each rank sends (row sums), length R.
[[nodiscard]] inline std::vector<std::int64_t> send_totals(const traffic_matrix& m) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(m.rows()), 0);
    for (Eigen::Index i = 0; i < m.rows(); ++i) out[static_cast<std::size_t>(i)] = m.row(i).sum();
    return out;
}

/// Bytes each rank receives (column sums), length R.
[[nodiscard]] inline std::vector<std::int64_t> recv_totals(const traffic_matrix& m) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(m.cols()), 0);
    for (Eigen::Index i = 0; i < m.rows(); ++i)
        for (Eigen::Index j = 0; j < m.cols(); ++j) out[static_cast<std::size_t>(j)] += m(i, j);
    return out;
}

/// The rank that sends and receives the most bytes (the first of equals): the rank whose
/// program is usually the longest, which benchmarks time beside rank 0.
[[nodiscard]] inline int busiest_rank(const traffic_matrix& m) {
    const auto sent = send_totals(m);
    const auto received = recv_totals(m);
    std::size_t busiest = 0;
    for (std::size_t k = 1; k < sent.size(); ++k)
        if (sent[k] + received[k] > sent[busiest] + received[busiest]) busiest = k;
    return static_cast<int>(busiest);
}

/// The S x S server matrix: entry (s, d) is the sum of tile (s, d); the diagonal is the traffic
/// that stays inside a server. O(R^2).
[[nodiscard]] inline traffic_matrix server_matrix(const traffic_matrix& m, const topology& topo) {
    const int s_count = topo.servers;
    traffic_matrix out = traffic_matrix::Zero(s_count, s_count);
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
        const int s = topo.server_of(static_cast<int>(i));
        for (Eigen::Index j = 0; j < m.cols(); ++j) out(s, topo.server_of(static_cast<int>(j))) += m(i, j);
    }
    return out;
}

/// Per server: bytes sent to and received from other servers (the scale-out load).
struct server_load {
    std::vector<std::int64_t> send; ///< length S
    std::vector<std::int64_t> recv; ///< length S
};

/// Inter-server send and receive totals per server. O(R^2).
[[nodiscard]] inline server_load inter_server_load(const traffic_matrix& m, const topology& topo) {
    const traffic_matrix sm = server_matrix(m, topo);
    server_load load{std::vector<std::int64_t>(static_cast<std::size_t>(topo.servers), 0),
                     std::vector<std::int64_t>(static_cast<std::size_t>(topo.servers), 0)};
    for (int s = 0; s < topo.servers; ++s)
        for (int d = 0; d < topo.servers; ++d)
            if (s != d) {
                load.send[static_cast<std::size_t>(s)] += sm(s, d);
                load.recv[static_cast<std::size_t>(d)] += sm(s, d);
            }
    return load;
}

/// Total bytes in the matrix.
[[nodiscard]] inline std::int64_t total_bytes(const traffic_matrix& m) {
    return m.sum();
}

} // namespace fast
