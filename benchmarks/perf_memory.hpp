#pragma once
// Buffers of the device perf harness (alltoallv_device_perf) where the executor's data live:
// allocation, the pattern of perf_pattern.hpp written and checked in place (host loops, or CUDA
// kernels in perf_memory_cuda.cu, so a device check never copies a buffer to the host), and
// one timed copy for the copy peak. The CUDA half is built only with -Dcuda=enabled; this
// header stays C++17 for nvcc.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fast_perf {

/// The blocks of one buffer: where each starts, its bytes and its block id (src * R + dst).
struct block_table {
    std::vector<std::uint64_t> displs, counts, ids;
};

class perf_memory {
public:
    virtual ~perf_memory() = default;
    /// "host" or "cuda".
    [[nodiscard]] virtual std::string_view kind() const = 0;
    /// The device's name (the CPU's for host memory).
    [[nodiscard]] virtual std::string device() const = 0;
    /// "" or what failed.
    [[nodiscard]] virtual std::string allocate(void*& p, std::size_t bytes) = 0;
    virtual void release(void* p) noexcept = 0;
    /// Writes every block of `t` in `buf` with `key`; done (synchronised) on return.
    [[nodiscard]] virtual std::string fill(void* buf, const block_table& t, std::uint8_t key) = 0;
    /// Counts the bytes of `t`'s blocks in `buf` that differ from the pattern with `key`.
    [[nodiscard]] virtual std::string check(const void* buf, const block_table& t, std::uint8_t key,
                                            std::uint64_t& wrong) = 0;
    /// One copy of `bytes` from `src` to `dst` (cudaMemcpyAsync device to device on a stream of
    /// its own, timed with events; memcpy on the host), its time in `seconds`.
    [[nodiscard]] virtual std::string timed_copy(void* dst, const void* src, std::size_t bytes, double& seconds) = 0;
};

std::unique_ptr<perf_memory> make_host_memory();
/// Device `device` made current for the calling thread; nullptr with `error` set where this
/// build has no CUDA support or the device is missing.
std::unique_ptr<perf_memory> make_cuda_memory(int device, std::string& error);

} // namespace fast_perf
