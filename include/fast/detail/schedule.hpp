#pragma once
// Stage schedules: which server sends how many bytes to which server, on which rail, in which
// scale-out step. Rails (GPU i of every server) are independent one-to-one fabrics, so each
// rail has its own sequence of slots; in a slot, every server sends to at most one server and
// receives from at most one (a permutation). Packing (packing.hpp) builds a schedule, shaping
// (shaping.hpp) orders and splits its steps, rail assignment (rail_assignment.hpp) chooses which
// rail carries which slot, and emission (emission.hpp) walks each (pair, rail) stream over its
// slots (stream_slots).

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace fast::detail {

struct stage_schedule {
    int servers = 0;
    int rails = 0;
    std::int32_t last_step = 0;      ///< the last scale-out step (steps are 1-based)
    std::vector<std::int32_t> perms; ///< permutations, `servers` entries each
    struct slot {
        std::int32_t rail = 0;
        std::int32_t step = 0;
        std::size_t perm = 0;  ///< index of the permutation
        std::size_t bytes = 0; ///< index of the slot's bytes (servers entries)
    };
    std::vector<slot> slots;
    std::vector<std::int64_t> bytes; ///< per slot and server: bytes it sends in the slot

    void clear(int s, int g) {
        servers = s;
        rails = g;
        last_step = 0;
        perms.clear();
        slots.clear();
        bytes.clear();
    }
    [[nodiscard]] std::span<const std::int32_t> perm_of(const slot& x) const noexcept {
        return {perms.data() + x.perm * static_cast<std::size_t>(servers), static_cast<std::size_t>(servers)};
    }
    [[nodiscard]] std::span<const std::int64_t> bytes_of(const slot& x) const noexcept {
        return {bytes.data() + x.bytes * static_cast<std::size_t>(servers), static_cast<std::size_t>(servers)};
    }
    [[nodiscard]] std::span<std::int64_t> bytes_of(const slot& x) noexcept {
        return {bytes.data() + x.bytes * static_cast<std::size_t>(servers), static_cast<std::size_t>(servers)};
    }
    /// The slot's duration in bytes: its busiest sender's bytes.
    [[nodiscard]] std::int64_t longest(const slot& x) const noexcept {
        std::int64_t n = 0;
        for (const std::int64_t b : bytes_of(x)) n = std::max(n, b);
        return n;
    }
    std::size_t add_perm(std::span<const std::int32_t> p) {
        perms.insert(perms.end(), p.begin(), p.end());
        return perms.size() / static_cast<std::size_t>(servers) - 1;
    }
    std::size_t add_bytes() {
        bytes.resize(bytes.size() + static_cast<std::size_t>(servers), 0);
        return bytes.size() / static_cast<std::size_t>(servers) - 1;
    }
};

/// Groups the slots by step, keeping their order within a step (a counting sort): the slots of
/// step k are members[begin[k], begin[k + 1]).
inline void slots_by_step(const stage_schedule& sc, std::vector<std::size_t>& begin,
                          std::vector<std::size_t>& members) {
    std::int32_t top = 0;
    for (const auto& x : sc.slots) top = std::max(top, x.step);
    begin.assign(static_cast<std::size_t>(top) + 2, 0);
    for (const auto& x : sc.slots) ++begin[static_cast<std::size_t>(x.step) + 1];
    std::partial_sum(begin.begin(), begin.end(), begin.begin());
    members.resize(sc.slots.size());
    for (std::size_t j = 0; j < sc.slots.size(); ++j) members[begin[static_cast<std::size_t>(sc.slots[j].step)]++] = j;
    for (std::size_t k = begin.size() - 1; k > 0; --k) begin[k] = begin[k - 1]; // back to the starts
    begin[0] = 0;
}

/// One slot's share of a (pair, rail) stream: `bytes` leave in scale-out step `step`.
struct stream_slot {
    std::int32_t step = 0;
    std::int64_t bytes = 0;
};

/// Per (server pair, rail), the slots that carry it, in step order (CSR). Keys (key()): with
/// every pair (s * S + d) * G + i; with a focus server x only the pairs it is an end of, (d * G
/// + i) for (x, d) and ((S + s) * G + i) for (s, x), so that one rank's part costs O(S G).
class stream_slots {
public:
    /// `focus`: the server whose pairs are kept, or -1 for all.
    void build(const stage_schedule& sc, int focus = -1) {
        servers_ = static_cast<std::size_t>(sc.servers);
        rails_ = static_cast<std::size_t>(sc.rails);
        focus_ = focus;
        offsets_.assign(keys() + 1, 0);
        slots_by_step(sc, by_step_, order_);
        for (const auto& x : sc.slots) {
            const auto perm = sc.perm_of(x);
            const auto bytes = sc.bytes_of(x);
            each_kept(perm, bytes, [&](std::size_t src, std::size_t) { ++offsets_[key(src, perm[src], x.rail) + 1]; });
        }
        std::partial_sum(offsets_.begin(), offsets_.end(), offsets_.begin());
        entries_.resize(offsets_.back());
        fill_.assign(offsets_.begin(), offsets_.end() - 1);
        for (const std::size_t k : order_) {
            const auto& x = sc.slots[k];
            const auto perm = sc.perm_of(x);
            const auto bytes = sc.bytes_of(x);
            each_kept(perm, bytes, [&](std::size_t src, std::size_t) {
                entries_[fill_[key(src, perm[src], x.rail)]++] = stream_slot{x.step, bytes[src]};
            });
        }
    }
    /// The number of keys.
    [[nodiscard]] std::size_t keys() const noexcept {
        return (focus_ < 0 ? servers_ * servers_ : 2 * servers_) * rails_;
    }
    /// The key of pair (src, dst) and rail `rail` (with a focus, one of the pair's ends is it).
    [[nodiscard]] std::size_t key(std::size_t src, std::int32_t dst, std::int32_t rail) const noexcept {
        const auto d = static_cast<std::size_t>(dst);
        const std::size_t pair = focus_ < 0                                ? src * servers_ + d
                                 : src == static_cast<std::size_t>(focus_) ? d
                                                                           : servers_ + src;
        return pair * rails_ + static_cast<std::size_t>(rail);
    }
    [[nodiscard]] std::span<const stream_slot> of(std::size_t key) const noexcept {
        return {entries_.data() + offsets_[key], offsets_[key + 1] - offsets_[key]};
    }
    /// Total bytes of the (pair, rail) stream `key`.
    [[nodiscard]] std::int64_t bytes(std::size_t key) const noexcept {
        std::int64_t n = 0;
        for (const stream_slot& x : of(key)) n += x.bytes;
        return n;
    }

private:
    // Calls f(src, dst) for each sender of a slot with bytes, in a pair that is kept.
    template <class F>
    void each_kept(std::span<const std::int32_t> perm, std::span<const std::int64_t> bytes, F&& f) const {
        if (focus_ < 0) {
            for (std::size_t src = 0; src < servers_; ++src)
                if (bytes[src] > 0) f(src, static_cast<std::size_t>(perm[src]));
            return;
        }
        // The focus server sends to perm[x]; it receives from the server mapped to it.
        const auto x = static_cast<std::size_t>(focus_);
        if (bytes[x] > 0) f(x, static_cast<std::size_t>(perm[x]));
        for (std::size_t src = 0; src < servers_; ++src)
            if (src != x && static_cast<std::size_t>(perm[src]) == x && bytes[src] > 0) f(src, x);
    }

    std::size_t servers_ = 0;
    std::size_t rails_ = 0;
    int focus_ = -1;
    std::vector<std::size_t> offsets_;
    std::vector<stream_slot> entries_;
    std::vector<std::size_t> fill_;
    std::vector<std::size_t> by_step_;
    std::vector<std::size_t> order_;
};

/// The longest slot of each step, in bytes (index 0 unused).
inline void step_lengths(const stage_schedule& sc, std::vector<std::int64_t>& length) {
    length.assign(static_cast<std::size_t>(sc.last_step) + 1, 0);
    for (const auto& x : sc.slots)
        length[static_cast<std::size_t>(x.step)] = std::max(length[static_cast<std::size_t>(x.step)], sc.longest(x));
}

} // namespace fast::detail
