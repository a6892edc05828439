#include "fabric_environment.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include <fast/error.hpp>
#ifdef FAST_EXEC_HAVE_JSON
#include <fast/fabric_json.hpp>
#endif

namespace fast::exec::detail {

std::uint64_t rates_digest(const std::vector<double>& rates) noexcept {
    std::uint64_t h = rates.empty() ? 0 : 1469598103934665603ull; // FNV-1a over the doubles' bytes
    for (const double rate : rates) {
        const double r = rate + 0.0; // -0 reads as 0
        unsigned char bytes[sizeof r];
        std::memcpy(bytes, &r, sizeof r);
        for (const unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
    }
    return h;
}

#ifdef FAST_EXEC_HAVE_JSON
std::string fabric_from_environment(exec::fabric& figures, fabric_shape& shape) {
    shape = {};
    const char* path = std::getenv("FAST_FABRIC");
    if (path == nullptr) return {};
    const std::string file = fast::detail::quote_input(path, 200);
    try {
        const fast::fabric f = fast::read_fabric_file(path); // its errors start with the file
        const fast::topology t = fast::planning_topology(f);
        figures = {t.scale_up_gbps, t.scale_out_gbps, t.alpha_up_us, t.alpha_out_us};
        shape = {t.servers, t.gpus_per_server, fast::has_uneven_rates(f) ? fast::nic_rates(f) : std::vector<double>{}};
    } catch (const fast::invalid_argument& e) {
        return std::string("FAST_FABRIC: ") + e.what();
    } catch (const std::bad_alloc&) {
        return "FAST_FABRIC: " + file + ": out of memory";
    }
    return {};
}
#else
std::string fabric_from_environment(exec::fabric&, fabric_shape& shape) {
    shape = {};
    if (std::getenv("FAST_FABRIC") == nullptr) return {};
    return "FAST_FABRIC is set, but this executor was built without nlohmann-json and reads no fabric files";
}
#endif

} // namespace fast::exec::detail
