#pragma once
// FNV-1a hashes of plans, shared by tests/determinism/plan_hash.cpp and
// benchmarks/plan_sweep.cpp: every field of every transfer, the scratch sizes and the steps.
#include <fast/plan.hpp>

#include <cstdint>

namespace fast::test {

struct fnv {
    std::uint64_t h = 1469598103934665603ULL;
    void add(std::uint64_t v) {
        for (int k = 0; k < 8; ++k) {
            h ^= (v >> (8 * k)) & 0xff;
            h *= 1099511628211ULL;
        }
    }
    void add_signed(std::int64_t v) { add(static_cast<std::uint64_t>(v)); }
};

inline void add_transfer(fnv& f, const transfer& t) {
    f.add_signed(t.bytes);
    f.add_signed(t.src_offset);
    f.add_signed(t.dst_offset);
    f.add((static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.src)) << 32) | static_cast<std::uint32_t>(t.dst));
    f.add((static_cast<std::uint64_t>(t.tier) << 16) | (static_cast<std::uint64_t>(t.src_buffer) << 8) |
          static_cast<std::uint64_t>(t.dst_buffer));
}

/// The whole plan: its incast-free claim, scratch, step boundaries and transfers.
inline void add_plan(fnv& f, const plan& p) {
    f.add(p.one_to_one_scale_out ? 1 : 0);
    for (const std::int64_t s : p.scratch_bytes) f.add_signed(s);
    for (const std::size_t o : p.step_offsets) f.add(o);
    for (const transfer& t : p.transfers) add_transfer(f, t);
}

inline std::uint64_t hash_plan(const plan& p) {
    fnv f;
    add_plan(f, p);
    return f.h;
}

} // namespace fast::test
