// fast-plan end to end: the table, plan files, verify, and one clear line for each bad input.
#include <catch2/catch.hpp>

#include "../command.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/wait.h>

namespace {

using test_support::result;
using test_support::temp_path;

result run(const std::string& args) {
    return test_support::run_tool("FAST_PLAN", args);
}

std::size_t lines(const std::string& s) {
    std::size_t n = 0;
    for (const char c : s) n += c == '\n' ? 1 : 0;
    return n;
}

nlohmann::json load(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

void save(const nlohmann::json& j, const std::string& path) {
    std::ofstream out(path);
    out << j.dump(1);
}

} // namespace

TEST_CASE("the default run plans, verifies and prints the table") {
    const result r = run("");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("4 servers x 8 GPUs"));
    CHECK_THAT(r.output, Catch::Contains("fast (rail-packed)"));
    CHECK_THAT(r.output, Catch::Contains("yes"));
    const result c = run("--compare --servers 2 --gpus 4");
    INFO(c.output);
    CHECK(c.status == 0);
    for (const char* name : {"fast (exact)", "fast (bottleneck)", "fast-unbalanced", "spreadout", "direct"})
        CHECK_THAT(c.output, Catch::Contains(name));
    CHECK_THAT(run("--help").output, Catch::Contains("--workload"));
}

TEST_CASE("plan -> JSON -> fast-plan verify is OK for every scheduler") {
    for (const char* s : {"fast", "fast-unbalanced", "direct", "spreadout"}) {
        for (const char* policy : {"rail-packed", "bottleneck", "exact"}) {
            const std::string file = temp_path(std::string(s) + "_" + policy + ".json");
            const result made =
                run(std::string("--servers 3 --gpus 4 --workload zipf:1.1 --bytes-per-gpu 64M --scheduler ") + s +
                    " --policy " + policy + " --repeat 3 --json " + file);
            INFO(made.output);
            REQUIRE(made.status == 0);
            const result checked = run("verify " + file);
            INFO(checked.output);
            CHECK(checked.status == 0);
            CHECK_THAT(checked.output, Catch::Contains(": OK: "));
            CHECK(load(file)["summary"]["planning_time_us"].get<double>() > 0);
            std::remove(file.c_str());
            if (std::string(s) != "fast") break; // the policy applies to fast only
        }
    }
}

TEST_CASE("--ramp and --long-call-ramp-scale reach the planner") {
    // The default workload is a long call (about 450 alpha_out per NIC): its ramp is scaled.
    const std::string scaled = temp_path("scaled.json");
    const std::string as_given = temp_path("as_given.json");
    const std::string lower = temp_path("lower.json");
    for (const auto& [args, file] : {std::pair<std::string, std::string>{"", scaled},
                                     {"--long-call-ramp-scale 1", as_given},
                                     {"--long-call-ramp-scale 1 --ramp 0.4", lower}}) {
        const result r = run(args + " --json " + file);
        INFO(args << " -> " << r.output);
        CHECK(r.status == 0);
        CHECK_THAT(r.output, Catch::Contains("yes")); // verified
    }
    // The plan files without their measured planning times (and what depends on them).
    const auto plan_in = [](const std::string& path) {
        nlohmann::json j = load(path);
        for (const char* measured : {"planning_time_us", "rank_planning_time_us", "end_to_end"})
            j["summary"].erase(measured);
        return j;
    };
    CHECK(plan_in(scaled) != plan_in(as_given));
    CHECK(plan_in(scaled) == plan_in(lower)); // 0.5 x 0.8
    for (const std::string& f : {scaled, as_given, lower}) std::remove(f.c_str());
}

TEST_CASE("hand-corrupted plan files are rejected with the right message") {
    const std::string file = temp_path("plan.json");
    REQUIRE(
        run("--servers 2 --gpus 2 --workload uniform --bytes-per-gpu 3000 --scheduler direct --json " + file).status ==
        0);
    const nlohmann::json good = load(file);
    REQUIRE(good["one_to_one_scale_out"] == false);

    SECTION("a byte moved: the last byte of a transfer lands one byte further") {
        nlohmann::json j = good;
        nlohmann::json& t = j["steps"][0]["transfers"][1];
        const long long n = t["bytes"].get<long long>();
        t["bytes"] = n - 1;
        nlohmann::json moved = t;
        moved["bytes"] = 1;
        moved["src_offset"] = t["src_offset"].get<long long>() + n - 1;
        moved["dst_offset"] = t["dst_offset"].get<long long>() + n; // one byte off
        j["steps"].push_back({{"transfers", nlohmann::json::array({moved})}});
        save(j, file);
        const result r = run("verify " + file);
        INFO(r.output);
        CHECK(r.status == 1);
        CHECK_THAT(r.output, Catch::Contains("wrong place: step 1"));
    }
    SECTION("a transfer dropped: bytes never delivered") {
        nlohmann::json j = good;
        j["steps"][0]["transfers"].erase(0);
        save(j, file);
        const result r = run("verify " + file);
        CHECK(r.status == 1);
        CHECK_THAT(r.output, Catch::Contains("not delivered"));
    }
    SECTION("an incast step in a plan that claims to be incast-free") {
        nlohmann::json j = good;
        j["one_to_one_scale_out"] = true; // direct sends everything at once: ranks 2 and 3 both receive from 0 and 1
        save(j, file);
        const result r = run("verify " + file);
        INFO(r.output);
        CHECK(r.status == 1);
        CHECK((r.output.find("incast") != std::string::npos || r.output.find("fan-out") != std::string::npos));
    }
    SECTION("malformed files") {
        std::ofstream(file) << "{\"format\": \"fast-plan/1\", \"topology\": 3}";
        const result r = run("verify " + file);
        CHECK(r.status == 1);
        CHECK(lines(r.output) == 1);
        CHECK_THAT(r.output, Catch::Contains("topology: expected an object"));
    }
    std::remove(file.c_str());
}

TEST_CASE("--all summarises every matrix of a file, every plan verified") {
    // Three 4 x 4 matrices in the rows format: skewed, uniform, one hot receiver.
    const std::string file = temp_path("three.txt");
    std::ofstream(file) << "0 9 1 1\n1 0 1 9\n9 1 0 1\n1 1 9 0\n"
                           "0 5 5 5\n5 0 5 5\n5 5 0 5\n5 5 5 0\n"
                           "0 9 0 0\n0 0 0 9\n0 9 0 0\n0 9 0 0\n";
    const result r = run("--servers 2 --gpus 2 --workload file:" + file + " --unit-bytes 1M --all --compare");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("all 3 matrices"));
    for (const char* name : {"fast (rail-packed)", "fast (exact)", "direct", "spreadout"}) {
        const auto at = r.output.find(name);
        REQUIRE(at != std::string::npos);
        const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
        CHECK_THAT(line, Catch::Contains(" 3 ") && Catch::EndsWith("all"));
    }
    std::remove(file.c_str());
}

TEST_CASE("a matrix path may hold '@': only a trailing @DIGITS is an index") {
    const std::string dir = temp_path("a@b");
    REQUIRE(std::system(("mkdir -p '" + dir + "'").c_str()) == 0);
    const std::string file = dir + "/m.txt";
    std::ofstream(file) << "0 1\n2 0\n0 3\n4 0\n";
    const result first = run("--servers 1 --gpus 2 --workload file:" + file);
    INFO(first.output);
    CHECK(first.status == 0);
    CHECK_THAT(first.output, Catch::Contains("3.0 B in all"));
    const result second = run("--servers 1 --gpus 2 --workload file:" + file + "@1");
    INFO(second.output);
    CHECK(second.status == 0);
    CHECK_THAT(second.output, Catch::Contains("7.0 B in all"));
    const result all = run("--servers 1 --gpus 2 --workload file:" + file + " --all");
    INFO(all.output);
    CHECK(all.status == 0);
    CHECK_THAT(all.output, Catch::Contains("all 2 matrices"));
    std::remove(file.c_str());
    std::remove(dir.c_str());
}

TEST_CASE("bad input exits non-zero with one clear line") {
    const std::string matrix = temp_path("m.txt");
    std::ofstream(matrix) << "0 1 2\n3 4 5\n6 7 8\n";
    const std::string negative = temp_path("neg.txt");
    std::ofstream(negative) << "0 -1\n2 3\n";
    const std::string words = temp_path("words.txt");
    std::ofstream(words) << "0 x\n2 3\n";
    struct bad {
        std::string args;
        const char* says;
    };
    const bad cases[] = {
        {"--servers 0", "servers must be at least 1, got 0"},
        {"--servers abc", "--servers"},
        {"--gpus -3", "gpus_per_server must be at least 1, got -3"},
        {"--preset a100", "unknown preset 'a100'"},
        {"--scheduler fastest", "unknown scheduler 'fastest'"},
        {"--policy greedy", "unknown policy 'greedy'"},
        {"--workload gauss", "unknown workload 'gauss'"},
        {"--bytes-per-gpu 12Q", "--bytes-per-gpu: '12Q' has an unknown suffix"},
        {"--workload file:/nonexistent/m.txt", "cannot open matrix file '/nonexistent/m.txt'"},
        {"--workload file:" + matrix + " --servers 2 --gpus 2", "row has 3 entries, expected 4"},
        {"--workload file:" + negative + " --servers 1 --gpus 2", "'-1' is negative"},
        {"--workload file:" + words + " --servers 1 --gpus 2", "'x' is not a non-negative integer"},
        {"--workload file:" + matrix + "@5 --servers 1 --gpus 3", "matrix index 5 is out of range"},
        {"--scale-out-gbps -5", "scale_out_gbps must be positive"},
        {"--repeat 0", "--repeat"},
        {"--all", "--all plans every matrix of a file"},
        {"--all --workload file:" + matrix + "@0 --servers 1 --gpus 3", "without @INDEX"},
        {"verify /nonexistent/plan.json", "cannot open plan file"},
        // One line: the output file is checked before the table is printed and anything planned.
        {"--json /nonexistent/dir/plan.json", "cannot write '/nonexistent/dir/plan.json'"},
        {"--workload moe:tokens=99999999999999", "tokens = 99999999999999 is above the limit of 4194304"},
        {"--workload moe:tokens=3000000", "tokens x topk = 3000000 x 2 is above the limit"},
        {"--workload moe:topk=2000000", "topk must be between 1 and 1000000"},
        {"--workload zipf:", "zipf exponent: '' is not a number"},
        {"--seed -1", "--seed: must be non-negative, got -1"},
        {"--ramp -1", "--ramp"},
        {"--long-call-ramp-scale 0", "--long-call-ramp-scale: must be in (0, 1e+06], got 0"},
        {"--ramp 2e6", "--ramp: must be in [0, 1e+06], got 2e6"},
        {"--scale-out-gbps -1e300", "scale_out_gbps must be positive and finite, got -1e+300"},
    };
    for (const bad& b : cases) {
        const result r = run(b.args);
        INFO(b.args << " -> " << r.output);
        CHECK(r.status != 0);
        CHECK(lines(r.output) == 1);
        CHECK_THAT(r.output, Catch::Contains(b.says));
    }
    for (const std::string& f : {matrix, negative, words}) std::remove(f.c_str());
}

TEST_CASE("exit status: 0 verified, 1 not verified (verify: not a valid plan), 2 bad input") {
    CHECK_THAT(run("--help").output, Catch::Contains("Exit status: 0 every plan verified"));
    const std::string dir = temp_path("plans");
    REQUIRE(std::system(("mkdir -p '" + dir + "'").c_str()) == 0);
    const result on_dir = run("verify " + dir);
    INFO(on_dir.output);
    CHECK(on_dir.status == 1);
    CHECK(lines(on_dir.output) == 1);
    CHECK_THAT(on_dir.output, Catch::Contains("cannot read plan file '" + dir + "': it is a directory"));
    std::remove(dir.c_str());
    const result missing = run("verify /nonexistent/plan.json");
    CHECK(missing.status == 1);
    CHECK_THAT(missing.output, Catch::Contains("cannot open plan file '/nonexistent/plan.json': No such file"));
    CHECK(run("verify").status == 2); // no file: a bad command line
    CHECK(run("--servers 0").status == 2);
}

TEST_CASE("a cluster whose matrix cannot fit says what it needs") {
    // 2e7 ranks: the matrix alone is 2.8 PiB, beyond any machine (else std::bad_alloc).
    const result r = run("--servers 20000 --gpus 1000");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains("20000 servers x 1000 GPUs: the 20000000 x 20000000 traffic matrix alone "
                                         "takes 2.8 PiB, more than this machine's"));
}

TEST_CASE("a bad matrix entry is quoted short and inert") {
    const std::string file = temp_path("long_entry.txt");
    std::ofstream(file) << "0 \x1b[31m" << std::string(std::size_t{1} << 20, '7') << "\n1 0\n";
    const result r = run("--servers 1 --gpus 2 --workload file:" + file);
    INFO(r.output.substr(0, 300));
    CHECK(r.status == 2);
    CHECK(lines(r.output) == 1);
    CHECK(r.output.size() < 300);
    CHECK(r.output.find('\x1b') == std::string::npos);
    CHECK_THAT(r.output, Catch::Contains("entry (0, 1): '\\x1b[31m7777") && Catch::Contains("(1048581 bytes)'"));
    std::remove(file.c_str());
}

TEST_CASE("verify costs a plan whose port moves more than 2^63 bytes in one step") {
    // One server of 4 GPUs: rank 0 sends its 2^62-byte block to rank 1 and the same bytes to the
    // scratch of ranks 2 and 3 in one step: 3 x 2^62 bytes through its scale-up send port.
    const long long block = 1LL << 62;
    nlohmann::json plan = {{"format", "fast-plan/1"},
                           {"topology",
                            {{"servers", 1},
                             {"gpus_per_server", 4},
                             {"scale_up_gbps", 450},
                             {"scale_out_gbps", 50},
                             {"alpha_up_us", 3},
                             {"alpha_out_us", 10}}},
                           {"scheduler", "hand"},
                           {"matrix", {{0, block, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}},
                           {"scratch_bytes", {0, 0, block, block}}};
    nlohmann::json transfers = nlohmann::json::array();
    for (int dst = 1; dst < 4; ++dst)
        transfers.push_back({{"src", 0},
                             {"dst", dst},
                             {"bytes", block},
                             {"tier", "scale_up"},
                             {"src_buffer", "send"},
                             {"src_offset", 0},
                             {"dst_buffer", dst == 1 ? "recv" : "scratch"},
                             {"dst_offset", 0}});
    plan["steps"] = {{{"transfers", transfers}}};
    const std::string file = temp_path("big_port.json");
    save(plan, file);
    const result r = run("verify " + file);
    INFO(r.output);
    CHECK(r.status == 0);
    char want[64];
    std::snprintf(want, sizeof want, "predicted %.2f us", 3.0 + 3.0 * static_cast<double>(block) / 450e3);
    CHECK_THAT(r.output, Catch::Contains(": OK: hand") && Catch::Contains(want));
    std::remove(file.c_str());
}

TEST_CASE("--fabric and FAST_FABRIC: the cluster of a fabric file, planned and verified; conflicts are one line") {
    const std::string fabric = temp_path("cluster.json");
    const std::string plan = temp_path("fabric_plan.json");
    const result printed = run("fabric --preset mi300x --servers 2 --gpus 4");
    INFO(printed.output);
    REQUIRE(printed.status == 0);
    std::ofstream(fabric) << printed.output;
    CHECK(load(fabric)["nics"] == nlohmann::json{{"gpus_per_nic", 1}, {"gbps", 12.5}});

    const result made = run("--fabric " + fabric + " --workload zipf:1.1 --bytes-per-gpu 16M --json " + plan);
    INFO(made.output);
    CHECK(made.status == 0);
    CHECK_THAT(made.output, Catch::Contains("2 servers x 4 GPUs (" + fabric + ": scale-up 448 GB/s, scale-out 12.5"));
    CHECK(load(plan)["topology"]["scale_out_gbps"] == 12.5);
    const result checked = run("verify " + plan);
    INFO(checked.output);
    CHECK(checked.status == 0);
    const result from_env = test_support::run_command("FAST_FABRIC=" + fabric + " " + std::getenv("FAST_PLAN") +
                                                      " --servers 2 --workload uniform --bytes-per-gpu 1M");
    INFO(from_env.output);
    CHECK(from_env.status == 0);
    CHECK_THAT(from_env.output, Catch::Contains("2 servers x 4 GPUs (" + fabric));

    nlohmann::json uneven = load(fabric);
    uneven["nics"]["rates"] = {{{"server", 1}, {"nic", 3}, {"gbps", 0}}};
    save(uneven, fabric);
    // A NIC down: FAST plans around it (the plan carries each rank's rate, and verifies), direct cannot run.
    const result around =
        run("--fabric " + fabric + " --workload uniform --bytes-per-gpu 4M --schedulers fast,direct --json " + plan);
    INFO(around.output);
    CHECK(around.status == 0);
    CHECK_THAT(around.output,
               Catch::Contains("fabric uneven: NIC 3 of server 1 is down") &&
                   Catch::Contains("cannot plan on this fabric: direct cannot run: rank 7's NIC is down"));
    const nlohmann::json around_plan = load(plan);
    CHECK(around_plan["nic_gbps"].size() == 8);
    CHECK(around_plan["nic_gbps"][7] == 0.0);
    CHECK(around_plan["nic_gbps"][6] == 12.5);
    CHECK(run("verify " + plan).status == 0);
    const std::pair<std::string, std::string> bad[] = {
        {"--fabric " + fabric + " --all --workload file:" + fabric,
         "--all plans a file's matrices on NICs of one rate; this fabric's differ (NIC 3 of server 1 is down)"},
        {"--fabric " + fabric + " --servers 3", "--servers 3 contradicts --fabric " + fabric + " (2 servers)"},
        {"--fabric " + fabric + " --preset h200", "--preset h200 and --fabric " + fabric + ": give one of the two"},
        {"--fabric /nonexistent/f.json", "cannot read fabric file '/nonexistent/f.json'"},
    };
    for (const auto& [args, says] : bad) {
        const result r = run(args);
        INFO(args << " -> " << r.output);
        CHECK(r.status == 2);
        CHECK(lines(r.output) == 1);
        CHECK_THAT(r.output, Catch::Contains(says));
    }
    CHECK(run("fabric --fabric " + fabric).output.find("\"rates\": [") != std::string::npos); // uneven: printed
    const result bounds = run("bounds --fabric " + fabric + " --workload uniform");
    INFO(bounds.output);
    CHECK(bounds.status == 0);
    CHECK_THAT(bounds.output, Catch::Contains("fabric uneven: NIC 3 of server 1 is down") && Catch::Contains("T_lb") &&
                                  Catch::Contains("cannot finish  (NIC 3 of server 1, down, with bytes to move)"));
    CHECK_THAT(run("--help").output, Catch::Contains("--fabric") && Catch::Contains("fast-fabric/1"));
    for (const std::string& f : {fabric, plan}) std::remove(f.c_str());
}
