// Replays fuzz inputs through a fuzz target without libFuzzer, so the seed corpus runs as a
// regression test in every build: replay_<target> FILE... (directories are read whole).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
    std::size_t count = 0;
    for (int k = 1; k < argc; ++k) {
        std::vector<std::filesystem::path> files;
        if (std::filesystem::is_directory(argv[k])) {
            for (const auto& e : std::filesystem::directory_iterator(argv[k]))
                if (e.is_regular_file()) files.push_back(e.path());
        } else {
            files.emplace_back(argv[k]);
        }
        for (const auto& f : files) {
            std::ifstream in(f, std::ios::binary);
            const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
            ++count;
        }
    }
    std::printf("replayed %zu inputs\n", count);
    return count > 0 ? 0 : 1;
}
