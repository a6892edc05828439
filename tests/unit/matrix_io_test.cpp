#include <catch2/catch.hpp>

#include <fast/matrix_io.hpp>

#include <cstdlib>
#include <sstream>

using namespace fast;

TEST_CASE("rows format with suffixes, comments and a unit") {
    std::istringstream in("# a 2 x 2 matrix\n0 1K\n\n2M 3\n");
    const traffic_matrix m = read_matrix(in, 0, 0, 2);
    REQUIRE(m.rows() == 2);
    CHECK(m(0, 1) == 2048);
    CHECK(m(1, 0) == 2 * 2 * 1024 * 1024);
    CHECK(m(1, 1) == 6);
}

TEST_CASE("flat format picks a matrix by index") {
    std::istringstream in("1\n2\n3\n4\n5\n6\n7\n8\n");
    const traffic_matrix m = read_matrix(in, 2, 1);
    CHECK(m(0, 0) == 5);
    CHECK(m(1, 1) == 8);
    std::istringstream again("1\n2\n3\n4\n5\n6\n7\n8\n");
    const matrix_file_info info = describe_matrix(again, 2);
    CHECK(info.format == matrix_format::flat);
    CHECK(info.matrices == 2);
    std::istringstream square("1\n2\n3\n4\n");
    CHECK(read_matrix(square)(1, 0) == 3);
}

TEST_CASE("several row matrices in one file") {
    std::istringstream in("1 2\n3 4\n5 6\n7 8\n");
    const auto all = read_matrices(in, 2);
    REQUIRE(all.size() == 2);
    CHECK(all[1](1, 0) == 7);
}

TEST_CASE("bad matrix text gives one clear line") {
    auto read = [](const std::string& text, int ranks = 0, std::size_t index = 0) {
        std::istringstream in(text);
        return read_matrix(in, ranks, index, 1, "m.txt");
    };
    CHECK_THROWS_WITH(read("0 1\n2 x\n"), Catch::Contains("m.txt:2: entry (1, 1): 'x' is not a non-negative integer"));
    CHECK_THROWS_WITH(read("0 -1\n2 3\n"), Catch::Contains("entry (0, 1): '-1' is negative"));
    CHECK_THROWS_WITH(read("0 1\n2 3 4\n"), Catch::Contains("m.txt:2: row has 3 entries, expected 2"));
    CHECK_THROWS_WITH(read("0 1 2\n3 4 5\n", 3), Catch::Contains("2 rows is not a multiple of 3"));
    CHECK_THROWS_WITH(read("1\n2\n3\n"), Catch::Contains("3 entries is not a square number"));
    CHECK_THROWS_WITH(read("1\n2\n3\n4\n5\n", 2), Catch::Contains("5 entries is not a multiple of 2 x 2"));
    CHECK_THROWS_WITH(read("1\n2\n3\n4\n", 2, 1),
                      Catch::Contains("matrix index 1 is out of range (the file holds 1 matrices"));
    CHECK_THROWS_WITH(read("99999999999999999999 1\n2 3\n"), Catch::Contains("does not fit in int64"));
    CHECK_THROWS_WITH(read("1Q 1\n2 3\n"), Catch::Contains("unknown suffix"));
    CHECK_THROWS_WITH(read(""), Catch::Contains("no matrix entries"));
    CHECK_THROWS_WITH(read_matrix_file("/nonexistent/file.txt"),
                      Catch::Contains("cannot open matrix file '/nonexistent/file.txt'"));
    std::istringstream huge("4611686018427387904 4611686018427387904\n0 0\n");
    CHECK_THROWS_WITH(read_matrix(huge), Catch::Contains("total overflows"));
}

TEST_CASE("a bad entry is quoted short and inert") {
    auto message = [](const std::string& text) {
        std::istringstream in(text);
        try {
            (void)read_matrix(in, 0, 0, 1, "m.txt");
        } catch (const invalid_argument& e) {
            return std::string(e.what());
        }
        FAIL("accepted: " << text.substr(0, 40));
        return std::string();
    };
    // A 1 MiB entry: the line keeps its first characters and says how long the entry was.
    const std::string long_entry = message("0 " + std::string(std::size_t{1} << 20, '7') + "x\n1 0\n");
    CHECK(long_entry.size() < 200);
    CHECK_THAT(long_entry, Catch::Contains("m.txt:1: entry (0, 1): '7777") &&
                               Catch::Contains("... (1048577 bytes)' does not fit in int64"));
    // Terminal escapes and other control bytes are spelled out, never passed through.
    const std::string escaped = message("0 \x1b[31mred\x07\n1 0\n");
    CHECK(escaped.find('\x1b') == std::string::npos);
    CHECK(escaped.find('\x07') == std::string::npos);
    CHECK_THAT(escaped, Catch::Contains("'\\x1b[31mred\\x07' is not a non-negative integer"));
}

TEST_CASE("the real Megatron traces read as 600 matrices of 32 x 32") {
    const char* path = std::getenv("FAST_MEGATRON"); // workloads/megatron_moe_4x8.txt, set by meson
    REQUIRE(path != nullptr);
    const matrix_file_info info = describe_matrix_file(path, 32);
    CHECK(info.format == matrix_format::flat);
    CHECK(info.matrices == 600);
    const auto all = read_matrices_file(path, 32, 8192);
    REQUIRE(all.size() == 600);
    CHECK(all[0](0, 0) == 683 * 8192);
    // Every rank sends the same number of tokens (README of the traces).
    for (const auto& m : all) CHECK(m.row(0).sum() == m.row(31).sum());
}
