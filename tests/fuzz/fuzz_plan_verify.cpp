// libFuzzer target: plan then verify on fuzzer-chosen topologies and matrices, including huge
// values and degenerate shapes. Every plan of every scheduler and policy must verify, and
// incast-free plans must be one-to-one; invalid input must be rejected with
// fast::invalid_argument before planning.
#include <fast/fast.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {
struct reader {
    const std::uint8_t* p;
    std::size_t n;
    std::uint64_t take(int bytes) {
        std::uint64_t v = 0;
        for (int k = 0; k < bytes; ++k) {
            v = (v << 8) | (n > 0 ? *p : 0);
            if (n > 0) {
                ++p;
                --n;
            }
        }
        return v;
    }
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    reader in{data, size};
    const int servers = 1 + static_cast<int>(in.take(1) % 6);
    const int gpus = 1 + static_cast<int>(in.take(1) % 5);
    const int mode = static_cast<int>(in.take(1));
    fast::topology t = fast::make_topology(servers, gpus, mode & 1 ? fast::preset::mi300x : fast::preset::h200);
    if (mode & 2) t.alpha_out_us = 0;
    const int r = t.ranks();
    fast::traffic_matrix m(r, r);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r; ++j) {
            // Mostly small values, sometimes huge ones (near the int64 limit), sometimes zero.
            const std::uint64_t kind = in.take(1);
            std::uint64_t v = kind < 64 ? 0 : kind < 224 ? in.take(2) : in.take(8);
            m(i, j) = static_cast<std::int64_t>(v & 0x7fffffffffffffffULL);
        }
    try {
        fast::validate_traffic(m, t);
    } catch (const fast::invalid_argument&) {
        return 0; // e.g. a total that overflows int64: rejected, as it must be
    }
    fast::plan_options o;
    o.window = 1 + (mode >> 2) % 3;
    for (const fast::scheduler s : {fast::scheduler::fast, fast::scheduler::fast_unbalanced, fast::scheduler::direct,
                                    fast::scheduler::spreadout}) {
        o.scheduler = s;
        for (const fast::policy p : {fast::policy::rail_packed, fast::policy::bottleneck, fast::policy::exact}) {
            o.policy = p;
            const fast::plan plan = fast::make_plan(m, t, o);
            const fast::verification v = fast::verify(plan, m);
            if (!v.ok() || v.delivered_bytes != m.sum()) __builtin_trap();
            if (plan.one_to_one_scale_out && !v.one_to_one_scale_out) __builtin_trap();
            if (s != fast::scheduler::fast) break;
        }
    }
    return 0;
}
