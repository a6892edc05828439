// HIP device memory (memory_device.hpp over the HIP runtime). Built only with -Dhip=enabled; host
// code only (no kernels), so the C++ compiler builds it with the HIP headers.

#include <hip/hip_runtime_api.h>

#include "memory_device.hpp"

namespace fast::exec::detail {

namespace {

struct hip_api {
    using error_t = hipError_t;
    using stream_t = hipStream_t;
    static constexpr error_t success = hipSuccess;
    static constexpr error_t not_ready = hipErrorNotReady;
    static constexpr const char* prefix = "hip";
    static constexpr const char* label = "HIP";
    static const char* error_name(error_t e) { return hipGetErrorName(e); }
    static const char* error_string(error_t e) { return hipGetErrorString(e); }
    static error_t last_error() { return hipGetLastError(); }
    static error_t get_device(int* d) { return hipGetDevice(d); }
    static error_t stream_create(stream_t* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
    static error_t stream_destroy(stream_t s) { return hipStreamDestroy(s); }
    static error_t stream_synchronize(stream_t s) { return hipStreamSynchronize(s); }
    static error_t malloc(void** p, std::size_t bytes) { return hipMalloc(p, bytes); }
    static error_t free(void* p) { return hipFree(p); }
    static error_t memcpy_async(void* dst, const void* src, std::size_t bytes, stream_t s) {
        return hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, s);
    }
    static error_t stream_query(stream_t s) { return hipStreamQuery(s); }
};

} // namespace

std::unique_ptr<memory_backend> make_hip_backend(std::string& error) noexcept {
    return make_device_backend<hip_api>(error);
}

} // namespace fast::exec::detail
