#pragma once
/// \file matching.hpp
/// Perfect matchings in dense bipartite graphs (n rows, n columns), warm-startable: the matching
/// survives between calls, so after a Birkhoff-von Neumann stage only the rows whose matched
/// edge disappeared need new augmenting paths. Two graph forms: any edge predicate
/// (Hopcroft-Karp), and bit rows (`bit_rows`), where a breadth-first search visits each column
/// once and reads 64 columns per word: O(n^2 / 64) per augmenting path.

#include <concepts>
#include <cstdint>
#include <limits>
#include <vector>

namespace fast {

/// An n x n 0/1 matrix stored as bit rows: row r, column c is bit c % 64 of word
/// r * words() + c / 64.
class bit_rows {
public:
    void reset(int n) {
        rows_ = n;
        words_ = (n + 63) / 64;
        bits_.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(words_), 0);
    }
    [[nodiscard]] int size() const noexcept { return rows_; }
    [[nodiscard]] int words() const noexcept { return words_; }
    [[nodiscard]] bool test(int r, int c) const noexcept { return (row(r)[c >> 6] >> (c & 63)) & 1U; }
    void set(int r, int c) noexcept { row(r)[c >> 6] |= std::uint64_t{1} << (c & 63); }
    void clear(int r, int c) noexcept { row(r)[c >> 6] &= ~(std::uint64_t{1} << (c & 63)); }
    [[nodiscard]] const std::uint64_t* row(int r) const noexcept {
        return bits_.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(words_);
    }
    [[nodiscard]] std::uint64_t* row(int r) noexcept {
        return bits_.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(words_);
    }

private:
    int rows_ = 0;
    int words_ = 0;
    std::vector<std::uint64_t> bits_;
};

class bipartite_matching {
public:
    bipartite_matching() = default;
    explicit bipartite_matching(int n) { reset(n); }

    /// Forgets the matching and resizes to n x n.
    void reset(int n) {
        rows_ = n;
        col_of_.assign(static_cast<std::size_t>(n), -1);
        row_of_.assign(static_cast<std::size_t>(n), -1);
        dist_.assign(static_cast<std::size_t>(n), 0);
        next_col_.assign(static_cast<std::size_t>(n), 0);
        queue_.reserve(static_cast<std::size_t>(n));
        search_.assign(static_cast<std::size_t>(n), 0);
        parent_.assign(static_cast<std::size_t>(n), 0);
        path_.reserve(static_cast<std::size_t>(n));
        visited_.assign(static_cast<std::size_t>(n), 0);
        stamp_ = 0;
        masks_valid_ = false;
    }

    /// Drops row's matched pair, if any (its row and column become free). With grow, a caller
    /// that removes matched edges itself skips complete's scan for them.
    void unmatch(int row) noexcept {
        const int c = col_of_[static_cast<std::size_t>(row)];
        if (c < 0) return;
        col_of_[static_cast<std::size_t>(row)] = -1;
        row_of_[static_cast<std::size_t>(c)] = -1;
        if (masks_valid_) {
            free_rows_[static_cast<std::size_t>(row >> 6)] |= std::uint64_t{1} << (row & 63);
            free_[static_cast<std::size_t>(c >> 6)] |= std::uint64_t{1} << (c & 63);
        }
    }

    [[nodiscard]] int size() const noexcept { return rows_; }
    /// Column matched to `row`, or -1.
    [[nodiscard]] int col_of(int row) const noexcept { return col_of_[static_cast<std::size_t>(row)]; }
    /// Row matched to `col`, or -1.
    [[nodiscard]] int row_of(int col) const noexcept { return row_of_[static_cast<std::size_t>(col)]; }
    [[nodiscard]] const std::vector<int>& cols() const noexcept { return col_of_; }

    /// Drops matched pairs whose edge no longer exists, then augments until the matching is
    /// maximum. Returns true when it is perfect. `edge(row, col)` must be cheap. With many free
    /// rows (a cold start) it runs Hopcroft-Karp phases, O(n^2 sqrt(n)); with few (a warm start
    /// after a stage removed some edges) one depth-first augmenting path per free row, which
    /// stops at the first free column it reaches, O(n^2) per row at worst.
    template <class Edge>
        requires std::predicate<Edge&, int, int>
    bool complete(Edge&& edge) {
        int free_rows = drop_missing(edge);
        if (free_rows * free_rows <= rows_) {
            for (int r = 0; r < rows_ && free_rows > 0; ++r) {
                if (col_of_[static_cast<std::size_t>(r)] >= 0) continue;
                if (!augment_simple(r, edge)) return false; // no path now: none later either
                --free_rows;
            }
            return true;
        }
        while (free_rows > 0) {
            if (!layer(edge)) break;
            int grown = 0;
            for (int r = 0; r < rows_; ++r)
                if (col_of_[static_cast<std::size_t>(r)] < 0 && augment(r, edge)) ++grown;
            if (grown == 0) break;
            free_rows -= grown;
        }
        return free_rows == 0;
    }

    /// The same for a graph given as bit rows (edge (r, c) iff bit set): drops matched pairs
    /// whose bit is clear, then grows the matching by one shortest augmenting path (a
    /// breadth-first search over columns) per free row, in row order. Returns true when perfect.
    /// A free row without a path now has none after later augmentations either, so it fails at
    /// once; its search tree is kept (see can_grow).
    bool complete(const bit_rows& g) {
        const auto edge = [&](int r, int c) { return g.test(r, c); };
        drop_missing(edge);
        return grow(g);
    }

    /// complete(bit_rows) for a caller that has dropped every matched pair whose edge it
    /// removed (unmatch) since the last complete or grow: no scan of the rows. O(free rows x
    /// search).
    bool grow(const bit_rows& g) {
        if (!masks_valid_) {
            const auto uw = static_cast<std::size_t>(g.words());
            free_.assign(uw, 0);
            free_rows_.assign(uw, 0);
            for (int k = 0; k < rows_; ++k) {
                if (row_of_[static_cast<std::size_t>(k)] < 0)
                    free_[static_cast<std::size_t>(k >> 6)] |= std::uint64_t{1} << (k & 63);
                if (col_of_[static_cast<std::size_t>(k)] < 0)
                    free_rows_[static_cast<std::size_t>(k >> 6)] |= std::uint64_t{1} << (k & 63);
            }
            masks_valid_ = true;
        }
        // Up to 128 columns: the word loops unrolled.
        if (g.words() == 1) return complete_words<1>(g);
        if (g.words() == 2) return complete_words<2>(g);
        return complete_words<0>(g);
    }

    /// After complete(bit_rows) returned false, and with edges only added since: whether adding
    /// edge (r, c) can change its answer. The row that failed has a path again only if a new
    /// edge leaves its search tree (a row it reached) for a column it did not reach; until then
    /// complete would search the same tree, fail again and change nothing, so a caller that
    /// adds edges in rounds may skip it.
    [[nodiscard]] bool can_grow(int r, int c) const noexcept {
        return ((tree_rows_[static_cast<std::size_t>(r >> 6)] >> (r & 63)) & 1U) != 0 &&
               ((seen_[static_cast<std::size_t>(c >> 6)] >> (c & 63)) & 1U) == 0;
    }

private:
    // Drops the matched pairs whose edge no longer exists; returns how many rows are free.
    template <class Edge>
    int drop_missing(Edge& edge) {
        masks_valid_ = false;
        int free_rows = 0;
        for (int r = 0; r < rows_; ++r) {
            const int c = col_of_[static_cast<std::size_t>(r)];
            if (c >= 0 && !edge(r, c)) {
                col_of_[static_cast<std::size_t>(r)] = -1;
                row_of_[static_cast<std::size_t>(c)] = -1;
            }
            if (col_of_[static_cast<std::size_t>(r)] < 0) ++free_rows;
        }
        return free_rows;
    }

    // Flips the augmenting path in path_ (augment, augment_simple): each row on it takes the
    // column it is scanning.
    void flip_path() noexcept {
        for (std::size_t k = path_.size(); k-- > 0;) {
            const int row = path_[k];
            const int col = next_col_[static_cast<std::size_t>(row)];
            col_of_[static_cast<std::size_t>(row)] = col;
            row_of_[static_cast<std::size_t>(col)] = row;
        }
    }

    // grow with `fixed` words per row (0: as many as the graph has): one breadth-first search
    // per free row, in row order (free_rows_ and free_ are the free rows and columns).
    template <int fixed>
    bool complete_words(const bit_rows& g) {
        const auto uw = static_cast<std::size_t>(fixed > 0 ? fixed : g.words());
        if (seen_.size() != uw) {
            seen_.assign(uw, 0);
            tree_rows_.assign(uw, 0);
        }
        for (std::size_t rw = 0; rw < uw; ++rw)
            // A copy: augmenting clears the root's bit in free_rows_.
            for (std::uint64_t roots = free_rows_[rw]; roots != 0; roots &= roots - 1)
                if (!augment_words<fixed>(g, static_cast<int>(rw) * 64 + __builtin_ctzll(roots))) return false;
        return true;
    }

    // One shortest augmenting path from free row `root`, flipped; false (with the search tree
    // kept for can_grow) if there is none.
    template <int fixed>
    bool augment_words(const bit_rows& g, int root) {
        const auto uw = static_cast<std::size_t>(fixed > 0 ? fixed : g.words());
        std::uint64_t* const seen = seen_.data();
        std::uint64_t* const free = free_.data();
        int* const col_of = col_of_.data();
        int* const row_of = row_of_.data();
        int* const parent = parent_.data();
        int* const queue = search_.data(); // each row enters once
        for (std::size_t w = 0; w < uw; ++w) seen[w] = 0;
        std::size_t queued = 1;
        queue[0] = root;
        int free_col = -1;
        // Breadth-first: the first row in queue order with a free column ends the search at its
        // lowest free column. A row is checked when it is queued (expanding only appends rows,
        // and a free column is never seen: a row is expanded only once it has none), so the
        // search stops at the first such row without expanding the rest of its level. Each
        // column is reached first from its first row.
        auto hit_of = [&](int r) {
            const std::uint64_t* row = g.row(r);
            for (std::size_t w = 0; w < uw; ++w)
                if (const std::uint64_t hit = row[w] & free[w]) {
                    free_col = static_cast<int>(w) * 64 + __builtin_ctzll(hit);
                    parent[free_col] = r;
                    return true;
                }
            return false;
        };
        if (!hit_of(root)) {
            for (std::size_t head = 0; head < queued && free_col < 0; ++head) {
                const int r = queue[head];
                const std::uint64_t* row = g.row(r);
                for (std::size_t w = 0; w < uw && free_col < 0; ++w) {
                    std::uint64_t fresh = row[w] & ~seen[w];
                    seen[w] |= fresh;
                    for (; fresh != 0; fresh &= fresh - 1) {
                        const int c = static_cast<int>(w) * 64 + __builtin_ctzll(fresh);
                        parent[c] = r;
                        queue[queued++] = row_of[c];
                        if (hit_of(row_of[c])) break;
                    }
                }
            }
        }
        if (free_col < 0) {
            // The failed root's tree: the rows it reached (seen holds its columns).
            std::fill(tree_rows_.begin(), tree_rows_.end(), 0);
            for (std::size_t k = 0; k < queued; ++k)
                tree_rows_[static_cast<std::size_t>(queue[k] >> 6)] |= std::uint64_t{1} << (queue[k] & 63);
            return false;
        }
        free[free_col >> 6] &= ~(std::uint64_t{1} << (free_col & 63));
        free_rows_[static_cast<std::size_t>(root >> 6)] &= ~(std::uint64_t{1} << (root & 63));
        // Flip the path back to the root: each row on it takes the column that reached it.
        for (int c = free_col; c >= 0;) {
            const int r = parent[c];
            const int previous = col_of[r];
            col_of[r] = c;
            row_of[c] = r;
            c = r == root ? -1 : previous;
        }
        return true;
    }

    static constexpr int unreached = std::numeric_limits<int>::max();

    // BFS from all free rows along alternating paths; true if a free column is reachable.
    template <class Edge>
    bool layer(Edge& edge) {
        queue_.clear();
        for (int r = 0; r < rows_; ++r) {
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
            for (int c = 0; c < rows_; ++c) {
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
        for (int r = 0; r < rows_; ++r) next_col_[static_cast<std::size_t>(r)] = 0;
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
            for (; c < rows_; ++c) {
                if (!edge(r, c)) continue;
                const int r2 = row_of_[static_cast<std::size_t>(c)];
                if (r2 < 0) {
                    flip_path();
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

    // Kuhn's augmenting path from free row `root` (iterative DFS, each column visited once).
    template <class Edge>
    bool augment_simple(int root, Edge& edge) {
        ++stamp_;
        if (visited_.size() != static_cast<std::size_t>(rows_)) visited_.assign(static_cast<std::size_t>(rows_), 0);
        path_.clear();
        path_.push_back(root);
        next_col_[static_cast<std::size_t>(root)] = 0;
        while (!path_.empty()) {
            const int r = path_.back();
            int& c = next_col_[static_cast<std::size_t>(r)];
            bool advanced = false;
            for (; c < rows_; ++c) {
                if (visited_[static_cast<std::size_t>(c)] == stamp_ || !edge(r, c)) continue;
                visited_[static_cast<std::size_t>(c)] = stamp_;
                const int r2 = row_of_[static_cast<std::size_t>(c)];
                if (r2 < 0) {
                    flip_path();
                    return true;
                }
                next_col_[static_cast<std::size_t>(r2)] = 0;
                path_.push_back(r2);
                advanced = true;
                break;
            }
            if (!advanced) {
                path_.pop_back();
                if (!path_.empty()) ++next_col_[static_cast<std::size_t>(path_.back())];
            }
        }
        return false;
    }

    int rows_ = 0;
    std::uint32_t stamp_ = 0;
    std::vector<std::uint32_t> visited_;
    std::vector<int> col_of_;
    std::vector<int> row_of_;
    std::vector<int> dist_;
    std::vector<int> next_col_;
    std::vector<int> queue_;
    std::vector<int> search_; // complete(bit_rows): the rows of a search, in order
    std::vector<int> path_;
    std::vector<std::uint64_t> seen_;      // columns reached, one bit each
    std::vector<std::uint64_t> free_;      // grow: unmatched columns, one bit each
    std::vector<std::uint64_t> free_rows_; // grow: unmatched rows, one bit each
    bool masks_valid_ = false;             // free_ and free_rows_ match the matching
    std::vector<std::uint64_t> tree_rows_; // complete(bit_rows) failed: the rows its last search reached
    std::vector<int> parent_;              // per column: the row that reached it
};

} // namespace fast
