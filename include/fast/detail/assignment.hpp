#pragma once
// The assignment problem: each of n rows to its own column of m >= n at the least total cost.
// The Hungarian method with potentials (Kuhn-Munkres, one shortest augmenting path per row):
// O(n^2 m). The planner solves it with up to G rows and G columns (which rail carries which
// slot of a step), so it must be exact and cheap at small sizes, and allocate nothing once its
// buffers have grown.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "assert.hpp"

namespace fast::detail {

/// Buffers of min_cost_assignment, kept between calls.
struct assignment_workspace {
    std::vector<std::int64_t> row_potential; // 1-based; index 0 is the virtual row's
    std::vector<std::int64_t> col_potential;
    std::vector<std::int64_t> slack;    // per column: least reduced cost from the tree
    std::vector<std::size_t> row_of;    // per column (1-based): its row, 0 if none
    std::vector<std::size_t> came_from; // per column: the previous column on the path
    std::vector<std::uint8_t> in_tree;  // per column
    std::vector<std::uint8_t> matched;  // per row (1-based)
};

/// Costs times columns stay below this, so that potentials and reduced costs cannot overflow.
inline constexpr std::int64_t max_cost_sum = std::int64_t{1} << 61;

/// Whether every cost is non-negative and at most max_cost_sum / cols.
[[nodiscard]] inline bool costs_fit(std::span<const std::int64_t> cost, std::size_t cols) noexcept {
    std::int64_t top = 0;
    for (const std::int64_t c : cost) {
        if (c < 0) return false;
        top = std::max(top, c);
    }
    return cols == 0 || top <= max_cost_sum / static_cast<std::int64_t>(cols);
}

namespace hungarian {

constexpr std::int64_t unreached = std::numeric_limits<std::int64_t>::max();

// The problem: rows x cols costs, rows and columns numbered from 1 (0 is the virtual column that
// holds the row being added).
struct problem {
    std::span<const std::int64_t> cost;
    std::size_t rows;
    std::size_t cols;

    // Row r's costs: line(r)[j - 1] is column j's.
    [[nodiscard]] const std::int64_t* line(std::size_t r) const noexcept { return cost.data() + (r - 1) * cols; }
};

// Rows start at their cheapest column (u = the row's least cost keeps every reduced cost
// non-negative), the first row to want a column taking it.
inline void start_rows(const problem& p, assignment_workspace& ws) {
    ws.row_potential.assign(p.rows + 1, 0);
    ws.col_potential.assign(p.cols + 1, 0);
    ws.row_of.assign(p.cols + 1, 0);
    ws.came_from.assign(p.cols + 1, 0);
    ws.slack.resize(p.cols + 1);
    ws.in_tree.resize(p.cols + 1);
    ws.matched.assign(p.rows + 1, 0);
    for (std::size_t row = 1; row <= p.rows; ++row) {
        const std::int64_t* line = p.line(row);
        const std::size_t j = static_cast<std::size_t>(std::min_element(line, line + p.cols) - line) + 1;
        ws.row_potential[row] = line[j - 1];
        if (ws.row_of[j] == 0) {
            ws.row_of[j] = row;
            ws.matched[row] = 1;
        }
    }
}

// One growth of the tree: the column it holds (`col`) joins it; the potentials move by the
// least slack to a column outside, which becomes tight and is returned.
inline std::size_t grow_tree(const problem& p, std::size_t col, assignment_workspace& ws) {
    std::int64_t* u = ws.row_potential.data();
    std::int64_t* v = ws.col_potential.data();
    const std::size_t* row_of = ws.row_of.data();
    std::int64_t* slack = ws.slack.data();
    std::uint8_t* in_tree = ws.in_tree.data();
    in_tree[col] = 1;
    const std::size_t r = row_of[col];
    const std::int64_t* line = p.line(r);
    const std::int64_t base = u[r];
    std::int64_t delta = unreached;
    std::size_t next = 0;
    for (std::size_t j = 1; j <= p.cols; ++j) {
        if (in_tree[j]) continue;
        const std::int64_t reduced = line[j - 1] - base - v[j];
        if (reduced < slack[j]) {
            slack[j] = reduced;
            ws.came_from[j] = col;
        }
        if (slack[j] < delta) {
            delta = slack[j];
            next = j;
        }
    }
    for (std::size_t j = 0; j <= p.cols; ++j) {
        if (in_tree[j]) {
            u[row_of[j]] += delta;
            v[j] -= delta;
        } else {
            slack[j] -= delta;
        }
    }
    return next;
}

// Adds `row`: grows a tree of tight edges from it (held by the virtual column 0) until it
// reaches a free column, then flips the path.
inline void add_row(const problem& p, std::size_t row, assignment_workspace& ws) {
    ws.row_of[0] = row;
    std::fill(ws.slack.begin(), ws.slack.end(), unreached);
    std::fill(ws.in_tree.begin(), ws.in_tree.end(), std::uint8_t{0});
    std::size_t col = 0;
    do {
        col = grow_tree(p, col, ws);
    } while (ws.row_of[col] != 0);
    while (col != 0) {
        const std::size_t prev = ws.came_from[col];
        ws.row_of[col] = ws.row_of[prev];
        col = prev;
    }
}

} // namespace hungarian

/// Writes to `col_of_row` (`rows` entries) an assignment of the rows to distinct columns that
/// minimises the sum of cost[row * cols + col], for rows <= cols. Costs must be non-negative and
/// at most max_cost_sum / cols (costs_fit; asserted).
inline void min_cost_assignment(std::span<const std::int64_t> cost, std::size_t rows, std::size_t cols,
                                std::span<std::size_t> col_of_row, assignment_workspace& ws) {
    FAST_ASSERT(rows <= cols && cost.size() == rows * cols && col_of_row.size() == rows,
                "min_cost_assignment: a cost per row and column, and no more rows than columns");
    FAST_ASSERT(costs_fit(cost, cols), "min_cost_assignment: costs non-negative and at most max_cost_sum / cols");
    const hungarian::problem p{cost, rows, cols};
    hungarian::start_rows(p, ws);
    // Each row that found its column taken takes an augmenting path.
    for (std::size_t row = 1; row <= rows; ++row)
        if (!ws.matched[row]) hungarian::add_row(p, row, ws);
    for (std::size_t j = 1; j <= cols; ++j)
        if (ws.row_of[j] != 0) col_of_row[ws.row_of[j] - 1] = j - 1;
}

} // namespace fast::detail
