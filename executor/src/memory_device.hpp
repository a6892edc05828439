#pragma once
// Device memory over a GPU runtime (CUDA or HIP, whose APIs mirror each other): scratch from
// the runtime's malloc, self-copies with its async memcpy on the executor's own stream, polled
// with its stream query (the executor never blocks on the GPU). memory_cuda.cu and
// memory_hip.cpp each supply `Api`, the runtime's calls under common names:
//   error_t, stream_t, success, not_ready, prefix ("cuda"), label ("CUDA"),
//   error_name, error_string, last_error, get_device, stream_create, stream_destroy,
//   stream_synchronize, malloc, free, memcpy_async, stream_query.

#include <new>
#include <string>

#include "memory.hpp"

namespace fast::exec::detail {

template <class Api>
std::string device_error(const char* call, typename Api::error_t e) {
    return std::string(Api::prefix) + call + " failed: " + Api::error_name(e) + " (" + Api::error_string(e) + ")";
}

template <class Api>
class device_backend final : public memory_backend {
public:
    device_backend(int device, typename Api::stream_t stream) noexcept : device_(device), stream_(stream) {}
    ~device_backend() override {
        if (stream_ != nullptr) {
            (void)Api::stream_synchronize(stream_);
            (void)Api::stream_destroy(stream_);
        }
    }

    [[nodiscard]] std::string_view name() const noexcept override { return Api::prefix; }

    [[nodiscard]] void* allocate(std::size_t bytes, std::string& error) noexcept override {
        void* p = nullptr;
        const typename Api::error_t e = Api::malloc(&p, bytes);
        if (e != Api::success) {
            (void)Api::last_error(); // reset the last error: a failed allocation is not fatal
            try {
                error = "could not allocate " + format_bytes(bytes) + " on " + Api::label + " device " +
                        std::to_string(device_) + ": " + device_error<Api>("Malloc", e);
            } catch (...) {}
            return nullptr;
        }
        return p;
    }

    void release(void* p) noexcept override {
        if (p != nullptr) (void)Api::free(p);
    }

    [[nodiscard]] bool copy(void* dst, const void* src, std::size_t bytes, std::string& error) noexcept override {
        const typename Api::error_t e = Api::memcpy_async(dst, src, bytes, stream_);
        if (e == Api::success) return true;
        try {
            error = device_error<Api>("MemcpyAsync", e);
        } catch (...) {}
        return false;
    }

    [[nodiscard]] bool poll(bool& done, std::string& error) noexcept override {
        const typename Api::error_t e = Api::stream_query(stream_);
        if (e == Api::success || e == Api::not_ready) {
            done = e == Api::success;
            return true;
        }
        try {
            error = device_error<Api>("StreamQuery", e);
        } catch (...) {}
        return false;
    }

private:
    int device_ = 0;
    typename Api::stream_t stream_ = nullptr;
};

template <class Api>
std::unique_ptr<memory_backend> make_device_backend(std::string& error) noexcept {
    try {
        int device = 0;
        typename Api::error_t e = Api::get_device(&device);
        if (e != Api::success) {
            error = device_error<Api>("GetDevice", e) + " (no usable " + Api::label + " device)";
            return nullptr;
        }
        typename Api::stream_t stream = nullptr;
        e = Api::stream_create(&stream);
        if (e != Api::success) {
            error = device_error<Api>("StreamCreateWithFlags", e);
            return nullptr;
        }
        auto* backend = new (std::nothrow) device_backend<Api>(device, stream);
        if (backend == nullptr) {
            (void)Api::stream_destroy(stream);
            error = "out of host memory";
        }
        return std::unique_ptr<memory_backend>(backend);
    } catch (...) {
        return nullptr;
    }
}

} // namespace fast::exec::detail
