#pragma once
/// \file matching.hpp
/// Perfect matchings in dense bipartite graphs (n rows, n columns, an edge wherever a predicate
/// holds), by Hopcroft-Karp, warm-startable: the matching survives between calls, so after a
/// Birkhoff-von Neumann stage only the rows whose matched edge disappeared need new augmenting
/// paths.

#include <cstdint>
#include <limits>
#include <vector>

namespace fast {

class bipartite_matching {
public:
    bipartite_matching() = default;
    explicit bipartite_matching(int n) { reset(n); }

    /// Forgets the matching and resizes to n x n.
    void reset(int n) {
        n_ = n;
        col_of_.assign(static_cast<std::size_t>(n), -1);
        row_of_.assign(static_cast<std::size_t>(n), -1);
        dist_.assign(static_cast<std::size_t>(n), 0);
        next_col_.assign(static_cast<std::size_t>(n), 0);
        queue_.reserve(static_cast<std::size_t>(n));
        path_.reserve(static_cast<std::size_t>(n));
    }

    [[nodiscard]] int size() const noexcept { return n_; }
    /// Column matched to `row`, or -1.
    [[nodiscard]] int col_of(int row) const noexcept { return col_of_[static_cast<std::size_t>(row)]; }
    /// Row matched to `col`, or -1.
    [[nodiscard]] int row_of(int col) const noexcept { return row_of_[static_cast<std::size_t>(col)]; }
    [[nodiscard]] const std::vector<int>& cols() const noexcept { return col_of_; }

    /// Drops matched pairs whose edge no longer exists, then augments with Hopcroft-Karp until
    /// the matching is maximum. Returns true when it is perfect. `edge(row, col)` must be cheap.
    /// O(n^2 sqrt(k)) for k unmatched rows at the start (dense scan of each row).
    template <class Edge>
    bool complete(Edge&& edge) {
        int free_rows = 0;
        for (int r = 0; r < n_; ++r) {
            const int c = col_of_[static_cast<std::size_t>(r)];
            if (c >= 0 && !edge(r, c)) {
                col_of_[static_cast<std::size_t>(r)] = -1;
                row_of_[static_cast<std::size_t>(c)] = -1;
            }
            if (col_of_[static_cast<std::size_t>(r)] < 0) ++free_rows;
        }
        while (free_rows > 0) {
            if (!layer(edge)) break;
            int grown = 0;
            for (int r = 0; r < n_; ++r)
                if (col_of_[static_cast<std::size_t>(r)] < 0 && augment(r, edge)) ++grown;
            if (grown == 0) break;
            free_rows -= grown;
        }
        return free_rows == 0;
    }

private:
    static constexpr int unreached = std::numeric_limits<int>::max();

    // BFS from all free rows along alternating paths; true if a free column is reachable.
    template <class Edge>
    bool layer(Edge& edge) {
        queue_.clear();
        for (int r = 0; r < n_; ++r) {
            if (col_of_[static_cast<std::size_t>(r)] < 0) {
                dist_[static_cast<std::size_t>(r)] = 0;
                queue_.push_back(r);
            } else {
                dist_[static_cast<std::size_t>(r)] = unreached;
            }
        }
        bool found = false;
        int limit = unreached;
        for (std::size_t head = 0; head < queue_.size(); ++head) {
            const int r = queue_[head];
            const int d = dist_[static_cast<std::size_t>(r)];
            if (d >= limit) break;
            for (int c = 0; c < n_; ++c) {
                if (!edge(r, c)) continue;
                const int r2 = row_of_[static_cast<std::size_t>(c)];
                if (r2 < 0) {
                    found = true;
                    limit = d + 1;
                } else if (dist_[static_cast<std::size_t>(r2)] == unreached) {
                    dist_[static_cast<std::size_t>(r2)] = d + 1;
                    queue_.push_back(r2);
                }
            }
        }
        for (int r = 0; r < n_; ++r) next_col_[static_cast<std::size_t>(r)] = 0;
        return found;
    }

    // Iterative DFS along the BFS layers from free row `root`; flips the path if it ends free.
    template <class Edge>
    bool augment(int root, Edge& edge) {
        path_.clear();
        path_.push_back(root);
        while (!path_.empty()) {
            const int r = path_.back();
            int& c = next_col_[static_cast<std::size_t>(r)];
            bool advanced = false;
            for (; c < n_; ++c) {
                if (!edge(r, c)) continue;
                const int r2 = row_of_[static_cast<std::size_t>(c)];
                if (r2 < 0) {
                    // Flip the path: each row on it takes the column it is scanning.
                    for (std::size_t k = path_.size(); k-- > 0;) {
                        const int pr = path_[k];
                        const int pc = next_col_[static_cast<std::size_t>(pr)];
                        col_of_[static_cast<std::size_t>(pr)] = pc;
                        row_of_[static_cast<std::size_t>(pc)] = pr;
                    }
                    return true;
                }
                if (dist_[static_cast<std::size_t>(r2)] == dist_[static_cast<std::size_t>(r)] + 1) {
                    path_.push_back(r2);
                    advanced = true;
                    break;
                }
            }
            if (!advanced) {
                dist_[static_cast<std::size_t>(r)] = unreached; // dead end for this phase
                path_.pop_back();
                if (!path_.empty()) ++next_col_[static_cast<std::size_t>(path_.back())];
            }
        }
        return false;
    }

    int n_ = 0;
    std::vector<int> col_of_;
    std::vector<int> row_of_;
    std::vector<int> dist_;
    std::vector<int> next_col_;
    std::vector<int> queue_;
    std::vector<int> path_;
};

} // namespace fast
