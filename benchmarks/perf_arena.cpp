#include "perf_arena.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

namespace fast_perf {

namespace {

constexpr std::uint64_t arena_magic = 0x4641535450455246ull; // "FASTPERF"
constexpr std::size_t message_bytes = 256;

constexpr std::size_t round_up(std::size_t n) {
    return (n + 63) / 64 * 64;
}

using clock_type = std::chrono::steady_clock;

} // namespace

// The region: this header, then per rank its barrier count, its message, its slot (a length
// and bytes), its values; each section 64-byte aligned.
struct perf_arena::header {
    std::uint64_t magic;
    std::uint64_t ranks;
    std::uint64_t slot_bytes;
    std::uint64_t values;
    std::uint64_t bytes;
    std::atomic<std::uint32_t> failed;

    [[nodiscard]] std::size_t arrivals_at() const { return round_up(sizeof(header)); }
    [[nodiscard]] std::size_t messages_at() const {
        return arrivals_at() + round_up(ranks * sizeof(std::atomic<std::uint64_t>));
    }
    [[nodiscard]] std::size_t slots_at() const { return messages_at() + round_up(ranks * message_bytes); }
    [[nodiscard]] std::size_t values_at() const { return slots_at() + ranks * round_up(slot_bytes + 8); }
    [[nodiscard]] std::size_t total() const { return values_at() + ranks * round_up(values * sizeof(double)); }
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free,
              "the arena's atomics must work across processes");

std::unique_ptr<perf_arena> perf_arena::create(int ranks, std::size_t slot_bytes, std::size_t values,
                                               const std::string& path, std::string& error) {
    header h{arena_magic, static_cast<std::uint64_t>(ranks), slot_bytes, values, 0, {}};
    const std::size_t bytes = h.total();
    void* base = MAP_FAILED;
    if (path.empty()) {
        base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    } else {
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0) {
            error = "cannot create " + path + ": " + std::strerror(errno);
            return nullptr;
        }
        if (ftruncate(fd, static_cast<off_t>(bytes)) == 0)
            base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
    }
    if (base == MAP_FAILED) {
        error = "cannot map " + std::to_string(bytes) + " bytes of shared memory" +
                (path.empty() ? "" : " in " + path) + ": " + std::strerror(errno);
        return nullptr;
    }
    auto* head = new (base) header{arena_magic, h.ranks, slot_bytes, values, bytes, {}};
    head->failed.store(0);
    for (int r = 0; r < ranks; ++r)
        new (static_cast<char*>(base) + head->arrivals_at() +
             static_cast<std::size_t>(r) * sizeof(std::atomic<std::uint64_t>)) std::atomic<std::uint64_t>(0);
    return std::unique_ptr<perf_arena>(new perf_arena(base, bytes));
}

std::unique_ptr<perf_arena> perf_arena::open(const std::string& path, std::string& error) {
    const int fd = ::open(path.c_str(), O_RDWR);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(header)) {
        error = "cannot open the arena " + path + ": " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return nullptr;
    }
    const auto bytes = static_cast<std::size_t>(st.st_size);
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) {
        error = "cannot map the arena " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    const auto* head = static_cast<const header*>(base);
    if (head->magic != arena_magic || head->bytes != bytes || head->total() != bytes) {
        munmap(base, bytes);
        error = path + " is not an arena of this program";
        return nullptr;
    }
    return std::unique_ptr<perf_arena>(new perf_arena(base, bytes));
}

perf_arena::~perf_arena() {
    munmap(base_, bytes_);
}

perf_arena::header& perf_arena::head() const noexcept {
    return *static_cast<header*>(base_);
}

std::atomic<std::uint64_t>& perf_arena::arrivals(int rank) const noexcept {
    return *reinterpret_cast<std::atomic<std::uint64_t>*>(static_cast<char*>(base_) + head().arrivals_at() +
                                                          static_cast<std::size_t>(rank) *
                                                              sizeof(std::atomic<std::uint64_t>));
}

int perf_arena::ranks() const noexcept {
    return static_cast<int>(head().ranks);
}
std::size_t perf_arena::slot_bytes() const noexcept {
    return head().slot_bytes;
}

char* perf_arena::slot(int rank) noexcept {
    return static_cast<char*>(base_) + head().slots_at() +
           static_cast<std::size_t>(rank) * round_up(head().slot_bytes + 8);
}

double* perf_arena::values(int rank) noexcept {
    return reinterpret_cast<double*>(static_cast<char*>(base_) + head().values_at() +
                                     static_cast<std::size_t>(rank) * round_up(head().values * sizeof(double)));
}

bool perf_arena::barrier(int rank, std::chrono::milliseconds timeout, std::string& error) noexcept {
    const std::uint64_t round = arrivals(rank).load(std::memory_order_relaxed) + 1;
    arrivals(rank).store(round, std::memory_order_release);
    const auto deadline = clock_type::now() + timeout;
    for (;;) {
        bool all = true;
        for (int r = 0; r < ranks() && all; ++r) all = arrivals(r).load(std::memory_order_acquire) >= round;
        if (all) return true;
        const bool late = clock_type::now() > deadline;
        if (late || failed()) {
            try {
                error = "rank " + std::to_string(rank) + ": barrier " + std::to_string(round) + " " +
                        (late ? "timed out after " + std::to_string(timeout.count()) + " ms"
                              : std::string("stopped: another rank failed")) +
                        "; missing ranks:";
                for (int r = 0; r < ranks(); ++r)
                    if (arrivals(r).load(std::memory_order_acquire) < round)
                        error.append(" ").append(std::to_string(r));
            } catch (...) {}
            return false;
        }
        sched_yield();
    }
}

fast::exec::bootstrap perf_arena::bootstrap(int rank, std::chrono::milliseconds timeout) {
    return {rank, ranks(), [this, rank, timeout](const void* s, void* r, std::size_t n) {
                using fast::exec::errc;
                if (n > slot_bytes())
                    return fast::exec::status(errc::bootstrap, "allgather of " + std::to_string(n) +
                                                                   " bytes, the slots hold " +
                                                                   std::to_string(slot_bytes()));
                const std::uint64_t length = n;
                std::memcpy(slot(rank), &length, 8);
                std::memcpy(slot(rank) + 8, s, n);
                std::string error;
                if (!barrier(rank, timeout, error)) return fast::exec::status(errc::bootstrap, error);
                std::string mismatch;
                for (int k = 0; k < ranks(); ++k) {
                    std::uint64_t theirs = 0;
                    std::memcpy(&theirs, slot(k), 8);
                    if (theirs != n && mismatch.empty())
                        mismatch = "rank " + std::to_string(k) + " gathers " + std::to_string(theirs) +
                                   " bytes, rank " + std::to_string(rank) + " " + std::to_string(n);
                    else std::memcpy(static_cast<char*>(r) + static_cast<std::size_t>(k) * n, slot(k) + 8, n);
                }
                // Nobody writes the next round before everyone has read this one.
                if (!barrier(rank, timeout, error)) return fast::exec::status(errc::bootstrap, error);
                return mismatch.empty() ? fast::exec::status{} : fast::exec::status(errc::bootstrap, mismatch);
            }};
}

void perf_arena::fail(int rank, std::string_view message) noexcept {
    char* m = static_cast<char*>(base_) + head().messages_at() + static_cast<std::size_t>(rank) * message_bytes;
    if (m[0] == '\0') {
        const std::size_t n = std::min(message.size(), message_bytes - 1);
        std::memcpy(m, message.data(), n);
        m[n] = '\0';
    }
    stop();
}

void perf_arena::stop() noexcept {
    head().failed.store(1, std::memory_order_release);
}
bool perf_arena::failed() const noexcept {
    return head().failed.load(std::memory_order_acquire) != 0;
}

std::string perf_arena::error(int rank) const {
    const char* m =
        static_cast<const char*>(base_) + head().messages_at() + static_cast<std::size_t>(rank) * message_bytes;
    return std::string(m, strnlen(m, message_bytes));
}

} // namespace fast_perf
