#include "trace.hpp"

#include <cerrno>
#include <cstring>
#include <memory>

namespace fast::exec::detail {

namespace {

struct file_closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using file = std::unique_ptr<std::FILE, file_closer>;

// A JSON string of ASCII text (host names, configuration words): quotes and control bytes
// escaped.
std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

const char* kind_name(trace_kind k) noexcept {
    return k == trace_kind::send ? "send" : k == trace_kind::recv ? "recv" : "copy";
}

} // namespace

std::size_t tracer::begin_call(std::uint64_t seq, bool persistent, std::span<const std::size_t> sendcounts, bool init) {
    trace_call c;
    c.seq = seq;
    c.persistent = persistent;
    c.init = init;
    c.start_ns = clock_ns();
    c.sendcounts = counts_.size();
    counts_.insert(counts_.end(), sendcounts.begin(), sendcounts.end());
    calls_.push_back(c);
    return calls_.size() - 1;
}

std::string tracer::write(const trace_setup& setup) const {
    const std::string base = prefix_ + ".rank" + std::to_string(setup.rank);
    if (std::string e = write_own(setup, base + ".json"); !e.empty()) return e;
    return write_chrome(setup, base + ".chrome.json");
}

std::string tracer::write_own(const trace_setup& s, const std::string& path) const {
    const file f(std::fopen(path.c_str(), "w"));
    if (!f) return "cannot write the trace " + path + ": " + std::strerror(errno);
    std::FILE* out = f.get();
    std::fprintf(
        out,
        "{\"format\": \"fast-trace/1\", \"rank\": %d, \"size\": %d, \"servers\": %d, \"gpus_per_server\": %d,\n"
        " \"host\": %s, \"scheduler\": %s, \"flow\": %s, \"memory\": %s, \"progress\": %s, "
        "\"split_blocks_when_needed\": %s,\n"
        " \"fabric\": {\"scale_up_gbps\": %.17g, \"scale_out_gbps\": %.17g, \"alpha_up_us\": %.17g, "
        "\"alpha_out_us\": %.17g",
        s.rank, s.size, s.servers, s.gpus_per_server, quoted(s.host).c_str(), quoted(s.scheduler).c_str(),
        quoted(s.flow).c_str(), quoted(s.memory).c_str(), quoted(s.progress).c_str(),
        s.split_blocks_when_needed ? "true" : "false", s.scale_up_gbps, s.scale_out_gbps, s.alpha_up_us, s.alpha_out_us);
    if (!s.nic_gbps.empty()) {
        std::fprintf(out, ", \"nic_gbps\": [");
        for (std::size_t r = 0; r < s.nic_gbps.size(); ++r) std::fprintf(out, "%s%.17g", r ? ", " : "", s.nic_gbps[r]);
        std::fprintf(out, "]");
    }
    std::fprintf(out, "},\n \"clock\": \"steady_clock nanoseconds\", \"dropped_ops\": %zu,\n \"calls\": [", dropped_);
    std::size_t step = 0;
    std::size_t op = 0;
    const auto r = static_cast<std::size_t>(s.size);
    for (std::size_t k = 0; k < calls_.size(); ++k) {
        const trace_call& c = calls_[k];
        std::fprintf(out,
                     "%s\n  {\"seq\": %llu, \"kind\": \"%s\", \"ok\": %s, \"planned\": %s, \"direct\": %s, "
                     "\"split_blocks\": %s, "
                     "\"plan_steps\": %llu,\n   \"start\": %llu, \"agreed\": %llu, \"planned_at\": %llu, "
                     "\"compiled\": %llu, \"end\": %llu,\n   \"sendcounts\": [",
                     k == 0 ? "" : ",", static_cast<unsigned long long>(c.seq),
                     c.init         ? "alltoallv_init"
                     : c.persistent ? "persistent run"
                                    : "alltoallv",
                     c.ok ? "true" : "false", c.planned ? "true" : "false", c.direct ? "true" : "false",
                     c.split ? "true" : "false", static_cast<unsigned long long>(c.plan_steps),
                     static_cast<unsigned long long>(c.start_ns), static_cast<unsigned long long>(c.agreed_ns),
                     static_cast<unsigned long long>(c.planned_ns), static_cast<unsigned long long>(c.compiled_ns),
                     static_cast<unsigned long long>(c.end_ns));
        for (std::size_t j = 0; j < r && c.sendcounts + j < counts_.size(); ++j)
            std::fprintf(out, "%s%llu", j == 0 ? "" : ", ", static_cast<unsigned long long>(counts_[c.sendcounts + j]));
        std::fprintf(out, "],\n   \"steps\": [");
        for (bool first = true; step < steps_.size() && steps_[step].call == k; ++step, first = false)
            std::fprintf(out, "%s[%u, %llu, %llu]", first ? "" : ", ", steps_[step].step,
                         static_cast<unsigned long long>(steps_[step].start_ns),
                         static_cast<unsigned long long>(steps_[step].end_ns));
        std::fprintf(out, "],\n   \"ops\": [");
        for (bool first = true; op < ops_.size() && ops_[op].call == k; ++op, first = false) {
            const trace_op& o = ops_[op];
            std::fprintf(out, "%s\n    [\"%s\", \"%s\", %u, %d, %llu, %llu, %llu]", first ? "" : ",", kind_name(o.kind),
                         o.scale_out ? "out" : "up", o.step, o.peer, static_cast<unsigned long long>(o.bytes),
                         static_cast<unsigned long long>(o.post_ns), static_cast<unsigned long long>(o.done_ns));
        }
        std::fprintf(out, "]}");
    }
    std::fprintf(out, "]}\n");
    if (std::ferror(out) != 0) return "writing the trace " + path + " failed";
    return {};
}

std::string tracer::write_chrome(const trace_setup& s, const std::string& path) const {
    const file f(std::fopen(path.c_str(), "w"));
    if (!f) return "cannot write the trace " + path + ": " + std::strerror(errno);
    std::FILE* out = f.get();
    // Lanes (thread ids) of a rank (process id): the call and its phases, the steps, then one
    // per port of the cost model.
    static constexpr const char* lanes[] = {"call",          "steps",           "scale-out send", "scale-out receive",
                                            "scale-up send", "scale-up receive"};
    std::fprintf(out, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
    std::fprintf(out, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}",
                 s.rank, s.rank);
    for (int t = 0; t < 6; ++t)
        std::fprintf(
            out,
            ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
            s.rank, t, lanes[t]);
    auto span = [&](const char* name, int tid, std::uint64_t from, std::uint64_t to, const std::string& args) {
        if (from == 0 || to < from) return;
        std::fprintf(
            out, ",\n{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f%s%s%s}",
            name, s.rank, tid, static_cast<double>(from) / 1e3, static_cast<double>(to - from) / 1e3,
            args.empty() ? "" : ", \"args\": {", args.c_str(), args.empty() ? "" : "}");
    };
    for (const trace_call& c : calls_) {
        const std::string seq = "\"seq\": " + std::to_string(c.seq);
        span(c.init         ? "alltoallv_init"
             : c.persistent ? "persistent run"
                            : "alltoallv",
             0, c.start_ns, c.end_ns,
             seq + ", \"ok\": " + (c.ok ? "true" : "false") + ", \"plan_steps\": " + std::to_string(c.plan_steps));
        span("agree on counts", 0, c.start_ns, c.agreed_ns, seq);
        span(c.planned ? "plan" : "plan (cached)", 0, c.agreed_ns, c.planned_ns, seq);
        span("compile", 0, c.planned_ns, c.compiled_ns, seq);
    }
    for (const trace_step& st : steps_)
        span(("step " + std::to_string(st.step)).c_str(), 1, st.start_ns, st.end_ns, "");
    for (const trace_op& o : ops_) {
        const int tid = o.kind == trace_kind::copy ? 4 : (o.scale_out ? 2 : 4) + (o.kind == trace_kind::recv ? 1 : 0);
        const std::string name =
            std::string(kind_name(o.kind)) + (o.kind == trace_kind::copy   ? ""
                                              : o.kind == trace_kind::send ? " to " + std::to_string(o.peer)
                                                                           : " from " + std::to_string(o.peer));
        span(name.c_str(), tid, o.post_ns, o.done_ns,
             "\"bytes\": " + std::to_string(o.bytes) + ", \"step\": " + std::to_string(o.step));
    }
    std::fprintf(out, "\n]}\n");
    if (std::ferror(out) != 0) return "writing the trace " + path + " failed";
    return {};
}

} // namespace fast::exec::detail
