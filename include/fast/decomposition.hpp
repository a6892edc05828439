#pragma once
/// \file decomposition.hpp
/// The result of a Birkhoff-von Neumann decomposition (bvn.hpp): weighted permutations, each a
/// one-to-one stage, and the rule that picks each stage's permutation.

#include <cstdint>
#include <span>
#include <vector>

namespace fast {

/// Which perfect matching each stage takes.
enum class matching_rule {
    any,        ///< the warm-started matching on positive entries (the paper's algorithm)
    bottleneck, ///< a matching maximising its smallest entry: the largest possible stage first
};

/// Stages of a decomposition of a `rows` x `rows` matrix, stored flat: stage k maps row s to
/// column perm(k)[s] and carries weights[k].
struct decomposition {
    int rows = 0;
    std::vector<std::int32_t> perms; ///< stages * rows
    std::vector<std::int64_t> weights;

    [[nodiscard]] std::size_t size() const noexcept { return weights.size(); }
    [[nodiscard]] std::span<const std::int32_t> perm(std::size_t k) const noexcept {
        return {perms.data() + k * static_cast<std::size_t>(rows), static_cast<std::size_t>(rows)};
    }
    [[nodiscard]] std::int64_t total_weight() const noexcept {
        std::int64_t t = 0;
        for (const std::int64_t w : weights) t += w;
        return t;
    }
    void clear(int size) {
        rows = size;
        perms.clear();
        weights.clear();
    }
};

} // namespace fast
