// fast-plan --svg (plan timelines) and progress on terminals, end to end through the CLI.
#include <catch2/catch.hpp>

#include "../command.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using test_support::result;
using test_support::run_command;
using test_support::temp_path;

std::string fast_plan() {
    const char* exe = std::getenv("FAST_PLAN");
    REQUIRE(exe != nullptr);
    return exe;
}

result run(const std::string& args) {
    return run_command(fast_plan() + " " + args);
}

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
    return n;
}

// Checks that tags nest and close, attributes are quoted and '&' starts an entity; returns the
// first problem or "".
std::string xml_problem(const std::string& doc) {
    std::vector<std::string> open;
    std::size_t i = 0;
    while (i < doc.size()) {
        if (doc[i] == '&') {
            const std::size_t semi = doc.find(';', i);
            if (semi == std::string::npos || semi - i > 8) return "bare '&' at " + std::to_string(i);
            i = semi + 1;
            continue;
        }
        if (doc[i] != '<') {
            if (doc[i] == '>') return "bare '>' at " + std::to_string(i);
            ++i;
            continue;
        }
        // Find the end of the tag, skipping quoted attribute values.
        std::size_t j = i + 1;
        char quote = 0;
        for (; j < doc.size(); ++j) {
            if (quote) {
                if (doc[j] == quote) quote = 0;
                else if (doc[j] == '<') return "'<' inside an attribute at " + std::to_string(j);
            } else if (doc[j] == '"' || doc[j] == '\'') {
                quote = doc[j];
            } else if (doc[j] == '>') {
                break;
            }
        }
        if (j == doc.size()) return "unterminated tag at " + std::to_string(i);
        const std::string tag = doc.substr(i + 1, j - i - 1);
        if (tag.empty()) return "empty tag at " + std::to_string(i);
        if (tag[0] == '/') {
            const std::string name = tag.substr(1);
            if (open.empty() || open.back() != name)
                return "</" + name + "> closes nothing open at " + std::to_string(i);
            open.pop_back();
        } else if (tag[0] != '?' && tag[0] != '!' && tag.back() != '/') {
            open.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
        }
        i = j + 1;
    }
    if (!open.empty()) return "<" + open.back() + "> never closed";
    return "";
}

struct svg_facts {
    std::size_t panels = 0;
    std::set<int> ranks; // data-rank of lanes, per panel summed into lane_count
    std::set<int> servers;
    std::size_t lanes = 0;
    std::vector<std::string> labels;
};

svg_facts inspect(const std::string& svg) {
    svg_facts f;
    f.panels = count(svg, "<g class=\"panel\"");
    f.lanes = count(svg, "<g class=\"lane\"");
    const std::regex rank(R"re(<g class="lane" data-rank="(\d+)">)re");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rank); it != std::sregex_iterator(); ++it)
        f.ranks.insert(std::stoi((*it)[1]));
    const std::regex server(R"re(<g class="lane" data-server="(\d+)">)re");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), server); it != std::sregex_iterator(); ++it)
        f.servers.insert(std::stoi((*it)[1]));
    const std::regex label(R"re(<g class="panel" data-label="([^"]*)">)re");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label); it != std::sregex_iterator(); ++it)
        f.labels.push_back((*it)[1]);
    return f;
}

// The x of the T_lb lines and of the completion lines, per panel, from the document.
std::vector<double> xs(const std::string& svg, const std::regex& pattern) {
    std::vector<double> out;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), pattern); it != std::sregex_iterator(); ++it)
        out.push_back(std::stod((*it)[1]));
    return out;
}

} // namespace

TEST_CASE("--svg draws one lane per rank, grouped by server, with T_lb marked") {
    const std::string file = temp_path("one.svg");
    const result r = run("--servers 4 --gpus 8 --workload zipf:1.2 --bytes-per-gpu 64M --svg " + file);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("timeline of 1 plan written to " + file));
    const std::string svg = slurp(file);
    REQUIRE(svg.rfind("<svg", 0) == 0);
    CHECK(xml_problem(svg).empty());
    INFO(xml_problem(svg));
    const svg_facts f = inspect(svg);
    CHECK(f.panels == 1);
    CHECK(f.lanes == 32);
    CHECK(f.ranks.size() == 32);
    CHECK(*f.ranks.rbegin() == 31);
    CHECK(f.servers.empty());
    for (int s = 0; s < 4; ++s) CHECK_THAT(svg, Catch::Contains(">server " + std::to_string(s) + "<"));
    CHECK(count(svg, "id=\"t-lb\"") == 1);
    // The bound in the picture is the one in the table, and it lies before the completion.
    const std::regex bound_in_table(R"re(lower bound T_lb = ([0-9.]+) us)re");
    std::smatch m;
    REQUIRE(std::regex_search(r.output, m, bound_in_table));
    const double bound = std::stod(m[1]);
    char label[64];
    std::snprintf(label, sizeof label, "T_lb %.0f us", bound);
    CHECK_THAT(svg, Catch::Contains(label));
    const auto lb = xs(svg.substr(svg.find("id=\"t-lb\"")), std::regex(R"re(<line x1="([0-9.]+)")re"));
    const auto done = xs(svg, std::regex(R"re(<line class="completion" x1="([0-9.]+)")re"));
    REQUIRE(lb.size() == 1);
    REQUIRE(done.size() == 1);
    CHECK(lb[0] <= done[0] + 1e-6);
    // Every port batch is a bar: the plan moves bytes over both tiers.
    CHECK(count(svg, "fill=\"#1f5fa8\"") > 0); // scale-out send
    CHECK(count(svg, "fill=\"#c8541a\"") > 0); // scale-up send
    std::remove(file.c_str());
}

TEST_CASE("--compare --svg: one panel per scheduler on a shared time axis") {
    const std::string file = temp_path("compare.svg");
    const result r = run("--servers 2 --gpus 4 --workload zipf:1.1 --bytes-per-gpu 16M --compare --svg " + file);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::string svg = slurp(file);
    REQUIRE(svg.rfind("<svg", 0) == 0);
    INFO(xml_problem(svg));
    CHECK(xml_problem(svg).empty());
    const svg_facts f = inspect(svg);
    CHECK(f.panels == 6);
    CHECK(f.lanes == 6 * 8);
    CHECK(f.labels == std::vector<std::string>{"fast (rail-packed)", "fast (bottleneck)", "fast (exact)",
                                               "fast-unbalanced", "spreadout", "direct"});
    // One T_lb line per panel, all at the same x: the axis is shared.
    const auto lb = xs(svg.substr(svg.find("id=\"t-lb\"")), std::regex(R"re(<line x1="([0-9.]+)")re"));
    REQUIRE(lb.size() == 6);
    for (const double x : lb) CHECK(x == Approx(lb[0]));

    const std::string two = temp_path("two.svg");
    const result s =
        run("--servers 2 --gpus 4 --workload zipf:1.1 --bytes-per-gpu 16M --schedulers fast,direct --svg " + two);
    INFO(s.output);
    REQUIRE(s.status == 0);
    CHECK(inspect(slurp(two)).labels == std::vector<std::string>{"fast (rail-packed)", "direct"});
    std::remove(file.c_str());
    std::remove(two.c_str());
}

TEST_CASE("large clusters aggregate lanes per server") {
    const std::string file = temp_path("large.svg");
    const result r = run("--servers 16 --gpus 8 --bytes-per-gpu 64M --schedulers fast,direct --svg " + file);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::string svg = slurp(file);
    CHECK(xml_problem(svg).empty());
    svg_facts f = inspect(svg);
    CHECK(f.panels == 2);
    CHECK(f.lanes == 2 * 16);
    CHECK(f.ranks.empty());
    CHECK(f.servers.size() == 16);
    CHECK(count(svg, "id=\"t-lb\"") == 1);
    CHECK(count(svg, "<path d=\"M") > 0); // busy shares drawn

    SECTION("--svg-lanes overrides") {
        REQUIRE(run("--servers 16 --gpus 8 --bytes-per-gpu 64M --svg-lanes rank --svg " + file).status == 0);
        f = inspect(slurp(file));
        CHECK(f.lanes == 128);
        CHECK(f.ranks.size() == 128);
        REQUIRE(run("--servers 2 --gpus 4 --bytes-per-gpu 1M --svg-lanes server --svg " + file).status == 0);
        f = inspect(slurp(file));
        CHECK(f.lanes == 2);
        CHECK(f.servers.size() == 2);
    }
    SECTION("bad values are one clear line") {
        const result bad = run("--svg-lanes gpu --svg " + file);
        CHECK(bad.status == 2);
        CHECK_THAT(bad.output, Catch::Contains("unknown --svg-lanes 'gpu'"));
        const result unwritable = run("--servers 1 --gpus 2 --svg /nonexistent/dir/t.svg");
        CHECK(unwritable.status == 2);
        CHECK_THAT(unwritable.output, Catch::StartsWith("fast-plan: error: cannot write '/nonexistent/dir/t.svg'"));
        CHECK(std::count(unwritable.output.begin(), unwritable.output.end(), '\n') == 1);
        const result scheduler = run("--schedulers fast,nccl");
        CHECK(scheduler.status == 2);
        CHECK_THAT(scheduler.output, Catch::Contains("unknown scheduler 'nccl'"));
    }
    std::remove(file.c_str());
}

TEST_CASE("progress shows on a terminal and stays quiet otherwise") {
    const std::string plan = temp_path("progress.json");
    const std::string svg = temp_path("progress.svg");
    const std::string args = "--servers 4 --gpus 4 --compare --repeat 3 --json " + plan + " --svg " + svg;
    // Not a terminal: the output is exactly the table, no carriage returns, no progress words.
    const result quiet = run(args);
    INFO(quiet.output);
    REQUIRE(quiet.status == 0);
    CHECK(quiet.output.find('\r') == std::string::npos);
    CHECK(quiet.output.find("planning") == std::string::npos);
    const result verify_quiet = run("verify " + plan);
    CHECK(verify_quiet.status == 0);
    CHECK(verify_quiet.output.find('\r') == std::string::npos);

    // A terminal (script(1) runs the command on a pseudo-terminal): progress lines, each
    // rewritten in place and erased before the table rows.
    REQUIRE(access("/usr/bin/script", X_OK) == 0);
    const result loud = run_command("/usr/bin/script -qfec '" + fast_plan() + " " + args + "' /dev/null");
    INFO(loud.output);
    REQUIRE(loud.status == 0);
    CHECK_THAT(loud.output, Catch::Contains("\rfast-plan: planning fast (rail-packed)"));
    CHECK_THAT(loud.output, Catch::Contains("fast-plan: verifying direct"));
    CHECK_THAT(loud.output, Catch::Contains("fast-plan: writing " + svg));
    CHECK_THAT(loud.output, Catch::Contains("3/3"));
    CHECK_THAT(loud.output, Catch::Contains("timeline of 6 plans written to"));
    const result verify_loud = run_command("/usr/bin/script -qfec '" + fast_plan() + " verify " + plan + "' /dev/null");
    INFO(verify_loud.output);
    CHECK(verify_loud.status == 0);
    CHECK_THAT(verify_loud.output, Catch::Contains("fast-plan: verifying"));
    CHECK_THAT(verify_loud.output, Catch::Contains(": OK: "));
    std::remove(plan.c_str());
    std::remove(svg.c_str());
}
