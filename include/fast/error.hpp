#pragma once
/// \file error.hpp
/// The exception fast throws for bad user input, and how messages quote that input.

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fast {

/// Thrown when user input is invalid. The message names the offending index and value, so that
/// a caller can print it as one line and exit.
class invalid_argument : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

namespace detail {

/// Characters of user input that a message quotes before it cuts the rest.
inline constexpr std::size_t quoted_input_limit = 40;

/// `text` as a message may quote it: bytes outside printable ASCII (terminal escapes, newlines,
/// UTF-8) as \xNN, a backslash as \\, and at most `limit` characters of the input kept, the cut
/// said with the input's length ("1234567... (1048576 bytes)"). The line stays short and inert.
[[nodiscard]] inline std::string quote_input(std::string_view text, std::size_t limit = quoted_input_limit) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    const std::size_t kept = text.size() > limit ? limit : text.size();
    out.reserve(kept + 24);
    for (std::size_t k = 0; k < kept; ++k) {
        const auto c = static_cast<unsigned char>(text[k]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 0xf];
        }
    }
    if (kept < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
    return out;
}

/// `v` as a message prints it: six significant digits ("0.5", "1e+300", "-5"), or as many as
/// it takes to read back the same double (at most 17), never std::to_string's fixed 300 digits.
[[nodiscard]] inline std::string format_number(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", v);
    if (std::strtod(text, nullptr) != v) std::snprintf(text, sizeof text, "%.17g", v);
    return text;
}

} // namespace detail

} // namespace fast
