#include "settings.hpp"

#include <fast/matrix_io.hpp> // fast::detail::parse_entry: "64K" -> 65536

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string_view>

extern char** environ;

namespace fast::mpi {

namespace {

constexpr const char* names[][2] = {
    {"FAST_MPI_ENABLE", "1 (default) or 0: 0 sends every call to the MPI library unchanged"},
    {"FAST_MPI_THRESHOLD",
     "bytes (suffixes K, M, G): a call goes FAST when every rank sends or receives at least this much (8K)"},
    {"FAST_MPI_SCHEDULER", "fast (default) or direct: the executor's schedule"},
    {"FAST_MPI_FLOW", "rendezvous (default) or credits: the executor's flow control"},
    {"FAST_MPI_GPUS_PER_SERVER", "ranks per server; 0 (default): the ranks of each shared-memory node"},
    // The executor's FAST_FABRIC (a fabric file), where set, wins over these four.
    {"FAST_MPI_SCALE_UP_GBPS", "scale-up bandwidth per GPU the planner assumes, GB/s (450; FAST_FABRIC wins)"},
    {"FAST_MPI_SCALE_OUT_GBPS", "scale-out (NIC) bandwidth per GPU the planner assumes, GB/s (50; FAST_FABRIC wins)"},
    {"FAST_MPI_ALPHA_UP_US", "scale-up latency per step, microseconds (3; FAST_FABRIC wins)"},
    {"FAST_MPI_ALPHA_OUT_US", "scale-out latency per step, microseconds (10; FAST_FABRIC wins)"},
    {"FAST_MPI_TIMEOUT", "seconds: bound of every wait of a FAST call (60)"},
    {"FAST_MPI_SUMMARY", "0 (default), 1 (rank 0 prints a summary to stderr at MPI_Finalize) or a file name"},
};

bool is_true(std::string_view v) {
    return v == "1" || v == "yes" || v == "true" || v == "on";
}
bool is_false(std::string_view v) {
    return v == "0" || v == "no" || v == "false" || v == "off";
}

// A finite number > 0 (>= 0 with allow_zero), the whole text used.
bool parse_positive(const char* text, double& out, bool allow_zero) {
    char* end = nullptr;
    out = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(out)) return false;
    return allow_zero ? out >= 0 : out > 0;
}

std::string bad(const variable& v, const char* expected) {
    return std::string(v.name) + "='" + fast::detail::quote_input(v.value) + "': expected " + expected; // cut, escaped
}

bool parse_one(const variable& v, settings& s, std::string& error) {
    const std::string_view name = v.name, text = v.value;
    fast::exec::config& c = s.exec;
    double x = 0;
    if (name == "FAST_MPI_ENABLE") {
        if (!is_true(text) && !is_false(text)) return error = bad(v, "1 or 0"), false;
        s.enable = is_true(text);
    } else if (name == "FAST_MPI_THRESHOLD") {
        try {
            s.threshold = static_cast<std::size_t>(fast::detail::parse_entry(text, 1, [&] { return std::string(); }));
        } catch (const std::exception&) {
            return error = bad(v, "a byte count such as 65536 or 64K"), false;
        }
    } else if (name == "FAST_MPI_SCHEDULER") {
        if (text != "automatic" && text != "fast" && text != "direct")
            return error = bad(v, "automatic, fast or direct"), false;
        c.scheduler = text == "fast"     ? fast::exec::scheduler::fast
                      : text == "direct" ? fast::exec::scheduler::direct
                                         : fast::exec::scheduler::automatic;
    } else if (name == "FAST_MPI_FLOW") {
        if (text != "rendezvous" && text != "credits") return error = bad(v, "rendezvous or credits"), false;
        c.flow = text == "credits" ? fast::exec::flow_control::credits : fast::exec::flow_control::rendezvous;
    } else if (name == "FAST_MPI_GPUS_PER_SERVER") {
        if (!parse_positive(v.value, x, true) || x != std::floor(x) || x > 1e6)
            return error = bad(v, "a whole number of ranks per server (0: one server per node)"), false;
        c.gpus_per_server = static_cast<int>(x);
    } else if (name == "FAST_MPI_TIMEOUT") {
        if (!parse_positive(v.value, x, false) || x > 1e6) return error = bad(v, "a positive number of seconds"), false;
        c.timeout = std::chrono::milliseconds(std::max<long long>(1, std::llround(x * 1000)));
    } else if (name == "FAST_MPI_SUMMARY") {
        s.summary = is_false(text) ? "" : is_true(text) || text == "stderr" ? "stderr" : std::string(text);
        if (text.empty()) return error = bad(v, "0, 1 or a file name"), false;
    } else {
        const bool latency = name.find("ALPHA") != std::string_view::npos;
        if (!parse_positive(v.value, x, latency))
            return error = bad(v, latency ? "a non-negative number of microseconds" : "a positive number of GB/s"),
                   false;
        if (name == "FAST_MPI_SCALE_UP_GBPS") c.scale_up_gbps = x;
        if (name == "FAST_MPI_SCALE_OUT_GBPS") c.scale_out_gbps = x;
        if (name == "FAST_MPI_ALPHA_UP_US") c.alpha_up_us = x;
        if (name == "FAST_MPI_ALPHA_OUT_US") c.alpha_out_us = x;
    }
    return true;
}

} // namespace

std::vector<variable> read_variables() {
    std::vector<variable> out;
    for (const auto& n : names) out.push_back({n[0], n[1], std::getenv(n[0])});
    return out;
}

std::vector<std::string> unknown_variables() {
    std::vector<std::string> out;
    constexpr std::string_view prefix = "FAST_MPI_";
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view entry = *e;
        if (entry.substr(0, prefix.size()) != prefix) continue;
        const std::string name(entry.substr(0, entry.find('=')));
        bool known = false;
        for (const auto& n : names) known = known || name == n[0];
        if (!known) out.push_back(name);
    }
    return out;
}

bool parse_settings(const std::vector<variable>& vars, settings& out, std::string& error) {
    out = settings{};
    for (const variable& v : vars)
        if (v.value != nullptr && !parse_one(v, out, error)) return false;
    return true;
}

std::uint64_t digest(const variable& v) {
    std::uint64_t h = 1469598103934665603ull; // FNV-1a
    if (v.value == nullptr) return h ^ 0x5a5a5a5a5a5a5a5aull;
    for (const char* p = v.value; *p != '\0'; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
    return h;
}

} // namespace fast::mpi
