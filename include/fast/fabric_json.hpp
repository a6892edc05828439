#pragma once
/// \file fabric_json.hpp
/// The fabric file format "fast-fabric/1" (docs/formats.md), read by fast-plan --fabric and the
/// executor's FAST_FABRIC:
///   {"format": "fast-fabric/1", "servers", "gpus_per_server", "scale_up_gbps", "alpha_up_us",
///    "alpha_out_us",
///    "nics": {"gpus_per_nic", "nics_per_gpu", "gbps", "rates": [{"server", "nic", "gbps"}]}
///          (every server alike; the optional fields 1, 1, none)
///         or [{"server", "gpus": [local GPU indices], "gbps"}] (every NIC listed)}
/// Every field is checked, unknown fields are errors, and each error is one line naming the file,
/// the field's path and the value: `fabric.json: nics[3].gbps: expected a number >= 0, got "fast"`.
/// Needs nlohmann-json (header-only) in addition to Eigen.

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "detail/json_fields.hpp"
#include "error.hpp"
#include "fabric.hpp"

namespace fast {

inline constexpr const char* fabric_format = "fast-fabric/1";

/// The most GPUs, and NICs, a fabric file may describe (a mistyped count fails here, not in
/// memory).
inline constexpr std::int64_t max_fabric_nics = std::int64_t{1} << 24;

namespace detail {

/// `f`'s NICs from the array form: every NIC with its server, GPUs and rate.
inline std::vector<nic> read_nic_list_json(const nlohmann::json& j, const std::string& where) {
    if (j.size() > static_cast<std::size_t>(max_fabric_nics))
        throw invalid_argument(where + ": more than " + std::to_string(max_fabric_nics) + " NICs");
    std::vector<nic> out;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const std::string at = where + "[" + std::to_string(i) + "]";
        json_known_fields(j[i], at, {"server", "gpus", "gbps"});
        nic n;
        n.server = static_cast<int>(json_integer(json_field(j[i], "server", at), at + ".server", 0, INT32_MAX));
        const nlohmann::json& gpus = json_field(j[i], "gpus", at);
        if (!gpus.is_array()) throw invalid_argument(at + ".gpus: expected an array, got " + quote_input(gpus.dump()));
        for (std::size_t k = 0; k < gpus.size(); ++k)
            n.gpus.push_back(
                static_cast<int>(json_integer(gpus[k], at + ".gpus[" + std::to_string(k) + "]", 0, INT32_MAX)));
        n.gbps = json_number_at_least(json_field(j[i], "gbps", at), at + ".gbps", 0);
        out.push_back(std::move(n));
    }
    return out;
}

/// The rates of "rates" entries ({"server", "nic", "gbps"}) into `nics`, `per_server` NICs per
/// server, server by server. A NIC listed twice is an error (likely a typo for another one).
inline void read_nic_rates_json(const nlohmann::json& j, const std::string& where, int servers, int per_server,
                                std::vector<nic>& nics) {
    if (!j.is_array()) throw invalid_argument(where + ": expected an array, got " + quote_input(j.dump()));
    std::vector<bool> listed(nics.size(), false);
    for (std::size_t i = 0; i < j.size(); ++i) {
        const std::string at = where + "[" + std::to_string(i) + "]";
        json_known_fields(j[i], at, {"server", "nic", "gbps"});
        const auto s = json_integer(json_field(j[i], "server", at), at + ".server", 0, servers - 1);
        const auto k = json_integer(json_field(j[i], "nic", at), at + ".nic", 0, per_server - 1);
        const auto index = static_cast<std::size_t>(s * per_server + k);
        if (listed[index])
            throw invalid_argument(at + ": NIC " + std::to_string(k) + " of server " + std::to_string(s) +
                                   " is listed twice");
        listed[index] = true;
        nics[index].gbps = json_number_at_least(json_field(j[i], "gbps", at), at + ".gbps", 0);
    }
}

/// `f`'s NICs from the object form: every server alike, some rates aside.
inline std::vector<nic> read_nic_layout_json(const nlohmann::json& j, const std::string& where, const fabric& f) {
    json_known_fields(j, where, {"gpus_per_nic", "nics_per_gpu", "gbps", "rates"});
    nic_layout l;
    auto count = [&](const char* key, int fallback, int max) {
        const auto it = j.find(key);
        return it == j.end() ? fallback : static_cast<int>(json_integer(*it, where + "." + key, 1, std::max(1, max)));
    };
    l.gpus_per_nic = count("gpus_per_nic", 1, f.gpus_per_server);
    l.nics_per_gpu = count("nics_per_gpu", 1, 64);
    l.gbps = json_number_at_least(json_field(j, "gbps", where), where + ".gbps", 0);
    if (static_cast<std::int64_t>(f.servers) * f.gpus_per_server * l.nics_per_gpu / l.gpus_per_nic > max_fabric_nics)
        throw invalid_argument(where + ": " + std::to_string(f.servers) + " servers of this layout have more than " +
                               std::to_string(max_fabric_nics) + " NICs");
    std::vector<nic> nics;
    try {
        nics = layout_nics(f.servers, f.gpus_per_server, l);
    } catch (const invalid_argument& e) {
        throw invalid_argument(where + ": " + e.what());
    }
    if (const auto it = j.find("rates"); it != j.end())
        read_nic_rates_json(*it, where + ".rates", f.servers, static_cast<int>(nics.size()) / f.servers, nics);
    return nics;
}

/// The fabric in `document`, with paths of fields after `name`; not yet validated as a whole.
inline fabric read_fabric_fields_json(const nlohmann::json& document, const std::string& name) {
    json_known_fields(document, name,
                      {"format", "servers", "gpus_per_server", "scale_up_gbps", "alpha_up_us", "alpha_out_us", "nics"});
    const topology t = json_topology_fields(document, name, ": ", false);
    if (t.ranks() > max_fabric_nics)
        throw invalid_argument(name + ": servers x gpus_per_server = " + std::to_string(t.servers) + " x " +
                               std::to_string(t.gpus_per_server) + ", more than " + std::to_string(max_fabric_nics) +
                               " GPUs");
    fabric f{t.servers, t.gpus_per_server, t.scale_up_gbps, t.alpha_up_us, t.alpha_out_us, {}};
    const nlohmann::json& nics = json_field(document, "nics", name);
    const std::string where = name + ": nics";
    if (nics.is_array()) f.nics = read_nic_list_json(nics, where);
    else if (nics.is_object()) f.nics = read_nic_layout_json(nics, where, f);
    else throw invalid_argument(where + ": expected an object (a layout) or an array, got " + quote_input(nics.dump()));
    return f;
}

} // namespace detail

/// Reads a "fast-fabric/1" document and validates the fabric (it may be uneven: to_topology
/// says whether the planner takes it). Throws fast::invalid_argument, one line starting with
/// `name`.
[[nodiscard]] inline fabric read_fabric_json(std::istream& in, const std::string& name = "fabric") {
    const nlohmann::json document = detail::json_document(in, name, name + ": format", fabric_format);
    fabric f = detail::read_fabric_fields_json(document, name);
    try {
        validate(f);
    } catch (const invalid_argument& e) {
        throw invalid_argument(name + ": " + e.what());
    }
    return f;
}

/// The fabric in file `path`; errors name the file.
[[nodiscard]] inline fabric read_fabric_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw invalid_argument("cannot read fabric file '" + detail::quote_input(path, 200) + "'");
    return read_fabric_json(in, detail::quote_input(path, 200));
}

namespace detail {

/// The layout every server of `f` repeats, rates aside (its rate the usual one), if there is one.
[[nodiscard]] inline std::optional<nic_layout> layout_of(const fabric& f) {
    const std::size_t servers = static_cast<std::size_t>(f.servers), gpus = static_cast<std::size_t>(f.gpus_per_server);
    if (f.nics.empty() || f.nics.size() % servers != 0) return std::nullopt;
    const std::size_t per_server = f.nics.size() / servers;
    nic_layout l{1, 1, usual_rate(f)};
    if (per_server <= gpus && gpus % per_server == 0) l.gpus_per_nic = static_cast<int>(gpus / per_server);
    else if (per_server % gpus == 0) l.nics_per_gpu = static_cast<int>(per_server / gpus);
    else return std::nullopt;
    const std::vector<nic> want = layout_nics(f.servers, f.gpus_per_server, l);
    for (std::size_t i = 0; i < want.size(); ++i)
        if (want[i].server != f.nics[i].server || want[i].gpus != f.nics[i].gpus) return std::nullopt;
    return l;
}

/// `j` on one line as people write it: {"key": value, ...}, [a, b].
[[nodiscard]] inline std::string one_line(const nlohmann::ordered_json& j) {
    if (!j.is_structured()) return j.dump();
    std::string out;
    for (auto it = j.begin(); it != j.end(); ++it)
        out += (out.empty() ? "" : ", ") + (j.is_object() ? nlohmann::json(it.key()).dump() + ": " : "") +
               one_line(it.value());
    return j.is_object() ? "{" + out + "}" : "[" + out + "]";
}

/// "nics" in the object form: the layout, and the NICs whose rate is not its rate.
inline void write_nic_layout_json(std::ostream& out, const fabric& f, const nic_layout& l) {
    using json = nlohmann::ordered_json;
    json head = {{"gpus_per_nic", l.gpus_per_nic}};
    if (l.nics_per_gpu > 1) head["nics_per_gpu"] = l.nics_per_gpu;
    head["gbps"] = l.gbps;
    std::string text = one_line(head);
    text.pop_back(); // the closing brace: "rates" may follow
    out << text;
    const std::size_t per_server = f.nics.size() / static_cast<std::size_t>(f.servers);
    bool first = true;
    for (std::size_t i = 0; i < f.nics.size(); ++i) {
        if (f.nics[i].gbps == l.gbps) continue;
        out << (first ? ", \"rates\": [\n    " : ",\n    ")
            << one_line({{"server", f.nics[i].server}, {"nic", i % per_server}, {"gbps", f.nics[i].gbps}});
        first = false;
    }
    out << (first ? "}" : "]}");
}

inline void write_nic_list_json(std::ostream& out, const fabric& f) {
    out << '[';
    for (std::size_t i = 0; i < f.nics.size(); ++i)
        out << (i ? ",\n    " : "\n    ")
            << one_line({{"server", f.nics[i].server}, {"gpus", f.nics[i].gpus}, {"gbps", f.nics[i].gbps}});
    out << "\n  ]";
}

} // namespace detail

/// Writes `f` as "fast-fabric/1", one field per line: "nics" as a layout where every server has
/// the same NICs (a uniform cluster takes nine lines), else every NIC on a line of its own.
inline void write_fabric_json(std::ostream& out, const fabric& f) {
    using json = nlohmann::json;
    out << "{\n  \"format\": " << json(fabric_format).dump() << ",\n  \"servers\": " << f.servers
        << ",\n  \"gpus_per_server\": " << f.gpus_per_server << ",\n  \"scale_up_gbps\": " << json(f.scale_up_gbps)
        << ",\n  \"alpha_up_us\": " << json(f.alpha_up_us) << ",\n  \"alpha_out_us\": " << json(f.alpha_out_us)
        << ",\n  \"nics\": ";
    if (const std::optional<nic_layout> l = detail::layout_of(f)) detail::write_nic_layout_json(out, f, *l);
    else detail::write_nic_list_json(out, f);
    out << "\n}\n";
}

} // namespace fast
