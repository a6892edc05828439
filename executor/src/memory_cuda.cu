// CUDA device memory: scratch from cudaMalloc, self-copies with cudaMemcpyAsync on the
// executor's own stream, polled with cudaStreamQuery (the executor never blocks on the GPU).
// Built only with -Dcuda=enabled; compiled by nvcc.

#include <cuda_runtime.h>

#include <new>

#include "memory.hpp"

namespace fast::exec::detail {

namespace {

std::string cuda_error(const char* what, cudaError_t e) {
    return std::string(what) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

class cuda_backend final : public memory_backend {
public:
    cuda_backend(int device, cudaStream_t stream) noexcept : device_(device), stream_(stream) {}
    ~cuda_backend() override {
        if (stream_ != nullptr) {
            (void)cudaStreamSynchronize(stream_);
            (void)cudaStreamDestroy(stream_);
        }
    }

    [[nodiscard]] std::string_view name() const noexcept override { return "cuda"; }

    [[nodiscard]] void* allocate(std::size_t bytes, std::string& error) noexcept override {
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError(); // reset the last error: a failed allocation is not fatal
            try {
                error = "could not allocate " + format_bytes(bytes) + " on CUDA device " +
                        std::to_string(device_) + ": " + cuda_error("cudaMalloc", e);
            } catch (...) {
            }
            return nullptr;
        }
        return p;
    }

    void release(void* p) noexcept override {
        if (p != nullptr) (void)cudaFree(p);
    }

    [[nodiscard]] bool copy(void* dst, const void* src, std::size_t bytes, std::string& error) noexcept override {
        const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_);
        if (e == cudaSuccess) return true;
        try {
            error = cuda_error("cudaMemcpyAsync", e);
        } catch (...) {
        }
        return false;
    }

    [[nodiscard]] bool poll(bool& done, std::string& error) noexcept override {
        const cudaError_t e = cudaStreamQuery(stream_);
        if (e == cudaSuccess) {
            done = true;
            return true;
        }
        if (e == cudaErrorNotReady) {
            done = false;
            return true;
        }
        try {
            error = cuda_error("cudaStreamQuery", e);
        } catch (...) {
        }
        return false;
    }

private:
    int device_ = 0;
    cudaStream_t stream_ = nullptr;
};

} // namespace

std::unique_ptr<memory_backend> make_cuda_backend(std::string& error) noexcept {
    try {
        int device = 0;
        cudaError_t e = cudaGetDevice(&device);
        if (e != cudaSuccess) {
            error = cuda_error("cudaGetDevice", e) + " (no usable CUDA device)";
            return nullptr;
        }
        cudaStream_t stream = nullptr;
        e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            error = cuda_error("cudaStreamCreateWithFlags", e);
            return nullptr;
        }
        auto* backend = new (std::nothrow) cuda_backend(device, stream);
        if (backend == nullptr) {
            (void)cudaStreamDestroy(stream);
            error = "out of host memory";
        }
        return std::unique_ptr<memory_backend>(backend);
    } catch (...) {
        return nullptr;
    }
}

} // namespace fast::exec::detail
