#pragma once
/// \file matrix_io.hpp
/// Reading traffic matrices from text. Two formats, detected from the first data line:
///  - rows: one matrix row per line, whitespace-separated entries (R lines of R entries; several
///    matrices may follow each other);
///  - flat: one entry per line, R * R lines per matrix, row-major (the format of the Megatron
///    traces in workloads/ of the repository).
/// Entries are non-negative integers with an optional binary suffix K, M, G or T (x1024^n).
/// Blank lines and lines starting with '#' are ignored. Every entry is multiplied by `unit`
/// (e.g. bytes per token). Errors name the line, the column and the text (quoted with
/// detail::quote_input: cut to a few dozen characters, control bytes escaped).

#include <cctype>
#include <cstdint>
#include <fstream>
#include <istream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "error.hpp"
#include "traffic.hpp"

namespace fast {

enum class matrix_format { rows, flat };

/// What a matrix file holds.
struct matrix_file_info {
    matrix_format format = matrix_format::rows;
    int ranks = 0;            ///< R
    std::size_t matrices = 0; ///< number of R x R matrices in the file
};

namespace detail {

/// Parses one entry ("123", "4K", "2m") with its multiplier; `where()` names the entry in errors
/// (built only on error: files hold millions of entries).
template <class Where>
std::int64_t parse_entry(std::string_view text, std::int64_t unit, Where&& where) {
    std::size_t digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    auto bad = [&](const char* why) { return invalid_argument(where() + ": '" + quote_input(text) + "' " + why); };
    if (digits == 0) {
        if (!text.empty() && text[0] == '-') throw bad("is negative");
        throw bad("is not a non-negative integer");
    }
    std::int64_t value = 0;
    for (std::size_t k = 0; k < digits; ++k) {
        if (__builtin_mul_overflow(value, std::int64_t{10}, &value) ||
            __builtin_add_overflow(value, std::int64_t{text[k] - '0'}, &value))
            throw bad("does not fit in int64");
    }
    std::int64_t scale = 1;
    if (digits < text.size()) {
        if (digits + 1 != text.size()) throw bad("is not a non-negative integer");
        switch (std::toupper(static_cast<unsigned char>(text[digits]))) {
        case 'K': scale = std::int64_t{1} << 10; break;
        case 'M': scale = std::int64_t{1} << 20; break;
        case 'G': scale = std::int64_t{1} << 30; break;
        case 'T': scale = std::int64_t{1} << 40; break;
        default: throw bad("has an unknown suffix (expected K, M, G or T)");
        }
    }
    std::int64_t out = 0;
    if (__builtin_mul_overflow(value, scale, &out) || __builtin_mul_overflow(out, unit, &out))
        throw bad("times its unit does not fit in int64 bytes");
    return out;
}

/// Splits the data lines of a stream into entries, remembering each entry's line number.
struct tokenized_text {
    std::vector<std::string> tokens;
    std::vector<std::size_t> token_line;       // 1-based line of each token
    std::vector<std::size_t> line_token_count; // tokens per data line, in order
    std::vector<std::size_t> data_line_number; // 1-based line of each data line
};

inline tokenized_text tokenize(std::istream& in) {
    tokenized_text t;
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        std::size_t count = 0;
        std::size_t pos = 0;
        while (pos < line.size()) {
            while (pos < line.size() && std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
            if (pos >= line.size()) break;
            if (count == 0 && line[pos] == '#') break;
            const std::size_t start = pos;
            while (pos < line.size() && !std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
            t.tokens.emplace_back(line.substr(start, pos - start));
            t.token_line.push_back(number);
            ++count;
        }
        if (count > 0) {
            t.line_token_count.push_back(count);
            t.data_line_number.push_back(number);
        }
    }
    return t;
}

inline matrix_file_info describe(const tokenized_text& t, int ranks, const std::string& name) {
    if (t.tokens.empty()) throw invalid_argument(name + ": no matrix entries found");
    matrix_file_info info;
    const std::size_t first = t.line_token_count.front();
    if (first > 1 || (ranks == 1 && t.line_token_count.size() == 1)) {
        info.format = matrix_format::rows;
        const std::size_t r = ranks > 0 ? static_cast<std::size_t>(ranks) : first;
        for (std::size_t l = 0; l < t.line_token_count.size(); ++l)
            if (t.line_token_count[l] != r)
                throw invalid_argument(name + ":" + std::to_string(t.data_line_number[l]) + ": row has " +
                                       std::to_string(t.line_token_count[l]) + " entries, expected " +
                                       std::to_string(r));
        if (t.line_token_count.size() % r != 0)
            throw invalid_argument(name + ": " + std::to_string(t.line_token_count.size()) +
                                   " rows is not a multiple of " + std::to_string(r) + " (one " + std::to_string(r) +
                                   " x " + std::to_string(r) + " matrix per " + std::to_string(r) + " rows)");
        info.ranks = static_cast<int>(r);
        info.matrices = t.line_token_count.size() / r;
        return info;
    }
    info.format = matrix_format::flat;
    const std::size_t n = t.tokens.size();
    std::size_t r = static_cast<std::size_t>(ranks);
    if (ranks <= 0) {
        // Without a rank count a flat file must hold exactly one square matrix.
        r = 1;
        while ((r + 1) * (r + 1) <= n) ++r;
        if (r * r != n)
            throw invalid_argument(name + ": " + std::to_string(n) +
                                   " entries is not a square number; give the rank count to "
                                   "read a flat file of several matrices");
    }
    if (n % (r * r) != 0)
        throw invalid_argument(name + ": " + std::to_string(n) + " entries is not a multiple of " + std::to_string(r) +
                               " x " + std::to_string(r) + " = " + std::to_string(r * r) +
                               " (flat format, one entry per line)");
    info.ranks = static_cast<int>(r);
    info.matrices = n / (r * r);
    return info;
}

} // namespace detail

/// Describes a matrix stream without keeping its entries. `ranks` = 0 infers R from the data
/// (the row length, or the square root of a flat file's entry count).
[[nodiscard]] inline matrix_file_info describe_matrix(std::istream& in, int ranks = 0,
                                                      const std::string& name = "matrix") {
    return detail::describe(detail::tokenize(in), ranks, name);
}

namespace detail {
inline traffic_matrix parse_matrix(const tokenized_text& t, const matrix_file_info& info, std::size_t index,
                                   std::int64_t unit, const std::string& name) {
    const auto r = static_cast<std::size_t>(info.ranks);
    traffic_matrix m(info.ranks, info.ranks);
    const std::size_t base = index * r * r;
    std::int64_t total = 0;
    for (std::size_t k = 0; k < r * r; ++k) {
        const std::size_t at = base + k;
        const std::size_t row = k / r;
        const std::size_t col = k % r;
        auto where = [&] {
            return name + ":" + std::to_string(t.token_line[at]) + ": entry (" + std::to_string(row) + ", " +
                   std::to_string(col) + ")";
        };
        const std::int64_t v = parse_entry(t.tokens[at], unit, where);
        if (__builtin_add_overflow(total, v, &total))
            throw invalid_argument(where() + ": the matrix total overflows int64 bytes");
        m(static_cast<Eigen::Index>(row), static_cast<Eigen::Index>(col)) = v;
    }
    return m;
}

inline void check_unit(std::int64_t unit) {
    if (unit < 1) throw invalid_argument("unit must be at least 1 byte, got " + std::to_string(unit));
}
} // namespace detail

/// Throws fast::invalid_argument unless `name` (described by `info`) holds matrix `index`.
inline void check_matrix_index(const matrix_file_info& info, std::size_t index, const std::string& name = "matrix") {
    if (index >= info.matrices)
        throw invalid_argument(name + ": matrix index " + std::to_string(index) + " is out of range (the file holds " +
                               std::to_string(info.matrices) + " matrices of " + std::to_string(info.ranks) + " x " +
                               std::to_string(info.ranks) + ")");
}

/// Reads matrix number `index` (0-based) of a stream in either format, each entry times `unit`.
/// `ranks` = 0 infers R. Throws fast::invalid_argument naming the line and entry on bad input.
/// O(size of the stream).
[[nodiscard]] inline traffic_matrix read_matrix(std::istream& in, int ranks = 0, std::size_t index = 0,
                                                std::int64_t unit = 1, const std::string& name = "matrix") {
    detail::check_unit(unit);
    const detail::tokenized_text t = detail::tokenize(in);
    const matrix_file_info info = detail::describe(t, ranks, name);
    check_matrix_index(info, index, name);
    return detail::parse_matrix(t, info, index, unit, name);
}

/// Reads every matrix of a stream, in order; see read_matrix.
[[nodiscard]] inline std::vector<traffic_matrix> read_matrices(std::istream& in, int ranks = 0, std::int64_t unit = 1,
                                                               const std::string& name = "matrix") {
    detail::check_unit(unit);
    const detail::tokenized_text t = detail::tokenize(in);
    const matrix_file_info info = detail::describe(t, ranks, name);
    std::vector<traffic_matrix> out;
    out.reserve(info.matrices);
    for (std::size_t k = 0; k < info.matrices; ++k) out.push_back(detail::parse_matrix(t, info, k, unit, name));
    return out;
}

/// Reads matrix `index` of the file at `path`; see read_matrix.
[[nodiscard]] inline traffic_matrix read_matrix_file(const std::string& path, int ranks = 0, std::size_t index = 0,
                                                     std::int64_t unit = 1) {
    std::ifstream in(path);
    if (!in) throw invalid_argument("cannot open matrix file '" + path + "'");
    return read_matrix(in, ranks, index, unit, path);
}

/// Reads every matrix of the file at `path`; see read_matrices.
[[nodiscard]] inline std::vector<traffic_matrix> read_matrices_file(const std::string& path, int ranks = 0,
                                                                    std::int64_t unit = 1) {
    std::ifstream in(path);
    if (!in) throw invalid_argument("cannot open matrix file '" + path + "'");
    return read_matrices(in, ranks, unit, path);
}

/// Describes the file at `path`; see describe_matrix.
[[nodiscard]] inline matrix_file_info describe_matrix_file(const std::string& path, int ranks = 0) {
    std::ifstream in(path);
    if (!in) throw invalid_argument("cannot open matrix file '" + path + "'");
    return describe_matrix(in, ranks, path);
}

/// Writes `m` in the rows format (one row per line), readable by read_matrix.
inline void write_matrix(std::ostream& out, const traffic_matrix& m) {
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
        for (Eigen::Index j = 0; j < m.cols(); ++j) {
            if (j) out << ' ';
            out << m(i, j);
        }
        out << '\n';
    }
}

} // namespace fast
