#pragma once
/// \file cluster_fabric.hpp
/// The cluster the shared options describe (cluster_options.hpp): a fabric file's (--fabric, else
/// FAST_FABRIC) or a preset's with --servers and --gpus, the overrides applied; as a fabric (what
/// `fast-plan fabric` prints) and as the planner's topology. Needs nlohmann-json (fabric files),
/// which the tools that include only cluster_options.hpp do without.

#include <fast/fabric_json.hpp>

#include "cluster_options.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace fast_tools {

/// The fabric file in force: --fabric, else FAST_FABRIC, else none ("").
[[nodiscard]] inline std::string fabric_file_of(const cluster_options& o) {
    if (!o.fabric.empty()) return o.fabric;
    const char* env = std::getenv("FAST_FABRIC");
    return env != nullptr ? env : "";
}

/// Where the cluster's figures come from, for tables: the fabric file or the preset.
[[nodiscard]] inline std::string cluster_source(const cluster_options& o) {
    const std::string file = fabric_file_of(o);
    return file.empty() ? o.preset : file;
}

/// The fabric of file `path` (--fabric or FAST_FABRIC), which --servers, --gpus and --preset
/// must not contradict. Errors name the file (and FAST_FABRIC where it came from there).
[[nodiscard]] inline fast::fabric fabric_from_file(const cluster_options& o, const std::string& path) {
    const std::string from = o.fabric.empty() ? "FAST_FABRIC: " : "";
    fast::fabric f;
    try {
        f = fast::read_fabric_file(path);
    } catch (const fast::invalid_argument& e) {
        throw fast::invalid_argument(from + e.what());
    }
    const std::string option = o.fabric.empty() ? "FAST_FABRIC=" + path : "--fabric " + path;
    auto conflict = [&](const CLI::Option* given, const char* name, int value, int file_value, const char* what) {
        if (given != nullptr && given->count() > 0 && value != file_value)
            throw fast::invalid_argument(std::string(name) + " " + std::to_string(value) + " contradicts " + option +
                                         " (" + std::to_string(file_value) + " " + what + ")");
    };
    conflict(o.servers_option, "--servers", o.servers, f.servers, "servers");
    conflict(o.gpus_option, "--gpus", o.gpus, f.gpus_per_server, "GPUs per server");
    if (o.preset_option != nullptr && o.preset_option->count() > 0)
        throw fast::invalid_argument("--preset " + o.preset + " and " + option + ": give one of the two");
    return f;
}

/// `f` with the overrides: --scale-out-gbps sets every NIC's rate.
inline void apply_overrides(const cluster_options& o, fast::fabric& f) {
    if (o.scale_up_gbps) f.scale_up_gbps = *o.scale_up_gbps;
    if (o.alpha_up_us) f.alpha_up_us = *o.alpha_up_us;
    if (o.alpha_out_us) f.alpha_out_us = *o.alpha_out_us;
    if (o.scale_out_gbps)
        for (fast::nic& n : f.nics) n.gbps = *o.scale_out_gbps;
}

/// The cluster as a fabric (the fabric file's, else the preset's) with the overrides, validated.
[[nodiscard]] inline fast::fabric fabric_of(const cluster_options& o) {
    const std::string file = fabric_file_of(o);
    if (file.empty() && static_cast<std::int64_t>(o.servers) * o.gpus > fast::max_fabric_nics)
        throw fast::invalid_argument("--servers " + std::to_string(o.servers) + " x --gpus " + std::to_string(o.gpus) +
                                     ": more than " + std::to_string(fast::max_fabric_nics) + " NICs to describe");
    fast::fabric f =
        file.empty() ? fast::preset_fabric(fast::parse_preset(o.preset), o.servers, o.gpus) : fabric_from_file(o, file);
    apply_overrides(o, f);
    fast::validate(f);
    return f;
}

/// The topology of a fabric file (`path`) with the overrides, or why the planner cannot take it.
[[nodiscard]] inline fast::topology topology_of_file(const cluster_options& o, const std::string& path) {
    fast::fabric f = fabric_from_file(o, path);
    apply_overrides(o, f);
    try {
        return fast::to_topology(f);
    } catch (const fast::invalid_argument& e) {
        throw fast::invalid_argument((o.fabric.empty() ? "FAST_FABRIC: " : "") + path + ": " + e.what());
    }
}

/// The fabric file's topology (an uneven fabric is an error), or the preset's; with the
/// overrides, validated; its traffic matrix fits in memory.
[[nodiscard]] inline fast::topology topology_of(const cluster_options& o) {
    const std::string file = fabric_file_of(o);
    if (!file.empty()) {
        const fast::topology t = topology_of_file(o, file);
        check_matrix_fits(t);
        return t;
    }
    // A preset's topology directly: its fabric would list a NIC per GPU (billions, for a typo).
    fast::topology t = fast::make_topology(o.servers, o.gpus, fast::parse_preset(o.preset));
    if (o.scale_up_gbps) t.scale_up_gbps = *o.scale_up_gbps;
    if (o.scale_out_gbps) t.scale_out_gbps = *o.scale_out_gbps;
    if (o.alpha_up_us) t.alpha_up_us = *o.alpha_up_us;
    if (o.alpha_out_us) t.alpha_out_us = *o.alpha_out_us;
    fast::validate(t);
    check_matrix_fits(t);
    return t;
}

/// The cluster as the planner takes it (planner(fabric)): the fabric file's, uneven ones too, or
/// the preset's uniform fabric; with the overrides, validated; its traffic matrix fits in memory.
[[nodiscard]] inline fast::fabric planning_fabric_of(const cluster_options& o) {
    if (fabric_file_of(o).empty()) return fast::uniform_fabric(topology_of(o));
    fast::fabric f = fabric_of(o);
    check_matrix_fits(fast::planning_topology(f));
    return f;
}

} // namespace fast_tools
