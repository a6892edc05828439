#pragma once
// Plan timelines as plain SVG text for fast-plan --svg (no library).
//
// One panel per plan on a shared time axis. Each panel has one lane per rank, grouped by server
// (or, for large clusters, one lane per server showing how many of its GPUs' ports are busy).
// A lane has four rows, one per port of the cost model: scale-out send, scale-out receive,
// scale-up send, scale-up receive; each bar is one port batch of one step as fast::simulate
// (plan, true) records it, consecutive steps in alternating shades. Faint vertical lines mark
// the stage boundaries (where the busiest rank's scale-out steps change), a dashed red line the
// lower bound T_lb, a black line the predicted completion.
//
// Structure the tests rely on: the document starts with "<svg"; every panel is a
// <g class="panel" data-label="...">; every lane a <g class="lane" data-rank="R"> or
// <g class="lane" data-server="S">; each panel's completion is a <line class="completion">; the
// T_lb lines sit in the one <g id="t-lb">.

#include <fast/cost.hpp>
#include <fast/plan.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace fast_plan {

/// One plan to draw, with its recorded cost-model run.
struct timeline_panel {
    std::string label;
    const fast::plan* plan = nullptr;
    fast::prediction prediction; ///< fast::simulate(*plan, true), or a measured run's batches
    bool measured = false;       ///< the batches were measured (an execution trace), not predicted
};

enum class lane_mode { automatic, rank, server };

struct timeline_options {
    std::string title;
    std::string subtitle;
    double lower_bound_us = 0;
    lane_mode lanes = lane_mode::automatic;
    int aggregate_above = 64; ///< automatic: one lane per server above this many ranks
    double plot_width = 1040; ///< pixels of the time axis
};

namespace detail {

inline std::string escape(const std::string& s) {
    std::string out;
    for (const char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

// Appends printf-formatted text.
template <class... Args>
void put(std::string& out, const char* format, Args... args) {
    char buf[512];
    const int n = std::snprintf(buf, sizeof buf, format, args...);
    if (n < 0) return;
    if (static_cast<std::size_t>(n) < sizeof buf) {
        out.append(buf, static_cast<std::size_t>(n));
    } else {
        std::string big(static_cast<std::size_t>(n) + 1, '\0');
        std::snprintf(big.data(), big.size(), format, args...);
        out.append(big.data(), static_cast<std::size_t>(n));
    }
}

// A tick spacing of 1, 2 or 5 x 10^k giving at most about `target` ticks over [0, span].
inline double tick_step(double span, int target = 10) {
    if (span <= 0) return 1;
    const double raw = span / target;
    const double base = std::pow(10.0, std::floor(std::log10(raw)));
    for (const double m : {1.0, 2.0, 5.0, 10.0})
        if (m * base >= raw) return m * base;
    return 10 * base;
}

inline std::string time_label(double us, double step) {
    char buf[64];
    if (step >= 1000) std::snprintf(buf, sizeof buf, "%g ms", us / 1000);
    else std::snprintf(buf, sizeof buf, "%g us", us);
    return buf;
}

constexpr std::size_t ports = fast::detail::ports_per_rank;
constexpr const char* port_colour[ports] = {"#1f5fa8", "#5fa2dd", "#c8541a", "#f0a35e"};
constexpr const char* port_name[ports] = {"scale-out send", "scale-out receive", "scale-up send", "scale-up receive"};
// Row heights within a lane, as shares of its drawable height.
constexpr double row_share[ports] = {0.3, 0.3, 0.2, 0.2};

// The rank whose scale-out batches carry the most bytes (send and receive): its scale-out steps
// are the stages of the plan.
inline int busiest_rank(const fast::prediction& pr, int ranks) {
    std::vector<std::int64_t> bytes(static_cast<std::size_t>(ranks), 0);
    for (const fast::port_batch& b : pr.batches)
        if (b.port == fast::port::out_send || b.port == fast::port::out_recv)
            bytes[static_cast<std::size_t>(b.rank)] += b.bytes;
    return static_cast<int>(std::max_element(bytes.begin(), bytes.end()) - bytes.begin());
}

// Where everything goes: one lane per rank (grouped by server) or per server, panels stacked
// under a header, all on one time axis.
struct timeline_layout {
    fast::topology topo;
    bool by_server = false;
    int lanes = 0;
    double lane_h = 0;
    double gap_between_servers = 0;
    double t_max = 1;
    double scale = 1; ///< pixels per microsecond
    double plot_width = 0;
    double drawable = 0; ///< a lane's height that its four rows share
    double lanes_h = 0;
    double panel_h = 0;
    double width = 0;
    double height = 0;
    static constexpr double left = 118;
    static constexpr double right = 150;
    static constexpr double header_h = 92;
    static constexpr double panel_title_h = 40;
    static constexpr double axis_h = 30;

    timeline_layout(std::span<const timeline_panel> panels, const timeline_options& o)
        : topo(panels.front().plan->topology), plot_width(o.plot_width) {
        const int ranks = topo.ranks();
        by_server = o.lanes == lane_mode::server || (o.lanes == lane_mode::automatic && ranks > o.aggregate_above);
        lanes = by_server ? topo.servers : ranks;
        lane_h = by_server ? (lanes <= 16   ? 16.0
                              : lanes <= 64 ? 11.0
                                            : 7.0)
                           : (lanes <= 16   ? 18.0
                              : lanes <= 32 ? 14.0
                                            : 10.0);
        gap_between_servers = by_server ? 0.0 : 3.0;
        t_max = o.lower_bound_us;
        for (const timeline_panel& p : panels) t_max = std::max(t_max, p.prediction.completion_us);
        if (t_max <= 0) t_max = 1;
        width = left + o.plot_width + right;
        scale = o.plot_width / t_max;
        drawable = lane_h - (by_server ? 1.5 : 2.0);
        lanes_h = lanes * lane_h + (by_server ? 0.0 : (topo.servers - 1) * gap_between_servers);
        panel_h = panel_title_h + lanes_h + axis_h + 14;
        height = header_h + panel_h * static_cast<double>(panels.size()) + 10;
    }

    [[nodiscard]] double x_of(double us) const { return left + us * scale; }
    /// The top of panel `index`, and of its first lane.
    [[nodiscard]] double panel_top(std::size_t index) const { return header_h + panel_h * static_cast<double>(index); }
    [[nodiscard]] double lanes_top(std::size_t index) const { return panel_top(index) + panel_title_h; }
    [[nodiscard]] double lane_top(std::size_t index, int lane) const {
        const int server = by_server ? lane : lane / topo.gpus_per_server;
        return lanes_top(index) + lane * lane_h + server * gap_between_servers;
    }
    /// The top of port `q`'s row in `lane`.
    [[nodiscard]] double row_y(std::size_t index, int lane, int q) const {
        double y = lane_top(index, lane) + 1.0;
        for (int k = 0; k < q; ++k) y += row_share[k] * drawable;
        return y;
    }
};

inline void put_header(std::string& svg, const timeline_layout& l, const timeline_options& o) {
    put(svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
        "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
        l.width, l.height, l.width, l.height);
    put(svg, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", l.width, l.height);
    put(svg, "<text x=\"%.0f\" y=\"24\" font-size=\"17\" font-weight=\"bold\">%s</text>\n", l.left,
        escape(o.title).c_str());
    put(svg, "<text x=\"%.0f\" y=\"43\" font-size=\"12\" fill=\"#444\">%s</text>\n", l.left,
        escape(o.subtitle).c_str());
}

inline void put_legend(std::string& svg, const timeline_layout& l) {
    double x = l.left;
    const double y = 58;
    for (int q = 0; q < static_cast<int>(ports); ++q) {
        put(svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"10\" fill=\"%s\"/>", x, y, port_colour[q]);
        put(svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n", x + 20, y + 9, port_name[q]);
        x += 20 + 7.0 * static_cast<double>(std::string(port_name[q]).size()) + 14;
    }
    put(svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"1.6\" "
        "stroke-dasharray=\"5,3\"/>",
        x, y - 2, x, y + 12);
    put(svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">lower bound T_lb</text>\n", x + 5, y + 9);
    x += 112;
    put(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-width=\"1.6\"/>", x, y - 2,
        x, y + 12);
    put(svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">predicted completion</text>\n", x + 5, y + 9);
    x += 136;
    put(svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#777\" stroke-width=\"1\" "
        "stroke-dasharray=\"2,2\"/>",
        x, y - 2, x, y + 12);
    put(svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">stage boundary</text>\n", x + 5, y + 9);
    put(svg,
        "<text x=\"%.0f\" y=\"%.1f\" font-size=\"10\" fill=\"#555\">%s; stage boundaries: where the "
        "busiest rank's scale-out steps change</text>\n",
        l.left, y + 26,
        l.by_server ? "one lane per server, four rows per lane (the ports); shade = share of the server's GPUs "
                      "whose port is busy"
                    : "one lane per GPU (rank), grouped by server, four rows per lane (the ports); bars are port "
                      "batches, alternate steps lighter");
}

// The panel's label and figures, the server bands and their labels.
inline void put_panel_frame(std::string& svg, const timeline_layout& l, const timeline_panel& panel, std::size_t index,
                            const timeline_options& o) {
    const fast::plan& plan = *panel.plan;
    const double top = l.panel_top(index);
    const double completion = panel.prediction.completion_us;
    const double ratio = o.lower_bound_us > 0 ? completion / o.lower_bound_us : 0.0;
    put(svg, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">%s</text>", l.left, top + 19,
        escape(panel.label).c_str());
    put(svg,
        "<text x=\"%.0f\" y=\"%.1f\" font-size=\"12\" fill=\"#333\">%zu step%s, %zu stage%s; %s "
        "%.1f us = %.3f x T_lb</text>\n",
        l.left + 9.0 * static_cast<double>(panel.label.size()) + 14, top + 19, plan.steps(),
        plan.steps() == 1 ? "" : "s", fast::count_stages(plan), fast::count_stages(plan) == 1 ? "" : "s",
        panel.measured ? "measured" : "predicted", completion, ratio);
    const int g = l.topo.gpus_per_server;
    for (int s = 0; s < l.topo.servers; ++s) {
        const double y0 = l.by_server ? l.lane_top(index, s) : l.lane_top(index, s * g);
        const double h = l.by_server ? l.lane_h : g * l.lane_h;
        if (s % 2 == 0)
            put(svg, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"#f2f2f2\"/>\n", l.left - 4, y0,
                l.plot_width + 8, h);
        if (!l.by_server || l.lanes <= 32 || s % 4 == 0)
            put(svg,
                "<text x=\"%.0f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"end\" "
                "dominant-baseline=\"middle\">server %d</text>\n",
                l.by_server ? l.left - 8 : l.left - 30, y0 + h / 2, l.by_server ? std::min(11.0, l.lane_h + 1) : 11.0,
                s);
    }
}

// One lane per rank: each port batch a bar, alternate steps lighter.
inline void put_rank_lanes(std::string& svg, const timeline_layout& l, const fast::prediction& pr, std::size_t index) {
    const int ranks = l.topo.ranks();
    std::vector<std::vector<const fast::port_batch*>> of_rank(static_cast<std::size_t>(ranks));
    for (const fast::port_batch& b : pr.batches) of_rank[static_cast<std::size_t>(b.rank)].push_back(&b);
    for (int r = 0; r < ranks; ++r) {
        put(svg, "<g class=\"lane\" data-rank=\"%d\">", r);
        if (l.lane_h >= 9)
            put(svg,
                "<text x=\"%.0f\" y=\"%.1f\" font-size=\"%.0f\" fill=\"#555\" text-anchor=\"end\" "
                "dominant-baseline=\"middle\">%d</text>",
                l.left - 8, l.lane_top(index, r) + l.lane_h / 2, std::min(10.0, l.lane_h - 1), l.topo.local_of(r));
        for (const fast::port_batch* b : of_rank[static_cast<std::size_t>(r)]) {
            const int q = static_cast<int>(b->port);
            // A hairline gap before each batch keeps consecutive steps apart.
            double x0 = l.x_of(b->start_us);
            double w = (b->end_us - b->start_us) * l.scale;
            if (w > 3) {
                x0 += 0.8;
                w -= 0.8;
            }
            put(svg, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"%s/>", x0,
                l.row_y(index, r, q), std::max(0.5, w), row_share[q] * l.drawable, port_colour[q],
                b->step % 2 ? " fill-opacity=\"0.7\"" : "");
        }
        svg += "</g>\n";
    }
}

// One lane per server: per port and pixel column, the share of the server's GPUs whose port is
// busy, in eighths, as runs of equal shade (one path per shade: compact at 512 ranks).
inline void put_server_lanes(std::string& svg, const timeline_layout& l, const fast::prediction& pr,
                             std::size_t index) {
    const auto px = static_cast<std::size_t>(std::ceil(l.plot_width));
    const auto servers = static_cast<std::size_t>(l.topo.servers);
    std::vector<double> busy(servers * ports * px, 0.0);
    for (const fast::port_batch& b : pr.batches) {
        double* row =
            busy.data() +
            (static_cast<std::size_t>(l.topo.server_of(b.rank)) * ports + static_cast<std::size_t>(b.port)) * px;
        const double x0 = b.start_us * l.scale;
        const double x1 = std::max(x0 + 0.25, b.end_us * l.scale); // a short batch still shows
        for (auto c = static_cast<std::size_t>(std::max(0.0, std::floor(x0))); c < px && static_cast<double>(c) < x1;
             ++c)
            row[c] += std::min(x1, static_cast<double>(c + 1)) - std::max(x0, static_cast<double>(c));
    }
    for (int s = 0; s < l.topo.servers; ++s) {
        put(svg, "<g class=\"lane\" data-server=\"%d\">", s);
        for (int q = 0; q < static_cast<int>(ports); ++q) {
            const double* row = busy.data() + (static_cast<std::size_t>(s) * ports + static_cast<std::size_t>(q)) * px;
            auto level = [&](std::size_t c) {
                const double share = std::min(1.0, row[c] / l.topo.gpus_per_server);
                return share <= 0 ? 0 : std::max(1, static_cast<int>(std::lround(share * 8)));
            };
            std::string paths[9];
            const double y = l.row_y(index, s, q);
            const double h = row_share[q] * l.drawable;
            for (std::size_t c = 0; c < px;) {
                const int shade = level(c);
                std::size_t e = c + 1;
                while (e < px && level(e) == shade) ++e;
                if (shade > 0)
                    put(paths[shade], "M%.0f %.1fh%zuv%.1fh-%zuz", l.left + static_cast<double>(c), y, e - c, h, e - c);
                c = e;
            }
            for (int shade = 1; shade <= 8; ++shade)
                if (!paths[shade].empty())
                    put(svg, "<path d=\"%s\" fill=\"%s\" fill-opacity=\"%.3f\"/>", paths[shade].c_str(), port_colour[q],
                        shade / 8.0);
        }
        svg += "</g>\n";
    }
}

// Stage boundaries: where the busiest rank's scale-out batches start (and, per rank, its lane).
inline void put_stage_boundaries(std::string& svg, const timeline_layout& l, const fast::prediction& pr,
                                 std::size_t index) {
    const int busiest = busiest_rank(pr, l.topo.ranks());
    const double lanes_top = l.lanes_top(index);
    put(svg,
        "<g class=\"stages\" data-rank=\"%d\" stroke=\"#666\" stroke-width=\"0.8\" stroke-dasharray=\"2,2\" "
        "stroke-opacity=\"0.7\">",
        busiest);
    std::vector<double> starts;
    for (const fast::port_batch& b : pr.batches)
        if (b.rank == busiest && b.port == fast::port::out_send && b.start_us > 0) starts.push_back(b.start_us);
    std::sort(starts.begin(), starts.end());
    for (const double t : starts)
        put(svg, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>", l.x_of(t), lanes_top - 2, l.x_of(t),
            lanes_top + l.lanes_h + 2);
    svg += "</g>\n";
    if (!l.by_server)
        put(svg,
            "<text x=\"%.0f\" y=\"%.1f\" font-size=\"10\" fill=\"#666\" dominant-baseline=\"middle\">"
            "&#9664; busiest NIC</text>\n",
            l.left + l.plot_width + 6, l.lane_top(index, busiest) + l.lane_h / 2);
}

// The completion line and the time axis under the lanes.
inline void put_completion_and_axis(std::string& svg, const timeline_layout& l, double completion_us,
                                    std::size_t index) {
    const double y_top = l.lanes_top(index) - 14;
    const double y_bottom = l.lanes_top(index) + l.lanes_h + 2;
    const double xc = l.x_of(completion_us);
    put(svg,
        "<line class=\"completion\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"black\" "
        "stroke-width=\"1.6\"/>",
        xc, y_top, xc, y_bottom);
    put(svg, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\">%.0f us</text>\n", xc + 4, y_top + 9, completion_us);
    const double y_axis = y_bottom + 2;
    put(svg, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#333\"/>", l.left, y_axis,
        l.left + l.plot_width, y_axis);
    const double step = tick_step(l.t_max, 10);
    for (double t = 0; t <= l.t_max * 1.0001; t += step) {
        const double x = l.x_of(t);
        put(svg, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\"/>", x, y_axis, x, y_axis + 4);
        put(svg, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" fill=\"#333\">%s</text>", x,
            y_axis + 15, time_label(t, step).c_str());
    }
}

// The dashed T_lb line across panel `index`, for the one group that holds them all.
inline void put_lower_bound(std::string& lines, const timeline_layout& l, double lower_bound_us, std::size_t index) {
    const double y_top = l.lanes_top(index) - 14;
    const double y_bottom = l.lanes_top(index) + l.lanes_h + 2;
    const double xl = l.x_of(lower_bound_us);
    put(lines, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>", xl, y_top, xl, y_bottom);
    put(lines,
        "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" fill=\"#d62728\" stroke=\"none\" "
        "text-anchor=\"end\">T_lb %.0f us</text>\n",
        xl - 4, y_top + 9, lower_bound_us);
}

} // namespace detail

/// The SVG document for `panels` (all on one time axis).
inline std::string render_timeline_svg(std::span<const timeline_panel> panels, const timeline_options& o) {
    std::string svg;
    if (panels.empty()) return svg;
    const detail::timeline_layout layout(panels, o);
    detail::put_header(svg, layout, o);
    detail::put_legend(svg, layout);
    std::string lower_bound_lines;
    for (std::size_t index = 0; index < panels.size(); ++index) {
        const timeline_panel& panel = panels[index];
        detail::put(svg, "<g class=\"panel\" data-label=\"%s\">\n", detail::escape(panel.label).c_str());
        detail::put_panel_frame(svg, layout, panel, index, o);
        if (layout.by_server) detail::put_server_lanes(svg, layout, panel.prediction, index);
        else detail::put_rank_lanes(svg, layout, panel.prediction, index);
        detail::put_stage_boundaries(svg, layout, panel.prediction, index);
        detail::put_completion_and_axis(svg, layout, panel.prediction.completion_us, index);
        svg += "\n</g>\n";
        if (o.lower_bound_us > 0) detail::put_lower_bound(lower_bound_lines, layout, o.lower_bound_us, index);
    }
    if (o.lower_bound_us > 0)
        detail::put(svg, "<g id=\"t-lb\" stroke=\"#d62728\" stroke-width=\"1.6\" stroke-dasharray=\"5,3\">\n%s</g>\n",
                    lower_bound_lines.c_str());
    svg += "</svg>\n";
    return svg;
}

} // namespace fast_plan
