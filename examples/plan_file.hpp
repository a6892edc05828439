#pragma once
/// \file plan_file.hpp
/// Reading a fast-plan/1 file for the tools (fast-plan verify, fast-simgrid --plan): a path that
/// is missing, a directory or unreadable is a fast::invalid_argument naming it, as is bad JSON.

#include <fast/plan_json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace fast_tools {

/// The plan document at `path`, not yet verified.
[[nodiscard]] inline fast::plan_document read_plan_file(const std::string& path) {
    std::error_code error;
    if (std::filesystem::is_directory(path, error))
        throw fast::invalid_argument("cannot read plan file '" + path + "': it is a directory");
    errno = 0;
    std::ifstream in(path);
    if (!in)
        throw fast::invalid_argument("cannot open plan file '" + path + "'" +
                                     (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()));
    try {
        return fast::read_plan_json(in, path);
    } catch (const std::ios_base::failure& e) {
        throw fast::invalid_argument("cannot read plan file '" + path + "': " + e.what());
    }
}

} // namespace fast_tools
