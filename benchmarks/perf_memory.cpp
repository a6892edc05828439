// Host memory for the device perf harness (perf_memory.hpp): the pattern written and checked
// by loops, memcpy for the copy peak.

#include "perf_memory.hpp"

#include "perf_pattern.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>

namespace fast_perf {

namespace {

class host_memory final : public perf_memory {
public:
    [[nodiscard]] std::string_view kind() const override { return "host"; }

    [[nodiscard]] std::string device() const override {
        std::ifstream cpuinfo("/proc/cpuinfo");
        for (std::string line; std::getline(cpuinfo, line);)
            if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
                return "host: " + line.substr(line.find(':') + 2);
        return "host";
    }

    [[nodiscard]] std::string allocate(void*& p, std::size_t bytes) override {
        p = nullptr;
        if (posix_memalign(&p, 4096, bytes == 0 ? 1 : bytes) != 0) {
            p = nullptr;
            return "cannot allocate " + std::to_string(bytes) + " bytes of host memory";
        }
        return {};
    }

    void release(void* p) noexcept override { std::free(p); }

    [[nodiscard]] std::string fill(void* buf, const block_table& t, std::uint8_t key) override {
        for (std::size_t k = 0; k < t.counts.size(); ++k)
            fill_block(static_cast<std::uint8_t*>(buf) + t.displs[k], t.counts[k], t.ids[k], key);
        return {};
    }

    [[nodiscard]] std::string check(const void* buf, const block_table& t, std::uint8_t key,
                                    std::uint64_t& wrong) override {
        wrong = 0;
        for (std::size_t k = 0; k < t.counts.size(); ++k)
            wrong += static_cast<std::uint64_t>(
                count_wrong(static_cast<const std::uint8_t*>(buf) + t.displs[k], t.counts[k], t.ids[k], key));
        return {};
    }

    [[nodiscard]] std::string timed_copy(void* dst, const void* src, std::size_t bytes, double& seconds) override {
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(dst, src, bytes);
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return {};
    }
};

} // namespace

std::unique_ptr<perf_memory> make_host_memory() {
    return std::make_unique<host_memory>();
}

#ifndef FAST_PERF_HAVE_CUDA
std::unique_ptr<perf_memory> make_cuda_memory(int, std::string& error) {
    error = "this alltoallv_device_perf was built without CUDA (configure with -Dcuda=enabled)";
    return nullptr;
}
#endif

} // namespace fast_perf
