#pragma once
/// \file plan_json.hpp
/// The versioned JSON plan format "fast-plan/1" (docs/formats.md), for tools and simulators:
///   {"format": "fast-plan/1",
///    "topology": {"servers", "gpus_per_server", "scale_up_gbps", "scale_out_gbps",
///                 "alpha_up_us", "alpha_out_us"},
///    "scheduler": name, "one_to_one_scale_out": bool,
///    "matrix": R x R bytes (row = source rank), "scratch_bytes": [per rank],
///    "steps": [{"transfers": [{"src", "dst", "bytes", "tier", "src_buffer", "src_offset",
///                              "dst_buffer", "dst_offset"}]}],
///    "summary": {"stages", "steps", "planning_time_us", "predicted_time_us", "lower_bound_us"}}
/// Needs nlohmann-json (header-only) in addition to Eigen.

#include <cmath>
#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "cost.hpp"
#include "error.hpp"
#include "plan.hpp"
#include "traffic.hpp"

namespace fast {

inline constexpr const char* plan_format = "fast-plan/1";

/// Figures stored with a plan.
struct plan_summary {
    std::size_t stages = 0;
    std::size_t steps = 0;
    double planning_time_us = 0;
    double predicted_time_us = 0;
    double lower_bound_us = 0;
};

/// A plan with the matrix it carries, as read from a file.
struct plan_document {
    fast::plan plan;
    traffic_matrix matrix;
    plan_summary summary;
};

/// The summary of `p` for `m`: stages, steps, predicted time and bound from the cost model.
[[nodiscard]] inline plan_summary summarize(const plan& p, const traffic_matrix& m,
                                            double planning_time_us = 0) {
    return {count_stages(p), p.steps(), planning_time_us, predict_us(p), lower_bound_us(m, p.topology)};
}

/// Writes `p` and `m` as "fast-plan/1". Streams step by step, so large plans need no document
/// in memory. O(transfers + R^2).
inline void write_plan_json(std::ostream& out, const plan& p, const traffic_matrix& m,
                            const plan_summary& summary) {
    using nlohmann::json;
    const topology& t = p.topology;
    json head;
    head["servers"] = t.servers;
    head["gpus_per_server"] = t.gpus_per_server;
    head["scale_up_gbps"] = t.scale_up_gbps;
    head["scale_out_gbps"] = t.scale_out_gbps;
    head["alpha_up_us"] = t.alpha_up_us;
    head["alpha_out_us"] = t.alpha_out_us;
    out << "{\"format\": " << json(plan_format).dump() << ",\n \"topology\": " << head.dump()
        << ",\n \"scheduler\": " << json(p.scheduler).dump()
        << ",\n \"one_to_one_scale_out\": " << (p.one_to_one_scale_out ? "true" : "false")
        << ",\n \"matrix\": [";
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
        out << (i ? ",\n  [" : "\n  [");
        for (Eigen::Index j = 0; j < m.cols(); ++j) out << (j ? "," : "") << m(i, j);
        out << ']';
    }
    out << "],\n \"scratch_bytes\": " << json(p.scratch_bytes).dump() << ",\n \"steps\": [";
    for (std::size_t k = 0; k < p.steps(); ++k) {
        out << (k ? ",\n  " : "\n  ") << "{\"transfers\": [";
        bool first = true;
        for (const transfer& x : p.step(k)) {
            out << (first ? "\n    " : ",\n    ") << "{\"src\": " << x.src << ", \"dst\": " << x.dst
                << ", \"bytes\": " << x.bytes << ", \"tier\": \"" << to_string(x.tier)
                << "\", \"src_buffer\": \"" << to_string(x.src_buffer) << "\", \"src_offset\": "
                << x.src_offset << ", \"dst_buffer\": \"" << to_string(x.dst_buffer)
                << "\", \"dst_offset\": " << x.dst_offset << '}';
            first = false;
        }
        out << "]}";
    }
    json s;
    s["stages"] = summary.stages;
    s["steps"] = summary.steps;
    s["planning_time_us"] = summary.planning_time_us;
    s["predicted_time_us"] = summary.predicted_time_us;
    s["lower_bound_us"] = summary.lower_bound_us;
    out << "],\n \"summary\": " << s.dump() << "\n}\n";
}

namespace detail {

inline const nlohmann::json& json_field(const nlohmann::json& j, const char* key, const std::string& where) {
    if (!j.is_object()) throw invalid_argument(where + ": expected an object");
    const auto it = j.find(key);
    if (it == j.end()) throw invalid_argument(where + ": missing \"" + key + "\"");
    return *it;
}

inline std::int64_t json_integer(const nlohmann::json& j, const std::string& where, std::int64_t min,
                                 std::int64_t max) {
    if (!j.is_number_integer())
        throw invalid_argument(where + ": expected an integer, got " + j.dump());
    std::int64_t v = 0;
    if (j.is_number_unsigned()) {
        const auto u = j.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(INT64_MAX)) throw invalid_argument(where + ": " + j.dump() + " is too large");
        v = static_cast<std::int64_t>(u);
    } else {
        v = j.get<std::int64_t>();
    }
    if (v < min || v > max)
        throw invalid_argument(where + ": " + std::to_string(v) + " is out of range [" +
                               std::to_string(min) + ", " + std::to_string(max) + "]");
    return v;
}

inline double json_number(const nlohmann::json& j, const std::string& where) {
    if (!j.is_number()) throw invalid_argument(where + ": expected a number, got " + j.dump());
    return j.get<double>();
}

inline std::string json_string(const nlohmann::json& j, const std::string& where) {
    if (!j.is_string()) throw invalid_argument(where + ": expected a string, got " + j.dump());
    return j.get<std::string>();
}

} // namespace detail

/// Reads a "fast-plan/1" document. The plan is not verified here (use verify()); every field
/// is checked for presence and type, and errors name the field's path, e.g.
/// steps[3].transfers[17].tier. Throws fast::invalid_argument.
[[nodiscard]] inline plan_document read_plan_json(std::istream& in, const std::string& name = "plan") {
    using nlohmann::json;
    json j;
    try {
        j = json::parse(in);
    } catch (const json::exception& e) {
        throw invalid_argument(name + ": not valid JSON (" + e.what() + ")");
    }
    using detail::json_field;
    using detail::json_integer;
    const std::string format = detail::json_string(json_field(j, "format", name), name + ".format");
    if (format != plan_format)
        throw invalid_argument(name + ".format: \"" + format + "\" is not \"" + plan_format + "\"");
    plan_document doc;
    plan& p = doc.plan;
    const json& tj = json_field(j, "topology", name);
    topology& t = p.topology;
    t.servers = static_cast<int>(json_integer(json_field(tj, "servers", name + ".topology"), name + ".topology.servers", 1, INT32_MAX));
    t.gpus_per_server = static_cast<int>(json_integer(json_field(tj, "gpus_per_server", name + ".topology"),
                                                      name + ".topology.gpus_per_server", 1, INT32_MAX));
    t.scale_up_gbps = detail::json_number(json_field(tj, "scale_up_gbps", name + ".topology"), name + ".topology.scale_up_gbps");
    t.scale_out_gbps = detail::json_number(json_field(tj, "scale_out_gbps", name + ".topology"), name + ".topology.scale_out_gbps");
    t.alpha_up_us = detail::json_number(json_field(tj, "alpha_up_us", name + ".topology"), name + ".topology.alpha_up_us");
    t.alpha_out_us = detail::json_number(json_field(tj, "alpha_out_us", name + ".topology"), name + ".topology.alpha_out_us");
    try {
        validate(t);
    } catch (const invalid_argument& e) {
        throw invalid_argument(name + ".topology: " + e.what());
    }
    p.scheduler = detail::json_string(json_field(j, "scheduler", name), name + ".scheduler");
    if (const auto it = j.find("one_to_one_scale_out"); it != j.end()) {
        if (!it->is_boolean()) throw invalid_argument(name + ".one_to_one_scale_out: expected true or false");
        p.one_to_one_scale_out = it->get<bool>();
    }
    const int r = t.ranks();
    const json& mj = json_field(j, "matrix", name);
    if (!mj.is_array() || mj.size() != static_cast<std::size_t>(r))
        throw invalid_argument(name + ".matrix: expected " + std::to_string(r) + " rows of " +
                               std::to_string(r) + " entries (servers x gpus_per_server ranks)");
    doc.matrix.resize(r, r);
    for (int i = 0; i < r; ++i) {
        const json& row = mj[static_cast<std::size_t>(i)];
        const std::string where = name + ".matrix[" + std::to_string(i) + "]";
        if (!row.is_array() || row.size() != static_cast<std::size_t>(r))
            throw invalid_argument(where + ": expected " + std::to_string(r) + " entries");
        for (int k = 0; k < r; ++k)
            doc.matrix(i, k) = json_integer(row[static_cast<std::size_t>(k)], where + "[" + std::to_string(k) + "]", 0, INT64_MAX);
    }
    try {
        validate_traffic(doc.matrix, t);
    } catch (const invalid_argument& e) {
        throw invalid_argument(name + ".matrix: " + e.what());
    }
    const json& sj = json_field(j, "scratch_bytes", name);
    if (!sj.is_array() || sj.size() != static_cast<std::size_t>(r))
        throw invalid_argument(name + ".scratch_bytes: expected " + std::to_string(r) + " entries (one per rank)");
    p.scratch_bytes.resize(static_cast<std::size_t>(r));
    for (int i = 0; i < r; ++i)
        p.scratch_bytes[static_cast<std::size_t>(i)] =
            json_integer(sj[static_cast<std::size_t>(i)], name + ".scratch_bytes[" + std::to_string(i) + "]", 0, INT64_MAX);
    const json& steps = json_field(j, "steps", name);
    if (!steps.is_array()) throw invalid_argument(name + ".steps: expected an array");
    p.transfers.clear();
    p.step_offsets.assign(1, 0);
    for (std::size_t k = 0; k < steps.size(); ++k) {
        const std::string sw = name + ".steps[" + std::to_string(k) + "]";
        const json& list = json_field(steps[k], "transfers", sw);
        if (!list.is_array()) throw invalid_argument(sw + ".transfers: expected an array");
        for (std::size_t i = 0; i < list.size(); ++i) {
            const json& x = list[i];
            const std::string w = sw + ".transfers[" + std::to_string(i) + "]";
            transfer tr;
            tr.src = static_cast<std::int32_t>(json_integer(json_field(x, "src", w), w + ".src", 0, r - 1));
            tr.dst = static_cast<std::int32_t>(json_integer(json_field(x, "dst", w), w + ".dst", 0, r - 1));
            tr.bytes = json_integer(json_field(x, "bytes", w), w + ".bytes", 0, INT64_MAX);
            tr.src_offset = json_integer(json_field(x, "src_offset", w), w + ".src_offset", 0, INT64_MAX);
            tr.dst_offset = json_integer(json_field(x, "dst_offset", w), w + ".dst_offset", 0, INT64_MAX);
            const std::string tier_name = detail::json_string(json_field(x, "tier", w), w + ".tier");
            if (tier_name == "scale_up") tr.tier = tier::scale_up;
            else if (tier_name == "scale_out") tr.tier = tier::scale_out;
            else throw invalid_argument(w + ".tier: expected \"scale_up\" or \"scale_out\", got \"" + tier_name + "\"");
            auto buffer_of = [&](const char* key) {
                const std::string b = detail::json_string(json_field(x, key, w), w + "." + key);
                if (b == "send") return buffer::send;
                if (b == "recv") return buffer::recv;
                if (b == "scratch") return buffer::scratch;
                throw invalid_argument(w + "." + key + ": expected \"send\", \"recv\" or \"scratch\", got \"" + b + "\"");
            };
            tr.src_buffer = buffer_of("src_buffer");
            tr.dst_buffer = buffer_of("dst_buffer");
            p.transfers.push_back(tr);
        }
        p.end_step();
    }
    if (const auto it = j.find("summary"); it != j.end() && it->is_object()) {
        const json& s = *it;
        auto number = [&](const char* key) {
            const auto f = s.find(key);
            const double v = f != s.end() && f->is_number() ? f->get<double>() : 0.0;
            return std::isfinite(v) && v >= 0 && v < 1e18 ? v : 0.0; // informative only
        };
        doc.summary.planning_time_us = number("planning_time_us");
        doc.summary.predicted_time_us = number("predicted_time_us");
        doc.summary.lower_bound_us = number("lower_bound_us");
        doc.summary.stages = static_cast<std::size_t>(number("stages"));
        doc.summary.steps = static_cast<std::size_t>(number("steps"));
    }
    return doc;
}

} // namespace fast
