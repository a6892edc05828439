// CUDA device memory (memory_device.hpp over the CUDA runtime). Built only with -Dcuda=enabled;
// compiled by nvcc.

#include <cuda_runtime.h>

#include "memory_device.hpp"

namespace fast::exec::detail {

namespace {

struct cuda_api {
    using error_t = cudaError_t;
    using stream_t = cudaStream_t;
    static constexpr error_t success = cudaSuccess;
    static constexpr error_t not_ready = cudaErrorNotReady;
    static constexpr const char* prefix = "cuda";
    static constexpr const char* label = "CUDA";
    static const char* error_name(error_t e) { return cudaGetErrorName(e); }
    static const char* error_string(error_t e) { return cudaGetErrorString(e); }
    static error_t last_error() { return cudaGetLastError(); }
    static error_t get_device(int* d) { return cudaGetDevice(d); }
    static error_t stream_create(stream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
    static error_t stream_destroy(stream_t s) { return cudaStreamDestroy(s); }
    static error_t stream_synchronize(stream_t s) { return cudaStreamSynchronize(s); }
    static error_t malloc(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
    static error_t free(void* p) { return cudaFree(p); }
    static error_t memcpy_async(void* dst, const void* src, std::size_t bytes, stream_t s) {
        return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    }
    static error_t stream_query(stream_t s) { return cudaStreamQuery(s); }
};

} // namespace

std::unique_ptr<memory_backend> make_cuda_backend(std::string& error) noexcept {
    return make_device_backend<cuda_api>(error);
}

} // namespace fast::exec::detail
