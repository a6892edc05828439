#include "memory.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace fast::exec::detail {

namespace {

class host_backend final : public memory_backend {
public:
    [[nodiscard]] std::string_view name() const noexcept override { return "host"; }

    [[nodiscard]] void* allocate(std::size_t bytes, std::string& error) noexcept override {
        constexpr std::size_t alignment = 4096;
        void* p = nullptr;
        if (bytes > SIZE_MAX - alignment || posix_memalign(&p, alignment, bytes) != 0) p = nullptr;
        if (p == nullptr) {
            try {
                error = "could not allocate " + format_bytes(bytes) + " of host memory";
            } catch (...) {}
        }
        return p;
    }

    void release(void* p) noexcept override { std::free(p); }

    [[nodiscard]] bool copy(void* dst, const void* src, std::size_t bytes, std::string&) noexcept override {
        std::memcpy(dst, src, bytes);
        return true;
    }

    [[nodiscard]] bool poll(bool& done, std::string&) noexcept override {
        done = true;
        return true;
    }
};

} // namespace

std::unique_ptr<memory_backend> make_host_backend() noexcept {
    return std::unique_ptr<memory_backend>(new (std::nothrow) host_backend);
}

#ifndef FAST_EXEC_HAVE_CUDA
std::unique_ptr<memory_backend> make_cuda_backend(std::string& error) noexcept {
    try {
        error = "this libfast_executor was built without CUDA support (configure with -Dcuda=enabled)";
    } catch (...) {}
    return nullptr;
}
#endif

#ifndef FAST_EXEC_HAVE_HIP
std::unique_ptr<memory_backend> make_hip_backend(std::string& error) noexcept {
    try {
        error = "this libfast_executor was built without HIP support (configure with -Dhip=enabled)";
    } catch (...) {}
    return nullptr;
}
#endif

std::string format_bytes(std::uint64_t bytes) {
    static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) return std::to_string(bytes) + " bytes";
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        ++u;
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.1f %s (%llu bytes)", v, units[u], static_cast<unsigned long long>(bytes));
    return text;
}

} // namespace fast::exec::detail
