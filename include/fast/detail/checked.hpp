#pragma once
// Overflow-checked integer arithmetic: byte counts are exact, so a sum that does not fit is an
// input error, never a silent wrap.

#include <cstdint>
#include <string>

#include "../error.hpp"

namespace fast::detail {

[[nodiscard]] inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r))
        throw invalid_argument(std::string(what) + ": sum " + std::to_string(a) + " + " + std::to_string(b) +
                               " overflows 64-bit bytes");
    return r;
}

[[nodiscard]] inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r))
        throw invalid_argument(std::string(what) + ": product " + std::to_string(a) + " * " + std::to_string(b) +
                               " overflows 64-bit bytes");
    return r;
}

/// A non-negative double as int64, saturating at INT64_MAX (byte counts scaled by factors can
/// exceed the range; a plain cast would be undefined behaviour). NaN gives 0.
[[nodiscard]] constexpr std::int64_t saturate(double v) noexcept {
    if (!(v > 0)) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    return static_cast<std::int64_t>(v);
}

/// Ceiling division for non-negative numerator and positive denominator.
[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
    return a / b + (a % b != 0 ? 1 : 0);
}

} // namespace fast::detail
