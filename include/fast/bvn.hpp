#pragma once
/// \file bvn.hpp
/// Birkhoff-von Neumann decomposition with exact integer arithmetic: pad a non-negative square
/// matrix to equal row and column sums L, then write it as a sum of weighted permutation
/// matrices, each a perfect matching on the positive entries. Every permutation is a set of
/// one-to-one transfers (no incast), and the weights sum to L.
///
///     const fast::decomposition d = fast::decompose(fast::pad_to_regular(m), fast::matching_rule::bottleneck);
///     // stage k: row s sends d.weights[k] to column d.perm(k)[s]
///
/// The algorithm (bottleneck matchings, warm starts, value buckets) is
/// detail/bvn_decomposition.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include "decomposition.hpp"
#include "detail/bvn_decomposition.hpp"
#include "error.hpp"
#include "traffic.hpp"

namespace fast {

/// `m` padded to equal row and column sums L (its largest line sum); entries of maximal rows and
/// columns are unchanged. O(n^2).
[[nodiscard]] inline traffic_matrix pad_to_regular(const traffic_matrix& m) {
    std::vector<std::int64_t> a = detail::to_flat(m);
    std::vector<std::int64_t> rows;
    std::vector<std::int64_t> cols;
    detail::pad_flat(a, static_cast<int>(m.rows()), rows, cols);
    traffic_matrix out(m.rows(), m.cols());
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c) out(r, c) = a[static_cast<std::size_t>(r * m.cols() + c)];
    return out;
}

/// Decomposes a matrix with equal row and column sums L into weighted permutations whose
/// weights sum to L. Throws fast::invalid_argument if the line sums differ. At most
/// n^2 - 2n + 2 stages; O(stages * n^2 sqrt(n)) worst case, far less with warm starts.
[[nodiscard]] inline decomposition decompose(const traffic_matrix& regular, matching_rule rule = matching_rule::any) {
    std::vector<std::int64_t> a = detail::to_flat(regular);
    const int n = static_cast<int>(regular.rows());
    std::int64_t l = -1;
    for (int r = 0; r < n; ++r) {
        const std::int64_t row = regular.row(r).sum();
        const std::int64_t col = regular.col(r).sum();
        if (l < 0) l = row;
        if (row != l || col != l)
            throw invalid_argument("decompose: line sums differ (row " + std::to_string(r) + ": " +
                                   std::to_string(row) + ", column " + std::to_string(r) + ": " + std::to_string(col) +
                                   ", expected " + std::to_string(l) + "); pad_to_regular first");
    }
    detail::decompose_workspace ws;
    decomposition out;
    detail::decompose_flat(a, n, rule, out, ws);
    return out;
}

} // namespace fast
