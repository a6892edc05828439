#include <catch2/catch.hpp>

#include <fast/workload.hpp>

using namespace fast;

TEST_CASE("workload specs parse, and bad ones are named") {
    CHECK(parse_workload("uniform").kind == workload_kind::uniform);
    const workload_spec z = parse_workload("zipf:1.2");
    CHECK(z.kind == workload_kind::zipf);
    CHECK(z.zipf_s == 1.2);
    CHECK(parse_workload("zipf").zipf_s == 0.8);
    const workload_spec m = parse_workload("moe:tokens=128,topk=4,lognormal=1.5,token_bytes=8K");
    CHECK(m.moe.tokens_per_gpu == 128);
    CHECK(m.moe.top_k == 4);
    CHECK(m.moe.law == popularity::lognormal);
    CHECK(m.moe.skew == 1.5);
    CHECK(m.moe.token_bytes == 8192);
    const workload_spec f = parse_workload("file:/tmp/a@b.txt@7");
    CHECK(f.path == "/tmp/a@b.txt");
    CHECK(f.index == 7);
    CHECK(f.indexed);
    const workload_spec at = parse_workload("file:a@b/m.txt"); // '@' without digits after it: a path
    CHECK(at.path == "a@b/m.txt");
    CHECK(at.index == 0);
    CHECK(!at.indexed);
    CHECK(parse_workload("file:m.txt@x").path == "m.txt@x");
    CHECK_THROWS_WITH(parse_workload("gauss"), Catch::Contains("unknown workload 'gauss'"));
    CHECK_THROWS_WITH(parse_workload("zipf:abc"), Catch::Contains("'abc' is not a number"));
    CHECK_THROWS_WITH(parse_workload("zipf:-1"), Catch::Contains("must be non-negative"));
    CHECK_THROWS_WITH(parse_workload("moe:experts=3"), Catch::Contains("unknown moe parameter 'experts'"));
    CHECK_THROWS_WITH(parse_workload("moe:topk"), Catch::Contains("'topk' is not key=value"));
    CHECK_THROWS_WITH(parse_workload("uniform:3"), Catch::Contains("uniform takes no parameters"));
    CHECK_THROWS_WITH(parse_workload("zipf:"), Catch::Contains("zipf exponent: '' is not a number"));
    CHECK_THROWS_WITH(parse_workload("moe:topk=0"), Catch::Contains("topk must be between 1 and 1000000"));
    CHECK_THROWS_WITH(parse_workload("moe:tokens=9223372036854775807"),
                      Catch::Contains("tokens = 9223372036854775807 is above the limit of 4194304"));
    CHECK_THROWS_WITH(parse_workload("file:"), Catch::Contains("file needs a path"));
}

TEST_CASE("uniform: every off-diagonal pair equal") {
    const topology t = make_topology(2, 4);
    const traffic_matrix m = make_uniform(t, 7000);
    CHECK(m(0, 0) == 0);
    CHECK(m(3, 5) == 1000);
    CHECK(m.row(2).sum() == 7000);
    CHECK(make_uniform(make_topology(1, 1), 100).sum() == 0);
}

TEST_CASE("zipf: seeded, scaled to the requested bytes per GPU, skewed") {
    const topology t = make_topology(4, 8);
    const traffic_matrix a = make_zipf(t, 0.8, 1 << 28, 1);
    const traffic_matrix b = make_zipf(t, 0.8, 1 << 28, 1);
    const traffic_matrix c = make_zipf(t, 0.8, 1 << 28, 2);
    CHECK(a == b);
    CHECK(a != c);
    CHECK(a.diagonal().sum() == 0);
    const double mean_send = static_cast<double>(a.sum()) / 32;
    CHECK(mean_send == Approx(1 << 28).epsilon(1e-6));
    CHECK(a.maxCoeff() > 3 * (a.sum() / (32 * 31))); // a heavy tail
    CHECK(a.maxCoeff() <= 1000 * (a.array() > 0).select(a, a.maxCoeff()).minCoeff() + 1000);
    CHECK_THROWS_WITH(make_zipf(t, -1, 10, 1), Catch::Contains("non-negative"));
    CHECK_THROWS_WITH(make_zipf(t, 1, -10, 1), Catch::Contains("bytes per GPU must be non-negative"));
}

TEST_CASE("moe: every GPU routes tokens * topk tokens, the popular experts receive more") {
    const topology t = make_topology(2, 4);
    moe_options o;
    o.tokens_per_gpu = 1000;
    o.top_k = 2;
    o.skew = 1.2;
    const traffic_matrix m = make_moe(t, o, 16000, 5);
    for (int i = 0; i < 8; ++i) CHECK(m.row(i).sum() == 16000); // 8 bytes per routed token
    const auto cols = m.colwise().sum();
    CHECK(cols.maxCoeff() > 2 * cols.minCoeff());
    CHECK(m == make_moe(t, o, 16000, 5));
    o.law = popularity::lognormal;
    o.skew = 3.0;
    o.top_k = 8; // all experts: extreme skew must still pick distinct ones
    const traffic_matrix all = make_moe(t, o, 8000, 1);
    CHECK((all.array() == all(0, 0)).all());
    o.top_k = 9;
    CHECK_THROWS_WITH(make_moe(t, o, 100, 1), Catch::Contains("topk = 9 must be between 1 and"));
    // Bounded work: at most moe_max_routed draws per GPU; tokens x topk is checked, never wraps.
    o.top_k = 2;
    o.tokens_per_gpu = moe_max_routed / 2 + 1;
    CHECK_THROWS_WITH(make_moe(t, o, 100, 1), Catch::Contains("tokens x topk = 2097153 x 2 is above"));
    o.tokens_per_gpu = INT64_MAX;
    CHECK_THROWS_WITH(make_moe(t, o, 100, 1), Catch::Contains("moe tokens x topk"));
}

TEST_CASE("make_workload dispatches on the spec") {
    const topology t = make_topology(2, 2);
    CHECK(make_workload(parse_workload("uniform"), t, 300, 0)(0, 1) == 100);
    CHECK_THROWS_WITH(make_workload(parse_workload("file:/nonexistent"), t, 1, 0),
                      Catch::Contains("cannot open matrix file"));
}
