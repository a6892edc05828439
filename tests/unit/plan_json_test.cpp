#include "../support.hpp"

#include <fast/plan_json.hpp>
#include <fast/planner.hpp>

#include <sstream>

using namespace fast;

namespace {
std::string to_json(const plan& p, const traffic_matrix& m) {
    std::ostringstream out;
    write_plan_json(out, p, m, summarize(p, m, 12.5, 3.25));
    return out.str();
}
plan_document from_json(const std::string& text) {
    std::istringstream in(text);
    return read_plan_json(in, "p");
}
} // namespace

TEST_CASE("plans round-trip through fast-plan/1 unchanged, for every scheduler") {
    for (std::uint64_t seed = 0; seed < 60; ++seed) {
        const auto c = fast::test::make_random_case(seed);
        for (const scheduler s :
             {scheduler::fast, scheduler::fast_unbalanced, scheduler::direct, scheduler::spreadout}) {
            plan_options o;
            o.scheduler = s;
            const plan p = make_plan(c.matrix, c.topo, o);
            fast::test::check_plan(p, c.matrix);
            const plan_document doc = from_json(to_json(p, c.matrix));
            CHECK(doc.plan == p);
            CHECK(doc.matrix == c.matrix);
            CHECK(doc.summary.planning_time_us == 12.5);
            CHECK(doc.summary.rank_planning_time_us == 3.25);
            CHECK(doc.summary.steps == p.steps());
            // End to end: the agreement's model for the topology, the rank's planning, the exchange.
            const agreement a = plan_agreement(c.topo);
            CHECK(doc.summary.agreement_bytes == a.network_bytes);
            CHECK(doc.summary.agreement_time_us == Approx(a.us));
            if (doc.summary.lower_bound_us > 0)
                CHECK(doc.summary.end_to_end() ==
                      Approx((a.us + 3.25 + doc.summary.predicted_time_us) / doc.summary.lower_bound_us));
            fast::test::check_plan(doc.plan, doc.matrix);
        }
    }
}

TEST_CASE("a plan on an uneven fabric keeps each rank's rate, and its T_lb is the fabric's") {
    fabric f = preset_fabric(preset::h200, 2, 2);
    f.nics[1].gbps = 0;
    const traffic_matrix m = make_uniform(planning_topology(f), 1 << 20);
    planner p(f);
    const plan& made = p.make(m);
    fast::test::check_plan(made, m);
    const plan_document doc = from_json(to_json(made, m));
    CHECK(doc.plan == made);
    CHECK(doc.plan.nic_gbps == std::vector<double>{50, 0, 50, 50});
    CHECK(doc.summary.lower_bound_us == Approx(lower_bound(make_shared_counts(m, made.topology), f).us));
    CHECK(doc.summary.lower_bound_us > lower_bound_us(m, made.topology)); // three NICs do server 0's work
    std::string text = to_json(made, m);
    text.replace(text.find("\"nic_gbps\": [50.0"), 16, "\"nic_gbps\": [-1.0");
    CHECK_THROWS_WITH(from_json(text), Catch::Contains("p.nic_gbps[0]"));
}

TEST_CASE("bad plan files name the field that is wrong") {
    const topology t = make_topology(2, 2);
    const traffic_matrix m = make_uniform(t, 300);
    const plan p = make_plan(m, t);
    fast::test::check_plan(p, m);
    const std::string good = to_json(p, m);
    auto nj = nlohmann::json::parse(good);
    auto reject = [](const nlohmann::json& j, const std::string& what) {
        CHECK_THROWS_WITH(from_json(j.dump()), Catch::Contains(what));
    };
    CHECK_THROWS_WITH(from_json("{not json"), Catch::Contains("p: not valid JSON"));
    CHECK_THROWS_WITH(from_json("[]"), Catch::Contains("p: expected an object"));
    {
        auto j = nj;
        j["format"] = "fast-plan/2";
        reject(j, "p.format: \"fast-plan/2\" is not \"fast-plan/1\"");
    }
    {
        auto j = nj;
        j["topology"].erase("servers");
        reject(j, "p.topology: missing \"servers\"");
    }
    {
        auto j = nj;
        j["matrix"][1][0] = -4;
        reject(j, "p.matrix[1][0]: -4 is out of range");
    }
    {
        auto j = nj;
        j["matrix"].erase(0);
        reject(j, "p.matrix: expected 4 rows");
    }
    {
        auto j = nj;
        j["steps"][0]["transfers"][0]["tier"] = "nvlink";
        reject(j, "p.steps[0].transfers[0].tier: expected \"scale_up\" or \"scale_out\", got \"nvlink\"");
    }
    {
        auto j = nj;
        j["steps"][0]["transfers"][0]["dst"] = 7;
        reject(j, "p.steps[0].transfers[0].dst: 7 is out of range [0, 3]");
    }
    {
        auto j = nj;
        j["steps"][0]["transfers"][0]["src_buffer"] = "heap";
        reject(j, "src_buffer: expected \"send\", \"recv\" or \"scratch\", got \"heap\"");
    }
    {
        auto j = nj;
        j["scratch_bytes"] = "lots";
        reject(j, "p.scratch_bytes: expected 4 entries");
    }
    {
        auto j = nj;
        j["topology"]["scale_out_gbps"] = 0;
        reject(j, "p.topology: scale_out_gbps must be positive");
    }
    {
        auto j = nj;
        j["topology"]["alpha_out_us"] = -1e300; // a few digits, not 300
        reject(j, "p.topology: alpha_out_us must be non-negative and finite, got -1e+300");
    }
}

TEST_CASE("values a plan file echoes are cut and escaped") {
    const topology t = make_topology(2, 2);
    const traffic_matrix m = make_uniform(t, 300);
    const plan p = make_plan(m, t);
    fast::test::check_plan(p, m);
    const auto nj = nlohmann::json::parse(to_json(p, m));
    auto message = [](const nlohmann::json& j) {
        try {
            (void)from_json(j.dump());
        } catch (const invalid_argument& e) {
            return std::string(e.what());
        }
        FAIL("accepted");
        return std::string();
    };
    auto j = nj;
    j["steps"][0]["transfers"][0]["tier"] = std::string(100000, 'u');
    std::string what = message(j);
    CHECK(what.size() < 200);
    CHECK_THAT(what, Catch::Contains("got \"uuuu") && Catch::Contains("... (100000 bytes)\""));
    j = nj;
    j["format"] = "\x1b]0;title\x07";
    what = message(j);
    CHECK(what.find('\x1b') == std::string::npos);
    CHECK_THAT(what, Catch::Contains("p.format: \"\\x1b]0;title\\x07\" is not"));
    j = nj;
    j["steps"][0]["transfers"][0]["bytes"] = std::string(5000, '9');
    what = message(j);
    CHECK(what.size() < 200);
    CHECK_THAT(what, Catch::Contains("bytes: expected an integer, got \"9999"));
}
