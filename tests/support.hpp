#pragma once
// Shared helpers of the test suite: every plan a test makes goes through check_plan.

#include <catch2/catch.hpp>

#include <fast/cost.hpp>
#include <fast/plan.hpp>
#include <fast/verify.hpp>

namespace fast::test {

/// Whether this build runs under AddressSanitizer, several times slower: sweeps leave out their
/// largest shapes there (the g++ build runs them).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

/// Verifies `p` against `m`, failing the test with the verifier's message on any violation.
inline verification check_plan(const plan& p, const traffic_matrix& m) {
    verification v = verify(p, m);
    INFO("scheduler " << p.scheduler << ", " << p.topology.servers << " x " << p.topology.gpus_per_server << ": "
                      << v.message());
    REQUIRE(v.ok());
    REQUIRE(v.delivered_bytes == m.sum());
    if (p.one_to_one_scale_out) REQUIRE(v.one_to_one_scale_out);
    return v;
}

/// A scale-out transfer from `send` to `recv` (tests that build plans by hand).
inline transfer out(int src, int dst, std::int64_t bytes, std::int64_t src_off = 0, std::int64_t dst_off = 0) {
    transfer t;
    t.src = src;
    t.dst = dst;
    t.bytes = bytes;
    t.src_offset = src_off;
    t.dst_offset = dst_off;
    t.tier = tier::scale_out;
    return t;
}

} // namespace fast::test

#include <fast/detail/random.hpp>
#include <fast/workload.hpp>

#include <limits>
#include <string>

namespace fast::test {

/// A seeded test case: a small topology and a matrix of one of several shapes (zero, one hot
/// pair, values near the int64 limit, zipf, uniform, sparse, self-only, a hot receiver).
struct random_case {
    topology topo;
    traffic_matrix matrix;
    std::string shape;
};

inline random_case make_random_case(std::uint64_t seed, int max_servers = 5, int max_gpus = 4) {
    detail::rng gen(seed * 7919 + 17);
    random_case c;
    const int s = 1 + static_cast<int>(gen.below(static_cast<std::uint64_t>(max_servers)));
    const int g = 1 + static_cast<int>(gen.below(static_cast<std::uint64_t>(max_gpus)));
    c.topo = make_topology(s, g, gen.below(2) ? preset::h200 : preset::mi300x);
    const int r = c.topo.ranks();
    traffic_matrix& m = c.matrix;
    m = traffic_matrix::Zero(r, r);
    switch (gen.below(8)) {
    case 0: c.shape = "zero"; break;
    case 1: {
        c.shape = "one hot pair";
        m(static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(r))),
          static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(r)))) =
            1 + static_cast<std::int64_t>(gen.below(1u << 20));
        break;
    }
    case 2: {
        c.shape = "near int64 limit";
        // A few huge entries whose total still fits.
        const std::int64_t budget = std::numeric_limits<std::int64_t>::max() - 64;
        const int n = 1 + static_cast<int>(gen.below(3));
        for (int k = 0; k < n; ++k)
            m(static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(r))),
              static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(r)))) += budget / (n + 1);
        break;
    }
    case 3:
        c.shape = "zipf";
        m = make_zipf(c.topo, 0.5 + gen.uniform(), 1 + static_cast<std::int64_t>(gen.below(1u << 24)), seed);
        break;
    case 4:
        c.shape = "uniform";
        m = make_uniform(c.topo, static_cast<std::int64_t>(gen.below(1u << 22)));
        break;
    case 5: {
        c.shape = "sparse";
        for (int k = 0; k < r; ++k)
            m(static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(r))),
              static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(r)))) +=
                static_cast<std::int64_t>(gen.below(1000));
        break;
    }
    case 6: {
        c.shape = "self only";
        for (int k = 0; k < r; ++k) m(k, k) = static_cast<std::int64_t>(gen.below(5000));
        break;
    }
    default: {
        c.shape = "hot receiver";
        const auto hot = static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(r)));
        for (int i = 0; i < r; ++i)
            for (int j = 0; j < r; ++j) m(i, j) = static_cast<std::int64_t>(gen.below(100)) + (j == hot ? 10000 : 0);
        break;
    }
    }
    return c;
}

} // namespace fast::test
