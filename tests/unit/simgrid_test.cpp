// fast-simgrid end to end (registered only where SimGrid is installed): the replay honours the
// plan's dependencies, ranks the schedulers as the cost model does on skewed traffic, and lands
// within 15% of the model for FAST on the fabric the model describes.
#include "../command.hpp"
#include "../support.hpp"

#include <fast/planner.hpp>
#include <fast/simulation.hpp>
#include <fast/workload.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using test_support::result;
using test_support::temp_path;

result run(const std::string& args) {
    return test_support::run_tool("FAST_SIMGRID", args);
}

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::vector<std::string> header;
    std::vector<std::map<std::string, std::string>> rows;
    auto split = [](const std::string& s) {
        std::vector<std::string> out;
        std::stringstream ss(s);
        std::string cell;
        while (std::getline(ss, cell, ',')) out.push_back(cell);
        return out;
    };
    if (std::getline(in, line)) header = split(line);
    while (std::getline(in, line)) {
        const auto cells = split(line);
        REQUIRE(cells.size() == header.size());
        std::map<std::string, std::string> row;
        for (std::size_t k = 0; k < cells.size(); ++k) row[header[k]] = cells[k];
        rows.push_back(row);
    }
    return rows;
}

double num(const std::map<std::string, std::string>& row, const std::string& key) {
    return std::stod(row.at(key));
}

// Runs fast-simgrid with `args`, returns the CSV rows (one per matrix and scheduler).
std::vector<std::map<std::string, std::string>> simulate(const std::string& args) {
    const std::string csv = temp_path("results.csv");
    const result r = run(args + " --csv " + csv);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("network/model CM02, crosstraffic off, TCP-gamma 0"));
    auto rows = read_csv(csv);
    std::remove(csv.c_str());
    for (const auto& row : rows) CHECK(row.at("verified") == "yes");
    return rows;
}

// Per matrix: do SimGrid and the model put the schedulers in the same order?
void check_same_order(const std::vector<std::map<std::string, std::string>>& rows) {
    std::map<std::string, std::vector<const std::map<std::string, std::string>*>> by_matrix;
    for (const auto& row : rows) by_matrix[row.at("matrix")].push_back(&row);
    for (auto& [matrix, list] : by_matrix) {
        auto model = list;
        auto sim = list;
        std::sort(model.begin(), model.end(),
                  [](auto* a, auto* b) { return num(*a, "model_us") < num(*b, "model_us"); });
        std::sort(sim.begin(), sim.end(),
                  [](auto* a, auto* b) { return num(*a, "simgrid_us") < num(*b, "simgrid_us"); });
        for (std::size_t k = 0; k < model.size(); ++k) {
            INFO("matrix " << matrix << ", rank " << k << ": model " << model[k]->at("scheduler") << ", SimGrid "
                           << sim[k]->at("scheduler"));
            CHECK(model[k]->at("scheduler") == sim[k]->at("scheduler"));
        }
        // The model's order is strict here, so the comparison means something.
        for (std::size_t k = 1; k < model.size(); ++k)
            CHECK(num(*model[k], "model_us") > 1.02 * num(*model[k - 1], "model_us"));
    }
}

} // namespace

TEST_CASE("a small case runs and every plan is verified") {
    const auto rows = simulate("--servers 2 --gpus 4 --workload zipf:1.1 --bytes-per-gpu 16M");
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].at("scheduler") == "fast");
    CHECK(rows[1].at("scheduler") == "direct");
    CHECK(rows[2].at("scheduler") == "spreadout");
    for (const auto& row : rows) {
        CHECK(num(row, "simgrid_us") > 0);
        CHECK(num(row, "simgrid_us") >= num(row, "lower_bound_us") * 0.999);
    }
}

TEST_CASE("skewed traffic: SimGrid ranks the schedulers as the model does; FAST within 15%") {
    // zipf:1.2 over 4 x 4 GPUs: FAST < direct < spreadout by clear margins in the model.
    const auto rows = simulate("--servers 4 --gpus 4 --workload zipf:1.2 --bytes-per-gpu 64M --seed 3");
    REQUIRE(rows.size() == 3);
    check_same_order(rows);
    for (const auto& row : rows) {
        const double ratio = num(row, "simgrid_us") / num(row, "model_us");
        INFO(row.at("scheduler") << ": SimGrid / model = " << ratio);
        if (row.at("scheduler") == "fast") CHECK(std::abs(ratio - 1) <= 0.15);
        // One transfer per port per step: the model is exact list scheduling, and so is SimGrid.
        if (row.at("scheduler") == "spreadout") CHECK(ratio == Approx(1).epsilon(1e-3));
    }
}

TEST_CASE("real Megatron matrices: the same order and FAST within 15%") {
    const char* file = std::getenv("FAST_MEGATRON"); // workloads/megatron_moe_4x8.txt, set by meson
    REQUIRE(file != nullptr);
    const auto rows = simulate(std::string("--workload file:") + file + "@30 --unit-bytes 8K --every 200");
    REQUIRE(rows.size() == 9); // matrices 30, 230, 430
    check_same_order(rows);
    for (const auto& row : rows)
        if (row.at("scheduler") == "fast") CHECK(std::abs(num(row, "simgrid_us") / num(row, "model_us") - 1) <= 0.15);
}

TEST_CASE("the replay honours the plan's dependencies, transfer by transfer") {
    const std::string trace = temp_path("trace.csv");
    const std::string args =
        "--servers 3 --gpus 4 --workload zipf:1.0 --bytes-per-gpu 32M --seed 5 --schedulers fast,spreadout";
    const result r = run(args + " --trace " + trace);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const auto rows = read_csv(trace);
    // The same plans, made here (planning is deterministic), with their dependency graphs.
    const fast::topology t = fast::make_topology(3, 4);
    const fast::traffic_matrix m = fast::make_zipf(t, 1.0, 32 << 20, 5);
    std::map<std::string, fast::plan> plans;
    for (const auto s : {fast::scheduler::fast, fast::scheduler::spreadout}) {
        fast::plan_options o;
        o.scheduler = s;
        plans[std::string(fast::to_string(s))] = fast::make_plan(m, t, o);
        fast::test::check_plan(plans[std::string(fast::to_string(s))], m);
    }
    std::size_t expected = 0;
    for (const auto& [name, p] : plans) expected += p.transfers.size();
    REQUIRE(rows.size() == expected);
    std::map<std::string, std::vector<std::pair<double, double>>> times;
    for (const auto& row : rows) {
        auto& v = times[row.at("scheduler")];
        const auto i = static_cast<std::size_t>(std::stoul(row.at("transfer")));
        const fast::transfer& x = plans.at(row.at("scheduler")).transfers.at(i);
        CHECK(std::stoi(row.at("src")) == x.src);
        CHECK(std::stoi(row.at("dst")) == x.dst);
        CHECK(std::stoll(row.at("bytes")) == x.bytes);
        if (v.size() <= i) v.resize(i + 1);
        v[i] = {num(row, "simgrid_start_us"), num(row, "simgrid_end_us")};
    }
    std::size_t edges = 0;
    for (const auto& [name, p] : plans) {
        const fast::dependency_graph g = fast::make_dependency_graph(p);
        const auto& v = times.at(name);
        for (std::size_t i = 0; i < p.transfers.size(); ++i) {
            CHECK(v[i].second >= v[i].first);
            for (const std::size_t d : g.of(i)) {
                INFO(name << ": transfer " << i << " starts at " << v[i].first << ", its dependency " << d
                          << " ends at " << v[d].second);
                CHECK(v[i].first >= v[d].second - 1e-3);
                ++edges;
            }
        }
    }
    CHECK(edges > 0);
    std::remove(trace.c_str());
}

TEST_CASE("SimGrid options pass through: LV08's latency factor makes every step cost 13x alpha") {
    // Under LV08 a comm's latency is 13.01 x the route's: FAST's steps each pay ~130 us instead
    // of 10 us, which the model (alpha_out = 10 us) does not know about.
    const std::string csv = temp_path("lv08.csv");
    const result r = run("--servers 2 --gpus 4 --workload zipf:1.1 --bytes-per-gpu 16M --schedulers fast "
                         "--cfg=network/model:LV08 --csv " +
                         csv);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("network/model LV08"));
    const auto rows = read_csv(csv);
    REQUIRE(rows.size() == 1);
    CHECK(num(rows[0], "simgrid_us") > 1.3 * num(rows[0], "model_us"));
    std::remove(csv.c_str());
}

TEST_CASE("bad input is one clear line") {
    const result r = run("--schedulers fast,nccl");
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Catch::Contains("unknown scheduler 'nccl'"));
    const result w = run("--workload file:/nonexistent/m.txt");
    CHECK(w.status == 2);
    CHECK_THAT(w.output, Catch::Contains("cannot open matrix file"));
    const std::string two = temp_path("two.txt");
    std::ofstream(two) << "0 1\n2 0\n0 3\n4 0\n";
    struct bad {
        std::string args;
        const char* says;
    };
    const bad cases[] = {
        {"--every -1", "--every: must be non-negative, got -1"},
        {"--seed -1", "--seed: must be non-negative, got -1"},
        // --every must not turn an index past the end into zero matrices
        {"--servers 1 --gpus 2 --workload file:" + two + "@7 --every 1", "matrix index 7 is out of range"},
        {"--csv /nonexistent/dir/out.csv", "cannot write '/nonexistent/dir/out.csv'"}, // before any replay
        {"--cfg=bogus:1", "SimGrid rejected --cfg=bogus:1: Bad config key: bogus"},
    };
    for (const bad& b : cases) {
        const result r = run(b.args);
        INFO(b.args << " -> " << r.output);
        CHECK(r.status == 2);
        CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
        CHECK_THAT(r.output, Catch::Contains(b.says));
    }
    std::remove(two.c_str());
}

TEST_CASE("--help is fast-simgrid's own, not SimGrid's configuration list") {
    const result r = run("--help");
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("--workload") && Catch::Contains("--every"));
    CHECK_THAT(r.output, !Catch::Contains("Description of the configuration"));
}

TEST_CASE("--plan replays a fast-plan/1 file; crosstraffic throttles one flow against k") {
    // examples/simgrid/exchange-K.json: two GPUs on two servers swap 20 MiB in one step, rank 1's
    // half cut into K transfers. docs/simulators.md: with crosstraffic, max-min freezes rank 0's
    // single flow at the per-flow share of rank 1's saturated NIC (it touches that NIC through
    // its 5% acknowledgement share) until rank 1's K flows are done.
    const char* dir = std::getenv("FAST_SIMGRID_EXAMPLES");
    REQUIRE(dir != nullptr);
    auto time_of = [&](int k, int crosstraffic) {
        const std::string csv = temp_path("exchange.csv");
        const result r = run(std::string("--plan ") + dir + "/exchange-" + std::to_string(k) +
                             ".json --cfg=network/crosstraffic:" + std::to_string(crosstraffic) + " --csv " + csv);
        INFO(r.output);
        REQUIRE(r.status == 0);
        const auto rows = read_csv(csv);
        std::remove(csv.c_str());
        REQUIRE(rows.size() == 1);
        CHECK(rows[0].at("verified") == "yes");
        CHECK(num(rows[0], "model_us") == Approx(10 + 20971520 / 50e3)); // alpha + 20 MiB / 50 GB/s
        return num(rows[0], "simgrid_us") / num(rows[0], "model_us");
    };
    CHECK(time_of(1, 0) == Approx(1).epsilon(1e-4));
    CHECK(time_of(4, 0) == Approx(1).epsilon(1e-4));
    CHECK(time_of(1, 1) == Approx(1.05).epsilon(0.01));  // the 5% acknowledgement share
    CHECK(time_of(4, 1) == Approx(1.745).epsilon(0.01)); // 4 flows at 50/4.05 GB/s, then the rest
}
