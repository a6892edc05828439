#pragma once
/// \file json_fields.hpp
/// Reading fields of fast's JSON documents (fast-plan/1, fast-fabric/1): each helper checks one
/// field's presence, type and range, and throws fast::invalid_argument naming the field's path
/// (`where`) and the value it found. Needs nlohmann-json.

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <istream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../error.hpp"
#include "../topology.hpp"

namespace fast::detail {

inline const nlohmann::json& json_field(const nlohmann::json& j, const char* key, const std::string& where) {
    if (!j.is_object()) throw invalid_argument(where + ": expected an object");
    const auto it = j.find(key);
    if (it == j.end()) throw invalid_argument(where + ": missing \"" + key + "\"");
    return *it;
}

inline std::int64_t json_integer(const nlohmann::json& j, const std::string& where, std::int64_t min,
                                 std::int64_t max) {
    if (!j.is_number_integer()) throw invalid_argument(where + ": expected an integer, got " + quote_input(j.dump()));
    std::int64_t v = 0;
    if (j.is_number_unsigned()) {
        const auto u = j.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(INT64_MAX))
            throw invalid_argument(where + ": " + quote_input(j.dump()) + " is too large");
        v = static_cast<std::int64_t>(u);
    } else {
        v = j.get<std::int64_t>();
    }
    if (v < min || v > max)
        throw invalid_argument(where + ": " + std::to_string(v) + " is out of range [" + std::to_string(min) + ", " +
                               std::to_string(max) + "]");
    return v;
}

inline double json_number(const nlohmann::json& j, const std::string& where) {
    if (!j.is_number()) throw invalid_argument(where + ": expected a number, got " + quote_input(j.dump()));
    return j.get<double>();
}

/// A finite number of at least `min`; the error states the bound ("expected a number >= 0").
inline double json_number_at_least(const nlohmann::json& j, const std::string& where, double min) {
    const double v = j.is_number() ? j.get<double>() : NAN;
    if (!(std::isfinite(v) && v >= min))
        throw invalid_argument(where + ": expected a number >= " + format_number(min) + ", got " +
                               quote_input(j.dump()));
    return v;
}

inline std::string json_string(const nlohmann::json& j, const std::string& where) {
    if (!j.is_string()) throw invalid_argument(where + ": expected a string, got " + quote_input(j.dump()));
    return j.get<std::string>();
}

/// An array field of exactly `size` entries; `what` says what they are, in the error.
inline const nlohmann::json& json_array(const nlohmann::json& j, std::size_t size, const std::string& where,
                                        const std::string& what) {
    if (!j.is_array() || j.size() != size)
        throw invalid_argument(where + ": expected " + std::to_string(size) + " " + what);
    return j;
}

/// An object whose fields are all among `known`: a misspelt field is an error, never ignored.
inline void json_known_fields(const nlohmann::json& j, const std::string& where,
                              std::initializer_list<std::string_view> known) {
    if (!j.is_object()) throw invalid_argument(where + ": expected an object, got " + quote_input(j.dump()));
    for (const auto& [key, value] : j.items()) {
        bool found = false;
        for (const std::string_view k : known) found = found || key == k;
        if (found) continue;
        std::string names;
        for (const std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
        throw invalid_argument(where + ": unknown field \"" + quote_input(key) + "\" (expected " + names + ")");
    }
}

/// The topology's figures in the fields of `j` (paths `where` + `separator` + field), validated;
/// without `scale_out_gbps` when `with_scale_out` is false (a fabric's NICs carry their rates),
/// which then reads 1.
inline topology json_topology_fields(const nlohmann::json& j, const std::string& where, const char* separator,
                                     bool with_scale_out) {
    auto count = [&](const char* key) {
        return static_cast<int>(json_integer(json_field(j, key, where), where + separator + key, 1, INT32_MAX));
    };
    auto number = [&](const char* key) { return json_number(json_field(j, key, where), where + separator + key); };
    topology t;
    t.servers = count("servers");
    t.gpus_per_server = count("gpus_per_server");
    t.scale_up_gbps = number("scale_up_gbps");
    t.scale_out_gbps = with_scale_out ? number("scale_out_gbps") : 1.0;
    t.alpha_up_us = number("alpha_up_us");
    t.alpha_out_us = number("alpha_out_us");
    try {
        validate(t);
    } catch (const invalid_argument& e) {
        throw invalid_argument(where + ": " + e.what());
    }
    return t;
}

/// The document in `in`, whose "format" (at path `format_where`, for errors) must be `format`;
/// errors start with `name`.
inline nlohmann::json json_document(std::istream& in, const std::string& name, const std::string& format_where,
                                    const char* format) {
    nlohmann::json document;
    try {
        document = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw invalid_argument(name + ": not valid JSON (" + quote_input(e.what(), 200) + ")");
    }
    const std::string found = json_string(json_field(document, "format", name), format_where);
    if (found != format)
        throw invalid_argument(format_where + ": \"" + quote_input(found) + "\" is not \"" + format + "\"");
    return document;
}

} // namespace fast::detail
