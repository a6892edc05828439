// HIP device memory: scratch from hipMalloc, self-copies with hipMemcpyAsync on the
// executor's own stream, polled with hipStreamQuery (the executor never blocks on the GPU).
// Built only with -Dhip=enabled; host code only (no kernels), so the C++ compiler builds it with the HIP headers.

#include <hip/hip_runtime_api.h>

#include <new>

#include "memory.hpp"

namespace fast::exec::detail {

namespace {

std::string hip_error(const char* what, hipError_t e) {
    return std::string(what) + " failed: " + hipGetErrorName(e) + " (" + hipGetErrorString(e) + ")";
}

class hip_backend final : public memory_backend {
public:
    hip_backend(int device, hipStream_t stream) noexcept : device_(device), stream_(stream) {}
    ~hip_backend() override {
        if (stream_ != nullptr) {
            (void)hipStreamSynchronize(stream_);
            (void)hipStreamDestroy(stream_);
        }
    }

    [[nodiscard]] std::string_view name() const noexcept override { return "hip"; }

    [[nodiscard]] void* allocate(std::size_t bytes, std::string& error) noexcept override {
        void* p = nullptr;
        const hipError_t e = hipMalloc(&p, bytes);
        if (e != hipSuccess) {
            (void)hipGetLastError(); // reset the last error: a failed allocation is not fatal
            try {
                error = "could not allocate " + format_bytes(bytes) + " on HIP device " +
                        std::to_string(device_) + ": " + hip_error("hipMalloc", e);
            } catch (...) {
            }
            return nullptr;
        }
        return p;
    }

    void release(void* p) noexcept override {
        if (p != nullptr) (void)hipFree(p);
    }

    [[nodiscard]] bool copy(void* dst, const void* src, std::size_t bytes, std::string& error) noexcept override {
        const hipError_t e = hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, stream_);
        if (e == hipSuccess) return true;
        try {
            error = hip_error("hipMemcpyAsync", e);
        } catch (...) {
        }
        return false;
    }

    [[nodiscard]] bool poll(bool& done, std::string& error) noexcept override {
        const hipError_t e = hipStreamQuery(stream_);
        if (e == hipSuccess) {
            done = true;
            return true;
        }
        if (e == hipErrorNotReady) {
            done = false;
            return true;
        }
        try {
            error = hip_error("hipStreamQuery", e);
        } catch (...) {
        }
        return false;
    }

private:
    int device_ = 0;
    hipStream_t stream_ = nullptr;
};

} // namespace

std::unique_ptr<memory_backend> make_hip_backend(std::string& error) noexcept {
    try {
        int device = 0;
        hipError_t e = hipGetDevice(&device);
        if (e != hipSuccess) {
            error = hip_error("hipGetDevice", e) + " (no usable HIP device)";
            return nullptr;
        }
        hipStream_t stream = nullptr;
        e = hipStreamCreateWithFlags(&stream, hipStreamNonBlocking);
        if (e != hipSuccess) {
            error = hip_error("hipStreamCreateWithFlags", e);
            return nullptr;
        }
        auto* backend = new (std::nothrow) hip_backend(device, stream);
        if (backend == nullptr) {
            (void)hipStreamDestroy(stream);
            error = "out of host memory";
        }
        return std::unique_ptr<memory_backend>(backend);
    } catch (...) {
        return nullptr;
    }
}

} // namespace fast::exec::detail
