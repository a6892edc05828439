// libFuzzer target: any bytes given to the fast-plan/1 reader either fail with
// fast::invalid_argument, or give a plan that the verifier and the cost model can process
// without crashing (whatever it claims).
#include <fast/cost.hpp>
#include <fast/plan_json.hpp>
#include <fast/verify.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    fast::plan_document doc;
    try {
        doc = fast::read_plan_json(in, "fuzz");
    } catch (const fast::invalid_argument&) {
        return 0;
    }
    // Keep the replay small enough for a fuzzer: the reader accepts any size.
    if (static_cast<std::int64_t>(doc.plan.topology.ranks()) > 4096) return 0;
    const fast::verification v = fast::verify(doc.plan, doc.matrix);
    if (v.ok() && v.delivered_bytes != doc.matrix.sum()) __builtin_trap();
    if (v.ok()) (void)fast::predict_us(doc.plan);
    return 0;
}
