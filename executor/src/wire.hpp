#pragma once
// The records ranks exchange at creation and on every call, and how a gathered buffer of them
// is read: fixed-size, trivially copyable structs, one per rank at rank * stride.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fast/exec/status.hpp>

namespace fast::exec::detail {

inline constexpr std::uint64_t wire_magic = 0x4641535445584543ull; // "FASTEXEC"
inline constexpr std::uint32_t wire_version = 7;                   // 7: FAST_FABRIC's rates in the configuration

/// Copies `s` into a fixed text field, cut to fit, always terminated.
template <std::size_t N>
void put_text(char (&dst)[N], std::string_view s) noexcept {
    const std::size_t n = std::min(s.size(), N - 1);
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

template <std::size_t N>
std::string_view get_text(const char (&src)[N]) noexcept {
    return std::string_view(src, strnlen(src, N));
}

/// Rank r's record in a gathered buffer (copied out: the buffer holds bytes, not objects).
template <class T>
T entry(const std::vector<unsigned char>& all, std::size_t stride, int r) {
    static_assert(std::is_trivially_copyable_v<T>);
    T out;
    std::memcpy(&out, all.data() + static_cast<std::size_t>(r) * stride, sizeof out);
    return out;
}

/// Rank `rank`'s error (`code`, an errc read off the wire, and `text`) and `count - 1` more ranks'
/// errors, as one message every rank builds the same way.
inline status rank_error(const char* context, std::int32_t code, int rank, std::string_view text, int count) {
    std::string msg = std::string(context) + "rank " + std::to_string(rank) + ": " + std::string(text);
    if (count > 1) msg += " (and " + std::to_string(count - 1) + " more rank" + (count > 2 ? "s" : "") + ")";
    const auto c = static_cast<errc>(code);
    return status(c > errc::ok && c <= errc::internal ? c : errc::internal, msg);
}

/// The first rank whose record (`T::error`, `T::text`) reports an error, as one message every
/// rank builds the same way; ok if none does.
template <class T>
status first_error(const std::vector<unsigned char>& all, std::size_t stride, int size, const char* context) {
    int first = -1;
    int count = 0;
    for (int r = 0; r < size; ++r)
        if (entry<T>(all, stride, r).error != 0) {
            if (first < 0) first = r;
            ++count;
        }
    if (first < 0) return {};
    const T e = entry<T>(all, stride, first);
    return rank_error(context, e.error, first, get_text(e.text), count);
}

} // namespace fast::exec::detail
