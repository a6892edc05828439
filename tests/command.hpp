#pragma once
// Running the tools (fast-plan, fast-simgrid) from tests: exit status and output, temp files.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace test_support {

struct result {
    int status = -1;
    std::string output; // stdout and stderr
};

/// Runs `command` in the shell, capturing stdout and stderr together.
inline result run_command(const std::string& command) {
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    result r;
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
    const int status = pclose(pipe);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

/// The executable named by environment variable `variable` (set by meson) run with `args`.
inline result run_tool(const char* variable, const std::string& args) {
    const char* exe = std::getenv(variable);
    REQUIRE(exe != nullptr);
    return run_command(std::string(exe) + " " + args);
}

/// A path in $TMPDIR (or /tmp) unique to this process.
inline std::string temp_path(const std::string& name) {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/fast_test_" + std::to_string(::getpid()) + "_" + name;
}

} // namespace test_support
