// libFuzzer target: the matrix file readers must reject bad text with fast::invalid_argument and
// never crash, hang or overflow, whatever the bytes.
#include <fast/matrix_io.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    // The first byte picks the rank count (0: infer) and the unit; the rest is the file.
    const int ranks = size > 0 ? data[0] % 5 : 0;
    const std::int64_t unit = size > 1 ? (std::int64_t{1} << (data[1] % 40)) : 1;
    for (const int r : {0, ranks}) {
        try {
            std::istringstream in(text.substr(size > 2 ? 2 : size));
            const fast::traffic_matrix m = fast::read_matrix(in, r, 0, unit, "fuzz");
            if ((m.array() < 0).any()) __builtin_trap(); // entries are never negative
            if (m.rows() != m.cols()) __builtin_trap();
        } catch (const fast::invalid_argument&) {}
        try {
            std::istringstream in(text);
            const auto all = fast::read_matrices(in, r, unit, "fuzz");
            for (const auto& m : all)
                if (m.rows() != all.front().rows()) __builtin_trap();
        } catch (const fast::invalid_argument&) {}
    }
    return 0;
}
