#include "counters.hpp"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <vector>

namespace fast::mpi {

namespace {

constexpr int kinds = static_cast<int>(op_kind::count);
constexpr int reasons = static_cast<int>(reason::count);

// Per kind: calls, fast, fallback, errors, bytes fast, bytes fallback; then per reason; then
// starts, packed, channels, plans made, plans reused. Time: per kind, then the executor's.
enum kind_field { f_calls, f_fast, f_fallback, f_errors, f_bytes_fast, f_bytes_fallback, kind_fields };
constexpr int n_counts = kinds * kind_fields + reasons + 5;
constexpr int at_reasons = kinds * kind_fields;
constexpr int at_starts = at_reasons + reasons, at_packed = at_starts + 1, at_channels = at_starts + 2,
              at_plans_made = at_starts + 3, at_plans_reused = at_starts + 4;
constexpr int n_times = kinds + 1;

struct totals {
    std::array<std::uint64_t, n_counts> count{};
    std::array<double, n_times> seconds{};
};

std::mutex mutex;
totals mine;

std::size_t slot(op_kind k, kind_field f) {
    return static_cast<std::size_t>(static_cast<int>(k) * kind_fields + f);
}
std::uint64_t& field(totals& t, op_kind k, kind_field f) {
    return t.count[slot(k, f)];
}
std::uint64_t field(const totals& t, op_kind k, kind_field f) {
    return t.count[slot(k, f)];
}

void add(op_kind k, kind_field f, std::uint64_t bytes_field_value, kind_field bytes_field, double seconds) {
    std::lock_guard lock(mutex);
    ++field(mine, k, f_calls);
    ++field(mine, k, f);
    field(mine, k, bytes_field) += bytes_field_value;
    mine.seconds[static_cast<std::size_t>(k)] += seconds;
}

std::string bytes_text(std::uint64_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    char text[32];
    std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return text;
}

void print(std::FILE* out, const totals& sum, const totals& max, int ranks, const std::string& context) {
    std::fprintf(out, "fast_mpi: summary over %d ranks (each rank counts its own calls; sums over ranks)\n", ranks);
    std::fprintf(out, "fast_mpi: %s\n", context.c_str());
    std::fprintf(out, "fast_mpi: %-20s %9s %9s %9s %7s %12s %14s %12s %12s\n", "call", "calls", "fast", "fallback",
                 "errors", "bytes fast", "bytes fallback", "time sum(s)", "max rank(s)");
    for (int k = 0; k < kinds; ++k) {
        const totals& s = sum;
        const auto kk = static_cast<op_kind>(k);
        if (field(s, kk, f_calls) == 0) continue;
        std::fprintf(
            out, "fast_mpi: %-20s %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %7" PRIu64 " %12s %14s %12.6f %12.6f\n",
            name(kk), field(s, kk, f_calls), field(s, kk, f_fast), field(s, kk, f_fallback), field(s, kk, f_errors),
            bytes_text(field(s, kk, f_bytes_fast)).c_str(), bytes_text(field(s, kk, f_bytes_fallback)).c_str(),
            sum.seconds[static_cast<std::size_t>(k)], max.seconds[static_cast<std::size_t>(k)]);
    }
    std::fprintf(out, "fast_mpi: fallbacks by reason:");
    for (int r = 0; r < reasons; ++r)
        std::fprintf(out, " %s %" PRIu64, name(static_cast<reason>(r)),
                     sum.count[static_cast<std::size_t>(at_reasons + r)]);
    std::fprintf(out,
                 "\nfast_mpi: executor: %" PRIu64 " communicators, %" PRIu64 " plans made, %" PRIu64 " reused, %" PRIu64
                 " persistent starts, %" PRIu64 " packed calls, time in the executor %.6f s (sum), %.6f s (max rank)\n",
                 sum.count[at_channels], sum.count[at_plans_made], sum.count[at_plans_reused], sum.count[at_starts],
                 sum.count[at_packed], sum.seconds[kinds], max.seconds[kinds]);
}

} // namespace

const char* name(op_kind k) noexcept {
    static const char* const n[] = {"MPI_Alltoall",   "MPI_Alltoallv",      "MPI_Ialltoall",
                                    "MPI_Ialltoallv", "MPIX_Alltoall_init", "MPIX_Alltoallv_init"};
    return n[static_cast<int>(k)];
}

const char* name(reason r) noexcept {
    static const char* const n[] = {"disabled",  "intercomm",  "in_place", "below_threshold", "datatype",
                                    "arguments", "other_rank", "topology", "unavailable"};
    return n[static_cast<int>(r)];
}

void count_fast(op_kind k, std::uint64_t bytes, double seconds) noexcept {
    add(k, f_fast, bytes, f_bytes_fast, seconds);
}

void count_fallback(op_kind k, reason r, std::uint64_t bytes, double seconds) noexcept {
    add(k, f_fallback, bytes, f_bytes_fallback, seconds);
    std::lock_guard lock(mutex);
    ++mine.count[static_cast<std::size_t>(at_reasons + static_cast<int>(r))];
}

void count_error(op_kind k) noexcept {
    add(k, f_errors, 0, f_bytes_fast, 0);
}

void count_start() noexcept {
    std::lock_guard lock(mutex);
    ++mine.count[at_starts];
}

void count_packed() noexcept {
    std::lock_guard lock(mutex);
    ++mine.count[at_packed];
}

void count_channel(const fast::exec::statistics& s, double executor_seconds) noexcept {
    std::lock_guard lock(mutex);
    ++mine.count[at_channels];
    mine.count[at_plans_made] += s.plans_made;
    mine.count[at_plans_reused] += s.plans_reused;
    mine.seconds[kinds] += executor_seconds;
}

void write_summary(MPI_Comm world, const std::string& where, const std::string& context) noexcept {
    totals local;
    {
        std::lock_guard lock(mutex);
        local = mine;
    }
    totals sum, max;
    PMPI_Reduce(local.count.data(), sum.count.data(), n_counts, MPI_UINT64_T, MPI_SUM, 0, world);
    PMPI_Reduce(local.seconds.data(), sum.seconds.data(), n_times, MPI_DOUBLE, MPI_SUM, 0, world);
    PMPI_Reduce(local.seconds.data(), max.seconds.data(), n_times, MPI_DOUBLE, MPI_MAX, 0, world);
    int rank = 0, size = 0;
    PMPI_Comm_rank(world, &rank);
    PMPI_Comm_size(world, &size);
    if (rank != 0) return;
    std::FILE* out = where == "stderr" ? stderr : std::fopen(where.c_str(), "w");
    if (out == nullptr) {
        std::fprintf(stderr, "fast_mpi: cannot write the summary to FAST_MPI_SUMMARY=%s\n", where.c_str());
        out = stderr;
    }
    print(out, sum, max, size, context);
    if (out != stderr) std::fclose(out);
}

} // namespace fast::mpi
