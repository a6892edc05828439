#include <catch2/catch.hpp>

#include <fast/topology.hpp>

using namespace fast;

TEST_CASE("presets carry the documented bandwidths and latencies") {
    const topology h = make_topology(4, 8, preset::h200);
    CHECK(h.scale_up_gbps == 450.0);
    CHECK(h.scale_out_gbps == 50.0);
    CHECK(h.alpha_up_us == 3.0);
    CHECK(h.alpha_out_us == 10.0);
    const topology m = make_topology(4, 8, preset::mi300x);
    CHECK(m.scale_up_gbps == 448.0);
    CHECK(m.scale_out_gbps == 12.5);
    CHECK(parse_preset("mi300x") == preset::mi300x);
    CHECK(to_string(preset::h200) == "h200");
}

TEST_CASE("ranks are server-major") {
    const topology t = make_topology(3, 4);
    CHECK(t.ranks() == 12);
    CHECK(t.rank_of(2, 1) == 9);
    CHECK(t.server_of(9) == 2);
    CHECK(t.local_of(9) == 1);
    CHECK(t.same_server(4, 7));
    CHECK_FALSE(t.same_server(3, 4));
}

TEST_CASE("any positive size is accepted, bad values are named") {
    CHECK(make_topology(1, 1).ranks() == 1);
    CHECK(make_topology(1000, 1).ranks() == 1000);
    CHECK_THROWS_WITH(make_topology(0, 8), Catch::Contains("servers must be at least 1, got 0"));
    CHECK_THROWS_WITH(make_topology(4, -2), Catch::Contains("gpus_per_server must be at least 1, got -2"));
    CHECK_THROWS_WITH(make_topology(1 << 20, 1 << 20), Catch::Contains("does not fit"));
    topology t = make_topology(2, 2);
    t.scale_out_gbps = 0;
    CHECK_THROWS_WITH(validate(t), Catch::Contains("scale_out_gbps must be positive"));
    t = make_topology(2, 2);
    t.alpha_up_us = -1;
    CHECK_THROWS_WITH(validate(t), Catch::Contains("alpha_up_us must be non-negative and finite, got -1"));
    t.alpha_up_us = -1e300; // a few significant digits, not std::to_string's 300
    CHECK_THROWS_WITH(validate(t), Catch::Contains("got -1e+300"));
    t.alpha_up_us = -0.1; // as many as it takes to read back the same number
    CHECK_THROWS_WITH(validate(t), Catch::Contains("got -0.1"));
    t.alpha_up_us = -1.0000001;
    CHECK_THROWS_WITH(validate(t), Catch::Contains("got -1.0000001"));
    CHECK_THROWS_WITH(parse_preset("a100"), Catch::Contains("unknown preset 'a100'"));
}
