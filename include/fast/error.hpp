#pragma once
/// \file error.hpp
/// The exception fast throws for bad user input.

#include <stdexcept>
#include <string>

namespace fast {

/// Thrown when user input is invalid. The message names the offending index and value, so that
/// a caller can print it as one line and exit.
class invalid_argument : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

} // namespace fast
