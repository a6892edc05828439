#pragma once
// Decomposition (the planner's stage 2): a non-negative n x n matrix, stored flat, padded to
// equal line sums (pad_flat) and written as a sum of weighted permutations (decompose_flat),
// each a perfect matching on the positive entries (matching.hpp). fast::pad_to_regular and
// fast::decompose (bvn.hpp) are the public entry points.

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "../decomposition.hpp"
#include "../error.hpp"
#include "../matching.hpp"
#include "../traffic.hpp"
#include "assert.hpp"
#include "tuning.hpp"

namespace fast::detail {

/// Pads the n x n row-major matrix `a` in place to line sums L = its largest line sum. Padding
/// goes only to rows and columns below L (a maximal line is never touched). Returns L.
/// O(n^2).
inline std::int64_t pad_flat(std::vector<std::int64_t>& a, int n, std::vector<std::int64_t>& row_deficit,
                             std::vector<std::int64_t>& col_deficit) {
    const auto un = static_cast<std::size_t>(n);
    row_deficit.assign(un, 0);
    col_deficit.assign(un, 0);
    for (std::size_t r = 0; r < un; ++r)
        for (std::size_t c = 0; c < un; ++c) {
            if (__builtin_add_overflow(row_deficit[r], a[r * un + c], &row_deficit[r]) ||
                __builtin_add_overflow(col_deficit[c], a[r * un + c], &col_deficit[c]))
                throw invalid_argument("pad: line sum of row " + std::to_string(r) + " or column " + std::to_string(c) +
                                       " overflows int64");
        }
    std::int64_t l = 0;
    for (std::size_t k = 0; k < un; ++k) l = std::max({l, row_deficit[k], col_deficit[k]});
    for (std::size_t k = 0; k < un; ++k) {
        row_deficit[k] = l - row_deficit[k];
        col_deficit[k] = l - col_deficit[k];
    }
    // North-west corner rule over the deficient lines: both deficits sum to the same total.
    std::size_t c = 0;
    for (std::size_t r = 0; r < un; ++r) {
        while (row_deficit[r] > 0) {
            while (col_deficit[c] == 0) ++c;
            const std::int64_t add = std::min(row_deficit[r], col_deficit[c]);
            a[r * un + c] += add;
            row_deficit[r] -= add;
            col_deficit[c] -= add;
        }
    }
    return l;
}

/// Buffers of decompose_flat, kept between calls.
struct decompose_workspace {
    bipartite_matching matching;
    /// Restart the matching from scratch at every stage instead of repairing the last one: what
    /// warm starts save (benchmarks/planner_bench's decompose_cold), never what plans use.
    bool cold_starts = false;
    bit_rows edges;
    // Entries (r * n + c) by value, lazily: bucket v is the list from first[v] through
    // next_entry (an entry is in at most one bucket: it leaves hers when it becomes an edge).
    static constexpr std::uint32_t end_of_list = UINT32_MAX;
    std::vector<std::uint32_t> first;      // per value
    std::vector<std::uint32_t> next_entry; // per entry
    std::vector<std::uint64_t> filled;     // bit v: bucket v is not empty

    void add(std::size_t value, std::uint32_t entry) {
        next_entry[entry] = first[value];
        first[value] = entry;
        filled[value >> 6] |= std::uint64_t{1} << (value & 63);
    }
    /// The largest value at most `v` whose bucket is not empty, or 0.
    [[nodiscard]] std::size_t filled_at_most(std::size_t v) const noexcept {
        for (std::size_t w = v >> 6;; --w) {
            const std::uint64_t below =
                (v >> 6) == w && (v & 63) != 63 ? (std::uint64_t{1} << ((v & 63) + 1)) - 1 : ~std::uint64_t{0};
            if (const std::uint64_t bits = filled[w] & below)
                return w * 64 + 63 - static_cast<std::size_t>(__builtin_clzll(bits));
            if (w == 0) return 0;
        }
    }
    void empty(std::size_t value) {
        first[value] = end_of_list;
        filled[value >> 6] &= ~(std::uint64_t{1} << (value & 63));
    }
};

/// Bottleneck stages of the regular N x N row-major matrix `a` for N <= 4, consuming it: each
/// stage is the permutation whose smallest entry is largest (the first in lexicographic order
/// on ties), found among all N! <= 24. At this size (clusters of up to four servers) that costs
/// less than repairing matchings. A permutation through a zero entry never comes back (entries
/// only shrink), so each search takes the smallest entry of the permutations still alive and
/// drops those that died: after the first stages only a few are left, fewer than a stage's
/// entries pass through.
template <int N>
void decompose_by_permutations(std::vector<std::int64_t>& a, decomposition& out) {
    static_assert(N >= 2 && N <= 4);
    constexpr std::size_t count = N == 2 ? 2 : N == 3 ? 6 : 24;
    constexpr auto n = static_cast<std::size_t>(N);
    // Permutation k in lexicographic order takes entry entries[k][r] = r * N + column of row r.
    static constexpr auto entries = [] {
        std::array<std::array<std::uint8_t, N>, count> all{};
        std::array<std::uint8_t, N> p{};
        std::iota(p.begin(), p.end(), std::uint8_t{0});
        for (auto& x : all) {
            for (std::size_t r = 0; r < n; ++r) x[r] = static_cast<std::uint8_t>(r * n + p[r]);
            std::next_permutation(p.begin(), p.end());
        }
        return all;
    }();
    std::array<std::uint8_t, count> live{};
    std::iota(live.begin(), live.end(), std::uint8_t{0});
    std::size_t live_count = count;
    std::int64_t remaining = 0; // the common line sum still to decompose (row 0's)
    for (std::size_t c = 0; c < n; ++c) remaining += a[c];
    while (remaining > 0) {
        std::int64_t w = 0;
        std::size_t best = 0;
        std::size_t kept = 0;
        for (std::size_t j = 0; j < live_count; ++j) {
            const std::uint8_t k = live[j];
            std::int64_t smallest = a[entries[k][0]];
            for (std::size_t r = 1; r < n; ++r) smallest = std::min(smallest, a[entries[k][r]]);
            if (smallest == 0) continue;
            live[kept++] = k;
            best = smallest > w ? k : best;
            w = std::max(w, smallest);
        }
        live_count = kept;
        FAST_ASSERT(w > 0, "decompose: the matrix has equal line sums");
        for (std::size_t r = 0; r < n; ++r) {
            const std::uint8_t e = entries[best][r];
            a[e] -= w;
            out.perms.push_back(static_cast<std::int32_t>(e - r * n));
        }
        out.weights.push_back(w);
        remaining -= w;
    }
}

namespace bvn {

// A decomposition in progress: the size x size matrix left, the threshold (entries at or above
// it are edges of ws.edges), and whether the entries below it are bucketed by value.
struct progress {
    std::vector<std::int64_t>& matrix;
    std::size_t size;
    std::int64_t threshold;
    bool buckets;
    decompose_workspace& workspace;
};

// Whether the bottleneck rule's entries are few enough values to bucket (quantised matrices):
// lowering the threshold then admits exactly the entries at the new value, instead of a scan.
[[nodiscard]] inline bool buckets_fit(matching_rule rule, std::int64_t top, std::size_t n) noexcept {
    return rule == matching_rule::bottleneck &&
           top <= tuning::bucket_values_per_entry * static_cast<std::int64_t>(n * n) + tuning::bucket_values_extra;
}

// The threshold graph of the matrix, and with buckets every entry below the threshold in the
// bucket of its value (values up to `top`).
inline void start(progress& p, std::int64_t top) {
    decompose_workspace& ws = p.workspace;
    ws.edges.reset(static_cast<int>(p.size));
    for (std::size_t r = 0; r < p.size; ++r)
        for (std::size_t c = 0; c < p.size; ++c)
            if (p.matrix[r * p.size + c] >= p.threshold) ws.edges.set(static_cast<int>(r), static_cast<int>(c));
    if (!p.buckets) return;
    // The last call's leftovers are in the buckets its bits name.
    for (std::size_t w = 0; w < ws.filled.size(); ++w)
        for (std::uint64_t bits = ws.filled[w]; bits != 0; bits &= bits - 1)
            ws.first[w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits))] = ws.end_of_list;
    const auto values = static_cast<std::size_t>(top) + 1;
    if (ws.first.size() < values) ws.first.resize(values, ws.end_of_list);
    ws.next_entry.resize(p.size * p.size);
    ws.filled.assign((values + 63) / 64, 0);
    for (std::size_t k = 0; k < p.size * p.size; ++k)
        if (p.matrix[k] > 0 && p.matrix[k] < p.threshold)
            ws.add(static_cast<std::size_t>(p.matrix[k]), static_cast<std::uint32_t>(k));
}

// Makes entry k an edge; `grows` becomes true if that can give the failed row a path.
inline void admit(progress& p, std::size_t k, bool& grows) {
    const int r = static_cast<int>(k / p.size);
    const int c = static_cast<int>(k % p.size);
    p.workspace.edges.set(r, c);
    grows = grows || p.workspace.matching.can_grow(r, c);
}

// The next value below the threshold that some entry still has, from the buckets (empty ones
// passed over; a bucket may hold only stale entries, whose value changed since), with its
// entries admitted; 1 if none.
inline std::int64_t admit_bucketed(progress& p, bool& grows) {
    decompose_workspace& ws = p.workspace;
    std::int64_t lower = p.threshold - 1;
    for (bool any = false;;) {
        const auto v = static_cast<std::int64_t>(ws.filled_at_most(static_cast<std::size_t>(lower)));
        if (v == 0) return 1;
        lower = v;
        for (std::uint32_t k = ws.first[static_cast<std::size_t>(lower)]; k != ws.end_of_list; k = ws.next_entry[k])
            if (p.matrix[k] == lower) {
                admit(p, k, grows);
                any = true;
            }
        ws.empty(static_cast<std::size_t>(lower));
        if (any || lower == 1) return lower;
        --lower;
    }
}

// The same by a scan of the matrix.
inline std::int64_t admit_scanned(progress& p, bool& grows) {
    std::int64_t next = 0;
    for (const std::int64_t v : p.matrix)
        if (v < p.threshold && v > next) next = v;
    const std::int64_t lower = std::max<std::int64_t>(next, 1);
    for (std::size_t k = 0; k < p.size * p.size; ++k)
        if (p.matrix[k] >= lower && p.matrix[k] < p.threshold) admit(p, k, grows);
    return lower;
}

// After a failed search: lowers the threshold to the next value some entry still has, and on
// while the entries it admits cannot give the row that failed a path (complete would fail
// again, changing nothing: see bipartite_matching::can_grow).
inline void lower_threshold(progress& p) {
    bool grows = false;
    while (!grows && p.threshold > 1) p.threshold = p.buckets ? admit_bucketed(p, grows) : admit_scanned(p, grows);
}

// Takes the matching as a stage: its smallest entry is the weight, subtracted along it; entries
// that fall below the threshold stop being edges (and their matched pairs are dropped, so the
// next search repairs only those rows). Returns the weight.
inline std::int64_t take_stage(progress& p, decomposition& out) {
    bipartite_matching& matching = p.workspace.matching;
    const int* col = matching.cols().data();
    std::int64_t* const matrix = p.matrix.data();
    const std::size_t n = p.size;
    std::int64_t w = INT64_MAX;
    for (std::size_t r = 0; r < n; ++r) w = std::min(w, matrix[r * n + static_cast<std::size_t>(col[r])]);
    const std::size_t at = out.perms.size();
    out.perms.resize(at + n);
    std::int32_t* perm = out.perms.data() + at;
    for (std::size_t r = 0; r < n; ++r) {
        const auto c = static_cast<std::size_t>(col[r]);
        perm[r] = static_cast<std::int32_t>(c);
        std::int64_t& v = matrix[r * n + c];
        v -= w;
        if (v >= p.threshold) continue;
        p.workspace.edges.clear(static_cast<int>(r), static_cast<int>(c));
        matching.unmatch(static_cast<int>(r)); // col[r] is -1 from here: r is not read again
        if (p.buckets && v > 0) p.workspace.add(static_cast<std::size_t>(v), static_cast<std::uint32_t>(r * n + c));
    }
    out.weights.push_back(w);
    return w;
}

} // namespace bvn

/// Decomposes the regular n x n row-major matrix `a` (all line sums equal), consuming it.
/// Each stage zeroes at least one entry, so there are at most n^2 - 2n + 2 stages (Marcus-Ree
/// bound of the Birkhoff algorithm). With `bottleneck`, a stage's smallest entry can never
/// exceed the previous stage's (entries only shrink), so the threshold only decreases: when no
/// perfect matching uses entries >= threshold, it drops to the next value present. Each stage
/// then has the largest smallest entry of any perfect matching (up to n = 4 by trying every
/// permutation: decompose_by_permutations, which may take another permutation on ties).
inline void decompose_flat(std::vector<std::int64_t>& a, int n, matching_rule rule, decomposition& out,
                           decompose_workspace& ws) {
    out.clear(n);
    if (rule == matching_rule::bottleneck && n >= 2 && n <= 4) {
        if (n == 2) decompose_by_permutations<2>(a, out);
        else if (n == 3) decompose_by_permutations<3>(a, out);
        else decompose_by_permutations<4>(a, out);
        return;
    }
    const auto un = static_cast<std::size_t>(n);
    std::int64_t remaining = 0; // the common line sum still to decompose (row 0's)
    std::int64_t top = 1;
    for (std::size_t c = 0; c < un; ++c) remaining += a[c];
    for (const std::int64_t v : a) top = std::max(top, v);
    if (remaining == 0) return;
    bvn::progress p{a, un, rule == matching_rule::any ? 1 : top, bvn::buckets_fit(rule, top, un), ws};
    ws.matching.reset(n); // a warm start from another matrix would make plans depend on history
    bvn::start(p, top);
    while (remaining > 0) {
        if (ws.cold_starts) ws.matching.reset(n);
        // The matched pairs whose edge a stage removed were dropped where it removed them.
        if (ws.cold_starts ? ws.matching.complete(ws.edges) : ws.matching.grow(ws.edges)) {
            remaining -= bvn::take_stage(p, out);
        } else {
            FAST_ASSERT(rule == matching_rule::bottleneck && p.threshold > 1,
                        "decompose: the matrix has equal line sums");
            bvn::lower_threshold(p);
        }
    }
}

/// Buffers of decompose_padded, kept between calls.
struct padding_workspace {
    std::vector<std::int64_t> row_deficit;
    std::vector<std::int64_t> col_deficit;
    decompose_workspace decompose;
};

/// Pads the n x n row-major matrix `a` to equal line sums and decomposes it (consuming it).
inline void decompose_padded(std::vector<std::int64_t>& a, int n, matching_rule rule, decomposition& out,
                             padding_workspace& ws) {
    pad_flat(a, n, ws.row_deficit, ws.col_deficit);
    decompose_flat(a, n, rule, out, ws.decompose);
}

inline std::vector<std::int64_t> to_flat(const traffic_matrix& m) {
    if (m.rows() != m.cols())
        throw invalid_argument("decompose: the matrix is " + std::to_string(m.rows()) + " x " +
                               std::to_string(m.cols()) + ", not square");
    if ((m.array() < 0).any()) throw invalid_argument("decompose: the matrix has a negative entry");
    std::vector<std::int64_t> a(static_cast<std::size_t>(m.size()));
    for (Eigen::Index r = 0; r < m.rows(); ++r)
        for (Eigen::Index c = 0; c < m.cols(); ++c) a[static_cast<std::size_t>(r * m.cols() + c)] = m(r, c);
    return a;
}

} // namespace fast::detail
