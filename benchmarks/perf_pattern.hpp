#pragma once
// The byte pattern of the perf harnesses: byte k of block (src -> dst) is byte k % 8 of
// word(src * R + dst, k / 8) (little-endian), XORed with the run's key in every byte, so each
// run expects different bytes and stale data from an earlier run is caught. Host functions
// here; word() also compiles for the device (perf_memory_cuda.cu), so the fill and check kernels
// write and expect exactly these bytes.

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FAST_PERF_HD __host__ __device__
#else
#define FAST_PERF_HD
#endif

namespace fast_perf {

FAST_PERF_HD inline std::uint64_t word(std::uint64_t block, std::uint64_t index) {
    std::uint64_t z = block * 0x9e3779b97f4a7c15ULL + index * 0xbf58476d1ce4e5b9ULL + 0x94d049bb133111ebULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

FAST_PERF_HD inline std::uint64_t spread(std::uint8_t key) {
    return 0x0101010101010101ULL * key;
}

/// Writes `n` bytes of block `block` with `key`.
inline void fill_block(std::uint8_t* p, std::size_t n, std::uint64_t block, std::uint8_t key = 0) {
    const std::uint64_t mask = spread(key);
    std::size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const std::uint64_t w = word(block, k / 8) ^ mask;
        std::memcpy(p + k, &w, 8);
    }
    if (k < n) {
        const std::uint64_t w = word(block, k / 8) ^ mask;
        std::memcpy(p + k, &w, n - k); // little-endian hosts: bytes k.. of the word
    }
}

/// Bytes of `p` (n bytes) that differ from block `block` with `key`.
inline std::int64_t count_wrong(const std::uint8_t* p, std::size_t n, std::uint64_t block, std::uint8_t key) {
    const std::uint64_t mask = spread(key);
    std::int64_t wrong = 0;
    auto diff_bytes = [](std::uint64_t x) {
        std::int64_t c = 0;
        for (int b = 0; b < 8; ++b) c += ((x >> (8 * b)) & 0xff) != 0;
        return c;
    };
    std::size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        std::uint64_t got = 0;
        std::memcpy(&got, p + k, 8);
        if (const std::uint64_t x = got ^ word(block, k / 8) ^ mask; x != 0) wrong += diff_bytes(x);
    }
    if (k < n) {
        std::uint64_t got = 0;
        std::memcpy(&got, p + k, n - k);
        std::uint64_t x = got ^ word(block, k / 8) ^ mask;
        x &= (std::uint64_t{1} << (8 * (n - k))) - 1;
        wrong += diff_bytes(x);
    }
    return wrong;
}

} // namespace fast_perf
