#pragma once
// Scratch layout (the end of emission): every slot that needs staging gets scratch regions of
// its own, each alive from the first step that writes it to the last step that reads it. Once
// all are known, each rank's regions are laid out first-fit by lifetime: regions alive in
// overlapping steps never share bytes (a step that reads one never writes another in the same
// place), and the others reuse the same memory.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace fast::detail {

/// A scratch region of `rank`, alive from step `first` to step `last`, `size` bytes at `base`
/// once laid out.
struct scratch_region {
    std::int64_t size = 0;
    std::int64_t base = 0;
    std::int32_t rank = 0;
    std::int32_t first = 0;
    std::int32_t last = 0;
};

/// Lays out scratch regions (region 0 stands for no region and is left alone); its buffers are
/// kept between plans.
class scratch_layout {
public:
    /// Gives every region a base: per rank, in order of first step (longer-lived and larger
    /// first), at the lowest offset free of every region whose lifetime overlaps its own.
    /// O(regions log regions + regions x live regions).
    void lay_out(std::vector<scratch_region>& regions, std::size_t ranks) {
        by_rank_.assign(ranks + 1, 0);
        for (std::size_t k = 1; k < regions.size(); ++k) ++by_rank_[static_cast<std::size_t>(regions[k].rank) + 1];
        for (std::size_t k = 0; k < ranks; ++k) by_rank_[k + 1] += by_rank_[k];
        order_.resize(regions.size() - 1);
        fill_.assign(by_rank_.begin(), by_rank_.end() - 1);
        for (std::uint32_t k = 1; k < regions.size(); ++k)
            order_[fill_[static_cast<std::size_t>(regions[k].rank)]++] = k;
        for (std::size_t k = 0; k < ranks; ++k)
            place(regions, order_.begin() + static_cast<std::ptrdiff_t>(by_rank_[k]),
                  order_.begin() + static_cast<std::ptrdiff_t>(by_rank_[k + 1]));
    }

    /// The same for the regions of `rank` alone; returns their ids (valid until the next call).
    std::span<const std::uint32_t> lay_out_rank(std::vector<scratch_region>& regions, int rank) {
        order_.clear();
        for (std::uint32_t k = 1; k < regions.size(); ++k)
            if (regions[k].rank == rank) order_.push_back(k);
        place(regions, order_.begin(), order_.end());
        return order_;
    }

private:
    // Lays out one rank's regions [first, last) of order_.
    void place(std::vector<scratch_region>& regions, std::vector<std::uint32_t>::iterator first,
               std::vector<std::uint32_t>::iterator last) {
        std::sort(first, last, [&](std::uint32_t x, std::uint32_t y) {
            const scratch_region& a = regions[x];
            const scratch_region& b = regions[y];
            if (a.first != b.first) return a.first < b.first;
            if (a.last != b.last) return a.last > b.last;
            if (a.size != b.size) return a.size > b.size;
            return x < y;
        });
        active_.clear(); // placed regions that may still overlap, by base
        for (auto it = first; it != last; ++it) {
            scratch_region& x = regions[*it];
            // Regions that ended before this one starts no longer constrain it.
            std::erase_if(active_, [&](std::uint32_t y) { return regions[y].last < x.first; });
            std::int64_t base = 0;
            for (const std::uint32_t y : active_) { // sorted by base
                const scratch_region& z = regions[y];
                if (z.size == 0) continue;
                if (base + x.size <= z.base) break;
                base = std::max(base, z.base + z.size);
            }
            x.base = base;
            active_.insert(
                std::upper_bound(active_.begin(), active_.end(), *it,
                                 [&](std::uint32_t y, std::uint32_t z) { return regions[y].base < regions[z].base; }),
                *it);
        }
    }

    std::vector<std::size_t> by_rank_;
    std::vector<std::size_t> fill_;
    std::vector<std::uint32_t> order_;
    std::vector<std::uint32_t> active_; // placed regions that may still overlap, by base
};

} // namespace fast::detail
