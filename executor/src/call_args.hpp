#pragma once
// What one rank passes to a collective call of the communicator.

#include <cstddef>
#include <cstdint>
#include <span>

namespace fast::exec::detail {

/// What one rank passes to alltoallv (or alltoallv_init).
struct call_args {
    const void* send = nullptr;
    std::span<const std::size_t> sendcounts, sdispls;
    void* recv = nullptr;
    std::span<const std::size_t> recvcounts, rdispls;
};

enum class call_kind : std::int32_t { alltoallv = 1, alltoallv_init = 2 };

/// "alltoallv", "alltoallv_init" or "an unknown call" (a kind read off the wire).
[[nodiscard]] constexpr const char* kind_name(std::int32_t k) noexcept {
    return k == static_cast<std::int32_t>(call_kind::alltoallv)        ? "alltoallv"
           : k == static_cast<std::int32_t>(call_kind::alltoallv_init) ? "alltoallv_init"
                                                                       : "an unknown call";
}

} // namespace fast::exec::detail
