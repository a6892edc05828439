// fabric.hpp and its file format (fabric_json.hpp), in one executable: presets as fabrics, uneven
// fabrics, the file's round trip, every error naming its field and value, and docs/formats.md's
// examples.
#include <catch2/catch.hpp>

#include <fast/cost.hpp>
#include <fast/counts.hpp>
#include <fast/fabric.hpp>
#include <fast/fabric_bounds.hpp>
#include <fast/fabric_json.hpp>
#include <fast/workload.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace fast;

namespace {

std::string to_text(const fabric& f) {
    std::ostringstream out;
    write_fabric_json(out, f);
    return out.str();
}

fabric from_text(const std::string& text) {
    std::istringstream in(text);
    return read_fabric_json(in, "fabric.json");
}

// A 2 x 4 h200 cluster whose NICs are laid out as `l`.
fabric with_layout(const nic_layout& l) {
    fabric f = preset_fabric(preset::h200, 2, 4);
    f.nics = layout_nics(2, 4, l);
    return f;
}

// A valid fabric file of 2 x 4 GPUs with `nics` for its "nics" field.
std::string file_with_nics(const std::string& nics) {
    return R"({"format": "fast-fabric/1", "servers": 2, "gpus_per_server": 4, "scale_up_gbps": 450,
               "alpha_up_us": 3, "alpha_out_us": 10, "nics": )" +
           nics + "}";
}

} // namespace

TEST_CASE("presets are uniform fabrics; they round-trip through fast-fabric/1 in nine lines") {
    for (const preset p : {preset::h200, preset::mi300x}) {
        const fabric f = preset_fabric(p, 3, 4);
        CHECK(f.nics.size() == 12);
        CHECK(is_uniform(f));
        CHECK(to_topology(f) == make_topology(3, 4, p));
        CHECK(uniform_fabric(make_topology(3, 4, p)) == f);
        const std::string text = to_text(f);
        INFO(text);
        CHECK(std::count(text.begin(), text.end(), '\n') == 9);
        CHECK(from_text(text) == f);
    }
}

TEST_CASE("uneven fabrics round-trip; to_topology says what makes them uneven") {
    fabric slow = preset_fabric(preset::h200, 2, 4);
    slow.nics[7].gbps = 12.5; // NIC 3 of server 1
    fabric down = slow;
    down.nics[7].gbps = 0;
    fabric odd = preset_fabric(preset::h200, 2, 4);
    odd.nics.erase(odd.nics.begin() + 5); // server 1's GPU 1 ...
    odd.nics[4].gpus = {0, 1};            // ... shares GPU 0's NIC: not the same layout on every server
    const std::vector<std::pair<fabric, std::string>> cases{
        {with_layout({2, 1, 50}), "NIC 0 of server 0 serves 2 GPUs"},
        {with_layout({1, 2, 25}), "GPU 0 of server 0 has 2 NICs"},
        {slow, "NIC 3 of server 1 runs at 12.5 GB/s, others at 50"},
        {down, "NIC 3 of server 1 is down"},
        {odd, "NIC 0 of server 1 serves 2 GPUs"},
    };
    for (const auto& [f, why] : cases) {
        const std::string text = to_text(f);
        INFO(text);
        REQUIRE_NOTHROW(validate(f));
        CHECK(from_text(text) == f);
        CHECK_FALSE(is_uniform(f));
        CHECK_THROWS_WITH(to_topology(f),
                          Catch::Contains("fabric: " + why) && Catch::Contains("(planner(fabric) plans uneven ones)"));
    }
    CHECK(to_text(slow).find("\"rates\"") != std::string::npos);       // a layout with one rate aside
    CHECK(to_text(odd).find("\"gpus\": [0, 1]") != std::string::npos); // every NIC listed
}

TEST_CASE("bad fabrics and bad files: one line naming the field and the value") {
    fabric f = preset_fabric(preset::h200, 2, 4);
    f.nics[3].gpus = {4};
    CHECK_THROWS_WITH(validate(f), "nics[3].gpus[0]: 4 is not a GPU of the server (0 to 3)");
    f.nics[3].gpus = {2};
    CHECK_THROWS_WITH(validate(f), "nics: GPU 3 of server 0 hangs off no NIC");
    f = preset_fabric(preset::h200, 2, 1);
    f.nics[1].gbps = 0;
    CHECK_THROWS_WITH(validate(f), "nics: every NIC of server 1 is down: it cannot reach the other servers");

    const std::string layout = R"({"gpus_per_nic": 1, "gbps": 50})";
    const std::vector<std::pair<std::string, std::string>> files{
        {"{", "fabric.json: not valid JSON"},
        {R"({"format": "fast-plan/1"})", "fabric.json: format: \"fast-plan/1\" is not \"fast-fabric/1\""},
        {file_with_nics(R"([{"server": 0, "gpus": [0], "gbps": 50}, {"server": 0, "gpus": [1], "gbps": 50},
                            {"server": 0, "gpus": [2], "gbps": 50}, {"server": 0, "gpus": [3], "gbps": "fast"}])"),
         "fabric.json: nics[3].gbps: expected a number >= 0, got \"fast\""},
        {file_with_nics(R"([{"server": 2, "gpus": [0], "gbps": 50}])"),
         "fabric.json: nics[0].server: 2 is not a server (0 to 1)"},
        {file_with_nics(R"([{"server": 0, "gpus": [0, 0], "gbps": 50}])"), "fabric.json: nics[0].gpus[1]: GPU 0 twice"},
        {file_with_nics(R"([{"server": 0, "gpus": [0], "gbps": 50, "speed": 1}])"),
         "fabric.json: nics[0]: unknown field \"speed\" (expected server, gpus, gbps)"},
        {file_with_nics(R"({"gpus_per_nic": 3, "gbps": 50})"),
         "fabric.json: nics: gpus_per_nic: 3 does not divide gpus_per_server 4"},
        {file_with_nics(R"({"gpus_per_nic": 2, "nics_per_gpu": 2, "gbps": 50})"),
         "fabric.json: nics: gpus_per_nic 2 and nics_per_gpu 2: both at least 1, at most one above 1"},
        {file_with_nics(R"({"gbps": -1})"), "fabric.json: nics.gbps: expected a number >= 0, got -1"},
        {file_with_nics(R"({"gbps": 50, "rates": [{"server": 1, "nic": 4, "gbps": 0}]})"),
         "fabric.json: nics.rates[0].nic: 4 is out of range [0, 3]"},
        {file_with_nics(R"({"gbps": 50, "rates": [{"server": 1, "nic": 3, "gbps": 0}, {"server": 1, "nic": 3,
                           "gbps": 1}]})"),
         "fabric.json: nics.rates[1]: NIC 3 of server 1 is listed twice"},
        {file_with_nics(R"({"gbps": 50, "rates": [{"server": 1, "nic": 0, "gbps": 0}, {"server": 1, "nic": 1,
                           "gbps": 0}, {"server": 1, "nic": 2, "gbps": 0}, {"server": 1, "nic": 3, "gbps": 0}]})"),
         "fabric.json: nics: every NIC of server 1 is down"},
        {file_with_nics("7"), "fabric.json: nics: expected an object (a layout) or an array, got 7"},
        {file_with_nics(layout + R"(, "alpha_out": 1)"),
         "fabric.json: unknown field \"alpha_out\" (expected format, servers, gpus_per_server"},
        {R"({"format": "fast-fabric/1", "servers": 0})", "fabric.json: servers: 0 is out of range [1, 2147483647]"},
        {R"({"format": "fast-fabric/1", "servers": 1, "gpus_per_server": 1, "scale_up_gbps": 0, "alpha_up_us": 3,
            "alpha_out_us": 10, "nics": {"gbps": 50}})",
         "fabric.json: scale_up_gbps must be positive and finite, got 0"},
        {R"({"format": "fast-fabric/1", "servers": 1, "gpus_per_server": 1, "scale_up_gbps": 450,
            "alpha_up_us": 3, "nics": {"gbps": 50}})",
         "fabric.json: missing \"alpha_out_us\""},
        {R"({"format": "fast-fabric/1", "servers": 100000000, "gpus_per_server": 8, "scale_up_gbps": 450,
            "alpha_up_us": 3, "alpha_out_us": 10, "nics": {"gbps": 50}})",
         "fabric.json: servers x gpus_per_server = 100000000 x 8, more than 16777216 GPUs"},
        {R"({"format": "fast-fabric/1", "servers": 1000000, "gpus_per_server": 8, "scale_up_gbps": 450,
            "alpha_up_us": 3, "alpha_out_us": 10, "nics": {"nics_per_gpu": 64, "gbps": 50}})",
         "fabric.json: nics: 1000000 servers of this layout have more than 16777216 NICs"},
    };
    for (const auto& [text, message] : files) {
        INFO(text);
        CHECK_THROWS_WITH(from_text(text), Catch::StartsWith(message));
    }
    CHECK_THROWS_WITH(read_fabric_file("/nonexistent/f.json"), "cannot read fabric file '/nonexistent/f.json'");
}

TEST_CASE("the fabric files of docs/formats.md are read as documented") {
    const char* path = std::getenv("FAST_FORMATS_MD");
    REQUIRE(path != nullptr);
    std::ifstream in(path);
    REQUIRE(in);
    // Every ```json block of the section on fabric files.
    std::vector<std::string> examples;
    std::string line, block;
    bool in_section = false, in_block = false;
    while (std::getline(in, line)) {
        if (line.rfind("## ", 0) == 0) in_section = line.find("fast-fabric/1") != std::string::npos;
        if (!in_section) continue;
        if (line == "```json") in_block = true, block.clear();
        else if (line == "```" && in_block) in_block = false, examples.push_back(block);
        else if (in_block) block += line + "\n";
    }
    REQUIRE(examples.size() == 3);
    CHECK(to_topology(from_text(examples[0])) == make_topology(4, 8, preset::h200));
    const fabric rates = from_text(examples[1]);
    CHECK(rates.nics.size() == 16);
    CHECK(rates.nics[15] == nic{1, {7}, 0});
    CHECK_THROWS_WITH(to_topology(rates), Catch::Contains("NIC 2 of server 0 runs at 25 GB/s, others at 50"));
    const fabric listed = from_text(examples[2]);
    CHECK(listed.nics.size() == 8);
    CHECK(listed.nics[5] == nic{1, {2, 3}, 0});
    CHECK_THROWS_WITH(to_topology(listed), Catch::Contains("NIC 0 of server 0 serves 2 GPUs"));
}

TEST_CASE("fabric bounds: a uniform fabric's T_lb is the topology's; own NICs never beat T_lb") {
    std::mt19937_64 rng(7);
    for (const auto& [servers, gpus] : {std::pair{2, 4}, std::pair{3, 2}, std::pair{4, 8}})
        for (const char* w : {"uniform", "zipf:0.8", "moe"})
            for (std::uint64_t seed = 1; seed <= 3; ++seed) {
                const topology t = make_topology(servers, gpus);
                const shared_counts c = make_shared_counts(make_workload(parse_workload(w), t, 64 << 20, seed), t);
                INFO(servers << " x " << gpus << " " << w << " seed " << seed);
                CHECK(lower_bound(c, uniform_fabric(t)).us == Approx(lower_bound_us(c, t)));
                // An uneven fabric: random layouts and rates, NICs down where their server keeps one.
                const int per_nic = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? 1 : 2;
                fabric f = uniform_fabric(t);
                f.nics = layout_nics(servers, gpus, {gpus % per_nic == 0 ? per_nic : 1, 1, 50});
                for (nic& n : f.nics) n.gbps = std::array{12.5, 25.0, 50.0, 0.0}[rng() % 4];
                for (nic& n : f.nics)
                    if (n.gpus.front() == 0 && n.gbps == 0) n.gbps = 50; // one NIC up per server
                REQUIRE_NOTHROW(validate(f));
                const fabric_bound bound = lower_bound(c, f), own = own_nics_bound(c, f);
                CHECK(bound.us >= lower_bound_us(c, t) - 1e-9); // no NIC faster than the preset's
                CHECK(own.us >= bound.us * (1 - 1e-12));
            }
}

TEST_CASE("fabric bounds by hand: a slow NIC, a down NIC, a shared NIC") {
    const topology t = make_topology(2, 2); // 50 GB/s NICs, alpha_out 10 us
    traffic_matrix m = traffic_matrix::Zero(4, 4);
    m(0, 2) = 1'000'000'000; // GPU 0 of server 0 -> GPU 0 of server 1: 20 ms on one NIC, 10 on two
    const shared_counts c = make_shared_counts(m, t);
    const fabric even = uniform_fabric(t);
    CHECK(lower_bound(c, even).us == Approx(10'010));
    CHECK(lower_bound(c, even).where == "server 0's NICs");
    CHECK(own_nics_bound(c, even).us == Approx(20'010));
    CHECK(own_nics_bound(c, even).where == "NIC 0 of server 0");

    fabric slow = even;
    slow.nics[0].gbps = 12.5;                         // the sender's own NIC at a quarter
    CHECK(lower_bound(c, slow).us == Approx(16'010)); // 62.5 GB/s on server 0
    CHECK(own_nics_bound(c, slow).us == Approx(80'010));

    fabric idle_down = even;
    idle_down.nics[1].gbps = 0; // GPU 1 of server 0 has nothing to send or receive
    CHECK(lower_bound(c, idle_down).us == Approx(20'010));
    CHECK(own_nics_bound(c, idle_down).us == Approx(20'010));

    fabric down = even;
    down.nics[0].gbps = 0;
    CHECK(lower_bound(c, down).us == Approx(20'010)); // through GPU 1's NIC
    CHECK(std::isinf(own_nics_bound(c, down).us));
    CHECK(own_nics_bound(c, down).where == "NIC 0 of server 0, down, with bytes to move");

    fabric shared = even;
    shared.nics = layout_nics(2, 2, {2, 1, 50}); // one NIC per server for both GPUs
    CHECK(lower_bound(c, shared).us == Approx(20'010));
    CHECK(own_nics_bound(c, shared).us == Approx(20'010));

    const shared_counts none = make_shared_counts(traffic_matrix::Zero(4, 4), t);
    CHECK(lower_bound(none, down).us == 0);
    CHECK(lower_bound(none, down).where.empty());
}
