// fast_torch._C: the C++ half of the "fast" torch.distributed backend (fast_torch/__init__.py is
// the other: options, environment variables, the fallback group, registration).

#include "backend.hpp"

#include <fast/topology.hpp>

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <stdexcept>
#include <string_view>

namespace {

namespace py = pybind11;
using fast::exec::flow_control;
using fast::exec::memory;
using fast::exec::scheduler;

template <typename Enum>
Enum parse_enum(std::string_view field, std::string_view value, std::initializer_list<Enum> choices) {
    std::string names;
    for (Enum e : choices) {
        if (to_string(e) == value) return e;
        names += (names.empty() ? "" : ", ") + std::string(to_string(e));
    }
    throw std::invalid_argument(std::string(field) + " must be one of " + names + ", got '" +
                                fast::detail::quote_input(value) + "'");
}

c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                         std::chrono::milliseconds timeout,
                                         const std::optional<c10::intrusive_ptr<c10d::Backend>>& fallback,
                                         int gpus_per_server, const std::string& sched, const std::string& flow,
                                         double scale_up_gbps, double scale_out_gbps, double alpha_up_us,
                                         double alpha_out_us, const std::string& device_memory) {
    fast_torch::settings s;
    s.config.gpus_per_server = gpus_per_server;
    s.config.scheduler = parse_enum("scheduler", sched, {scheduler::automatic, scheduler::fast, scheduler::direct});
    s.config.flow = parse_enum("flow", flow, {flow_control::rendezvous, flow_control::credits});
    s.config.timeout = timeout;
    s.config.scale_up_gbps = scale_up_gbps;
    s.config.scale_out_gbps = scale_out_gbps;
    s.config.alpha_up_us = alpha_up_us;
    s.config.alpha_out_us = alpha_out_us;
    s.device_memory = parse_enum("device_memory", device_memory, {memory::cuda, memory::hip});
    try {
        return c10::make_intrusive<fast_torch::backend>(store, rank, size, s,
                                                        fallback.value_or(c10::intrusive_ptr<c10d::Backend>()));
    } catch (const c10::Error& e) {
        throw std::runtime_error(e.what_without_backtrace()); // one line, no C++ backtrace
    }
}

fast_torch::backend& fast_backend(c10d::Backend& b) {
    auto* fast = dynamic_cast<fast_torch::backend*>(&b);
    if (fast == nullptr) throw py::type_error("not a group of the fast backend (backend " + b.getBackendName() + ")");
    return *fast;
}

py::dict describe(c10d::Backend& b) {
    fast_torch::backend::info i;
    {
        const py::gil_scoped_release release; // waits for the calls queued before it
        i = fast_backend(b).describe();
    }
    py::dict d;
    d["servers"] = i.servers;
    d["gpus_per_server"] = i.gpus_per_server;
    d["operations"] = i.stats.operations;
    d["failures"] = i.stats.failures;
    d["plans_made"] = i.stats.plans_made;
    d["plans_reused"] = i.stats.plans_reused;
    d["last_plan_steps"] = i.stats.last_plan_steps;
    d["scratch_bytes"] = i.stats.scratch_bytes;
    return d;
}

py::dict preset(const std::string& name) {
    const fast::topology t = fast::make_topology(1, 1, fast::parse_preset(name)); // ValueError if unknown
    py::dict d;
    d["scale_up_gbps"] = t.scale_up_gbps;
    d["scale_out_gbps"] = t.scale_out_gbps;
    d["alpha_up_us"] = t.alpha_up_us;
    d["alpha_out_us"] = t.alpha_out_us;
    return d;
}

} // namespace

PYBIND11_MODULE(_C, m) {
    m.doc() = "The C++ half of fast_torch: the fast c10d backend (use fast_torch, not this module)";
    m.def("create", &create, py::call_guard<py::gil_scoped_release>(), py::arg("store"), py::arg("rank"),
          py::arg("size"), py::arg("timeout"), py::arg("fallback"), py::arg("gpus_per_server"), py::arg("scheduler"),
          py::arg("flow"), py::arg("scale_up_gbps"), py::arg("scale_out_gbps"), py::arg("alpha_up_us"),
          py::arg("alpha_out_us"), py::arg("device_memory"),
          "Creates the fast backend of a group (collective over the group; releases the GIL)");
    m.def("describe", &describe, py::arg("backend"),
          "Servers, GPUs per server and the executor's counters of this rank (after the queued calls)");
    m.def("preset", &preset, py::arg("name"), "The fabric figures of a preset: h200 or mi300x");
}
