#pragma once
// FAST_ASSERT(condition, message): an internal invariant of the planner. A failure is a bug in
// the planner, never bad input (bad input throws fast::invalid_argument, naming the value), so
// it prints where and what and aborts instead of throwing something a caller might handle.
// Checked unless NDEBUG is defined: the project's builds keep it (meson's b_ndebug=false, the
// default in meson.build), CI's g++ and sanitizer builds included.

#include <cstdio>
#include <cstdlib>

namespace fast::detail {

[[noreturn]] inline void assertion_failed(const char* condition, const char* message, const char* file,
                                          int line) noexcept {
    std::fprintf(stderr, "fast: internal error at %s:%d: %s (%s is false)\n", file, line, message, condition);
    std::abort();
}

} // namespace fast::detail

#ifndef FAST_ASSERT
#ifdef NDEBUG
// sizeof: the condition is not evaluated, but its names count as used.
#define FAST_ASSERT(condition, message) static_cast<void>(sizeof((condition) ? 1 : 0))
#else
#define FAST_ASSERT(condition, message)                                                                                \
    ((condition) ? static_cast<void>(0) : ::fast::detail::assertion_failed(#condition, message, __FILE__, __LINE__))
#endif
#endif
