#pragma once
/// \file plan_json.hpp
/// The versioned JSON plan format "fast-plan/1" (docs/formats.md), for tools and simulators:
///   {"format": "fast-plan/1",
///    "topology": {"servers", "gpus_per_server", "scale_up_gbps", "scale_out_gbps",
///                 "alpha_up_us", "alpha_out_us"},
///    "scheduler": name, "one_to_one_scale_out": bool, optional "nic_gbps": [per rank],
///    "matrix": R x R bytes (row = source rank), "scratch_bytes": [per rank],
///    "steps": [{"transfers": [{"src", "dst", "bytes", "tier", "src_buffer", "src_offset",
///                              "dst_buffer", "dst_offset"}]}],
///    "summary": {"stages", "steps", "planning_time_us", "rank_planning_time_us",
///                "agreement_bytes", "agreement_time_us", "predicted_time_us", "lower_bound_us",
///                "end_to_end"}}
/// Needs nlohmann-json (header-only) in addition to Eigen.

#include <cmath>
#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "agreement.hpp"
#include "cost.hpp"
#include "detail/json_fields.hpp"
#include "error.hpp"
#include "fabric_bounds.hpp"
#include "plan.hpp"
#include "traffic.hpp"

namespace fast {

inline constexpr const char* plan_format = "fast-plan/1";

/// Figures stored with a plan: what one call costs end to end, (agreement + one rank's planning
/// + predicted exchange) / T_lb (agreement.hpp; the rank's planning is measured by the tool that
/// wrote the file, 0 if it did not).
struct plan_summary {
    std::size_t stages = 0;
    std::size_t steps = 0;
    double planning_time_us = 0;      ///< the whole plan's
    double rank_planning_time_us = 0; ///< one rank's program (the busiest rank's, say)
    std::int64_t agreement_bytes = 0; ///< the count agreement: received per rank over scale-out
    double agreement_time_us = 0;     ///< its time in the cost model
    double predicted_time_us = 0;
    double lower_bound_us = 0;
    [[nodiscard]] double end_to_end() const noexcept {
        return lower_bound_us > 0 ? (agreement_time_us + rank_planning_time_us + predicted_time_us) / lower_bound_us
                                  : 0.0;
    }
};

/// A plan with the matrix it carries, as read from a file.
struct plan_document {
    fast::plan plan;
    traffic_matrix matrix;
    plan_summary summary;
};

/// T_lb of `m` on `p`'s cluster: the topology's, or on an uneven fabric (plan::nic_gbps) from
/// each server's summed rates (fabric_bounds.hpp).
[[nodiscard]] inline double plan_lower_bound_us(const plan& p, const traffic_matrix& m) {
    if (p.nic_gbps.empty()) return lower_bound_us(m, p.topology);
    return lower_bound(make_shared_counts(m, p.topology), fabric_of_rates(p.topology, p.nic_gbps)).us;
}

/// The summary of `p` for `m`: stages, steps, the agreement, predicted time and bound from the
/// cost model, and the planning times given.
[[nodiscard]] inline plan_summary summarize(const plan& p, const traffic_matrix& m, double planning_time_us = 0,
                                            double rank_planning_time_us = 0) {
    const agreement a = plan_agreement(p.topology);
    return {count_stages(p), p.steps(), planning_time_us, rank_planning_time_us,
            a.network_bytes, a.us,      predict_us(p),    plan_lower_bound_us(p, m)};
}

/// Writes `p` and `m` as "fast-plan/1". Streams step by step, so large plans need no document
/// in memory. O(transfers + R^2).
inline void write_plan_json(std::ostream& out, const plan& p, const traffic_matrix& m, const plan_summary& summary) {
    using nlohmann::json;
    const topology& topo = p.topology;
    const json topology_json = {{"servers", topo.servers},
                                {"gpus_per_server", topo.gpus_per_server},
                                {"scale_up_gbps", topo.scale_up_gbps},
                                {"scale_out_gbps", topo.scale_out_gbps},
                                {"alpha_up_us", topo.alpha_up_us},
                                {"alpha_out_us", topo.alpha_out_us}};
    out << "{\"format\": " << json(plan_format).dump() << ",\n \"topology\": " << topology_json.dump()
        << ",\n \"scheduler\": " << json(p.scheduler).dump()
        << ",\n \"one_to_one_scale_out\": " << (p.one_to_one_scale_out ? "true" : "false");
    if (!p.nic_gbps.empty()) out << ",\n \"nic_gbps\": " << json(p.nic_gbps).dump();
    out << ",\n \"matrix\": [";
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
        out << (i ? ",\n  [" : "\n  [");
        for (Eigen::Index j = 0; j < m.cols(); ++j) out << (j ? "," : "") << m(i, j);
        out << ']';
    }
    out << "],\n \"scratch_bytes\": " << json(p.scratch_bytes).dump() << ",\n \"steps\": [";
    for (std::size_t k = 0; k < p.steps(); ++k) {
        out << (k ? ",\n  " : "\n  ") << "{\"transfers\": [";
        bool first = true;
        for (const transfer& t : p.step(k)) {
            out << (first ? "\n    " : ",\n    ") << "{\"src\": " << t.src << ", \"dst\": " << t.dst
                << ", \"bytes\": " << t.bytes << ", \"tier\": \"" << to_string(t.tier) << "\", \"src_buffer\": \""
                << to_string(t.src_buffer) << "\", \"src_offset\": " << t.src_offset << ", \"dst_buffer\": \""
                << to_string(t.dst_buffer) << "\", \"dst_offset\": " << t.dst_offset << '}';
            first = false;
        }
        out << "]}";
    }
    const json summary_json = {{"stages", summary.stages},
                               {"steps", summary.steps},
                               {"planning_time_us", summary.planning_time_us},
                               {"rank_planning_time_us", summary.rank_planning_time_us},
                               {"agreement_bytes", summary.agreement_bytes},
                               {"agreement_time_us", summary.agreement_time_us},
                               {"predicted_time_us", summary.predicted_time_us},
                               {"lower_bound_us", summary.lower_bound_us},
                               {"end_to_end", summary.end_to_end()}};
    out << "],\n \"summary\": " << summary_json.dump() << "\n}\n";
}

namespace detail {

inline topology read_topology_json(const nlohmann::json& j, const std::string& where) {
    return json_topology_fields(j, where, ".", true);
}

inline traffic_matrix read_matrix_json(const nlohmann::json& j, const topology& t, const std::string& where) {
    const int ranks = t.ranks();
    const auto size = static_cast<std::size_t>(ranks);
    json_array(j, size, where, "rows of " + std::to_string(ranks) + " entries (servers x gpus_per_server ranks)");
    traffic_matrix m(ranks, ranks);
    for (int i = 0; i < ranks; ++i) {
        const std::string row = where + "[" + std::to_string(i) + "]";
        const nlohmann::json& entries = json_array(j[static_cast<std::size_t>(i)], size, row, "entries");
        for (int k = 0; k < ranks; ++k)
            m(i, k) =
                json_integer(entries[static_cast<std::size_t>(k)], row + "[" + std::to_string(k) + "]", 0, INT64_MAX);
    }
    try {
        validate_traffic(m, t);
    } catch (const invalid_argument& e) {
        throw invalid_argument(where + ": " + e.what());
    }
    return m;
}

inline tier read_tier_json(const nlohmann::json& j, const std::string& where) {
    const std::string name = json_string(j, where);
    if (name == "scale_up") return tier::scale_up;
    if (name == "scale_out") return tier::scale_out;
    throw invalid_argument(where + ": expected \"scale_up\" or \"scale_out\", got \"" + quote_input(name) + "\"");
}

inline buffer read_buffer_json(const nlohmann::json& j, const std::string& where) {
    const std::string name = json_string(j, where);
    if (name == "send") return buffer::send;
    if (name == "recv") return buffer::recv;
    if (name == "scratch") return buffer::scratch;
    throw invalid_argument(where + ": expected \"send\", \"recv\" or \"scratch\", got \"" + quote_input(name) + "\"");
}

/// One transfer between ranks [0, ranks); its consistency with the plan is the verifier's job.
inline transfer read_transfer_json(const nlohmann::json& j, int ranks, const std::string& where) {
    auto field = [&](const char* key) -> const nlohmann::json& { return json_field(j, key, where); };
    auto integer = [&](const char* key, std::int64_t max) {
        return json_integer(field(key), where + "." + key, 0, max);
    };
    transfer t;
    t.src = static_cast<std::int32_t>(integer("src", ranks - 1));
    t.dst = static_cast<std::int32_t>(integer("dst", ranks - 1));
    t.bytes = integer("bytes", INT64_MAX);
    t.src_offset = integer("src_offset", INT64_MAX);
    t.dst_offset = integer("dst_offset", INT64_MAX);
    t.tier = read_tier_json(field("tier"), where + ".tier");
    t.src_buffer = read_buffer_json(field("src_buffer"), where + ".src_buffer");
    t.dst_buffer = read_buffer_json(field("dst_buffer"), where + ".dst_buffer");
    return t;
}

/// The steps into `p` (whose topology is set).
inline void read_steps_json(const nlohmann::json& j, const std::string& where, plan& p) {
    if (!j.is_array()) throw invalid_argument(where + ": expected an array");
    p.transfers.clear();
    p.step_offsets.assign(1, 0);
    const int ranks = p.topology.ranks();
    for (std::size_t k = 0; k < j.size(); ++k) {
        const std::string step = where + "[" + std::to_string(k) + "]";
        const nlohmann::json& transfers = json_field(j[k], "transfers", step);
        if (!transfers.is_array()) throw invalid_argument(step + ".transfers: expected an array");
        for (std::size_t i = 0; i < transfers.size(); ++i)
            p.transfers.push_back(
                read_transfer_json(transfers[i], ranks, step + ".transfers[" + std::to_string(i) + "]"));
        p.end_step();
    }
}

/// The summary, informative only: a missing or odd figure reads as 0.
inline plan_summary read_summary_json(const nlohmann::json& document) {
    plan_summary out;
    const auto it = document.find("summary");
    if (it == document.end() || !it->is_object()) return out;
    auto number = [&summary = *it](const char* key) {
        const auto f = summary.find(key);
        const double v = f != summary.end() && f->is_number() ? f->get<double>() : 0.0;
        return std::isfinite(v) && v >= 0 && v < 1e18 ? v : 0.0;
    };
    out.planning_time_us = number("planning_time_us");
    out.rank_planning_time_us = number("rank_planning_time_us");
    out.agreement_bytes = static_cast<std::int64_t>(number("agreement_bytes"));
    out.agreement_time_us = number("agreement_time_us");
    out.predicted_time_us = number("predicted_time_us");
    out.lower_bound_us = number("lower_bound_us");
    out.stages = static_cast<std::size_t>(number("stages"));
    out.steps = static_cast<std::size_t>(number("steps"));
    return out;
}

} // namespace detail

/// Reads a "fast-plan/1" document. The plan is not verified here (use verify()); every field
/// is checked for presence and type, and errors name the field's path, e.g.
/// steps[3].transfers[17].tier. Throws fast::invalid_argument.
[[nodiscard]] inline plan_document read_plan_json(std::istream& in, const std::string& name = "plan") {
    using detail::json_field;
    using nlohmann::json;
    const json document = detail::json_document(in, name, name + ".format", plan_format);
    plan_document doc;
    plan& p = doc.plan;
    p.topology = detail::read_topology_json(json_field(document, "topology", name), name + ".topology");
    p.scheduler = detail::json_string(json_field(document, "scheduler", name), name + ".scheduler");
    if (const auto it = document.find("one_to_one_scale_out"); it != document.end()) {
        if (!it->is_boolean()) throw invalid_argument(name + ".one_to_one_scale_out: expected true or false");
        p.one_to_one_scale_out = it->get<bool>();
    }
    doc.matrix = detail::read_matrix_json(json_field(document, "matrix", name), p.topology, name + ".matrix");
    const int ranks = p.topology.ranks();
    if (const auto it = document.find("nic_gbps"); it != document.end()) {
        const json& rates =
            detail::json_array(*it, static_cast<std::size_t>(ranks), name + ".nic_gbps", "entries (one per rank)");
        for (std::size_t i = 0; i < rates.size(); ++i)
            p.nic_gbps.push_back(
                detail::json_number_at_least(rates[i], name + ".nic_gbps[" + std::to_string(i) + "]", 0.0));
    }
    const json& scratch =
        detail::json_array(json_field(document, "scratch_bytes", name), static_cast<std::size_t>(ranks),
                           name + ".scratch_bytes", "entries (one per rank)");
    p.scratch_bytes.resize(static_cast<std::size_t>(ranks));
    for (std::size_t i = 0; i < p.scratch_bytes.size(); ++i)
        p.scratch_bytes[i] =
            detail::json_integer(scratch[i], name + ".scratch_bytes[" + std::to_string(i) + "]", 0, INT64_MAX);
    detail::read_steps_json(json_field(document, "steps", name), name + ".steps", p);
    doc.summary = detail::read_summary_json(document);
    return doc;
}

} // namespace fast
