#pragma once
// A small, fully specified random number generator (xoshiro256** seeded by splitmix64) and the
// few distributions the generators need. The standard library's distributions are
// implementation-defined; these give the same matrix for the same seed on every compiler.

#include <cmath>
#include <cstdint>

namespace fast::detail {

class rng {
public:
    explicit rng(std::uint64_t seed) noexcept {
        for (auto& s : state_) {
            seed += 0x9e3779b97f4a7c15ULL;
            std::uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            s = z ^ (z >> 31);
        }
    }

    std::uint64_t next() noexcept {
        const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
        const std::uint64_t t = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= t;
        state_[3] = rotl(state_[3], 45);
        return result;
    }

    /// Uniform in [0, 1) with 53 random bits.
    double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

    /// Uniform integer in [0, n) for n > 0 (Lemire's multiply-shift; bias below 2^-32 for the
    /// sizes used here, and identical on every platform).
    std::uint64_t below(std::uint64_t n) noexcept {
        __extension__ typedef unsigned __int128 u128;
        return static_cast<std::uint64_t>((static_cast<u128>(next()) * n) >> 64);
    }

    /// Standard normal by Box-Muller.
    double normal() noexcept {
        const double u1 = 1.0 - uniform(); // (0, 1]
        const double u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

private:
    static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
    std::uint64_t state_[4]{};
};

} // namespace fast::detail
