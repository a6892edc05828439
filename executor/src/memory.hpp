#pragma once
// Scratch allocation and local copies for each memory kind. The CUDA and HIP backends live in
// their own source files (memory_cuda.cu, memory_hip.cpp), built only with -Dcuda / -Dhip.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace fast::exec::detail {

class memory_backend {
public:
    virtual ~memory_backend() = default;
    [[nodiscard]] virtual std::string_view name() const noexcept = 0;
    /// `bytes` (> 0) bytes, or nullptr with `error` set.
    [[nodiscard]] virtual void* allocate(std::size_t bytes, std::string& error) noexcept = 0;
    virtual void release(void* p) noexcept = 0;
    /// Starts copying `bytes` bytes (host copies finish before returning). False with `error`
    /// set on failure.
    [[nodiscard]] virtual bool copy(void* dst, const void* src, std::size_t bytes, std::string& error) noexcept = 0;
    /// Whether every copy started so far has finished; false with `error` set on failure. Never
    /// blocks.
    [[nodiscard]] virtual bool poll(bool& done, std::string& error) noexcept = 0;
};

std::unique_ptr<memory_backend> make_host_backend() noexcept;
/// nullptr with `error` set when this build has no CUDA (HIP) support or no device is usable.
std::unique_ptr<memory_backend> make_cuda_backend(std::string& error) noexcept;
std::unique_ptr<memory_backend> make_hip_backend(std::string& error) noexcept;

/// "1.5 GiB" and the like, for messages.
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);

} // namespace fast::exec::detail
