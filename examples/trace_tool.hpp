#pragma once
// fast-plan trace PREFIX: reads an executor's execution traces (PREFIX.rank<R>.json, the
// "fast-trace/1" files of config.trace / FAST_TRACE, docs/executor.md), rebuilds every call's
// plan from the recorded counts and fabric, and sets what each call did beside what the cost
// model predicts: one line per call (the agreement, planning and compiling phases, the steps'
// span measured and predicted, their ratio), medians; with --svg, the measured and predicted
// timelines of one call on one time axis (the same lanes and ports); with --chrome, every rank's
// events in one Chrome trace file (Perfetto, chrome://tracing), times from the first call's
// start.

#include <fast/fast.hpp>
#include <fast/plan_json.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "timeline_svg.hpp"

namespace fast_plan {

struct trace_options {
    std::string prefix;
    std::string svg;
    std::string chrome;
    int call = -1; ///< the call drawn by --svg (index among the data calls; -1: the last)
};

namespace trace_detail {

using json = nlohmann::json;

// One rank's file.
struct rank_trace {
    int rank = 0;
    json doc;
};

// The files PREFIX.rank<R>.json, by rank.
inline std::vector<rank_trace> read_traces(const std::string& prefix) {
    namespace fs = std::filesystem;
    const fs::path p(prefix);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    const std::string stem = p.filename().string() + ".rank";
    std::vector<rank_trace> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(stem, 0) != 0 || name.size() < 5 || name.substr(name.size() - 5) != ".json" ||
            name.find(".chrome.") != std::string::npos)
            continue;
        std::ifstream in(entry.path());
        rank_trace t;
        try {
            t.doc = json::parse(in);
        } catch (const json::exception& e) {
            throw fast::invalid_argument("trace " + entry.path().string() + " is not JSON: " + e.what());
        }
        if (t.doc.value("format", "") != "fast-trace/1")
            throw fast::invalid_argument("trace " + entry.path().string() + " is not a fast-trace/1 file");
        t.rank = t.doc.at("rank").get<int>();
        out.push_back(std::move(t));
    }
    if (ec) throw fast::invalid_argument("cannot read the directory " + dir.string() + ": " + ec.message());
    if (out.empty()) throw fast::invalid_argument("no trace files " + prefix + ".rank<R>.json");
    std::sort(out.begin(), out.end(), [](const rank_trace& a, const rank_trace& b) { return a.rank < b.rank; });
    const int size = out.front().doc.at("size").get<int>();
    if (static_cast<int>(out.size()) != size)
        throw fast::invalid_argument(std::to_string(out.size()) + " trace files for " + std::to_string(size) +
                                     " ranks (" + prefix + ".rank<R>.json): every rank's file is needed");
    for (int r = 0; r < size; ++r)
        if (out[static_cast<std::size_t>(r)].rank != r)
            throw fast::invalid_argument("the trace of rank " + std::to_string(r) + " is missing");
    return out;
}

// The planner every rank ran: topology and options from rank 0's file.
inline fast::topology topology_of(const json& d) {
    const json& f = d.at("fabric");
    fast::topology t{d.at("servers").get<int>(),          d.at("gpus_per_server").get<int>(),
                     f.at("scale_up_gbps").get<double>(), f.at("scale_out_gbps").get<double>(),
                     f.at("alpha_up_us").get<double>(),   f.at("alpha_out_us").get<double>()};
    fast::validate(t);
    return t;
}

// Every rank's NIC rate where the planner planned on uneven rates (a slow or down NIC), else empty.
inline std::vector<double> nic_rates_of(const json& d) {
    const json& f = d.at("fabric");
    return f.contains("nic_gbps") ? f.at("nic_gbps").get<std::vector<double>>() : std::vector<double>{};
}

// What one call did on every rank.
struct call_record {
    std::size_t index = 0; // in every rank's calls
    std::uint64_t seq = 0;
    std::string kind;
    bool ok = true;
    bool split = false;
    std::uint64_t plan_steps = 0; // the executor's plan's, as traced
    fast::traffic_matrix matrix;
    std::uint64_t start = UINT64_MAX, first_step = UINT64_MAX, last_step_end = 0, end = 0;
    double agree_us = 0, plan_us = 0, compile_us = 0; // the slowest rank's
};

inline std::vector<call_record> calls_of(const std::vector<rank_trace>& ranks) {
    const std::size_t count = ranks.front().doc.at("calls").size();
    const auto r = static_cast<Eigen::Index>(ranks.size());
    std::vector<call_record> out;
    for (std::size_t k = 0; k < count; ++k) {
        call_record c;
        c.index = k;
        c.matrix = fast::traffic_matrix::Zero(r, r);
        for (const rank_trace& t : ranks) {
            const json& calls = t.doc.at("calls");
            if (calls.size() != count)
                throw fast::invalid_argument("rank " + std::to_string(t.rank) + " traced " +
                                             std::to_string(calls.size()) + " calls, rank 0 " + std::to_string(count));
            const json& x = calls[k];
            c.seq = x.at("seq").get<std::uint64_t>();
            c.kind = x.at("kind").get<std::string>();
            c.ok = c.ok && x.at("ok").get<bool>();
            c.split = x.value("split_blocks", false);
            c.plan_steps = std::max(c.plan_steps, x.value("plan_steps", std::uint64_t{0}));
            const auto counts = x.at("sendcounts").get<std::vector<std::int64_t>>();
            for (std::size_t j = 0; j < counts.size() && static_cast<Eigen::Index>(j) < r; ++j)
                c.matrix(t.rank, static_cast<Eigen::Index>(j)) = counts[j];
            const auto start = x.at("start").get<std::uint64_t>();
            const auto agreed = x.at("agreed").get<std::uint64_t>();
            const auto planned = x.at("planned_at").get<std::uint64_t>();
            const auto compiled = x.at("compiled").get<std::uint64_t>();
            c.start = std::min(c.start, start);
            c.end = std::max(c.end, x.at("end").get<std::uint64_t>());
            c.agree_us = std::max(c.agree_us, agreed > start ? static_cast<double>(agreed - start) / 1e3 : 0.0);
            c.plan_us = std::max(c.plan_us, planned > agreed ? static_cast<double>(planned - agreed) / 1e3 : 0.0);
            c.compile_us =
                std::max(c.compile_us, compiled > planned ? static_cast<double>(compiled - planned) / 1e3 : 0.0);
            for (const json& st : x.at("steps")) {
                c.first_step = std::min(c.first_step, st.at(1).get<std::uint64_t>());
                c.last_step_end = std::max(c.last_step_end, st.at(2).get<std::uint64_t>());
            }
        }
        out.push_back(std::move(c));
    }
    return out;
}

// The measured run of call k as the cost model's port batches: per rank, step and port, from the
// first post to the last completion, times from the call's first step.
inline fast::prediction measured(const std::vector<rank_trace>& ranks, const call_record& c) {
    fast::prediction p;
    p.rank_finish_us.assign(ranks.size(), 0.0);
    const double origin = static_cast<double>(c.first_step);
    for (const rank_trace& t : ranks) {
        std::map<std::pair<std::uint32_t, int>, fast::port_batch> batches; // (step, port)
        for (const json& o : t.doc.at("calls")[c.index].at("ops")) {
            const std::string kind = o.at(0).get<std::string>();
            const bool out = o.at(1).get<std::string>() == "out";
            const auto step = o.at(2).get<std::uint32_t>();
            const auto bytes = o.at(4).get<std::int64_t>();
            const double post = (static_cast<double>(o.at(5).get<std::uint64_t>()) - origin) / 1e3;
            const double done = (static_cast<double>(o.at(6).get<std::uint64_t>()) - origin) / 1e3;
            std::vector<fast::port> ports;
            if (kind == "copy") ports = {fast::port::up_send, fast::port::up_recv};
            else if (kind == "send") ports = {out ? fast::port::out_send : fast::port::up_send};
            else ports = {out ? fast::port::out_recv : fast::port::up_recv};
            for (const fast::port q : ports) {
                auto [it, fresh] =
                    batches.try_emplace({step, static_cast<int>(q)}, fast::port_batch{step, t.rank, q, post, done, 0});
                fast::port_batch& b = it->second;
                if (!fresh) {
                    b.start_us = std::min(b.start_us, post);
                    b.end_us = std::max(b.end_us, done);
                }
                b.bytes += bytes;
            }
            p.rank_finish_us[static_cast<std::size_t>(t.rank)] =
                std::max(p.rank_finish_us[static_cast<std::size_t>(t.rank)], done);
        }
        for (const auto& [key, b] : batches) p.batches.push_back(b);
    }
    for (const double f : p.rank_finish_us) p.completion_us = std::max(p.completion_us, f);
    return p;
}

// Every rank's Chrome events in one file, times from the first call's start.
inline void write_chrome(const std::vector<rank_trace>& ranks, const std::string& prefix, const std::string& path,
                         std::uint64_t origin_ns) {
    json merged;
    merged["displayTimeUnit"] = "ns";
    json& events = merged["traceEvents"];
    events = json::array();
    for (const rank_trace& t : ranks) {
        const std::string file = prefix + ".rank" + std::to_string(t.rank) + ".chrome.json";
        std::ifstream in(file);
        if (!in) throw fast::invalid_argument("cannot read " + file);
        json doc;
        try {
            doc = json::parse(in);
        } catch (const json::exception& e) {
            throw fast::invalid_argument(file + " is not JSON: " + e.what());
        }
        for (json& e : doc.at("traceEvents")) {
            if (e.contains("ts")) e["ts"] = e["ts"].get<double>() - static_cast<double>(origin_ns) / 1e3;
            events.push_back(std::move(e));
        }
    }
    std::ofstream out(path);
    out << merged.dump() << "\n";
    if (!out) throw fast::invalid_argument("writing '" + path + "' failed");
}

} // namespace trace_detail

/// The `fast-plan trace` command; returns the exit status.
inline int run_trace(const trace_options& o) {
    using namespace trace_detail;
    const std::vector<rank_trace> ranks = read_traces(o.prefix);
    const json& head = ranks.front().doc;
    const fast::topology topo = topology_of(head);
    const std::vector<double> rates = nic_rates_of(head);
    std::vector<call_record> calls = calls_of(ranks);
    fast::plan_options options;
    options.scheduler = fast::parse_scheduler(head.at("scheduler").get<std::string>());
    std::printf("fast-plan trace: %s: %zu ranks = %d servers x %d GPUs on %s, scheduler %s, flow %s, fabric: "
                "scale-up %g GB/s, scale-out %g GB/s, alpha %g/%g us\n",
                o.prefix.c_str(), ranks.size(), topo.servers, topo.gpus_per_server, head.value("host", "?").c_str(),
                head.at("scheduler").get<std::string>().c_str(), head.at("flow").get<std::string>().c_str(),
                topo.scale_up_gbps, topo.scale_out_gbps, topo.alpha_up_us, topo.alpha_out_us);
    std::printf("times: the slowest rank's phase, and the steps' span over all ranks (first step start to last step "
                "end), against the cost model's prediction of the same plan\n\n");
    std::printf("%5s %-15s %-8s %6s %11s %10s %12s %12s %15s %9s\n", "call", "kind", "plan", "steps", "agree(us)",
                "plan(us)", "compile(us)", "steps(us)", "predicted(us)", "measured/predicted");
    std::vector<double> ratios;
    std::vector<fast::plan> plans(calls.size());
    std::vector<int> data_calls;
    for (call_record& c : calls) {
        const bool data = c.kind != "alltoallv_init" && c.first_step != UINT64_MAX;
        fast::plan_options po = options;
        po.split_blocks = c.split;
        fast::planner planner =
            rates.empty() ? fast::planner(topo, po) : fast::planner(fast::fabric_of_rates(topo, rates), po);
        fast::plan& p = plans[c.index];
        // The executor's programs number the schedule's steps, empty ones too (a whole plan leaves
        // those out): compare with a program's count.
        if (const std::uint32_t steps = planner.make_rank(c.matrix, 0).steps; c.plan_steps != 0 && c.plan_steps != steps)
            throw fast::invalid_argument("call " + std::to_string(c.index) + ": the executor's plan had " +
                                         std::to_string(c.plan_steps) + " steps, the plan of its traced counts " +
                                         std::to_string(steps) + ": the traces do not say how the executor planned");
        p = planner.make(c.matrix);
        const double predicted = fast::predict_us(p);
        const double span = data ? static_cast<double>(c.last_step_end - c.first_step) / 1e3 : 0.0;
        const double ratio = predicted > 0 && data ? span / predicted : 0.0;
        if (data && c.ok) {
            ratios.push_back(ratio);
            data_calls.push_back(static_cast<int>(c.index));
        }
        std::printf("%5zu %-15s %-8s %6zu %11.0f %10.0f %12.0f %12.0f %15.0f %9.3f%s\n", c.index, c.kind.c_str(),
                    p.scheduler.c_str(), p.steps(), c.agree_us, c.plan_us, c.compile_us, span, predicted, ratio,
                    c.ok ? "" : "  (failed)");
    }
    if (!ratios.empty()) {
        std::vector<double> sorted = ratios;
        std::sort(sorted.begin(), sorted.end());
        std::printf("\nmeasured / predicted over %zu calls: median %.3f, min %.3f, max %.3f\n", sorted.size(),
                    sorted[sorted.size() / 2], sorted.front(), sorted.back());
    }
    if (!o.chrome.empty()) {
        write_chrome(ranks, o.prefix, o.chrome, calls.empty() ? 0 : calls.front().start);
        std::printf("every rank's events written to %s (Chrome trace format)\n", o.chrome.c_str());
    }
    if (!o.svg.empty()) {
        if (data_calls.empty()) throw fast::invalid_argument("--svg: no completed call with steps in the trace");
        const int pick = o.call >= 0 ? o.call : data_calls.back();
        if (std::find(data_calls.begin(), data_calls.end(), pick) == data_calls.end())
            throw fast::invalid_argument("--call " + std::to_string(pick) + " is not a completed call with steps");
        const call_record& c = calls[static_cast<std::size_t>(pick)];
        const fast::plan& p = plans[static_cast<std::size_t>(pick)];
        std::vector<timeline_panel> panels;
        panels.push_back({"predicted (cost model)", &p, fast::simulate(p, true)});
        panels.push_back({"measured (trace)", &p, measured(ranks, c), true});
        timeline_options to;
        to.title = "fast-plan trace: call " + std::to_string(pick) + " of " +
                   std::filesystem::path(o.prefix).filename().string(); // no local paths in figures
        char sub[256];
        std::snprintf(sub, sizeof sub,
                      "%d servers x %d GPUs; scale-up %g GB/s, scale-out %g GB/s, alpha %g/%g us; "
                      "the measured panel's bars: per port and step, first post to last completion",
                      topo.servers, topo.gpus_per_server, topo.scale_up_gbps, topo.scale_out_gbps, topo.alpha_up_us,
                      topo.alpha_out_us);
        to.subtitle = sub;
        to.lower_bound_us = fast::lower_bound_us(c.matrix, topo);
        std::ofstream out(o.svg);
        out << render_timeline_svg(panels, to);
        if (!out) throw fast::invalid_argument("writing '" + o.svg + "' failed");
        std::printf("call %d: measured and predicted timelines written to %s\n", pick, o.svg.c_str());
    }
    return 0;
}

} // namespace fast_plan
