// CUDA device memory for the device perf harness (perf_memory.hpp): the pattern of
// perf_pattern.hpp written and checked by kernels on the device, so that neither costs a copy to
// the host; the copy peak is one cudaMemcpyAsync timed with events. Built only with
// -Dcuda=enabled, by nvcc.

#include <cuda_runtime.h>

#include "perf_memory.hpp"
#include "perf_pattern.hpp"

#include <algorithm>
#include <cstdint>

namespace fast_perf {

namespace {

std::string cuda_error(const char* call, cudaError_t e) {
    return std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// One grid row (blockIdx.y) per block of the table; its threads take 8-byte words in turn.
// Block starts need not be aligned: unaligned or short words are written byte by byte.
__global__ void fill_kernel(unsigned char* base, const std::uint64_t* table, unsigned blocks, std::uint64_t mask) {
    const std::uint64_t displ = table[blockIdx.y], n = table[blocks + blockIdx.y], id = table[2 * blocks + blockIdx.y];
    unsigned char* p = base + displ;
    const std::uint64_t words = (n + 7) / 8;
    for (std::uint64_t w = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; w < words;
         w += std::uint64_t{gridDim.x} * blockDim.x) {
        const std::uint64_t v = word(id, w) ^ mask;
        const std::uint64_t at = w * 8;
        const std::uint64_t m = n - at < 8 ? n - at : 8;
        if (m == 8 && (reinterpret_cast<std::uintptr_t>(p + at) & 7) == 0) {
            *reinterpret_cast<std::uint64_t*>(p + at) = v;
        } else {
            for (std::uint64_t i = 0; i < m; ++i) p[at + i] = static_cast<unsigned char>(v >> (8 * i));
        }
    }
}

__global__ void check_kernel(const unsigned char* base, const std::uint64_t* table, unsigned blocks, std::uint64_t mask,
                             unsigned long long* wrong) {
    const std::uint64_t displ = table[blockIdx.y], n = table[blocks + blockIdx.y], id = table[2 * blocks + blockIdx.y];
    const unsigned char* p = base + displ;
    const std::uint64_t words = (n + 7) / 8;
    unsigned long long bad = 0;
    for (std::uint64_t w = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; w < words;
         w += std::uint64_t{gridDim.x} * blockDim.x) {
        const std::uint64_t v = word(id, w) ^ mask;
        const std::uint64_t at = w * 8;
        const std::uint64_t m = n - at < 8 ? n - at : 8;
        for (std::uint64_t i = 0; i < m; ++i) bad += p[at + i] != static_cast<unsigned char>(v >> (8 * i));
    }
    if (bad != 0) atomicAdd(wrong, bad);
}

class cuda_memory final : public perf_memory {
public:
    explicit cuda_memory(int device) : device_(device) {}
    ~cuda_memory() override {
        if (table_ != nullptr) cudaFree(table_);
        if (wrong_ != nullptr) cudaFree(wrong_);
        if (start_ != nullptr) cudaEventDestroy(start_);
        if (stop_ != nullptr) cudaEventDestroy(stop_);
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
    }

    std::string init() {
        if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
        if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); e != cudaSuccess)
            return cuda_error("cudaStreamCreateWithFlags", e);
        if (cudaError_t e = cudaEventCreate(&start_); e != cudaSuccess) return cuda_error("cudaEventCreate", e);
        if (cudaError_t e = cudaEventCreate(&stop_); e != cudaSuccess) return cuda_error("cudaEventCreate", e);
        if (cudaError_t e = cudaMalloc(&wrong_, sizeof(unsigned long long)); e != cudaSuccess)
            return cuda_error("cudaMalloc", e);
        return {};
    }

    [[nodiscard]] std::string_view kind() const override { return "cuda"; }

    [[nodiscard]] std::string device() const override {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, device_) != cudaSuccess) return "CUDA device " + std::to_string(device_);
        return std::string(prop.name) + " (CUDA device " + std::to_string(device_) + ", compute capability " +
               std::to_string(prop.major) + "." + std::to_string(prop.minor) + ")";
    }

    [[nodiscard]] std::string allocate(void*& p, std::size_t bytes) override {
        p = nullptr;
        if (cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
            p = nullptr;
            cudaGetLastError(); // a failed allocation is not sticky
            return "allocating " + std::to_string(bytes) + " bytes: " + cuda_error("cudaMalloc", e);
        }
        return {};
    }

    void release(void* p) noexcept override {
        if (p != nullptr) cudaFree(p);
    }

    [[nodiscard]] std::string fill(void* buf, const block_table& t, std::uint8_t key) override {
        if (t.counts.empty()) return {};
        if (std::string e = upload(t); !e.empty()) return e;
        const auto blocks = static_cast<unsigned>(t.counts.size());
        fill_kernel<<<grid(t), threads, 0, stream_>>>(static_cast<unsigned char*>(buf), table_, blocks, spread(key));
        if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("the fill kernel's launch", e);
        if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
            return cuda_error("cudaStreamSynchronize (fill)", e);
        return {};
    }

    [[nodiscard]] std::string check(const void* buf, const block_table& t, std::uint8_t key,
                                    std::uint64_t& wrong) override {
        wrong = 0;
        if (t.counts.empty()) return {};
        if (std::string e = upload(t); !e.empty()) return e;
        if (cudaError_t e = cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), stream_); e != cudaSuccess)
            return cuda_error("cudaMemsetAsync", e);
        const auto blocks = static_cast<unsigned>(t.counts.size());
        check_kernel<<<grid(t), threads, 0, stream_>>>(static_cast<const unsigned char*>(buf), table_, blocks,
                                                       spread(key), wrong_);
        if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("the check kernel's launch", e);
        unsigned long long got = 0;
        if (cudaError_t e = cudaMemcpyAsync(&got, wrong_, sizeof got, cudaMemcpyDeviceToHost, stream_);
            e != cudaSuccess)
            return cuda_error("cudaMemcpyAsync (check)", e);
        if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
            return cuda_error("cudaStreamSynchronize (check)", e);
        wrong = got;
        return {};
    }

    [[nodiscard]] std::string timed_copy(void* dst, const void* src, std::size_t bytes, double& seconds) override {
        if (cudaError_t e = cudaEventRecord(start_, stream_); e != cudaSuccess) return cuda_error("cudaEventRecord", e);
        if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_); e != cudaSuccess)
            return cuda_error("cudaMemcpyAsync (device to device)", e);
        if (cudaError_t e = cudaEventRecord(stop_, stream_); e != cudaSuccess) return cuda_error("cudaEventRecord", e);
        if (cudaError_t e = cudaEventSynchronize(stop_); e != cudaSuccess) return cuda_error("cudaEventSynchronize", e);
        float ms = 0;
        if (cudaError_t e = cudaEventElapsedTime(&ms, start_, stop_); e != cudaSuccess)
            return cuda_error("cudaEventElapsedTime", e);
        seconds = static_cast<double>(ms) / 1e3;
        return {};
    }

private:
    static constexpr unsigned threads = 256;

    // Enough grid columns that the largest block gets a thread per word, at most 1024.
    static dim3 grid(const block_table& t) {
        const std::uint64_t most = *std::max_element(t.counts.begin(), t.counts.end());
        const std::uint64_t columns =
            std::min<std::uint64_t>(1024, std::max<std::uint64_t>(1, (most / 8 + threads - 1) / threads));
        return dim3(static_cast<unsigned>(columns), static_cast<unsigned>(t.counts.size()));
    }

    // The table as displs, counts, ids, in device memory (grown as needed).
    std::string upload(const block_table& t) {
        const std::size_t n = t.counts.size();
        host_table_.assign(t.displs.begin(), t.displs.end());
        host_table_.insert(host_table_.end(), t.counts.begin(), t.counts.end());
        host_table_.insert(host_table_.end(), t.ids.begin(), t.ids.end());
        if (3 * n > table_capacity_) {
            if (table_ != nullptr) cudaFree(table_);
            table_ = nullptr;
            table_capacity_ = 0;
            if (cudaError_t e = cudaMalloc(&table_, 3 * n * sizeof(std::uint64_t)); e != cudaSuccess)
                return cuda_error("cudaMalloc (block table)", e);
            table_capacity_ = 3 * n;
        }
        if (cudaError_t e = cudaMemcpyAsync(table_, host_table_.data(), 3 * n * sizeof(std::uint64_t),
                                            cudaMemcpyHostToDevice, stream_);
            e != cudaSuccess)
            return cuda_error("cudaMemcpyAsync (block table)", e);
        return {};
    }

    int device_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    std::uint64_t* table_ = nullptr;
    std::size_t table_capacity_ = 0;
    std::vector<std::uint64_t> host_table_;
    unsigned long long* wrong_ = nullptr;
};

} // namespace

std::unique_ptr<perf_memory> make_cuda_memory(int device, std::string& error) {
    int devices = 0;
    if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
        error = cuda_error("cudaGetDeviceCount", e) + " (no usable CUDA device)";
        return nullptr;
    }
    if (device >= devices) {
        error = "no CUDA device " + std::to_string(device) + " (" + std::to_string(devices) + " found)";
        return nullptr;
    }
    auto m = std::make_unique<cuda_memory>(device);
    if (std::string e = m->init(); !e.empty()) {
        error = e;
        return nullptr;
    }
    return m;
}

} // namespace fast_perf
